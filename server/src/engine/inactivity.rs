//! The inactivity chain of ACTIVE sessions (rule L07) on the desk's
//! deadline queue, the operator input that resets it (rule L03: a PAUSED
//! session takes none), and the edge agent's error reports (`ERROR`). The chain's arithmetic is the pure
//! `domain::inactivity`; this applies it and writes what it decides.

use super::desk::Desk;
use super::timers::Timer;
use super::types::EngineError;
use crate::store::Write;
use domain::events::OperatorEvent;
use domain::inactivity::{inactivity_due, Watch};
use domain::lifecycle::ActivityKind;
use domain::models::LifecycleState;

/// Why the platform cancels a session whose operator stopped giving input.
pub const INACTIVE: &str = "no operator input";

impl Desk {
    /// Starts the session's chain afresh (on attach, on resume, on load).
    pub(super) fn start_chain(&mut self, session_id: &str, now: i64) {
        let policy = self.settings.inactivity;
        let Some(live) = self.live.get_mut(session_id) else { return };
        live.chain += 1;
        live.watch = Watch::start(now);
        let next = inactivity_due(&policy, &mut live.watch, now).next_at_ms;
        let chain = live.chain;
        self.timers.at(next, Timer::Inactivity { session_id: session_id.to_string(), chain });
    }

    /// The chain's timer: writes what is due, then waits for the next moment.
    pub(super) fn inactivity(&mut self, session_id: &str, chain: u64, now: i64) {
        let policy = self.settings.inactivity;
        let Some(live) = self.live.get_mut(session_id) else { return };
        if live.chain != chain || live.lifecycle != LifecycleState::Active {
            return; // paused, resumed since, or a later chain runs
        }
        let due = inactivity_due(&policy, &mut live.watch, now);
        let operator_id = live.operator_id.clone();
        let warned_until = live.watch.stops_at(&policy);
        let activity = |kind: ActivityKind, detail: Option<String>| Write::Activity {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            kind,
            operator_id: operator_id.clone(),
            detail,
            at: now,
        };
        let mut writes = Vec::new();
        if due.check {
            writes.push(activity(ActivityKind::ActivityCheck, None));
        }
        if due.warn {
            let idle_s = (now - live.watch.last_input_ms) / 1000;
            writes.push(activity(ActivityKind::InactivityWarning, Some(format!("no input for {idle_s} s"))));
        }
        if due.stop {
            writes.push(activity(ActivityKind::InactivityStop, None));
        }
        self.fx.writes.extend(writes);
        if due.warn {
            if let (Some(operator_id), Some(stop_at_ms)) = (operator_id, warned_until) {
                self.fx.tell_operator(&self.org_id, &operator_id, OperatorEvent::InactivityWarning { session_id: session_id.to_string(), stop_at_ms });
            }
        }
        if due.stop {
            let _ = self.finish(session_id, LifecycleState::Cancelled, INACTIVE, now);
        } else {
            self.timers.at(due.next_at_ms, Timer::Inactivity { session_id: session_id.to_string(), chain });
        }
    }

    /// An edge agent's error on an open session (PENDING, ACTIVE or PAUSED):
    /// an `ERROR` activity event. A finished or unknown session is refused.
    pub fn report_error(&mut self, session_id: &str, detail: &str, now: i64) -> Result<i64, EngineError> {
        let operator_id = match (self.calls.contains_key(session_id), self.live.get(session_id)) {
            (true, _) => None,
            (false, Some(live)) => live.operator_id.clone(),
            (false, None) => return Err(EngineError::SessionEnded),
        };
        self.fx.writes.push(Write::Activity {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            kind: ActivityKind::Error,
            operator_id,
            detail: Some(detail.to_string()),
            at: now,
        });
        Ok(now)
    }

    /// Operator input on a session: only its attached operator's counts,
    /// and a PAUSED session accepts none (rule L03).
    pub fn input(&mut self, operator_id: &str, session_id: &str, now: i64) -> Result<(), EngineError> {
        let live = self.live.get_mut(session_id).ok_or(EngineError::NotFound("live session"))?;
        if live.operator_id.as_deref() != Some(operator_id) {
            return Err(EngineError::NotAttached);
        }
        if live.lifecycle == LifecycleState::Paused {
            return Err(EngineError::Paused);
        }
        live.watch.input(now);
        Ok(())
    }
}
