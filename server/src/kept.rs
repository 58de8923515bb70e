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

pub struct Kept<K, V = ()> {
    kept: Duration,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V> Kept<K, V> {
    /// Remembers each entry for `kept` from its last note.
    pub fn new(kept: Duration) -> Self {
        Kept { kept, entries: Mutex::default() }
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
        for (at, _) in self.entries.lock().expect("kept lock").values_mut() {
            *at -= by;
        }
    }

    /// The map without its old entries, locked.
    fn young(&self) -> MutexGuard<'_, HashMap<K, (Instant, V)>> {
        let mut entries = self.entries.lock().expect("kept lock");
        entries.retain(|_, (at, _)| at.elapsed() < self.kept);
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;
    use std::time::Duration;

    #[test]
    fn an_entry_lasts_the_while_from_its_last_note() {
        let kept: Kept<String, u32> = Kept::new(Duration::from_secs(60));
        kept.note("a".into(), 1);
        kept.note("b".into(), 2);
        assert!(kept.contains("a"));
        kept.age(Duration::from_secs(30));
        kept.note("a".into(), 3);
        kept.age(Duration::from_secs(31));
        assert!(kept.contains("a"), "noted again 31 s ago");
        assert!(!kept.contains("b"), "noted 61 s ago");
        assert_eq!(kept.entries(), vec![("a".to_string(), 3)]);
    }
}
