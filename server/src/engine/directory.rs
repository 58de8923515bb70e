//! Directory changes reaching the desk (issue: directory administration):
//! an operator's profile or the org's link floors changed, effective for
//! the next dispatch decision without a restart.

use super::desk::Desk;
use crate::store::OperatorRecord;
use domain::dispatch::LinkFloors;
use domain::models::PresenceState;
use std::sync::Arc;

impl Desk {
    /// New certifications, region, name or activity of an operator. One
    /// made inactive stops being offered calls; a call they are on goes on.
    pub fn update_operator(&mut self, record: OperatorRecord, now: i64) {
        let id = record.user_id.clone();
        self.load_operator(record);
        self.sign_off_if_inactive(&id, now);
    }

    /// The operator left the org (or their profile went): as inactive.
    pub fn drop_operator(&mut self, operator_id: &str, now: i64) {
        let Some(op) = self.operators.get_mut(operator_id) else { return };
        op.inactive = true;
        self.reindex(operator_id);
        self.sign_off_if_inactive(operator_id, now);
    }

    fn sign_off_if_inactive(&mut self, operator_id: &str, now: i64) {
        let signed_on = self
            .operators
            .get(operator_id)
            .is_some_and(|op| op.inactive && !matches!(op.presence.state, PresenceState::Offline | PresenceState::OnCall));
        if signed_on {
            let _ = self.offline(operator_id, now);
        }
    }

    /// The org's floors changed: every ready operator's reach is re-ranked.
    pub fn set_floors(&mut self, floors: LinkFloors) {
        self.floors = Arc::new(floors);
        let ids: Vec<String> = self.operators.keys().cloned().collect();
        for id in ids {
            self.reindex(&id);
        }
        self.dirty = true;
    }
}
