//! The relay across instances (cluster mode): a session's edge agent may
//! be connected to one instance and its cockpit to another.
//!
//! - **Frames.** Robot → cockpit travel on `clutchcall.<cluster>.relay.
//!   <session>.up`, cockpit → robot on `….down`. An instance listens to
//!   `up` while it holds a cockpit of the session and to `down` while it
//!   holds its edge agent, and sends only while another instance holds
//!   the other side. Sends never wait: a frame the NATS client cannot take
//!   at once (its queue to the server is full) is dropped, counted like a
//!   slow socket's. (No queue or task of the channel's own: each hop is a
//!   task to wake, and under load each costs milliseconds.)
//!   Rate caps are applied where a frame comes in; recording happens on
//!   the instance that holds the edge agent, so a session is recorded once.
//! - **Reports.** Each instance tells the others the parts of channels it
//!   carries (its sockets and counts), every second and at once when a
//!   socket joins or leaves. So every instance knows each whole channel:
//!   who is on it (the `Peers` its sockets are told) and its counts (the
//!   relay panel, `domain::relay::merge_stats`). The org's panel hears the
//!   whole from one instance: the lowest-named one carrying a part of it.
//!
//! The link has its own NATS connection, without echo: an instance never
//! hears its own frames back, and camera frames never queue in front of
//! the engine's requests and events on the bus's connection.

use crate::bus::nats::token;
use crate::task::OwnedTask;
use axum::extract::ws::Message;
use domain::relay::{RelayStat, STATS_EVERY_MS};
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Another instance's report stands this long without a newer one; then
/// that instance is taken to be gone, with its sockets.
pub const REPORT_KEPT: Duration = Duration::from_millis(3 * STATS_EVERY_MS as u64);
/// A report older than this (the next one late) has its instance asked
/// whether it is still there (`RelayLink::is_gone`): one killed is gone
/// then, not a `REPORT_KEPT` after its last report. (Early enough that the
/// asking, which may take one tick to begin and two asks to end, is done
/// well before the report would lapse; a live instance a moment late only
/// answers.)
pub const REPORT_DOUBTED: Duration = Duration::from_millis(6 * STATS_EVERY_MS as u64 / 5);
/// How long a report or a new subscription may wait for NATS before it is
/// given up (the next report, a second later, tells the same).
const NATS_WAIT: Duration = Duration::from_millis(500);
/// An instance NATS says nobody listens for is asked once more this much
/// later (`RelayLink::is_gone`).
const ASKED_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// Which way a frame travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Robot → cockpit.
    Up,
    /// Cockpit → robot.
    Down,
    /// Cockpit → live views (a copy of each action, for the instances
    /// where admins watch; never to a robot).
    Watch,
}

impl Direction {
    const ALL: [Direction; 3] = [Direction::Up, Direction::Down, Direction::Watch];

    /// Its place in a channel's per-direction arrays.
    fn index(self) -> usize {
        self as usize
    }
}

/// Which sides of a channel this instance holds sockets of (what it listens for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SidesHere {
    pub robot: bool,
    pub cockpits: bool,
    /// Live views.
    pub supervisors: bool,
}

/// What other instances hold of a channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elsewhere {
    pub robot: bool,
    pub cockpits: u32,
    /// Live views (they hear the robot's frames too).
    pub supervisors: u32,
}

/// One part of a channel, as the instance carrying it reports it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Part {
    pub org_id: String,
    pub stat: RelayStat,
    /// The names of the admins watching its live view on that instance
    /// (for the cockpits' "Dana is watching" on every instance).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watching: Vec<String>,
}

/// Everything one instance carries, sent to the others.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub publisher: String,
    pub parts: Vec<Part>,
}

/// The cluster's relay connection.
pub struct RelayLink {
    client: async_nats::Client,
    /// `clutchcall.<cluster>.relay`.
    prefix: String,
    /// This run of this instance (as on the bus).
    publisher: String,
    /// Said farewell (`farewell`): it reports nothing more. A report holds
    /// it to read while it is sent, so the farewell (which writes it) is
    /// sent after every report begun before it, and none after.
    gone: tokio::sync::RwLock<bool>,
    /// Answers the others that this instance is there (`is_gone`), from
    /// the connection until the farewell (or the link's end).
    answering: Mutex<Option<OwnedTask>>,
}

impl RelayLink {
    /// Connects to NATS at `url` for the relay of `publisher` (this run of
    /// this instance) in `cluster` (`Store::cluster_id`).
    pub async fn connect(url: &str, publisher: &str, cluster: &str) -> Result<Arc<RelayLink>, async_nats::ConnectError> {
        let client = async_nats::ConnectOptions::new().name(format!("{publisher} relay")).no_echo().connect(url).await?;
        let prefix = format!("clutchcall.{cluster}.relay");
        let answering = OwnedTask::spawn(answer_here(client.clone(), here_subject(&prefix, publisher)));
        Ok(Arc::new(RelayLink { client, prefix, publisher: publisher.to_string(), gone: Default::default(), answering: Mutex::new(Some(answering)) }))
    }

    pub fn publisher(&self) -> &str {
        &self.publisher
    }

    fn frames_subject(&self, session_id: &str, direction: Direction) -> String {
        let way = match direction {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Watch => "watch",
        };
        format!("{}.{}.{way}", self.prefix, token(session_id))
    }

    fn reports_subject(&self) -> String {
        format!("{}.reports", self.prefix)
    }

    /// Whether `publisher`'s link is gone from NATS: asked, NATS itself
    /// answers that nobody listens (a process killed has its connection
    /// closed by its kernel, and its subscriptions go with it). Not when
    /// it answers, nor when nothing answers in time (a paused or slow
    /// instance, or NATS: its report then stands its while). Asked twice,
    /// `ASKED_AGAIN_AFTER` apart: a live instance's link that NATS just
    /// cut off (a slow consumer, say) has no subscription until it has
    /// connected again and subscribed anew.
    pub async fn is_gone(&self, publisher: &str) -> bool {
        for asked in 0..2 {
            if asked > 0 {
                tokio::time::sleep(ASKED_AGAIN_AFTER).await;
            }
            // (An inbox of its own: a request that times out on the
            // client's shared one stays in its map of requests for good.)
            let request = async_nats::Request::new().timeout(Some(NATS_WAIT)).inbox(self.client.new_inbox());
            // (Bounded besides, should the client not take the request.)
            let answered = tokio::time::timeout(2 * NATS_WAIT, self.client.send_request(here_subject(&self.prefix, publisher), request)).await;
            if !matches!(answered, Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders) {
                return false;
            }
        }
        true
    }

    /// Tells the other instances what this one carries (nothing more
    /// once it said farewell).
    pub async fn report(&self, parts: Vec<Part>) {
        let gone = self.gone.read().await;
        if !*gone {
            self.send_report(parts).await;
        }
    }

    /// The instance stops: the others hear at once that it carries
    /// nothing (else its last report would stand `REPORT_KEPT`, its robots
    /// and cockpits counted twice as they reconnect elsewhere, and its
    /// edge agents told to cockpits as still there), and it reports no
    /// more. Its sockets have closed by now (`Relay::farewell`); what could
    /// still report is a socket upgraded by a request in flight, or a
    /// report `moved` spawned, and either would tell its part again.
    pub async fn farewell(&self) {
        let mut gone = self.gone.write().await;
        *gone = true;
        self.send_report(Vec::new()).await;
        // Read by NATS, not only written to this machine's socket (which
        // the process's exit may reset with it unsent). Bounded.
        if crate::bus::nats::settled(&self.client).await.is_err() {
            tracing::warn!("NATS did not confirm the relay's farewell");
        }
        // Answered until now: its sockets were closing meanwhile (up to
        // `SOCKETS_CLOSE_WITHIN`), still reported by its last report.
        drop(self.answering.lock().expect("relay link lock").take());
    }

    async fn send_report(&self, parts: Vec<Part>) {
        let report = Report { publisher: self.publisher.clone(), parts };
        match serde_json::to_vec(&report) {
            Ok(payload) => match tokio::time::timeout(NATS_WAIT, self.client.publish(self.reports_subject(), payload.into())).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "a relay report could not be sent: other instances may not see this one's relay sockets"),
                Err(_) => tracing::warn!("NATS took too long to take a relay report"),
            },
            Err(e) => tracing::error!(error = %e, "a relay report could not be written"),
        }
    }

    /// Every other instance's reports, as they come, until `on_report` says stop.
    pub async fn hear_reports(&self, mut on_report: impl FnMut(Report) -> bool) {
        let mut reports = match self.client.subscribe(self.reports_subject()).await {
            Ok(reports) => reports,
            Err(e) => {
                tracing::error!(error = %e, "cannot hear other instances' relay reports: sessions split over instances carry no frames");
                return;
            }
        };
        while let Some(message) = reports.next().await {
            match serde_json::from_slice::<Report>(&message.payload) {
                Ok(report) => {
                    if !on_report(report) {
                        return;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "a relay report could not be read"),
            }
        }
    }
}

/// Where `publisher`'s link answers that it is there, under `prefix`
/// (`clutchcall.<cluster>.relay`).
fn here_subject(prefix: &str, publisher: &str) -> String {
    format!("{prefix}.here.{}", token(publisher))
}

/// Answers every request on `subject` (the instance's own, `here_subject`)
/// at once, with nothing, for as long as `client` lives (NATS subscribes it
/// again after each reconnect): the others know it is there
/// (`RelayLink::is_gone`).
async fn answer_here(client: async_nats::Client, subject: String) {
    // (A subscription fails only for good: a subject NATS refuses, or a
    // client already closed.)
    let mut asked = match client.subscribe(subject).await {
        Ok(asked) => asked,
        Err(e) => {
            tracing::error!(error = %e, "cannot answer other instances that ask whether this one is there: they take it as gone once its relay report is late");
            return;
        }
    };
    while let Some(message) = asked.next().await {
        if let Some(reply) = message.reply {
            let _ = client.publish(reply, bytes::Bytes::new()).await;
        }
    }
}

/// A frame as a NATS payload: its kind (`t`ext or `b`inary) in the first
/// byte, then its bytes.
fn encode(message: &Message) -> Option<bytes::Bytes> {
    let (kind, data): (u8, &[u8]) = match message {
        Message::Text(text) => (b't', text.as_bytes()),
        Message::Binary(data) => (b'b', data),
        _ => return None,
    };
    let mut payload = Vec::with_capacity(1 + data.len());
    payload.push(kind);
    payload.extend_from_slice(data);
    Some(payload.into())
}

fn decode(payload: &bytes::Bytes) -> Option<Message> {
    match payload.first()? {
        b't' => Some(Message::Text(std::str::from_utf8(&payload[1..]).ok()?.to_string().into())),
        b'b' => Some(Message::Binary(payload.slice(1..))),
        _ => None,
    }
}

/// Where frames from other instances go: the hub, which finds the channel.
pub trait Arrivals: Send + Sync + 'static {
    fn arrived(&self, session_id: &str, direction: Direction, message: Message);
}

/// One channel's way to the other instances.
pub struct ChannelLink {
    link: Arc<RelayLink>,
    session_id: String,
    /// The subject of each direction (`Direction::index`).
    subjects: [async_nats::Subject; 3],
    /// Listening to each direction: `up` while a cockpit or a live view is
    /// here, `down` while the robot is, `watch` while a live view is.
    listening: [Mutex<Option<OwnedTask>>; 3],
    elsewhere: Mutex<Elsewhere>,
    /// Who watches its live view on other instances, by name, sorted
    /// (apart from `elsewhere`, which every frame reads).
    watching: Mutex<Vec<String>>,
}

impl ChannelLink {
    pub fn new(link: Arc<RelayLink>, session_id: &str) -> ChannelLink {
        let subjects = Direction::ALL.map(|direction| link.frames_subject(session_id, direction).into());
        ChannelLink { link, session_id: session_id.to_string(), subjects, listening: Default::default(), elsewhere: Mutex::default(), watching: Mutex::default() }
    }

    /// What other instances hold of the channel.
    pub fn elsewhere(&self) -> Elsewhere {
        *self.elsewhere.lock().expect("link lock")
    }

    /// Who watches the live view on other instances, by name.
    pub fn watching_elsewhere(&self) -> Vec<String> {
        self.watching.lock().expect("link lock").clone()
    }

    /// Whether what other instances hold, or who watches there, changed.
    pub fn set_elsewhere(&self, now: Elsewhere, watching: Vec<String>) -> bool {
        // Both under their locks at once (always in this order): two
        // reports applied together never leave one half of each.
        let (mut held, mut names) = (self.elsewhere.lock().expect("link lock"), self.watching.lock().expect("link lock"));
        let changed = *held != now || *names != watching;
        *held = now;
        *names = watching;
        changed
    }

    /// Hands a frame to NATS for the other side's instance; false when the
    /// client cannot take it now and it is dropped.
    pub fn send(&self, direction: Direction, message: &Message) -> bool {
        let Some(payload) = encode(message) else { return true };
        let subject = &self.subjects[direction.index()];
        // The publish only waits when the client's queue is full: polled
        // once, it is taken or it is not. (Unconstrained: tokio's budget for
        // a busy socket task must not make a queue with room look full.)
        match tokio::task::unconstrained(self.link.client.publish(subject.clone(), payload)).now_or_never() {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                tracing::debug!(session = %self.session_id, error = %e, "NATS refused a relay frame");
                false
            }
            None => false,
        }
    }

    /// Listens to the frames this instance's sockets of the channel need:
    /// robot frames while a cockpit or a live view is here, actions while
    /// the robot is, copies of actions while a live view is (`here` says,
    /// each time it is asked, which sides are). A new subscription is live
    /// on the server when this returns (unless NATS did not confirm it in
    /// `NATS_WAIT`, logged), so the report sent next cannot bring frames
    /// before it.
    pub async fn listen_for(&self, here: impl Fn() -> SidesHere, arrivals: Weak<dyn Arrivals>) {
        for direction in Direction::ALL {
            let wanted = || {
                let sides = here();
                match direction {
                    Direction::Up => sides.cockpits || sides.supervisors,
                    Direction::Down => sides.robot,
                    Direction::Watch => sides.supervisors,
                }
            };
            let listening = self.slot(direction).lock().expect("link lock").is_some();
            match (wanted(), listening) {
                (true, false) => {
                    let client = &self.link.client;
                    let frames = match tokio::time::timeout(NATS_WAIT, client.subscribe(self.subjects[direction.index()].clone())).await {
                        Ok(Ok(frames)) => frames,
                        Ok(Err(e)) => {
                            tracing::warn!(session = %self.session_id, error = %e, "cannot listen for this session's frames from other instances");
                            continue;
                        }
                        Err(_) => {
                            tracing::warn!(session = %self.session_id, "NATS took too long to take a subscription to this session's frames");
                            continue;
                        }
                    };
                    // Frames sent once the server has the subscription are heard.
                    if !matches!(tokio::time::timeout(NATS_WAIT, crate::bus::nats::settled(client)).await, Ok(Ok(()))) {
                        tracing::warn!(session = %self.session_id, "NATS did not confirm a subscription to this session's frames: the first may be lost");
                    }
                    let task = OwnedTask::spawn(hear_frames(frames, self.session_id.clone(), direction, arrivals.clone()));
                    let mut slot = self.slot(direction).lock().expect("link lock");
                    // (Another join may have got there first, or the
                    // socket left meanwhile: then this one is dropped.)
                    if slot.is_none() && wanted() {
                        *slot = Some(task);
                    }
                }
                (false, true) => *self.slot(direction).lock().expect("link lock") = None,
                _ => {}
            }
        }
    }

    fn slot(&self, direction: Direction) -> &Mutex<Option<OwnedTask>> {
        &self.listening[direction.index()]
    }
}

/// Frames of one direction of a session from other instances, to the hub.
async fn hear_frames(mut frames: async_nats::Subscriber, session_id: String, direction: Direction, arrivals: Weak<dyn Arrivals>) {
    while let Some(frame) = frames.next().await {
        let Some(arrivals) = arrivals.upgrade() else { return };
        if let Some(message) = decode(&frame.payload) {
            arrivals.arrived(&session_id, direction, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_as_they_left() {
        let text = Message::Text(r#"{"type":"action","t_ms":1,"values":[0.5]}"#.into());
        let binary = Message::Binary(domain::relay::CameraFrame { name: "wrist".into(), t_ms: 7, jpeg: vec![0xFF, 0xD8, 0] }.encode().into());
        for message in [text, binary] {
            assert_eq!(decode(&encode(&message).unwrap()), Some(message));
        }
        assert_eq!(encode(&Message::Ping(Default::default())), None, "control frames stay on their socket");
        assert_eq!(decode(&bytes::Bytes::from_static(b"x{}")), None);
    }
}
