//! Session lifecycle (seed 001) and the protective-stop latch (seed 000):
//! which transitions exist, which activity event each writes, and which
//! safety states telemetry may move to.

use crate::models::{LifecycleState, SafetyState};
use serde::{Deserialize, Serialize};

/// Activity events of seed 001, in the session's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActivityKind {
    SessionStart,
    SessionEnd,
    Pause,
    Resume,
    ActivityCheck,
    InactivityWarning,
    InactivityStop,
    OperatorSwitch,
    Error,
    /// An admin opened the session's live view (read-only).
    SupervisorJoined,
    SupervisorLeft,
}

impl ActivityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityKind::SessionStart => "SESSION_START",
            ActivityKind::SessionEnd => "SESSION_END",
            ActivityKind::Pause => "PAUSE",
            ActivityKind::Resume => "RESUME",
            ActivityKind::ActivityCheck => "ACTIVITY_CHECK",
            ActivityKind::InactivityWarning => "INACTIVITY_WARNING",
            ActivityKind::InactivityStop => "INACTIVITY_STOP",
            ActivityKind::OperatorSwitch => "OPERATOR_SWITCH",
            ActivityKind::Error => "ERROR",
            ActivityKind::SupervisorJoined => "SUPERVISOR_JOINED",
            ActivityKind::SupervisorLeft => "SUPERVISOR_LEFT",
        }
    }
}

impl ActivityKind {
    pub const ALL: [ActivityKind; 11] = [
        ActivityKind::SessionStart,
        ActivityKind::SessionEnd,
        ActivityKind::Pause,
        ActivityKind::Resume,
        ActivityKind::ActivityCheck,
        ActivityKind::InactivityWarning,
        ActivityKind::InactivityStop,
        ActivityKind::OperatorSwitch,
        ActivityKind::Error,
        ActivityKind::SupervisorJoined,
        ActivityKind::SupervisorLeft,
    ];

    pub fn parse(s: &str) -> Option<ActivityKind> {
        ActivityKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One line of a session's activity log (rule L05).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityEntry {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub kind: ActivityKind,
    pub operator_id: Option<String>,
    pub operator_name: Option<String>,
    pub detail: Option<String>,
}

impl LifecycleState {
    /// COMPLETED and CANCELLED never reopen.
    pub fn is_terminal(self) -> bool {
        matches!(self, LifecycleState::Completed | LifecycleState::Cancelled)
    }

    /// PENDING, ACTIVE or PAUSED: the robot's one open session (rule D09).
    pub fn is_open(self) -> bool {
        !self.is_terminal()
    }
}

/// The activity event a legal transition writes, or `None` when seed 001's
/// table has no such transition (rule L01).
pub fn transition(from: LifecycleState, to: LifecycleState) -> Option<ActivityKind> {
    use LifecycleState as L;
    match (from, to) {
        (L::Pending, L::Active) => Some(ActivityKind::SessionStart),
        (L::Pending, L::Cancelled) => Some(ActivityKind::SessionEnd),
        (L::Active, L::Paused) => Some(ActivityKind::Pause),
        (L::Paused, L::Active) => Some(ActivityKind::Resume),
        (L::Active | L::Paused, L::Completed | L::Cancelled) => Some(ActivityKind::SessionEnd),
        _ => None,
    }
}

/// Why the platform cancels a PENDING call after the pending timeout; the
/// overview counts such calls as abandoned.
pub const NOBODY_TOOK_IT: &str = "no operator took it";

/// A move the cockpit offers: the target state, the button's words and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteerControl {
    pub to: LifecycleState,
    pub label: &'static str,
    pub key: char,
}

/// The cockpit's lifecycle controls for a session in `state`: exactly the
/// operator's moves seed 001 allows from it (none once it has ended).
pub fn steer_controls(state: LifecycleState) -> Vec<SteerControl> {
    let pause = SteerControl { to: LifecycleState::Paused, label: "Pause", key: 'p' };
    let resume = SteerControl { to: LifecycleState::Active, label: "Resume", key: 'p' };
    let complete = SteerControl { to: LifecycleState::Completed, label: "Complete", key: 'c' };
    [pause, resume, complete].into_iter().filter(|c| state != LifecycleState::Pending && transition(state, c.to).is_some()).collect()
}

/// Whether telemetry may move a session from `current` to `next` safety
/// state: PROTECTIVE_STOP is latched, only an explicit clear leaves it.
pub fn telemetry_allowed(current: SafetyState, next: SafetyState) -> bool {
    current != SafetyState::ProtectiveStop || next == SafetyState::ProtectiveStop
}

/// What a person's safety change (an operator's E-stop, an explicit clear
/// of PROTECTIVE_STOP) does to a session in `lifecycle` and `current`: the
/// store reads both under its write lock, asks here, and writes only on
/// `Apply`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SafetyDecision {
    Apply,
    /// Already in the target state (a second E-stop): nothing to write.
    Unchanged,
    /// A clear of a session that is not latched.
    NotLatched,
    /// COMPLETED or CANCELLED: safety no longer changes.
    Ended,
}

/// Moves to `to`; with `only_from`, only from that state (a clear leaves
/// PROTECTIVE_STOP and nothing else).
pub fn person_safety_change(lifecycle: LifecycleState, current: SafetyState, only_from: Option<SafetyState>, to: SafetyState) -> SafetyDecision {
    if lifecycle.is_terminal() {
        SafetyDecision::Ended
    } else if only_from.is_some_and(|from| from != current) {
        SafetyDecision::NotLatched
    } else if current == to {
        SafetyDecision::Unchanged
    } else {
        SafetyDecision::Apply
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LifecycleState as L;

    #[test]
    fn a_person_latches_and_clears_a_stop_only_on_an_open_session() {
        use SafetyDecision as D;
        use SafetyState as S;
        let stop = |l, s| person_safety_change(l, s, None, S::ProtectiveStop);
        let clear = |l, s| person_safety_change(l, s, Some(S::ProtectiveStop), S::Armed);
        assert_eq!(stop(L::Active, S::Armed), D::Apply);
        assert_eq!(stop(L::Paused, S::Diverged), D::Apply, "an E-stop latches from any state");
        assert_eq!(stop(L::Active, S::ProtectiveStop), D::Unchanged, "a second E-stop writes nothing");
        assert_eq!(clear(L::Active, S::ProtectiveStop), D::Apply);
        assert_eq!(clear(L::Active, S::Degraded), D::NotLatched, "only a latched stop is cleared");
        for ended in [L::Completed, L::Cancelled] {
            assert_eq!(stop(ended, S::Armed), D::Ended);
            assert_eq!(clear(ended, S::ProtectiveStop), D::Ended, "an ended session keeps its last state");
        }
    }

    #[test]
    fn l01_l03_l04_the_cockpit_offers_exactly_the_moves_the_table_allows() {
        let offered = |s: L| steer_controls(s).into_iter().map(|c| c.to).collect::<Vec<_>>();
        assert_eq!(offered(L::Active), [L::Paused, L::Completed]);
        assert_eq!(offered(L::Paused), [L::Active, L::Completed], "a paused session resumes or ends from there");
        assert!(offered(L::Pending).is_empty(), "nothing to steer before the operator attaches");
        assert!(offered(L::Completed).is_empty() && offered(L::Cancelled).is_empty(), "terminal states never reopen");
        for s in L::ALL {
            for c in steer_controls(s) {
                assert!(transition(s, c.to).is_some());
            }
        }
    }

    #[test]
    fn l06_activity_kinds_round_trip_by_name() {
        for k in ActivityKind::ALL {
            assert_eq!(ActivityKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ActivityKind::parse("SESSION_PAUSE"), None);
    }

    #[test]
    fn l01_only_the_seed_transitions_exist() {
        let legal = [
            (L::Pending, L::Active),
            (L::Pending, L::Cancelled),
            (L::Active, L::Paused),
            (L::Active, L::Completed),
            (L::Active, L::Cancelled),
            (L::Paused, L::Active),
            (L::Paused, L::Completed),
            (L::Paused, L::Cancelled),
        ];
        for from in LifecycleState::ALL {
            for to in LifecycleState::ALL {
                assert_eq!(transition(from, to).is_some(), legal.contains(&(from, to)), "{from:?} → {to:?}");
            }
        }
    }

    #[test]
    fn l04_terminal_states_never_reopen() {
        for to in LifecycleState::ALL {
            assert!(transition(L::Completed, to).is_none());
            assert!(transition(L::Cancelled, to).is_none());
        }
        assert!(L::Completed.is_terminal() && L::Cancelled.is_terminal());
        assert!(L::Pending.is_open() && L::Active.is_open() && L::Paused.is_open());
    }

    #[test]
    fn w11_protective_stop_is_latched() {
        for next in SafetyState::ALL {
            assert_eq!(telemetry_allowed(SafetyState::ProtectiveStop, next), next == SafetyState::ProtectiveStop);
            assert!(telemetry_allowed(SafetyState::Armed, next));
        }
    }
}

/// A session's activity log with its billable time, as of a moment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionActivity {
    pub entries: Vec<ActivityEntry>,
    /// [`billable_ms`] at `as_of_ms`.
    pub billable_ms: i64,
    pub as_of_ms: i64,
}

impl SessionActivity {
    pub fn new(entries: Vec<ActivityEntry>, as_of_ms: i64) -> SessionActivity {
        SessionActivity { billable_ms: billable_ms(&entries, as_of_ms), entries, as_of_ms }
    }
}

/// Billable time of a session (seed 001: "recording and billing time are
/// running" while ACTIVE): the ACTIVE stretches of its activity log, PAUSED
/// time excluded; a session still ACTIVE counts up to `now_ms`.
pub fn billable_ms(log: &[ActivityEntry], now_ms: i64) -> i64 {
    let mut total = 0;
    let mut active_since = None;
    for entry in log {
        match entry.kind {
            ActivityKind::SessionStart | ActivityKind::Resume => active_since = active_since.or(Some(entry.at_ms)),
            ActivityKind::Pause | ActivityKind::SessionEnd => {
                if let Some(since) = active_since.take() {
                    total += (entry.at_ms - since).max(0);
                }
            }
            _ => {}
        }
    }
    total + active_since.map_or(0, |since| (now_ms - since).max(0))
}

#[cfg(test)]
mod billing_tests {
    use super::*;

    fn at(kind: ActivityKind, at_ms: i64) -> ActivityEntry {
        ActivityEntry { at_ms, kind, operator_id: None, operator_name: None, detail: None }
    }

    #[test]
    fn billable_time_counts_active_stretches_and_excludes_paused_time() {
        use ActivityKind::*;
        let log = [at(SessionStart, 1_000), at(ActivityCheck, 5_000), at(Pause, 11_000), at(Resume, 41_000), at(SessionEnd, 46_000)];
        assert_eq!(billable_ms(&log, 99_000), 15_000, "10 s, paused 30 s, then 5 s");
        assert_eq!(billable_ms(&log[..4], 50_000), 19_000, "still ACTIVE: counts up to now");
        assert_eq!(billable_ms(&log[..3], 99_000), 10_000, "PAUSED: the clock stands");
        assert_eq!(billable_ms(&[], 99_000), 0, "never started");
    }
}
