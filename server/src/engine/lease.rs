//! Which instance dispatches an org (issue "Scale out", rules D13 and
//! D14): a lease in the database (migration 0013), taken when nobody holds
//! it, renewed every second while this instance dispatches the org, and
//! checked inside every batch's transaction (`Store::commit` fails with
//! `StoreError::Fenced` once the org's epoch has moved on). An instance
//! that was paused or cut off past its lease therefore writes nothing after
//! a takeover: its batch fails, it answers `DispatchedElsewhere`, and it
//! steps down. On SQLite one process holds every org and the lease is
//! always its own.

use super::types::EngineError;
use super::Shared;
use crate::store::{Lease, StoreError};
use std::time::Duration;

/// A lease lapses this long after its last renewal: another instance may
/// then take the org (failover within 5 s: this, plus one `TAKE_EVERY`,
/// plus in cluster mode at most `forward::LISTEN_WITHIN` for the new
/// owner's NATS subscription, then loading the desk).
pub const LEASE_TTL_MS: i64 = 3_000;
/// The same, as this instance's clock counts it.
pub const LEASE: Duration = Duration::from_millis(LEASE_TTL_MS as u64);
/// The owner renews its lease this often.
pub const RENEW_EVERY: Duration = Duration::from_secs(1);
/// An instance that does not dispatch an org tries to take it this often.
pub const TAKE_EVERY: Duration = Duration::from_secs(1);

// A transaction a vanished owner left open ends about when its lease lapses.
const _: () = assert!(crate::store::ABANDONED_TRANSACTION_AFTER.as_millis() <= LEASE_TTL_MS as u128);

/// What asking for the org's lease found.
pub(super) enum Asked {
    /// Taken: the lease, and its renewals' clock (from when it was asked).
    Taken(Lease, Renewals),
    /// Another instance holds it, or a lease of this run's that the
    /// asking dispatcher may not take back (one it gave up whose release
    /// did not reach the database, one taken by an ask whose answer it
    /// timed out on, or one an earlier dispatcher of the org held), until
    /// it lapses.
    Elsewhere,
    /// The database did not answer.
    Unreachable,
}

/// Asks once for the org's lease, waiting for the database at most until
/// the next ask: a database that does not answer (its network cut, say)
/// is unreachable, not a dispatcher that waits as long as TCP does.
pub(super) async fn ask(shared: &Shared, org_id: &str, stepped_down: i64) -> Asked {
    // The database dates the lease when the ask reaches it: never before this.
    let asked_at = tokio::time::Instant::now();
    let Ok(asked) = tokio::time::timeout(TAKE_EVERY, shared.store.take_lease(org_id, &shared.owner, LEASE_TTL_MS, stepped_down)).await else {
        tracing::warn!(org = %org_id, "the database did not answer for the org's dispatch lease within {TAKE_EVERY:?}");
        return Asked::Unreachable;
    };
    match asked {
        Ok(Some(lease)) => {
            tracing::info!(org = %org_id, epoch = lease.epoch, instance = %shared.owner, "dispatching this org here");
            Asked::Taken(lease, Renewals::since(asked_at))
        }
        Ok(None) => Asked::Elsewhere,
        Err(e) => {
            tracing::warn!(org = %org_id, error = %e, "could not ask for the org's dispatch lease");
            Asked::Unreachable
        }
    }
}

/// Why a lease is gone.
pub(super) enum Gone {
    /// The database says it is not this instance's (taken over, or lapsed
    /// there): another instance dispatches the org, or soon will.
    Lost,
    /// The database has not answered (or has failed) for a whole lease:
    /// whose the org is, this instance cannot know.
    Lapsed,
    /// This instance gave it up: it could not load the org for a lease
    /// (`dispatcher::load`), so another instance may try.
    GivenUp,
}

impl Gone {
    /// What the requests of a desk that stepped down are told.
    pub fn refusal(&self) -> fn() -> EngineError {
        match self {
            Gone::Lapsed | Gone::GivenUp => || EngineError::Unavailable,
            Gone::Lost => || EngineError::DispatchedElsewhere,
        }
    }
}

/// A renewal after one the database took `RENEW_EVERY` or more to answer
/// waits this long at least: the owner's loops put renewals first, and
/// renewing back to back they would do nothing else (the lease, dated
/// when the renewal reached the database, has most of its time left).
const BETWEEN_RENEWALS: Duration = Duration::from_millis(100);

/// When the renewal after one sent at `sent` and ended (answered or
/// given up) at `ended` is due.
fn next_renewal(sent: tokio::time::Instant, ended: tokio::time::Instant) -> tokio::time::Instant {
    (sent + RENEW_EVERY).max(ended + BETWEEN_RENEWALS)
}

/// The owner's renewals: whether it still holds the org, and when it
/// renews next. One clock for every loop the owner runs (loading the org,
/// dispatching it): each selects on `due` beside its work and renews when
/// it is ready.
pub(super) struct Renewals {
    /// When the last renewal that the database answered was sent (or the
    /// lease asked for).
    last_renewed: tokio::time::Instant,
    /// A `RENEW_EVERY` after the last renewal was sent, answered or not
    /// (`next_renewal`).
    due: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl Renewals {
    /// The renewals of a lease asked for at `asked_at`.
    fn since(asked_at: tokio::time::Instant) -> Self {
        Renewals { last_renewed: asked_at, due: Box::pin(tokio::time::sleep_until(asked_at + RENEW_EVERY)) }
    }

    /// Ready once the next renewal is due (and until `renew` is called).
    pub fn due(&mut self) -> &mut std::pin::Pin<Box<tokio::time::Sleep>> {
        &mut self.due
    }

    /// Renews the lease. A renewal the database does not answer is given
    /// up when the lease lapses (but after a `RENEW_EVERY` at least, so one
    /// right after a pause can still find the lease its own): an owner cut
    /// off from the database steps down when its lease ends, whatever TCP
    /// makes of the silence.
    pub async fn renew(&mut self, shared: &Shared, lease: &Lease) -> Result<(), Gone> {
        let left = LEASE.saturating_sub(self.last_renewed.elapsed());
        let within = left.max(RENEW_EVERY);
        // (The lease's new end is dated when the renewal reaches the database.)
        let sent = tokio::time::Instant::now();
        let renewed = match tokio::time::timeout(within, shared.store.renew_lease(lease, LEASE_TTL_MS)).await {
            Ok(renewed) => renewed,
            Err(_) => Err(StoreError::Unanswered(format!("within {within:?}"))),
        };
        self.due.as_mut().reset(next_renewal(sent, tokio::time::Instant::now()));
        match renewed {
            Ok(true) => {
                self.last_renewed = sent;
                Ok(())
            }
            Ok(false) => Err(Gone::Lost),
            Err(e) => {
                tracing::warn!(org = %lease.org_id, error = %e, "could not renew the org's dispatch lease");
                if self.current() { Ok(()) } else { Err(Gone::Lapsed) }
            }
        }
    }

    /// Whether the last renewal is younger than a lease: past that, another
    /// instance may hold the org, and nothing is answered from this desk
    /// (not even a batch without writes, which the commit cannot fence).
    pub fn current(&self) -> bool {
        self.last_renewed.elapsed() < LEASE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renewals come every `RENEW_EVERY` from when each was sent; one the
    /// database was slow to answer leaves the owner's other work a turn
    /// before the next.
    #[test]
    fn a_slow_renewal_is_not_followed_by_another_at_once() {
        let sent = tokio::time::Instant::now();
        assert_eq!(next_renewal(sent, sent + Duration::from_millis(5)), sent + RENEW_EVERY);
        let slow = sent + RENEW_EVERY + Duration::from_millis(200);
        assert_eq!(next_renewal(sent, slow), slow + BETWEEN_RENEWALS);
    }

    /// Rule D14's bound, as the lease's times set it: an owner that dies
    /// just after a renewal holds the org a `LEASE` longer, a survivor that
    /// asked just before it lapsed asks again a `TAKE_EVERY` later, and in
    /// cluster mode waits at most `LISTEN_WITHIN` for its NATS subscription
    /// before it loads the desk: 5 s with nothing left over, so the load
    /// itself (tens of milliseconds for the demo org) and the subscription
    /// (milliseconds) are what `takeover-bench` measures (BENCHMARKS.md
    /// "Failover"), never a timed test.
    #[test]
    fn d14_a_dead_owners_lease_is_taken_and_listened_for_within_5_s() {
        use crate::engine::forward::LISTEN_WITHIN;
        assert!(LEASE + TAKE_EVERY + LISTEN_WITHIN <= Duration::from_secs(5), "{LEASE:?} + {TAKE_EVERY:?} + {LISTEN_WITHIN:?}");
        // A live owner renews twice or more within a lease: one renewal
        // lost (a slow answer, a dropped connection) does not lose the org.
        assert!(RENEW_EVERY * 2 < LEASE);
    }
}
