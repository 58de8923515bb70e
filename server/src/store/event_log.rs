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
    /// The record as JSON, as `/v1/events` and webhooks send it, built from
    /// the stored type and data without reading them: a type this build
    /// does not know (written by a newer one) is sent as it was stored.
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.json()).expect("JSON serialises")
    }

    /// The record as `body` sends it, as a JSON value.
    pub fn json(&self) -> serde_json::Value {
        let data: serde_json::Value = serde_json::from_slice(self.data.as_bytes()).unwrap_or(serde_json::Value::Null);
        let mut record = serde_json::Map::new();
        record.insert("id".into(), self.id.into());
        record.insert("at".into(), domain::rules::rfc3339(self.at).into());
        if let Some(session_id) = &self.session_id {
            record.insert("sessionId".into(), session_id.clone().into());
        }
        if let Some(robot_id) = &self.robot_id {
            record.insert("robotId".into(), robot_id.clone().into());
        }
        record.insert("type".into(), self.kind.clone().into());
        record.insert("data".into(), data);
        serde_json::Value::Object(record)
    }

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
    /// The last id the org's log ever gave (0: none).
    async fn last_event_id(&self, org_id: &str) -> StoreResult<i64>;
    /// Deletes each org's records older than `before` (retention), and
    /// webhook attempts as old; how many records. Each org's log is walked
    /// from its oldest record by id, a step of records at a time, up to the
    /// step's newest record older than `before`; a step with none ends the
    /// walk. (So an old record behind a whole step of newer ones, its `at`
    /// out of the ids' order by more than a step, waits for a later run.)
    async fn prune_events(&self, before: i64) -> StoreResult<u64>;
    /// Logs `robot.offline` if the robot's last heartbeat (any instance's)
    /// is `timeout_ms` old at `now` and this silence is not logged yet;
    /// whether it logged.
    async fn log_robot_offline(&self, org_id: &str, robot_id: &str, now: i64, timeout_ms: i64) -> StoreResult<bool>;
}

/// The record of a change made outside the engine, under the id its
/// `writes::BUMP_EVENTS` by one took (the robot given, not read from a session).
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

/// Records a step of pruning reads (and at most deletes) of one org.
const PRUNE_STEP: i64 = 5_000;
/// A step's cut: the newest of the org's oldest `$2` records older than
/// `$3`, by its key.
const PRUNE_CUT: &str = "SELECT MAX(id) FROM (SELECT id, at FROM org_events WHERE org_id = $1 ORDER BY id LIMIT $2) oldest WHERE at < $3";
/// A step: the org's records up to the cut, by its key.
const PRUNE_TO_CUT: &str = "DELETE FROM org_events WHERE org_id = $1 AND id <= $2";

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
                Ok((oldest, self.last_event_id(org_id).await?))
            }

            async fn last_event_id(&self, org_id: &str) -> StoreResult<i64> {
                let last: Option<i64> = sqlx::query_scalar("SELECT last FROM org_event_counters WHERE org_id = $1").bind(org_id).fetch_optional(&self.pool).await?;
                Ok(last.unwrap_or(0))
            }

            async fn log_robot_offline(&self, org_id: &str, robot_id: &str, now: i64, timeout_ms: i64) -> StoreResult<bool> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                // The row's update decides: a second instance noticing the
                // same silence finds it logged (PostgreSQL re-reads the row
                // after the first commits).
                let last: Option<i64> = sqlx::query_scalar(
                    "UPDATE robots SET offline_logged_for = last_heartbeat_at \
                     WHERE org_id = $1 AND id = $2 AND retired_at IS NULL AND last_heartbeat_at IS NOT NULL AND last_heartbeat_at <= $3 \
                     AND (offline_logged_for IS NULL OR offline_logged_for <> last_heartbeat_at) RETURNING last_heartbeat_at",
                )
                .bind(org_id).bind(robot_id).bind(now - timeout_ms).fetch_optional(&mut *tx).await?;
                let Some(last) = last else { return Ok(false) };
                let event = LogEvent::RobotOffline(domain::event_log::RobotOffline { last_heartbeat_at: domain::rules::rfc3339(last) });
                Self::log_event(&mut tx, Logged { org_id, at: now, session_id: None, robot_id: Some(robot_id), event }).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn prune_events(&self, before: i64) -> StoreResult<u64> {
                // Each org's log is walked from its oldest record by its
                // key, a step of records at a time: up to the newest record
                // of the step past the retention, by id, so a record
                // committed a moment out of `at` order is not left as a
                // hole the 410 rule (the oldest id kept) cannot see. Ids
                // follow the commits and `at` nearly does, so a step with
                // nothing past the retention ends the org's walk (the
                // trait says what that may leave). No index by `at` is
                // kept for this: every record would write it (sqlite/0024).
                let orgs: Vec<String> = sqlx::query_scalar("SELECT id FROM orgs").fetch_all(&self.pool).await?;
                let mut pruned = 0;
                for org_id in orgs {
                    loop {
                        let cut: Option<i64> =
                            sqlx::query_scalar(PRUNE_CUT).bind(&org_id).bind(PRUNE_STEP).bind(before).fetch_one(&self.pool).await?;
                        let Some(cut) = cut else { break };
                        pruned += sqlx::query(PRUNE_TO_CUT)
                            .bind(&org_id).bind(cut).execute(&self.pool).await?.rows_affected();
                    }
                }
                sqlx::query("DELETE FROM webhook_deliveries WHERE at < $1").bind(before).execute(&self.pool).await?;
                Ok(pruned)
            }
        }

        impl $store {
            /// Logs `record` in `tx`, the transaction of the change it records.
            pub(super) async fn log_event(tx: &mut sqlx::Transaction<'_, <Self as super::sql::StoreDb>::Db>, record: Logged<'_>) -> StoreResult<()> {
                sqlx::query(super::writes::BUMP_EVENTS.text).bind(record.org_id).bind(1i64).execute(&mut **tx).await?;
                sqlx::query(INSERT)
                    .bind(record.org_id).bind(record.at).bind(record.event.kind()).bind(record.session_id).bind(record.robot_id)
                    .bind(record.event.data())
                    .execute(&mut **tx).await?;
                Ok(())
            }
        }
    };
}

event_log_store!(SqliteStore);
event_log_store!(PgStore);

#[cfg(test)]
mod tests {
    /// Retention reads and deletes each org's oldest records by the key
    /// (SQLite keeps no index by `at`, sqlite/0024): a step never reads
    /// the whole log.
    #[tokio::test]
    async fn a_step_of_retention_searches_the_orgs_oldest_records_by_the_key() {
        let (_dir, _store, connection) = crate::store::sqlite_to_explain().await;
        for sql in [super::PRUNE_CUT, super::PRUNE_TO_CUT] {
            let plan = crate::store::explained(&connection, &format!("EXPLAIN QUERY PLAN {sql}"), "detail");
            assert!(plan.iter().any(|step| step.starts_with("SEARCH org_events USING PRIMARY KEY (org_id=?")), "{sql}: {plan:?}");
            assert!(!plan.iter().any(|step| step.starts_with("SCAN org_events") || step.contains("TEMP B-TREE")), "{sql}: {plan:?}");
        }
    }
}
