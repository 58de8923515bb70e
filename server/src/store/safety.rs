//! Safety-state changes made by people: an operator's E-stop latches
//! PROTECTIVE_STOP, and an explicit clear (with its reason) leaves it. Each
//! is written with its audit record in one transaction; whether it applies
//! is `domain::lifecycle::person_safety_change`'s to say.

use super::dispatch::SESSION_BY_ID;
use super::journal::SessionRow;
use super::sql::StoreDb;
use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use domain::events::AuditEntry;
use domain::lifecycle::{person_safety_change, SafetyDecision};
use domain::models::SafetyState;
use async_trait::async_trait;

/// What a person's safety change did.
#[derive(Debug)]
pub enum SafetyChange {
    Applied(SessionRow),
    /// Nothing to do: already in the target state (a second E-stop).
    Unchanged(SessionRow),
    /// A clear asked of a session that is not latched.
    NotLatched,
    /// COMPLETED or CANCELLED.
    Ended,
    NotFound,
}

#[async_trait]
pub trait SafetyStore: Send + Sync {
    /// Moves an open session to `to`; with `only_from`, only from that state.
    /// Writes `audit` with the change.
    async fn change_safety(&self, org_id: &str, session_id: &str, only_from: Option<SafetyState>, to: SafetyState, audit: &AuditEntry) -> StoreResult<SafetyChange>;
    /// The session's safety-state changes, oldest first: (at, to).
    async fn safety_history(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<(i64, String)>>;
}

macro_rules! safety_store {
    ($store:ident) => {
        #[async_trait]
        impl SafetyStore for $store {
            async fn change_safety(&self, org_id: &str, session_id: &str, only_from: Option<SafetyState>, to: SafetyState, e: &AuditEntry) -> StoreResult<SafetyChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(current) = sqlx::query_as::<_, SessionRow>(SESSION_BY_ID.as_str())
                    .bind(org_id).bind(session_id).fetch_optional(&mut *tx).await?
                else {
                    return Ok(SafetyChange::NotFound);
                };
                let safety = current.safety()?;
                match person_safety_change(current.lifecycle()?, safety, only_from, to) {
                    SafetyDecision::Apply => {}
                    SafetyDecision::Unchanged => return Ok(SafetyChange::Unchanged(current)),
                    SafetyDecision::NotLatched => return Ok(SafetyChange::NotLatched),
                    SafetyDecision::Ended => return Ok(SafetyChange::Ended),
                }
                sqlx::query("UPDATE sessions SET safety_state = $1 WHERE org_id = $2 AND id = $3")
                    .bind(to.as_str()).bind(org_id).bind(session_id)
                    .execute(&mut *tx).await?;
                sqlx::query("INSERT INTO safety_transitions (org_id, session_id, at, from_state, to_state) VALUES ($1, $2, $3, $4, $5)")
                    .bind(org_id).bind(session_id).bind(e.at_ms).bind(safety.as_str()).bind(to.as_str())
                    .execute(&mut *tx).await?;
                let event = domain::event_log::LogEvent::safety(safety, to);
                Self::log_event(&mut tx, super::Logged { org_id, at: e.at_ms, session_id: Some(session_id), robot_id: Some(&current.robot_id), event }).await?;
                sqlx::query(
                    "INSERT INTO audit_records (org_id, at, actor_kind, actor_id, action, session_id, robot_id, detail) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(org_id).bind(e.at_ms).bind(e.actor_kind.as_str()).bind(&e.actor_id).bind(e.action.as_str())
                .bind(&e.session_id).bind(&e.robot_id).bind(&e.detail)
                .execute(&mut *tx).await?;
                let row = sqlx::query_as(SESSION_BY_ID.as_str())
                    .bind(org_id).bind(session_id).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                Ok(SafetyChange::Applied(row))
            }

            async fn safety_history(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<(i64, String)>> {
                Ok(sqlx::query_as("SELECT at, to_state FROM safety_transitions WHERE org_id = $1 AND session_id = $2 ORDER BY id")
                    .bind(org_id).bind(session_id).fetch_all(&self.pool).await?)
            }
        }
    };
}

safety_store!(SqliteStore);
safety_store!(PgStore);
