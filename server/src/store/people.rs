//! Directory administration of people: invitations (one-time links),
//! CSV imports, roles, profiles and removals. Each change is written with
//! its audit record in one transaction; an import is one transaction, so
//! it lands whole or not at all.

use super::sql::StoreDb;
use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use domain::events::{AuditAction, AuditEntry};
use domain::models::Role;
use domain::people::{may_set_password, Acceptance as Decision, ExistingAccount, PersonFields, Taker};
use async_trait::async_trait;

/// An invitation to write: the person and the hash of their link's token.
#[derive(Clone, Debug)]
pub struct NewInvitation {
    pub token_hash: String,
    pub person: PersonFields,
    pub expires_at: i64,
}

#[derive(Clone, Debug)]
pub enum InviteOutcome {
    Invited(AuditEntry),
    /// The email is already a member of this org (nothing written).
    AlreadyMember(String),
}

/// An invitation as its link finds it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct InvitationRecord {
    pub org_id: String,
    pub org_name: String,
    pub email: String,
    #[sqlx(try_from = "String")]
    pub role: Role,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    /// The account the email belongs to, if any, and whether it has a password.
    pub user_id: Option<String>,
    pub password_hash: Option<String>,
    /// The account this invitation made (the only one whose password it may set).
    pub account_id: Option<String>,
    /// Orgs the account belongs to (0 when there is none).
    pub memberships: i64,
}

impl InvitationRecord {
    /// Whether whoever holds the link may choose the account's password:
    /// see [`may_set_password`].
    pub fn sets_password(&self) -> bool {
        match &self.user_id {
            None => true,
            Some(user) => may_set_password(self.password_hash.as_deref().unwrap_or_default(), self.account_id.as_deref() == Some(user.as_str()), self.memberships),
        }
    }
}


/// Who takes up an invitation.
#[derive(Clone, Debug)]
pub enum Acceptance {
    /// A person without a password sets one (the link proves the email).
    SetPassword(String),
    /// A signed-in person whose account has the invitation's email.
    SignedIn(String),
}

#[derive(Clone, Debug)]
pub enum AcceptOutcome {
    Joined { org_id: String, user_id: String, entry: AuditEntry },
    /// Unknown, used or expired.
    Gone,
    /// The account has a password: sign in as it first.
    SignInFirst,
    /// Signed in as someone else.
    OtherAccount,
}

#[derive(Clone, Debug)]
pub enum MemberChange {
    Done(AuditEntry),
    NotFound,
    /// The org's last admin cannot lose the role.
    LastAdmin,
    /// The name and external id belong to the person, who is a member of
    /// other orgs too: one org's admin may not rename them for all.
    NotOursToRename,
}

/// A member of an org, with their operator profile when they have one.
#[derive(Clone, Debug)]
pub struct MemberRecord {
    pub user_id: String,
    pub person: PersonFields,
    pub active: bool,
    /// False until an invited or imported person sets a password.
    pub has_password: bool,
}

#[derive(sqlx::FromRow)]
struct MemberRow {
    id: String,
    email: String,
    display_name: String,
    external_id: Option<String>,
    #[sqlx(try_from = "String")]
    role: Role,
    region: Option<String>,
    active: Option<i64>,
    has_password: i64,
}

/// A profile's editable fields.
#[derive(Clone, Debug)]
pub struct ProfileEdit {
    pub display_name: String,
    pub external_id: Option<String>,
    pub region: Option<String>,
    pub certifications: Vec<String>,
    pub active: bool,
}

/// An invitation not taken up yet, for the admin's list.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PendingInvitation {
    pub email: String,
    #[sqlx(try_from = "String")]
    pub role: Role,
    pub created_at: i64,
    pub expires_at: i64,
}

#[async_trait]
pub trait PeopleStore: Send + Sync {
    /// The org's members (every role), by name.
    async fn members(&self, org_id: &str) -> StoreResult<Vec<MemberRecord>>;
    async fn invite(&self, org_id: &str, invitation: &NewInvitation, actor: &str, at: i64) -> StoreResult<InviteOutcome>;
    /// All or nothing: the emails already members when any is.
    async fn import_people(&self, org_id: &str, invitations: &[NewInvitation], actor: &str, at: i64) -> StoreResult<Result<AuditEntry, Vec<String>>>;
    async fn invitation(&self, token_hash: &str) -> StoreResult<Option<InvitationRecord>>;
    async fn accept_invitation(&self, token_hash: &str, who: &Acceptance, at: i64) -> StoreResult<AcceptOutcome>;
    async fn pending_invitations(&self, org_id: &str, now: i64) -> StoreResult<Vec<PendingInvitation>>;
    /// `default_region`: the profile a new operator gets when they had none.
    async fn set_member_role(&self, org_id: &str, user_id: &str, role: Role, default_region: &str, actor: &str, at: i64) -> StoreResult<MemberChange>;
    async fn remove_member(&self, org_id: &str, user_id: &str, actor: &str, at: i64) -> StoreResult<MemberChange>;
    async fn edit_profile(&self, org_id: &str, user_id: &str, edit: &ProfileEdit, actor: &str, at: i64) -> StoreResult<MemberChange>;
}

fn new_user_id() -> String {
    format!("u-{}", uuid::Uuid::now_v7().simple())
}

const MEMBERS: &str = "SELECT u.id, u.email, u.display_name, u.external_id, m.role, p.region, p.active, \
     CAST(CASE WHEN u.password_hash = '' THEN 0 ELSE 1 END AS BIGINT) AS has_password \
     FROM memberships m JOIN users u ON u.id = m.user_id \
     LEFT JOIN operator_profiles p ON p.org_id = m.org_id AND p.user_id = m.user_id \
     WHERE m.org_id = $1";

macro_rules! people_store {
    ($store:ident) => {
        type Tx<'a> = sqlx::Transaction<'a, <$store as StoreDb>::Db>;

        impl $store {
            /// Membership, profile and certifications, each left as it is when present.
            async fn join(tx: &mut Tx<'_>, org_id: &str, user_id: &str, p: &PersonFields, at: i64) -> StoreResult<()> {
                sqlx::query("INSERT INTO memberships (org_id, user_id, role, joined_at) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, user_id) DO NOTHING")
                    .bind(org_id).bind(user_id).bind(p.role.as_str()).bind(at).execute(&mut **tx).await?;
                if let (true, Some(region)) = (p.operates(), p.region.as_deref()) {
                    Self::ensure_profile(tx, org_id, user_id, region).await?;
                    for cert in &p.certifications {
                        sqlx::query("INSERT INTO operator_certifications (org_id, user_id, certification) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                            .bind(org_id).bind(user_id).bind(cert).execute(&mut **tx).await?;
                    }
                }
                Ok(())
            }

            async fn ensure_profile(tx: &mut Tx<'_>, org_id: &str, user_id: &str, region: &str) -> StoreResult<()> {
                sqlx::query("INSERT INTO operator_profiles (org_id, user_id, region) VALUES ($1, $2, $3) ON CONFLICT (org_id, user_id) DO NOTHING")
                    .bind(org_id).bind(user_id).bind(region).execute(&mut **tx).await?;
                Ok(())
            }

            /// Writes one invitation; `Some(email)` when already a member.
            /// A new email gets its account (no password) and membership
            /// now, and only this org's invitations may set its password;
            /// an existing account joins when its owner opens the link
            /// signed in. A member still without a password whose link has
            /// expired is invited again with a new link.
            async fn invite_in(tx: &mut Tx<'_>, org_id: &str, inv: &NewInvitation, actor: &str, at: i64) -> StoreResult<Option<String>> {
                let p = &inv.person;
                let existing: Option<(String, String)> = sqlx::query_as("SELECT id, password_hash FROM users WHERE email = $1").bind(&p.email).fetch_optional(&mut **tx).await?;
                let account_id = match existing {
                    Some((user_id, password_hash)) => {
                        if Self::role_in(tx, org_id, &user_id).await?.is_none() {
                            None
                        } else if password_hash.is_empty() && Self::made_by(tx, org_id, &user_id).await? && !Self::link_open(tx, org_id, &user_id, at).await? {
                            Some(user_id)
                        } else {
                            return Ok(Some(p.email.clone()));
                        }
                    }
                    None => {
                        let user_id = new_user_id();
                        sqlx::query("INSERT INTO users (id, email, display_name, external_id, password_hash, created_at) VALUES ($1, $2, $3, $4, '', $5)")
                            .bind(&user_id).bind(&p.email).bind(&p.display_name).bind(&p.external_id).bind(at).execute(&mut **tx).await?;
                        Self::join(tx, org_id, &user_id, p, at).await?;
                        Some(user_id)
                    }
                };
                sqlx::query(
                    "INSERT INTO invitations (token_hash, org_id, email, role, display_name, external_id, region, certifications, invited_by, created_at, expires_at, account_id) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                )
                .bind(&inv.token_hash).bind(org_id).bind(&p.email).bind(p.role.as_str()).bind(&p.display_name).bind(&p.external_id)
                .bind(&p.region).bind(p.certifications.join(";")).bind(actor).bind(at).bind(inv.expires_at).bind(&account_id)
                .execute(&mut **tx).await?;
                Ok(None)
            }

            async fn membership_count(tx: &mut Tx<'_>, user_id: &str) -> StoreResult<i64> {
                Ok(sqlx::query_scalar("SELECT COUNT(*) FROM memberships WHERE user_id = $1").bind(user_id).fetch_one(&mut **tx).await?)
            }

            /// Whether one of this org's invitations created the account.
            async fn made_by(tx: &mut Tx<'_>, org_id: &str, user_id: &str) -> StoreResult<bool> {
                let made: Option<String> = sqlx::query_scalar("SELECT token_hash FROM invitations WHERE org_id = $1 AND account_id = $2 LIMIT 1")
                    .bind(org_id).bind(user_id).fetch_optional(&mut **tx).await?;
                Ok(made.is_some())
            }

            /// Whether a link of this org for the account is still open.
            async fn link_open(tx: &mut Tx<'_>, org_id: &str, user_id: &str, at: i64) -> StoreResult<bool> {
                let open: Option<String> = sqlx::query_scalar("SELECT token_hash FROM invitations WHERE org_id = $1 AND account_id = $2 AND used_at IS NULL AND expires_at > $3 LIMIT 1")
                    .bind(org_id).bind(user_id).bind(at).fetch_optional(&mut **tx).await?;
                Ok(open.is_some())
            }

            /// Takes the org's row lock for the rest of the transaction, so
            /// that read-then-write changes of its members (the last-admin
            /// guard) run one at a time on PostgreSQL too (SQLite's writer
            /// is one at a time already).
            async fn hold_org_row(tx: &mut Tx<'_>, org_id: &str) -> StoreResult<()> {
                sqlx::query("UPDATE orgs SET name = name WHERE id = $1").bind(org_id).execute(&mut **tx).await?;
                Ok(())
            }

            async fn admins(tx: &mut Tx<'_>, org_id: &str) -> StoreResult<Vec<String>> {
                Ok(sqlx::query_scalar("SELECT user_id FROM memberships WHERE org_id = $1 AND role = 'admin'").bind(org_id).fetch_all(&mut **tx).await?)
            }

            async fn role_in(tx: &mut Tx<'_>, org_id: &str, user_id: &str) -> StoreResult<Option<String>> {
                Ok(sqlx::query_scalar("SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2").bind(org_id).bind(user_id).fetch_optional(&mut **tx).await?)
            }
        }

        #[async_trait]
        impl PeopleStore for $store {
            async fn members(&self, org_id: &str) -> StoreResult<Vec<MemberRecord>> {
                let rows: Vec<MemberRow> = sqlx::query_as(&format!("{MEMBERS} ORDER BY u.display_name, u.id")).bind(org_id).fetch_all(&self.pool).await?;
                let certs: Vec<(String, String)> = sqlx::query_as("SELECT user_id, certification FROM operator_certifications WHERE org_id = $1 ORDER BY certification")
                    .bind(org_id).fetch_all(&self.pool).await?;
                let mut by_user = crate::store::sql::certifications_by_user(certs);
                rows.into_iter()
                    .map(|r| {
                        Ok(MemberRecord {
                            person: PersonFields {
                                certifications: by_user.remove(&r.id).unwrap_or_default(),
                                email: r.email,
                                display_name: r.display_name,
                                external_id: r.external_id,
                                region: r.region,
                                role: r.role,
                            },
                            user_id: r.id,
                            active: r.active.unwrap_or(1) != 0,
                            has_password: r.has_password != 0,
                        })
                    })
                    .collect()
            }

            async fn invite(&self, org_id: &str, inv: &NewInvitation, actor: &str, at: i64) -> StoreResult<InviteOutcome> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                if let Some(email) = Self::invite_in(&mut tx, org_id, inv, actor, at).await? {
                    return Ok(InviteOutcome::AlreadyMember(email));
                }
                let entry = AuditEntry::by_user(actor, AuditAction::MemberInvited, format!("{} invited as {}", inv.person.email, inv.person.role.as_str()), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(InviteOutcome::Invited(entry))
            }

            async fn import_people(&self, org_id: &str, invitations: &[NewInvitation], actor: &str, at: i64) -> StoreResult<Result<AuditEntry, Vec<String>>> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let mut members = Vec::new();
                for inv in invitations {
                    if let Some(email) = Self::invite_in(&mut tx, org_id, inv, actor, at).await? {
                        members.push(email);
                    }
                }
                if !members.is_empty() {
                    // Dropping the transaction rolls every row back.
                    return Ok(Err(members));
                }
                let entry = AuditEntry::by_user(actor, AuditAction::PeopleImported, format!("{} people imported from CSV", invitations.len()), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(Ok(entry))
            }

            async fn invitation(&self, token_hash: &str) -> StoreResult<Option<InvitationRecord>> {
                Ok(sqlx::query_as(
                    "SELECT i.org_id, o.name AS org_name, i.email, i.role, i.expires_at, i.used_at, u.id AS user_id, u.password_hash, i.account_id, \
                     (SELECT COUNT(*) FROM memberships m WHERE m.user_id = u.id) AS memberships \
                     FROM invitations i JOIN orgs o ON o.id = i.org_id LEFT JOIN users u ON u.email = i.email WHERE i.token_hash = $1",
                )
                .bind(token_hash).fetch_optional(&self.pool).await?)
            }

            async fn accept_invitation(&self, token_hash: &str, who: &Acceptance, at: i64) -> StoreResult<AcceptOutcome> {
                #[derive(sqlx::FromRow)]
                struct Row { org_id: String, email: String, #[sqlx(try_from = "String")] role: Role, display_name: String, external_id: Option<String>, region: Option<String>, certifications: String, account_id: Option<String> }
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                // Claimed before anything is read: a second acceptance of the
                // same link at once waits on this row (PostgreSQL) and then
                // finds it used. Any refusal below rolls the claim back.
                let claimed = sqlx::query("UPDATE invitations SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $1")
                    .bind(at).bind(token_hash).execute(&mut *tx).await?;
                if claimed.rows_affected() != 1 {
                    return Ok(AcceptOutcome::Gone);
                }
                let inv = sqlx::query_as::<_, Row>(
                    "SELECT org_id, email, role, display_name, external_id, region, certifications, account_id FROM invitations WHERE token_hash = $1",
                )
                .bind(token_hash).fetch_one(&mut *tx).await?;
                let account: Option<(String, String)> = sqlx::query_as("SELECT id, password_hash FROM users WHERE email = $1").bind(&inv.email).fetch_optional(&mut *tx).await?;
                // Counted only where the rule needs it: a password to set on an account that has none.
                let memberships = match (who, &account) {
                    (Acceptance::SetPassword(_), Some((id, old))) if old.is_empty() => Self::membership_count(&mut tx, id).await?,
                    _ => 0,
                };
                let taker = match who {
                    Acceptance::SetPassword(_) => Taker::NewPassword,
                    Acceptance::SignedIn(me) => Taker::SignedIn(me),
                };
                let existing = account.as_ref().map(|(id, old)| ExistingAccount {
                    id,
                    password_hash: old,
                    made_by_this_invitation: inv.account_id.as_deref() == Some(id.as_str()),
                    memberships,
                });
                let user_id = match (domain::people::acceptance(taker, existing), who) {
                    (Decision::SetPasswordOf(id), Acceptance::SetPassword(hash)) => {
                        // Only while still empty: a password chosen meanwhile stays.
                        let set = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2 AND password_hash = ''").bind(hash).bind(id).execute(&mut *tx).await?;
                        if set.rows_affected() != 1 {
                            return Ok(AcceptOutcome::SignInFirst);
                        }
                        id.to_string()
                    }
                    (Decision::JoinAs(id), _) => id.to_string(),
                    (Decision::CreateAccount, Acceptance::SetPassword(hash)) => {
                        // The account was never created (or was removed): make it now.
                        let id = new_user_id();
                        sqlx::query("INSERT INTO users (id, email, display_name, external_id, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                            .bind(&id).bind(&inv.email).bind(&inv.display_name).bind(&inv.external_id).bind(hash).bind(at).execute(&mut *tx).await?;
                        id
                    }
                    (Decision::SignInFirst | Decision::SetPasswordOf(_) | Decision::CreateAccount, _) => return Ok(AcceptOutcome::SignInFirst),
                    (Decision::OtherAccount, _) => return Ok(AcceptOutcome::OtherAccount),
                };
                let person = PersonFields {
                    email: inv.email.clone(),
                    display_name: inv.display_name,
                    external_id: inv.external_id,
                    region: inv.region,
                    certifications: domain::people::split_certifications(&inv.certifications),
                    role: inv.role,
                };
                Self::join(&mut tx, &inv.org_id, &user_id, &person, at).await?;
                let entry = AuditEntry::by_user(&user_id, AuditAction::MemberJoined, format!("{} joined as {}", inv.email, inv.role.as_str()), at);
                Self::write_audit(&mut tx, &inv.org_id, &entry).await?;
                tx.commit().await?;
                Ok(AcceptOutcome::Joined { org_id: inv.org_id, user_id, entry })
            }

            async fn pending_invitations(&self, org_id: &str, now: i64) -> StoreResult<Vec<PendingInvitation>> {
                Ok(sqlx::query_as(
                    "SELECT email, role, created_at, expires_at FROM invitations WHERE org_id = $1 AND used_at IS NULL AND expires_at > $2 \
                     ORDER BY created_at DESC, email LIMIT 200",
                )
                .bind(org_id).bind(now).fetch_all(&self.pool).await?)
            }

            async fn set_member_role(&self, org_id: &str, user_id: &str, role: Role, default_region: &str, actor: &str, at: i64) -> StoreResult<MemberChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                Self::hold_org_row(&mut tx, org_id).await?;
                let Some(before) = Self::role_in(&mut tx, org_id, user_id).await? else { return Ok(MemberChange::NotFound) };
                if domain::people::leaves_no_admin(&Self::admins(&mut tx, org_id).await?, user_id, Some(role)) {
                    return Ok(MemberChange::LastAdmin);
                }
                sqlx::query("UPDATE memberships SET role = $1 WHERE org_id = $2 AND user_id = $3").bind(role.as_str()).bind(org_id).bind(user_id).execute(&mut *tx).await?;
                if role != Role::Client {
                    Self::ensure_profile(&mut tx, org_id, user_id, default_region).await?;
                }
                let entry = AuditEntry::by_user(actor, AuditAction::MemberRoleChanged, format!("{user_id}: {before} → {}", role.as_str()), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(MemberChange::Done(entry))
            }

            async fn remove_member(&self, org_id: &str, user_id: &str, actor: &str, at: i64) -> StoreResult<MemberChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                Self::hold_org_row(&mut tx, org_id).await?;
                let Some(before) = Self::role_in(&mut tx, org_id, user_id).await? else { return Ok(MemberChange::NotFound) };
                if domain::people::leaves_no_admin(&Self::admins(&mut tx, org_id).await?, user_id, None) {
                    return Ok(MemberChange::LastAdmin);
                }
                for table in ["operator_certifications", "operator_profiles", "memberships"] {
                    sqlx::query(&format!("DELETE FROM {table} WHERE org_id = $1 AND user_id = $2")).bind(org_id).bind(user_id).execute(&mut *tx).await?;
                }
                // A sign-in that had this org selected selects nothing now
                // (its sockets in the org are closed by the service).
                sqlx::query("UPDATE web_sessions SET org_id = NULL WHERE org_id = $1 AND user_id = $2").bind(org_id).bind(user_id).execute(&mut *tx).await?;
                let entry = AuditEntry::by_user(actor, AuditAction::MemberRemoved, format!("{user_id} ({before}) removed"), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(MemberChange::Done(entry))
            }

            async fn edit_profile(&self, org_id: &str, user_id: &str, e: &ProfileEdit, actor: &str, at: i64) -> StoreResult<MemberChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(row) = sqlx::query_as::<_, MemberRow>(&format!("{MEMBERS} AND m.user_id = $2")).bind(org_id).bind(user_id).fetch_optional(&mut *tx).await? else {
                    return Ok(MemberChange::NotFound);
                };
                let renames = row.display_name != e.display_name || row.external_id != e.external_id;
                let elsewhere: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memberships WHERE user_id = $1 AND org_id <> $2").bind(user_id).bind(org_id).fetch_one(&mut *tx).await?;
                if renames && elsewhere > 0 {
                    return Ok(MemberChange::NotOursToRename);
                }
                let before_certs: Vec<String> = sqlx::query_scalar("SELECT certification FROM operator_certifications WHERE org_id = $1 AND user_id = $2 ORDER BY certification")
                    .bind(org_id).bind(user_id).fetch_all(&mut *tx).await?;
                sqlx::query("UPDATE users SET display_name = $1, external_id = $2 WHERE id = $3").bind(&e.display_name).bind(&e.external_id).bind(user_id).execute(&mut *tx).await?;
                let mut changed = Vec::new();
                let mut note = |name: &str, before: String, after: String| {
                    if before != after {
                        changed.push(format!("{name}: {before} → {after}"));
                    }
                };
                note("display name", row.display_name.clone(), e.display_name.clone());
                note("external id", row.external_id.clone().unwrap_or_default(), e.external_id.clone().unwrap_or_default());
                if row.role != Role::Client {
                    let region = e.region.clone().or(row.region.clone()).unwrap_or_default();
                    Self::ensure_profile(&mut tx, org_id, user_id, &region).await?;
                    sqlx::query("UPDATE operator_profiles SET region = $1, active = $2 WHERE org_id = $3 AND user_id = $4")
                        .bind(&region).bind(i64::from(e.active)).bind(org_id).bind(user_id).execute(&mut *tx).await?;
                    sqlx::query("DELETE FROM operator_certifications WHERE org_id = $1 AND user_id = $2").bind(org_id).bind(user_id).execute(&mut *tx).await?;
                    for cert in &e.certifications {
                        sqlx::query("INSERT INTO operator_certifications (org_id, user_id, certification) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                            .bind(org_id).bind(user_id).bind(cert).execute(&mut *tx).await?;
                    }
                    note("region", row.region.clone().unwrap_or_default(), region);
                    let mut after_certs = e.certifications.clone();
                    after_certs.sort();
                    note("certifications", before_certs.join("; "), after_certs.join("; "));
                    let was_active = row.active.unwrap_or(1) != 0;
                    note("active", was_active.to_string(), e.active.to_string());
                }
                let detail = if changed.is_empty() { format!("{user_id}: no change") } else { format!("{user_id}: {}", changed.join("; ")) };
                let entry = AuditEntry::by_user(actor, AuditAction::MemberEdited, detail, at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(MemberChange::Done(entry))
            }
        }
    };
}

mod sqlite {
    use super::*;
    people_store!(SqliteStore);
}

mod postgres {
    use super::*;
    people_store!(PgStore);
}
