//! `/ws?watch=mine`: the org's changes that concern the sessions this
//! person is a party to — their client's sessions, the session they
//! operate — so the client screen and a non-admin's session detail stay
//! live without seeing anyone else's sessions. (Admins use `watch=org`.)

use super::{next, spawn_writer, Heard, TabOwner};
use crate::bus::Delivery;
use crate::http::AppState;
use app::events::{Event, OrgEvent, Topic};
use app::models::SessionRecord;
use app::ring::{ConsoleMsg, RingError, RingMsg};
use axum::extract::ws::WebSocket;
use futures::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// Sessions remembered per socket before the memory starts afresh.
const REMEMBERED: usize = 4_096;

/// Which sessions the person is a party to, learnt as events name them.
struct Parties {
    user_id: String,
    org_id: String,
    known: HashMap<String, bool>,
}

impl Parties {
    fn of(&self, record: &SessionRecord) -> bool {
        let me = Some(self.user_id.as_str());
        record.client_id.as_deref() == me || record.operator_id.as_deref() == me
    }

    fn remember(&mut self, session_id: &str, party: bool) {
        if self.known.len() >= REMEMBERED {
            self.known.clear();
        }
        self.known.insert(session_id.to_string(), party);
    }

    /// `fresh`: the operator may have changed (a lifecycle move), so the
    /// record is read again.
    async fn is_party(&mut self, state: &AppState, session_id: &str, fresh: bool) -> bool {
        if !fresh {
            if let Some(known) = self.known.get(session_id) {
                return *known;
            }
        }
        let party = match state.sessions.session(&self.org_id, session_id).await {
            Ok(Some(record)) => self.of(&record),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "session lookup for a party watch failed");
                false
            }
        };
        self.remember(session_id, party);
        party
    }

    /// Whether `event` concerns one of the person's sessions.
    async fn concerns(&mut self, state: &AppState, event: &OrgEvent) -> bool {
        match event {
            OrgEvent::Telemetry { session } => {
                let party = self.of(session);
                self.remember(&session.id, party);
                party
            }
            OrgEvent::Lifecycle { session_id, .. } => self.is_party(state, session_id, true).await,
            OrgEvent::Chat { session_id, .. } | OrgEvent::PlannedEnd { session_id, .. } => self.is_party(state, session_id, false).await,
            OrgEvent::Audit { entry } => match &entry.session_id {
                Some(session_id) => self.is_party(state, session_id, false).await,
                None => false,
            },
            OrgEvent::Presence { .. } | OrgEvent::RobotStatus { .. } | OrgEvent::Bookings { .. } => false,
        }
    }
}

pub(super) async fn serve_party_watch(state: AppState, owner: TabOwner, socket: WebSocket) {
    let (sink, mut stream) = socket.split();
    let (tx, writer) = spawn_writer(sink);
    let mut topic = state.engine.subscribe(&Topic::org(&owner.org_id));
    let ttl = Duration::from_millis(state.presence_ttl_ms.max(1) as u64);
    let expires = owner.sign_in_deadline(&state);
    let mut heard = Instant::now();
    let mut parties = Parties { user_id: owner.user_id.clone(), org_id: owner.org_id.clone(), known: HashMap::new() };
    loop {
        let msg = match next(&mut stream, &mut topic, &owner.pass, expires, heard, ttl).await {
            Heard::Text(text) => {
                heard = Instant::now();
                match serde_json::from_str::<ConsoleMsg>(&text) {
                    Ok(ConsoleMsg::Ping { nonce }) => RingMsg::Pong { nonce },
                    _ => continue,
                }
            }
            Heard::SignedOut => {
                let _ = tx.try_send(RingMsg::error(RingError::SignedOut));
                break;
            }
            Heard::Gone { .. } | Heard::Delivery(Delivery::Closed) => break,
            Heard::Delivery(Delivery::Event(Event::Org(event))) => {
                if !parties.concerns(&state, &event).await {
                    continue;
                }
                RingMsg::Org { event }
            }
            Heard::Delivery(Delivery::Event(Event::Operator(_))) => continue,
            Heard::Delivery(Delivery::Resync) => RingMsg::Resync,
        };
        if tx.try_send(msg).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}
