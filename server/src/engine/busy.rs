//! Operators ringing anywhere (rule D10): an operator in several orgs holds
//! at most one open offer in all of them, like the database's unique index
//! says. Each org's dispatcher claims an operator here before ringing them;
//! the lock is a plain mutex, never held across an await.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

#[derive(Default)]
struct State {
    /// Operator → the org whose offer they hold.
    ringing: HashMap<String, String>,
    /// Operator → orgs that passed them over as busy: told when they free up.
    waiting: HashMap<String, HashSet<String>>,
}

#[derive(Default)]
pub struct BusyOperators {
    state: Mutex<State>,
}

impl BusyOperators {
    /// Marks the operator as ringing for `org_id`; false when another org's
    /// offer already holds them.
    pub fn claim(&self, operator_id: &str, org_id: &str) -> bool {
        let mut state = self.state.lock().expect("busy lock");
        match state.ringing.get(operator_id) {
            Some(org) => org == org_id,
            None => {
                state.ringing.insert(operator_id.to_string(), org_id.to_string());
                true
            }
        }
    }

    /// Frees the operator; returns the orgs that found them busy meanwhile,
    /// so their queues are looked at again.
    pub fn release(&self, operator_id: &str, org_id: &str) -> Vec<String> {
        let mut state = self.state.lock().expect("busy lock");
        if state.ringing.get(operator_id).is_some_and(|org| org == org_id) {
            state.ringing.remove(operator_id);
            return state.waiting.remove(operator_id).map(|orgs| orgs.into_iter().collect()).unwrap_or_default();
        }
        Vec::new()
    }

    /// Whether another org's offer holds the operator (that org is noted,
    /// to be told when they free up).
    pub fn held_elsewhere(&self, operator_id: &str, org_id: &str) -> bool {
        let mut state = self.state.lock().expect("busy lock");
        let elsewhere = state.ringing.get(operator_id).is_some_and(|org| org != org_id);
        if elsewhere {
            state.waiting.entry(operator_id.to_string()).or_default().insert(org_id.to_string());
        }
        elsewhere
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
        assert!(busy.release("dana", "org-b").is_empty());
        assert!(busy.held_elsewhere("dana", "org-b"), "only the holding org releases");
        assert_eq!(busy.release("dana", "org-a"), vec!["org-b".to_string()], "org-b is told dana is free");
        assert!(busy.claim("dana", "org-b"));
    }
}
