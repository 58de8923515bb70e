//! How often sign-in may be tried: per client address, and per (address,
//! email) pair.
//!
//! Each attempt takes its permit before the password is checked, in one
//! atomic step of a GCRA rate limiter (`governor`): 64 parallel guesses
//! cannot all slip past a check that is only recorded afterwards. Limits are
//! per address, never per email alone, so a flood from one address never
//! locks the person out when they sign in from another. State is a few
//! bytes per key and is swept once a key's limit has recovered, so a flood
//! of distinct emails cannot grow it without bound. In cluster mode the
//! limits are kept in the database (`limits::Kept`), so spreading guesses
//! over the instances gains nothing, and an attempt whose limit could not
//! be read there is refused, not let through.

use super::limits::{Kept, Limit, Rate};
use std::net::IpAddr;
use std::time::Duration;

/// Attempts one email may have from one address: a burst of this many,
/// then one more every `PAIR_REFILL`.
pub const PAIR_BURST: u32 = 5;
pub const PAIR_REFILL: Duration = Duration::from_secs(12);
/// Attempts per address per minute (any emails): generous enough for a
/// shift of operators behind one NAT, small enough to stop spraying.
pub const DEFAULT_PER_ADDRESS_PER_MINUTE: u32 = 60;

pub struct SignInThrottle {
    per_address: Limit,
    /// The email is kept as its SHA-256: fixed size, and not the address
    /// itself (in memory, or in the database in cluster mode).
    per_pair: Limit,
}

impl SignInThrottle {
    pub fn new(per_address_per_minute: u32, kept: &Kept) -> SignInThrottle {
        SignInThrottle {
            per_address: Limit::new("sign-in-address", Rate::per_minute(per_address_per_minute), kept).refusing_unread(),
            per_pair: Limit::new("sign-in-pair", Rate { burst: PAIR_BURST, every: PAIR_REFILL }, kept).refusing_unread(),
        }
    }

    /// Takes one attempt for `email` from `address`; `Err(wait)` when either
    /// limit is spent. The address is charged first, so an address over its
    /// limit adds no per-email state at all.
    pub async fn admit(&self, address: IpAddr, email: &str) -> Result<(), Duration> {
        let address = crate::http::client::limit_key(address).to_string();
        self.per_address.take(&address).await?;
        self.per_pair.take(&format!("{address}/{}", crate::auth::token_hash(email))).await
    }

    /// Forgets keys whose limits have fully recovered.
    pub fn sweep(&self) {
        self.per_address.sweep();
        self.per_pair.sweep();
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

    #[tokio::test]
    async fn a_pair_gets_its_burst_then_waits_and_other_addresses_are_unaffected() {
        let t = SignInThrottle::new(1_000, &Kept::InMemory);
        for _ in 0..PAIR_BURST {
            assert_eq!(t.admit(ip(1), "a@x").await, Ok(()));
        }
        let wait = t.admit(ip(1), "a@x").await.unwrap_err();
        assert!(wait > Duration::from_secs(5) && wait <= PAIR_REFILL, "{wait:?}");
        assert_eq!(t.admit(ip(2), "a@x").await, Ok(()), "the same person from another address gets in");
        assert_eq!(t.admit(ip(1), "b@x").await, Ok(()), "another email from the same address is its own pair");
    }

    #[tokio::test]
    async fn an_address_is_limited_across_emails() {
        let t = SignInThrottle::new(10, &Kept::InMemory);
        for i in 0..10 {
            assert_eq!(t.admit(ip(1), &format!("u{i}@x")).await, Ok(()));
        }
        assert!(t.admit(ip(1), "u99@x").await.is_err(), "spraying many emails from one address stops");
        assert_eq!(t.admit(ip(2), "u99@x").await, Ok(()));
        assert_eq!(t.len().1, 11, "a refused address adds no per-email state");
    }
}
