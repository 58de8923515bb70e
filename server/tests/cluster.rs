//! Several instances on one PostgreSQL database (issue "Scale out"): which
//! instance dispatches an org is a lease, and a taken-over owner commits
//! nothing (rule D13).

mod common;
#[path = "cluster/caps.rs"]
mod caps;
#[path = "cluster/cut_off.rs"]
mod cut_off;
#[path = "cluster/limits.rs"]
mod limits;
#[path = "cluster/relay.rs"]
mod relay;

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

/// Real server processes on one scratch PostgreSQL database, in cluster
/// mode when `nats` names a NATS server, named "first", "second", "third":
/// the first starts first, seeds the demo and takes its orgs; the others
/// find them taken.
struct Cluster {
    servers: Vec<common::process::ServerProcess>,
    /// Each instance's `/metrics` port (kept across its restarts).
    metrics: Vec<u16>,
    url: String,
    name: String,
    dir: tempfile::TempDir,
    /// Settings every instance gets beyond the common ones.
    settings: Vec<(&'static str, String)>,
}

const NAMES: [&str; 3] = ["first", "second", "third"];

/// The demo robot uk-pick-01's heartbeat on the instance at `base` with
/// `token`: the status it answers.
async fn heartbeat(base: &str, token: &str) -> StatusCode {
    common::http().post(format!("{base}/v1/robots/uk-pick-01/heartbeat")).bearer_auth(token).send().await.unwrap().status()
}

/// Waits (at most `within_s`) until the instance at `base` refuses the
/// demo robot's `token`.
async fn until_refused(base: &str, token: &str, within_s: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(within_s);
    while heartbeat(base, token).await != StatusCode::UNAUTHORIZED {
        assert!(std::time::Instant::now() < deadline, "a token revoked in the database still works on the instance at {base}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

impl Cluster {
    /// `count` instances; `None` when PostgreSQL is skipped (outside CI).
    async fn start(nats: Option<&str>, count: usize) -> Option<Cluster> {
        Cluster::start_with(nats, count, Vec::new()).await
    }

    /// As `start`, every instance with `settings` (environment variables).
    async fn start_with(nats: Option<&str>, count: usize, settings: Vec<(&'static str, String)>) -> Option<Cluster> {
        let (url, name) = common::scratch_pg_database().await?;
        let dir = tempfile::tempdir().unwrap();
        let (mut servers, mut metrics) = (Vec::new(), Vec::new());
        for name in &NAMES[..count] {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            servers.push(instance(&url, nats, dir.path(), name, port, &settings).await);
            metrics.push(port);
        }
        Some(Cluster { servers, metrics, url, name, dir, settings })
    }

    /// Starts instance `index` again (after it stopped), under its name.
    async fn restart(&mut self, index: usize, nats: Option<&str>) {
        self.servers[index] = instance(&self.url, nats, self.dir.path(), NAMES[index], self.metrics[index], &self.settings).await;
    }

    /// Instance `index`'s `/metrics` text.
    async fn scrape(&self, index: usize) -> String {
        common::http().get(format!("http://127.0.0.1:{}/metrics", self.metrics[index])).send().await.unwrap().text().await.unwrap()
    }

    /// Whether instance `index` says on `/metrics` that it dispatches the demo org.
    async fn dispatching(&self, index: usize) -> bool {
        self.scrape(index).await.lines().any(|line| line == format!("clutchcall_dispatching{{org=\"{ORG}\"}} 1"))
    }

    /// The instance's base URL (`http://127.0.0.1:port`).
    fn base(&self, index: usize) -> &str {
        &self.servers[index].base
    }

    /// Stops every process and drops the database.
    async fn finish(self) {
        let Cluster { servers, name, .. } = self;
        drop(servers);
        common::drop_pg_database(&name).await;
    }
}

/// A real server process named `instance` on the database at `url`, its
/// `/metrics` on `metrics_port`, with `settings` beyond the common ones.
async fn instance(
    url: &str, nats: Option<&str>, dir: &std::path::Path, instance: &str, metrics_port: u16, settings: &[(&'static str, String)],
) -> common::process::ServerProcess {
    let mut server = common::process::command(dir);
    server.envs(settings.iter().map(|(name, value)| (name, value)));
    server.env("CLUTCHCALL_ADDR", "127.0.0.1:0").env("DATABASE_URL", url).env("CLUTCHCALL_DEMO", "1").env("CLUTCHCALL_INSTANCE", instance);
    server.env("CLUTCHCALL_METRICS_ADDR", format!("127.0.0.1:{metrics_port}"));
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

/// Waits (at most 20 s) until the first instance no longer holds the demo
/// org; which of the others (1 or 2) took it.
async fn taken_from_first(url: &str) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = owner(url).await;
        if let Some(index) = NAMES.iter().position(|name| now.starts_with(&format!("{name}/"))).filter(|&i| i > 0) {
            return index;
        }
        assert!(std::time::Instant::now() < deadline, "nobody took the org over from the first");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The demo admin's session cookie, signed in at the instance at `base`.
async fn admin_cookie(base: &str) -> String {
    cookie_at(base, common::ADMIN).await
}

/// `email`'s session cookie (demo password), signed in at the instance at `base`.
async fn cookie_at(base: &str, email: &str) -> String {
    let signed = common::browser()
        .post(format!("{base}/api/sign_in"))
        .header("origin", base)
        .form(&[("email", email), ("password", server::seed::DEMO_PASSWORD)])
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
    let Some(cluster) = Cluster::start(None, 2).await else { return };
    let (url, first, second) = (&cluster.url, &cluster.servers[0], &cluster.servers[1]);
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
    cluster.finish().await;
}

/// The owner is killed (-9) after acknowledging calls: a survivor owns the
/// org within seconds, with every acknowledged call on its desk (rule D14;
/// the takeover time itself is a benchmark, BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_a_killed_owners_org_moves_to_a_survivor_with_every_acknowledged_call() {
    let Some(mut cluster) = Cluster::start(None, 2).await else { return };
    let url = cluster.url.clone();
    // Nobody is ready: each call is acknowledged queued (202) by the owner.
    let mut acknowledged = Vec::new();
    for robot in ["uk-pick-01", "ue-pick-02", "uw-weld-01", "uk-insp-01"] {
        let res = raise(cluster.base(0), robot).await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        acknowledged.push((robot, res.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string()));
    }
    cluster.servers[0].child.start_kill().unwrap();
    cluster.servers[0].child.wait().await.unwrap();
    // The survivor takes the org over and has every acknowledged call: each
    // can be withdrawn there.
    owned_by(&url, "second").await;
    // (Owning it, the survivor answers once the org is loaded.)
    for (robot, session) in &acknowledged {
        let withdrawn = common::http()
            .delete(format!("{}/v1/sessions/{session}", cluster.base(1)))
            .bearer_auth(server::seed::demo_robot_token(robot))
            .send()
            .await
            .unwrap();
        assert_eq!(withdrawn.status(), StatusCode::OK, "{robot}'s acknowledged call is on the survivor's desk");
    }
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE lifecycle = 'PENDING'").await, 0);
    cluster.finish().await;
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

/// What a subscription hears next, within 10 s (a lost delivery fails, never hangs).
async fn within<T>(heard: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(10), heard).await.expect("delivered within 10 s")
}

fn bookings_changed(robot: &str) -> domain::events::Event {
    domain::events::Event::Org(domain::events::OrgEvent::Bookings { robot_id: robot.into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cross_instances_over_nats_and_a_lost_one_is_a_resync() {
    use domain::events::Topic;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    // One cluster (one database's id) for a and b; another cluster's instance on the same NATS.
    let cluster = server::auth::new_token()[..12].to_lowercase();
    let (a, b) = (NatsBus::connect(&url, "a/1", &cluster).await.unwrap(), NatsBus::connect(&url, "b/1", &cluster).await.unwrap());
    let stranger = NatsBus::connect(&url, "s/1", "another-cluster").await.unwrap();
    let org = format!("org-{}", server::auth::new_token()[..10].to_lowercase());
    let topic = Topic::org(&org);
    let mut on_b = b.subscribe(&topic);
    assert_eq!(within(on_b.recv()).await, Delivery::Resync, "live: what came before could not reach it");
    a.publish(topic.clone(), bookings_changed("r1"));
    assert_eq!(within(on_b.recv()).await, Delivery::Event(bookings_changed("r1")));
    // Another org's topic never reaches it, nor another cluster's event on
    // the same topic; its own events come back in order.
    a.publish(Topic::org("org-other"), bookings_changed("x"));
    stranger.publish(topic.clone(), bookings_changed("elsewhere"));
    b.publish(topic.clone(), bookings_changed("r2"));
    a.publish(topic.clone(), bookings_changed("r3"));
    let mut next = Vec::new();
    for _ in 0..2 {
        next.push(within(on_b.recv()).await);
    }
    next.sort_by_key(|d| format!("{d:?}"));
    assert_eq!(next, vec![Delivery::Event(bookings_changed("r2")), Delivery::Event(bookings_changed("r3"))]);

    // "a/1" skips a number (a message NATS lost): the subscriber resyncs, then reads on.
    let raw = async_nats::connect(url.as_str()).await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("CC-Publisher", "a/1");
    headers.insert("CC-Seq", "9");
    let payload = serde_json::to_vec(&bookings_changed("r9")).unwrap();
    raw.publish_with_headers(server::bus::nats::subject(&cluster, &topic), headers, payload.into()).await.unwrap();
    raw.flush().await.unwrap();
    assert_eq!(within(on_b.recv()).await, Delivery::Resync);
    assert_eq!(within(on_b.recv()).await, Delivery::Event(bookings_changed("r9")));
}

/// A topic whose NATS subscription ends under it (here: its connection is
/// drained) is no longer live: nothing relays it any more, so a socket
/// opened on it must not be told it hears everything from now on (before,
/// the topic stayed live with nothing relaying it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_whose_nats_subscription_ended_is_no_longer_live() {
    use domain::events::Topic;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    let cluster = server::auth::new_token()[..12].to_lowercase();
    let b = NatsBus::connect(&url, "b/1", &cluster).await.unwrap();
    let topic = Topic::org(&format!("org-{}", server::auth::new_token()[..10].to_lowercase()));
    let mut on_b = b.subscribe(&topic);
    assert_eq!(within(on_b.recv()).await, Delivery::Resync);
    assert!(b.is_live(&topic));
    b.client().drain().await.unwrap();
    // Nothing is delivered when a subscription ends: its state is what tells.
    within(async {
        while b.is_live(&topic) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A topic's `Resync` promises that everything published after it is
/// heard: the subscription must be in the NATS server by then, not only
/// written to this client's socket (a flush: the first topic here was
/// lost that way, as a CI run once lost one). Fresh topics, each
/// subscribed behind a backlog on b's connection and published to from
/// another connection the moment it resyncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_published_after_a_resync_is_heard() {
    use domain::events::Topic;
    use futures::StreamExt;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    let cluster = server::auth::new_token()[..12].to_lowercase();
    let (a, b) = (NatsBus::connect(&url, "a/1", &cluster).await.unwrap(), NatsBus::connect(&url, "b/1", &cluster).await.unwrap());
    // Each message of b's backlog goes to five listeners: the server
    // reads b's connection slower than b writes it.
    let listener = async_nats::connect(url.as_str()).await.unwrap();
    let mut listening = Vec::new();
    for _ in 0..5 {
        let mut heard = listener.subscribe(format!("backlog.{cluster}")).await.unwrap();
        listening.push(tokio::spawn(async move { while heard.next().await.is_some() {} }));
    }
    server::bus::nats::settled(&listener).await.unwrap();
    for i in 0..5 {
        // b's connection is busy: the server has its subscription only
        // once it has read the backlog before it.
        for _ in 0..10_000 {
            b.client().publish(format!("backlog.{cluster}"), bytes::Bytes::from_static(&[0; 64])).await.unwrap();
        }
        let topic = Topic::org(&format!("org-{i}"));
        let mut on_b = b.subscribe(&topic);
        assert_eq!(within(on_b.recv()).await, Delivery::Resync);
        a.publish(topic.clone(), bookings_changed("r1"));
        let heard = tokio::time::timeout(std::time::Duration::from_secs(5), on_b.recv()).await;
        assert_eq!(heard.ok(), Some(Delivery::Event(bookings_changed("r1"))), "topic {i}: published after its Resync, so heard");
    }
}

/// The owner's events reach a wallboard on another instance through NATS:
/// a call raised on the instance that dispatches the org moves the
/// wallboard of an admin signed in on the other one, with no reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallboard_on_another_instance_hears_the_owners_events_through_nats() {
    use domain::events::OrgEvent;
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (&cluster.servers[0], &cluster.servers[1]);
    assert!(owner(&cluster.url).await.starts_with("first/"));
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
    cluster.finish().await;
}

/// Revocations hold on every instance: a sign-out on one closes the same
/// sign-in's socket on another, and a token rotated on one stops working
/// on another that had it cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_and_a_token_rotation_on_one_instance_hold_on_the_other() {
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (&cluster.servers[0], &cluster.servers[1]);
    // The second instance caches the robot's token.
    assert_eq!(heartbeat(&second.base, &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);

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
    until_refused(&second.base, &server::seed::demo_robot_token("uk-pick-01"), 5).await;
    assert_eq!(heartbeat(&second.base, &token).await, StatusCode::OK, "the new one works there");
    cluster.finish().await;
}

/// The skill a call raised by the demo robot at the instance at `base` is
/// dispatched on (from the robot's record as that instance has it); the
/// call, queued (nobody is ready), is withdrawn.
async fn skill_raised_at(base: &str) -> String {
    let res = raise(base, "uk-pick-01").await;
    assert_eq!(res.status(), StatusCode::ACCEPTED, "queued: nobody is ready");
    let body: serde_json::Value = res.json().await.unwrap();
    let session = body["sessionId"].as_str().unwrap();
    let withdrawn = common::http().delete(format!("{base}/v1/sessions/{session}")).bearer_auth(server::seed::demo_robot_token("uk-pick-01"));
    assert_eq!(withdrawn.send().await.unwrap().status(), StatusCode::OK);
    body["skill"].as_str().unwrap().to_string()
}

/// Waits (at most `within_s`) until the demo robot's calls at `base` are
/// dispatched on `skill`.
async fn until_raised_as(base: &str, skill: &str, within_s: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(within_s);
    while skill_raised_at(base).await != skill {
        assert!(std::time::Instant::now() < deadline, "the instance at {base} still raises the robot's calls as it was before its edit");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A robot edited on one instance raises its calls as edited on another
/// that had its record cached: that instance is told through NATS, in
/// milliseconds (the sweep, a minute away, plays no part).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_edited_on_one_instance_raises_calls_as_edited_on_the_other() {
    let Some(nats) = nats_url().await else { return };
    // No sweep during the test: only the edit's message can tell the second.
    let Some(cluster) = Cluster::start_with(Some(&nats), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "3600".into())]).await else { return };
    let (first, second) = (cluster.base(0), cluster.base(1));
    assert_eq!(skill_raised_at(second).await, "pick-place", "as seeded, and now cached on the second");
    let cookie = admin_cookie(first).await;
    assert_eq!(call_at(first, &cookie, "edit_robot", &EDITED).await.status(), StatusCode::OK);
    until_raised_as(second, "welding", 5).await;
    cluster.finish().await;
}

/// When the demo robot's `offline` reaches `tab` (kept open with pings
/// meanwhile), `within` at most.
async fn robot_offline_heard(tab: &mut common::Tab, within: std::time::Duration) -> std::time::Instant {
    use domain::events::OrgEvent;
    use domain::models::RegistryStatus;
    use domain::ring::{ConsoleMsg, RingMsg};
    let deadline = std::time::Instant::now() + within;
    let mut pinged = std::time::Instant::now();
    for nonce in 1.. {
        assert!(std::time::Instant::now() < deadline, "the robot's silence was never told");
        match tab.try_next(std::time::Duration::from_secs(2)).await {
            Ok(Some(RingMsg::Org { event: OrgEvent::RobotStatus { robot_id, status: RegistryStatus::Offline, .. } })) if robot_id == "uk-pick-01" => break,
            Ok(_) => {}
            Err(()) => panic!("the wallboard closed"),
        }
        // Within the socket's silence TTL (20 s), not after every message.
        if pinged.elapsed() >= std::time::Duration::from_secs(2) {
            tab.send(ConsoleMsg::Ping { nonce }).await;
            pinged = std::time::Instant::now();
        }
    }
    std::time::Instant::now()
}

/// A robot whose edge agent moved from one instance to another is told
/// offline when it falls silent there, not when its silence on the first
/// would have come: the store, which has its later heartbeat, decides, and
/// the instance that logs the silence tells it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_whose_agent_moved_to_another_instance_is_told_offline_only_once_silent_there() {
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (cluster.base(0), cluster.base(1));
    let cookie = admin_cookie(first).await;
    let mut wallboard = common::Tab::open_at(first, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let token = server::seed::demo_robot_token("uk-pick-01");
    assert_eq!(heartbeat(first, &token).await, StatusCode::OK);
    // (The spacing the scenario needs: the first's silence would end 2 s
    // before the second's.)
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let moved = std::time::Instant::now();
    assert_eq!(heartbeat(second, &token).await, StatusCode::OK);
    let silent = std::time::Duration::from_millis(domain::rules::ROBOT_HEARTBEAT_TIMEOUT_MS as u64);
    let told = robot_offline_heard(&mut wallboard, silent + std::time::Duration::from_secs(10)).await;
    assert!(told >= moved + silent, "told offline {:?} after its last heartbeat", told - moved);
    cluster.finish().await;
}

/// The demo robot's edit: a new reqCert (so a new skill), the rest as seeded.
const EDITED: [(&str, &str); 5] = [("robot_id", "uk-pick-01"), ("model", "Franka FR3"), ("site", "Leeds Hub"), ("pop", "uk-london"), ("req_cert", "welding · tier-1")];

/// The instance that heard a robot's last heartbeat reports it offline
/// when its heartbeats stop, though the robot was edited on another
/// instance meanwhile (which makes this one forget its cached record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_edited_elsewhere_is_still_reported_offline_where_its_heartbeats_stopped() {
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (cluster.base(0), cluster.base(1));
    assert_eq!(heartbeat(second, &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);
    let cookie = admin_cookie(first).await;
    assert_eq!(call_at(first, &cookie, "edit_robot", &EDITED).await.status(), StatusCode::OK);
    // Only the second heard a heartbeat: only it can tell the silence.
    let logged = format!("SELECT COUNT(*) FROM org_events WHERE org_id = '{ORG}' AND robot_id = 'uk-pick-01' AND kind = 'robot.offline'");
    let silent = std::time::Duration::from_millis(domain::rules::ROBOT_HEARTBEAT_TIMEOUT_MS as u64);
    let deadline = std::time::Instant::now() + silent + std::time::Duration::from_secs(10);
    while scalar(&cluster.url, &logged).await == 0 {
        assert!(std::time::Instant::now() < deadline, "the robot's silence was never reported");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    cluster.finish().await;
}

/// An edit whose message no instance heard (made in the database alone)
/// still reaches a cached record within the sweep, as a lost revocation does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_edit_no_instance_heard_of_takes_effect_within_the_sweep() {
    use sqlx::Connection;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start_with(Some(&nats), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "2".into())]).await else { return };
    let second = cluster.base(1);
    assert_eq!(skill_raised_at(second).await, "pick-place", "as seeded, and now cached on the second");
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    let edit = format!("UPDATE robots SET req_cert = 'welding · tier-1' WHERE org_id = '{ORG}' AND id = 'uk-pick-01'");
    assert_eq!(sqlx::query(&edit).execute(&mut db).await.unwrap().rows_affected(), 1);
    until_raised_as(second, "welding", 10).await;
    cluster.finish().await;
}

/// A revocation lost on the way between instances still takes effect.
/// Changes made in the database alone stand for changes whose revocations
/// never reached the second instance: it keeps trusting what it cached
/// until it learns something may have been lost (another instance skipped
/// a number on the revocations subject or tallied more than was heard, or
/// NATS came back after an outage); then it checks its sockets and cached tokens against the
/// database, and what no longer holds ends there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocations_lost_on_the_way_take_effect_after_a_gap_or_a_reconnect() {
    use domain::ring::{RingError, RingMsg};
    use futures::StreamExt;
    use server::auth::token_hash;
    use sqlx::Connection;
    let Some(nats) = OwnNats::start(None).await else { return };
    // No sweep during the test: only the counts may notice the losses.
    let Some(cluster) = Cluster::start_with(Some(&nats.url()), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "3600".into())]).await else { return };
    let second = cluster.base(1).to_string();
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    async fn rotate_unheard(db: &mut sqlx::PgConnection, token: &str) {
        let sql = format!("UPDATE robots SET token_hash = $1 WHERE org_id = '{ORG}' AND id = 'uk-pick-01'");
        assert_eq!(sqlx::query(&sql).bind(server::auth::token_hash(token)).execute(db).await.unwrap().rows_affected(), 1);
    }

    // The second caches the robot's token; an admin's wallboard is open there.
    let old = server::seed::demo_robot_token("uk-pick-01");
    assert_eq!(heartbeat(&second, &old).await, StatusCode::OK);
    let cookie = admin_cookie(&second).await;
    let mut wallboard = common::Tab::open_at(&second, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let sign_in = cookie.split_once('=').unwrap().1;
    rotate_unheard(&mut db, "rotated-unheard-1").await;
    sqlx::query("DELETE FROM web_sessions WHERE token_hash = $1").bind(token_hash(sign_in)).execute(&mut db).await.unwrap();
    assert_eq!(heartbeat(&second, &old).await, StatusCode::OK, "unheard, the second still trusts its cache");

    // Another instance's revocations, in order from its first, are applied
    // (the second sign-in's socket closes).
    let cluster_id: String = sqlx::query_scalar("SELECT id FROM cluster_identity").fetch_one(&mut db).await.unwrap();
    let raw = async_nats::connect(nats.url()).await.unwrap();
    let revoke = |seq: &'static str, secret: String| {
        let (raw, subject) = (raw.clone(), format!("clutchcall.{cluster_id}.revocations"));
        async move {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("CC-Publisher", "elsewhere/1");
            headers.insert("CC-Seq", seq);
            let payload = serde_json::to_vec(&serde_json::json!({ "kind": "credential_ended", "secret": secret })).unwrap();
            raw.publish_with_headers(subject, headers, payload.into()).await.unwrap();
            raw.flush().await.unwrap();
        }
    };
    let other_cookie = admin_cookie(&second).await;
    // (Its pass is taken before the socket opens.)
    let mut other_wallboard = common::Tab::open_at(&second, &other_cookie, "/ws?watch=org").await;
    revoke("1", "nothing-open".into()).await;
    revoke("2", token_hash(other_cookie.split_once('=').unwrap().1)).await;
    other_wallboard.until(|m| matches!(m, RingMsg::Error { code: RingError::SignedOut, .. }).then_some(())).await;

    // Then one skips a number: one was lost. (The wallboard is heard
    // first, so the TTL does not close it for silence meanwhile.)
    wallboard.ping(1).await;
    revoke("4", "nothing-open".into()).await;
    until_refused(&second, &old, 10).await;
    wallboard.until(|m| matches!(m, RingMsg::Error { code: RingError::SignedOut, .. }).then_some(())).await;
    assert_eq!(heartbeat(&second, "rotated-unheard-1").await, StatusCode::OK, "the token the database holds works");

    // The last one sent is lost: the publisher's tally shows it. The
    // instances tally theirs too.
    let mut tallies = raw.subscribe(format!("clutchcall.{cluster_id}.revocations")).await.unwrap();
    server::bus::nats::settled(&raw).await.unwrap();
    rotate_unheard(&mut db, "rotated-unheard-2").await;
    assert_eq!(heartbeat(&second, "rotated-unheard-1").await, StatusCode::OK, "cached again, and unheard");
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("CC-Publisher", "elsewhere/1");
    headers.insert("CC-Sent", "5");
    raw.publish_with_headers(format!("clutchcall.{cluster_id}.revocations"), headers, Vec::new().into()).await.unwrap();
    raw.flush().await.unwrap();
    until_refused(&second, "rotated-unheard-1", 10).await;
    assert_eq!(heartbeat(&second, "rotated-unheard-2").await, StatusCode::OK);
    let tallied = tokio::time::timeout(std::time::Duration::from_secs(15), async {
        while let Some(message) = tallies.next().await {
            let header = |name: &str| message.headers.as_ref().and_then(|h| h.get(name)).map(|v| v.to_string());
            if header("CC-Sent").is_some() && header("CC-Publisher").is_some_and(|p| p.starts_with("second/")) {
                return;
            }
        }
    });
    tallied.await.expect("the second instance tallies its revocations");

    // NATS goes away and comes back: whatever was sent meanwhile is lost.
    rotate_unheard(&mut db, "rotated-unheard-3").await;
    assert_eq!(heartbeat(&second, "rotated-unheard-2").await, StatusCode::OK, "cached again, and unheard");
    let nats = nats.restart().await;
    until_refused(&second, "rotated-unheard-2", 30).await;
    assert_eq!(heartbeat(&second, "rotated-unheard-3").await, StatusCode::OK);
    cluster.finish().await;
    drop(nats);
}

/// A revocation no instance heard of at all (its instance died between
/// the commit and telling the others: nothing is missing in any count,
/// no tally is short) still takes effect within the sweep: every
/// `CLUTCHCALL_REVOCATION_SWEEP_S` each instance checks its sockets and
/// cached tokens against the database. (The other tests keep the default
/// minute, so their losses are noticed by the counts alone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_no_instance_heard_of_takes_effect_within_the_sweep() {
    use domain::ring::{RingError, RingMsg};
    use server::auth::token_hash;
    use sqlx::Connection;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start_with(Some(&nats), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "2".into())]).await else { return };
    let second = cluster.base(1).to_string();
    // The second caches the robot's token; an admin's wallboard is open there.
    let old = server::seed::demo_robot_token("uk-pick-01");
    assert_eq!(heartbeat(&second, &old).await, StatusCode::OK);
    let cookie = admin_cookie(&second).await;
    let mut wallboard = common::Tab::open_at(&second, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    // Rotated and signed out in the database alone: nothing is published.
    // (In one transaction: one sweep sees both.)
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    let mut tx = db.begin().await.unwrap();
    let rotate = format!("UPDATE robots SET token_hash = $1 WHERE org_id = '{ORG}' AND id = 'uk-pick-01'");
    sqlx::query(&rotate).bind(token_hash("rotated-unheard")).execute(&mut *tx).await.unwrap();
    let sign_in = cookie.split_once('=').unwrap().1;
    sqlx::query("DELETE FROM web_sessions WHERE token_hash = $1").bind(token_hash(sign_in)).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    // Within a few sweeps (none before the first could have seen it).
    until_refused(&second, &old, 10).await;
    wallboard.until(|m| matches!(m, RingMsg::Error { code: RingError::SignedOut, .. }).then_some(())).await;
    assert_eq!(heartbeat(&second, "rotated-unheard").await, StatusCode::OK, "the token the database holds works");
    cluster.finish().await;
}

/// Rule D10 across instances: Dana operates in Northstar, dispatched by the
/// first instance, and in Harbor, dispatched by the second. While
/// Northstar's offer rings her, Harbor's call finds her busy and queues (a
/// 202, never a 503 from the database's one-open-offer-per-operator index);
/// once she declines in Northstar, Harbor's desk hears she is free and
/// rings her console there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d10_an_operator_ringing_in_an_org_dispatched_elsewhere_is_busy_here_until_freed() {
    use domain::models::PresenceState;
    use domain::ring::{ConsoleMsg, RingMsg};
    use sqlx::Connection;
    const HARBOR: &str = server::seed::SECOND_ORG_ID;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (cluster.base(0).to_string(), cluster.base(1).to_string());
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    for sql in [
        "INSERT INTO operator_profiles (org_id, user_id, region) VALUES ('org-harbor', 'u-dana', 'Manchester')",
        "INSERT INTO operator_certifications (org_id, user_id, certification) VALUES ('org-harbor', 'u-dana', 'inspection · tier-2')",
        // Harbor's lease handed to the second instance, which takes it
        // (same instance name) and loads Harbor's desk, Dana on it.
        "UPDATE org_leases SET owner = 'second/handed-over', epoch = epoch + 1, \
         expires_at = (extract(epoch from clock_timestamp()) * 1000)::bigint + 3000 WHERE org_id = 'org-harbor'",
    ] {
        sqlx::query(sql).execute(&mut db).await.unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let owner: String = sqlx::query_scalar("SELECT owner FROM org_leases WHERE org_id = 'org-harbor'").fetch_one(&mut db).await.unwrap();
        if owner.starts_with("second/") && owner != "second/handed-over" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the second never took Harbor");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(owner(&cluster.url).await.starts_with("first/"), "Northstar stays on the first");

    // Ready in both: Northstar's console on the first, Harbor's on the second.
    let mut northstar = ready_console(&first, common::ADMIN).await;
    let harbor_cookie = cookie_at(&second, common::ADMIN).await;
    assert_eq!(call_at(&second, &harbor_cookie, "select_org", &[("org_id", HARBOR)]).await.status(), StatusCode::OK);
    let mut harbor = common::Tab::open_at(&second, &harbor_cookie, "/ws").await;
    harbor.until(|m| matches!(m, RingMsg::Welcome { .. }).then_some(())).await;
    harbor.send(ConsoleMsg::Ready).await;
    harbor
        .until(|m| match m {
            RingMsg::Presence { presence } | RingMsg::Welcome { presence, .. } => (presence.state == PresenceState::Ready).then_some(()),
            _ => None,
        })
        .await;

    let rung = raise(&first, "uk-insp-01").await;
    assert_eq!(rung.status(), StatusCode::CREATED);
    let rung: serde_json::Value = rung.json().await.unwrap();
    assert_eq!(rung["operator"]["id"], "u-dana");
    let northstar_call = rung["sessionId"].as_str().unwrap().to_string();
    let queued = raise(&second, "hb-insp-01").await;
    assert_eq!(queued.status(), StatusCode::ACCEPTED, "busy in Northstar: queued, {}", queued.text().await.unwrap());
    let harbor_call = queued.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();

    northstar.send(ConsoleMsg::Decline { session_id: northstar_call }).await;
    let offered = harbor
        .until(|m| match m {
            RingMsg::Offer { offer } => Some(offer.session_id),
            _ => None,
        })
        .await;
    assert_eq!(offered, harbor_call, "freed in Northstar, Harbor's queued call rings her");
    let open: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM offers WHERE operator_id = 'u-dana' AND status = 'open'").fetch_one(&mut db).await.unwrap();
    assert_eq!(open, 1);
    cluster.finish().await;
}

/// Any instance serves anyone: a call raised on the second instance rings
/// Asha's console on the third, her Accept there starts the session, the
/// owner's (the first's) wallboard hears it, and the second's roster shows
/// her presence; the second and third forward to the first over NATS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_raised_on_one_instance_rings_and_is_answered_on_another_and_a_third_sees_it() {
    use domain::events::OrgEvent;
    use domain::models::{LifecycleState, PresenceState};
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    // Which instance dispatches the org is on its /metrics, and only there.
    assert!(cluster.dispatching(0).await && !cluster.dispatching(1).await && !cluster.dispatching(2).await);
    let (owner_base, raising, ringing) = (cluster.base(0), cluster.base(1), cluster.base(2));
    let mut wallboard = common::Tab::open_at(owner_base, &admin_cookie(owner_base).await, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;

    // Asha's console on the third: the owner's desk welcomes her and takes her Ready.
    let mut console = ready_console(ringing, common::OPERATOR).await;
    let roster: domain::roster::Roster = call_at(raising, &admin_cookie(raising).await, "load_roster", &[]).await.json().await.unwrap();
    let asha = roster.rows.iter().find(|row| row.email.as_deref() == Some(common::OPERATOR)).expect("Asha's row");
    assert_eq!(asha.state, PresenceState::Ready, "the second's roster shows the presence the third's console set");

    let raised = raise(raising, "ue-pick-01").await;
    assert_eq!(raised.status(), StatusCode::CREATED, "201 from the second: the owner matched and committed");
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    accept_offer(&mut console, &session).await;
    let heard = wallboard.until(|m| match m {
        RingMsg::Org { event: OrgEvent::Lifecycle { session_id, lifecycle: LifecycleState::Active, .. } } if session_id == session => Some(()),
        _ => None,
    });
    heard.await;
    assert_eq!(scalar(&cluster.url, &format!("SELECT COUNT(*) FROM sessions WHERE id = '{session}' AND lifecycle = 'ACTIVE'")).await, 1);
    cluster.finish().await;
}

/// `console` is offered `session`, accepts it, and is told it has it.
async fn accept_offer(console: &mut common::Tab, session: &str) {
    use domain::ring::{ConsoleMsg, RingMsg};
    let offered = console.until(|m| match m {
        RingMsg::Offer { offer } => Some(offer.session_id),
        _ => None,
    });
    assert_eq!(offered.await, session);
    console.send(ConsoleMsg::Accept { session_id: session.to_string() }).await;
    let accepted = console.until(|m| match m {
        RingMsg::Accepted { session_id } => Some(session_id),
        _ => None,
    });
    assert_eq!(accepted.await, session);
}

/// The demo org's operators, whose consoles the load test opens.
const OPERATORS: [&str; 8] = ["asha.rao", "vikram.iyer", "meera.nair", "tom.whitfield", "priya.shah", "owen.davies", "carla.mendes", "jamal.brooks"];

/// What one console heard while the load ran.
#[derive(Default)]
struct Heard {
    /// Welcomes after the first (the org's dispatcher moved: rejoined).
    welcomes: usize,
    /// The presence the last of them showed.
    welcomed_as: Option<domain::models::PresenceState>,
    offers: usize,
    closed: bool,
}

/// Reads a console until `stop`, so that it never falls behind.
fn listen(mut tab: common::Tab, stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<Heard> {
    use domain::ring::{ConsoleMsg, RingMsg};
    tokio::spawn(async move {
        let mut heard = Heard::default();
        // Heartbeats as a browser's console sends them: a tab silent for
        // the presence TTL (20 s) is closed by the server, as it should be.
        let heartbeat = serde_json::to_string(&ConsoleMsg::Heartbeat).unwrap();
        let mut beaten = std::time::Instant::now();
        while !*stop.borrow() {
            if beaten.elapsed() >= std::time::Duration::from_secs(5) {
                tab.send_text(heartbeat.clone()).await;
                beaten = std::time::Instant::now();
            }
            match tab.try_next(std::time::Duration::from_millis(200)).await {
                Ok(Some(RingMsg::Welcome { presence, .. })) => {
                    heard.welcomes += 1;
                    heard.welcomed_as = Some(presence.state);
                }
                Ok(Some(RingMsg::Offer { .. })) => heard.offers += 1,
                Ok(_) => {}
                Err(()) => {
                    heard.closed = true;
                    break;
                }
            }
        }
        heard
    })
}

/// What the robots' edge agents were told.
#[derive(Clone, Default)]
struct Calls {
    /// Every call acknowledged (201 or 202), by id.
    acknowledged: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// How many of them were matched to a ready operator at once (201).
    matched: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Calls {
    fn count(&self) -> usize {
        self.acknowledged.lock().unwrap().len()
    }

    fn matched(&self) -> usize {
        self.matched.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (at most a minute) until `count` calls were acknowledged.
    async fn at_least(&self, count: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.count() < count {
            assert!(std::time::Instant::now() < deadline, "the robots' calls stopped being acknowledged");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Every acknowledged call is in the database, none is left open, and
    /// no operator ever held two offers at once.
    async fn none_lost(&self, url: &str) {
        let acknowledged = self.acknowledged.lock().unwrap().clone();
        let ids = acknowledged.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>().join(",");
        let found = scalar(url, &format!("SELECT COUNT(*) FROM sessions WHERE id IN ({ids})")).await;
        assert_eq!(found, acknowledged.len() as i64, "every acknowledged call is in the database");
        // (A call committed whose answer was lost with its instance, never
        // retried once the robots stopped, is pending: its robot was never told.)
        let open = format!("SELECT COUNT(*) FROM sessions WHERE id IN ({ids}) AND lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED')");
        assert_eq!(scalar(url, &open).await, 0, "every acknowledged call was withdrawn: none is stuck");
        let overlapping = "SELECT COUNT(*) FROM offers a JOIN offers b ON a.operator_id = b.operator_id AND a.id < b.id \
             AND a.offered_at < COALESCE(b.answered_at, b.expires_at) AND b.offered_at < COALESCE(a.answered_at, a.expires_at)";
        assert_eq!(scalar(url, overlapping).await, 0, "no operator held two offers at once");
    }
}

/// Four robots' edge agents calling through `bases` (which the test may
/// change as instances come and go) until `stop`.
fn start_robots(bases: &std::sync::Arc<std::sync::Mutex<Vec<String>>>, calls: &Calls, stop: &tokio::sync::watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
    ["uk-pick-01", "ue-pick-02", "uw-weld-01", "uk-insp-01"]
        .into_iter()
        .map(|robot| tokio::spawn(keep_calling(robot, bases.clone(), calls.clone(), stop.clone())))
        .collect()
}

/// A robot's edge agent: raises a call on one instance and withdraws it
/// on another, again and again. A 503 (the org between owners) or an
/// instance that does not answer (stopping, restarting) is tried again on
/// the next.
async fn keep_calling(robot: &'static str, bases: std::sync::Arc<std::sync::Mutex<Vec<String>>>, calls: Calls, stop: tokio::sync::watch::Receiver<bool>) {
    let token = server::seed::demo_robot_token(robot);
    let base = |turn: usize| {
        let bases = bases.lock().unwrap();
        bases[turn % bases.len()].clone()
    };
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(100));
    let mut turn = 0usize;
    while !*stop.borrow() {
        turn += 1;
        let raised = common::http().post(format!("{}/v1/sessions", base(turn))).bearer_auth(&token).json(&serde_json::json!({ "robotId": robot })).send().await;
        let Ok(res) = raised else {
            pause().await;
            continue;
        };
        let status = res.status();
        let body: serde_json::Value = res.json().await.unwrap_or_default();
        let session = match status {
            StatusCode::CREATED | StatusCode::ACCEPTED => {
                let id = body["sessionId"].as_str().unwrap().to_string();
                calls.acknowledged.lock().unwrap().push(id.clone());
                if status == StatusCode::CREATED {
                    calls.matched.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                id
            }
            // A call committed whose answer was lost with its instance: the robot withdraws it too.
            StatusCode::CONFLICT => {
                let message = body["error"]["message"].as_str().unwrap().to_string();
                message.rsplit('(').next().unwrap().trim_end_matches(')').to_string()
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                pause().await;
                continue;
            }
            other => panic!("{robot}: raise answered {other}: {body}"),
        };
        let mut retried = false;
        loop {
            turn += 1;
            let withdrawn = common::http().delete(format!("{}/v1/sessions/{session}", base(turn))).bearer_auth(&token).send().await;
            match withdrawn.as_ref().map(|res| res.status()) {
                Ok(StatusCode::OK) => break,
                // An earlier try was committed, its answer lost with the owner.
                Ok(StatusCode::CONFLICT) if retried => break,
                Ok(StatusCode::SERVICE_UNAVAILABLE) | Err(_) => {
                    retried = true;
                    pause().await;
                }
                Ok(other) => panic!("{robot}: withdrawing {session} answered {other}: {}", withdrawn.unwrap().text().await.unwrap()),
            }
        }
    }
}

/// A console of `email` at the instance at `base`, ready (seen so).
async fn ready_console(base: &str, email: &str) -> common::Tab {
    use domain::models::PresenceState;
    use domain::ring::{ConsoleMsg, RingMsg};
    let mut tab = common::Tab::open_at(base, &cookie_at(base, email).await, "/ws").await;
    tab.until(|m| matches!(m, RingMsg::Welcome { .. }).then_some(())).await;
    tab.send(ConsoleMsg::Ready).await;
    // (Told as an event, or in a Welcome when its subscription went live after it.)
    tab.until(|m| match m {
        RingMsg::Presence { presence } | RingMsg::Welcome { presence, .. } => (presence.state == PresenceState::Ready).then_some(()),
        _ => None,
    })
    .await;
    tab
}

/// Failover under load (rule D14): twelve consoles spread over three
/// instances, four robots raising and withdrawing through the two that
/// survive; the owner is killed (-9) after 60 acknowledged calls. Another
/// instance takes the org; every acknowledged call is in the database and
/// none is left open; no operator ever held two offers at once; the
/// consoles on the survivors keep their sockets, register with the new
/// dispatcher (ready again) and are rung by calls raised after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d14_failover_under_load_loses_no_acknowledged_call_and_survivors_consoles_stay() {
    let Some(nats) = nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 3).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (mut survivors, mut on_owner) = (Vec::new(), Vec::new());
    for i in 0..12 {
        let email = format!("{}@northstar.example", OPERATORS[i % OPERATORS.len()]);
        let tab = ready_console(cluster.base(i % 3), &email).await;
        match i % 3 {
            0 => on_owner.push(listen(tab, stopped.clone())),
            _ => survivors.push(listen(tab, stopped.clone())),
        }
    }
    let calls = Calls::default();
    let bases = std::sync::Arc::new(std::sync::Mutex::new(vec![cluster.base(1).to_string(), cluster.base(2).to_string()]));
    let robots = start_robots(&bases, &calls, &stopped);
    calls.at_least(60).await;
    cluster.servers[0].child.start_kill().unwrap();
    cluster.servers[0].child.wait().await.unwrap();
    let matched_before = calls.matched();
    let new_owner = taken_from_first(&cluster.url).await;
    calls.at_least(calls.count() + 40).await;
    assert!(cluster.dispatching(new_owner).await && !cluster.dispatching(3 - new_owner).await, "the new owner says so on /metrics");
    stop.send(true).unwrap();
    for robot in robots {
        robot.await.unwrap();
    }
    for tab in on_owner {
        assert!(tab.await.unwrap().closed, "a console on the killed instance lost its socket");
    }
    for tab in survivors {
        let heard = tab.await.unwrap();
        assert!(!heard.closed, "a console on a surviving instance never reconnects");
        assert!(heard.welcomes >= 1, "a console on a survivor registered with the new dispatcher");
        use domain::models::PresenceState::{Ready, Ringing};
        assert!(matches!(heard.welcomed_as, Some(Ready | Ringing)), "and is in the pool there, as before: {:?}", heard.welcomed_as);
    }
    assert!(calls.matched() > matched_before, "ready consoles on the survivors are rung after the takeover");
    calls.none_lost(&cluster.url).await;
    cluster.finish().await;
}

/// A rolling restart under load: each of the three instances in turn is
/// stopped (SIGTERM: it gives its leases up) and started again under its
/// name while four robots raise and withdraw through whichever instances
/// answer. No acknowledged call is lost or left open, and no operator ever
/// held two offers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_of_every_instance_loses_no_acknowledged_call() {
    let Some(nats) = nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 3).await else { return };
    // A ready console on each instance (each ends with its instance).
    let mut consoles = Vec::new();
    for i in 0..3 {
        consoles.push(ready_console(cluster.base(i), &format!("{}@northstar.example", OPERATORS[i])).await);
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let calls = Calls::default();
    let bases = std::sync::Arc::new(std::sync::Mutex::new((0..3).map(|i| cluster.base(i).to_string()).collect::<Vec<_>>()));
    let robots = start_robots(&bases, &calls, &stopped);
    for i in 0..3 {
        calls.at_least((i + 1) * 20).await;
        cluster.servers[i].terminate().await;
        cluster.restart(i, Some(&nats)).await;
        bases.lock().unwrap()[i] = cluster.base(i).to_string();
    }
    calls.at_least(80).await;
    stop.send(true).unwrap();
    for robot in robots {
        robot.await.unwrap();
    }
    assert!(calls.matched() > 0, "ready operators were offered calls");
    calls.none_lost(&cluster.url).await;
    drop(consoles);
    cluster.finish().await;
}

/// A NATS server of the test's own on a free port, so it can be restarted
/// (the machine's one on 4222 is shared). `None` outside CI without `nats-server`.
struct OwnNats {
    port: u16,
    process: tokio::process::Child,
}

impl OwnNats {
    fn binary() -> Option<std::path::PathBuf> {
        let path = std::env::var("PATH").unwrap_or_default();
        std::env::split_paths(&format!("{path}:/usr/sbin:/usr/local/sbin")).map(|dir| dir.join("nats-server")).find(|p| p.is_file())
    }

    async fn start(port: Option<u16>) -> Option<OwnNats> {
        let Some(binary) = Self::binary() else {
            assert!(std::env::var("CI").is_err(), "nats-server is required under CI (scripts/setup.sh installs it)");
            eprintln!("skipped: no nats-server binary");
            return None;
        };
        let port = port.unwrap_or_else(|| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
        let process = tokio::process::Command::new(binary).args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "nats-server did not start");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Some(OwnNats { port, process })
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills it (-9) and starts a new one on the same port.
    async fn restart(mut self) -> OwnNats {
        self.process.start_kill().unwrap();
        self.process.wait().await.unwrap();
        OwnNats::start(Some(self.port)).await.expect("started before")
    }
}

/// NATS restarted mid-run: the instances reconnect by themselves, a live
/// screen on a non-owner is told to resync (never left silent), and the
/// owner's events and the forwarded requests flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_ride_out_a_nats_restart_and_screens_resync() {
    use domain::events::OrgEvent;
    use domain::ring::RingMsg;
    let Some(nats) = OwnNats::start(None).await else { return };
    let Some(cluster) = Cluster::start(Some(&nats.url()), 2).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    let second = cluster.base(1).to_string();
    let mut wallboard = common::Tab::open_at(&second, &admin_cookie(&second).await, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;

    let nats = nats.restart().await;
    // Within the reconnects (as l07's console below).
    wallboard.until_within(std::time::Duration::from_secs(15), |m| matches!(m, RingMsg::Resync).then_some(())).await;
    // Heard now (its Pong ends what came before): the raises below may take
    // a while, and a screen silent for the presence TTL is closed.
    wallboard.ping(1).await;
    // Raised on the second, which forwards it to the first once both are back on NATS.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let session = loop {
        let raised = raise(&second, "uk-pick-01").await;
        match raised.status() {
            StatusCode::ACCEPTED => break raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string(),
            StatusCode::SERVICE_UNAVAILABLE => assert!(std::time::Instant::now() < deadline, "forwarding never came back"),
            other => panic!("raise answered {other}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    wallboard
        .until(|m| match m {
            RingMsg::Org { event: OrgEvent::Lifecycle { session_id, .. } } if session_id == session => Some(()),
            _ => None,
        })
        .await;
    assert!(owner(&cluster.url).await.starts_with("first/"), "a NATS outage moves no org");
    cluster.finish().await;
    drop(nats);
}

/// A console told to resync (here: its instance's NATS connection came
/// back after a NATS restart) hears the notices that stand once more,
/// after its Welcome: the inactivity warning (rule L07) may be what it
/// missed. The console is on an instance that does not dispatch the org,
/// so the notices come from the owner (`Request::Notices` over NATS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l07_a_console_told_to_resync_is_warned_again() {
    use domain::ring::RingMsg;
    let Some(nats) = OwnNats::start(None).await else { return };
    let chain = vec![
        ("CLUTCHCALL_ACTIVITY_CHECK_S", "1".to_string()),
        ("CLUTCHCALL_INACTIVITY_WARNING_S", "2".to_string()),
        ("CLUTCHCALL_INACTIVITY_STOP_S", "120".to_string()),
    ];
    let Some(cluster) = Cluster::start_with(Some(&nats.url()), 2, chain).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    // Asha's console on the second; the call raised on the first, the owner.
    let mut console = ready_console(cluster.base(1), common::OPERATOR).await;
    let raised = raise(cluster.base(0), "ue-pick-01").await;
    assert_eq!(raised.status(), StatusCode::CREATED);
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    accept_offer(&mut console, &session).await;
    let warning = |m: RingMsg| match m {
        RingMsg::InactivityWarning { session_id, stop_at_ms } if session_id == session => Some(stop_at_ms),
        _ => None,
    };
    let stop_at = console.until(warning).await;
    // Heard now: the restart and the reconnects take a few seconds.
    console.ping(1).await;

    let nats = nats.restart().await;
    // Heard again (the presence TTL counts from the tab's last word), then
    // within the reconnects and the resync's wait for the owner's.
    console.send(domain::ring::ConsoleMsg::Heartbeat).await;
    let welcome = |m: RingMsg| matches!(m, RingMsg::Welcome { .. }).then_some(());
    console.until_within(std::time::Duration::from_secs(15), welcome).await;
    // Told once, two minutes before the stop: only the retelling says it now.
    assert_eq!(console.until(warning).await, stop_at);
    cluster.finish().await;
    drop(nats);
}

/// An owner paused (SIGSTOP) stays connected to NATS for a while; once
/// another instance has taken its org over, every request forwarded from
/// the remaining instance reaches the new owner (the lease's epoch names the
/// subject), none waits on the paused one; resumed, it steps down (D13).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_requests_forwarded_after_a_paused_owner_is_taken_over_reach_the_new_owner() {
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    // The third learns the first's epoch by forwarding to it.
    let token = server::seed::demo_robot_token("uk-pick-01");
    let raised = raise(cluster.base(2), "uk-pick-01").await;
    assert_eq!(raised.status(), StatusCode::ACCEPTED);
    let first = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    let withdrawn = common::http().delete(format!("{}/v1/sessions/{first}", cluster.base(2))).bearer_auth(&token).send().await.unwrap();
    assert_eq!(withdrawn.status(), StatusCode::OK);

    let pid = cluster.servers[0].child.id().unwrap() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let other = 3 - taken_from_first(&cluster.url).await;
    // Every call through the instance that does not own the org is answered
    // by the new owner (one sent to the paused first would wait 5 s, 503).
    for _ in 0..4 {
        let raised = raise(cluster.base(other), "uk-pick-01").await;
        assert_eq!(raised.status(), StatusCode::ACCEPTED, "answered by the new owner");
        let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
        let withdrawn = common::http().delete(format!("{}/v1/sessions/{session}", cluster.base(other))).bearer_auth(&token).send().await.unwrap();
        assert_eq!(withdrawn.status(), StatusCode::OK);
    }
    unsafe { libc::kill(pid, libc::SIGCONT) };
    cluster.finish().await;
}
