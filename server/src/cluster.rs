//! What instances tell each other besides the events on topics (cluster
//! mode): revocations. A sign-out, a password change, a removal or a role
//! change, a token rotation or a retirement made on one instance ends the
//! affected sockets and forgets the cached robot token on every other one
//! (`services::tabs::Revocation`), over one NATS subject. NATS core
//! delivers at most once: a socket whose revocation was lost still fails
//! its next check against the store (a console re-reads its sign-in at
//! most every 10 s, on a command; every request reads it).

use crate::bus::nats::NatsBus;
use crate::services::tabs::{Revocation, TellOthers};
use crate::services::{OpenTabs, RobotRegistry};
use futures::StreamExt;
use std::sync::Arc;

/// The subject every instance's revocations travel on (in the cluster's namespace).
pub const REVOCATIONS: &str = "revocations";

/// Revocations made here, sent to the other instances.
pub struct Revocations {
    bus: Arc<NatsBus>,
}

impl TellOthers for Revocations {
    fn tell(&self, revocation: &Revocation) {
        match serde_json::to_vec(revocation) {
            Ok(payload) => self.bus.send(&self.bus.cluster_subject(REVOCATIONS), payload),
            Err(e) => tracing::error!(error = %e, "a revocation could not be written"),
        }
    }
}

/// Joins the cluster's revocations: those made here go out, those made
/// elsewhere are applied here. Returns the listening task.
pub async fn join(bus: Arc<NatsBus>, tabs: Arc<OpenTabs>, robots: Arc<RobotRegistry>) -> Result<tokio::task::JoinHandle<()>, async_nats::SubscribeError> {
    let mut heard = bus.client().subscribe(bus.cluster_subject(REVOCATIONS)).await?;
    tabs.reach_others(Arc::new(Revocations { bus: bus.clone() }));
    let me = bus.publisher().to_string();
    Ok(tokio::spawn(async move {
        while let Some(message) = heard.next().await {
            let from = message.headers.as_ref().and_then(|h| h.get(crate::bus::nats::PUBLISHER)).map(|v| v.as_str().to_string());
            if from.as_deref() == Some(me.as_str()) {
                continue;
            }
            match serde_json::from_slice::<Revocation>(&message.payload) {
                Ok(Revocation::RobotToken { org_id, robot_id }) => robots.revoked_elsewhere(&org_id, &robot_id),
                Ok(revocation) => {
                    tabs.revoked_elsewhere(&revocation);
                }
                Err(e) => tracing::warn!(error = %e, "a revocation from another instance could not be read"),
            }
        }
    }))
}
