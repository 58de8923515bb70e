//! Serving the queues: queued calls offered, oldest first, to whoever can
//! now take them; and recovery after a (re)start, when offers whose window
//! passed while nobody watched are closed and orphaned calls queued again.

use super::desk::Desk;
use crate::store::Write;
use domain::dispatch::{OfferStatus, Trigger};
use domain::presence::PresenceEvent;
use std::collections::HashMap;
use std::ops::Bound;

impl Desk {
    /// Offers queued calls, oldest first, to whoever can now take them.
    /// "No call stays queued while a ready certified operator could take it."
    /// Each served skill's queue is walked from its head, and only as far
    /// as calls stay queued (an operator in cool-off for one call may take
    /// the next); a skill nobody serves any more is not walked at all.
    pub fn serve_queues(&mut self, now: i64) {
        if !std::mem::take(&mut self.dirty) || self.queued.is_empty() {
            return;
        }
        // Per skill, the last call looked at that stayed queued.
        let mut passed: HashMap<String, (i64, String)> = HashMap::new();
        loop {
            let next = self
                .queues
                .iter()
                .filter(|(skill, _)| self.index.serves_skill(skill))
                .filter_map(|(skill, queue)| {
                    let head = match passed.get(skill) {
                        Some(last) => queue.range((Bound::Excluded(last), Bound::Unbounded)).next(),
                        None => queue.first(),
                    };
                    head.map(|key| (key.clone(), skill.clone()))
                })
                .min();
            let Some((key, skill)) = next else { break };
            if self.place(&key.1, Trigger::OperatorReady, now, false).is_none() {
                passed.insert(skill, key);
            }
        }
        self.dirty = false;
    }

    /// After a (re)start: offers whose window passed while nobody watched
    /// are closed and their calls re-dispatched; calls a crash left with
    /// neither an offer nor a queue place are queued again.
    pub fn recover(&mut self, now: i64) {
        let stale: Vec<(String, String)> = self
            .offers
            .iter()
            .filter(|(_, o)| o.expires_at <= now)
            .map(|(op, o)| (op.clone(), o.session_id.clone()))
            .collect();
        for (operator_id, session_id) in stale {
            self.close_offer(&operator_id, OfferStatus::Expired, now);
            // Nobody has heard from them since the restart.
            self.presence_event(&operator_id, PresenceEvent::Lapsed, None, now);
            self.place(&session_id, Trigger::Recovered, now, true);
        }
        let orphans: Vec<String> =
            self.calls.iter().filter(|(_, c)| c.offered_to.is_none() && !c.queued).map(|(id, _)| id.clone()).collect();
        if !orphans.is_empty() {
            tracing::warn!(org = %self.org_id, orphans = orphans.len(), "pending calls without an offer were put back in the queue");
        }
        for session_id in orphans {
            let call = self.calls.get_mut(&session_id).expect("listed");
            call.queued = true;
            let (skill, raised_at) = (call.skill.clone(), call.raised_at);
            self.enqueue_key(&skill, raised_at, &session_id);
            self.fx.writes.push(Write::Queue { org_id: self.org_id.clone(), session_id: session_id.clone(), at: now });
            self.arm_relaxation(&session_id, now);
        }
    }
}
