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
    /// The org's RTT ceilings per skill (rules A15–A17): what a waiting
    /// call's ceiling is now and when it next relaxes, on a ticking clock.
    #[serde(default)]
    pub ceilings: Vec<crate::dispatch::RttCeiling>,
    pub queue: Vec<QueueDepth>,
    /// Calls raised since midnight UTC.
    pub today: AnswerSpeed,
    /// The relay's counts of the org's session channels (rule W15).
    #[serde(default)]
    pub relay: Vec<crate::relay::RelayStat>,
    /// Webhook endpoints disabled after failing for 24 h (their URLs): the
    /// admins are told on the overview until one is enabled or removed.
    #[serde(default)]
    pub disabled_webhooks: Vec<String>,
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
    /// Of the answered calls of skills with an RTT ceiling: offered under
    /// their first ceiling, and offered only after it relaxed (rule A17).
    #[serde(default)]
    pub answered_first_ceiling: usize,
    #[serde(default)]
    pub answered_after_relaxing: usize,
}

/// One answered call as the ceiling split needs it: its skill, when it was
/// raised and when the offer it was answered on was made.
pub struct AnsweredOffer {
    pub skill: String,
    pub raised_at_ms: i64,
    pub offered_at_ms: i64,
}

/// Rule A17: answered calls of skills with a ceiling, split into those
/// offered under their first ceiling and those offered after it relaxed.
pub fn split_by_ceiling(ceilings: &[crate::dispatch::RttCeiling], answered: &[AnsweredOffer]) -> (usize, usize) {
    let mut split = (0, 0);
    for a in answered {
        let Some(c) = ceilings.iter().find(|c| c.skill == a.skill) else { continue };
        match c.first_ceiling_held(a.offered_at_ms - a.raised_at_ms) {
            true => split.0 += 1,
            false => split.1 += 1,
        }
    }
    split
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
        let today = AnswerSpeed { answered: 3, answer_ms_total: 45_000, answered_within_20s: 2, withdrawn: 1, ..AnswerSpeed::default() };
        assert_eq!(today.average_ms(), Some(15_000));
        assert_eq!(today.within_20s_percent(), Some(67));
        assert_eq!(utc_midnight(86_400_000 * 3 + 5), 86_400_000 * 3);
    }

    #[test]
    fn a17_answered_calls_split_by_whether_their_first_ceiling_still_held() {
        use crate::dispatch::RttCeiling;
        let ceilings = [RttCeiling { skill: "welding".into(), ceiling_ms: 150, step_ms: 50, every_s: 30, lifted_after_s: 300 }];
        let answered = |skill: &str, after: i64| AnsweredOffer { skill: skill.into(), raised_at_ms: 1_000, offered_at_ms: 1_000 + after };
        let calls = [answered("welding", 0), answered("welding", 29_999), answered("welding", 30_000), answered("welding", 400_000), answered("pick-place", 90_000)];
        assert_eq!(split_by_ceiling(&ceilings, &calls), (2, 2), "a skill without a ceiling is in neither");
    }
}
