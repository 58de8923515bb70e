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
}
