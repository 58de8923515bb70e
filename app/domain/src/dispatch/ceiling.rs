//! RTT ceilings per skill (rules A15–A17). An org may keep operators whose
//! round trip to the robot's PoP is too long off a skill's calls; while a
//! call waits, its ceiling relaxes in steps until none is left, so a call
//! is never left unserved for good by its own ceiling. Certification never
//! relaxes: the ceiling only ever applies to certified operators.

use serde::{Deserialize, Serialize};

/// How far a ceiling rises at each step, by default (ms).
pub const DEFAULT_STEP_MS: u32 = 50;
/// How long a call waits between steps, by default (s).
pub const DEFAULT_EVERY_S: u32 = 30;
/// After how long a call has no ceiling at all, by default (s).
pub const DEFAULT_LIFTED_AFTER_S: u32 = 300;
/// The longest a ceiling may hold a call (a day).
pub const MAX_LIFTED_AFTER_S: u32 = 86_400;

/// One skill's ceiling in one org.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RttCeiling {
    pub skill: String,
    /// The ceiling a call starts with (effective RTT, ms).
    pub ceiling_ms: u32,
    /// How much it rises at each step (ms); 0 keeps it until it is lifted.
    pub step_ms: u32,
    /// How long a call waits between steps (s).
    pub every_s: u32,
    /// How long after the raise the ceiling is lifted altogether (s).
    pub lifted_after_s: u32,
}

impl RttCeiling {
    /// A ceiling with the default relaxation.
    pub fn new(skill: &str, ceiling_ms: u32) -> RttCeiling {
        RttCeiling { skill: skill.into(), ceiling_ms, step_ms: DEFAULT_STEP_MS, every_s: DEFAULT_EVERY_S, lifted_after_s: DEFAULT_LIFTED_AFTER_S }
    }

    /// The ceiling of a call that has waited `waited_ms` (rule A16); `None`
    /// once it is lifted.
    pub fn after(&self, waited_ms: i64) -> Option<u32> {
        let waited = waited_ms.max(0);
        if waited >= i64::from(self.lifted_after_s) * 1000 {
            return None;
        }
        let steps = waited / (i64::from(self.every_s.max(1)) * 1000);
        let raised = i64::from(self.ceiling_ms) + steps * i64::from(self.step_ms);
        Some(u32::try_from(raised).unwrap_or(u32::MAX))
    }

    /// How long after the raise the ceiling next changes (a step, or its
    /// lifting): when the engine looks at a waiting call again. `None` once
    /// it is lifted.
    pub fn next_relaxation(&self, waited_ms: i64) -> Option<i64> {
        self.after(waited_ms)?;
        let lifted = i64::from(self.lifted_after_s) * 1000;
        if self.step_ms == 0 {
            return Some(lifted); // steps of 0 ms change nothing
        }
        let every = i64::from(self.every_s.max(1)) * 1000;
        let next_step = (waited_ms.max(0) / every + 1) * every;
        Some(next_step.min(lifted))
    }

    /// Whether a call offered `offered_after_ms` after its raise was offered
    /// under its first ceiling, before any relaxation (rule A17's split of
    /// the answer-speed figure).
    pub fn first_ceiling_held(&self, offered_after_ms: i64) -> bool {
        self.after(offered_after_ms) == Some(self.ceiling_ms) && self.next_relaxation(0).is_some_and(|at| offered_after_ms < at)
    }
}

/// Whether an operator at `rtt_ms` may be offered a call whose ceiling is
/// `ceiling` (rule A15).
pub fn within_ceiling(rtt_ms: u32, ceiling: Option<u32>) -> bool {
    ceiling.is_none_or(|c| rtt_ms <= c)
}

/// What is wrong with a ceiling an admin entered, in a sentence. A call
/// nobody takes is cancelled `pending_timeout_ms` after its raise, so a
/// ceiling must be lifted before that (rule A16: a call is never left
/// unserved for good by its own ceiling).
pub fn ceiling_problem(c: &RttCeiling, pending_timeout_ms: i64) -> Option<String> {
    if c.skill.trim().is_empty() {
        return Some("Name the skill the ceiling is for.".into());
    }
    if crate::rules::skill_of(&c.skill).ok() != Some(c.skill.trim()) {
        return Some("Name the skill alone, without its tier (\"welding\", not \"welding · tier-2\").".into());
    }
    if c.ceiling_ms == 0 || c.ceiling_ms > super::MAX_RTT_MS {
        return Some(format!("The ceiling must be between 1 and {} ms.", super::MAX_RTT_MS));
    }
    if c.step_ms > super::MAX_RTT_MS {
        return Some(format!("A step may raise the ceiling by at most {} ms.", super::MAX_RTT_MS));
    }
    if c.every_s == 0 {
        return Some("A call waits at least 1 s between steps.".into());
    }
    if c.lifted_after_s == 0 || c.lifted_after_s > MAX_LIFTED_AFTER_S {
        return Some(format!("The ceiling is lifted between 1 s and {MAX_LIFTED_AFTER_S} s (a day) after the raise."));
    }
    if i64::from(c.lifted_after_s) * 1000 >= pending_timeout_ms {
        return Some(format!(
            "The ceiling must be lifted before a waiting call is cancelled ({} s after its raise).",
            pending_timeout_ms / 1000
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn welding() -> RttCeiling {
        RttCeiling { skill: "welding".into(), ceiling_ms: 150, step_ms: 50, every_s: 30, lifted_after_s: 120 }
    }

    #[test]
    fn a16_a_waiting_calls_ceiling_rises_a_step_at_a_time_until_it_is_lifted() {
        let c = welding();
        assert_eq!(c.after(0), Some(150));
        assert_eq!(c.after(29_999), Some(150));
        assert_eq!(c.after(30_000), Some(200));
        assert_eq!(c.after(90_000), Some(300));
        assert_eq!(c.after(119_999), Some(300));
        assert_eq!(c.after(120_000), None, "lifted");
        assert_eq!(c.after(-5), Some(150), "a clock a little behind the raise");
    }

    #[test]
    fn a16_the_next_relaxation_is_the_next_step_or_the_lifting_whichever_comes_first() {
        let c = welding();
        assert_eq!(c.next_relaxation(0), Some(30_000));
        assert_eq!(c.next_relaxation(30_000), Some(60_000));
        assert_eq!(c.next_relaxation(95_000), Some(120_000), "the lifting, not a step at 120 s");
        assert_eq!(c.next_relaxation(120_000), None);
        let short = RttCeiling { lifted_after_s: 10, ..welding() };
        assert_eq!(short.next_relaxation(0), Some(10_000), "lifted before the first step");
        let flat = RttCeiling { step_ms: 0, ..welding() };
        assert_eq!(flat.next_relaxation(0), Some(120_000), "no steps: the next change is the lifting");
    }

    #[test]
    fn a15_an_operator_above_the_ceiling_is_not_within_it() {
        assert!(within_ceiling(150, Some(150)));
        assert!(!within_ceiling(151, Some(150)));
        assert!(within_ceiling(9_000, None));
    }

    #[test]
    fn a17_an_offer_before_the_first_step_was_under_the_first_ceiling() {
        let c = welding();
        assert!(c.first_ceiling_held(0));
        assert!(c.first_ceiling_held(29_999));
        assert!(!c.first_ceiling_held(30_000));
        assert!(!c.first_ceiling_held(500_000));
    }

    #[test]
    fn a15_a_ceiling_out_of_range_is_refused_with_a_sentence() {
        const PENDING: i64 = 900_000;
        assert_eq!(ceiling_problem(&welding(), PENDING), None);
        assert!(ceiling_problem(&RttCeiling { skill: " ".into(), ..welding() }, PENDING).is_some());
        assert!(ceiling_problem(&RttCeiling { skill: "welding · tier-2".into(), ..welding() }, PENDING).is_some(), "a tier never matches a call's skill");
        assert!(ceiling_problem(&RttCeiling { ceiling_ms: 0, ..welding() }, PENDING).is_some());
        assert!(ceiling_problem(&RttCeiling { every_s: 0, ..welding() }, PENDING).is_some());
        assert!(ceiling_problem(&RttCeiling { lifted_after_s: MAX_LIFTED_AFTER_S + 1, ..welding() }, MAX_LIFTED_AFTER_S as i64 * 2000).is_some());
        assert_eq!(ceiling_problem(&RttCeiling { lifted_after_s: 899, ..welding() }, PENDING), None);
        assert!(ceiling_problem(&RttCeiling { lifted_after_s: 900, ..welding() }, PENDING).is_some(), "lifted only as the call is cancelled");
    }
}
