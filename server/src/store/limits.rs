//! Rate limits kept in the database (cluster mode, `services::limits`):
//! one row per key holding its GCRA "theoretical arrival time", spent in
//! one statement, so concurrent requests on any instances never both take
//! the last of a budget.

use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use async_trait::async_trait;

#[async_trait]
pub trait LimitStore: Send + Sync {
    /// Spends one of `key`'s budget (a burst of `burst`, one more every
    /// `every_ms`) at `now` (Unix ms): `None` when taken, else how many ms
    /// until one is back.
    async fn spend_limit(&self, key: &str, now: i64, every_ms: i64, burst: i64) -> StoreResult<Option<i64>>;
    /// Forgets keys whose whole budget is back at `now`; how many.
    async fn forget_recovered_limits(&self, now: i64) -> StoreResult<u64>;
}

macro_rules! limit_store {
    ($store:ident) => {
        #[async_trait]
        impl LimitStore for $store {
            async fn spend_limit(&self, key: &str, now: i64, every_ms: i64, burst: i64) -> StoreResult<Option<i64>> {
                // GCRA: the key's arrival time moves on by one interval per
                // request taken, from now at the earliest; a request is
                // taken while that stays within `burst` intervals of now.
                let taken: Option<i64> = sqlx::query_scalar(
                    "INSERT INTO rate_limits (limit_key, tat) VALUES ($1, $2 + $3) \
                     ON CONFLICT (limit_key) DO UPDATE SET tat = (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3 \
                     WHERE (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3 - $2 <= $3 * $4 \
                     RETURNING tat",
                )
                .bind(key).bind(now).bind(every_ms).bind(burst).fetch_optional(&self.pool).await?;
                if taken.is_some() {
                    return Ok(None);
                }
                let tat: Option<i64> = sqlx::query_scalar("SELECT tat FROM rate_limits WHERE limit_key = $1").bind(key).fetch_optional(&self.pool).await?;
                Ok(Some(tat.map_or(every_ms, |tat| tat + every_ms - now - every_ms * burst).max(1)))
            }

            async fn forget_recovered_limits(&self, now: i64) -> StoreResult<u64> {
                Ok(sqlx::query("DELETE FROM rate_limits WHERE tat <= $1").bind(now).execute(&self.pool).await?.rows_affected())
            }
        }
    };
}

limit_store!(SqliteStore);
limit_store!(PgStore);
