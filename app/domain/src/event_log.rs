//! The org's event log for integrators (`GET /v1/events`, webhooks): what
//! happened, one record per change, numbered 1, 2, 3… per org in the order
//! the changes committed. Each record is written in the same transaction as
//! the change it records (an outbox), so the log never says more or less
//! than the database.
//!
//! A record is `{id, at, type, sessionId?, robotId?, data}`; `data`'s fields
//! depend on `type` (one schema per type in the OpenAPI document).

use crate::models::{LifecycleState, SafetyState};
use serde::{Deserialize, Serialize};

/// What a log record says happened, with the fields of its type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", content = "data")]
pub enum LogEvent {
    /// A robot raised a distress call.
    #[serde(rename = "call.raised")]
    CallRaised(CallRaised),
    /// The call rings an operator.
    #[serde(rename = "call.offered")]
    CallOffered(CallOffered),
    /// The operator declined it.
    #[serde(rename = "call.declined")]
    CallDeclined(OperatorOnly),
    /// Nobody answered the ring in time.
    #[serde(rename = "call.expired")]
    CallExpired(OperatorOnly),
    /// An operator accepted: the session is ACTIVE.
    #[serde(rename = "call.accepted")]
    CallAccepted(CallAccepted),
    /// No operator could take it: it waits in its skill's queue.
    #[serde(rename = "call.queued")]
    CallQueued(Empty),
    /// The call ended before anyone took it (withdrawn, or nobody took it).
    #[serde(rename = "call.cancelled")]
    CallCancelled(Ended),
    /// A live session paused, resumed, completed or was cancelled.
    #[serde(rename = "session.lifecycle")]
    Lifecycle(LifecycleChanged),
    /// The robot's safety state changed (other than PROTECTIVE_STOP).
    #[serde(rename = "safety.changed")]
    SafetyChanged(SafetyChanged),
    /// PROTECTIVE_STOP latched.
    #[serde(rename = "safety.protective_stop")]
    ProtectiveStop(SafetyChanged),
    /// PROTECTIVE_STOP cleared.
    #[serde(rename = "safety.protective_stop_cleared")]
    ProtectiveStopCleared(SafetyChanged),
    /// Control of a live session moved to another operator.
    #[serde(rename = "session.handover")]
    Handover(Handover),
    /// A chat message was posted (never its text).
    #[serde(rename = "chat.posted")]
    ChatPosted(ChatPosted),
    /// The session was rated.
    #[serde(rename = "session.rated")]
    Rated(Rated),
    /// A robot was registered.
    #[serde(rename = "robot.registered")]
    RobotRegistered(RobotRegistered),
    /// A robot was retired (its token no longer works).
    #[serde(rename = "robot.retired")]
    RobotRetired(Empty),
    /// A robot's heartbeats stopped.
    #[serde(rename = "robot.offline")]
    RobotOffline(RobotOffline),
    /// A client booked a robot's time.
    #[serde(rename = "booking.made")]
    BookingMade(Booking),
    /// A booking was cancelled.
    #[serde(rename = "booking.cancelled")]
    BookingCancelled(BookingCancelled),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Empty {}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallRaised {
    pub skill: String,
    pub pop: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booking_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallOffered {
    pub operator_id: String,
    pub rtt_ms: u32,
    /// RFC 3339: the ring ends then unless answered.
    pub expires_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorOnly {
    pub operator_id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallAccepted {
    pub operator_id: String,
    pub region: String,
    pub rtt_ms: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleChanged {
    pub from: Option<LifecycleState>,
    pub to: LifecycleState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who acted (the operator in control), when a person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SafetyChanged {
    pub from: SafetyState,
    pub to: SafetyState,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Handover {
    pub from_operator_id: Option<String>,
    pub to_operator_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatPosted {
    pub author_id: String,
    /// `operator`, `admin` or `client`.
    pub author_role: String,
    /// In characters; the text itself stays in ClutchCall.
    pub length: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rated {
    pub operator_id: String,
    pub stars: u8,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RobotRegistered {
    pub model: String,
    pub site: String,
    pub pop: String,
    pub req_cert: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RobotOffline {
    /// RFC 3339: the last heartbeat heard.
    pub last_heartbeat_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Booking {
    pub booking_id: String,
    pub client_id: String,
    /// RFC 3339.
    pub starts_at: String,
    pub ends_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BookingCancelled {
    pub booking_id: String,
}

impl LogEvent {
    /// Every type's name, as `type` carries it and webhooks filter on it.
    pub const TYPES: [&'static str; 19] = [
        "call.raised",
        "call.offered",
        "call.declined",
        "call.expired",
        "call.accepted",
        "call.queued",
        "call.cancelled",
        "session.lifecycle",
        "safety.changed",
        "safety.protective_stop",
        "safety.protective_stop_cleared",
        "session.handover",
        "chat.posted",
        "session.rated",
        "robot.registered",
        "robot.retired",
        "robot.offline",
        "booking.made",
        "booking.cancelled",
    ];

    /// Its type's name (`call.raised`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            LogEvent::CallRaised(_) => "call.raised",
            LogEvent::CallOffered(_) => "call.offered",
            LogEvent::CallDeclined(_) => "call.declined",
            LogEvent::CallExpired(_) => "call.expired",
            LogEvent::CallAccepted(_) => "call.accepted",
            LogEvent::CallQueued(_) => "call.queued",
            LogEvent::CallCancelled(_) => "call.cancelled",
            LogEvent::Lifecycle(_) => "session.lifecycle",
            LogEvent::SafetyChanged(_) => "safety.changed",
            LogEvent::ProtectiveStop(_) => "safety.protective_stop",
            LogEvent::ProtectiveStopCleared(_) => "safety.protective_stop_cleared",
            LogEvent::Handover(_) => "session.handover",
            LogEvent::ChatPosted(_) => "chat.posted",
            LogEvent::Rated(_) => "session.rated",
            LogEvent::RobotRegistered(_) => "robot.registered",
            LogEvent::RobotRetired(_) => "robot.retired",
            LogEvent::RobotOffline(_) => "robot.offline",
            LogEvent::BookingMade(_) => "booking.made",
            LogEvent::BookingCancelled(_) => "booking.cancelled",
        }
    }

    /// The record of a safety change: PROTECTIVE_STOP latching and
    /// clearing are their own types (an incident tool pages on them).
    pub fn safety(from: SafetyState, to: SafetyState) -> LogEvent {
        let change = SafetyChanged { from, to };
        match (from, to) {
            (_, SafetyState::ProtectiveStop) => LogEvent::ProtectiveStop(change),
            (SafetyState::ProtectiveStop, _) => LogEvent::ProtectiveStopCleared(change),
            _ => LogEvent::SafetyChanged(change),
        }
    }

    /// The fields of its type as stored (`data`): the payload alone,
    /// serialised directly, its keys in the order its struct declares them
    /// (readers parse it). Not by way of a `serde_json::Value` of the whole
    /// record: that tree of maps cost the dispatcher 2 % of its time.
    pub fn data(&self) -> String {
        let data = match self {
            LogEvent::CallRaised(data) => serde_json::to_string(data),
            LogEvent::CallOffered(data) => serde_json::to_string(data),
            LogEvent::CallDeclined(data) | LogEvent::CallExpired(data) => serde_json::to_string(data),
            LogEvent::CallAccepted(data) => serde_json::to_string(data),
            LogEvent::CallQueued(data) | LogEvent::RobotRetired(data) => serde_json::to_string(data),
            LogEvent::CallCancelled(data) => serde_json::to_string(data),
            LogEvent::Lifecycle(data) => serde_json::to_string(data),
            LogEvent::SafetyChanged(data) | LogEvent::ProtectiveStop(data) | LogEvent::ProtectiveStopCleared(data) => serde_json::to_string(data),
            LogEvent::Handover(data) => serde_json::to_string(data),
            LogEvent::ChatPosted(data) => serde_json::to_string(data),
            LogEvent::Rated(data) => serde_json::to_string(data),
            LogEvent::RobotRegistered(data) => serde_json::to_string(data),
            LogEvent::RobotOffline(data) => serde_json::to_string(data),
            LogEvent::BookingMade(data) => serde_json::to_string(data),
            LogEvent::BookingCancelled(data) => serde_json::to_string(data),
        };
        // Structs of strings, numbers, options and unit enums: they always serialise.
        data.unwrap_or_else(|_| "{}".into())
    }

    /// A stored record's type and fields read back.
    pub fn parse(kind: &str, data: &str) -> Option<LogEvent> {
        let data: serde_json::Value = serde_json::from_slice(data.as_bytes()).ok()?;
        serde_json::from_value(serde_json::json!({ "type": kind, "data": data })).ok()
    }
}

/// One record of the log, as `/v1/events` and webhooks send it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogRecord {
    /// 1, 2, 3… per org in commit order: `Last-Event-ID`, `?since=`, and
    /// what a receiver deduplicates on.
    pub id: i64,
    /// RFC 3339 UTC.
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robot_id: Option<String>,
    #[serde(flatten)]
    pub event: LogEvent,
}

/// Where a reader asked to start stands against what the log still keeps
/// (rule: records older than the retention are deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Records after `after` are all still kept: read on from there.
    From(i64),
    /// Records after `after` were deleted before the reader read them.
    Gone,
}

/// `after` is the last id the reader has (0: none yet, which reads from the
/// oldest record kept); `oldest` the oldest record kept, if any; `last`
/// the last id ever given (0: none).
pub fn resume(after: i64, oldest: Option<i64>, last: i64) -> Resume {
    let after = after.max(0);
    if after == 0 {
        return Resume::From(0);
    }
    let first_missing = after + 1;
    match oldest {
        Some(oldest) if first_missing < oldest => Resume::Gone,
        None if after < last => Resume::Gone,
        _ => Resume::From(after),
    }
}

/// Whether a webhook that asked for `types` (empty: all) gets `kind`.
pub fn wanted(types: &[String], kind: &str) -> bool {
    types.is_empty() || types.iter().any(|t| t == kind)
}

/// What is wrong with a list of types an admin chose, in a sentence.
pub fn types_problem(types: &[String]) -> Option<String> {
    types.iter().find(|t| !LogEvent::TYPES.contains(&t.as_str())).map(|t| format!("There is no event type \"{t}\"."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_flat_json_with_its_type_and_data() {
        let record = LogRecord {
            id: 7,
            at: "2026-12-03T10:00:00Z".into(),
            session_id: Some("s1".into()),
            robot_id: Some("r1".into()),
            event: LogEvent::CallOffered(CallOffered { operator_id: "u-asha".into(), rtt_ms: 96, expires_at: "2026-12-03T10:00:30Z".into() }),
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["id"], 7);
        assert_eq!(json["type"], "call.offered");
        assert_eq!(json["sessionId"], "s1");
        assert_eq!(json["data"]["operatorId"], "u-asha");
        assert_eq!(serde_json::from_value::<LogRecord>(json).unwrap(), record);
    }

    #[test]
    fn a_stored_type_and_data_read_back_as_the_event() {
        for event in [
            LogEvent::CallQueued(Empty {}),
            LogEvent::safety(SafetyState::Armed, SafetyState::ProtectiveStop),
            LogEvent::Rated(Rated { operator_id: "u".into(), stars: 5 }),
        ] {
            assert_eq!(LogEvent::parse(event.kind(), &event.data()), Some(event.clone()));
            assert!(LogEvent::TYPES.contains(&event.kind()));
        }
        assert_eq!(LogEvent::parse("call.nonsense", "{}"), None);
    }

    #[test]
    fn protective_stop_latching_and_clearing_are_their_own_types() {
        assert_eq!(LogEvent::safety(SafetyState::Armed, SafetyState::ProtectiveStop).kind(), "safety.protective_stop");
        assert_eq!(LogEvent::safety(SafetyState::ProtectiveStop, SafetyState::Safe).kind(), "safety.protective_stop_cleared");
        assert_eq!(LogEvent::safety(SafetyState::Safe, SafetyState::Armed).kind(), "safety.changed");
    }

    #[test]
    fn a_reader_behind_what_is_kept_is_told_it_is_gone() {
        assert_eq!(resume(0, None, 0), Resume::From(0), "an empty log");
        assert_eq!(resume(0, Some(1), 5), Resume::From(0), "from the start, all kept");
        assert_eq!(resume(0, Some(4), 9), Resume::From(0), "a new reader reads what is kept");
        assert_eq!(resume(3, Some(4), 9), Resume::From(3), "the next one is the oldest kept");
        assert_eq!(resume(2, Some(4), 9), Resume::Gone, "3 was deleted");
        assert_eq!(resume(9, None, 9), Resume::From(9), "all read, then all deleted");
        assert_eq!(resume(5, None, 9), Resume::Gone, "6–9 deleted unread");
    }

    #[test]
    fn webhooks_filter_on_type_names_and_an_unknown_one_is_refused() {
        assert!(wanted(&[], "call.raised"));
        assert!(wanted(&["call.raised".into()], "call.raised"));
        assert!(!wanted(&["call.raised".into()], "call.offered"));
        assert_eq!(types_problem(&["call.raised".into()]), None);
        assert!(types_problem(&["call.rised".into()]).is_some());
    }

    /// `kind()`, `TYPES` and the serde names spell each type alike: one
    /// sample of every type.
    #[test]
    fn every_type_is_named_alike_by_kind_types_and_serde() {
        let who = || OperatorOnly { operator_id: "u".into() };
        let safety = || SafetyChanged { from: SafetyState::Safe, to: SafetyState::Armed };
        let lifecycle = LifecycleChanged { from: None, to: LifecycleState::Completed, reason: None, operator_id: None };
        let samples = [
            LogEvent::CallRaised(CallRaised { skill: "s".into(), pop: "p".into(), booking_id: None }),
            LogEvent::CallOffered(CallOffered { operator_id: "u".into(), rtt_ms: 1, expires_at: "t".into() }),
            LogEvent::CallDeclined(who()),
            LogEvent::CallExpired(who()),
            LogEvent::CallAccepted(CallAccepted { operator_id: "u".into(), region: "r".into(), rtt_ms: 1 }),
            LogEvent::CallQueued(Empty {}),
            LogEvent::CallCancelled(Ended { reason: "r".into() }),
            LogEvent::Lifecycle(lifecycle),
            LogEvent::SafetyChanged(safety()),
            LogEvent::ProtectiveStop(safety()),
            LogEvent::ProtectiveStopCleared(safety()),
            LogEvent::Handover(Handover { from_operator_id: None, to_operator_id: "u".into(), reason: None }),
            LogEvent::ChatPosted(ChatPosted { author_id: "u".into(), author_role: "admin".into(), length: 3 }),
            LogEvent::Rated(Rated { operator_id: "u".into(), stars: 4 }),
            LogEvent::RobotRegistered(RobotRegistered { model: "m".into(), site: "s".into(), pop: "p".into(), req_cert: "c".into() }),
            LogEvent::RobotRetired(Empty {}),
            LogEvent::RobotOffline(RobotOffline { last_heartbeat_at: "t".into() }),
            LogEvent::BookingMade(Booking { booking_id: "b".into(), client_id: "c".into(), starts_at: "t".into(), ends_at: "t".into() }),
            LogEvent::BookingCancelled(BookingCancelled { booking_id: "b".into() }),
        ];
        let kinds: Vec<&str> = samples.iter().map(LogEvent::kind).collect();
        assert_eq!(kinds, LogEvent::TYPES, "one sample per type, in TYPES' order");
        for event in &samples {
            let record = serde_json::to_value(event).unwrap();
            assert_eq!(record["type"], event.kind());
            let data: serde_json::Value = serde_json::from_str(&event.data()).unwrap();
            assert_eq!(data, record["data"], "{}: the stored data is the payload the record carries", event.kind());
        }
    }
}
