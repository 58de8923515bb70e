//! Every long-lived socket (a console, a watch tab, either side of the
//! relay), event stream and dataset download holds a `TabPass` tied to the
//! credential that opened it: a person's sign-in in one org, a robot's
//! bearer token or an org's API key. When that
//! credential ends (sign-out, password change, expiry, token rotation,
//! retirement) or the person's access in the org changes (removal, a new
//! role), every socket it opened is told at once and closes: one
//! mechanism for every socket kind (issue "Hardening II", findings 2–3).
//!
//! The passes also cap how many sockets one holder keeps open; dropping a
//! pass (the socket ended) frees its place. In cluster mode the cap holds
//! across the instances (`services::places`).

use super::places::{CapReached, Place, SharedPlaces};
use domain::models::Role;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::time::Instant;

/// Sockets one person may hold open by default (`Config::tabs_per_person`):
/// an admin page holds two (its console and its watch socket) and a cockpit
/// one more, so this is several pages.
pub const TABS_PER_PERSON: usize = 16;
/// Relay sockets one robot token may hold open (a reconnecting agent's old
/// socket may linger a moment beside its new one).
pub const SOCKETS_PER_ROBOT: usize = 4;
/// Event streams one API key may hold open.
pub const STREAMS_PER_KEY: usize = 8;

/// What a socket was opened with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Credential {
    /// A person's sign-in (SHA-256 of its token), acting in `org_id` with `role`.
    SignIn { person: String, sign_in: String, org_id: String, role: Role },
    /// A robot's bearer token (SHA-256).
    Robot { org_id: String, robot_id: String, token: String },
    /// An org API key (SHA-256), streaming `/v1/events`.
    ApiKey { org_id: String, key_id: String, token: String },
}

impl Credential {
    /// Whose sockets count together against the cap.
    fn holder(&self) -> String {
        match self {
            Credential::SignIn { person, .. } => format!("person:{person}"),
            Credential::Robot { org_id, robot_id, .. } => format!("robot:{org_id}/{robot_id}"),
            Credential::ApiKey { org_id, key_id, .. } => format!("key:{org_id}/{key_id}"),
        }
    }

    fn cap(&self, per_person: usize) -> usize {
        match self {
            Credential::SignIn { .. } => per_person,
            Credential::Robot { .. } => SOCKETS_PER_ROBOT,
            Credential::ApiKey { .. } => STREAMS_PER_KEY,
        }
    }

    /// The token hash (sign-in or robot) the credential stands on.
    fn secret(&self) -> &str {
        match self {
            Credential::SignIn { sign_in, .. } => sign_in,
            Credential::Robot { token, .. } | Credential::ApiKey { token, .. } => token,
        }
    }
}

/// Why a socket's credential no longer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Signed out, password changed, expired, token rotated or retired:
    /// the credential itself is gone.
    CredentialEnded,
    /// The person's membership of the org changed (removed, new role): a
    /// new socket is judged on the access they have now.
    AccessChanged,
}

pub struct OpenTabs {
    by_holder: Mutex<HashMap<String, Vec<OpenTab>>>,
    /// Sockets one person may hold open.
    per_person: usize,
    next_id: AtomicU64,
    /// The other instances (cluster mode): each revocation made here is
    /// applied there too (`crate::cluster`). Unset on a single instance.
    others: std::sync::OnceLock<Arc<dyn TellOthers>>,
    /// The places every instance counts (cluster mode). Unset on a single
    /// instance, where this registry's own count is the cap.
    places: std::sync::OnceLock<Arc<SharedPlaces>>,
}

/// A revocation every instance applies to its own sockets and caches.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Revocation {
    /// A sign-in or robot token (its hash) ended.
    CredentialEnded { secret: String },
    /// A person's membership of an org changed.
    AccessChanged { org_id: String, person: String },
    /// A sign-in (its hash) now acts in `org_id`: its sockets in any other
    /// org no longer speak for it.
    SignInMoved { secret: String, org_id: String },
    /// A robot's token was rotated or the robot retired: caches forget it
    /// (`secret`: the ended token's hash, as the store held it; absent
    /// from an instance of the build before).
    RobotToken {
        org_id: String,
        robot_id: String,
        #[serde(default)]
        secret: Option<String>,
    },
    /// A robot's model, site, PoP or reqCert was edited: caches forget
    /// its record (its token still holds), and consoles measure `pop`.
    /// (Not a revocation, but it must reach every instance as they do, and
    /// a lost one is noticed as theirs are.)
    RobotChanged { org_id: String, robot_id: String, pop: String },
}

/// How revocations made here reach the other instances.
pub trait TellOthers: Send + Sync {
    fn tell(&self, revocation: &Revocation);
}

struct OpenTab {
    id: u64,
    credential: Credential,
    ended: watch::Sender<Option<Ended>>,
}

/// The holder already has as many sockets open as allowed.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyTabs;

/// One open socket's place; frees it when dropped.
pub struct TabPass {
    id: u64,
    holder: String,
    tabs: Arc<OpenTabs>,
    ended: watch::Receiver<Option<Ended>>,
    /// When the credential expires by itself (a sign-in's end).
    expires: Option<Instant>,
    /// Its place across the cluster (cluster mode), freed with the pass.
    _place: Option<Place>,
}

impl TabPass {
    /// The credential still holds as far as this instance has been told:
    /// not revoked, not expired (no database read).
    pub fn holds(&self) -> bool {
        self.ended.borrow().is_none() && self.expires.is_none_or(|at| Instant::now() < at)
    }

    /// Resolves when the credential behind the socket has ended or the
    /// holder's access changed; pending forever otherwise. It borrows
    /// nothing, so a socket can keep one waiting for its whole life.
    pub fn ended(&self) -> impl std::future::Future<Output = Ended> + Send + 'static {
        let mut ended = self.ended.clone();
        let expires = self.expires;
        async move {
            let revoked = async move {
                match ended.wait_for(Option::is_some).await {
                    Ok(why) => why.expect("waited for Some"),
                    // The registry went away with the server: nothing holds.
                    Err(_) => Ended::CredentialEnded,
                }
            };
            match expires {
                Some(at) => tokio::select! {
                    why = revoked => why,
                    () = tokio::time::sleep_until(at) => Ended::CredentialEnded,
                },
                None => revoked.await,
            }
        }
    }
}

impl Drop for TabPass {
    fn drop(&mut self) {
        let mut by_holder = self.tabs.by_holder.lock().expect("tabs lock");
        if let Some(open) = by_holder.get_mut(&self.holder) {
            open.retain(|t| t.id != self.id);
            if open.is_empty() {
                by_holder.remove(&self.holder);
            }
        }
    }
}

impl OpenTabs {
    pub fn new() -> Arc<OpenTabs> {
        OpenTabs::with_cap(TABS_PER_PERSON)
    }

    /// Open tabs where one person may hold `per_person` sockets.
    pub fn with_cap(per_person: usize) -> Arc<OpenTabs> {
        Arc::new(OpenTabs { by_holder: Mutex::default(), per_person, next_id: AtomicU64::new(0), others: std::sync::OnceLock::new(), places: std::sync::OnceLock::new() })
    }

    /// Cluster mode: caps count every instance's sockets, kept in `places`.
    pub fn share_places(&self, places: Arc<SharedPlaces>) {
        let _ = self.places.set(places);
    }

    /// A place for one more socket opened with `credential`, which ends by
    /// itself at `expires` (if it does): first on this instance, then (in
    /// cluster mode) across the cluster.
    pub async fn open(self: &Arc<Self>, credential: Credential, expires: Option<Instant>) -> Result<TabPass, TooManyTabs> {
        let (holder, cap) = (credential.holder(), credential.cap(self.per_person));
        let mut pass = {
            let mut by_holder = self.by_holder.lock().expect("tabs lock");
            let open = by_holder.entry(holder.clone()).or_default();
            if open.len() >= cap {
                return Err(TooManyTabs);
            }
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (ended, watching) = watch::channel(None);
            open.push(OpenTab { id, credential, ended });
            TabPass { id, holder, tabs: self.clone(), ended: watching, expires, _place: None }
        };
        if let Some(places) = self.places.get() {
            // Refused: dropping the pass frees its place here.
            pass._place = places.take(&pass.holder, cap).await.map_err(|CapReached| TooManyTabs)?;
        }
        Ok(pass)
    }

    /// Ends every socket opened with this sign-in or robot token (its
    /// hash), here and on every other instance: sign-out, a password
    /// change, token rotation, retirement. Returns how many were open here.
    pub fn credential_ended(&self, secret: &str) -> usize {
        self.revoke(Revocation::CredentialEnded { secret: secret.to_string() })
    }

    /// Ends every socket `person` opened in `org_id`, here and on every
    /// other instance: their membership changed (removed, or a new role),
    /// so what they may hear did too.
    pub fn access_changed(&self, org_id: &str, person: &str) -> usize {
        self.revoke(Revocation::AccessChanged { org_id: org_id.to_string(), person: person.to_string() })
    }

    /// The sign-in `secret` switched to `org_id`: its sockets elsewhere close.
    pub fn sign_in_moved(&self, secret: &str, org_id: &str) -> usize {
        self.revoke(Revocation::SignInMoved { secret: secret.to_string(), org_id: org_id.to_string() })
    }

    /// A revocation made here: told to the other instances, applied here.
    fn revoke(&self, revocation: Revocation) -> usize {
        self.tell_others(&revocation);
        self.revoked_elsewhere(&revocation)
    }

    /// A revocation applied to the sockets here (one another instance
    /// made, or one made here; robot tokens are the registry's:
    /// `RobotRegistry::revoked_elsewhere`).
    pub fn revoked_elsewhere(&self, revocation: &Revocation) -> usize {
        match revocation {
            Revocation::CredentialEnded { secret } => self.end(|c| c.secret() == secret, Ended::CredentialEnded),
            Revocation::AccessChanged { org_id, person } => {
                self.end(|c| matches!(c, Credential::SignIn { person: p, org_id: o, .. } if p == person && o == org_id), Ended::AccessChanged)
            }
            Revocation::SignInMoved { secret, org_id } => {
                self.end(|c| matches!(c, Credential::SignIn { sign_in, org_id: o, .. } if sign_in == secret && o != org_id), Ended::AccessChanged)
            }
            Revocation::RobotToken { .. } | Revocation::RobotChanged { .. } => 0,
        }
    }

    /// Sends a revocation made here to the other instances (if any).
    pub fn tell_others(&self, revocation: &Revocation) {
        if let Some(others) = self.others.get() {
            others.tell(revocation);
        }
    }

    /// Cluster mode: revocations made here reach the other instances through `others`.
    pub fn reach_others(&self, others: Arc<dyn TellOthers>) {
        let _ = self.others.set(others);
    }

    /// Every credential a socket here was opened with, once each: what
    /// `crate::cluster::reconcile` checks against the store after
    /// revocations from other instances may have been lost.
    /// With them, a mark: the sockets opened before it (`end_here`).
    pub fn credentials(&self) -> (Vec<Credential>, u64) {
        let by_holder = self.by_holder.lock().expect("tabs lock");
        let opened_before = self.next_id.load(Ordering::Relaxed);
        let unique: HashSet<&Credential> = by_holder.values().flatten().map(|t| &t.credential).collect();
        (unique.into_iter().cloned().collect(), opened_before)
    }

    /// Ends the sockets here opened with exactly `credential` before the
    /// mark `opened_before` (it no longer held when the store was read; a
    /// socket opened since was judged on a newer read); told to nobody else.
    /// Returns how many it ended (not those already ended).
    pub fn end_here(&self, credential: &Credential, why: Ended, opened_before: u64) -> usize {
        let by_holder = self.by_holder.lock().expect("tabs lock");
        let mut ended = 0;
        for tab in by_holder.get(&credential.holder()).into_iter().flatten() {
            if tab.id < opened_before && tab.credential == *credential && tab.ended.borrow().is_none() {
                tab.ended.send_replace(Some(why));
                ended += 1;
            }
        }
        ended
    }

    fn end(&self, which: impl Fn(&Credential) -> bool, why: Ended) -> usize {
        let by_holder = self.by_holder.lock().expect("tabs lock");
        let mut ended = 0;
        for tab in by_holder.values().flatten().filter(|t| which(&t.credential)) {
            tab.ended.send_replace(Some(why));
            ended += 1;
        }
        ended
    }

    /// Sockets open for a person.
    pub fn count(&self, person: &str) -> usize {
        self.by_holder.lock().expect("tabs lock").get(&format!("person:{person}")).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sign_in(person: &str, sign_in: &str, org: &str) -> Credential {
        Credential::SignIn { person: person.into(), sign_in: sign_in.into(), org_id: org.into(), role: Role::Operator }
    }

    async fn still_open(pass: &TabPass) -> bool {
        tokio::time::timeout(Duration::from_millis(20), pass.ended()).await.is_err()
    }

    #[tokio::test]
    async fn a_person_holds_at_most_the_cap_and_a_closed_tab_frees_its_place() {
        let tabs = OpenTabs::new();
        let mut passes = Vec::new();
        for _ in 0..TABS_PER_PERSON {
            passes.push(tabs.open(sign_in("u1", "s1", "o1"), None).await.unwrap());
        }
        assert_eq!(tabs.open(sign_in("u1", "s1", "o1"), None).await.err(), Some(TooManyTabs));
        assert!(tabs.open(sign_in("u2", "s2", "o1"), None).await.is_ok(), "another person is not affected");
        drop(passes.into_iter().next());
        assert!(tabs.open(sign_in("u1", "s1", "o1"), None).await.is_ok());
    }

    #[tokio::test]
    async fn ending_a_sign_in_wakes_its_sockets_only() {
        let tabs = OpenTabs::new();
        let (a, b, other) = (tabs.open(sign_in("u1", "s1", "o1"), None).await.unwrap(), tabs.open(sign_in("u1", "s1", "o1"), None).await.unwrap(), tabs.open(sign_in("u1", "s9", "o1"), None).await.unwrap());
        assert_eq!(tabs.credential_ended("s1"), 2);
        assert_eq!(a.ended().await, Ended::CredentialEnded);
        assert_eq!(b.ended().await, Ended::CredentialEnded, "every socket of the sign-in, and each as often as asked");
        assert!(still_open(&other).await, "another sign-in of the same person stays open");
        drop((a, b));
        assert_eq!(tabs.count("u1"), 1);
    }

    #[tokio::test]
    async fn a_changed_membership_ends_that_org_only_and_a_robot_token_its_sockets() {
        let tabs = OpenTabs::new();
        let (here, elsewhere) = (tabs.open(sign_in("u1", "s1", "o1"), None).await.unwrap(), tabs.open(sign_in("u1", "s2", "o2"), None).await.unwrap());
        let robot = tabs.open(Credential::Robot { org_id: "o1".into(), robot_id: "r1".into(), token: "t1".into() }, None).await.unwrap();
        assert_eq!(tabs.access_changed("o1", "u1"), 1);
        assert_eq!(here.ended().await, Ended::AccessChanged);
        assert!(still_open(&elsewhere).await);
        assert!(still_open(&robot).await, "a person's change never touches a robot");
        assert_eq!(tabs.credential_ended("t1"), 1);
        assert_eq!(robot.ended().await, Ended::CredentialEnded);
    }

    #[tokio::test]
    async fn each_credential_is_listed_once_and_ending_one_here_ends_only_its_sockets() {
        let tabs = OpenTabs::new();
        let (a, b) = (tabs.open(sign_in("u1", "s1", "o1"), None).await.unwrap(), tabs.open(sign_in("u1", "s1", "o1"), None).await.unwrap());
        let admin = Credential::SignIn { person: "u1".into(), sign_in: "s1".into(), org_id: "o1".into(), role: Role::Admin };
        let other_role = tabs.open(admin.clone(), None).await.unwrap();
        let (mut listed, mark) = tabs.credentials();
        listed.sort_by_key(|c| format!("{c:?}"));
        assert_eq!(listed, vec![admin.clone(), sign_in("u1", "s1", "o1")], "two sockets of one credential are one entry");
        let newer = tabs.open(admin.clone(), None).await.unwrap();
        assert_eq!(tabs.end_here(&admin, Ended::AccessChanged, mark), 1);
        assert_eq!(other_role.ended().await, Ended::AccessChanged);
        assert_eq!(tabs.end_here(&admin, Ended::CredentialEnded, mark), 0, "a socket already ended is not ended (or counted) again");
        assert_eq!(other_role.ended().await, Ended::AccessChanged, "and keeps the first reason");
        assert!(still_open(&a).await && still_open(&b).await, "the same sign-in opened with another role stays");
        assert!(still_open(&newer).await, "a socket opened after the mark was judged on a newer read");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_ends_when_its_credential_expires() {
        let tabs = OpenTabs::new();
        let pass = tabs.open(sign_in("u1", "s1", "o1"), Some(Instant::now() + Duration::from_secs(60))).await.unwrap();
        assert_eq!(pass.ended().await, Ended::CredentialEnded);
    }
}
