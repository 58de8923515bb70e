//! Storage of calls: sessions, offers, the queue, dispatch records,
//! telemetry. The ACD engine is the only caller. Every multi-row change is
//! one transaction, so a crash never leaves a call half offered.

use super::sql::{PgStore, SqliteStore};
use super::{StoreError, StoreResult};
use app::models::{LifecycleState, SafetyState};
use async_trait::async_trait;
use sqlx::Row;

#[derive(Clone, Debug)]
pub struct NewSession {
    pub id: String,
    pub org_id: String,
    pub robot_id: String,
    pub skill: String,
    pub pop: String,
    pub raised_at: i64,
}

#[derive(Clone, Debug)]
pub struct NewOffer {
    pub id: String,
    pub operator_id: String,
    pub rtt_ms: u32,
    pub offered_at: i64,
    pub expires_at: i64,
}

/// Where a call goes after a decision.
#[derive(Clone, Debug)]
pub enum Placement {
    Offer(NewOffer),
    Queue,
}

#[derive(Clone, Debug)]
pub struct DispatchRecord {
    pub at: i64,
    /// What prompted the decision: `raised`, `declined`, `expired`, `operator_ready`, `recovered`.
    pub trigger: String,
    pub pool_source: String,
    pub operator_id: Option<String>,
    pub rtt_ms: Option<u32>,
    /// The candidates with RTT and verdict, as JSON.
    pub candidates: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub org_id: String,
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub pop: String,
    pub skill: String,
    pub lifecycle: LifecycleState,
    pub safety_state: SafetyState,
    pub operator_id: Option<String>,
    pub operator_name: Option<String>,
    pub operator_region: Option<String>,
    pub rtt_ms: Option<i64>,
    pub divergence_deg: Option<f64>,
    pub velocity_scale: Option<f64>,
    pub raised_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOfferRow {
    pub org_id: String,
    pub session_id: String,
    pub operator_id: String,
    pub rtt_ms: i64,
    pub offered_at: i64,
    pub expires_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedCall {
    pub session_id: String,
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub skill: String,
    pub pop: String,
    pub raised_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchRecordRow {
    pub trigger: String,
    pub pool_source: String,
    pub outcome: String,
    pub operator_id: Option<String>,
    pub rtt_ms: Option<i64>,
    pub candidates: String,
}

/// Edge-agent telemetry as stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Telemetry {
    pub state: SafetyState,
    pub rtt_ms: u32,
    pub divergence_deg: f64,
    pub velocity_scale: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TelemetryOutcome {
    Applied { row: SessionRow, entered_protective_stop: bool },
    /// The session is latched in PROTECTIVE_STOP; only an explicit clear leaves it.
    Latched,
    /// COMPLETED or CANCELLED: nothing reports into a finished session.
    Ended,
    NotFound,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EndOutcome {
    Ended {
        /// Who was attached (ACTIVE/PAUSED), now in wrap-up.
        operator_id: Option<String>,
        /// Who was ringing for it, if an offer was open.
        withdrawn_from: Option<String>,
    },
    AlreadyEnded,
    NotFound,
}

#[async_trait]
pub trait DispatchStore: Send + Sync {
    async fn robot_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<super::RobotRecord>>;
    async fn record_heartbeat(&self, robot_id: &str, now: i64) -> StoreResult<()>;
    /// The robot's PENDING, ACTIVE or PAUSED session, if any.
    async fn live_session_for_robot(&self, robot_id: &str) -> StoreResult<Option<String>>;

    /// A new call and where it goes, atomically.
    async fn open_call(&self, session: &NewSession, placement: &Placement, record: &DispatchRecord) -> StoreResult<()>;
    /// Re-places a pending call (decline, expiry, an operator freeing up).
    async fn place_call(&self, org_id: &str, session_id: &str, placement: &Placement, record: &DispatchRecord) -> StoreResult<()>;
    /// 1-based place among the org's queued calls of the same skill, oldest first.
    async fn queue_position(&self, org_id: &str, skill: &str, session_id: &str, raised_at: i64) -> StoreResult<i64>;
    /// Puts back in the queue any pending call that has neither an open
    /// offer nor a place in the queue (a crash between two writes). Returns how many.
    async fn requeue_orphans(&self, now: i64) -> StoreResult<u64>;
    /// The oldest pending unoffered call with one of `skills` that was never offered to `operator_id`.
    async fn oldest_queued_call(&self, org_id: &str, skills: &[String], operator_id: &str) -> StoreResult<Option<QueuedCall>>;
    /// Operators who were already offered this call (declined, missed, withdrawn).
    async fn operators_offered(&self, session_id: &str) -> StoreResult<Vec<String>>;
    async fn open_offers(&self) -> StoreResult<Vec<OpenOfferRow>>;

    /// Offer accepted → session ACTIVE with the operator attached and
    /// SESSION_START logged. `None` when no such open offer exists.
    async fn accept_offer(&self, org_id: &str, session_id: &str, operator_id: &str, now: i64) -> StoreResult<Option<SessionRow>>;
    /// Closes an open offer as `declined` or `expired`; false if it was not open.
    async fn close_offer(&self, session_id: &str, operator_id: &str, status: &str, now: i64) -> StoreResult<bool>;
    /// Moves a live session to COMPLETED or CANCELLED, withdrawing any open
    /// offer and logging SESSION_END.
    async fn end_session(&self, org_id: &str, session_id: &str, to: LifecycleState, reason: &str, now: i64) -> StoreResult<EndOutcome>;

    async fn session(&self, org_id: &str, session_id: &str) -> StoreResult<Option<SessionRow>>;
    async fn apply_telemetry(&self, org_id: &str, session_id: &str, telemetry: Telemetry, now: i64) -> StoreResult<TelemetryOutcome>;

    async fn dispatch_records(&self, session_id: &str) -> StoreResult<Vec<DispatchRecordRow>>;
    /// `(kind, operator_id)` in order.
    async fn activity_events(&self, session_id: &str) -> StoreResult<Vec<(String, Option<String>)>>;
    /// `(action, session_id)` of the org's audit records, oldest first.
    async fn audit_actions(&self, org_id: &str) -> StoreResult<Vec<(String, Option<String>)>>;
}

fn decode<T>(what: &str, value: Option<T>) -> StoreResult<T> {
    value.ok_or_else(|| StoreError::Database(sqlx::Error::Decode(format!("unknown {what}").into())))
}

const SESSION_SELECT: &str = "SELECT s.id, s.org_id, s.robot_id, r.model, r.site, s.pop, s.skill, s.lifecycle, \
     s.safety_state, s.operator_id, u.display_name, s.operator_region, s.rtt_ms, s.divergence_deg, \
     s.velocity_scale, s.raised_at, s.started_at, s.ended_at \
     FROM sessions s JOIN robots r ON r.id = s.robot_id LEFT JOIN users u ON u.id = s.operator_id";

const ROBOT_SELECT: &str = "SELECT id, org_id, model, site, pop, req_cert, last_heartbeat_at FROM robots";

macro_rules! session_from_row {
    ($row:expr) => {{
        let row = $row;
        SessionRow {
            id: row.try_get(0)?,
            org_id: row.try_get(1)?,
            robot_id: row.try_get(2)?,
            robot_model: row.try_get(3)?,
            site: row.try_get(4)?,
            pop: row.try_get(5)?,
            skill: row.try_get(6)?,
            lifecycle: decode("lifecycle", LifecycleState::parse(row.try_get::<&str, _>(7)?))?,
            safety_state: decode("safety state", SafetyState::parse(row.try_get::<&str, _>(8)?))?,
            operator_id: row.try_get(9)?,
            operator_name: row.try_get(10)?,
            operator_region: row.try_get(11)?,
            rtt_ms: row.try_get(12)?,
            divergence_deg: row.try_get(13)?,
            velocity_scale: row.try_get(14)?,
            raised_at: row.try_get(15)?,
            started_at: row.try_get(16)?,
            ended_at: row.try_get(17)?,
        }
    }};
}

macro_rules! dispatch_store {
    ($store:ident) => {
        impl $store {
            async fn write_placement(
                tx: &mut sqlx::Transaction<'_, <Self as StoreDb>::Db>,
                org_id: &str,
                session_id: &str,
                placement: &Placement,
                record: &DispatchRecord,
                leaves_queue: bool,
            ) -> StoreResult<()> {
                let outcome = match placement {
                    Placement::Offer(offer) => {
                        sqlx::query(
                            "INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(&offer.id).bind(org_id).bind(session_id).bind(&offer.operator_id)
                        .bind(i64::from(offer.rtt_ms)).bind(offer.offered_at).bind(offer.expires_at)
                        .execute(&mut **tx).await?;
                        if leaves_queue {
                            sqlx::query("UPDATE sessions SET queued_at = NULL WHERE id = $1")
                                .bind(session_id).execute(&mut **tx).await?;
                        }
                        "offered"
                    }
                    Placement::Queue => {
                        sqlx::query("UPDATE sessions SET queued_at = $1 WHERE id = $2 AND queued_at IS NULL")
                            .bind(record.at).bind(session_id)
                            .execute(&mut **tx).await?;
                        "queued"
                    }
                };
                sqlx::query(
                    "INSERT INTO dispatch_records (org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(org_id).bind(session_id).bind(record.at).bind(&record.trigger).bind(&record.pool_source)
                .bind(outcome).bind(&record.operator_id).bind(record.rtt_ms.map(i64::from)).bind(&record.candidates)
                .execute(&mut **tx).await?;
                Ok(())
            }
        }

        #[async_trait]
        impl DispatchStore for $store {
            async fn robot_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<super::RobotRecord>> {
                Ok(sqlx::query_as(&format!("{ROBOT_SELECT} WHERE token_hash = $1"))
                    .bind(token_hash).fetch_optional(&self.pool).await?)
            }

            async fn record_heartbeat(&self, robot_id: &str, now: i64) -> StoreResult<()> {
                sqlx::query("UPDATE robots SET last_heartbeat_at = $1 WHERE id = $2")
                    .bind(now).bind(robot_id).execute(&self.pool).await?;
                Ok(())
            }

            async fn live_session_for_robot(&self, robot_id: &str) -> StoreResult<Option<String>> {
                Ok(sqlx::query_scalar(
                    "SELECT id FROM sessions WHERE robot_id = $1 AND lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED') \
                     ORDER BY raised_at DESC LIMIT 1",
                )
                .bind(robot_id).fetch_optional(&self.pool).await?)
            }

            async fn open_call(&self, session: &NewSession, placement: &Placement, record: &DispatchRecord) -> StoreResult<()> {
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&session.id).bind(&session.org_id).bind(&session.robot_id).bind(&session.skill)
                .bind(&session.pop).bind(session.raised_at)
                .execute(&mut *tx).await?;
                // A new call is in no queue yet: nothing to leave.
                Self::write_placement(&mut tx, &session.org_id, &session.id, placement, record, false).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn place_call(&self, org_id: &str, session_id: &str, placement: &Placement, record: &DispatchRecord) -> StoreResult<()> {
                let mut tx = self.pool.begin().await?;
                Self::write_placement(&mut tx, org_id, session_id, placement, record, true).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn queue_position(&self, org_id: &str, skill: &str, session_id: &str, raised_at: i64) -> StoreResult<i64> {
                Ok(sqlx::query_scalar(
                    "SELECT COUNT(*) FROM sessions \
                     WHERE org_id = $1 AND skill = $2 AND queued_at IS NOT NULL \
                       AND (raised_at < $4 OR (raised_at = $4 AND id <= $3))",
                )
                .bind(org_id).bind(skill).bind(session_id).bind(raised_at)
                .fetch_one(&self.pool).await?)
            }

            async fn requeue_orphans(&self, now: i64) -> StoreResult<u64> {
                let done = sqlx::query(
                    "UPDATE sessions SET queued_at = $1 WHERE lifecycle = 'PENDING' AND queued_at IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.session_id = sessions.id AND o.status = 'open')",
                )
                .bind(now).execute(&self.pool).await?;
                Ok(done.rows_affected())
            }

            async fn oldest_queued_call(&self, org_id: &str, skills: &[String], operator_id: &str) -> StoreResult<Option<QueuedCall>> {
                if skills.is_empty() {
                    return Ok(None);
                }
                let placeholders: Vec<String> = (0..skills.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    "SELECT s.id, s.robot_id, s.skill, s.pop, s.raised_at, r.model, r.site \
                     FROM sessions s JOIN robots r ON r.id = s.robot_id \
                     WHERE s.org_id = $1 AND s.queued_at IS NOT NULL AND s.skill IN ({}) \
                       AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.session_id = s.id AND o.operator_id = $2) \
                     ORDER BY s.raised_at, s.id LIMIT 1",
                    placeholders.join(", ")
                );
                let mut query = sqlx::query(&sql).bind(org_id).bind(operator_id);
                for skill in skills {
                    query = query.bind(skill);
                }
                let Some(row) = query.fetch_optional(&self.pool).await? else { return Ok(None) };
                Ok(Some(QueuedCall {
                    session_id: row.try_get(0)?,
                    robot_id: row.try_get(1)?,
                    skill: row.try_get(2)?,
                    pop: row.try_get(3)?,
                    raised_at: row.try_get(4)?,
                    robot_model: row.try_get(5)?,
                    site: row.try_get(6)?,
                }))
            }

            async fn operators_offered(&self, session_id: &str) -> StoreResult<Vec<String>> {
                Ok(sqlx::query_scalar("SELECT operator_id FROM offers WHERE session_id = $1 ORDER BY offered_at")
                    .bind(session_id).fetch_all(&self.pool).await?)
            }

            async fn open_offers(&self) -> StoreResult<Vec<OpenOfferRow>> {
                let rows = sqlx::query(
                    "SELECT org_id, session_id, operator_id, rtt_ms, offered_at, expires_at FROM offers \
                     WHERE status = 'open' ORDER BY expires_at",
                )
                .fetch_all(&self.pool).await?;
                rows.into_iter()
                    .map(|row| {
                        Ok(OpenOfferRow {
                            org_id: row.try_get(0)?,
                            session_id: row.try_get(1)?,
                            operator_id: row.try_get(2)?,
                            rtt_ms: row.try_get(3)?,
                            offered_at: row.try_get(4)?,
                            expires_at: row.try_get(5)?,
                        })
                    })
                    .collect()
            }

            async fn accept_offer(&self, org_id: &str, session_id: &str, operator_id: &str, now: i64) -> StoreResult<Option<SessionRow>> {
                let mut tx = self.pool.begin().await?;
                let rtt: Option<i64> = sqlx::query_scalar(
                    "UPDATE offers SET status = 'accepted', answered_at = $1 \
                     WHERE org_id = $2 AND session_id = $3 AND operator_id = $4 AND status = 'open' RETURNING rtt_ms",
                )
                .bind(now).bind(org_id).bind(session_id).bind(operator_id)
                .fetch_optional(&mut *tx).await?;
                let Some(rtt) = rtt else { return Ok(None) };
                let region: Option<String> = sqlx::query_scalar(
                    "SELECT region FROM operator_profiles WHERE org_id = $1 AND user_id = $2",
                )
                .bind(org_id).bind(operator_id).fetch_optional(&mut *tx).await?;
                let started = sqlx::query(
                    "UPDATE sessions SET lifecycle = 'ACTIVE', operator_id = $1, operator_region = $2, rtt_ms = $3, started_at = $4 \
                     WHERE id = $5 AND lifecycle = 'PENDING'",
                )
                .bind(operator_id).bind(&region).bind(rtt).bind(now).bind(session_id)
                .execute(&mut *tx).await?;
                if started.rows_affected() != 1 {
                    return Ok(None);
                }
                sqlx::query(
                    "INSERT INTO activity_events (org_id, session_id, kind, at, operator_id) VALUES ($1, $2, 'SESSION_START', $3, $4)",
                )
                .bind(org_id).bind(session_id).bind(now).bind(operator_id)
                .execute(&mut *tx).await?;
                let row = sqlx::query(&format!("{SESSION_SELECT} WHERE s.id = $1"))
                    .bind(session_id).fetch_one(&mut *tx).await?;
                let session = session_from_row!(row);
                tx.commit().await?;
                Ok(Some(session))
            }

            async fn close_offer(&self, session_id: &str, operator_id: &str, status: &str, now: i64) -> StoreResult<bool> {
                let done = sqlx::query(
                    "UPDATE offers SET status = $1, answered_at = $2 WHERE session_id = $3 AND operator_id = $4 AND status = 'open'",
                )
                .bind(status).bind(now).bind(session_id).bind(operator_id)
                .execute(&self.pool).await?;
                Ok(done.rows_affected() == 1)
            }

            async fn end_session(&self, org_id: &str, session_id: &str, to: LifecycleState, reason: &str, now: i64) -> StoreResult<EndOutcome> {
                let mut tx = self.pool.begin().await?;
                let current = sqlx::query("SELECT lifecycle, operator_id FROM sessions WHERE org_id = $1 AND id = $2")
                    .bind(org_id).bind(session_id).fetch_optional(&mut *tx).await?;
                let Some(current) = current else { return Ok(EndOutcome::NotFound) };
                let lifecycle = decode("lifecycle", LifecycleState::parse(current.try_get::<&str, _>(0)?))?;
                if matches!(lifecycle, LifecycleState::Completed | LifecycleState::Cancelled) {
                    return Ok(EndOutcome::AlreadyEnded);
                }
                let attached: Option<String> = current.try_get(1)?;
                let withdrawn_from: Option<String> = sqlx::query_scalar(
                    "UPDATE offers SET status = 'withdrawn', answered_at = $1 WHERE session_id = $2 AND status = 'open' RETURNING operator_id",
                )
                .bind(now).bind(session_id).fetch_optional(&mut *tx).await?;
                sqlx::query("UPDATE sessions SET lifecycle = $1, ended_at = $2, end_reason = $3, queued_at = NULL WHERE id = $4")
                    .bind(to.as_str()).bind(now).bind(reason).bind(session_id)
                    .execute(&mut *tx).await?;
                sqlx::query(
                    "INSERT INTO activity_events (org_id, session_id, kind, at, operator_id, detail) VALUES ($1, $2, 'SESSION_END', $3, $4, $5)",
                )
                .bind(org_id).bind(session_id).bind(now).bind(&attached).bind(format!("{} · {reason}", to.as_str()))
                .execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(EndOutcome::Ended { operator_id: attached, withdrawn_from })
            }

            async fn session(&self, org_id: &str, session_id: &str) -> StoreResult<Option<SessionRow>> {
                let row = sqlx::query(&format!("{SESSION_SELECT} WHERE s.org_id = $1 AND s.id = $2"))
                    .bind(org_id).bind(session_id).fetch_optional(&self.pool).await?;
                Ok(match row {
                    Some(row) => Some(session_from_row!(row)),
                    None => None,
                })
            }

            async fn apply_telemetry(&self, org_id: &str, session_id: &str, t: Telemetry, now: i64) -> StoreResult<TelemetryOutcome> {
                let mut tx = self.pool.begin().await?;
                let current = sqlx::query("SELECT lifecycle, safety_state, robot_id FROM sessions WHERE org_id = $1 AND id = $2")
                    .bind(org_id).bind(session_id).fetch_optional(&mut *tx).await?;
                let Some(current) = current else { return Ok(TelemetryOutcome::NotFound) };
                let lifecycle = decode("lifecycle", LifecycleState::parse(current.try_get::<&str, _>(0)?))?;
                let safety = decode("safety state", SafetyState::parse(current.try_get::<&str, _>(1)?))?;
                let robot_id: String = current.try_get(2)?;
                if matches!(lifecycle, LifecycleState::Completed | LifecycleState::Cancelled) {
                    return Ok(TelemetryOutcome::Ended);
                }
                if safety == SafetyState::ProtectiveStop && t.state != SafetyState::ProtectiveStop {
                    return Ok(TelemetryOutcome::Latched);
                }
                sqlx::query(
                    "UPDATE sessions SET safety_state = $1, rtt_ms = $2, divergence_deg = $3, velocity_scale = $4 WHERE id = $5",
                )
                .bind(t.state.as_str()).bind(i64::from(t.rtt_ms)).bind(t.divergence_deg).bind(t.velocity_scale).bind(session_id)
                .execute(&mut *tx).await?;
                let entered = t.state == SafetyState::ProtectiveStop && safety != SafetyState::ProtectiveStop;
                if entered {
                    sqlx::query(
                        "INSERT INTO audit_records (org_id, at, actor_kind, actor_id, action, session_id, robot_id, detail) \
                         VALUES ($1, $2, 'robot', $3, 'protective_stop', $4, $3, $5)",
                    )
                    .bind(org_id).bind(now).bind(&robot_id).bind(session_id)
                    .bind(format!("entered PROTECTIVE_STOP from {}", safety.as_str()))
                    .execute(&mut *tx).await?;
                }
                let row = sqlx::query(&format!("{SESSION_SELECT} WHERE s.id = $1"))
                    .bind(session_id).fetch_one(&mut *tx).await?;
                let row = session_from_row!(row);
                tx.commit().await?;
                Ok(TelemetryOutcome::Applied { row, entered_protective_stop: entered })
            }

            async fn dispatch_records(&self, session_id: &str) -> StoreResult<Vec<DispatchRecordRow>> {
                let rows = sqlx::query(
                    "SELECT trigger, pool_source, outcome, operator_id, rtt_ms, candidates FROM dispatch_records \
                     WHERE session_id = $1 ORDER BY id",
                )
                .bind(session_id).fetch_all(&self.pool).await?;
                rows.into_iter()
                    .map(|row| {
                        Ok(DispatchRecordRow {
                            trigger: row.try_get(0)?,
                            pool_source: row.try_get(1)?,
                            outcome: row.try_get(2)?,
                            operator_id: row.try_get(3)?,
                            rtt_ms: row.try_get(4)?,
                            candidates: row.try_get(5)?,
                        })
                    })
                    .collect()
            }

            async fn activity_events(&self, session_id: &str) -> StoreResult<Vec<(String, Option<String>)>> {
                Ok(sqlx::query_as("SELECT kind, operator_id FROM activity_events WHERE session_id = $1 ORDER BY id")
                    .bind(session_id).fetch_all(&self.pool).await?)
            }

            async fn audit_actions(&self, org_id: &str) -> StoreResult<Vec<(String, Option<String>)>> {
                Ok(sqlx::query_as("SELECT action, session_id FROM audit_records WHERE org_id = $1 ORDER BY id")
                    .bind(org_id).fetch_all(&self.pool).await?)
            }
        }
    };
}

/// Names each store's sqlx database type, so one macro body fits both.
pub trait StoreDb {
    type Db: sqlx::Database;
}
impl StoreDb for SqliteStore {
    type Db = sqlx::Sqlite;
}
impl StoreDb for PgStore {
    type Db = sqlx::Postgres;
}

dispatch_store!(SqliteStore);
dispatch_store!(PgStore);
