//! Places held against caps across a cluster (cluster mode,
//! `services::places`): a row per place, owned by the instance run that
//! took it, counted only while that run says it is alive.

use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use async_trait::async_trait;

#[async_trait]
pub trait PlaceStore: Send + Sync {
    /// Says `run` is alive until `until` (Unix ms), and forgets the places
    /// of runs that lapsed before `forgotten_before`.
    async fn renew_run(&self, run: &str, until: i64, forgotten_before: i64) -> StoreResult<()>;
    /// Takes `place` for `holder` on behalf of `run`, unless `holder`
    /// already has `cap` places held by runs alive at `now`: whether taken.
    async fn take_place(&self, holder: &str, place: &str, run: &str, cap: i64, now: i64) -> StoreResult<bool>;
    async fn free_place(&self, holder: &str, place: &str) -> StoreResult<()>;
}

/// Inserts the place when fewer than `$4` of the holder's are alive at `$5`.
const TAKE: &str = "INSERT INTO held_places (holder, place, run) \
                    SELECT $1, $2, $3 WHERE (SELECT COUNT(*) FROM held_places h JOIN place_runs r ON r.run = h.run \
                                             WHERE h.holder = $1 AND r.until_ms > $5) < $4";

/// On PostgreSQL, one taker per holder at a time (a lock held until the
/// commit), so the count sees every place taken before: two instances never
/// both take the last one. SQLite runs the insert under its one writer's
/// lock, which does the same.
const ONE_TAKER_AT_A_TIME: &str = "SELECT pg_advisory_xact_lock(hashtext('held_places'), hashtext($1))";

macro_rules! place_store {
    ($store:ident, $lock:expr) => {
        #[async_trait]
        impl PlaceStore for $store {
            async fn renew_run(&self, run: &str, until: i64, forgotten_before: i64) -> StoreResult<()> {
                sqlx::query("INSERT INTO place_runs (run, until_ms) VALUES ($1, $2) ON CONFLICT (run) DO UPDATE SET until_ms = excluded.until_ms")
                    .bind(run)
                    .bind(until)
                    .execute(&self.pool)
                    .await?;
                sqlx::query("DELETE FROM held_places WHERE run IN (SELECT run FROM place_runs WHERE until_ms < $1)").bind(forgotten_before).execute(&self.pool).await?;
                sqlx::query("DELETE FROM place_runs WHERE until_ms < $1").bind(forgotten_before).execute(&self.pool).await?;
                Ok(())
            }

            async fn take_place(&self, holder: &str, place: &str, run: &str, cap: i64, now: i64) -> StoreResult<bool> {
                let mut tx = self.pool.begin().await?;
                if let Some(lock) = $lock {
                    sqlx::query(lock).bind(holder).execute(&mut *tx).await?;
                }
                let taken = sqlx::query(TAKE).bind(holder).bind(place).bind(run).bind(cap).bind(now).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(taken.rows_affected() == 1)
            }

            async fn free_place(&self, holder: &str, place: &str) -> StoreResult<()> {
                sqlx::query("DELETE FROM held_places WHERE holder = $1 AND place = $2").bind(holder).bind(place).execute(&self.pool).await?;
                Ok(())
            }
        }
    };
}

place_store!(SqliteStore, None::<&str>);
place_store!(PgStore, Some(ONE_TAKER_AT_A_TIME));
