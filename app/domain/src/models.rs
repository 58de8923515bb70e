//! Types shared by the server and the browser. Everything that crosses the
//! wire between them (server functions, and later the ring channel) is one
//! of these, serialised with serde.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a person may do inside one org.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Overview, wallboard, roster, directory; may also operate.
    Admin,
    /// Ready screen and cockpit.
    Operator,
    /// The party whose work the robots do (seed 001): books robots, watches
    /// and chats on its own sessions, rates, sees its billable time.
    Client,
}

/// A role as stored (the database keeps its name): read with
/// `#[sqlx(try_from = "String")]`, so a row never carries a role as text.
impl TryFrom<String> for Role {
    type Error = String;

    fn try_from(text: String) -> Result<Role, String> {
        Role::parse(&text).ok_or_else(|| format!("unknown role {text:?}"))
    }
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Client => "client",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "operator" => Some(Role::Operator),
            "client" => Some(Role::Client),
            _ => None,
        }
    }

    /// Whether this role grants `needed`. An admin may also operate and act
    /// as a client; an operator and a client hold only their own role.
    pub fn grants(self, needed: Role) -> bool {
        self == Role::Admin || self == needed
    }

    /// Where a person with this role lands after signing in.
    pub fn landing_path(self) -> &'static str {
        match self {
            Role::Admin => "/admin/directory",
            Role::Operator => "/operator",
            Role::Client => "/client",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One org a user belongs to, with the role they hold there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgMembership {
    pub org_id: String,
    pub org_name: String,
    pub role: Role,
}

/// The signed-in person as every screen sees them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentUser {
    pub user_id: String,
    pub email: String,
    pub display_name: String,
    /// Every org this user belongs to, by name.
    pub memberships: Vec<OrgMembership>,
    /// The org the user works in now. Nothing org-scoped is shown without it.
    pub selected_org: Option<OrgMembership>,
}

impl CurrentUser {
    /// The role held in the selected org, if one is selected.
    pub fn role(&self) -> Option<Role> {
        self.selected_org.as_ref().map(|m| m.role)
    }

    pub fn landing_path(&self) -> &'static str {
        match self.role() {
            Some(role) => role.landing_path(),
            None => "/orgs",
        }
    }
}

/// Registry status of a robot, from its edge agent's heartbeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistryStatus {
    Online,
    Offline,
}

impl RegistryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RegistryStatus::Online => "online",
            RegistryStatus::Offline => "offline",
        }
    }
}

/// A robot of the fleet registry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Robot {
    pub id: String,
    pub model: String,
    pub site: String,
    /// Point of presence the robot's control path terminates at.
    pub pop: String,
    /// Required certification, full string, e.g. `pick-place · tier-2`.
    pub req_cert: String,
    /// The skill the ACD matches on (first token of `req_cert`).
    pub skill: String,
    pub status: RegistryStatus,
    /// Unix ms of the last edge-agent heartbeat, if any.
    pub last_heartbeat_ms: Option<i64>,
    /// Unix ms the bearer token was last rotated, if ever.
    #[serde(default)]
    pub token_rotated_ms: Option<i64>,
    /// The robot's live session (PENDING, ACTIVE or PAUSED), if any.
    #[serde(default)]
    pub live_session: Option<String>,
}

/// An operator of the org's directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    pub id: String,
    pub display_name: String,
    pub email: String,
    pub external_id: Option<String>,
    pub role: Role,
    pub region: String,
    /// Certifications as held, e.g. `pick-place · tier-2`.
    pub certifications: Vec<String>,
    /// The skill names derived from `certifications`, sorted, no duplicates.
    pub skills: Vec<String>,
    /// Clients' ratings (rule L10); `None` before the first.
    #[serde(default)]
    pub score: Option<OperatorScore>,
}

/// The org's directory: its fleet and its people.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Directory {
    pub org_name: String,
    pub robots: Vec<Robot>,
    pub operators: Vec<Operator>,
    /// Server clock when this snapshot was taken (Unix ms).
    pub as_of_ms: i64,
}

/// Propagation floor of one operator region → robot PoP path (seed 000,
/// "Link health floors").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkFloor {
    pub region: String,
    pub pop: String,
    pub floor_ms: u32,
    pub note: Option<String>,
}

/// A distress call offered to one operator (seed 000, rules A04, A05). Pushed
/// to every open tab of that operator, which rings until `expires_at`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    pub session_id: String,
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    /// RTT the ACD ranked this operator by, to the robot's PoP.
    pub rtt_ms: u32,
    pub operator_id: String,
    #[serde(with = "crate::rules::rfc3339_ms")]
    #[schema(value_type = String, format = DateTime)]
    pub offered_at: i64,
    /// `offered_at` + 30 s.
    #[serde(with = "crate::rules::rfc3339_ms")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: i64,
    /// A handover (rule L08): the name of the operator handing the live
    /// session over; absent for a distress call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover_from: Option<String>,
}

/// The session record (seed 000 "The session record", plus lifecycle and
/// skill). Optional fields are empty until the session is attached or the
/// edge agent reports them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub id: String,
    /// Robot id.
    pub robot: String,
    pub robot_model: String,
    pub site: String,
    pub pop: String,
    pub skill: String,
    pub lifecycle: LifecycleState,
    /// Safety state.
    pub state: SafetyState,
    pub operator_id: Option<String>,
    pub operator_name: Option<String>,
    /// The operator's region: the other end of the RTT path.
    pub region: Option<String>,
    #[serde(with = "crate::rules::rfc3339_ms")]
    #[schema(value_type = String, format = DateTime)]
    pub raised_at: i64,
    /// Attach time.
    #[serde(with = "crate::rules::rfc3339_ms::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<i64>,
    #[serde(with = "crate::rules::rfc3339_ms::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub ended_at: Option<i64>,
    pub rtt_ms: Option<u32>,
    pub divergence_deg: Option<f64>,
    pub velocity_scale: Option<f64>,
    /// The client whose work this is (seed 001): the booking's client when
    /// the call was raised during a booking; empty when the org's admins
    /// act as the client.
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_name: Option<String>,
    /// When the session completes unless extended (rule L13): the booking's
    /// end, or attach time + the default session length.
    #[serde(default, with = "crate::rules::rfc3339_ms::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub planned_end_at: Option<i64>,
}

/// Safety state reported by the edge agent (seed 000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SafetyState {
    Boot,
    Safe,
    Armed,
    Degraded,
    Diverged,
    ProtectiveStop,
}

impl SafetyState {
    pub const ALL: [SafetyState; 6] = [
        SafetyState::Boot,
        SafetyState::Safe,
        SafetyState::Armed,
        SafetyState::Degraded,
        SafetyState::Diverged,
        SafetyState::ProtectiveStop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SafetyState::Boot => "BOOT",
            SafetyState::Safe => "SAFE",
            SafetyState::Armed => "ARMED",
            SafetyState::Degraded => "DEGRADED",
            SafetyState::Diverged => "DIVERGED",
            SafetyState::ProtectiveStop => "PROTECTIVE_STOP",
        }
    }

    pub fn parse(s: &str) -> Option<SafetyState> {
        SafetyState::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

/// Lifecycle of a session (seed 001).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LifecycleState {
    Pending,
    Active,
    Paused,
    Completed,
    Cancelled,
}

impl LifecycleState {
    pub const ALL: [LifecycleState; 5] = [
        LifecycleState::Pending,
        LifecycleState::Active,
        LifecycleState::Paused,
        LifecycleState::Completed,
        LifecycleState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleState::Pending => "PENDING",
            LifecycleState::Active => "ACTIVE",
            LifecycleState::Paused => "PAUSED",
            LifecycleState::Completed => "COMPLETED",
            LifecycleState::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<LifecycleState> {
        LifecycleState::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

/// Operator presence (seed 003).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PresenceState {
    Ready,
    Ringing,
    OnCall,
    Acw,
    Aux,
    Offline,
}

impl PresenceState {
    pub const ALL: [PresenceState; 6] = [
        PresenceState::Ready,
        PresenceState::Ringing,
        PresenceState::OnCall,
        PresenceState::Acw,
        PresenceState::Aux,
        PresenceState::Offline,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PresenceState::Ready => "ready",
            PresenceState::Ringing => "ringing",
            PresenceState::OnCall => "on_call",
            PresenceState::Acw => "acw",
            PresenceState::Aux => "aux",
            PresenceState::Offline => "offline",
        }
    }

    pub fn parse(s: &str) -> Option<PresenceState> {
        PresenceState::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip_through_parse_and_serde() {
        for state in SafetyState::ALL {
            assert_eq!(SafetyState::parse(state.as_str()), Some(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        for state in LifecycleState::ALL {
            assert_eq!(LifecycleState::parse(state.as_str()), Some(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        for state in PresenceState::ALL {
            assert_eq!(PresenceState::parse(state.as_str()), Some(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        assert_eq!(SafetyState::parse("armed"), None, "state names are exact");
    }

    #[test]
    fn admin_may_also_operate_but_operator_may_not_administer() {
        assert!(Role::Admin.grants(Role::Operator));
        assert!(Role::Admin.grants(Role::Admin));
        assert!(Role::Operator.grants(Role::Operator));
        assert!(!Role::Operator.grants(Role::Admin));
        assert!(Role::Admin.grants(Role::Client), "admins act as the client of sessions without one");
        assert!(Role::Client.grants(Role::Client));
        assert!(!Role::Client.grants(Role::Operator) && !Role::Operator.grants(Role::Client) && !Role::Client.grants(Role::Admin));
        for role in [Role::Admin, Role::Operator, Role::Client] {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
    }
}

/// An operator's score: the average of their ratings (in tenths of a
/// star, rounded) and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorScore {
    pub average_tenths: u32,
    pub count: u32,
}

impl OperatorScore {
    pub fn new(average: f64, count: u32) -> OperatorScore {
        OperatorScore { average_tenths: (average * 10.0).round().clamp(0.0, 50.0) as u32, count }
    }

    /// `4.5 ★ (12)`; `—` without ratings.
    pub fn label(score: Option<OperatorScore>) -> String {
        match score {
            Some(s) if s.count > 0 => format!("{}.{} ★ ({})", s.average_tenths / 10, s.average_tenths % 10, s.count),
            _ => "—".into(),
        }
    }
}
