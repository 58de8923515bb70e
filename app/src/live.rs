//! Live screens (wallboard, overview, session view, roster, client): the
//! screen's data, reloaded when the server pushes a change on a watch
//! socket — the admins' `/ws?watch=org` (everything in the org), or
//! `/ws?watch=mine` (only the sessions the person is a party to: their
//! client's, or the one they operate) — and polled as a fallback so a lost
//! socket never freezes the screen. A clock ticks every second.

use crate::board::OpsBoard;
use crate::error::AppError;
use crate::functions::load_ops_board;
use leptos::prelude::*;
use serde::{de::DeserializeOwned, Serialize};
use std::future::Future;

/// The wallboard and overview poll this often even when the socket is quiet or down.
pub const POLL_MS: u32 = 15_000;
/// Pushes closer together than this reload once.
pub const DEBOUNCE_MS: u32 = 250;

/// A screen's data, kept live.
pub struct Live<T: Send + Sync + 'static> {
    pub data: crate::page_data::Loaded<Result<T, AppError>>,
    /// Whether the push channel is connected.
    pub connected: RwSignal<bool>,
    /// Browser clock (Unix ms), ticking each second.
    pub now_ms: RwSignal<i64>,
    /// The relay's latest counts (rule W15), pushed each second without a reload.
    pub relay: RwSignal<crate::relay::HeardCounts>,
}

impl<T: Send + Sync + 'static> Clone for Live<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send + Sync + 'static> Copy for Live<T> {}

/// `fetch`'s result, reloaded on the org's events and every `poll_ms`.
/// Call once per screen.
pub fn use_live<T, Fut>(fetch: impl Fn() -> Fut + Send + Sync + 'static, poll_ms: u32) -> Live<T>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    Fut: Future<Output = Result<T, AppError>> + Send + 'static,
{
    let push = use_push(Watch::Org, poll_ms);
    let data = crate::page_data::load(move || push.version.get(), move |_| fetch());
    Live { data, connected: push.connected, now_ms: push.now_ms, relay: push.relay }
}

/// Which watch socket a screen follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// The admins': every change in the org.
    Org,
    /// Changes to the sessions the person is a party to.
    Mine,
}

impl Watch {
    pub fn as_str(self) -> &'static str {
        match self {
            Watch::Org => "org",
            Watch::Mine => "mine",
        }
    }
}

/// Bumped on every push (debounced) and every `poll_ms`.
#[derive(Clone, Copy)]
pub struct Push {
    pub version: RwSignal<u64>,
    pub connected: RwSignal<bool>,
    pub now_ms: RwSignal<i64>,
    pub relay: RwSignal<crate::relay::HeardCounts>,
}

/// A version to key a screen's resources on. Call once per screen.
pub fn use_push(watch: Watch, poll_ms: u32) -> Push {
    let push = Push { version: RwSignal::new(0u64), connected: RwSignal::new(false), now_ms: RwSignal::new(0i64), relay: RwSignal::new(Default::default()) };
    // After hydration, not during it: a refetch or a changed clock while the
    // server's markup is being claimed left parts of the page inert.
    #[cfg(feature = "hydrate")]
    if let Some(owner) = Owner::current() {
        let Push { version, connected, now_ms, relay } = push;
        gloo_timers::callback::Timeout::new(0, move || owner.with(|| browser::start(watch, version, connected, now_ms, relay, poll_ms))).forget();
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (watch, poll_ms);
    push
}

/// The org's board (wallboard, overview), live.
pub type LiveBoard = Live<OpsBoard>;

pub fn use_live_board() -> LiveBoard {
    let live = use_live(load_ops_board, POLL_MS);
    // The board carries the relay's counts: one read after a gap in their
    // pushes replaces them (HeardCounts::board_loaded), judged when it
    // lands on the precise clock (on the screen's ticking one, two
    // seconds could be three).
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if live.data.with(|loaded| matches!(loaded, Some(Ok(_)))) {
            live.relay.maybe_update(|heard| heard.board_loaded(browser::now()));
        }
    });
    live
}

/// What a watch socket's message means to a live screen.
#[derive(Debug, PartialEq)]
pub enum WatchNotice {
    /// The relay's counts (every second while channels are open): applied
    /// as they are, never a reload.
    Relay(Vec<crate::relay::RelayStat>),
    /// Something in the org changed: reload.
    Changed,
    /// Events may have been missed (the socket's first word, or it fell
    /// behind): reload, and doubt the pushed relay counts.
    Resync,
    /// Nothing a screen acts on (a pong, an error).
    Nothing,
}

/// Reads only what a screen acts on: the message's type and, for an org
/// event, the event's type and the relay's counts. (Decoding `RingMsg` in
/// full here put a decoder for every event payload in the browser's wasm.)
pub fn read_watch(text: &str) -> WatchNotice {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Message {
        #[serde(rename = "type")]
        kind: MessageKind,
        #[serde(default)]
        event: Option<Event>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum MessageKind {
        Org,
        Resync,
        #[serde(other)]
        Other,
    }
    #[derive(Deserialize)]
    struct Event {
        #[serde(rename = "type")]
        kind: EventKind,
        #[serde(default)]
        stats: Option<Vec<crate::relay::RelayStat>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum EventKind {
        Relay,
        #[serde(other)]
        Other,
    }

    match crate::page_data::read_json::<Message>(text) {
        Ok(Message { kind: MessageKind::Org, event: Some(Event { kind: EventKind::Relay, stats: Some(stats) }) }) => WatchNotice::Relay(stats),
        Ok(Message { kind: MessageKind::Org, .. }) => WatchNotice::Changed,
        Ok(Message { kind: MessageKind::Resync, .. }) => WatchNotice::Resync,
        _ => WatchNotice::Nothing,
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use super::{read_watch, WatchNotice};
    use crate::socket::{AfterClose, Handler, Socket};
    use gloo_timers::callback::{Interval, Timeout};
    use leptos::prelude::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    pub fn now() -> i64 {
        web_sys::window().and_then(|w| w.performance()).map(|p| p.time_origin() + p.now()).unwrap_or(0.0) as i64
    }

    /// Reloads via `version`, at most once per `DEBOUNCE_MS`.
    struct Reloader {
        version: RwSignal<u64>,
        pending: RefCell<Option<Timeout>>,
    }

    impl Reloader {
        fn poke(self: &Rc<Self>) {
            if self.pending.borrow().is_some() {
                return;
            }
            let me = self.clone();
            *self.pending.borrow_mut() = Some(Timeout::new(super::DEBOUNCE_MS, move || {
                me.pending.borrow_mut().take();
                me.version.update(|v| *v += 1);
            }));
        }
    }

    /// What a watch socket hears, for a live screen.
    struct Watcher {
        reloader: Rc<Reloader>,
        connected: RwSignal<bool>,
        relay: RwSignal<crate::relay::HeardCounts>,
    }

    impl Handler for Watcher {
        /// Not a reload: the server's first word on every connection,
        /// first or not, is `Resync`, once its subscription is live, so
        /// the reload comes after what it would miss (a reload at the
        /// socket's open could land before the server subscribed).
        fn opened(&mut self, _reconnected: bool) {
            self.connected.set(true);
        }

        fn text(&mut self, text: String) {
            match read_watch(&text) {
                WatchNotice::Relay(stats) => self.relay.update(|heard| heard.pushed(stats, now())),
                WatchNotice::Changed => self.reloader.poke(),
                WatchNotice::Resync => {
                    // (`try_`: a screen gone before its socket stopped.)
                    let _ = self.relay.try_update_untracked(|heard| heard.doubt());
                    self.reloader.poke();
                }
                WatchNotice::Nothing => {}
            }
        }

        /// Always retried: the poll keeps the screen fresh meanwhile.
        fn closed(&mut self, _code: u16, wait_s: u32) -> AfterClose {
            self.connected.set(false);
            let _ = self.relay.try_update_untracked(|heard| heard.doubt());
            AfterClose::RetryIn(wait_s)
        }
    }

    pub fn start(watch: super::Watch, version: RwSignal<u64>, connected: RwSignal<bool>, now_ms: RwSignal<i64>, relay: RwSignal<crate::relay::HeardCounts>, poll_ms: u32) {
        now_ms.set(now());
        let reloader = Rc::new(Reloader { version, pending: RefCell::new(None) });
        let tick = Interval::new(1_000, move || now_ms.set(now()));
        let poll = {
            let reloader = reloader.clone();
            Interval::new(poll_ms, move || reloader.poke())
        };
        let watcher = Watcher { reloader, connected, relay };
        let socket = Socket::open(&format!("/ws?watch={}", watch.as_str()), false, crate::rules::MAX_RETRY_WAIT_S, Box::new(watcher));
        // The server closes a socket silent for the presence TTL: ping as
        // often as a console heartbeats. The pong is traffic from the server
        // on a quiet screen, which a proxy's idle timeout would otherwise
        // cut. On the page's timer: a screen hidden five minutes or more
        // is closed for silence and reconnects and reloads about once a
        // minute (nobody's presence hangs on it, unlike a console's; see
        // console/link.rs).
        let ping = {
            let socket = socket.clone();
            Interval::new(crate::ring::HEARTBEAT_MS, move || {
                socket.send_text(r#"{"type":"ping","nonce":0}"#);
            })
        };
        // Browser-only state, held where the reactive owner can drop it.
        let held = StoredValue::new_local(Some((tick, poll, ping, socket)));
        on_cleanup(move || {
            held.update_value(|held| {
                if let Some((tick, poll, ping, socket)) = held.take() {
                    drop((tick, poll, ping));
                    socket.stop();
                }
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::OrgEvent;
    use crate::models::LifecycleState;
    use crate::relay::{FlowStat, RelayStat};
    use crate::ring::{RingError, RingMsg};

    fn wire(msg: &RingMsg) -> String {
        serde_json::to_string(msg).unwrap()
    }

    #[test]
    fn a_watch_applies_relay_counts_and_reloads_on_any_other_org_change() {
        let stat = RelayStat {
            session_id: "ses-1".into(),
            robot_id: "uk-pal-01".into(),
            robot_connected: true,
            cockpits: 1,
            supervisors: 0,
            robot_frames: FlowStat::default(),
            operator_frames: FlowStat::default(),
            open_since_ms: 5,
            unrecorded: 0,
        };
        let relay = RingMsg::Org { event: OrgEvent::Relay { stats: vec![stat.clone()], at_ms: 9 } };
        assert_eq!(read_watch(&wire(&relay)), WatchNotice::Relay(vec![stat]));

        let lifecycle = OrgEvent::Lifecycle {
            session_id: "ses-1".into(),
            robot_id: "uk-pal-01".into(),
            lifecycle: LifecycleState::Active,
            operator_id: Some("u-asha".into()),
            queued: false,
            at_ms: 1,
        };
        assert_eq!(read_watch(&wire(&RingMsg::Org { event: lifecycle })), WatchNotice::Changed);
        assert_eq!(read_watch(&wire(&RingMsg::Org { event: OrgEvent::Bookings { robot_id: "r".into() } })), WatchNotice::Changed);
        assert_eq!(read_watch(&wire(&RingMsg::Resync)), WatchNotice::Resync, "missed events: reload");
        assert_eq!(read_watch(&wire(&RingMsg::Pong { nonce: 3 })), WatchNotice::Nothing);
        assert_eq!(read_watch(&wire(&RingMsg::error(RingError::SignedOut))), WatchNotice::Nothing);
        assert_eq!(read_watch("not json"), WatchNotice::Nothing);
    }
}
