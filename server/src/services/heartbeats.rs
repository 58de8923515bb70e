//! Edge-agent heartbeats, stored in groups. A fleet heartbeats all the time
//! (each robot every `domain::rules::ROBOT_HEARTBEAT_EVERY_MS`, 10 s: 1,000
//! a second for 10,000 robots), and each heartbeat was a write
//! transaction of its own: on SQLite each took the one
//! write lock the dispatchers' batches need, and a batch that found it
//! taken slept a millisecond or more (BENCHMARKS.md, Engine v3
//! twenty-fourth part). One task writes them instead: the heartbeats that
//! arrive while a group is being written make up the next group, written in
//! one transaction, a robot's latest once. There is no timer: a lone
//! heartbeat is written at once, and groups grow only as fast as writes lag.
//! Each heartbeat is answered once its group is committed, as before. A
//! group the database does not answer within `WRITE_WITHIN` (its network
//! cut, its lock held) is answered 503 and its write left to run; until
//! that write ends, every group is answered 503 at once, and no other write
//! begins. So a heartbeat waits two bounds at most (its group's, after the
//! one before it), and none piles up.

use crate::store::{Heartbeat, SharedStore, StoreError, StoreResult};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// At most this many heartbeats in one transaction.
const GROUP_AT_MOST: usize = 512;

/// A group not answered within this is given up (an edge agent heartbeats
/// again within `ROBOT_HEARTBEAT_EVERY_MS`).
const WRITE_WITHIN: Duration = Duration::from_secs(5);
const _: () = assert!((WRITE_WITHIN.as_millis() as i64) < domain::rules::ROBOT_HEARTBEAT_EVERY_MS, "a group is given up before its robots heartbeat again");

/// A heartbeat waiting for its group, with where to answer.
struct Waiting {
    beat: Heartbeat,
    stored: oneshot::Sender<Result<(), Failed>>,
}

/// Why a group was not stored, told to each of its heartbeats.
#[derive(Clone, Debug)]
enum Failed {
    /// The database refused it (its error, in its own words).
    Refused(String),
    /// The database did not answer within the bound.
    Unanswered(String),
}

impl From<Failed> for StoreError {
    fn from(failed: Failed) -> StoreError {
        match failed {
            Failed::Refused(why) => StoreError::Writer(why),
            Failed::Unanswered(why) => StoreError::Unanswered(why),
        }
    }
}

/// The door to the group writer; its task ends when this is dropped.
pub struct Heartbeats {
    waiting: mpsc::UnboundedSender<Waiting>,
    /// Groups begun (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    groups: Arc<AtomicUsize>,
}

impl Heartbeats {
    pub fn start(store: SharedStore) -> Heartbeats {
        Heartbeats::start_within(store, WRITE_WITHIN)
    }

    /// As `start`, a group given up after `within`.
    fn start_within(store: SharedStore, within: Duration) -> Heartbeats {
        let (waiting, rx) = mpsc::unbounded_channel();
        let groups = Arc::new(AtomicUsize::new(0));
        tokio::spawn(write_groups(store, rx, groups.clone(), within));
        Heartbeats { waiting, groups }
    }

    /// Stores that `robot_id` of `org_id` was heard at `at`; answers once
    /// it is committed (with the rest of its group).
    pub async fn store(&self, org_id: &str, robot_id: &str, at: i64) -> StoreResult<()> {
        let (stored, answer) = oneshot::channel();
        let beat = Heartbeat { org_id: org_id.to_string(), robot_id: robot_id.to_string(), at };
        self.waiting.send(Waiting { beat, stored }).map_err(|_| StoreError::Writer("the heartbeat writer has stopped".into()))?;
        match answer.await {
            Ok(stored) => stored.map_err(StoreError::from),
            Err(_) => Err(StoreError::Writer("the heartbeat writer has stopped".into())),
        }
    }

    /// How many groups have been begun.
    #[cfg(test)]
    fn groups(&self) -> usize {
        self.groups.load(Ordering::Relaxed)
    }
}

async fn write_groups(store: SharedStore, mut waiting: mpsc::UnboundedReceiver<Waiting>, groups: Arc<AtomicUsize>, within: Duration) {
    // A write given up (unanswered within the bound) and still running:
    // while it runs, no other is begun. Another would wait behind it, and
    // would hold one more of the pool's connections (PostgreSQL) or queue
    // on the writer connection's lock before the dispatchers' batches
    // (SQLite).
    let mut given_up: Option<JoinHandle<StoreResult<()>>> = None;
    while let Some(first) = waiting.recv().await {
        let mut group = vec![first];
        while group.len() < GROUP_AT_MOST {
            match waiting.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        given_up = given_up.filter(|write| !write.is_finished());
        if given_up.is_some() {
            let unanswered = Err(Failed::Unanswered(format!("within {within:?} (an earlier write is still waiting for it)")));
            for Waiting { stored: answer, .. } in group {
                let _ = answer.send(unanswered.clone());
            }
            continue;
        }
        // (In no order: the store writes them in the robots' order.)
        let mut latest: HashMap<(&str, &str), i64> = HashMap::with_capacity(group.len());
        for Waiting { beat, .. } in &group {
            let at = latest.entry((&beat.org_id, &beat.robot_id)).or_insert(beat.at);
            *at = (*at).max(beat.at);
        }
        let beats: Vec<Heartbeat> = latest.into_iter().map(|((org_id, robot_id), at)| Heartbeat { org_id: org_id.into(), robot_id: robot_id.into(), at }).collect();
        groups.fetch_add(1, Ordering::Relaxed);
        let mut write = tokio::spawn({
            let store = store.clone();
            async move { store.record_heartbeats(beats).await }
        });
        // Every heartbeat of the group is answered alike: the store's error
        // as its text (one error, several callers).
        let stored = match tokio::time::timeout(within, &mut write).await {
            Ok(Ok(stored)) => stored.map_err(|e| match e {
                // Its own words: `StoreError::Writer` says "database error" again.
                StoreError::Database(e) => Failed::Refused(e.to_string()),
                StoreError::Writer(why) => Failed::Refused(why),
                StoreError::Unanswered(why) => Failed::Unanswered(why),
                e => Failed::Refused(e.to_string()),
            }),
            Ok(Err(ended)) => Err(Failed::Refused(format!("the heartbeats' write ended: {ended}"))),
            // Given up here, and left to run. Should it be stored after all,
            // it moves no robot's time back (a stored time only goes forward).
            Err(_) => {
                given_up = Some(write);
                Err(Failed::Unanswered(format!("within {within:?}")))
            }
        };
        for Waiting { stored: answer, .. } in group {
            let _ = answer.send(stored.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewOrg, NewRobot, Seed};

    async fn store_with_robots(dir: &std::path::Path, robots: usize) -> SharedStore {
        let store = crate::store::connect(&format!("sqlite://{}?mode=rwc", dir.join("db.sqlite").display())).await.unwrap();
        let robots = (0..robots).map(|i| NewRobot {
            id: format!("r-{i}"), org_id: "org".into(), model: "UR5e".into(), site: "Leeds".into(), pop: "uk-london".into(),
            req_cert: "pick-place · tier-1".into(), token_hash: format!("hash-{i}"),
        });
        store.seed(&Seed { orgs: vec![NewOrg { id: "org".into(), name: "Org".into() }], robots: robots.collect(), ..Seed::default() }).await.unwrap();
        store
    }

    /// 400 heartbeats of 20 robots at once: every one answered stored,
    /// each robot's latest in the database, and far fewer transactions
    /// than heartbeats (one each, this fails).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn heartbeats_at_once_are_stored_in_groups_each_robots_latest() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_robots(dir.path(), 20).await;
        let heartbeats = Arc::new(Heartbeats::start(store.clone()));
        let sent = (0..400).map(|i| {
            let heartbeats = heartbeats.clone();
            tokio::spawn(async move { heartbeats.store("org", &format!("r-{}", i % 20), 1_000 + i).await })
        });
        for answer in futures::future::join_all(sent).await {
            answer.unwrap().unwrap();
        }
        for r in 0..20 {
            let robot = store.robot("org", &format!("r-{r}")).await.unwrap().unwrap();
            assert_eq!(robot.last_heartbeat_at, Some(1_000 + 380 + r), "robot r-{r} holds its latest heartbeat");
        }
        assert!(heartbeats.groups() <= 100, "400 heartbeats in {} transactions", heartbeats.groups());
    }

    /// A group the database does not answer within the bound (its write
    /// lock held by another connection here) is answered "unanswered", and
    /// so are the heartbeats after it while its write still waits, without
    /// a write of their own that would wait as long again behind it. The
    /// writer goes on once the database answers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_the_database_does_not_answer_is_given_up_with_those_behind_it() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_robots(dir.path(), 3).await;
        let mut holder = sqlx::SqliteConnection::connect(&format!("sqlite://{}", dir.path().join("db.sqlite").display())).await.unwrap();
        sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
        let heartbeats = Arc::new(Heartbeats::start_within(store.clone(), Duration::from_secs(1)));
        let beat = |robot: &'static str, at: i64| {
            let heartbeats = heartbeats.clone();
            tokio::spawn(async move { heartbeats.store("org", robot, at).await })
        };
        let first = beat("r-0", 5);
        while heartbeats.groups() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let behind = [beat("r-1", 5), beat("r-2", 5)];
        for answer in futures::future::join_all(std::iter::once(first).chain(behind)).await {
            assert!(matches!(answer.unwrap(), Err(StoreError::Unanswered(_))));
        }
        assert_eq!(heartbeats.groups(), 1, "a second write begun behind the unanswered one");
        sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
        // The writer goes on once the lock is free (the given-up write,
        // still waiting in SQLite's busy handler, may take it first).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while let Err(e) = heartbeats.store("org", "r-0", 6).await {
            assert!(std::time::Instant::now() < deadline, "never stored again: {e}");
        }
        assert_eq!(store.robot("org", "r-0").await.unwrap().unwrap().last_heartbeat_at, Some(6));
    }

    /// A group the database refuses is refused to each of its heartbeats,
    /// and none of it is stored.
    #[tokio::test]
    async fn a_refused_group_is_refused_to_every_heartbeat_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_robots(dir.path(), 2).await;
        let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", dir.path().join("db.sqlite").display())).await.unwrap();
        sqlx::query("CREATE TRIGGER refuse_r1 BEFORE UPDATE ON robots WHEN NEW.id = 'r-1' BEGIN SELECT RAISE(ABORT, 'refused'); END")
            .execute(&db).await.unwrap();
        let heartbeats = Heartbeats::start(store.clone());
        // On one thread both are queued before the writer runs: one group.
        let (a, b) = tokio::join!(heartbeats.store("org", "r-0", 5), heartbeats.store("org", "r-1", 5));
        assert_eq!(heartbeats.groups(), 1);
        assert!(a.is_err() && b.is_err(), "{a:?} {b:?}");
        assert_eq!(store.robot("org", "r-0").await.unwrap().unwrap().last_heartbeat_at, None, "nothing of the group is stored");
        // The writer goes on: the next group is stored.
        heartbeats.store("org", "r-0", 6).await.unwrap();
        assert_eq!(store.robot("org", "r-0").await.unwrap().unwrap().last_heartbeat_at, Some(6));
    }
}
