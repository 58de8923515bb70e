//! Calls on the desk: raising, placing (offer or queue), answering and
//! ending (serving the queues and recovery: `queues.rs`).

use super::desk::{Call, Desk, Live, LiveRobot};
use super::timers::Timer;
use super::types::{CallOutcome, EngineError, MatchedOperator};
use crate::store::{DispatchRecord, NewOffer, NewSession, Write};
use domain::dispatch::{CandidateRef, CandidateSummaryRef, OfferStatus, Outcome, Trigger, Verdict};
use domain::events::{OperatorEvent, OrgEvent};
use domain::lifecycle::transition;
use domain::models::{LifecycleState, Offer};
use domain::presence::PresenceEvent;
use domain::rules::skill_of;
use std::collections::HashMap;

/// The robot a call is raised for, as the engine needs it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CallingRobot {
    pub id: String,
    pub model: String,
    pub site: String,
    pub pop: String,
    pub req_cert: String,
}

pub(super) fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

impl Desk {
    /// Raises a distress call (rules A01–A05, A11, A13, D09).
    pub fn raise(&mut self, robot: &CallingRobot, now: i64) -> Result<CallOutcome, EngineError> {
        let skill = skill_of(&robot.req_cert).map_err(|_| EngineError::NoSkill(robot.req_cert.clone()))?.to_string();
        if let Some(session_id) = self.open_by_robot.get(&robot.id) {
            return Err(EngineError::CallInProgress { robot_id: robot.id.clone(), session_id: session_id.clone() });
        }
        let session_id = new_id("ses");
        // The booking the robot is in now makes the call its client's (rule L13).
        let booking = self.booking_now(&robot.id, now);
        self.fx.writes.push(Write::OpenSession(NewSession {
            id: session_id.clone(),
            org_id: self.org_id.clone(),
            robot_id: robot.id.clone(),
            skill: skill.clone(),
            pop: robot.pop.clone(),
            raised_at: now,
            client_id: booking.as_ref().map(|b| b.client_id.clone()),
            booking_id: booking.as_ref().map(|b| b.id.clone()),
            planned_end_at: booking.as_ref().map(|b| b.ends_at),
        }));
        self.open_by_robot.insert(robot.id.clone(), session_id.clone());
        self.calls.insert(
            session_id.clone(),
            Call {
                robot_id: robot.id.clone(),
                robot_model: robot.model.clone(),
                site: robot.site.clone(),
                skill: skill.clone(),
                pop: robot.pop.clone(),
                raised_at: now,
                booking,
                offered_to: None,
                queued: false,
                cooloffs: HashMap::new(),
                relax_at: None,
            },
        );
        self.timers.at(now + self.settings.pending_timeout_ms, Timer::PendingTimeout { session_id: session_id.clone() });
        Ok(match self.place(&session_id, Trigger::Raised, now, true) {
            Some((operator, rtt_ms, offer)) => CallOutcome::Matched { session_id, operator, rtt_ms, offer },
            None => {
                let position = self.queue_position(&skill, now, &session_id);
                CallOutcome::Queued { session_id, skill, position }
            }
        })
    }

    /// 1-based place among the queued calls of `skill`, oldest first.
    fn queue_position(&self, skill: &str, raised_at: i64, session_id: &str) -> i64 {
        let Some(queue) = self.queues.get(skill) else { return 0 };
        let key = (raised_at, session_id.to_string());
        // New calls join at the end: no walk for the common case.
        if queue.last() == Some(&key) {
            return queue.len() as i64;
        }
        queue.range(..=key).count() as i64
    }

    pub(super) fn enqueue_key(&mut self, skill: &str, raised_at: i64, session_id: &str) {
        self.queues.entry(skill.to_string()).or_default().insert((raised_at, session_id.to_string()));
        self.queued.insert((raised_at, session_id.to_string()));
    }

    fn dequeue_key(&mut self, skill: &str, raised_at: i64, session_id: &str) {
        let key = (raised_at, session_id.to_string());
        if let Some(queue) = self.queues.get_mut(skill) {
            queue.remove(&key);
            if queue.is_empty() {
                self.queues.remove(skill);
            }
        }
        self.queued.remove(&key);
    }

    /// Decides where a pending call goes: an offer to the best operator
    /// who may take it, or the queue. `record_queued` is false when a
    /// queued call is merely looked at again (no record of "still queued").
    pub(super) fn place(&mut self, session_id: &str, trigger: Trigger, now: i64, record_queued: bool) -> Option<(MatchedOperator, u32, Offer)> {
        let call = self.calls.get(session_id)?;
        let others = self.operators.len().saturating_sub(self.index.len());
        let (busy, org_id) = (&self.busy, &self.org_id);
        let skip = |id: &str| {
            if busy.held_elsewhere(id, org_id) {
                Some(Verdict::Busy)
            } else if call.cooloffs.get(id).is_some_and(|until| *until > now) {
                Some(Verdict::AlreadyOffered)
            } else {
                None
            }
        };
        let ceiling = self.ceiling_of(session_id, now);
        let mut claim = self.index.claim(&call.pop, &call.skill, ceiling, others, &skip);
        // Another org's dispatcher may have rung this operator a moment ago:
        // then they are held elsewhere, and the next claim skips them.
        while let Some((id, _)) = &claim.chosen {
            if self.claim_operator(id) {
                break;
            }
            claim = self.index.claim(&call.pop, &call.skill, ceiling, others, &skip);
        }
        let outcome = if claim.chosen.is_some() { Outcome::Offered } else { Outcome::Queued };
        if outcome == Outcome::Queued && !record_queued {
            return None;
        }
        let candidates = claim
            .looked
            .iter()
            .map(|l| CandidateRef {
                operator_id: l.operator_id,
                name: self.operators.get(l.operator_id).map_or("", |op| op.presence.name.as_str()),
                rtt_ms: Some(l.rtt_ms),
                verdict: l.verdict,
            })
            .collect();
        let summary = CandidateSummaryRef { candidates, omitted: claim.omitted, ceiling_ms: ceiling };
        let chosen = claim.chosen.map(|(id, rtt)| (id.to_string(), rtt));
        let record = DispatchRecord {
            at: now,
            trigger,
            pool_source: claim.source,
            outcome,
            operator_id: chosen.as_ref().map(|(id, _)| id.clone()),
            rtt_ms: chosen.as_ref().map(|(_, rtt)| *rtt),
            candidates: serde_json::to_string(&summary).unwrap_or_else(|_| "{}".into()),
        };
        let Some((operator_id, rtt_ms)) = chosen else {
            let (skill, raised_at) = (call.skill.clone(), call.raised_at);
            let was_queued = call.queued;
            if !was_queued {
                self.enqueue_key(&skill, raised_at, session_id);
                if let Some(call) = self.calls.get_mut(session_id) {
                    call.queued = true;
                }
                self.fx.writes.push(Write::Queue { org_id: self.org_id.clone(), session_id: session_id.to_string(), at: now });
            }
            self.fx.writes.push(Write::Record { org_id: self.org_id.clone(), session_id: session_id.to_string(), record });
            self.lifecycle_event(session_id, now);
            self.arm_relaxation(session_id, now);
            return None;
        };
        let offer = Offer {
            session_id: session_id.to_string(),
            robot_id: call.robot_id.clone(),
            robot_model: call.robot_model.clone(),
            site: call.site.clone(),
            rtt_ms,
            operator_id: operator_id.clone(),
            offered_at: now,
            expires_at: now + self.settings.offer_window_ms,
            handover_from: None,
        };
        let from_queue = call.queued;
        if from_queue {
            let (skill, raised_at) = (call.skill.clone(), call.raised_at);
            self.dequeue_key(&skill, raised_at, session_id);
        }
        if let Some(call) = self.calls.get_mut(session_id) {
            call.queued = false;
            call.offered_to = Some(operator_id.clone());
        }
        self.fx.writes.push(Write::Offer {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            offer: NewOffer { id: new_id("ofr"), operator_id: operator_id.clone(), rtt_ms, offered_at: now, expires_at: offer.expires_at },
            from_queue,
        });
        self.fx.writes.push(Write::Record { org_id: self.org_id.clone(), session_id: session_id.to_string(), record });
        self.offers.insert(operator_id.clone(), offer.clone());
        self.timers.at(offer.expires_at, Timer::OfferExpiry { operator_id: operator_id.clone(), session_id: session_id.to_string() });
        self.presence_event(&operator_id, PresenceEvent::Offered, None, now);
        if let Some(op) = self.operators.get_mut(&operator_id) {
            if op.presence.current_call.is_none() {
                op.presence.current_call = Some(session_id.to_string());
                self.publish_presence(&operator_id);
            }
        }
        self.fx.tell_operator(&self.org_id, &operator_id, OperatorEvent::Offer { offer: offer.clone() });
        self.lifecycle_event(session_id, now);
        let p = &self.operators[&operator_id].presence;
        let matched = MatchedOperator { id: p.operator_id.clone(), name: p.name.clone(), region: p.region.clone() };
        Some((matched, rtt_ms, offer))
    }

    /// Closes the operator's open offer in this org. A decline or a miss
    /// starts the cool-off for that call (rule D08).
    pub(super) fn close_offer(&mut self, operator_id: &str, status: OfferStatus, now: i64) -> Option<Offer> {
        let offer = self.offers.remove(operator_id)?;
        self.offer_closed(&offer.session_id, operator_id, status, now);
        Some(offer)
    }

    /// What follows an offer's close, once it is out of `offers` (or was
    /// never put there: a handover found ringing at load): the operator's
    /// claim released, the close written and told, the cool-off, the
    /// handover's outcome, the operator indexed again.
    pub(super) fn offer_closed(&mut self, session_id: &str, operator_id: &str, status: OfferStatus, now: i64) {
        let (waiting, tell) = self.busy.release(operator_id, &self.org_id);
        self.fx.pokes.extend(waiting);
        if tell {
            self.fx.freed.push((operator_id.to_string(), self.org_id.clone()));
        }
        self.fx.writes.push(Write::CloseOffer {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            operator_id: operator_id.to_string(),
            status,
            at: now,
        });
        self.fx.tell_operator(&self.org_id, operator_id, OperatorEvent::OfferClosed { session_id: session_id.to_string(), how: status.ring_end() });
        if let Some(call) = self.calls.get_mut(session_id) {
            call.offered_to = None;
            if matches!(status, OfferStatus::Declined | OfferStatus::Expired) {
                let until = now + self.settings.cooloff_ms;
                call.cooloffs.insert(operator_id.to_string(), until);
                self.timers.at(until, Timer::CoolOff { session_id: session_id.to_string(), operator_id: operator_id.to_string() });
            }
        }
        self.handover_closed(session_id, operator_id, status);
        self.reindex(operator_id);
    }

    /// Accepts the operator's open offer: the session starts (ACTIVE,
    /// SESSION_START) and they are on the call.
    pub fn accept(&mut self, operator_id: &str, session_id: &str, now: i64) -> Result<(), EngineError> {
        self.operator_mut(operator_id)?;
        if self.offers.get(operator_id).is_none_or(|o| o.session_id != session_id) {
            return Err(EngineError::NoOpenOffer);
        }
        let offer = self.close_offer(operator_id, OfferStatus::Accepted, now).expect("checked above");
        if self.live.contains_key(session_id) {
            self.take_over(session_id, operator_id, offer.rtt_ms, now);
            return Ok(());
        }
        let call = self.calls.remove(session_id).expect("an open offer has a pending call");
        let region = self.operators.get(operator_id).map(|op| op.presence.region.clone()).unwrap_or_default();
        // The booking's end; past it (the call waited long), the default length.
        let planned_end = call.booking.as_ref().map(|b| b.ends_at).filter(|end| *end > now).unwrap_or(now + self.settings.session_ms);
        self.fx.writes.push(Write::Start {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            operator_id: operator_id.to_string(),
            region,
            rtt_ms: offer.rtt_ms,
            planned_end_at: planned_end,
            at: now,
        });
        let mut live = Live::active(
            LiveRobot { robot_id: call.robot_id, robot_model: call.robot_model, site: call.site, skill: call.skill, pop: call.pop },
            Some(operator_id.to_string()),
            now,
        );
        live.booking_id = call.booking.map(|b| b.id);
        self.live.insert(session_id.to_string(), live);
        self.start_chain(session_id, now);
        self.plan_end(session_id, planned_end);
        self.presence_event(operator_id, PresenceEvent::Attached, None, now);
        if let Some(op) = self.operators.get_mut(operator_id) {
            op.presence.current_call = Some(session_id.to_string());
        }
        self.publish_presence(operator_id);
        self.lifecycle_event(session_id, now);
        Ok(())
    }

    /// Declines: the call goes to the next best operator or the queue
    /// (rule D03); the decliner is ready again.
    pub fn decline(&mut self, operator_id: &str, session_id: &str, now: i64) -> Result<(), EngineError> {
        self.operator_mut(operator_id)?;
        if self.offers.get(operator_id).is_none_or(|o| o.session_id != session_id) {
            return Err(EngineError::NoOpenOffer);
        }
        self.close_offer(operator_id, OfferStatus::Declined, now);
        self.presence_event(operator_id, PresenceEvent::OfferReleased, None, now);
        self.place(session_id, Trigger::Declined, now, true);
        Ok(())
    }

    /// Ends an open session (COMPLETED or CANCELLED). A ringing offer is
    /// withdrawn; an attached operator moves to wrap-up. `Ok(false)` when
    /// the desk has no such open session (unknown or already ended).
    /// `finish`, asked by `robot` (which may end only its own session) or
    /// an admin (`None`).
    pub fn withdraw(&mut self, session_id: &str, robot: Option<&str>, to: LifecycleState, reason: &str, now: i64) -> Result<bool, EngineError> {
        if let Some(robot) = robot {
            let own = match self.calls.get(session_id) {
                Some(call) => Some(call.robot_id.as_str()),
                None => self.live.get(session_id).map(|live| live.robot_id.as_str()),
            };
            if own.is_some_and(|own| own != robot) {
                return Err(EngineError::NotFound("session"));
            }
        }
        self.finish(session_id, to, reason, now)
    }

    pub fn finish(&mut self, session_id: &str, to: LifecycleState, reason: &str, now: i64) -> Result<bool, EngineError> {
        let from = if self.calls.contains_key(session_id) {
            LifecycleState::Pending
        } else if let Some(live) = self.live.get(session_id) {
            live.lifecycle
        } else {
            return Ok(false);
        };
        if transition(from, to).is_none() {
            return Err(EngineError::IllegalTransition { from: from.as_str(), to: to.as_str() });
        }
        if let Some(ringing) = self.live.get(session_id).and_then(|l| l.handover_ringing().map(str::to_string)) {
            self.close_offer(&ringing, OfferStatus::Withdrawn, now);
            self.presence_event(&ringing, PresenceEvent::OfferReleased, None, now);
        }
        let (robot_id, attached) = if let Some(call) = self.calls.remove(session_id) {
            if let Some(ringing) = &call.offered_to {
                self.close_offer(ringing, OfferStatus::Withdrawn, now);
                self.presence_event(ringing, PresenceEvent::OfferReleased, None, now);
            }
            if call.queued {
                self.dequeue_key(&call.skill, call.raised_at, session_id);
            }
            (call.robot_id, None)
        } else {
            let live = self.live.remove(session_id).expect("checked above");
            (live.robot_id, live.operator_id)
        };
        self.open_by_robot.remove(&robot_id);
        self.fx.writes.push(Write::End {
            org_id: self.org_id.clone(),
            session_id: session_id.to_string(),
            to,
            reason: reason.to_string(),
            attached: attached.clone(),
            at: now,
        });
        if let Some(operator_id) = attached {
            let on_it = self.operators.get(&operator_id).is_some_and(|op| op.presence.current_call.as_deref() == Some(session_id));
            if on_it {
                self.presence_event(&operator_id, PresenceEvent::SessionEnded, None, now);
            }
        }
        let event = OrgEvent::Lifecycle { session_id: session_id.to_string(), robot_id, lifecycle: to, operator_id: None, queued: false, at_ms: now };
        self.fx.tell_org(&self.org_id, event);
        Ok(true)
    }

    /// Tells the org's screens where a pending or live session stands.
    pub(super) fn lifecycle_event(&mut self, session_id: &str, now: i64) {
        let event = if let Some(call) = self.calls.get(session_id) {
            OrgEvent::Lifecycle {
                session_id: session_id.to_string(),
                robot_id: call.robot_id.clone(),
                lifecycle: LifecycleState::Pending,
                operator_id: call.offered_to.clone(),
                queued: call.queued,
                at_ms: now,
            }
        } else if let Some(live) = self.live.get(session_id) {
            OrgEvent::Lifecycle {
                session_id: session_id.to_string(),
                robot_id: live.robot_id.clone(),
                lifecycle: live.lifecycle,
                operator_id: live.operator_id.clone(),
                queued: false,
                at_ms: now,
            }
        } else {
            return;
        };
        self.fx.tell_org(&self.org_id, event);
    }
}
