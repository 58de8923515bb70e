//! The demo robot tokens are public, and any token can leak: each robot
//! token may make `PER_SECOND` API requests a second (with a burst of
//! `BURST`), beyond which `/v1` answers 429 with `Retry-After`. Only known
//! tokens are counted, so the state is one entry per robot.

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::time::Duration;

pub const PER_SECOND: u32 = 50;
pub const BURST: u32 = 100;

pub struct RobotRateLimit {
    limiter: DefaultKeyedRateLimiter<String>,
}

impl Default for RobotRateLimit {
    fn default() -> Self {
        RobotRateLimit::new()
    }
}

impl RobotRateLimit {
    pub fn new() -> RobotRateLimit {
        let quota = Quota::per_second(NonZeroU32::new(PER_SECOND).expect("non-zero"))
            .allow_burst(NonZeroU32::new(BURST).expect("non-zero"));
        RobotRateLimit { limiter: RateLimiter::keyed(quota) }
    }

    /// Takes one request for the robot behind `token_hash`; `Err(wait)` when spent.
    pub fn admit(&self, token_hash: &str) -> Result<(), Duration> {
        let now = DefaultClock::default().now();
        self.limiter.check_key(&token_hash.to_string()).map_err(|not_until| not_until.wait_time_from(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_its_burst_then_waits_and_others_are_unaffected() {
        let limit = RobotRateLimit::new();
        for _ in 0..BURST {
            assert!(limit.admit("a").is_ok());
        }
        let wait = limit.admit("a").unwrap_err();
        assert!(wait <= Duration::from_millis(1000 / u64::from(PER_SECOND) + 1), "{wait:?}");
        assert!(limit.admit("b").is_ok());
    }
}
