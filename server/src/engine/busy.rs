//! Operators ringing anywhere (rule D10): an operator in several orgs holds
//! at most one open offer in all of them, like the database's unique index
//! says. Each org's dispatcher claims an operator here before ringing them;
//! the lock is a plain mutex, never held across an await.
//!
//! In cluster mode another org's desk may run on another instance: each
//! claim and release made here is told to the others (`crate::cluster`),
//! and theirs are held here as claims from elsewhere. NATS is at most
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
    /// Operator → the org elsewhere whose offer they hold, and until when
    /// that claim stands without news.
    elsewhere: HashMap<String, (String, Instant)>,
    /// Operator → orgs that passed them over as busy: told when they free up.
    waiting: HashMap<String, HashSet<String>>,
}

impl State {
    /// The org whose offer holds the operator, here or (not lapsed) elsewhere.
    fn holder(&self, operator_id: &str, now: Instant) -> Option<&str> {
        self.ringing
            .get(operator_id)
            .map(|(org, _)| org.as_str())
            .or_else(|| self.elsewhere.get(operator_id).filter(|(_, until)| *until > now).map(|(org, _)| org.as_str()))
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
            Some(_) if state.ringing.contains_key(operator_id) => true,
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

    /// Frees the operator; returns the orgs that found them busy meanwhile,
    /// so their queues are looked at again.
    pub fn release(&self, operator_id: &str, org_id: &str) -> Vec<String> {
        let mut state = self.state.lock().expect("busy lock");
        if state.ringing.get(operator_id).is_some_and(|(org, _)| org == org_id) {
            let (_, told) = state.ringing.remove(operator_id).expect("checked");
            let waiting = state.freed(operator_id, Instant::now());
            drop(state);
            if told {
                self.tell(BusyNews::Free { operator_id: operator_id.to_string(), org_id: org_id.to_string() });
            }
            return waiting;
        }
        Vec::new()
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

    /// Another instance's claim or release; the orgs to look at their
    /// queues again (the operator is free).
    pub fn heard(&self, news: BusyNews) -> Vec<String> {
        let Some(others) = self.others.get() else { return Vec::new() };
        let mut state = self.state.lock().expect("busy lock");
        let now = Instant::now();
        match news {
            BusyNews::Ringing { operator_id, org_id } => {
                state.elsewhere.insert(operator_id, (org_id, now + others.hold));
                Vec::new()
            }
            BusyNews::Free { operator_id, org_id } => {
                if state.elsewhere.get(&operator_id).is_some_and(|(org, _)| *org == org_id) {
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
            state.elsewhere.insert(operator_id.to_string(), (org_id.to_string(), until));
        }
    }

    /// Forgets claims from elsewhere that stood their time without news;
    /// the orgs waiting for those operators.
    pub fn lapse(&self) -> Vec<String> {
        let mut state = self.state.lock().expect("busy lock");
        let now = Instant::now();
        let lapsed: Vec<String> = state.elsewhere.iter().filter(|(_, (_, until))| *until <= now).map(|(id, _)| id.clone()).collect();
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
        assert!(busy.release("dana", "org-b").is_empty());
        assert!(busy.held_elsewhere("dana", "org-b"), "only the holding org releases");
        assert_eq!(busy.release("dana", "org-a"), vec!["org-b".to_string()], "org-b is told dana is free");
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
        assert!(busy.heard(ringing("org-a")).is_empty());
        assert!(!busy.claim("dana", "org-b", true));
        assert!(busy.held_elsewhere("dana", "org-b"));
        assert!(busy.heard(free("org-x")).is_empty(), "another org's release frees nothing");
        assert_eq!(busy.heard(free("org-a")), vec!["org-b".to_string()], "org-b is told dana is free");

        // Ours are told; org-a moving here takes its own claim over.
        assert!(busy.claim("dana", "org-b", true));
        assert!(busy.release("dana", "org-b").is_empty());
        assert_eq!(*told.0.lock().unwrap(), vec![ringing("org-b"), free("org-b")]);
        busy.heard(ringing("org-a"));
        assert!(busy.claim("dana", "org-a", true), "the org that held her elsewhere now dispatches here");

        // Someone in one org only: nothing to tell.
        busy.release("dana", "org-a");
        told.0.lock().unwrap().clear();
        assert!(busy.claim("erin", "org-a", false));
        busy.release("erin", "org-a");
        assert!(told.0.lock().unwrap().is_empty(), "nobody else can ring her");
        busy.claim("dana", "org-a", true);

        // A release never heard: the claim lapses after `hold`.
        busy.release("dana", "org-a");
        busy.heard(ringing("org-a"));
        assert!(busy.held_elsewhere("dana", "org-b"));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(busy.lapse(), vec!["org-b".to_string()]);
        assert!(!busy.held_elsewhere("dana", "org-b"));
    }
}
