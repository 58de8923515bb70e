//! Session lifecycle (seed 001) and the protective-stop latch (seed 000):
//! which transitions exist, which activity event each writes, and which
//! safety states telemetry may move to.

use crate::models::{LifecycleState, SafetyState};
use serde::{Deserialize, Serialize};

/// Activity events of seed 001, in the session's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
        }
    }
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

/// Whether telemetry may move a session from `current` to `next` safety
/// state: PROTECTIVE_STOP is latched, only an explicit clear leaves it.
pub fn telemetry_allowed(current: SafetyState, next: SafetyState) -> bool {
    current != SafetyState::ProtectiveStop || next == SafetyState::ProtectiveStop
}

#[cfg(test)]
mod tests {
    use super::*;
    use LifecycleState as L;

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
