//! The store that several instances share (issue "Scale out"): a batch
//! of a taken-over owner is refused whole (rule D13), and the PostgreSQL
//! housekeeping and plans a cluster relies on.

use super::ORG;
use crate::common::{self, execute, scalar, Db, TestApp};
use server::store::{NewSession, StoreError, Write};

/// Makes the org's lease lapse now, as if its owner had stopped renewing.
async fn lapse(url: &str) {
    execute(url, &format!("UPDATE org_leases SET expires_at = 0 WHERE org_id = '{ORG}'")).await;
}

fn session(id: &str) -> Write {
    Write::OpenSession(NewSession {
        id: id.into(),
        org_id: ORG.into(),
        robot_id: "uk-pick-01".into(),
        skill: "pick-place".into(),
        pop: "uk-london".into(),
        raised_at: 1,
        client_id: None,
        booking_id: None,
        planned_end_at: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_a_batch_of_a_taken_over_owner_is_refused_and_writes_nothing() {
    let Some(app) = TestApp::spawn(Db::Postgres).await else { return };
    let (store, url) = (app.running().store.clone(), app.database_url());
    app.running().engine.stop().await;
    lapse(&url).await;
    let old = store.take_lease(ORG, "a/1", 60_000, 0).await.unwrap().expect("a lapsed lease is taken");
    // Held and renewed: nobody else takes it.
    assert_eq!(store.take_lease(ORG, "b/1", 3_000, 0).await.unwrap(), None);
    assert!(store.renew_lease(&old, 3_000).await.unwrap());
    // It lapses (the owner was paused) and another instance takes over.
    lapse(&url).await;
    let new = store.take_lease(ORG, "b/1", 60_000, 0).await.unwrap().expect("taken over");
    assert!(new.epoch > old.epoch);
    // The old owner wakes up: its renewal and its batch are refused, and the batch wrote nothing.
    assert!(!store.renew_lease(&old, 3_000).await.unwrap());
    assert!(matches!(store.commit(&old, vec![session("ses-stale")]).await, Err(StoreError::Fenced)));
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE id = 'ses-stale'").await, 0);
    store.commit(&new, vec![session("ses-owner")]).await.unwrap();
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE id = 'ses-owner'").await, 1);
    // An ask of the same run's that the network held, sent before it took
    // this lease (it had stepped down from none), takes nothing: a new
    // epoch would fence the lease it holds.
    assert_eq!(store.take_lease(ORG, "b/1", 3_000, 0).await.unwrap(), None, "a run's late ask took the lease it holds");
    assert!(store.renew_lease(&new, 60_000).await.unwrap(), "the lease it holds was fenced by its own ask");
    // Once it has stepped down from this lease (its clock said it lapsed),
    // it takes it back at once, and its in-flight batch is fenced.
    let again = store.take_lease(ORG, "b/1", 60_000, new.epoch).await.unwrap().expect("a run takes back the lease it stepped down from");
    assert!(again.epoch > new.epoch);
    assert!(matches!(store.commit(&new, vec![session("ses-older")]).await, Err(StoreError::Fenced)));
    // And an ask of that step-down's that the network held takes nothing from the lease taken since.
    assert_eq!(store.take_lease(ORG, "b/1", 3_000, new.epoch).await.unwrap(), None, "a late ask of the step-down took the lease taken since");
    assert!(store.renew_lease(&again, 60_000).await.unwrap(), "the lease taken back was fenced by a late ask of its step-down");
    // A later run of the same instance (another boot) takes its own lease at once.
    let restarted = store.take_lease(ORG, "b/2", 3_000, 0).await.unwrap().expect("the same instance, restarted");
    assert!(restarted.epoch > again.epoch);
    assert!(matches!(store.commit(&again, vec![session("ses-older")]).await, Err(StoreError::Fenced)));
    app.finish().await;
}

/// Where PostgreSQL's autovacuum is off (as on this project's machines),
/// the server vacuums and analyzes tables itself, as autovacuum would:
/// those with more changes than 50 + 2 % of their rows. Without statistics
/// the plans each connection caches while a table is nearly empty scan it
/// whole, and every cycle cost more than the last (issue "Engine v3").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_are_vacuumed_and_analyzed_as_autovacuum_would_where_it_is_off() {
    let Some(app) = TestApp::spawn(Db::Postgres).await else { return };
    let (store, url) = (app.running().store.clone(), app.database_url());
    let autovacuum_off = scalar(&url, "SELECT (current_setting('autovacuum') = 'off')::int::bigint").await == 1;
    if !autovacuum_off {
        assert!(!store.maintain().await.unwrap(), "autovacuum does it");
        return app.finish().await;
    }
    execute(&url, "CREATE TABLE upkeep_busy (n INT)").await;
    execute(&url, "CREATE TABLE upkeep_quiet (n INT)").await;
    execute(&url, "INSERT INTO upkeep_busy SELECT generate_series(1, 500)").await;
    execute(&url, "INSERT INTO upkeep_quiet SELECT generate_series(1, 10)").await;
    // The statistics hear of the rows once each backend reports them (the
    // server's own upkeep may analyze the busy table first).
    let heard = "SELECT COUNT(*) FROM pg_stat_user_tables WHERE (relname = 'upkeep_busy' AND (n_mod_since_analyze = 500 OR last_analyze IS NOT NULL)) \
                 OR (relname = 'upkeep_quiet' AND n_mod_since_analyze = 10)";
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while scalar(&url, heard).await < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the statistics hear of both tables' rows");
    // (The server's own round may hold the upkeep's lock at this moment,
    // having looked before the rows were heard of: then the next does it.)
    let kept = |table: &str| format!("SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname = '{table}' AND last_vacuum IS NOT NULL AND last_analyze IS NOT NULL");
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while {
            assert!(store.maintain().await.unwrap());
            scalar(&url, &kept("upkeep_busy")).await == 0
        } {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("500 changes: vacuumed and analyzed");
    assert_eq!(scalar(&url, &kept("upkeep_quiet")).await, 0, "10 changes: below the threshold, left alone");
    app.finish().await;
}

/// Every statement of a batch reaches its rows by key: the batch function
/// never plans a sequential scan (migration 0024). A later migration that
/// re-creates the function drops the setting unless it says it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_function_never_plans_a_sequential_scan() {
    let Some(app) = TestApp::spawn(Db::Postgres).await else { return };
    let config = "SELECT COUNT(*) FROM pg_proc WHERE proname = 'clutchcall_commit_batch' AND 'enable_seqscan=off' = ANY(proconfig)";
    assert_eq!(scalar(&app.database_url(), config).await, 1);
    app.finish().await;
}

/// A session named by its id is read through its key, however its org's
/// sessions are indexed (migration 0028): no index of sessions that leads
/// with the org can serve a read that names no state and no time, and the
/// plan a connection keeps for such a read (made once, often while the
/// table is nearly empty) takes the primary key. The board's day, the live
/// board and a client's page, with a client or of calls without one, take
/// the indexes made for them (none reads every org's sessions). The reads
/// planned are the store's own texts (`store::planned_reads`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_named_by_its_id_is_read_by_its_key() {
    let Some(app) = TestApp::spawn(Db::Postgres).await else { return };
    let url = app.database_url();
    let open_to_any_read = "SELECT COUNT(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
                            WHERE i.indrelid = 'sessions'::regclass AND a.attname = 'org_id' AND i.indpred IS NULL";
    assert_eq!(scalar(&url, open_to_any_read).await, 0, "an index of sessions led by the org alone");
    use server::store::planned_reads::{client_sessions_read, ANSWER_SPEED, LIVE_BOARD, SESSION_BY_ID};
    let reads: [(&str, &[&str], &[&str]); 3] = [
        (SESSION_BY_ID.as_str(), &["org", "session"], &["sessions_pkey"]),
        // The board's day.
        (ANSWER_SPEED, &["org", "0", "reason", "20000"], &["sessions_by_org_day"]),
        // The live board: the org's open sessions, in either index of them
        // (rule D09's repeats the read's condition).
        (LIVE_BOARD.as_str(), &["org"], &["sessions_open_by_org", "sessions_one_open_per_robot"]),
    ];
    let mut plans = Vec::new();
    for (read, arguments, indexes) in reads {
        plans.push((read, common::plan(&url, read, arguments).await, indexes));
    }
    // A client's page, calls without a client, and with one (the client
    // index, of clients' sessions only). (`$2 IS NULL` names no type: typed.)
    let types = ["text", "text", "bigint"];
    let without_client = client_sessions_read(false);
    plans.push((without_client, common::plan_typed(&url, without_client, &types, &["'org'", "NULL", "100"]).await, &["sessions_by_org_day"]));
    let with_client = client_sessions_read(true);
    plans.push((with_client, common::plan_typed(&url, with_client, &types, &["'org'", "'client'", "100"]).await, &["sessions_by_client"]));
    for (read, plan, indexes) in plans {
        // (A whole scan, or a walk of an index not led by the org, reads every org's sessions.)
        let through_one = indexes.iter().any(|index| plan.contains(&format!(" {index} ")));
        assert!(through_one && !plan.contains("Seq Scan on sessions"), "{read} should read sessions through one of {indexes:?}:\n{plan}");
    }
    app.finish().await;
}
