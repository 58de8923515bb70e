//! Session records and edge-agent telemetry: read and written here, and
//! published on the org's topic (the wallboard's cards and safety feed).

use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::store::{SafetyChange, SharedStore, StoreResult, Telemetry, TelemetryOutcome};
use domain::chat::ChatMessage;
use domain::events::{ActorKind, AuditAction, AuditEntry, Event, OperatorEvent, OrgEvent, Topic};
use domain::models::{SafetyState, SessionRecord};

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
                    actor_kind: ActorKind::Robot,
                    actor_id: Some(session.robot.clone()),
                    action: AuditAction::ProtectiveStop,
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

    /// E-stop from the cockpit (or an admin): the session latches in
    /// PROTECTIVE_STOP, written with its audit record (rule O04's "E-stops ·
    /// 24h", the wallboard's safety feed) and published. The edge agent
    /// learns of it from the answer to its next telemetry post (409
    /// `protective_stop_latched`) and from `GET /v1/sessions/{id}`.
    pub async fn operator_estop(&self, org_id: &str, user_id: &str, session: &SessionRecord) -> StoreResult<SafetyChange> {
        let entry = person_on_session(user_id, session, AuditAction::OperatorEstop, "operator E-stop");
        let change = self.store.change_safety(org_id, &session.id, None, SafetyState::ProtectiveStop, &entry).await?;
        self.publish_change(org_id, &change, entry)?;
        Ok(change)
    }

    /// Clears a latched PROTECTIVE_STOP (rule W11: only from the session
    /// detail, by an admin or the attached operator, with a reason): the
    /// session goes to SAFE, and the robot re-arms by telemetry.
    pub async fn clear_protective_stop(&self, org_id: &str, user_id: &str, session: &SessionRecord, reason: &str) -> StoreResult<SafetyChange> {
        let entry = person_on_session(user_id, session, AuditAction::ProtectiveStopCleared, reason);
        let change = self.store.change_safety(org_id, &session.id, Some(SafetyState::ProtectiveStop), SafetyState::Safe, &entry).await?;
        self.publish_change(org_id, &change, entry)?;
        Ok(change)
    }

    /// A chat message on a session that has not ended (rule L09), by
    /// someone the caller has checked may see it. Published to the org's
    /// screens and to the attached operator's consoles.
    pub async fn post_chat(&self, org_id: &str, author_id: &str, author_name: &str, session: &SessionRecord, body: &str) -> StoreResult<ChatMessage> {
        let at_ms = now_ms();
        let role = if session.operator_id.as_deref() == Some(author_id) {
            "operator"
        } else if session.client_id.as_deref() == Some(author_id) {
            "client"
        } else {
            "admin"
        };
        self.store.add_chat(org_id, &session.id, author_id, role, at_ms, body).await?;
        let message = ChatMessage { at_ms, author_id: author_id.to_string(), author_name: author_name.to_string(), body: body.to_string() };
        let session_id = session.id.clone();
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Chat { session_id: session_id.clone(), message: message.clone() }));
        if let Some(operator_id) = &session.operator_id {
            self.bus.publish(Topic::operator(org_id, operator_id), Event::Operator(OperatorEvent::Chat { session_id, message: message.clone() }));
        }
        Ok(message)
    }

    /// Records a rating of the session's operator; false if the session
    /// was rated already (one rating per session).
    #[allow(clippy::too_many_arguments)]
    pub async fn rate(&self, org_id: &str, session_id: &str, operator_id: &str, stars: u8, feedback: &str, rated_by: &str, at_ms: i64) -> StoreResult<bool> {
        self.store.rate(org_id, session_id, operator_id, stars, feedback, rated_by, at_ms).await
    }

    /// The session's chat, oldest first.
    pub async fn chat(&self, org_id: &str, session_id: &str) -> StoreResult<Vec<ChatMessage>> {
        Ok(self.store.chat(org_id, session_id).await?.into_iter().map(ChatMessage::from).collect())
    }

    fn publish_change(&self, org_id: &str, change: &SafetyChange, entry: AuditEntry) -> StoreResult<()> {
        if let SafetyChange::Applied(row) = change {
            let session = row.clone().record()?;
            self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
            self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Telemetry { session }));
        }
        Ok(())
    }
}

/// The audit record of a person's `action` on a session, now.
fn person_on_session(user_id: &str, session: &SessionRecord, action: AuditAction, detail: &str) -> AuditEntry {
    AuditEntry {
        at_ms: now_ms(),
        actor_kind: ActorKind::User,
        actor_id: Some(user_id.to_string()),
        action,
        session_id: Some(session.id.clone()),
        robot_id: Some(session.robot.clone()),
        detail: Some(detail.to_string()),
    }
}
