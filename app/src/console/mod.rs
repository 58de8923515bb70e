//! The operator's console: one ring-channel WebSocket per tab, alive on
//! every page of the tab (so presence keeps heartbeating in the cockpit),
//! and the offer panel that rings wherever the operator is (mounted in the
//! page's offer slot by the link).

use crate::models::Offer;
use crate::ring::{seconds_left, ConsoleMsg, MyPresence};
use leptos::prelude::*;

/// The ring channel's connection, as the operator sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Link {
    Connecting,
    Open,
    /// Lost; the next try is at this browser time (ms).
    Retrying { at_ms: i64 },
    /// The server said this person cannot take calls here.
    Refused(String),
    /// The link's own code could not be fetched; it is fetched again after
    /// a pause (the network, or a server restarted with another build).
    Unloaded,
}

/// The console's reactive state. Provided once by `App`; filled by the link.
#[derive(Clone, Copy)]
pub struct Console {
    pub link: RwSignal<Link>,
    pub name: RwSignal<Option<String>>,
    /// The server's presence for this operator (never a local guess).
    pub presence: RwSignal<Option<MyPresence>>,
    /// The offer ringing now.
    pub offer: RwSignal<Option<Offer>>,
    /// The last thing worth telling (a missed or withdrawn call, an error).
    pub notice: RwSignal<Option<String>>,
    /// Server-clock now (browser clock corrected by the skew seen at Welcome), ticking.
    pub now_ms: RwSignal<i64>,
    /// Server-clock time of the last message from the server.
    pub last_update_ms: RwSignal<Option<i64>>,
    /// An inactivity warning: (session, when it will be cancelled).
    pub inactivity: RwSignal<Option<(String, i64)>>,
    /// Bumped when a chat message arrives on the operator's session.
    pub chat_version: RwSignal<u64>,
    /// Where this operator's handover offer stands (rule L08).
    pub handover: RwSignal<Option<crate::handover::HandoverNotice>>,
    /// (session, planned end) once the two-minute notice came (rule L13).
    pub planned_end_soon: RwSignal<Option<(String, i64)>>,
    #[cfg(feature = "hydrate")]
    link_handle: StoredValue<Option<link::LinkHandle>, LocalStorage>,
}

impl Console {
    pub fn new() -> Self {
        Console {
            link: RwSignal::new(Link::Connecting),
            name: RwSignal::new(None),
            presence: RwSignal::new(None),
            offer: RwSignal::new(None),
            notice: RwSignal::new(None),
            now_ms: RwSignal::new(0),
            last_update_ms: RwSignal::new(None),
            inactivity: RwSignal::new(None),
            chat_version: RwSignal::new(0),
            handover: RwSignal::new(None),
            planned_end_soon: RwSignal::new(None),
            #[cfg(feature = "hydrate")]
            link_handle: StoredValue::new_local(None),
        }
    }

    /// Sends a message on the ring channel (dropped while disconnected:
    /// the server's state is re-sent on reconnect).
    pub fn send(&self, msg: ConsoleMsg) {
        #[cfg(feature = "hydrate")]
        self.link_handle.with_value(|h| {
            if let Some(h) = h {
                h.send(&msg)
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = msg;
    }

    /// Called from the Ready click (a user gesture): asks for notification
    /// permission. (The same gesture unlocks the audible ring, through the
    /// link's listeners for any click or key.)
    pub fn unlock_alerts(&self) {
        #[cfg(feature = "hydrate")]
        self.link_handle.with_value(|h| {
            if let Some(h) = h {
                h.unlock_alerts()
            }
        });
    }

    pub fn accept(&self) {
        if let Some(offer) = self.offer.get_untracked() {
            self.send(ConsoleMsg::Accept { session_id: offer.session_id });
        }
    }

    /// Operator input on the session they hold lifts its inactivity
    /// warning here; the input itself travels as actions on the relay,
    /// which resets the server's chain.
    pub fn input_seen(&self, session_id: &str) {
        if self.inactivity.get_untracked().is_some_and(|(s, _)| s == session_id) {
            self.inactivity.set(None);
        }
    }

    /// A `Welcome` is the server's truth. The notices this tab shows (an
    /// inactivity warning, a planned end, where a handover stands) may have
    /// changed while it was away, so they are dropped; the server tells
    /// again, right after the `Welcome`, those that still stand (its
    /// `Desk::standing_notices`: a handover ringing, or how the last one
    /// ended while the operator still holds the session).
    pub fn welcomed(&self) {
        self.inactivity.set(None);
        self.planned_end_soon.set(None);
        self.handover.set(None);
    }

    pub fn decline(&self) {
        if let Some(offer) = self.offer.get_untracked() {
            self.send(ConsoleMsg::Decline { session_id: offer.session_id });
        }
    }
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

/// Opens the ring channel while mounted (`components::ConsoleStatus` mounts
/// it for anyone who may operate in the selected org) and closes it when
/// unmounted. A change of user or org is a whole page load, so the socket
/// always speaks for the selected org.
#[component]
pub fn ConsoleLink() -> impl IntoView {
    let console = expect_context::<Console>();
    #[cfg(feature = "hydrate")]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let navigate = leptos_router::hooks::use_navigate();
        // The link's code is a chunk of its own (only operators open it),
        // fetched once the page is interactive (it is not needed for the
        // page's first input); the link starts once that arrives, unless
        // unmounted meanwhile. A failed fetch is tried again, and said.
        let unmounted = Arc::new(AtomicBool::new(false));
        let load = {
            let unmounted = unmounted.clone();
            async move {
                // Until the chunk arrives: 2, 4, 8, 16, then every 30 s.
                let mut pause_s = 2;
                loop {
                    let navigate = navigate.clone();
                    let navigate: Box<dyn Fn(&str)> = Box::new(move |path: &str| navigate(path, Default::default()));
                    let started = link::start(console, navigate).await;
                    let gone = unmounted.load(Ordering::Relaxed);
                    match started {
                        Ok(handle) if gone => {
                            handle.stop();
                            return;
                        }
                        Ok(handle) => {
                            console.link_handle.set_value(Some(handle));
                            return;
                        }
                        Err(crate::chunk::ChunkUnavailable) if gone => return,
                        Err(crate::chunk::ChunkUnavailable) => {
                            console.link.set(Link::Unloaded);
                            gloo_timers::future::TimeoutFuture::new(pause_s * 1_000).await;
                            pause_s = crate::rules::doubled_wait_s(pause_s, crate::rules::MAX_RETRY_WAIT_S);
                        }
                    }
                }
            }
        };
        crate::deferred::when_interactive(move || leptos::task::spawn_local(load));
        on_cleanup(move || {
            unmounted.store(true, Ordering::Relaxed);
            console.link_handle.update_value(|h| {
                if let Some(h) = h.take() {
                    h.stop();
                }
            });
        });
    }
    view! {
        <span class="link-state" data-testid="link-state">
            {move || match console.link.get() {
                Link::Connecting => "connecting…".to_string(),
                Link::Open => String::new(),
                Link::Retrying { at_ms } => {
                    let now = console.now_ms.get();
                    format!("reconnecting in {} s…", seconds_left(at_ms, now))
                }
                Link::Refused(why) => why,
                Link::Unloaded => "console not loaded, retrying…".to_string(),
            }}
        </span>
    }
}

/// The offer slot's element id, a literal (the link's gesture listener
/// builds a selector of it with `concat!`): where the link mounts the
/// panel and where the listener looks for the panel's buttons.
macro_rules! offer_slot {
    () => {
        "offer-slot"
    };
}
// (Only the browser's link names it from outside this file.)
#[cfg_attr(not(feature = "hydrate"), allow(unused_imports))]
pub(crate) use offer_slot;

/// Where the offer panel goes: over whatever page the operator is on. The
/// console's link mounts the panel here when it starts, so the panel's code
/// is in the link's chunk with the rest of what only operators need.
#[component]
pub fn OfferSlot() -> impl IntoView {
    view! { <div id={offer_slot!()} class="offer-slot"></div> }
}

/// What a key does to the offer shown (the offer panel's keys, and what
/// the link's gesture listener counts as answering it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferKey {
    /// Enter.
    Accept,
    /// Escape.
    Decline,
}

impl OfferKey {
    pub fn of(key: &str) -> Option<OfferKey> {
        match key {
            "Enter" => Some(OfferKey::Accept),
            "Escape" => Some(OfferKey::Decline),
            _ => None,
        }
    }
}

/// The ringing offer. Enter accepts, Escape declines (`OfferKey`).
#[component]
pub fn OfferPanel(console: Console) -> impl IntoView {
    let _keys = window_event_listener(leptos::ev::keydown, move |ev| {
        if console.offer.get_untracked().is_none() {
            return;
        }
        let Some(key) = OfferKey::of(&ev.key()) else { return };
        ev.prevent_default();
        match key {
            OfferKey::Accept => console.accept(),
            OfferKey::Decline => console.decline(),
        }
    });
    move || {
        console.offer.get().map(|offer| {
            let expires = offer.expires_at;
            let warn = offer.rtt_ms > 250;
            let title = match &offer.handover_from {
                Some(from) => format!("Handover from {from}"),
                None => "Distress call".to_string(),
            };
            view! {
                <section class="offer" role="alertdialog" aria-labelledby="offer-title" data-testid="offer">
                    <h2 id="offer-title"><span class="live-dot" aria-hidden="true"></span>{title}</h2>
                    <dl class="facts">
                        <dt>"Robot"</dt><dd data-testid="offer-robot">{offer.robot_id.clone()}</dd>
                        <dt>"Model"</dt><dd>{offer.robot_model.clone()}</dd>
                        <dt>"Site"</dt><dd>{offer.site.clone()}</dd>
                        <dt>"RTT"</dt>
                        <dd class:tone-warn=warn data-testid="offer-rtt">
                            {offer.rtt_ms}" ms"{warn.then_some(" · high")}
                        </dd>
                        <dt>"Answer within"</dt>
                        <dd data-testid="offer-countdown">{move || format!("{} s", seconds_left(expires, console.now_ms.get()))}</dd>
                    </dl>
                    <div class="actions">
                        <button type="button" class="button primary" on:click=move |_| console.accept()>"Accept "<kbd>"Enter"</kbd></button>
                        <button type="button" class="button" on:click=move |_| console.decline()>"Decline "<kbd>"Esc"</kbd></button>
                    </div>
                </section>
            }
        })
    }
}

/// Whether a gamepad's state is operator input (rule L07): a button held,
/// or a stick out of its dead zone. A pad lying still is not input.
pub fn gamepad_input(any_button_pressed: bool, axes: &[f64]) -> bool {
    any_button_pressed || axes.iter().any(|a| a.abs() > crate::teleop::GAMEPAD_DEAD_ZONE)
}

/// The axes of the first connected gamepad (Gamepad API) that gives
/// input now (a button held or a stick out of its dead zone).
#[cfg(feature = "hydrate")]
pub fn gamepad_axes() -> Option<Vec<f64>> {
    use wasm_bindgen::JsCast;
    let pads = web_sys::window()?.navigator().get_gamepads().ok()?;
    pads.iter().filter_map(|p| p.dyn_into::<web_sys::Gamepad>().ok()).find_map(|pad| {
        let pressed = pad.buttons().iter().filter_map(|b| b.dyn_into::<web_sys::GamepadButton>().ok()).any(|b| b.pressed());
        let axes: Vec<f64> = pad.axes().iter().filter_map(|a| a.as_f64()).collect();
        gamepad_input(pressed, &axes).then_some(axes)
    })
}

#[cfg(test)]
mod welcome_tests {
    use super::*;
    use crate::handover::{HandoverNotice, HandoverOutcome};

    fn notice(outcome: HandoverOutcome) -> Option<HandoverNotice> {
        Some(HandoverNotice { session_id: "ses-1".into(), to_operator_id: "u-tom".into(), to_name: "Tom Whitfield".into(), outcome })
    }

    #[test]
    fn l08_a_welcome_drops_every_notice_for_the_server_to_tell_again() {
        // Signals live in an owner's arena (the server's are sandboxed per request).
        Owner::new().with(welcome_drops_every_notice);
    }

    fn welcome_drops_every_notice() {
        let console = Console::new();
        console.inactivity.set(Some(("ses-1".into(), 10)));
        console.planned_end_soon.set(Some(("ses-1".into(), 20)));
        console.handover.set(notice(HandoverOutcome::Ringing));
        console.welcomed();
        assert_eq!(console.inactivity.get_untracked(), None);
        assert_eq!(console.planned_end_soon.get_untracked(), None);
        assert_eq!(console.handover.get_untracked(), None, "a handover told as ringing may have been answered meanwhile");
        for outcome in [HandoverOutcome::Accepted, HandoverOutcome::Declined, HandoverOutcome::Missed, HandoverOutcome::Withdrawn] {
            console.handover.set(notice(outcome));
            console.welcomed();
            assert_eq!(console.handover.get_untracked(), None, "{outcome:?}: told again if it still stands (control may have moved meanwhile)");
        }
    }
}

#[cfg(test)]
mod gamepad_tests {
    use super::*;

    #[test]
    fn l07_a_gamepad_counts_as_input_only_when_touched() {
        assert!(!gamepad_input(false, &[0.0, 0.05, -0.19]), "sticks at rest (drift inside the dead zone)");
        assert!(gamepad_input(false, &[0.0, -0.6]), "a stick pushed");
        assert!(gamepad_input(true, &[]), "a button held");
        assert!(!gamepad_input(false, &[]), "a pad with nothing");
    }
}

#[cfg(feature = "hydrate")]
mod link;
pub mod relay;
