//! Rate limits: one door for the sign-in throttles, the robot token's
//! request limit and the write quotas. Each limit is a GCRA: a burst, then
//! one more every interval. Where its state lives is the deployment's:
//! - one instance: in memory (`governor`), a short string and a time per
//!   key, swept once a key's budget has recovered;
//! - cluster mode: in the database (`rate_limits`, one row per key, spent
//!   in one statement), so a limit holds however a client's requests are
//!   spread over the instances (issue "Scale out").

use crate::store::SharedStore;
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::time::Duration;

/// A burst of `burst`, then one more every `every`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub burst: u32,
    pub every: Duration,
}

impl Rate {
    pub fn per_second(n: u32, burst: u32) -> Rate {
        Rate { burst: burst.max(1), every: Duration::from_secs(1) / n.max(1) }
    }

    pub fn per_minute(n: u32) -> Rate {
        let n = n.max(1);
        Rate { burst: n, every: Duration::from_secs(60) / n }
    }

    fn quota(self) -> Quota {
        Quota::with_period(self.every.max(Duration::from_nanos(1))).expect("a period").allow_burst(NonZeroU32::new(self.burst.max(1)).expect("at least one"))
    }
}

/// Where the limits of this instance keep their state.
#[derive(Clone)]
pub enum Kept {
    InMemory,
    /// Cluster mode: in the database every instance shares.
    InDatabase(SharedStore),
}

pub struct Limit {
    /// The limit's name: its keys' prefix in the database.
    name: &'static str,
    rate: Rate,
    state: State,
    /// Refuses a request whose budget the database could not tell.
    refuse_unread: bool,
}

/// How long a request is asked to wait when its limit could not be read
/// and the limit refuses then (`Limit::refusing_unread`).
const UNREAD_WAIT: Duration = Duration::from_secs(1);

enum State {
    Memory(DefaultKeyedRateLimiter<String>),
    Database(SharedStore),
}

impl Limit {
    pub fn new(name: &'static str, rate: Rate, kept: &Kept) -> Limit {
        let state = match kept {
            Kept::InMemory => State::Memory(RateLimiter::keyed(rate.quota())),
            Kept::InDatabase(store) => State::Database(store.clone()),
        };
        Limit { name, rate, state, refuse_unread: false }
    }

    /// This limit, refusing (for `UNREAD_WAIT`) what it cannot read its
    /// budget for, rather than letting it through: for a limit that guards
    /// passwords, which must hold while a flood starves the database of
    /// connections (a request that could not spend its budget may still
    /// get one to check its guess).
    pub fn refusing_unread(self) -> Limit {
        Limit { refuse_unread: true, ..self }
    }

    /// Takes one for `key`; `Err(wait)` when its budget is spent. A
    /// database that does not answer lets the request through (logged):
    /// what it asked for will need the database anyway; unless the limit
    /// is `refusing_unread`.
    pub async fn take(&self, key: &str) -> Result<(), Duration> {
        match &self.state {
            State::Memory(limiter) => {
                // The limiter's own clock: a new one reads the CPU's
                // features and calibrates (measured: a tenth of the server's
                // CPU in the full cycle when made per request).
                let now = limiter.clock().now();
                limiter.check_key(&key.to_string()).map_err(|not_until| not_until.wait_time_from(now))
            }
            State::Database(store) => {
                let every_ms = (self.rate.every.as_millis() as i64).max(1);
                match store.spend_limit(&format!("{}:{key}", self.name), crate::clock::now_ms(), every_ms, i64::from(self.rate.burst)).await {
                    Ok(None) => Ok(()),
                    Ok(Some(wait_ms)) => Err(Duration::from_millis(wait_ms.max(1) as u64)),
                    Err(e) if self.refuse_unread => {
                        tracing::warn!(limit = self.name, error = %e, "a rate limit could not be read: the request is refused");
                        Err(UNREAD_WAIT)
                    }
                    Err(e) => {
                        tracing::warn!(limit = self.name, error = %e, "a rate limit could not be read: the request goes through");
                        Ok(())
                    }
                }
            }
        }
    }

    /// Forgets keys whose budget has recovered (in memory; the database's
    /// are swept by `forget_recovered_limits`).
    pub fn sweep(&self) {
        if let State::Memory(limiter) = &self.state {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// Keys held in memory.
    pub fn len(&self) -> usize {
        match &self.state {
            State::Memory(limiter) => limiter.len(),
            State::Database(_) => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit kept in a database it cannot read lets a request through,
    /// unless it refuses then (a sign-in throttle).
    #[tokio::test]
    async fn a_limit_that_cannot_read_its_budget_refuses_only_if_it_guards_passwords() {
        let (_dir, store, connection) = crate::store::sqlite_to_explain().await;
        connection.execute_batch("DROP TABLE rate_limits").unwrap();
        let (rate, kept) = (Rate { burst: 3, every: Duration::from_secs(2) }, Kept::InDatabase(store));
        assert_eq!(Limit::new("writes", rate, &kept).take("k").await, Ok(()));
        assert_eq!(Limit::new("sign-in", rate, &kept).refusing_unread().take("k").await, Err(UNREAD_WAIT));
    }

    #[tokio::test]
    async fn a_key_gets_its_burst_then_waits_about_one_interval() {
        let limit = Limit::new("t", Rate { burst: 3, every: Duration::from_secs(2) }, &Kept::InMemory);
        for _ in 0..3 {
            assert_eq!(limit.take("a").await, Ok(()));
        }
        let wait = limit.take("a").await.unwrap_err();
        assert!(wait > Duration::from_secs(1) && wait <= Duration::from_secs(2), "{wait:?}");
        assert_eq!(limit.take("b").await, Ok(()), "keys are apart");
        assert_eq!(limit.len(), 2);
    }

    #[test]
    fn rates_per_second_and_per_minute() {
        assert_eq!(Rate::per_second(50, 100), Rate { burst: 100, every: Duration::from_millis(20) });
        assert_eq!(Rate::per_minute(60), Rate { burst: 60, every: Duration::from_secs(1) });
    }
}
