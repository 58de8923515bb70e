//! Storage of calls: sessions, offers, the queue, dispatch records,
//! telemetry. The engine keeps the live picture in memory and hands the
//! store one journal of writes per batch (`commit`), applied in a single
//! transaction; the database's unique indexes still guard the invariants.

use super::journal::{
    decode, DispatchRecordRow, OpenOfferRow, Lease, OrgSnapshot, SessionRow, Telemetry, TelemetryOutcome, Write,
};
use super::sql::{PgStore, SqliteStore, StoreDb};
use super::StoreResult;
use domain::lifecycle::telemetry_allowed;
use domain::models::{LifecycleState, SafetyState};
use async_trait::async_trait;

/// An edge agent's heartbeat: robot `robot_id` of `org_id` was heard at `at`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Heartbeat {
    pub org_id: String,
    pub robot_id: String,
    pub at: i64,
}

/// A session known by its id alone (`DispatchStore::session_state`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionState {
    pub org_id: String,
    pub lifecycle: LifecycleState,
    pub ended_at: Option<i64>,
}

#[async_trait]
pub trait DispatchStore: Send + Sync {
    async fn robot_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<super::RobotRecord>>;
    /// Stores edge-agent heartbeats, all in one transaction (a group
    /// made by `services::heartbeats`): each robot's at most once.
    async fn record_heartbeats(&self, beats: Vec<Heartbeat>) -> StoreResult<()>;
    /// The robot's PENDING, ACTIVE or PAUSED session, if any.
    async fn live_session_for_robot(&self, org_id: &str, robot_id: &str) -> StoreResult<Option<String>>;

    async fn org_ids(&self) -> StoreResult<Vec<String>>;
    async fn org_snapshot(&self, org_id: &str) -> StoreResult<OrgSnapshot>;
    /// Takes the org's dispatch lease for `owner` (`instance/boot`) when
    /// nobody holds it unexpired, its holder is another run of the same
    /// instance, or it is this run's own lease of an epoch no newer than
    /// `stepped_down` (the newest the asking dispatcher stepped down from
    /// and did not give up; 0 for none):
    /// the lease with its new epoch, else `None`. (A newer lease of this
    /// run's was taken by a later ask: an earlier ask that the network
    /// held must not fence it.)
    async fn take_lease(&self, org_id: &str, owner: &str, ttl_ms: i64, stepped_down: i64) -> StoreResult<Option<Lease>>;
    /// Extends the lease by `ttl_ms` from now; false when the org has been
    /// taken over meanwhile.
    async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> StoreResult<bool>;
    /// Gives the lease up (a clean stop), so another instance may take it at once.
    async fn release_lease(&self, lease: &Lease) -> StoreResult<()>;
    /// The epoch of the org's unexpired lease: which owner to forward to.
    async fn current_epoch(&self, org_id: &str) -> StoreResult<Option<i64>>;
    /// The database's cluster id (migration 0014): what the instances on
    /// it put in front of their NATS subjects.
    async fn cluster_id(&self) -> StoreResult<String>;
    /// Applies one batch's writes in one transaction (SQLite: `BEGIN
    /// IMMEDIATE`, so it never fails half-way on a stale snapshot), after
    /// checking in it that `lease` still holds the org (`StoreError::Fenced`
    /// otherwise). A write that finds the database other than the engine
    /// believed fails the whole batch.
    async fn commit(&self, lease: &Lease, writes: Vec<Write>) -> StoreResult<()> {
        self.commit_reading(lease, writes, Vec::new()).await.map(drop)
    }
    /// As `commit`, answering with the rows of the lease's org's sessions
    /// `read_back` names as the batch left them, where the store reads them
    /// in the batch at no cost to the batches after it (SQLite: on the
    /// writer's connection, whose pages are cached, before the commit). A
    /// store that does not (PostgreSQL) answers none, and its caller reads
    /// them after the commit.
    async fn commit_reading(&self, lease: &Lease, writes: Vec<Write>, read_back: Vec<String>) -> StoreResult<Vec<SessionRow>>;
    /// Whether a commit runs on the calling thread, holding it for the
    /// whole batch (SQLite's writer), rather than awaiting the database:
    /// the engine then runs its dispatchers on a thread of their own.
    fn commits_on_caller(&self) -> bool;

    async fn open_offers(&self) -> StoreResult<Vec<OpenOfferRow>>;
    async fn session(&self, org_id: &str, session_id: &str) -> StoreResult<Option<SessionRow>>;
    /// A session known only by its id (a recording's parts are named for
    /// the session alone): its org, where it is in its lifecycle, and when it ended.
    async fn session_state(&self, session_id: &str) -> StoreResult<Option<SessionState>>;
    async fn apply_telemetry(&self, org_id: &str, session_id: &str, telemetry: Telemetry, now: i64) -> StoreResult<TelemetryOutcome>;

    /// The call's dispatch decisions, oldest first.
    async fn dispatch_records(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<DispatchRecordRow>>;
    /// The session's activity log, oldest first.
    async fn activity_log(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<ActivityRow>>;
    /// `(kind, operator_id)` in order.
    async fn activity_events(&self, session_id: &str) -> StoreResult<Vec<(String, Option<String>)>>;
    /// `(action, session_id)` of the org's audit records, oldest first.
    async fn audit_actions(&self, org_id: &str) -> StoreResult<Vec<(String, Option<String>)>>;
}

/// One activity event as stored.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ActivityRow {
    pub at: i64,
    pub kind: String,
    pub operator_id: Option<String>,
    pub operator_name: Option<String>,
    pub detail: Option<String>,
}

impl ActivityRow {
    pub fn entry(self) -> StoreResult<domain::lifecycle::ActivityEntry> {
        Ok(domain::lifecycle::ActivityEntry {
            at_ms: self.at,
            kind: decode("activity kind", domain::lifecycle::ActivityKind::parse(&self.kind))?,
            operator_id: self.operator_id,
            operator_name: self.operator_name,
            detail: self.detail,
        })
    }
}

pub(super) const SESSION_SELECT: &str = "SELECT s.id, s.org_id, s.robot_id, r.model AS robot_model, r.site, s.pop, s.skill, s.lifecycle, \
     s.safety_state, s.operator_id, u.display_name AS operator_name, s.operator_region, s.rtt_ms, s.divergence_deg, \
     s.velocity_scale, s.raised_at, s.started_at, s.ended_at, s.client_id, c.display_name AS client_name, s.planned_end_at, s.booking_id \
     FROM sessions s JOIN robots r ON r.org_id = s.org_id AND r.id = s.robot_id LEFT JOIN users u ON u.id = s.operator_id \
     LEFT JOIN users c ON c.id = s.client_id";

/// One session of an org by id: `$1` the org, `$2` the session.
pub static SESSION_BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("{SESSION_SELECT} WHERE s.org_id = $1 AND s.id = $2"));

/// The robot's call in progress, if any (rule D09: one at most), by the
/// index of open sessions (test `tests/dispatch.rs`, `a_robots_call_in_progress_is_read_through_open_sessions_only`).
pub const OPEN_SESSION_OF_ROBOT: &str = concat!("SELECT id FROM sessions WHERE org_id = $1 AND robot_id = $2 AND ", open_lifecycle_read!());

// A desk's load (rule D11). The reads of open sessions say "open" as rule
// D09's index does (`open_lifecycle!`), and walk it: SQLite has no other
// index of sessions by state (sqlite/0023; test
// `tests/dispatch.rs`, `the_desk_and_the_board_read_open_sessions_only`,
// on both backends).

/// The org's calls waiting for an operator, oldest first.
pub const PENDING_OF_ORG: &str = concat!(
    "SELECT s.id AS session_id, s.robot_id, r.model AS robot_model, r.site, s.skill, s.pop, s.raised_at, s.queued_at, \
     s.client_id, s.booking_id, s.planned_end_at \
     FROM sessions s JOIN robots r ON r.org_id = s.org_id AND r.id = s.robot_id \
     WHERE s.org_id = $1 AND s.lifecycle = 'PENDING' AND s.",
    open_lifecycle!(),
    " ORDER BY s.raised_at, s.id",
);

/// The org's open offers, through the index of open offers (of every org,
/// at most one an operator).
pub const OPEN_OFFERS_OF_ORG: &str =
    "SELECT org_id, session_id, operator_id, rtt_ms, offered_at, expires_at FROM offers WHERE org_id = $1 AND status = 'open'";

/// The answers (declined, expired) to the org's waiting calls. An offer is
/// of its session's org: the org is named on the session, whose open ones
/// are indexed.
pub const ANSWERED_OF_ORG: &str = concat!(
    "SELECT o.session_id, o.operator_id, o.answered_at FROM sessions s JOIN offers o ON o.session_id = s.id \
     WHERE s.org_id = $1 AND s.lifecycle = 'PENDING' AND s.",
    open_lifecycle!(),
    " AND o.org_id = $1 AND o.status IN ('declined', 'expired') AND o.answered_at IS NOT NULL",
);

/// The org's calls in progress.
pub const LIVE_OF_ORG: &str = concat!(
    "SELECT s.id AS session_id, s.robot_id, r.model AS robot_model, r.site, s.skill, s.pop, s.operator_id, s.lifecycle, s.planned_end_at, s.booking_id \
     FROM sessions s JOIN robots r ON r.org_id = s.org_id AND r.id = s.robot_id \
     WHERE s.org_id = $1 AND s.lifecycle IN ('ACTIVE', 'PAUSED') AND s.",
    open_lifecycle!(),
);

const ROBOT_SELECT: &str = "SELECT id, org_id, model, site, pop, req_cert, last_heartbeat_at FROM robots";

macro_rules! dispatch_store {
    ($store:ident) => {
        #[async_trait]
        impl DispatchStore for $store {
            async fn robot_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<super::RobotRecord>> {
                Ok(sqlx::query_as(&format!("{ROBOT_SELECT} WHERE token_hash = $1 AND retired_at IS NULL"))
                    .bind(token_hash).fetch_optional(&self.pool).await?)
            }

            async fn record_heartbeats(&self, mut beats: Vec<Heartbeat>) -> StoreResult<()> {
                beats.sort();
                self.write_heartbeats(&beats).await
            }

            async fn live_session_for_robot(&self, org_id: &str, robot_id: &str) -> StoreResult<Option<String>> {
                Ok(sqlx::query_scalar(OPEN_SESSION_OF_ROBOT).bind(org_id).bind(robot_id).fetch_optional(&self.pool).await?)
            }

            async fn org_ids(&self) -> StoreResult<Vec<String>> {
                Ok(sqlx::query_scalar("SELECT id FROM orgs ORDER BY id").fetch_all(&self.pool).await?)
            }

            async fn org_snapshot(&self, org_id: &str) -> StoreResult<OrgSnapshot> {
                let operators = super::Store::operators(self, org_id).await?;
                let pending = sqlx::query_as(PENDING_OF_ORG)
                .bind(org_id).fetch_all(&self.pool).await?;
                let open_offers = sqlx::query_as(OPEN_OFFERS_OF_ORG)
                .bind(org_id).fetch_all(&self.pool).await?;
                let answered = sqlx::query_as(ANSWERED_OF_ORG)
                .bind(org_id).fetch_all(&self.pool).await?;
                let live = sqlx::query_as(LIVE_OF_ORG)
                .bind(org_id).fetch_all(&self.pool).await?;
                let held_elsewhere = sqlx::query_as(
                    "SELECT o.operator_id, o.org_id, o.expires_at FROM offers o \
                     JOIN memberships m ON m.user_id = o.operator_id AND m.org_id = $1 \
                     WHERE o.status = 'open' AND o.org_id <> $1",
                )
                .bind(org_id).fetch_all(&self.pool).await?;
                Ok(OrgSnapshot { operators, pending, open_offers, answered, live, held_elsewhere })
            }

            async fn take_lease(&self, org_id: &str, owner: &str, ttl_ms: i64, stepped_down: i64) -> StoreResult<Option<Lease>> {
                <Self as StoreDb>::take_lease(&self.pool, org_id, owner, ttl_ms, stepped_down).await
            }

            async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> StoreResult<bool> {
                <Self as StoreDb>::renew_lease(&self.pool, lease, ttl_ms).await
            }

            async fn release_lease(&self, lease: &Lease) -> StoreResult<()> {
                <Self as StoreDb>::release_lease(&self.pool, lease).await
            }

            async fn current_epoch(&self, org_id: &str) -> StoreResult<Option<i64>> {
                <Self as StoreDb>::current_epoch(&self.pool, org_id).await
            }

            async fn cluster_id(&self) -> StoreResult<String> {
                <Self as StoreDb>::cluster_id(&self.pool).await
            }

            async fn commit_reading(&self, lease: &Lease, writes: Vec<Write>, read_back: Vec<String>) -> StoreResult<Vec<SessionRow>> {
                self.commit_batch(lease, writes, read_back).await
            }

            fn commits_on_caller(&self) -> bool {
                Self::COMMITS_ON_CALLER
            }

            async fn open_offers(&self) -> StoreResult<Vec<OpenOfferRow>> {
                Ok(sqlx::query_as(
                    "SELECT org_id, session_id, operator_id, rtt_ms, offered_at, expires_at FROM offers \
                     WHERE status = 'open' ORDER BY expires_at",
                )
                .fetch_all(&self.pool).await?)
            }

            async fn session(&self, org_id: &str, session_id: &str) -> StoreResult<Option<SessionRow>> {
                Ok(sqlx::query_as(SESSION_BY_ID.as_str())
                    .bind(org_id).bind(session_id).fetch_optional(&self.pool).await?)
            }

            async fn session_state(&self, session_id: &str) -> StoreResult<Option<SessionState>> {
                let row: Option<(String, String, Option<i64>)> = sqlx::query_as("SELECT org_id, lifecycle, ended_at FROM sessions WHERE id = $1")
                    .bind(session_id).fetch_optional(&self.pool).await?;
                row.map(|(org_id, lifecycle, ended_at)| Ok(SessionState { org_id, lifecycle: decode("lifecycle", LifecycleState::parse(&lifecycle))?, ended_at }))
                    .transpose()
            }

            async fn apply_telemetry(&self, org_id: &str, session_id: &str, t: Telemetry, now: i64) -> StoreResult<TelemetryOutcome> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(current) = sqlx::query_as::<_, SessionRow>(SESSION_BY_ID.as_str())
                    .bind(org_id).bind(session_id).fetch_optional(&mut *tx).await?
                else {
                    return Ok(TelemetryOutcome::NotFound);
                };
                if current.lifecycle()?.is_terminal() {
                    return Ok(TelemetryOutcome::Ended);
                }
                let safety = current.safety()?;
                if !telemetry_allowed(safety, t.state) {
                    return Ok(TelemetryOutcome::Latched);
                }
                sqlx::query(
                    "UPDATE sessions SET safety_state = $1, rtt_ms = $2, divergence_deg = $3, velocity_scale = $4 WHERE id = $5",
                )
                .bind(t.state.as_str()).bind(i64::from(t.rtt_ms)).bind(t.divergence_deg).bind(t.velocity_scale).bind(session_id)
                .execute(&mut *tx).await?;
                if t.state != safety {
                    sqlx::query("INSERT INTO safety_transitions (org_id, session_id, at, from_state, to_state) VALUES ($1, $2, $3, $4, $5)")
                        .bind(org_id).bind(session_id).bind(now).bind(safety.as_str()).bind(t.state.as_str())
                        .execute(&mut *tx).await?;
                    let event = domain::event_log::LogEvent::safety(safety, t.state);
                    Self::log_event(&mut tx, super::Logged { org_id, at: now, session_id: Some(session_id), robot_id: Some(&current.robot_id), event }).await?;
                }
                let entered = t.state == SafetyState::ProtectiveStop && safety != SafetyState::ProtectiveStop;
                if entered {
                    sqlx::query(
                        "INSERT INTO audit_records (org_id, at, actor_kind, actor_id, action, session_id, robot_id, detail) \
                         VALUES ($1, $2, $6, $3, $7, $4, $3, $5)",
                    )
                    .bind(org_id).bind(now).bind(&current.robot_id).bind(session_id)
                    .bind(format!("entered PROTECTIVE_STOP from {}", safety.as_str()))
                    .bind(domain::events::ActorKind::Robot.as_str()).bind(domain::events::AuditAction::ProtectiveStop.as_str())
                    .execute(&mut *tx).await?;
                }
                let row = sqlx::query_as(&format!("{SESSION_SELECT} WHERE s.id = $1")).bind(session_id).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                Ok(TelemetryOutcome::Applied { row, entered_protective_stop: entered })
            }

            async fn dispatch_records(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<DispatchRecordRow>> {
                Ok(sqlx::query_as(
                    "SELECT at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates FROM dispatch_records \
                     WHERE org_id = $1 AND session_id = $2 ORDER BY id",
                )
                .bind(org_id).bind(session_id).fetch_all(&self.pool).await?)
            }

            async fn activity_log(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<ActivityRow>> {
                Ok(sqlx::query_as(
                    "SELECT a.at, a.kind, a.operator_id, u.display_name AS operator_name, a.detail FROM activity_events a \
                     LEFT JOIN users u ON u.id = a.operator_id WHERE a.org_id = $1 AND a.session_id = $2 ORDER BY a.id",
                )
                .bind(org_id).bind(session_id).fetch_all(&self.pool).await?)
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

dispatch_store!(SqliteStore);
dispatch_store!(PgStore);

impl SqliteStore {
    const COMMITS_ON_CALLER: bool = true;

    /// The batch writer applies the whole batch on this thread and reads
    /// back the lease's org's sessions asked for (sqlite_writer.rs). One
    /// process holds every org of an SQLite file: there is no epoch to check.
    async fn commit_batch(&self, lease: &Lease, writes: Vec<Write>, read_back: Vec<String>) -> StoreResult<Vec<SessionRow>> {
        self.writer.commit(&writes, &lease.org_id, &read_back)
    }

    /// By the batch writer, between two batches (sqlite_writer.rs).
    async fn write_heartbeats(&self, beats: &[Heartbeat]) -> StoreResult<()> {
        // `[[org, robot, at], …]`, for the statement's `json_each`.
        let group: Vec<(&str, &str, i64)> = beats.iter().map(|b| (b.org_id.as_str(), b.robot_id.as_str(), b.at)).collect();
        let group = serde_json::to_string(&group).map_err(|e| super::StoreError::Writer(format!("the heartbeats could not be written as JSON: {e}")))?;
        self.writer.write_heartbeats(group).await
    }
}

impl PgStore {
    const COMMITS_ON_CALLER: bool = false;

    /// One round trip: the batch's statements go, in order and as JSON, to
    /// the function of migration 0016, which checks the lease and applies
    /// them in the call's own transaction.
    ///
    /// Nothing is read back: a read in the batch (a second round trip, or
    /// in the function) holds the dispatcher's next batch back by it, where
    /// the caller's own read after the answer runs beside it; measured
    /// three ways, each with fewer full cycles, up to a fifth (BENCHMARKS.md,
    /// Engine v3 fifth part).
    async fn commit_batch(&self, lease: &Lease, writes: Vec<Write>, _read_back: Vec<String>) -> StoreResult<Vec<SessionRow>> {
        let steps = super::writes::as_json(&writes);
        let done = sqlx::query("SELECT clutchcall_commit_batch($1, $2, $3::jsonb)")
            .bind(&lease.org_id).bind(lease.epoch).bind(steps)
            .execute(&self.pool).await;
        match done {
            Ok(_) => Ok(Vec::new()),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("CC001") => {
                crate::metrics::batch_fenced();
                Err(super::StoreError::Fenced)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// One transaction, two statements whatever the group's size: the
    /// robots' rows are locked first, in their order (every instance's
    /// group locks them so, and two groups sharing robots never wait on
    /// each other in a circle, which an UPDATE's join order would not
    /// promise), then updated. A robot's time never goes back.
    async fn write_heartbeats(&self, beats: &[Heartbeat]) -> StoreResult<()> {
        let org_ids: Vec<&str> = beats.iter().map(|b| b.org_id.as_str()).collect();
        let robot_ids: Vec<&str> = beats.iter().map(|b| b.robot_id.as_str()).collect();
        let ats: Vec<i64> = beats.iter().map(|b| b.at).collect();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "SELECT 1 FROM robots WHERE (org_id, id) IN (SELECT u.org_id, u.id FROM unnest($1::text[], $2::text[]) AS u(org_id, id)) \
             ORDER BY org_id, id FOR NO KEY UPDATE",
        )
        .bind(&org_ids).bind(&robot_ids).execute(&mut *tx).await?;
        sqlx::query(
            "UPDATE robots r SET last_heartbeat_at = GREATEST(r.last_heartbeat_at, b.at) \
             FROM unnest($1::text[], $2::text[], $3::bigint[]) AS b(org_id, robot_id, at) \
             WHERE r.org_id = b.org_id AND r.id = b.robot_id",
        )
        .bind(&org_ids).bind(&robot_ids).bind(&ats).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }
}
