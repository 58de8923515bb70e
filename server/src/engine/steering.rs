//! The attached operator steers a live session through seed 001's
//! lifecycle: pause, resume, complete (rules L01, L03, L04). Each move is
//! checked against the pure transition table, written with its activity
//! event in the batch's transaction, and published on the org's topic.

use super::desk::Desk;
use super::types::EngineError;
use crate::store::Write;
use domain::events::OrgEvent;
use domain::lifecycle::transition;
use domain::models::LifecycleState;

impl Desk {
    /// Moves a live session to `to`, asked by `by` (an operator, who must be
    /// the attached one) or by an admin (`None`). `Ok(false)` when the desk
    /// has no such live session (unknown, still ringing, or ended).
    pub fn steer(&mut self, session_id: &str, to: LifecycleState, by: Option<&str>, now: i64) -> Result<bool, EngineError> {
        let Some(live) = self.live.get(session_id) else {
            return Ok(false);
        };
        if let Some(operator_id) = by {
            if live.operator_id.as_deref() != Some(operator_id) {
                return Err(EngineError::NotAttached);
            }
        }
        let from = live.lifecycle;
        let Some(kind) = transition(from, to) else {
            return Err(EngineError::IllegalTransition { from: from.as_str(), to: to.as_str() });
        };
        if to.is_terminal() {
            let reason = match (to, by) {
                (LifecycleState::Completed, Some(_)) => "completed by the operator",
                (LifecycleState::Completed, None) => "completed by an admin",
                (_, Some(_)) => "cancelled by the operator",
                (_, None) => "cancelled by an admin",
            };
            return self.finish(session_id, to, reason, now);
        }
        let live = self.live.get_mut(session_id).expect("checked above");
        live.lifecycle = to;
        let resumed = to == LifecycleState::Active;
        let (robot_id, operator_id) = (live.robot_id.clone(), live.operator_id.clone());
        self.fx.writes.push(Write::Steer {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            from,
            to,
            kind,
            operator_id: operator_id.clone(),
            at: now,
        });
        let event = OrgEvent::Lifecycle { session_id: session_id.to_string(), robot_id, lifecycle: to, operator_id, queued: false, at_ms: now };
        self.fx.tell_org(&self.org_id, event);
        // A pause ends the inactivity chain (its timer finds it PAUSED);
        // a resume starts a fresh one.
        if resumed {
            self.start_chain(session_id, now);
        }
        Ok(true)
    }
}
