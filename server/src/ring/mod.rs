//! The ring channel's server side: one WebSocket per tab at `/ws`.
//!
//! - A console tab (an operator, `/ws`) subscribes to its operator topic,
//!   counts as a presence while open, and sends commands to the engine.
//!   A tab silent for the presence TTL is closed, so a tab is either
//!   connected and hearing its offers, or gone and lapsing: never deaf.
//! - A watch tab (an admin's live screen, `/ws?watch=org`) subscribes to
//!   the org topic and never becomes a presence.
//!
//! A tab that falls behind its topic gets a resync; one that stops reading
//! is disconnected (its queue is bounded) and resyncs when it reconnects.
//! A person holds at most `TABS_PER_PERSON` sockets, and sign-out closes
//! them at once. (The `Origin` of the upgrade is checked by `http::origin`.)

mod ears;
mod party;

use crate::bus::{Delivery, Subscription};
use crate::http::socket_writer::{self, Gone, Writer};
use crate::engine::{EngineError, OperatorPresence};
use crate::services::Principal;
use crate::state::AppState;
use crate::services::{Ended, TabPass};
use ears::{Ears, Heard};
use domain::events::{Event, OperatorEvent, Topic};
use domain::models::{Offer, PresenceState, Role};
use domain::ring::{valid_aux_reason, ConsoleMsg, MyPresence, RingError, RingMsg, MAX_FRAME_BYTES};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::stream::SplitStream;
use futures::StreamExt;
use serde::Deserialize;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Each socket's read and write buffer (they grow for a larger frame).
/// Small for memory, and because tungstenite zero-fills the whole read
/// buffer before every read (snapview/tungstenite-rs#547).
const SOCKET_BUFFER_BYTES: usize = 4 * 1024;
/// Messages a tab may have waiting before it counts as not reading.
const TAB_QUEUE: usize = 256;

pub fn my_presence(p: &OperatorPresence) -> MyPresence {
    MyPresence { state: p.state, since_ms: p.since, aux_reason: p.aux_reason.clone(), current_call: p.current_call.clone() }
}

#[derive(Deserialize)]
pub struct WsParams {
    /// `org`: an admin's live screen; `mine`: the sessions one is a party to.
    watch: Option<String>,
}

/// Who a tab belongs to.
struct TabOwner {
    token: String,
    org_id: String,
    user_id: String,
    /// The socket's place among the person's tabs; ends with the sign-in
    /// (signed out, expired, password changed) or a change of their
    /// membership of the org (removed, a new role). Given back by the
    /// writer's `finish`, before the close.
    pass: TabPass,
}

/// `GET /ws`: upgrades a signed-in operator's console tab, an admin's
/// watch tab with `?watch=org`, or anyone's `?watch=mine` (their sessions).
pub async fn ws_handler(ws: WebSocketUpgrade, State(state): State<AppState>, principal: Principal, Query(params): Query<WsParams>) -> Response {
    let Principal::User { token, user } = principal else {
        return (StatusCode::FORBIDDEN, "people only").into_response();
    };
    let Some(org) = user.selected_org.clone() else {
        return (StatusCode::FORBIDDEN, "choose an organisation first").into_response();
    };
    let socket = match params.watch.as_deref() {
        Some("org" | "mine") if org.role == Role::Admin => Socket::OrgWatch,
        Some("org") => return (StatusCode::FORBIDDEN, "admins only").into_response(),
        Some("mine") => Socket::PartyWatch,
        Some(_) => return (StatusCode::BAD_REQUEST, "watch is org or mine").into_response(),
        None if org.role.grants(Role::Operator) => Socket::Console,
        None => return (StatusCode::FORBIDDEN, "operators only").into_response(),
    };
    // The socket ends with the sign-in (expiry included) or a change of
    // the person's membership, not at its next command.
    let pass = match state.accounts.socket_pass(&token, &user.user_id, &org.org_id, org.role).await {
        Ok(pass) => pass,
        Err(refused) => return refused.into_response(),
    };
    let owner = TabOwner { token, org_id: org.org_id, user_id: user.user_id, pass };
    // tungstenite's 128 KiB read and write buffers per socket were most of
    // the server's memory with 1,000 consoles open; frames here are small.
    let ws = ws
        .max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .read_buffer_size(SOCKET_BUFFER_BYTES)
        .write_buffer_size(SOCKET_BUFFER_BYTES)
        .max_write_buffer_size(4 * MAX_FRAME_BYTES);
    match socket {
        Socket::OrgWatch => ws.on_upgrade(move |socket| serve_watch(state, owner, socket, None)),
        Socket::PartyWatch => {
            let parties = party::Parties::new(&owner.user_id, &owner.org_id);
            ws.on_upgrade(move |socket| serve_watch(state, owner, socket, Some(parties)))
        }
        Socket::Console => ws.on_upgrade(move |socket| serve_console(state, owner, socket)),
    }
}

/// What a `/ws` connection is.
enum Socket {
    /// An operator's console tab.
    Console,
    /// An admin's live screen: everything in the org.
    OrgWatch,
    /// Anyone's: the sessions they are a party to.
    PartyWatch,
}

/// A tab's writer: its messages go as JSON text (`http::socket_writer`).
fn tab_writer(sink: futures::stream::SplitSink<WebSocket, Message>) -> (mpsc::Sender<RingMsg>, Writer, Gone) {
    socket_writer::spawn(sink, TAB_QUEUE, "tab", |msg: RingMsg| serde_json::to_string(&msg).ok().map(|text| Message::Text(text.into())))
}

/// What the tab hears from now on: silent for the presence TTL, it is gone.
fn listen(state: &AppState, owner: &TabOwner, stream: SplitStream<WebSocket>, topic: Subscription, writer_gone: Gone) -> Ears<SplitStream<WebSocket>> {
    let ttl = Duration::from_millis(state.presence_ttl_ms.max(1) as u64);
    Ears::new(stream, topic, owner.pass.ended(), writer_gone, ttl)
}

fn welcome(owner: &TabOwner, state: &AppState, presence: OperatorPresence, offer: Option<Offer>) -> RingMsg {
    RingMsg::Welcome {
        operator_id: owner.user_id.clone(),
        name: presence.name.clone(),
        presence: my_presence(&presence),
        offer,
        pops: state.robots.pops(&owner.org_id),
        server_now_ms: state.engine.clock().now_ms(),
    }
}

async fn serve_console(state: AppState, owner: TabOwner, socket: WebSocket) {
    let (sink, stream) = socket.split();
    let (tx, writer, writer_gone) = tab_writer(sink);
    // Subscribe before reading the presence, so no event falls in between.
    let topic = state.engine.subscribe(&Topic::operator(&owner.org_id, &owner.user_id));
    // This tab, as the dispatcher counts it (unique across instances).
    let tab = uuid::Uuid::now_v7().simple().to_string();
    // The operator's presence as this tab last heard it.
    let mut shown = match state.engine.tab_opened(&owner.org_id, &owner.user_id, &tab).await {
        Ok((presence, offer)) => {
            let shown = presence.state;
            let _ = tx.send(welcome(&owner, &state, presence, offer)).await;
            shown
        }
        Err(e) => {
            tracing::warn!(error = %e, "console refused");
            let _ = tx.send(RingMsg::error(refusal(&e))).await;
            writer.finish(tx, owner).await;
            return;
        }
    };
    // Heard from now: the wait for the dispatcher above is not its silence.
    let mut ears = listen(&state, &owner, stream, topic, writer_gone);
    let mut last_seen = state.engine.clock().now_ms();
    // When the database last confirmed the sign-in (see `still_signed_in`).
    let mut checked = Instant::now();
    loop {
        match ears.next().await {
            Heard::Text(text) => {
                last_seen = state.engine.clock().now_ms();
                if text.is_empty() {
                    continue;
                }
                let msg = match serde_json::from_str::<ConsoleMsg>(&text) {
                    Ok(msg) => msg,
                    Err(_) => {
                        let _ = tx.try_send(RingMsg::error(RingError::Unreadable));
                        continue;
                    }
                };
                if !matches!(msg, ConsoleMsg::Heartbeat | ConsoleMsg::Ping { .. }) && !still_signed_in(&state, &owner, &mut checked).await {
                    tell_closing(&tx, Ended::CredentialEnded);
                    break;
                }
                if let Some(reply) = handle(&state, &owner, msg).await {
                    if tx.try_send(reply).is_err() {
                        break;
                    }
                }
            }
            Heard::Ended(why) => {
                tell_closing(&tx, why);
                break;
            }
            Heard::Gone { silent } => {
                if !silent {
                    // A closed tab (reload, navigation) gets the whole TTL to come back.
                    last_seen = state.engine.clock().now_ms();
                }
                break;
            }
            Heard::Delivery(Delivery::Event(Event::Operator(OperatorEvent::Rejoin))) => {
                // Not registered with the new dispatcher: the browser
                // reconnects (and registers) rather than lapse with it open.
                let Some((presence, offer)) = rejoin(&state, &owner, &tab, shown).await else { break };
                shown = presence.state;
                if tx.try_send(welcome(&owner, &state, presence, offer)).is_err() {
                    break;
                }
            }
            Heard::Delivery(Delivery::Event(Event::Operator(event))) => {
                // An open tab is never offline: "offline" told to it comes
                // from a dispatcher that has not heard of it yet (the org
                // moved; its Rejoin follows) and must not be what it rejoins as.
                if let OperatorEvent::Presence { presence } = &event {
                    if presence.state != PresenceState::Offline {
                        shown = presence.state;
                    }
                }
                let Some(msg) = told(event) else { continue };
                if tx.try_send(msg).is_err() {
                    tracing::info!(operator = %owner.user_id, "console tab not reading: disconnected (it resyncs on reconnect)");
                    break;
                }
            }
            Heard::Delivery(Delivery::Event(Event::Org(_))) => {}
            // (Boxed: a rare wait, whose size every console's task would otherwise carry.)
            Heard::Delivery(Delivery::Resync) => match ears.unless_ended(Box::pin(resync(&state, &owner))).await {
                Err(Heard::Ended(why)) => {
                    tell_closing(&tx, why);
                    break;
                }
                // Its writer failed, or the resync was not answered.
                Err(_) | Ok(Resynced::Unanswered) => {
                    // Closed by the server: a tab still heard from gets the
                    // TTL from now, not from its last frame (which may be
                    // most of a TTL ago); a silent one keeps its silence.
                    if ears.heard_within_ttl() {
                        last_seen = state.engine.clock().now_ms();
                    }
                    break;
                }
                Ok(Resynced::Welcome(presence, offer, notices)) => {
                    shown = presence.state;
                    // The Welcome, then what was told while this tab was
                    // behind (or, in cluster mode, before its topic was live
                    // here), to this tab alone, before any later delivery:
                    // the browser drops its notices at the Welcome, and a
                    // later event (a handover answered) must not be followed
                    // by the snapshot from before it.
                    let mut messages = std::iter::once(welcome(&owner, &state, presence, offer)).chain(notices.into_iter().filter_map(told));
                    if messages.any(|msg| tx.try_send(msg).is_err()) {
                        break;
                    }
                }
            },
            Heard::Delivery(Delivery::Closed) => break,
        }
    }
    writer.finish(tx, owner.pass).await;
    // Told once the socket is finished with: the dispatcher answers after
    // its commit, which may wait while the database is away.
    state.engine.tab_closed(&owner.org_id, &owner.user_id, &tab, last_seen).await;
}

/// How long a console told to resync waits for the org's dispatcher
/// before it closes (the browser then reconnects).
const RESYNC_WITHIN: Duration = Duration::from_secs(5);

/// What a console told to resync does next (unless its sign-in or its
/// writer ends first: `Ears::unless_ended`).
enum Resynced {
    /// The presence, offer and standing notices (`Desk::standing_notices`).
    Welcome(OperatorPresence, Option<Offer>, Vec<OperatorEvent>),
    /// Not all of them within `RESYNC_WITHIN`: the dispatcher did not
    /// answer, or (asked again to no avail) does not know the operator.
    /// The tab closes; its browser reconnects, and an opening tab is told
    /// all of it.
    Unanswered,
}

/// The console's presence, offer and standing notices for its `Welcome`
/// after a resync, each asked of the org's dispatcher again every 250 ms
/// for `RESYNC_WITHIN` at most: in cluster mode the resync may come from
/// this instance's NATS connection coming back while the owner's has not
/// yet (a forwarded request then finds nobody to answer), and the console
/// would otherwise close. The tab reads no frame meanwhile.
async fn resync(state: &AppState, owner: &TabOwner) -> Resynced {
    let (engine, org_id, operator_id) = (&state.engine, owner.org_id.as_str(), owner.user_id.as_str());
    let asked = async {
        loop {
            // Asked together: most often answered from one batch, a
            // consistent picture (and what changed after it follows on the
            // topic, read once both are sent).
            match tokio::join!(engine.console(org_id, operator_id), engine.standing_notices(org_id, operator_id)) {
                (Some((presence, offer)), Ok(notices)) => return Resynced::Welcome(presence, offer, notices),
                (_, notices) => tracing::debug!(notices = ?notices.err(), "the console's resync not answered yet: asked again"),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    tokio::time::timeout(RESYNC_WITHIN, asked).await.unwrap_or(Resynced::Unanswered)
}

/// Tells a tab closed because its sign-in or access ended why, if it is
/// told at all: a signed-out tab is (the browser goes to sign in); one
/// whose access changed is closed untold, and its reconnect is judged on
/// the access the person has now.
fn tell_closing(tx: &mpsc::Sender<RingMsg>, why: Ended) {
    if why == Ended::CredentialEnded {
        let _ = tx.try_send(RingMsg::error(RingError::SignedOut));
    }
}

/// What a console tab is told of an event on its operator's topic
/// (`Rejoin` is the tab's own business, not the browser's).
fn told(event: OperatorEvent) -> Option<RingMsg> {
    Some(match event {
        OperatorEvent::Offer { offer } => RingMsg::Offer { offer },
        OperatorEvent::OfferClosed { session_id, how } => RingMsg::OfferClosed { session_id, how },
        OperatorEvent::Presence { presence } => RingMsg::Presence { presence },
        OperatorEvent::InactivityWarning { session_id, stop_at_ms } => RingMsg::InactivityWarning { session_id, stop_at_ms },
        OperatorEvent::Chat { session_id, message } => RingMsg::Chat { session_id, message },
        OperatorEvent::Handover { notice } => RingMsg::Handover { notice },
        OperatorEvent::PlannedEndSoon { session_id, planned_end_ms } => RingMsg::PlannedEndSoon { session_id, planned_end_ms },
        OperatorEvent::Rejoin => return None,
    })
}

/// The org's dispatch moved to another instance (`OperatorEvent::Rejoin`):
/// this tab registers with the new dispatcher, and an operator who was in
/// the pool (ready, ringing or wrapping up) when it moved is ready again
/// there, not merely online. Answers the presence and offer to welcome
/// with; `None` when the new dispatcher could not be reached.
async fn rejoin(state: &AppState, owner: &TabOwner, tab: &str, shown: PresenceState) -> Option<(OperatorPresence, Option<Offer>)> {
    let (engine, org_id, operator_id) = (&state.engine, owner.org_id.as_str(), owner.user_id.as_str());
    let opened = match engine.tab_opened(org_id, operator_id, tab).await {
        Ok(opened) => opened,
        Err(e) => {
            tracing::warn!(error = %e, operator = %operator_id, "a console could not register with the org's new dispatcher");
            return None;
        }
    };
    let pooled = matches!(shown, PresenceState::Ready | PresenceState::Ringing | PresenceState::Acw);
    if pooled && opened.0.state == PresenceState::Aux && engine.operator_ready(org_id, operator_id, true).await.is_ok() {
        return engine.console(org_id, operator_id).await.or(Some(opened));
    }
    Some(opened)
}

/// A watch tab: the org's events (`parties`: only those about the
/// person's own sessions), for live screens to reload on.
async fn serve_watch(state: AppState, owner: TabOwner, socket: WebSocket, mut parties: Option<party::Parties>) {
    let (sink, stream) = socket.split();
    let (tx, writer, writer_gone) = tab_writer(sink);
    let org_topic = Topic::org(&owner.org_id);
    let topic = state.engine.subscribe(&org_topic);
    // The screen loaded its data before this subscription (the page, or
    // before a reconnect): what changed in between reaches it only by a
    // reload, so the socket's first word is `Resync`. A topic that is not
    // yet live here (a bus between instances still subscribing) says
    // `Resync` itself once it is, which is when reloading helps.
    if state.engine.is_live(&org_topic) {
        let _ = tx.try_send(RingMsg::Resync);
    }
    let mut ears = listen(&state, &owner, stream, topic, writer_gone);
    loop {
        let msg = match ears.next().await {
            Heard::Text(text) => match serde_json::from_str::<ConsoleMsg>(&text) {
                Ok(ConsoleMsg::Ping { nonce }) => RingMsg::Pong { nonce },
                _ => continue,
            },
            Heard::Ended(why) => {
                tell_closing(&tx, why);
                break;
            }
            Heard::Gone { .. } | Heard::Delivery(Delivery::Closed) => break,
            Heard::Delivery(Delivery::Event(Event::Org(event))) => {
                if let Some(parties) = parties.as_mut() {
                    if !parties.concerns(&state, &event).await {
                        continue;
                    }
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
    writer.finish(tx, owner).await;
}

/// How often a console's commands re-read its sign-in in the database.
const RECHECK: Duration = Duration::from_secs(10);

/// The sign-in behind the socket still holds, in the same org. Every change
/// that ends it (sign-out, password, expiry, removal, role, org switch) is
/// pushed to the socket's pass (services/tabs.rs), so a command is judged
/// on the pass, in memory. The database is asked too, at most every
/// `RECHECK`, as a backstop: a revocation another instance sent over NATS
/// may be lost (at most once), and nobody pushes a change made by hand.
async fn still_signed_in(state: &AppState, owner: &TabOwner, checked: &mut Instant) -> bool {
    if !owner.pass.holds() {
        return false;
    }
    if checked.elapsed() < RECHECK {
        return true;
    }
    *checked = Instant::now();
    matches!(state.accounts.role(&owner.token, &owner.org_id).await, Ok(Some(role)) if role.grants(Role::Operator))
}

/// What a console is told of the engine's refusal, whether of the tab or
/// of one message (the one mapping; details stay in the log).
fn refusal(e: &EngineError) -> RingError {
    match e {
        EngineError::NotFound(_) => RingError::NoOperatorProfile,
        EngineError::DispatchedElsewhere => RingError::DispatchedElsewhere,
        EngineError::NoOpenOffer => RingError::OfferNotOpen,
        EngineError::ImplausibleRtt => RingError::ImplausibleRtt,
        EngineError::Paused => RingError::SessionPaused,
        EngineError::Inactive => RingError::InactiveProfile,
        EngineError::Unavailable | EngineError::Store(_) => RingError::Unavailable,
        _ => RingError::Failed,
    }
}

/// One console message; the reply goes to this tab only.
async fn handle(state: &AppState, owner: &TabOwner, msg: ConsoleMsg) -> Option<RingMsg> {
    let (engine, org_id, operator_id) = (&state.engine, owner.org_id.as_str(), owner.user_id.as_str());
    let result = match msg {
        ConsoleMsg::Heartbeat => Ok(None),
        ConsoleMsg::Ping { nonce } => Ok(Some(RingMsg::Pong { nonce })),
        ConsoleMsg::Ready => engine.operator_ready(org_id, operator_id, true).await.map(|_| None),
        ConsoleMsg::Aux { reason } => match valid_aux_reason(&reason) {
            Some(reason) => engine.operator_aux(org_id, operator_id, &reason).await.map(|_| None),
            None => return Some(RingMsg::error(RingError::BadAuxReason)),
        },
        ConsoleMsg::Accept { session_id } => {
            engine.answer(org_id, operator_id, &session_id).await.map(|_| Some(RingMsg::Accepted { session_id }))
        }
        ConsoleMsg::Decline { session_id } => engine.decline(org_id, operator_id, &session_id).await.map(|_| None),
        // Only PoPs of the org's robots: anything else would be kept and
        // copied into every decision and presence event.
        ConsoleMsg::Rtt { pop, .. } if !state.robots.has_pop(org_id, &pop) => return Some(RingMsg::error(RingError::UnknownPop)),
        ConsoleMsg::Rtt { pop, rtt_ms } => engine.report_rtt(org_id, operator_id, &pop, rtt_ms).await.map(|_| None),
    };
    match result {
        Ok(reply) => reply,
        Err(e) => {
            let told = refusal(&e);
            if matches!(told, RingError::Failed | RingError::Unavailable) {
                tracing::warn!(error = %e, "console message failed");
            }
            Some(RingMsg::error(told))
        }
    }
}
