//! Server functions of the client (seed 001): bookings, the client's
//! sessions and billable time, extending a running session. Admins can do
//! everything a client can (for any client, and for sessions without one).

#[cfg(feature = "ssr")]
use super::guard;
use crate::booking::{Booking, BookingOptions, ClientSessions};
use crate::error::AppError;
use crate::models::SessionRecord;
use leptos::prelude::*;

/// Whose bookings and sessions the caller sees: a client their own, an
/// admin everyone's (`None`).
#[cfg(feature = "ssr")]
async fn client_scope() -> Result<(super::backend::SharedBackend, crate::models::CurrentUser, crate::models::OrgMembership, Option<String>), AppError> {
    use crate::models::Role;
    let (user, org) = guard::require(Role::Client).await?;
    let scope = (org.role != Role::Admin).then(|| user.user_id.clone());
    Ok((guard::backend()?, user, org, scope))
}

/// Bookings not over yet (a client's own; all of the org's for an admin).
#[server(endpoint = "load_bookings")]
pub async fn load_bookings() -> Result<Vec<Booking>, AppError> {
    let (backend, _, org, scope) = client_scope().await.map_err(guard::fail)?;
    backend.bookings(&org.org_id, scope.as_deref()).await.map_err(guard::fail)
}

/// What the booking form offers.
#[server(endpoint = "load_booking_options")]
pub async fn load_booking_options() -> Result<BookingOptions, AppError> {
    let (backend, _, org, scope) = client_scope().await.map_err(guard::fail)?;
    backend.booking_options(&org.org_id, scope.as_deref()).await.map_err(guard::fail)
}

/// Books a robot from `starts_at` (`2026-11-30T14:00`, UTC) for `minutes`:
/// a client for themself; an admin for `client_id`.
#[server(endpoint = "book_robot")]
pub async fn book_robot(robot_id: String, starts_at: String, minutes: i64, client_id: Option<String>, task: Option<String>) -> Result<Booking, AppError> {
    let Some(start) = crate::booking::parse_utc_minute(&starts_at) else {
        return Err(guard::fail(AppError::Invalid("Give the start as a date and time (UTC).".into())));
    };
    if minutes <= 0 {
        return Err(guard::fail(AppError::Invalid("Book at least one minute.".into())));
    }
    let (backend, user, org, scope) = client_scope().await.map_err(guard::fail)?;
    let client = match (scope, client_id.filter(|c| !c.is_empty())) {
        (Some(me), _) => me,
        (None, Some(chosen)) => chosen,
        (None, None) => return Err(guard::fail(AppError::Invalid("Choose the client the booking is for.".into()))),
    };
    let end = start.saturating_add(minutes.saturating_mul(60_000));
    let task = task.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    if task.as_ref().is_some_and(|t| t.chars().count() > crate::booking::MAX_TASK_CHARS) {
        return Err(guard::fail(AppError::Invalid(format!("Describe the task in at most {} characters.", crate::booking::MAX_TASK_CHARS))));
    }
    backend.book(&org.org_id, &user.user_id, &client, &robot_id, start, end, task.as_deref()).await.map_err(guard::fail)
}

/// Cancels a booking: a client only their own.
#[server(endpoint = "cancel_booking")]
pub async fn cancel_booking(booking_id: String) -> Result<(), AppError> {
    let (backend, _, org, scope) = client_scope().await.map_err(guard::fail)?;
    backend.cancel_booking(&org.org_id, &booking_id, scope.as_deref()).await.map_err(guard::fail)
}

/// The caller's sessions as a client (an admin: those without a client),
/// with billable time by month.
#[server(endpoint = "load_client_sessions")]
pub async fn load_client_sessions() -> Result<ClientSessions, AppError> {
    let (backend, _, org, scope) = client_scope().await.map_err(guard::fail)?;
    backend.client_sessions(&org.org_id, scope.as_deref()).await.map_err(guard::fail)
}

/// Extends a running session by `minutes` (rule L13): its operator, its
/// client, or an admin; refused when the robot is booked by someone else
/// before the new end.
#[server(endpoint = "extend_session")]
pub async fn extend_session(session_id: String, minutes: i64) -> Result<SessionRecord, AppError> {
    let guard::SessionAccess { backend, user, org, session } = guard::party_access(&session_id).await.map_err(guard::fail)?;
    let me = Some(user.user_id.as_str());
    let is_client = session.client_id.as_deref() == me || org.role == crate::models::Role::Admin;
    let operator = (!is_client).then_some(user.user_id.as_str());
    backend.extend_session(&org.org_id, &session_id, operator, &user.user_id, minutes).await.map_err(guard::fail)
}
