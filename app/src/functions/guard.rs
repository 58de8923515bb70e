//! Who is asking: session cookie → user → role in the selected org.

use super::backend::SharedBackend;
use crate::error::AppError;
use crate::models::{CurrentUser, OrgMembership, Role};
use leptos::prelude::*;

pub fn backend() -> Result<SharedBackend, AppError> {
    use_context::<SharedBackend>().ok_or_else(|| AppError::Internal("backend missing".into()))
}

pub fn integrations() -> Result<super::backend::SharedIntegrations, AppError> {
    use_context::<super::backend::SharedIntegrations>().ok_or_else(|| AppError::Internal("integrations missing".into()))
}

pub fn directory_admin() -> Result<super::backend::SharedDirectoryAdmin, AppError> {
    use_context::<super::backend::SharedDirectoryAdmin>().ok_or_else(|| AppError::Internal("directory administration missing".into()))
}

/// The request's sign-in tokens: usually one; several when cookies
/// share the name, and then the first live sign-in counts.
pub fn session_tokens() -> Vec<String> {
    match (use_context::<http::request::Parts>(), backend()) {
        (Some(parts), Ok(backend)) => backend.session_cookie().tokens(&parts.headers),
        _ => Vec::new(),
    }
}

/// The address the request came from: as the server recorded it (past
/// trusted proxies, see `server::http::client`), else the TCP peer.
pub fn client_address() -> Option<std::net::IpAddr> {
    let parts = use_context::<http::request::Parts>()?;
    if let Some(recorded) = parts.extensions.get::<super::ClientAddress>() {
        return Some(recorded.0);
    }
    let info = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()?;
    Some(info.0.ip())
}

/// A session the person may see: its attached operator, its client, or an
/// admin of the org. Anyone else gets "not found", as if it did not exist.
pub async fn session_of(backend: &SharedBackend, user: &CurrentUser, org: &OrgMembership, session_id: &str) -> Result<crate::models::SessionRecord, AppError> {
    let record = backend.session(&org.org_id, session_id).await?;
    let me = Some(user.user_id.as_str());
    let party = record.operator_id.as_deref() == me || record.client_id.as_deref() == me;
    if party || org.role == Role::Admin {
        Ok(record)
    } else {
        Err(AppError::NotFound(format!("Session {session_id}")))
    }
}

/// A session the caller may see, with who they are and the backend to
/// answer: signed in with `role` in the selected org, and the session's
/// attached operator or an admin of the org (see [`session_of`]).
pub struct SessionAccess {
    pub backend: SharedBackend,
    pub user: CurrentUser,
    pub org: OrgMembership,
    pub session: crate::models::SessionRecord,
}

pub async fn session_access(role: Role, session_id: &str) -> Result<SessionAccess, AppError> {
    let backend = backend()?;
    let (user, org) = require(role).await?;
    let session = session_of(&backend, &user, &org, session_id).await?;
    Ok(SessionAccess { backend, user, org, session })
}

/// As [`session_access`] for any role: the session's operator, its client
/// or an admin (reading it, its log and chat; chatting).
pub async fn party_access(session_id: &str) -> Result<SessionAccess, AppError> {
    let backend = backend()?;
    let user = user().await?;
    let org = user.selected_org.clone().ok_or(AppError::NoOrgSelected)?;
    let session = session_of(&backend, &user, &org, session_id).await?;
    Ok(SessionAccess { backend, user, org, session })
}

/// Whether the request is a plain HTML form's post (the browser wants a page
/// back), not a call from the page's script.
pub fn plain_form_post() -> bool {
    use_context::<http::request::Parts>().is_some_and(|parts| {
        parts.method == http::Method::POST
            && parts.headers.get(http::header::ACCEPT).and_then(|accept| accept.to_str().ok()).is_some_and(|accept| accept.contains("text/html"))
    })
}

/// Marks the HTTP response with the error's status, then returns it. Not a
/// plain form's: that is sent back to its page with the error in the URL
/// (a 302, which a 4xx status would replace: the browser would then show
/// the error's JSON instead of the form).
pub fn fail(error: AppError) -> AppError {
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        if !plain_form_post() {
            response.set_status(error.status());
        }
        if let Some(seconds) = error.retry_after_s() {
            response.insert_header(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
    }
    error
}

/// The caller. While a page renders, its loads reuse the user its request
/// was resolved to before rendering (`server::http::page_user`) instead of
/// each looking the sign-in up again; a call from the browser looks it up.
pub async fn user() -> Result<CurrentUser, AppError> {
    let page = use_context::<http::request::Parts>().and_then(|parts| parts.extensions.get::<crate::page_user::Session>().cloned());
    match page {
        Some(page) => page.user().clone()?.ok_or(AppError::Unauthenticated),
        None => Ok(signed_in().await?.1),
    }
}

/// The caller's sign-in token and user (for what ends or changes the
/// sign-in itself).
pub async fn signed_in() -> Result<(String, CurrentUser), AppError> {
    let backend = backend()?;
    let headers = use_context::<http::request::Parts>().map(|parts| parts.headers).unwrap_or_default();
    signed_in_by(&backend, &headers).await?.ok_or(AppError::Unauthenticated)
}

/// The sign-in of a request with these headers, with its token (see
/// `Backend::signed_in`).
pub async fn signed_in_by(backend: &SharedBackend, headers: &http::HeaderMap) -> Result<Option<(String, CurrentUser)>, AppError> {
    backend.signed_in(headers).await
}

/// The caller's user and selected org, if their role there grants `needed`.
pub async fn require(needed: Role) -> Result<(CurrentUser, OrgMembership), AppError> {
    let user = user().await?;
    let org = user.selected_org.clone().ok_or(AppError::NoOrgSelected)?;
    if !org.role.grants(needed) {
        return Err(match needed {
            Role::Admin => AppError::admins_only(),
            Role::Operator => AppError::Forbidden("This screen is for operators.".into()),
            Role::Client => AppError::Forbidden("This screen is for clients of the organisation.".into()),
        });
    }
    Ok((user, org))
}

pub fn set_cookie(value: &str) {
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        if let Ok(value) = http::HeaderValue::from_str(value) {
            response.append_header(http::header::SET_COOKIE, value);
        }
    }
}
