//! Test harness: every test starts the real server on a random port with a
//! fresh database (a temp SQLite file, or a new PostgreSQL database), and
//! talks to it over HTTP like a browser or an edge agent would.

#![allow(dead_code)]

pub mod process;
pub mod proxy;

use server::config::Config;
use server::Running;
use std::path::PathBuf;
use tokio_tungstenite::tungstenite::Message as WsMessage;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

pub struct TestApp {
    pub base: String,
    pub running: Option<Running>,
    pub config: Config,
    pub db: Db,
    _dir: tempfile::TempDir,
    pg_database: Option<String>,
}

/// Admin connection used to create and drop the per-test databases.
fn pg_admin_url() -> String {
    std::env::var("CLUTCHCALL_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn pg_url_for(database: &str) -> String {
    let admin = pg_admin_url();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    format!("{base}/{database}")
}

/// A fresh PostgreSQL database for a test that runs its own server:
/// `(url, name)`, or `None` when PostgreSQL is skipped.
pub async fn scratch_pg_database() -> Option<(String, String)> {
    let name = create_pg_database().await?;
    Some((pg_url_for(&name), name))
}

pub async fn drop_pg_database(name: &str) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(&pg_admin_url()).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await;
    }
}

/// Creates a fresh PostgreSQL database, or explains why it cannot. Under
/// CI=true PostgreSQL is required, so an unreachable server fails the test.
async fn create_pg_database() -> Option<String> {
    use sqlx::Connection;
    let name = format!("cc_test_{}", server::auth::new_token().to_lowercase().replace(['-', '_'], "")[..16].to_string());
    match sqlx::PgConnection::connect(&pg_admin_url()).await {
        Ok(mut conn) => {
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.expect("create test database");
            Some(name)
        }
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("PostgreSQL is required under CI=true but unreachable at {}: {e}", pg_admin_url());
            }
            eprintln!("SKIPPED (PostgreSQL unreachable at {}: {e}); set CI=true to require it", pg_admin_url());
            None
        }
    }
}

pub fn site_root() -> PathBuf {
    // Tests run from server/; the built site (if any) is at the workspace root.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/site")
}

impl TestApp {
    /// Starts a server on a fresh database. `None` only for PostgreSQL when
    /// it is unreachable outside CI (the skip is printed).
    pub async fn spawn(db: Db) -> Option<TestApp> {
        Self::spawn_with(db, |_| {}).await
    }

    /// As `spawn`, after `adjust` changed the config (e.g. a short offer window).
    pub async fn spawn_with(db: Db, adjust: impl FnOnce(&mut Config)) -> Option<TestApp> {
        let dir = tempfile::tempdir().expect("temp dir");
        let pg_database = match db {
            Db::Sqlite => None,
            Db::Postgres => Some(create_pg_database().await?),
        };
        let mut config = Config::local(dir.path().to_path_buf(), pg_database.as_deref().map(pg_url_for), site_root());
        // One name for every run of this app: a restart, even after a
        // crash, takes its orgs' leases back at once (as a supervised
        // instance restarted under its name would).
        config.instance = Some(format!("test-{}", server::auth::new_token()[..12].to_lowercase()));
        adjust(&mut config);
        let running = server::start(config.clone()).await.expect("server starts");
        Some(TestApp {
            base: format!("http://{}", running.addr),
            running: Some(running),
            config,
            db,
            _dir: dir,
            pg_database,
        })
    }

    pub fn running(&self) -> &Running {
        self.running.as_ref().expect("server running")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The database URL, for tests that look inside.
    pub fn database_url(&self) -> String {
        self.config.database_url()
    }

    /// Stops the server and starts it again on the same database and port 0.
    pub async fn restart(&mut self) -> &Running {
        if let Some(running) = self.running.take() {
            running.stop().await.expect("clean stop");
        }
        let running = server::start(self.config.clone()).await.expect("server restarts");
        self.base = format!("http://{}", running.addr);
        self.running = Some(running);
        self.running()
    }

    /// Stops the server like a crash (no graceful shutdown) and starts it
    /// again on the same database.
    pub async fn crash_and_restart(&mut self) -> &Running {
        if let Some(running) = self.running.take() {
            running.kill();
        }
        let running = server::start(self.config.clone()).await.expect("server restarts");
        self.base = format!("http://{}", running.addr);
        self.running = Some(running);
        self.running()
    }

    pub fn engine(&self) -> &std::sync::Arc<server::engine::Engine> {
        &self.running().engine
    }

    /// An edge agent's request with the demo token of `robot_id`.
    pub fn robot(&self, method: reqwest::Method, robot_id: &str, path: &str) -> reqwest::RequestBuilder {
        http()
            .request(method, self.url(path))
            .bearer_auth(server::seed::demo_robot_token(robot_id))
    }

    /// `POST /v1/sessions` for `robot_id` with its own token.
    pub async fn raise(&self, robot_id: &str) -> (reqwest::StatusCode, serde_json::Value) {
        let res = self
            .robot(reqwest::Method::POST, robot_id, "/v1/sessions")
            .json(&serde_json::json!({ "robotId": robot_id }))
            .send()
            .await
            .expect("request");
        let status = res.status();
        (status, res.json().await.expect("json body"))
    }

    /// Stops the server and drops the PostgreSQL test database.
    pub async fn finish(mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await.expect("clean stop");
        }
        if let Some(name) = self.pg_database.take() {
            drop_pg_database(&name).await;
        }
    }
}

/// One integer from a SQL query against the test database.
pub async fn scalar(url: &str, sql: &str) -> i64 {
    use sqlx::Connection;
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    }
}

/// The plan the test database makes for `sql` given `arguments` (for
/// `$1`, `$2`, …), one line per step: on PostgreSQL the generic plan a
/// connection keeps (parameter types as PostgreSQL infers them), with
/// sequential scans off (on tables this small one would be cheapest, so a
/// scan means no index serves); on SQLite its query plan.
#[allow(dead_code)]
pub async fn plan(url: &str, sql: &str, arguments: &[&str]) -> String {
    use sqlx::{Connection, Row};
    if url.starts_with("postgres") {
        let listed: Vec<String> = arguments.iter().map(|argument| format!("'{argument}'")).collect();
        pg_generic_plan(url, &format!("PREPARE planned AS {sql}"), &listed.join(", ")).await
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        let text = format!("EXPLAIN QUERY PLAN {sql}");
        let mut explain = sqlx::query(&text);
        for argument in arguments {
            explain = explain.bind(*argument);
        }
        let rows = explain.fetch_all(&mut conn).await.unwrap();
        rows.iter().map(|row| row.get::<String, _>("detail")).collect::<Vec<_>>().join("\n")
    }
}

/// PostgreSQL's generic plan for `sql` as `plan` makes it, for a read
/// whose parameters name no type of their own (`$2 IS NULL`): `types`
/// are the parameters' types, `arguments` their SQL literals (`NULL`).
#[allow(dead_code)]
pub async fn plan_typed(url: &str, sql: &str, types: &[&str], arguments: &[&str]) -> String {
    assert!(url.starts_with("postgres"), "typed plans are PostgreSQL's");
    pg_generic_plan(url, &format!("PREPARE planned ({}) AS {sql}", types.join(", ")), &arguments.join(", ")).await
}

/// `prepare` (a `PREPARE planned …`) made and explained as executed with
/// `arguments` (SQL literals), as `plan` says.
#[allow(dead_code)]
async fn pg_generic_plan(url: &str, prepare: &str, arguments: &str) -> String {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    for statement in ["SET plan_cache_mode = force_generic_plan", "SET enable_seqscan = off", prepare] {
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    }
    let rows = sqlx::query(&format!("EXPLAIN EXECUTE planned({arguments})")).fetch_all(&mut conn).await.unwrap();
    rows.iter().map(|row| row.get::<String, _>(0)).collect::<Vec<_>>().join("\n")
}

/// Runs one statement against the test database (to stage a crash state).
pub async fn execute(url: &str, sql: &str) {
    use sqlx::Connection;
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
}

/// No test request may hang a run: a server that never answers fails the
/// test in seconds, naming the request, instead of stalling CI.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A plain HTTP client (edge agents), with the request timeout.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().unwrap()
}

/// A browser-like client: keeps cookies, does not follow redirects (tests
/// look at them).
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A browser-like client whose connections come from `address` (any of
/// 127.0.0.0/8 reaches the loopback server): another person's machine.
pub fn browser_from(address: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .local_address(std::net::IpAddr::from(address))
        .build()
        .unwrap()
}

/// Calls a server function the way the hydrated app does (form-encoded POST).
pub async fn call(client: &reqwest::Client, app: &TestApp, endpoint: &str, form: &[(&str, &str)]) -> reqwest::Response {
    client.post(app.url(&format!("/api/{endpoint}"))).header("origin", &app.base).form(form).send().await.expect("request")
}

pub async fn sign_in(client: &reqwest::Client, app: &TestApp, email: &str) -> reqwest::Response {
    call(client, app, "sign_in", &[("email", email), ("password", server::seed::DEMO_PASSWORD)]).await
}

/// Where a sign-in (called as the page's script calls it) says to go.
pub async fn landing(res: reqwest::Response) -> String {
    res.json().await.expect("a sign-in answers where to go")
}

pub const ADMIN: &str = server::seed::DEMO_ADMIN_EMAIL;

/// Asha (made ready in the demo org) answers a call for `robot`; the
/// session's id. The robot must be one Asha is the best ready operator for.
pub async fn attach_asha(app: &TestApp, robot: &str) -> String {
    const ORG: &str = "org-northstar";
    app.engine().operator_ready(ORG, "u-asha", true).await.unwrap();
    let (status, body) = app.raise(robot).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
    assert_eq!(body["operator"]["id"], "u-asha", "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    app.engine().answer(ORG, "u-asha", &session).await.unwrap();
    session
}
pub const OPERATOR: &str = "asha.rao@northstar.example";
pub const HARBOR_OPERATOR: &str = "lena.fischer@harbor.example";

/// Runs one async test body against SQLite and against PostgreSQL:
/// `both_backends!(name, |app| async move { … });` makes `sqlite::name`
/// and `postgres::name`.
/// `both_backends!` with a config adjustment.
#[macro_export]
macro_rules! both_backends_with {
    ($name:ident, $adjust:expr, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = common::TestApp::spawn_with(common::Db::Sqlite, $adjust).await.expect("sqlite always available");
                ($body)(app).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = common::TestApp::spawn_with(common::Db::Postgres, $adjust).await else { return };
                ($body)(app).await;
            }
        }
    };
}

#[macro_export]
macro_rules! both_backends {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = common::TestApp::spawn(common::Db::Sqlite).await.expect("sqlite always available");
                ($body)(app).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = common::TestApp::spawn(common::Db::Postgres).await else { return };
                ($body)(app).await;
            }
        }
    };
}

/// A console tab: a real WebSocket on `/ws`, signed in as `email`.
pub struct Tab {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
}

/// Signs in and returns the `cc_session=…` cookie pair.
pub async fn session_cookie(app: &TestApp, email: &str) -> String {
    let res = sign_in(&browser(), app, email).await;
    let cookie = res.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_string()
}

fn ws_request(app: &TestApp, cookie: &str, path: &str) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    ws_request_at(&app.base, cookie, path)
}

fn ws_request_at(base: &str, cookie: &str, path: &str) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("{}{path}", base.replace("http://", "ws://")).into_client_request().unwrap();
    request.headers_mut().insert("cookie", cookie.parse().unwrap());
    // Browsers always name the page that opens a socket.
    request.headers_mut().insert("origin", base.parse().unwrap());
    request
}

impl Tab {
    /// A console tab (`/ws`).
    pub async fn open(app: &TestApp, cookie: &str) -> Tab {
        Self::open_path(app, cookie, "/ws").await
    }

    /// A socket on `path` (e.g. `/ws?watch=org`).
    pub async fn open_path(app: &TestApp, cookie: &str, path: &str) -> Tab {
        Self::open_at(&app.base, cookie, path).await
    }

    /// A socket on `path` of the server at `base` (`http://host:port`).
    pub async fn open_at(base: &str, cookie: &str, path: &str) -> Tab {
        let request = ws_request_at(base, cookie, path);
        let (ws, _) = tokio::time::timeout(REQUEST_TIMEOUT, tokio_tungstenite::connect_async(request))
            .await
            .expect("ws connects within the request timeout")
            .expect("ws connects");
        Tab { ws }
    }

    /// An upgrade on `path` with the given `Origin` (none: no header):
    /// the open socket, or the HTTP status it was refused with.
    pub async fn connect(base: &str, cookie: &str, path: &str, origin: Option<&str>) -> Result<Tab, u16> {
        let mut request = ws_request_at(base, cookie, path);
        match origin {
            Some(origin) => request.headers_mut().insert("origin", origin.parse().unwrap()),
            None => request.headers_mut().remove("origin"),
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, tokio_tungstenite::connect_async(request)).await.expect("answered in time") {
            Ok((ws, _)) => Ok(Tab { ws }),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
            Err(e) => panic!("upgrade failed: {e}"),
        }
    }

    /// Sends a raw text frame; false when the socket is already gone.
    pub async fn send_text(&mut self, text: String) -> bool {
        use futures::SinkExt;
        self.ws.send(tokio_tungstenite::tungstenite::Message::Text(text.into())).await.is_ok()
    }

    pub async fn send(&mut self, msg: domain::ring::ConsoleMsg) {
        use futures::SinkExt;
        let text = serde_json::to_string(&msg).unwrap();
        self.ws.send(tokio_tungstenite::tungstenite::Message::Text(text.into())).await.expect("send");
    }

    /// The next message, within 5 s.
    pub async fn next(&mut self) -> domain::ring::RingMsg {
        use futures::StreamExt;
        loop {
            let frame = tokio::time::timeout(std::time::Duration::from_secs(5), self.ws.next())
                .await
                .expect("a message within 5 s")
                .expect("socket open")
                .expect("frame");
            if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
                return serde_json::from_str(&text).expect("a RingMsg");
            }
        }
    }

    /// The next message within `within`: `Ok(None)` when none came,
    /// `Err(())` once the socket has closed.
    pub async fn try_next(&mut self, within: std::time::Duration) -> Result<Option<domain::ring::RingMsg>, ()> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return Ok(None),
                Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text)))) => return Ok(Some(serde_json::from_str(&text).expect("a RingMsg"))),
                Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) => return Err(()),
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// Skips messages until one matches; panics after 5 s without it, or
    /// when the socket closes first.
    pub async fn until<T>(&mut self, pick: impl FnMut(domain::ring::RingMsg) -> Option<T>) -> T {
        self.until_within(std::time::Duration::from_secs(5), pick).await
    }

    /// Skips messages until one matches; panics after `within` without it,
    /// or when the socket closes first.
    pub async fn until_within<T>(&mut self, within: std::time::Duration, mut pick: impl FnMut(domain::ring::RingMsg) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.try_next(left).await {
                Ok(Some(msg)) => {
                    if let Some(found) = pick(msg) {
                        return found;
                    }
                }
                Ok(None) => panic!("expected message never came within {within:?}"),
                Err(()) => panic!("the socket closed before the expected message came"),
            }
        }
    }

    /// A round trip: sends a Ping and waits for its Pong (messages before
    /// it are skipped). The Pong proves the socket is open and that the
    /// server's task for it has handled everything sent before, its setup
    /// (subscribing to its topic; a console's presence) included.
    pub async fn ping(&mut self, nonce: u64) {
        self.send(domain::ring::ConsoleMsg::Ping { nonce }).await;
        self.until(|m| matches!(m, domain::ring::RingMsg::Pong { nonce: n } if n == nonce).then_some(())).await;
    }

    /// The HTTP status an upgrade on `path` is refused with.
    pub async fn refused(app: &TestApp, cookie: &str, path: &str) -> u16 {
        match tokio::time::timeout(REQUEST_TIMEOUT, tokio_tungstenite::connect_async(ws_request(app, cookie, path))).await {
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => response.status().as_u16(),
            other => panic!("expected a refused upgrade, got {:?}", other.map(|r| r.map(|_| "an open socket"))),
        }
    }

    /// True when the server closes the socket within `within` (messages
    /// before the close are skipped).
    pub async fn closed_within(&mut self, within: std::time::Duration) -> bool {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return false,
                Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))) => return true,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// Drops the connection without a close frame, like a killed browser.
    pub fn kill(self) {
        drop(self.ws);
    }
}

/// For tests where time is the input (a TTL, a planned end, an inactivity
/// deadline): waits until the engine's clock has passed `at_ms`, then asks
/// the org's dispatcher for something. It answers only after firing every
/// timer due by then and committing what they did, so state read afterwards
/// shows whatever the deadline brought.
pub async fn after_engine_time(app: &TestApp, org_id: &str, at_ms: i64) {
    tokio::time::sleep_until(app.engine().clock().instant_at(at_ms + 1)).await;
    app.engine().presences(org_id).await;
}

/// A socket on a session's teleop relay channel (`/relay/{session}`).
pub type RelaySocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next message on a socket (or its read half) that `pick` takes,
/// others skipped, within 10 s: a socket that closes or is reset first,
/// or says nothing, fails the test.
pub async fn next_on<S, T>(ws: &mut S, mut pick: impl FnMut(&WsMessage) -> Option<T>) -> T
where
    S: futures::Stream<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    use futures::StreamExt;
    let heard = async {
        loop {
            let message = ws.next().await.expect("the socket is open").expect("a frame, not a reset");
            if let Some(found) = pick(&message) {
                return found;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), heard).await.expect("heard within 10 s")
}

/// The code of the close frame a socket is told next (`None`: a close
/// without one), within 10 s; what comes before it is skipped.
pub async fn close_code<S>(ws: &mut S) -> Option<u16>
where
    S: futures::Stream<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    next_on(ws, |m| match m {
        WsMessage::Close(frame) => Some(frame.as_ref().map(|f| u16::from(f.code))),
        _ => None,
    })
    .await
}

/// Waits (10 s at most) until a relay socket is told the edge agent has
/// left its channel.
pub async fn robot_left<S>(ws: &mut S)
where
    S: futures::Stream<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    next_on(ws, |m| match m {
        WsMessage::Text(text) => matches!(serde_json::from_str(text), Ok(domain::relay::RelayMsg::Peers { robot: false, .. })).then_some(()),
        _ => None,
    })
    .await
}

/// A socket on `path` of the server at `app` with `cookie`, whose client
/// has a receive buffer of 4 KiB: a client that reads nothing is soon
/// taking nothing.
pub async fn slow_reader(app: &TestApp, cookie: &str, path: &str) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(app.running().addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(ws_request_at(&app.base, cookie, path), tcp).await.expect("the socket opens");
    ws
}

/// A relay socket as the edge agent (`robot`) or a cookie holder.
pub async fn relay(app: &TestApp, session: &str, robot: Option<&str>, cookie: Option<&str>) -> Result<RelaySocket, u16> {
    relay_at(&app.base, session, robot, cookie).await
}

/// `relay`, at the instance at `base` (`http://127.0.0.1:port`).
pub async fn relay_at(base: &str, session: &str, robot: Option<&str>, cookie: Option<&str>) -> Result<RelaySocket, u16> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("{}/relay/{session}", base.replace("http://", "ws://")).into_client_request().unwrap();
    if let Some(robot) = robot {
        let token = server::seed::demo_robot_token(robot);
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    if let Some(cookie) = cookie {
        request.headers_mut().insert("cookie", cookie.parse().unwrap());
        request.headers_mut().insert("origin", base.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(e) => panic!("relay upgrade failed: {e}"),
    }
}

