//! Server functions on one session: the cockpit, the session detail and
//! the client screen. Each checks who may act on the session, then asks the
//! server's `Backend`.

#[cfg(feature = "ssr")]
use super::guard;
use crate::error::AppError;
use crate::models::{LifecycleState, SessionRecord};
use leptos::prelude::*;


/// A session for the cockpit: its attached operator, or an admin of the org.
/// Anyone else gets 404, as if it did not exist.
#[server(endpoint = "load_session")]
pub async fn load_session(session_id: String) -> Result<SessionRecord, AppError> {
    Ok(guard::party_access(&session_id).await.map_err(guard::fail)?.session)
}

/// The session's activity log (rule L05), for the same people as the session.
#[server(endpoint = "load_session_activity")]
pub async fn load_session_activity(session_id: String) -> Result<crate::lifecycle::SessionActivity, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    backend.session_activity(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// The call's dispatch decisions (who was considered, their RTT and
/// verdict), for the session detail: admins of the org.
#[server(endpoint = "load_dispatch_decisions")]
pub async fn load_dispatch_decisions(session_id: String) -> Result<Vec<crate::dispatch::DispatchDecision>, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::session_access(crate::models::Role::Admin, &session_id).await.map_err(guard::fail)?;
    backend.dispatch_decisions(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// The session's chat (rule L09): for the same people as the session.
#[server(endpoint = "load_chat")]
pub async fn load_chat(session_id: String) -> Result<Vec<crate::chat::ChatMessage>, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    backend.chat(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// Sends a chat message on a session that has not ended.
#[server(endpoint = "post_chat")]
pub async fn post_chat(session_id: String, body: String) -> Result<crate::chat::ChatMessage, AppError> {
    let body = crate::chat::chat_body(&body).map_err(|why| guard::fail(AppError::Invalid(why)))?;
    let guard::SessionAccess { backend, user, org, session } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    if session.lifecycle.is_terminal() {
        return Err(guard::fail(AppError::Conflict("The session has ended: its chat is read-only.".into())));
    }
    backend.post_chat(&org.org_id, &user, &session, &body).await.map_err(guard::fail)
}

/// The session's rating, if given (for the same people as the session).
#[server(endpoint = "load_session_rating")]
pub async fn load_session_rating(session_id: String) -> Result<Option<crate::rating::SessionRating>, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    backend.session_rating(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// Rates the operator of a COMPLETED session, 1–5 stars with feedback,
/// once (rule L10). The session's client rates, or an admin of the org
/// (admins act for the client, and for sessions without one).
#[server(endpoint = "rate_session")]
pub async fn rate_session(session_id: String, stars: u8, feedback: String) -> Result<crate::rating::SessionRating, AppError> {
    use crate::rating::{rating_input_problem, rating_problem};
    let feedback = feedback.trim().to_string();
    if let Some(why) = rating_input_problem(stars, &feedback) {
        return Err(guard::fail(AppError::Invalid(why)));
    }
    let guard::SessionAccess { backend, user, org, session } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    if !crate::rating::may_rate(org.role, &user.user_id, &session) {
        return Err(guard::fail(AppError::Forbidden("Only the session's client (or an admin) rates its operator.".into())));
    }
    // "Rated already is the store's answer (one row per session), not a
    // read before the write.
    if let Some(why) = rating_problem(session.lifecycle, false, stars, &feedback) {
        return Err(guard::fail(AppError::Conflict(why)));
    }
    backend.rate_session(&org.org_id, &user, &session, stars, &feedback).await.map_err(guard::fail)
}

/// E-stop (operator-initiated PROTECTIVE_STOP): the attached operator or an
/// admin of the org. Latched until cleared on the session detail.
#[server(endpoint = "estop_session")]
pub async fn estop_session(session_id: String) -> Result<SessionRecord, AppError> {
    let guard::SessionAccess { backend, user, org, session } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
    backend.estop_session(&org.org_id, &user.user_id, &session).await.map_err(guard::fail)
}

/// Clears a latched PROTECTIVE_STOP (rule W11): an admin of the org or the
/// attached operator, with a reason; the only way out of the latch.
#[server(endpoint = "clear_protective_stop")]
pub async fn clear_protective_stop(session_id: String, reason: String) -> Result<SessionRecord, AppError> {
    let reason = reason.trim().to_string();
    if reason.is_empty() {
        return Err(guard::fail(AppError::Invalid("Say why the stop may be cleared.".into())));
    }
    if reason.chars().count() > crate::rules::MAX_REASON_CHARS {
        return Err(guard::fail(AppError::Invalid(format!("Keep the reason under {} characters.", crate::rules::MAX_REASON_CHARS))));
    }
    let guard::SessionAccess { backend, user, org, session } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
    backend.clear_protective_stop(&org.org_id, &user.user_id, &session, &reason).await.map_err(guard::fail)
}

/// Pause, resume or complete a session (seed 001): its attached operator,
/// or an admin of the org. Anything else the lifecycle forbids is a 409.
#[server(endpoint = "steer_session")]
pub async fn steer_session(session_id: String, to: LifecycleState) -> Result<SessionRecord, AppError> {
    use crate::models::Role;
    if !matches!(to, LifecycleState::Paused | LifecycleState::Active | LifecycleState::Completed) {
        return Err(guard::fail(AppError::Invalid(format!("A session cannot be moved to {} from here.", to.as_str()))));
    }
    // Someone else's session answers as an unknown one, whatever its state.
    let guard::SessionAccess { backend, user, org, .. } = guard::session_access(Role::Operator, &session_id).await.map_err(guard::fail)?;
    let by = (org.role != Role::Admin).then_some(user.user_id.as_str());
    backend.steer_session(&org.org_id, &session_id, to, by).await.map_err(guard::fail)
}

/// Who the session may be handed to (rule L08), best first: ready
/// operators certified for its skill. For its operator and the org's admins.
#[server(endpoint = "load_handover_candidates")]
pub async fn load_handover_candidates(session_id: String) -> Result<Vec<crate::dispatch::Candidate>, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
    backend.handover_candidates(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// Offers the session to another operator (rule L08): the operator in
/// control, or an admin of the org. Control moves when they accept.
#[server(endpoint = "hand_over_session")]
pub async fn hand_over_session(session_id: String, to_operator_id: String) -> Result<crate::models::Offer, AppError> {
    use crate::models::Role;
    let guard::SessionAccess { backend, user, org, .. } = guard::session_access(Role::Operator, &session_id).await.map_err(guard::fail)?;
    let by = (org.role != Role::Admin).then_some(user.user_id.as_str());
    backend.hand_over(&org.org_id, &session_id, by, &to_operator_id).await.map_err(guard::fail)
}

/// A certified admin takes control of a live session of the org, without
/// the operator's accept: OPERATOR_SWITCH with the reason; the operator's
/// cockpit lets go. An uncertified admin is refused (they may E-stop).
#[server(endpoint = "take_over_session")]
pub async fn take_over_session(session_id: String, reason: String) -> Result<SessionRecord, AppError> {
    use crate::models::Role;
    let reason = reason.trim().to_string();
    if reason.is_empty() || reason.chars().count() > crate::rules::MAX_REASON_CHARS {
        let max = crate::rules::MAX_REASON_CHARS;
        return Err(guard::fail(AppError::Invalid(format!("Say why you take control (up to {max} characters): it is kept in the activity log."))));
    }
    let (user, org) = guard::require(Role::Admin).await.map_err(guard::fail)?;
    let backend = guard::backend()?;
    backend.take_over(&org.org_id, &user.user_id, &session_id, &reason).await.map_err(guard::fail)
}

/// Both state histories of the session (lifecycle and safety) as a
/// timeline, for the session detail's parties.
#[server(endpoint = "load_state_history")]
pub async fn load_state_history(session_id: String) -> Result<crate::timeline::StateHistory, AppError> {
    let guard::SessionAccess { backend, org, session, .. } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    backend.state_history(&org.org_id, &session).await.map_err(guard::fail)
}
