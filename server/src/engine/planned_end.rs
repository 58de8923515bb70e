//! The planned end of a live session (seed 001 "Extending a session",
//! rule L13) on the desk's deadline queue: the operator is told two
//! minutes before, and the session completes at the planned end unless an
//! extension moved it. Timers carry the end they were set for, so an
//! extension simply sets new ones and the old ones find nothing to do.

use super::desk::Desk;
use super::timers::Timer;
use super::types::EngineError;
use domain::booking::{PLANNED_END_NOTICE_MS, PLANNED_END_REACHED};
use domain::events::{OperatorEvent, OrgEvent};
use domain::models::LifecycleState;

impl Desk {
    /// Sets the session's planned end and its two timers.
    pub(super) fn plan_end(&mut self, session_id: &str, at: i64) {
        let Some(live) = self.live.get_mut(session_id) else { return };
        live.planned_end = Some(at);
        self.timers.at(at - PLANNED_END_NOTICE_MS, Timer::PlannedEndNotice { session_id: session_id.to_string(), at });
        self.timers.at(at, Timer::PlannedEnd { session_id: session_id.to_string(), at });
    }

    pub(super) fn planned_end_notice(&mut self, session_id: &str, at: i64) {
        let Some(live) = self.live.get(session_id).filter(|l| l.planned_end == Some(at)) else { return };
        if let Some(operator_id) = &live.operator_id {
            let event = OperatorEvent::PlannedEndSoon { session_id: session_id.to_string(), planned_end_ms: at };
            self.fx.tell_operator(&self.org_id, operator_id, event);
        }
    }

    pub(super) fn planned_end(&mut self, session_id: &str, at: i64, now: i64) {
        if self.live.get(session_id).is_some_and(|l| l.planned_end == Some(at)) {
            tracing::info!(org = %self.org_id, session = %session_id, "planned end reached: completed");
            let _ = self.finish(session_id, LifecycleState::Completed, PLANNED_END_REACHED, now);
        }
    }

    /// Rule L13: whether `operator` (the operator asking, who must be in
    /// control; `None` for an admin or the session's client) may extend the
    /// live session by `minutes`, judged by `domain::booking::extension` on
    /// the robot's bookings as the desk holds them: the planned end now and
    /// the one asked for. Nothing is written: the extension commits in a
    /// transaction of its own (see `Engine::extend_session`). A session the
    /// desk does not hold live is `SessionEnded` (or was never there).
    pub fn extension(&self, session_id: &str, operator: Option<&str>, minutes: i64) -> Result<(i64, i64), EngineError> {
        if self.calls.contains_key(session_id) {
            return Err(EngineError::CannotExtend("The session has not started: it has no planned end yet.".into()));
        }
        let live = self.live.get(session_id).ok_or(EngineError::SessionEnded)?;
        if operator.is_some() && live.operator_id.as_deref() != operator {
            return Err(EngineError::NotAttached);
        }
        let from = live.planned_end.ok_or_else(|| EngineError::CannotExtend("This session has no planned end.".into()))?;
        let to = domain::booking::extension(from, minutes, self.bookings_of(&live.robot_id), live.booking_id.as_deref()).map_err(EngineError::CannotExtend)?;
        Ok((from, to))
    }

    /// The extension from `from` to `to` is committed: new timers, and the
    /// org's screens told. A session that ended meanwhile has nothing to move.
    pub fn extended(&mut self, session_id: &str, from: i64, to: i64) -> Result<i64, EngineError> {
        if self.live.get(session_id).and_then(|l| l.planned_end) != Some(from) {
            return Err(EngineError::SessionEnded);
        }
        self.plan_end(session_id, to);
        let event = OrgEvent::PlannedEnd { session_id: session_id.to_string(), planned_end_ms: to };
        self.fx.tell_org(&self.org_id, event);
        Ok(to)
    }
}
