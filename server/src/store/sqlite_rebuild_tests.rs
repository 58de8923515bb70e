//! sqlite/0026 drops `sessions` and makes it again while seven tables
//! refer to it (foreign keys on, their check deferred to the commit): a
//! database holding sessions with children of several kinds comes through
//! it with every row as it was, nothing dangling, and the references, the
//! states and the indexes checked as before.

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};
use std::str::FromStr;

/// The first version the test migrates to (the one before the rebuild).
const BEFORE: i64 = 25;

async fn pool(dir: &std::path::Path) -> SqlitePool {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.join("clutchcall.db").display()))
        .unwrap()
        .create_if_missing(true)
        .foreign_keys(true);
    // One connection: what the migration leaves on its connection is what
    // the later statements see.
    SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap()
}

/// Every row of the tables the rebuild touches or that refer to them, as text.
async fn rows(pool: &SqlitePool) -> Vec<String> {
    let mut all = Vec::new();
    for (table, columns) in [
        ("sessions", "rowid, id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, operator_region, rtt_ms, \
                      divergence_deg, velocity_scale, raised_at, queued_at, started_at, ended_at, end_reason, client_id, booking_id, planned_end_at"),
        ("offers", "rowid, id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at, status, answered_at"),
        ("activity_events", "id, session_id, kind"),
        ("dispatch_records", "id, session_id, outcome"),
        ("chat_messages", "session_id, body"),
        ("safety_transitions", "session_id, to_state"),
    ] {
        let sql = format!("SELECT json_array({columns}) FROM {table} ORDER BY 1");
        for row in sqlx::query(&sql).fetch_all(pool).await.unwrap() {
            all.push(format!("{table}: {}", row.get::<String, _>(0)));
        }
    }
    all
}

#[tokio::test]
async fn rebuilding_sessions_and_offers_keeps_every_row_and_every_reference() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(dir.path()).await;
    let all = sqlx::migrate!("./migrations/sqlite");
    let mut before = sqlx::migrate!("./migrations/sqlite");
    before.migrations = all.migrations.iter().filter(|m| m.version <= BEFORE).cloned().collect::<Vec<_>>().into();
    before.run(&pool).await.unwrap();
    for sql in [
        "INSERT INTO orgs (id, name, created_at) VALUES ('org', 'Org', 1)",
        "INSERT INTO users (id, email, display_name, password_hash, created_at) VALUES ('u-1', 'a@x', 'A', '', 1)",
        "INSERT INTO robots (id, org_id, model, site, pop, req_cert, token_hash, created_at) VALUES ('r-1', 'org', 'UR5e', 'Leeds', 'uk', 'c', 'h', 1)",
        "INSERT INTO sessions (id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, raised_at, started_at, ended_at, client_id) \
         VALUES ('s-1', 'org', 'r-1', 'pick', 'uk', 'COMPLETED', 'SAFE', 'u-1', 10, 11, 12, 'u-1')",
        "INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at, queued_at) VALUES ('s-2', 'org', 'r-1', 'pick', 'uk', 20, 20)",
        "INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at, status, answered_at) \
         VALUES ('o-1', 'org', 's-1', 'u-1', 40, 10, 25, 'accepted', 11)",
        "INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at) VALUES ('o-2', 'org', 's-2', 'u-1', 40, 20, 35)",
        "INSERT INTO activity_events (org_id, session_id, kind, at) VALUES ('org', 's-1', 'SESSION_START', 11)",
        "INSERT INTO dispatch_records (org_id, session_id, at, trigger, pool_source, outcome, candidates) VALUES ('org', 's-2', 20, 'raise', 'org', 'offered', '[]')",
        "INSERT INTO chat_messages (org_id, session_id, author_id, author_role, body, at) VALUES ('org', 's-1', 'u-1', 'operator', 'hi', 11)",
        "INSERT INTO safety_transitions (org_id, session_id, at, from_state, to_state) VALUES ('org', 's-1', 11, 'BOOT', 'SAFE')",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let kept = rows(&pool).await;

    all.run(&pool).await.unwrap();

    assert_eq!(rows(&pool).await, kept, "every row as it was, rowids included");
    let dangling = sqlx::query("PRAGMA foreign_key_check").fetch_all(&pool).await.unwrap();
    assert!(dangling.is_empty(), "{} references to nothing", dangling.len());
    let on: i64 = sqlx::query_scalar("PRAGMA foreign_keys").fetch_one(&pool).await.unwrap();
    assert_eq!(on, 1, "foreign keys are still on");
    let deferred: i64 = sqlx::query_scalar("PRAGMA defer_foreign_keys").fetch_one(&pool).await.unwrap();
    assert_eq!(deferred, 0, "and checked at each statement again");
    // The references still hold (the children point at the new tables)...
    let orphan = sqlx::query("INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at) VALUES ('o-3', 'org', 's-none', 'u-1', 1, 1, 2)");
    assert!(orphan.execute(&pool).await.is_err(), "an offer of no session");
    let held = sqlx::query("DELETE FROM sessions WHERE id = 's-1'");
    assert!(held.execute(&pool).await.is_err(), "a session its children refer to");
    // ...and so do the checks, and the indexes kept their names.
    for refused in [
        "UPDATE sessions SET lifecycle = 'LOST' WHERE id = 's-2'",
        "UPDATE sessions SET safety_state = 'FINE' WHERE id = 's-2'",
        "UPDATE offers SET status = 'maybe' WHERE id = 'o-2'",
        "INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at) VALUES ('s-3', 'org', 'r-1', 'pick', 'uk', 30)",
        "INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at) VALUES ('o-4', 'org', 's-1', 'u-1', 1, 1, 2)",
    ] {
        assert!(sqlx::query(refused).execute(&pool).await.is_err(), "{refused}");
    }
    let indexes: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('sessions', 'offers') ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        indexes,
        [
            "offers_by_session", "offers_one_open_per_operator", "offers_one_open_per_session", "sessions_by_client", "sessions_by_org_day",
            "sessions_one_open_per_robot", "sqlite_autoindex_offers_1", "sqlite_autoindex_sessions_1",
        ]
    );
}
