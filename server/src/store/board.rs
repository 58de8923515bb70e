//! What the live screens read in one go: the org's live sessions, its
//! recent audit records and its queue. (The engine holds presences.)

use super::dispatch::SESSION_SELECT;
use super::sql::{PgStore, SqliteStore};
use super::{SessionRow, StoreResult};
use domain::events::{ActorKind, AuditAction, AuditEntry};
use async_trait::async_trait;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AuditRow {
    pub at: i64,
    #[sqlx(try_from = "String")]
    pub actor_kind: ActorKind,
    pub actor_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub action: AuditAction,
    pub session_id: Option<String>,
    pub robot_id: Option<String>,
    pub detail: Option<String>,
}

impl From<AuditRow> for AuditEntry {
    fn from(r: AuditRow) -> AuditEntry {
        AuditEntry {
            at_ms: r.at,
            actor_kind: r.actor_kind,
            actor_id: r.actor_id,
            action: r.action,
            session_id: r.session_id,
            robot_id: r.robot_id,
            detail: r.detail,
        }
    }
}

/// Calls waiting for one skill.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct QueueDepthRow {
    pub skill: String,
    pub waiting: i64,
    pub oldest_raised_at: i64,
}

/// Calls raised since a moment: how fast they were answered.
#[derive(Clone, Debug, Default, PartialEq, sqlx::FromRow)]
pub struct AnswerSpeedRow {
    pub answered: Option<i64>,
    pub answer_ms_total: Option<i64>,
    pub within_20s: Option<i64>,
    pub withdrawn: Option<i64>,
    pub abandoned: Option<i64>,
}

#[async_trait]
pub trait BoardStore: Send + Sync {
    /// ACTIVE and PAUSED sessions of the org.
    async fn live_sessions(&self, org_id: &str) -> StoreResult<Vec<SessionRow>>;
    /// The org's audit records at or after `since`, newest first, at most `limit`.
    async fn recent_audit(&self, org_id: &str, since: i64, limit: i64) -> StoreResult<Vec<AuditRow>>;
    /// Queued calls per skill.
    async fn queue_depths(&self, org_id: &str) -> StoreResult<Vec<QueueDepthRow>>;
    /// Calls raised at or after `since`: answered, total answer time, answered
    /// within `domain::board::PROMPT_ANSWER_MS`, withdrawn while waiting.
    async fn answer_speed(&self, org_id: &str, since: i64) -> StoreResult<AnswerSpeedRow>;
    /// Calls raised at or after `since` and answered, of skills with an RTT
    /// ceiling: their skill, raise and the time of the offer they were
    /// answered on (rule A17), one row a call.
    async fn answered_offers(&self, org_id: &str, since: i64) -> StoreResult<Vec<(String, i64, i64)>>;
    /// Writes an audit record of the org.
    async fn record_audit(&self, org_id: &str, entry: &AuditEntry) -> StoreResult<()>;
}

// The board's reads of open sessions say "open" as rule D09's index does
// (`open_lifecycle!`), and walk it: SQLite has no other index of sessions
// by state (sqlite/0023; test
// `tests/dispatch.rs`, `the_desk_and_the_board_read_open_sessions_only`).

/// The org's calls in progress, by their start.
pub static LIVE_BOARD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        concat!("{} WHERE s.org_id = $1 AND s.lifecycle IN ('ACTIVE', 'PAUSED') AND s.", open_lifecycle!(), " ORDER BY s.started_at, s.id"),
        SESSION_SELECT
    )
});

/// The org's answer speed since `$2` (`$3` the end reason of calls nobody
/// took, `$4` the prompt-answer threshold), by the org's day index.
pub const ANSWER_SPEED: &str = "SELECT \
       CAST(SUM(CASE WHEN started_at IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS answered, \
       CAST(SUM(CASE WHEN started_at IS NOT NULL THEN started_at - raised_at ELSE 0 END) AS BIGINT) AS answer_ms_total, \
       CAST(SUM(CASE WHEN started_at IS NOT NULL AND started_at - raised_at <= $4 THEN 1 ELSE 0 END) AS BIGINT) AS within_20s, \
       CAST(SUM(CASE WHEN started_at IS NULL AND lifecycle = 'CANCELLED' AND COALESCE(end_reason, '') <> $3 THEN 1 ELSE 0 END) AS BIGINT) AS withdrawn, \
       CAST(SUM(CASE WHEN started_at IS NULL AND lifecycle = 'CANCELLED' AND end_reason = $3 THEN 1 ELSE 0 END) AS BIGINT) AS abandoned \
     FROM sessions WHERE org_id = $1 AND raised_at >= $2";

/// Queued calls per skill.
pub const QUEUE_DEPTHS: &str = concat!(
    "SELECT skill, COUNT(*) AS waiting, MIN(raised_at) AS oldest_raised_at FROM sessions WHERE org_id = $1 AND lifecycle = 'PENDING' AND ",
    open_lifecycle!(),
    " AND queued_at IS NOT NULL GROUP BY skill ORDER BY skill",
);

/// An audit record's insert, bound: `record_audit`'s, and that of an
/// episode's entry, written with its row (store/datasets.rs).
macro_rules! insert_audit_record {
    ($org_id:expr, $e:expr) => {
        sqlx::query(
            "INSERT INTO audit_records (org_id, at, actor_kind, actor_id, action, session_id, robot_id, detail) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind($org_id).bind($e.at_ms).bind($e.actor_kind.as_str()).bind(&$e.actor_id).bind($e.action.as_str())
        .bind(&$e.session_id).bind(&$e.robot_id).bind(&$e.detail)
    };
}
pub(super) use insert_audit_record;

macro_rules! board_store {
    ($store:ident) => {
        #[async_trait]
        impl BoardStore for $store {
            async fn live_sessions(&self, org_id: &str) -> StoreResult<Vec<SessionRow>> {
                Ok(sqlx::query_as(LIVE_BOARD.as_str())
                    .bind(org_id).fetch_all(&self.pool).await?)
            }

            async fn recent_audit(&self, org_id: &str, since: i64, limit: i64) -> StoreResult<Vec<AuditRow>> {
                Ok(sqlx::query_as(
                    "SELECT at, actor_kind, actor_id, action, session_id, robot_id, detail FROM audit_records \
                     WHERE org_id = $1 AND at >= $2 ORDER BY at DESC, id DESC LIMIT $3",
                )
                .bind(org_id).bind(since).bind(limit).fetch_all(&self.pool).await?)
            }

            async fn queue_depths(&self, org_id: &str) -> StoreResult<Vec<QueueDepthRow>> {
                Ok(sqlx::query_as(QUEUE_DEPTHS)
                .bind(org_id).fetch_all(&self.pool).await?)
            }

            async fn answer_speed(&self, org_id: &str, since: i64) -> StoreResult<AnswerSpeedRow> {
                Ok(sqlx::query_as(ANSWER_SPEED)
                // The prompt-answer threshold is the board's rule, bound here, not written in the SQL.
                .bind(org_id).bind(since).bind(domain::lifecycle::NOBODY_TOOK_IT).bind(domain::board::PROMPT_ANSWER_MS)
                .fetch_one(&self.pool).await?)
            }

            async fn answered_offers(&self, org_id: &str, since: i64) -> StoreResult<Vec<(String, i64, i64)>> {
                // The offer a call was answered on is its first accepted one
                // (a handover is accepted later, on the same session); only
                // skills with a ceiling are split, so only theirs are read.
                Ok(sqlx::query_as(
                    "SELECT s.skill, s.raised_at, MIN(o.offered_at) FROM sessions s \
                     JOIN org_rtt_ceilings c ON c.org_id = s.org_id AND c.skill = s.skill \
                     JOIN offers o ON o.session_id = s.id \
                     WHERE s.org_id = $1 AND s.raised_at >= $2 AND s.started_at IS NOT NULL AND o.status = $3 \
                     GROUP BY s.id, s.skill, s.raised_at",
                )
                .bind(org_id).bind(since).bind(domain::dispatch::OfferStatus::Accepted.as_str())
                .fetch_all(&self.pool).await?)
            }

            async fn record_audit(&self, org_id: &str, e: &AuditEntry) -> StoreResult<()> {
                insert_audit_record!(org_id, e).execute(&self.pool).await?;
                Ok(())
            }
        }
    };
}

board_store!(SqliteStore);
board_store!(PgStore);
