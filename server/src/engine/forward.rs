//! Requests for an org this instance does not dispatch go to the instance
//! that does, over NATS request/reply (cluster mode). The owner listens on
//! the subject of its lease (`…engine.<org>.<epoch>`) while it holds it, so
//! a paused or cut-off former owner, still connected to NATS, is never
//! asked again once the epoch has moved on; its answer (sent after its
//! commit) is relayed unchanged. A requester reads the epoch from the
//! database and keeps it for half a second (`EPOCH_KEPT`). Nobody
//! listening (an org between owners) is `DispatchedElsewhere`: 503 with
//! Retry-After, as on one instance.

use super::request::{Answer, Refusal, Request};
use super::types::EngineError;
use super::Shared;
use crate::recent::Recent;
use crate::store::SharedStore;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A forwarded request not answered within this is told "unavailable"
/// (the owner's own commit waits at most a few seconds for the database).
/// Its outcome is then unknown, as after any timeout: the request may
/// still be applied by a slow owner, and a retry sees it done.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How long a new owner waits for NATS to take its subscription for the
/// org's forwarded requests before it dispatches the org regardless (its
/// lease runs meanwhile, unrenewed: well within it).
pub const LISTEN_WITHIN: Duration = Duration::from_secs(1);
// A new owner asks (a take interval at most), listens, then renews: all
// within its lease.
const _: () = assert!(super::lease::TAKE_EVERY.as_millis() + LISTEN_WITHIN.as_millis() < super::lease::LEASE.as_millis());

/// How long a requester keeps an org's epoch before reading it again: a
/// takeover comes at least a lease (3 s) after its old owner's last
/// renewal, so a request is sent to a stale owner only when the takeover
/// falls in this half second (it then waits `ANSWER_WITHIN` and is told 503).
const EPOCH_KEPT: Duration = Duration::from_millis(500);

/// How long an owner that refused an input batch gets single inputs before
/// a batch is tried again: an owner of this build refuses one only when it
/// could not take it then (a failed commit, the database away), and keeps
/// its lease; an owner of the build before refuses one a minute.
const SINGLE_INPUTS_FOR: Duration = Duration::from_secs(60);

/// The way to the other instances' dispatchers.
#[derive(Clone)]
pub struct Forwarding {
    client: async_nats::Client,
    /// `clutchcall.<cluster>.engine`: a lease's subject is this, `.<org>.<epoch>`.
    prefix: String,
    store: SharedStore,
    /// What is known of each org's owner's epoch.
    epochs: Arc<Mutex<HashMap<String, Arc<KnownEpoch>>>>,
    /// Owners (org, epoch) that refused an input batch, and when: most
    /// likely of a build before `Request::Inputs` (`0130851`), during a
    /// rolling upgrade. For `SINGLE_INPUTS_FOR` their input goes one by one.
    single_inputs: Arc<Recent<(String, i64)>>,
}

/// What is known of an org's owner's epoch: the last read of it from the
/// database; one read at a time. (Requests for an org come in bursts: every cockpit's
/// input report falls due together. Each reading the database itself when
/// the epoch went stale was a burst of queries, and of new connections,
/// on the instance and on PostgreSQL, every half second: the relay's
/// frames across instances waited behind it.)
#[derive(Default)]
pub(super) struct KnownEpoch {
    /// The last read: what it found (an epoch, none, or an error), when it
    /// began and when it ended. One read at a time.
    last: tokio::sync::Mutex<Option<LastRead>>,
    /// When a request last found it stale (nobody listens on it, or the
    /// instance there no longer dispatches the org): a read begun before
    /// is not used again.
    forgotten: Mutex<Option<std::time::Instant>>,
}

#[derive(Clone, Copy)]
struct LastRead {
    found: Result<Option<i64>, ()>,
    began: std::time::Instant,
    ended: std::time::Instant,
}

impl KnownEpoch {
    /// The epoch. One read at a time: those who waited while one ran take
    /// what it found (error or none included); else, unless `fresh`, an
    /// epoch read within `EPOCH_KEPT`; else `read` now. A read begun
    /// before the last `forget` is never used.
    async fn get<F>(&self, fresh: bool, read: impl FnOnce() -> F) -> Result<Option<i64>, EngineError>
    where
        F: std::future::Future<Output = crate::store::StoreResult<Option<i64>>>,
    {
        let asked = std::time::Instant::now();
        let mut last = self.last.lock().await;
        if let Some(LastRead { found, began, ended }) = *last {
            let forgotten = *self.forgotten.lock().expect("epochs lock");
            if forgotten.is_none_or(|at| began > at) {
                if ended >= asked {
                    return found.map_err(|()| EngineError::Unavailable);
                }
                if let (Ok(Some(epoch)), false) = (found, fresh) {
                    if began.elapsed() < EPOCH_KEPT {
                        return Ok(Some(epoch));
                    }
                }
            }
        }
        let began = std::time::Instant::now();
        let found = read().await;
        *last = Some(LastRead { found: found.as_ref().map(|epoch| *epoch).map_err(|_| ()), began, ended: std::time::Instant::now() });
        Ok(found?)
    }

    /// A request found it stale: the next asks read it again.
    fn forget(&self) {
        *self.forgotten.lock().expect("epochs lock") = Some(std::time::Instant::now());
    }
}

/// An owner listening for its org's forwarded requests; listening ends
/// when this is dropped (the lease ended, or the dispatcher was aborted).
pub(super) type Listening = crate::task::OwnedTask;

impl Forwarding {
    /// Over the cluster bus's connection, in its namespace.
    pub fn new(bus: &crate::bus::nats::NatsBus, store: SharedStore) -> Forwarding {
        Forwarding {
            client: bus.client().clone(),
            prefix: bus.cluster_subject("engine"),
            store,
            epochs: Arc::default(),
            single_inputs: Arc::new(Recent::new(SINGLE_INPUTS_FOR)),
        }
    }

    /// The subject of the org's lease of `epoch`.
    fn subject(&self, org_id: &str, epoch: i64) -> String {
        format!("{}.{}.{epoch}", self.prefix, crate::bus::nats::token(org_id))
    }

    /// The epoch of the org's owner: read within `EPOCH_KEPT`, or (`fresh`)
    /// read since this was asked. Concurrent askers share one read.
    async fn epoch(&self, org_id: &str, fresh: bool) -> Result<Option<i64>, EngineError> {
        let known = self.epochs.lock().expect("epochs lock").entry(org_id.to_string()).or_default().clone();
        known.get(fresh, || self.store.current_epoch(org_id)).await
    }

    fn forget(&self, org_id: &str) {
        if let Some(known) = self.epochs.lock().expect("epochs lock").get(org_id) {
            known.forget();
        }
    }

    /// Asks the org's owner to run `request`; its answer, or why none came.
    pub(super) async fn forward(&self, org_id: &str, request: &Request) -> Result<Answer, EngineError> {
        let payload: bytes::Bytes = serde_json::to_vec(request)
            .map_err(|e| {
                tracing::error!(error = %e, "a request could not be written for forwarding");
                EngineError::Unavailable
            })?
            .into();
        // Tried at most twice: with the epoch remembered, then (nobody
        // listening there: the org moved) with the one the database has now.
        for fresh in [false, true] {
            let Some(epoch) = self.epoch(org_id, fresh).await? else { return Err(EngineError::DispatchedElsewhere) };
            if let Request::Inputs { inputs } = request {
                if self.gets_single_inputs(org_id, epoch) {
                    return self.forward_one_by_one(org_id, inputs).await;
                }
            }
            let message = match tokio::time::timeout(ANSWER_WITHIN, self.client.request(self.subject(org_id, epoch), payload.clone())).await {
                Ok(Ok(message)) => message,
                // Nothing was run: safe to ask the current owner.
                Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                    self.forget(org_id);
                    continue;
                }
                Ok(Err(e)) => {
                    tracing::warn!(org = %org_id, error = %e, "a forwarded request got no answer");
                    self.forget(org_id);
                    return Err(EngineError::Unavailable);
                }
                Err(_) => {
                    tracing::warn!(org = %org_id, "a forwarded request was not answered in time");
                    self.forget(org_id);
                    return Err(EngineError::Unavailable);
                }
            };
            return match serde_json::from_slice::<Result<Answer, Refusal>>(&message.payload) {
                Ok(Err(Refusal::DispatchedElsewhere)) => {
                    self.forget(org_id);
                    Err(EngineError::DispatchedElsewhere)
                }
                // An owner of a build before `Inputs` cannot read the batch
                // and says "unavailable"; it reads the single `Input` it
                // sent itself (a rolling upgrade: otherwise a session driven
                // from an upgraded instance would meet its inactivity
                // chain). An owner of this build says so when it could not
                // take the batch (a failed commit, the database away): it
                // reads single inputs as well, and gets them for a while.
                Ok(Err(Refusal::Unavailable)) if matches!(request, Request::Inputs { .. }) => {
                    let Request::Inputs { inputs } = request else { unreachable!("matched") };
                    tracing::info!(org = %org_id, epoch, "the org's owner refused an input batch (an instance of the build before?): input goes one by one for a minute");
                    self.single_inputs.note((org_id.to_string(), epoch), ());
                    self.forward_one_by_one(org_id, inputs).await
                }
                Ok(answer) => answer.map_err(EngineError::from),
                Err(e) => {
                    tracing::error!(org = %org_id, error = %e, "a forwarded answer could not be read");
                    Err(EngineError::Unavailable)
                }
            };
        }
        Err(EngineError::DispatchedElsewhere)
    }

    /// Whether the owner (org, epoch) refused an input batch within
    /// `SINGLE_INPUTS_FOR`.
    fn gets_single_inputs(&self, org_id: &str, epoch: i64) -> bool {
        self.single_inputs.contains(&(org_id.to_string(), epoch))
    }

    /// `inputs` as single `Request::Input`s, at once.
    async fn forward_one_by_one(&self, org_id: &str, inputs: &[super::request::OperatorInput]) -> Result<Answer, EngineError> {
        let each = inputs.iter().map(|input| {
            let single = Request::Input { operator_id: input.operator_id.clone(), session_id: input.session_id.clone() };
            async move { Box::pin(self.forward(org_id, &single)).await }
        });
        futures::future::join_all(each).await.into_iter().find(Result::is_err).unwrap_or(Ok(Answer::Done))
    }

    /// Runs the org's forwarded requests for the lease of `epoch` on this
    /// instance's dispatcher until the returned guard is dropped. Returns
    /// once NATS has confirmed the subscription, or after `LISTEN_WITHIN`:
    /// NATS away (while its client reconnects it may take no command at
    /// all), the owner dispatches its org meanwhile and listens as soon as
    /// NATS lets it, and other instances are told nobody listens (503).
    pub(super) async fn listen(&self, shared: Shared, org_id: String, epoch: i64) -> Listening {
        let (client, subject, org) = (self.client.clone(), self.subject(&org_id, epoch), org_id.clone());
        let (begun, listening) = tokio::sync::oneshot::channel();
        let listener = Listening::spawn(async move {
            let mut requests = match client.subscribe(subject).await {
                Ok(requests) => requests,
                Err(e) => {
                    tracing::error!(org = %org_id, error = %e, "cannot listen for requests forwarded by other instances");
                    return;
                }
            };
            // Unconfirmed: forwarders retry a request nobody answered.
            crate::bus::nats::confirm(&client, &format!("org {org_id}'s forwarded requests' subscription")).await;
            let _ = begun.send(());
            while let Some(message) = requests.next().await {
                let Some(reply_to) = message.reply.clone() else { continue };
                let (shared, client, org_id) = (shared.clone(), client.clone(), org_id.clone());
                // Each on its own task: requests wait for their batch together.
                tokio::spawn(async move {
                    let answer = match (shared.desk_of(&org_id), serde_json::from_slice::<Request>(&message.payload)) {
                        // (The engine is stopping.)
                        (None, _) => Err(Refusal::DispatchedElsewhere),
                        (Some(desk), Ok(request)) => shared.run(&desk, &org_id, request).await.map_err(Refusal::from),
                        (Some(_), Err(e)) => {
                            tracing::error!(org = %org_id, error = %e, "a forwarded request could not be read");
                            Err(Refusal::Unavailable)
                        }
                    };
                    match serde_json::to_vec(&answer) {
                        Ok(payload) => {
                            if let Err(e) = client.publish(reply_to, payload.into()).await {
                                tracing::warn!(org = %org_id, error = %e, "a forwarded request's answer could not be sent");
                            }
                        }
                        Err(e) => tracing::error!(org = %org_id, error = %e, "a forwarded answer could not be written"),
                    }
                });
            }
        });
        // (Told nothing when the subscription failed: logged above.)
        if tokio::time::timeout(LISTEN_WITHIN, listening).await.is_err() {
            tracing::warn!(org = %org, "NATS has not taken the subscription for the org's forwarded requests: dispatching it here, and listening once NATS does");
        }
        listener
    }
}

#[cfg(test)]
mod tests {
    use super::{KnownEpoch, SINGLE_INPUTS_FOR};
    use crate::engine::request::{Answer, OperatorInput, Refusal, Request};
    use futures::StreamExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A new owner whose NATS client takes no command (reconnecting: its
    /// queue full, as under a burst of events while NATS is away) goes on
    /// to dispatch its org within `LISTEN_WITHIN` rather than waiting on
    /// NATS, unrenewed, past its lease.
    #[tokio::test]
    async fn a_new_owner_dispatches_its_org_while_nats_takes_no_subscription() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::sqlite_with_a_robot(dir.path()).await;
        // Nothing answers on port 1: the client keeps trying to connect and
        // holds one command meanwhile; a publisher fills it.
        let connecting = async_nats::ConnectOptions::new().retry_on_initial_connect().client_capacity(1);
        let client = connecting.connect("nats://127.0.0.1:1").await.unwrap();
        let filler = client.clone();
        tokio::spawn(async move {
            loop {
                let _ = filler.publish("filler", bytes::Bytes::new()).await;
            }
        });
        let forwarding = super::Forwarding {
            client,
            prefix: "clutchcall.test.engine".into(),
            store: store.clone(),
            epochs: Default::default(),
            single_inputs: std::sync::Arc::new(crate::recent::Recent::new(SINGLE_INPUTS_FOR)),
        };
        let shared = crate::engine::Shared {
            store,
            bus: crate::bus::InProcessBus::new(),
            clock: crate::clock::Clock::system(),
            settings: crate::engine::desk_tests::SETTINGS,
            busy: Default::default(),
            owner: "test/1".into(),
            desks: Default::default(),
            forwarding: None,
        };
        let listening = tokio::time::timeout(super::LISTEN_WITHIN * 3, forwarding.listen(shared, "org".into(), 1)).await;
        assert!(listening.is_ok(), "the owner waited on NATS past three times LISTEN_WITHIN");
    }

    /// An owner of the build before `Inputs` (`0130851`) cannot read an
    /// input batch and answers it "unavailable"; it reads single `Input`s.
    /// The batch then goes to it one by one, and so do the next ones for
    /// that owner for `SINGLE_INPUTS_FOR`, without the batch first. The
    /// owner here is a responder on the org's subject on the local NATS
    /// answering as that build did.
    #[tokio::test]
    async fn an_owner_of_the_build_before_gets_operator_input_one_by_one_for_a_while() {
        let dir = tempfile::tempdir().unwrap();
        // (SQLite: the org's epoch is 1.)
        let store = crate::store::sqlite_with_a_robot(dir.path()).await;
        let cluster = uuid::Uuid::now_v7().simple().to_string();
        let bus = crate::bus::nats::NatsBus::connect("nats://127.0.0.1:4222", "forward-test", &cluster).await.expect("NATS on 127.0.0.1:4222");
        let forwarding = super::Forwarding::new(&bus, store);
        let mut owner = bus.client().subscribe(forwarding.subject("org", 1)).await.unwrap();
        bus.client().flush().await.unwrap();
        let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let (client, noted) = (bus.client().clone(), heard.clone());
        tokio::spawn(async move {
            while let Some(message) = owner.next().await {
                let request: serde_json::Value = serde_json::from_slice(&message.payload).unwrap();
                let kind = request.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
                let answer: Result<Answer, Refusal> = if kind == "Input" { Ok(Answer::Done) } else { Err(Refusal::Unavailable) };
                noted.lock().unwrap().push(kind);
                client.publish(message.reply.unwrap(), serde_json::to_vec(&answer).unwrap().into()).await.unwrap();
            }
        });
        let batch = |n: usize| Request::Inputs {
            inputs: (0..n).map(|i| OperatorInput { operator_id: format!("op-{i}"), session_id: format!("s-{i}") }).collect(),
        };
        let kinds = |heard: &[String]| (heard.iter().filter(|k| *k == "Inputs").count(), heard.iter().filter(|k| *k == "Input").count());
        assert!(matches!(forwarding.forward("org", &batch(3)).await, Ok(Answer::Done)));
        assert_eq!(kinds(&heard.lock().unwrap()), (1, 3), "the batch, refused, then its three inputs");
        assert!(matches!(forwarding.forward("org", &batch(2)).await, Ok(Answer::Done)));
        assert_eq!(kinds(&heard.lock().unwrap()), (1, 5), "the next batch one by one at once");
        // Remembered for `SINGLE_INPUTS_FOR`: past it, the batch is tried
        // first again (an owner of this build that refused one while its
        // database was away takes batches again).
        forwarding.single_inputs.age(SINGLE_INPUTS_FOR);
        assert!(matches!(forwarding.forward("org", &batch(2)).await, Ok(Answer::Done)));
        assert_eq!(kinds(&heard.lock().unwrap()), (2, 7), "past the while, the batch first, refused, then its inputs");
    }

    /// Requests for an org come in bursts; a burst finding the epoch stale
    /// reads it from the database once, not once per request. A forgotten
    /// epoch (nobody listened on it) is read again, and a fresh ask takes
    /// only a read begun after it.
    #[tokio::test]
    async fn a_burst_of_requests_reads_the_owners_epoch_once() {
        let known = KnownEpoch::default();
        let reads = AtomicUsize::new(0);
        let read = || async {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok(Some(7))
        };
        let burst = futures::future::join_all((0..10).map(|_| known.get(false, read))).await;
        assert!(burst.iter().all(|epoch| matches!(epoch, Ok(Some(7)))));
        assert_eq!(reads.load(Ordering::SeqCst), 1, "one read for the burst");
        assert_eq!(known.get(false, read).await.unwrap(), Some(7));
        assert_eq!(reads.load(Ordering::SeqCst), 1, "kept");

        known.forget();
        let burst = futures::future::join_all((0..10).map(|_| known.get(false, read))).await;
        assert!(burst.iter().all(|epoch| matches!(epoch, Ok(Some(7)))));
        assert_eq!(reads.load(Ordering::SeqCst), 2, "forgotten: read again, once");

        assert_eq!(known.get(true, read).await.unwrap(), Some(7));
        assert_eq!(reads.load(Ordering::SeqCst), 3, "fresh: a read begun after the ask");

        // A read that fails answers those who waited on it: they do not
        // each try again, one after another.
        let failing = || async {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Err(crate::store::StoreError::Writer("down".into()))
        };
        let burst = futures::future::join_all((0..10).map(|_| known.get(true, failing))).await;
        assert!(burst.iter().all(Result::is_err));
        assert_eq!(reads.load(Ordering::SeqCst), 4, "one failed read for the burst");
        assert_eq!(known.get(false, read).await.unwrap(), Some(7), "a failure is not kept");
        assert_eq!(reads.load(Ordering::SeqCst), 5);
    }
}
