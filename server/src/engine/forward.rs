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

/// How long a requester keeps an org's epoch before reading it again: a
/// takeover comes at least a lease (3 s) after its old owner's last
/// renewal, so a request is sent to a stale owner only when the takeover
/// falls in this half second (it then waits `ANSWER_WITHIN` and is told 503).
const EPOCH_KEPT: Duration = Duration::from_millis(500);

/// The way to the other instances' dispatchers.
#[derive(Clone)]
pub struct Forwarding {
    client: async_nats::Client,
    /// `clutchcall.<cluster>.engine`: a lease's subject is this, `.<org>.<epoch>`.
    prefix: String,
    store: SharedStore,
    /// The epoch of each org's owner, and when it was read from the database.
    epochs: Arc<Mutex<HashMap<String, (i64, std::time::Instant)>>>,
}

/// An owner listening for its org's forwarded requests; listening ends
/// when this is dropped (the lease ended, or the dispatcher was aborted).
pub(super) type Listening = crate::task::OwnedTask;

impl Forwarding {
    /// Over the cluster bus's connection, in its namespace.
    pub fn new(bus: &crate::bus::nats::NatsBus, store: SharedStore) -> Forwarding {
        Forwarding { client: bus.client().clone(), prefix: bus.cluster_subject("engine"), store, epochs: Arc::default() }
    }

    /// The subject of the org's lease of `epoch`.
    fn subject(&self, org_id: &str, epoch: i64) -> String {
        format!("{}.{}.{epoch}", self.prefix, crate::bus::nats::token(org_id))
    }

    /// The epoch of the org's owner: read within `EPOCH_KEPT`, or (`fresh`) now.
    async fn epoch(&self, org_id: &str, fresh: bool) -> Result<Option<i64>, EngineError> {
        if !fresh {
            if let Some((epoch, read)) = self.epochs.lock().expect("epochs lock").get(org_id) {
                if read.elapsed() < EPOCH_KEPT {
                    return Ok(Some(*epoch));
                }
            }
        }
        let epoch = self.store.current_epoch(org_id).await?;
        let mut epochs = self.epochs.lock().expect("epochs lock");
        match epoch {
            Some(epoch) => epochs.insert(org_id.to_string(), (epoch, std::time::Instant::now())),
            None => epochs.remove(org_id),
        };
        Ok(epoch)
    }

    fn forget(&self, org_id: &str) {
        self.epochs.lock().expect("epochs lock").remove(org_id);
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
                Ok(answer) => answer.map_err(EngineError::from),
                Err(e) => {
                    tracing::error!(org = %org_id, error = %e, "a forwarded answer could not be read");
                    Err(EngineError::Unavailable)
                }
            };
        }
        Err(EngineError::DispatchedElsewhere)
    }

    /// Runs the org's forwarded requests for the lease of `epoch` on this
    /// instance's dispatcher until the returned guard is dropped. Listening
    /// has begun when this returns; `None` when NATS refused it.
    pub(super) async fn listen(&self, shared: Shared, org_id: String, epoch: i64) -> Option<Listening> {
        let client = self.client.clone();
        let mut requests = match client.subscribe(self.subject(&org_id, epoch)).await {
            Ok(requests) => requests,
            Err(e) => {
                tracing::error!(org = %org_id, error = %e, "cannot listen for requests forwarded by other instances");
                return None;
            }
        };
        // Unconfirmed: forwarders retry a request nobody answered.
        crate::bus::nats::confirm(&client, &format!("org {org_id}'s forwarded requests' subscription")).await;
        Some(Listening::spawn(async move {
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
        }))
    }
}
