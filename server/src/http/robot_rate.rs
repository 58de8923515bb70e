//! The demo robot tokens are public, and any token can leak: each robot
//! token may make `PER_SECOND` API requests a second (with a burst of
//! `BURST`), beyond which `/v1` answers 429 with `Retry-After`. Only known
//! tokens are counted, so the state is one entry per robot (in cluster
//! mode, one row per robot in the database every instance spends from).

use crate::services::limits::{Kept, Limit, Rate};
use std::time::Duration;

pub const PER_SECOND: u32 = 50;
pub const BURST: u32 = 100;

pub struct RobotRateLimit {
    limit: Limit,
}

impl RobotRateLimit {
    pub fn new(kept: &Kept) -> RobotRateLimit {
        RobotRateLimit { limit: Limit::new("robot", Rate::per_second(PER_SECOND, BURST), kept) }
    }

    /// Takes one request for the robot behind `token_hash`; `Err(wait)` when spent.
    pub async fn admit(&self, token_hash: &str) -> Result<(), Duration> {
        self.limit.take(token_hash).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_gets_its_burst_then_waits_and_others_are_unaffected() {
        let limit = RobotRateLimit::new(&Kept::InMemory);
        // The limit refills on the real clock: a run slowed by a loaded
        // machine may be given the tokens refilled meanwhile, never more.
        let started = std::time::Instant::now();
        let refilled = || started.elapsed().as_millis() as u32 * PER_SECOND / 1000 + 1;
        let mut admitted = 0;
        let wait = loop {
            match limit.admit("a").await {
                Ok(()) => admitted += 1,
                Err(wait) => break wait,
            }
            assert!(admitted <= BURST + refilled(), "{admitted} admitted");
        };
        assert!(admitted >= BURST, "only {admitted} admitted");
        assert!(wait <= Duration::from_millis(1000 / u64::from(PER_SECOND) + 1), "{wait:?}");
        assert!(limit.admit("b").await.is_ok());
    }
}
