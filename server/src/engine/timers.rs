//! One deadline queue per org dispatcher: offer expiry, wrap-up release,
//! presence lapse and decline cool-off all wait here, ordered by time.
//! Timers are never cancelled in place; each carries what it was set for,
//! and the desk ignores one whose subject has moved on (cheaper than
//! searching the heap, and the queue stays a plain binary heap).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// The offer of `session_id` to `operator_id` reaches `expiresAt`.
    OfferExpiry { operator_id: String, session_id: String },
    /// Wrap-up that began at `since` is over.
    WrapUp { operator_id: String, since: i64 },
    /// The operator's last tab closed; `generation` tells a later reconnect apart.
    Lapse { operator_id: String, generation: u64 },
    /// The operator may be offered this call again (rule D08).
    CoolOff { session_id: String, operator_id: String },
    /// A waiting call's RTT ceiling relaxes (rule A16); `at` tells a timer
    /// armed before the ceilings changed apart.
    CeilingRelaxes { session_id: String, at: i64 },
    /// The call has waited the pending timeout.
    PendingTimeout { session_id: String },
    /// The inactivity chain of a live session looks again (rule L07).
    Inactivity { session_id: String, chain: u64 },
    /// Two minutes before the planned end `at` (rule L13).
    PlannedEndNotice { session_id: String, at: i64 },
    /// The planned end `at`: the session completes unless it moved.
    PlannedEnd { session_id: String, at: i64 },
}

#[derive(Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(i64, u64, Timer)>>,
    seq: u64,
}

impl Timers {
    pub fn at(&mut self, at_ms: i64, timer: Timer) {
        self.seq += 1;
        self.heap.push(Reverse((at_ms, self.seq, timer)));
    }

    /// The earliest deadline, if any.
    pub fn next_at(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Every timer due at `now`, earliest first.
    pub fn due(&mut self, now_ms: i64) -> Vec<Timer> {
        let mut due = Vec::new();
        while self.next_at().is_some_and(|at| at <= now_ms) {
            if let Some(Reverse((_, _, timer))) = self.heap.pop() {
                due.push(timer);
            }
        }
        due
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap(op: &str) -> Timer {
        Timer::WrapUp { operator_id: op.into(), since: 0 }
    }

    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let mut timers = Timers::default();
        timers.at(300, wrap("c"));
        timers.at(100, wrap("a"));
        timers.at(200, wrap("b"));
        timers.at(100, wrap("a2"));
        assert_eq!(timers.next_at(), Some(100));
        assert!(timers.due(99).is_empty());
        assert_eq!(timers.due(200), vec![wrap("a"), wrap("a2"), wrap("b")], "ties keep insertion order");
        assert_eq!(timers.len(), 1);
        assert_eq!(timers.due(1_000), vec![wrap("c")]);
        assert!(timers.is_empty() && timers.next_at().is_none());
    }
}
