//! Server functions: the browser's only door to the server. Each one checks
//! who is asking, then hands the work to the server's `Backend`.

use crate::error::AppError;
use crate::models::{CurrentUser, Directory, LifecycleState, Operator, Robot, SessionRecord};
use leptos::prelude::*;

#[cfg(feature = "ssr")]
pub mod backend {
    //! The narrow interface the server functions need. `server` implements it
    //! over the store (and later the ACD engine) and provides it as context.
    use crate::error::AppError;
    use crate::models::{CurrentUser, Directory, LifecycleState, Operator, Robot, SessionRecord};
    use crate::session_cookie::SessionCookie;
    use std::net::IpAddr;
    use std::sync::Arc;

    #[async_trait::async_trait]
    pub trait Backend: Send + Sync + 'static {
        /// Checks the password (attempts are rate-limited per client address
        /// and per address and email) and opens a sign-in session. Returns
        /// the session token and the user.
        async fn sign_in(&self, email: &str, password: &str, client: Option<IpAddr>) -> Result<(String, CurrentUser), AppError>;
        /// The user behind a session token, if the session is still valid.
        async fn session_user(&self, token: &str) -> Result<Option<CurrentUser>, AppError>;
        /// Ends the sign-in, and closes its open sockets at once.
        async fn sign_out(&self, token: &str) -> Result<(), AppError>;
        /// Switches the session's org; the user must belong to it.
        async fn select_org(&self, token: &str, org_id: &str) -> Result<CurrentUser, AppError>;
        async fn directory(&self, org_id: &str) -> Result<Directory, AppError>;
        /// A robot of this org; another org's robot is `NotFound`.
        async fn robot(&self, org_id: &str, robot_id: &str) -> Result<Robot, AppError>;
        /// A session of this org; another org's is `NotFound`.
        async fn session(&self, org_id: &str, session_id: &str) -> Result<SessionRecord, AppError>;
        /// Pause, resume or complete a live session (seed 001): `by` is the
        /// operator asking, who must be the attached one; `None` for an admin.
        async fn steer_session(&self, org_id: &str, session_id: &str, to: LifecycleState, by: Option<&str>) -> Result<SessionRecord, AppError>;
        /// E-stop: the session latches in PROTECTIVE_STOP, with an audit record.
        async fn estop_session(&self, org_id: &str, user_id: &str, session: &SessionRecord) -> Result<SessionRecord, AppError>;
        /// Clears a latched PROTECTIVE_STOP with a reason (an audit record).
        async fn clear_protective_stop(&self, org_id: &str, user_id: &str, session: &SessionRecord, reason: &str) -> Result<SessionRecord, AppError>;
        /// The call's dispatch decisions, oldest first.
        async fn dispatch_decisions(&self, org_id: &str, session_id: &str) -> Result<Vec<crate::dispatch::DispatchDecision>, AppError>;
        /// Posts a chat message on an open session (the caller may see it).
        async fn post_chat(&self, org_id: &str, author: &CurrentUser, session: &SessionRecord, body: &str) -> Result<crate::chat::ChatMessage, AppError>;
        /// The session's chat, oldest first.
        async fn chat(&self, org_id: &str, session_id: &str) -> Result<Vec<crate::chat::ChatMessage>, AppError>;
        /// Rates the operator of a COMPLETED session, once (rule L10).
        async fn rate_session(&self, org_id: &str, rater: &CurrentUser, session: &SessionRecord, stars: u8, feedback: &str) -> Result<crate::rating::SessionRating, AppError>;
        async fn session_rating(&self, org_id: &str, session_id: &str) -> Result<Option<crate::rating::SessionRating>, AppError>;
        /// The session's activity log, oldest first.
        async fn session_activity(&self, org_id: &str, session_id: &str) -> Result<crate::lifecycle::SessionActivity, AppError>;
        /// The org's live picture for the wallboard and the overview.
        async fn ops_board(&self, org_id: &str) -> Result<crate::board::OpsBoard, AppError>;
        /// The org's presence roster: one row per operator of the org.
        async fn roster(&self, org_id: &str) -> Result<crate::roster::Roster, AppError>;
        /// The operator profile of a user in this org.
        async fn operator_profile(&self, org_id: &str, user_id: &str) -> Result<Operator, AppError>;
        /// The sign-in cookie (its name depends on HTTPS).
        fn session_cookie(&self) -> SessionCookie;
        /// `Set-Cookie` value that stores a session token in the browser.
        fn set_session_cookie(&self, token: &str) -> String;
    }

    pub type SharedBackend = Arc<dyn Backend>;
}

#[cfg(feature = "ssr")]
mod guard {
    //! Who is asking: session cookie → user → role in the selected org.
    use super::backend::SharedBackend;
    use crate::error::AppError;
    use crate::models::{CurrentUser, OrgMembership, Role};
    use leptos::prelude::*;

    pub fn backend() -> Result<SharedBackend, AppError> {
        use_context::<SharedBackend>().ok_or_else(|| AppError::Internal("backend missing".into()))
    }

    /// The request's sign-in tokens: usually one; several when cookies
    /// share the name, and then the first live sign-in counts.
    pub fn session_tokens() -> Vec<String> {
        match (use_context::<http::request::Parts>(), backend()) {
            (Some(parts), Ok(backend)) => backend.session_cookie().tokens(&parts.headers),
            _ => Vec::new(),
        }
    }

    /// The address the request came from.
    pub fn client_address() -> Option<std::net::IpAddr> {
        let parts = use_context::<http::request::Parts>()?;
        let info = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()?;
        Some(info.0.ip())
    }

    /// A session the person may see: its attached operator, or an admin of
    /// the org. Anyone else gets "not found", as if it did not exist.
    pub async fn session_of(backend: &SharedBackend, user: &CurrentUser, org: &OrgMembership, session_id: &str) -> Result<crate::models::SessionRecord, AppError> {
        let record = backend.session(&org.org_id, session_id).await?;
        let attached = record.operator_id.as_deref() == Some(user.user_id.as_str());
        if attached || org.role == Role::Admin {
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

    /// Marks the HTTP response with the error's status, then returns it.
    pub fn fail(error: AppError) -> AppError {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(error.status());
            if let Some(seconds) = error.retry_after_s() {
                response.insert_header(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
            }
        }
        error
    }

    pub async fn signed_in() -> Result<(String, CurrentUser), AppError> {
        let backend = backend()?;
        for token in session_tokens() {
            if let Some(user) = backend.session_user(&token).await? {
                return Ok((token, user));
            }
        }
        Err(AppError::Unauthenticated)
    }

    /// The caller's user and selected org, if their role there grants `needed`.
    pub async fn require(needed: Role) -> Result<(CurrentUser, OrgMembership), AppError> {
        let (_, user) = signed_in().await?;
        let org = user.selected_org.clone().ok_or(AppError::NoOrgSelected)?;
        if !org.role.grants(needed) {
            return Err(match needed {
                Role::Admin => AppError::admins_only(),
                Role::Operator => AppError::Forbidden("This screen is for operators.".into()),
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
}

/// The signed-in user, or `None` when nobody is signed in.
#[server(endpoint = "signed_in_user")]
pub async fn signed_in_user() -> Result<Option<CurrentUser>, AppError> {
    match guard::signed_in().await {
        Ok((_, user)) => Ok(Some(user)),
        Err(AppError::Unauthenticated) => Ok(None),
        Err(e) => Err(guard::fail(e)),
    }
}

/// Signs in and sends the browser to `next` (a local path) or the landing
/// screen of the user's role.
#[server(endpoint = "sign_in")]
pub async fn sign_in(email: String, password: String, next: Option<String>) -> Result<(), AppError> {
    if email.trim().is_empty() || password.is_empty() {
        return Err(guard::fail(AppError::Invalid("Enter your email and password.".into())));
    }
    if email.trim().chars().count() > crate::rules::MAX_EMAIL_CHARS {
        return Err(guard::fail(AppError::Invalid("That is not an email address: it is too long.".into())));
    }
    let backend = guard::backend()?;
    let (token, user) = backend.sign_in(&email, &password, guard::client_address()).await.map_err(guard::fail)?;
    guard::set_cookie(&backend.set_session_cookie(&token));
    // Only same-site paths: an open redirect would let a link phish the session.
    let target = next
        .as_deref()
        .and_then(crate::rules::local_redirect)
        .map_or_else(|| user.landing_path().to_string(), str::to_owned);
    leptos_axum::redirect(&target);
    Ok(())
}

#[server(endpoint = "sign_out")]
pub async fn sign_out() -> Result<(), AppError> {
    let backend = guard::backend()?;
    for token in guard::session_tokens() {
        backend.sign_out(&token).await.map_err(guard::fail)?;
    }
    guard::set_cookie(&backend.session_cookie().clear());
    leptos_axum::redirect("/signin");
    Ok(())
}

/// Switches the org the user works in and opens its landing screen.
#[server(endpoint = "select_org")]
pub async fn select_org(org_id: String) -> Result<(), AppError> {
    let (token, _) = guard::signed_in().await.map_err(guard::fail)?;
    let user = guard::backend()?.select_org(&token, &org_id).await.map_err(guard::fail)?;
    leptos_axum::redirect(user.landing_path());
    Ok(())
}

/// The selected org's robots and operators. Admins only.
#[server(endpoint = "load_directory")]
pub async fn load_directory() -> Result<Directory, AppError> {
    let (_, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    guard::backend()?.directory(&org.org_id).await.map_err(guard::fail)
}

/// One robot of the selected org. Admins only; another org's id is 404.
#[server(endpoint = "load_robot")]
pub async fn load_robot(robot_id: String) -> Result<Robot, AppError> {
    let (_, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    guard::backend()?.robot(&org.org_id, &robot_id).await.map_err(guard::fail)
}

/// The selected org's live picture (wallboard, overview). Admins only.
#[server(endpoint = "load_ops_board")]
pub async fn load_ops_board() -> Result<crate::board::OpsBoard, AppError> {
    let (_, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    guard::backend()?.ops_board(&org.org_id).await.map_err(guard::fail)
}

/// The selected org's presence roster (rule R01: one org, admins only).
#[server(endpoint = "load_roster")]
pub async fn load_roster() -> Result<crate::roster::Roster, AppError> {
    let (_, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    guard::backend()?.roster(&org.org_id).await.map_err(guard::fail)
}

/// The caller's own operator profile in the selected org.
#[server(endpoint = "my_operator_profile")]
pub async fn my_operator_profile() -> Result<Operator, AppError> {
    let (user, org) = guard::require(crate::models::Role::Operator).await.map_err(guard::fail)?;
    guard::backend()?.operator_profile(&org.org_id, &user.user_id).await.map_err(guard::fail)
}

/// A session for the cockpit: its attached operator, or an admin of the org.
/// Anyone else gets 404, as if it did not exist.
#[server(endpoint = "load_session")]
pub async fn load_session(session_id: String) -> Result<SessionRecord, AppError> {
    Ok(guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?.session)
}

/// The session's activity log (rule L05), for the same people as the session.
#[server(endpoint = "load_session_activity")]
pub async fn load_session_activity(session_id: String) -> Result<crate::lifecycle::SessionActivity, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
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
    let guard::SessionAccess { backend, org, .. } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
    backend.chat(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// Sends a chat message on a session that has not ended.
#[server(endpoint = "post_chat")]
pub async fn post_chat(session_id: String, body: String) -> Result<crate::chat::ChatMessage, AppError> {
    let body = crate::chat::chat_body(&body).map_err(|why| guard::fail(AppError::Invalid(why)))?;
    let guard::SessionAccess { backend, user, org, session } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
    if session.lifecycle.is_terminal() {
        return Err(guard::fail(AppError::Conflict("The session has ended: its chat is read-only.".into())));
    }
    backend.post_chat(&org.org_id, &user, &session, &body).await.map_err(guard::fail)
}

/// The session's rating, if given (for the same people as the session).
#[server(endpoint = "load_session_rating")]
pub async fn load_session_rating(session_id: String) -> Result<Option<crate::rating::SessionRating>, AppError> {
    let guard::SessionAccess { backend, org, .. } = guard::session_access(crate::models::Role::Operator, &session_id).await.map_err(guard::fail)?;
    backend.session_rating(&org.org_id, &session_id).await.map_err(guard::fail)
}

/// Rates the operator of a COMPLETED session, 1–5 stars with feedback,
/// once (rule L10). The session's client rates; until clients exist, the
/// org's admins act for the client.
#[server(endpoint = "rate_session")]
pub async fn rate_session(session_id: String, stars: u8, feedback: String) -> Result<crate::rating::SessionRating, AppError> {
    use crate::rating::{rating_input_problem, rating_problem};
    let feedback = feedback.trim().to_string();
    if let Some(why) = rating_input_problem(stars, &feedback) {
        return Err(guard::fail(AppError::Invalid(why)));
    }
    let guard::SessionAccess { backend, user, org, session } = guard::session_access(crate::models::Role::Admin, &session_id).await.map_err(guard::fail)?;
    // "Rated already" is the store's answer (one row per session), not a
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
    let backend = guard::backend()?;
    let (user, org) = guard::require(Role::Operator).await.map_err(guard::fail)?;
    let by = (org.role != Role::Admin).then_some(user.user_id.as_str());
    backend.steer_session(&org.org_id, &session_id, to, by).await.map_err(guard::fail)
}
