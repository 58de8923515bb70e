//! Places held against caps across a cluster (cluster mode,
//! `services::places`): a row per place, owned by the instance run that
//! took it, counted only while that run says it is alive.

use super::sql::{PgStore, SqliteStore, PG_NOW_MS, SQLITE_NOW_MS};
use super::{StoreError, StoreResult};
use async_trait::async_trait;

#[async_trait]
pub trait PlaceStore: Send + Sync {
    /// Says `run` is alive for `lasts_ms` from now (negative: it lapsed),
    /// and forgets the places of runs lapsed more than `forgotten_after_ms`
    /// ago. Times are the database's clock, never an instance's own.
    async fn renew_run(&self, run: &str, lasts_ms: i64, forgotten_after_ms: i64) -> StoreResult<()>;
    /// Takes `place` for `holder` on behalf of `run`, unless `holder`
    /// already has `cap` places held by runs alive now: whether taken. On
    /// an error nothing is held: a commit whose answer was lost is taken
    /// back, and `StoreError::PlaceUnsure` says the take-back failed too
    /// (the caller frees it later, as a dropped place).
    async fn take_place(&self, holder: &str, place: &str, run: &str, cap: i64) -> StoreResult<bool>;
    async fn free_place(&self, holder: &str, place: &str) -> StoreResult<()>;
}

/// On PostgreSQL, one taker per holder at a time (a lock held until the
/// commit), so the count sees every place taken before: two instances never
/// both take the last one. SQLite runs the insert under its one writer's
/// lock, which does the same.
const ONE_TAKER_AT_A_TIME: &str = "SELECT pg_advisory_xact_lock(hashtext('held_places'), hashtext($1))";

const FREE_PLACE: &str = "DELETE FROM held_places WHERE holder = $1 AND place = $2";
/// How long a take whose COMMIT went unanswered waits to take its place
/// back (the lock may wait on a connection the database has not yet seen
/// go); past it, the caller frees the place later.
const TAKE_BACK_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

macro_rules! place_store {
    ($store:ident, $now:expr, $lock:expr) => {
        impl $store {
            /// A transaction holding the holder's lock (PostgreSQL;
            /// `ONE_TAKER_AT_A_TIME`) until it ends.
            async fn as_the_holders_taker(&self, holder: &str) -> StoreResult<sqlx::Transaction<'static, <$store as super::sql::StoreDb>::Db>> {
                let mut tx = self.pool.begin().await?;
                if let Some(lock) = $lock {
                    sqlx::query(lock).bind(holder).execute(&mut *tx).await?;
                }
                Ok(tx)
            }

            /// Deletes a place whose take's COMMIT went unanswered. On
            /// PostgreSQL it first waits for the holder's lock, which that
            /// take's transaction holds until it ends: a COMMIT still under
            /// way lands before the delete looks.
            async fn take_back(&self, holder: &str, place: &str) -> StoreResult<()> {
                let mut tx = self.as_the_holders_taker(holder).await?;
                sqlx::query(FREE_PLACE).bind(holder).bind(place).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }
        }

        #[async_trait]
        impl PlaceStore for $store {
            async fn renew_run(&self, run: &str, lasts_ms: i64, forgotten_after_ms: i64) -> StoreResult<()> {
                let now = $now;
                sqlx::query(&format!("INSERT INTO place_runs (run, until_ms) VALUES ($1, {now} + $2) ON CONFLICT (run) DO UPDATE SET until_ms = excluded.until_ms"))
                    .bind(run)
                    .bind(lasts_ms)
                    .execute(&self.pool)
                    .await?;
                // The runs first, then every place whose run is gone: one
                // cut-off, so no place outlives its run's row.
                let forgotten = sqlx::query(&format!("DELETE FROM place_runs WHERE until_ms < {now} - $1")).bind(forgotten_after_ms).execute(&self.pool).await?;
                if forgotten.rows_affected() > 0 {
                    sqlx::query("DELETE FROM held_places WHERE NOT EXISTS (SELECT 1 FROM place_runs r WHERE r.run = held_places.run)").execute(&self.pool).await?;
                }
                Ok(())
            }

            async fn take_place(&self, holder: &str, place: &str, run: &str, cap: i64) -> StoreResult<bool> {
                let now = $now;
                let take = format!(
                    "INSERT INTO held_places (holder, place, run) \
                     SELECT $1, $2, $3 WHERE (SELECT COUNT(*) FROM held_places h JOIN place_runs r ON r.run = h.run \
                                              WHERE h.holder = $1 AND r.until_ms > {now}) < $4"
                );
                let mut tx = self.as_the_holders_taker(holder).await?;
                let taken = sqlx::query(&take).bind(holder).bind(place).bind(run).bind(cap).execute(&mut *tx).await?;
                if let Err(e) = tx.commit().await {
                    // A commit whose answer was lost (the connection cut
                    // after COMMIT) may have landed, and its place would
                    // count against the holder until this run ends: taken
                    // back. (A failure before the commit wrote nothing.)
                    return match tokio::time::timeout(TAKE_BACK_WITHIN, self.take_back(holder, place)).await {
                        Ok(Ok(())) => Err(e.into()),
                        Ok(Err(undo)) => Err(StoreError::PlaceUnsure(format!("{e}; taking the place back: {undo}"))),
                        Err(_) => Err(StoreError::PlaceUnsure(format!("{e}; taking the place back took over {TAKE_BACK_WITHIN:?}"))),
                    };
                }
                Ok(taken.rows_affected() == 1)
            }

            async fn free_place(&self, holder: &str, place: &str) -> StoreResult<()> {
                sqlx::query(FREE_PLACE).bind(holder).bind(place).execute(&self.pool).await?;
                Ok(())
            }
        }
    };
}

place_store!(SqliteStore, SQLITE_NOW_MS, None::<&str>);
place_store!(PgStore, PG_NOW_MS, Some(ONE_TAKER_AT_A_TIME));
