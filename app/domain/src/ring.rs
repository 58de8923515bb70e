//! The ring channel: one WebSocket per console tab (`/ws`), carrying offers
//! and presence as these serde types, shared by browser and server.

pub use crate::events::{MyPresence, OfferEnd};
use crate::events::OrgEvent;
use crate::models::Offer;
use serde::{Deserialize, Serialize};

/// A console tab heartbeats this often: twice within the TTL, so a
/// heartbeat less than 10 s late never has the server close a live tab for
/// silence. Not more often: each heartbeat wakes the server for its socket
/// alone (~16–23 µs on a 2-core machine, so 50,000 open tabs heartbeating
/// every 5 s would cost ~17 % of a core; BENCHMARKS.md "Idle consoles").
pub const HEARTBEAT_MS: u32 = 10_000;
/// …and its operator's presence lapses to `offline` this long after the
/// last heartbeat of their last tab (lid closed, browser killed, cable out).
pub const PRESENCE_TTL_MS: i64 = 20_000;
const _: () = assert!(2 * HEARTBEAT_MS as i64 <= PRESENCE_TTL_MS, "a live tab heartbeats at least twice within the TTL");
/// Wrap-up (`acw`) after a session, then `ready` again (configurable on the server).
pub const DEFAULT_WRAP_UP_MS: i64 = 60_000;
/// Reasons offered on the Ready screen besides free text.
pub const COMMON_AUX_REASONS: [&str; 3] = ["break", "training", "meeting"];
/// An aux reason is a short label.
pub const MAX_AUX_REASON_CHARS: usize = 64;

/// Browser → server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConsoleMsg {
    Heartbeat,
    /// Ready to take calls (broadcast live readiness).
    Ready,
    Aux { reason: String },
    Accept { session_id: String },
    Decline { session_id: String },
    /// RTT probe; the server answers `Pong` at once.
    Ping { nonce: u64 },
    /// RTT this console measured to a PoP.
    Rtt { pop: String, rtt_ms: u32 },
}

/// Server → browser.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RingMsg {
    /// Sent on every (re)connection: the server's truth, superseding any
    /// message the tab received before it. (The tab is registered first, so
    /// nothing raised meanwhile is missed.)
    Welcome {
        operator_id: String,
        name: String,
        presence: MyPresence,
        /// An offer still ringing for this operator, if any.
        offer: Option<Offer>,
        /// PoPs to measure RTT to.
        pops: Vec<String>,
        /// Server clock, so the tab can correct countdowns for skew.
        server_now_ms: i64,
    },
    Presence { presence: MyPresence },
    /// Ring.
    Offer { offer: Offer },
    /// Stop ringing.
    OfferClosed { session_id: String, how: OfferEnd },
    /// This tab's accept went through: open the cockpit.
    Accepted { session_id: String },
    Pong { nonce: u64 },
    /// On an admin's watch socket (`/ws?watch=org`): a change in the org.
    Org { event: OrgEvent },
    /// No input on `session_id` for the warning interval: it is cancelled
    /// at `stop_at_ms` unless the operator acts (rule L07).
    InactivityWarning { session_id: String, stop_at_ms: i64 },
    /// A chat message on the session this operator holds.
    Chat { session_id: String, message: crate::chat::ChatMessage },
    /// Where this operator's handover offer stands (rule L08).
    Handover { notice: crate::handover::HandoverNotice },
    /// The session completes at `planned_end_ms` unless extended (rule L13).
    PlannedEndSoon { session_id: String, planned_end_ms: i64 },
    /// The socket fell behind and events were dropped: reload the screen's
    /// data (never silence).
    Resync,
    /// A command was refused, or the socket is being closed.
    Error { code: RingError, message: String },
}

impl RingMsg {
    /// The refusal with its sentence for the person.
    pub fn error(code: RingError) -> RingMsg {
        RingMsg::Error { code, message: code.message().to_string() }
    }
}

/// Why the ring channel refused something: a stable code for programs and a
/// sentence for the person. Details (database errors and the like) stay in
/// the server's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingError {
    Unreadable,
    /// The sign-in ended (signed out, expired, membership removed); the
    /// socket closes.
    SignedOut,
    NoOperatorProfile,
    /// An admin made the operator profile inactive.
    InactiveProfile,
    DispatchedElsewhere,
    Unavailable,
    OfferNotOpen,
    BadAuxReason,
    UnknownPop,
    ImplausibleRtt,
    /// Rule L03: a PAUSED session accepts no control input.
    SessionPaused,
    Failed,
}

impl RingError {
    pub fn message(self) -> &'static str {
        match self {
            RingError::Unreadable => "Unreadable message.",
            RingError::SignedOut => "Your sign-in has ended: sign in again.",
            RingError::NoOperatorProfile => "Cannot take calls here: you have no operator profile in this organisation.",
            RingError::InactiveProfile => "Cannot take calls: your operator profile is inactive. An admin of the organisation can make it active again.",
            RingError::DispatchedElsewhere => "Cannot take calls here: this organisation is served by another server.",
            RingError::Unavailable => "Cannot take calls right now: try again in a moment.",
            RingError::OfferNotOpen => "That offer is no longer open: it was answered, withdrawn or expired.",
            RingError::BadAuxReason => "Give a short reason (up to 64 characters).",
            RingError::UnknownPop => "That PoP is not one of this organisation's.",
            RingError::ImplausibleRtt => "That round-trip time is not plausible.",
            RingError::SessionPaused => "The session is paused: it accepts no control input until it resumes.",
            RingError::Failed => "The server could not do that; try again.",
        }
    }
}

/// Frames larger than this are refused on the ring channel.
pub const MAX_FRAME_BYTES: usize = 16 * 1024;

/// Where the accepting tab goes.
pub fn cockpit_path(session_id: &str) -> String {
    format!("/cockpit/{session_id}")
}

/// Seconds left before an offer expires, never negative.
pub fn seconds_left(expires_at_ms: i64, now_ms: i64) -> i64 {
    ((expires_at_ms - now_ms).max(0) + 999) / 1000
}

/// A short aux reason, trimmed; `None` when empty or too long.
pub fn valid_aux_reason(reason: &str) -> Option<String> {
    let reason = reason.trim();
    (!reason.is_empty() && reason.chars().count() <= MAX_AUX_REASON_CHARS).then(|| reason.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_tagged_json() {
        let msg = serde_json::to_value(ConsoleMsg::Accept { session_id: "ses-1".into() }).unwrap();
        assert_eq!(msg, serde_json::json!({ "type": "accept", "session_id": "ses-1" }));
        let back: ConsoleMsg = serde_json::from_str(r#"{"type":"heartbeat"}"#).unwrap();
        assert_eq!(back, ConsoleMsg::Heartbeat);
        let closed = serde_json::to_value(RingMsg::OfferClosed { session_id: "s".into(), how: OfferEnd::Expired }).unwrap();
        assert_eq!(closed["type"], "offer_closed");
        assert_eq!(closed["how"], "expired");
    }

    #[test]
    fn countdown_rounds_up_and_stops_at_zero() {
        assert_eq!(seconds_left(30_000, 0), 30);
        assert_eq!(seconds_left(30_000, 29_001), 1);
        assert_eq!(seconds_left(30_000, 30_000), 0);
        assert_eq!(seconds_left(30_000, 31_000), 0);
    }

    #[test]
    fn aux_reasons_are_short_labels() {
        assert_eq!(valid_aux_reason("  break "), Some("break".into()));
        assert_eq!(valid_aux_reason("   "), None);
        assert_eq!(valid_aux_reason(&"x".repeat(65)), None);
    }
}
