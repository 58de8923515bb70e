//! Caps that hold across a cluster's instances (issue "Scale out"): a
//! person's open sockets, a robot's relay sockets, an API key's streams,
//! an org's running exports. One instance counts them in memory (`tabs`,
//! `datasets`); in cluster mode each place is also taken in the database,
//! where every instance counts it.
//!
//! A place belongs to the run of the instance that took it. The run says
//! it is alive every `RENEW_EVERY`; when it stops (killed, cut off from the
//! database), its places stop counting `RUN_LASTS` after its last word, so
//! a dead instance's sockets do not hold their holders' places for ever.

use crate::store::SharedStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a run's places count after it last said it is alive.
pub const RUN_LASTS: Duration = Duration::from_secs(10);
const RENEW_EVERY: Duration = Duration::from_secs(3);
/// When a lapsed run's rows are deleted (they stopped counting at once).
const FORGOTTEN_AFTER: Duration = Duration::from_secs(3600);

/// This run's places in the database.
pub struct SharedPlaces {
    store: SharedStore,
    run: String,
    next: AtomicU64,
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
        // (The keeper has stopped with the server: the run lapses instead.)
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
        Ok((Arc::new(SharedPlaces { store, run, next: AtomicU64::new(0), freed }), keeper))
    }

    /// One more place for `holder`, whose places across the cluster may
    /// be `cap` at most. A database that does not answer lets it through
    /// (logged; `None`), as the rate limits do: this instance's own count
    /// still holds.
    pub async fn take(&self, holder: &str, cap: usize) -> Result<Option<Place>, CapReached> {
        let place = format!("{}#{}", self.run, self.next.fetch_add(1, Ordering::Relaxed));
        match self.store.take_place(holder, &place, &self.run, cap as i64, crate::clock::now_ms()).await {
            Ok(true) => Ok(Some(Place { holder: holder.to_string(), place, freed: self.freed.clone() })),
            Ok(false) => Err(CapReached),
            Err(e) => {
                tracing::warn!(%holder, error = %e, "a cluster-wide cap could not be read: counted on this instance only");
                Ok(None)
            }
        }
    }
}

async fn renew(store: &SharedStore, run: &str) -> crate::store::StoreResult<()> {
    let now = crate::clock::now_ms();
    store.renew_run(run, now + RUN_LASTS.as_millis() as i64, now - FORGOTTEN_AFTER.as_millis() as i64).await
}

async fn keep(store: SharedStore, run: String, mut to_free: mpsc::UnboundedReceiver<(String, String)>) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            freed = to_free.recv() => {
                let Some((holder, place)) = freed else { return };
                if let Err(e) = store.free_place(&holder, &place).await {
                    // It lapses with this run, if not before.
                    tracing::warn!(%holder, error = %e, "a cluster-wide place could not be freed");
                }
            }
            _ = tick.tick() => {
                if let Err(e) = renew(&store, &run).await {
                    tracing::warn!(error = %e, "this instance could not renew its cluster-wide places: they stop counting if this lasts");
                }
            }
        }
    }
}
