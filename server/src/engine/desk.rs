//! One org's dispatch state, owned by that org's dispatcher task and
//! changed only through these methods: presences, open offers, pending
//! calls and their queues, live sessions, the ready index and the timers.
//!
//! The desk does no I/O. Each change appends to `Effects`: the writes the
//! dispatcher commits for the batch, and the events it publishes once they
//! are committed. Calls and offers are in `calls.rs`, loading from the
//! database in `load.rs`; this file keeps presences, tabs and timers, and
//! the state of a call (`Call`) and of a live session (`Live`).

use super::busy::BusyOperators;
use super::ready::{Entry, ReadyIndex, Tier};
use super::timers::{Timer, Timers};
use super::types::{EngineError, OperatorPresence, Settings};
use crate::store::Write;
use domain::dispatch::{LinkFloors, Trigger};
use domain::events::{Event, OperatorEvent, OrgEvent, Topic};
use domain::models::{LifecycleState, Offer, PresenceState};
use domain::presence::{in_live_pool, in_roster_pool, next_presence, PresenceEvent, MISSED_OFFER, NOT_READY};
use domain::ring::MyPresence;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// What a batch produced: writes to commit, then events to publish.
#[derive(Default)]
pub struct Effects {
    pub writes: Vec<Write>,
    pub events: Vec<(Topic, Event)>,
    /// Other orgs to look at their queues again: an operator they found
    /// busy here is free (rule D10).
    pub pokes: Vec<String>,
    /// Operators freed here (operator, org) whom other instances must hear
    /// of (rule D10), told once the close is committed.
    pub freed: Vec<(String, String)>,
}

impl Effects {
    /// Tells one operator's console tabs (on every instance), once the
    /// batch has committed.
    pub(super) fn tell_operator(&mut self, org_id: &str, operator_id: &str, event: OperatorEvent) {
        self.events.push((Topic::operator(org_id, operator_id), Event::Operator(event)));
    }

    /// Tells the org's live screens (on every instance), once the batch has
    /// committed.
    pub(super) fn tell_org(&mut self, org_id: &str, event: OrgEvent) {
        self.events.push((Topic::org(org_id), Event::Org(event)));
    }
}

pub(super) struct Operator {
    pub presence: OperatorPresence,
    /// Open console tabs, by id: a tab that registers again (with a new
    /// dispatcher, `Rejoin`) is still one tab.
    pub tabs: HashSet<String>,
    /// Bumped when a tab opens, so an older lapse timer is ignored.
    pub generation: u64,
    /// Made inactive (or removed) in the directory: never dispatched to.
    pub inactive: bool,
    /// A member of other orgs too: ringing them is told to the other
    /// instances (rule D10; `BusyOperators::claim`).
    pub in_other_orgs: bool,
}

/// A booking a call was raised in: the session is its client's and ends
/// at the booking's end (rule L13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookingHold {
    pub id: String,
    pub client_id: String,
    pub ends_at: i64,
}

/// A PENDING call.
pub(super) struct Call {
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub skill: String,
    pub pop: String,
    pub raised_at: i64,
    /// The booking the call was raised in: its client and end (rule L13).
    pub booking: Option<BookingHold>,
    pub offered_to: Option<String>,
    pub queued: bool,
    /// Operator → until when they may not be offered this call (rule D08).
    pub cooloffs: HashMap<String, i64>,
    /// When a relaxation timer of its RTT ceiling is armed for (rule A16).
    pub relax_at: Option<i64>,
}

/// A session's last handover: offered to `to`, and where it stands.
pub(super) struct LastHandover {
    pub to: String,
    pub outcome: domain::handover::HandoverOutcome,
}

/// An ACTIVE or PAUSED session.
pub(super) struct Live {
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub skill: String,
    pub pop: String,
    pub operator_id: Option<String>,
    /// The session's last handover as its holder was told it (rule L08):
    /// ringing, or how it ended; none once control moved.
    pub handover: Option<LastHandover>,
    /// When the session completes unless extended (rule L13).
    pub planned_end: Option<i64>,
    /// The booking it runs in: never in the way of its own extension.
    pub booking_id: Option<String>,
    pub lifecycle: LifecycleState,
    /// The inactivity chain (rule L07) while ACTIVE.
    pub watch: domain::inactivity::Watch,
    /// Which chain the pending inactivity timer belongs to (a pause ends
    /// it; a resume starts the next).
    pub chain: u64,
}

impl Live {
    /// A session that has just started (or been loaded) with `operator_id` in control.
    pub fn active(robot: LiveRobot, operator_id: Option<String>, now: i64) -> Live {
        let LiveRobot { robot_id, robot_model, site, skill, pop } = robot;
        Live {
            robot_id,
            robot_model,
            site,
            skill,
            pop,
            operator_id,
            handover: None,
            planned_end: None,
            booking_id: None,
            lifecycle: LifecycleState::Active,
            watch: domain::inactivity::Watch::start(now),
            chain: 0,
        }
    }

    /// The operator the session's handover offer rings for.
    pub fn handover_ringing(&self) -> Option<&str> {
        self.handover.as_ref().filter(|h| h.outcome == domain::handover::HandoverOutcome::Ringing).map(|h| h.to.as_str())
    }
}

/// What a live session keeps of its robot and call.
pub struct LiveRobot {
    pub robot_id: String,
    pub robot_model: String,
    pub site: String,
    pub skill: String,
    pub pop: String,
}

pub struct Desk {
    pub(super) org_id: String,
    pub(super) settings: Settings,
    pub(super) floors: Arc<LinkFloors>,
    pub(super) busy: Arc<BusyOperators>,
    pub(super) operators: HashMap<String, Operator>,
    /// Operator → the offer ringing for them in this org.
    pub(super) offers: HashMap<String, Offer>,
    pub(super) calls: HashMap<String, Call>,
    /// Queued calls per skill, and all of them, oldest first (rule D06).
    pub(super) queues: HashMap<String, BTreeSet<(i64, String)>>,
    pub(super) queued: BTreeSet<(i64, String)>,
    pub(super) live: HashMap<String, Live>,
    /// Robot → its one open session (rule D09).
    pub(super) open_by_robot: HashMap<String, String>,
    /// Robot → its bookings not yet over (rule L13), as the booking
    /// service last committed them: a raise and an extension read them here.
    pub(super) bookings: HashMap<String, Vec<domain::booking::Booking>>,
    pub(super) index: ReadyIndex,
    /// The org's RTT ceilings, by skill (rules A15, A16).
    pub(super) ceilings: HashMap<String, domain::dispatch::RttCeiling>,
    pub timers: Timers,
    pub(super) fx: Effects,
    /// Someone may have become able to take a queued call.
    pub(super) dirty: bool,
}

impl Desk {
    pub fn new(org_id: &str, settings: Settings, floors: Arc<LinkFloors>, busy: Arc<BusyOperators>) -> Desk {
        Desk {
            org_id: org_id.to_string(),
            settings,
            floors,
            busy,
            operators: HashMap::new(),
            offers: HashMap::new(),
            calls: HashMap::new(),
            queues: HashMap::new(),
            queued: BTreeSet::new(),
            live: HashMap::new(),
            open_by_robot: HashMap::new(),
            bookings: HashMap::new(),
            index: ReadyIndex::default(),
            ceilings: HashMap::new(),
            timers: Timers::default(),
            fx: Effects::default(),
            dirty: false,
        }
    }

    /// Another org freed an operator this desk found busy.
    pub fn poke(&mut self) {
        self.dirty = true;
    }

    /// A desk with nobody else to share operators with (benchmarks, tools).
    pub fn standalone(org_id: &str, settings: Settings, floors: LinkFloors) -> Desk {
        Desk::new(org_id, settings, Arc::new(floors), Arc::default())
    }

    /// What the decisions left, taken whole (`move_effects_into` a new
    /// batch, so the desk keeps its buffers either way).
    pub fn take_effects(&mut self) -> Effects {
        let mut fx = Effects::default();
        self.move_effects_into(&mut fx);
        fx
    }

    /// Moves what the decisions left into `into`, keeping the desk's
    /// buffers (and their capacity) for the next decisions: a batch's
    /// effects then cost one allocation each, not a chain of growths.
    pub fn move_effects_into(&mut self, into: &mut Effects) {
        // Named field by field: a field added to `Effects` must be moved too.
        let Effects { writes, events, pokes, freed } = &mut self.fx;
        into.writes.append(writes);
        into.events.append(events);
        into.pokes.append(pokes);
        into.freed.append(freed);
    }

    /// Claims the operator for an offer of this org (rule D10); false when
    /// another org's offer holds them.
    pub(super) fn claim_operator(&self, operator_id: &str) -> bool {
        let told = self.operators.get(operator_id).is_some_and(|op| op.in_other_orgs);
        self.busy.claim(operator_id, &self.org_id, told)
    }

    pub(super) fn operator_mut(&mut self, operator_id: &str) -> Result<&mut Operator, EngineError> {
        self.operators.get_mut(operator_id).ok_or(EngineError::NotFound("operator"))
    }

    pub fn presence(&self, operator_id: &str) -> Option<&OperatorPresence> {
        self.operators.get(operator_id).map(|op| &op.presence)
    }

    /// What an operator's tab shows: their presence and the offer ringing.
    pub fn console(&self, operator_id: &str) -> Option<(OperatorPresence, Option<Offer>)> {
        let op = self.operators.get(operator_id)?;
        Some((op.presence.clone(), self.offers.get(operator_id).cloned()))
    }

    /// Every operator's presence, by name.
    pub fn presences(&self) -> Vec<OperatorPresence> {
        let mut all: Vec<OperatorPresence> = self.operators.values().map(|op| op.presence.clone()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name).then(a.operator_id.cmp(&b.operator_id)));
        all
    }

    /// Puts the operator where the pool rules say (or out of the index).
    pub(super) fn reindex(&mut self, operator_id: &str) {
        let Some(op) = self.operators.get(operator_id) else { return };
        let p = &op.presence;
        let tier = if self.offers.contains_key(operator_id) || op.inactive {
            None
        } else if in_live_pool(p.state, p.live_ready) {
            Some(Tier::Live)
        } else if in_roster_pool(p.state) {
            Some(Tier::Roster)
        } else {
            None
        };
        match tier {
            Some(tier) => self.index.upsert(
                Entry {
                    operator_id,
                    tier,
                    region: &p.region,
                    skills: &p.skills,
                    since: p.since,
                    measured: &p.measured_rtt_ms,
                },
                &self.floors,
            ),
            None => self.index.remove(operator_id),
        }
    }

    /// Applies a presence event (with the aux reason, should it end in
    /// `aux`), reindexes, and tells the operator's tabs and the org's roster.
    pub(super) fn presence_event(&mut self, operator_id: &str, event: PresenceEvent, aux_reason: Option<&str>, now: i64) {
        let Some(op) = self.operators.get_mut(operator_id) else { return };
        let next = next_presence(op.presence.state, event);
        op.presence.enter(next, now);
        if next == PresenceState::Aux && aux_reason.is_some() {
            op.presence.aux_reason = aux_reason.map(str::to_owned);
        }
        match next {
            PresenceState::Ringing | PresenceState::OnCall => {}
            _ => op.presence.current_call = None,
        }
        if matches!(next, PresenceState::Aux | PresenceState::Offline) {
            op.presence.live_ready = false;
        }
        if next == PresenceState::Offline {
            op.presence.measured_rtt_ms.clear();
        }
        if next == PresenceState::Acw {
            let since = op.presence.since;
            self.timers.at(since + self.settings.wrap_up_ms, Timer::WrapUp { operator_id: operator_id.to_string(), since });
        }
        self.reindex(operator_id);
        self.dirty = true;
        self.publish_presence(operator_id);
    }

    pub(super) fn publish_presence(&mut self, operator_id: &str) {
        let Some(op) = self.operators.get(operator_id) else { return };
        let p = &op.presence;
        let mine = MyPresence { state: p.state, since_ms: p.since, aux_reason: p.aux_reason.clone(), current_call: p.current_call.clone() };
        let roster = p.roster_update();
        self.fx.tell_operator(&self.org_id, operator_id, OperatorEvent::Presence { presence: mine });
        self.fx.tell_org(&self.org_id, OrgEvent::Presence { presence: roster });
    }

    /// Ready (`live`: from a Ready screen). An attached or ringing operator
    /// keeps their state; queued calls they can serve are offered after
    /// the batch.
    pub fn ready(&mut self, operator_id: &str, live: bool, now: i64) -> Result<(), EngineError> {
        let op = self.operator_mut(operator_id)?;
        if op.inactive {
            return Err(EngineError::Inactive);
        }
        if op.presence.state == PresenceState::OnCall {
            return Ok(());
        }
        op.presence.live_ready = live;
        self.presence_event(operator_id, PresenceEvent::Ready, None, now);
        Ok(())
    }

    /// Steps away with a reason; an offer they held counts as declined.
    pub fn aux(&mut self, operator_id: &str, reason: &str, now: i64) -> Result<(), EngineError> {
        self.operator_mut(operator_id)?;
        if let Some(offer) = self.offers.get(operator_id).cloned() {
            self.close_offer(operator_id, domain::dispatch::OfferStatus::Declined, now);
            self.place(&offer.session_id, Trigger::Declined, now, true);
        }
        self.presence_event(operator_id, PresenceEvent::Aux, Some(reason), now);
        Ok(())
    }

    /// RTT the operator's console measured to a PoP.
    /// Refused when implausible (rule in `domain::dispatch::plausible_rtt`).
    pub fn report_rtt(&mut self, operator_id: &str, pop: &str, rtt_ms: u32) -> Result<(), EngineError> {
        let floors = self.floors.clone();
        let op = self.operator_mut(operator_id)?;
        if !domain::dispatch::plausible_rtt(rtt_ms, floors.floor(&op.presence.region, pop)) {
            return Err(EngineError::ImplausibleRtt);
        }
        op.presence.measured_rtt_ms.insert(pop.to_string(), rtt_ms);
        self.reindex(operator_id);
        self.dirty = true;
        Ok(())
    }

    /// A console tab connected: an offline operator is online but not
    /// ready. Returns the presence and the offer ringing for them.
    pub fn tab_opened(&mut self, operator_id: &str, tab: &str, now: i64) -> Result<(OperatorPresence, Option<Offer>), EngineError> {
        let op = self.operator_mut(operator_id)?;
        op.tabs.insert(tab.to_string());
        op.generation += 1;
        if op.presence.state == PresenceState::Offline {
            self.presence_event(operator_id, PresenceEvent::SignedIn, Some(NOT_READY), now);
        }
        let presence = self.operators[operator_id].presence.clone();
        // Told after the tab's Welcome (it reads its topic only then),
        // which clears the notices the tab showed about now.
        for notice in self.standing_notices(operator_id, now) {
            self.fx.tell_operator(&self.org_id, operator_id, notice);
        }
        Ok((presence, self.offers.get(operator_id).cloned()))
    }

    /// What the operator was told about the sessions they operate and
    /// still stands (rule L07's warning, rule L13's notice, rule L08's
    /// handover, ringing or how it ended), for a tab that opens
    /// (published, above) or resyncs (`Request::Notices`, sent to that tab alone): one that was
    /// closed, reconnecting or behind when it was told would otherwise
    /// never show it (the session then cancelled, or ended, without a
    /// word), and its `Welcome` clears what it showed before. The sessions
    /// are found by their operator, not by the presence's current call: an
    /// operator who lapsed offline, or went to aux, still operates theirs.
    pub fn standing_notices(&self, operator_id: &str, now: i64) -> Vec<OperatorEvent> {
        let mut notices = Vec::new();
        for (session_id, live) in self.live.iter().filter(|(_, l)| l.operator_id.as_deref() == Some(operator_id)) {
            if let Some(stop_at_ms) = live.watch.stops_at(&self.settings.inactivity).filter(|_| live.lifecycle == LifecycleState::Active) {
                notices.push(OperatorEvent::InactivityWarning { session_id: session_id.clone(), stop_at_ms });
            }
            if let Some(at) = live.planned_end.filter(|at| domain::booking::planned_end_notice_stands(*at, now)) {
                notices.push(OperatorEvent::PlannedEndSoon { session_id: session_id.clone(), planned_end_ms: at });
            }
            notices.extend(self.handover_standing(session_id));
        }
        notices
    }

    /// A tab closed; when it was the last, presence lapses `ttl` after the
    /// last thing that tab heard (seed 003: an entry kept alive, not a flag).
    pub fn tab_closed(&mut self, operator_id: &str, tab: &str, last_seen: i64) {
        let Some(op) = self.operators.get_mut(operator_id) else { return };
        op.tabs.remove(tab);
        if op.tabs.is_empty() {
            let generation = op.generation;
            self.timers.at(last_seen + self.settings.presence_ttl_ms, Timer::Lapse { operator_id: operator_id.to_string(), generation });
        }
    }

    /// The org's dispatch has just been taken here (a fresh desk, loaded):
    /// every open console, on whatever instance, is asked to register its
    /// tab again (its socket stays open).
    pub fn call_tabs_back(&mut self) {
        for operator_id in self.operators.keys() {
            self.fx.tell_operator(&self.org_id, operator_id, OperatorEvent::Rejoin);
        }
    }

    /// The presence lapsed (or the operator signed out everywhere): offline,
    /// and an offer they held moves on at once.
    pub fn offline(&mut self, operator_id: &str, now: i64) -> Result<(), EngineError> {
        self.operator_mut(operator_id)?;
        if let Some(offer) = self.offers.get(operator_id).cloned() {
            self.close_offer(operator_id, domain::dispatch::OfferStatus::Expired, now);
            self.place(&offer.session_id, Trigger::OperatorOffline, now, true);
        }
        self.presence_event(operator_id, PresenceEvent::Lapsed, None, now);
        Ok(())
    }

    /// Runs one due timer; timers whose subject moved on do nothing.
    pub fn fire(&mut self, timer: Timer, now: i64) {
        match timer {
            Timer::OfferExpiry { operator_id, session_id } => {
                let due = self.offers.get(&operator_id).is_some_and(|o| o.session_id == session_id && o.expires_at <= now);
                if due {
                    self.close_offer(&operator_id, domain::dispatch::OfferStatus::Expired, now);
                    self.presence_event(&operator_id, PresenceEvent::OfferMissed, Some(MISSED_OFFER), now);
                    self.place(&session_id, Trigger::Expired, now, true);
                }
            }
            Timer::WrapUp { operator_id, since } => {
                let due = self
                    .operators
                    .get(&operator_id)
                    .is_some_and(|op| op.presence.state == PresenceState::Acw && op.presence.since == since);
                if due {
                    self.presence_event(&operator_id, PresenceEvent::WrapUpDone, None, now);
                }
            }
            Timer::Lapse { operator_id, generation } => {
                let due = self.operators.get(&operator_id).is_some_and(|op| {
                    op.tabs.is_empty() && op.generation == generation && op.presence.state != PresenceState::Offline
                });
                if due {
                    tracing::info!(org = %self.org_id, operator = %operator_id, "presence lapsed: offline");
                    let _ = self.offline(&operator_id, now);
                }
            }
            Timer::Inactivity { session_id, chain } => self.inactivity(&session_id, chain, now),
            Timer::PlannedEndNotice { session_id, at } => self.planned_end_notice(&session_id, at),
            Timer::PlannedEnd { session_id, at } => self.planned_end(&session_id, at, now),
            Timer::PendingTimeout { session_id } => {
                // Still PENDING (ringing or queued): nobody took it.
                if self.calls.contains_key(&session_id) {
                    tracing::info!(org = %self.org_id, session = %session_id, "pending call cancelled: nobody took it");
                    let _ = self.finish(&session_id, LifecycleState::Cancelled, domain::lifecycle::NOBODY_TOOK_IT, now);
                }
            }
            Timer::CeilingRelaxes { session_id, at } => self.ceiling_relaxed(&session_id, at, now),
            Timer::CoolOff { session_id, operator_id } => {
                if let Some(call) = self.calls.get_mut(&session_id) {
                    if call.cooloffs.get(&operator_id).is_some_and(|until| *until <= now) {
                        call.cooloffs.remove(&operator_id);
                        self.dirty = true;
                    }
                }
            }
        }
    }
}
