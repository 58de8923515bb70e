//! The two SQL stores. Their queries are one text: `$N` placeholders, which
//! both SQLite and PostgreSQL accept through sqlx, and types both map alike
//! (TEXT ↔ String, INTEGER/BIGINT ↔ i64, REAL/DOUBLE ↔ f64). `sql_store!`
//! writes the `Store` impl once for each pool type.

use super::journal::Lease;
use super::{
    MembershipRecord, NewRobot, OperatorRecord, RobotRecord, Seed, Store, StoreError, StoreResult,
    UserRecord, WebSessionRecord,
};
use domain::models::{LinkFloor, Role};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Row;
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    /// Applies the engine's batches (sqlite_writer.rs).
    pub(super) writer: super::sqlite_writer::Writer,
}

impl SqliteStore {
    /// Opens the SQLite file (creating it), in WAL mode, and migrates it.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // The batch writer's checkpointer thread checkpoints (sqlite_writer.rs).
            .pragma("wal_autocheckpoint", "0");
        // No ping before each use (sqlx's default): on SQLite it is one more
        // hop to the connection's thread per statement, and a file does not
        // drop connections.
        let pool = SqlitePoolOptions::new().max_connections(8).test_before_acquire(false).connect_with(options.clone()).await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        if url.contains(":memory:") || url.contains("mode=memory") {
            return Err(StoreError::Url("an in-memory SQLite database cannot be shared with the batch writer: name a file".into()));
        }
        let writer = super::sqlite_writer::Writer::open(options.get_filename())?;
        Ok(SqliteStore { pool, writer })
    }
}

pub struct PgStore {
    pub(super) pool: PgPool,
}

impl PgStore {
    /// Connects to PostgreSQL and migrates the database. Migrations take an
    /// advisory lock, so several instances may start at once.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        // No ping before each use (sqlx's default): it is one more round
        // trip per statement. A connection the server dropped fails its next
        // statement instead, and the pool replaces it (the dispatcher answers
        // that batch 503 and reloads).
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(pg_options(url)?)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(PgStore { pool })
    }
}

/// A transaction this server leaves open this long between two statements
/// is ended by PostgreSQL (`idle_in_transaction_session_timeout`). Ours run
/// their statements back to back, so only an instance that vanished in the
/// middle of one (its host gone, its network cut: nothing tells PostgreSQL)
/// leaves one open, and the rows it locked (a heartbeat group's robots, a
/// member's rows) would hold up the instance that takes its orgs over. Not
/// longer than a lease (`engine::lease`): they are free again about when
/// the vanished owner's lease lapses (within a renewal interval of it).
pub const ABANDONED_TRANSACTION_AFTER: Duration = Duration::from_secs(3);

/// How this server opens a PostgreSQL connection to `url`.
pub fn pg_options(url: &str) -> StoreResult<PgConnectOptions> {
    let after = format!("{}ms", ABANDONED_TRANSACTION_AFTER.as_millis());
    Ok(PgConnectOptions::from_str(url)?.options([("idle_in_transaction_session_timeout", after)]))
}

pub(super) fn role_of(text: &str) -> StoreResult<Role> {
    Role::parse(text).ok_or_else(|| StoreError::Database(sqlx::Error::Decode(format!("unknown role {text:?}").into())))
}

/// Groups `(user_id, certification)` rows by user.
pub(super) fn certifications_by_user(rows: Vec<(String, String)>) -> HashMap<String, Vec<String>> {
    let mut by_user: HashMap<String, Vec<String>> = HashMap::new();
    for (user_id, cert) in rows {
        by_user.entry(user_id).or_default().push(cert);
    }
    by_user
}

/// An operator profile row, before its certifications are attached.
#[derive(sqlx::FromRow)]
struct OperatorRow {
    id: String,
    display_name: String,
    email: String,
    external_id: Option<String>,
    role: String,
    region: String,
    active: i64,
    in_other_orgs: i64,
}

impl OperatorRow {
    fn record(self, certifications: Vec<String>) -> StoreResult<OperatorRecord> {
        Ok(OperatorRecord {
            role: role_of(&self.role)?,
            user_id: self.id,
            display_name: self.display_name,
            email: self.email,
            external_id: self.external_id,
            region: self.region,
            certifications,
            active: self.active != 0,
            in_other_orgs: self.in_other_orgs != 0,
        })
    }
}

// A client's membership never operates, whatever profile it kept.
const OPERATOR_COLUMNS: &str = "SELECT u.id, u.display_name, u.email, u.external_id, m.role, p.region, p.active, \
     CAST(CASE WHEN EXISTS (SELECT 1 FROM memberships o WHERE o.user_id = u.id AND o.org_id <> m.org_id) THEN 1 ELSE 0 END AS BIGINT) AS in_other_orgs \
     FROM operator_profiles p \
     JOIN users u ON u.id = p.user_id \
     JOIN memberships m ON m.org_id = p.org_id AND m.user_id = p.user_id AND m.role <> 'client'";

macro_rules! sql_store {
    ($store:ident, $name:literal) => {
        #[async_trait]
        impl Store for $store {
            fn backend_name(&self) -> &'static str {
                $name
            }

            async fn ping(&self) -> StoreResult<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn maintain(&self) -> StoreResult<bool> {
                <Self as StoreDb>::maintain(&self.pool).await
            }

            async fn is_empty(&self) -> StoreResult<bool> {
                let orgs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orgs").fetch_one(&self.pool).await?;
                Ok(orgs == 0)
            }

            async fn seed(&self, seed: &Seed) -> StoreResult<()> {
                let now = crate::clock::now_ms();
                let mut tx = self.pool.begin().await?;
                for org in &seed.orgs {
                    sqlx::query("INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3)")
                        .bind(&org.id).bind(&org.name).bind(now)
                        .execute(&mut *tx).await?;
                }
                for user in &seed.users {
                    sqlx::query(
                        "INSERT INTO users (id, email, display_name, external_id, password_hash, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(&user.id).bind(domain::rules::normalize_email(&user.email)).bind(&user.display_name)
                    .bind(&user.external_id).bind(&user.password_hash).bind(now)
                    .execute(&mut *tx).await?;
                }
                // Seed order is join order: later memberships join a millisecond later.
                for (joined, m) in (now..).zip(&seed.memberships) {
                    sqlx::query("INSERT INTO memberships (org_id, user_id, role, joined_at) VALUES ($1, $2, $3, $4)")
                        .bind(&m.org_id).bind(&m.user_id).bind(m.role.as_str()).bind(joined)
                        .execute(&mut *tx).await?;
                }
                for p in &seed.operator_profiles {
                    sqlx::query("INSERT INTO operator_profiles (org_id, user_id, region) VALUES ($1, $2, $3)")
                        .bind(&p.org_id).bind(&p.user_id).bind(&p.region)
                        .execute(&mut *tx).await?;
                    for cert in &p.certifications {
                        sqlx::query(
                            "INSERT INTO operator_certifications (org_id, user_id, certification) VALUES ($1, $2, $3)",
                        )
                        .bind(&p.org_id).bind(&p.user_id).bind(cert)
                        .execute(&mut *tx).await?;
                    }
                }
                for r in &seed.robots {
                    sqlx::query(
                        "INSERT INTO robots (id, org_id, model, site, pop, req_cert, token_hash, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(&r.id).bind(&r.org_id).bind(&r.model).bind(&r.site).bind(&r.pop)
                    .bind(&r.req_cert).bind(&r.token_hash).bind(now)
                    .execute(&mut *tx).await?;
                }
                for f in &seed.link_floors {
                    sqlx::query(
                        "INSERT INTO link_floors (region, pop, floor_ms, note) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (region, pop) DO UPDATE SET floor_ms = excluded.floor_ms, note = excluded.note",
                    )
                    .bind(&f.region).bind(&f.pop).bind(i64::from(f.floor_ms)).bind(&f.note)
                    .execute(&mut *tx).await?;
                }
                // Every org starts from the default floors, then edits its own.
                sqlx::query(
                    "INSERT INTO org_link_floors (org_id, region, pop, floor_ms, note) \
                     SELECT o.id, f.region, f.pop, f.floor_ms, f.note FROM orgs o CROSS JOIN link_floors f \
                     WHERE NOT EXISTS (SELECT 1 FROM org_link_floors e WHERE e.org_id = o.id)",
                )
                .execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn user_by_email(&self, email: &str) -> StoreResult<Option<UserRecord>> {
                Ok(sqlx::query_as::<_, UserRecord>(
                    "SELECT id, email, display_name, external_id, password_hash FROM users WHERE email = $1",
                )
                .bind(domain::rules::normalize_email(email))
                .fetch_optional(&self.pool).await?)
            }

            async fn user_by_id(&self, user_id: &str) -> StoreResult<Option<UserRecord>> {
                Ok(sqlx::query_as::<_, UserRecord>(
                    "SELECT id, email, display_name, external_id, password_hash FROM users WHERE id = $1",
                )
                .bind(user_id)
                .fetch_optional(&self.pool).await?)
            }

            async fn memberships(&self, user_id: &str) -> StoreResult<Vec<MembershipRecord>> {
                let rows: Vec<(String, String, String)> = sqlx::query_as(
                    "SELECT o.id, o.name, m.role FROM memberships m JOIN orgs o ON o.id = m.org_id \
                     WHERE m.user_id = $1 ORDER BY o.name, o.id",
                )
                .bind(user_id)
                .fetch_all(&self.pool).await?;
                rows.into_iter()
                    .map(|(org_id, org_name, role)| Ok(MembershipRecord { org_id, org_name, role: role_of(&role)? }))
                    .collect()
            }

            async fn home_org(&self, user_id: &str) -> StoreResult<Option<String>> {
                Ok(sqlx::query_scalar(
                    "SELECT org_id FROM memberships WHERE user_id = $1 ORDER BY joined_at, org_id LIMIT 1",
                )
                .bind(user_id).fetch_optional(&self.pool).await?)
            }

            async fn org_name(&self, org_id: &str) -> StoreResult<Option<String>> {
                Ok(sqlx::query_scalar("SELECT name FROM orgs WHERE id = $1")
                    .bind(org_id).fetch_optional(&self.pool).await?)
            }

            async fn create_web_session(&self, token_hash: &str, user_id: &str, org_id: Option<&str>, now: i64, expires_at: i64) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO web_sessions (token_hash, user_id, org_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(token_hash).bind(user_id).bind(org_id).bind(now).bind(expires_at)
                .execute(&self.pool).await?;
                Ok(())
            }

            async fn web_session(&self, token_hash: &str) -> StoreResult<Option<WebSessionRecord>> {
                Ok(sqlx::query_as("SELECT user_id, org_id, expires_at FROM web_sessions WHERE token_hash = $1")
                    .bind(token_hash).fetch_optional(&self.pool).await?)
            }

            async fn signed_in_role(&self, token_hash: &str, org_id: &str, now: i64) -> StoreResult<Option<Role>> {
                let role: Option<String> = sqlx::query_scalar(
                    "SELECT m.role FROM web_sessions w JOIN memberships m ON m.user_id = w.user_id AND m.org_id = w.org_id \
                     WHERE w.token_hash = $1 AND w.org_id = $2 AND w.expires_at > $3",
                )
                .bind(token_hash).bind(org_id).bind(now).fetch_optional(&self.pool).await?;
                role.map(|r| role_of(&r)).transpose()
            }

            async fn set_web_session_org(&self, token_hash: &str, org_id: &str) -> StoreResult<()> {
                sqlx::query("UPDATE web_sessions SET org_id = $1 WHERE token_hash = $2")
                    .bind(org_id).bind(token_hash).execute(&self.pool).await?;
                Ok(())
            }

            async fn delete_web_session(&self, token_hash: &str) -> StoreResult<()> {
                sqlx::query("DELETE FROM web_sessions WHERE token_hash = $1")
                    .bind(token_hash).execute(&self.pool).await?;
                Ok(())
            }

            async fn change_password(&self, user_id: &str, password_hash: &str, keep: &str) -> StoreResult<Vec<String>> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
                    .bind(password_hash).bind(user_id).execute(&mut *tx).await?;
                let ended: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM web_sessions WHERE user_id = $1 AND token_hash <> $2")
                    .bind(user_id).bind(keep).fetch_all(&mut *tx).await?;
                sqlx::query("DELETE FROM web_sessions WHERE user_id = $1 AND token_hash <> $2")
                    .bind(user_id).bind(keep).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(ended)
            }

            async fn delete_expired_web_sessions(&self, now: i64) -> StoreResult<u64> {
                let done = sqlx::query("DELETE FROM web_sessions WHERE expires_at <= $1")
                    .bind(now).execute(&self.pool).await?;
                Ok(done.rows_affected())
            }

            async fn robots(&self, org_id: &str) -> StoreResult<Vec<RobotRecord>> {
                Ok(sqlx::query_as::<_, RobotRecord>(
                    "SELECT id, org_id, model, site, pop, req_cert, last_heartbeat_at, token_rotated_at FROM robots \
                     WHERE org_id = $1 AND retired_at IS NULL ORDER BY id",
                )
                .bind(org_id).fetch_all(&self.pool).await?)
            }

            async fn robots_with_token(&self, org_id: Option<&str>) -> StoreResult<Vec<(RobotRecord, String)>> {
                const LIVE: &str = "SELECT id, org_id, model, site, pop, req_cert, last_heartbeat_at, token_hash FROM robots WHERE retired_at IS NULL";
                let rows = match org_id {
                    Some(org_id) => sqlx::query(&format!("{LIVE} AND org_id = $1 ORDER BY id")).bind(org_id).fetch_all(&self.pool).await?,
                    None => sqlx::query(&format!("{LIVE} ORDER BY org_id, id")).fetch_all(&self.pool).await?,
                };
                rows.into_iter()
                    .map(|row| {
                        use sqlx::FromRow;
                        Ok((RobotRecord::from_row(&row)?, row.try_get("token_hash")?))
                    })
                    .collect()
            }

            async fn robot(&self, org_id: &str, robot_id: &str) -> StoreResult<Option<RobotRecord>> {
                Ok(sqlx::query_as::<_, RobotRecord>(
                    "SELECT id, org_id, model, site, pop, req_cert, last_heartbeat_at, token_rotated_at FROM robots \
                     WHERE org_id = $1 AND id = $2 AND retired_at IS NULL",
                )
                .bind(org_id).bind(robot_id).fetch_optional(&self.pool).await?)
            }

            async fn operators(&self, org_id: &str) -> StoreResult<Vec<OperatorRecord>> {
                let rows: Vec<OperatorRow> = sqlx::query_as(&format!(
                    "{OPERATOR_COLUMNS} WHERE p.org_id = $1 ORDER BY u.display_name, u.id"
                ))
                .bind(org_id).fetch_all(&self.pool).await?;
                let certs: Vec<(String, String)> = sqlx::query_as(
                    "SELECT user_id, certification FROM operator_certifications WHERE org_id = $1 ORDER BY certification",
                )
                .bind(org_id).fetch_all(&self.pool).await?;
                let mut certs = certifications_by_user(certs);
                rows.into_iter()
                    .map(|row| {
                        let certifications = certs.remove(&row.id).unwrap_or_default();
                        row.record(certifications)
                    })
                    .collect()
            }

            async fn operator(&self, org_id: &str, user_id: &str) -> StoreResult<Option<OperatorRecord>> {
                let Some(row) = sqlx::query_as::<_, OperatorRow>(&format!("{OPERATOR_COLUMNS} WHERE p.org_id = $1 AND p.user_id = $2"))
                    .bind(org_id).bind(user_id).fetch_optional(&self.pool).await?
                else {
                    return Ok(None);
                };
                let certifications: Vec<String> = sqlx::query_scalar(
                    "SELECT certification FROM operator_certifications WHERE org_id = $1 AND user_id = $2 ORDER BY certification",
                )
                .bind(org_id).bind(user_id).fetch_all(&self.pool).await?;
                row.record(certifications).map(Some)
            }

            async fn insert_robot(&self, r: &NewRobot) -> StoreResult<bool> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let at = crate::clock::now_ms();
                let done = sqlx::query(
                    "INSERT INTO robots (id, org_id, model, site, pop, req_cert, token_hash, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (org_id, id) DO NOTHING",
                )
                .bind(&r.id).bind(&r.org_id).bind(&r.model).bind(&r.site).bind(&r.pop)
                .bind(&r.req_cert).bind(&r.token_hash).bind(at)
                .execute(&mut *tx).await?;
                if done.rows_affected() != 1 {
                    return Ok(false);
                }
                let event = domain::event_log::LogEvent::RobotRegistered(domain::event_log::RobotRegistered {
                    model: r.model.clone(),
                    site: r.site.clone(),
                    pop: r.pop.clone(),
                    req_cert: r.req_cert.clone(),
                });
                Self::log_event(&mut tx, super::Logged { org_id: &r.org_id, at, session_id: None, robot_id: Some(&r.id), event }).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn link_floors(&self) -> StoreResult<Vec<LinkFloor>> {
                let rows: Vec<(String, String, i64, Option<String>)> =
                    sqlx::query_as("SELECT region, pop, floor_ms, note FROM link_floors ORDER BY region, pop")
                        .fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|(region, pop, floor_ms, note)| LinkFloor { region, pop, floor_ms: u32::try_from(floor_ms).unwrap_or(u32::MAX), note })
                    .collect())
            }
        }
    };
}

sql_store!(SqliteStore, "sqlite");
sql_store!(PgStore, "postgres");

/// What differs between the backends under one SQL text: how a writing
/// transaction begins, and how an org's dispatch lock is taken.
#[async_trait]
pub trait StoreDb {
    type Db: sqlx::Database;
    async fn begin_write(pool: &sqlx::Pool<Self::Db>) -> StoreResult<sqlx::Transaction<'static, Self::Db>>;
    async fn take_lease(pool: &sqlx::Pool<Self::Db>, org_id: &str, owner: &str, ttl_ms: i64, stepped_down: i64) -> StoreResult<Option<Lease>>;
    async fn renew_lease(pool: &sqlx::Pool<Self::Db>, lease: &Lease, ttl_ms: i64) -> StoreResult<bool>;
    async fn release_lease(pool: &sqlx::Pool<Self::Db>, lease: &Lease) -> StoreResult<()>;
    async fn cluster_id(pool: &sqlx::Pool<Self::Db>) -> StoreResult<String>;
    async fn current_epoch(pool: &sqlx::Pool<Self::Db>, org_id: &str) -> StoreResult<Option<i64>>;
    async fn maintain(pool: &sqlx::Pool<Self::Db>) -> StoreResult<bool>;
    /// Holds `key` until `tx` ends, against every other transaction asking
    /// for it (on SQLite a write transaction already holds everything).
    async fn hold(tx: &mut sqlx::Transaction<'static, Self::Db>, key: &str) -> StoreResult<()>;
}

#[async_trait]
impl StoreDb for SqliteStore {
    type Db = sqlx::Sqlite;

    async fn begin_write(pool: &sqlx::SqlitePool) -> StoreResult<sqlx::Transaction<'static, sqlx::Sqlite>> {
        // Take the write lock up front: a deferred transaction that reads
        // first can fail with SQLITE_BUSY_SNAPSHOT when it tries to write.
        Ok(pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    // An SQLite file belongs to one process, which holds every org: its
    // leases are never contended and need no table.
    async fn take_lease(_pool: &sqlx::SqlitePool, org_id: &str, _owner: &str, _ttl_ms: i64, _stepped_down: i64) -> StoreResult<Option<Lease>> {
        Ok(Some(Lease { org_id: org_id.to_string(), epoch: 1 }))
    }

    async fn renew_lease(_pool: &sqlx::SqlitePool, _lease: &Lease, _ttl_ms: i64) -> StoreResult<bool> {
        Ok(true)
    }

    async fn release_lease(_pool: &sqlx::SqlitePool, _lease: &Lease) -> StoreResult<()> {
        Ok(())
    }

    // No cluster: NATS is refused with SQLite.
    async fn cluster_id(_pool: &sqlx::SqlitePool) -> StoreResult<String> {
        Ok("local".into())
    }

    async fn current_epoch(_pool: &sqlx::SqlitePool, _org_id: &str) -> StoreResult<Option<i64>> {
        Ok(Some(1))
    }

    // `begin_write` took SQLite's one write lock.
    async fn hold(_tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>, _key: &str) -> StoreResult<()> {
        Ok(())
    }

    // Rows change in place; the checkpointer keeps the WAL short.
    async fn maintain(_pool: &sqlx::SqlitePool) -> StoreResult<bool> {
        Ok(false)
    }
}

/// The database's clock in Unix ms: lease times never depend on an
/// instance's own clock.
pub(super) const PG_NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
/// SQLite's, for what both stores time the same way (store/places.rs).
pub(super) const SQLITE_NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

#[async_trait]
impl StoreDb for PgStore {
    type Db = sqlx::Postgres;

    async fn begin_write(pool: &sqlx::PgPool) -> StoreResult<sqlx::Transaction<'static, sqlx::Postgres>> {
        Ok(pool.begin().await?)
    }

    async fn take_lease(pool: &sqlx::PgPool, org_id: &str, owner: &str, ttl_ms: i64, stepped_down: i64) -> StoreResult<Option<Lease>> {
        // A new epoch on every take. Another run of the same instance
        // (same name, another boot) is gone: its port is ours now. This
        // run takes back only a lease it stepped down from: an ask of its
        // own that the network held past its timeout, arriving after a
        // later ask took the lease, would fence the lease it holds.
        let epoch: Option<i64> = sqlx::query_scalar(&format!(
            "INSERT INTO org_leases AS l (org_id, owner, epoch, expires_at) VALUES ($1, $2, 1, {PG_NOW_MS} + $3) \
             ON CONFLICT (org_id) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1, expires_at = excluded.expires_at \
             WHERE l.expires_at < {PG_NOW_MS} \
                OR (split_part(l.owner, '/', 1) = split_part(excluded.owner, '/', 1) AND l.owner <> excluded.owner) \
                OR (l.owner = excluded.owner AND l.epoch <= $4) \
             RETURNING epoch"
        ))
        .bind(org_id).bind(owner).bind(ttl_ms).bind(stepped_down).fetch_optional(pool).await?;
        Ok(epoch.map(|epoch| Lease { org_id: org_id.to_string(), epoch }))
    }

    async fn renew_lease(pool: &sqlx::PgPool, lease: &Lease, ttl_ms: i64) -> StoreResult<bool> {
        // A lapsed lease is lost even if nobody took it yet: its owner may
        // have been paused past it, and loads the org afresh if it takes it again.
        let renewed = sqlx::query(&format!("UPDATE org_leases SET expires_at = {PG_NOW_MS} + $3 WHERE org_id = $1 AND epoch = $2 AND expires_at >= {PG_NOW_MS}"))
            .bind(&lease.org_id).bind(lease.epoch).bind(ttl_ms).execute(pool).await?;
        Ok(renewed.rows_affected() == 1)
    }

    async fn release_lease(pool: &sqlx::PgPool, lease: &Lease) -> StoreResult<()> {
        sqlx::query("UPDATE org_leases SET expires_at = 0 WHERE org_id = $1 AND epoch = $2").bind(&lease.org_id).bind(lease.epoch).execute(pool).await?;
        Ok(())
    }

    async fn cluster_id(pool: &sqlx::PgPool) -> StoreResult<String> {
        Ok(sqlx::query_scalar("SELECT id FROM cluster_identity").fetch_one(pool).await?)
    }

    // A transaction-level advisory lock on the key's 64-bit hash: keys
    // that share a hash wait for each other, which only costs a wait.
    async fn hold(tx: &mut sqlx::Transaction<'static, sqlx::Postgres>, key: &str) -> StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))").bind(key).execute(&mut **tx).await?;
        Ok(())
    }

    async fn current_epoch(pool: &sqlx::PgPool, org_id: &str) -> StoreResult<Option<i64>> {
        let sql = format!("SELECT epoch FROM org_leases WHERE org_id = $1 AND expires_at >= {PG_NOW_MS}");
        Ok(sqlx::query_scalar(&sql).bind(org_id).fetch_optional(pool).await?)
    }

    async fn maintain(pool: &sqlx::PgPool) -> StoreResult<bool> {
        // Autovacuum on (PostgreSQL's default) does this by itself.
        let autovacuum: String = sqlx::query_scalar("SELECT current_setting('autovacuum')").fetch_one(pool).await?;
        if autovacuum == "on" {
            return Ok(false);
        }
        // Autovacuum's rule with a 2 % scale factor on every table (as
        // migration 0017 set on the call tables): a table with more changed
        // or dead rows than 50 + 2 % of its live ones is vacuumed and
        // analyzed. Dead versions go, statistics come, and the plans each
        // connection cached (the batch function's, the foreign-key checks')
        // are made again with them: plans made while a table was nearly
        // empty scan it whole. One instance at a time (an advisory lock); a
        // table another statement has locked is left for the next round
        // (SKIP_LOCKED), and one that fails does not hold up the others.
        // Never in a transaction (VACUUM refuses).
        // Only when a table is due does it take the lock, which ends with
        // its connection: closed when dropped, never returned to the pool
        // (also when the task is stopped half-way through).
        let due: Vec<String> = sqlx::query_scalar(
            "SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables WHERE relname <> '_sqlx_migrations' \
             AND (n_mod_since_analyze > 50 + 0.02 * n_live_tup OR n_dead_tup > 50 + 0.02 * n_live_tup) ORDER BY relname",
        )
        .fetch_all(pool)
        .await?;
        if due.is_empty() {
            return Ok(true);
        }
        let mut conn = pool.acquire().await?;
        conn.close_on_drop();
        let mine: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtext('clutchcall.maintain'))").fetch_one(&mut *conn).await?;
        if !mine {
            return Ok(true);
        }
        for table in &due {
            if let Err(e) = sqlx::query(&format!("VACUUM (ANALYZE, SKIP_LOCKED) {table}")).execute(&mut *conn).await {
                tracing::warn!(table, error = %e, "a table could not be vacuumed");
            }
        }
        Ok(true)
    }
}
