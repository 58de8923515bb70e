//! The teleop relay (data plane, seed 000): one channel per live session
//! between its robot's edge agent and the attached operator's cockpit.
//! Frames are forwarded, counted (never written to the database one by
//! one) and, while the session is ACTIVE, recorded in memory and written
//! to files in batches. A slow reader is dropped frames, never memory.
//!
//! The hub follows the org's lifecycle events: ACTIVE records, PAUSED does
//! not, a handover moves the cockpit side to the new operator, and a
//! session's end closes its channel and finalizes (COMPLETED) or discards
//! (CANCELLED) its recording.
//!
//! In cluster mode a session's edge agent and cockpit may be on different
//! instances: `link` carries frames and counts between them.

mod channel;
pub mod link;
pub mod recording;
mod socket;

pub use channel::{Channel, RelayLimits, Side};
pub use socket::{relay_handler, watch_handler, READ_BUFFER_BYTES};

use crate::bus::{Delivery, SharedBus};
use crate::clock::Clock;
use crate::recent::Recent;
use futures::StreamExt;
use crate::services::SessionService;
use domain::events::{Event, OrgEvent, Topic};
use domain::models::LifecycleState;
use axum::extract::ws::Message;
use domain::relay::{RelayStat, STATS_EVERY_MS};
use link::{ChannelLink, Direction, Elsewhere, Part, RelayLink, Report, REPORT_DOUBTED, REPORT_KEPT};
use recording::Recorder;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// After a gap in an org's events: how many of its channels read their
/// session at once, and how long one read may take.
const RESYNC_READS_AT_ONCE: usize = 8;
const RESYNC_READ: Duration = Duration::from_secs(2);

pub struct Relay {
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    /// Orgs whose lifecycle events the hub follows.
    /// Whether each followed org's events reach the hub yet (cluster mode:
    /// once its NATS subscription is live and the first `Resync` handled).
    followed: Mutex<HashMap<String, watch::Receiver<bool>>>,
    /// Orgs that had channels at the last count (told once when they have none).
    counted: Mutex<HashSet<String>>,
    bus: SharedBus,
    clock: Clock,
    pub recorder: Arc<Recorder>,
    /// The rate caps of each channel's directions.
    limits: RelayLimits,
    /// Cluster mode: the way to other instances' sockets, and what each
    /// other instance last reported carrying (by publisher), for `REPORT_KEPT`.
    link: Option<Arc<RelayLink>>,
    reports: Recent<String, Vec<Part>>,
    /// Where a channel reads its session again after a gap in its org's events.
    sessions: Arc<SessionService>,
    /// The last lifecycle event heard of each live session that has no
    /// channel here (yet), by session: a channel made later takes it over
    /// its joining socket's read, which may predate it.
    unheard: Mutex<HashMap<String, Unheard>>,
    /// True once the instance stops: every socket closes, told to come
    /// back (to another instance). Each socket holds a receiver until it
    /// is done, so the stop can wait for them (`farewell`).
    stopping: watch::Sender<bool>,
}

/// A lifecycle event of a session without a channel (`Relay::unheard`).
#[derive(Clone, Debug)]
struct Unheard {
    org_id: String,
    lifecycle: LifecycleState,
    operator_id: Option<String>,
    at_ms: i64,
    heard: Instant,
}

/// How long a socket may wait for its org's events to reach this instance
/// before it reads its session anyway (`Relay::follow`).
const FOLLOW_WAIT: Duration = Duration::from_secs(2);
/// How long a stopping instance waits for its relay sockets' close frames:
/// each socket's writer gets a second (`socket_writer::Writer::close`),
/// while the peer's answer is read on for as long; a socket refused for a
/// frame it could not read is held a second more after its close
/// (`socket::serve`): two seconds at the most, which a refused socket's
/// worst case fills (past it, the stop goes on and says so).
const SOCKETS_CLOSE_WITHIN: Duration = Duration::from_secs(2);
/// The end of a session without a channel is kept this long: a socket
/// reading the session live just before could still be opening one.
const ENDED_KEPT: Duration = Duration::from_secs(60);

impl Relay {
    /// The hub and its counting task (counts published, recordings
    /// flushed; in cluster mode, also what other instances report heard).
    pub fn start(
        bus: SharedBus,
        clock: Clock,
        recorder: Arc<Recorder>,
        limits: RelayLimits,
        link: Option<Arc<RelayLink>>,
        sessions: Arc<SessionService>,
    ) -> (Arc<Relay>, tokio::task::JoinHandle<()>) {
        let relay = Arc::new(Relay {
            channels: Mutex::default(),
            followed: Mutex::default(),
            counted: Mutex::default(),
            bus,
            clock,
            recorder,
            limits,
            link: link.clone(),
            reports: Recent::new(REPORT_KEPT),
            sessions,
            unheard: Mutex::default(),
            stopping: watch::Sender::new(false),
        });
        let hub = Arc::downgrade(&relay);
        let task = tokio::spawn(async move {
            // Apart: NATS being slow never holds the recordings up.
            let (flushing, counting) = (flush_recordings(hub.clone()), count(hub.clone()));
            match link {
                Some(link) => {
                    let hearing = link.hear_reports(|report| match hub.upgrade() {
                        Some(hub) => {
                            hub.heard(report);
                            true
                        }
                        None => false,
                    });
                    tokio::join!(flushing, counting, hearing);
                }
                None => {
                    tokio::join!(flushing, counting);
                }
            }
        });
        (relay, task)
    }

    /// The session's channel, opened on first use; `recording` (the
    /// caller's read: the session is ACTIVE) counts until the channel has
    /// heard a lifecycle event (`Channel::take_read`). A new channel first
    /// takes the last event heard of its session, if one came (the caller
    /// follows the org before it reads: `follow`).
    pub fn channel(self: &Arc<Self>, org_id: &str, session_id: &str, robot_id: &str, operator_id: Option<&str>, recording: bool) -> Arc<Channel> {
        self.follow_now(org_id);
        // (Read before the lock: every frame from another instance takes it.)
        let elsewhere = if self.link.is_some() { self.elsewhere() } else { HashMap::new() };
        let mut channels = self.channels.lock().expect("relay lock");
        let channel = match channels.get(session_id) {
            Some(channel) => channel.clone(),
            None => {
                let link = self.link.as_ref().map(|link| ChannelLink::new(link.clone(), session_id));
                let channel = Arc::new(Channel::new(org_id, session_id, robot_id, operator_id, self.clock.now_ms(), self.limits, link));
                self.learn_elsewhere(&channel, &elsewhere);
                // Under the channels' lock, as `lifecycle` records them: an
                // event is either in here or finds the channel.
                match self.unheard.lock().expect("relay lock").remove(session_id) {
                    // The session ended after the socket's read: a closed
                    // channel, never kept (its sockets leave at once).
                    Some(heard) if heard.lifecycle.is_terminal() => {
                        channel.close();
                        return channel;
                    }
                    Some(heard) => {
                        channel.set_operator(heard.operator_id.as_deref(), &self.recorder, heard.at_ms);
                        channel.hear_lifecycle(heard.lifecycle == LifecycleState::Active, &self.recorder, heard.at_ms);
                    }
                    None => {}
                }
                channels.insert(session_id.to_string(), channel.clone());
                channel
            }
        };
        drop(channels);
        channel.take_read(recording, &self.recorder, self.clock.now_ms());
        channel
    }

    pub fn get(&self, session_id: &str) -> Option<Arc<Channel>> {
        self.channels.lock().expect("relay lock").get(session_id).cloned()
    }

    /// A socket joins its channel: it hears who is there, and (cluster
    /// mode) the other instances hear of it at once.
    pub async fn join(self: &Arc<Self>, channel: &Arc<Channel>, side: &Side, tx: mpsc::Sender<Message>) -> (u64, watch::Receiver<bool>) {
        let joined = channel.join(side, tx, &self.recorder, self.clock.now_ms());
        self.moved(channel).await;
        joined
    }

    /// A socket leaves its channel; the others hear of it.
    pub async fn leave(self: &Arc<Self>, channel: &Arc<Channel>, side: &Side, id: u64) {
        channel.leave(side, id, &self.recorder, self.clock.now_ms());
        self.moved(channel).await;
    }

    /// Someone joined or left `channel` here: its sockets are told, and
    /// (cluster mode, on a task of its own: a slow NATS never holds a
    /// socket up) the channel listens for what its sockets here need, then
    /// the other instances hear what this one carries now.
    async fn moved(self: &Arc<Self>, channel: &Arc<Channel>) {
        channel.announce();
        if let Some(link) = self.link.clone().filter(|_| channel.link.is_some()) {
            let (hub, channel) = (self.clone(), channel.clone());
            tokio::spawn(async move {
                let arrivals: Arc<dyn link::Arrivals> = hub.clone();
                if let Some(channel_link) = &channel.link {
                    channel_link.listen_for(|| channel.sides_here(), Arc::downgrade(&arrivals)).await;
                }
                link.report(hub.parts(false)).await;
            });
        }
    }

    /// The instance stops: every socket here is closed with "restart"
    /// (1012), so edge agents and cockpits connect again (elsewhere)
    /// rather than find their connection reset at the exit, and it waits
    /// (a while at most) for their close frames to go; then the other
    /// instances hear that it carries no part of any channel (cluster
    /// mode, `RelayLink::farewell`). In that order: until a socket here
    /// has closed, the others still send to it.
    pub async fn farewell(&self) {
        self.stopping.send_replace(true);
        self.sockets_closed().await;
        if let Some(link) = &self.link {
            link.farewell().await;
        }
    }

    /// Waits (a while at most) until every socket that took the stop's
    /// receiver is done: after `farewell`, and again once the requests in
    /// flight have finished (a socket upgraded by one of them saw the stop
    /// at once, and closes).
    pub async fn sockets_closed(&self) {
        if tokio::time::timeout(SOCKETS_CLOSE_WITHIN, self.stopping.closed()).await.is_err() {
            tracing::warn!("relay sockets were still closing when the instance stopped");
        }
    }

    /// Becomes true when the instance stops (`farewell`); held by a socket
    /// until it is done.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// The org's channels' counts now (in cluster mode, with the parts
    /// other instances carry).
    pub fn stats(&self, org_id: &str) -> Vec<RelayStat> {
        let elsewhere = self.fresh_reports().into_iter().flat_map(|(_, parts)| parts);
        let parts = self.parts(false).into_iter().chain(elsewhere).filter(|part| part.org_id == org_id);
        domain::relay::merge_stats(parts.map(|part| part.stat))
    }

    /// What this instance carries of each channel; `advance` (the periodic
    /// count) starts the next rate interval.
    fn parts(&self, advance: bool) -> Vec<Part> {
        let now = self.clock.now_ms();
        let channels: Vec<Arc<Channel>> = self.channels.lock().expect("relay lock").values().cloned().collect();
        channels.iter().map(|c| Part { org_id: c.org_id.clone(), stat: self.stat(c, now, advance), watching: c.watching_here() }).collect()
    }

    /// Each org's whole channels: `here` with what other instances reported.
    fn merged(&self, here: Vec<Part>) -> HashMap<String, Vec<RelayStat>> {
        let mut by_org: HashMap<String, Vec<RelayStat>> = HashMap::new();
        let elsewhere: Vec<Part> = self.fresh_reports().into_iter().flat_map(|(_, parts)| parts).collect();
        for part in here.into_iter().chain(elsewhere) {
            by_org.entry(part.org_id).or_default().push(part.stat);
        }
        by_org.into_iter().map(|(org, parts)| (org, domain::relay::merge_stats(parts))).collect()
    }

    /// The orgs whose panel another instance tells: the lowest-named
    /// instance carrying a part of an org's channels does (on one
    /// instance, this one always). An org nobody carries a part of any
    /// more is told once by whoever told it last (`publish_counts`).
    fn told_elsewhere(&self, here: &[Part]) -> HashSet<String> {
        let Some(link) = &self.link else { return HashSet::new() };
        let mut lowest: HashMap<&str, &str> = HashMap::new();
        let reports = self.fresh_reports();
        let carried = reports.iter().flat_map(|(publisher, parts)| parts.iter().map(move |p| (p.org_id.as_str(), publisher.as_str())));
        for (org_id, publisher) in carried.chain(here.iter().map(|p| (p.org_id.as_str(), link.publisher()))) {
            let least = lowest.entry(org_id).or_insert(publisher);
            *least = (*least).min(publisher);
        }
        lowest.into_iter().filter(|(_, publisher)| *publisher != link.publisher()).map(|(org_id, _)| org_id.to_string()).collect()
    }

    /// Asks each instance whose report is doubted (`REPORT_DOUBTED`: the
    /// next one late) whether it is still there, on a task (each may wait for
    /// NATS): one gone from NATS (killed, say) is forgotten at once, with
    /// its sockets, unless it reported again meanwhile. (Before, its last
    /// report stood `REPORT_KEPT`: its edge agents told to cockpits as
    /// still there, and its robots and cockpits counted twice as they
    /// connected again elsewhere.)
    fn ask_the_silent(self: &Arc<Self>, link: &Arc<RelayLink>) {
        let asked_at = Instant::now();
        let Some(doubted_before) = asked_at.checked_sub(REPORT_DOUBTED) else { return };
        // (A farewell, an empty report, is left to lapse: nothing to forget.)
        let silent = self.reports.noted_before(doubted_before, |parts| !parts.is_empty());
        if silent.is_empty() {
            return;
        }
        let (hub, link) = (Arc::downgrade(self), link.clone());
        tokio::spawn(async move {
            // All at once: a killed instance is not kept waiting behind paused ones.
            let asked = futures::future::join_all(silent.into_iter().map(|publisher| {
                let link = link.clone();
                async move { (link.is_gone(&publisher).await, publisher) }
            }))
            .await;
            let Some(hub) = hub.upgrade() else { return };
            let mut forgot = false;
            for publisher in asked.into_iter().filter_map(|(gone, publisher)| gone.then_some(publisher)) {
                if hub.reports.forget_unless_noted_since(&publisher, asked_at) {
                    tracing::info!(instance = %publisher, "an instance stopped reporting its relay sockets and is gone from NATS: they are forgotten");
                    crate::metrics::relay_instance_gone();
                    forgot = true;
                }
            }
            if forgot {
                hub.update_elsewhere();
            }
        });
    }

    /// Other instances' reports young enough to stand (an instance that
    /// stopped reporting is gone, with its sockets), by publisher.
    fn fresh_reports(&self) -> Vec<(String, Vec<Part>)> {
        self.reports.entries()
    }

    /// Another instance's report: kept (replacing its last), and every
    /// channel here learns what is on it elsewhere.
    fn heard(&self, report: Report) {
        let Report { publisher, parts } = report;
        self.reports.note(publisher, parts);
        self.update_elsewhere();
    }

    /// What other instances hold of each session, and who watches it
    /// there (names, sorted, once each), by their fresh reports.
    fn elsewhere(&self) -> HashMap<String, (Elsewhere, Vec<String>)> {
        let mut elsewhere: HashMap<String, (Elsewhere, Vec<String>)> = HashMap::new();
        for (_, parts) in self.fresh_reports() {
            for part in parts {
                let (seen, watching) = elsewhere.entry(part.stat.session_id).or_default();
                seen.robot |= part.stat.robot_connected;
                seen.cockpits += part.stat.cockpits;
                seen.supervisors += part.stat.supervisors;
                watching.extend(part.watching);
            }
        }
        for (_, watching) in elsewhere.values_mut() {
            watching.sort();
            watching.dedup();
        }
        elsewhere
    }

    /// Tells every channel here what other instances hold of it; sockets
    /// of a channel where that changed hear who is on it now. A session
    /// recorded here whose edge agent is now on another instance is handed
    /// off to it: one instance finishes a session's recording.
    fn update_elsewhere(&self) {
        if self.link.is_none() {
            return;
        }
        let elsewhere = self.elsewhere();
        let channels: Vec<Arc<Channel>> = self.channels.lock().expect("relay lock").values().cloned().collect();
        for channel in channels {
            if self.learn_elsewhere(&channel, &elsewhere) {
                channel.announce();
            }
            let robot_elsewhere = channel.link.as_ref().is_some_and(|link| link.elsewhere().robot);
            if robot_elsewhere && !channel.has_robot() && self.recorder.holds(&channel.session_id) {
                tracing::debug!(session = %channel.session_id, "the edge agent went on at another instance: its recording goes on there");
                self.recorder.hand_off(&channel.session_id);
            }
        }
    }

    /// Whether what other instances hold of `channel` changed.
    fn learn_elsewhere(&self, channel: &Channel, elsewhere: &HashMap<String, (Elsewhere, Vec<String>)>) -> bool {
        let (now, watching) = elsewhere.get(&channel.session_id).cloned().unwrap_or_default();
        channel.link.as_ref().is_some_and(|link| link.set_elsewhere(now, watching))
    }

    /// A channel's counts with what its recording's cap refused.
    fn stat(&self, channel: &Channel, now: i64, advance: bool) -> domain::relay::RelayStat {
        domain::relay::RelayStat { unrecorded: self.recorder.unrecorded(&channel.session_id), ..channel.stat(now, advance) }
    }

    /// Follows the org's lifecycle events (once per org), and waits (a
    /// while at most) until they reach the hub: a socket calls it before it
    /// reads its session, so an event committed after that read is heard,
    /// with or without a channel to hear it.
    pub async fn follow(self: &Arc<Self>, org_id: &str) {
        let mut live = self.follow_now(org_id);
        if tokio::time::timeout(FOLLOW_WAIT, live.wait_for(|live| *live)).await.is_err() {
            tracing::warn!(org = %org_id, "the org's events are slow to reach this instance: a relay socket reads its session without them");
        }
    }

    /// Starts following the org unless it is followed; whether its events
    /// reach the hub yet.
    fn follow_now(self: &Arc<Self>, org_id: &str) -> watch::Receiver<bool> {
        let mut followed = self.followed.lock().expect("relay lock");
        if let Some(live) = followed.get(org_id) {
            return live.clone();
        }
        let topic = Topic::org(org_id);
        let subscription = self.bus.subscribe(&topic);
        // Not yet live: the bus sends this subscription a `Resync` once it is.
        let (told_live, live) = watch::channel(self.bus.is_live(&topic));
        followed.insert(org_id.to_string(), live.clone());
        let hub = Arc::downgrade(self);
        let org_id = org_id.to_string();
        tokio::spawn(async move {
            let mut subscription = subscription;
            loop {
                let delivery = subscription.recv().await;
                let Some(hub) = hub.upgrade() else { return };
                match delivery {
                    Delivery::Event(Event::Org(OrgEvent::Lifecycle { session_id, lifecycle, operator_id, at_ms, .. })) => {
                        hub.lifecycle(&org_id, &session_id, lifecycle, operator_id.as_deref(), at_ms);
                    }
                    Delivery::Event(_) => {}
                    // Events were lost (a slow subscriber, a gap between
                    // instances; in cluster mode every new subscription
                    // starts with one). Those still waiting are older than
                    // the reads: dropped. Events from now on wait for them.
                    Delivery::Resync => {
                        subscription.skip_to_now();
                        hub.resync(&org_id).await;
                        told_live.send_replace(true);
                    }
                    Delivery::Closed => return,
                }
            }
        });
        live
    }

    /// After a gap in the org's events, each of its channels takes its
    /// session's state from the database as if the event had come: a
    /// missed end closes it, a missed pause, resume or handover applies.
    async fn resync(&self, org_id: &str) {
        // What was heard of sessions without a channel may miss the lost
        // events: a channel made from now on goes by its socket's read.
        self.unheard.lock().expect("relay lock").retain(|_, heard| heard.org_id != org_id);
        let channels: Vec<Arc<Channel>> = self.channels.lock().expect("relay lock").values().filter(|c| c.org_id == org_id).cloned().collect();
        // A few reads at a time, each given up after a while: the org's
        // events wait for them.
        let reads = futures::stream::iter(channels).map(|channel| async move {
            let read = tokio::time::timeout(RESYNC_READ, self.sessions.session(org_id, &channel.session_id)).await;
            (channel, read)
        });
        let mut reads = reads.buffer_unordered(RESYNC_READS_AT_ONCE);
        while let Some((channel, read)) = reads.next().await {
            match read {
                Ok(Ok(Some(session))) => self.lifecycle(org_id, &session.id, session.lifecycle, session.operator_id.as_deref(), self.clock.now_ms()),
                Ok(Ok(None)) => tracing::warn!(session = %channel.session_id, "a relay channel's session is not in the database"),
                Ok(Err(e)) => tracing::warn!(session = %channel.session_id, error = %e, "a relay channel could not read its session after a gap in events"),
                Err(_) => tracing::warn!(session = %channel.session_id, "a relay channel's read after a gap in events took too long"),
            }
        }
    }

    /// A lifecycle change of a session that may have a channel; without
    /// one, kept for the channel if one comes (`channel`).
    fn lifecycle(&self, org_id: &str, session_id: &str, lifecycle: LifecycleState, operator_id: Option<&str>, at_ms: i64) {
        let channel = {
            let channels = self.channels.lock().expect("relay lock");
            match channels.get(session_id) {
                Some(channel) => channel.clone(),
                None => {
                    // An end is kept a while too (`ENDED_KEPT`): a socket that
                    // read the session live must not open its channel after it.
                    if lifecycle != LifecycleState::Pending {
                        let heard = Unheard { org_id: org_id.to_string(), lifecycle, operator_id: operator_id.map(str::to_string), at_ms, heard: Instant::now() };
                        self.unheard.lock().expect("relay lock").insert(session_id.to_string(), heard);
                    }
                    return;
                }
            }
        };
        match lifecycle {
            LifecycleState::Active | LifecycleState::Paused => {
                channel.set_operator(operator_id, &self.recorder, at_ms);
                channel.hear_lifecycle(lifecycle == LifecycleState::Active, &self.recorder, at_ms);
            }
            LifecycleState::Completed | LifecycleState::Cancelled => {
                self.channels.lock().expect("relay lock").remove(session_id);
                channel.close();
                self.recorder.finish(&channel.org_id, session_id, lifecycle == LifecycleState::Completed);
            }
            LifecycleState::Pending => {}
        }
    }

    /// Publishes each org's counts (in cluster mode, the whole channels
    /// of the orgs this instance tells, after reporting its own parts); an
    /// org whose last channel closed hears an empty list once.
    async fn publish_counts(self: &Arc<Self>) {
        self.unheard.lock().expect("relay lock").retain(|_, heard| !heard.lifecycle.is_terminal() || heard.heard.elapsed() < ENDED_KEPT);
        let now = self.clock.now_ms();
        let here = self.parts(true);
        if let Some(link) = &self.link {
            // Listening again where a subscription was refused (on a task:
            // each may wait for NATS).
            let channels: Vec<Arc<Channel>> = self.channels.lock().expect("relay lock").values().cloned().collect();
            let arrivals: Arc<dyn link::Arrivals> = self.clone();
            tokio::spawn(async move {
                for channel in &channels {
                    if let Some(channel_link) = &channel.link {
                        channel_link.listen_for(|| channel.sides_here(), Arc::downgrade(&arrivals)).await;
                    }
                }
            });
            // Asked before this report goes (which may wait for NATS), so
            // the asking ends well before a silent report would lapse.
            self.ask_the_silent(link);
            link.report(here.clone()).await;
            self.reports.forget_old();
            self.update_elsewhere();
        }
        let mut by_org = self.merged(here.clone());
        let mut counted = self.counted.lock().expect("relay lock");
        for org in counted.iter() {
            by_org.entry(org.clone()).or_default();
        }
        let told_elsewhere = self.told_elsewhere(&here);
        by_org.retain(|org_id, _| !told_elsewhere.contains(org_id));
        *counted = by_org.iter().filter(|(_, stats)| !stats.is_empty()).map(|(org, _)| org.clone()).collect();
        drop(counted);
        for (org_id, stats) in by_org {
            self.bus.publish(Topic::org(&org_id), Event::Org(OrgEvent::Relay { stats, at_ms: now }));
        }
    }
}

/// Frames from other instances' sockets, to this instance's.
impl link::Arrivals for Relay {
    fn arrived(&self, session_id: &str, direction: Direction, message: Message) {
        let Some(channel) = self.get(session_id) else { return };
        match direction {
            Direction::Up => channel.from_robot_elsewhere(message),
            Direction::Down => channel.from_operator_elsewhere(message, &self.recorder, self.clock.now_ms()),
            Direction::Watch => channel.to_supervisors(&message),
        }
    }
}

/// Every `STATS_EVERY_MS`: the counts out (in cluster mode, also to the
/// other instances).
async fn count(hub: Weak<Relay>) {
    let mut every = tokio::time::interval(Duration::from_millis(STATS_EVERY_MS as u64));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(hub) = hub.upgrade() else { return };
        hub.publish_counts().await;
    }
}

/// Every `STATS_EVERY_MS`: recordings' buffers to their files.
async fn flush_recordings(hub: Weak<Relay>) {
    let mut every = tokio::time::interval(Duration::from_millis(STATS_EVERY_MS as u64));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(hub) = hub.upgrade() else { return };
        hub.recorder.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::InProcessBus;
    use crate::store::{NewSession, Write};

    /// A pause committed after a joining socket read its session ACTIVE,
    /// heard before that socket's channel exists: the new channel takes the
    /// pause over the read, and does not record.
    #[tokio::test]
    async fn an_event_heard_before_its_channel_exists_wins_over_the_older_read() {
        let dir = std::env::temp_dir().join(format!("cc-relay-unheard-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = crate::store::connect(&format!("sqlite://{}?mode=rwc", dir.join("db.sqlite").display())).await.unwrap();
        let bus: SharedBus = InProcessBus::new();
        let (finished, _episodes) = mpsc::unbounded_channel();
        let recorder = Arc::new(Recorder::start(dir.join("recordings"), finished, u64::MAX).unwrap());
        let limits = RelayLimits { max_fps: 30, max_kib_per_s: 512, recording_max_bytes: u64::MAX };
        let sessions = Arc::new(SessionService::new(store, bus.clone()));
        let (relay, _job) = Relay::start(bus.clone(), Clock::system(), recorder, limits, None, sessions);
        let org = "org-unheard";
        relay.follow(org).await;
        let paused = OrgEvent::Lifecycle { session_id: "ses-1".into(), robot_id: "r1".into(), lifecycle: LifecycleState::Paused, operator_id: Some("asha".into()), queued: false, at_ms: 5 };
        bus.publish(Topic::org(org), Event::Org(paused));
        tokio::time::timeout(Duration::from_secs(10), async {
            while !relay.unheard.lock().unwrap().contains_key("ses-1") {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the follower hears the pause");
        let channel = relay.channel(org, "ses-1", "r1", Some("asha"), true);
        assert!(!channel.recording_on(), "the socket's read (ACTIVE) is older than the pause heard");
        assert!(relay.unheard.lock().unwrap().is_empty(), "taken by the channel");
        // An end heard for a session without a channel: a socket that read
        // it live before gets a closed channel, never kept.
        let other = |lifecycle| Event::Org(OrgEvent::Lifecycle { session_id: "ses-2".into(), robot_id: "r2".into(), lifecycle, operator_id: None, queued: false, at_ms: 6 });
        bus.publish(Topic::org(org), other(LifecycleState::Active));
        bus.publish(Topic::org(org), other(LifecycleState::Completed));
        bus.publish(Topic::org(org), Event::Org(OrgEvent::Lifecycle { session_id: "ses-1".into(), robot_id: "r1".into(), lifecycle: LifecycleState::Active, operator_id: Some("asha".into()), queued: false, at_ms: 7 }));
        tokio::time::timeout(Duration::from_secs(10), async {
            while !channel.recording_on() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the resume reaches the channel");
        let late = relay.channel(org, "ses-2", "r2", None, true);
        assert!(late.is_closed() && relay.get("ses-2").is_none(), "ended after the read: closed, not kept");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Events lost to a slow subscriber (here: more than the org topic
    /// holds, published before the relay's follower ran) are a `Resync`:
    /// each of the org's channels reads its session again, and the end it
    /// missed closes it.
    #[tokio::test]
    async fn a_channel_whose_end_was_lost_in_a_gap_closes_on_the_resync() {
        let dir = std::env::temp_dir().join(format!("cc-relay-resync-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = crate::store::connect(&format!("sqlite://{}?mode=rwc", dir.join("db.sqlite").display())).await.unwrap();
        store.seed(&crate::seed::demo_seed()).await.unwrap();
        let org = crate::seed::DEMO_ORG_ID;
        let lease = store.take_lease(org, "test", 60_000, 0).await.unwrap().unwrap();
        let session = NewSession {
            id: "ses-resync".into(),
            org_id: org.into(),
            robot_id: "uk-pick-01".into(),
            skill: "pick-place".into(),
            pop: "uk-london".into(),
            raised_at: 1,
            client_id: None,
            booking_id: None,
            planned_end_at: None,
        };
        let end = Write::End { org_id: org.into(), session_id: "ses-resync".into(), to: LifecycleState::Cancelled, reason: "withdrawn".into(), attached: None, at: 2 };
        store.commit(&lease, vec![Write::OpenSession(session)]).await.unwrap();

        let bus: SharedBus = InProcessBus::new();
        let (finished, _episodes) = mpsc::unbounded_channel();
        let recorder = Arc::new(Recorder::start(dir.join("recordings"), finished, u64::MAX).unwrap());
        let limits = RelayLimits { max_fps: 30, max_kib_per_s: 512, recording_max_bytes: u64::MAX };
        let sessions = Arc::new(SessionService::new(store.clone(), bus.clone()));
        let (relay, _job) = Relay::start(bus.clone(), Clock::system(), recorder, limits, None, sessions);
        let channel = relay.channel(org, "ses-resync", "uk-pick-01", None, false);

        // The session ends; its event is lost among more than the topic holds.
        store.commit(&lease, vec![end]).await.unwrap();
        for n in 0..crate::bus::ORG_TOPIC_BUFFER + 10 {
            let other = OrgEvent::Lifecycle { session_id: format!("ses-other-{n}"), robot_id: "r".into(), lifecycle: LifecycleState::Cancelled, operator_id: None, queued: false, at_ms: 3 };
            bus.publish(Topic::org(org), Event::Org(other));
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while !channel.is_closed() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the resync's read closes the channel");
        assert!(relay.get("ses-resync").is_none(), "and the hub forgets it");
        let _ = std::fs::remove_dir_all(dir);
    }
}
