//! SQLite's batch writer. One write connection applies a whole batch
//! (`BEGIN IMMEDIATE … COMMIT`, statements prepared once and cached) on the
//! thread that commits it: the engine's dispatch thread (engine/thread.rs),
//! so a batch costs no hop to another thread and back. Through sqlx every
//! statement would be a round trip to its connection's worker thread: two
//! thread hops each, ~17 a cycle, which is where most of a cycle's time
//! went (BENCHMARKS.md, Engine v3); a writer thread of its own still cost
//! two hops a batch (the thirteenth part).
//!
//! A batch may name sessions to read back: their rows, as the batch left
//! them, are read in its transaction after its writes (this connection has
//! the pages cached; a pool reader, whose cache every write empties, would
//! read them from the WAL again) and answered with the commit.
//!
//! Only the engine's journal and the edge agents' heartbeats (in groups)
//! go this way; everything else still writes through the sqlx pool, and
//! SQLite's own lock (with a busy timeout on both sides) orders the two.
//!
//! Checkpoints (copying the WAL back into the database file, with its
//! fsync) run on a thread of their own, every `CHECKPOINT_EVERY`: left to
//! SQLite, the commit that crosses 1,000 WAL pages runs one and holds its
//! batch (and every call in it) for the fsync. The connections opened here
//! and the pool's never checkpoint by themselves (`wal_autocheckpoint = 0`,
//! sql.rs). A checkpoint that does not wait (PASSIVE) stops at the oldest
//! snapshot a reader holds, and under steady reads and writes some reader
//! always holds one: the WAL was never rewound and grew by ~100 KB a call
//! (3 GB in a 40 s run), each read searching a larger WAL index. Once the
//! WAL holds `RESTART_FRAMES`, the checkpointer takes the batch writer's
//! connection between two batches, waits for those readers and rewinds the
//! WAL (RESTART), holding new writers back for that moment only.

use super::dispatch::SESSION_BY_ID;
use super::journal::{SessionRow, Write};
use super::writes::{batch, Value};
use super::{StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use parking_lot::Mutex;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A group of heartbeats, `[[org, robot, at], …]`, in one statement. A
/// robot's time never goes back: a group written after a later one (two
/// instances) leaves the later heartbeat.
const HEARTBEATS: &str = "UPDATE robots SET last_heartbeat_at = max(coalesce(last_heartbeat_at, b.at), b.at) \
     FROM (SELECT value ->> 0 AS org_id, value ->> 1 AS robot_id, value ->> 2 AS at FROM json_each(?1)) AS b \
     WHERE robots.org_id = b.org_id AND robots.id = b.robot_id";

/// How often the checkpointer copies the WAL into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// WAL frames (pages) past which the checkpointer rewinds the WAL.
const RESTART_FRAMES: i64 = 2_000;
/// How long a rewind waits for readers to leave the WAL.
const RESTART_WAITS_AT_MOST: Duration = Duration::from_millis(50);

pub(super) struct Writer {
    /// Taken by one batch at a time (the dispatch thread's), by a group of
    /// heartbeats, and by the checkpointer for a rewind. Whoever holds it
    /// may wait there for a pool writer's transaction (SQLite's busy
    /// timeout), and the dispatch thread with it, as for any batch.
    /// parking_lot's lock is eventually fair: a rewind waiting for it gets
    /// it after a batch or two, where std's could lose it to the next
    /// batch every time.
    connection: Arc<Mutex<Connection>>,
    /// Dropped with the writer: the checkpointer's thread then ends.
    _checkpoints: mpsc::Sender<()>,
    /// WAL rewinds the checkpointer completed and gave up on (the rewind
    /// tests read them; /metrics counts them too).
    #[cfg_attr(not(test), allow(dead_code))]
    rewinds: Arc<Rewinds>,
}

#[derive(Default)]
struct Rewinds {
    done: AtomicU64,
    gave_up: AtomicU64,
    /// The checkpointer's ticks so far (a test waits for some to pass).
    looks: AtomicU64,
}

impl Writer {
    /// Opens the write connection on `path` (already created and migrated)
    /// and starts the checkpointer's thread, which ends when the writer is
    /// dropped.
    pub fn open(path: &Path) -> StoreResult<Writer> {
        let connection = connect(path)?;
        connection.pragma_update(None, "foreign_keys", "ON").map_err(embedded)?;
        connection.set_prepared_statement_cache_capacity(32);
        let checkpointer = connect(path)?;
        // A RESTART holds new writers back while it waits for readers: a
        // reader slower than this (an export) makes it give up until the
        // next tick instead of stalling every batch.
        checkpointer.busy_timeout(RESTART_WAITS_AT_MOST).map_err(embedded)?;
        let (checkpoints, stop) = mpsc::channel();
        let rewinds = Arc::new(Rewinds::default());
        let counted = rewinds.clone();
        let connection = Arc::new(Mutex::new(connection));
        let writer = connection.clone();
        thread("sqlite-checkpointer", move || checkpoint(checkpointer, &writer, stop, counted))?;
        Ok(Writer { connection, _checkpoints: checkpoints, rewinds })
    }

    /// Stores a group of edge-agent heartbeats (`[[org, robot, at], …]` as
    /// JSON; services/heartbeats.rs) with one statement on this connection,
    /// between two batches, off the runtime's threads. Through the pool the
    /// group waited for SQLite's lock in sleeps of 1, 2, 5 … ms, losing it
    /// to back-to-back batches for up to a quarter of a second, and a batch
    /// that found the lock held by it slept too (BENCHMARKS.md, Engine v3
    /// twenty-fourth part).
    pub async fn write_heartbeats(&self, group: String) -> StoreResult<()> {
        let connection = self.connection.clone();
        let written = tokio::task::spawn_blocking(move || {
            let connection = connection.lock();
            connection.prepare_cached(HEARTBEATS).and_then(|mut statement| statement.execute([group])).map_err(embedded)
        });
        written.await.map_err(|e| StoreError::Writer(format!("the heartbeats' write failed: {e}")))??;
        Ok(())
    }

    /// How many times the checkpointer has rewound the WAL.
    #[cfg(test)]
    pub fn rewinds(&self) -> u64 {
        self.rewinds.done.load(Ordering::Relaxed)
    }

    /// How many rewinds the checkpointer gave up on (SQLite said busy).
    #[cfg(test)]
    pub fn rewinds_given_up(&self) -> u64 {
        self.rewinds.gave_up.load(Ordering::Relaxed)
    }

    /// How many times the checkpointer has looked at the WAL.
    #[cfg(test)]
    pub fn checkpointer_looks(&self) -> u64 {
        self.rewinds.looks.load(Ordering::Relaxed)
    }

    /// Applies `writes` in one transaction, on this thread; the whole batch
    /// or nothing. Answers with the rows of `org_id`'s sessions named in
    /// `read_back`, read in the same transaction after the writes (on this
    /// connection the pages are in its cache; a pool reader would read them
    /// again). A batch that panics is rolled back (its transaction is
    /// dropped) and refused; every later batch goes on.
    pub fn commit(&self, writes: &[Write], org_id: &str, read_back: &[String]) -> StoreResult<Vec<SessionRow>> {
        // A batch's panic is caught inside the lock: the connection is as
        // a rollback left it, usable.
        let mut connection = self.connection.lock();
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply_all(&mut connection, writes, org_id, read_back)));
        applied.unwrap_or_else(|_| Err(StoreError::Writer("the batch writer panicked on this batch".into())))
    }
}

fn connect(path: &Path) -> StoreResult<Connection> {
    let connection = Connection::open(path).map_err(embedded)?;
    connection.busy_timeout(Duration::from_secs(10)).map_err(embedded)?;
    connection.pragma_update(None, "synchronous", "NORMAL").map_err(embedded)?;
    connection.pragma_update(None, "wal_autocheckpoint", 0).map_err(embedded)?;
    Ok(connection)
}

fn thread(name: &str, run: impl FnOnce() + Send + 'static) -> StoreResult<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(run)
        .map(drop)
        .map_err(|e| StoreError::Writer(format!("could not start the {name} thread: {e}")))
}

/// Copies the WAL into the database file every `CHECKPOINT_EVERY` without
/// waiting for readers or the writer (PASSIVE), and rewinds it (RESTART)
/// once it holds `RESTART_FRAMES`, until the writer is dropped. A rewind
/// a reader outlasted (SQLite's "busy") is counted and tried again on the
/// next tick: backing off was tried and let the WAL grow under steady
/// reads. Each try holds writers back while it waits for readers
/// (`RESTART_WAITS_AT_MOST` at most) and while it copies what is left and
/// syncs; one given up still copies what it can (SQLite's PASSIVE), the
/// batch writer held meanwhile.
fn checkpoint(connection: Connection, writer: &Mutex<Connection>, stop: mpsc::Receiver<()>, rewinds: Arc<Rewinds>) {
    // (busy, frames in the WAL) as SQLite reports them.
    let run = |mode: &str| connection.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| Ok((row.get::<_, i64>(0)? != 0, row.get::<_, i64>(1)?)));
    // The WAL's size at the last rewind: a rewound WAL keeps its size
    // until the next batch starts it over, and is not rewound again.
    let mut rewound = None;
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(CHECKPOINT_EVERY) {
        rewinds.looks.fetch_add(1, Ordering::Relaxed);
        let frames = match run("PASSIVE") {
            Ok((_, frames)) => frames,
            Err(e) => {
                tracing::warn!(error = %e, "the WAL checkpoint failed; trying again");
                continue;
            }
        };
        if frames < RESTART_FRAMES || rewound == Some(frames) {
            continue;
        }
        // SQLite's own lock cannot be waited for: a RESTART polls it while
        // it sleeps (1, 2, 5, … ms), and batches back to back held it at
        // nearly every poll (on a busy machine the WAL reached 22,000
        // frames before a rewind got in). Taking the writer's connection
        // between two batches leaves SQLite the readers to wait for, and
        // the pool's writers (rare: everything but the engine's journal).
        let _writer = writer.lock();
        let started = std::time::Instant::now();
        match run("RESTART") {
            Ok((busy, frames)) => {
                let counted = if busy { &rewinds.gave_up } else { &rewinds.done };
                counted.fetch_add(1, Ordering::Relaxed);
                crate::metrics::wal_rewound(!busy);
                rewound = (!busy).then_some(frames);
            }
            Err(e) => tracing::warn!(error = %e, "the WAL rewind failed; trying again"),
        }
        let took = started.elapsed();
        if took > RESTART_WAITS_AT_MOST * 2 {
            tracing::warn!(frames, took_ms = took.as_millis() as u64, "the WAL rewind held writers back longer than it should");
        }
    }
}

fn apply_all(connection: &mut Connection, writes: &[Write], org_id: &str, read_back: &[String]) -> StoreResult<Vec<SessionRow>> {
    // Dropped without commit on an error: rolled back.
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(embedded)?;
    for statement in batch(writes) {
        let mut prepared = tx.prepare_cached(statement.sql.text).map_err(embedded)?;
        bind(&mut prepared, &statement.values)?;
        let changed = prepared.raw_execute().map_err(embedded)?;
        if let Some(what) = statement.changes_one {
            if changed != 1 {
                return Err(super::writes::diverged(what));
            }
        }
    }
    // A read that fails costs the batch nothing: its callers read after it.
    let rows = self::read_back(&tx, org_id, read_back).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a batch's sessions could not be read back; its callers read them after it");
        Vec::new()
    });
    tx.commit().map_err(embedded)?;
    Ok(rows)
}

/// The org's sessions named, as the transaction sees them.
fn read_back(tx: &rusqlite::Transaction<'_>, org_id: &str, session_ids: &[String]) -> rusqlite::Result<Vec<SessionRow>> {
    if session_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut select = tx.prepare_cached(SESSION_BY_ID.as_str())?;
    let mut rows = Vec::with_capacity(session_ids.len());
    for session_id in session_ids {
        rows.extend(select.query_row((org_id, session_id), session_row).optional()?);
    }
    Ok(rows)
}

/// A row of `SESSION_SELECT`, by column name (as sqlx's `FromRow` reads it).
fn session_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: row.get("id")?,
        org_id: row.get("org_id")?,
        robot_id: row.get("robot_id")?,
        robot_model: row.get("robot_model")?,
        site: row.get("site")?,
        pop: row.get("pop")?,
        skill: row.get("skill")?,
        lifecycle: row.get("lifecycle")?,
        safety_state: row.get("safety_state")?,
        operator_id: row.get("operator_id")?,
        operator_name: row.get("operator_name")?,
        operator_region: row.get("operator_region")?,
        rtt_ms: row.get("rtt_ms")?,
        divergence_deg: row.get("divergence_deg")?,
        velocity_scale: row.get("velocity_scale")?,
        raised_at: row.get("raised_at")?,
        started_at: row.get("started_at")?,
        ended_at: row.get("ended_at")?,
        client_id: row.get("client_id")?,
        client_name: row.get("client_name")?,
        planned_end_at: row.get("planned_end_at")?,
        booking_id: row.get("booking_id")?,
    })
}

/// Binds `values` to `$1…$N` by number, as sqlx does: SQLite numbers `$N`
/// parameters in order of first appearance, not by N.
fn bind(statement: &mut rusqlite::CachedStatement<'_>, values: &[Value<'_>]) -> StoreResult<()> {
    for index in 1..=statement.parameter_count() {
        let number = statement
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=values.len()).contains(n))
            .ok_or_else(|| StoreError::Writer(format!("parameter {index} is not one of $1…${}", values.len())))?;
        let bound = match &values[number - 1] {
            Value::Text(text) => statement.raw_bind_parameter(index, text.as_deref()),
            Value::Int(n) => statement.raw_bind_parameter(index, n),
        };
        bound.map_err(embedded)?;
    }
    Ok(())
}

fn embedded(e: rusqlite::Error) -> StoreError {
    StoreError::Writer(e.to_string())
}

#[cfg(test)]
mod tests {
    use crate::store::{DispatchStore, Lease, NewOrg, NewRobot, NewSession, Seed, Store, Write};

    /// A store on `file` with the org and `robots` robots (`r-0`, `r-1`, …).
    async fn with_robots(file: &std::path::Path, robots: usize) -> crate::store::sql::SqliteStore {
        let store = crate::store::sql::SqliteStore::connect(&format!("sqlite://{}", file.display())).await.unwrap();
        let robots = (0..robots).map(|i| NewRobot {
            id: format!("r-{i}"), org_id: "org".into(), model: "UR5e".into(), site: "Leeds".into(), pop: "uk-london".into(),
            req_cert: "pick-place · tier-1".into(), token_hash: format!("hash-{i}"),
        });
        store.seed(&Seed { orgs: vec![NewOrg { id: "org".into(), name: "Org".into() }], robots: robots.collect(), ..Seed::default() }).await.unwrap();
        store
    }

    fn call(i: usize) -> Write {
        Write::OpenSession(NewSession {
            id: format!("ses-{i}"), org_id: "org".into(), robot_id: format!("r-{i}"), skill: "pick-place".into(), pop: "uk-london".into(),
            raised_at: i as i64, client_id: None, booking_id: None, planned_end_at: None,
        })
    }

    /// A batch answers with the sessions it was asked to read back as it
    /// left them (its own writes included, the robot's model joined in),
    /// and with nothing for a session of another org or none at all.
    #[tokio::test]
    async fn a_batch_reads_back_the_sessions_it_changed_as_it_left_them() {
        use domain::models::LifecycleState;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::sqlite_with_a_robot(dir.path()).await;
        let lease = Lease { org_id: "org".into(), epoch: 1 };
        let read = vec!["ses-1".to_string(), "ses-none".to_string()];
        let opened = store.commit_reading(&lease, vec![call(1)], read.clone()).await.unwrap();
        assert_eq!(opened.len(), 1, "only the session that is there");
        assert_eq!((opened[0].id.as_str(), opened[0].lifecycle.as_str(), opened[0].robot_model.as_str()), ("ses-1", "PENDING", "UR5e"));
        let end = Write::End {
            org_id: "org".into(), session_id: "ses-1".into(), to: LifecycleState::Cancelled, reason: "withdrawn".into(), attached: None, at: 5,
        };
        let ended = store.commit_reading(&lease, vec![end], read).await.unwrap();
        assert_eq!((ended[0].lifecycle.as_str(), ended[0].ended_at), ("CANCELLED", Some(5)), "as this batch left it");
        assert_eq!(ended[0], store.session("org", "ses-1").await.unwrap().unwrap(), "the committed row");
        let elsewhere = Lease { org_id: "other".into(), epoch: 1 };
        assert!(store.commit_reading(&elsewhere, Vec::new(), vec!["ses-1".into()]).await.unwrap().is_empty(), "another org's");
    }

    /// A batch one of whose writes the database refuses writes nothing, and
    /// the next batch commits: the refused one's transaction was ended.
    #[tokio::test]
    async fn a_refused_batch_writes_nothing_and_the_next_commits() {
        use domain::models::LifecycleState;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::sqlite_with_a_robot(dir.path()).await;
        let lease = Lease { org_id: "org".into(), epoch: 1 };
        let end_of_none = Write::End {
            org_id: "org".into(), session_id: "ses-none".into(), to: LifecycleState::Cancelled, reason: "withdrawn".into(), attached: None, at: 5,
        };
        let refused = store.commit_reading(&lease, vec![call(1), end_of_none], vec!["ses-1".into()]).await;
        assert!(refused.is_err(), "the end of a session that is not there diverges");
        assert_eq!(store.session("org", "ses-1").await.unwrap(), None, "nothing of the refused batch");
        let opened = store.commit_reading(&lease, vec![call(1)], vec!["ses-1".into()]).await.unwrap();
        assert_eq!(opened.len(), 1, "the next batch commits");
        assert_eq!(Some(opened[0].clone()), store.session("org", "ses-1").await.unwrap(), "and a pool reader sees it");
    }

    /// "Open" is written as "not closed", and the closed states are the
    /// domain's terminal ones, the open ones its open ones: were a state
    /// added, the SQL would count it as open only if the domain does.
    #[test]
    fn open_sessions_are_those_not_in_a_terminal_state() {
        use domain::models::LifecycleState;
        let closed: Vec<String> = LifecycleState::ALL.iter().filter(|s| s.is_terminal()).map(|s| format!("'{}'", s.as_str())).collect();
        assert_eq!(open_lifecycle!(), format!("lifecycle NOT IN ({})", closed.join(", ")));
        // The reads also name the open states as a list (PostgreSQL's index).
        let open: Vec<String> = LifecycleState::ALL.iter().filter(|s| s.is_open()).map(|s| format!("'{}'", s.as_str())).collect();
        assert_eq!(open_lifecycle_read!(), format!("lifecycle IN ({}) AND {}", open.join(", "), open_lifecycle!()));
    }

    /// SQLite evaluates an `IN` list of three values or more by building a
    /// temporary b-tree (`OpenEphemeral`) each time a statement runs; a
    /// session's end built four (its condition, its CHECK and, before and
    /// after, the index of open sessions when that said "open" as a list),
    /// and each CHECK of a state one on every statement that wrote it. The
    /// states are checked with `=` and OR (the activity's since sqlite/0024,
    /// sessions' and offers' since sqlite/0026; a dispatch record's outcome
    /// lists two values), so no batch statement builds one.
    #[tokio::test]
    async fn the_batch_statements_build_no_temporary_tables() {
        let (_dir, _store, connection) = crate::store::sqlite_to_explain().await;
        for sql in super::super::writes::ALL {
            let program = crate::store::explained(&connection, &format!("EXPLAIN {}", sql.text), "opcode");
            let built = program.iter().filter(|opcode| *opcode == "OpenEphemeral").count();
            assert_eq!(built, 0, "{}: {}", sql.name, sql.text);
        }
    }

    /// A group of heartbeats finds each robot's row by its key: the plan
    /// walks the group and searches the robots, and never scans the
    /// fleet's table (a whole read of it per group).
    #[tokio::test]
    async fn a_group_of_heartbeats_finds_each_robot_by_its_key() {
        let (_dir, _store, connection) = crate::store::sqlite_to_explain().await;
        let plan = crate::store::explained(&connection, &format!("EXPLAIN QUERY PLAN {}", super::HEARTBEATS), "detail");
        assert!(plan.iter().any(|step| step.starts_with("SEARCH robots USING")), "{plan:?}");
        assert!(!plan.iter().any(|step| step.starts_with("SCAN robots")), "{plan:?}");
    }

    /// Each b-tree a batch's statement writes costs its commit a WAL frame
    /// (a page), and the frames are a third of the dispatch thread: every
    /// statement writes its table and the indexes some read needs, no more.
    /// (sqlite/0024: the event log is one b-tree, without its index by
    /// `at`; the activity and the dispatch records write no
    /// `sqlite_sequence`. A partial index is opened whether or not the row
    /// goes in, so sqlite/0025's client index of clients' sessions only is
    /// held by `store::booking`'s plan test instead.)
    #[tokio::test]
    async fn the_batch_statements_write_only_the_b_trees_reads_need() {
        let (_dir, _store, connection) = crate::store::sqlite_to_explain().await;
        let b_trees: std::collections::HashMap<String, String> = connection
            .prepare("SELECT rootpage, name FROM sqlite_schema WHERE rootpage > 0").unwrap()
            .query_map([], |row| Ok((row.get::<_, i64>(0)?.to_string(), row.get(1)?))).unwrap()
            .map(Result::unwrap).collect();
        // An `OpenWrite`'s p2 is the root page of the b-tree it opens.
        let written = |sql: &str| {
            let explain = format!("EXPLAIN {sql}");
            let opcodes = crate::store::explained(&connection, &explain, "opcode");
            let roots = crate::store::explained(&connection, &explain, "p2");
            let names: std::collections::BTreeSet<&str> =
                opcodes.iter().zip(&roots).filter(|(opcode, _)| *opcode == "OpenWrite").map(|(_, root)| b_trees[root].as_str()).collect();
            names.into_iter().collect::<Vec<_>>().join(" ")
        };
        let actual: Vec<(&str, String)> = super::super::writes::ALL.iter().map(|sql| (sql.name, written(sql.text))).collect();
        // (An UPDATE opens the table's key, by which it finds the row, and
        // the indexes of the columns it sets.)
        let expected = [
            ("open_session", "sessions sessions_by_client sessions_by_org_day sessions_one_open_per_robot sqlite_autoindex_sessions_1"),
            ("queue", "sessions sqlite_autoindex_sessions_1"),
            ("offer", "offers offers_by_session offers_one_open_per_operator offers_one_open_per_session sqlite_autoindex_offers_1"),
            ("leave_queue", "sessions sqlite_autoindex_sessions_1"),
            ("close_offer", "offers offers_one_open_per_operator offers_one_open_per_session"),
            ("start", "sessions sessions_one_open_per_robot sqlite_autoindex_sessions_1"),
            ("end", "sessions sessions_one_open_per_robot sqlite_autoindex_sessions_1"),
            ("steer", "sessions sessions_one_open_per_robot sqlite_autoindex_sessions_1"),
            ("switch", "sessions sqlite_autoindex_sessions_1"),
            ("activity", "activity_events activity_events_by_session"),
            ("record", "dispatch_records dispatch_records_by_session"),
            ("bump_events", "org_event_counters sqlite_autoindex_org_event_counters_1"),
            ("log_event_at", "org_events"),
        ];
        assert_eq!(actual, expected.map(|(name, b_trees)| (name, b_trees.to_string())));
    }

    /// Nothing checkpoints but the checkpointer thread: while it runs, the
    /// database file takes in what was written to the WAL (it grows); were
    /// it gone, the WAL would grow without end and the file never.
    #[tokio::test]
    async fn the_checkpointer_copies_committed_batches_into_the_database_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("clutchcall.db");
        let store = with_robots(&file, 2_000).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let lease = Lease { org_id: "org".into(), epoch: 1 };
        let before = std::fs::metadata(&file).unwrap().len();
        for batch in 0..20 {
            store.commit(&lease, (batch * 100..batch * 100 + 100).map(call).collect()).await.unwrap();
        }
        loop {
            if std::fs::metadata(&file).unwrap().len() > before {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the database file never took in the batches' WAL");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// A batch that holds SQLite's write lock longer than a rewind waits
    /// (a dispatch thread the machine did not run for a moment) does not
    /// make the rewind give up: the checkpointer waits for the writer's
    /// connection, then rewinds. Before, it polled SQLite's lock for
    /// `RESTART_WAITS_AT_MOST`, gave up, and under load did so tick after
    /// tick while the WAL grew. Rewound, a WAL nothing wrote to since is
    /// not rewound again.
    #[tokio::test]
    async fn a_rewind_waits_for_a_long_batch_instead_of_giving_up() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("clutchcall.db");
        let store = with_robots(&file, 400).await;
        // A reader's snapshot keeps the WAL from being copied back and
        // started over under the batches; it ends before the long batch.
        let reader = super::connect(&file).unwrap();
        reader.execute_batch("BEGIN; SELECT COUNT(*) FROM sessions;").unwrap();
        {
            let mut connection = store.writer.connection.lock();
            for i in 0..400 {
                super::apply_all(&mut connection, &[call(i)], "org", &[]).unwrap();
            }
            connection.execute_batch("BEGIN IMMEDIATE").unwrap();
            reader.execute_batch("COMMIT").unwrap();
            std::thread::sleep(super::CHECKPOINT_EVERY + super::RESTART_WAITS_AT_MOST * 2);
            connection.execute_batch("COMMIT").unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while store.writer.rewinds() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(store.writer.rewinds() >= 1, "rewound");
        assert_eq!(store.writer.rewinds_given_up(), 0, "given up");
        // Rewound and not written since, the WAL keeps its size: later
        // looks leave it be (they rewound it again every tick).
        let looked = store.writer.checkpointer_looks();
        while store.writer.checkpointer_looks() < looked + 3 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(store.writer.checkpointer_looks() >= looked + 3, "the checkpointer looks on");
        assert_eq!(store.writer.rewinds(), 1, "rewound once");
    }

    /// Under steady reads (each holding a snapshot for a moment) a PASSIVE
    /// checkpoint never reaches the WAL's end, so the WAL is never started
    /// over (it grew by ~100 KB a call) unless the checkpointer waits for
    /// the readers (RESTART); and under batches back to back, as the
    /// dispatch thread commits them under load, a RESTART that waits for
    /// SQLite's write lock by polling it almost never finds it free (with
    /// the other unit tests on both cores this test then saw 0 rewinds in
    /// 3,840 batches). Batches come on this thread with nothing between
    /// them while two readers read, until the checkpointer has rewound the
    /// WAL twice, or they run out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_rewound_under_steady_reads_and_back_to_back_batches() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("clutchcall.db");
        let url = format!("sqlite://{}", file.display());
        // A robot per call (one open session each): 3,840 batches of 25.
        let store = with_robots(&file, 96_000).await;
        let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (reading, url) = (reading.clone(), url.clone());
                tokio::spawn(async move {
                    use sqlx::Connection;
                    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                    while reading.load(std::sync::atomic::Ordering::Relaxed) {
                        let _: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sessions").fetch_one(&mut conn).await.unwrap();
                    }
                })
            })
            .collect();
        tokio::task::block_in_place(|| {
            for batch in 0..3_840 {
                if store.writer.rewinds() >= 2 {
                    break;
                }
                let writes: Vec<Write> = (batch * 25..batch * 25 + 25).map(call).collect();
                store.writer.commit(&writes, "org", &[]).unwrap();
            }
        });
        reading.store(false, std::sync::atomic::Ordering::Relaxed);
        for reader in readers {
            reader.await.unwrap();
        }
        assert!(store.writer.rewinds() >= 2, "the WAL was rewound {} times under steady reads and back-to-back batches", store.writer.rewinds());
    }
}
