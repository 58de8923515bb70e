//! What an instance remembers for a while and then forgets: owners that
//! refused an input batch (`engine::forward`), sessions finished here
//! (`relay::recording`), other instances' relay reports (`relay`). An
//! entry is as old as its last `note`; past the while it is gone, and is
//! dropped the next time the map is used.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub struct Recent<K, V = ()> {
    lasts: Duration,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V> Recent<K, V> {
    /// Remembers each entry for `lasts` from its last note.
    pub fn new(lasts: Duration) -> Self {
        Recent { lasts, entries: Mutex::default() }
    }

    /// Remembers `key` with `value` from now, in place of what it had.
    pub fn note(&self, key: K, value: V) {
        self.young().insert(key, (Instant::now(), value));
    }

    /// Whether `key` was noted within the while.
    pub fn contains<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.young().contains_key(key)
    }

    /// Everything noted within the while, copied out.
    pub fn entries(&self) -> Vec<(K, V)>
    where
        K: Clone,
        V: Clone,
    {
        self.young().iter().map(|(key, (_, value))| (key.clone(), value.clone())).collect()
    }

    /// Drops what is older than the while.
    pub fn forget_old(&self) {
        drop(self.young());
    }

    /// The keys last noted before `at` (and within the while) whose value
    /// `keep` takes.
    pub fn noted_before(&self, at: Instant, keep: impl Fn(&V) -> bool) -> Vec<K>
    where
        K: Clone,
    {
        self.young().iter().filter(|(_, (noted, value))| *noted < at && keep(value)).map(|(key, _)| key.clone()).collect()
    }

    /// Forgets `key` unless it was noted at `since` or after; whether it
    /// was forgotten (false too when it was not there).
    pub fn forget_unless_noted_since<Q: Eq + Hash + ?Sized>(&self, key: &Q, since: Instant) -> bool
    where
        K: Borrow<Q>,
    {
        let mut entries = self.young();
        match entries.get(key) {
            Some((noted, _)) if *noted < since => {
                entries.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Makes every entry older by `by` (tests of what the while does).
    #[cfg(test)]
    pub fn age(&self, by: Duration) {
        for (at, _) in self.entries.lock().expect("recent lock").values_mut() {
            *at -= by;
        }
    }

    /// The map without its old entries, locked.
    fn young(&self) -> MutexGuard<'_, HashMap<K, (Instant, V)>> {
        let mut entries = self.entries.lock().expect("recent lock");
        entries.retain(|_, (at, _)| at.elapsed() < self.lasts);
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;
    use std::time::Duration;

    #[test]
    fn an_entry_lasts_the_while_from_its_last_note() {
        let recent: Recent<String, u32> = Recent::new(Duration::from_secs(60));
        recent.note("a".into(), 1);
        recent.note("b".into(), 2);
        assert!(recent.contains("a"));
        recent.age(Duration::from_secs(30));
        recent.note("a".into(), 3);
        recent.age(Duration::from_secs(31));
        assert!(recent.contains("a"), "noted again 31 s ago");
        assert!(!recent.contains("b"), "noted 61 s ago");
        assert_eq!(recent.entries(), vec![("a".to_string(), 3)]);
    }

    /// What `relay` asks about: the entries not noted since a moment, and
    /// forgetting one unless it was noted again after it.
    #[test]
    fn an_entry_not_noted_since_a_moment_is_found_and_forgotten_unless_noted_again() {
        let recent: Recent<String, u32> = Recent::new(Duration::from_secs(60));
        recent.note("quiet".into(), 1);
        recent.note("talking".into(), 2);
        recent.age(Duration::from_secs(2));
        let asked_at = std::time::Instant::now();
        assert!(recent.noted_before(asked_at, |_| true).len() == 2);
        assert_eq!(recent.noted_before(asked_at, |value| *value == 1), vec!["quiet".to_string()], "as kept");
        assert!(recent.noted_before(asked_at - Duration::from_secs(3), |_| true).is_empty(), "both noted since");
        recent.note("talking".into(), 3);
        assert!(!recent.forget_unless_noted_since("talking", asked_at), "noted again since it was asked about");
        assert!(recent.forget_unless_noted_since("quiet", asked_at));
        assert!(!recent.forget_unless_noted_since("quiet", asked_at), "gone already");
        assert_eq!(recent.entries(), vec![("talking".to_string(), 3)]);
    }
}
