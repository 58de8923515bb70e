//! SQLite's batch writer. One thread owns a write connection and applies a
//! whole batch (`BEGIN IMMEDIATE … COMMIT`, statements prepared once and
//! cached) for one hop from the dispatcher and one answer back. Through
//! sqlx every statement would be a round trip to its connection's worker
//! thread: two thread hops each, ~17 a cycle, which is where most of a
//! cycle's time went (BENCHMARKS.md, Engine v3).
//!
//! Only the engine's journal goes this way; everything else still writes
//! through the sqlx pool, and SQLite's own lock (with a busy timeout on
//! both sides) orders the two.

use super::journal::Write;
use super::writes::{statements, Value};
use super::{StoreError, StoreResult};
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::oneshot;

pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
}

struct Job {
    writes: Vec<Write>,
    done: oneshot::Sender<StoreResult<()>>,
}

impl Writer {
    /// Opens the write connection on `path` (already created and migrated)
    /// and starts its thread, which ends when the writer is dropped.
    pub fn open(path: &Path) -> StoreResult<Writer> {
        let connection = Connection::open(path).map_err(embedded)?;
        connection.busy_timeout(Duration::from_secs(10)).map_err(embedded)?;
        connection.pragma_update(None, "synchronous", "NORMAL").map_err(embedded)?;
        connection.pragma_update(None, "foreign_keys", "ON").map_err(embedded)?;
        connection.set_prepared_statement_cache_capacity(32);
        let (jobs, incoming) = mpsc::channel();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || serve(connection, incoming))
            .map_err(|e| StoreError::Writer(format!("could not start the writer thread: {e}")))?;
        Ok(Writer { jobs })
    }

    /// Applies `writes` in one transaction; the whole batch or nothing.
    pub async fn commit(&self, writes: Vec<Write>) -> StoreResult<()> {
        let (done, answer) = oneshot::channel();
        let stopped = || StoreError::Writer("the writer thread has stopped".into());
        self.jobs.send(Job { writes, done }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn serve(mut connection: Connection, jobs: mpsc::Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        let _ = job.done.send(apply_all(&mut connection, &job.writes));
    }
}

fn apply_all(connection: &mut Connection, writes: &[Write]) -> StoreResult<()> {
    // Dropped without commit on an error: rolled back.
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(embedded)?;
    for write in writes {
        for statement in statements(write) {
            let mut prepared = tx.prepare_cached(statement.sql.text).map_err(embedded)?;
            bind(&mut prepared, &statement.values)?;
            let changed = prepared.raw_execute().map_err(embedded)?;
            if let Some(what) = statement.changes_one {
                if changed != 1 {
                    return Err(super::writes::diverged(what));
                }
            }
        }
    }
    tx.commit().map_err(embedded)
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
