//! Where the dispatchers run. With a store that commits a batch on the
//! calling thread (SQLite's writer, `DispatchStore::commits_on_caller`),
//! every dispatcher runs on one thread of its own: a commit then takes no
//! hop to another thread and back (two wakes on the critical path of each
//! request), and holds no tokio worker that serves sockets while it runs.
//! A store that awaits its database (PostgreSQL) keeps them on tokio's
//! workers.
//!
//! The price: a commit that waits for SQLite's write lock (behind a write
//! through the pool, up to its busy timeout) holds every org's dispatcher,
//! timers and reads included, where before only answers waited for it. On
//! SQLite, a request that comes while a batch commits is decided after it
//! (the pipeline of `pipeline.rs` runs on PostgreSQL only).

use std::future::Future;
use tokio::runtime::{Builder, Handle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The dispatchers' own thread: a current-thread runtime that runs until
/// this is dropped (with the engine); what still runs on it then is dropped.
pub(super) struct DispatchThread {
    runtime: Handle,
    /// Dropped with the thread's owner: the runtime then stops.
    _stop: oneshot::Sender<()>,
}

impl DispatchThread {
    pub fn start() -> std::io::Result<DispatchThread> {
        let runtime = Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new().name("dispatch".into()).spawn(move || {
            runtime.block_on(async move {
                let _ = stopped.await;
            });
        })?;
        Ok(DispatchThread { runtime: handle, _stop: stop })
    }

    /// Runs `task` on the thread (and what it spawns, there too).
    pub fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) -> JoinHandle<()> {
        self.runtime.spawn(task)
    }
}

/// Runs `task` on `thread` when there is one, else on tokio's workers.
pub(super) fn spawn<F: Future<Output = ()> + Send + 'static>(thread: Option<&DispatchThread>, task: F) -> JoinHandle<()> {
    match thread {
        Some(thread) => thread.spawn(task),
        None => tokio::spawn(task),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task spawned on the dispatch thread runs there (not on the
    /// caller's worker), and the thread ends with its owner: what was
    /// still waiting on it is dropped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dispatchers_run_on_their_own_thread_until_it_is_dropped() {
        let thread = DispatchThread::start().unwrap();
        let (name_tx, name) = oneshot::channel();
        thread.spawn(async move {
            let _ = name_tx.send(std::thread::current().name().map(str::to_string));
        });
        assert_eq!(name.await.unwrap().as_deref(), Some("dispatch"));

        let (_never, waits) = oneshot::channel::<()>();
        let (ended_tx, ended) = oneshot::channel::<()>();
        let waiting = thread.spawn(async move {
            let _ended = ended_tx;
            let _ = waits.await;
        });
        drop(thread);
        assert!(ended.await.is_err(), "the waiting task was dropped with the thread");
        assert!(waiting.await.unwrap_err().is_cancelled());
    }
}
