//! `/ws?watch=mine`: the org's changes that concern the sessions this
//! person is a party to — their client's sessions, the session they
//! operate — so the client screen and a non-admin's session detail stay
//! live without seeing anyone else's sessions. (Admins use `watch=org`.)

use crate::state::AppState;
use domain::events::OrgEvent;
use domain::models::SessionRecord;
use std::collections::HashMap;

/// Sessions remembered per socket before the memory starts afresh.
const REMEMBERED: usize = 4_096;

/// Which sessions the person is a party to, learnt as events name them.
pub(super) struct Parties {
    user_id: String,
    org_id: String,
    known: HashMap<String, bool>,
}

impl Parties {
    pub(super) fn new(user_id: &str, org_id: &str) -> Parties {
        Parties { user_id: user_id.to_string(), org_id: org_id.to_string(), known: HashMap::new() }
    }

    fn of(&self, record: &SessionRecord) -> bool {
        let me = Some(self.user_id.as_str());
        record.client_id.as_deref() == me || record.operator_id.as_deref() == me
    }

    fn remember(&mut self, session_id: &str, party: bool) {
        if self.known.len() >= REMEMBERED {
            self.known.clear();
        }
        self.known.insert(session_id.to_string(), party);
    }

    /// `fresh`: the operator may have changed (a lifecycle move), so the
    /// record is read again.
    async fn is_party(&mut self, state: &AppState, session_id: &str, fresh: bool) -> bool {
        if !fresh {
            if let Some(known) = self.known.get(session_id) {
                return *known;
            }
        }
        let party = match state.sessions.session(&self.org_id, session_id).await {
            Ok(Some(record)) => self.of(&record),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "session lookup for a party watch failed");
                false
            }
        };
        self.remember(session_id, party);
        party
    }

    /// Whether `event` concerns one of the person's sessions.
    pub(super) async fn concerns(&mut self, state: &AppState, event: &OrgEvent) -> bool {
        match event {
            OrgEvent::Telemetry { session } => {
                let party = self.of(session);
                self.remember(&session.id, party);
                party
            }
            OrgEvent::Lifecycle { session_id, .. } => self.is_party(state, session_id, true).await,
            OrgEvent::Chat { session_id, .. } | OrgEvent::PlannedEnd { session_id, .. } => self.is_party(state, session_id, false).await,
            OrgEvent::Audit { entry } => match &entry.session_id {
                Some(session_id) => self.is_party(state, session_id, false).await,
                None => false,
            },
            OrgEvent::Presence { .. } | OrgEvent::RobotStatus { .. } | OrgEvent::Bookings { .. } | OrgEvent::Relay { .. } => false,
        }
    }
}
