//! Persistence. One `Store` trait, implemented for SQLite (the embedded
//! default) and PostgreSQL (scale-out) over the same SQL text; each backend
//! keeps its own migrations under `server/migrations/<backend>/`.

/// A session that is open (rule D09: PENDING, ACTIVE or PAUSED), as SQLite
/// says it: not in one of the two closed states. SQLite evaluates an `IN`
/// list of three values or more by building a temporary b-tree of it each
/// time a statement runs; two are compared one by one. Its index of open
/// sessions says it so (migration sqlite/0022), and a read must repeat that
/// condition for SQLite to take the index.
macro_rules! open_lifecycle {
    () => {
        "lifecycle NOT IN ('COMPLETED', 'CANCELLED')"
    };
}

/// A read of open sessions, in both spellings: PostgreSQL's index of open
/// sessions is written as the list of open states (postgres/0017) and
/// serves a read whose condition implies its own, SQLite's as
/// `open_lifecycle!` (0022) and serves a read that repeats it. (PostgreSQL's
/// index stays a list: written "not closed", a read of the org's live
/// sessions, `IN ('ACTIVE', 'PAUSED')`, implies it too, and a plan made on
/// an empty table took it for that read, walking every org's open sessions.)
macro_rules! open_lifecycle_read {
    () => {
        concat!("lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED') AND ", open_lifecycle!())
    };
}

mod board;
mod booking;
mod chat;
mod datasets;
mod directory;
mod dispatch;
mod event_log;
mod floors;
mod integrations;
mod journal;
mod limits;
#[cfg(test)]
mod migration_rules;
mod places;
mod people;
mod rating;
mod safety;
mod sql;
mod sqlite_writer;
#[cfg(test)]
mod sqlite_rebuild_tests;
mod writes;

pub use board::{AnswerSpeedRow, AuditRow, BoardStore, QueueDepthRow};
pub use booking::{BookingJudge, BookingRow, BookingStore, BookingsSeen, Extension, ExtensionJudge, NewBooking};
pub use datasets::{DatasetStore, EpisodeRow, NewEpisode};
pub use dispatch::{ActivityRow, DispatchStore, Heartbeat, SessionState};
pub use event_log::{EventLogStore, LogRow, Logged};
pub use integrations::{ApiKeyRow, DeliveryRow, IntegrationStore, NewKeyRow, NewWebhookRow, WebhookRow};
pub use chat::{ChatRow, ChatStore};
pub use directory::{DirectoryStore, RobotChange, RobotFields};
pub use floors::{FloorChange, FloorStore};
pub use limits::LimitStore;
pub use places::PlaceStore;
pub use people::{AcceptOutcome, Acceptance, InvitationRecord, InviteOutcome, MemberChange, MemberRecord, NewInvitation, PeopleStore, PendingInvitation, ProfileEdit};
pub use rating::{RatingRow, RatingStore, ScoreRow};
pub use safety::{SafetyChange, SafetyStore};
pub use journal::{
    AnsweredOfferRow, DispatchRecord, DispatchRecordRow, LiveSessionRow, NewOffer, NewSession, OpenOfferRow, Lease,
    HeldElsewhereRow, OrgSnapshot, PendingCallRow, SessionRow, Telemetry, TelemetryOutcome, Write,
};
pub use sql::{pg_options, PgStore, SqliteStore, ABANDONED_TRANSACTION_AFTER};

/// The reads whose plans the integration tests check (`tests/dispatch.rs`
/// on both backends, `tests/cluster/store.rs` on PostgreSQL): the store's own
/// texts, so a test cannot plan a copy the store no longer runs.
pub mod planned_reads {
    pub use super::board::{ANSWER_SPEED, LIVE_BOARD, QUEUE_DEPTHS};
    pub use super::booking::{client_sessions_read, BOOKED_SESSION_OF_ROBOT};
    pub use super::dispatch::{ANSWERED_OF_ORG, LIVE_OF_ORG, OPEN_OFFERS_OF_ORG, OPEN_SESSION_OF_ROBOT, PENDING_OF_ORG, SESSION_BY_ID};
}

use domain::models::{LinkFloor, Role};
use async_trait::async_trait;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("bad database url: {0}")]
    Url(String),
    /// The org was taken over (its epoch moved on): this instance's batch
    /// is refused, and it dispatches the org no longer (rule D13).
    #[error("this instance no longer holds the org's dispatch lease")]
    Fenced,
    /// A writer of batches failed: SQLite's batch writer (its own
    /// connection, outside sqlx), or the heartbeats' group writer (one
    /// error told to every heartbeat of the group, as its text).
    #[error("database error: {0}")]
    Writer(String),
    /// The database did not answer within a bound (a network cut, a lock
    /// held): the caller may retry (HTTP 503 `unavailable`).
    #[error("the database did not answer {0}")]
    Unanswered(String),
    /// A cluster-wide place's take whose COMMIT went unanswered, and whose
    /// take-back failed too: the place may be held (`PlaceStore::take_place`).
    #[error("database error: {0}")]
    PlaceUnsure(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct UserRecord {
    pub id: String,
    pub email: String,
    pub display_name: String,
    pub external_id: Option<String>,
    pub password_hash: String,
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RobotRecord {
    pub id: String,
    pub org_id: String,
    pub model: String,
    pub site: String,
    pub pop: String,
    pub req_cert: String,
    pub last_heartbeat_at: Option<i64>,
    /// When the bearer token was last rotated (selected where shown).
    #[sqlx(default)]
    pub token_rotated_at: Option<i64>,
}

impl RobotRecord {
    /// Whether `other` has the same directory fields (what an admin edits),
    /// whatever the two say of heartbeats and rotations.
    pub fn same_directory_fields(&self, other: &RobotRecord) -> bool {
        (&self.model, &self.site, &self.pop, &self.req_cert) == (&other.model, &other.site, &other.pop, &other.req_cert)
    }
}

#[derive(Clone, Debug)]
pub struct OperatorRecord {
    pub user_id: String,
    pub display_name: String,
    pub email: String,
    pub external_id: Option<String>,
    pub role: Role,
    pub region: String,
    pub certifications: Vec<String>,
    /// An inactive operator is never dispatched to.
    pub active: bool,
    /// A member of another org too: in cluster mode the desks tell other
    /// instances when they ring them (rule D10, `engine/busy.rs`).
    pub in_other_orgs: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembershipRecord {
    pub org_id: String,
    pub org_name: String,
    pub role: Role,
}

impl From<MembershipRecord> for domain::models::OrgMembership {
    fn from(m: MembershipRecord) -> Self {
        domain::models::OrgMembership { org_id: m.org_id, org_name: m.org_name, role: m.role }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct WebSessionRecord {
    pub user_id: String,
    pub org_id: Option<String>,
    pub expires_at: i64,
}

/// Everything a first start (or a test) creates, written in one transaction.
#[derive(Clone, Debug, Default)]
pub struct Seed {
    pub orgs: Vec<NewOrg>,
    pub users: Vec<NewUser>,
    pub memberships: Vec<NewMembership>,
    pub operator_profiles: Vec<NewOperatorProfile>,
    pub robots: Vec<NewRobot>,
    pub link_floors: Vec<LinkFloor>,
}

#[derive(Clone, Debug)]
pub struct NewOrg {
    pub id: String,
    pub name: String,
}

#[derive(Clone, Debug)]
pub struct NewUser {
    pub id: String,
    pub email: String,
    pub display_name: String,
    pub external_id: Option<String>,
    pub password_hash: String,
}

#[derive(Clone, Debug)]
pub struct NewMembership {
    pub org_id: String,
    pub user_id: String,
    pub role: Role,
}

#[derive(Clone, Debug)]
pub struct NewOperatorProfile {
    pub org_id: String,
    pub user_id: String,
    pub region: String,
    pub certifications: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct NewRobot {
    pub id: String,
    pub org_id: String,
    pub model: String,
    pub site: String,
    pub pop: String,
    pub req_cert: String,
    /// SHA-256 hex of the robot's bearer token; the token itself is never stored.
    pub token_hash: String,
}

/// Everything persisted. The ACD's calls, offers and queue are in
/// `DispatchStore` (store/dispatch.rs).
#[async_trait]
pub trait Store: DispatchStore + EventLogStore + IntegrationStore + BoardStore + BookingStore + DirectoryStore + DatasetStore + PeopleStore + FloorStore + SafetyStore + ChatStore + RatingStore + LimitStore + PlaceStore + Send + Sync + 'static {
    /// `sqlite` or `postgres`, for logs and /healthz.
    fn backend_name(&self) -> &'static str;
    /// A round trip to the database.
    async fn ping(&self) -> StoreResult<()>;
    /// Keeps the tables every call writes fit for its statements where the
    /// database does not (PostgreSQL with autovacuum off: their dead row
    /// versions and missing statistics made each cycle slower than the
    /// last). True when it did anything.
    async fn maintain(&self) -> StoreResult<bool>;
    /// True when no org exists yet: the only state in which the demo is seeded.
    async fn is_empty(&self) -> StoreResult<bool>;
    /// Writes a whole seed atomically.
    async fn seed(&self, seed: &Seed) -> StoreResult<()>;

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<UserRecord>>;
    async fn user_by_id(&self, user_id: &str) -> StoreResult<Option<UserRecord>>;
    /// Orgs the user belongs to, by org name.
    async fn memberships(&self, user_id: &str) -> StoreResult<Vec<MembershipRecord>>;
    /// The org the user joined first: where a fresh sign-in starts.
    async fn home_org(&self, user_id: &str) -> StoreResult<Option<String>>;
    async fn org_name(&self, org_id: &str) -> StoreResult<Option<String>>;

    async fn create_web_session(&self, token_hash: &str, user_id: &str, org_id: Option<&str>, now: i64, expires_at: i64) -> StoreResult<()>;
    async fn web_session(&self, token_hash: &str) -> StoreResult<Option<WebSessionRecord>>;
    /// The role a live sign-in holds in the org it has selected: one round
    /// trip, for sockets that re-check on every command.
    async fn signed_in_role(&self, token_hash: &str, org_id: &str, now: i64) -> StoreResult<Option<Role>>;
    async fn set_web_session_org(&self, token_hash: &str, org_id: &str) -> StoreResult<()>;
    async fn delete_web_session(&self, token_hash: &str) -> StoreResult<()>;
    /// Sets the user's password and ends every other sign-in of theirs (all
    /// but `keep`), in one transaction; returns the ended sign-ins.
    async fn change_password(&self, user_id: &str, password_hash: &str, keep: &str) -> StoreResult<Vec<String>>;
    /// Removes sessions past their expiry; returns how many.
    async fn delete_expired_web_sessions(&self, now: i64) -> StoreResult<u64>;

    /// The org's robots, by id.
    async fn robots(&self, org_id: &str) -> StoreResult<Vec<RobotRecord>>;
    /// The org's robots with their token hashes (the registry's memory);
    /// with no org, every org's, in one read.
    async fn robots_with_token(&self, org_id: Option<&str>) -> StoreResult<Vec<(RobotRecord, String)>>;
    /// A robot of this org; `None` for an unknown id or another org's robot.
    async fn robot(&self, org_id: &str, robot_id: &str) -> StoreResult<Option<RobotRecord>>;
    /// The org's operators (members with an operator profile), by name.
    async fn operators(&self, org_id: &str) -> StoreResult<Vec<OperatorRecord>>;
    async fn operator(&self, org_id: &str, user_id: &str) -> StoreResult<Option<OperatorRecord>>;
    async fn link_floors(&self) -> StoreResult<Vec<LinkFloor>>;
    /// Registers a robot; false when the id is taken.
    async fn insert_robot(&self, robot: &NewRobot) -> StoreResult<bool>;
}

pub type SharedStore = Arc<dyn Store>;

/// Opens (creating and migrating as needed) the store `url` names:
/// `postgres://…` / `postgresql://…` for PostgreSQL, `sqlite://…` for SQLite.
pub async fn connect(url: &str) -> StoreResult<SharedStore> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else {
        // Only the scheme: the rest of a URL may hold a password.
        let scheme = url.split(':').next().unwrap_or_default();
        Err(StoreError::Url(format!("unsupported scheme {scheme:?}: expected postgres://… or sqlite://…")))
    }
}

/// For unit tests: one column (`opcode`, `p2`, `detail`) of each row of
/// SQLite's `EXPLAIN` or `EXPLAIN QUERY PLAN` (`explain`), as text, run
/// unbound: a program or a plan does not depend on the values bound.
#[cfg(test)]
pub(crate) fn explained(connection: &rusqlite::Connection, explain: &str, column: &str) -> Vec<String> {
    use rusqlite::types::ValueRef;
    let mut statement = connection.prepare(explain).unwrap();
    let mut rows = statement.raw_query();
    let mut values = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        values.push(match row.get_ref(column).unwrap() {
            ValueRef::Integer(number) => number.to_string(),
            value => value.as_str().unwrap().to_string(),
        });
    }
    values
}

/// For unit tests: a migrated SQLite store (`sqlite_with_a_robot`) in a
/// temporary directory, and a connection of the test's own to its file,
/// foreign keys on as the store's are, to read SQLite's programs and plans
/// (`explained`). Keep the directory and the store while reading.
#[cfg(test)]
pub(crate) async fn sqlite_to_explain() -> (tempfile::TempDir, SharedStore, rusqlite::Connection) {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_with_a_robot(dir.path()).await;
    let connection = rusqlite::Connection::open(dir.path().join("clutchcall.db")).unwrap();
    connection.pragma_update(None, "foreign_keys", "ON").unwrap();
    (dir, store, connection)
}

/// For unit tests: an SQLite store in `dir` holding the org `org` and its
/// robot `r-1` (a UR5e for pick-place at Leeds, token hash `hash-1`).
#[cfg(test)]
pub(crate) async fn sqlite_with_a_robot(dir: &std::path::Path) -> SharedStore {
    let store = connect(&format!("sqlite://{}", dir.join("clutchcall.db").display())).await.unwrap();
    let robot = NewRobot {
        id: "r-1".into(), org_id: "org".into(), model: "UR5e".into(), site: "Leeds".into(), pop: "uk-london".into(),
        req_cert: "pick-place · tier-1".into(), token_hash: "hash-1".into(),
    };
    store.seed(&Seed { orgs: vec![NewOrg { id: "org".into(), name: "Org".into() }], robots: vec![robot], ..Seed::default() }).await.unwrap();
    store
}
