//! The session detail's timeline: both state machines of one session (DESIGN
//! "States") as spans of time — the lifecycle read from the activity log
//! (seed 001), the safety state from its recorded changes (seed 000).

use crate::lifecycle::{ActivityEntry, ActivityKind};
use crate::models::{LifecycleState, SafetyState};
use serde::{Deserialize, Serialize};

/// One state held from `from_ms` until `to_ms` (`None`: still held, or terminal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span<S> {
    pub state: S,
    pub from_ms: i64,
    pub to_ms: Option<i64>,
}

fn push<S: PartialEq>(spans: &mut Vec<Span<S>>, state: S, at_ms: i64) {
    if spans.last().is_some_and(|s| s.state == state) {
        return;
    }
    if let Some(open) = spans.last_mut() {
        open.to_ms = Some(at_ms);
    }
    spans.push(Span { state, from_ms: at_ms, to_ms: None });
}

/// Lifecycle spans from the raise and the activity log (rule L05: the log
/// reconstructs the session): PENDING, then ACTIVE ⇄ PAUSED, then the end.
pub fn lifecycle_spans(raised_at_ms: i64, log: &[ActivityEntry]) -> Vec<Span<LifecycleState>> {
    let mut spans = vec![Span { state: LifecycleState::Pending, from_ms: raised_at_ms, to_ms: None }];
    for entry in log {
        let next = match entry.kind {
            ActivityKind::SessionStart | ActivityKind::Resume => LifecycleState::Active,
            ActivityKind::Pause => LifecycleState::Paused,
            ActivityKind::SessionEnd if entry.detail.as_deref().is_some_and(|d| d.starts_with("COMPLETED")) => LifecycleState::Completed,
            ActivityKind::SessionEnd => LifecycleState::Cancelled,
            _ => continue,
        };
        push(&mut spans, next, entry.at_ms);
    }
    spans
}

/// Safety spans: BOOT from the raise, then each recorded change `(at, to)`.
pub fn safety_spans(raised_at_ms: i64, changes: &[(i64, SafetyState)]) -> Vec<Span<SafetyState>> {
    let mut spans = vec![Span { state: SafetyState::Boot, from_ms: raised_at_ms, to_ms: None }];
    for &(at_ms, state) in changes {
        push(&mut spans, state, at_ms);
    }
    spans
}

/// Both histories for the session detail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateHistory {
    pub lifecycle: Vec<Span<LifecycleState>>,
    pub safety: Vec<Span<SafetyState>>,
    /// Where open spans end on the drawing: the session's end, or now.
    pub until_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(kind: ActivityKind, at_ms: i64, detail: Option<&str>) -> ActivityEntry {
        ActivityEntry { at_ms, kind, operator_id: None, operator_name: None, detail: detail.map(str::to_string) }
    }

    #[test]
    fn l05_the_lifecycle_timeline_is_rebuilt_from_the_log_alone() {
        use ActivityKind::*;
        let log = [
            at(SessionStart, 10, None),
            at(ActivityCheck, 15, None),
            at(Pause, 20, None),
            at(Resume, 30, None),
            at(OperatorSwitch, 35, None),
            at(SessionEnd, 40, Some("COMPLETED · completed by the operator")),
        ];
        let spans: Vec<(LifecycleState, i64, Option<i64>)> = lifecycle_spans(0, &log).into_iter().map(|s| (s.state, s.from_ms, s.to_ms)).collect();
        use LifecycleState as L;
        assert_eq!(spans, [(L::Pending, 0, Some(10)), (L::Active, 10, Some(20)), (L::Paused, 20, Some(30)), (L::Active, 30, Some(40)), (L::Completed, 40, None)]);
        let cancelled = lifecycle_spans(0, &[at(SessionEnd, 5, Some("CANCELLED · no operator took it"))]);
        assert_eq!(cancelled.last().map(|s| s.state), Some(L::Cancelled));
    }

    #[test]
    fn the_safety_timeline_starts_in_boot_and_merges_repeats() {
        use SafetyState as S;
        let spans = safety_spans(0, &[(5, S::Safe), (8, S::Armed), (9, S::Armed), (12, S::ProtectiveStop), (20, S::Safe)]);
        let got: Vec<(S, i64, Option<i64>)> = spans.into_iter().map(|s| (s.state, s.from_ms, s.to_ms)).collect();
        assert_eq!(got, [(S::Boot, 0, Some(5)), (S::Safe, 5, Some(8)), (S::Armed, 8, Some(12)), (S::ProtectiveStop, 12, Some(20)), (S::Safe, 20, None)]);
    }
}
