//! Several instances on one PostgreSQL database (issue "Scale out"): which
//! instance dispatches an org is a lease, and a taken-over owner commits
//! nothing (rule D13). This file is the harness (real server processes,
//! the local NATS or one of a test's own); the tests are in `cluster/`,
//! a module a topic.

mod common;
#[path = "cluster/caps.rs"]
mod caps;
#[path = "cluster/cut_off.rs"]
mod cut_off;
#[path = "cluster/events.rs"]
mod events;
#[path = "cluster/limits.rs"]
mod limits;
#[path = "cluster/ownership.rs"]
mod ownership;
#[path = "cluster/relay.rs"]
mod relay;
#[path = "cluster/revocations.rs"]
mod revocations;
#[path = "cluster/settings.rs"]
mod settings;
#[path = "cluster/store.rs"]
mod store;
#[path = "cluster/under_load.rs"]
mod under_load;

use reqwest::StatusCode;

const ORG: &str = "org-northstar";

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

/// Polls `holds` (every 50 ms, at most 20 s) until it is true; `what`
/// says what never came.
async fn until<F: std::future::Future<Output = bool>>(mut holds: impl FnMut() -> F, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !holds().await {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
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

