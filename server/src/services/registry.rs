//! The fleet registry: robots by token (in memory, so authenticating an
//! edge agent costs no database read), heartbeats, and registry status
//! changes published on the org's topic (`robot offline` when heartbeats stop).

use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::services::heartbeats::Heartbeats;
use crate::services::tabs::Revocation;
use crate::services::OpenTabs;
use crate::store::{NewRobot, RobotChange, RobotFields, RobotRecord, SharedStore, StoreError, StoreResult};
use domain::events::{Event, OrgEvent, Topic};
use domain::models::RegistryStatus;
use domain::rules::{registry_status, ROBOT_HEARTBEAT_TIMEOUT_MS};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc;

/// Why a directory change of a robot was refused.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("robot not found")]
    NotFound,
    #[error("the robot is in session {0}: end it first")]
    LiveSession(String),
    #[error("{0}")]
    Invalid(String),
    #[error("robot {0} already exists")]
    Exists(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<RobotChange> for DirectoryError {
    fn from(change: RobotChange) -> Self {
        match change {
            RobotChange::LiveSession(session_id) => DirectoryError::LiveSession(session_id),
            RobotChange::NotFound | RobotChange::Done(..) => DirectoryError::NotFound,
        }
    }
}

#[derive(Default)]
struct Robots {
    by_token: HashMap<String, RobotRecord>,
    /// (org, robot id) → token hash.
    by_id: HashMap<(String, String), String>,
    /// Org → the PoPs of its robots (what every console tab measures).
    pops: HashMap<String, BTreeSet<String>>,
    /// Counts changes to what is cached that a store read begun before
    /// them must not undo: token revocations (rotations, retirements),
    /// edits (here or elsewhere) and reconciles.
    /// A store lookup remembers what it read only if no revocation came
    /// between its read and its remembering: otherwise the row it read may
    /// hold a token already revoked (finding 10), whether or not that robot
    /// was in memory when it was revoked.
    epoch: u64,
    /// The epoch of each robot's last change here (forgotten, edited)
    /// since the last reconcile began: its read, begun before the change,
    /// leaves that robot alone, and only that one (under a steady churn of
    /// other robots' changes, a check of the whole epoch would skip every
    /// refresh). Reconciles run one at a time (one task), so a change
    /// older than a reconcile's read can hold back no later one: each
    /// drops them as it begins (`forget_changes_before`).
    changed: HashMap<(String, String), u64>,
}

impl Robots {
    /// Forgets what is cached of the robot (its token and record): the
    /// next lookup reads the store, and a read begun before this is not
    /// remembered.
    fn forget_robot(&mut self, org_id: &str, robot_id: &str) -> Option<RobotRecord> {
        let key = (org_id.to_string(), robot_id.to_string());
        self.change(key.clone());
        let hash = self.by_id.remove(&key)?;
        self.by_token.remove(&hash)
    }

    /// The robot changes here: the epoch moves, and the robot's change is
    /// dated by it.
    fn change(&mut self, key: (String, String)) {
        self.epoch += 1;
        self.changed.insert(key, self.epoch);
    }

    /// Forgets a token by its hash.
    fn forget_token(&mut self, hash: &str) {
        let Some(robot) = self.by_token.remove(hash) else {
            self.epoch += 1;
            return;
        };
        let key = (robot.org_id, robot.id);
        self.change(key.clone());
        if self.by_id.get(&key).is_some_and(|h| h == hash) {
            self.by_id.remove(&key);
        }
    }

    /// Remembers a robot read from the store at `epoch`, unless a token
    /// was revoked since (the read may be stale) or the robot has another
    /// token cached; false then.
    fn remember_read_at(&mut self, epoch: u64, robot: RobotRecord, token_hash: String) -> bool {
        if self.epoch != epoch {
            return false;
        }
        self.remember(robot, token_hash)
    }

    fn remember_all(&mut self, read: Vec<(RobotRecord, String)>) {
        for (robot, token_hash) in read {
            self.remember(robot, token_hash);
        }
    }

    /// Consoles of the org measure their RTT to `pop` (a robot is reached there).
    fn measure_pop(&mut self, org_id: &str, pop: &str) {
        self.pops.entry(org_id.to_string()).or_default().insert(pop.to_string());
    }

    /// A robot of the org was edited (here or on another instance), now
    /// reached through `pop`: a lookup that read its row before the edit
    /// must not remember it after this.
    fn edited(&mut self, org_id: &str, robot_id: &str, pop: &str) {
        self.change((org_id.to_string(), robot_id.to_string()));
        self.measure_pop(org_id, pop);
    }

    /// Brings the cached records of robots read from the store at `epoch`
    /// up to date with the read (an edit on another instance whose message
    /// was lost). Only records `cached_before` the read are judged (one a
    /// lookup remembered since may be newer than it), and none of a robot
    /// forgotten or edited here since (the read may be older than the
    /// cache then: the next reconcile does it).
    fn refresh_read_at(&mut self, epoch: u64, cached_before: &HashSet<String>, read: Vec<(RobotRecord, String)>) {
        for (robot, token_hash) in read {
            if !self.changed.is_empty() && self.changed.get(&(robot.org_id.clone(), robot.id.clone())).is_some_and(|at| *at > epoch) {
                continue;
            }
            self.measure_pop(&robot.org_id, &robot.pop);
            if !cached_before.contains(&token_hash) {
                continue;
            }
            let Some(cached) = self.by_token.get_mut(&token_hash) else { continue };
            if !cached.same_directory_fields(&robot) {
                tracing::warn!(robot = %robot.id, "a robot edited on another instance was cached here as it was (the edit's message was lost): brought up to date");
                *cached = RobotRecord { last_heartbeat_at: cached.last_heartbeat_at, ..robot };
            }
        }
    }

    /// Drops the changes dated at or before `epoch`, a reconcile's read
    /// beginning: only changes after it can hold its refresh back.
    fn forget_changes_before(&mut self, epoch: u64) {
        self.changed.retain(|_, at| *at > epoch);
    }

    /// Remembers the robot's token, unless another token of the robot is
    /// cached: the store holds one, so one of the two was read before a
    /// rotation (made elsewhere, its revocation not heard here yet, or
    /// lost). Which one cannot be told here, so neither is kept, and the
    /// next lookup of either reads the store; false then. (Kept, the old
    /// token went on working here until the revocation came, and that,
    /// naming only the robot, then forgot the new one instead.)
    fn remember(&mut self, robot: RobotRecord, token_hash: String) -> bool {
        let key = (robot.org_id.clone(), robot.id.clone());
        if let Some(cached) = self.by_id.get(&key).filter(|cached| **cached != token_hash).cloned() {
            self.forget_token(&cached);
            return false;
        }
        self.measure_pop(&robot.org_id, &robot.pop);
        self.by_id.insert(key, token_hash.clone());
        self.by_token.insert(token_hash, robot);
        true
    }
}

pub struct RobotRegistry {
    store: SharedStore,
    bus: SharedBus,
    robots: RwLock<Robots>,
    /// Relay sockets end when their robot's token does.
    tabs: Arc<OpenTabs>,
    /// Heartbeat deadlines for the lapse task.
    lapses: mpsc::UnboundedSender<(i64, String, String)>,
    /// Where heartbeats are stored, in groups.
    heartbeats: Heartbeats,
}

impl RobotRegistry {
    /// Loads every robot; returns the registry and its lapse task.
    pub async fn load(store: SharedStore, bus: SharedBus, tabs: Arc<OpenTabs>) -> StoreResult<(Arc<RobotRegistry>, tokio::task::JoinHandle<()>)> {
        let mut robots = Robots::default();
        robots.remember_all(store.robots_with_token(None).await?);
        let (lapses, rx) = mpsc::unbounded_channel();
        let heartbeats = Heartbeats::start(store.clone());
        let registry = Arc::new(RobotRegistry { store, bus, robots: RwLock::new(robots), tabs, lapses, heartbeats });
        let task = tokio::spawn(lapse_heartbeats(Arc::downgrade(&registry), rx));
        Ok((registry, task))
    }

    /// Remembers every robot of an org written by another path (a browser
    /// test's copy of the demo): nobody holds their tokens yet, so none can
    /// have been revoked since they were read.
    pub async fn adopt_org(&self, org_id: &str) -> StoreResult<()> {
        let read = self.store.robots_with_token(Some(org_id)).await?;
        self.robots.write().expect("robots lock").remember_all(read);
        Ok(())
    }

    /// The robot a bearer token belongs to: from memory, else (a robot
    /// written by another path, e.g. a seed) from the store, then remembered.
    pub async fn by_token_hash(&self, token_hash: &str) -> StoreResult<Option<RobotRecord>> {
        // A revocation while the store was read may make the read stale:
        // read again (the store then has the revocation committed). Under a
        // storm of revocations the last read answers this request alone,
        // like a request that came just before them, and is not remembered.
        for attempt in 1..=3 {
            let epoch = {
                let robots = self.robots.read().expect("robots lock");
                if let Some(robot) = robots.by_token.get(token_hash) {
                    return Ok(Some(robot.clone()));
                }
                robots.epoch
            };
            let Some(robot) = self.store.robot_by_token_hash(token_hash).await? else { return Ok(None) };
            if self.robots.write().expect("robots lock").remember_read_at(epoch, robot.clone(), token_hash.to_string()) || attempt == 3 {
                return Ok(Some(robot));
            }
        }
        unreachable!("the third attempt answers")
    }

    /// A robot of this org; `None` for an unknown id or another org's robot.
    pub async fn robot(&self, org_id: &str, robot_id: &str) -> StoreResult<Option<RobotRecord>> {
        if let Some(robot) = self.cached(org_id, robot_id) {
            return Ok(Some(robot));
        }
        self.store.robot(org_id, robot_id).await
    }

    fn cached(&self, org_id: &str, robot_id: &str) -> Option<RobotRecord> {
        let robots = self.robots.read().expect("robots lock");
        let token = robots.by_id.get(&(org_id.to_string(), robot_id.to_string()))?;
        robots.by_token.get(token).cloned()
    }

    /// The PoPs of the org's robots, sorted: what consoles measure RTT to.
    pub fn pops(&self, org_id: &str) -> Vec<String> {
        let robots = self.robots.read().expect("robots lock");
        robots.pops.get(org_id).map(|pops| pops.iter().cloned().collect()).unwrap_or_default()
    }

    /// Whether a robot of the org is reached through `pop`.
    pub fn has_pop(&self, org_id: &str, pop: &str) -> bool {
        let robots = self.robots.read().expect("robots lock");
        robots.pops.get(org_id).is_some_and(|pops| pops.contains(pop))
    }

    /// An edge-agent heartbeat: stored, and `online` published when the
    /// robot was offline.
    pub async fn heartbeat(&self, robot: &RobotRecord) -> StoreResult<i64> {
        let now = now_ms();
        self.heartbeats.store(&robot.org_id, &robot.id, now).await?;
        let was = {
            let mut robots = self.robots.write().expect("robots lock");
            let token = robots.by_id.get(&(robot.org_id.clone(), robot.id.clone())).cloned();
            match token.and_then(|t| robots.by_token.get_mut(&t)) {
                Some(r) => {
                    let was = registry_status(r.last_heartbeat_at, now);
                    r.last_heartbeat_at = Some(now);
                    was
                }
                None => RegistryStatus::Offline,
            }
        };
        if was != RegistryStatus::Online {
            self.publish(&robot.org_id, &robot.id, RegistryStatus::Online, now);
        }
        let _ = self.lapses.send((now + ROBOT_HEARTBEAT_TIMEOUT_MS + 1, robot.org_id.clone(), robot.id.clone()));
        Ok(now)
    }

    /// The PoPs of the org's link-health table: where its robots may be reached.
    pub async fn link_pops(&self, org_id: &str) -> StoreResult<Vec<String>> {
        let floors = self.store.org_link_floors(org_id).await?;
        let pops: BTreeSet<String> = floors.into_iter().map(|f| f.pop).collect();
        Ok(pops.into_iter().collect())
    }

    /// Registers robot `id` for an admin (`POST /v1/robots` and the
    /// directory page): checked, audited, and its bearer token returned
    /// once with the derived skill.
    pub async fn enroll(&self, org_id: &str, id: &str, fields: domain::directory::RobotFields, actor: &str) -> Result<(String, String), DirectoryError> {
        let fields = fields.trimmed();
        let pops = self.link_pops(org_id).await?;
        if let Some(problem) = domain::directory::robot_fields_problem(id, &fields, &pops) {
            return Err(DirectoryError::Invalid(problem));
        }
        let skill = domain::directory::derived_skill(&fields.req_cert).map_err(|why| DirectoryError::Invalid(format!("reqCert {why}")))?;
        let token = crate::auth::new_token();
        let robot = NewRobot {
            id: id.to_string(),
            org_id: org_id.to_string(),
            model: fields.model.clone(),
            site: fields.site.clone(),
            pop: fields.pop.clone(),
            req_cert: fields.req_cert.clone(),
            token_hash: crate::auth::token_hash(&token),
        };
        if !self.register(robot).await? {
            return Err(DirectoryError::Exists(id.to_string()));
        }
        let detail = format!("{} at {} via {}, reqCert {}", fields.model, fields.site, fields.pop, fields.req_cert);
        let entry = domain::events::AuditEntry { robot_id: Some(id.to_string()), ..domain::events::AuditEntry::by_user(actor, domain::events::AuditAction::RobotRegistered, detail, now_ms()) };
        self.store.record_audit(org_id, &entry).await?;
        self.publish_audit(org_id, entry);
        Ok((skill, token))
    }

    /// Registers a robot; false when the id is taken.
    pub async fn register(&self, robot: NewRobot) -> StoreResult<bool> {
        if !self.store.insert_robot(&robot).await? {
            return Ok(false);
        }
        let record = RobotRecord {
            id: robot.id.clone(),
            org_id: robot.org_id.clone(),
            model: robot.model,
            site: robot.site,
            pop: robot.pop,
            req_cert: robot.req_cert,
            last_heartbeat_at: None,
            token_rotated_at: None,
        };
        self.robots.write().expect("robots lock").remember(record, robot.token_hash);
        Ok(true)
    }

    /// Edits a robot's model, site, PoP and reqCert (checked by the
    /// caller); the next call it raises is dispatched on the new values.
    pub async fn edit(&self, org_id: &str, robot_id: &str, fields: &RobotFields, actor: &str) -> Result<RobotRecord, DirectoryError> {
        match self.store.edit_robot(org_id, robot_id, fields, actor, now_ms()).await? {
            RobotChange::Done(robot, entry, _) => {
                let changed = Revocation::RobotChanged { org_id: org_id.to_string(), robot_id: robot_id.to_string(), pop: robot.pop.clone() };
                self.tabs.tell_others(&changed);
                let mut robots = self.robots.write().expect("robots lock");
                robots.edited(org_id, robot_id, &robot.pop);
                if let Some(hash) = robots.by_id.get(&(org_id.to_string(), robot_id.to_string())).cloned() {
                    let heartbeat = robots.by_token.get(&hash).and_then(|r| r.last_heartbeat_at);
                    robots.remember(RobotRecord { last_heartbeat_at: heartbeat, ..robot.clone() }, hash);
                }
                drop(robots);
                self.publish_audit(org_id, entry);
                Ok(robot)
            }
            other => Err(DirectoryError::from(other)),
        }
    }

    /// Retires a robot: refused while it has a live session; its token
    /// stops working at once and it leaves the fleet.
    pub async fn retire(&self, org_id: &str, robot_id: &str, actor: &str) -> Result<(), DirectoryError> {
        match self.store.retire_robot(org_id, robot_id, actor, now_ms()).await? {
            RobotChange::Done(_, entry, ended) => {
                self.tell_others_token_ended(org_id, robot_id, ended.clone());
                self.forget_here(org_id, robot_id);
                self.publish_audit(org_id, entry);
                // Its relay sockets close with it.
                if let Some(ended) = ended {
                    self.tabs.credential_ended(&ended);
                }
                Ok(())
            }
            other => Err(DirectoryError::from(other)),
        }
    }

    /// A new bearer token for the robot, returned once; the old one stops
    /// working at once.
    pub async fn rotate_token(&self, org_id: &str, robot_id: &str, actor: &str) -> Result<String, DirectoryError> {
        let token = crate::auth::new_token();
        let hash = crate::auth::token_hash(&token);
        match self.store.rotate_robot_token(org_id, robot_id, &hash, actor, now_ms()).await? {
            RobotChange::Done(robot, entry, ended) => {
                self.tell_others_token_ended(org_id, robot_id, ended.clone());
                {
                    let mut robots = self.robots.write().expect("robots lock");
                    let heartbeat = robots.forget_robot(org_id, robot_id).and_then(|r| r.last_heartbeat_at);
                    robots.remember(RobotRecord { last_heartbeat_at: heartbeat, ..robot }, hash);
                }
                self.publish_audit(org_id, entry);
                // Sockets opened with the old token close now.
                if let Some(ended) = ended {
                    self.tabs.credential_ended(&ended);
                }
                Ok(token)
            }
            other => Err(DirectoryError::from(other)),
        }
    }

    /// Tells the other instances the robot's token ended (`secret`: its
    /// hash, as the store held it), so their caches forget it.
    fn tell_others_token_ended(&self, org_id: &str, robot_id: &str, secret: Option<String>) {
        self.tabs.tell_others(&Revocation::RobotToken { org_id: org_id.to_string(), robot_id: robot_id.to_string(), secret });
    }

    /// Forgets the robot's cached token in this process; the hash it had.
    fn forget_here(&self, org_id: &str, robot_id: &str) -> Option<String> {
        let mut robots = self.robots.write().expect("robots lock");
        let old = robots.by_id.get(&(org_id.to_string(), robot_id.to_string())).cloned();
        robots.forget_robot(org_id, robot_id);
        old
    }

    /// Forgets every cached token the store no longer holds (revocations
    /// from other instances may have been lost) and closes the sockets
    /// opened with them here; brings cached records up to date with the
    /// store (edits on other instances may have been lost too). Returns
    /// how many tokens were forgotten, and every token the store holds.
    /// Only tokens cached before the store is read are judged: a token
    /// never comes back once revoked, so one missing from the read is
    /// revoked, while one cached later may be newer than the read.
    /// Reconciles must not overlap (one task runs them, `cluster.rs`): an
    /// older read refreshing after a newer one would write older rows.
    pub async fn reconcile(&self) -> StoreResult<(usize, HashSet<String>)> {
        let (cached, epoch): (HashSet<String>, u64) = {
            // A lookup that read the store before this and remembers after
            // it might bring back a token this read finds gone: the epoch
            // moves, so it remembers nothing (`remember_read_at`).
            let mut robots = self.robots.write().expect("robots lock");
            robots.epoch += 1;
            let epoch = robots.epoch;
            robots.forget_changes_before(epoch);
            (robots.by_token.keys().cloned().collect(), epoch)
        };
        // Every org's robots in one read (not one per org: a sweep runs
        // every minute on every instance).
        let read = self.store.robots_with_token(None).await?;
        let held: HashSet<String> = read.iter().map(|(_, hash)| hash.clone()).collect();
        let gone: Vec<String> = cached.iter().filter(|hash| !held.contains(*hash)).cloned().collect();
        {
            let mut robots = self.robots.write().expect("robots lock");
            robots.refresh_read_at(epoch, &cached, read);
            for hash in &gone {
                robots.forget_token(hash);
            }
        }
        for hash in &gone {
            tracing::warn!("a robot token revoked on another instance was still cached here (a revocation was lost): forgotten");
            self.tabs.revoked_elsewhere(&Revocation::CredentialEnded { secret: hash.clone() });
        }
        Ok((gone.len(), held))
    }

    /// Another instance rotated the robot's token or retired the robot:
    /// the token that ended (`secret`, its hash; from the build before,
    /// absent: whichever this one caches) is forgotten here (the next
    /// request reads the store), and sockets opened with it here close. A
    /// newer token cached here meanwhile stays.
    pub fn revoked_elsewhere(&self, org_id: &str, robot_id: &str, secret: Option<&str>) {
        let ended = match secret {
            Some(secret) => {
                self.robots.write().expect("robots lock").forget_token(secret);
                Some(secret.to_string())
            }
            None => self.forget_here(org_id, robot_id),
        };
        if let Some(ended) = ended {
            self.tabs.revoked_elsewhere(&Revocation::CredentialEnded { secret: ended });
        }
    }

    /// Another instance edited the robot: what is cached of it here is
    /// forgotten, so its next request reads the new record (its token
    /// still holds: its sockets stay), and this instance's consoles measure
    /// its PoP.
    pub fn changed_elsewhere(&self, org_id: &str, robot_id: &str, pop: &str) {
        let mut robots = self.robots.write().expect("robots lock");
        // (Forgetting dates the robot's change: its PoP is all that is left.)
        robots.forget_robot(org_id, robot_id);
        robots.measure_pop(org_id, pop);
    }

    fn publish_audit(&self, org_id: &str, entry: domain::events::AuditEntry) {
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
    }

    fn publish(&self, org_id: &str, robot_id: &str, status: RegistryStatus, at_ms: i64) {
        let event = OrgEvent::RobotStatus { robot_id: robot_id.to_string(), status, at_ms };
        self.bus.publish(Topic::org(org_id), Event::Org(event));
    }
}

/// Publishes `offline` for robots whose heartbeats stopped, from one
/// deadline queue (not a scan of the fleet).
async fn lapse_heartbeats(registry: std::sync::Weak<RobotRegistry>, mut rx: mpsc::UnboundedReceiver<(i64, String, String)>) {
    let mut due: BinaryHeap<Reverse<(i64, String, String)>> = BinaryHeap::new();
    loop {
        let next = due.peek().map(|Reverse((at, _, _))| *at);
        let wait = next.map(|at| std::time::Duration::from_millis((at - now_ms()).max(0) as u64));
        tokio::select! {
            got = rx.recv() => match got {
                Some(deadline) => due.push(Reverse(deadline)),
                None => return,
            },
            _ = async { tokio::time::sleep(wait.expect("guarded")).await }, if wait.is_some() => {
                let Some(Reverse((_, org_id, robot_id))) = due.pop() else { continue };
                let Some(registry) = registry.upgrade() else { return };
                // One at a time, for as long as the store takes: while it
                // is away, the deadlines wait (and are judged late), rather
                // than each taking a connection of its own.
                registry.judge_silence(&org_id, &robot_id).await;
            }
        }
    }
}

impl RobotRegistry {
    /// A heartbeat's deadline passed: `offline` is told if the robot has
    /// been silent since. The store decides, once however many instances
    /// saw its heartbeats: its last one may be a later one another
    /// instance heard (the agent reconnected there), and the instance that
    /// logs the silence tells it. A store that fails: this instance's view
    /// is told (not logged), unless a heartbeat came meanwhile.
    async fn judge_silence(&self, org_id: &str, robot_id: &str) {
        let now = now_ms();
        let last = match self.cached(org_id, robot_id) {
            Some(robot) => robot.last_heartbeat_at,
            // Forgotten here since its heartbeat (edited on another
            // instance, say): the store has its last heartbeat.
            None => match self.store.robot(org_id, robot_id).await {
                Ok(robot) => robot.and_then(|r| r.last_heartbeat_at),
                Err(e) => {
                    tracing::warn!(error = %e, robot = %robot_id, "whether the robot went offline could not be read");
                    return;
                }
            },
        };
        // (A later heartbeat has its own deadline.)
        if !last.is_some_and(|at| registry_status(Some(at), now) == RegistryStatus::Offline) {
            return;
        }
        match self.store.log_robot_offline(org_id, robot_id, now, ROBOT_HEARTBEAT_TIMEOUT_MS).await {
            Ok(true) => self.publish(org_id, robot_id, RegistryStatus::Offline, now),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, robot = %robot_id, "robot.offline not logged: told as this instance saw it");
                let still = self.cached(org_id, robot_id).map(|r| r.last_heartbeat_at);
                if still.is_none_or(|last| registry_status(last, now_ms()) == RegistryStatus::Offline) {
                    self.publish(org_id, robot_id, RegistryStatus::Offline, now);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn robot(id: &str) -> RobotRecord {
        RobotRecord {
            id: id.into(),
            org_id: "o".into(),
            model: "m".into(),
            site: "s".into(),
            pop: "p".into(),
            req_cert: "c".into(),
            last_heartbeat_at: None,
            token_rotated_at: None,
        }
    }

    #[test]
    fn s10_a_store_read_that_raced_a_rotation_is_never_remembered() {
        let mut robots = Robots::default();
        // A lookup reads the store (the robot was not in memory, e.g. made
        // by a seed after start) while its token is rotated.
        let read_at = robots.epoch;
        robots.forget_robot("o", "r1");
        assert!(!robots.remember_read_at(read_at, robot("r1"), "old-hash".into()), "the stale row stays out");
        assert!(!robots.by_token.contains_key("old-hash"));
        // A read after the rotation is remembered.
        let read_at = robots.epoch;
        assert!(robots.remember_read_at(read_at, robot("r1"), "new-hash".into()));
        assert_eq!(robots.by_token.get("new-hash").map(|r| r.id.as_str()), Some("r1"));
        // Revoking forgets it.
        robots.forget_robot("o", "r1");
        assert!(!robots.by_token.contains_key("new-hash"));
    }

    /// A robot edited on another instance whose message was lost: the
    /// reconcile's read of the store brings the cached record up to date
    /// (its heartbeat kept) and adds its PoP to those measured, unless that
    /// robot's record changed here after the read began (an edit here) or
    /// was remembered after it; another robot's change meanwhile (a steady
    /// churn of them) does not hold it back.
    #[test]
    fn a_reconcile_brings_a_robot_edited_elsewhere_up_to_date_unless_its_cached_record_moved_since() {
        let mut robots = Robots::default();
        robots.remember(RobotRecord { last_heartbeat_at: Some(7), ..robot("r1") }, "hash".into());
        robots.remember(robot("r2"), "hash-2".into());
        let edited = RobotRecord { pop: "q".into(), req_cert: "welding".into(), ..robot("r1") };

        let cached_before: HashSet<String> = ["hash".to_string()].into();

        let read_at = robots.epoch;
        robots.edited("o", "r1", "p");
        robots.refresh_read_at(read_at, &cached_before, vec![(edited.clone(), "hash".into())]);
        assert_eq!(robots.by_token["hash"].req_cert, "c", "a read older than the robot's change here changes nothing");

        let read_at = robots.epoch;
        robots.refresh_read_at(read_at, &HashSet::new(), vec![(edited.clone(), "hash".into())]);
        assert_eq!(robots.by_token["hash"].req_cert, "c", "a record remembered after the read began may be newer than it");

        let read_at = robots.epoch;
        robots.forget_robot("o", "r2");
        let edited = RobotRecord { pop: "s".into(), ..edited };
        robots.refresh_read_at(read_at, &cached_before, vec![(edited, "hash".into())]);
        let cached = &robots.by_token["hash"];
        assert_eq!((cached.req_cert.as_str(), cached.pop.as_str(), cached.last_heartbeat_at), ("welding", "s", Some(7)));
        assert!(robots.pops["o"].contains("s"));
    }

    /// A token revoked here while the reconcile read (its robot's new
    /// token then looked up and remembered, say) is that robot's change:
    /// the older row read does not overwrite what is cached now, even
    /// under the same hash; and once the reconcile is done, its changes
    /// are dropped (they cannot hold a later read back).
    #[test]
    fn a_reconcile_leaves_a_robot_whose_token_was_forgotten_during_its_read_alone() {
        let mut robots = Robots::default();
        robots.remember(robot("r1"), "hash".into());
        let cached_before: HashSet<String> = ["hash".to_string()].into();
        let read_at = robots.epoch;
        robots.forget_token("hash");
        robots.remember(RobotRecord { req_cert: "welding".into(), ..robot("r1") }, "hash".into());
        robots.refresh_read_at(read_at, &cached_before, vec![(robot("r1"), "hash".into())]);
        assert_eq!(robots.by_token["hash"].req_cert, "welding", "the row read before the change is older than the cache");
        robots.forget_changes_before(robots.epoch);
        assert!(robots.changed.is_empty());
    }

    /// The token was rotated on another instance and the robot presents
    /// its new one here before the revocation arrives: the old one must
    /// not go on working here, and the revocation, when it comes, ends the
    /// old one, not the new.
    #[test]
    fn a_robot_never_has_two_tokens_cached_and_a_revocation_forgets_the_one_that_ended() {
        let mut robots = Robots::default();
        assert!(robots.remember(robot("r1"), "old-hash".into()));
        // The new token read from the store: neither is kept.
        let read_at = robots.epoch;
        assert!(!robots.remember_read_at(read_at, robot("r1"), "new-hash".into()), "two tokens of one robot");
        assert!(robots.by_token.is_empty(), "the old token is looked up in the store again (and is not there)");
        // The next lookup of the new one reads the store again, and keeps it.
        let read_at = robots.epoch;
        assert!(robots.remember_read_at(read_at, robot("r1"), "new-hash".into()));
        // A stale read of the old one (begun before the rotation) keeps neither.
        let read_at = robots.epoch;
        assert!(!robots.remember_read_at(read_at, robot("r1"), "old-hash".into()));
        assert!(robots.by_token.is_empty() && robots.by_id.is_empty());
        // The revocation names the old token: the new one, cached again, stays.
        let read_at = robots.epoch;
        assert!(robots.remember_read_at(read_at, robot("r1"), "new-hash".into()));
        robots.forget_token("old-hash");
        assert_eq!(robots.by_token.get("new-hash").map(|r| r.id.as_str()), Some("r1"));
        assert_eq!(robots.by_id.get(&("o".to_string(), "r1".to_string())).map(String::as_str), Some("new-hash"));
    }

    /// An instance of the build before sends a robot's revocation without
    /// the ended token's hash; this build's carries it.
    #[test]
    fn a_robot_token_revocation_reads_with_or_without_the_ended_hash() {
        use crate::services::tabs::Revocation;
        let before: Revocation = serde_json::from_str(r#"{"kind":"robot_token","org_id":"o","robot_id":"r1"}"#).unwrap();
        assert!(matches!(before, Revocation::RobotToken { secret: None, .. }));
        let now = Revocation::RobotToken { org_id: "o".into(), robot_id: "r1".into(), secret: Some("old-hash".into()) };
        let read: Revocation = serde_json::from_str(&serde_json::to_string(&now).unwrap()).unwrap();
        assert!(matches!(read, Revocation::RobotToken { secret: Some(s), .. } if s == "old-hash"));
    }
}
