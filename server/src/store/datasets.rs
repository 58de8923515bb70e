//! Episodes of the org's datasets (rules L11, L12): a row per COMPLETED
//! session that recorded frames; the frames themselves are files.

use super::sql::StoreDb;
use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use async_trait::async_trait;

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
    /// Adds the episode: its index in the environment, or `None` when the
    /// session has one already (it is added once; two instances finishing
    /// the same recording at once add one row).
    async fn add_episode(&self, episode: &NewEpisode) -> StoreResult<Option<i64>>;
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
            async fn add_episode(&self, e: &NewEpisode) -> StoreResult<Option<i64>> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                if sqlx::query_scalar::<_, i64>("SELECT episode_index FROM episodes WHERE session_id = $1")
                    .bind(&e.session_id).fetch_optional(&mut *tx).await?.is_some()
                {
                    return Ok(None);
                }
                let index: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(episode_index) + 1, 0) FROM episodes WHERE org_id = $1 AND environment = $2")
                    .bind(&e.org_id).bind(&e.environment).fetch_one(&mut *tx).await?;
                let added = sqlx::query(
                    "INSERT INTO episodes (session_id, org_id, environment, episode_index, robot_id, operator_id, client_id, task, fps, frames, duration_ms, cameras, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (session_id) DO NOTHING",
                )
                .bind(&e.session_id).bind(&e.org_id).bind(&e.environment).bind(index).bind(&e.robot_id).bind(&e.operator_id).bind(&e.client_id)
                .bind(&e.task).bind(e.fps).bind(e.frames).bind(e.duration_ms).bind(e.cameras.join(";")).bind(e.created_at)
                .execute(&mut *tx).await?;
                tx.commit().await?;
                // (PostgreSQL: another instance's row for the session, added
                // since the check above, is kept and this one is not.)
                Ok((added.rows_affected() == 1).then_some(index))
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
