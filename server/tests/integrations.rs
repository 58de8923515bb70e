//! Integrators (issue "Integrators and supervisors", part 1): org API keys
//! read the org's event log at `/v1/events`, as JSON pages and as a Server-
//! Sent Events stream that resumes after its last id; webhooks get the same
//! records signed, in order, retried. On both databases, against the real
//! server and a real receiver over HTTP.

mod common;

use common::{attach_asha, browser, call, sign_in, TestApp, ADMIN};
use domain::event_log::LogRecord;
use domain::integrations::{Integrations, NewApiKey, NewWebhook};
use domain::models::LifecycleState;
use reqwest::StatusCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ORG: &str = "org-northstar";

async fn admin(app: &TestApp) -> reqwest::Client {
    let admin = browser();
    assert_eq!(sign_in(&admin, app, ADMIN).await.status(), StatusCode::OK);
    admin
}

async fn new_key(admin: &reqwest::Client, app: &TestApp) -> NewApiKey {
    let res = call(admin, app, "create_api_key", &[("name", "WMS re-planner")]).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

async fn page(app: &TestApp, key: &str, query: &str) -> reqwest::Response {
    common::http().get(app.url(&format!("/v1/events{query}"))).bearer_auth(key).send().await.unwrap()
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    events: Vec<LogRecord>,
    next_since: i64,
    more: bool,
}

/// A full call: raised, offered to Asha, accepted, completed.
async fn full_call(app: &TestApp) -> String {
    let session = attach_asha(app, "uk-pick-01").await;
    app.engine().steer_session(ORG, &session, LifecycleState::Completed, Some("u-asha")).await.unwrap();
    session
}

both_backends!(a_key_reads_its_orgs_events_and_nothing_else_does, |app: TestApp| async move {
    let admin = admin(&app).await;
    let key = new_key(&admin, &app).await;
    assert!(key.key.starts_with("cck_"), "{}", key.key);
    let session = full_call(&app).await;
    // Another org's call is not in this org's log.
    app.robot(reqwest::Method::POST, "hb-pick-01", "/v1/sessions").json(&serde_json::json!({"robotId": "hb-pick-01"})).send().await.unwrap();

    let res = page(&app, &key.key, "").await;
    assert_eq!(res.status(), StatusCode::OK);
    let all: Page = res.json().await.unwrap();
    let kinds: Vec<&str> = all.events.iter().filter(|r| r.session_id.as_deref() == Some(&session)).map(|r| r.event.kind()).collect();
    assert_eq!(kinds, ["call.raised", "call.offered", "call.accepted", "session.lifecycle"]);
    assert!(all.events.iter().all(|r| r.robot_id.as_deref() != Some("hb-pick-01")), "another org's events");
    assert!(!all.more);

    // Paging: two at a time, each page after the last, no gap, no repeat.
    let mut since = 0;
    let mut paged = Vec::new();
    loop {
        let p: Page = page(&app, &key.key, &format!("?since={since}&limit=2")).await.json().await.unwrap();
        paged.extend(p.events.iter().map(|r| r.id));
        since = p.next_since;
        if !p.more {
            break;
        }
    }
    assert_eq!(paged, all.events.iter().map(|r| r.id).collect::<Vec<_>>());

    // Bad paging is a clear 400.
    assert_eq!(page(&app, &key.key, "?limit=0").await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(page(&app, &key.key, "?since=-1").await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(page(&app, &key.key, "?since=abc").await.status(), StatusCode::BAD_REQUEST);

    // A robot token never reads events; nobody signed out does; an
    // operator does not; a key does not act for robots.
    let robot = app.robot(reqwest::Method::GET, "uk-pick-01", "/v1/events").send().await.unwrap();
    assert_eq!(robot.status(), StatusCode::FORBIDDEN);
    assert_eq!(common::http().get(app.url("/v1/events")).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let asha = browser();
    sign_in(&asha, &app, common::OPERATOR).await;
    assert_eq!(asha.get(app.url("/v1/events")).send().await.unwrap().status(), StatusCode::FORBIDDEN);
    let raise = common::http().post(app.url("/v1/sessions")).bearer_auth(&key.key).json(&serde_json::json!({"robotId": "uk-pick-01"})).send().await.unwrap();
    assert_eq!(raise.status(), StatusCode::FORBIDDEN);
    // The admin reads it too (signed in).
    assert_eq!(admin.get(app.url("/v1/events")).send().await.unwrap().status(), StatusCode::OK);

    // Listed by its hint, never the key; revoked, it stops working.
    let listed: Integrations = call(&admin, &app, "load_integrations", &[]).await.json().await.unwrap();
    assert_eq!(listed.keys.len(), 1);
    assert!(listed.keys[0].hint.ends_with(&key.key[key.key.len() - 4..]));
    assert!(!serde_json::to_string(&listed).unwrap().contains(&key.key));
    assert_eq!(call(&admin, &app, "revoke_api_key", &[("key_id", &key.id)]).await.status(), StatusCode::OK);
    assert_eq!(page(&app, &key.key, "").await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(call(&admin, &app, "revoke_api_key", &[("key_id", &key.id)]).await.status(), StatusCode::NOT_FOUND);
    // An operator cannot make keys.
    assert_eq!(call(&asha, &app, "create_api_key", &[("name", "x")]).await.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends!(a_reader_behind_the_retention_is_told_410, |app: TestApp| async move {
    let admin = admin(&app).await;
    let key = new_key(&admin, &app).await;
    full_call(&app).await;
    // Retention deleted the first two records.
    common::execute(&app.database_url(), "DELETE FROM org_events WHERE id <= 2").await;
    assert_eq!(page(&app, &key.key, "?since=2").await.status(), StatusCode::OK, "3 is the oldest kept");
    let gone = page(&app, &key.key, "?since=1").await;
    assert_eq!(gone.status(), StatusCode::GONE);
    let body: serde_json::Value = gone.json().await.unwrap();
    assert_eq!(body["error"]["code"], "events_gone");
    let fresh: Page = page(&app, &key.key, "").await.json().await.unwrap();
    assert_eq!(fresh.events.first().map(|r| r.id), Some(3), "a new reader reads what is kept");
    app.finish().await;
});

/// An SSE reader over a real connection.
struct Stream {
    res: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(app: &TestApp, key: &str, last_event_id: Option<i64>) -> Stream {
        let mut request = common::http().get(app.url("/v1/events")).bearer_auth(key).header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let res = request.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        Stream { res, buffer: String::new() }
    }

    /// The next record, or `None` when the server ended the stream.
    async fn next(&mut self) -> Option<LogRecord> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let id = block.lines().find_map(|l| l.strip_prefix("id:")).map(|v| v.trim().parse::<i64>().unwrap());
                let data = block.lines().find_map(|l| l.strip_prefix("data:"));
                if let (Some(id), Some(data)) = (id, data) {
                    let record: LogRecord = serde_json::from_str(data.trim()).unwrap();
                    assert_eq!(record.id, id, "the event's id is the record's");
                    return Some(record);
                }
                continue; // a keep-alive comment
            }
            match tokio::time::timeout(Duration::from_secs(20), self.res.chunk()).await.expect("a record within 20 s") {
                Ok(Some(bytes)) => self.buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
                _ => return None,
            }
        }
    }
}

both_backends!(an_event_stream_resumes_after_its_last_id_without_a_gap_or_a_duplicate, |app: TestApp| async move {
    let admin = admin(&app).await;
    let key = new_key(&admin, &app).await;
    let mut stream = Stream::open(&app, &key.key, None).await;
    // Records arrive as they commit (the stream was open before the call).
    let session = full_call(&app).await;
    let mut seen = Vec::new();
    while seen.len() < 4 {
        seen.push(stream.next().await.expect("open"));
    }
    assert_eq!(seen.iter().map(|r| r.event.kind()).collect::<Vec<_>>(), ["call.raised", "call.offered", "call.accepted", "session.lifecycle"]);
    assert!(seen.iter().all(|r| r.session_id.as_deref() == Some(&session)));
    // Disconnect after two; more happens meanwhile; resume after the second.
    drop(stream);
    let second = full_call(&app).await;
    let mut resumed = Stream::open(&app, &key.key, Some(seen[1].id)).await;
    let mut after = Vec::new();
    while after.len() < 6 {
        after.push(resumed.next().await.expect("open"));
    }
    let ids: Vec<i64> = after.iter().map(|r| r.id).collect();
    assert_eq!(ids, (seen[1].id + 1..=seen[1].id + 6).collect::<Vec<_>>(), "exactly after the last id, no gap, no repeat");
    assert_eq!(after.last().unwrap().session_id.as_deref(), Some(second.as_str()));

    // Revoking the key ends its open stream.
    assert_eq!(call(&admin, &app, "revoke_api_key", &[("key_id", &key.id)]).await.status(), StatusCode::OK);
    assert!(resumed.next().await.is_none(), "the stream ends with its key");
    app.finish().await;
});

/// A webhook receiver: answers 500 to its first `fail_first` requests,
/// then checks each signature and keeps what it got.
struct Receiver {
    url: String,
    secret: Arc<Mutex<String>>,
    got: tokio::sync::mpsc::UnboundedReceiver<LogRecord>,
    requests: Arc<AtomicUsize>,
}

async fn receiver(fail_first: usize) -> Receiver {
    use axum::http::HeaderMap;
    let secret = Arc::new(Mutex::new(String::new()));
    let requests = Arc::new(AtomicUsize::new(0));
    let (tx, got) = tokio::sync::mpsc::unbounded_channel();
    let (key, count) = (secret.clone(), requests.clone());
    let hook = move |headers: HeaderMap, body: axum::body::Bytes| {
        let (key, count, tx) = (key.clone(), count.clone(), tx.clone());
        async move {
            if count.fetch_add(1, Ordering::SeqCst) < fail_first {
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
            let signature = headers.get("clutchcall-signature").and_then(|v| v.to_str().ok()).unwrap_or("");
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
            let secret = key.lock().unwrap().clone();
            if server::webhooks::signing::verify(signature, &secret, &body, now).is_err() {
                return StatusCode::BAD_REQUEST;
            }
            let record: LogRecord = serde_json::from_slice(&body).unwrap();
            assert_eq!(headers["clutchcall-event-id"].to_str().unwrap(), record.id.to_string());
            let _ = tx.send(record);
            StatusCode::NO_CONTENT
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().route("/hook", axum::routing::post(hook))).await });
    Receiver { url, secret, got, requests }
}

impl Receiver {
    async fn next(&mut self) -> LogRecord {
        tokio::time::timeout(Duration::from_secs(20), self.got.recv()).await.expect("a delivery within 20 s").expect("receiver open")
    }
}

async fn add_webhook(admin: &reqwest::Client, app: &TestApp, url: &str, types: &[&str]) -> reqwest::Response {
    let mut form = vec![("url".to_string(), url.to_string())];
    for (i, t) in types.iter().enumerate() {
        form.push((format!("types[{i}]"), t.to_string()));
    }
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    call(admin, app, "add_webhook", &form).await
}

both_backends_with!(
    a_webhook_gets_every_event_of_a_call_in_order_signed_and_retried,
    |c: &mut server::config::Config| {
        c.webhooks.allow_private = true;
        c.webhooks.first_retry_ms = 50;
    },
    |app: TestApp| async move {
        let admin = admin(&app).await;
        let mut hook = receiver(2).await;
        let res = add_webhook(&admin, &app, &hook.url, &[]).await;
        assert_eq!(res.status(), StatusCode::OK);
        let added: NewWebhook = res.json().await.unwrap();
        *hook.secret.lock().unwrap() = added.secret.clone();

        let session = full_call(&app).await;
        let mut got = Vec::new();
        while got.len() < 4 {
            got.push(hook.next().await);
        }
        assert_eq!(got.iter().map(|r| r.event.kind()).collect::<Vec<_>>(), ["call.raised", "call.offered", "call.accepted", "session.lifecycle"]);
        assert!(got.iter().all(|r| r.session_id.as_deref() == Some(&session)));
        assert!(got.windows(2).all(|w| w[1].id == w[0].id + 1), "in order, none skipped");
        assert_eq!(hook.requests.load(Ordering::SeqCst), 6, "two refused, then four delivered");

        // The delivery log: the first event's two failures, then its
        // success. The last delivery is logged once the receiver has
        // answered (after it handed the record over here): poll for it.
        let listed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let listed: Integrations = call(&admin, &app, "load_integrations", &[]).await.json().await.unwrap();
                if listed.webhooks[0].delivered_id == got[3].id {
                    return listed;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the last delivery is logged");
        let view = &listed.webhooks[0];
        let first: Vec<_> = view.deliveries.iter().filter(|d| d.event_id == got[0].id).collect();
        let mut statuses: Vec<Option<u16>> = first.iter().map(|d| d.status).collect();
        statuses.sort();
        assert_eq!(statuses, [Some(204), Some(500), Some(500)]);
        assert!(!serde_json::to_string(&listed).unwrap().contains(&added.secret), "the secret is shown once");

        // Resend: the same record once more, logged as a resend.
        let resent = call(&admin, &app, "resend_webhook", &[("webhook_id", added.id.as_str()), ("event_id", &got[1].id.to_string())]).await;
        assert_eq!(resent.status(), StatusCode::OK);
        assert_eq!(hook.next().await.id, got[1].id);

        // An endpoint for some types gets only those.
        let mut only = receiver(0).await;
        let added: NewWebhook = add_webhook(&admin, &app, &only.url, &["call.accepted"]).await.json().await.unwrap();
        *only.secret.lock().unwrap() = added.secret;
        full_call(&app).await;
        assert_eq!(only.next().await.event.kind(), "call.accepted");
        // The screen lists each endpoint's own attempts.
        // The attempt is logged once the receiver has answered: poll for it.
        let listed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let listed: Integrations = call(&admin, &app, "load_integrations", &[]).await.json().await.unwrap();
                if listed.webhooks.iter().any(|w| w.id == added.id && !w.deliveries.is_empty()) {
                    return listed;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the filtered endpoint's attempt is listed");
        let filtered = listed.webhooks.iter().find(|w| w.id == added.id).unwrap();
        assert!(filtered.deliveries.iter().all(|d| d.kind == "call.accepted"), "only its own attempts: {:?}", filtered.deliveries);
        let first = listed.webhooks.iter().find(|w| w.id != added.id).unwrap();
        assert!(first.deliveries.len() > filtered.deliveries.len() && first.deliveries.iter().any(|d| d.kind == "call.raised"));
        assert!(first.deliveries.windows(2).all(|w| w[0].at >= w[1].at), "newest first");
        assert_eq!(add_webhook(&admin, &app, &only.url, &["call.rised"]).await.status(), StatusCode::UNPROCESSABLE_ENTITY);
        app.finish().await;
    }
);

#[tokio::test]
async fn a_webhook_to_a_private_address_is_refused_unless_allowed() {
    let app = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    let admin = admin(&app).await;
    for url in ["http://127.0.0.1:9/hook", "http://10.0.0.7/hook", "http://169.254.169.254/latest", "http://localhost:9/", "ftp://example.com/"] {
        let res = add_webhook(&admin, &app, url, &[]).await;
        assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY, "{url}");
    }
    app.finish().await;
}

/// The real binary, killed with SIGKILL after an event committed and before
/// its delivery succeeded: restarted, it delivers the event (the outbox is
/// the truth), then goes on in order.
async fn kill9_between_commit_and_delivery_loses_no_event(database_url: Option<String>) {
    use common::process::ServerProcess;
    let scratch = tempfile::tempdir().unwrap();
    let start = || {
        let mut command = common::process::command(scratch.path());
        command
            .env("CLUTCHCALL_ADDR", "127.0.0.1:0")
            .env("CLUTCHCALL_WEBHOOK_ALLOW_PRIVATE", "1")
            .env("CLUTCHCALL_WEBHOOK_RETRY_MS", "50")
            // Restarted under its name, it takes its webhook claims back at once.
            .env("CLUTCHCALL_INSTANCE", format!("kill9-hooks-{}", scratch.path().file_name().unwrap().to_string_lossy()));
        if let Some(url) = &database_url {
            command.env("DATABASE_URL", url);
        }
        ServerProcess::start(command)
    };
    let server = start().await;
    let admin = browser();
    let signed = admin
        .post(format!("{}/api/sign_in", server.base))
        .header("origin", &server.base)
        .form(&[("email", ADMIN), ("password", server::seed::DEMO_PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), StatusCode::OK);

    // The receiver is down (503) until the server has been killed.
    let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let requests = Arc::new(AtomicUsize::new(0));
    let (tx, mut got) = tokio::sync::mpsc::unbounded_channel::<LogRecord>();
    let (is_up, count) = (up.clone(), requests.clone());
    let hook = move |body: axum::body::Bytes| {
        let (is_up, count, tx) = (is_up.clone(), count.clone(), tx.clone());
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            if !is_up.load(Ordering::SeqCst) {
                return StatusCode::SERVICE_UNAVAILABLE;
            }
            let _ = tx.send(serde_json::from_slice(&body).unwrap());
            StatusCode::OK
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().route("/hook", axum::routing::post(hook))).await });
    let added = admin.post(format!("{}/api/add_webhook", server.base)).header("origin", &server.base).form(&[("url", url.as_str())]).send().await.unwrap();
    assert_eq!(added.status(), StatusCode::OK);

    // Nobody is ready: the call is raised and queued (two records).
    let raised = common::http()
        .post(format!("{}/v1/sessions", server.base))
        .bearer_auth(server::seed::demo_robot_token("uk-pick-01"))
        .json(&serde_json::json!({"robotId": "uk-pick-01"}))
        .send()
        .await
        .unwrap();
    assert_eq!(raised.status(), StatusCode::ACCEPTED);
    let session: serde_json::Value = raised.json().await.unwrap();
    // Wait until a delivery was attempted (and refused), then kill.
    tokio::time::timeout(Duration::from_secs(20), async {
        while requests.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a delivery attempt within 20 s");
    server.kill9().await;
    up.store(true, Ordering::SeqCst);

    let server = start().await;
    let first = tokio::time::timeout(Duration::from_secs(30), got.recv()).await.expect("delivered after the restart").unwrap();
    let second = tokio::time::timeout(Duration::from_secs(30), got.recv()).await.expect("delivered after the restart").unwrap();
    assert_eq!((first.event.kind(), second.event.kind()), ("call.raised", "call.queued"));
    assert_eq!(first.session_id.as_deref(), session["sessionId"].as_str());
    assert_eq!(second.id, first.id + 1);
    server.kill9().await;
}

#[tokio::test]
async fn kill9_between_commit_and_delivery_loses_no_event_sqlite() {
    kill9_between_commit_and_delivery_loses_no_event(None).await;
}

#[tokio::test]
async fn kill9_between_commit_and_delivery_loses_no_event_postgres() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    kill9_between_commit_and_delivery_loses_no_event(Some(url)).await;
    common::drop_pg_database(&name).await;
}

both_backends_with!(
    an_endpoint_failing_for_a_day_is_disabled_the_overview_says_so_and_it_can_be_enabled_again,
    |c: &mut server::config::Config| {
        c.webhooks.allow_private = true;
        c.webhooks.first_retry_ms = 20;
    },
    |app: TestApp| async move {
        let admin = admin(&app).await;
        let hook = receiver(usize::MAX).await;
        let added: NewWebhook = add_webhook(&admin, &app, &hook.url, &[]).await.json().await.unwrap();
        app.raise("ue-pal-01").await;
        let state = |admin: reqwest::Client, app_url: String| async move {
            let listed: Integrations = admin.post(format!("{app_url}/api/load_integrations")).header("origin", &app_url).send().await.unwrap().json().await.unwrap();
            listed.webhooks[0].state
        };
        // Failing, retried…
        let until = |want: domain::integrations::WebhookState| {
            let (admin, base) = (admin.clone(), app.base.clone());
            async move {
                tokio::time::timeout(Duration::from_secs(20), async {
                    while state(admin.clone(), base.clone()).await != want {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                })
                .await
                .unwrap_or_else(|_| panic!("the endpoint became {want:?} within 20 s"))
            }
        };
        until(domain::integrations::WebhookState::Failing).await;
        // …for a day (as the database says): the next failure disables it.
        let day_ago = server::clock::now_ms() - domain::integrations::DISABLE_AFTER_MS - 1;
        common::execute(&app.database_url(), &format!("UPDATE webhook_endpoints SET failing_since = {day_ago}")).await;
        until(domain::integrations::WebhookState::Disabled).await;
        let board: domain::board::OpsBoard = call(&admin, &app, "load_ops_board", &[]).await.json().await.unwrap();
        assert_eq!(board.disabled_webhooks, [hook.url.clone()], "the admins are told on the overview");
        let tried = hook.requests.load(Ordering::SeqCst);

        // Enabled again, it goes on from where it stopped.
        assert_eq!(call(&admin, &app, "enable_webhook", &[("webhook_id", &added.id)]).await.status(), StatusCode::OK);
        tokio::time::timeout(Duration::from_secs(20), async {
            while hook.requests.load(Ordering::SeqCst) == tried {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("retried after it was enabled");
        let board: domain::board::OpsBoard = call(&admin, &app, "load_ops_board", &[]).await.json().await.unwrap();
        assert!(board.disabled_webhooks.is_empty());
        assert_eq!(call(&admin, &app, "enable_webhook", &[("webhook_id", &added.id)]).await.status(), StatusCode::CONFLICT, "not disabled");
        assert_eq!(call(&admin, &app, "remove_webhook", &[("webhook_id", &added.id)]).await.status(), StatusCode::OK);
        assert_eq!(call(&admin, &app, "remove_webhook", &[("webhook_id", &added.id)]).await.status(), StatusCode::NOT_FOUND);
        app.finish().await;
    }
);
