//! Rule D11 with a real crash: the server binary runs as a child process
//! under load (consoles ringing, calls raised), is SIGKILLed mid-stream and
//! restarted on the same database. Every call it acknowledged (201/202) is
//! there; queued calls are served; open offers keep ringing or move on.

mod common;

use domain::models::Offer;
use domain::ring::{ConsoleMsg, RingMsg};
use server::seed::{load_operator_email, load_org, load_robot_token, LOAD_ORG_ID, LOAD_PASSWORD};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use common::process::ServerProcess;

const OPERATORS: usize = 12;
const CALLS: usize = 240;
/// Acknowledged calls before the kill.
const KILL_AFTER: usize = 60;

/// Starts the real binary on `database_url`; waits for its listening line.
async fn start(database_url: &str, data_dir: &std::path::Path) -> ServerProcess {
    let mut command = common::process::command(data_dir);
    command
        .env("CLUTCHCALL_ADDR", "127.0.0.1:0")
        .env("DATABASE_URL", database_url)
        .env("CLUTCHCALL_DEMO", "0")
        .env("CLUTCHCALL_SIGNIN_PER_MINUTE", "100000")
        // The restarted server is the same instance (as a supervisor would
        // restart it): it takes its orgs' leases back at once.
        .env("CLUTCHCALL_INSTANCE", format!("kill9-{}", data_dir.file_name().unwrap().to_string_lossy()));
    ServerProcess::start(command).await
}

async fn signed_in_tab(base: &str, i: usize) -> common::Tab {
    let res = common::browser()
        .post(format!("{base}/api/sign_in"))
        .header("origin", base)
        .form(&[("email", load_operator_email(i).as_str()), ("password", LOAD_PASSWORD)])
        .send()
        .await
        .expect("sign in");
    let cookie = res.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    common::Tab::open_at(base, &cookie, "/ws").await
}

fn welcome_offer(msg: RingMsg) -> Option<Option<Offer>> {
    match msg {
        RingMsg::Welcome { offer, .. } => Some(offer),
        _ => None,
    }
}

async fn kill9_keeps_every_acknowledged_call(database_url: String, scratch: tempfile::TempDir) {
    let store = server::store::connect(&database_url).await.unwrap();
    // One more operator than the consoles: someone free after the restart.
    store.seed(&load_org(OPERATORS + 1, CALLS)).await.unwrap();
    let server = start(&database_url, scratch.path()).await;

    // Consoles ready, so calls are offered as well as queued.
    let mut tabs = Vec::new();
    for i in 0..OPERATORS {
        let mut tab = signed_in_tab(&server.base, i).await;
        tab.until(welcome_offer).await;
        tab.send(ConsoleMsg::Ready).await;
        tab.until(|m| match m {
            RingMsg::Presence { presence } if presence.state == domain::models::PresenceState::Ready => Some(()),
            _ => None,
        })
        .await;
        tabs.push(tab);
    }

    let acknowledged = Arc::new(Mutex::new(Vec::<(u16, String)>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let client = common::http();
    let gate = Arc::new(tokio::sync::Semaphore::new(8));
    let mut calls = Vec::new();
    for i in 0..CALLS {
        let (client, base, gate, acknowledged, count) = (client.clone(), server.base.clone(), gate.clone(), acknowledged.clone(), count.clone());
        calls.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            let res = client
                .post(format!("{base}/v1/sessions"))
                .bearer_auth(load_robot_token(i))
                .json(&serde_json::json!({ "robotId": format!("lr-{i:03}") }))
                .send()
                .await;
            // A call the crash cut off was never acknowledged: nothing to keep.
            let Ok(res) = res else { return };
            let status = res.status().as_u16();
            let Ok(body) = res.json::<serde_json::Value>().await else { return };
            assert!(status == 201 || status == 202, "{status}: {body}");
            acknowledged.lock().unwrap().push((status, body["sessionId"].as_str().unwrap().to_string()));
            count.fetch_add(1, Ordering::SeqCst);
        }));
    }
    while count.load(Ordering::SeqCst) < KILL_AFTER {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill9().await;
    for call in calls {
        let _ = call.await;
    }
    drop(tabs);
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= KILL_AFTER, "{} acknowledged", acknowledged.len());
    assert!(acknowledged.len() < CALLS, "the kill landed mid-stream");
    let matched = acknowledged.iter().filter(|(status, _)| *status == 201).count();
    assert!(matched > 0, "some calls were offered before the kill");

    // Restart on the same database.
    let server = start(&database_url, scratch.path()).await;
    let url = database_url.as_str();
    let pending: HashSet<String> = {
        let ids: Vec<String> = if url.starts_with("postgres") {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query_scalar("SELECT id FROM sessions WHERE lifecycle = 'PENDING'").fetch_all(&mut conn).await.unwrap()
        } else {
            use sqlx::Connection;
            let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::query_scalar("SELECT id FROM sessions WHERE lifecycle = 'PENDING'").fetch_all(&mut conn).await.unwrap()
        };
        ids.into_iter().collect()
    };
    for (status, id) in &acknowledged {
        assert!(pending.contains(id), "acknowledged ({status}) call {id} survived the kill");
    }
    let orphans = common::scalar(
        url,
        "SELECT COUNT(*) FROM sessions s WHERE s.lifecycle = 'PENDING' AND s.queued_at IS NULL \
         AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.session_id = s.id AND o.status = 'open')",
    )
    .await;
    assert_eq!(orphans, 0, "every pending call is either ringing or queued");

    // Open offers keep ringing: a ringing operator's reconnecting tab is rung again.
    let ringing: Vec<(String, String)> = store
        .open_offers()
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.org_id == LOAD_ORG_ID)
        .map(|o| (o.operator_id, o.session_id))
        .collect();
    assert!(!ringing.is_empty(), "offers inside their window survive");
    let (operator, session) = &ringing[0];
    let i: usize = operator.trim_start_matches("u-load-").parse().unwrap();
    let mut tab = signed_in_tab(&server.base, i).await;
    let offer = tab.until(welcome_offer).await.expect("still ringing after the restart");
    assert_eq!(&offer.session_id, session);

    // Queued calls are served: an operator with no offer says Ready and rings.
    let mut tab = signed_in_tab(&server.base, OPERATORS).await;
    tab.until(welcome_offer).await;
    tab.send(ConsoleMsg::Ready).await;
    let served = tab.until(|m| match m { RingMsg::Offer { offer } => Some(offer), _ => None }).await;
    assert!(pending.contains(&served.session_id), "a queued call from before the kill");

    server.kill9().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d11_kill9_sqlite() {
    let scratch = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", scratch.path().join("clutchcall.db").display());
    kill9_keeps_every_acknowledged_call(url, scratch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d11_kill9_postgres() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    kill9_keeps_every_acknowledged_call(url, tempfile::tempdir().unwrap()).await;
    common::drop_pg_database(&name).await;
}
