//! The automatic call distributor (DESIGN "The engine"). One dispatcher
//! task per org owns that org's dispatch state (`Desk`); requests reach it
//! over a channel and are answered after their batch is committed. The
//! rules it applies are the pure functions of `app` (pool order, ranking,
//! presence machine, lifecycle transitions). Changes leave as events on the
//! bus.
//!
//! `Engine` is the handle every way in uses: REST handlers, the ring
//! channel and the server functions.

mod bookings;
pub mod busy;
mod calls;
mod ceilings;
mod desk;
#[cfg(test)]
mod desk_tests;
mod directory;
mod dispatcher;
pub mod forward;
mod handover;
mod pipeline;
mod planned_end;
mod queues;
mod inactivity;
mod inputs;
pub mod lease;
mod load;
pub mod ready;
mod request;
mod steering;
mod thread;
pub mod timers;
mod types;

pub use calls::CallingRobot;
pub use desk::{Desk, Effects};
pub use types::{CallOutcome, EngineError, MatchedOperator, OperatorPresence, Settings};

use crate::bus::{SharedBus, Subscription};
use crate::clock::Clock;
use crate::store::{RobotRecord, SharedStore};
use domain::events::{OperatorEvent, Topic};
use domain::models::{LifecycleState, Offer, SessionRecord};
use busy::BusyOperators;
use dispatcher::Command;
use forward::Forwarding;
use request::{Expect, Request, SessionChange};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// An offer rings for this long (seed 000: `expiresAt = offeredAt + 30 s`).
pub const OFFER_WINDOW_MS: i64 = 30_000;
/// Rule D08's default cool-off (`CLUTCHCALL_REOFFER_COOLDOWN_S`).
pub const DEFAULT_COOLOFF_MS: i64 = 60_000;
/// A call nobody took is cancelled after 15 minutes (issue: lifecycle).
pub const DEFAULT_PENDING_TIMEOUT_MS: i64 = 15 * 60_000;

/// Requests waiting for one org's dispatcher before callers wait too.
const QUEUE_DEPTH: usize = 4_096;

/// What every dispatcher shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub store: SharedStore,
    pub bus: SharedBus,
    pub clock: Clock,
    pub settings: Settings,
    pub busy: Arc<BusyOperators>,
    /// This run of this instance, as its leases name it: `instance/boot`.
    pub owner: String,
    /// Every org's dispatcher, by org id.
    pub desks: Arc<Mutex<HashMap<String, mpsc::Sender<Command>>>>,
    /// Cluster mode: the way to the instances that dispatch other orgs.
    pub forwarding: Option<Forwarding>,
}

impl Shared {
    /// This instance's dispatcher of the org, if it runs one.
    fn desk_of(&self, org_id: &str) -> Option<mpsc::Sender<Command>> {
        self.desks.lock().expect("desks lock").get(org_id).cloned()
    }
}

pub struct Engine {
    shared: Shared,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Set by `stop`: no dispatcher starts any more.
    stopping: std::sync::atomic::AtomicBool,
    /// Looks for orgs made since the start (`NEW_ORGS_EVERY`).
    watcher: Mutex<Option<JoinHandle<()>>>,
    /// Operator input noted, and the task taking it to the dispatchers.
    inputs: inputs::InputsNoted,
    input_batches: Mutex<Option<JoinHandle<()>>>,
    /// Where the dispatchers run, when not on tokio's workers (thread.rs).
    thread: Option<thread::DispatchThread>,
}

/// How often an instance looks for orgs it runs no dispatcher for (made
/// since it started): each then tries for their leases like the others.
const NEW_ORGS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Every `inputs::INPUTS_EVERY`, the operator input noted, one request per
/// org (each on its own task: a slow org holds no other back; one at a
/// time per org).
async fn send_inputs(engine: std::sync::Weak<Engine>) {
    let mut every = tokio::time::interval(inputs::INPUTS_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(engine) = engine.upgrade() else { return };
        for (org_id, inputs) in engine.inputs.take() {
            let engine = engine.clone();
            tokio::spawn(async move {
                if let Err(e) = engine.ask::<()>(&org_id, Request::Inputs { inputs }).await {
                    tracing::debug!(org = %org_id, error = %e, "operator input not taken by the dispatcher");
                }
                engine.inputs.sent(&org_id);
            });
        }
    }
}

impl Engine {
    /// Starts a dispatcher for every org (each reloads its calls and
    /// re-dispatches what went stale while the server was down).
    /// `owner` names this run of this instance in its org leases
    /// (`instance/boot`: a restarted instance fences its former self).
    /// `forwarding` (cluster mode) carries requests for orgs another
    /// instance dispatches to it, and theirs for orgs dispatched here.
    /// `busy`: operators ringing in any org (in cluster mode already told
    /// how to reach the other instances: `crate::cluster::share_busy`).
    pub async fn start(
        store: SharedStore,
        bus: SharedBus,
        clock: Clock,
        settings: Settings,
        owner: &str,
        forwarding: Option<Forwarding>,
        busy: Arc<BusyOperators>,
    ) -> Result<Arc<Engine>, EngineError> {
        let orgs = store.org_ids().await?;
        let owner = owner.to_string();
        let thread = match store.commits_on_caller() {
            true => Some(thread::DispatchThread::start().map_err(|e| crate::store::StoreError::Writer(format!("could not start the dispatch thread: {e}")))?),
            false => None,
        };
        let shared = Shared { store, bus, clock, settings, busy, owner, desks: Arc::default(), forwarding };
        let engine = Arc::new(Engine {
            shared,
            tasks: Mutex::default(),
            stopping: Default::default(),
            watcher: Mutex::default(),
            inputs: Default::default(),
            input_batches: Mutex::default(),
            thread,
        });
        let started: Vec<oneshot::Receiver<()>> = orgs.iter().filter_map(|org_id| engine.spawn_desk(org_id)).collect();
        for loaded in started {
            let _ = loaded.await;
        }
        *engine.input_batches.lock().expect("watcher lock") = Some(tokio::spawn(send_inputs(Arc::downgrade(&engine))));
        // An org made since on another instance gets a dispatcher here too,
        // so a survivor takes it over when its owner dies. (An SQLite file
        // has one process: its orgs' dispatchers start on first use.)
        if engine.shared.store.backend_name() == "sqlite" {
            return Ok(engine);
        }
        let weak = Arc::downgrade(&engine);
        let watcher = tokio::spawn(async move {
            let mut every = tokio::time::interval(NEW_ORGS_EVERY);
            loop {
                every.tick().await;
                let Some(engine) = weak.upgrade() else { return };
                if let Ok(orgs) = engine.shared.store.org_ids().await {
                    for org_id in orgs {
                        engine.spawn_desk(&org_id);
                    }
                }
            }
        });
        *engine.watcher.lock().expect("watcher lock") = Some(watcher);
        Ok(engine)
    }

    /// The org's dispatcher, started on first use.
    fn desk(&self, org_id: &str) -> mpsc::Sender<Command> {
        self.spawn_desk(org_id);
        self.shared.desk_of(org_id).expect("just started")
    }

    /// Starts the org's dispatcher unless it runs; the receiver hears when
    /// it has loaded the org.
    fn spawn_desk(&self, org_id: &str) -> Option<oneshot::Receiver<()>> {
        let mut desks = self.shared.desks.lock().expect("desks lock");
        if desks.get(org_id).is_some_and(|tx| !tx.is_closed()) {
            return None;
        }
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            // A closed channel: whoever asks is told dispatch is unavailable.
            desks.insert(org_id.to_string(), mpsc::channel(1).0);
            return None;
        }
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let (started, loaded) = oneshot::channel();
        let task = thread::spawn(self.thread.as_ref(), dispatcher::run(self.shared.clone(), org_id.to_string(), rx, started));
        self.tasks.lock().expect("tasks lock").push(task);
        desks.insert(org_id.to_string(), tx);
        Some(loaded)
    }

    /// Runs `request` for the org: on this instance's dispatcher when it
    /// dispatches the org, else (cluster mode) on the instance that does.
    async fn ask<T: Expect>(&self, org_id: &str, request: Request) -> Result<T, EngineError> {
        let desk = self.desk(org_id);
        let answer = match &self.shared.forwarding {
            None => self.shared.run(&desk, org_id, request).await,
            Some(forwarding) => match self.shared.run(&desk, org_id, request.clone()).await {
                Err(EngineError::DispatchedElsewhere) => forwarding.forward(org_id, &request).await,
                other => other,
            },
        }?;
        T::expect(answer).ok_or_else(|| {
            tracing::error!(org = %org_id, "the dispatcher answered a request with the wrong kind of answer");
            EngineError::Unavailable
        })
    }

    /// An operator's directory entry changed (profile, role, activity or
    /// membership): the next dispatch decision uses the new one.
    pub async fn reload_operator(&self, org_id: &str, user_id: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::ReloadOperator { operator_id: user_id.to_string() }).await
    }

    /// The org's link floors changed: the next decision uses the new ones.
    pub async fn reload_floors(&self, org_id: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::ReloadFloors).await
    }

    /// The robot's bookings changed (booked or cancelled): the desk holds
    /// them as now committed, for the next raise and extension (rule L13).
    pub async fn bookings_changed(&self, org_id: &str, robot_id: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::BookingsChanged { robot_id: robot_id.to_string() }).await
    }

    /// Raises a distress call for `robot` (rules A01–A05, A11, A13, D09).
    pub async fn raise_call(&self, robot: &RobotRecord) -> Result<CallOutcome, EngineError> {
        let calling = CallingRobot {
            id: robot.id.clone(),
            model: robot.model.clone(),
            site: robot.site.clone(),
            pop: robot.pop.clone(),
            req_cert: robot.req_cert.clone(),
        };
        let started = std::time::Instant::now();
        let answer = self.ask(&robot.org_id, Request::Raise { robot: calling }).await;
        if answer.is_ok() {
            metrics::histogram!(crate::metrics::DISPATCH_SECONDS).record(started.elapsed().as_secs_f64());
        }
        match answer {
            // Nobody dispatches the org just now (between owners): a call in
            // progress is still a plain 409, whoever dispatches it (rule D09).
            Err(EngineError::DispatchedElsewhere) => match self.shared.store.live_session_for_robot(&robot.org_id, &robot.id).await? {
                Some(session_id) => Err(EngineError::CallInProgress { robot_id: robot.id.clone(), session_id }),
                None => Err(EngineError::DispatchedElsewhere),
            },
            other => other,
        }
    }

    /// The operator accepts their open offer: the session starts.
    pub async fn answer(&self, org_id: &str, operator_id: &str, session_id: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::Accept { operator_id: operator_id.to_string(), session_id: session_id.to_string() }).await
    }

    /// As `answer`, returning the started session's record.
    pub async fn accept(&self, org_id: &str, operator_id: &str, session_id: &str) -> Result<SessionRecord, EngineError> {
        self.answer(org_id, operator_id, session_id).await?;
        self.session(org_id, session_id).await
    }

    /// The operator declines: next best operator or the queue (rule D03).
    pub async fn decline(&self, org_id: &str, operator_id: &str, session_id: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::Decline { operator_id: operator_id.to_string(), session_id: session_id.to_string() }).await
    }

    /// Ready (`live`: from a Ready screen); queued calls they can serve are offered at once.
    pub async fn operator_ready(&self, org_id: &str, operator_id: &str, live: bool) -> Result<(), EngineError> {
        self.ask(org_id, Request::Ready { operator_id: operator_id.to_string(), live }).await
    }

    /// Steps away with a reason; an offer they held counts as declined.
    pub async fn operator_aux(&self, org_id: &str, operator_id: &str, reason: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::Aux { operator_id: operator_id.to_string(), reason: reason.to_string() }).await
    }

    /// Offline at once (signed out everywhere); an offer they held moves on.
    pub async fn operator_offline(&self, org_id: &str, operator_id: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::Offline { operator_id: operator_id.to_string() }).await
    }

    /// RTT the operator's console measured to a PoP.
    pub async fn report_rtt(&self, org_id: &str, operator_id: &str, pop: &str, rtt_ms: u32) -> Result<(), EngineError> {
        self.ask(org_id, Request::Rtt { operator_id: operator_id.to_string(), pop: pop.to_string(), rtt_ms }).await
    }

    /// Ends an open session (COMPLETED or CANCELLED), asked by its robot
    /// (`robot`: another robot's session is not found) or an admin (`None`).
    /// The desk judges an open session it holds without a database read.
    pub async fn finish_session(&self, org_id: &str, session_id: &str, robot: Option<&str>, to: LifecycleState, reason: &str) -> Result<SessionRecord, EngineError> {
        let request = Request::Finish { session_id: session_id.to_string(), robot: robot.map(str::to_string), to, reason: reason.to_string() };
        if let Some(record) = self.changed(org_id, session_id, self.ask(org_id, request).await?).await? {
            return Ok(record);
        }
        // The desk does not hold it open: the row says why.
        let row = self.shared.store.session(org_id, session_id).await?.ok_or(EngineError::NotFound("session"))?;
        if robot.is_some_and(|robot| row.robot_id != robot) {
            return Err(EngineError::NotFound("session"));
        }
        if row.lifecycle()?.is_terminal() {
            return Err(EngineError::SessionEnded);
        }
        // Open in the database but unknown to the dispatcher.
        Err(EngineError::Unavailable)
    }

    /// Pauses, resumes or completes a live session (seed 001), asked by its
    /// attached operator (`by`) or an admin (`None`).
    pub async fn steer_session(&self, org_id: &str, session_id: &str, to: LifecycleState, by: Option<&str>) -> Result<SessionRecord, EngineError> {
        let change = self.ask(org_id, Request::Steer { session_id: session_id.to_string(), to, by: by.map(str::to_string) }).await?;
        if let Some(record) = self.changed(org_id, session_id, change).await? {
            return Ok(record);
        }
        let row = self.shared.store.session(org_id, session_id).await?.ok_or(EngineError::NotFound("session"))?;
        Err(match row.lifecycle()? {
            l if l.is_terminal() => EngineError::SessionEnded,
            l => EngineError::IllegalTransition { from: l.as_str(), to: to.as_str() },
        })
    }

    /// Offers a live session to another ready, certified operator (rule
    /// L08), asked by the operator in control (`by`) or an admin (`None`).
    pub async fn hand_over(&self, org_id: &str, session_id: &str, by: Option<&str>, to: &str) -> Result<Offer, EngineError> {
        self.ask(org_id, Request::HandOver { session_id: session_id.to_string(), by: by.map(str::to_string), to: to.to_string() }).await
    }

    /// An admin opened (`joined`) or closed a live session's live view:
    /// SUPERVISOR_JOINED / SUPERVISOR_LEFT in its activity.
    pub async fn supervise(&self, org_id: &str, session_id: &str, admin_id: &str, joined: bool) -> Result<(), EngineError> {
        self.ask(org_id, Request::Supervise { session_id: session_id.to_string(), admin_id: admin_id.to_string(), joined }).await
    }

    /// A certified admin takes control of a live session: a handover to
    /// themselves that needs no accept (OPERATOR_SWITCH with the reason).
    pub async fn take_over(&self, org_id: &str, session_id: &str, admin_id: &str, reason: &str) -> Result<(), EngineError> {
        self.ask(org_id, Request::TakeOver { session_id: session_id.to_string(), admin_id: admin_id.to_string(), reason: reason.to_string() }).await
    }

    /// Who a live session may be handed to, best first.
    pub async fn handover_candidates(&self, org_id: &str, session_id: &str) -> Result<Vec<domain::dispatch::Candidate>, EngineError> {
        self.ask(org_id, Request::HandoverCandidates { session_id: session_id.to_string() }).await
    }

    /// Extends a live session by `minutes` (rule L13): refused when the
    /// robot is booked by someone else before the new end. `operator`: the
    /// operator asking (must be in control); `None` for an admin or the
    /// session's client. `actor` goes into the audit record.
    pub async fn extend_session(&self, org_id: &str, session_id: &str, operator: Option<&str>, actor: &str, minutes: i64) -> Result<SessionRecord, EngineError> {
        // The desk judges it on the bookings it holds; the extension commits
        // in a transaction of its own, judged again on the bookings as they
        // are under the robot's lock (a booking may be landing meanwhile);
        // then the desk sets its timers. A refusal there is a 409 with the
        // reason, and nothing else waits on it.
        let request = Request::Extension { session_id: session_id.to_string(), operator: operator.map(str::to_string), minutes };
        let (from, to) = match self.ask::<(i64, i64)>(org_id, request).await {
            // Not live here: ended, or never this org's (the store tells which).
            Err(EngineError::SessionEnded) if self.shared.store.session(org_id, session_id).await?.is_none() => return Err(EngineError::NotFound("session")),
            other => other?,
        };
        let judge = move |bookings: &[domain::booking::Booking], own: Option<&str>| domain::booking::extension(from, minutes, bookings, own).err();
        match self.shared.store.extend_planned_end(org_id, session_id, from, to, actor, self.shared.clock.now_ms(), &judge).await? {
            crate::store::Extension::Done => {}
            crate::store::Extension::Refused(why) => return Err(EngineError::CannotExtend(why)),
            crate::store::Extension::Moved => return Err(EngineError::CannotExtend("The planned end changed meanwhile: look again and retry.".into())),
        }
        let _: i64 = self.ask(org_id, Request::Extended { session_id: session_id.to_string(), from, to }).await?;
        self.session(org_id, session_id).await
    }

    /// Operator input on the session they hold: resets its inactivity
    /// chain (rule L07) within `inputs::INPUTS_EVERY`, in the org's next
    /// batch of input; not taken while it is PAUSED (rule L03). Never waits.
    pub fn operator_input(&self, org_id: &str, operator_id: &str, session_id: &str) {
        self.inputs.note(org_id, operator_id, session_id);
    }

    /// An edge agent's error report on an open session: an `ERROR`
    /// activity event, committed with the desk's batch.
    pub async fn report_error(&self, org_id: &str, session_id: &str, detail: &str) -> Result<domain::lifecycle::ActivityEntry, EngineError> {
        let at_ms = self.ask(org_id, Request::ReportError { session_id: session_id.to_string(), detail: detail.to_string() }).await?;
        Ok(domain::lifecycle::ActivityEntry { at_ms, kind: domain::lifecycle::ActivityKind::Error, operator_id: None, operator_name: None, detail: Some(detail.to_string()) })
    }

    /// A console tab connected (`tab`: its id, unique in the cluster; the
    /// same tab registering again is still one). Returns the operator's
    /// presence and any offer still ringing for them.
    pub async fn tab_opened(&self, org_id: &str, operator_id: &str, tab: &str) -> Result<(OperatorPresence, Option<Offer>), EngineError> {
        self.ask(org_id, Request::TabOpened { operator_id: operator_id.to_string(), tab: tab.to_string() }).await
    }

    /// A console tab closed; `last_seen` is when it last heard from its browser.
    pub async fn tab_closed(&self, org_id: &str, operator_id: &str, tab: &str, last_seen: i64) {
        let request = Request::TabClosed { operator_id: operator_id.to_string(), tab: tab.to_string(), last_seen };
        if let Err(e) = self.ask::<()>(org_id, request).await {
            // Its presence lapses on the TTL instead (DESIGN "Presence").
            tracing::debug!(org = %org_id, operator = %operator_id, error = %e, "a closed tab could not be told to the dispatcher");
        }
    }

    /// Every operator's presence in the org, by name (none while nobody
    /// dispatches the org).
    pub async fn presences(&self, org_id: &str) -> Vec<OperatorPresence> {
        self.ask(org_id, Request::Presences).await.unwrap_or_else(|e| {
            tracing::warn!(org = %org_id, error = %e, "presences unavailable");
            Vec::new()
        })
    }

    /// An operator's presence and ringing offer, without opening a tab.
    pub async fn console(&self, org_id: &str, operator_id: &str) -> Option<(OperatorPresence, Option<Offer>)> {
        self.ask(org_id, Request::Console { operator_id: operator_id.to_string() }).await.ok().flatten()
    }

    /// The notices that stand for the operator (`Desk::standing_notices`),
    /// for a console tab that resynced.
    pub async fn standing_notices(&self, org_id: &str, operator_id: &str) -> Result<Vec<OperatorEvent>, EngineError> {
        self.ask(org_id, Request::Notices { operator_id: operator_id.to_string() }).await
    }

    pub async fn presence_of(&self, org_id: &str, operator_id: &str) -> Option<OperatorPresence> {
        self.console(org_id, operator_id).await.map(|(presence, _)| presence)
    }

    pub fn subscribe(&self, topic: &Topic) -> Subscription {
        self.shared.bus.subscribe(topic)
    }

    /// Whether events published on `topic` from now on reach this
    /// instance's subscribers (see `EventBus::is_live`).
    pub fn is_live(&self, topic: &Topic) -> bool {
        self.shared.bus.is_live(topic)
    }

    /// How long a call nobody takes waits before it is cancelled.
    pub fn pending_timeout_ms(&self) -> i64 {
        self.shared.settings.pending_timeout_ms
    }

    pub fn clock(&self) -> Clock {
        self.shared.clock
    }

    /// Operators ringing in any org (rule D10).
    pub fn busy(&self) -> &BusyOperators {
        &self.shared.busy
    }

    /// These orgs' desks look at their queues again: someone they found
    /// busy is free.
    pub fn poke(&self, orgs: Vec<String>) {
        dispatcher::poke(&self.shared, orgs);
    }

    /// The record of a session the desk changed, as its batch read it back
    /// or, where the store does not (PostgreSQL), as read now; `None` when
    /// the desk did not hold it.
    async fn changed(&self, org_id: &str, session_id: &str, change: SessionChange) -> Result<Option<SessionRecord>, EngineError> {
        match change {
            SessionChange::Done(Some(record)) => Ok(Some(*record)),
            SessionChange::Done(None) => self.session(org_id, session_id).await.map(Some),
            SessionChange::NotHeld => Ok(None),
        }
    }

    async fn session(&self, org_id: &str, session_id: &str) -> Result<SessionRecord, EngineError> {
        let row = self.shared.store.session(org_id, session_id).await?.ok_or(EngineError::NotFound("session"))?;
        Ok(row.record()?)
    }

    /// No more looking for new orgs.
    fn stop_watching(&self) {
        if let Some(watcher) = self.watcher.lock().expect("watcher lock").take() {
            watcher.abort();
        }
        if let Some(batches) = self.input_batches.lock().expect("watcher lock").take() {
            batches.abort();
        }
    }

    /// Stops every dispatcher cleanly: each gives its org's lease up, so
    /// another instance takes the org at once (a rolling restart).
    pub async fn stop(&self) {
        self.stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        self.stop_watching();
        self.shared.desks.lock().expect("desks lock").clear();
        // Each dispatcher ends once its channel has closed, its lease given up.
        let mut tasks: Vec<JoinHandle<()>> = self.tasks.lock().expect("tasks lock").drain(..).collect();
        let all = futures::future::join_all(tasks.iter_mut());
        if tokio::time::timeout(std::time::Duration::from_secs(2), all).await.is_err() {
            for task in &tasks {
                task.abort();
            }
        }
    }

    /// Stops every dispatcher at once, as a crash would (tests).
    pub fn abort(&self) {
        self.stop_watching();
        for task in self.tasks.lock().expect("tasks lock").drain(..) {
            task.abort();
        }
        self.shared.desks.lock().expect("desks lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On SQLite, whose writer commits on the calling thread, the engine
    /// runs its dispatchers on a thread of their own (thread.rs), so a
    /// batch holds no tokio worker; and they dispatch from there: a raise
    /// is committed before it is answered.
    #[tokio::test]
    async fn on_sqlite_the_dispatchers_run_on_their_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::sqlite_with_a_robot(dir.path()).await;
        assert!(store.commits_on_caller());
        let settings = super::desk_tests::SETTINGS;
        let engine = Engine::start(store.clone(), crate::bus::InProcessBus::new(), Clock::system(), settings, "test/1", None, Arc::default()).await.unwrap();
        assert!(engine.thread.is_some(), "SQLite's dispatchers run on the dispatch thread");

        let robot = store.robot_by_token_hash("hash-1").await.unwrap().expect("seeded");
        engine.raise_call(&robot).await.unwrap();
        assert!(store.live_session_for_robot("org", "r-1").await.unwrap().is_some(), "the raise was committed before it was answered");
        engine.stop().await;
    }
}
