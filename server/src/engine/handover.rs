//! Handover (seed 001 "operator switch", rule L08): the operator in
//! control offers a live session to another ready, certified operator. The
//! offer rings like a call's (same map, same expiry timer); on accept
//! control moves with an `OPERATOR_SWITCH` event, and the handing operator
//! goes to wrap-up. A decline, a miss or the session's end leaves control
//! where it was, and the handing operator is told either way.

use super::desk::{Desk, LastHandover, Live};
use super::timers::Timer;
use super::types::EngineError;
use crate::store::{NewOffer, Write};
use domain::dispatch::{Candidate, OfferStatus, Presence};
use domain::events::OperatorEvent;
use domain::handover::{handover_candidates, HandoverNotice, HandoverOutcome};
use domain::lifecycle::ActivityKind;
use domain::models::{Offer, PresenceState};
use domain::presence::PresenceEvent;

impl Desk {
    /// Who the session may be handed to, best first.
    pub fn handover_candidates(&self, session_id: &str) -> Result<Vec<Candidate>, EngineError> {
        let live = self.live.get(session_id).ok_or(EngineError::NotFound("live session"))?;
        let ready: Vec<Presence> = self
            .operators
            .values()
            .filter(|op| op.presence.state == PresenceState::Ready && !self.offers.contains_key(&op.presence.operator_id))
            .filter(|op| !self.busy.held_elsewhere(&op.presence.operator_id, &self.org_id))
            .map(|op| Presence {
                operator_id: op.presence.operator_id.clone(),
                name: op.presence.name.clone(),
                available: true,
                region: op.presence.region.clone(),
                certs: op.presence.skills.clone(),
                since: op.presence.since,
                measured_rtt_ms: op.presence.measured_rtt_ms.clone(),
            })
            .collect();
        Ok(handover_candidates(&live.pop, &live.skill, &ready, &self.floors, live.operator_id.as_deref()))
    }

    /// Offers the live session to `to`, asked by the operator in control
    /// (`by`) or an admin (`None`). One handover rings at a time.
    pub fn hand_over(&mut self, session_id: &str, by: Option<&str>, to: &str, now: i64) -> Result<Offer, EngineError> {
        let live = self.live.get(session_id).ok_or(EngineError::SessionEnded)?;
        if by.is_some() && live.operator_id.as_deref() != by {
            return Err(EngineError::NotAttached);
        }
        if let Some(ringing) = live.handover_ringing() {
            let name = self.operators.get(ringing).map_or(ringing, |op| op.presence.name.as_str());
            return Err(EngineError::HandoverRinging(name.to_string()));
        }
        let candidate = self
            .handover_candidates(session_id)?
            .into_iter()
            .find(|c| c.operator_id == to)
            .ok_or(EngineError::NotHandoverCandidate)?;
        if !self.claim_operator(to) {
            return Err(EngineError::NotHandoverCandidate);
        }
        let live = self.live.get(session_id).expect("checked above");
        let from_name = live.operator_id.as_ref().and_then(|id| self.operators.get(id)).map(|op| op.presence.name.clone());
        let rtt_ms = candidate.rtt_ms.unwrap_or_default();
        let offer = Offer {
            session_id: session_id.to_string(),
            robot_id: live.robot_id.clone(),
            robot_model: live.robot_model.clone(),
            site: live.site.clone(),
            rtt_ms,
            operator_id: to.to_string(),
            offered_at: now,
            expires_at: now + self.settings.offer_window_ms,
            handover_from: Some(from_name.unwrap_or_else(|| "an admin".into())),
        };
        self.fx.writes.push(Write::Offer {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            offer: NewOffer { id: super::calls::new_id("ofr"), operator_id: to.to_string(), rtt_ms, offered_at: now, expires_at: offer.expires_at },
            from_queue: false,
        });
        self.offers.insert(to.to_string(), offer.clone());
        self.timers.at(offer.expires_at, Timer::OfferExpiry { operator_id: to.to_string(), session_id: session_id.to_string() });
        self.presence_event(to, PresenceEvent::Offered, None, now);
        if let Some(op) = self.operators.get_mut(to) {
            op.presence.current_call = Some(session_id.to_string());
        }
        self.publish_presence(to);
        self.fx.tell_operator(&self.org_id, to, OperatorEvent::Offer { offer: offer.clone() });
        self.tell_handover(session_id, to, HandoverOutcome::Ringing);
        Ok(offer)
    }

    /// An admin's live view opened on a live session, or closed (also
    /// just after the session ended: the end closes the view).
    pub fn supervise(&mut self, session_id: &str, admin_id: &str, joined: bool, now: i64) -> Result<(), EngineError> {
        if joined && !self.live.contains_key(session_id) {
            return Err(EngineError::SessionEnded);
        }
        self.fx.writes.push(Write::Activity {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            kind: if joined { ActivityKind::SupervisorJoined } else { ActivityKind::SupervisorLeft },
            operator_id: Some(admin_id.to_string()),
            detail: None,
            at: now,
        });
        Ok(())
    }

    /// A certified admin takes control of a live session without an
    /// accept: control moves as on an accepted handover, OPERATOR_SWITCH
    /// carries the reason, the previous operator wraps up and their
    /// cockpit's relay closes (the relay follows the lifecycle event).
    pub fn take_control(&mut self, session_id: &str, admin_id: &str, reason: &str, now: i64) -> Result<(), EngineError> {
        let live = self.live.get(session_id).ok_or(EngineError::SessionEnded)?;
        let skills = self.operators.get(admin_id).map(|op| op.presence.skills.as_slice());
        if let Some(problem) = domain::handover::take_over_problem(admin_id, skills, &live.skill, live.operator_id.as_deref(), live.handover_ringing().is_some()) {
            return Err(EngineError::CannotTakeOver(problem));
        }
        let admin = self.operators.get(admin_id).ok_or(EngineError::NotFound("operator"))?;
        if admin.inactive {
            return Err(EngineError::Inactive);
        }
        // Control goes to a console: its presence, wrap-up and lapse
        // follow the admin's open tabs, as every operator's do.
        if admin.tabs.is_empty() {
            return Err(EngineError::CannotTakeOver("Open your Ready screen (/operator) in another tab first: a session is held from your console.".into()));
        }
        let elsewhere = admin.presence.current_call.as_deref().is_some_and(|call| call != session_id);
        if elsewhere || self.offers.contains_key(admin_id) || self.busy.held_elsewhere(admin_id, &self.org_id) {
            return Err(EngineError::CannotTakeOver("You are on another call or ringing: finish it first.".into()));
        }
        // The effective RTT, as a handover would rank it (measured, or the floor).
        let measured = admin.presence.measured_rtt_ms.get(&live.pop).copied();
        let floor = self.floors.floor(&admin.presence.region, &live.pop);
        let Some(rtt_ms) = domain::dispatch::effective_rtt(measured, floor) else {
            return Err(EngineError::CannotTakeOver(format!("No path is known from {} to the robot's PoP {}: add a link floor first.", admin.presence.region, live.pop)));
        };
        let why = format!("taken over by an admin: {}", reason.trim());
        self.switch(session_id, admin_id, rtt_ms, Some(why), now);
        Ok(())
    }

    /// `to` accepted the handover offer (already closed as accepted):
    /// control moves, logged as OPERATOR_SWITCH; the previous operator
    /// wraps up.
    pub(super) fn take_over(&mut self, session_id: &str, to: &str, rtt_ms: u32, now: i64) {
        self.switch(session_id, to, rtt_ms, None, now);
    }

    /// Control moves to `to` (`why`: an admin's reason, when they took it).
    fn switch(&mut self, session_id: &str, to: &str, rtt_ms: u32, why: Option<String>, now: i64) {
        let Some(live) = self.live.get_mut(session_id) else { return };
        live.handover = None;
        let from = live.operator_id.replace(to.to_string());
        let name = |desk: &Desk, id: &str| desk.operators.get(id).map_or(id.to_string(), |op| op.presence.name.clone());
        let moved = from.as_deref().map(|id| format!("from {} to {}", name(self, id), name(self, to)));
        let detail = match (moved, why) {
            (Some(moved), Some(why)) => Some(format!("{moved}, {why}")),
            (moved, why) => moved.or(why),
        };
        let region = self.operators.get(to).map(|op| op.presence.region.clone()).unwrap_or_default();
        self.fx.writes.push(Write::Switch {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            from: from.clone(),
            to: to.to_string(),
            region,
            rtt_ms,
            detail,
            at: now,
        });
        // The new operator's input starts a fresh chain.
        self.start_chain(session_id, now);
        self.presence_event(to, PresenceEvent::Attached, None, now);
        if let Some(op) = self.operators.get_mut(to) {
            op.presence.current_call = Some(session_id.to_string());
        }
        self.publish_presence(to);
        if let Some(from) = from {
            let on_it = self.operators.get(&from).is_some_and(|op| op.presence.current_call.as_deref() == Some(session_id));
            if on_it {
                self.presence_event(&from, PresenceEvent::SessionEnded, None, now);
            }
            self.tell(&from, session_id, to, HandoverOutcome::Accepted);
        }
        self.lifecycle_event(session_id, now);
    }

    /// A handover offer closed without being taken: control stays.
    pub(super) fn handover_closed(&mut self, session_id: &str, to: &str, status: OfferStatus) {
        if self.live.get(session_id).and_then(Live::handover_ringing) != Some(to) {
            return;
        }
        let outcome = match status {
            OfferStatus::Accepted => return,
            OfferStatus::Declined => HandoverOutcome::Declined,
            OfferStatus::Expired => HandoverOutcome::Missed,
            OfferStatus::Withdrawn => HandoverOutcome::Withdrawn,
        };
        self.tell_handover(session_id, to, outcome);
    }

    /// The session's handover now stands at `outcome`; the operator in
    /// control is told (and told again after a reconnect, until the next
    /// handover or control moves: `handover_standing`).
    pub(super) fn tell_handover(&mut self, session_id: &str, to: &str, outcome: HandoverOutcome) {
        let Some(live) = self.live.get_mut(session_id) else { return };
        live.handover = Some(LastHandover { to: to.to_string(), outcome });
        if let Some(holder) = live.operator_id.clone() {
            self.tell(&holder, session_id, to, outcome);
        }
    }

    fn tell(&mut self, operator_id: &str, session_id: &str, to: &str, outcome: HandoverOutcome) {
        let notice = self.handover_notice(session_id, to, outcome);
        self.fx.tell_operator(&self.org_id, operator_id, notice);
    }

    /// The session's last handover, as its holder was told it: ringing,
    /// or how it ended, so a console away when it was told still learns
    /// it (`Desk::standing_notices`).
    pub(super) fn handover_standing(&self, session_id: &str) -> Option<OperatorEvent> {
        let last = self.live.get(session_id)?.handover.as_ref()?;
        Some(self.handover_notice(session_id, &last.to, last.outcome))
    }

    fn handover_notice(&self, session_id: &str, to: &str, outcome: HandoverOutcome) -> OperatorEvent {
        let to_name = self.operators.get(to).map_or(to.to_string(), |op| op.presence.name.clone());
        OperatorEvent::Handover { notice: HandoverNotice { session_id: session_id.to_string(), to_operator_id: to.to_string(), to_name, outcome } }
    }
}
