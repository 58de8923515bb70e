//! Events on the realtime topics (DESIGN "Realtime"): per operator (their
//! offers and own presence) and per org (presence for the roster; session
//! lifecycle, telemetry and registry status for the wallboard and overview;
//! audit records). Shared by the server, which publishes them, and the
//! browser, which renders them.

use crate::models::{LifecycleState, Offer, PresenceState, RegistryStatus, SessionRecord};
use crate::ring::{MyPresence, OfferEnd};
use serde::{Deserialize, Serialize};

/// Where an event is published.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Topic {
    /// One operator in one org: offers and their own presence.
    Operator { org_id: String, operator_id: String },
    /// Everything the org's live screens show.
    Org { org_id: String },
}

impl Topic {
    pub fn operator(org_id: &str, operator_id: &str) -> Topic {
        Topic::Operator { org_id: org_id.to_string(), operator_id: operator_id.to_string() }
    }

    pub fn org(org_id: &str) -> Topic {
        Topic::Org { org_id: org_id.to_string() }
    }
}

/// For one operator's console tabs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OperatorEvent {
    Offer { offer: Offer },
    OfferClosed { session_id: String, how: OfferEnd },
    Presence { presence: MyPresence },
    /// No input for the warning interval: the session is cancelled at
    /// `stop_at_ms` unless the operator acts (rule L07).
    InactivityWarning { session_id: String, stop_at_ms: i64 },
    /// A chat message on the session the operator holds.
    Chat { session_id: String, message: crate::chat::ChatMessage },
    /// Where the operator's handover offer stands (rule L08).
    Handover { notice: crate::handover::HandoverNotice },
    /// The session completes at `planned_end_ms` unless extended (rule L13).
    PlannedEndSoon { session_id: String, planned_end_ms: i64 },
}

/// An operator's presence as the roster shows it (seed 003 row fields that
/// come from presence).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PresenceUpdate {
    pub operator_id: String,
    pub name: String,
    pub state: PresenceState,
    pub state_since_ms: i64,
    pub current_call_id: Option<String>,
    pub aux_reason: Option<String>,
}

/// One audit record (safety events feed, directory changes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub at_ms: i64,
    pub actor_kind: String,
    pub actor_id: Option<String>,
    pub action: String,
    pub session_id: Option<String>,
    pub robot_id: Option<String>,
    pub detail: Option<String>,
}

impl AuditEntry {
    /// A change a person made (`actor`), with its before → after in `detail`.
    pub fn by_user(actor: &str, action: &str, detail: String, at_ms: i64) -> AuditEntry {
        AuditEntry {
            at_ms,
            actor_kind: "user".into(),
            actor_id: Some(actor.to_string()),
            action: action.into(),
            session_id: None,
            robot_id: None,
            detail: Some(detail),
        }
    }
}

/// For the org's live screens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OrgEvent {
    Presence { presence: PresenceUpdate },
    /// A session was raised, queued, offered, started or ended.
    Lifecycle {
        session_id: String,
        robot_id: String,
        lifecycle: LifecycleState,
        operator_id: Option<String>,
        queued: bool,
        at_ms: i64,
    },
    Telemetry { session: SessionRecord },
    RobotStatus { robot_id: String, status: RegistryStatus, at_ms: i64 },
    Audit { entry: AuditEntry },
    /// A chat message on one of the org's sessions.
    Chat { session_id: String, message: crate::chat::ChatMessage },
    /// A session's planned end moved (an extension, rule L13).
    PlannedEnd { session_id: String, planned_end_ms: i64 },
    /// A booking of one of the org's robots was made or cancelled.
    Bookings { robot_id: String },
    /// The relay's counts of the org's session channels (every second
    /// while any is open, rule W15).
    Relay { stats: Vec<crate::relay::RelayStat>, at_ms: i64 },
}

/// What travels on the bus.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Event {
    Operator(OperatorEvent),
    Org(OrgEvent),
}
