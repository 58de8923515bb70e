//! An instance cut off from the database or from NATS (issue "Scale out":
//! "its PostgreSQL connection gone", "a host gone", "a NATS outage at run
//! time"), by a network that goes quiet: nothing tells either end. The org
//! still moves to a survivor when its owner loses the database, and the
//! cut-off instance neither holds rows nor claims the org past its lease;
//! an owner that loses NATS keeps its org, and the others answer for it.
//! (And an org its new owner cannot load while the database answers.)

use super::{heartbeat, instance, nats_url, owned_by, owner, raise, until, Cluster, ORG};
use crate::common::{self, execute, proxy::Proxy, scalar};
use reqwest::StatusCode;
use sqlx::Connection;
use std::time::{Duration, Instant};

/// "first" and "second" on the scratch database `name` (at `url`), each
/// reaching the database and NATS at its own addresses (`(database,
/// nats)`): through a forwarder or not. The first starts first and takes
/// the demo org.
async fn first_and_second(url: &str, name: String, first: (&str, Option<&str>), second: (&str, Option<&str>)) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let metrics: Vec<u16> = (0..2).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()).collect();
    let first = instance(first.0, first.1, dir.path(), "first", metrics[0], &[]).await;
    let second = instance(second.0, second.1, dir.path(), "second", metrics[1], &[]).await;
    Cluster { servers: vec![first, second], metrics, url: url.to_string(), name, dir, settings: Vec::new() }
}

/// A call raised for the demo robot at `base` is answered 503
/// `unavailable` by the instance itself within 10 s (the request's own
/// timeout, at 30 s, answers with no body).
async fn answered_unavailable(base: &str) {
    let raised = Instant::now();
    let refused = raise(base, "uk-pick-01").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = refused.text().await.unwrap();
    assert!(body.contains("\"unavailable\""), "held until the request's timeout ({:?}): {body:?}", raised.elapsed());
    assert!(raised.elapsed() < Duration::from_secs(10), "answered after {:?}", raised.elapsed());
}

/// Waits (about 20 s) until a call raised for the demo robot at `base` is
/// taken (answered 2xx: offered or queued); `never` says what did not happen.
async fn until_a_call_is_taken(base: &str, never: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !raise(base, "uk-pick-01").await.status().is_success() {
        assert!(Instant::now() < deadline, "{never}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A transaction left open by an instance that vanished in the middle of
/// it holds its rows no longer than a lease (`ABANDONED_TRANSACTION_AFTER`):
/// another instance's write of the same row goes through. Without the
/// server's connection options it waits as long as the dead transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_left_open_by_a_vanished_instance_holds_its_rows_no_longer_than_a_lease() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    let mut survivor = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE robots_like (id TEXT PRIMARY KEY, last_heartbeat_at BIGINT NOT NULL)").execute(&mut survivor).await.unwrap();
    sqlx::query("INSERT INTO robots_like VALUES ('uk-pick-01', 0)").execute(&mut survivor).await.unwrap();

    let (proxy, through) = Proxy::to(&url).await;
    let mut vanishing = sqlx::PgConnection::connect_with(&server::store::pg_options(&through).unwrap()).await.unwrap();
    // As a heartbeat group does: the robot's row locked, then its network cut.
    sqlx::query("BEGIN").execute(&mut vanishing).await.unwrap();
    sqlx::query("SELECT id FROM robots_like WHERE id = 'uk-pick-01' FOR NO KEY UPDATE").execute(&mut vanishing).await.unwrap();
    proxy.cut();

    let write = sqlx::query("UPDATE robots_like SET last_heartbeat_at = 1 WHERE id = 'uk-pick-01'").execute(&mut survivor);
    let bound = server::store::ABANDONED_TRANSACTION_AFTER * 5;
    let written = tokio::time::timeout(bound, write).await;
    assert!(matches!(written, Ok(Ok(_))), "the vanished transaction still held the row after {bound:?}: {written:?}");
    drop(survivor);
    drop(vanishing);
    drop(proxy);
    common::drop_pg_database(&name).await;
}

/// The owner of the demo org is cut off from the database (no NATS: each
/// instance answers for the orgs it holds). The survivor takes the org; the
/// cut-off owner stops claiming it when its lease ends (`/metrics`, which
/// answers without the database, saying so), and answers the next call
/// and a heartbeat with a 503 of its own rather than holding them until the
/// request's timeout; the call whose batch was in flight is answered as that batch
/// went once the database answers. Mended, it finds the org dispatched
/// elsewhere, and nothing of its own was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_an_owner_cut_off_from_the_database_steps_down_when_its_lease_ends() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    let (proxy, through) = Proxy::to(&url).await;
    let cluster = first_and_second(&url, name, (&through, None), (&url, None)).await;
    assert!(owner(&url).await.starts_with("first/"));
    assert!(cluster.dispatching(0).await);
    // The robot's token known to the first before the cut (its registry's cache).
    assert_eq!(heartbeat(cluster.base(0), &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);

    proxy.cut();
    // A call raised as the network went: its batch is sent and not answered.
    let base = cluster.base(0).to_string();
    let in_flight = tokio::spawn(async move { raise(&base, "uk-pick-01").await });
    owned_by(&url, "second").await;
    until(|| async { !cluster.dispatching(0).await }, "the cut-off owner gives up its claim on the org").await;
    assert!(cluster.scrape(0).await.contains("clutchcall_scrape_read_database 0"), "the scrape did not say its org gauges are old");
    // The next call is answered by its engine (the database unreachable),
    // not by the request's timeout, which answers 503 with no body.
    answered_unavailable(cluster.base(0)).await;
    // So is a heartbeat, when its group is given up.
    let beat = common::http().post(format!("{}/v1/robots/uk-pick-01/heartbeat", cluster.base(0)));
    let beat = beat.bearer_auth(server::seed::demo_robot_token("uk-pick-01")).send().await.unwrap();
    assert_eq!(beat.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(beat.headers()["retry-after"], "10", "an unstored heartbeat is retried by the agent's next, not every second");
    let body = beat.text().await.unwrap();
    assert!(body.contains("\"unavailable\""), "{body:?}");

    proxy.mend();
    // The call in flight is answered as its batch went once the database
    // answers it: refused by the epoch, the org being the second's by then.
    // (Or unavailable, before the mend: had it reached the dispatcher while
    // a renewal was hanging, it waited for the step-down and was refused by
    // the ask after it. Which of the two cannot be told from here, so this
    // test does not pin what a batch in flight is told; it pins that the
    // dispatcher does not wait for it, above.)
    let in_flight = in_flight.await.unwrap();
    assert_eq!(in_flight.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = in_flight.text().await.unwrap();
    assert!(body.contains("\"dispatched_elsewhere\"") || body.contains("\"unavailable\""), "{body:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let res = raise(cluster.base(0), "uk-pick-01").await;
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        if res.text().await.unwrap().contains("dispatched_elsewhere") {
            break;
        }
        assert!(Instant::now() < deadline, "the mended instance never learned who dispatches the org");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(scalar(&url, &format!("SELECT COUNT(*) FROM sessions WHERE org_id = '{ORG}'")).await, 0, "nothing of the cut-off owner's was written");
    assert!(raise(cluster.base(1), "uk-pick-01").await.status().is_success());
    assert!(owner(&url).await.starts_with("second/"));
    cluster.finish().await;
}

/// The owner's NATS goes quiet (its connection through a forwarder that is
/// cut). It keeps dispatching its org for calls raised on it; a call raised
/// on the other instance, forwarded into the silence, is answered 503
/// `unavailable` when the forward's wait ends, not held; mended, forwarding
/// works again with neither instance restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_whose_nats_goes_quiet_keeps_its_org_and_the_others_answer_for_it() {
    let Some(nats) = nats_url().await else { return };
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    let (proxy, through) = Proxy::to(&nats).await;
    let cluster = first_and_second(&url, name, (&url, Some(&through)), (&url, Some(&nats))).await;
    assert!(owner(&url).await.starts_with("first/"));
    // Nobody is ready: each call is acknowledged queued (202) by the owner.
    assert_eq!(raise(cluster.base(1), "uk-pick-01").await.status(), StatusCode::ACCEPTED, "forwarded before the cut");

    proxy.cut();
    assert_eq!(raise(cluster.base(0), "ue-pick-02").await.status(), StatusCode::ACCEPTED, "raised on the owner itself");
    let forwarded = raise(cluster.base(1), "uw-weld-01").await;
    assert_eq!(forwarded.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Told when to try again, as a degraded instance must.
    let retry_after = forwarded.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    assert!(retry_after.is_some_and(|s| s >= 1), "{:?}", forwarded.headers());
    let body = forwarded.text().await.unwrap();
    assert!(body.contains("\"unavailable\""), "{body:?}");

    proxy.mend();
    assert_eq!(raise(cluster.base(1), "uk-insp-01").await.status(), StatusCode::ACCEPTED, "forwarded once mended");
    assert!(owner(&url).await.starts_with("first/"), "the org never moved");
    cluster.finish().await;
}

/// The instance that takes the org over loses the database while it loads
/// the org: its first read is held by a table lock until its network is
/// cut, so the read's answer never reaches it. It gives the org up when its
/// lease ends, by its own clock, and answers a call raised meanwhile 503
/// `unavailable` of its own rather than holding it until the request's
/// timeout (which answers 503 with no body). Mended, it takes the org again
/// and dispatches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_an_instance_cut_off_while_it_loads_the_org_answers_when_its_lease_ends() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    let (proxy, through) = Proxy::to(&url).await;
    let mut cluster = first_and_second(&url, name, (&url, None), (&through, None)).await;
    assert!(owner(&url).await.starts_with("first/"));
    // The robot's token known to the second before the cut (its registry's cache).
    assert_eq!(heartbeat(cluster.base(1), &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);

    // The load's first read (the org's link floors) waits for this lock.
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("LOCK TABLE org_link_floors IN ACCESS EXCLUSIVE MODE").execute(&mut holder).await.unwrap();
    cluster.servers[0].child.start_kill().unwrap();
    owned_by(&url, "second").await;
    let loading = "SELECT COUNT(*) FROM pg_locks WHERE relation = 'org_link_floors'::regclass AND NOT granted \
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";
    let deadline = Instant::now() + Duration::from_secs(20);
    while scalar(&url, loading).await == 0 {
        assert!(Instant::now() < deadline, "the second never began loading the org");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.cut();
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();

    answered_unavailable(cluster.base(1)).await;

    proxy.mend();
    until_a_call_is_taken(cluster.base(1), "the mended instance never dispatched the org").await;
    assert!(cluster.dispatching(1).await);
    cluster.finish().await;
}

/// The instance that takes the org over cannot load it while the database
/// answers (a table the load reads renamed away, as a build that reads
/// another schema would find it). It gives the lease up after failing for
/// a lease, so another instance may take the org, and answers a call
/// raised meanwhile 503 `unavailable` rather than holding it until the
/// request's timeout. With the table back, it takes the org again and
/// dispatches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_an_instance_that_cannot_load_the_org_gives_it_up_and_answers() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    let mut cluster = first_and_second(&url, name, (&url, None), (&url, None)).await;
    assert!(owner(&url).await.starts_with("first/"));
    // The robot's token known to the second (its registry's cache).
    assert_eq!(heartbeat(cluster.base(1), &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);

    execute(&url, "ALTER TABLE org_link_floors RENAME TO org_link_floors_away").await;
    cluster.servers[0].child.start_kill().unwrap();
    owned_by(&url, "second").await;
    answered_unavailable(cluster.base(1)).await;
    // Given up (`release_lease`: the lease ends at 0), for a take interval
    // each time before the second asks again.
    let released = format!("SELECT COUNT(*) FROM org_leases WHERE org_id = '{ORG}' AND expires_at = 0");
    let deadline = Instant::now() + Duration::from_secs(20);
    while scalar(&url, &released).await == 0 {
        assert!(Instant::now() < deadline, "the second never gave the lease of an org it could not load up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    execute(&url, "ALTER TABLE org_link_floors_away RENAME TO org_link_floors").await;
    until_a_call_is_taken(cluster.base(1), "the second never dispatched the org once it could load it").await;
    cluster.finish().await;
}

/// An instance that starts while its org cannot be loaded (the same
/// renamed table) still starts: its engine goes on without the org, whose
/// calls are answered 503 `unavailable` until the org loads. (Its start
/// waited for every org's load, and so never listened.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_starts_while_its_org_cannot_be_loaded() {
    let Some(mut cluster) = Cluster::start(None, 1).await else { return };
    let url = cluster.url.clone();
    execute(&url, "ALTER TABLE org_link_floors RENAME TO org_link_floors_away").await;
    cluster.servers[0].child.start_kill().unwrap();
    let _ = cluster.servers[0].child.wait().await;
    // (It takes its own lease back at once: the same instance, another boot.)
    cluster.restart(0, None).await;
    answered_unavailable(cluster.base(0)).await;

    execute(&url, "ALTER TABLE org_link_floors_away RENAME TO org_link_floors").await;
    until_a_call_is_taken(cluster.base(0), "the org never loaded once it could").await;
    cluster.finish().await;
}
