//! The open sockets of each person, so that a sign-out closes them at once
//! and one person cannot open sockets without limit.
//!
//! A socket holds a `TabPass` while it is open; dropping it (the socket
//! ended) frees the place. Sign-out wakes every socket of that sign-in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Sockets one person may hold open: an admin page holds two (its console
/// and its watch socket), so this is eight open pages.
pub const TABS_PER_PERSON: usize = 16;

#[derive(Default)]
pub struct OpenTabs {
    by_person: Mutex<HashMap<String, Vec<OpenTab>>>,
    next_id: AtomicU64,
}

struct OpenTab {
    id: u64,
    /// SHA-256 of the sign-in's token.
    sign_in: String,
    ended: Arc<Notify>,
}

/// The person already has `TABS_PER_PERSON` sockets open.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyTabs;

/// One open socket's place; frees it when dropped.
pub struct TabPass {
    id: u64,
    person: String,
    tabs: Arc<OpenTabs>,
    ended: Arc<Notify>,
}

impl TabPass {
    /// Resolves when the sign-in behind the socket has ended.
    pub async fn sign_in_ended(&self) {
        self.ended.notified().await;
    }
}

impl Drop for TabPass {
    fn drop(&mut self) {
        let mut by_person = self.tabs.by_person.lock().expect("tabs lock");
        if let Some(open) = by_person.get_mut(&self.person) {
            open.retain(|t| t.id != self.id);
            if open.is_empty() {
                by_person.remove(&self.person);
            }
        }
    }
}

impl OpenTabs {
    pub fn new() -> Arc<OpenTabs> {
        Arc::default()
    }

    /// A place for one more socket of `person`, signed in as `sign_in` (token hash).
    pub fn open(self: &Arc<Self>, person: &str, sign_in: &str) -> Result<TabPass, TooManyTabs> {
        let mut by_person = self.by_person.lock().expect("tabs lock");
        let open = by_person.entry(person.to_string()).or_default();
        if open.len() >= TABS_PER_PERSON {
            return Err(TooManyTabs);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ended = Arc::new(Notify::new());
        open.push(OpenTab { id, sign_in: sign_in.to_string(), ended: ended.clone() });
        Ok(TabPass { id, person: person.to_string(), tabs: self.clone(), ended })
    }

    /// Ends every socket opened with this sign-in (its token hash).
    pub fn sign_in_ended(&self, sign_in: &str) -> usize {
        let by_person = self.by_person.lock().expect("tabs lock");
        let mut ended = 0;
        for tab in by_person.values().flatten().filter(|t| t.sign_in == sign_in) {
            // A stored permit: the socket sees it even if not waiting yet.
            tab.ended.notify_one();
            ended += 1;
        }
        ended
    }

    /// Sockets open for `person`.
    pub fn count(&self, person: &str) -> usize {
        self.by_person.lock().expect("tabs lock").get(person).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_person_holds_at_most_the_cap_and_a_closed_tab_frees_its_place() {
        let tabs = OpenTabs::new();
        let passes: Vec<_> = (0..TABS_PER_PERSON).map(|_| tabs.open("u1", "s1").unwrap()).collect();
        assert_eq!(tabs.open("u1", "s1").err(), Some(TooManyTabs));
        assert!(tabs.open("u2", "s2").is_ok(), "another person is not affected");
        drop(passes.into_iter().next());
        assert!(tabs.open("u1", "s1").is_ok());
    }

    #[tokio::test]
    async fn ending_a_sign_in_wakes_its_sockets_only() {
        let tabs = OpenTabs::new();
        let (a, b, other) = (tabs.open("u1", "s1").unwrap(), tabs.open("u1", "s1").unwrap(), tabs.open("u1", "s9").unwrap());
        assert_eq!(tabs.sign_in_ended("s1"), 2);
        a.sign_in_ended().await;
        b.sign_in_ended().await;
        let waited = tokio::time::timeout(std::time::Duration::from_millis(20), other.sign_in_ended()).await;
        assert!(waited.is_err(), "another sign-in of the same person stays open");
        drop((a, b));
        assert_eq!(tabs.count("u1"), 1);
    }
}
