//! Time as Unix milliseconds, the unit every stored time uses.
//!
//! The engine takes a `Clock` rather than reading the system time, and its
//! timers sleep on tokio's clock: a test that pauses tokio's time moves a
//! clock's "now" and its deadlines together, without sleeping. (SQLite's
//! dispatchers run on a runtime of their own, `engine/thread.rs`, whose
//! time a test's pause does not stop.)

use std::time::{SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// Wall time read once, advanced by tokio's monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin_ms: i64,
    origin: Instant,
}

impl Clock {
    /// Starts at the system time now.
    pub fn system() -> Clock {
        Clock::starting_at(now_ms())
    }

    /// Starts at `origin_ms` (tests pin it).
    pub fn starting_at(origin_ms: i64) -> Clock {
        Clock { origin_ms, origin: Instant::now() }
    }

    pub fn now_ms(&self) -> i64 {
        self.origin_ms + self.origin.elapsed().as_millis() as i64
    }

    /// The tokio instant at which this clock reads `at_ms`.
    pub fn instant_at(&self, at_ms: i64) -> Instant {
        let offset = (at_ms - self.origin_ms).max(0) as u64;
        self.origin + std::time::Duration::from_millis(offset)
    }
}

/// The system's wall time, for code outside the engine (sign-in sessions,
/// heartbeats).
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_clock_follows_tokio_time() {
        let clock = Clock::starting_at(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        tokio::time::advance(std::time::Duration::from_millis(2_500)).await;
        assert_eq!(clock.now_ms(), 3_500);
        assert_eq!(clock.instant_at(4_000) - Instant::now(), std::time::Duration::from_millis(500));
    }
}
