//! The automatic call distributor: matches a robot's distress call to the
//! nearest certified operator, owns offers and the queue.
//!
//! Decisions are the pure rules of `app::dispatch`; this module adds state
//! and durability. Per org, one desk (behind one async lock) holds who is
//! present and who holds an open offer; every decision is written to the
//! store in one transaction before anyone hears of it, so a crash loses no
//! call and a restart (`recover`) re-dispatches what was in flight.
//!
//! Roster fallback and attached operators: when nobody broadcasts live
//! readiness, the seed's roster pool includes operators who are `ready` or
//! attached (`on_call`). An attached operator can therefore be offered a
//! call (it rings beside the one they hold); they still never hold two
//! open offers, and a live-Ready operator always keeps them out of the pool.

use crate::clock::now_ms;
use crate::store::{
    DispatchRecord, EndOutcome, NewOffer, NewSession, Placement, RobotRecord, SessionRow, SharedStore, StoreError,
};
use app::dispatch::{
    assemble_pool, effective_rtt, rank_pool, summarise, Candidate, LinkFloors, PoolEntry, PoolSource, Presence, Verdict,
};
use app::models::{LifecycleState, Offer, PresenceState, SessionRecord};
use app::rules::skill_of;
use rand::Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// An offer rings for this long (seed 000: `expiresAt = offeredAt + 30 s`).
pub const OFFER_WINDOW_MS: i64 = 30_000;
/// Reason recorded when an offer goes unanswered.
pub const MISSED_OFFER: &str = "missed offer";
/// Aux reason of an operator whose console just signed in.
pub const NOT_READY: &str = "not ready";
/// How often open offers are checked for expiry.
const EXPIRY_SWEEP: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum AcdError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("robot {robot_id} already has a call in progress ({session_id})")]
    CallInProgress { robot_id: String, session_id: String },
    #[error("the robot's reqCert {0:?} names no skill")]
    NoSkill(String),
    #[error("no open offer for this operator on this session")]
    NoOpenOffer,
    #[error("the session has already ended")]
    SessionEnded,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The operator a call was matched to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchedOperator {
    pub id: String,
    pub name: String,
    pub region: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CallOutcome {
    Matched { session_id: String, operator: MatchedOperator, rtt_ms: u32, offer: Offer },
    Queued { session_id: String, skill: String, position: i64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferClose {
    Accepted,
    Declined,
    Expired,
    Withdrawn,
}

/// What the ring channel and live screens listen to.
#[derive(Clone, Debug, PartialEq)]
pub enum AcdEvent {
    OfferRaised { org_id: String, offer: Offer },
    OfferClosed { org_id: String, operator_id: String, session_id: String, how: OfferClose },
    /// Carries the new presence, so listeners never need the desk lock.
    PresenceChanged { org_id: String, presence: OperatorPresence },
    SessionChanged { org_id: String, session_id: String },
}

/// An operator's presence as the ACD keeps it (seed 003 states).
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorPresence {
    pub operator_id: String,
    pub name: String,
    pub region: String,
    pub skills: Vec<String>,
    pub state: PresenceState,
    /// Unix ms of the last state change.
    pub since: i64,
    pub aux_reason: Option<String>,
    pub current_call: Option<String>,
    /// Broadcasting readiness from a Ready screen.
    pub live_ready: bool,
    pub measured_rtt_ms: BTreeMap<String, u32>,
}

impl OperatorPresence {
    fn enter(&mut self, state: PresenceState, now: i64) {
        if self.state != state {
            self.state = state;
            self.since = now;
        }
        if state != PresenceState::Aux {
            self.aux_reason = None;
        }
    }
}

#[derive(Clone, Debug)]
struct OpenOffer {
    session_id: String,
    expires_at: i64,
    /// What the operator's tabs ring with (again, after a reconnect).
    offer: Offer,
}

/// One org's dispatch state.
#[derive(Default)]
struct Desk {
    operators: HashMap<String, OperatorPresence>,
    /// operator id → the one offer they hold.
    offers: HashMap<String, OpenOffer>,
}

impl Desk {
    fn pool_entries(&self) -> Vec<PoolEntry> {
        self.operators
            .values()
            .map(|p| PoolEntry {
                presence: Presence {
                    operator_id: p.operator_id.clone(),
                    name: p.name.clone(),
                    available: !self.offers.contains_key(&p.operator_id),
                    region: p.region.clone(),
                    certs: p.skills.clone(),
                    since: p.since,
                    measured_rtt_ms: p.measured_rtt_ms.clone(),
                },
                state: p.state,
                live_ready: p.live_ready,
            })
            .collect()
    }
}

/// What an offer shows of the robot that is calling.
#[derive(Clone, Copy)]
struct CallingRobot<'a> {
    id: &'a str,
    model: &'a str,
    site: &'a str,
}

struct Decision {
    placement: Placement,
    record: DispatchRecord,
    chosen: Option<(MatchedOperator, u32)>,
}

pub struct Acd {
    store: SharedStore,
    floors: LinkFloors,
    desks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Desk>>>>,
    events: broadcast::Sender<AcdEvent>,
    offer_window_ms: i64,
    wrap_up_ms: i64,
}

fn new_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut rng = rand::thread_rng();
    let tail: String = (0..12).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char).collect();
    format!("{prefix}-{tail}")
}

pub fn session_record(row: SessionRow) -> SessionRecord {
    SessionRecord {
        id: row.id,
        robot: row.robot_id,
        robot_model: row.robot_model,
        site: row.site,
        pop: row.pop,
        skill: row.skill,
        lifecycle: row.lifecycle,
        state: row.safety_state,
        operator_id: row.operator_id,
        operator_name: row.operator_name,
        region: row.operator_region,
        raised_at: row.raised_at,
        started_at: row.started_at,
        ended_at: row.ended_at,
        rtt_ms: row.rtt_ms.and_then(|v| u32::try_from(v).ok()),
        divergence_deg: row.divergence_deg,
        velocity_scale: row.velocity_scale,
    }
}

impl Acd {
    /// A new engine with its offer window (30 s in production) and wrap-up
    /// time. Loads the link floors; call `recover` before serving.
    pub async fn new(store: SharedStore, offer_window_ms: i64, wrap_up_ms: i64) -> Result<Arc<Acd>, StoreError> {
        let floors = LinkFloors::new(store.link_floors().await?);
        let (events, _) = broadcast::channel(16_384);
        Ok(Arc::new(Acd { store, floors, desks: Mutex::default(), events, offer_window_ms, wrap_up_ms }))
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AcdEvent> {
        self.events.subscribe()
    }

    fn emit(&self, event: AcdEvent) {
        // Nobody listening is fine: the store is the record.
        let _ = self.events.send(event);
    }

    fn emit_presence(&self, desk: &Desk, org_id: &str, operator_id: &str) {
        if let Some(p) = desk.operators.get(operator_id) {
            self.emit(AcdEvent::PresenceChanged { org_id: org_id.to_string(), presence: p.clone() });
        }
    }

    fn desk(&self, org_id: &str) -> Arc<tokio::sync::Mutex<Desk>> {
        self.desks.lock().expect("desks lock").entry(org_id.to_string()).or_default().clone()
    }

    /// Raises a distress call for `robot` (rules A01–A05, A11, A13).
    pub async fn raise_call(&self, robot: &RobotRecord) -> Result<CallOutcome, AcdError> {
        let skill = skill_of(&robot.req_cert).map_err(|_| AcdError::NoSkill(robot.req_cert.clone()))?.to_string();
        let desk = self.desk(&robot.org_id);
        let mut desk = desk.lock().await;
        if let Some(session_id) = self.store.live_session_for_robot(&robot.id).await? {
            return Err(AcdError::CallInProgress { robot_id: robot.id.clone(), session_id });
        }
        let now = now_ms();
        let session = NewSession {
            id: new_id("ses"),
            org_id: robot.org_id.clone(),
            robot_id: robot.id.clone(),
            skill: skill.clone(),
            pop: robot.pop.clone(),
            raised_at: now,
        };
        let decision = self.decide(&desk, &robot.pop, &skill, &[], now, "raised");
        self.store.open_call(&session, &decision.placement, &decision.record).await?;
        match (decision.placement, decision.chosen) {
            (Placement::Offer(offer), Some((operator, rtt_ms))) => {
                let calling = CallingRobot { id: &robot.id, model: &robot.model, site: &robot.site };
                let offer = self.note_offer(&mut desk, &robot.org_id, &session.id, calling, &offer);
                Ok(CallOutcome::Matched { session_id: session.id, operator, rtt_ms, offer })
            }
            _ => {
                let position = self.store.queue_position(&robot.org_id, &skill, &session.id, now).await?;
                self.emit(AcdEvent::SessionChanged { org_id: robot.org_id.clone(), session_id: session.id.clone() });
                Ok(CallOutcome::Queued { session_id: session.id, skill, position })
            }
        }
    }

    /// Ranks the desk's pool for one call and says where it goes.
    fn decide(&self, desk: &Desk, pop: &str, skill: &str, exclude: &[String], now: i64, trigger: &str) -> Decision {
        let entries = desk.pool_entries();
        let (source, pool) = assemble_pool(&entries);
        let mut candidates = rank_pool(pop, skill, &pool, &self.floors, exclude);
        // The record also names who was not in the pool at all, and why.
        let in_pool: std::collections::HashSet<&str> = pool.iter().map(|p| p.operator_id.as_str()).collect();
        for entry in entries.iter().filter(|e| !in_pool.contains(e.presence.operator_id.as_str())) {
            candidates.push(Candidate {
                operator_id: entry.presence.operator_id.clone(),
                name: entry.presence.name.clone(),
                rtt_ms: None,
                verdict: Verdict::NotInPool,
                state: Some(entry.state),
            });
        }
        let chosen = candidates.iter().find(|c| c.verdict == Verdict::Chosen).and_then(|c| {
            let presence = desk.operators.get(&c.operator_id)?;
            Some((
                MatchedOperator { id: presence.operator_id.clone(), name: presence.name.clone(), region: presence.region.clone() },
                c.rtt_ms?,
            ))
        });
        let placement = match &chosen {
            Some((operator, rtt_ms)) => Placement::Offer(NewOffer {
                id: new_id("ofr"),
                operator_id: operator.id.clone(),
                rtt_ms: *rtt_ms,
                offered_at: now,
                expires_at: now + self.offer_window_ms,
            }),
            None => Placement::Queue,
        };
        let record = DispatchRecord {
            at: now,
            trigger: trigger.to_string(),
            pool_source: match source {
                PoolSource::LiveReadiness => "live_readiness",
                PoolSource::RosterFallback => "roster_fallback",
            }
            .to_string(),
            operator_id: chosen.as_ref().map(|(o, _)| o.id.clone()),
            rtt_ms: chosen.as_ref().map(|(_, rtt)| *rtt),
            candidates: serde_json::to_string(&summarise(candidates)).unwrap_or_else(|_| "{}".into()),
        };
        Decision { placement, record, chosen }
    }

    /// Marks a stored offer in the desk, rings the operator, returns the offer.
    fn note_offer(&self, desk: &mut Desk, org_id: &str, session_id: &str, robot: CallingRobot<'_>, offer: &NewOffer) -> Offer {
        let ring = Offer {
            session_id: session_id.to_string(),
            robot_id: robot.id.to_string(),
            robot_model: robot.model.to_string(),
            site: robot.site.to_string(),
            rtt_ms: offer.rtt_ms,
            operator_id: offer.operator_id.clone(),
            offered_at: offer.offered_at,
            expires_at: offer.expires_at,
        };
        desk.offers.insert(
            offer.operator_id.clone(),
            OpenOffer { session_id: session_id.to_string(), expires_at: offer.expires_at, offer: ring.clone() },
        );
        if let Some(p) = desk.operators.get_mut(&offer.operator_id) {
            // An attached operator offered a call (roster fallback) stays on_call.
            if p.state != PresenceState::OnCall {
                p.enter(PresenceState::Ringing, offer.offered_at);
                p.current_call = Some(session_id.to_string());
            }
        }
        self.emit_presence(desk, org_id, &offer.operator_id);
        self.emit(AcdEvent::OfferRaised { org_id: org_id.into(), offer: ring.clone() });
        self.emit(AcdEvent::SessionChanged { org_id: org_id.into(), session_id: session_id.into() });
        ring
    }

    /// Offers a pending call to the next best operator who has not had it,
    /// or leaves it queued.
    async fn redispatch(&self, desk: &mut Desk, org_id: &str, session_id: &str, trigger: &str) -> Result<(), AcdError> {
        let Some(session) = self.store.session(org_id, session_id).await? else { return Ok(()) };
        if session.lifecycle != LifecycleState::Pending {
            return Ok(());
        }
        let exclude = self.store.operators_offered(session_id).await?;
        let decision = self.decide(desk, &session.pop, &session.skill, &exclude, now_ms(), trigger);
        self.store.place_call(org_id, session_id, &decision.placement, &decision.record).await?;
        if let Placement::Offer(offer) = &decision.placement {
            let calling = CallingRobot { id: &session.robot_id, model: &session.robot_model, site: &session.site };
            self.note_offer(desk, org_id, session_id, calling, offer);
        }
        Ok(())
    }

    /// A ready operator is offered the oldest queued call they can serve
    /// (DESIGN "Offers and the queue"; rule A13).
    async fn serve_queue_for(&self, desk: &mut Desk, org_id: &str, operator_id: &str) -> Result<(), AcdError> {
        let Some(p) = desk.operators.get(operator_id) else { return Ok(()) };
        if p.state != PresenceState::Ready || desk.offers.contains_key(operator_id) {
            return Ok(());
        }
        // Only an operator the seed's pool would consider may take calls: a
        // roster-only operator waits while anyone broadcasts readiness.
        // (Same rule as `assemble_pool`, checked without copying the pool.)
        if !p.live_ready && desk.operators.values().any(|q| q.live_ready && q.state == PresenceState::Ready) {
            return Ok(());
        }
        let Some(call) = self.store.oldest_queued_call(org_id, &p.skills, operator_id).await? else { return Ok(()) };
        let Some(rtt_ms) = effective_rtt(p.measured_rtt_ms.get(&call.pop).copied(), self.floors.floor(&p.region, &call.pop)) else {
            return Ok(());
        };
        let now = now_ms();
        let offer = NewOffer {
            id: new_id("ofr"),
            operator_id: operator_id.to_string(),
            rtt_ms,
            offered_at: now,
            expires_at: now + self.offer_window_ms,
        };
        let candidate = Candidate {
            operator_id: operator_id.to_string(),
            name: p.name.clone(),
            rtt_ms: Some(rtt_ms),
            verdict: Verdict::Chosen,
            state: None,
        };
        let record = DispatchRecord {
            at: now,
            trigger: "operator_ready".into(),
            pool_source: "queue".into(),
            operator_id: Some(operator_id.to_string()),
            rtt_ms: Some(rtt_ms),
            candidates: serde_json::to_string(&summarise(vec![candidate])).unwrap_or_else(|_| "{}".into()),
        };
        let placement = Placement::Offer(offer.clone());
        self.store.place_call(org_id, &call.session_id, &placement, &record).await?;
        let calling = CallingRobot { id: &call.robot_id, model: &call.robot_model, site: &call.site };
        self.note_offer(desk, org_id, &call.session_id, calling, &offer);
        Ok(())
    }

    /// Loads an operator of this org into the desk (name, region, skills).
    async fn present<'d>(&self, desk: &'d mut Desk, org_id: &str, operator_id: &str, now: i64) -> Result<&'d mut OperatorPresence, AcdError> {
        if !desk.operators.contains_key(operator_id) {
            let op = self.store.operator(org_id, operator_id).await?.ok_or(AcdError::NotFound("operator"))?;
            let held = desk.offers.get(operator_id).map(|o| o.session_id.clone());
            desk.operators.insert(
                operator_id.to_string(),
                OperatorPresence {
                    operator_id: op.user_id,
                    name: op.display_name,
                    region: op.region,
                    skills: app::rules::skills_of(&op.certifications),
                    state: if held.is_some() { PresenceState::Ringing } else { PresenceState::Offline },
                    since: now,
                    aux_reason: None,
                    current_call: held,
                    live_ready: false,
                    measured_rtt_ms: BTreeMap::new(),
                },
            );
        }
        Ok(desk.operators.get_mut(operator_id).expect("just inserted"))
    }

    /// The operator is ready (`live`: from a Ready screen). If calls wait
    /// that they can serve, the oldest is offered at once.
    pub async fn operator_ready(&self, org_id: &str, operator_id: &str, live: bool) -> Result<(), AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let now = now_ms();
        let ringing = desk.offers.contains_key(operator_id);
        let p = self.present(&mut desk, org_id, operator_id, now).await?;
        // Attached to a session, the operator stays on_call until it ends.
        if p.state == PresenceState::OnCall {
            return Ok(());
        }
        p.live_ready = live;
        if !ringing {
            p.enter(PresenceState::Ready, now);
            p.current_call = None;
        }
        self.emit_presence(&desk, org_id, operator_id);
        self.serve_queue_for(&mut desk, org_id, operator_id).await
    }

    /// The operator steps away with a reason (break, training …). An offer
    /// they were holding counts as declined and moves on.
    pub async fn operator_aux(&self, org_id: &str, operator_id: &str, reason: &str) -> Result<(), AcdError> {
        self.operator_unavailable(org_id, operator_id, PresenceState::Aux, Some(reason), "declined").await
    }

    /// The operator's presence lapsed or they signed out. An offer they
    /// were holding moves on at once.
    pub async fn operator_offline(&self, org_id: &str, operator_id: &str) -> Result<(), AcdError> {
        self.operator_unavailable(org_id, operator_id, PresenceState::Offline, None, "expired").await
    }

    async fn operator_unavailable(
        &self,
        org_id: &str,
        operator_id: &str,
        state: PresenceState,
        reason: Option<&str>,
        offer_status: &str,
    ) -> Result<(), AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let now = now_ms();
        let p = self.present(&mut desk, org_id, operator_id, now).await?;
        p.enter(state, now);
        p.aux_reason = reason.map(str::to_owned);
        p.live_ready = false;
        p.current_call = None;
        self.emit_presence(&desk, org_id, operator_id);
        if let Some(offer) = desk.offers.remove(operator_id) {
            if self.store.close_offer(&offer.session_id, operator_id, offer_status, now).await? {
                let how = if offer_status == "declined" { OfferClose::Declined } else { OfferClose::Expired };
                self.emit(AcdEvent::OfferClosed { org_id: org_id.into(), operator_id: operator_id.into(), session_id: offer.session_id.clone(), how });
                self.redispatch(&mut desk, org_id, &offer.session_id, offer_status).await?;
            }
        }
        Ok(())
    }

    /// RTT the operator's console measured to a PoP.
    pub async fn report_rtt(&self, org_id: &str, operator_id: &str, pop: &str, rtt_ms: u32) -> Result<(), AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let p = self.present(&mut desk, org_id, operator_id, now_ms()).await?;
        p.measured_rtt_ms.insert(pop.to_string(), rtt_ms);
        Ok(())
    }

    /// The operator accepts: the session starts (ACTIVE, SESSION_START) and
    /// they are on the call.
    pub async fn accept(&self, org_id: &str, operator_id: &str, session_id: &str) -> Result<SessionRecord, AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let now = now_ms();
        let row = self.store.accept_offer(org_id, session_id, operator_id, now).await?.ok_or(AcdError::NoOpenOffer)?;
        desk.offers.remove(operator_id);
        let p = self.present(&mut desk, org_id, operator_id, now).await?;
        p.enter(PresenceState::OnCall, now);
        p.current_call = Some(session_id.to_string());
        self.emit(AcdEvent::OfferClosed { org_id: org_id.into(), operator_id: operator_id.into(), session_id: session_id.into(), how: OfferClose::Accepted });
        self.emit_presence(&desk, org_id, &operator_id);
        self.emit(AcdEvent::SessionChanged { org_id: org_id.into(), session_id: session_id.into() });
        Ok(session_record(row))
    }

    /// The operator declines: the call goes to the next best certified
    /// operator, or the queue (rule D03). The operator is ready again.
    pub async fn decline(&self, org_id: &str, operator_id: &str, session_id: &str) -> Result<(), AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let now = now_ms();
        if !self.store.close_offer(session_id, operator_id, "declined", now).await? {
            return Err(AcdError::NoOpenOffer);
        }
        desk.offers.remove(operator_id);
        self.emit(AcdEvent::OfferClosed { org_id: org_id.into(), operator_id: operator_id.into(), session_id: session_id.into(), how: OfferClose::Declined });
        let p = self.present(&mut desk, org_id, operator_id, now).await?;
        if p.state == PresenceState::Ringing {
            p.enter(PresenceState::Ready, now);
            p.current_call = None;
            self.emit_presence(&desk, org_id, &operator_id);
        }
        self.redispatch(&mut desk, org_id, session_id, "declined").await?;
        self.serve_queue_for(&mut desk, org_id, operator_id).await
    }

    /// Expires every offer past `expiresAt` (rule D04): the operator goes to
    /// `aux` "missed offer", the call to the next best or the queue.
    pub async fn expire_due_offers(&self) -> Result<usize, AcdError> {
        let desks: Vec<(String, Arc<tokio::sync::Mutex<Desk>>)> =
            self.desks.lock().expect("desks lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut expired = 0;
        for (org_id, desk) in desks {
            let mut desk = desk.lock().await;
            let now = now_ms();
            let due: Vec<(String, OpenOffer)> = desk
                .offers
                .iter()
                .filter(|(_, o)| o.expires_at <= now)
                .map(|(op, o)| (op.clone(), o.clone()))
                .collect();
            for (operator_id, offer) in due {
                desk.offers.remove(&operator_id);
                if !self.store.close_offer(&offer.session_id, &operator_id, "expired", now).await? {
                    continue;
                }
                expired += 1;
                self.emit(AcdEvent::OfferClosed { org_id: org_id.clone(), operator_id: operator_id.clone(), session_id: offer.session_id.clone(), how: OfferClose::Expired });
                if let Some(p) = desk.operators.get_mut(&operator_id) {
                    p.enter(PresenceState::Aux, now);
                    p.aux_reason = Some(MISSED_OFFER.to_string());
                    p.live_ready = false;
                    p.current_call = None;
                    self.emit_presence(&desk, &org_id, &operator_id);
                }
                self.redispatch(&mut desk, &org_id, &offer.session_id, "expired").await?;
            }
        }
        Ok(expired)
    }

    /// Ends a live session (COMPLETED or CANCELLED). An open offer is
    /// withdrawn (that operator is ready again); an attached operator moves
    /// to wrap-up (`acw`).
    pub async fn finish_session(&self, org_id: &str, session_id: &str, to: LifecycleState, reason: &str) -> Result<SessionRecord, AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let now = now_ms();
        match self.store.end_session(org_id, session_id, to, reason, now).await? {
            EndOutcome::NotFound => return Err(AcdError::NotFound("session")),
            EndOutcome::AlreadyEnded => return Err(AcdError::SessionEnded),
            EndOutcome::Ended { operator_id, withdrawn_from } => {
                if let Some(ringing) = withdrawn_from {
                    desk.offers.remove(&ringing);
                    self.emit(AcdEvent::OfferClosed { org_id: org_id.into(), operator_id: ringing.clone(), session_id: session_id.into(), how: OfferClose::Withdrawn });
                    if let Some(p) = desk.operators.get_mut(&ringing) {
                        if p.state == PresenceState::Ringing {
                            p.enter(PresenceState::Ready, now);
                            p.current_call = None;
                        }
                    }
                    self.serve_queue_for(&mut desk, org_id, &ringing).await?;
                }
                if let Some(attached) = operator_id {
                    if let Some(p) = desk.operators.get_mut(&attached) {
                        if p.current_call.as_deref() == Some(session_id) {
                            p.enter(PresenceState::Acw, now);
                            p.current_call = None;
                            self.emit_presence(&desk, org_id, &attached);
                        }
                    }
                }
            }
        }
        self.emit(AcdEvent::SessionChanged { org_id: org_id.into(), session_id: session_id.into() });
        let row = self.store.session(org_id, session_id).await?.ok_or(AcdError::NotFound("session"))?;
        Ok(session_record(row))
    }

    /// After a restart: offers still inside their window keep ringing;
    /// offers that expired while the server was down are closed and their
    /// calls re-dispatched (to the queue, until operators are back).
    pub async fn recover(&self) -> Result<(), AcdError> {
        let now = now_ms();
        let orphans = self.store.requeue_orphans(now).await?;
        if orphans > 0 {
            tracing::warn!(orphans, "pending calls without an offer were put back in the queue");
        }
        for row in self.store.open_offers().await? {
            let desk = self.desk(&row.org_id);
            let mut desk = desk.lock().await;
            if row.expires_at > now {
                let Some(session) = self.store.session(&row.org_id, &row.session_id).await? else { continue };
                let offer = Offer {
                    session_id: row.session_id.clone(),
                    robot_id: session.robot_id,
                    robot_model: session.robot_model,
                    site: session.site,
                    rtt_ms: u32::try_from(row.rtt_ms).unwrap_or(u32::MAX),
                    operator_id: row.operator_id.clone(),
                    offered_at: row.offered_at,
                    expires_at: row.expires_at,
                };
                desk.offers.insert(row.operator_id.clone(), OpenOffer { session_id: row.session_id.clone(), expires_at: row.expires_at, offer });
            } else if self.store.close_offer(&row.session_id, &row.operator_id, "expired", now).await? {
                self.redispatch(&mut desk, &row.org_id, &row.session_id, "recovered").await?;
            }
        }
        Ok(())
    }

    /// A console signed in: an operator who was offline is online now, but
    /// not ready until they say so (`aux` "not ready"). Returns their presence
    /// and any offer still ringing for them.
    pub async fn operator_signed_in(&self, org_id: &str, operator_id: &str) -> Result<(OperatorPresence, Option<Offer>), AcdError> {
        let desk = self.desk(org_id);
        let mut desk = desk.lock().await;
        let now = now_ms();
        let p = self.present(&mut desk, org_id, operator_id, now).await?;
        if p.state == PresenceState::Offline {
            p.enter(PresenceState::Aux, now);
            p.aux_reason = Some(NOT_READY.to_string());
            self.emit_presence(&desk, org_id, &operator_id);
        }
        let presence = desk.operators.get(operator_id).cloned().expect("present");
        Ok((presence, desk.offers.get(operator_id).map(|o| o.offer.clone())))
    }

    /// One operator's presence, if the desk knows them.
    pub async fn presence_of(&self, org_id: &str, operator_id: &str) -> Option<OperatorPresence> {
        let desk = self.desk(org_id);
        let desk = desk.lock().await;
        desk.operators.get(operator_id).cloned()
    }

    /// Ends wrap-up (`acw`) that has lasted the wrap-up time: ready again,
    /// and served from the queue at once.
    pub async fn release_wrap_ups(&self) -> Result<(), AcdError> {
        let desks: Vec<(String, Arc<tokio::sync::Mutex<Desk>>)> =
            self.desks.lock().expect("desks lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (org_id, desk) in desks {
            let mut desk = desk.lock().await;
            let now = now_ms();
            let done: Vec<String> = desk
                .operators
                .values()
                .filter(|p| p.state == PresenceState::Acw && p.since + self.wrap_up_ms <= now)
                .map(|p| p.operator_id.clone())
                .collect();
            for operator_id in done {
                if let Some(p) = desk.operators.get_mut(&operator_id) {
                    p.enter(PresenceState::Ready, now);
                    self.emit_presence(&desk, &org_id, &operator_id);
                }
                self.serve_queue_for(&mut desk, &org_id, &operator_id).await?;
            }
        }
        Ok(())
    }

    /// A snapshot of every operator the org's desk knows, by name.
    pub async fn presences(&self, org_id: &str) -> Vec<OperatorPresence> {
        let desk = self.desk(org_id);
        let desk = desk.lock().await;
        let mut all: Vec<OperatorPresence> = desk.operators.values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name).then(a.operator_id.cmp(&b.operator_id)));
        all
    }

    /// Runs offer expiry until the engine is dropped.
    pub fn spawn_expiry_sweeper(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let acd = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EXPIRY_SWEEP);
            loop {
                tick.tick().await;
                let Some(acd) = acd.upgrade() else { return };
                if let Err(e) = acd.expire_due_offers().await {
                    tracing::error!(error = %e, "offer expiry sweep failed");
                }
                if let Err(e) = acd.release_wrap_ups().await {
                    tracing::error!(error = %e, "wrap-up sweep failed");
                }
            }
        })
    }
}
