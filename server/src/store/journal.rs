//! What the engine hands the store (a batch's journal of writes) and what
//! the store hands back (rows, the org snapshot, telemetry outcomes).

use super::{OperatorRecord, StoreError, StoreResult};
use domain::dispatch::{OfferStatus, Outcome};
use domain::event_log::LogEvent;
use domain::lifecycle::ActivityKind;
use domain::models::{LifecycleState, SafetyState};

#[derive(Clone, Debug)]
pub struct NewSession {
    pub id: String,
    pub org_id: String,
    pub robot_id: String,
    pub skill: String,
    pub pop: String,
    pub raised_at: i64,
    /// From the booking the call was raised in (rule L13).
    pub client_id: Option<String>,
    pub booking_id: Option<String>,
    pub planned_end_at: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct NewOffer {
    pub id: String,
    pub operator_id: String,
    pub rtt_ms: u32,
    pub offered_at: i64,
    pub expires_at: i64,
}

#[derive(Clone, Debug)]
pub struct DispatchRecord {
    pub at: i64,
    pub trigger: domain::dispatch::Trigger,
    pub pool_source: domain::dispatch::PoolSource,
    pub outcome: Outcome,
    pub operator_id: Option<String>,
    pub rtt_ms: Option<u32>,
    /// The candidates with RTT and verdict, as JSON.
    pub candidates: String,
}

/// One change of a batch, in the order the engine decided it.
#[derive(Clone, Debug)]
pub enum Write {
    OpenSession(NewSession),
    /// The call waits in its skill's queue from `at`.
    Queue { org_id: String, session_id: String, at: i64 },
    /// The call rings `offer.operator_id`; `from_queue`: it leaves the queue.
    Offer { org_id: String, session_id: String, offer: NewOffer, from_queue: bool },
    CloseOffer { org_id: String, session_id: String, operator_id: String, status: OfferStatus, at: i64 },
    /// PENDING → ACTIVE with the operator attached; logs SESSION_START.
    Start { org_id: String, session_id: String, operator_id: String, region: String, rtt_ms: u32, planned_end_at: i64, at: i64 },
    /// → COMPLETED or CANCELLED; logs SESSION_END.
    End { org_id: String, session_id: String, to: LifecycleState, reason: String, attached: Option<String>, at: i64 },
    /// An activity event that changes no state (ACTIVITY_CHECK,
    /// INACTIVITY_WARNING, INACTIVITY_STOP before its end, ERROR).
    Activity { org_id: String, session_id: String, kind: ActivityKind, operator_id: Option<String>, detail: Option<String>, at: i64 },
    /// ACTIVE ⇄ PAUSED; logs PAUSE or RESUME (`kind`).
    Steer { org_id: String, session_id: String, from: LifecycleState, to: LifecycleState, kind: ActivityKind, operator_id: Option<String>, at: i64 },
    Record { org_id: String, session_id: String, record: DispatchRecord },
    /// Control of a live session moves to `to` (rule L08); logs OPERATOR_SWITCH.
    Switch { org_id: String, session_id: String, from: Option<String>, to: String, region: String, rtt_ms: u32, detail: Option<String>, at: i64 },
}

impl Write {
    /// What the org's event log records of this write (`domain::event_log`),
    /// in its transaction: (org, session, at, event). Dispatch records and
    /// activity checks are ClutchCall's own, not integrators'.
    pub fn logged(&self) -> Option<(&str, &str, i64, LogEvent)> {
        use domain::event_log as log;
        Some(match self {
            Write::OpenSession(s) => (
                &s.org_id,
                &s.id,
                s.raised_at,
                LogEvent::CallRaised(log::CallRaised { skill: s.skill.clone(), pop: s.pop.clone(), booking_id: s.booking_id.clone() }),
            ),
            Write::Queue { org_id, session_id, at } => (org_id, session_id, *at, LogEvent::CallQueued(log::Empty {})),
            Write::Offer { org_id, session_id, offer, .. } => (
                org_id,
                session_id,
                offer.offered_at,
                LogEvent::CallOffered(log::CallOffered {
                    operator_id: offer.operator_id.clone(),
                    rtt_ms: offer.rtt_ms,
                    expires_at: domain::rules::rfc3339(offer.expires_at),
                }),
            ),
            Write::CloseOffer { org_id, session_id, operator_id, status, at } => {
                let who = log::OperatorOnly { operator_id: operator_id.clone() };
                let event = match status {
                    OfferStatus::Declined => LogEvent::CallDeclined(who),
                    OfferStatus::Expired => LogEvent::CallExpired(who),
                    // Accepted: `Start` says so; withdrawn: the call's end does.
                    OfferStatus::Accepted | OfferStatus::Withdrawn => return None,
                };
                (org_id, session_id, *at, event)
            }
            Write::Start { org_id, session_id, operator_id, region, rtt_ms, at, .. } => (
                org_id,
                session_id,
                *at,
                LogEvent::CallAccepted(log::CallAccepted { operator_id: operator_id.clone(), region: region.clone(), rtt_ms: *rtt_ms }),
            ),
            // Nobody attached: the call ended before anyone took it.
            Write::End { org_id, session_id, to: LifecycleState::Cancelled, reason, attached: None, at } => {
                (org_id, session_id, *at, LogEvent::CallCancelled(log::Ended { reason: reason.clone() }))
            }
            Write::End { org_id, session_id, to, reason, attached, at } => (
                org_id,
                session_id,
                *at,
                LogEvent::Lifecycle(log::LifecycleChanged { from: None, to: *to, reason: Some(reason.clone()), operator_id: attached.clone() }),
            ),
            Write::Steer { org_id, session_id, from, to, operator_id, at, .. } => (
                org_id,
                session_id,
                *at,
                LogEvent::Lifecycle(log::LifecycleChanged { from: Some(*from), to: *to, reason: None, operator_id: operator_id.clone() }),
            ),
            Write::Switch { org_id, session_id, from, to, detail, at, .. } => (
                org_id,
                session_id,
                *at,
                LogEvent::Handover(log::Handover { from_operator_id: from.clone(), to_operator_id: to.clone(), reason: detail.clone() }),
            ),
            Write::Activity { .. } | Write::Record { .. } => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct SessionRow {
    pub id: String,
    pub org_id: String,
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub pop: String,
    pub skill: String,
    pub lifecycle: String,
    pub safety_state: String,
    pub operator_id: Option<String>,
    pub operator_name: Option<String>,
    pub operator_region: Option<String>,
    pub rtt_ms: Option<i64>,
    pub divergence_deg: Option<f64>,
    pub velocity_scale: Option<f64>,
    pub raised_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub client_id: Option<String>,
    pub client_name: Option<String>,
    pub planned_end_at: Option<i64>,
    pub booking_id: Option<String>,
}

impl SessionRow {
    pub fn lifecycle(&self) -> StoreResult<LifecycleState> {
        decode("lifecycle", LifecycleState::parse(&self.lifecycle))
    }

    pub fn safety(&self) -> StoreResult<SafetyState> {
        decode("safety state", SafetyState::parse(&self.safety_state))
    }

    /// The session record as the API and the screens show it.
    pub fn record(self) -> StoreResult<domain::models::SessionRecord> {
        Ok(domain::models::SessionRecord {
            lifecycle: self.lifecycle()?,
            state: self.safety()?,
            id: self.id,
            robot: self.robot_id,
            robot_model: self.robot_model,
            site: self.site,
            pop: self.pop,
            skill: self.skill,
            operator_id: self.operator_id,
            operator_name: self.operator_name,
            region: self.operator_region,
            raised_at: self.raised_at,
            started_at: self.started_at,
            ended_at: self.ended_at,
            rtt_ms: self.rtt_ms.and_then(|v| u32::try_from(v).ok()),
            divergence_deg: self.divergence_deg,
            velocity_scale: self.velocity_scale,
            client_id: self.client_id,
            client_name: self.client_name,
            planned_end_at: self.planned_end_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct OpenOfferRow {
    pub org_id: String,
    pub session_id: String,
    pub operator_id: String,
    pub rtt_ms: i64,
    pub offered_at: i64,
    pub expires_at: i64,
}

/// A PENDING call as the engine reloads it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct PendingCallRow {
    pub session_id: String,
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub skill: String,
    pub pop: String,
    pub raised_at: i64,
    pub queued_at: Option<i64>,
    pub client_id: Option<String>,
    pub booking_id: Option<String>,
    pub planned_end_at: Option<i64>,
}

/// An ACTIVE or PAUSED session.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct LiveSessionRow {
    pub session_id: String,
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub skill: String,
    pub pop: String,
    pub operator_id: Option<String>,
    pub lifecycle: String,
    pub planned_end_at: Option<i64>,
    /// The booking the session runs in (its own never blocks an extension).
    pub booking_id: Option<String>,
}

/// A decline or miss of a still-pending call, for the cool-off (rule D08).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct AnsweredOfferRow {
    pub session_id: String,
    pub operator_id: String,
    pub answered_at: i64,
}

/// Everything an org's dispatcher loads when it starts or reloads.
#[derive(Clone, Debug, Default)]
pub struct OrgSnapshot {
    pub operators: Vec<OperatorRecord>,
    pub pending: Vec<PendingCallRow>,
    pub open_offers: Vec<OpenOfferRow>,
    pub answered: Vec<AnsweredOfferRow>,
    pub live: Vec<LiveSessionRow>,
    /// Open offers of other orgs to this org's people (rule D10; in
    /// cluster mode their desks may run on other instances).
    pub held_elsewhere: Vec<HeldElsewhereRow>,
}

/// An open offer of another org to one of this org's people.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct HeldElsewhereRow {
    pub operator_id: String,
    pub org_id: String,
    pub expires_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct DispatchRecordRow {
    pub at: i64,
    pub trigger: String,
    pub pool_source: String,
    pub outcome: String,
    pub operator_id: Option<String>,
    pub rtt_ms: Option<i64>,
    pub candidates: String,
}

impl DispatchRecordRow {
    /// The decision as the session detail shows it.
    pub fn decision(self) -> StoreResult<domain::dispatch::DispatchDecision> {
        fn named<T: serde::de::DeserializeOwned>(what: &str, name: String) -> StoreResult<T> {
            decode(what, serde_json::from_value(serde_json::Value::String(name)).ok())
        }
        Ok(domain::dispatch::DispatchDecision {
            at_ms: self.at,
            trigger: named("trigger", self.trigger)?,
            pool_source: named("pool source", self.pool_source)?,
            outcome: named("outcome", self.outcome)?,
            operator_id: self.operator_id,
            rtt_ms: self.rtt_ms.and_then(|r| u32::try_from(r).ok()),
            considered: decode("candidates", serde_json::from_str(&self.candidates).ok())?,
        })
    }
}

/// Edge-agent telemetry as stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Telemetry {
    pub state: SafetyState,
    pub rtt_ms: u32,
    pub divergence_deg: f64,
    pub velocity_scale: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TelemetryOutcome {
    Applied { row: SessionRow, entered_protective_stop: bool },
    /// The session is latched in PROTECTIVE_STOP; only an explicit clear leaves it.
    Latched,
    /// COMPLETED or CANCELLED: nothing reports into a finished session.
    Ended,
    NotFound,
}

/// An org's dispatch lease as this instance holds it (migration 0013):
/// every batch commits only while the org's epoch is still this one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub org_id: String,
    pub epoch: i64,
}

/// A stored name or JSON this build does not know, as a decoding error.
pub(super) fn decode<T>(what: &str, value: Option<T>) -> StoreResult<T> {
    value.ok_or_else(|| StoreError::Database(sqlx::Error::Decode(format!("unknown {what}").into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(to: LifecycleState, attached: Option<&str>) -> Write {
        Write::End { org_id: "o".into(), session_id: "s".into(), to, reason: "why".into(), attached: attached.map(Into::into), at: 9 }
    }

    #[test]
    fn a_call_ended_before_anyone_took_it_is_logged_as_cancelled_and_a_session_as_a_lifecycle_change() {
        let kind = |w: &Write| w.logged().map(|(_, _, _, e)| e.kind());
        assert_eq!(kind(&end(LifecycleState::Cancelled, None)), Some("call.cancelled"));
        assert_eq!(kind(&end(LifecycleState::Cancelled, Some("u"))), Some("session.lifecycle"));
        assert_eq!(kind(&end(LifecycleState::Completed, Some("u"))), Some("session.lifecycle"));
        let close = |status| Write::CloseOffer { org_id: "o".into(), session_id: "s".into(), operator_id: "u".into(), status, at: 1 };
        assert_eq!(kind(&close(OfferStatus::Declined)), Some("call.declined"));
        assert_eq!(kind(&close(OfferStatus::Expired)), Some("call.expired"));
        assert_eq!(kind(&close(OfferStatus::Accepted)), None, "the start says it");
        assert_eq!(kind(&close(OfferStatus::Withdrawn)), None, "the call's end says it");
    }
}
