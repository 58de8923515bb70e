//! What may be asked of an org's dispatcher, in a form that travels: an
//! instance that does not dispatch the org sends the same `Request` to the
//! one that does (`forward.rs`) and relays its `Answer` unchanged. Asked
//! here or forwarded, a request is run by `Shared::run` against the local
//! dispatcher, so both ways in are one.

use super::calls::CallingRobot;
use super::dispatcher::{Command, Reply};
use super::types::{CallOutcome, EngineError, OperatorPresence};
use super::Shared;
use domain::dispatch::{Candidate, LinkFloors};
use domain::models::{LifecycleState, Offer, SessionRecord};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

/// An operator's input on the session they hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OperatorInput {
    pub operator_id: String,
    pub session_id: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    Raise { robot: CallingRobot },
    Accept { operator_id: String, session_id: String },
    Decline { operator_id: String, session_id: String },
    Ready { operator_id: String, live: bool },
    Aux { operator_id: String, reason: String },
    Offline { operator_id: String },
    Rtt { operator_id: String, pop: String, rtt_ms: u32 },
    /// `robot`: asked by that robot, which may end only its own session.
    Finish { session_id: String, robot: Option<String>, to: LifecycleState, reason: String },
    Steer { session_id: String, to: LifecycleState, by: Option<String> },
    ReportError { session_id: String, detail: String },
    /// An admin opened (`joined`) or closed the session's live view.
    Supervise { session_id: String, admin_id: String, joined: bool },
    /// A certified admin takes control of a live session without an accept.
    TakeOver { session_id: String, admin_id: String, reason: String },
    HandOver { session_id: String, by: Option<String>, to: String },
    HandoverCandidates { session_id: String },
    Extension { session_id: String, operator: Option<String>, minutes: i64 },
    Extended { session_id: String, from: i64, to: i64 },
    /// Operator input on their sessions (`inputs::InputsNoted`'s batch).
    Inputs { inputs: Vec<OperatorInput> },
    /// One operator input, as instances of the build before `Inputs`
    /// (`0130851`) forward it: read from them, and sent to an owner of
    /// that build, which cannot read `Inputs` (a rolling upgrade).
    Input { operator_id: String, session_id: String },
    /// `tab`: the socket's id, unique in the cluster (opening it again is a no-op).
    TabOpened { operator_id: String, tab: String },
    TabClosed { operator_id: String, tab: String, last_seen: i64 },
    /// The notices that stand for an operator, for a console tab that
    /// resynced (an owner of the build before cannot read it: the tab
    /// goes without).
    Notices { operator_id: String },
    Presences,
    Console { operator_id: String },
    /// The operator's directory entry changed: the desk reads it again.
    ReloadOperator { operator_id: String },
    /// The org's link floors changed.
    ReloadFloors,
    /// The robot's bookings changed (booked or cancelled).
    BookingsChanged { robot_id: String },
}

/// What a request is answered, one variant per kind of answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum Answer {
    Done,
    Outcome(CallOutcome),
    /// What the desk did to a session it was asked to end or steer.
    Changed(SessionChange),
    /// Unix ms (an error logged, a planned end).
    At(i64),
    Offer(Offer),
    Candidates(Vec<Candidate>),
    /// How far a planned end may move: from, to.
    Window(i64, i64),
    Tab(OperatorPresence, Option<Offer>),
    Console(Option<(OperatorPresence, Option<Offer>)>),
    Presences(Vec<OperatorPresence>),
    Notices(Vec<domain::events::OperatorEvent>),
}

/// What the desk did to a session it was asked to end or steer.
#[derive(Debug, Serialize, Deserialize)]
pub enum SessionChange {
    /// It holds no such open (or live) session: the row says why.
    NotHeld,
    /// Changed. The record as the change's batch committed it, where the
    /// store read it back in the batch (SQLite); else `None`, and the
    /// caller reads it (PostgreSQL: `DispatchStore::commit_reading`).
    Done(Option<Box<SessionRecord>>),
}

/// The typed answer an `Engine` method expects from its request.
pub trait Expect: Sized {
    fn expect(answer: Answer) -> Option<Self>;
}

macro_rules! expect {
    ($t:ty, $pattern:pat => $value:expr) => {
        impl Expect for $t {
            fn expect(answer: Answer) -> Option<Self> {
                match answer {
                    $pattern => Some($value),
                    _ => None,
                }
            }
        }
    };
}

expect!((), Answer::Done => ());
expect!(CallOutcome, Answer::Outcome(outcome) => outcome);
expect!(SessionChange, Answer::Changed(change) => change);
expect!(i64, Answer::At(at) => at);
expect!(Offer, Answer::Offer(offer) => offer);
expect!(Vec<Candidate>, Answer::Candidates(candidates) => candidates);
expect!((i64, i64), Answer::Window(from, to) => (from, to));
expect!((OperatorPresence, Option<Offer>), Answer::Tab(presence, offer) => (presence, offer));
expect!(Option<(OperatorPresence, Option<Offer>)>, Answer::Console(console) => console);
expect!(Vec<OperatorPresence>, Answer::Presences(presences) => presences);
expect!(Vec<domain::events::OperatorEvent>, Answer::Notices(notices) => notices);

impl Request {
    /// The operator the request names, when the desk must know them.
    fn operator(&self) -> Option<&str> {
        match self {
            Request::Accept { operator_id, .. }
            | Request::Decline { operator_id, .. }
            | Request::Ready { operator_id, .. }
            | Request::Aux { operator_id, .. }
            | Request::Offline { operator_id, .. }
            | Request::Rtt { operator_id, .. }
            | Request::TabOpened { operator_id, .. } => Some(operator_id),
            Request::HandOver { to, .. } => Some(to),
            Request::TakeOver { admin_id, .. } => Some(admin_id),
            _ => None,
        }
    }
}

/// Sends one command to the desk and waits for its answer.
async fn ask<T>(desk: &mpsc::Sender<Command>, make: impl FnOnce(Reply<T>) -> Command, answer: impl FnOnce(T) -> Answer) -> Result<Answer, EngineError> {
    let (reply, answered) = oneshot::channel();
    desk.send(make(reply)).await.map_err(|_| EngineError::Unavailable)?;
    answered.await.map_err(|_| EngineError::Unavailable)?.map(answer)
}

impl Shared {
    /// Runs `request` on this instance's dispatcher of the org (`desk`).
    /// Where it names an operator the dispatcher has not loaded yet (added
    /// to the directory since it started), their profile is read here,
    /// outside the dispatcher, and the request tried again.
    pub(super) async fn run(&self, desk: &mpsc::Sender<Command>, org_id: &str, request: Request) -> Result<Answer, EngineError> {
        let Some(operator_id) = request.operator().map(str::to_string) else {
            return self.run_once(desk, org_id, request).await;
        };
        match self.run_once(desk, org_id, request.clone()).await {
            Err(EngineError::NotFound("operator")) => {
                let record = self.store.operator(org_id, &operator_id).await?.ok_or(EngineError::NotFound("operator"))?;
                ask(desk, |reply| Command::LoadOperator { record, reply }, |()| Answer::Done).await?;
                self.run_once(desk, org_id, request).await
            }
            other => other,
        }
    }

    async fn run_once(&self, desk: &mpsc::Sender<Command>, org_id: &str, request: Request) -> Result<Answer, EngineError> {
        match request {
            Request::Raise { robot } => ask(desk, |reply| Command::Raise { robot, reply }, Answer::Outcome).await,
            Request::Accept { operator_id, session_id } => ask(desk, |reply| Command::Accept { operator_id, session_id, reply }, |()| Answer::Done).await,
            Request::Decline { operator_id, session_id } => ask(desk, |reply| Command::Decline { operator_id, session_id, reply }, |()| Answer::Done).await,
            Request::Ready { operator_id, live } => ask(desk, |reply| Command::Ready { operator_id, live, reply }, |()| Answer::Done).await,
            Request::Aux { operator_id, reason } => ask(desk, |reply| Command::Aux { operator_id, reason, reply }, |()| Answer::Done).await,
            Request::Offline { operator_id } => ask(desk, |reply| Command::Offline { operator_id, reply }, |()| Answer::Done).await,
            Request::Rtt { operator_id, pop, rtt_ms } => ask(desk, |reply| Command::Rtt { operator_id, pop, rtt_ms, reply }, |()| Answer::Done).await,
            Request::Finish { session_id, robot, to, reason } => ask(desk, |reply| Command::Finish { session_id, robot, to, reason, reply }, Answer::Changed).await,
            Request::Steer { session_id, to, by } => ask(desk, |reply| Command::Steer { session_id, to, by, reply }, Answer::Changed).await,
            Request::ReportError { session_id, detail } => ask(desk, |reply| Command::ReportError { session_id, detail, reply }, Answer::At).await,
            Request::Supervise { session_id, admin_id, joined } => {
                ask(desk, |reply| Command::Supervise { session_id, admin_id, joined, reply }, |()| Answer::Done).await
            }
            Request::TakeOver { session_id, admin_id, reason } => {
                ask(desk, |reply| Command::TakeOver { session_id, admin_id, reason, reply }, |()| Answer::Done).await
            }
            Request::HandOver { session_id, by, to } => ask(desk, |reply| Command::HandOver { session_id, by, to, reply }, Answer::Offer).await,
            Request::HandoverCandidates { session_id } => ask(desk, |reply| Command::HandoverCandidates { session_id, reply }, Answer::Candidates).await,
            Request::Extension { session_id, operator, minutes } => {
                ask(desk, |reply| Command::Extension { session_id, operator, minutes, reply }, |(from, to)| Answer::Window(from, to)).await
            }
            Request::Extended { session_id, from, to } => ask(desk, |reply| Command::Extended { session_id, from, to, reply }, Answer::At).await,
            Request::Inputs { inputs } => ask(desk, |reply| Command::Inputs { inputs, reply }, |()| Answer::Done).await,
            Request::Input { operator_id, session_id } => {
                ask(desk, |reply| Command::Inputs { inputs: vec![OperatorInput { operator_id, session_id }], reply }, |()| Answer::Done).await
            }
            Request::TabOpened { operator_id, tab } => ask(desk, |reply| Command::TabOpened { operator_id, tab, reply }, |(p, o)| Answer::Tab(p, o)).await,
            Request::TabClosed { operator_id, tab, last_seen } => ask(desk, |reply| Command::TabClosed { operator_id, tab, last_seen, reply }, |()| Answer::Done).await,
            Request::Notices { operator_id } => ask(desk, |reply| Command::Notices { operator_id, reply }, Answer::Notices).await,
            Request::Presences => ask(desk, |reply| Command::Presences { reply }, Answer::Presences).await,
            Request::Console { operator_id } => ask(desk, |reply| Command::Console { operator_id, reply }, Answer::Console).await,
            Request::ReloadOperator { operator_id } => match self.store.operator(org_id, &operator_id).await? {
                Some(record) => ask(desk, |reply| Command::LoadOperator { record, reply }, |()| Answer::Done).await,
                None => ask(desk, |reply| Command::DropOperator { operator_id, reply }, |()| Answer::Done).await,
            },
            Request::ReloadFloors => {
                let floors = LinkFloors::new(self.store.org_link_floors(org_id).await?);
                let ceilings = self.store.org_rtt_ceilings(org_id).await?;
                ask(desk, |reply| Command::SetFloors { floors, ceilings, reply }, |()| Answer::Done).await
            }
            Request::BookingsChanged { robot_id } => {
                let now = self.clock.now_ms();
                let bookings = self.store.robot_bookings(org_id, &robot_id, now).await?.into_iter().map(|b| b.booking()).collect();
                ask(desk, |reply| Command::SetBookings { robot_id, bookings, reply }, |()| Answer::Done).await
            }
        }
    }
}

/// An `EngineError` as it travels back from the instance that dispatches
/// the org. A store error there is told as "unavailable" (it is logged
/// where it happened).
#[derive(Debug, Serialize, Deserialize)]
pub enum Refusal {
    NotFound(String),
    CallInProgress { robot_id: String, session_id: String },
    NoSkill(String),
    NoOpenOffer,
    Inactive,
    ImplausibleRtt,
    SessionEnded,
    NotAttached,
    Paused,
    HandoverRinging(String),
    NotHandoverCandidate,
    CannotExtend(String),
    CannotTakeOver(String),
    IllegalTransition { from: LifecycleState, to: LifecycleState },
    Unavailable,
    DispatchedElsewhere,
}

/// What the engine may say is not found (its errors name things statically).
const FINDABLE: [&str; 4] = ["operator", "session", "live session", "robot"];

impl From<EngineError> for Refusal {
    fn from(e: EngineError) -> Refusal {
        let lifecycle = |s: &str| LifecycleState::parse(s).unwrap_or(LifecycleState::Pending);
        match e {
            EngineError::NotFound(what) => Refusal::NotFound(what.to_string()),
            EngineError::CallInProgress { robot_id, session_id } => Refusal::CallInProgress { robot_id, session_id },
            EngineError::NoSkill(cert) => Refusal::NoSkill(cert),
            EngineError::NoOpenOffer => Refusal::NoOpenOffer,
            EngineError::Inactive => Refusal::Inactive,
            EngineError::ImplausibleRtt => Refusal::ImplausibleRtt,
            EngineError::SessionEnded => Refusal::SessionEnded,
            EngineError::NotAttached => Refusal::NotAttached,
            EngineError::Paused => Refusal::Paused,
            EngineError::HandoverRinging(to) => Refusal::HandoverRinging(to),
            EngineError::NotHandoverCandidate => Refusal::NotHandoverCandidate,
            EngineError::CannotExtend(why) => Refusal::CannotExtend(why),
            EngineError::CannotTakeOver(why) => Refusal::CannotTakeOver(why),
            EngineError::IllegalTransition { from, to } => Refusal::IllegalTransition { from: lifecycle(from), to: lifecycle(to) },
            EngineError::DispatchedElsewhere => Refusal::DispatchedElsewhere,
            EngineError::Unavailable => Refusal::Unavailable,
            EngineError::Store(e) => {
                tracing::error!(error = %e, "a forwarded request failed on the store");
                Refusal::Unavailable
            }
        }
    }
}

impl From<Refusal> for EngineError {
    fn from(r: Refusal) -> EngineError {
        match r {
            Refusal::NotFound(what) => EngineError::NotFound(FINDABLE.into_iter().find(|known| *known == what).unwrap_or("resource")),
            Refusal::CallInProgress { robot_id, session_id } => EngineError::CallInProgress { robot_id, session_id },
            Refusal::NoSkill(cert) => EngineError::NoSkill(cert),
            Refusal::NoOpenOffer => EngineError::NoOpenOffer,
            Refusal::Inactive => EngineError::Inactive,
            Refusal::ImplausibleRtt => EngineError::ImplausibleRtt,
            Refusal::SessionEnded => EngineError::SessionEnded,
            Refusal::NotAttached => EngineError::NotAttached,
            Refusal::Paused => EngineError::Paused,
            Refusal::HandoverRinging(to) => EngineError::HandoverRinging(to),
            Refusal::NotHandoverCandidate => EngineError::NotHandoverCandidate,
            Refusal::CannotExtend(why) => EngineError::CannotExtend(why),
            Refusal::CannotTakeOver(why) => EngineError::CannotTakeOver(why),
            Refusal::IllegalTransition { from, to } => EngineError::IllegalTransition { from: from.as_str(), to: to.as_str() },
            Refusal::Unavailable => EngineError::Unavailable,
            Refusal::DispatchedElsewhere => EngineError::DispatchedElsewhere,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refusal the desk can give comes back as the same error (same
    /// variant, same fields) from another instance; a store error there is
    /// "unavailable" here.
    #[test]
    fn a_refusal_travels_back_as_the_same_error() {
        let errors = [
            EngineError::NotFound("operator"),
            EngineError::NotFound("live session"),
            EngineError::CallInProgress { robot_id: "r".into(), session_id: "s".into() },
            EngineError::NoSkill("cert".into()),
            EngineError::NoOpenOffer,
            EngineError::Inactive,
            EngineError::ImplausibleRtt,
            EngineError::SessionEnded,
            EngineError::NotAttached,
            EngineError::Paused,
            EngineError::HandoverRinging("Tom".into()),
            EngineError::NotHandoverCandidate,
            EngineError::CannotExtend("booked".into()),
            EngineError::CannotTakeOver("not certified".into()),
            EngineError::IllegalTransition { from: "PAUSED", to: "PENDING" },
            EngineError::Unavailable,
            EngineError::DispatchedElsewhere,
        ];
        let travel = |error: EngineError| {
            let wire = serde_json::to_vec(&Refusal::from(error)).unwrap();
            EngineError::from(serde_json::from_slice::<Refusal>(&wire).unwrap())
        };
        for error in errors {
            let before = format!("{error:?}");
            assert_eq!(format!("{:?}", travel(error)), before);
        }
        let store = EngineError::Store(crate::store::StoreError::Fenced);
        assert!(matches!(travel(store), EngineError::Unavailable));
    }
}
