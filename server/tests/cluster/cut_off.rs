//! An instance cut off from the database (issue "Scale out": "its
//! PostgreSQL connection gone", "a host gone"): nothing tells PostgreSQL or
//! the instance, as a network that drops packets does not. The org still
//! moves to a survivor, and the cut-off instance neither holds rows nor
//! claims the org past its lease.

use super::{instance, owned_by, owner, raise, scalar, Cluster, ORG};
use crate::common::{self, proxy::Proxy};
use reqwest::StatusCode;
use sqlx::Connection;
use std::time::{Duration, Instant};

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
/// answers without the database, saying so), and
/// answers calls (the one whose batch was in flight, and the next) with a
/// 503 of its own rather than holding them until the request's timeout. Mended, it finds the org dispatched elsewhere, and
/// nothing of its own was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_an_owner_cut_off_from_the_database_steps_down_when_its_lease_ends() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    let (proxy, through) = Proxy::to(&url).await;
    let dir = tempfile::tempdir().unwrap();
    let metrics: Vec<u16> = (0..2).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()).collect();
    let first = instance(&through, None, dir.path(), "first", metrics[0], &[]).await;
    let second = instance(&url, None, dir.path(), "second", metrics[1], &[]).await;
    let cluster = Cluster { servers: vec![first, second], metrics, url: url.clone(), name, dir, settings: Vec::new() };
    assert!(owner(&url).await.starts_with("first/"));
    assert!(cluster.dispatching(0).await);
    // The robot's token known to the first before the cut (its registry's cache).
    let beat = common::http().post(format!("{}/v1/robots/uk-pick-01/heartbeat", cluster.base(0)));
    let beat = beat.bearer_auth(server::seed::demo_robot_token("uk-pick-01")).send().await.unwrap();
    assert_eq!(beat.status(), StatusCode::OK);

    proxy.cut();
    // A call raised as the network went: its batch is sent and never answered.
    let base = cluster.base(0).to_string();
    let in_flight = tokio::spawn(async move { raise(&base, "uk-pick-01").await });
    owned_by(&url, "second").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.dispatching(0).await {
        assert!(Instant::now() < deadline, "the cut-off owner still claims the org");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let scraped = common::http().get(format!("http://127.0.0.1:{}/metrics", cluster.metrics[0])).send().await.unwrap();
    assert!(scraped.text().await.unwrap().contains("clutchcall_scrape_read_database 0"), "the scrape did not say its org gauges are old");
    // Both calls answered by its engine (the one in flight when it stepped
    // down, the next while the database is unreachable), not by the
    // request's timeout, which answers 503 with no body.
    for refused in [in_flight.await.unwrap(), raise(cluster.base(0), "uk-pick-01").await] {
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = refused.text().await.unwrap();
        assert!(body.contains("\"unavailable\""), "{body:?}");
    }

    proxy.mend();
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
