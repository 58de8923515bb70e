//! Directory administration of robots (issue: directory administration):
//! edit, retire, rotate the token. Each change is written with its audit
//! record (who, what, when, before → after) in one transaction.

use super::dispatch::OPEN_SESSION_OF_ROBOT;
use super::sql::StoreDb;
use super::sql::{PgStore, SqliteStore};
use super::{RobotRecord, StoreResult};
use domain::events::{AuditAction, AuditEntry};
use async_trait::async_trait;

/// A robot's editable fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RobotFields {
    pub model: String,
    pub site: String,
    pub pop: String,
    pub req_cert: String,
}

#[derive(Clone, Debug)]
pub enum RobotChange {
    /// Done: the robot as it is now, the audit record written, and the
    /// hash of the token that stopped working (a rotation, a retirement),
    /// read under the row's lock.
    Done(RobotRecord, AuditEntry, Option<String>),
    /// Unknown, another org's, or retired.
    NotFound,
    /// Retiring is refused while the robot has a live session.
    LiveSession(String),
}

#[async_trait]
pub trait DirectoryStore: Send + Sync {
    async fn edit_robot(&self, org_id: &str, robot_id: &str, fields: &RobotFields, actor: &str, at: i64) -> StoreResult<RobotChange>;
    async fn retire_robot(&self, org_id: &str, robot_id: &str, actor: &str, at: i64) -> StoreResult<RobotChange>;
    async fn rotate_robot_token(&self, org_id: &str, robot_id: &str, token_hash: &str, actor: &str, at: i64) -> StoreResult<RobotChange>;
}

const LIVE_ROBOT: &str = "SELECT id, org_id, model, site, pop, req_cert, last_heartbeat_at, token_rotated_at FROM robots \
     WHERE org_id = $1 AND id = $2 AND retired_at IS NULL";

fn audit(actor: &str, action: AuditAction, robot_id: &str, detail: String, at: i64) -> AuditEntry {
    AuditEntry { robot_id: Some(robot_id.to_string()), ..AuditEntry::by_user(actor, action, detail, at) }
}

/// `model: UR5e → UR10e; pop: …` for the fields that changed.
fn changes(before: &RobotRecord, after: &RobotFields) -> String {
    let pairs = [("model", &before.model, &after.model), ("site", &before.site, &after.site), ("pop", &before.pop, &after.pop), ("reqCert", &before.req_cert, &after.req_cert)];
    let changed: Vec<String> = pairs.iter().filter(|(_, b, a)| b != a).map(|(name, b, a)| format!("{name}: {b} → {a}")).collect();
    if changed.is_empty() { "no change".into() } else { changed.join("; ") }
}

macro_rules! directory_store {
    // `$lock`: how the robot's row is held for the rest of a change, so a
    // call raised meanwhile (its session row references the robot) waits
    // for a retirement and is seen by it (PostgreSQL; SQLite's writer is
    // one at a time already).
    ($store:ident, $lock:expr) => {
        impl $store {
            pub(super) async fn write_audit(tx: &mut sqlx::Transaction<'_, <Self as StoreDb>::Db>, org_id: &str, e: &AuditEntry) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO audit_records (org_id, at, actor_kind, actor_id, action, session_id, robot_id, detail) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(org_id).bind(e.at_ms).bind(e.actor_kind.as_str()).bind(&e.actor_id).bind(e.action.as_str())
                .bind(&e.session_id).bind(&e.robot_id).bind(&e.detail)
                .execute(&mut **tx).await?;
                Ok(())
            }
        }

        #[async_trait]
        impl DirectoryStore for $store {
            async fn edit_robot(&self, org_id: &str, robot_id: &str, f: &RobotFields, actor: &str, at: i64) -> StoreResult<RobotChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(before) = sqlx::query_as::<_, RobotRecord>(&format!("{LIVE_ROBOT}{}", $lock)).bind(org_id).bind(robot_id).fetch_optional(&mut *tx).await? else {
                    return Ok(RobotChange::NotFound);
                };
                sqlx::query("UPDATE robots SET model = $1, site = $2, pop = $3, req_cert = $4 WHERE org_id = $5 AND id = $6")
                    .bind(&f.model).bind(&f.site).bind(&f.pop).bind(&f.req_cert).bind(org_id).bind(robot_id)
                    .execute(&mut *tx).await?;
                let entry = audit(actor, AuditAction::RobotEdited, robot_id, changes(&before, f), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                let after = RobotRecord { model: f.model.clone(), site: f.site.clone(), pop: f.pop.clone(), req_cert: f.req_cert.clone(), ..before };
                tx.commit().await?;
                Ok(RobotChange::Done(after, entry, None))
            }

            async fn retire_robot(&self, org_id: &str, robot_id: &str, actor: &str, at: i64) -> StoreResult<RobotChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(before) = sqlx::query_as::<_, RobotRecord>(&format!("{LIVE_ROBOT}{}", $lock)).bind(org_id).bind(robot_id).fetch_optional(&mut *tx).await? else {
                    return Ok(RobotChange::NotFound);
                };
                let live: Option<String> =
                    sqlx::query_scalar(OPEN_SESSION_OF_ROBOT).bind(org_id).bind(robot_id).fetch_optional(&mut *tx).await?;
                if let Some(session_id) = live {
                    return Ok(RobotChange::LiveSession(session_id));
                }
                let ended: String = sqlx::query_scalar(TOKEN_OF_ROBOT).bind(org_id).bind(robot_id).fetch_one(&mut *tx).await?;
                sqlx::query("UPDATE robots SET retired_at = $1 WHERE org_id = $2 AND id = $3")
                    .bind(at).bind(org_id).bind(robot_id).execute(&mut *tx).await?;
                let entry = audit(actor, AuditAction::RobotRetired, robot_id, format!("{} at {} retired", before.model, before.site), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                let event = domain::event_log::LogEvent::RobotRetired(domain::event_log::Empty {});
                Self::log_event(&mut tx, super::Logged { org_id, at, session_id: None, robot_id: Some(robot_id), event }).await?;
                tx.commit().await?;
                Ok(RobotChange::Done(before, entry, Some(ended)))
            }

            async fn rotate_robot_token(&self, org_id: &str, robot_id: &str, token_hash: &str, actor: &str, at: i64) -> StoreResult<RobotChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(before) = sqlx::query_as::<_, RobotRecord>(&format!("{LIVE_ROBOT}{}", $lock)).bind(org_id).bind(robot_id).fetch_optional(&mut *tx).await? else {
                    return Ok(RobotChange::NotFound);
                };
                let ended: String = sqlx::query_scalar(TOKEN_OF_ROBOT).bind(org_id).bind(robot_id).fetch_one(&mut *tx).await?;
                sqlx::query("UPDATE robots SET token_hash = $1, token_rotated_at = $2 WHERE org_id = $3 AND id = $4")
                    .bind(token_hash).bind(at).bind(org_id).bind(robot_id).execute(&mut *tx).await?;
                // The token itself is never written anywhere, the audit included.
                let entry = audit(actor, AuditAction::RobotTokenRotated, robot_id, "bearer token rotated: the old one no longer works".into(), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(RobotChange::Done(RobotRecord { token_rotated_at: Some(at), ..before }, entry, Some(ended)))
            }
        }
    };
}

/// The robot's token hash (read after its row is locked).
const TOKEN_OF_ROBOT: &str = "SELECT token_hash FROM robots WHERE org_id = $1 AND id = $2";

directory_store!(SqliteStore, "");
directory_store!(PgStore, " FOR UPDATE");
