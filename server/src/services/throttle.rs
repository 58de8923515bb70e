//! How often sign-in may be tried: per client address, and per (address,
//! email) pair.
//!
//! Each attempt takes its permit before the password is checked, in one
//! atomic step of a GCRA rate limiter (`governor`): 64 parallel guesses
//! cannot all slip past a check that is only recorded afterwards. Limits are
//! per address, never per email alone, so a flood from one address never
//! locks the person out when they sign in from another. State is a few
//! bytes per key and is swept once a key's limit has recovered, so a flood
//! of distinct emails cannot grow it without bound.

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// Attempts one email may have from one address: a burst of this many,
/// then one more every `PAIR_REFILL`.
pub const PAIR_BURST: u32 = 5;
pub const PAIR_REFILL: Duration = Duration::from_secs(12);
/// Attempts per address per minute (any emails): generous enough for a
/// shift of operators behind one NAT, small enough to stop spraying.
pub const DEFAULT_PER_ADDRESS_PER_MINUTE: u32 = 60;

pub struct SignInThrottle {
    per_address: DefaultKeyedRateLimiter<IpAddr>,
    /// The email is kept as a keyed hash: fixed size, and no addresses of
    /// people in memory.
    per_pair: DefaultKeyedRateLimiter<(IpAddr, u64)>,
    hasher: RandomState,
}

impl SignInThrottle {
    pub fn new(per_address_per_minute: u32) -> SignInThrottle {
        let per_minute = NonZeroU32::new(per_address_per_minute.max(1)).expect("at least one");
        let pair = Quota::with_period(PAIR_REFILL).expect("non-zero period").allow_burst(NonZeroU32::new(PAIR_BURST).expect("non-zero"));
        SignInThrottle {
            per_address: RateLimiter::keyed(Quota::per_minute(per_minute)),
            per_pair: RateLimiter::keyed(pair),
            hasher: RandomState::new(),
        }
    }

    /// Takes one attempt for `email` from `address`; `Err(wait)` when either
    /// limit is spent. The address is charged first, so an address over its
    /// limit adds no per-email state at all.
    pub fn admit(&self, address: IpAddr, email: &str) -> Result<(), Duration> {
        let address = crate::http::client::limit_key(address);
        let now = DefaultClock::default().now();
        self.per_address.check_key(&address).map_err(|not_until| not_until.wait_time_from(now))?;
        let pair = (address, self.hasher.hash_one(email));
        self.per_pair.check_key(&pair).map_err(|not_until| not_until.wait_time_from(now))
    }

    /// Forgets keys whose limits have fully recovered.
    pub fn sweep(&self) {
        self.per_address.retain_recent();
        self.per_pair.retain_recent();
        self.per_address.shrink_to_fit();
        self.per_pair.shrink_to_fit();
    }

    /// Keys held (addresses, pairs).
    pub fn len(&self) -> (usize, usize) {
        (self.per_address.len(), self.per_pair.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_pair_gets_its_burst_then_waits_and_other_addresses_are_unaffected() {
        let t = SignInThrottle::new(1_000);
        for _ in 0..PAIR_BURST {
            assert_eq!(t.admit(ip(1), "a@x"), Ok(()));
        }
        let wait = t.admit(ip(1), "a@x").unwrap_err();
        assert!(wait > Duration::from_secs(5) && wait <= PAIR_REFILL, "{wait:?}");
        assert_eq!(t.admit(ip(2), "a@x"), Ok(()), "the same person from another address gets in");
        assert_eq!(t.admit(ip(1), "b@x"), Ok(()), "another email from the same address is its own pair");
    }

    #[test]
    fn an_address_is_limited_across_emails() {
        let t = SignInThrottle::new(10);
        for i in 0..10 {
            assert_eq!(t.admit(ip(1), &format!("u{i}@x")), Ok(()));
        }
        assert!(t.admit(ip(1), "u99@x").is_err(), "spraying many emails from one address stops");
        assert_eq!(t.admit(ip(2), "u99@x"), Ok(()));
        assert_eq!(t.len().1, 11, "a refused address adds no per-email state");
    }
}
