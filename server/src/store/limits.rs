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
                // One statement either way: a refusal leaves the time as it
                // was and says so by not writing this request's nonce.
                let nonce = rand::random::<i64>();
                let (tat, taken_by): (i64, i64) = sqlx::query_as(
                    "INSERT INTO rate_limits (limit_key, tat, taken_by) VALUES ($1, $2 + $3, $5) \
                     ON CONFLICT (limit_key) DO UPDATE SET \
                       tat = CASE WHEN (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3 - $2 <= $3 * $4 \
                             THEN (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3 ELSE rate_limits.tat END, \
                       taken_by = CASE WHEN (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3 - $2 <= $3 * $4 \
                             THEN $5 ELSE rate_limits.taken_by END \
                     RETURNING tat, taken_by",
                )
                .bind(key).bind(now).bind(every_ms).bind(burst).bind(nonce).fetch_one(&self.pool).await?;
                Ok((taken_by != nonce).then(|| (tat + every_ms - now - every_ms * burst).max(1)))
            }

            async fn forget_recovered_limits(&self, now: i64) -> StoreResult<u64> {
                Ok(sqlx::query("DELETE FROM rate_limits WHERE tat <= $1").bind(now).execute(&self.pool).await?.rows_affected())
            }
        }
    };
}

limit_store!(SqliteStore);
limit_store!(PgStore);
