//! The two batches a dispatcher holds at once: the one being committed,
//! and the next one, decided in memory meanwhile. Deciding while the last
//! batch commits keeps the database busy instead of waiting for the desk
//! (and the desk for the database); nothing is answered or published before
//! its own batch is committed, and a batch decided on top of one that failed
//! fails with it (rule D11). (On SQLite the commit runs on the dispatch
//! thread, `thread.rs`: what comes meanwhile is decided once it is done.)

use super::desk::{Desk, Effects};
use super::types::EngineError;
use super::Shared;
use crate::store::{Lease, SessionRow, StoreError, StoreResult};
use tokio::task::JoinHandle;

/// An answer held until its batch is committed (`Ok`, with the rows of the
/// sessions the batch was asked to read back), or failed with the error
/// its caller is told.
pub(super) type Pending = Box<dyn FnOnce(Result<&[SessionRow], fn() -> EngineError>) + Send>;

/// What the desk decided since the last batch went to the database.
#[derive(Default)]
pub(super) struct Decided {
    pub answers: Vec<Pending>,
    /// Sessions whose rows, as this batch leaves them, an answer carries.
    pub read_back: Vec<String>,
    fx: Effects,
}

impl Decided {
    /// Takes what the desk's last decisions left to write and publish.
    pub fn take_from(&mut self, desk: &mut Desk) {
        desk.move_effects_into(&mut self.fx);
    }

    /// Requests decided and held for the commit.
    pub fn held(&self) -> usize {
        self.answers.len()
    }

    /// Nothing to commit, answer or publish.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty() && self.fx.writes.is_empty() && self.fx.events.is_empty() && self.fx.pokes.is_empty() && self.fx.freed.is_empty()
    }

    /// Sends the decisions to the database (on a task of its own, so the
    /// commit starts now, not when the dispatcher next waits; on the
    /// dispatch thread, where SQLite commits on the caller's thread, as
    /// soon as the dispatcher waits: thread.rs). Call it only
    /// with nothing else in flight: a batch without writes is then committed
    /// at once, since all it could have seen is committed by now.
    pub fn commit(mut self, shared: &Shared, lease: &Lease) -> Committing {
        let writes = std::mem::take(&mut self.fx.writes);
        let read_back = std::mem::take(&mut self.read_back);
        let count = writes.len();
        let (store, lease) = (shared.store.clone(), lease.clone());
        // A session the desk changed always has a write in the batch: a
        // batch without writes has nothing to read back either.
        let commit = tokio::spawn(async move {
            match writes.is_empty() {
                true => Ok(Vec::new()),
                false => store.commit_reading(&lease, writes, read_back).await,
            }
        });
        Committing { commit, writes: count, decided: self }
    }

    /// Tells every caller the batch did not happen.
    pub fn fail(self, error: fn() -> EngineError) {
        for answer in self.answers {
            answer(Err(error));
        }
    }
}

/// What committed decisions tell others: their events published, the orgs
/// to look at their queues again poked, the operators freed told (rule
/// D10). (`fx.writes` are committed by then.)
pub(super) fn announce(shared: &Shared, fx: Effects) {
    for (topic, event) in fx.events {
        shared.bus.publish(topic, event);
    }
    super::dispatcher::poke(shared, fx.pokes);
    for (operator_id, org_id) in fx.freed {
        shared.busy.free(&operator_id, &org_id);
    }
}

/// A batch on its way into the database.
pub(super) struct Committing {
    commit: JoinHandle<StoreResult<Vec<SessionRow>>>,
    /// How many writes it holds (for the log).
    pub writes: usize,
    decided: Decided,
}

impl Committing {
    /// The commit's outcome (polled by the dispatcher's loop).
    pub async fn committed(&mut self) -> StoreResult<Vec<SessionRow>> {
        match (&mut self.commit).await {
            Ok(committed) => committed,
            Err(e) => Err(StoreError::Writer(format!("the commit's task ended: {e}"))),
        }
    }

    /// The batch is committed: answers go out, then the events and pokes.
    fn done(self, shared: &Shared, read: &[SessionRow]) {
        let Decided { answers, fx, .. } = self.decided;
        for answer in answers {
            answer(Ok(read));
        }
        announce(shared, fx);
    }

    /// Requests held for this commit.
    pub fn held(&self) -> usize {
        self.decided.held()
    }

    /// Waits for the commit and answers as it went; the outcome is returned
    /// for the dispatcher to act on (step down, reload).
    pub async fn finish(mut self, shared: &Shared) -> StoreResult<()> {
        let committed = self.committed().await;
        self.settle(shared, &committed);
        committed.map(drop)
    }

    /// Answers as the commit went (`committed` is its outcome).
    pub fn settle(self, shared: &Shared, committed: &StoreResult<Vec<SessionRow>>) {
        match committed {
            Ok(read) => self.done(shared, read),
            Err(StoreError::Fenced) => self.decided.fail(|| EngineError::DispatchedElsewhere),
            Err(_) => self.decided.fail(|| EngineError::Unavailable),
        }
    }
}
