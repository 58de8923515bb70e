//! People and link floors of an org's directory (issue: directory
//! administration). Every change is checked here (rules in `domain::people`),
//! written with its audit record, published on the org's topic, and handed
//! to the engine so the next dispatch decision uses it.

use crate::auth::{new_token, token_hash};
use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::engine::Engine;
use crate::services::OpenTabs;
use crate::store::{
    AcceptOutcome, Acceptance, FloorChange, InvitationRecord, InviteOutcome, MemberChange, MemberRecord, NewInvitation, PendingInvitation,
    ProfileEdit, SharedStore, StoreError,
};
use domain::events::{AuditEntry, Event, OrgEvent, Topic};
use domain::models::{LinkFloor, Role};
use domain::people::{person_problem, preview_import, ImportPreview, LineProblem, PersonFields, INVITATION_TTL_MS};
use std::sync::Arc;

/// Said to whoever holds a link that may not set the account's password:
/// the same words whatever the account's state (no enumeration).
pub const SIGN_IN_FIRST: &str = "Sign in with this email's ClutchCall account, then open the link again to join.";

#[derive(Debug, thiserror::Error)]
pub enum PeopleError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    /// An import stopped by these lines (nothing was written).
    #[error("the import has {} line(s) to fix", .0.len())]
    Lines(Vec<LineProblem>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A link made for a person, shown (or downloaded) once.
#[derive(Clone, Debug)]
pub struct InvitationLink {
    pub email: String,
    pub url: String,
    pub expires_at: i64,
}

/// What an import wrote: how many people, and their links as CSV.
#[derive(Clone, Debug)]
pub struct ImportDone {
    pub imported: usize,
    pub links_csv: String,
}

pub struct PeopleService {
    store: SharedStore,
    bus: SharedBus,
    engine: Arc<Engine>,
    tabs: Arc<OpenTabs>,
    /// `https://host` the links start with.
    link_base: String,
}

impl PeopleService {
    pub fn new(store: SharedStore, bus: SharedBus, engine: Arc<Engine>, tabs: Arc<OpenTabs>, link_base: &str) -> PeopleService {
        PeopleService { store, bus, engine, tabs, link_base: link_base.trim_end_matches('/').to_string() }
    }

    /// The org's operator regions: those of its link floors.
    pub async fn regions(&self, org_id: &str) -> Result<Vec<String>, PeopleError> {
        let mut regions: Vec<String> = self.store.org_link_floors(org_id).await?.into_iter().map(|f| f.region).collect();
        regions.dedup();
        Ok(regions)
    }

    pub async fn members(&self, org_id: &str) -> Result<Vec<MemberRecord>, PeopleError> {
        Ok(self.store.members(org_id).await?)
    }

    /// The org's link floors, by region and PoP.
    pub async fn floors(&self, org_id: &str) -> Result<Vec<LinkFloor>, PeopleError> {
        Ok(self.store.org_link_floors(org_id).await?)
    }

    /// The org's RTT ceilings per skill (rules A15, A16).
    pub async fn ceilings(&self, org_id: &str) -> Result<Vec<domain::dispatch::RttCeiling>, PeopleError> {
        Ok(self.store.org_rtt_ceilings(org_id).await?)
    }

    /// The certifications worth offering: the reqCert values the org's robots use.
    pub async fn cert_options(&self, org_id: &str) -> Result<Vec<String>, PeopleError> {
        let mut certs: Vec<String> = self.store.robots(org_id).await?.into_iter().map(|r| r.req_cert).collect();
        certs.sort();
        certs.dedup();
        Ok(certs)
    }

    pub async fn pending_invitations(&self, org_id: &str) -> Result<Vec<PendingInvitation>, PeopleError> {
        Ok(self.store.pending_invitations(org_id, now_ms()).await?)
    }

    fn link(&self, token: &str) -> String {
        format!("{}/invite/{token}", self.link_base)
    }

    /// Invites one person. The answer is the same whether or not the email
    /// has an account elsewhere (no account enumeration).
    pub async fn invite(&self, org_id: &str, actor: &str, person: PersonFields) -> Result<InvitationLink, PeopleError> {
        let person = person.normalised();
        if let Some(problem) = person_problem(&person, &self.regions(org_id).await?) {
            return Err(PeopleError::Invalid(problem));
        }
        let token = new_token();
        let now = now_ms();
        let invitation = NewInvitation { token_hash: token_hash(&token), person: person.clone(), expires_at: now + INVITATION_TTL_MS };
        match self.store.invite(org_id, &invitation, actor, now).await? {
            InviteOutcome::Invited(entry) => {
                self.published(org_id, entry);
                Ok(InvitationLink { email: person.email, url: self.link(&token), expires_at: invitation.expires_at })
            }
            InviteOutcome::AlreadyMember(email) => Err(PeopleError::Conflict(format!("{email} is already a member of this organisation"))),
        }
    }

    /// Parses and checks a CSV (header first): the people it would import,
    /// or every line that stops it.
    pub async fn preview_import(&self, org_id: &str, csv_text: &str) -> Result<ImportPreview, PeopleError> {
        let records = match read_csv(csv_text) {
            Ok(records) => records,
            Err(problem) => return Ok(ImportPreview { people: Vec::new(), problems: vec![problem] }),
        };
        // Members of this org already (the admin sees those anyway).
        let members: std::collections::HashSet<String> = self.store.members(org_id).await?.into_iter().map(|m| m.person.email).collect();
        Ok(preview_import(records, &self.regions(org_id).await?, &members))
    }

    /// Imports every person of the CSV or none; returns their links.
    pub async fn import(&self, org_id: &str, actor: &str, csv_text: &str) -> Result<ImportDone, PeopleError> {
        let preview = self.preview_import(org_id, csv_text).await?;
        if !preview.problems.is_empty() {
            return Err(PeopleError::Lines(preview.problems));
        }
        let now = now_ms();
        let expires_at = now + INVITATION_TTL_MS;
        let mut links = Vec::with_capacity(preview.people.len());
        let invitations: Vec<NewInvitation> = preview
            .people
            .into_iter()
            .map(|person| {
                let token = new_token();
                links.push(InvitationLink { email: person.email.clone(), url: self.link(&token), expires_at });
                NewInvitation { token_hash: token_hash(&token), person, expires_at }
            })
            .collect();
        match self.store.import_people(org_id, &invitations, actor, now).await? {
            Ok(entry) => {
                self.published(org_id, entry);
                Ok(ImportDone { imported: links.len(), links_csv: links_csv(&links) })
            }
            // Someone joined between the preview and the import.
            Err(members) => Err(PeopleError::Conflict(format!("already members, nothing imported: {}", members.join(", ")))),
        }
    }

    /// The directory in the import's format.
    pub async fn export(&self, org_id: &str) -> Result<String, PeopleError> {
        let mut out = csv::Writer::from_writer(Vec::new());
        let write = |out: &mut csv::Writer<Vec<u8>>, cells: &[String]| out.write_record(cells).map_err(|e| PeopleError::Invalid(e.to_string()));
        write(&mut out, &domain::people::CSV_HEADER.map(String::from))?;
        for member in self.store.members(org_id).await? {
            write(&mut out, &domain::people::export_cells(&member.person))?;
        }
        let bytes = out.into_inner().map_err(|e| PeopleError::Invalid(e.to_string()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub async fn invitation(&self, token: &str) -> Result<Option<InvitationRecord>, PeopleError> {
        Ok(self.store.invitation(&token_hash(token)).await?)
    }

    /// Takes up an invitation: sets the password of an account without one,
    /// or adds the membership to the signed-in account with its email.
    pub async fn accept(&self, token: &str, who: Acceptance) -> Result<(String, String), PeopleError> {
        match self.store.accept_invitation(&token_hash(token), &who, now_ms()).await? {
            AcceptOutcome::Joined { org_id, user_id, entry } => {
                self.published(&org_id, entry);
                // Their other orgs' desks learn they are in another org now
                // (in cluster mode, who rings them is told: rule D10).
                let orgs = self.store.memberships(&user_id).await.map(|all| all.into_iter().map(|m| m.org_id).collect()).unwrap_or_else(|_| vec![org_id.clone()]);
                for org in orgs {
                    let _ = self.engine.reload_operator(&org, &user_id).await;
                }
                Ok((org_id, user_id))
            }
            AcceptOutcome::Gone => Err(PeopleError::NotFound("invitation (it may have been used or expired)")),
            AcceptOutcome::SignInFirst => Err(PeopleError::Conflict(SIGN_IN_FIRST.into())),
            AcceptOutcome::OtherAccount => Err(PeopleError::Conflict("This invitation is for another account: sign out, then open the link again.".into())),
        }
    }

    pub async fn set_role(&self, org_id: &str, actor: &str, user_id: &str, role: Role) -> Result<(), PeopleError> {
        let region = self.regions(org_id).await?.into_iter().next().unwrap_or_default();
        let change = self.store.set_member_role(org_id, user_id, role, &region, actor, now_ms()).await?;
        self.member_changed(org_id, user_id, change, Access::Changed).await
    }

    pub async fn remove(&self, org_id: &str, actor: &str, user_id: &str) -> Result<(), PeopleError> {
        let change = self.store.remove_member(org_id, user_id, actor, now_ms()).await?;
        self.member_changed(org_id, user_id, change, Access::Changed).await
    }

    pub async fn edit_profile(&self, org_id: &str, actor: &str, user_id: &str, edit: ProfileEdit) -> Result<(), PeopleError> {
        let member = self.store.members(org_id).await?.into_iter().find(|m| m.user_id == user_id).ok_or(PeopleError::NotFound("member"))?;
        let operates = member.person.role != Role::Client;
        let edit = ProfileEdit {
            display_name: edit.display_name.trim().to_string(),
            external_id: edit.external_id.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
            region: edit.region.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
            certifications: domain::people::normalised_certifications(&edit.certifications),
            active: edit.active,
        };
        let regions = self.regions(org_id).await?;
        let problem = domain::people::profile_problem(&edit.display_name, edit.external_id.as_deref(), edit.region.as_deref(), &edit.certifications, operates, &regions);
        if let Some(problem) = problem {
            return Err(PeopleError::Invalid(problem));
        }
        let change = self.store.edit_profile(org_id, user_id, &edit, actor, now_ms()).await?;
        self.member_changed(org_id, user_id, change, Access::Same).await
    }

    async fn member_changed(&self, org_id: &str, user_id: &str, change: MemberChange, access: Access) -> Result<(), PeopleError> {
        match change {
            MemberChange::Done(entry) => {
                // What they may hear changed: their sockets in the org close
                // (a new one is judged on the role they have now).
                if access == Access::Changed {
                    self.tabs.access_changed(org_id, user_id);
                }
                self.published(org_id, entry);
                // The next decision uses the new profile (or none).
                let _ = self.engine.reload_operator(org_id, user_id).await;
                Ok(())
            }
            MemberChange::NotFound => Err(PeopleError::NotFound("member")),
            MemberChange::LastAdmin => Err(PeopleError::Conflict("This is the organisation's last admin: make someone else an admin first.".into())),
            MemberChange::NotOursToRename => Err(PeopleError::Conflict(
                "This person is a member of other organisations too, so their name and external id are not this organisation's to change. Region, certifications and active still are.".into(),
            )),
        }
    }

    /// Adds or changes a path's floor (rules D02, W16).
    pub async fn set_floor(&self, org_id: &str, actor: &str, floor: LinkFloor) -> Result<(), PeopleError> {
        let floor = LinkFloor { region: floor.region.trim().to_string(), pop: floor.pop.trim().to_string(), note: floor.note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty()), ..floor };
        if let Some(problem) = domain::dispatch::floor_problem(&floor) {
            return Err(PeopleError::Invalid(problem));
        }
        let change = self.store.set_link_floor(org_id, &floor, actor, now_ms()).await?;
        self.floors_changed(org_id, change).await
    }

    pub async fn remove_floor(&self, org_id: &str, actor: &str, region: &str, pop: &str) -> Result<(), PeopleError> {
        let change = self.store.remove_link_floor(org_id, region, pop, actor, now_ms(), &domain::dispatch::floor_removal).await?;
        self.floors_changed(org_id, change).await
    }

    async fn floors_changed(&self, org_id: &str, change: FloorChange) -> Result<(), PeopleError> {
        match change {
            FloorChange::Done(entry) => {
                self.published(org_id, entry);
                let _ = self.engine.reload_floors(org_id).await;
                Ok(())
            }
            FloorChange::NotFound => Err(PeopleError::NotFound("path")),
            FloorChange::LastPath => Err(PeopleError::Conflict("An organisation keeps at least one path.".into())),
        }
    }

    /// Sets or changes one skill's RTT ceiling (rules A15, A16).
    pub async fn set_ceiling(&self, org_id: &str, actor: &str, ceiling: domain::dispatch::RttCeiling) -> Result<(), PeopleError> {
        let ceiling = domain::dispatch::RttCeiling { skill: ceiling.skill.trim().to_string(), ..ceiling };
        if let Some(problem) = domain::dispatch::ceiling_problem(&ceiling, self.engine.pending_timeout_ms()) {
            return Err(PeopleError::Invalid(problem));
        }
        let entry = self.store.set_rtt_ceiling(org_id, &ceiling, actor, now_ms()).await?;
        self.floors_changed(org_id, FloorChange::Done(entry)).await
    }

    pub async fn remove_ceiling(&self, org_id: &str, actor: &str, skill: &str) -> Result<(), PeopleError> {
        match self.store.remove_rtt_ceiling(org_id, skill.trim(), actor, now_ms()).await? {
            Some(entry) => self.floors_changed(org_id, FloorChange::Done(entry)).await,
            None => Err(PeopleError::NotFound("ceiling")),
        }
    }

    fn published(&self, org_id: &str, entry: AuditEntry) {
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
    }
}

/// Whether a member change alters what the person may do in the org.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Changed,
    Same,
}

/// The records of a CSV after its header, with their line numbers.
fn read_csv(text: &str) -> Result<Vec<(usize, Vec<String>)>, LineProblem> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().map_err(|e| LineProblem { line: 1, problem: format!("unreadable header: {e}") })?.iter().map(|h| h.to_lowercase()).collect();
    if header != domain::people::CSV_HEADER {
        return Err(LineProblem { line: 1, problem: format!("the header must be: {}", domain::people::CSV_HEADER.join(",")) });
    }
    let mut records = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| LineProblem { line: e.position().map_or(0, |p| p.line() as usize), problem: format!("unreadable: {e}") })?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        if record.iter().all(str::is_empty) {
            continue;
        }
        records.push((line, record.iter().map(|cell| domain::people::from_spreadsheet(cell).to_string()).collect()));
    }
    Ok(records)
}

fn links_csv(links: &[InvitationLink]) -> String {
    let mut out = csv::Writer::from_writer(Vec::new());
    let _ = out.write_record(["email", "set-password link", "expires"]);
    for link in links {
        let cells = [link.email.clone(), link.url.clone(), domain::rules::rfc3339(link.expires_at)];
        let _ = out.write_record(cells.map(|cell| domain::people::spreadsheet_safe(&cell)));
    }
    String::from_utf8_lossy(&out.into_inner().unwrap_or_default()).into_owned()
}
