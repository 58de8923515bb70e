//! Seed 001's inactivity chain (rule L07): while a session is ACTIVE the
//! platform checks periodically (`ACTIVITY_CHECK`); no operator input for
//! the warning interval → `INACTIVITY_WARNING`; still none for the stop
//! interval after it → `INACTIVITY_STOP`, and the session is cancelled.
//! A PAUSED session runs no chain. Pure: the engine calls it with times.

use serde::{Deserialize, Serialize};

/// The chain's intervals (defaults: check 30 s, warn after 120 s idle, stop
/// 60 s after the warning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InactivityPolicy {
    pub check_ms: i64,
    pub warning_after_ms: i64,
    pub stop_after_warning_ms: i64,
}

impl Default for InactivityPolicy {
    fn default() -> Self {
        InactivityPolicy { check_ms: 30_000, warning_after_ms: 120_000, stop_after_warning_ms: 60_000 }
    }
}

/// What the chain knows of one ACTIVE session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    pub last_input_ms: i64,
    pub last_check_ms: i64,
    pub warned_at_ms: Option<i64>,
}

impl Watch {
    /// Starts (or restarts, on resume) the chain at `now`.
    pub fn start(now: i64) -> Watch {
        Watch { last_input_ms: now, last_check_ms: now, warned_at_ms: None }
    }

    /// Operator input: the idle time starts over and a warning is lifted.
    pub fn input(&mut self, now: i64) {
        self.last_input_ms = self.last_input_ms.max(now);
        self.warned_at_ms = None;
    }

    /// When a warned session is cancelled (what its warning tells the
    /// operator); `None` while it is not warned.
    pub fn stops_at(&self, policy: &InactivityPolicy) -> Option<i64> {
        self.warned_at_ms.map(|warned| warned + policy.stop_after_warning_ms)
    }
}

/// What is due at a moment, and when to look again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InactivityDue {
    /// Write an `ACTIVITY_CHECK`.
    pub check: bool,
    /// Write an `INACTIVITY_WARNING` and tell the operator.
    pub warn: bool,
    /// Write an `INACTIVITY_STOP` and cancel the session.
    pub stop: bool,
    /// The next moment something can be due (unless input moves it later).
    pub next_at_ms: i64,
}

/// Applies the chain at `now`, updating `watch`.
pub fn inactivity_due(policy: &InactivityPolicy, watch: &mut Watch, now: i64) -> InactivityDue {
    let check = now - watch.last_check_ms >= policy.check_ms;
    if check {
        watch.last_check_ms = now;
    }
    let stop = watch.warned_at_ms.is_some_and(|warned| now - warned >= policy.stop_after_warning_ms);
    let warn = !stop && watch.warned_at_ms.is_none() && now - watch.last_input_ms >= policy.warning_after_ms;
    if warn {
        watch.warned_at_ms = Some(now);
    }
    let threshold = watch.stops_at(policy).unwrap_or(watch.last_input_ms + policy.warning_after_ms);
    InactivityDue { check, warn, stop, next_at_ms: (watch.last_check_ms + policy.check_ms).min(threshold) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the chain from `start` as the engine would (waking at each
    /// `next_at_ms`), with operator input at `inputs`, until it stops or
    /// `until`; returns what happened and when.
    fn run(policy: InactivityPolicy, inputs: &[i64], until: i64) -> Vec<(i64, &'static str)> {
        let mut watch = Watch::start(0);
        let mut log = Vec::new();
        let mut at = 0;
        let mut inputs = inputs.to_vec();
        loop {
            let due = inactivity_due(&policy, &mut watch, at);
            if due.check {
                log.push((at, "check"));
            }
            if due.warn {
                log.push((at, "warn"));
            }
            if due.stop {
                log.push((at, "stop"));
                return log;
            }
            let next = due.next_at_ms;
            while inputs.first().is_some_and(|i| *i <= next) {
                watch.input(inputs.remove(0));
            }
            if next > until {
                return log;
            }
            at = next;
        }
    }

    #[test]
    fn l07_no_input_checks_every_30_s_warns_at_120_s_and_stops_60_s_later() {
        let log = run(InactivityPolicy::default(), &[], 10_000_000);
        assert_eq!(
            log,
            [(30_000, "check"), (60_000, "check"), (90_000, "check"), (120_000, "check"), (120_000, "warn"), (150_000, "check"), (180_000, "check"), (180_000, "stop")]
        );
    }

    #[test]
    fn l07_input_resets_the_idle_time_and_lifts_a_warning() {
        // Input at 100 s: the warning comes at 220 s instead of 120 s.
        let log = run(InactivityPolicy::default(), &[100_000], 10_000_000);
        assert!(log.contains(&(220_000, "warn")) && !log.iter().any(|(at, what)| *what == "warn" && *at < 220_000), "{log:?}");
        // Input after the warning (at 130 s) lifts it: no stop at 180 s.
        let log = run(InactivityPolicy::default(), &[130_000], 10_000_000);
        assert_eq!(log.iter().filter(|(_, w)| *w == "warn").map(|(at, _)| *at).collect::<Vec<_>>(), [120_000, 250_000]);
        assert_eq!(log.last(), Some(&(310_000, "stop")));
    }

    #[test]
    fn l07_steady_input_never_warns_and_intervals_are_configurable() {
        let inputs: Vec<i64> = (1..100).map(|i| i * 50_000).collect();
        let log = run(InactivityPolicy::default(), &inputs, 4_000_000);
        assert!(log.iter().all(|(_, w)| *w == "check"), "{log:?}");
        let short = InactivityPolicy { check_ms: 100, warning_after_ms: 250, stop_after_warning_ms: 100 };
        assert_eq!(run(short, &[], 10_000), [(100, "check"), (200, "check"), (250, "warn"), (300, "check"), (350, "stop")]);
    }
}
