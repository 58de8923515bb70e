//! One session's relay channel: the edge agent's socket, the cockpit
//! sockets of the operator in control, and the counts of each direction.
//! Sends never wait: each socket has a bounded queue and a full queue
//! drops the frame (counted), so a slow reader costs frames, not memory.
//! In cluster mode the channel holds this instance's sockets, and its
//! link carries frames to and from the sockets other instances hold.

use super::link::{ChannelLink, Direction, SidesHere};
use super::recording::{Recorder, Sample};
use domain::relay::{FlowStat, RelayStat};
use axum::extract::ws::Message;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::{mpsc, watch};

/// A session's operator input is noted for the engine's inactivity chain
/// at most this often (the engine sends what is noted in one batch per org:
/// `engine::inputs`).
pub const INPUT_REPORT_MS: i64 = 250;
/// Longest joint or action vector.
pub const MAX_VECTOR: usize = 64;

/// Which end of the channel a socket is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Side {
    Robot,
    /// A cockpit tab of this operator.
    Cockpit(String),
    /// An admin's live view (issue "Integrators and supervisors", part 2):
    /// hears what a cockpit hears and the operator's actions; never sends.
    Supervisor { admin_id: String, name: String },
}

/// The relay's limits (issue "Hardening II", finding 9): the demo robots'
/// tokens are public, so a robot (or a cockpit) must not be able to flood
/// the operator's link or the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelayLimits {
    /// Frames per second each direction of a channel may carry (a burst
    /// of one second's worth is allowed); past it frames are refused.
    pub max_fps: u32,
    /// KiB per second each direction may carry, likewise: the frame cap
    /// alone would let 120 frames of 512 KiB through every second.
    pub max_kib_per_s: u32,
    /// Bytes one session's recording may hold; past it samples are not recorded.
    pub recording_max_bytes: u64,
}

impl Default for RelayLimits {
    fn default() -> Self {
        // 30 Hz state plus two 30 Hz cameras is 90 frames a second.
        RelayLimits { max_fps: 120, max_kib_per_s: 32 * 1024, recording_max_bytes: 1024 * 1024 * 1024 }
    }
}

struct Flow {
    frames: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    over_rate: AtomicU64,
    last_ms: AtomicI64,
    /// (frames, bytes, at) at the last count, for the rates.
    previous: Mutex<(u64, u64, i64)>,
    rate: governor::DefaultDirectRateLimiter,
    /// In KiB.
    volume: governor::DefaultDirectRateLimiter,
}

impl Flow {
    fn new(limits: RelayLimits) -> Flow {
        let per_second = |n: u32| governor::Quota::per_second(std::num::NonZeroU32::new(n.max(1)).expect("at least one"));
        Flow {
            frames: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            over_rate: AtomicU64::new(0),
            last_ms: AtomicI64::new(0),
            previous: Mutex::default(),
            rate: governor::RateLimiter::direct(per_second(limits.max_fps)),
            volume: governor::RateLimiter::direct(per_second(limits.max_kib_per_s)),
        }
    }

    /// Whether one more frame of `bytes` fits the rate caps (frames and
    /// KiB a second); one that does not is counted.
    fn admit(&self, bytes: usize) -> bool {
        let kib = std::num::NonZeroU32::new(bytes.div_ceil(1024).max(1) as u32).expect("at least one");
        let admitted = self.rate.check().is_ok() && matches!(self.volume.check_n(kib), Ok(Ok(())));
        if !admitted {
            self.over_rate.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    fn count(&self, bytes: usize, now: i64) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// Rates since the last count; `advance` starts the next interval.
    fn stat(&self, now: i64, advance: bool) -> FlowStat {
        let (frames, bytes) = (self.frames.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed));
        let mut previous = self.previous.lock().expect("flow lock");
        let (f0, b0, t0) = *previous;
        let seconds = ((now - t0).max(1) as f32) / 1000.0;
        if advance {
            *previous = (frames, bytes, now);
        }
        let last = self.last_ms.load(Ordering::Relaxed);
        FlowStat {
            fps: (frames - f0) as f32 / seconds,
            bytes_per_s: ((bytes - b0) as f32 / seconds) as u64,
            frames,
            bytes,
            dropped: self.dropped.load(Ordering::Relaxed),
            over_rate: self.over_rate.load(Ordering::Relaxed),
            last_frame_ms: (last > 0).then_some(last),
        }
    }
}

struct Peer {
    id: u64,
    /// The operator's (a cockpit) or the admin's (a live view).
    operator_id: String,
    /// A watching admin's name, for the cockpit's "Dana is watching".
    name: String,
    tx: mpsc::Sender<Message>,
}

pub struct Channel {
    pub org_id: String,
    pub session_id: String,
    pub robot_id: String,
    open_since_ms: i64,
    robot: Mutex<Option<(u64, mpsc::Sender<Message>)>>,
    cockpits: Mutex<Vec<Peer>>,
    /// Admins' live views: a copy of every frame each, dropped on full.
    supervisors: Mutex<Vec<Peer>>,
    /// Who is in control: only their cockpits may join.
    operator_id: Mutex<Option<String>>,
    up: Flow,
    down: Flow,
    recording: AtomicBool,
    /// A lifecycle event reached the channel: it knows whether the session
    /// records better than any joining socket's read of the database.
    /// (Held while a read or an event sets `recording`: a read judged
    /// before an event must not land after it.)
    heard_lifecycle: Mutex<bool>,
    next_peer: AtomicU64,
    /// Sockets leave when this turns true (the session ended) or when the
    /// operator they belong to lost control.
    closed: watch::Sender<bool>,
    /// When operator input last reached the engine (at most every `INPUT_REPORT_MS`).
    input_reported_ms: AtomicI64,
    /// The way to other instances' sockets of this session (cluster mode).
    pub link: Option<ChannelLink>,
}

impl Channel {
    pub fn new(org_id: &str, session_id: &str, robot_id: &str, operator_id: Option<&str>, now: i64, limits: RelayLimits, link: Option<ChannelLink>) -> Channel {
        Channel {
            org_id: org_id.into(),
            session_id: session_id.into(),
            robot_id: robot_id.into(),
            open_since_ms: now,
            robot: Mutex::default(),
            cockpits: Mutex::default(),
            supervisors: Mutex::default(),
            operator_id: Mutex::new(operator_id.map(str::to_string)),
            up: Flow::new(limits),
            down: Flow::new(limits),
            recording: AtomicBool::new(false),
            heard_lifecycle: Mutex::new(false),
            next_peer: AtomicU64::new(1),
            closed: watch::channel(false).0,
            input_reported_ms: AtomicI64::new(0),
            link,
        }
    }

    /// Joins a socket; its id and a receiver that changes when it must leave.
    /// The recording is kept where the edge agent is: it starts here (if
    /// the session is ACTIVE) when the edge agent joins here.
    pub fn join(&self, side: &Side, tx: mpsc::Sender<Message>, recorder: &Recorder, now: i64) -> (u64, watch::Receiver<bool>) {
        let id = self.next_peer.fetch_add(1, Ordering::Relaxed);
        match side {
            // A reconnecting edge agent replaces the old socket (whose sends then fail).
            Side::Robot => {
                let arrived = self.robot.lock().expect("relay lock").replace((id, tx)).is_none();
                if arrived && self.records() {
                    recorder.push(&self.session_id, Sample::Resume { t_ms: now });
                }
            }
            Side::Cockpit(operator_id) => self.cockpits.lock().expect("relay lock").push(Peer { id, operator_id: operator_id.clone(), name: String::new(), tx }),
            Side::Supervisor { admin_id, name } => {
                self.supervisors.lock().expect("relay lock").push(Peer { id, operator_id: admin_id.clone(), name: name.clone(), tx })
            }
        }
        (id, self.closed.subscribe())
    }

    /// A socket left; an edge agent leaving pauses the recording until it
    /// is back (on another instance, the recording is handed off to it:
    /// `Relay::update_elsewhere`).
    pub fn leave(&self, side: &Side, id: u64, recorder: &Recorder, now: i64) {
        match side {
            Side::Robot => {
                let recorded = self.records();
                let mut robot = self.robot.lock().expect("relay lock");
                if robot.as_ref().is_some_and(|(current, _)| *current == id) {
                    *robot = None;
                    drop(robot);
                    if recorded {
                        recorder.push(&self.session_id, Sample::Pause { t_ms: now });
                    }
                }
            }
            Side::Cockpit(_) => self.cockpits.lock().expect("relay lock").retain(|p| p.id != id),
            Side::Supervisor { .. } => self.supervisors.lock().expect("relay lock").retain(|p| p.id != id),
        }
    }

    /// Whether this instance holds the edge agent's socket.
    pub fn has_robot(&self) -> bool {
        self.robot.lock().expect("relay lock").is_some()
    }

    /// Whether this instance holds a cockpit socket.
    pub fn has_cockpits(&self) -> bool {
        !self.cockpits.lock().expect("relay lock").is_empty()
    }

    /// Which sides are here now.
    pub fn sides_here(&self) -> SidesHere {
        SidesHere { robot: self.has_robot(), cockpits: self.has_cockpits(), supervisors: !self.supervisors.lock().expect("relay lock").is_empty() }
    }

    /// What other instances hold of the channel (nothing on one instance).
    fn elsewhere(&self) -> super::link::Elsewhere {
        self.link.as_ref().map(ChannelLink::elsewhere).unwrap_or_default()
    }

    /// Whether `operator_id` is in control (may hold a cockpit socket).
    pub fn controls(&self, operator_id: &str) -> bool {
        self.operator_id.lock().expect("relay lock").as_deref() == Some(operator_id)
    }

    /// ACTIVE (recorded, taking control input), as opposed to PAUSED.
    pub fn is_active(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// Whether frames are recorded here now: ACTIVE, not closed (a frame
    /// racing the session's end must not start its recording again), and
    /// the edge agent is here (a session is recorded once, where its robot is).
    fn records(&self) -> bool {
        self.recording.load(Ordering::Relaxed) && !self.is_closed() && self.has_robot()
    }

    /// Whether the session is recording as far as the channel knows (ACTIVE).
    #[cfg(test)]
    pub(super) fn recording_on(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// A robot frame from the edge agent: counted, sent to each cockpit
    /// that keeps up, recorded while ACTIVE.
    pub fn from_robot(&self, message: Message, bytes: usize, sample: Option<Sample>, recorder: &Recorder, now: i64) {
        if !self.up.admit(bytes) {
            return;
        }
        self.up.count(bytes, now);
        if let Some(link) = self.link.as_ref().filter(|_| {
            let elsewhere = self.elsewhere();
            elsewhere.cockpits + elsewhere.supervisors > 0
        }) {
            if !link.send(Direction::Up, &message) {
                self.up.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.to_cockpits(message);
        if let Some(sample) = sample.filter(|_| self.records()) {
            recorder.push(&self.session_id, sample);
        }
    }

    /// A robot frame from an edge agent on another instance (counted and
    /// capped there): to each cockpit and live view here, within this
    /// instance's cap too, so a robot token's sockets on several instances
    /// send a cockpit no more than one socket may (what is held back here
    /// is counted here).
    pub fn from_robot_elsewhere(&self, message: Message) {
        if self.up.admit(frame_bytes(&message)) {
            self.to_cockpits(message);
        }
    }

    /// A robot frame to each cockpit and live view here that keeps up
    /// (from this instance's edge agent, or from another instance's).
    pub fn to_cockpits(&self, message: Message) {
        let cockpits = self.cockpits.lock().expect("relay lock");
        for peer in cockpits.iter() {
            if peer.tx.try_send(message.clone()).is_err() {
                self.up.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(cockpits);
        self.to_supervisors(&message);
    }

    /// A copy to each live view that keeps up (one per watching admin;
    /// a full queue drops it, counted like a cockpit's).
    pub fn to_supervisors(&self, message: &Message) {
        for peer in self.supervisors.lock().expect("relay lock").iter() {
            if peer.tx.try_send(message.clone()).is_err() {
                self.up.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// An operator action from a cockpit on another instance (checked,
    /// counted and rate-capped there): to the edge agent here, within this
    /// instance's cap too (an operator's cockpits on several instances send
    /// the robot no more than one may), and recorded here. Not while
    /// PAUSED as this instance knows it (rule L03): the instances hear a
    /// pause at slightly different times.
    pub fn from_operator_elsewhere(&self, message: Message, recorder: &Recorder, now: i64) {
        if !self.down.admit(frame_bytes(&message)) {
            return;
        }
        let sample = match &message {
            Message::Text(text) => match serde_json::from_str(text) {
                Ok(domain::relay::RelayMsg::Action { values, .. }) if (1..=MAX_VECTOR).contains(&values.len()) => Sample::Action { t_ms: now, values },
                _ => return,
            },
            _ => return,
        };
        if !self.is_active() {
            return;
        }
        // (Live views here got the action on `watch`, not from here.)
        self.to_robot(message);
        if self.records() {
            recorder.push(&self.session_id, sample);
        }
    }

    /// An action to the edge agent here; false when there is none here.
    fn to_robot(&self, message: Message) -> bool {
        let sent = self.robot.lock().expect("relay lock").as_ref().map(|(_, tx)| tx.try_send(message).is_ok());
        if sent == Some(false) {
            self.down.dropped.fetch_add(1, Ordering::Relaxed);
        }
        sent.is_some()
    }

    /// An operator action: counted, sent to the edge agent, recorded while
    /// ACTIVE. True when the engine should be told of the input (at most
    /// every `INPUT_REPORT_MS`: a 30 Hz stream of actions is not 30 notes).
    pub fn from_operator(&self, message: Message, bytes: usize, sample: Sample, recorder: &Recorder, now: i64) -> bool {
        if !self.down.admit(bytes) {
            return false;
        }
        self.down.count(bytes, now);
        let recorded = self.records();
        // Live views see the operator's actions as they happen: here, and
        // on the instances where admins watch.
        self.to_supervisors(&message);
        if let Some(link) = self.link.as_ref().filter(|_| self.elsewhere().supervisors > 0) {
            let _ = link.send(Direction::Watch, &message);
        }
        if !self.to_robot(message.clone()) {
            if let Some(link) = self.link.as_ref().filter(|_| self.elsewhere().robot) {
                if !link.send(Direction::Down, &message) {
                    self.down.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if recorded {
            recorder.push(&self.session_id, sample);
        }
        let last = self.input_reported_ms.load(Ordering::Relaxed);
        now - last >= INPUT_REPORT_MS && self.input_reported_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// The admins watching the live view on this instance, by name, sorted, once each.
    pub fn watching_here(&self) -> Vec<String> {
        let mut names: Vec<String> = self.supervisors.lock().expect("relay lock").iter().map(|p| p.name.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    /// Tells every socket here who is on the channel (here and elsewhere).
    pub fn announce(&self) {
        let robot = self.robot.lock().expect("relay lock").as_ref().map(|(_, tx)| tx.clone());
        let cockpits: Vec<mpsc::Sender<Message>> = self.cockpits.lock().expect("relay lock").iter().map(|p| p.tx.clone()).collect();
        let (watchers, mut watching): (Vec<mpsc::Sender<Message>>, Vec<String>) =
            self.supervisors.lock().expect("relay lock").iter().map(|p| (p.tx.clone(), p.name.clone())).unzip();
        // And those watching on other instances (cluster mode).
        watching.extend(self.link.as_ref().map(ChannelLink::watching_elsewhere).unwrap_or_default());
        watching.sort();
        watching.dedup();
        let elsewhere = self.elsewhere();
        let (robot_here, cockpits_now) = (robot.is_some() || elsewhere.robot, cockpits.len() as u32 + elsewhere.cockpits);
        let peers = |watching: Vec<String>| {
            let text = serde_json::to_string(&domain::relay::RelayMsg::Peers { robot: robot_here, cockpits: cockpits_now, watching }).unwrap_or_default();
            Message::Text(text.into())
        };
        // The edge agent is not told who watches (people's names stay off the robot).
        if let Some(tx) = &robot {
            let _ = tx.try_send(peers(Vec::new()));
        }
        let told = peers(watching);
        for tx in cockpits.iter().chain(watchers.iter()) {
            let _ = tx.try_send(told.clone());
        }
    }

    /// Control moved (a handover): cockpits of anyone else leave, and the
    /// recording notes the switch.
    pub fn set_operator(&self, operator_id: Option<&str>, recorder: &Recorder, now: i64) {
        let mut current = self.operator_id.lock().expect("relay lock");
        if current.as_deref() == operator_id {
            return;
        }
        *current = operator_id.map(str::to_string);
        drop(current);
        // Dropping their senders ends their writers; their readers see the socket close.
        self.cockpits.lock().expect("relay lock").retain(|p| Some(p.operator_id.as_str()) == operator_id);
        // Wakes every socket to check it still belongs here.
        self.closed.send_modify(|_| {});
        // Where the session is recorded (its edge agent may be away a moment).
        if self.has_robot() || recorder.holds(&self.session_id) {
            recorder.push(&self.session_id, Sample::Switch { t_ms: now, operator_id: operator_id.map(str::to_string) });
        }
        self.announce();
    }

    /// A joining socket's read of the session (`active`: it records),
    /// taken until a lifecycle event has reached the channel: a read may
    /// predate a pause or resume the channel has heard, and an event sent
    /// before the channel existed is never heard (the next join's read
    /// brings it).
    pub fn take_read(&self, active: bool, recorder: &Recorder, now: i64) {
        let heard = self.heard_lifecycle.lock().expect("relay lock");
        if !*heard {
            self.set_recording(active, recorder, now);
        }
    }

    /// A lifecycle event: ACTIVE records, PAUSED does not.
    pub fn hear_lifecycle(&self, active: bool, recorder: &Recorder, now: i64) {
        let mut heard = self.heard_lifecycle.lock().expect("relay lock");
        *heard = true;
        self.set_recording(active, recorder, now);
    }

    /// ACTIVE records; PAUSED (and before the start) does not.
    fn set_recording(&self, on: bool, recorder: &Recorder, now: i64) {
        if self.recording.swap(on, Ordering::Relaxed) != on && self.has_robot() && !self.is_closed() {
            recorder.push(&self.session_id, if on { Sample::Resume { t_ms: now } } else { Sample::Pause { t_ms: now } });
        }
    }

    /// The counts now; `advance` (the periodic count) starts the next rate
    /// interval. (`unrecorded` is the recorder's to fill in.)
    pub fn stat(&self, now: i64, advance: bool) -> RelayStat {
        RelayStat {
            session_id: self.session_id.clone(),
            robot_id: self.robot_id.clone(),
            robot_connected: self.robot.lock().expect("relay lock").is_some(),
            cockpits: self.cockpits.lock().expect("relay lock").len() as u32,
            supervisors: self.supervisors.lock().expect("relay lock").len() as u32,
            robot_frames: self.up.stat(now, advance),
            operator_frames: self.down.stat(now, advance),
            open_since_ms: self.open_since_ms,
            unrecorded: 0,
        }
    }
}

/// A frame's payload, as the caps count it.
pub(super) fn frame_bytes(message: &Message) -> usize {
    match message {
        Message::Text(text) => text.len(),
        Message::Binary(data) => data.len(),
        Message::Ping(_) | Message::Pong(_) | Message::Close(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_fps: u32, max_kib_per_s: u32) -> RelayLimits {
        RelayLimits { max_fps, max_kib_per_s, recording_max_bytes: u64::MAX }
    }

    #[test]
    fn s09_a_direction_carries_a_seconds_worth_of_frames_and_of_bytes() {
        let bytes = Flow::new(limits(100, 8));
        assert!(bytes.admit(4096) && bytes.admit(4096));
        assert!(!bytes.admit(4096), "8 KiB a second: a third 4 KiB frame is held back");
        assert_eq!(bytes.over_rate.load(Ordering::Relaxed), 1, "and counted");
        let frames = Flow::new(limits(2, 1024));
        assert!(frames.admit(10) && frames.admit(10) && !frames.admit(10), "two frames a second");
        assert!(!Flow::new(limits(100, 8)).admit(16 * 1024), "a frame larger than a second's bytes never passes");
    }

    /// A joining socket's read sets whether the session records until a
    /// lifecycle event has reached the channel; after that, only events.
    #[test]
    fn a_read_counts_until_the_channel_hears_a_lifecycle_event() {
        let dir = std::env::temp_dir().join(format!("cc-channel-{}", uuid::Uuid::now_v7().simple()));
        let (finished, _) = tokio::sync::mpsc::unbounded_channel();
        let recorder = Recorder::start(dir.clone(), finished, u64::MAX).unwrap();
        let channel = Channel::new("org", "ses", "robot", Some("op"), 0, limits(30, 512), None);
        channel.take_read(false, &recorder, 1);
        assert!(!channel.is_active(), "read PAUSED");
        channel.take_read(true, &recorder, 2);
        assert!(channel.is_active(), "a later join's read brings a resume the channel never heard");
        channel.hear_lifecycle(false, &recorder, 3);
        channel.take_read(true, &recorder, 4);
        assert!(!channel.is_active(), "a read older than the pause the channel heard does not undo it");
        channel.hear_lifecycle(true, &recorder, 5);
        assert!(channel.is_active());
        let _ = std::fs::remove_dir_all(dir);
    }
}
