//! The floors ring-bench measures ClutchCall against, in the same run and
//! with the same client: a minimal axum server that does exactly the
//! exchanges of a call and no dispatch logic, on SQLite with the server's
//! own settings (WAL, `synchronous = NORMAL`).
//!
//! - `--mode full` (floor a): sign-in hands out a cookie; `/ws` consoles say
//!   Ready; a raise inserts the call, rings the next idle console (offer
//!   frame) and answers 201; Accept updates the row; DELETE updates it and
//!   the console is idle again.
//! - `--mode queue` (floor b): a raise inserts the call and answers 202.
//!
//! floor-server --mode full --db /tmp/floor.db   (prints "listening on http://…")

use domain::models::Offer;
use domain::ring::{ConsoleMsg, RingMsg};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Form, Json, Router};
use clutchcall_bench::parse_flags;
use futures::{SinkExt, StreamExt};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;
use std::collections::{HashMap, VecDeque};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

#[derive(Clone)]
struct Floor {
    db: SqlitePool,
    ring: bool,
    idle: Arc<Mutex<VecDeque<String>>>,
    tabs: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<RingMsg>>>>,
    /// Session → operator ringing or attached.
    held: Arc<Mutex<HashMap<String, String>>>,
    next: Arc<AtomicU64>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

async fn sign_in(Form(form): Form<HashMap<String, String>>) -> Response {
    let operator = form.get("email").and_then(|e| e.split('@').next()).unwrap_or_default().to_string();
    ([(header::SET_COOKIE, format!("cc_session={operator}; Path=/; HttpOnly"))], "{}").into_response()
}

async fn ws(ws: WebSocketUpgrade, State(floor): State<Floor>, headers: HeaderMap) -> Response {
    let cookie = app::session_cookie::SessionCookie { secure: false };
    let operator = cookie.tokens(&headers).into_iter().next().unwrap_or_default();
    // The server's console buffers: the floor pays no zero-fill of a read
    // buffer that ClutchCall does not (snapview/tungstenite-rs#547).
    ws.read_buffer_size(4 * 1024).write_buffer_size(4 * 1024).on_upgrade(move |socket| console(floor, operator, socket))
}

async fn console(floor: Floor, operator: String, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<RingMsg>();
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if sink.send(Message::Text(serde_json::to_string(&msg).unwrap().into())).await.is_err() {
                break;
            }
        }
    });
    floor.tabs.lock().unwrap().insert(operator.clone(), tx.clone());
    while let Some(Ok(Message::Text(text))) = stream.next().await {
        match serde_json::from_str::<ConsoleMsg>(&text) {
            Ok(ConsoleMsg::Ready) => floor.idle.lock().unwrap().push_back(operator.clone()),
            Ok(ConsoleMsg::Accept { session_id }) => {
                sqlx::query("UPDATE calls SET state = 'ACTIVE', started_at = ?1 WHERE id = ?2")
                    .bind(now_ms())
                    .bind(&session_id)
                    .execute(&floor.db)
                    .await
                    .unwrap();
                let _ = tx.send(RingMsg::Accepted { session_id });
            }
            _ => {}
        }
    }
}

async fn raise(State(floor): State<Floor>, Json(body): Json<serde_json::Value>) -> Response {
    let robot = body["robotId"].as_str().unwrap_or_default().to_string();
    let id = format!("ses-{}", floor.next.fetch_add(1, Ordering::Relaxed));
    let now = now_ms();
    sqlx::query("INSERT INTO calls (id, robot_id, state, raised_at) VALUES (?1, ?2, 'PENDING', ?3)")
        .bind(&id)
        .bind(&robot)
        .bind(now)
        .execute(&floor.db)
        .await
        .unwrap();
    let operator = if floor.ring { floor.idle.lock().unwrap().pop_front() } else { None };
    let Some(operator) = operator else {
        return (StatusCode::ACCEPTED, Json(serde_json::json!({ "status": "queued", "sessionId": id }))).into_response();
    };
    let offer = Offer {
        session_id: id.clone(),
        robot_id: robot,
        robot_model: "UR5e".into(),
        site: "Load Site".into(),
        rtt_ms: 275,
        operator_id: operator.clone(),
        offered_at: now,
        expires_at: now + 30_000,
        handover_from: None,
    };
    floor.held.lock().unwrap().insert(id.clone(), operator.clone());
    if let Some(tab) = floor.tabs.lock().unwrap().get(&operator) {
        let _ = tab.send(RingMsg::Offer { offer });
    }
    (StatusCode::CREATED, Json(serde_json::json!({ "status": "matched", "sessionId": id }))).into_response()
}

async fn end(State(floor): State<Floor>, Path(id): Path<String>) -> Response {
    sqlx::query("UPDATE calls SET state = 'CANCELLED', ended_at = ?1 WHERE id = ?2").bind(now_ms()).bind(&id).execute(&floor.db).await.unwrap();
    if let Some(operator) = floor.held.lock().unwrap().remove(&id) {
        floor.idle.lock().unwrap().push_back(operator);
    }
    Json(serde_json::json!({ "id": id, "lifecycle": "CANCELLED" })).into_response()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = parse_flags(&[("mode", "full"), ("db", "floor.db"), ("addr", "127.0.0.1:0")]).map_err(anyhow::Error::msg)?;
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", flags["db"]))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(std::time::Duration::from_secs(10));
    let db = SqlitePoolOptions::new().max_connections(8).connect_with(options).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS calls (id TEXT PRIMARY KEY, robot_id TEXT NOT NULL, state TEXT NOT NULL, \
         raised_at INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER)",
    )
    .execute(&db)
    .await?;
    let floor = Floor {
        db,
        ring: flags["mode"] == "full",
        idle: Arc::default(),
        tabs: Arc::default(),
        held: Arc::default(),
        next: Arc::default(),
    };
    let app = Router::new()
        .route("/api/sign_in", post(sign_in))
        .route("/ws", get(ws))
        .route("/v1/sessions", post(raise))
        .route("/v1/sessions/{id}", delete(end))
        .with_state(floor);
    let listener = tokio::net::TcpListener::bind(&flags["addr"]).await?;
    println!("floor ({}) listening on http://{}", flags["mode"], listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
