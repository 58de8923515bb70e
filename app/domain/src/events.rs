//! Events on the realtime topics (DESIGN "Realtime"): per operator (their
//! offers and own presence) and per org (presence for the roster; session
//! lifecycle, telemetry and registry status for the wallboard and overview;
//! audit records). Shared by the server, which publishes them, and the
//! browser, which renders them.

use crate::models::{LifecycleState, Offer, PresenceState, RegistryStatus, SessionRecord};
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

/// The operator's own presence, as every tab shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MyPresence {
    pub state: PresenceState,
    /// Unix ms of the last state change (server clock).
    pub since_ms: i64,
    pub aux_reason: Option<String>,
    pub current_call: Option<String>,
}

/// How an offer stopped ringing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferEnd {
    Accepted,
    Declined,
    Expired,
    Withdrawn,
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
    /// The org's dispatcher has moved (another instance took the org over,
    /// cluster mode) and knows no open tab: every open console registers
    /// again. Never sent to a browser.
    Rejoin,
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

/// Who made an audited change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    User,
    Robot,
    System,
}

/// What an audit record records: every action, named once. The wire and
/// the database keep the snake_case names (`as_str`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// A robot's telemetry entered PROTECTIVE_STOP (latched).
    ProtectiveStop,
    /// An operator's E-stop from the cockpit (rules O04, W13).
    OperatorEstop,
    /// A latched stop cleared on the detail view, with a reason (W11).
    ProtectiveStopCleared,
    SessionExtended,
    EpisodeRecorded,
    RobotRegistered,
    RobotEdited,
    RobotTokenRotated,
    RobotRetired,
    LinkFloorSet,
    LinkFloorRemoved,
    RttCeilingSet,
    RttCeilingRemoved,
    MemberInvited,
    PeopleImported,
    MemberJoined,
    MemberRoleChanged,
    MemberRemoved,
    MemberEdited,
}

impl AuditAction {
    pub const ALL: [AuditAction; 19] = [
        AuditAction::ProtectiveStop,
        AuditAction::OperatorEstop,
        AuditAction::ProtectiveStopCleared,
        AuditAction::SessionExtended,
        AuditAction::EpisodeRecorded,
        AuditAction::RobotRegistered,
        AuditAction::RobotEdited,
        AuditAction::RobotTokenRotated,
        AuditAction::RobotRetired,
        AuditAction::LinkFloorSet,
        AuditAction::LinkFloorRemoved,
        AuditAction::RttCeilingSet,
        AuditAction::RttCeilingRemoved,
        AuditAction::MemberInvited,
        AuditAction::PeopleImported,
        AuditAction::MemberJoined,
        AuditAction::MemberRoleChanged,
        AuditAction::MemberRemoved,
        AuditAction::MemberEdited,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::ProtectiveStop => "protective_stop",
            AuditAction::OperatorEstop => "operator_estop",
            AuditAction::ProtectiveStopCleared => "protective_stop_cleared",
            AuditAction::SessionExtended => "session_extended",
            AuditAction::EpisodeRecorded => "episode_recorded",
            AuditAction::RobotRegistered => "robot_registered",
            AuditAction::RobotEdited => "robot_edited",
            AuditAction::RobotTokenRotated => "robot_token_rotated",
            AuditAction::RobotRetired => "robot_retired",
            AuditAction::LinkFloorSet => "link_floor_set",
            AuditAction::LinkFloorRemoved => "link_floor_removed",
            AuditAction::RttCeilingSet => "rtt_ceiling_set",
            AuditAction::RttCeilingRemoved => "rtt_ceiling_removed",
            AuditAction::MemberInvited => "member_invited",
            AuditAction::PeopleImported => "people_imported",
            AuditAction::MemberJoined => "member_joined",
            AuditAction::MemberRoleChanged => "member_role_changed",
            AuditAction::MemberRemoved => "member_removed",
            AuditAction::MemberEdited => "member_edited",
        }
    }

    pub fn parse(s: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// As the safety feed shows it: "operator estop".
    pub fn label(self) -> String {
        self.as_str().replace('_', " ")
    }
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::Robot => "robot",
            ActorKind::System => "system",
        }
    }
}

/// Read from the database's text (`#[sqlx(try_from = "String")]`).
impl TryFrom<String> for AuditAction {
    type Error = String;

    fn try_from(text: String) -> Result<AuditAction, String> {
        AuditAction::parse(&text).ok_or_else(|| format!("unknown audit action {text:?}"))
    }
}

impl TryFrom<String> for ActorKind {
    type Error = String;

    fn try_from(text: String) -> Result<ActorKind, String> {
        [ActorKind::User, ActorKind::Robot, ActorKind::System].into_iter().find(|k| k.as_str() == text).ok_or_else(|| format!("unknown actor kind {text:?}"))
    }
}

/// One audit record (safety events feed, directory changes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub at_ms: i64,
    pub actor_kind: ActorKind,
    pub actor_id: Option<String>,
    pub action: AuditAction,
    pub session_id: Option<String>,
    pub robot_id: Option<String>,
    pub detail: Option<String>,
}

impl AuditEntry {
    /// A change a person made (`actor`), with its before → after in `detail`.
    pub fn by_user(actor: &str, action: AuditAction, detail: String, at_ms: i64) -> AuditEntry {
        AuditEntry {
            at_ms,
            actor_kind: ActorKind::User,
            actor_id: Some(actor.to_string()),
            action,
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

#[cfg(test)]
mod audit_tests {
    use super::{ActorKind, AuditAction};

    /// The database and the wire keep each action's name: the enum's serde
    /// form, `as_str` and `parse` agree for every action.
    #[test]
    fn every_audit_action_keeps_one_name_everywhere() {
        for action in AuditAction::ALL {
            assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
            assert_eq!(AuditAction::parse(action.as_str()), Some(action));
            assert_eq!(AuditAction::try_from(action.as_str().to_string()), Ok(action));
        }
        assert_eq!(AuditAction::OperatorEstop.label(), "operator estop");
        // A new action must join ALL (else its rows would not read back):
        // this match stops compiling until it is named here too.
        let listed = |a: AuditAction| match a {
            AuditAction::ProtectiveStop
            | AuditAction::OperatorEstop
            | AuditAction::ProtectiveStopCleared
            | AuditAction::SessionExtended
            | AuditAction::EpisodeRecorded
            | AuditAction::RobotRegistered
            | AuditAction::RobotEdited
            | AuditAction::RobotTokenRotated
            | AuditAction::RobotRetired
            | AuditAction::LinkFloorSet
            | AuditAction::LinkFloorRemoved
            | AuditAction::RttCeilingSet
            | AuditAction::RttCeilingRemoved
            | AuditAction::MemberInvited
            | AuditAction::PeopleImported
            | AuditAction::MemberJoined
            | AuditAction::MemberRoleChanged
            | AuditAction::MemberRemoved
            | AuditAction::MemberEdited => AuditAction::ALL.contains(&a),
        };
        assert!(AuditAction::ALL.into_iter().all(listed));
        assert_eq!(AuditAction::ALL.len(), 19, "every variant of the match above is in ALL");
        assert!(AuditAction::try_from("dropped_tables".to_string()).is_err());
        for kind in [ActorKind::User, ActorKind::Robot, ActorKind::System] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
            assert_eq!(ActorKind::try_from(kind.as_str().to_string()), Ok(kind));
        }
    }
}
