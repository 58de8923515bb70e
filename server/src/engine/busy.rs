//! Operators ringing anywhere (rule D10): an operator in several orgs holds
//! at most one open offer in all of them, like the database's unique index
//! says. Each org's dispatcher claims an operator here before ringing them;
//! the lock is a plain mutex, never held across an await.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct BusyOperators {
    /// Operator → the org whose offer they hold.
    ringing: Mutex<HashMap<String, String>>,
}

impl BusyOperators {
    /// Marks the operator as ringing for `org_id`; false when another org's
    /// offer already holds them.
    pub fn claim(&self, operator_id: &str, org_id: &str) -> bool {
        let mut ringing = self.ringing.lock().expect("busy lock");
        match ringing.get(operator_id) {
            Some(org) => org == org_id,
            None => {
                ringing.insert(operator_id.to_string(), org_id.to_string());
                true
            }
        }
    }

    pub fn release(&self, operator_id: &str, org_id: &str) {
        let mut ringing = self.ringing.lock().expect("busy lock");
        if ringing.get(operator_id).is_some_and(|org| org == org_id) {
            ringing.remove(operator_id);
        }
    }

    pub fn held_elsewhere(&self, operator_id: &str, org_id: &str) -> bool {
        self.ringing.lock().expect("busy lock").get(operator_id).is_some_and(|org| org != org_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d10_an_operator_ringing_in_one_org_is_busy_for_every_org() {
        let busy = BusyOperators::default();
        assert!(busy.claim("dana", "org-a"));
        assert!(busy.claim("dana", "org-a"), "claiming again for the same org is fine");
        assert!(!busy.claim("dana", "org-b"));
        assert!(busy.held_elsewhere("dana", "org-b"));
        busy.release("dana", "org-b");
        assert!(busy.held_elsewhere("dana", "org-b"), "only the holding org releases");
        busy.release("dana", "org-a");
        assert!(busy.claim("dana", "org-b"));
    }
}
