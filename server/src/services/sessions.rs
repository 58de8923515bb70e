//! Session records and edge-agent telemetry: read and written here, and
//! published on the org's topic (the wallboard's cards and safety feed).

use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::store::{SharedStore, StoreResult, Telemetry, TelemetryOutcome};
use app::events::{AuditEntry, Event, OrgEvent, Topic};
use app::models::SessionRecord;

pub struct SessionService {
    store: SharedStore,
    bus: SharedBus,
}

impl SessionService {
    pub fn new(store: SharedStore, bus: SharedBus) -> SessionService {
        SessionService { store, bus }
    }

    /// `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        self.store.backend_name()
    }

    /// A database round trip, for /healthz.
    pub async fn ping(&self) -> StoreResult<()> {
        self.store.ping().await
    }

    /// A session of this org; another org's is `None`.
    pub async fn session(&self, org_id: &str, session_id: &str) -> StoreResult<Option<SessionRecord>> {
        match self.store.session(org_id, session_id).await? {
            Some(row) => Ok(Some(row.record()?)),
            None => Ok(None),
        }
    }

    /// Applies telemetry (PROTECTIVE_STOP latched) and publishes it; entering
    /// PROTECTIVE_STOP is an audit record on the safety feed.
    pub async fn telemetry(&self, org_id: &str, session_id: &str, telemetry: Telemetry) -> StoreResult<TelemetryOutcome> {
        let now = now_ms();
        let outcome = self.store.apply_telemetry(org_id, session_id, telemetry, now).await?;
        if let TelemetryOutcome::Applied { row, entered_protective_stop } = &outcome {
            let session = row.clone().record()?;
            if *entered_protective_stop {
                tracing::warn!(session = %session_id, robot = %session.robot, "PROTECTIVE_STOP latched");
                let entry = AuditEntry {
                    at_ms: now,
                    actor_kind: "robot".into(),
                    actor_id: Some(session.robot.clone()),
                    action: "protective_stop".into(),
                    session_id: Some(session_id.to_string()),
                    robot_id: Some(session.robot.clone()),
                    detail: Some("entered PROTECTIVE_STOP".into()),
                };
                self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
            }
            self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Telemetry { session }));
        }
        Ok(outcome)
    }

    /// An operator pressed E-stop on a session: an audit record (rule O04,
    /// the overview's "E-stops · 24h", and the wallboard's safety feed).
    /// The cockpit's button calls this (issue "Session lifecycle").
    pub async fn record_operator_estop(&self, org_id: &str, operator_id: &str, session: &SessionRecord) -> StoreResult<()> {
        let entry = AuditEntry {
            at_ms: now_ms(),
            actor_kind: "user".into(),
            actor_id: Some(operator_id.to_string()),
            action: app::board::OPERATOR_ESTOP.into(),
            session_id: Some(session.id.clone()),
            robot_id: Some(session.robot.clone()),
            detail: Some("operator E-stop".into()),
        };
        self.store.record_audit(org_id, &entry).await?;
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
        Ok(())
    }
}
