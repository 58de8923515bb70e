//! Operators ringing anywhere (rule D10): an operator in several orgs holds
//! at most one open offer in all of them, like the database's unique index
//! says. Each org's dispatcher claims an operator here before ringing them;
//! the lock is a plain mutex, never held across an await.
//!
//! In cluster mode another org's desk may run on another instance: a claim
//! of someone in several orgs is told to the others at once, its release
//! once the offer's close is committed (`crate::cluster`), and theirs are
//! held here as claims from elsewhere. NATS is at most
//! once, so a claim from elsewhere lapses by itself once its offer must
//! have ended (`hold`); a claim never heard is found in the database when
//! the desk loads (`Desk::load`), and meanwhile the offers index refuses
//! the second offer's batch, which reloads it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A claim or release made here, for the other instances.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BusyNews {
    /// `org_id`'s desk rings the operator.
    Ringing { operator_id: String, org_id: String },
    /// `org_id`'s desk no longer does.
    Free { operator_id: String, org_id: String },
}

/// How claims made here reach the other instances.
pub trait TellBusy: Send + Sync {
    fn tell(&self, news: &BusyNews);
}

#[derive(Default)]
struct State {
    /// Operator → the org here whose offer they hold, and whether that
    /// was told to the other instances.
    ringing: HashMap<String, (String, bool)>,
    /// Operator → the org elsewhere whose offer they hold, until when that
    /// claim stands without news, and the instance that told it (empty
    /// when read from the database).
    elsewhere: HashMap<String, (String, Instant, String)>,
    /// Operator → orgs that passed them over as busy: told when they free up.
    waiting: HashMap<String, HashSet<String>>,
}

impl State {
    /// The org whose offer holds the operator, here or (not lapsed) elsewhere.
    fn holder(&self, operator_id: &str, now: Instant) -> Option<&str> {
        self.ringing
            .get(operator_id)
            .map(|(org, _)| org.as_str())
            .or_else(|| self.elsewhere.get(operator_id).filter(|(_, until, _)| *until > now).map(|(org, _, _)| org.as_str()))
    }

    /// The orgs waiting for the operator, if nothing holds them any more.
    fn freed(&mut self, operator_id: &str, now: Instant) -> Vec<String> {
        if self.holder(operator_id, now).is_some() {
            return Vec::new();
        }
        self.waiting.remove(operator_id).map(|orgs| orgs.into_iter().collect()).unwrap_or_default()
    }
}

/// Cluster mode: the other instances, and how long their claims stand.
struct Others {
    tell: Arc<dyn TellBusy>,
    hold: Duration,
}

#[derive(Default)]
pub struct BusyOperators {
    state: Mutex<State>,
    others: OnceLock<Others>,
}

impl BusyOperators {
    /// Marks the operator as ringing for `org_id`; false when another org's
    /// offer already holds them (here or elsewhere). `tell`: the other
    /// instances are told (cluster mode; people in one org only are
    /// never rung by another org, so nobody needs telling).
    pub fn claim(&self, operator_id: &str, org_id: &str, tell: bool) -> bool {
        let mut state = self.state.lock().expect("busy lock");
        match state.holder(operator_id, Instant::now()) {
            Some(org) if org != org_id => false,
            Some(_) if state.ringing.contains_key(operator_id) => {
                // Claimed untold, and now they are in another org too.
                let upgraded = tell && state.ringing.get_mut(operator_id).is_some_and(|(_, told)| !std::mem::replace(told, true));
                drop(state);
                if upgraded {
                    self.tell(BusyNews::Ringing { operator_id: operator_id.to_string(), org_id: org_id.to_string() });
                }
                true
            }
            // Free, or held elsewhere by this very org (it moved here).
            _ => {
                state.elsewhere.remove(operator_id);
                state.ringing.insert(operator_id.to_string(), (org_id.to_string(), tell));
                drop(state);
                if tell {
                    self.tell(BusyNews::Ringing { operator_id: operator_id.to_string(), org_id: org_id.to_string() });
                }
                true
            }
        }
    }

    /// An offer the database holds open (a desk loading): claimed for
    /// `org_id` whatever a claim from elsewhere said (that one is stale).
    pub fn claim_loaded(&self, operator_id: &str, org_id: &str, tell: bool) {
        self.state.lock().expect("busy lock").elsewhere.remove(operator_id);
        self.claim(operator_id, org_id, tell);
    }

    /// Frees the operator; returns the orgs that found them busy meanwhile
    /// (so their queues are looked at again) and whether the other
    /// instances must be told (`free`, once the offer's close is committed:
    /// told before, they could ring the operator into the index's refusal).
    pub fn release(&self, operator_id: &str, org_id: &str) -> (Vec<String>, bool) {
        let mut state = self.state.lock().expect("busy lock");
        if state.ringing.get(operator_id).is_some_and(|(org, _)| org == org_id) {
            let (_, told) = state.ringing.remove(operator_id).expect("checked");
            return (state.freed(operator_id, Instant::now()), told);
        }
        (Vec::new(), false)
    }

    /// Tells the other instances that the org's committed close freed the operator.
    pub fn free(&self, operator_id: &str, org_id: &str) {
        self.tell(BusyNews::Free { operator_id: operator_id.to_string(), org_id: org_id.to_string() });
    }

    /// Whether another org's offer holds the operator (that org is noted,
    /// to be told when they free up).
    pub fn held_elsewhere(&self, operator_id: &str, org_id: &str) -> bool {
        let mut state = self.state.lock().expect("busy lock");
        let elsewhere = state.holder(operator_id, Instant::now()).is_some_and(|org| org != org_id);
        if elsewhere {
            state.waiting.entry(operator_id.to_string()).or_default().insert(org_id.to_string());
        }
        elsewhere
    }

    /// Cluster mode: claims made here are told through `tell`, and those
    /// told from elsewhere stand for `hold` without news.
    pub fn reach_others(&self, tell: Arc<dyn TellBusy>, hold: Duration) {
        let _ = self.others.set(Others { tell, hold });
    }

    /// Whether claims come from other instances too.
    pub fn clustered(&self) -> bool {
        self.others.get().is_some()
    }

    /// Another instance's (`from`) claim or release; the orgs to look at
    /// their queues again (the operator is free). A release frees only the
    /// claim that instance told (or one read from the database): after a
    /// failover the old owner's late release must not free the new one's.
    pub fn heard(&self, from: &str, news: BusyNews) -> Vec<String> {
        let Some(others) = self.others.get() else { return Vec::new() };
        let mut state = self.state.lock().expect("busy lock");
        let now = Instant::now();
        match news {
            BusyNews::Ringing { operator_id, org_id } => {
                state.elsewhere.insert(operator_id, (org_id, now + others.hold, from.to_string()));
                Vec::new()
            }
            BusyNews::Free { operator_id, org_id } => {
                if state.elsewhere.get(&operator_id).is_some_and(|(org, _, by)| *org == org_id && (by == from || by.is_empty())) {
                    state.elsewhere.remove(&operator_id);
                }
                state.freed(&operator_id, now)
            }
        }
    }

    /// An open offer of another org found in the database (a desk loading):
    /// held until it expires, unless this instance rings the operator.
    pub fn held_by(&self, operator_id: &str, org_id: &str, for_ms: i64) {
        if !self.clustered() || for_ms <= 0 {
            return;
        }
        let mut state = self.state.lock().expect("busy lock");
        if !state.ringing.contains_key(operator_id) {
            let until = Instant::now() + Duration::from_millis(for_ms as u64);
            state.elsewhere.insert(operator_id.to_string(), (org_id.to_string(), until, String::new()));
        }
    }

    /// Forgets claims from elsewhere that stood their time without news;
    /// the orgs waiting for those operators.
    pub fn lapse(&self) -> Vec<String> {
        let mut state = self.state.lock().expect("busy lock");
        let now = Instant::now();
        let lapsed: Vec<String> = state.elsewhere.iter().filter(|(_, (_, until, _))| *until <= now).map(|(id, _)| id.clone()).collect();
        let mut orgs = Vec::new();
        for operator_id in lapsed {
            state.elsewhere.remove(&operator_id);
            orgs.extend(state.freed(&operator_id, now));
        }
        orgs
    }

    fn tell(&self, news: BusyNews) {
        if let Some(others) = self.others.get() {
            others.tell.tell(&news);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d10_an_operator_ringing_in_one_org_is_busy_for_every_org() {
        let busy = BusyOperators::default();
        assert!(busy.claim("dana", "org-a", true));
        assert!(busy.claim("dana", "org-a", true), "claiming again for the same org is fine");
        assert!(!busy.claim("dana", "org-b", true));
        assert!(busy.held_elsewhere("dana", "org-b"));
        assert!(busy.release("dana", "org-b").0.is_empty());
        assert!(busy.held_elsewhere("dana", "org-b"), "only the holding org releases");
        assert_eq!(busy.release("dana", "org-a").0, vec!["org-b".to_string()], "org-b is told dana is free");
        assert!(busy.claim("dana", "org-b", true));
    }

    #[derive(Default)]
    struct Told(Mutex<Vec<BusyNews>>);

    impl TellBusy for Told {
        fn tell(&self, news: &BusyNews) {
            self.0.lock().unwrap().push(news.clone());
        }
    }

    #[test]
    fn d10_claims_from_another_instance_hold_until_freed_or_lapsed_and_ours_are_told() {
        let (busy, told) = (BusyOperators::default(), Arc::new(Told::default()));
        busy.reach_others(told.clone(), Duration::from_millis(30));
        let ringing = |org: &str| BusyNews::Ringing { operator_id: "dana".into(), org_id: org.into() };
        let free = |org: &str| BusyNews::Free { operator_id: "dana".into(), org_id: org.into() };

        // Rung by org-a on another instance: busy for org-b here.
        assert!(busy.heard("i1", ringing("org-a")).is_empty());
        assert!(!busy.claim("dana", "org-b", true));
        assert!(busy.held_elsewhere("dana", "org-b"));
        assert!(busy.heard("i1", free("org-x")).is_empty(), "another org's release frees nothing");
        assert_eq!(busy.heard("i1", free("org-a")), vec!["org-b".to_string()], "org-b is told dana is free");

        // Ours are told: the claim at once, the release once its close is
        // committed (`free`, which the desk calls then).
        assert!(busy.claim("dana", "org-b", true));
        assert_eq!(busy.release("dana", "org-b"), (Vec::new(), true));
        assert_eq!(*told.0.lock().unwrap(), vec![ringing("org-b")]);
        busy.free("dana", "org-b");
        assert_eq!(*told.0.lock().unwrap(), vec![ringing("org-b"), free("org-b")]);
        busy.heard("i1", ringing("org-a"));
        assert!(busy.claim("dana", "org-a", true), "the org that held her elsewhere now dispatches here");
        busy.release("dana", "org-a");

        // After a failover, the old owner's late release does not free the
        // new owner's claim.
        busy.heard("i2", ringing("org-a"));
        assert!(busy.heard("i1", free("org-a")).is_empty());
        assert!(busy.held_elsewhere("dana", "org-b"), "still rung by org-a on i2");
        assert_eq!(busy.heard("i2", free("org-a")), vec!["org-b".to_string()]);

        // Someone in one org only: nothing to tell, until they join another.
        told.0.lock().unwrap().clear();
        assert!(busy.claim("erin", "org-a", false));
        assert_eq!(busy.release("erin", "org-a"), (Vec::new(), false), "nobody else can ring her");
        assert!(busy.claim("erin", "org-a", false));
        assert!(busy.claim("erin", "org-a", true), "now in another org too");
        assert_eq!(*told.0.lock().unwrap(), vec![BusyNews::Ringing { operator_id: "erin".into(), org_id: "org-a".into() }]);
        assert!(busy.release("erin", "org-a").1, "the upgraded claim's release is told");

        // A release never heard: the claim lapses after `hold`.
        busy.heard("i1", ringing("org-a"));
        assert!(busy.held_elsewhere("dana", "org-b"));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(busy.lapse(), vec!["org-b".to_string()]);
        assert!(!busy.held_elsewhere("dana", "org-b"));
    }
}
