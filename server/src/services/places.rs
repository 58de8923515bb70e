//! Caps that hold across a cluster's instances (issue "Scale out"): a
//! person's open sockets, a robot's relay sockets, an API key's streams,
//! an org's running exports. One instance counts them in memory (`tabs`,
//! `datasets`); in cluster mode each place is also taken in the database,
//! where every instance counts it.
//!
//! A place belongs to the run of the instance that took it. The run says
//! it is alive every `RENEW_EVERY`; when it stops (killed, cut off from the
//! database), its places stop counting `RUN_LASTS` after its last word, so
//! a dead instance's sockets do not hold their holders' places for ever. A
//! database that does not answer in time lets the socket or export through
//! (logged), as the rate limits do: this instance's own count still holds.

use crate::store::{SharedStore, StoreError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};

/// How long a run's places count after it last said it is alive.
pub const RUN_LASTS: Duration = Duration::from_secs(10);
const RENEW_EVERY: Duration = Duration::from_secs(3);
/// When a lapsed run's rows are deleted (they stopped counting at once).
const FORGOTTEN_AFTER: Duration = Duration::from_secs(3600);
/// Takes running at once: a storm of reconnecting sockets must not hold
/// the pool's connections from dispatch (each take is a transaction).
const TAKERS: usize = 4;
/// How long a socket waits for its place before it is let through.
const TAKE_WITHIN: Duration = Duration::from_secs(2);

/// This run's places in the database.
pub struct SharedPlaces {
    store: SharedStore,
    run: String,
    next: AtomicU64,
    takers: Arc<Semaphore>,
    /// To the keeper, which frees places in the background (`Drop` cannot wait).
    freed: mpsc::UnboundedSender<(String, String)>,
}

/// A place taken in the database; freed when dropped.
pub struct Place {
    holder: String,
    place: String,
    freed: mpsc::UnboundedSender<(String, String)>,
}

impl Drop for Place {
    fn drop(&mut self) {
        // (The keeper has stopped with the server: `end` lapsed the run.)
        let _ = self.freed.send((std::mem::take(&mut self.holder), std::mem::take(&mut self.place)));
    }
}

/// The holder has as many places as its cap, across the cluster.
#[derive(Debug, PartialEq, Eq)]
pub struct CapReached;

impl SharedPlaces {
    /// Says `run` is alive (an error when the database does not answer),
    /// and returns its places with their keeper: the job that keeps saying
    /// so and frees dropped places, until it is stopped.
    pub async fn start(store: SharedStore, run: String) -> crate::store::StoreResult<(Arc<SharedPlaces>, tokio::task::JoinHandle<()>)> {
        renew(&store, &run).await?;
        let (freed, to_free) = mpsc::unbounded_channel();
        let keeper = tokio::spawn(keep(store.clone(), run.clone(), to_free));
        Ok((Arc::new(SharedPlaces { store, run, next: AtomicU64::new(0), takers: Arc::new(Semaphore::new(TAKERS)), freed }), keeper))
    }

    /// One more place for `holder`, whose places across the cluster may
    /// be `cap` at most; `None` when the database did not say in time.
    pub async fn take(&self, holder: &str, cap: usize) -> Result<Option<Place>, CapReached> {
        let place = format!("{}#{}", self.run, self.next.fetch_add(1, Ordering::Relaxed));
        let (owner, store, run, takers, freed) = (holder.to_string(), self.store.clone(), self.run.clone(), self.takers.clone(), self.freed.clone());
        // On a task of its own, which makes the `Place` once the insert has
        // committed: a caller that goes away (or stops waiting) mid-take
        // leaves it to that task, whose dropped answer frees it.
        let deadline = tokio::time::Instant::now() + TAKE_WITHIN;
        let taking = tokio::spawn(async move {
            // Its caller has given up by then: no take for nobody.
            let Ok(_turn) = tokio::time::timeout_at(deadline, takers.acquire_owned()).await else { return Ok(None) };
            match store.take_place(&owner, &place, &run, cap as i64).await {
                Ok(true) => Ok(Some(Place { holder: owner, place, freed })),
                Ok(false) => Err(CapReached),
                Err(StoreError::PlaceUnsure(why)) => {
                    // Its commit went unanswered and the store could not
                    // take it back: the keeper frees it, as a dropped place,
                    // retrying until the database answers.
                    tracing::warn!(holder = %owner, error = %why, "a cluster-wide place may be held after a failed take: freeing it");
                    let _ = freed.send((owner, place));
                    Ok(None)
                }
                Err(e) => {
                    // Nothing to free: the transaction did not commit, or
                    // its commit's answer was lost and the store took the
                    // place back (`PlaceStore::take_place`).
                    tracing::warn!(holder = %owner, error = %e, "a cluster-wide cap could not be read: counted on this instance only");
                    Ok(None)
                }
            }
        });
        match tokio::time::timeout_at(deadline, taking).await {
            Ok(Ok(taken)) => taken,
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(%holder, "a cluster-wide cap did not answer in time: counted on this instance only");
                Ok(None)
            }
        }
    }

    /// This run ends (the server stops): its places stop counting now
    /// rather than `RUN_LASTS` after its last renewal.
    pub async fn end(&self) {
        if let Err(e) = self.store.renew_run(&self.run, -1, FORGOTTEN_AFTER.as_millis() as i64).await {
            tracing::warn!(error = %e, "this instance's cluster-wide places could not be ended: they lapse by themselves");
        }
    }
}

async fn renew(store: &SharedStore, run: &str) -> crate::store::StoreResult<()> {
    store.renew_run(run, RUN_LASTS.as_millis() as i64, FORGOTTEN_AFTER.as_millis() as i64).await
}

/// Renews the run and frees dropped places, side by side: a free that
/// waits on the database never holds a renewal back. A free that failed
/// is tried again `RENEW_EVERY` later. Ends when stopped (with the server).
async fn keep(store: SharedStore, run: String, mut to_free: mpsc::UnboundedReceiver<(String, String)>) {
    let renewing = async {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = renew(&store, &run).await {
                tracing::warn!(error = %e, "this instance could not renew its cluster-wide places: they stop counting if this lasts");
            }
        }
    };
    let freeing = async {
        let mut unfreed: Vec<(String, String)> = Vec::new();
        let mut retry = tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let places = tokio::select! {
                place = to_free.recv() => match place {
                    Some(place) => vec![place],
                    None => return,
                },
                _ = retry.tick(), if !unfreed.is_empty() => std::mem::take(&mut unfreed),
            };
            for (holder, place) in places {
                if let Err(e) = store.free_place(&holder, &place).await {
                    tracing::warn!(%holder, error = %e, "a cluster-wide place could not be freed: tried again shortly");
                    unfreed.push((holder, place));
                }
            }
        }
    };
    tokio::join!(renewing, freeing);
}
