//! RTT ceilings on the desk (rules A15, A16): each skill's ceiling as the
//! org set it, the ceiling a waiting call has now, and the timer that looks
//! at a queued call again when its ceiling next relaxes, as a freed
//! operator would make the queue be looked at again.

use super::desk::Desk;
use super::timers::Timer;
use domain::dispatch::{RttCeiling, Trigger};

impl Desk {
    /// The org's ceilings changed (or were loaded): queued calls are looked
    /// at again under them, and their relaxations armed anew.
    pub fn set_ceilings(&mut self, ceilings: Vec<RttCeiling>, now: i64) {
        self.ceilings = ceilings.into_iter().map(|c| (c.skill.clone(), c)).collect();
        self.arm_relaxations(now);
        self.dirty = true;
    }

    /// The RTT ceiling of the call `session_id` at `now`, if one holds.
    pub(super) fn ceiling_of(&self, session_id: &str, now: i64) -> Option<u32> {
        let call = self.calls.get(session_id)?;
        self.ceilings.get(&call.skill)?.after(now - call.raised_at)
    }

    /// Every queued call's next relaxation is on the timers.
    pub(super) fn arm_relaxations(&mut self, now: i64) {
        let queued: Vec<String> = self.queued.iter().map(|(_, id)| id.clone()).collect();
        for session_id in queued {
            self.arm_relaxation(&session_id, now);
        }
    }

    /// A queued call whose ceiling still holds is looked at again when it
    /// next relaxes (one timer per call and instant).
    pub(super) fn arm_relaxation(&mut self, session_id: &str, now: i64) {
        let Some(call) = self.calls.get(session_id) else { return };
        let at = self.ceilings.get(&call.skill).and_then(|c| c.next_relaxation(now - call.raised_at)).map(|after| call.raised_at + after);
        if at == call.relax_at {
            return;
        }
        // A ceiling removed (or lifted) leaves no relaxation due: a timer
        // armed for one finds `relax_at` changed and does nothing.
        if let Some(call) = self.calls.get_mut(session_id) {
            call.relax_at = at;
        }
        if let Some(at) = at {
            self.timers.at(at, Timer::CeilingRelaxes { session_id: session_id.to_string(), at });
        }
    }

    /// The call's ceiling rose or was lifted: a queued call is offered to
    /// whoever is now within it, or waits for the next step.
    pub(super) fn ceiling_relaxed(&mut self, session_id: &str, at: i64, now: i64) {
        let due = self.calls.get(session_id).is_some_and(|c| c.queued && c.relax_at == Some(at));
        if !due {
            return;
        }
        if let Some(call) = self.calls.get_mut(session_id) {
            call.relax_at = None;
        }
        if self.place(session_id, Trigger::CeilingRelaxed, now, true).is_none() {
            self.arm_relaxation(session_id, now);
        }
    }
}
