//! The browser's door to directory administration of people, link floors
//! and robot registration: `app`'s `DirectoryAdmin` over the people service
//! and the robot registry.

use super::answers::{directory_refused, internal};
use crate::clock::now_ms;
use crate::services::people::PeopleError;
use crate::services::{PasswordChecker, PeopleService, Quotas, RobotRegistry, SignInThrottle, Write};
use crate::store::{Acceptance, ProfileEdit};
use app::error::AppError;
use app::functions::backend::DirectoryAdmin;
use domain::models::{CurrentUser, LinkFloor, Role};
use domain::people::{
    ImportPreview, ImportResult, InvitationState, InvitationView, InviteLink, Member, PeopleAdmin, PendingInvite, PersonFields, ProfileFields,
    RegisteredRobot,
};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

pub struct PeopleBackend {
    people: Arc<PeopleService>,
    robots: Arc<RobotRegistry>,
    /// Taking up an invitation is limited like signing in.
    throttle: Arc<SignInThrottle>,
    passwords: Arc<PasswordChecker>,
    quotas: Arc<Quotas>,
}

impl PeopleBackend {
    pub fn new(people: Arc<PeopleService>, robots: Arc<RobotRegistry>, throttle: Arc<SignInThrottle>, passwords: Arc<PasswordChecker>, quotas: Arc<Quotas>) -> PeopleBackend {
        PeopleBackend { people, robots, throttle, passwords, quotas }
    }
}

fn refused(e: PeopleError) -> AppError {
    match e {
        PeopleError::Invalid(why) => AppError::Invalid(why),
        PeopleError::Conflict(why) => AppError::Conflict(why),
        PeopleError::NotFound(what) => AppError::NotFound(format!("The {what}")),
        PeopleError::Lines(lines) => {
            let first: Vec<String> = lines.iter().take(5).map(|l| format!("line {}: {}", l.line, l.problem)).collect();
            AppError::Invalid(format!("Nothing was imported; fix these lines first: {}", first.join("; ")))
        }
        PeopleError::Store(e) => internal(e),
    }
}

#[async_trait::async_trait]
impl DirectoryAdmin for PeopleBackend {
    async fn people(&self, org_id: &str) -> Result<PeopleAdmin, AppError> {
        let members = self.people.members(org_id).await.map_err(refused)?;
        let invitations = self.people.pending_invitations(org_id).await.map_err(refused)?;
        Ok(PeopleAdmin {
            members: members.into_iter().map(|m| Member { user_id: m.user_id, person: m.person, active: m.active, has_password: m.has_password }).collect(),
            invitations: invitations.into_iter().map(|i| PendingInvite { email: i.email, role: i.role, expires_ms: i.expires_at }).collect(),
            regions: self.people.regions(org_id).await.map_err(refused)?,
            cert_options: self.people.cert_options(org_id).await.map_err(refused)?,
            floors: self.people.floors(org_id).await.map_err(refused)?,
            ceilings: self.people.ceilings(org_id).await.map_err(refused)?,
        })
    }

    async fn invite(&self, org_id: &str, actor: &str, person: PersonFields) -> Result<InviteLink, AppError> {
        super::quota(&self.quotas, Write::Invite, org_id).await?;
        let link = self.people.invite(org_id, actor, person).await.map_err(refused)?;
        Ok(InviteLink { email: link.email, url: link.url, expires_ms: link.expires_at })
    }

    async fn preview_import(&self, org_id: &str, csv: &str) -> Result<ImportPreview, AppError> {
        super::quota(&self.quotas, Write::Import, org_id).await?;
        self.people.preview_import(org_id, csv).await.map_err(refused)
    }

    async fn import(&self, org_id: &str, actor: &str, csv: &str) -> Result<ImportResult, AppError> {
        super::quota(&self.quotas, Write::Import, org_id).await?;
        let done = self.people.import(org_id, actor, csv).await.map_err(refused)?;
        Ok(ImportResult { imported: done.imported, links_csv: done.links_csv })
    }

    async fn set_role(&self, org_id: &str, actor: &str, user_id: &str, role: Role) -> Result<(), AppError> {
        self.people.set_role(org_id, actor, user_id, role).await.map_err(refused)
    }

    async fn remove_member(&self, org_id: &str, actor: &str, user_id: &str) -> Result<(), AppError> {
        self.people.remove(org_id, actor, user_id).await.map_err(refused)
    }

    async fn edit_profile(&self, org_id: &str, actor: &str, user_id: &str, f: ProfileFields) -> Result<(), AppError> {
        let edit = ProfileEdit { display_name: f.display_name, external_id: f.external_id, region: f.region, certifications: f.certifications, active: f.active };
        self.people.edit_profile(org_id, actor, user_id, edit).await.map_err(refused)
    }

    async fn set_floor(&self, org_id: &str, actor: &str, floor: LinkFloor) -> Result<(), AppError> {
        self.people.set_floor(org_id, actor, floor).await.map_err(refused)
    }

    async fn remove_floor(&self, org_id: &str, actor: &str, region: &str, pop: &str) -> Result<(), AppError> {
        self.people.remove_floor(org_id, actor, region, pop).await.map_err(refused)
    }

    async fn set_ceiling(&self, org_id: &str, actor: &str, ceiling: domain::dispatch::RttCeiling) -> Result<(), AppError> {
        self.people.set_ceiling(org_id, actor, ceiling).await.map_err(refused)
    }

    async fn remove_ceiling(&self, org_id: &str, actor: &str, skill: &str) -> Result<(), AppError> {
        self.people.remove_ceiling(org_id, actor, skill).await.map_err(refused)
    }

    async fn register_robot(&self, org_id: &str, actor: &str, id: &str, fields: domain::directory::RobotFields) -> Result<RegisteredRobot, AppError> {
        let (skill, token) = self.robots.enroll(org_id, id, fields, actor).await.map_err(directory_refused)?;
        Ok(RegisteredRobot { id: id.to_string(), skill, token })
    }

    async fn invitation(&self, token: &str, signed_in: Option<&CurrentUser>, client: Option<IpAddr>) -> Result<InvitationView, AppError> {
        let client = client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        super::quota(&self.quotas, Write::InvitationLink, &crate::http::client::limit_key(client).to_string()).await?;
        let record = self.people.invitation(token).await.map_err(refused)?.ok_or_else(|| AppError::NotFound("The invitation".into()))?;
        let state = if record.used_at.is_some() || record.expires_at <= now_ms() {
            InvitationState::Gone
        } else {
            match signed_in {
                Some(user) if user.email == record.email => InvitationState::Join,
                Some(_) => InvitationState::OtherAccount,
                // Whether the link may set this account's password, never
                // whether the account has one (no enumeration).
                None if record.sets_password() => InvitationState::SetPassword,
                None => InvitationState::SignInFirst,
            }
        };
        Ok(InvitationView { org_name: record.org_name, email: record.email, role: record.role, state })
    }

    async fn accept_invitation(&self, token: &str, password: Option<&str>, signed_in: Option<&CurrentUser>, client: Option<IpAddr>) -> Result<String, AppError> {
        // Counted before anything is looked up or hashed, like a sign-in:
        // guessing links costs an attacker the same as guessing passwords.
        let client = client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        if let Err(wait) = self.throttle.admit(client, &format!("invitation:{}", crate::auth::token_hash(token))).await {
            return Err(AppError::TooManyAttempts(wait.as_secs().max(1)));
        }
        let who = match (password, signed_in) {
            (_, Some(user)) => Acceptance::SignedIn(user.user_id.clone()),
            (Some(password), None) => {
                // The cheap checks first: no argon2 work for a link that
                // cannot set a password.
                let gone = || AppError::NotFound("The invitation (it may have been used or expired)".into());
                let record = self.people.invitation(token).await.map_err(refused)?.ok_or_else(gone)?;
                if record.used_at.is_some() || record.expires_at <= now_ms() {
                    return Err(gone());
                }
                if !record.sets_password() {
                    return Err(refused(PeopleError::Conflict(crate::services::people::SIGN_IN_FIRST.into())));
                }
                Acceptance::SetPassword(self.passwords.hash(password.to_string()).await.map_err(|_| AppError::Busy)?)
            }
            (None, None) => return Err(AppError::Invalid("Choose a password.".into())),
        };
        let (org_id, _) = self.people.accept(token, who).await.map_err(refused)?;
        Ok(org_id)
    }
}

/// The dataset browser's door: `app`'s `Datasets` over the dataset service.
pub struct DatasetsBackend(pub Arc<crate::datasets::DatasetService>);

#[async_trait::async_trait]
impl app::functions::backend::Datasets for DatasetsBackend {
    async fn episodes(&self, org_id: &str, client_id: Option<&str>) -> Result<Vec<domain::datasets::Episode>, AppError> {
        let rows = self.0.episodes(org_id, client_id).await.map_err(|e| {
            tracing::error!(error = %e, "episodes could not be read");
            AppError::Internal("database unavailable".into())
        })?;
        Ok(rows
            .into_iter()
            .map(|r| domain::datasets::Episode {
                environment: r.environment,
                episode_index: r.episode_index,
                session_id: r.session_id,
                robot_id: r.robot_id,
                operator_name: r.operator_name,
                task: r.task,
                fps: r.fps,
                frames: r.frames,
                duration_ms: r.duration_ms,
                cameras: r.cameras.split(';').filter(|c| !c.is_empty()).map(str::to_string).collect(),
                created_ms: r.created_at,
            })
            .collect())
    }
}
