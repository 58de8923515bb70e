//! What the engine answers and records: outcomes, errors, the operator
//! presence it keeps, and the typed names stored with each decision.

use domain::models::{Offer, PresenceState};
use std::collections::BTreeMap;

/// The operator a call was matched to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MatchedOperator {
    pub id: String,
    pub name: String,
    pub region: String,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum CallOutcome {
    Matched { session_id: String, operator: MatchedOperator, rtt_ms: u32, offer: Offer },
    Queued { session_id: String, skill: String, position: i64 },
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("robot {robot_id} already has a call in progress ({session_id})")]
    CallInProgress { robot_id: String, session_id: String },
    #[error("the robot's reqCert {0:?} names no skill")]
    NoSkill(String),
    #[error("no open offer for this operator on this session")]
    NoOpenOffer,
    #[error("this operator profile is inactive: an admin of the organisation can make it active again")]
    Inactive,
    #[error("the RTT report is not plausible")]
    ImplausibleRtt,
    #[error("the session has already ended")]
    SessionEnded,
    #[error("only the operator attached to the session can do that")]
    NotAttached,
    /// Rule L03.
    #[error("the session is paused: it accepts no control input")]
    Paused,
    /// Rule L08: one handover offer at a time.
    #[error("a handover to {0} is already ringing")]
    HandoverRinging(String),
    #[error("that operator cannot take this session now: they must be ready, certified for its skill and reachable from its PoP")]
    NotHandoverCandidate,
    /// Rule L13: why the planned end cannot move.
    #[error("{0}")]
    CannotExtend(String),
    /// Why an admin may not take control (`domain::handover::take_over_problem`).
    #[error("{0}")]
    CannotTakeOver(String),
    #[error("a {from} session cannot become {to}")]
    IllegalTransition { from: &'static str, to: &'static str },
    /// The batch could not be committed; nothing of it happened.
    #[error("dispatch is briefly unavailable; try again")]
    Unavailable,
    /// Another instance holds this org's dispatch lock.
    #[error("this organisation is dispatched by another server instance")]
    DispatchedElsewhere,
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// An operator's presence as the engine keeps it (seed 003 states).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OperatorPresence {
    pub operator_id: String,
    pub name: String,
    pub region: String,
    pub skills: Vec<String>,
    pub state: PresenceState,
    /// Unix ms of the last state change.
    pub since: i64,
    pub aux_reason: Option<String>,
    pub current_call: Option<String>,
    /// Broadcasting readiness from a Ready screen.
    pub live_ready: bool,
    pub measured_rtt_ms: BTreeMap<String, u32>,
}

impl OperatorPresence {
    /// The presence as the org's roster and live screens see it.
    pub fn roster_update(&self) -> domain::events::PresenceUpdate {
        domain::events::PresenceUpdate {
            operator_id: self.operator_id.clone(),
            name: self.name.clone(),
            state: self.state,
            state_since_ms: self.since,
            current_call_id: self.current_call.clone(),
            aux_reason: self.aux_reason.clone(),
        }
    }

    /// Moves to `state`; `since` changes only when the state does.
    pub fn enter(&mut self, state: PresenceState, now: i64) {
        if self.state != state {
            self.state = state;
            self.since = now;
        }
        if state != PresenceState::Aux {
            self.aux_reason = None;
        }
    }
}

/// Engine timings.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// How long an offer rings: 30 s (seed 000).
    pub offer_window_ms: i64,
    pub wrap_up_ms: i64,
    /// Presence lapses this long after the last tab went silent.
    pub presence_ttl_ms: i64,
    /// Rule D08: a decliner or misser is not offered the same call for this long.
    pub cooloff_ms: i64,
    /// A PENDING call is cancelled by the platform after this long.
    pub pending_timeout_ms: i64,
    /// The inactivity chain's intervals (rule L07).
    pub inactivity: domain::inactivity::InactivityPolicy,
    /// A session outside any booking is planned to end this long after it starts.
    pub session_ms: i64,
}
