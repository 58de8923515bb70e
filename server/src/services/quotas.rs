//! How often each kind of write may be made (issue "Hardening II",
//! finding 13): chat posts per person, invitations and imports per org,
//! invitation links opened per client address. Each is a GCRA limit
//! (`governor`) taken before the write; past it the answer is 429 with
//! `Retry-After`. State is a few bytes per key, swept with the sign-in
//! limits (in cluster mode, a row per key in the database). (Bookings have their own caps, counted in the store's
//! transaction; exports their places, `datasets::EXPORTS_PER_ORG`.)

use super::limits::{Kept, Limit, Rate};
use std::time::Duration;

/// A kind of write with a quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// A chat message, per person: 30 a minute.
    Chat,
    /// An invitation made, per org: 100 an hour.
    Invite,
    /// A CSV import (or its preview), per org: 20 an hour.
    Import,
    /// An invitation link opened, per client address (an IPv6 /64): 60 a
    /// minute. (Taking one up is throttled like a sign-in.)
    InvitationLink,
    /// A booking made, per person: 60 an hour.
    Booking,
}

impl Write {
    /// (burst, one more every `period`).
    /// Its keys' prefix where limits are shared.
    fn name(self) -> &'static str {
        match self {
            Write::Chat => "chat",
            Write::Invite => "invite",
            Write::Import => "import",
            Write::InvitationLink => "invitation-link",
            Write::Booking => "booking",
        }
    }

    fn rate(self) -> Rate {
        let (burst, period) = match self {
            Write::Chat => (30, Duration::from_secs(2)),
            Write::Invite => (100, Duration::from_secs(36)),
            Write::Import => (20, Duration::from_secs(180)),
            Write::InvitationLink => (60, Duration::from_secs(1)),
            Write::Booking => (60, Duration::from_secs(60)),
        };
        Rate { burst, every: period }
    }
}

pub struct Quotas {
    limits: Vec<(Write, Limit)>,
}

impl Quotas {
    pub fn new(kept: &Kept) -> Quotas {
        let kinds = [Write::Chat, Write::Invite, Write::Import, Write::InvitationLink, Write::Booking];
        Quotas { limits: kinds.into_iter().map(|kind| (kind, Limit::new(kind.name(), kind.rate(), kept))).collect() }
    }

    /// Takes one `kind` of write for `who` (a person, an org or an
    /// address); `Err(wait)` when the quota is spent.
    pub async fn admit(&self, kind: Write, who: &str) -> Result<(), Duration> {
        let limit = &self.limits.iter().find(|(k, _)| *k == kind).expect("every kind has a limit").1;
        limit.take(who).await
    }

    /// Forgets keys whose limits have fully recovered.
    pub fn sweep(&self) {
        for (_, limit) in &self.limits {
            limit.sweep();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn s13_a_quota_is_per_kind_and_per_key_and_says_how_long_to_wait() {
        let quotas = Quotas::new(&Kept::InMemory);
        for _ in 0..30 {
            assert!(quotas.admit(Write::Chat, "u1").await.is_ok());
        }
        let wait = quotas.admit(Write::Chat, "u1").await.unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(2), "{wait:?}");
        assert!(quotas.admit(Write::Chat, "u2").await.is_ok(), "another person is not held back");
        assert!(quotas.admit(Write::Booking, "u1").await.is_ok(), "nor another kind of write");
    }
}
