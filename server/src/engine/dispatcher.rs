//! One org's dispatcher task: it owns the org's `Desk`, takes requests in
//! batches from its channel, applies them in memory, commits the batch's
//! writes in one transaction, and only then answers the requests and
//! publishes the events (group commit; rule D11). The next batch is decided
//! while one commits (`pipeline.rs`), where the commit awaits the database
//! (PostgreSQL; SQLite's holds the dispatch thread: `thread.rs`). Timers
//! come from the desk's deadline queue. Nothing awaits I/O in the middle of
//! a decision.

use super::calls::CallingRobot;
use super::desk::Desk;
use super::pipeline::{Committing, Decided, Pending};
use super::request::SessionChange;
use super::types::{EngineError, OperatorPresence};
use super::{lease, Shared};
use crate::store::{Lease, OperatorRecord, SessionRow, StoreError};
use domain::models::{LifecycleState, Offer};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Requests one batch takes at most.
const MAX_BATCH: usize = 256;

pub type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

pub enum Command {
    Raise { robot: CallingRobot, reply: Reply<super::CallOutcome> },
    Accept { operator_id: String, session_id: String, reply: Reply<()> },
    Decline { operator_id: String, session_id: String, reply: Reply<()> },
    Ready { operator_id: String, live: bool, reply: Reply<()> },
    Aux { operator_id: String, reason: String, reply: Reply<()> },
    Offline { operator_id: String, reply: Reply<()> },
    Rtt { operator_id: String, pop: String, rtt_ms: u32, reply: Reply<()> },
    /// Ends an open session (`NotHeld` when the desk holds no such one).
    Finish { session_id: String, robot: Option<String>, to: LifecycleState, reason: String, reply: Reply<SessionChange> },
    /// Pause, resume or complete by the attached operator (`by`) or an
    /// admin (`NotHeld` when the desk has no such live session).
    Steer { session_id: String, to: LifecycleState, by: Option<String>, reply: Reply<SessionChange> },
    /// An edge agent's error on an open session; answers when it was logged.
    ReportError { session_id: String, detail: String, reply: Reply<i64> },
    /// An admin's live view opened or closed: SUPERVISOR_JOINED / _LEFT.
    Supervise { session_id: String, admin_id: String, joined: bool, reply: Reply<()> },
    /// A certified admin takes control (OPERATOR_SWITCH with the reason).
    TakeOver { session_id: String, admin_id: String, reason: String, reply: Reply<()> },
    /// Offers a live session to `to` (rule L08), asked by the operator in
    /// control (`by`) or an admin.
    HandOver { session_id: String, by: Option<String>, to: String, reply: Reply<Offer> },
    /// Who the live session may be handed to, best first.
    HandoverCandidates { session_id: String, reply: Reply<Vec<domain::dispatch::Candidate>> },
    /// How far the planned end of a live session may move (rule L13):
    /// `(from, to)`, judged on the bookings the desk holds.
    Extension { session_id: String, operator: Option<String>, minutes: i64, reply: Reply<(i64, i64)> },
    /// The robot's bookings, as the booking service just committed them.
    SetBookings { robot_id: String, bookings: Vec<domain::booking::Booking>, reply: Reply<()> },
    /// A committed extension: new timers and the event.
    Extended { session_id: String, from: i64, to: i64, reply: Reply<i64> },
    /// Operator input on their sessions (resets each one's inactivity chain).
    Inputs { inputs: Vec<super::request::OperatorInput>, reply: Reply<()> },
    TabOpened { operator_id: String, tab: String, reply: Reply<(OperatorPresence, Option<Offer>)> },
    TabClosed { operator_id: String, tab: String, last_seen: i64, reply: Reply<()> },
    LoadOperator { record: OperatorRecord, reply: Reply<()> },
    /// The operator left the org: never dispatched to again.
    DropOperator { operator_id: String, reply: Reply<()> },
    /// The org's link floors or RTT ceilings changed.
    SetFloors { floors: domain::dispatch::LinkFloors, ceilings: Vec<domain::dispatch::RttCeiling>, reply: Reply<()> },
    Presences { reply: Reply<Vec<OperatorPresence>> },
    /// Look at the queues again (another org freed an operator).
    Poke,
    /// One operator's presence and ringing offer (a tab's resync).
    Console { operator_id: String, reply: Reply<Option<(OperatorPresence, Option<Offer>)>> },
    /// The notices that stand for one operator (a tab's resync).
    Notices { operator_id: String, reply: Reply<Vec<domain::events::OperatorEvent>> },
}

impl Command {
    /// Answers without touching the desk.
    fn refuse(self, error: impl Fn() -> EngineError) {
        match self {
            Command::Raise { reply, .. } => drop(reply.send(Err(error()))),
            Command::Accept { reply, .. }
            | Command::Decline { reply, .. }
            | Command::Ready { reply, .. }
            | Command::Aux { reply, .. }
            | Command::Offline { reply, .. }
            | Command::Rtt { reply, .. }
            | Command::TabClosed { reply, .. }
            | Command::LoadOperator { reply, .. }
            | Command::DropOperator { reply, .. }
            | Command::SetFloors { reply, .. }
            | Command::SetBookings { reply, .. } => drop(reply.send(Err(error()))),
            Command::Finish { reply, .. } | Command::Steer { reply, .. } => drop(reply.send(Err(error()))),
            Command::Inputs { reply, .. } => drop(reply.send(Err(error()))),
            Command::HandOver { reply, .. } => drop(reply.send(Err(error()))),
            Command::Extension { reply, .. } => drop(reply.send(Err(error()))),
            Command::Extended { reply, .. } => drop(reply.send(Err(error()))),
            Command::HandoverCandidates { reply, .. } => drop(reply.send(Err(error()))),
            Command::ReportError { reply, .. } => drop(reply.send(Err(error()))),
            Command::Supervise { reply, .. } | Command::TakeOver { reply, .. } => drop(reply.send(Err(error()))),
            Command::TabOpened { reply, .. } => drop(reply.send(Err(error()))),
            Command::Presences { reply } => drop(reply.send(Err(error()))),
            Command::Console { reply, .. } => drop(reply.send(Err(error()))),
            Command::Notices { reply, .. } => drop(reply.send(Err(error()))),
            Command::Poke => {}
        }
    }
}

fn hold<T: Send + 'static>(reply: Reply<T>, result: Result<T, EngineError>) -> Pending {
    Box::new(move |committed: Result<&[SessionRow], fn() -> EngineError>| {
        let _ = reply.send(match committed {
            Ok(_) => result,
            Err(error) => Err(error()),
        });
    })
}

/// As `hold`, for a change to a session the desk made (`Ok(true)`): the
/// answer carries the session's record as its batch committed it, where
/// the store read it back in the batch (`read_back`).
fn hold_change(reply: Reply<SessionChange>, session_id: String, changed: Result<bool, EngineError>, read_back: &mut Vec<String>) -> Pending {
    if changed.as_ref().is_ok_and(|changed| *changed) && !read_back.contains(&session_id) {
        read_back.push(session_id.clone());
    }
    Box::new(move |committed: Result<&[SessionRow], fn() -> EngineError>| {
        let _ = reply.send(match (committed, changed) {
            (Err(error), _) => Err(error()),
            (Ok(_), Err(e)) => Err(e),
            (Ok(_), Ok(false)) => Ok(SessionChange::NotHeld),
            (Ok(rows), Ok(true)) => match rows.iter().find(|row| row.id == session_id) {
                Some(row) => row.clone().record().map(|record| SessionChange::Done(Some(Box::new(record)))).map_err(EngineError::from),
                None => Ok(SessionChange::Done(None)),
            },
        });
    })
}

/// What applying a command left to do once the batch is committed.
enum Applied {
    /// An answer to send (or turn into 503 if the commit fails).
    Answer(Pending),
    /// A read, answered from the desk once the batch's decisions are made,
    /// and sent once they are committed, so nobody sees state the database
    /// does not have yet.
    Read(Command),
    Done,
}

/// (A command naming an operator the desk does not know is refused
/// `NotFound("operator")` by the desk itself; `Shared::run` then loads them.)
fn apply(desk: &mut Desk, command: Command, now: i64, read_back: &mut Vec<String>) -> Applied {
    Applied::Answer(match command {
        Command::Raise { robot, reply } => hold(reply, desk.raise(&robot, now)),
        Command::Accept { operator_id, session_id, reply } => hold(reply, desk.accept(&operator_id, &session_id, now)),
        Command::Decline { operator_id, session_id, reply } => hold(reply, desk.decline(&operator_id, &session_id, now)),
        Command::Ready { operator_id, live, reply } => hold(reply, desk.ready(&operator_id, live, now)),
        Command::Aux { operator_id, reason, reply } => hold(reply, desk.aux(&operator_id, &reason, now)),
        Command::Offline { operator_id, reply } => hold(reply, desk.offline(&operator_id, now)),
        Command::Rtt { operator_id, pop, rtt_ms, reply } => hold(reply, desk.report_rtt(&operator_id, &pop, rtt_ms)),
        Command::Finish { session_id, robot, to, reason, reply } => {
            let ended = desk.withdraw(&session_id, robot.as_deref(), to, &reason, now);
            hold_change(reply, session_id, ended, read_back)
        }
        Command::Steer { session_id, to, by, reply } => {
            let moved = desk.steer(&session_id, to, by.as_deref(), now);
            hold_change(reply, session_id, moved, read_back)
        }
        Command::Inputs { inputs, reply } => {
            for input in inputs {
                // (A session that ended, paused or changed hands since: nothing to reset.)
                if let Err(e) = desk.input(&input.operator_id, &input.session_id, now) {
                    tracing::debug!(session = %input.session_id, error = %e, "operator input not taken");
                }
            }
            hold(reply, Ok(()))
        }
        Command::HandOver { session_id, by, to, reply } => hold(reply, desk.hand_over(&session_id, by.as_deref(), &to, now)),
        Command::HandoverCandidates { session_id, reply } => hold(reply, desk.handover_candidates(&session_id)),
        Command::Extension { session_id, operator, minutes, reply } => hold(reply, desk.extension(&session_id, operator.as_deref(), minutes)),
        Command::Extended { session_id, from, to, reply } => hold(reply, desk.extended(&session_id, from, to)),
        Command::ReportError { session_id, detail, reply } => hold(reply, desk.report_error(&session_id, &detail, now)),
        Command::Supervise { session_id, admin_id, joined, reply } => hold(reply, desk.supervise(&session_id, &admin_id, joined, now)),
        Command::TakeOver { session_id, admin_id, reason, reply } => hold(reply, desk.take_control(&session_id, &admin_id, &reason, now)),
        Command::TabOpened { operator_id, tab, reply } => hold(reply, desk.tab_opened(&operator_id, &tab, now)),
        // Changes without an answer of their own: told done once committed.
        Command::TabClosed { operator_id, tab, last_seen, reply } => {
            desk.tab_closed(&operator_id, &tab, last_seen);
            hold(reply, Ok(()))
        }
        Command::LoadOperator { record, reply } => {
            desk.update_operator(record, now);
            hold(reply, Ok(()))
        }
        Command::DropOperator { operator_id, reply } => {
            desk.drop_operator(&operator_id, now);
            hold(reply, Ok(()))
        }
        Command::SetBookings { robot_id, bookings, reply } => {
            desk.set_bookings(&robot_id, bookings, now);
            hold(reply, Ok(()))
        }
        Command::SetFloors { floors, ceilings, reply } => {
            desk.set_floors(floors);
            desk.set_ceilings(ceilings, now);
            hold(reply, Ok(()))
        }
        Command::Poke => {
            desk.poke();
            return Applied::Done;
        }
        read @ (Command::Presences { .. } | Command::Console { .. } | Command::Notices { .. }) => return Applied::Read(read),
    })
}

/// A read's answer from the desk, held until its batch is committed.
fn read(desk: &Desk, command: Command, now: i64) -> Pending {
    match command {
        Command::Presences { reply } => hold(reply, Ok(desk.presences())),
        Command::Console { operator_id, reply } => hold(reply, Ok(desk.console(&operator_id))),
        Command::Notices { operator_id, reply } => hold(reply, Ok(desk.standing_notices(&operator_id, now))),
        other => {
            other.refuse(|| EngineError::Unavailable);
            Box::new(|_| {})
        }
    }
}

/// Waits until this instance holds the org's lease (`lease.rs`); meanwhile
/// requests are answered that another instance dispatches the org (or
/// will: `lease::Asked::Elsewhere`), or, while the database does not
/// answer, that dispatch is unavailable.
/// `pause`: a take interval passes before the first ask (the org was just
/// given up here: another instance may take it meanwhile).
/// `stepped_down`: the epoch of the newest lease this dispatcher stepped
/// down from other than by giving it up (0: none), which it may take back
/// at once. `started` is told as soon as
/// the org is known to be dispatched elsewhere. `None` once the engine
/// stops.
async fn take_lease(
    shared: &Shared, org_id: &str, rx: &mut mpsc::Receiver<Command>, started: &mut Option<oneshot::Sender<()>>, pause: bool, stepped_down: i64,
) -> Option<(Lease, lease::Renewals)> {
    if pause && !refuse_for(rx, lease::TAKE_EVERY, || EngineError::Unavailable).await {
        return None;
    }
    let mut elsewhere_told = false;
    loop {
        let refusal: fn() -> EngineError = match lease::ask(shared, org_id, stepped_down).await {
            lease::Asked::Taken(lease, renewals) => return Some((lease, renewals)),
            lease::Asked::Elsewhere => {
                if !elsewhere_told {
                    tracing::info!(org = %org_id, "another instance, or a lease of this run's (given up, or not heard of here), holds this org");
                    elsewhere_told = true;
                }
                if let Some(started) = started.take() {
                    let _ = started.send(());
                }
                || EngineError::DispatchedElsewhere
            }
            lease::Asked::Unreachable => || EngineError::Unavailable,
        };
        if !refuse_for(rx, lease::TAKE_EVERY, refusal).await {
            return None;
        }
    }
}

/// Answers every request that comes within `while_` with `refusal`;
/// `false` once the engine stops (the channel closed).
async fn refuse_for(rx: &mut mpsc::Receiver<Command>, while_: Duration, refusal: fn() -> EngineError) -> bool {
    let deadline = tokio::time::Instant::now() + while_;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(command)) => command.refuse(refusal),
            Ok(None) => return false,
            Err(_) => return true,
        }
    }
}

/// Tells other orgs' dispatchers that operators they found busy are free.
pub(super) fn poke(shared: &Shared, orgs: Vec<String>) {
    if orgs.is_empty() {
        return;
    }
    let desks = shared.desks.lock().expect("desks lock");
    for org_id in orgs {
        if let Some(tx) = desks.get(&org_id) {
            let _ = tx.try_send(Command::Poke);
        }
    }
}

/// Loads the org and commits recovery, retrying while the load fails for
/// less than a lease; `Err` when the org was taken over meanwhile
/// (`Lost`), or the load kept failing (`GivenUp`: `load_holding` gives the
/// lease up, so another instance, or this one again, tries the org). A
/// database that does not answer ends the load with the lease
/// (`load_holding`); one that answers renewals but not the load's reads
/// (a lock held on a table they read) holds it, as it would hold every
/// instance's. `taken`: the lease was just taken, so the open consoles
/// (here or on other instances) are asked to register again.
async fn load(shared: &Shared, lease: &Lease, desk: &mut Desk, taken: bool) -> Result<(), lease::Gone> {
    let mut failing_since = None;
    loop {
        // The org's own floors, read with the rest of its state (and retried with it).
        let loaded = async {
            desk.set_floors(domain::dispatch::LinkFloors::new(shared.store.org_link_floors(&desk.org_id).await?));
            desk.set_ceilings(shared.store.org_rtt_ceilings(&desk.org_id).await?, shared.clock.now_ms());
            let bookings = shared.store.bookings(&desk.org_id, None, shared.clock.now_ms()).await?;
            desk.load_bookings(bookings.into_iter().map(|b| b.booking()).collect(), shared.clock.now_ms());
            shared.store.org_snapshot(&desk.org_id).await
        }
        .await;
        let failed = match loaded {
            Ok(snapshot) => {
                let now = shared.clock.now_ms();
                desk.load(snapshot, now);
                if taken {
                    desk.call_tabs_back();
                }
                desk.recover(now);
                desk.serve_queues(now);
                match commit_recovery(shared, lease, desk.take_effects()).await {
                    Ok(()) => return Ok(()),
                    Err(StoreError::Fenced) => return Err(lease::Gone::Lost),
                    Err(e) => format!("recovery could not be committed: {e}"),
                }
            }
            Err(e) => format!("could not load the org's dispatch state: {e}"),
        };
        let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
        if since.elapsed() >= lease::LEASE {
            tracing::error!(org = %desk.org_id, error = %failed, "the org could not be loaded for a lease: giving its lease up");
            return Err(lease::Gone::GivenUp);
        }
        tracing::error!(org = %desk.org_id, error = %failed, "the org could not be loaded: retrying");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Commits what recovering the org decided, on a task of its own that then
/// publishes its events, pokes and frees: should the load be dropped while
/// the commit is on its way (its lease ended: `load_holding`), a commit
/// that lands is still told, as a stepped-down batch is.
async fn commit_recovery(shared: &Shared, lease: &Lease, mut fx: super::desk::Effects) -> Result<(), StoreError> {
    let (shared, lease) = (shared.clone(), lease.clone());
    let committing = tokio::spawn(async move {
        if !fx.writes.is_empty() {
            shared.store.commit(&lease, std::mem::take(&mut fx.writes)).await?;
        }
        super::pipeline::announce(&shared, fx);
        Ok(())
    });
    committing.await.unwrap_or_else(|ended| Err(StoreError::Writer(format!("the recovery's commit ended: {ended}"))))
}

/// `load`, renewing the lease meanwhile: a load longer than a lease (a big
/// org, a slow database) keeps the org, and one the database stops
/// answering (its network gone quiet) ends when the lease does, by this
/// instance's clock, not when TCP gives up. Its callers, waiting in the
/// channel, are then told by `take_lease` instead of held until their
/// request's timeout.
async fn load_holding(shared: &Shared, lease: &Lease, desk: &mut Desk, taken: bool, renewals: &mut lease::Renewals) -> Result<(), lease::Gone> {
    let loading = load(shared, lease, desk, taken);
    tokio::pin!(loading);
    let loaded = loop {
        tokio::select! {
            loaded = &mut loading => break loaded,
            _ = renewals.due() => renewals.renew(shared, lease).await?,
        }
    };
    if let Err(lease::Gone::GivenUp) = loaded {
        // Another instance may load it (one of another build, during a
        // rolling upgrade, say); this one asks again after a pause
        // (`take_lease`). Released here, with no renewal beside it.
        release(shared, lease).await;
    }
    loaded
}

/// Gives the lease up, so another instance may take the org at once;
/// waits a take interval at most (else the lease lapses), a clean stop's
/// release too.
async fn release(shared: &Shared, lease: &Lease) {
    match tokio::time::timeout(lease::TAKE_EVERY, shared.store.release_lease(lease)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(org = %lease.org_id, error = %e, "could not release the org's dispatch lease: it lapses"),
        Err(_) => tracing::warn!(org = %lease.org_id, "the database did not answer the release of the org's dispatch lease: it lapses"),
    }
}

/// Why an owner stopped dispatching its org.
enum Stop {
    /// The engine stopped (its channel closed).
    Closed,
    /// The lease is gone: taken over, lapsed, or given up.
    Gone(lease::Gone),
}

/// Runs the org's dispatcher until its channel closes: it takes the org's
/// lease (`lease.rs`), loads the org and dispatches it while the lease
/// holds, and steps down when another instance takes the org over. `started`
/// is told once the org is loaded and recovered (or found dispatched elsewhere).
pub async fn run(shared: Shared, org_id: String, mut rx: mpsc::Receiver<Command>, started: oneshot::Sender<()>) {
    let mut started = Some(started);
    let (mut pause, mut stepped_down) = (false, 0);
    while let Some((lease, mut renewals)) = take_lease(&shared, &org_id, &mut rx, &mut started, pause, stepped_down).await {
        // A fresh desk for every lease: what changed under another owner
        // (or before a lapse) is in the database, and the open consoles
        // register again (`Desk::call_tabs_back`) with their presences.
        let mut desk = Desk::new(&org_id, shared.settings, std::sync::Arc::default(), shared.busy.clone());
        // Other instances' requests for the org come here while the lease
        // holds (they wait in the channel while the org loads).
        let listening = match &shared.forwarding {
            Some(forwarding) => Some(forwarding.listen(shared.clone(), org_id.clone(), lease.epoch).await),
            None => None,
        };
        let stop = match load_holding(&shared, &lease, &mut desk, true, &mut renewals).await {
            Ok(()) => {
                crate::metrics::dispatching(&org_id, true);
                if let Some(started) = started.take() {
                    let _ = started.send(());
                }
                let stop = serve(&shared, &lease, &mut desk, &mut rx, renewals).await;
                crate::metrics::dispatching(&org_id, false);
                crate::metrics::uncommitted(&org_id).set(0.0);
                stop
            }
            Err(gone) => {
                // Not loaded here: the engine's start goes on without it
                // (the org's requests are answered 503 until it loads).
                if let Some(started) = started.take() {
                    let _ = started.send(());
                }
                // (The requests waiting meanwhile are told by `take_lease`.)
                Stop::Gone(gone)
            }
        };
        drop(listening);
        desk.release_offers(true);
        poke(&shared, desk.take_effects().pokes);
        match stop {
            Stop::Closed => {
                // A clean stop: the next instance need not wait for the lease to lapse.
                release(&shared, &lease).await;
                return;
            }
            Stop::Gone(gone) => {
                match gone {
                    lease::Gone::Lost => tracing::warn!(org = %org_id, epoch = lease.epoch, "the org's lease was taken over: stepped down"),
                    lease::Gone::Lapsed => tracing::warn!(org = %org_id, epoch = lease.epoch, "the org's lease lapsed: stepped down"),
                    lease::Gone::GivenUp => tracing::warn!(org = %org_id, epoch = lease.epoch, "the org's lease was given up: stepped down"),
                }
                // Those waiting are answered by `take_lease`: at once after
                // a give-up (it asks again after a pause), else as it finds.
                pause = matches!(gone, lease::Gone::GivenUp);
                // A lease given up is not taken back before it lapses,
                // should its release not have reached the database: the
                // give-up is another instance's chance.
                if !pause {
                    stepped_down = lease.epoch;
                }
            }
        }
    }
}

/// The org is no longer this instance's: the commands still waiting are
/// told why (`Gone::refusal`).
fn taken_over(waiting: Vec<Command>, gone: lease::Gone) -> Stop {
    for command in waiting {
        command.refuse(gone.refusal());
    }
    Stop::Gone(gone)
}

/// The lease is lost: the batch in flight is answered as it goes (the
/// database refuses it if it came too late), on a task of its own, so a
/// database that does not answer (its network cut) holds only its callers,
/// not the dispatcher; what was decided after it, and every command still
/// waiting, is told why (another instance dispatches the org, or, when
/// the database stopped answering, unavailable).
fn step_down(shared: &Shared, committing: Option<Committing>, decided: Decided, waiting: Vec<Command>, gone: lease::Gone) -> Stop {
    if let Some(batch) = committing {
        let shared = shared.clone();
        tokio::spawn(async move { drop(batch.finish(&shared).await) });
    }
    decided.fail(gone.refusal());
    taken_over(waiting, gone)
}

/// The engine stops: what is in flight and what was decided are committed
/// and answered before the dispatcher ends.
async fn close(shared: &Shared, lease: &Lease, committing: Option<Committing>, decided: Decided) -> Stop {
    let before = match committing {
        Some(batch) => batch.finish(shared).await,
        None => Ok(()),
    };
    match before {
        Ok(()) => drop(decided.commit(shared, lease).finish(shared).await),
        // Decided on top of the failed batch: it fails as that one did.
        Err(StoreError::Fenced) => decided.fail(|| EngineError::DispatchedElsewhere),
        Err(_) => decided.fail(|| EngineError::Unavailable),
    }
    Stop::Closed
}

/// Dispatches the loaded org while `lease` holds it. Commands are decided
/// as they come (at most `MAX_BATCH` waiting for one commit), while the
/// batch before them commits (`pipeline.rs`; on SQLite, once it has).
async fn serve(shared: &Shared, lease: &Lease, desk: &mut Desk, rx: &mut mpsc::Receiver<Command>, mut renewals: lease::Renewals) -> Stop {
    let mut commands: Vec<Command> = Vec::with_capacity(MAX_BATCH);
    let mut decided = Decided::default();
    let mut committing: Option<Committing> = None;
    let uncommitted = crate::metrics::uncommitted(&lease.org_id);
    loop {
        uncommitted.set((decided.held() + committing.as_ref().map_or(0, Committing::held)) as f64);
        let next_timer = desk.timers.next_at().map(|at| shared.clock.instant_at(at));
        tokio::select! {
            // Renewals first: a stream of commands must never starve them.
            biased;
            _ = renewals.due() => match renewals.renew(shared, lease).await {
                Ok(()) => continue,
                Err(gone) => return step_down(shared, committing, decided, commands, gone),
            },
            committed = async { committing.as_mut().expect("guarded").committed().await }, if committing.is_some() => {
                let batch = committing.take().expect("guarded");
                let writes = batch.writes;
                batch.settle(shared, &committed);
                match committed {
                    Ok(_) => {}
                    // Taken over while this batch was decided: none of it
                    // happened (nor will anything else this instance decides).
                    Err(StoreError::Fenced) => {
                        tracing::error!(org = %lease.org_id, epoch = lease.epoch, writes, "batch refused: the org was taken over");
                        return step_down(shared, None, decided, commands, lease::Gone::Lost);
                    }
                    Err(e) => {
                        tracing::error!(org = %lease.org_id, error = %e, writes, "batch not committed: answered 503, reloading");
                        // Decided on top of the failed batch: it fails with it.
                        std::mem::take(&mut decided).fail(|| EngineError::Unavailable);
                        if let Err(gone) = load_holding(shared, lease, desk, false, &mut renewals).await {
                            return taken_over(commands, gone);
                        }
                    }
                }
            }
            command = rx.recv(), if decided.held() < MAX_BATCH => match command {
                Some(command) => commands.push(command),
                None => return close(shared, lease, committing, decided).await,
            },
            _ = async { tokio::time::sleep_until(next_timer.expect("guarded")).await }, if next_timer.is_some() => {}
        }
        while commands.len() + decided.held() < MAX_BATCH {
            match rx.try_recv() {
                Ok(command) => commands.push(command),
                Err(_) => break,
            }
        }
        // A lease not renewed for a whole lease may be another's by now (a
        // stall, a slow database): renewed first, or nothing is answered.
        if !renewals.current() {
            if let Err(gone) = renewals.renew(shared, lease).await {
                return step_down(shared, committing, decided, commands, gone);
            }
        }
        decide(desk, &mut commands, &mut decided, shared.clock.now_ms());
        if committing.is_none() && !decided.is_empty() {
            committing = Some(std::mem::take(&mut decided).commit(shared, lease));
        }
    }
}

/// Applies the waiting commands and the due timers to the desk, then offers
/// what the queues hold to whoever is free.
fn decide(desk: &mut Desk, commands: &mut Vec<Command>, decided: &mut Decided, now: i64) {
    for timer in desk.timers.due(now) {
        desk.fire(timer, now);
    }
    let mut reads = Vec::new();
    for command in commands.drain(..) {
        match apply(desk, command, now, &mut decided.read_back) {
            Applied::Answer(answer) => decided.answers.push(answer),
            Applied::Read(command) => reads.push(command),
            Applied::Done => {}
        }
    }
    desk.serve_queues(now);
    // Reads see these decisions, so they are sent with them, once committed.
    for command in reads {
        decided.answers.push(read(desk, command, now));
    }
    decided.take_from(desk);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> SessionRow {
        SessionRow {
            id: id.into(), org_id: "org".into(), robot_id: format!("robot-of-{id}"), robot_model: "UR5e".into(), site: "Leeds".into(),
            pop: "uk-london".into(), skill: "pick-place".into(), lifecycle: "CANCELLED".into(), safety_state: "SAFE".into(),
            operator_id: None, operator_name: None, operator_region: None, rtt_ms: None, divergence_deg: None, velocity_scale: None,
            raised_at: 1, started_at: None, ended_at: Some(2), client_id: None, client_name: None, planned_end_at: None, booking_id: None,
        }
    }

    /// Each change is answered with its own session's row among the
    /// batch's; one it did not make reads nothing back; a session changed
    /// twice in a batch is read once; a failed batch fails every answer.
    #[tokio::test]
    async fn a_change_is_answered_with_its_own_sessions_row_from_the_batch() {
        let mut read_back = Vec::new();
        let (first, first_answer) = oneshot::channel();
        let (second, second_answer) = oneshot::channel();
        let (again, again_answer) = oneshot::channel();
        let (unheld, unheld_answer) = oneshot::channel();
        let answers = [
            hold_change(first, "ses-b".into(), Ok(true), &mut read_back),
            hold_change(second, "ses-a".into(), Ok(true), &mut read_back),
            hold_change(again, "ses-b".into(), Ok(true), &mut read_back),
            hold_change(unheld, "ses-c".into(), Ok(false), &mut read_back),
        ];
        assert_eq!(read_back, ["ses-b", "ses-a"], "each changed session once; none the desk did not hold");
        let rows = [row("ses-a"), row("ses-b")];
        for answer in answers {
            answer(Ok(&rows));
        }
        let record = |change: SessionChange| match change {
            SessionChange::Done(Some(record)) => record.id,
            other => panic!("{other:?}"),
        };
        assert_eq!(record(first_answer.await.unwrap().unwrap()), "ses-b");
        assert_eq!(record(second_answer.await.unwrap().unwrap()), "ses-a");
        assert_eq!(record(again_answer.await.unwrap().unwrap()), "ses-b");
        assert!(matches!(unheld_answer.await.unwrap(), Ok(SessionChange::NotHeld)));

        // Not read back (PostgreSQL): the caller reads it; a failed batch fails it.
        let (unread, unread_answer) = oneshot::channel();
        hold_change(unread, "ses-d".into(), Ok(true), &mut Vec::new())(Ok(&rows));
        assert!(matches!(unread_answer.await.unwrap(), Ok(SessionChange::Done(None))));
        let (failed, failed_answer) = oneshot::channel();
        hold_change(failed, "ses-a".into(), Ok(true), &mut Vec::new())(Err(|| EngineError::DispatchedElsewhere));
        assert!(matches!(failed_answer.await.unwrap(), Err(EngineError::DispatchedElsewhere)));
    }
}
