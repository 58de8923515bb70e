//! Episodes of the org's datasets (rules L11, L12): a row per COMPLETED
//! session that recorded frames; the frames themselves are files.

use super::board::insert_audit_record;
use super::sql::StoreDb;
use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use async_trait::async_trait;
use domain::events::AuditEntry;

/// An episode to add; its index is the next of its environment.
#[derive(Clone, Debug)]
pub struct NewEpisode {
    pub session_id: String,
    pub org_id: String,
    pub environment: String,
    pub robot_id: String,
    pub operator_id: Option<String>,
    pub client_id: Option<String>,
    pub task: String,
    pub fps: i64,
    pub frames: i64,
    pub duration_ms: i64,
    pub cameras: Vec<String>,
    pub created_at: i64,
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct EpisodeRow {
    pub session_id: String,
    pub environment: String,
    pub episode_index: i64,
    pub robot_id: String,
    pub operator_id: Option<String>,
    pub operator_name: Option<String>,
    pub client_id: Option<String>,
    pub task: String,
    pub fps: i64,
    pub frames: i64,
    pub duration_ms: i64,
    pub cameras: String,
    pub created_at: i64,
}

#[async_trait]
pub trait DatasetStore: Send + Sync {
    /// Adds the episode, the next index of its environment, and the audit
    /// entry `entry` makes of that index, in one transaction: the entry, or
    /// `None` when the session has its episode already (it is added once;
    /// two instances finishing the same recording at once add one row).
    async fn add_episode(&self, episode: &NewEpisode, entry: &(dyn Fn(i64) -> AuditEntry + Sync)) -> StoreResult<Option<AuditEntry>>;
    /// Whether the session has its episode's row.
    async fn has_episode(&self, session_id: &str) -> StoreResult<bool>;
    /// The org's episodes (only `client_id`'s when given), by environment and index.
    async fn episodes(&self, org_id: &str, client_id: Option<&str>) -> StoreResult<Vec<EpisodeRow>>;
    /// The booking's task, if the session was booked with one.
    async fn booking_task(&self, org_id: &str, booking_id: &str) -> StoreResult<Option<String>>;
}

const EPISODES: &str = "SELECT e.session_id, e.environment, e.episode_index, e.robot_id, e.operator_id, u.display_name AS operator_name, \
     e.client_id, e.task, e.fps, e.frames, e.duration_ms, e.cameras, e.created_at \
     FROM episodes e LEFT JOIN users u ON u.id = e.operator_id WHERE e.org_id = $1";

macro_rules! dataset_store {
    ($store:ident) => {
        #[async_trait]
        impl DatasetStore for $store {
            async fn add_episode(&self, e: &NewEpisode, entry: &(dyn Fn(i64) -> AuditEntry + Sync)) -> StoreResult<Option<AuditEntry>> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                // Two instances making episodes of one environment at once
                // would read the same next index (PostgreSQL, READ
                // COMMITTED), and the later would fail on its unique key.
                <Self as StoreDb>::hold(&mut tx, &format!("episodes of {} in {}", e.org_id, e.environment)).await?;
                let index: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(episode_index) + 1, 0) FROM episodes WHERE org_id = $1 AND environment = $2")
                    .bind(&e.org_id).bind(&e.environment).fetch_one(&mut *tx).await?;
                let added = sqlx::query(
                    "INSERT INTO episodes (session_id, org_id, environment, episode_index, robot_id, operator_id, client_id, task, fps, frames, duration_ms, cameras, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (session_id) DO NOTHING",
                )
                .bind(&e.session_id).bind(&e.org_id).bind(&e.environment).bind(index).bind(&e.robot_id).bind(&e.operator_id).bind(&e.client_id)
                .bind(&e.task).bind(e.fps).bind(e.frames).bind(e.duration_ms).bind(e.cameras.join(";")).bind(e.created_at)
                .execute(&mut *tx).await?;
                // (Another instance's row for the session is kept and this
                // one is not; the transaction, which wrote nothing, is
                // rolled back as it is dropped.)
                if added.rows_affected() != 1 {
                    return Ok(None);
                }
                let entry = entry(index);
                insert_audit_record!(&e.org_id, entry).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(Some(entry))
            }

            async fn has_episode(&self, session_id: &str) -> StoreResult<bool> {
                let found: Option<i64> = sqlx::query_scalar("SELECT episode_index FROM episodes WHERE session_id = $1")
                    .bind(session_id).fetch_optional(&self.pool).await?;
                Ok(found.is_some())
            }

            async fn episodes(&self, org_id: &str, client_id: Option<&str>) -> StoreResult<Vec<EpisodeRow>> {
                let rows = match client_id {
                    Some(client) => sqlx::query_as(&format!("{EPISODES} AND e.client_id = $2 ORDER BY e.environment, e.episode_index"))
                        .bind(org_id).bind(client).fetch_all(&self.pool).await?,
                    None => sqlx::query_as(&format!("{EPISODES} ORDER BY e.environment, e.episode_index")).bind(org_id).fetch_all(&self.pool).await?,
                };
                Ok(rows)
            }

            async fn booking_task(&self, org_id: &str, booking_id: &str) -> StoreResult<Option<String>> {
                let task: Option<Option<String>> = sqlx::query_scalar("SELECT task FROM bookings WHERE org_id = $1 AND id = $2")
                    .bind(org_id).bind(booking_id).fetch_optional(&self.pool).await?;
                Ok(task.flatten().filter(|t| !t.trim().is_empty()))
            }
        }
    };
}

dataset_store!(SqliteStore);
dataset_store!(PgStore);

#[cfg(test)]
mod tests {
    use super::NewEpisode;
    use crate::store::{Lease, NewSession, Write};
    use domain::events::{ActorKind, AuditAction, AuditEntry};

    fn episode() -> NewEpisode {
        NewEpisode {
            session_id: "ses-1".into(), org_id: "org".into(), environment: "Leeds".into(), robot_id: "r-1".into(), operator_id: None,
            client_id: None, task: "pick-place".into(), fps: 30, frames: 90, duration_ms: 3_000, cameras: vec!["front".into()], created_at: 7,
        }
    }

    fn entry(index: i64) -> AuditEntry {
        AuditEntry {
            at_ms: 7, actor_kind: ActorKind::System, actor_id: None, action: AuditAction::EpisodeRecorded,
            session_id: Some("ses-1".into()), robot_id: Some("r-1".into()), detail: Some(format!("episode {index}")),
        }
    }

    /// An episode's row and its audit entry are written in one
    /// transaction: when the database refuses the entry, the row is not
    /// there either, and the recording is tried again later (before, the
    /// row stayed without its entry, as a stop between the two left it).
    /// Added once, the next try adds nothing.
    #[tokio::test]
    async fn an_episode_and_its_audit_entry_are_written_together_or_not_at_all() {
        let (_dir, store, connection) = crate::store::sqlite_to_explain().await;
        let call = NewSession {
            id: "ses-1".into(), org_id: "org".into(), robot_id: "r-1".into(), skill: "pick-place".into(), pop: "uk-london".into(),
            raised_at: 1, client_id: None, booking_id: None, planned_end_at: None,
        };
        store.commit(&Lease { org_id: "org".into(), epoch: 1 }, vec![Write::OpenSession(call)]).await.unwrap();
        connection.execute_batch("CREATE TRIGGER refused BEFORE INSERT ON audit_records BEGIN SELECT RAISE(ABORT, 'refused'); END").unwrap();
        assert!(store.add_episode(&episode(), &entry).await.is_err(), "the entry is refused");
        assert!(!store.has_episode("ses-1").await.unwrap(), "and so is the row");
        connection.execute_batch("DROP TRIGGER refused").unwrap();
        let written = store.add_episode(&episode(), &entry).await.unwrap();
        assert_eq!(written.and_then(|e| e.detail), Some("episode 0".into()), "the entry of index 0");
        assert!(store.has_episode("ses-1").await.unwrap());
        let actions = store.audit_actions("org").await.unwrap();
        assert_eq!(actions.iter().filter(|(action, _)| action == "episode_recorded").count(), 1, "{actions:?}");
        assert!(store.add_episode(&episode(), &entry).await.unwrap().is_none(), "added once");
        assert_eq!(store.audit_actions("org").await.unwrap().len(), actions.len(), "and its entry once");
    }
}
