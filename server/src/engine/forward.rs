//! Requests for an org this instance does not dispatch go to the instance
//! that does, over NATS request/reply (cluster mode). The owner listens on
//! the org's subject only while it holds the org's lease, in a queue group
//! so that exactly one instance runs a request even while a stale owner
//! has not yet noticed its takeover; its answer (sent after its commit) is
//! relayed unchanged. Nobody listening (an org between owners) is
//! `DispatchedElsewhere`: 503 with Retry-After, as on one instance.

use super::request::{Answer, Refusal, Request};
use super::types::EngineError;
use super::Shared;
use futures::StreamExt;
use std::time::Duration;

/// A forwarded request not answered within this is told "unavailable"
/// (the owner's own commit waits at most a few seconds for the database).
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
const QUEUE_GROUP: &str = "dispatcher";

/// The way to the other instances' dispatchers.
#[derive(Clone)]
pub struct Forwarding {
    client: async_nats::Client,
    /// `clutchcall.<cluster>.engine`: an org's subject is this, `.<org>`.
    prefix: String,
}

impl Forwarding {
    /// Over the cluster bus's connection, in its namespace.
    pub fn new(bus: &crate::bus::nats::NatsBus) -> Forwarding {
        Forwarding { client: bus.client().clone(), prefix: bus.cluster_subject("engine") }
    }

    /// The org's engine subject.
    fn subject(&self, org_id: &str) -> String {
        format!("{}.{}", self.prefix, crate::bus::nats::token(org_id))
    }

    /// Asks the org's owner to run `request`; its answer, or why none came.
    pub(super) async fn forward(&self, org_id: &str, request: &Request) -> Result<Answer, EngineError> {
        let payload = serde_json::to_vec(request).map_err(|e| {
            tracing::error!(error = %e, "a request could not be written for forwarding");
            EngineError::Unavailable
        })?;
        let asked = tokio::time::timeout(ANSWER_WITHIN, self.client.request(self.subject(org_id), payload.into())).await;
        let message = match asked {
            Ok(Ok(message)) => message,
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => return Err(EngineError::DispatchedElsewhere),
            Ok(Err(e)) => {
                tracing::warn!(org = %org_id, error = %e, "a forwarded request got no answer");
                return Err(EngineError::Unavailable);
            }
            Err(_) => {
                tracing::warn!(org = %org_id, "a forwarded request was not answered in time");
                return Err(EngineError::Unavailable);
            }
        };
        match serde_json::from_slice::<Result<Answer, Refusal>>(&message.payload) {
            Ok(answer) => answer.map_err(EngineError::from),
            Err(e) => {
                tracing::error!(org = %org_id, error = %e, "a forwarded answer could not be read");
                Err(EngineError::Unavailable)
            }
        }
    }

    /// Runs the org's forwarded requests on this instance's dispatcher
    /// until the returned task is aborted (when the lease ends). Listening
    /// has begun when this returns; `None` when NATS refused it.
    pub(super) async fn listen(&self, shared: Shared, org_id: String) -> Option<tokio::task::JoinHandle<()>> {
        let client = self.client.clone();
        let mut requests = match client.queue_subscribe(self.subject(&org_id), QUEUE_GROUP.to_string()).await {
            Ok(requests) => requests,
            Err(e) => {
                tracing::error!(org = %org_id, error = %e, "cannot listen for requests forwarded by other instances");
                return None;
            }
        };
        Some(tokio::spawn(async move {
            while let Some(message) = requests.next().await {
                let (Some(reply_to), Some(desk)) = (message.reply.clone(), shared.desk_of(&org_id)) else { continue };
                let (shared, client, org_id) = (shared.clone(), client.clone(), org_id.clone());
                // Each on its own task: requests wait for their batch together.
                tokio::spawn(async move {
                    let answer = match serde_json::from_slice::<Request>(&message.payload) {
                        Ok(request) => shared.run(&desk, &org_id, request).await.map_err(Refusal::from),
                        Err(e) => {
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
