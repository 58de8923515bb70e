//! How the backend answers people: store and engine refusals as
//! `AppError`s, and store rows as the views the screens show.

use crate::store::{MembershipRecord, OperatorRecord, RobotRecord, StoreError};
use app::error::AppError;
use app::models::{Operator, OrgMembership, Robot, SessionRecord};
use app::rules::{registry_status, skill_of, skills_of};

pub(super) fn internal(e: StoreError) -> AppError {
    tracing::error!(error = %e, "store failure");
    AppError::Internal("database unavailable".into())
}

/// What the engine refused, for a person.
pub(super) fn refused(e: crate::engine::EngineError) -> AppError {
    use crate::engine::EngineError as E;
    match e {
        E::NotFound(what) => AppError::NotFound(format!("The {what}")),
        // Someone else's session answers as an unknown one: no oracle.
        E::NotAttached => AppError::NotFound("The session".into()),
        E::Inactive => AppError::Forbidden(e.to_string()),
        E::SessionEnded
        | E::Paused
        | E::IllegalTransition { .. }
        | E::CallInProgress { .. }
        | E::NoOpenOffer
        | E::HandoverRinging(_)
        | E::NotHandoverCandidate
        | E::CannotExtend(_) => AppError::Conflict(e.to_string()),
        E::NoSkill(_) | E::ImplausibleRtt => AppError::Invalid(e.to_string()),
        E::Unavailable | E::DispatchedElsewhere => AppError::Busy,
        E::Store(e) => internal(e),
    }
}

/// What the booking service refused, for a person.
pub(super) fn booking_refused(e: crate::services::bookings::BookingError) -> AppError {
    use crate::services::bookings::BookingError as B;
    match e {
        B::Invalid(why) => AppError::Invalid(why),
        B::Conflict(why) => AppError::Conflict(why),
        B::NotFound(what) => AppError::NotFound(format!("The {what}")),
        B::Store(e) => internal(e),
    }
}

/// A person's safety change, answered.
pub(super) fn safety_answer(session_id: &str, change: crate::store::SafetyChange) -> Result<SessionRecord, AppError> {
    use crate::store::SafetyChange as C;
    match change {
        C::Applied(row) | C::Unchanged(row) => row.record().map_err(internal),
        C::NotLatched => Err(AppError::Conflict("The session is not in PROTECTIVE_STOP: there is nothing to clear.".into())),
        C::Ended => Err(AppError::Conflict("The session has already ended.".into())),
        C::NotFound => Err(AppError::NotFound(format!("Session {session_id}"))),
    }
}

pub(super) fn membership(m: MembershipRecord) -> OrgMembership {
    OrgMembership { org_id: m.org_id, org_name: m.org_name, role: m.role }
}

pub(super) fn robot_view(r: RobotRecord, now: i64) -> Robot {
    Robot {
        skill: skill_of(&r.req_cert).unwrap_or_default().to_string(),
        status: registry_status(r.last_heartbeat_at, now),
        id: r.id,
        model: r.model,
        site: r.site,
        pop: r.pop,
        req_cert: r.req_cert,
        last_heartbeat_ms: r.last_heartbeat_at,
        token_rotated_ms: r.token_rotated_at,
        live_session: None,
    }
}

pub(super) type Scores = std::collections::HashMap<String, app::rating::OperatorScore>;

pub(super) fn scores_of(rows: Vec<crate::store::ScoreRow>) -> Scores {
    rows.into_iter().map(|r| (r.operator_id, app::rating::OperatorScore::new(r.average, u32::try_from(r.count).unwrap_or(0)))).collect()
}

pub(super) fn operator_view(o: OperatorRecord, scores: &Scores) -> Operator {
    Operator {
        score: scores.get(&o.user_id).copied(),
        skills: skills_of(&o.certifications),
        id: o.user_id,
        display_name: o.display_name,
        email: o.email,
        external_id: o.external_id,
        role: o.role,
        region: o.region,
        certifications: o.certifications,
    }
}

/// What the robot registry refused, for a person.
pub(super) fn directory_refused(e: crate::services::registry::DirectoryError) -> AppError {
    use crate::services::registry::DirectoryError as D;
    match e {
        D::NotFound => AppError::NotFound("The robot".into()),
        D::LiveSession(_) | D::Exists(_) => AppError::Conflict(e.to_string()),
        D::Invalid(why) => AppError::Invalid(why),
        D::Store(e) => internal(e),
    }
}
