//! The org's event log (`domain::event_log`): engine batches log their
//! changes in their own transaction (writes.rs), other changes through
//! `log_event` in theirs; this also reads it back and prunes it.

use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use domain::event_log::{LogEvent, LogRecord};
use async_trait::async_trait;

/// One stored record.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct LogRow {
    pub id: i64,
    pub at: i64,
    pub kind: String,
    pub session_id: Option<String>,
    pub robot_id: Option<String>,
    pub data: String,
}

impl LogRow {
    /// The record as integrators get it; `None` for a type this build
    /// does not know (written by a newer one).
    pub fn record(self) -> Option<LogRecord> {
        Some(LogRecord {
            event: LogEvent::parse(&self.kind, &self.data)?,
            id: self.id,
            at: domain::rules::rfc3339(self.at),
            session_id: self.session_id,
            robot_id: self.robot_id,
        })
    }
}

#[async_trait]
pub trait EventLogStore: Send + Sync {
    /// The org's records after id `after`, oldest first, at most `limit`.
    async fn events_after(&self, org_id: &str, after: i64, limit: i64) -> StoreResult<Vec<LogRow>>;
    /// The oldest id the org's log still keeps (`None`: none kept), and the
    /// last id it ever gave (0: none).
    async fn event_bounds(&self, org_id: &str) -> StoreResult<(Option<i64>, i64)>;
    /// Deletes every org's records older than `before` (retention); how many.
    async fn prune_events(&self, before: i64) -> StoreResult<u64>;
    /// Logs `robot.offline` if the robot's last heartbeat (any instance's)
    /// is `timeout_ms` old at `now` and this silence is not logged yet;
    /// whether it logged.
    async fn log_robot_offline(&self, org_id: &str, robot_id: &str, now: i64, timeout_ms: i64) -> StoreResult<bool>;
}

/// The counter row and the record, as writes.rs's BUMP_EVENT and LOG_EVENT
/// do in an engine batch, for changes made outside the engine.
const BUMP: &str = "INSERT INTO org_event_counters (org_id, last) VALUES ($1, 1) \
                    ON CONFLICT (org_id) DO UPDATE SET last = org_event_counters.last + 1";
const INSERT: &str = "INSERT INTO org_events (org_id, id, at, kind, session_id, robot_id, data) \
                      SELECT $1, c.last, $2, $3, $4, $5, $6 FROM org_event_counters c WHERE c.org_id = $1";

/// What a change outside the engine logs, in its own transaction.
pub struct Logged<'a> {
    pub org_id: &'a str,
    pub at: i64,
    pub session_id: Option<&'a str>,
    pub robot_id: Option<&'a str>,
    pub event: LogEvent,
}

macro_rules! event_log_store {
    ($store:ident) => {
        #[async_trait]
        impl EventLogStore for $store {
            async fn events_after(&self, org_id: &str, after: i64, limit: i64) -> StoreResult<Vec<LogRow>> {
                Ok(sqlx::query_as(
                    "SELECT id, at, kind, session_id, robot_id, data FROM org_events WHERE org_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(org_id).bind(after).bind(limit).fetch_all(&self.pool).await?)
            }

            async fn event_bounds(&self, org_id: &str) -> StoreResult<(Option<i64>, i64)> {
                let oldest: Option<i64> = sqlx::query_scalar("SELECT MIN(id) FROM org_events WHERE org_id = $1").bind(org_id).fetch_one(&self.pool).await?;
                let last: Option<i64> = sqlx::query_scalar("SELECT last FROM org_event_counters WHERE org_id = $1").bind(org_id).fetch_optional(&self.pool).await?;
                Ok((oldest, last.unwrap_or(0)))
            }

            async fn log_robot_offline(&self, org_id: &str, robot_id: &str, now: i64, timeout_ms: i64) -> StoreResult<bool> {
                self.offline(org_id, robot_id, now, timeout_ms).await
            }

            async fn prune_events(&self, before: i64) -> StoreResult<u64> {
                Ok(sqlx::query("DELETE FROM org_events WHERE at < $1").bind(before).execute(&self.pool).await?.rows_affected())
            }
        }

        impl $store {
            async fn offline(&self, org_id: &str, robot_id: &str, now: i64, timeout_ms: i64) -> StoreResult<bool> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                let last: Option<Option<i64>> = sqlx::query_scalar("SELECT last_heartbeat_at FROM robots WHERE org_id = $1 AND id = $2 AND retired_at IS NULL")
                    .bind(org_id).bind(robot_id).fetch_optional(&mut *tx).await?;
                let Some(Some(last)) = last else { return Ok(false) };
                if now - last < timeout_ms {
                    return Ok(false);
                }
                let logged: Option<i64> = sqlx::query_scalar(
                    "SELECT id FROM org_events WHERE org_id = $1 AND robot_id = $2 AND kind = 'robot.offline' AND at > $3 LIMIT 1",
                )
                .bind(org_id).bind(robot_id).bind(last).fetch_optional(&mut *tx).await?;
                if logged.is_some() {
                    return Ok(false);
                }
                let event = LogEvent::RobotOffline(domain::event_log::RobotOffline { last_heartbeat_at: domain::rules::rfc3339(last) });
                Self::log_event(&mut tx, Logged { org_id, at: now, session_id: None, robot_id: Some(robot_id), event }).await?;
                tx.commit().await?;
                Ok(true)
            }

            /// Logs `record` in `tx`, the transaction of the change it records.
            pub(super) async fn log_event(tx: &mut sqlx::Transaction<'_, <Self as super::sql::StoreDb>::Db>, record: Logged<'_>) -> StoreResult<()> {
                sqlx::query(BUMP).bind(record.org_id).execute(&mut **tx).await?;
                sqlx::query(INSERT)
                    .bind(record.org_id).bind(record.at).bind(record.event.kind()).bind(record.session_id).bind(record.robot_id)
                    .bind(record.event.data().to_string())
                    .execute(&mut **tx).await?;
                Ok(())
            }
        }
    };
}

event_log_store!(SqliteStore);
event_log_store!(PgStore);
