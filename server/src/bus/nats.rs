//! The event bus between instances (cluster mode, `CLUTCHCALL_NATS_URL`):
//! every topic is a NATS subject, and an instance subscribes to a subject
//! only while one of its own sockets listens to the topic, fanning what
//! arrives out to them through an `InProcessBus`. Its own events come back
//! to it through NATS too, so every instance sees a topic in one order.
//!
//! NATS core delivers at most once. Every message therefore carries its
//! publisher (this run of an instance) and that publisher's sequence number
//! on the topic; a subscriber that sees a publisher skip a number gets
//! `Resync`, as do all of them when the connection to NATS dropped or the
//! server reported this client too slow (never silence). A topic's first
//! local subscriber also gets one `Resync` once its NATS subscription is
//! live: events published before that could not reach it, so it reloads.

use super::{EventBus, InProcessBus, Subscription};
use domain::events::{Event, Topic};
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// Header naming a message's publisher (`instance/boot`).
pub const PUBLISHER: &str = "CC-Publisher";
/// Header with the publisher's sequence number on the topic (from 1).
const SEQUENCE: &str = "CC-Seq";
/// Header of a tally (`NatsBus::tally`): the last number the publisher
/// sent on the subject.
const SENT: &str = "CC-Sent";
/// A subject nobody here listens to any more is given up within this.
const IDLE_CHECK: Duration = Duration::from_secs(30);
/// Messages waiting for NATS before new ones are dropped.
const OUTBOX: usize = 65_536;

/// An id as one token of a subject. Ids keep letters, digits, `-` and
/// `_`; anything else (a `.`, `*` or `>` would change the subject's
/// meaning) is written `~xx` in hex.
pub fn token(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => out.push(byte as char),
            other => out.push_str(&format!("~{other:02x}")),
        }
    }
    out
}

/// A topic's subject in `cluster` (the database's cluster id: instances
/// on other databases never share it): `clutchcall.<cluster>.org.<org>` or
/// `clutchcall.<cluster>.op.<org>.<operator>`.
pub fn subject(cluster: &str, topic: &Topic) -> String {
    match topic {
        Topic::Org { org_id } => format!("clutchcall.{cluster}.org.{}", token(org_id)),
        Topic::Operator { org_id, operator_id } => format!("clutchcall.{cluster}.op.{}.{}", token(org_id), token(operator_id)),
    }
}

/// Where each publisher stood on one topic, as this subscriber heard it.
#[derive(Default)]
pub struct Heard {
    last: HashMap<String, u64>,
}

impl Heard {
    /// Whether `seq` from `publisher` follows what was heard from it (the
    /// first message heard from a publisher starts its count).
    pub fn follows(&mut self, publisher: &str, seq: u64) -> bool {
        match self.last.insert(publisher.to_string(), seq) {
            Some(last) => seq == last + 1,
            None => true,
        }
    }

    /// As `follows`, where the first message heard from a publisher must be
    /// its first (number 1): for a subject heard from the start.
    pub fn follows_from_one(&mut self, publisher: &str, seq: u64) -> bool {
        match self.last.insert(publisher.to_string(), seq) {
            Some(last) => seq == last + 1,
            None => seq == 1,
        }
    }

    /// Whether a publisher's tally (the last number it sent, heard after
    /// all it sent before) shows something it sent was not heard; either
    /// way its count goes on from there.
    pub fn missed_by_tally(&mut self, publisher: &str, sent: u64) -> bool {
        let heard = self.last.get(publisher).copied().unwrap_or(0);
        if sent > heard {
            self.last.insert(publisher.to_string(), sent);
        }
        heard < sent
    }
}

pub struct NatsBus {
    /// Itself, for the relay tasks it starts.
    me: Weak<NatsBus>,
    client: async_nats::Client,
    /// This run of this instance, on every message it publishes.
    publisher: String,
    /// The cluster's id (`Store::cluster_id`), in every subject.
    cluster: String,
    /// The local fan-out: sockets of this instance subscribe here.
    local: Arc<InProcessBus>,
    /// Topics with a live NATS subscription (a task relaying it here).
    relayed: Mutex<HashMap<Topic, tokio::task::JoinHandle<()>>>,
    /// Relayed topics whose NATS subscription is live.
    live: Mutex<std::collections::HashSet<Topic>>,
    /// This publisher's sequence number per topic.
    sequences: Mutex<HashMap<Topic, u64>>,
    /// This publisher's sequence number per cluster subject (`send`).
    sent: Mutex<HashMap<String, u64>>,
    /// Counts the times messages to this instance may have been lost (the
    /// connection came back, or NATS found this instance too slow): what
    /// only hears NATS (revocations) reconciles with the store then.
    losses: tokio::sync::watch::Sender<u64>,
    /// Publishing never blocks the caller: one task sends, in order; past
    /// `OUTBOX` waiting messages (NATS away) new ones are dropped.
    outbox: mpsc::Sender<(String, async_nats::HeaderMap, bytes::Bytes)>,
}

impl NatsBus {
    /// Connects to NATS at `url`; `publisher` names this run of this
    /// instance, `cluster` the instances it is one of (`Store::cluster_id`).
    /// A NATS that cannot be reached is an error here, at start; later
    /// outages are ridden out by the client's reconnects (and every
    /// subscriber is told to resync after one).
    pub async fn connect(url: &str, publisher: &str, cluster: &str) -> Result<Arc<NatsBus>, async_nats::ConnectError> {
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let client = async_nats::ConnectOptions::new()
            .name(publisher)
            .event_callback(move |event| {
                let events_tx = events_tx.clone();
                async move {
                    let _ = events_tx.send(event);
                }
            })
            .connect(url)
            .await?;
        let (outbox, mut outgoing) = mpsc::channel::<(String, async_nats::HeaderMap, bytes::Bytes)>(OUTBOX);
        let bus = Arc::new_cyclic(|me| NatsBus {
            me: me.clone(),
            client: client.clone(),
            publisher: publisher.to_string(),
            cluster: cluster.to_string(),
            local: InProcessBus::new(),
            relayed: Mutex::default(),
            live: Mutex::default(),
            sequences: Mutex::default(),
            sent: Mutex::default(),
            losses: tokio::sync::watch::Sender::new(0),
            outbox,
        });
        tokio::spawn(async move {
            while let Some((subject, headers, payload)) = outgoing.recv().await {
                if let Err(e) = client.publish_with_headers(subject, headers, payload).await {
                    // Lost: its subscribers see the gap in the sequence and resync.
                    tracing::warn!(error = %e, "an event could not be published to NATS");
                }
            }
        });
        let weak = Arc::downgrade(&bus);
        tokio::spawn(async move {
            // The first `Connected` is the connection made above.
            let mut lost = false;
            while let Some(event) = events_rx.recv().await {
                let Some(bus) = weak.upgrade() else { return };
                match event {
                    async_nats::Event::Connected if lost => {
                        tracing::info!("NATS connection back: every live screen resyncs");
                        lost = false;
                        bus.resync_all();
                        bus.losses.send_modify(|n| *n += 1);
                    }
                    async_nats::Event::Disconnected => {
                        tracing::warn!("NATS connection lost; reconnecting");
                        lost = true;
                    }
                    async_nats::Event::SlowConsumer(_) => {
                        tracing::warn!("NATS dropped messages for this slow instance: every live screen resyncs");
                        bus.resync_all();
                        bus.losses.send_modify(|n| *n += 1);
                    }
                    other => tracing::debug!(event = %other, "NATS"),
                }
            }
        });
        Ok(bus)
    }

    /// This run of this instance, as its messages name it.
    pub fn publisher(&self) -> &str {
        &self.publisher
    }

    /// The connection, for the other things instances tell each other (`crate::cluster`).
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// One of the cluster's other subjects: `clutchcall.<cluster>.<name>`.
    pub fn cluster_subject(&self, name: &str) -> String {
        format!("clutchcall.{}.{name}", self.cluster)
    }

    /// Sends `payload` on `subject`, signed with this publisher and
    /// numbered per subject like a topic's events (so a listener that
    /// misses one knows: `Heard::follows` on `sender_seq`), in order with
    /// everything else this instance publishes; never blocks.
    pub fn send(&self, subject: &str, payload: Vec<u8>) {
        // Numbered and queued under one lock, as `publish` does.
        let mut sent = self.sent.lock().expect("sent lock");
        let seq = sent.entry(subject.to_string()).or_insert(0);
        *seq += 1;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(SEQUENCE, seq.to_string().as_str());
        self.enqueue(subject.to_string(), headers, payload);
    }

    /// Sends, on `subject`, the last number `send` gave a message there (a
    /// tally, itself unnumbered, in order after them): a listener that
    /// missed the publisher's last message learns it from this, where
    /// otherwise only the publisher's next message would tell it.
    pub fn tally(&self, subject: &str) {
        let sent = self.sent.lock().expect("sent lock").get(subject).copied().unwrap_or(0);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(SENT, sent.to_string().as_str());
        self.enqueue(subject.to_string(), headers, Vec::new());
    }

    /// Changes each time messages to this instance may have been lost.
    pub fn losses(&self) -> tokio::sync::watch::Receiver<u64> {
        self.losses.subscribe()
    }

    /// Queues a message signed with this publisher; past `OUTBOX` waiting
    /// ones it is dropped (its subscribers see the gap).
    fn enqueue(&self, subject: String, mut headers: async_nats::HeaderMap, payload: Vec<u8>) {
        headers.insert(PUBLISHER, self.publisher.as_str());
        if self.outbox.try_send((subject, headers, payload.into())).is_err() {
            tracing::warn!("the NATS outbox is full: a message was dropped");
        }
    }

    fn resync_all(&self) {
        let topics: Vec<Topic> = self.relayed.lock().expect("relayed lock").keys().cloned().collect();
        for topic in topics {
            self.local.resync(&topic);
        }
    }

    /// Starts relaying `topic` from NATS unless it already is.
    fn relay(&self, topic: &Topic) {
        let mut relayed = self.relayed.lock().expect("relayed lock");
        if relayed.contains_key(topic) {
            return;
        }
        let task = tokio::spawn(relay(self.me.clone(), self.client.clone(), topic.clone(), subject(&self.cluster, topic)));
        relayed.insert(topic.clone(), task);
    }

    /// A topic's relay ended without `retire` (its subscription closed
    /// under it): it is not live, and it is relayed again, a second later,
    /// while anyone here still listens (whose subscribers then resync once
    /// it is live). Called by that relay alone, whose entry it removes:
    /// `relay` starts no other for the topic while it is there. (A guard:
    /// a stream ends only when its connection is drained or closed for
    /// good, which the server does not do while it runs, since its client
    /// reconnects without limit; the next relay's subscribe then fails,
    /// and is tried each second while anyone listens.)
    fn relay_ended(&self, topic: &Topic) {
        // Both under the `relayed` lock, as `retire` does: a relay started
        // once the entry is gone may be live before this returns.
        let mut relayed = self.relayed.lock().expect("relayed lock");
        relayed.remove(topic);
        self.live.lock().expect("live lock").remove(topic);
        drop(relayed);
        let (me, topic) = (self.me.clone(), topic.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Some(bus) = me.upgrade() {
                if bus.local.listened(&topic) {
                    bus.relay(&topic);
                }
            }
        });
    }

    /// Whether the topic's relay may stop: nobody here listens. Decided
    /// under the same lock `relay` takes, so a subscriber that comes
    /// meanwhile either keeps this relay or starts the next.
    fn retire(&self, topic: &Topic) -> bool {
        let mut relayed = self.relayed.lock().expect("relayed lock");
        if self.local.listened(topic) {
            return false;
        }
        relayed.remove(topic);
        self.live.lock().expect("live lock").remove(topic);
        true
    }
}

/// A message's publisher and its number, if it carries them.
pub fn sender_seq(message: &async_nats::Message) -> Option<(String, u64)> {
    publisher_and_number(message, SEQUENCE)
}

/// A tally's publisher and the last number it sent (`NatsBus::tally`), if
/// the message is one.
pub fn tally_of(message: &async_nats::Message) -> Option<(String, u64)> {
    publisher_and_number(message, SENT)
}

fn publisher_and_number(message: &async_nats::Message, name: &str) -> Option<(String, u64)> {
    Some((publisher_of(message)?, header(message, name)?.parse().ok()?))
}

/// The instance run that published a message, if it says.
pub fn publisher_of(message: &async_nats::Message) -> Option<String> {
    header(message, PUBLISHER)
}

fn header(message: &async_nats::Message, name: &str) -> Option<String> {
    message.headers.as_ref().and_then(|h| h.get(name)).map(|v| v.as_str().to_string())
}

/// Returns once the NATS server has read everything `client` sent before
/// (its subscriptions included), so a message published after this from
/// any connection to that server reaches them (across a NATS cluster,
/// interest reaches the other servers a moment later). `flush` is not
/// enough: it returns once the bytes are in this machine's socket, which
/// the server may not have read (a busy connection's backlog). A request
/// nobody listens to is answered by the server itself ("no responders"),
/// after the commands before it; a subscriber to every subject (`>`, a
/// debugging tool) would keep it from answering: then this times out.
/// Bounded by `SETTLED_WITHIN`: NATS away, the caller goes on, and the
/// reconnect resyncs.
pub async fn settled(client: &async_nats::Client) -> Result<(), async_nats::RequestError> {
    let ping = async_nats::Request::new().timeout(Some(SETTLED_WITHIN));
    match client.send_request(client.new_inbox(), ping).await {
        Err(e) if e.kind() != async_nats::RequestErrorKind::NoResponders => Err(e),
        _ => Ok(()),
    }
}

/// `settled`, for a subscription its caller goes on with either way (NATS
/// resends it on reconnect): says so when NATS did not confirm `what`.
/// Whether it did.
pub async fn confirm(client: &async_nats::Client, what: &str) -> bool {
    match settled(client).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "NATS did not confirm {what}");
            false
        }
    }
}

/// How long `settled` waits for the server (sub-millisecond when it is there).
const SETTLED_WITHIN: Duration = Duration::from_secs(1);

/// Tries `settled` until NATS confirms the topic's subscription, then
/// resyncs its subscribers (what came before may have missed them); ends
/// with the bus.
async fn resync_once_settled(bus: Weak<NatsBus>, client: async_nats::Client, topic: Topic) {
    while bus.strong_count() > 0 {
        if settled(&client).await.is_ok() {
            if let Some(bus) = bus.upgrade() {
                bus.local.resync(&topic);
            }
            return;
        }
        tokio::time::sleep(SETTLED_WITHIN).await;
    }
}

/// Relays one subject to this instance's subscribers of its topic, until
/// none is left.
async fn relay(bus: Weak<NatsBus>, client: async_nats::Client, topic: Topic, subject: String) {
    let mut subscriber = loop {
        match client.subscribe(subject.clone()).await {
            Ok(subscriber) => break subscriber,
            Err(e) => {
                tracing::warn!(%subject, error = %e, "could not subscribe to NATS; trying again");
                let Some(bus) = bus.upgrade() else { return };
                if bus.retire(&topic) {
                    return;
                }
                drop(bus);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    // Live once the server has it: whatever was published before could not
    // reach this instance, so its subscribers load their picture again.
    // Unconfirmed (NATS away, or busy past `SETTLED_WITHIN`), the topic is
    // live for now and resyncs again once NATS confirms it.
    let confirmed = settled(&client).await.is_ok();
    if let Some(bus) = bus.upgrade() {
        bus.live.lock().expect("live lock").insert(topic.clone());
        bus.local.resync(&topic);
    }
    if !confirmed {
        tracing::warn!(%subject, "NATS did not confirm a subscription in time: its topic resyncs once it does");
        tokio::spawn(resync_once_settled(bus.clone(), client.clone(), topic.clone()));
    }
    let mut heard = Heard::default();
    let mut idle = tokio::time::interval(IDLE_CHECK);
    idle.tick().await;
    loop {
        tokio::select! {
            message = subscriber.next() => {
                let Some(bus) = bus.upgrade() else { return };
                let Some(message) = message else {
                    // The subscription ended under it (its connection was
                    // closed or drained), not by `retire`: no event reaches
                    // the topic's subscribers here any more.
                    tracing::warn!(%subject, "a NATS subscription ended: its topic is subscribed again while anyone here listens");
                    bus.relay_ended(&topic);
                    return;
                };
                if let Some((publisher, seq)) = sender_seq(&message) {
                    if !heard.follows(&publisher, seq) {
                        bus.local.resync(&topic);
                    }
                }
                match serde_json::from_slice::<Event>(&message.payload) {
                    Ok(event) => bus.local.publish(topic.clone(), event),
                    Err(e) => {
                        tracing::warn!(%subject, error = %e, "an event from NATS could not be read");
                        bus.local.resync(&topic);
                    }
                }
                if bus.retire(&topic) {
                    break;
                }
            }
            _ = idle.tick() => {
                let Some(bus) = bus.upgrade() else { return };
                if bus.retire(&topic) {
                    break;
                }
            }
        }
    }
    let _ = subscriber.unsubscribe().await;
}

impl EventBus for NatsBus {
    fn publish(&self, topic: Topic, event: Event) {
        let payload = match serde_json::to_vec(&event) {
            Ok(payload) => payload,
            Err(e) => {
                tracing::error!(error = %e, "an event could not be written");
                return;
            }
        };
        // Numbered and queued under one lock: two callers publishing on
        // one topic queue their events in the order of their numbers.
        let mut sequences = self.sequences.lock().expect("sequences lock");
        let seq = sequences.entry(topic.clone()).or_insert(0);
        *seq += 1;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(SEQUENCE, seq.to_string().as_str());
        self.enqueue(subject(&self.cluster, &topic), headers, payload);
    }

    fn subscribe(&self, topic: &Topic) -> Subscription {
        let subscription = self.local.subscribe(topic);
        self.relay(topic);
        subscription
    }

    fn is_live(&self, topic: &Topic) -> bool {
        self.live.lock().expect("live lock").contains(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_carry_ids_that_cannot_change_their_meaning() {
        assert_eq!(subject("c1", &Topic::org("org-northstar")), "clutchcall.c1.org.org-northstar");
        assert_eq!(subject("c1", &Topic::operator("o", "u.a*b>")), "clutchcall.c1.op.o.u~2ea~2ab~3e");
    }

    #[test]
    fn a_skipped_number_from_a_publisher_is_a_gap_and_publishers_count_apart() {
        let mut heard = Heard::default();
        assert!(heard.follows("a", 7), "the first heard starts the count");
        assert!(heard.follows("a", 8));
        assert!(heard.follows("b", 1));
        assert!(!heard.follows("a", 10), "9 was lost");
        assert!(heard.follows("a", 11));
        assert!(!heard.follows_from_one("c", 3), "heard from the start, 1 and 2 were lost");
        assert!(heard.follows_from_one("d", 1) && heard.follows_from_one("d", 2));
    }

    #[test]
    fn a_tally_past_what_was_heard_is_a_loss_once() {
        let mut heard = Heard::default();
        assert!(!heard.missed_by_tally("a", 0), "nothing sent, nothing missed");
        assert!(heard.follows_from_one("a", 1) && heard.follows_from_one("a", 2));
        assert!(!heard.missed_by_tally("a", 2), "all heard");
        assert!(heard.missed_by_tally("a", 3), "the last one, 3, was lost");
        assert!(!heard.missed_by_tally("a", 3), "told once");
        assert!(heard.follows_from_one("a", 4), "the count goes on after the tally");
        assert!(heard.missed_by_tally("new", 5), "a publisher heard first by its tally sent what was not heard");
    }
}
