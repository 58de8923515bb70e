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

/// A ringing offer rings this often (a two-tone ring) until it expires.
pub const RING_EVERY_MS: i64 = 1_500;
/// At most this many rings are scheduled for one offer (ten minutes'
/// worth); its notification stays for longer windows.
pub const MAX_RINGS: i64 = 400;

/// How many rings an offer still open until `expires_at_ms` gets from
/// `now_ms`: one now, then one every `RING_EVERY_MS` before it expires. The
/// browser schedules them all at once on the audio clock, which a hidden
/// tab's timer throttling does not slow, and silences them when the offer
/// closes.
pub fn rings_left(now_ms: i64, expires_at_ms: i64) -> u32 {
    let open_ms = expires_at_ms.saturating_sub(now_ms).clamp(0, MAX_RINGS * RING_EVERY_MS);
    ((open_ms + RING_EVERY_MS - 1) / RING_EVERY_MS) as u32
}

/// The last this many RTT samples count; the least of them is reported.
pub const RTT_SAMPLES: usize = 5;
/// A (re)connected console probes this many times back to back before its
/// probes fall back to every third heartbeat.
pub const RTT_PROBES_ON_CONNECT: usize = 3;

/// A console's round-trip time to the server, which it reports for each
/// PoP (`ConsoleMsg::Rtt`) and the ACD routes by. Each probe's nonce is its
/// send time (µs, browser clock), and its pong is timed from that, so probes
/// that cross (a pong arriving after a newer probe went out) are each timed
/// right rather than from the newer one, which would under-report; a
/// sample is rounded up to the millisecond, never down. The least of the
/// last `RTT_SAMPLES` is reported, only when it changes: a busy tab can
/// slow a sample, never speed it up. Each `Welcome` starts afresh: a new
/// connection may be another network, and a dispatcher that (re)loaded the
/// operator wants a report.
#[derive(Debug, Default)]
pub struct RttProbe {
    samples: Vec<u32>,
    reported: Option<u32>,
}

/// What a pong means for the console: an RTT to report, and whether to
/// probe again at once.
#[derive(Debug, PartialEq, Eq)]
pub struct PongSeen {
    pub report: Option<u32>,
    pub probe_again: bool,
}

impl RttProbe {
    /// The nonce of a probe sent at `now_ms` (browser clock, ms).
    pub fn nonce(now_ms: f64) -> u64 {
        (now_ms * 1_000.0) as u64
    }

    /// A `Welcome` came (a new connection, or the server's truth again):
    /// earlier samples no longer count, and the next pong is reported.
    pub fn connected(&mut self) {
        *self = Self::default();
    }

    /// A pong for the probe `nonce`, seen at `now_ms`.
    pub fn pong(&mut self, nonce: u64, now_ms: f64) -> PongSeen {
        // A nonce from the future is none of this tab's probes.
        let Some(rtt_us) = Self::nonce(now_ms).checked_sub(nonce) else {
            return PongSeen { report: None, probe_again: false };
        };
        let rtt = u32::try_from(rtt_us.div_ceil(1_000)).unwrap_or(u32::MAX);
        self.samples.push(rtt);
        let stale = self.samples.len().saturating_sub(RTT_SAMPLES);
        self.samples.drain(..stale);
        let best = self.samples.iter().copied().min().unwrap_or(rtt);
        let report = (self.reported != Some(best)).then_some(best);
        self.reported = Some(best);
        PongSeen { report, probe_again: self.samples.len() < RTT_PROBES_ON_CONNECT }
    }
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

    #[test]
    fn an_offer_rings_every_interval_until_it_expires() {
        assert_eq!(rings_left(0, 30_000), 20, "at 0, 1.5, … 28.5 s");
        assert_eq!(rings_left(0, 30_001), 21);
        assert_eq!(rings_left(0, 1), 1, "one ring while it is open at all");
        assert_eq!(rings_left(30_000, 30_000), 0);
        assert_eq!(rings_left(31_000, 30_000), 0, "expired");
        assert_eq!(rings_left(0, i64::MAX), MAX_RINGS as u32);
        assert_eq!(rings_left(i64::MIN, i64::MAX), MAX_RINGS as u32);
        assert_eq!(rings_left(i64::MAX, i64::MIN), 0);
    }

    #[test]
    fn probes_that_cross_are_each_timed_from_their_own_nonce() {
        let mut probe = RttProbe::default();
        let (first, second) = (RttProbe::nonce(1_000.0), RttProbe::nonce(1_100.0));
        // The first probe's pong arrives after the second probe went out.
        assert_eq!(probe.pong(first, 1_400.0), PongSeen { report: Some(400), probe_again: true });
        assert_eq!(probe.pong(second, 1_450.0), PongSeen { report: Some(350), probe_again: true });
    }

    #[test]
    fn the_least_of_the_last_samples_is_reported_when_it_changes() {
        let mut probe = RttProbe::default();
        let mut at = 0.0;
        let mut pong = |rtt: f64| {
            at += 10_000.0;
            probe.pong(RttProbe::nonce(at), at + rtt)
        };
        assert_eq!(pong(120.0).report, Some(120));
        assert_eq!(pong(150.0).report, None, "a slower sample does not raise it");
        let third = pong(130.0);
        assert_eq!(third, PongSeen { report: None, probe_again: false }, "three samples: back to the heartbeat's pace");
        assert_eq!(pong(0.4).report, Some(1), "rounded up: never below what it measured");
        for _ in 0..RTT_SAMPLES - 1 {
            assert_eq!(pong(200.0).report, None);
        }
        assert_eq!(pong(200.0).report, Some(200), "the 1 ms sample is now older than the last five");
    }

    #[test]
    fn a_new_connection_forgets_earlier_samples_and_probes_again() {
        let mut probe = RttProbe::default();
        for at in [0.0, 1_000.0, 2_000.0] {
            probe.pong(RttProbe::nonce(at), at + 20.0);
        }
        probe.connected();
        assert_eq!(probe.pong(RttProbe::nonce(5_000.0), 5_200.0), PongSeen { report: Some(200), probe_again: true });
    }

    #[test]
    fn a_pong_from_the_future_is_not_a_sample() {
        let mut probe = RttProbe::default();
        assert_eq!(probe.pong(RttProbe::nonce(2_000.0), 1_000.0), PongSeen { report: None, probe_again: false });
        assert_eq!(probe.pong(RttProbe::nonce(2_000.0), 2_050.0).report, Some(50));
    }
}
