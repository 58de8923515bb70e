//! `GET /relay/{session}`: a socket on the session's relay channel. The
//! edge agent joins with its robot's bearer token (its own session only),
//! the cockpit with the cookie of the operator in control; nobody else,
//! and nobody from another org (404, as if the session did not exist).
//! Each socket holds a pass tied to the credential that opened it: the
//! cockpit's closes with the sign-in or a change of the operator's
//! membership, the robot's when its token is rotated or it is retired.
//!
//! `GET /relay/{session}/watch`: an admin's live view of a session of their
//! org (read-only: it hears what the cockpit hears and the operator's
//! actions, and nothing it sends reaches the robot), logged in the
//! session's activity as SUPERVISOR_JOINED and SUPERVISOR_LEFT.

use super::channel::{Channel, Side, MAX_VECTOR};
use super::recording::Sample;
use crate::http::socket_writer;
use crate::services::Principal;
use crate::state::AppState;
use crate::services::{Credential, TabPass};
use domain::models::{LifecycleState, Role, SessionRecord};
use domain::relay::{CameraFrame, RelayMsg};
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// How long a closing socket reads on for the peer's answer to its close.
const CLOSE_ANSWERED_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
/// Frames a socket may have waiting; past it the newest are dropped.
const SOCKET_QUEUE: usize = 64;
/// The largest frame (a camera JPEG).
const MAX_FRAME_BYTES: usize = 512 * 1024;
/// What a socket reads at a time (a camera JPEG takes a few reads). Not
/// tungstenite's 128 KiB: it zero-fills the whole of it before every read
/// (snapview/tungstenite-rs#547), which was 14 % of the relay benchmark's
/// samples, a wake of every socket paying for 128 KiB.
pub const READ_BUFFER_BYTES: usize = 16 * 1024;

pub async fn relay_handler(ws: WebSocketUpgrade, State(state): State<AppState>, Path(session_id): Path<String>, principal: Principal) -> Response {
    let (org_id, side, robot_id) = match &principal {
        Principal::Robot { robot, .. } => (robot.org_id.clone(), Side::Robot, robot.id.clone()),
        Principal::User { user, .. } => match &user.selected_org {
            Some(org) => (org.org_id.clone(), Side::Cockpit(user.user_id.clone()), String::new()),
            None => return (StatusCode::FORBIDDEN, "choose an organisation first").into_response(),
        },
        Principal::Integration { .. } => return (StatusCode::FORBIDDEN, "an API key reads the org's events; it does not join the relay").into_response(),
    };
    let session = match live_session(&state, &org_id, &session_id, |session| match &side {
        Side::Robot => session.robot == robot_id,
        Side::Cockpit(user_id) => session.operator_id.as_deref() == Some(user_id.as_str()),
        Side::Supervisor { .. } => false,
    })
    .await
    {
        Ok(session) => session,
        Err(refused) => return refused,
    };
    let pass = match socket_pass(&state, principal).await {
        Ok(pass) => pass,
        Err(refused) => return refused,
    };
    let channel = state.relay.channel(&org_id, &session.id, &session.robot, session.operator_id.as_deref(), session.lifecycle == LifecycleState::Active);
    // Taken before the upgrade: a stop waits for this socket from now on.
    let stopping = state.relay.stopping();
    // Frames past the largest are refused at their header, not read into
    // memory first (tungstenite's own bound on a frame is 16 MiB).
    ws.max_message_size(MAX_FRAME_BYTES).max_frame_size(MAX_FRAME_BYTES).read_buffer_size(READ_BUFFER_BYTES).on_upgrade(move |socket| serve(state, channel, side, pass, stopping, socket))
}

/// An admin's live view of a live session of their selected org.
pub async fn watch_handler(ws: WebSocketUpgrade, State(state): State<AppState>, Path(session_id): Path<String>, principal: Principal) -> Response {
    let Principal::User { token, user } = principal else {
        return (StatusCode::FORBIDDEN, "the live view is for the organisation's admins").into_response();
    };
    let Some(org) = user.selected_org.clone() else {
        return (StatusCode::FORBIDDEN, "choose an organisation first").into_response();
    };
    if org.role != Role::Admin {
        return (StatusCode::FORBIDDEN, "the live view is for the organisation's admins").into_response();
    }
    // Another org's session does not exist here.
    let session = match live_session(&state, &org.org_id, &session_id, |_| true).await {
        Ok(session) => session,
        Err(refused) => return refused,
    };
    let pass = match state.accounts.socket_pass(&token, &user.user_id, &org.org_id, Role::Admin).await {
        Ok(pass) => pass,
        Err(refused) => return refused.into_response(),
    };
    let channel = state.relay.channel(&org.org_id, &session.id, &session.robot, session.operator_id.as_deref(), session.lifecycle == LifecycleState::Active);
    let side = Side::Supervisor { admin_id: user.user_id.clone(), name: user.display_name.clone() };
    // Taken before the upgrade, and held until the leave is logged: a
    // stop waits for both.
    let stopping = state.relay.stopping();
    // A live view sends nothing worth a camera frame's size.
    ws.max_message_size(4 * 1024).max_frame_size(4 * 1024).read_buffer_size(4 * 1024).on_upgrade(move |socket| async move {
        let (org_id, session_id, admin_id) = (channel.org_id.clone(), channel.session_id.clone(), user.user_id.clone());
        // Upgraded once the stop had begun: not watched (`serve` does not
        // join it), so not logged. (A stop that begins while the join is
        // being logged logs a leave too: the pair stands, unwatched.)
        let logged = !*stopping.borrow();
        // Watched only once the join is logged; its leave follows the socket's end.
        if logged && !supervised(&state, &org_id, &session_id, &admin_id, true).await {
            return;
        }
        serve(state.clone(), channel, side, pass, stopping.clone(), socket).await;
        if logged {
            supervised(&state, &org_id, &session_id, &admin_id, false).await;
        }
        drop(stopping);
    })
}

/// The session `session_id` of `org_id` while the relay carries it (ACTIVE
/// or PAUSED), if `may_join` lets the caller in; else the refusal: 404 for
/// a session that is not there or not the caller's (another org's session
/// does not exist here), 409 for one that is not live.
async fn live_session(state: &AppState, org_id: &str, session_id: &str, may_join: impl FnOnce(&SessionRecord) -> bool) -> Result<SessionRecord, Response> {
    // Heard from before the read: an event committed after it reaches the
    // channel, made or not (`Relay::channel`).
    state.relay.follow(org_id).await;
    let session = match state.sessions.session(org_id, session_id).await {
        Ok(Some(session)) if may_join(&session) => session,
        Ok(_) => return Err((StatusCode::NOT_FOUND, "session not found").into_response()),
        Err(e) => {
            tracing::error!(error = %e, "relay: session lookup failed");
            return Err(StatusCode::SERVICE_UNAVAILABLE.into_response());
        }
    };
    if !matches!(session.lifecycle, LifecycleState::Active | LifecycleState::Paused) {
        return Err((StatusCode::CONFLICT, "the session is not live: the relay carries ACTIVE and PAUSED sessions").into_response());
    }
    Ok(session)
}

/// SUPERVISOR_JOINED / SUPERVISOR_LEFT in the session's activity; whether it was logged.
async fn supervised(state: &AppState, org_id: &str, session_id: &str, admin_id: &str, joined: bool) -> bool {
    match state.engine.supervise(org_id, session_id, admin_id, joined).await {
        Ok(()) => true,
        Err(e) => {
            tracing::info!(error = %e, session = %session_id, joined, "supervisor's join or leave not logged");
            false
        }
    }
}

/// The socket's pass: opened before the credential is looked at again, so
/// a sign-out, rotation or retirement committed after that look ends it.
async fn socket_pass(state: &AppState, principal: Principal) -> Result<TabPass, Response> {
    match principal {
        Principal::User { token, user } => {
            let org = user.selected_org.ok_or_else(|| (StatusCode::FORBIDDEN, "choose an organisation first").into_response())?;
            state.accounts.socket_pass(&token, &user.user_id, &org.org_id, org.role).await.map_err(IntoResponse::into_response)
        }
        Principal::Robot { robot, token_hash } => {
            let credential = Credential::Robot { org_id: robot.org_id.clone(), robot_id: robot.id.clone(), token: token_hash.clone() };
            let pass = state.tabs.open(credential, None).await.map_err(|_| (StatusCode::TOO_MANY_REQUESTS, "too many relay sockets for this robot").into_response())?;
            match state.robots.by_token_hash(&token_hash).await {
                Ok(Some(now)) if now.id == robot.id && now.org_id == robot.org_id => Ok(pass),
                Ok(_) => Err((StatusCode::UNAUTHORIZED, "unknown robot token").into_response()),
                Err(_) => Err(StatusCode::SERVICE_UNAVAILABLE.into_response()),
            }
        }
        Principal::Integration { .. } => Err((StatusCode::FORBIDDEN, "an API key does not join the relay").into_response()),
    }
}

/// One relay socket until it closes: a normal close (1000) when the
/// session ended or control moved, "restart" (1012) when this instance
/// stops (`stopping`, which the stop waits for this socket to drop), 1009,
/// 1007 or 1002 for a frame it could not read (`Ending`).
async fn serve(state: AppState, channel: Arc<Channel>, side: Side, pass: TabPass, mut stopping: watch::Receiver<bool>, socket: WebSocket) {
    let (sink, mut stream) = socket.split();
    let (tx, writer, mut writer_gone) = socket_writer::spawn(sink, SOCKET_QUEUE, "relay", Some);
    // A socket upgraded once the stop had begun (by a request in flight)
    // does not join: it is told to connect again at once (a join and a
    // leave would tell its channel's other sockets of a peer come and gone).
    let ending = if *stopping.borrow_and_update() {
        Ending::Restart
    } else {
        let (id, mut closed) = state.relay.join(&channel, &side, tx.clone()).await;
        // Signed out, removed, demoted, token rotated, retired: gone at once.
        // (One wait for the socket's life, as a tab's: `ring::ears`.)
        let mut signed_out = std::pin::pin!(pass.ended());
        let ending = loop {
            // (First: joined a channel that closed meanwhile, the session
            // just ended, its close was announced before this socket listened.)
            if channel.is_closed() {
                break Ending::Over;
            }
            tokio::select! {
                changed = closed.changed() => if changed.is_err() || *closed.borrow() { break Ending::Over },
                _ = stopping.changed() => break Ending::Restart,
                _ = &mut signed_out => break Ending::Over,
                // The writer failed: this side hears nothing more, so it leaves
                // (and comes back, if it is still there).
                _ = &mut writer_gone => break Ending::PeerGone,
                message = stream.next() => match message {
                    Some(Ok(Message::Close(_))) | None => break Ending::PeerGone,
                    // Refused (the peer is told why), or the connection
                    // failed (there is nobody to tell).
                    Some(Err(e)) => break Refused::of(e).map_or(Ending::PeerGone, Ending::Refused),
                    Some(Ok(message)) => handle(&state, &channel, &side, &tx, message).await,
                },
            }
            // A handover took control away: this cockpit leaves.
            if let Side::Cockpit(operator_id) = &side {
                if !channel.controls(operator_id) {
                    break Ending::Over;
                }
            }
        };
        state.relay.leave(&channel, &side, id).await;
        ending
    };
    // (The writer lets the pass go before the close: `socket_writer`.)
    match (ending, ending.frame()) {
        (Ending::Refused(_), Some(frame)) => {
            // The stream ended with its error (nothing more can be read), and
            // a refused frame's payload is left unread: the socket is held a
            // while once its close has gone, as dropped with bytes unread it is
            // reset, and the close frame may be lost with it.
            writer.close(tx, frame, pass).await;
            tokio::time::sleep(CLOSE_ANSWERED_WITHIN).await;
        }
        (_, None) => {
            // Reading on writes the answer to the client's close, which the
            // socket holds until then (the writer, with frames still queued,
            // fails on them before it could close), and ends the stream.
            let _ = tokio::join!(writer.finish(tx, pass), tokio::time::timeout(CLOSE_ANSWERED_WITHIN, stream.next()));
        }
        (_, Some(frame)) => {
            // Read on until the peer answers the close (a second at most): a
            // socket dropped with the peer's frames unread is reset, and its
            // close frame may be lost with it (an edge agent streams all along).
            let answered = async {
                while let Some(Ok(message)) = stream.next().await {
                    if matches!(message, Message::Close(_)) {
                        return;
                    }
                }
            };
            let _ = tokio::join!(writer.close(tx, frame, pass), tokio::time::timeout(CLOSE_ANSWERED_WITHIN, answered));
        }
    }
    // Done: a stop waiting for this socket goes on.
    drop(stopping);
}

/// A frame the relay could not read, as its close tells it (RFC 6455,
/// 7.4.1): one larger than `MAX_FRAME_BYTES` (1009), text that is not
/// UTF-8 (1007), or one that breaks the protocol (1002). An edge agent's
/// author learns why from the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    TooLarge,
    NotUtf8,
    Malformed,
}

impl Refused {
    /// What a read error refused; `None` when the connection failed (reset,
    /// closed without a close frame, an I/O error): nobody is left to tell.
    /// axum's error wraps tungstenite's, of the version axum uses.
    fn of(e: axum::Error) -> Option<Refused> {
        use tungstenite::error::{Error, ProtocolError};
        let e = e.into_inner();
        let refused = match e.downcast_ref::<Error>() {
            Some(Error::Capacity(_)) => Some(Refused::TooLarge),
            Some(Error::Utf8(_)) => Some(Refused::NotUtf8),
            Some(Error::Protocol(ProtocolError::ResetWithoutClosingHandshake)) => None,
            Some(Error::Protocol(_)) => Some(Refused::Malformed),
            _ => None,
        };
        if refused.is_none() {
            tracing::debug!(error = %e, "a relay socket's connection failed");
        }
        refused
    }
}

/// How a relay socket's life ended, and so how it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The session ended, control moved, or the credential ended: 1000,
    /// do not come back.
    Over,
    /// This instance stops: 1012, connect again (elsewhere).
    Restart,
    /// A frame the socket could not read: 1009, 1007 or 1002.
    Refused(Refused),
    /// The client closed, its connection failed, or the writer did: no
    /// close of our own (after the client's it is refused).
    PeerGone,
}

impl Ending {
    /// The close frame this side sends; none once the peer is gone.
    fn frame(self) -> Option<CloseFrame> {
        let (code, reason) = match self {
            Ending::Over => (close_code::NORMAL, "the session ended or control moved"),
            Ending::Restart => (close_code::RESTART, "the server restarts: connect again"),
            Ending::Refused(Refused::TooLarge) => (close_code::SIZE, "a frame larger than the relay carries"),
            Ending::Refused(Refused::NotUtf8) => (close_code::INVALID, "a text frame that is not UTF-8"),
            Ending::Refused(Refused::Malformed) => (close_code::PROTOCOL, "a frame the relay could not read"),
            Ending::PeerGone => return None,
        };
        Some(CloseFrame { code, reason: reason.into() })
    }
}

/// One message from a socket (its close is `serve`'s).
/// Recordings are stamped with the relay's clock, so robot and operator
/// samples share one timeline whatever their own clocks say.
async fn handle(state: &AppState, channel: &Channel, side: &Side, own: &mpsc::Sender<Message>, message: Message) {
    let now = state.engine.clock().now_ms();
    let recorder = &state.relay.recorder;
    let bytes = match &message {
        Message::Close(_) | Message::Ping(_) | Message::Pong(_) => return,
        Message::Text(_) | Message::Binary(_) => super::channel::frame_bytes(&message),
    };
    match (side, &message) {
        (Side::Robot, Message::Text(text)) => match serde_json::from_str::<RelayMsg>(text) {
            Ok(RelayMsg::State { joints, fields, .. }) if (1..=MAX_VECTOR).contains(&joints.len()) && fields.len() <= MAX_VECTOR => {
                channel.from_robot(message, bytes, Some(Sample::State { t_ms: now, joints, fields }), recorder, now);
            }
            _ => refuse(own, "the edge agent sends `state` messages (1 to 64 joints) and camera frames"),
        },
        (Side::Robot, Message::Binary(data)) => match CameraFrame::decode(data) {
            Some(frame) => channel.from_robot(message, bytes, Some(Sample::Camera { t_ms: now, name: frame.name, jpeg: frame.jpeg }), recorder, now),
            None => refuse(own, "a binary message must be a CAM1 camera frame"),
        },
        (Side::Cockpit(operator_id), Message::Text(text)) => match serde_json::from_str::<RelayMsg>(text) {
            // Rule L03: a PAUSED session takes no control input.
            Ok(RelayMsg::Action { .. }) if !channel.is_active() => refuse(own, "The session is paused: it accepts no control input until it resumes."),
            Ok(RelayMsg::Action { values, .. }) if (1..=MAX_VECTOR).contains(&values.len()) => {
                if channel.from_operator(message, bytes, Sample::Action { t_ms: now, values }, recorder, now) {
                    // Operator input resets the session's inactivity chain.
                    state.engine.operator_input(&channel.org_id, operator_id, &channel.session_id);
                }
            }
            _ => refuse(own, "the cockpit sends `action` messages (1 to 64 values)"),
        },
        (Side::Cockpit(_), Message::Binary(_)) => refuse(own, "the cockpit sends no binary messages"),
        // Read-only: nothing a live view sends goes anywhere.
        (Side::Supervisor { .. }, _) => refuse(own, "the live view is read-only: nothing it sends reaches the robot"),
        _ => {}
    }
}

/// Tells the sender its message was not relayed (the socket stays open).
fn refuse(own: &mpsc::Sender<Message>, reason: &str) {
    let text = serde_json::to_string(&RelayMsg::Refused { reason: reason.to_string() }).unwrap_or_default();
    let _ = own.try_send(Message::Text(text.into()));
}
