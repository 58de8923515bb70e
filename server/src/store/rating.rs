//! Ratings of operators after completed sessions (rule L10).

use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use domain::event_log::{LogEvent, Rated};
use async_trait::async_trait;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RatingRow {
    pub stars: i64,
    pub feedback: String,
    pub rated_by_name: String,
    pub at: i64,
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ScoreRow {
    pub operator_id: String,
    pub average: f64,
    pub count: i64,
}

#[async_trait]
pub trait RatingStore: Send + Sync {
    /// Rates the session; false when it was rated already.
    async fn rate(&self, org_id: &str, session_id: &str, operator_id: &str, stars: u8, feedback: &str, rated_by: &str, at: i64) -> StoreResult<bool>;
    async fn rating(&self, org_id: &str, session_id: &str) -> StoreResult<Option<RatingRow>>;
    /// Average stars and count per rated operator of the org.
    async fn operator_scores(&self, org_id: &str) -> StoreResult<Vec<ScoreRow>>;
}

macro_rules! rating_store {
    ($store:ident) => {
        #[async_trait]
        impl RatingStore for $store {
            async fn rate(&self, org_id: &str, session_id: &str, operator_id: &str, stars: u8, feedback: &str, rated_by: &str, at: i64) -> StoreResult<bool> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                let done = sqlx::query(
                    "INSERT INTO ratings (session_id, org_id, operator_id, stars, feedback, rated_by, at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (session_id) DO NOTHING",
                )
                .bind(session_id).bind(org_id).bind(operator_id).bind(i64::from(stars)).bind(feedback).bind(rated_by).bind(at)
                .execute(&mut *tx).await?;
                if done.rows_affected() != 1 {
                    return Ok(false);
                }
                let robot_id: Option<String> = sqlx::query_scalar("SELECT robot_id FROM sessions WHERE id = $1").bind(session_id).fetch_optional(&mut *tx).await?;
                let event = LogEvent::Rated(Rated { operator_id: operator_id.into(), stars });
                Self::log_event(&mut tx, super::Logged { org_id, at, session_id: Some(session_id), robot_id: robot_id.as_deref(), event }).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn rating(&self, org_id: &str, session_id: &str) -> StoreResult<Option<RatingRow>> {
                Ok(sqlx::query_as(
                    "SELECT r.stars, r.feedback, u.display_name AS rated_by_name, r.at FROM ratings r \
                     JOIN users u ON u.id = r.rated_by WHERE r.org_id = $1 AND r.session_id = $2",
                )
                .bind(org_id).bind(session_id).fetch_optional(&self.pool).await?)
            }

            async fn operator_scores(&self, org_id: &str) -> StoreResult<Vec<ScoreRow>> {
                Ok(sqlx::query_as(
                    "SELECT operator_id, CAST(AVG(CAST(stars AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS average, COUNT(*) AS count \
                     FROM ratings WHERE org_id = $1 GROUP BY operator_id",
                )
                .bind(org_id).fetch_all(&self.pool).await?)
            }
        }
    };
}

rating_store!(SqliteStore);
rating_store!(PgStore);
