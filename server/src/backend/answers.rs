//! How the backend answers people: the services' and the engine's
//! refusals as `AppError`s.

use app::error::AppError;
use domain::models::SessionRecord;

pub(super) use crate::services::store_failed as internal;

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
        | E::CannotExtend(_)
        | E::CannotTakeOver(_) => AppError::Conflict(e.to_string()),
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
