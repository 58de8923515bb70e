//! Applying one write of the engine's journal inside the batch's
//! transaction (see `commit` in dispatch.rs). Each write that must change
//! exactly one row checks it did: otherwise the database and the engine
//! disagree and the whole batch is rolled back.

use super::sql::StoreDb;
use super::journal::Write;
use super::sql::{PgStore, SqliteStore};
use super::{StoreError, StoreResult};

/// A write that changed nothing where the engine expected one row.
fn diverged(what: &str) -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(format!("the database disagrees with the engine: {what}")))
}

macro_rules! apply_writes {
    ($store:ident) => {
        impl $store {
            pub(super) async fn apply(tx: &mut sqlx::Transaction<'_, <Self as StoreDb>::Db>, write: &Write) -> StoreResult<()> {
                match write {
                    Write::OpenSession(s) => {
                        sqlx::query(
                            "INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at, client_id, booking_id, planned_end_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        )
                            .bind(&s.id).bind(&s.org_id).bind(&s.robot_id).bind(&s.skill).bind(&s.pop).bind(s.raised_at)
                            .bind(&s.client_id).bind(&s.booking_id).bind(s.planned_end_at)
                            .execute(&mut **tx).await?;
                    }
                    Write::Queue { session_id, at } => {
                        sqlx::query("UPDATE sessions SET queued_at = $1 WHERE id = $2 AND queued_at IS NULL")
                            .bind(at).bind(session_id).execute(&mut **tx).await?;
                    }
                    Write::Offer { org_id, session_id, offer, from_queue } => {
                        sqlx::query(
                            "INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(&offer.id).bind(org_id).bind(session_id).bind(&offer.operator_id)
                        .bind(i64::from(offer.rtt_ms)).bind(offer.offered_at).bind(offer.expires_at)
                        .execute(&mut **tx).await?;
                        if *from_queue {
                            sqlx::query("UPDATE sessions SET queued_at = NULL WHERE id = $1")
                                .bind(session_id).execute(&mut **tx).await?;
                        }
                    }
                    Write::CloseOffer { org_id, session_id, operator_id, status, at } => {
                        let done = sqlx::query(
                            "UPDATE offers SET status = $1, answered_at = $2 \
                             WHERE org_id = $3 AND session_id = $4 AND operator_id = $5 AND status = 'open'",
                        )
                        .bind(status.as_str()).bind(at).bind(org_id).bind(session_id).bind(operator_id)
                        .execute(&mut **tx).await?;
                        if done.rows_affected() != 1 {
                            return Err(diverged("no such open offer"));
                        }
                    }
                    Write::Start { org_id, session_id, operator_id, region, rtt_ms, planned_end_at, at } => {
                        let done = sqlx::query(
                            "UPDATE sessions SET lifecycle = 'ACTIVE', operator_id = $1, operator_region = $2, rtt_ms = $3, \
                             started_at = $4, queued_at = NULL, planned_end_at = $7 WHERE org_id = $5 AND id = $6 AND lifecycle = 'PENDING'",
                        )
                        .bind(operator_id).bind(region).bind(i64::from(*rtt_ms)).bind(at).bind(org_id).bind(session_id).bind(planned_end_at)
                        .execute(&mut **tx).await?;
                        if done.rows_affected() != 1 {
                            return Err(diverged("session not pending"));
                        }
                        sqlx::query(
                            "INSERT INTO activity_events (org_id, session_id, kind, at, operator_id) VALUES ($1, $2, 'SESSION_START', $3, $4)",
                        )
                        .bind(org_id).bind(session_id).bind(at).bind(operator_id)
                        .execute(&mut **tx).await?;
                    }
                    Write::End { org_id, session_id, to, reason, attached, at } => {
                        let done = sqlx::query(
                            "UPDATE sessions SET lifecycle = $1, ended_at = $2, end_reason = $3, queued_at = NULL \
                             WHERE org_id = $4 AND id = $5 AND lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED')",
                        )
                        .bind(to.as_str()).bind(at).bind(reason).bind(org_id).bind(session_id)
                        .execute(&mut **tx).await?;
                        if done.rows_affected() != 1 {
                            return Err(diverged("session not open"));
                        }
                        sqlx::query(
                            "INSERT INTO activity_events (org_id, session_id, kind, at, operator_id, detail) VALUES ($1, $2, 'SESSION_END', $3, $4, $5)",
                        )
                        .bind(org_id).bind(session_id).bind(at).bind(attached).bind(format!("{} · {reason}", to.as_str()))
                        .execute(&mut **tx).await?;
                    }
                    Write::Activity { org_id, session_id, kind, operator_id, detail, at } => {
                        sqlx::query("INSERT INTO activity_events (org_id, session_id, kind, at, operator_id, detail) VALUES ($1, $2, $3, $4, $5, $6)")
                            .bind(org_id).bind(session_id).bind(kind.as_str()).bind(at).bind(operator_id).bind(detail)
                            .execute(&mut **tx).await?;
                    }
                    Write::Steer { org_id, session_id, from, to, kind, operator_id, at } => {
                        let done = sqlx::query("UPDATE sessions SET lifecycle = $1 WHERE org_id = $2 AND id = $3 AND lifecycle = $4")
                            .bind(to.as_str()).bind(org_id).bind(session_id).bind(from.as_str())
                            .execute(&mut **tx).await?;
                        if done.rows_affected() != 1 {
                            return Err(diverged("session not in the state the engine holds"));
                        }
                        sqlx::query("INSERT INTO activity_events (org_id, session_id, kind, at, operator_id) VALUES ($1, $2, $3, $4, $5)")
                            .bind(org_id).bind(session_id).bind(kind.as_str()).bind(at).bind(operator_id)
                            .execute(&mut **tx).await?;
                    }
                    Write::Switch { org_id, session_id, from, to, region, rtt_ms, detail, at } => {
                        // `IS NOT DISTINCT FROM`: an admin may hand over a session nobody held.
                        let done = sqlx::query(
                            "UPDATE sessions SET operator_id = $1, operator_region = $2, rtt_ms = $3 \
                             WHERE org_id = $4 AND id = $5 AND lifecycle IN ('ACTIVE', 'PAUSED') AND operator_id IS NOT DISTINCT FROM $6",
                        )
                        .bind(to).bind(region).bind(i64::from(*rtt_ms)).bind(org_id).bind(session_id).bind(from)
                        .execute(&mut **tx).await?;
                        if done.rows_affected() != 1 {
                            return Err(diverged("session not held by the operator the engine holds"));
                        }
                        sqlx::query("INSERT INTO activity_events (org_id, session_id, kind, at, operator_id, detail) VALUES ($1, $2, 'OPERATOR_SWITCH', $3, $4, $5)")
                            .bind(org_id).bind(session_id).bind(at).bind(to).bind(detail)
                            .execute(&mut **tx).await?;
                    }
                    Write::Record { org_id, session_id, record } => {
                        sqlx::query(
                            "INSERT INTO dispatch_records (org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        )
                        .bind(org_id).bind(session_id).bind(record.at).bind(record.trigger.as_str())
                        .bind(record.pool_source.as_str()).bind(record.outcome.as_str()).bind(&record.operator_id)
                        .bind(record.rtt_ms.map(i64::from)).bind(&record.candidates)
                        .execute(&mut **tx).await?;
                    }
                }
                Ok(())
            }
        }
    };
}

apply_writes!(SqliteStore);
apply_writes!(PgStore);
