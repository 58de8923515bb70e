//! The ring channel's server side: one WebSocket per console tab at `/ws`,
//! authenticated by the session cookie and scoped to the selected org.
//! The hub routes the ACD's events to every open tab of the operator they
//! concern, and lapses an operator to `offline` when the last of their tabs
//! stops heartbeating (seed 003: presence is kept alive, not switched off).

use crate::acd::{Acd, AcdEvent, OfferClose, OperatorPresence};
use crate::clock::now_ms;
use crate::http::AppState;
use app::functions::SESSION_COOKIE;
use app::models::Role;
use app::ring::{valid_aux_reason, ConsoleMsg, MyPresence, OfferEnd, RingMsg};
use app::rules::cookie_value;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// How often lapsed presences are looked for.
const LAPSE_SWEEP: Duration = Duration::from_millis(500);

type OperatorKey = (String, String);

struct Console {
    tabs: HashMap<u64, mpsc::UnboundedSender<RingMsg>>,
    last_heartbeat: i64,
}

pub struct RingHub {
    acd: Arc<Acd>,
    consoles: Mutex<HashMap<OperatorKey, Console>>,
    next_tab: AtomicU64,
    presence_ttl_ms: i64,
}

pub fn my_presence(p: &OperatorPresence) -> MyPresence {
    MyPresence { state: p.state, since_ms: p.since, aux_reason: p.aux_reason.clone(), current_call: p.current_call.clone() }
}

impl RingHub {
    pub fn new(acd: Arc<Acd>, presence_ttl_ms: i64) -> Arc<RingHub> {
        Arc::new(RingHub { acd, consoles: Mutex::default(), next_tab: AtomicU64::new(1), presence_ttl_ms })
    }

    /// Starts routing ACD events to tabs and sweeping lapsed presences.
    pub fn spawn(self: &Arc<Self>) -> Vec<tokio::task::JoinHandle<()>> {
        let router = {
            let hub = self.clone();
            let mut events = self.acd.subscribe();
            tokio::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok(event) => hub.route(event),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::warn!(missed, "ring channel lagged behind the ACD; tabs resync on reconnect")
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                }
            })
        };
        let sweeper = {
            let hub = self.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(LAPSE_SWEEP);
                loop {
                    tick.tick().await;
                    hub.lapse_silent_operators().await;
                }
            })
        };
        vec![router, sweeper]
    }

    fn register(&self, key: &OperatorKey, tx: mpsc::UnboundedSender<RingMsg>) -> u64 {
        let tab = self.next_tab.fetch_add(1, Ordering::Relaxed);
        let mut consoles = self.consoles.lock().expect("consoles lock");
        let console = consoles.entry(key.clone()).or_insert_with(|| Console { tabs: HashMap::new(), last_heartbeat: now_ms() });
        console.tabs.insert(tab, tx);
        console.last_heartbeat = now_ms();
        tab
    }

    /// A closed tab stops counting; the presence stays until it lapses.
    fn unregister(&self, key: &OperatorKey, tab: u64) {
        if let Some(console) = self.consoles.lock().expect("consoles lock").get_mut(key) {
            console.tabs.remove(&tab);
        }
    }

    fn heartbeat(&self, key: &OperatorKey) {
        if let Some(console) = self.consoles.lock().expect("consoles lock").get_mut(key) {
            console.last_heartbeat = now_ms();
        }
    }

    fn send_to(&self, key: &OperatorKey, msg: RingMsg) {
        if let Some(console) = self.consoles.lock().expect("consoles lock").get(key) {
            for tab in console.tabs.values() {
                let _ = tab.send(msg.clone());
            }
        }
    }

    fn route(&self, event: AcdEvent) {
        match event {
            AcdEvent::OfferRaised { org_id, offer } => {
                self.send_to(&(org_id, offer.operator_id.clone()), RingMsg::Offer { offer });
            }
            AcdEvent::OfferClosed { org_id, operator_id, session_id, how } => {
                let how = match how {
                    OfferClose::Accepted => OfferEnd::Accepted,
                    OfferClose::Declined => OfferEnd::Declined,
                    OfferClose::Expired => OfferEnd::Expired,
                    OfferClose::Withdrawn => OfferEnd::Withdrawn,
                };
                self.send_to(&(org_id, operator_id), RingMsg::OfferClosed { session_id, how });
            }
            AcdEvent::PresenceChanged { org_id, presence } => {
                self.send_to(&(org_id, presence.operator_id.clone()), RingMsg::Presence { presence: my_presence(&presence) });
            }
            AcdEvent::SessionChanged { .. } => {}
        }
    }

    /// Operators whose last tab went silent for the TTL go `offline`; their
    /// tabs, if any are still open but mute, are closed.
    async fn lapse_silent_operators(&self) {
        let now = now_ms();
        let lapsed: Vec<OperatorKey> = {
            let mut consoles = self.consoles.lock().expect("consoles lock");
            let keys: Vec<OperatorKey> = consoles
                .iter()
                .filter(|(_, c)| now - c.last_heartbeat > self.presence_ttl_ms)
                .map(|(k, _)| k.clone())
                .collect();
            for key in &keys {
                consoles.remove(key);
            }
            keys
        };
        for (org_id, operator_id) in lapsed {
            tracing::info!(org = %org_id, operator = %operator_id, "presence lapsed: offline");
            if let Err(e) = self.acd.operator_offline(&org_id, &operator_id).await {
                tracing::warn!(error = %e, "could not take a lapsed operator offline");
            }
        }
    }
}

/// `GET /ws`: upgrades a signed-in operator's console tab.
pub async fn ws_handler(ws: WebSocketUpgrade, State(state): State<AppState>, headers: HeaderMap) -> Response {
    let token = headers.get(header::COOKIE).and_then(|v| v.to_str().ok()).and_then(|c| cookie_value(c, SESSION_COOKIE));
    let Some(token) = token else {
        return (StatusCode::UNAUTHORIZED, "sign in first").into_response();
    };
    let user = match state.backend.session_user(token).await {
        Ok(Some(user)) => user,
        Ok(None) => return (StatusCode::UNAUTHORIZED, "the sign-in session has ended").into_response(),
        Err(_) => return (StatusCode::INTERNAL_SERVER_ERROR, "try again").into_response(),
    };
    let Some(org) = user.selected_org.filter(|o| o.role.grants(Role::Operator)) else {
        return (StatusCode::FORBIDDEN, "operators only").into_response();
    };
    let key = (org.org_id, user.user_id);
    ws.on_upgrade(move |socket| serve_tab(state, key, socket))
}

async fn serve_tab(state: AppState, key: OperatorKey, socket: WebSocket) {
    let hub = state.ring.clone();
    let (org_id, operator_id) = (key.0.clone(), key.1.clone());
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<RingMsg>();
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let Ok(text) = serde_json::to_string(&msg) else { continue };
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });

    // Register before reading the presence, so no event falls in between.
    let tab = hub.register(&key, tx.clone());
    let welcome = match state.acd.operator_signed_in(&org_id, &operator_id).await {
        Ok((presence, offer)) => {
            let mut pops: Vec<String> = match state.store.robots(&org_id).await {
                Ok(robots) => robots.into_iter().map(|r| r.pop).collect(),
                Err(_) => Vec::new(),
            };
            pops.sort();
            pops.dedup();
            RingMsg::Welcome {
                operator_id: operator_id.clone(),
                name: presence.name.clone(),
                presence: my_presence(&presence),
                offer,
                pops,
                server_now_ms: now_ms(),
            }
        }
        Err(e) => RingMsg::Error { message: format!("Cannot take calls here: {e}.") },
    };
    let refused = matches!(welcome, RingMsg::Error { .. });
    let _ = tx.send(welcome);

    while !refused {
        let Some(Ok(frame)) = stream.next().await else { break };
        let text = match frame {
            Message::Text(text) => text,
            Message::Close(_) => break,
            _ => continue,
        };
        hub.heartbeat(&key);
        let reply = match serde_json::from_str::<ConsoleMsg>(&text) {
            Ok(msg) => handle(&state, &org_id, &operator_id, msg).await,
            Err(_) => Some(RingMsg::Error { message: "Unreadable message.".into() }),
        };
        if let Some(reply) = reply {
            let _ = tx.send(reply);
        }
    }
    hub.unregister(&key, tab);
    drop(tx);
    let _ = writer.await;
}

/// One console message; the reply goes to this tab only.
async fn handle(state: &AppState, org_id: &str, operator_id: &str, msg: ConsoleMsg) -> Option<RingMsg> {
    let acd = &state.acd;
    let result = match msg {
        ConsoleMsg::Heartbeat => Ok(None),
        ConsoleMsg::Ping { nonce } => Ok(Some(RingMsg::Pong { nonce })),
        ConsoleMsg::Ready => acd.operator_ready(org_id, operator_id, true).await.map(|_| None),
        ConsoleMsg::Aux { reason } => match valid_aux_reason(&reason) {
            Some(reason) => acd.operator_aux(org_id, operator_id, &reason).await.map(|_| None),
            None => return Some(RingMsg::Error { message: "Give a short reason (up to 64 characters).".into() }),
        },
        ConsoleMsg::Accept { session_id } => {
            acd.accept(org_id, operator_id, &session_id).await.map(|s| Some(RingMsg::Accepted { session_id: s.id }))
        }
        ConsoleMsg::Decline { session_id } => acd.decline(org_id, operator_id, &session_id).await.map(|_| None),
        ConsoleMsg::Rtt { pop, rtt_ms } => acd.report_rtt(org_id, operator_id, &pop, rtt_ms).await.map(|_| None),
    };
    match result {
        Ok(reply) => reply,
        Err(crate::acd::AcdError::NoOpenOffer) => {
            Some(RingMsg::Error { message: "That offer is no longer open: it was answered, withdrawn or expired.".into() })
        }
        Err(e) => {
            tracing::warn!(error = %e, "console message failed");
            Some(RingMsg::Error { message: "The server could not do that; try again.".into() })
        }
    }
}
