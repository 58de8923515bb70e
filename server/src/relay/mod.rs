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

mod channel;
pub mod recording;
mod socket;

pub use channel::{Channel, RelayLimits, Side};
pub use socket::relay_handler;

use crate::bus::{Delivery, SharedBus};
use crate::clock::Clock;
use domain::events::{Event, OrgEvent, Topic};
use domain::models::LifecycleState;
use domain::relay::STATS_EVERY_MS;
use recording::Recorder;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

pub struct Relay {
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    /// Orgs whose lifecycle events the hub follows.
    followed: Mutex<HashSet<String>>,
    /// Orgs that had channels at the last count (told once when they have none).
    counted: Mutex<HashSet<String>>,
    bus: SharedBus,
    clock: Clock,
    pub recorder: Arc<Recorder>,
    /// The rate caps of each channel's directions.
    limits: RelayLimits,
}

impl Relay {
    /// The hub and its counting task (counts published, recordings flushed).
    pub fn start(bus: SharedBus, clock: Clock, recorder: Arc<Recorder>, limits: RelayLimits) -> (Arc<Relay>, tokio::task::JoinHandle<()>) {
        let relay = Arc::new(Relay { channels: Mutex::default(), followed: Mutex::default(), counted: Mutex::default(), bus, clock, recorder, limits });
        let task = tokio::spawn(count_and_flush(Arc::downgrade(&relay)));
        (relay, task)
    }

    /// The session's channel, opened on first use.
    pub fn channel(self: &Arc<Self>, org_id: &str, session_id: &str, robot_id: &str, operator_id: Option<&str>, recording: bool) -> Arc<Channel> {
        self.follow(org_id);
        let mut channels = self.channels.lock().expect("relay lock");
        let channel = channels
            .entry(session_id.to_string())
            .or_insert_with(|| Arc::new(Channel::new(org_id, session_id, robot_id, operator_id, self.clock.now_ms(), self.limits)))
            .clone();
        drop(channels);
        channel.set_recording(recording, &self.recorder, self.clock.now_ms());
        channel
    }

    pub fn get(&self, session_id: &str) -> Option<Arc<Channel>> {
        self.channels.lock().expect("relay lock").get(session_id).cloned()
    }

    /// The org's channels' counts now.
    pub fn stats(&self, org_id: &str) -> Vec<domain::relay::RelayStat> {
        let now = self.clock.now_ms();
        let channels: Vec<Arc<Channel>> = self.channels.lock().expect("relay lock").values().filter(|c| c.org_id == org_id).cloned().collect();
        let mut stats: Vec<_> = channels.iter().map(|c| self.stat(c, now, false)).collect();
        stats.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        stats
    }

    /// A channel's counts with what its recording's cap refused.
    fn stat(&self, channel: &Channel, now: i64, advance: bool) -> domain::relay::RelayStat {
        domain::relay::RelayStat { unrecorded: self.recorder.unrecorded(&channel.session_id), ..channel.stat(now, advance) }
    }

    /// Follows the org's lifecycle events (once per org).
    fn follow(self: &Arc<Self>, org_id: &str) {
        if !self.followed.lock().expect("relay lock").insert(org_id.to_string()) {
            return;
        }
        let subscription = self.bus.subscribe(&Topic::org(org_id));
        let hub = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut subscription = subscription;
            loop {
                let delivery = subscription.recv().await;
                let Some(hub) = hub.upgrade() else { return };
                match delivery {
                    Delivery::Event(Event::Org(OrgEvent::Lifecycle { session_id, lifecycle, operator_id, at_ms, .. })) => {
                        hub.lifecycle(&session_id, lifecycle, operator_id.as_deref(), at_ms);
                    }
                    Delivery::Event(_) => {}
                    // The bus holds far more than the relay's few events a
                    // second; a missed end is caught when the channel's
                    // sockets next act (they re-check the session). (In
                    // cluster mode every new subscription starts with one:
                    // not a warning.)
                    Delivery::Resync => tracing::debug!("relay told to resync its org's lifecycle events"),
                    Delivery::Closed => return,
                }
            }
        });
    }

    /// A lifecycle change of a session that may have a channel.
    fn lifecycle(&self, session_id: &str, lifecycle: LifecycleState, operator_id: Option<&str>, at_ms: i64) {
        let Some(channel) = self.get(session_id) else { return };
        match lifecycle {
            LifecycleState::Active | LifecycleState::Paused => {
                channel.set_operator(operator_id, &self.recorder, at_ms);
                channel.set_recording(lifecycle == LifecycleState::Active, &self.recorder, at_ms);
            }
            LifecycleState::Completed | LifecycleState::Cancelled => {
                self.channels.lock().expect("relay lock").remove(session_id);
                channel.close();
                self.recorder.finish(&channel.org_id, session_id, lifecycle == LifecycleState::Completed);
            }
            LifecycleState::Pending => {}
        }
    }

    /// Publishes each org's counts; an org whose last channel closed hears
    /// an empty list once.
    fn publish_counts(&self) {
        let now = self.clock.now_ms();
        let channels: Vec<Arc<Channel>> = self.channels.lock().expect("relay lock").values().cloned().collect();
        let mut by_org: HashMap<String, Vec<domain::relay::RelayStat>> = HashMap::new();
        for channel in &channels {
            by_org.entry(channel.org_id.clone()).or_default().push(self.stat(channel, now, true));
        }
        let mut counted = self.counted.lock().expect("relay lock");
        for org in counted.iter() {
            by_org.entry(org.clone()).or_default();
        }
        *counted = by_org.iter().filter(|(_, stats)| !stats.is_empty()).map(|(org, _)| org.clone()).collect();
        drop(counted);
        for (org_id, mut stats) in by_org {
            stats.sort_by(|a, b| a.session_id.cmp(&b.session_id));
            self.bus.publish(Topic::org(&org_id), Event::Org(OrgEvent::Relay { stats, at_ms: now }));
        }
    }
}

/// Every `STATS_EVERY_MS`: counts out, recordings' buffers to their files.
async fn count_and_flush(hub: Weak<Relay>) {
    let mut every = tokio::time::interval(Duration::from_millis(STATS_EVERY_MS as u64));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(hub) = hub.upgrade() else { return };
        hub.publish_counts();
        hub.recorder.flush();
    }
}
