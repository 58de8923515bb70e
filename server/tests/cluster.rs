//! Several instances on one PostgreSQL database (issue "Scale out"): which
//! instance dispatches an org is a lease, and a taken-over owner commits
//! nothing (rule D13).

mod common;

use common::{execute, scalar, Db, TestApp};
use reqwest::StatusCode;
use server::store::{NewSession, StoreError, Write};

const ORG: &str = "org-northstar";

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

/// Makes the org's lease lapse now, as if its owner had stopped renewing.
async fn lapse(url: &str) {
    execute(url, &format!("UPDATE org_leases SET expires_at = 0 WHERE org_id = '{ORG}'")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_a_batch_of_a_taken_over_owner_is_refused_and_writes_nothing() {
    let Some(app) = TestApp::spawn(Db::Postgres).await else { return };
    let (store, url) = (app.running().store.clone(), app.database_url());
    app.running().engine.stop().await;
    lapse(&url).await;
    let old = store.take_lease(ORG, "a/1", 3_000).await.unwrap().expect("a lapsed lease is taken");
    // Held and renewed: nobody else takes it.
    assert_eq!(store.take_lease(ORG, "b/1", 3_000).await.unwrap(), None);
    assert!(store.renew_lease(&old, 3_000).await.unwrap());
    // It lapses (the owner was paused) and another instance takes over.
    lapse(&url).await;
    let new = store.take_lease(ORG, "b/1", 3_000).await.unwrap().expect("taken over");
    assert!(new.epoch > old.epoch);
    // The old owner wakes up: its renewal and its batch are refused, and the batch wrote nothing.
    assert!(!store.renew_lease(&old, 3_000).await.unwrap());
    assert!(matches!(store.commit(&old, &[session("ses-stale")]).await, Err(StoreError::Fenced)));
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE id = 'ses-stale'").await, 0);
    store.commit(&new, &[session("ses-owner")]).await.unwrap();
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE id = 'ses-owner'").await, 1);
    // A later run of the same instance (another boot) takes its own lease at once.
    let restarted = store.take_lease(ORG, "b/2", 3_000).await.unwrap().expect("the same instance, restarted");
    assert!(restarted.epoch > new.epoch);
    assert!(matches!(store.commit(&new, &[session("ses-older")]).await, Err(StoreError::Fenced)));
    app.finish().await;
}

/// Two real server processes on one scratch PostgreSQL database, in
/// cluster mode when `nats` names a NATS server: "first" starts first,
/// seeds the demo and takes its orgs; "second" finds them taken.
struct Pair {
    first: common::process::ServerProcess,
    second: common::process::ServerProcess,
    url: String,
    name: String,
    _dir: tempfile::TempDir,
}

impl Pair {
    /// `None` when PostgreSQL is skipped (outside CI).
    async fn start(nats: Option<&str>) -> Option<Pair> {
        let (url, name) = common::scratch_pg_database().await?;
        let dir = tempfile::tempdir().unwrap();
        let first = instance(&url, nats, dir.path(), "first").await;
        let second = instance(&url, nats, dir.path(), "second").await;
        Some(Pair { first, second, url, name, _dir: dir })
    }

    /// Stops both processes and drops the database.
    async fn finish(self) {
        let Pair { first, second, name, .. } = self;
        drop((first, second));
        common::drop_pg_database(&name).await;
    }
}

/// A real server process named `instance` on the database at `url`.
async fn instance(url: &str, nats: Option<&str>, dir: &std::path::Path, instance: &str) -> common::process::ServerProcess {
    let mut server = common::process::command(dir);
    server.env("CLUTCHCALL_ADDR", "127.0.0.1:0").env("DATABASE_URL", url).env("CLUTCHCALL_DEMO", "1").env("CLUTCHCALL_INSTANCE", instance);
    if let Some(nats) = nats {
        server.env("CLUTCHCALL_NATS_URL", nats);
    }
    common::process::ServerProcess::start(server).await
}

/// Which run of which instance holds the demo org's lease (`instance/boot`).
async fn owner(url: &str) -> String {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar::<_, String>(&format!("SELECT owner FROM org_leases WHERE org_id = '{ORG}'")).fetch_one(&mut conn).await.unwrap()
}

/// Waits (at most 20 s) until `instance` holds the demo org.
async fn owned_by(url: &str, instance: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !owner(url).await.starts_with(&format!("{instance}/")) {
        assert!(std::time::Instant::now() < deadline, "{instance} never took the org over");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The demo admin's session cookie, signed in at the instance at `base`.
async fn admin_cookie(base: &str) -> String {
    let signed = common::browser()
        .post(format!("{base}/api/sign_in"))
        .header("origin", base)
        .form(&[("email", common::ADMIN), ("password", server::seed::DEMO_PASSWORD)])
        .send()
        .await
        .unwrap();
    signed.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string()
}

/// A server function called at the instance at `base` with `cookie`.
async fn call_at(base: &str, cookie: &str, endpoint: &str, form: &[(&str, &str)]) -> reqwest::Response {
    common::browser().post(format!("{base}/api/{endpoint}")).header("origin", base).header("cookie", cookie).form(form).send().await.unwrap()
}

/// A distress call from `robot`'s edge agent to the instance at `base`.
async fn raise(base: &str, robot: &str) -> reqwest::Response {
    common::http()
        .post(format!("{base}/v1/sessions"))
        .bearer_auth(server::seed::demo_robot_token(robot))
        .json(&serde_json::json!({ "robotId": robot }))
        .send()
        .await
        .unwrap()
}

/// Two real server processes on one database; the owner of the demo org
/// is paused (SIGSTOP) until the other has taken the org over, then resumed:
/// it answers 503 `dispatched_elsewhere`, writes nothing, and steps down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_a_paused_owner_resumes_fenced_writes_nothing_and_steps_down() {
    let Some(pair) = Pair::start(None).await else { return };
    let (url, first, second) = (&pair.url, &pair.first, &pair.second);
    assert!(owner(url).await.starts_with("first/"));
    let elsewhere = raise(&second.base, "uk-pick-01").await;
    assert_eq!(elsewhere.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(elsewhere.json::<serde_json::Value>().await.unwrap()["error"]["code"], "dispatched_elsewhere");

    // Paused past its lease: the second takes the org over.
    let pid = first.child.id().unwrap() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    owned_by(url, "second").await;
    // Resumed, the first believes for a moment that it still dispatches the
    // org: whatever it decides is refused by the epoch, and it steps down.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let refused = raise(&first.base, "uk-pick-01").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.json::<serde_json::Value>().await.unwrap()["error"]["code"], "dispatched_elsewhere");
    assert_eq!(scalar(url, "SELECT COUNT(*) FROM sessions").await, 0, "nothing of the stale owner's was written");
    let taken = raise(&second.base, "uk-pick-01").await;
    assert!(taken.status().is_success(), "{}", taken.status());
    assert_eq!(scalar(url, "SELECT COUNT(*) FROM sessions").await, 1);
    assert!(owner(url).await.starts_with("second/"), "the resumed instance did not take the org back");
    pair.finish().await;
}

/// The owner is killed (-9) after acknowledging calls: a survivor owns the
/// org within seconds, with every acknowledged call on its desk (rule D14;
/// the takeover time itself is a benchmark, BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_a_killed_owners_org_moves_to_a_survivor_with_every_acknowledged_call() {
    let Some(mut pair) = Pair::start(None).await else { return };
    let url = pair.url.clone();
    // Nobody is ready: each call is acknowledged queued (202) by the owner.
    let mut acknowledged = Vec::new();
    for robot in ["uk-pick-01", "ue-pick-02", "uw-weld-01", "uk-insp-01"] {
        let res = raise(&pair.first.base, robot).await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        acknowledged.push((robot, res.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string()));
    }
    pair.first.child.start_kill().unwrap();
    pair.first.child.wait().await.unwrap();
    // The survivor takes the org over and has every acknowledged call: each
    // can be withdrawn there.
    owned_by(&url, "second").await;
    // (Owning it, the survivor answers once the org is loaded.)
    for (robot, session) in &acknowledged {
        let withdrawn = common::http()
            .delete(format!("{}/v1/sessions/{session}", pair.second.base))
            .bearer_auth(server::seed::demo_robot_token(robot))
            .send()
            .await
            .unwrap();
        assert_eq!(withdrawn.status(), StatusCode::OK, "{robot}'s acknowledged call is on the survivor's desk");
    }
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE lifecycle = 'PENDING'").await, 0);
    pair.finish().await;
}

/// The local NATS (`CLUTCHCALL_TEST_NATS_URL`, default 127.0.0.1:4222);
/// `None` outside CI when nothing answers there (the skip is printed).
async fn nats_url() -> Option<String> {
    let url = std::env::var("CLUTCHCALL_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    match async_nats::connect(url.as_str()).await {
        Ok(_) => Some(url),
        Err(e) if std::env::var("CI").is_err() => {
            eprintln!("skipped: no NATS at {url} ({e})");
            None
        }
        Err(e) => panic!("NATS is required under CI: {url}: {e}"),
    }
}

fn bookings_changed(robot: &str) -> domain::events::Event {
    domain::events::Event::Org(domain::events::OrgEvent::Bookings { robot_id: robot.into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cross_instances_over_nats_and_a_lost_one_is_a_resync() {
    use domain::events::Topic;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    let (a, b) = (NatsBus::connect(&url, "a/1").await.unwrap(), NatsBus::connect(&url, "b/1").await.unwrap());
    let org = format!("org-{}", server::auth::new_token()[..10].to_lowercase());
    let topic = Topic::org(&org);
    let mut on_b = b.subscribe(&topic);
    assert_eq!(on_b.recv().await, Delivery::Resync, "live: what came before could not reach it");
    a.publish(topic.clone(), bookings_changed("r1"));
    assert_eq!(on_b.recv().await, Delivery::Event(bookings_changed("r1")));
    // Another org's topic never reaches it; its own events come back in order.
    a.publish(Topic::org("org-other"), bookings_changed("x"));
    b.publish(topic.clone(), bookings_changed("r2"));
    a.publish(topic.clone(), bookings_changed("r3"));
    let mut next = Vec::new();
    for _ in 0..2 {
        next.push(on_b.recv().await);
    }
    next.sort_by_key(|d| format!("{d:?}"));
    assert_eq!(next, vec![Delivery::Event(bookings_changed("r2")), Delivery::Event(bookings_changed("r3"))]);

    // "a/1" skips a number (a message NATS lost): the subscriber resyncs, then reads on.
    let raw = async_nats::connect(url.as_str()).await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("CC-Publisher", "a/1");
    headers.insert("CC-Seq", "9");
    let payload = serde_json::to_vec(&bookings_changed("r9")).unwrap();
    raw.publish_with_headers(server::bus::nats::subject(&topic), headers, payload.into()).await.unwrap();
    raw.flush().await.unwrap();
    assert_eq!(on_b.recv().await, Delivery::Resync);
    assert_eq!(on_b.recv().await, Delivery::Event(bookings_changed("r9")));
}

/// The owner's events reach a wallboard on another instance through NATS:
/// a call raised on the instance that dispatches the org moves the
/// wallboard of an admin signed in on the other one, with no reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallboard_on_another_instance_hears_the_owners_events_through_nats() {
    use domain::events::OrgEvent;
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(pair) = Pair::start(Some(&nats)).await else { return };
    let (first, second) = (&pair.first, &pair.second);
    assert!(owner(&pair.url).await.starts_with("first/"));
    let cookie = admin_cookie(&second.base).await;
    let mut wallboard = common::Tab::open_at(&second.base, &cookie, "/ws?watch=org").await;
    // Its topic's NATS subscription is live: the screen is told to reload once.
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let raised = raise(&first.base, "uk-pick-01").await;
    assert_eq!(raised.status(), StatusCode::ACCEPTED);
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    let heard = wallboard
        .until(|m| match m {
            RingMsg::Org { event: OrgEvent::Lifecycle { session_id, .. } } if session_id == session => Some(session_id),
            _ => None,
        })
        .await;
    assert_eq!(heard, session);
    pair.finish().await;
}

/// Revocations hold on every instance: a sign-out on one closes the same
/// sign-in's socket on another, and a token rotated on one stops working
/// on another that had it cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_and_a_token_rotation_on_one_instance_hold_on_the_other() {
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(pair) = Pair::start(Some(&nats)).await else { return };
    let (first, second) = (&pair.first, &pair.second);
    let heartbeat = |base: String, token: String| async move {
        common::http().post(format!("{base}/v1/robots/uk-pick-01/heartbeat")).bearer_auth(token).send().await.unwrap().status()
    };
    // The second instance caches the robot's token.
    assert_eq!(heartbeat(second.base.clone(), server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);

    // Dana's sign-in on the first opens a wallboard socket on the second.
    let cookie = admin_cookie(&first.base).await;
    let mut wallboard = common::Tab::open_at(&second.base, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    assert_eq!(call_at(&first.base, &cookie, "sign_out", &[]).await.status(), StatusCode::OK);
    assert!(wallboard.closed_within(std::time::Duration::from_secs(5)).await, "signed out on the first, the second's socket closed");

    // A new token on the first: the old one fails on the second (its cache
    // is told through NATS, in milliseconds; polled, never slept).
    let cookie = admin_cookie(&first.base).await;
    let rotated = call_at(&first.base, &cookie, "rotate_robot_token", &[("robot_id", "uk-pick-01")]).await;
    assert_eq!(rotated.status(), StatusCode::OK);
    let token: String = rotated.json().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while heartbeat(second.base.clone(), server::seed::demo_robot_token("uk-pick-01")).await != StatusCode::UNAUTHORIZED {
        assert!(std::time::Instant::now() < deadline, "the rotated-out token still works on the second instance");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(heartbeat(second.base.clone(), token).await, StatusCode::OK, "the new one works there");
    pair.finish().await;
}
