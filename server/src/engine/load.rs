//! Loading a desk from the database: at start, and after a failed commit
//! (presences, which live only in memory, are kept).

use super::desk::{Call, Desk, LastHandover, Live, LiveRobot, Operator};
use super::timers::{Timer, Timers};
use super::types::OperatorPresence;
use crate::store::{OpenOfferRow, OperatorRecord, OrgSnapshot};
use domain::handover::HandoverOutcome;
use domain::models::{LifecycleState, Offer, PresenceState};
use std::collections::HashMap;

impl Desk {
    /// Rebuilds calls, offers and queues from the database, keeping the
    /// presences (which live only here). Used at start and after a failed
    /// commit; `recover` then closes what went stale while nobody watched.
    pub fn load(&mut self, snapshot: OrgSnapshot, now: i64) {
        self.release_offers(false);
        self.calls.clear();
        self.queues.clear();
        self.queued.clear();
        self.live.clear();
        self.open_by_robot.clear();
        self.timers = Timers::default();
        for record in snapshot.operators {
            self.load_operator(record);
        }
        for row in snapshot.pending {
            self.open_by_robot.insert(row.robot_id.clone(), row.session_id.clone());
            let queued = row.queued_at.is_some();
            if queued {
                self.enqueue_key(&row.skill, row.raised_at, &row.session_id);
            }
            self.timers.at(row.raised_at + self.settings.pending_timeout_ms, Timer::PendingTimeout { session_id: row.session_id.clone() });
            self.calls.insert(
                row.session_id,
                Call {
                    robot_id: row.robot_id,
                    robot_model: row.robot_model,
                    site: row.site,
                    skill: row.skill,
                    pop: row.pop,
                    raised_at: row.raised_at,
                    booking: match (row.booking_id, row.client_id, row.planned_end_at) {
                        (Some(id), Some(client_id), Some(ends_at)) => Some(super::desk::BookingHold { id, client_id, ends_at }),
                        _ => None,
                    },
                    offered_to: None,
                    queued,
                    cooloffs: HashMap::new(),
                    relax_at: None,
                },
            );
        }
        for row in snapshot.answered {
            let until = row.answered_at + self.settings.cooloff_ms;
            if let Some(call) = self.calls.get_mut(&row.session_id) {
                if until > now {
                    let entry = call.cooloffs.entry(row.operator_id.clone()).or_insert(until);
                    *entry = (*entry).max(until);
                    self.timers.at(until, Timer::CoolOff { session_id: row.session_id, operator_id: row.operator_id });
                }
            }
        }
        let mut handovers = Vec::new();
        for row in snapshot.open_offers {
            let Some(call) = self.calls.get_mut(&row.session_id) else {
                // A handover's (no call): withdrawn below, once the live
                // sessions, and with them its holder, are loaded.
                handovers.push(row);
                continue;
            };
            call.offered_to = Some(row.operator_id.clone());
            let offer = Offer {
                session_id: row.session_id.clone(),
                robot_id: call.robot_id.clone(),
                robot_model: call.robot_model.clone(),
                site: call.site.clone(),
                rtt_ms: u32::try_from(row.rtt_ms).unwrap_or(u32::MAX),
                operator_id: row.operator_id.clone(),
                offered_at: row.offered_at,
                expires_at: row.expires_at,
                handover_from: None,
            };
            // The database's open offer is the truth: a claim from elsewhere is stale.
            let told = self.operators.get(&row.operator_id).is_some_and(|op| op.in_other_orgs);
            self.busy.claim_loaded(&row.operator_id, &self.org_id, told);
            self.timers.at(row.expires_at, Timer::OfferExpiry { operator_id: row.operator_id.clone(), session_id: row.session_id });
            self.offers.insert(row.operator_id, offer);
        }
        // Rung by another org's desk, perhaps on another instance (cluster
        // mode; one process knows its own desks' claims already).
        for row in snapshot.held_elsewhere {
            self.busy.held_by(&row.operator_id, &row.org_id, row.expires_at - now);
        }
        for row in snapshot.live {
            let lifecycle = LifecycleState::parse(&row.lifecycle).unwrap_or(LifecycleState::Active);
            self.open_by_robot.insert(row.robot_id.clone(), row.session_id.clone());
            // The chain starts afresh: input while this instance was away is unknown.
            let robot = LiveRobot { robot_id: row.robot_id, robot_model: row.robot_model, site: row.site, skill: row.skill, pop: row.pop };
            let mut live = Live::active(robot, row.operator_id, now);
            live.lifecycle = lifecycle;
            live.booking_id = row.booking_id;
            self.live.insert(row.session_id.clone(), live);
            if lifecycle == LifecycleState::Active {
                self.start_chain(&row.session_id, now);
            }
            // Past already (the server was down): the first timer run completes it.
            if let Some(end) = row.planned_end_at {
                self.plan_end(&row.session_id, end);
            }
        }
        // A handover that rang when the server stopped: nobody heard it
        // since, so it is withdrawn as a running desk withdraws one
        // (`offer_closed`): control stays, its holder is told (a console
        // still open: a takeover in cluster mode, a reload after a failed
        // commit), its ring stops where it still shows (after a failed
        // commit, no Welcome follows to clear it), and its operator is free
        // again, on every instance.
        for row in handovers {
            self.withdraw_loaded_handover(row, now);
        }
        // Presences agree with the offers just loaded; anyone not heard from
        // lapses unless a tab opens.
        let ids: Vec<String> = self.operators.keys().cloned().collect();
        for id in ids {
            let holds = self.offers.get(&id).map(|o| o.session_id.clone());
            let op = self.operators.get_mut(&id).expect("known");
            match (&holds, op.presence.state) {
                (Some(session), PresenceState::Offline | PresenceState::Ready | PresenceState::Aux | PresenceState::Acw) => {
                    op.presence.enter(PresenceState::Ringing, now);
                    op.presence.current_call = Some(session.clone());
                }
                (None, PresenceState::Ringing) => {
                    op.presence.enter(PresenceState::Ready, now);
                    op.presence.current_call = None;
                }
                _ => {}
            }
            if op.presence.state == PresenceState::Acw {
                let since = op.presence.since;
                self.timers.at(since + self.settings.wrap_up_ms, Timer::WrapUp { operator_id: id.clone(), since });
            }
            if op.tabs.is_empty() && op.presence.state != PresenceState::Offline {
                let generation = op.generation;
                self.timers.at(now + self.settings.presence_ttl_ms, Timer::Lapse { operator_id: id.clone(), generation });
            }
            self.reindex(&id);
            // After a failed batch the tabs may have heard nothing of what
            // was undone: everyone's presence is told again.
            self.publish_presence(&id);
        }
        // The timers were cleared: queued calls' ceilings relax again from here.
        self.arm_relaxations(now);
        self.dirty = true;
    }

    /// Forgets every ringing offer, freeing its operator for other orgs
    /// (before a reload, and when this instance stops dispatching the org).
    /// Other instances are told nothing. `stepping_down`: the offers stay
    /// open in the database until the next owner closes or keeps them, so
    /// in cluster mode each still holds its operator here, as a claim from
    /// elsewhere, until it expires (before a reload, the load claims again
    /// those still open).
    pub fn release_offers(&mut self, stepping_down: bool) {
        let now = crate::clock::now_ms();
        for (operator_id, offer) in self.offers.drain() {
            let (waiting, _) = self.busy.release(&operator_id, &self.org_id);
            if stepping_down {
                self.busy.held_by(&operator_id, &self.org_id, offer.expires_at - now);
            }
            self.fx.pokes.extend(waiting);
        }
    }

    /// A handover offer found ringing, withdrawn: first put back as it
    /// rang (its operator claimed, the session's last handover ringing for
    /// them; a session that is not live, which a committed end does not
    /// leave, has no handover to tell), then closed.
    fn withdraw_loaded_handover(&mut self, row: OpenOfferRow, now: i64) {
        // Claimed as the instance that rang it had claimed it (so the free
        // that follows the withdrawal's commit matches on the others), and
        // told for anyone this desk does not know to be in this org alone
        // (removed while it rang: other orgs may still hold them).
        let told = self.operators.get(&row.operator_id).is_none_or(|op| op.in_other_orgs);
        self.busy.claim_loaded(&row.operator_id, &self.org_id, told);
        if let Some(live) = self.live.get_mut(&row.session_id) {
            live.handover = Some(LastHandover { to: row.operator_id.clone(), outcome: HandoverOutcome::Ringing });
        }
        self.offer_closed(&row.session_id, &row.operator_id, domain::dispatch::OfferStatus::Withdrawn, now);
    }

    /// Adds an operator (or refreshes their profile), keeping any presence.
    pub fn load_operator(&mut self, record: OperatorRecord) {
        let skills = domain::rules::skills_of(&record.certifications);
        let id = record.user_id.clone();
        match self.operators.get_mut(&id) {
            Some(op) => {
                op.presence.name = record.display_name;
                op.presence.region = record.region;
                op.presence.skills = skills;
                op.inactive = !record.active;
                op.in_other_orgs = record.in_other_orgs;
            }
            None => {
                self.operators.insert(
                    id.clone(),
                    Operator {
                        presence: OperatorPresence {
                            operator_id: record.user_id,
                            name: record.display_name,
                            region: record.region,
                            skills,
                            state: PresenceState::Offline,
                            since: 0,
                            aux_reason: None,
                            current_call: None,
                            live_ready: false,
                            measured_rtt_ms: Default::default(),
                        },
                        tabs: Default::default(),
                        generation: 0,
                        inactive: !record.active,
                        in_other_orgs: record.in_other_orgs,
                    },
                );
            }
        }
        self.reindex(&id);
        self.dirty = true;
    }
}
