//! Server functions of directory administration of people, link floors
//! and robot registration (admins), and of invitation links (anyone
//! holding one). The work is the server's `DirectoryAdmin`.

#[cfg(feature = "ssr")]
use super::guard;
use crate::error::AppError;
#[cfg(feature = "ssr")]
use crate::models::{LinkFloor, Role};
#[cfg(feature = "ssr")]
use crate::people::{PersonFields, ProfileFields};
use crate::people::{ImportPreview, ImportResult, InvitationView, InviteLink, PeopleAdmin, RegisteredRobot};
use leptos::prelude::*;

#[cfg(feature = "ssr")]
async fn admin() -> Result<(String, String, super::backend::SharedDirectoryAdmin), AppError> {
    let (user, org) = guard::require(Role::Admin).await.map_err(guard::fail)?;
    Ok((user.user_id, org.org_id, guard::directory_admin()?))
}

/// The org's members, pending invitations, regions, certification choices and link floors.
#[server(endpoint = "load_people")]
pub async fn load_people() -> Result<PeopleAdmin, AppError> {
    let (_, org_id, admin) = admin().await?;
    admin.people(&org_id).await.map_err(guard::fail)
}

#[cfg(feature = "ssr")]
fn role_of(role: &str) -> Result<Role, AppError> {
    Role::parse(role.trim()).ok_or_else(|| AppError::Invalid("role must be admin, operator or client".into()))
}

/// Invites one person; the link is shown once.
#[server(endpoint = "invite_person")]
pub async fn invite_person(
    email: String,
    display_name: String,
    external_id: Option<String>,
    region: Option<String>,
    certifications: Option<Vec<String>>,
    role: String,
) -> Result<InviteLink, AppError> {
    let (actor, org_id, admin) = admin().await?;
    let role = role_of(&role).map_err(guard::fail)?;
    let person = PersonFields { email, display_name, external_id, region, certifications: certifications.unwrap_or_default(), role };
    admin.invite(&org_id, &actor, person).await.map_err(guard::fail)
}

/// What importing this CSV would do.
#[server(endpoint = "preview_people_import")]
pub async fn preview_people_import(csv: String) -> Result<ImportPreview, AppError> {
    let (_, org_id, admin) = admin().await?;
    admin.preview_import(&org_id, &csv).await.map_err(guard::fail)
}

/// Imports every person of the CSV or none.
#[server(endpoint = "import_people")]
pub async fn import_people(csv: String) -> Result<ImportResult, AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.import(&org_id, &actor, &csv).await.map_err(guard::fail)
}

#[server(endpoint = "set_member_role")]
pub async fn set_member_role(user_id: String, role: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    let role = role_of(&role).map_err(guard::fail)?;
    admin.set_role(&org_id, &actor, &user_id, role).await.map_err(guard::fail)
}

#[server(endpoint = "remove_member")]
pub async fn remove_member(user_id: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.remove_member(&org_id, &actor, &user_id).await.map_err(guard::fail)
}

/// Edits a member's profile; `active` is a checkbox (present when on).
#[server(endpoint = "edit_member")]
pub async fn edit_member(
    user_id: String,
    display_name: String,
    external_id: Option<String>,
    region: Option<String>,
    certifications: Option<Vec<String>>,
    active: Option<String>,
) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    let fields = ProfileFields { display_name, external_id, region, certifications: certifications.unwrap_or_default(), active: active.is_some() };
    admin.edit_profile(&org_id, &actor, &user_id, fields).await.map_err(guard::fail)
}

/// Adds or changes one link-health path of the org.
#[server(endpoint = "set_link_floor")]
pub async fn set_link_floor(region: String, pop: String, floor_ms: String, note: Option<String>) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    let floor_ms = floor_ms.trim().parse::<u32>().map_err(|_| guard::fail(AppError::Invalid("floor must be a whole number of milliseconds".into())))?;
    admin.set_floor(&org_id, &actor, LinkFloor { region, pop, floor_ms, note }).await.map_err(guard::fail)
}

#[server(endpoint = "remove_link_floor")]
pub async fn remove_link_floor(region: String, pop: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.remove_floor(&org_id, &actor, &region, &pop).await.map_err(guard::fail)
}

/// Sets or changes one skill's RTT ceiling and how it relaxes (rules A15, A16).
#[server(endpoint = "set_rtt_ceiling")]
pub async fn set_rtt_ceiling(skill: String, ceiling_ms: String, step_ms: String, every_s: String, lifted_after_s: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    let whole = |value: &str, what: &str| value.trim().parse::<u32>().map_err(|_| guard::fail(AppError::Invalid(format!("{what} must be a whole number"))));
    let ceiling = crate::dispatch::RttCeiling {
        skill,
        ceiling_ms: whole(&ceiling_ms, "the ceiling (ms)")?,
        step_ms: whole(&step_ms, "the step (ms)")?,
        every_s: whole(&every_s, "the time between steps (s)")?,
        lifted_after_s: whole(&lifted_after_s, "the time after which it is lifted (s)")?,
    };
    admin.set_ceiling(&org_id, &actor, ceiling).await.map_err(guard::fail)
}

#[server(endpoint = "remove_rtt_ceiling")]
pub async fn remove_rtt_ceiling(skill: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.remove_ceiling(&org_id, &actor, &skill).await.map_err(guard::fail)
}

/// Registers a robot (as `POST /v1/robots`); the token is shown once.
#[server(endpoint = "register_robot")]
pub async fn register_robot(robot_id: String, model: String, site: String, pop: String, req_cert: String) -> Result<RegisteredRobot, AppError> {
    let (actor, org_id, admin) = admin().await?;
    let fields = crate::directory::RobotFields { model, site, pop, req_cert };
    admin.register_robot(&org_id, &actor, robot_id.trim(), fields).await.map_err(guard::fail)
}

/// What an invitation link can do for whoever opened it.
#[server(endpoint = "load_invitation")]
pub async fn load_invitation(token: String) -> Result<InvitationView, AppError> {
    let signed_in = guard::user().await.ok();
    guard::directory_admin()?.invitation(&token, signed_in.as_ref(), guard::client_address()).await.map_err(guard::fail)
}

/// Takes up an invitation: with a password (twice) for an account without
/// one, or without for the signed-in invited account. Then to sign-in (or
/// the org's landing screen when already signed in).
#[server(endpoint = "accept_invitation")]
pub async fn accept_invitation(token: String, password: Option<String>, confirm: Option<String>) -> Result<(), AppError> {
    let signed_in = guard::user().await.ok();
    if let Some(password) = &password {
        if let Some(problem) = crate::rules::new_password_problem(password, confirm.as_deref().unwrap_or_default()) {
            return Err(guard::fail(AppError::Invalid(problem)));
        }
    }
    let org_id = guard::directory_admin()?.accept_invitation(&token, password.as_deref(), signed_in.as_ref(), guard::client_address()).await.map_err(guard::fail)?;
    match signed_in {
        Some(_) => {
            // Joined: switch to the new org.
            let backend = guard::backend()?;
            if let Some(token) = guard::session_tokens().into_iter().next() {
                let _ = backend.select_org(&token, &org_id).await;
            }
            leptos_axum::redirect("/");
        }
        None => leptos_axum::redirect("/signin?welcome=1"),
    }
    Ok(())
}
