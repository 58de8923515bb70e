//! Caps on open sockets and running exports hold across instances (issue
//! "Scale out"): a person's tabs spread over the instances count as one,
//! and a killed instance's places stop counting once its run lapses.

use super::{cookie_at, nats_url, Cluster};
use crate::common::{self, Db, TestApp};
use server::services::places::RUN_LASTS;
use server::services::tabs::TABS_PER_PERSON;
use std::time::{Duration, Instant};

/// A console tab for the cookie's person on the instance at `base`, or the
/// status it was refused with.
async fn tab(base: &str, cookie: &str) -> Result<common::Tab, u16> {
    common::Tab::connect(base, cookie, "/ws", Some(base)).await
}

/// Tries a tab every 100 ms until one opens, within `at_most`.
async fn tab_within(base: &str, cookie: &str, at_most: Duration) -> common::Tab {
    let deadline = Instant::now() + at_most;
    loop {
        match tab(base, cookie).await {
            Ok(tab) => return tab,
            Err(status) => {
                assert_eq!(status, 429, "refused only for the cap");
                assert!(Instant::now() < deadline, "no place came free within {at_most:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_tabs_over_two_instances_count_as_one_and_a_killed_instances_lapse() {
    let Some(nats) = nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (a, b) = (cluster.base(0).to_string(), cluster.base(1).to_string());
    let (on_a, on_b) = (cookie_at(&a, common::OPERATOR).await, cookie_at(&b, common::OPERATOR).await);
    let mut tabs_a = Vec::new();
    let mut tabs_b = Vec::new();
    for n in 0..TABS_PER_PERSON {
        match n % 2 {
            0 => tabs_a.push(tab(&a, &on_a).await.expect("under the cap")),
            _ => tabs_b.push(tab(&b, &on_b).await.expect("under the cap")),
        }
    }
    assert_eq!(tab(&a, &on_a).await.err(), Some(429), "the cap counts both instances' tabs");
    assert_eq!(tab(&b, &on_b).await.err(), Some(429));
    let other = cookie_at(&b, common::ADMIN).await;
    assert!(tab(&b, &other).await.is_ok(), "another person is not held back");

    // A tab closed on one instance frees a place on the other.
    drop(tabs_a.pop());
    tabs_b.push(tab_within(&b, &on_b, Duration::from_secs(5)).await);
    assert_eq!(tab(&b, &on_b).await.err(), Some(429));

    // A killed instance never frees its places: they lapse with its run.
    // The tabs here send nothing by themselves: each is heard now, so
    // none is closed for silence (the presence TTL, 20 s) meanwhile, which
    // would free a place that is not the lapse's (it did, once, in CI).
    for (nonce, tab) in tabs_b.iter_mut().enumerate() {
        tab.ping(nonce as u64).await;
    }
    let killed = tabs_a.len();
    cluster.servers[0].child.start_kill().unwrap();
    cluster.servers[0].child.wait().await.unwrap();
    let started = Instant::now();
    tabs_b.push(tab_within(&b, &on_b, RUN_LASTS + Duration::from_secs(10)).await);
    eprintln!("a killed instance's places lapsed after {:?}", started.elapsed());
    for _ in 1..killed {
        tabs_b.push(tab(&b, &on_b).await.expect("the killed instance's places no longer count"));
    }
    assert_eq!(tabs_b.len(), TABS_PER_PERSON);
    assert_eq!(tab(&b, &on_b).await.err(), Some(429), "and the cap holds again");
    drop((tabs_a, tabs_b));
    cluster.finish().await;
}

/// The store's side, on both backends: a place is taken only under the
/// cap, however many ask at once; only live runs' places count; a freed
/// place is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_are_taken_under_the_cap_only_and_count_while_their_run_lives() {
    for db in [Db::Sqlite, Db::Postgres] {
        let Some(app) = TestApp::spawn(db).await else { continue };
        let store = app.running().store.clone();
        let holder = format!("export:{}", server::auth::new_token()[..10].to_lowercase());
        let (a, b) = (format!("a/{holder}"), format!("b/{holder}"));
        for run in [&a, &b] {
            store.renew_run(run, 60_000, 3_600_000).await.unwrap();
        }
        // Twenty at once, from two runs, for three places.
        let asks = (0..20).map(|n| {
            let (store, holder, run) = (store.clone(), holder.clone(), [&a, &b][n % 2].clone());
            async move { store.take_place(&holder, &format!("p{n}"), &run, 3).await.unwrap() }
        });
        let taken: Vec<bool> = futures::future::join_all(asks).await;
        assert_eq!(taken.iter().filter(|t| **t).count(), 3, "{} backend: never past the cap", store.backend_name());
        for n in (0..20).filter(|n| taken[*n]) {
            store.free_place(&holder, &format!("p{n}")).await.unwrap();
        }
        assert!(store.take_place(&holder, "a1", &a, 3).await.unwrap(), "freed places are free");
        assert!(store.take_place(&holder, "a2", &a, 3).await.unwrap());
        assert!(store.take_place(&holder, "b1", &b, 3).await.unwrap());
        assert!(!store.take_place(&holder, "b2", &b, 3).await.unwrap());
        // Run a stops saying it is alive: its two places stop counting.
        store.renew_run(&a, -1, 3_600_000).await.unwrap();
        assert!(store.take_place(&holder, "b2", &b, 3).await.unwrap(), "a lapsed run's places are free");
        assert!(store.take_place(&holder, "b3", &b, 3).await.unwrap());
        assert!(!store.take_place(&holder, "b4", &b, 3).await.unwrap());
        // Forgetting lapsed runs deletes a's rows and keeps b's: a, alive
        // again, holds nothing.
        store.renew_run(&b, 60_000, 0).await.unwrap();
        store.renew_run(&a, 60_000, 3_600_000).await.unwrap();
        assert!(!store.take_place(&holder, "a3", &a, 3).await.unwrap(), "b's three places were kept");
        for place in ["b1", "b2", "b3"] {
            store.free_place(&holder, place).await.unwrap();
        }
        for place in ["a3", "a4", "a5"] {
            assert!(store.take_place(&holder, place, &a, 3).await.unwrap(), "a's old places were forgotten");
        }
    }
}

/// A place is freed when dropped, and a run that ends (its server stops)
/// stops counting its places at once, not a lapse later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_place_is_freed_and_an_ended_runs_places_stop_counting_at_once() {
    use server::services::places::{CapReached, SharedPlaces};
    for db in [Db::Sqlite, Db::Postgres] {
        let Some(app) = TestApp::spawn(db).await else { continue };
        let store = app.running().store.clone();
        let holder = format!("person:{}", server::auth::new_token()[..10].to_lowercase());
        let (places, keeper) = SharedPlaces::start(store.clone(), format!("here/{holder}")).await.unwrap();
        let held = places.take(&holder, 1).await.unwrap().expect("the database answered");
        assert_eq!(places.take(&holder, 1).await.err(), Some(CapReached));
        drop(held);
        // Freed by the keeper, in the background.
        let deadline = Instant::now() + Duration::from_secs(5);
        let held = loop {
            match places.take(&holder, 1).await {
                Ok(place) => break place,
                Err(CapReached) => assert!(Instant::now() < deadline, "a dropped place was never freed"),
            }
            tokio::task::yield_now().await;
        };
        let elsewhere = format!("elsewhere/{holder}");
        store.renew_run(&elsewhere, 60_000, 3_600_000).await.unwrap();
        assert!(!store.take_place(&holder, "x", &elsewhere, 1).await.unwrap(), "held here");
        places.end().await;
        assert!(store.take_place(&holder, "x", &elsewhere, 1).await.unwrap(), "an ended run's places count no more");
        keeper.abort();
        drop(held);
    }
}

/// A take whose COMMIT landed but whose answer was lost (the connection cut
/// once the database had committed) is taken back by the store at once: the
/// place never counts against its holder. Without the take-back it would
/// count for as long as the run lives (a person's socket cap one lower).
/// PostgreSQL, through a proxy that cuts the connection after a COMMIT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_whose_commit_answer_was_lost_is_taken_back() {
    let Some((url, database)) = common::scratch_pg_database().await else { return };
    let proxy = CutAfterCommit::start(&url).await;
    let store = server::store::connect(&proxy.url).await.unwrap();
    let holder = format!("person:{}", server::auth::new_token()[..10].to_lowercase());
    let run = format!("here/{holder}");
    store.renew_run(&run, 60_000, 3_600_000).await.unwrap();
    let held = format!("SELECT COUNT(*) FROM held_places WHERE holder = '{holder}'");

    proxy.arm();
    let taken = store.take_place(&holder, "lost", &run, 2).await;
    assert!(taken.is_err(), "the COMMIT's answer never came: {taken:?}");
    assert!(proxy.has_cut(), "the proxy cut a connection after its COMMIT was answered");
    assert_eq!(common::scalar(&url, &held).await, 0, "the committed place was taken back");

    // The holder's cap is whole: both places can be taken.
    assert!(store.take_place(&holder, "one", &run, 2).await.unwrap());
    assert!(store.take_place(&holder, "two", &run, 2).await.unwrap());
    assert!(!store.take_place(&holder, "three", &run, 2).await.unwrap());
    drop(store);
    common::drop_pg_database(&database).await;
}

/// A TCP proxy in front of PostgreSQL that, once armed, lets one
/// connection's `COMMIT` (a simple query, as sqlx sends it) through, waits
/// for the database's answer (so the commit has happened) and, instead of
/// passing it on, closes that connection both ways.
struct CutAfterCommit {
    /// The database's URL through the proxy (without TLS, so the proxy
    /// sees the queries).
    url: String,
    armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// `Q`, the length (4 + "COMMIT\0"), the query.
const COMMIT_QUERY: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";

impl CutAfterCommit {
    async fn start(url: &str) -> CutAfterCommit {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let options: sqlx::postgres::PgConnectOptions = url.parse().expect("a PostgreSQL URL");
        let server = format!("{}:{}", options.get_host(), options.get_port());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let database = options.get_database().expect("a database in the URL");
        let proxied = format!("postgres://{}@{}/{database}?sslmode=disable", options.get_username(), listener.local_addr().unwrap());
        let (armed, cut) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (arm, cutting) = (armed.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                // (Not there: the client's connection fails, and says so.)
                let Ok(database) = tokio::net::TcpStream::connect(&server).await else { continue };
                let (arm, cutting) = (arm.clone(), cutting.clone());
                tokio::spawn(async move {
                    let (mut client_in, mut client_out) = client.into_split();
                    let (mut db_in, mut db_out) = database.into_split();
                    // Set before the armed COMMIT goes out: whatever the
                    // database sends after it is that COMMIT's answer.
                    let commit_out = Arc::new(AtomicBool::new(false));
                    let going = commit_out.clone();
                    // Client → database, watching for an armed COMMIT.
                    let upstream = tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match client_in.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            let commit = buf[..n].windows(COMMIT_QUERY.len()).any(|w| w == COMMIT_QUERY);
                            if commit && arm.swap(false, Ordering::SeqCst) {
                                going.store(true, Ordering::SeqCst);
                            }
                            if db_out.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    });
                    // Database → client, until the armed COMMIT's answer.
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        let n = match db_in.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if commit_out.load(Ordering::SeqCst) {
                            // The database answered the COMMIT: it happened. Lost here.
                            cutting.store(true, Ordering::SeqCst);
                            break;
                        }
                        if client_out.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    upstream.abort();
                    // Dropping both halves of both sockets closes them.
                });
            }
        });
        CutAfterCommit { url: proxied, armed, cut }
    }

    /// The next COMMIT through the proxy is cut after it is answered.
    fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn has_cut(&self) -> bool {
        self.cut.load(std::sync::atomic::Ordering::SeqCst)
    }
}
