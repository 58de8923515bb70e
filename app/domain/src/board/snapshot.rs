//! The picture the live screens read in one request (`load_ops_board`),
//! and the figures computed from it.

use super::{estops_24h, operators_available, order_cards, Headline};
use crate::events::{AuditEntry, PresenceUpdate};
use crate::models::{LinkFloor, Operator, RegistryStatus, Robot, SessionRecord};
use serde::{Deserialize, Serialize};

/// One picture of the org for the live screens: read in one request, then
/// kept current by the org's events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpsBoard {
    pub org_name: String,
    /// ACTIVE and PAUSED sessions, unordered.
    pub live: Vec<SessionRecord>,
    pub robots: Vec<Robot>,
    pub operators: Vec<Operator>,
    pub presences: Vec<PresenceUpdate>,
    /// The org's audit records of the last 24 h, newest first (at most 200).
    pub audit: Vec<AuditEntry>,
    pub floors: Vec<LinkFloor>,
    pub queue: Vec<QueueDepth>,
    /// Calls raised since midnight UTC.
    pub today: AnswerSpeed,
    /// The relay's counts of the org's session channels (rule W15).
    #[serde(default)]
    pub relay: Vec<crate::relay::RelayStat>,
    pub as_of_ms: i64,
}

/// How fast today's calls were answered (beyond the seed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerSpeed {
    pub answered: usize,
    /// Sum of raise → attach times of the answered calls, ms.
    pub answer_ms_total: i64,
    pub answered_within_20s: usize,
    /// Withdrawn (cancelled by the edge agent) before anyone attached.
    pub withdrawn: usize,
    /// Cancelled by the platform after the pending timeout: nobody took it.
    #[serde(default)]
    pub abandoned: usize,
}

/// Calls answered this fast count as answered promptly.
pub const PROMPT_ANSWER_MS: i64 = 20_000;

impl AnswerSpeed {
    /// Average time to answer, when any call was answered.
    pub fn average_ms(&self) -> Option<i64> {
        (self.answered > 0).then(|| self.answer_ms_total / self.answered as i64)
    }

    /// Share answered within 20 s, as a rounded percentage.
    pub fn within_20s_percent(&self) -> Option<u32> {
        (self.answered > 0).then(|| ((self.answered_within_20s as f64 / self.answered as f64) * 100.0).round() as u32)
    }
}

/// Unix ms of the UTC midnight that began the day of `now_ms`.
pub fn utc_midnight(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(24 * 60 * 60 * 1000)
}

/// Calls waiting for one skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDepth {
    pub skill: String,
    pub waiting: usize,
    pub oldest_raised_at_ms: i64,
}

impl OpsBoard {
    /// Rules O01–O04 over this picture.
    pub fn headline(&self) -> Headline {
        Headline {
            live_sessions: self.live.len(),
            robots_online: self.robots.iter().filter(|r| r.status == RegistryStatus::Online).count(),
            robots_total: self.robots.len(),
            operators_available: operators_available(self.presences.iter().map(|p| p.state)),
            estops_24h: estops_24h(&self.audit, self.as_of_ms),
        }
    }

    /// The registry status of a robot (offline when unknown).
    pub fn robot_status(&self, robot_id: &str) -> RegistryStatus {
        self.robots.iter().find(|r| r.id == robot_id).map_or(RegistryStatus::Offline, |r| r.status)
    }

    /// The live cards in wallboard order (rule W04).
    pub fn cards(&self) -> Vec<SessionRecord> {
        let mut cards = self.live.clone();
        order_cards(&mut cards);
        cards
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_speed_averages_and_shares_only_answered_calls() {
        let none = AnswerSpeed::default();
        assert_eq!((none.average_ms(), none.within_20s_percent()), (None, None));
        let today = AnswerSpeed { answered: 3, answer_ms_total: 45_000, answered_within_20s: 2, withdrawn: 1, abandoned: 0 };
        assert_eq!(today.average_ms(), Some(15_000));
        assert_eq!(today.within_20s_percent(), Some(67));
        assert_eq!(utc_midnight(86_400_000 * 3 + 5), 86_400_000 * 3);
    }
}
