//! The org's event log (`domain::event_log`): engine batches log their
//! changes in their own transaction (writes.rs); this reads it back.

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
        }
    };
}

event_log_store!(SqliteStore);
event_log_store!(PgStore);
