//! Server functions: the browser's only door to the server. Each one checks
//! who is asking, then hands the work to the server's `Backend`.

use crate::error::AppError;
use crate::models::{CurrentUser, Directory, Operator, Robot};
use leptos::prelude::*;

#[cfg(feature = "ssr")]
pub mod backend;
#[cfg(feature = "ssr")]
mod guard;
mod clients;
mod datasets;
mod directory;
mod integrations;
mod people;
mod sessions;

pub use clients::*;
pub use datasets::*;
pub use directory::*;
pub use integrations::*;
pub use people::*;
pub use sessions::*;

/// The client's address as the server recorded it in the request's
/// extensions (past trusted proxies); limits and logs read it.
#[cfg(feature = "ssr")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddress(pub std::net::IpAddr);

/// The signed-in user, or `None` when nobody is signed in.
#[server(endpoint = "signed_in_user")]
pub async fn signed_in_user() -> Result<Option<CurrentUser>, AppError> {
    match guard::user().await {
        Ok(user) => Ok(Some(user)),
        Err(AppError::Unauthenticated) => Ok(None),
        Err(e) => Err(guard::fail(e)),
    }
}

/// Who is asking for a page, resolved before it renders: the page's
/// [`Session`](crate::page_user::Session).
#[cfg(feature = "ssr")]
pub async fn page_user(backend: &backend::SharedBackend, headers: &http::HeaderMap) -> Result<Option<CurrentUser>, AppError> {
    Ok(guard::signed_in_by(backend, headers).await?.map(|(_, user)| user))
}

/// Signs in; answers where to go: `next` (a local path) or the landing
/// screen of the user's role. A plain form's post is redirected there; the
/// sign-in screen's script loads it whole, since the signed-in user comes
/// with the page (see `page_user::Session`).
#[server(endpoint = "sign_in")]
pub async fn sign_in(email: String, password: String, next: Option<String>) -> Result<String, AppError> {
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
    if guard::plain_form_post() {
        leptos_axum::redirect(&target);
    }
    Ok(target)
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

/// Changes the caller's own password: the current one is required, the new
/// one is given twice; every other sign-in of theirs ends.
#[server(endpoint = "change_password")]
pub async fn change_password(current: String, new: String, confirm: String) -> Result<(), AppError> {
    if let Some(why) = crate::rules::new_password_problem(&new, &confirm) {
        return Err(guard::fail(AppError::Invalid(why)));
    }
    let (token, _) = guard::signed_in().await.map_err(guard::fail)?;
    guard::backend()?.change_password(&token, &current, &new, guard::client_address()).await.map_err(guard::fail)
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
