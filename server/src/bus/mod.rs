//! The event bus (DESIGN "Realtime"): every change leaves the engine or a
//! service as a typed event on a topic; sockets subscribe to the topics
//! their page needs. One interface, two engines (as Centrifugo has):
//! `InProcessBus` serves one process; `nats::NatsBus` carries topics
//! between instances (cluster mode) and fans them out here through an
//! `InProcessBus` of its own.

pub mod nats;

use domain::events::{Event, Topic};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Events a topic holds for a slow subscriber before it must resync. An
/// operator's topic sees a handful per call; an org's sees every change of
/// the org. (A broadcast channel allocates its slots up front, and there is
/// an operator topic per console.)
pub const OPERATOR_TOPIC_BUFFER: usize = 32;
pub const ORG_TOPIC_BUFFER: usize = 1024;

fn buffer(topic: &Topic) -> usize {
    match topic {
        Topic::Operator { .. } => OPERATOR_TOPIC_BUFFER,
        Topic::Org { .. } => ORG_TOPIC_BUFFER,
    }
}

/// What a subscriber receives.
#[derive(Debug, PartialEq)]
pub enum Delivery {
    Event(Event),
    /// The subscriber fell behind and events were dropped: it must reload
    /// its picture from the source (never silence).
    Resync,
    /// The bus is gone (shutdown).
    Closed,
}

pub trait EventBus: Send + Sync + 'static {
    /// Publishes after the change is committed; never blocks.
    fn publish(&self, topic: Topic, event: Event);
    fn subscribe(&self, topic: &Topic) -> Subscription;
    /// Whether events published on the topic from now on reach this
    /// instance's subscribers (a bus between instances is not live until
    /// its subscription to the topic is; that subscriber then gets `Resync`).
    fn is_live(&self, _topic: &Topic) -> bool {
        true
    }
}

pub type SharedBus = Arc<dyn EventBus>;

/// What a topic's channel carries: its events, and (from a bus between
/// instances) word that some may have been lost.
#[derive(Clone, Debug)]
enum Signal {
    Event(Event),
    Resync,
}

/// One subscriber's stream of a topic.
pub struct Subscription {
    rx: broadcast::Receiver<Signal>,
}

impl Subscription {
    /// Drops what is waiting: the subscriber goes on from the next event
    /// published (after a `Resync`, when it reloads from the source, the
    /// events kept from before are older than what it reads).
    pub fn skip_to_now(&mut self) {
        self.rx = self.rx.resubscribe();
    }

    pub async fn recv(&mut self) -> Delivery {
        match self.rx.recv().await {
            Ok(Signal::Event(event)) => Delivery::Event(event),
            Ok(Signal::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => Delivery::Resync,
            Err(broadcast::error::RecvError::Closed) => Delivery::Closed,
        }
    }
}

/// Topics as broadcast channels, created on first subscription and
/// dropped when their last subscriber leaves.
#[derive(Default)]
pub struct InProcessBus {
    topics: Mutex<HashMap<Topic, broadcast::Sender<Signal>>>,
}

impl InProcessBus {
    pub fn new() -> Arc<InProcessBus> {
        Arc::new(InProcessBus::default())
    }

    fn send(&self, topic: &Topic, signal: Signal) {
        let mut topics = self.topics.lock().expect("bus lock");
        if let Some(tx) = topics.get(topic) {
            if tx.send(signal).is_err() {
                // Nobody listens any more.
                topics.remove(topic);
            }
        }
    }

    /// Tells the topic's subscribers that events may have been lost: each
    /// reloads its picture from the source.
    fn resync(&self, topic: &Topic) {
        self.send(topic, Signal::Resync);
    }

    /// Whether anyone here still listens to the topic.
    fn listened(&self, topic: &Topic) -> bool {
        let mut topics = self.topics.lock().expect("bus lock");
        match topics.get(topic) {
            Some(tx) if tx.receiver_count() > 0 => true,
            Some(_) => {
                topics.remove(topic);
                false
            }
            None => false,
        }
    }
}

impl EventBus for InProcessBus {
    fn publish(&self, topic: Topic, event: Event) {
        self.send(&topic, Signal::Event(event));
    }

    fn subscribe(&self, topic: &Topic) -> Subscription {
        let mut topics = self.topics.lock().expect("bus lock");
        let tx = topics.entry(topic.clone()).or_insert_with(|| broadcast::channel(buffer(topic)).0);
        Subscription { rx: tx.subscribe() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::events::{OrgEvent, PresenceUpdate};
    use domain::models::PresenceState;

    fn presence(n: i64) -> Event {
        Event::Org(OrgEvent::Presence {
            presence: PresenceUpdate {
                operator_id: "u".into(),
                name: "U".into(),
                state: PresenceState::Ready,
                state_since_ms: n,
                current_call_id: None,
                aux_reason: None,
            },
        })
    }

    #[tokio::test]
    async fn d12_subscribers_get_their_topic_only() {
        let bus = InProcessBus::new();
        let mut a = bus.subscribe(&Topic::org("a"));
        let mut b = bus.subscribe(&Topic::org("b"));
        bus.publish(Topic::org("a"), presence(1));
        assert_eq!(a.recv().await, Delivery::Event(presence(1)));
        bus.publish(Topic::org("b"), presence(2));
        assert_eq!(b.recv().await, Delivery::Event(presence(2)));
    }

    #[tokio::test]
    async fn d12_a_subscriber_that_falls_behind_gets_a_resync_not_silence() {
        let bus = InProcessBus::new();
        let mut slow = bus.subscribe(&Topic::org("a"));
        for n in 0..(ORG_TOPIC_BUFFER as i64 + 10) {
            bus.publish(Topic::org("a"), presence(n));
        }
        assert_eq!(slow.recv().await, Delivery::Resync);
        // After the resync it reads on from the oldest event still held.
        assert!(matches!(slow.recv().await, Delivery::Event(_)));
    }

    #[tokio::test]
    async fn a_topic_without_subscribers_is_dropped() {
        let bus = InProcessBus::new();
        drop(bus.subscribe(&Topic::org("a")));
        bus.publish(Topic::org("a"), presence(1));
        assert!(bus.topics.lock().unwrap().is_empty());
    }
}
