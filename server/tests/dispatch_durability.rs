//! The ACD under load and across crashes, on both databases: no call is
//! lost or served twice, and no operator ever holds two offers.

mod common;

use domain::models::{LifecycleState, PresenceState};
use common::{execute, scalar, TestApp};
use reqwest::StatusCode;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

const ORG: &str = "org-northstar";
const LOAD_ORG: &str = server::seed::LOAD_ORG_ID;

both_backends!(d05_d06_500_simultaneous_calls_against_100_operators_are_each_served_exactly_once, |app: TestApp| async move {
    app.running().store.seed(&server::seed::load_org(100, 500)).await.unwrap();
    for i in 0..100 {
        app.engine().operator_ready(LOAD_ORG, &format!("u-load-{i:03}"), true).await.unwrap();
    }

    let client = common::http();
    let calls: Vec<_> = (0..500)
        .map(|i| {
            let client = client.clone();
            let url = app.url("/v1/sessions");
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .bearer_auth(server::seed::load_robot_token(i))
                    .json(&serde_json::json!({ "robotId": format!("lr-{i:03}") }))
                    .send()
                    .await
                    .expect("request");
                let status = res.status();
                (status, res.json::<serde_json::Value>().await.expect("json"))
            })
        })
        .collect();
    let mut matched_operators = HashSet::new();
    let mut sessions = HashSet::new();
    let (mut matched, mut queued) = (0, 0);
    for call in calls {
        let (status, body) = call.await.unwrap();
        sessions.insert(body["sessionId"].as_str().expect("session id").to_string());
        match status {
            StatusCode::CREATED => {
                matched += 1;
                assert!(matched_operators.insert(body["operator"]["id"].as_str().unwrap().to_string()), "an operator got two offers: {body}");
            }
            StatusCode::ACCEPTED => queued += 1,
            other => panic!("call ended {other}: {body}"),
        }
    }
    assert_eq!((matched, queued), (100, 400), "every call ends matched or queued");
    assert_eq!(sessions.len(), 500);

    // Operators take their calls, finish them, and are ready again: the
    // queue drains, each call offered and accepted exactly once.
    let store = &app.running().store;
    let mut accepted: HashMap<String, String> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let offers = store.open_offers().await.unwrap();
        let per_operator: HashSet<&str> = offers.iter().map(|o| o.operator_id.as_str()).collect();
        assert_eq!(per_operator.len(), offers.len(), "no operator holds two open offers");
        if offers.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "queue did not drain");
        for offer in offers {
            app.engine().accept(LOAD_ORG, &offer.operator_id, &offer.session_id).await.unwrap();
            assert!(accepted.insert(offer.session_id.clone(), offer.operator_id.clone()).is_none(), "served twice");
            app.engine().finish_session(LOAD_ORG, &offer.session_id, None, LifecycleState::Completed, "done").await.unwrap();
            app.engine().operator_ready(LOAD_ORG, &offer.operator_id, true).await.unwrap();
        }
    }
    assert_eq!(accepted.len(), 500, "every queued call was served");
    assert_eq!(accepted.keys().cloned().collect::<HashSet<_>>(), sessions);
    let url = app.database_url();
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM offers WHERE org_id = 'org-load' AND status = 'accepted'").await, 500);
    assert_eq!(
        scalar(&url, "SELECT COUNT(*) FROM (SELECT session_id FROM offers WHERE org_id = 'org-load' GROUP BY session_id HAVING COUNT(*) > 1) twice").await,
        0,
        "no call was ever offered twice"
    );
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE org_id = 'org-load' AND lifecycle = 'COMPLETED'").await, 500);
    app.finish().await;
});

both_backends!(d07_open_offers_and_queued_calls_survive_a_crash, |mut app: TestApp| async move {
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let (status, offered) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, queued) = app.raise("uw-weld-01").await;
    assert_eq!(status, StatusCode::ACCEPTED);

    app.crash_and_restart().await;

    // The offer still rings (inside its 30 s window) once Carla is back.
    let offers = app.running().store.open_offers().await.unwrap();
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].session_id, offered["sessionId"].as_str().unwrap());
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let carla = app.engine().presences(ORG).await.into_iter().find(|p| p.operator_id == "u-carla").unwrap();
    assert_eq!(carla.state, PresenceState::Ringing);
    assert_eq!(carla.current_call.as_deref(), offered["sessionId"].as_str());
    app.engine().accept(ORG, "u-carla", offered["sessionId"].as_str().unwrap()).await.unwrap();

    // The queued call is served as soon as a certified operator is ready.
    app.engine().operator_ready(ORG, "u-jamal", true).await.unwrap();
    let offers = app.running().store.open_offers().await.unwrap();
    assert_eq!(offers.len(), 1);
    assert_eq!((offers[0].operator_id.as_str(), offers[0].session_id.as_str()), ("u-jamal", queued["sessionId"].as_str().unwrap()));
    app.finish().await;
});

both_backends_with!(d07_offers_that_went_stale_while_down_are_re_dispatched, |c: &mut server::config::Config| c.offer_window_ms = 600, |mut app: TestApp| async move {
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let (_, first) = app.raise("ue-pick-01").await;
    let (_, second) = app.raise("ue-pick-02").await; // queued: Carla is ringing
    let first = first["sessionId"].as_str().unwrap().to_string();
    let second = second["sessionId"].as_str().unwrap().to_string();
    let expires_at = app.running().store.open_offers().await.unwrap().into_iter().find(|o| o.session_id == first).expect("Carla's offer").expires_at;
    // Crash before the sweeper can expire the offer; stay down past its window.
    if let Some(running) = app.running.take() {
        running.kill();
    }
    // Time is the input, and no server runs to signal anything: wall time
    // passes the offer's expiry (the restarted engine's clock starts at it).
    tokio::time::sleep(Duration::from_millis((expires_at + 1 - server::clock::now_ms()).max(0) as u64)).await;
    assert!(server::clock::now_ms() > expires_at);
    app.crash_and_restart().await;

    let store = &app.running().store;
    assert!(store.open_offers().await.unwrap().is_empty(), "the stale offer was closed at start");
    let triggers: Vec<String> = store.dispatch_records(ORG, &first).await.unwrap().into_iter().map(|r| r.trigger).collect();
    assert_eq!(triggers, vec!["raised", "recovered"]);
    let url = app.database_url();
    assert_eq!(scalar(&url, &format!("SELECT COUNT(*) FROM offers WHERE session_id = '{first}' AND status = 'expired'")).await, 1);

    // Back online, operators are offered the oldest call they have not had.
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let offers: HashMap<String, String> =
        app.running().store.open_offers().await.unwrap().into_iter().map(|o| (o.operator_id, o.session_id)).collect();
    assert_eq!(offers.get("u-tom"), Some(&first), "the oldest call first");
    assert_eq!(offers.get("u-carla"), Some(&second), "Carla missed the first call, so she gets the second");
    app.finish().await;
});

both_backends!(d07_a_call_left_between_two_writes_by_a_crash_is_queued_again, |mut app: TestApp| async move {
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    if let Some(running) = app.running.take() {
        running.kill();
    }
    // The decline committed, the re-dispatch never ran: no offer, no queue place.
    let url = app.database_url();
    execute(&url, &format!("UPDATE offers SET status = 'declined' WHERE session_id = '{session}'")).await;
    app.crash_and_restart().await;
    assert_eq!(scalar(&url, &format!("SELECT COUNT(*) FROM sessions WHERE id = '{session}' AND queued_at IS NOT NULL")).await, 1);
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let offers = app.running().store.open_offers().await.unwrap();
    assert_eq!(offers.len(), 1);
    assert_eq!((offers[0].operator_id.as_str(), offers[0].session_id.as_str()), ("u-tom", session.as_str()));
    app.finish().await;
});

/// Holds the database's write lock (SQLite) or the sessions table (PostgreSQL)
/// until `release`: batches wait behind it, in flight.
enum WriteLock {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl WriteLock {
    async fn take(url: &str) -> WriteLock {
        use sqlx::Connection;
        match url.starts_with("postgres") {
            true => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
                sqlx::query("LOCK TABLE sessions IN EXCLUSIVE MODE").execute(&mut conn).await.unwrap();
                WriteLock::Postgres(conn)
            }
            false => {
                let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.unwrap();
                WriteLock::Sqlite(conn)
            }
        }
    }

    async fn release(self) {
        match self {
            WriteLock::Postgres(mut conn) => drop(sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap()),
            WriteLock::Sqlite(mut conn) => drop(sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap()),
        }
    }
}

/// The org's requests decided and waiting for their commit, from `/metrics`.
fn uncommitted(org: &str) -> i64 {
    let text = server::metrics::handle().render();
    let line = format!("clutchcall_dispatch_uncommitted{{org=\"{org}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |v| v.trim().parse::<f64>().unwrap() as i64)
}

async fn until_uncommitted(org: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while uncommitted(org) != n {
        assert!(Instant::now() < deadline, "{org}: never {n} requests waiting for a commit (now {})", uncommitted(org));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// The dispatcher decides the next batch while one commits. A batch decided
// on top of one that fails is never committed: both are answered 503, neither
// is in the database, and nothing is answered before its own commit.
both_backends_with!(d11_a_batch_decided_while_the_one_before_commits_fails_with_it, |c: &mut server::config::Config| c.test_orgs = true, |app: TestApp| async move {
    server::metrics::handle();
    let copy: serde_json::Value = common::http().post(app.url("/test/orgs")).header("origin", &app.base).send().await.unwrap().json().await.unwrap();
    let org = copy["orgs"]["org-northstar"]["id"].as_str().unwrap().to_string();
    let robot = |key: &str| (copy["robots"][key]["id"].as_str().unwrap().to_string(), copy["robots"][key]["token"].as_str().unwrap().to_string());
    let (refused, refused_token) = robot("ue-pick-01");
    let (other, other_token) = robot("uw-pick-01");
    let url = app.database_url();
    match url.starts_with("postgres") {
        true => {
            execute(&url, &format!(
                "CREATE FUNCTION refuse_a_robot() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.robot_id = '{refused}' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$"
            )).await;
            execute(&url, "CREATE TRIGGER refuse_a_robot BEFORE INSERT ON sessions FOR EACH ROW EXECUTE FUNCTION refuse_a_robot()").await;
        }
        false => execute(&url, &format!(
            "CREATE TRIGGER refuse_a_robot BEFORE INSERT ON sessions WHEN NEW.robot_id = '{refused}' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )).await,
    }
    app.engine().presences(&org).await; // the org's dispatcher runs
    let raise = |robot: String, token: String| {
        let url = app.url("/v1/sessions");
        tokio::spawn(async move {
            common::http().post(url).bearer_auth(token).json(&serde_json::json!({ "robotId": robot })).send().await.unwrap().status()
        })
    };

    // PostgreSQL's dispatcher decides the second raise while the first
    // commits, on top of it. SQLite's commits on the dispatch thread
    // (engine/thread.rs), which the first commit holds: the second waits in
    // the channel, and is decided once the first has failed, on the desk
    // reloaded from the database (unless it came in the instant between
    // the first's decision and its commit: then it is decided on top of it,
    // as on PostgreSQL).
    let pipelined = url.starts_with("postgres");
    let lock = WriteLock::take(&url).await;
    let first = raise(refused.clone(), refused_token);
    until_uncommitted(&org, 1).await; // its batch waits behind the lock
    let second = raise(other.clone(), other_token.clone());
    if pipelined {
        until_uncommitted(&org, 2).await; // decided on top of it, held
    }
    assert!(!first.is_finished() && !second.is_finished(), "nothing is answered before its commit");
    lock.release().await;

    assert_eq!(first.await.unwrap(), StatusCode::SERVICE_UNAVAILABLE);
    let sessions = format!("SELECT COUNT(*) FROM sessions WHERE robot_id IN ('{refused}', '{other}')");
    match second.await.unwrap() {
        StatusCode::SERVICE_UNAVAILABLE => {
            // Decided on top of a failed batch: it failed with it.
            assert_eq!(scalar(&url, &sessions).await, 0);
            // The desk was reloaded from the database: the robot raises again.
            assert_eq!(raise(other.clone(), other_token).await.unwrap(), StatusCode::ACCEPTED);
        }
        StatusCode::ACCEPTED => assert!(!pipelined, "decided on top of a failed batch, yet committed"),
        other => panic!("the second raise was answered {other}"),
    }
    assert_eq!(scalar(&url, &sessions).await, 1);
    app.finish().await;
});
