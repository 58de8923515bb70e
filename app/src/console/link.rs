//! The browser end of the ring channel.

use super::{Console, Link};
use crate::ring::{cockpit_path, rings_left, ConsoleMsg, OfferEnd, RingMsg, RttProbe, HEARTBEAT_MS, RING_EVERY_MS};
use crate::socket::{AfterClose, Handler, Socket};
use gloo_timers::callback::{Interval, Timeout};
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;
use web_sys::{AudioContext, OscillatorNode};

const TICK_MS: u32 = 250;
/// Every third heartbeat is an RTT probe instead (every 30 s): it keeps
/// the tab heard as a heartbeat does, and its answer is traffic from the
/// server that a quiet socket would otherwise not have.
const PING_EVERY_BEATS: u32 = 3;

pub struct LinkHandle {
    inner: Rc<Inner>,
    /// `Inner::stop`, handed over by `start` and called through this
    /// pointer: its code (closing the audio context, the listeners, the
    /// socket) then stays in the link's chunk instead of the main module
    /// every screen loads (BENCHMARKS.md, the wasm's tenth pass).
    stop: fn(&Inner),
}

struct Inner {
    console: Console,
    navigate: Box<dyn Fn(&str)>,
    /// The ring channel (`/ws`), reconnecting until stopped or refused.
    socket: RefCell<Option<Socket>>,
    /// server clock − browser clock, ms.
    skew_ms: Cell<i64>,
    pops: RefCell<Vec<String>>,
    rtt: RefCell<RttProbe>,
    audio: RefCell<Option<AudioContext>>,
    /// Audio starts only from a person's gesture: the Ready click unlocks
    /// it, and so does any click, tap or key on the page (a tab reloaded
    /// while ready or ringing has no Ready click to give).
    gestures: RefCell<Vec<WindowListenerHandle>>,
    /// The rings scheduled for the offer shown, if any.
    ringing: RefCell<Option<Ringing>>,
    timers: RefCell<Vec<Interval>>,
    heartbeat: RefCell<Option<HeartbeatClock>>,
    /// The offer panel, mounted in the page's offer slot; dropping it
    /// unmounts the panel.
    panel: RefCell<Option<Box<dyn std::any::Any>>>,
}

fn browser_now() -> i64 {
    js_sys_now() as i64
}

fn js_sys_now() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map(|p| p.time_origin() + p.now()).unwrap_or(0.0)
}

/// Opens the link. Split: its code (the socket, the ring messages'
/// decoder, the ring tone) is a chunk of its own that only operators' tabs
/// fetch; if that fetch fails, the caller is told and tries again.
#[wasm_split(console_link, wasm_split_path = ::leptos::wasm_split, fallible)]
pub fn start(console: Console, navigate: Box<dyn Fn(&str)>) -> Result<LinkHandle, crate::chunk::ChunkUnavailable> {
    let inner = Rc::new(Inner {
        console,
        navigate,
        socket: RefCell::new(None),
        skew_ms: Cell::new(0),
        pops: RefCell::new(Vec::new()),
        rtt: RefCell::default(),
        audio: RefCell::new(None),
        gestures: RefCell::new(Vec::new()),
        ringing: RefCell::new(None),
        timers: RefCell::new(Vec::new()),
        heartbeat: RefCell::new(None),
        panel: RefCell::new(None),
    });
    let tick = {
        let inner = Rc::downgrade(&inner);
        Interval::new(TICK_MS, move || {
            if let Some(inner) = inner.upgrade() {
                inner.tick();
            }
        })
    };
    *inner.heartbeat.borrow_mut() = Some(heartbeat_clock(Rc::downgrade(&inner)));
    *inner.gestures.borrow_mut() = vec![
        window_event_listener(leptos::ev::pointerdown, unlock_audio_on(Rc::downgrade(&inner), on_offer_panel)),
        window_event_listener(leptos::ev::pointerup, unlock_audio_on(Rc::downgrade(&inner), on_offer_panel)),
        // A touch the browser took for a scroll ends here, answering nothing.
        window_event_listener(leptos::ev::pointercancel, unlock_audio_on(Rc::downgrade(&inner), |_| false)),
        window_event_listener(leptos::ev::keydown, unlock_audio_on(Rc::downgrade(&inner), answers_by_key)),
    ];
    inner.timers.borrow_mut().push(tick);
    inner.tick();
    *inner.panel.borrow_mut() = mount_offer_panel(console);
    // Backoff: 1, 2, 4, 8, 16, then every 30 s.
    let socket = Socket::open("/ws", false, crate::rules::MAX_RETRY_WAIT_S, Box::new(Ring(Rc::downgrade(&inner))));
    *inner.socket.borrow_mut() = Some(socket);
    Ok(LinkHandle { inner, stop: Inner::stop })
}

/// A gesture's listener that unlocks the console's audio. A gesture that
/// answers the offer shown (`answers`) unlocks it without ringing for that
/// offer first: in a tab reloaded while ringing, Enter or a click on Accept
/// would otherwise sound a ring for the moment until the answer lands.
fn unlock_audio_on<E: 'static>(inner: Weak<Inner>, answers: fn(&E) -> bool) -> impl Fn(E) + 'static {
    move |event| {
        if let Some(inner) = inner.upgrade() {
            inner.unlock_audio(!answers(&event));
        }
    }
}

/// How far outside a button a touch may end and still click it (about
/// the browser's touch slop): such a tap answers.
const TAP_SLOP_PX: f64 = 16.0;

/// A press or release on the offer panel's Accept or Decline, where it
/// happens: a touch's events keep the element it began on as their target,
/// so a touch dragged off Accept (which answers nothing, and must ring) is
/// told by where it ends, within `TAP_SLOP_PX` of the button or not.
fn on_offer_panel(event: &web_sys::PointerEvent) -> bool {
    let target = event.target().and_then(|target| target.dyn_into::<web_sys::Element>().ok());
    let button = target.and_then(|element| element.closest(concat!("#", super::offer_slot!(), " button")).ok().flatten());
    button.is_some_and(|button| {
        let (r, x, y) = (button.get_bounding_client_rect(), event.client_x() as f64, event.client_y() as f64);
        (r.left() - TAP_SLOP_PX..=r.right() + TAP_SLOP_PX).contains(&x) && (r.top() - TAP_SLOP_PX..=r.bottom() + TAP_SLOP_PX).contains(&y)
    })
}

/// The offer panel's keys (`OfferKey`).
fn answers_by_key(event: &web_sys::KeyboardEvent) -> bool {
    super::OfferKey::of(&event.key()).is_some()
}

/// The console's heartbeats and RTT probes, on a `HeartbeatClock`. When
/// its worker fails, the worker is tried again `WORKER_RETRY_MS` later (and
/// whenever the socket opens, `Ring::opened`): the page's timer that stands
/// in is throttled once the tab has been hidden five minutes, so waiting for
/// a reconnect would wait for the server to close the socket and lapse the
/// operator first.
fn heartbeat_clock(inner: Weak<Inner>) -> HeartbeatClock {
    let beats = Cell::new(0_u32);
    let beater = inner.clone();
    let beat = move || {
        let Some(inner) = beater.upgrade() else { return };
        let beat = beats.get().wrapping_add(1);
        beats.set(beat);
        if beat.is_multiple_of(PING_EVERY_BEATS) {
            inner.ping();
        } else {
            inner.send(&ConsoleMsg::Heartbeat);
        }
    };
    let failed = move || {
        let inner = inner.clone();
        // Held by the clock that failed: dropped (cancelled) with it.
        Timeout::new(WORKER_RETRY_MS, move || retry_worker(&inner))
    };
    HeartbeatClock::start(HEARTBEAT_MS, beat, failed)
}

/// How long after its worker failed the heartbeat clock tries it again.
const WORKER_RETRY_MS: u32 = 30_000;

/// Gives the console a new clock (a new worker) if its clock stands on the
/// page's timer.
fn retry_worker(inner: &Weak<Inner>) {
    let Some(strong) = inner.upgrade() else { return };
    let retry = strong.heartbeat.borrow().as_ref().is_some_and(HeartbeatClock::on_page_timer);
    if retry {
        // Built before the old clock is dropped; none of its callbacks runs meanwhile.
        let clock = heartbeat_clock(inner.clone());
        let old = strong.heartbeat.borrow_mut().replace(clock);
        drop(old);
        // The new clock's first beat is a whole interval away, and the old
        // one's last may have been nearly that long ago: a beat now keeps
        // the gap the server sees under two intervals (its TTL).
        strong.send(&ConsoleMsg::Heartbeat);
    }
}

/// Where the site build puts `heartbeat_clock.js` (frontend/site).
const HEARTBEAT_CLOCK_URL: &str = "/pkg/heartbeat_clock.js";

/// The heartbeat's clock. A hidden tab's own timers are throttled (Chrome:
/// to once a minute after five minutes hidden), so a console waiting in a
/// background tab would fall silent, be closed by the server after the
/// presence TTL and lapse to offline: no calls for an operator who is
/// there. A dedicated worker's timers are not throttled that way
/// (`heartbeat_clock.js`); the page's own timer stands in where the worker
/// cannot be made or fails (its script did not load, or it threw); then
/// `failed` is called, and what it answers (a retry's timer) is held while
/// the page's timer stands in. A worker that has not ticked
/// `FIRST_TICK_GRACE_MS` after an interval (a fetch of its script that
/// hangs fires no error) has the page's timer stand in the same way, but
/// is not ended: should it tick after all (its script was only slow), it
/// takes over again, and the page's timer and its retry stop. Dropping the
/// clock stops it.
struct HeartbeatClock {
    worker: Option<ClockWorker>,
    fallback: Rc<RefCell<Option<(Interval, Timeout)>>>,
}

/// The clock's worker with its callbacks and its first tick's watchdog,
/// which live as long as it does.
struct ClockWorker {
    worker: web_sys::Worker,
    _on_tick: Closure<dyn FnMut()>,
    _on_error: Closure<dyn FnMut()>,
    _watchdog: Timeout,
}

/// How long past an interval from its start a worker that has not ticked
/// has the page's timer stand in (beating at once): with the heartbeat the
/// socket sent on opening, the server hears the console again well within
/// its TTL.
const FIRST_TICK_GRACE_MS: u32 = 5_000;

impl HeartbeatClock {
    fn start(every_ms: u32, beat: impl Fn() + 'static, failed: impl Fn() -> Timeout + 'static) -> Self {
        let beat = Rc::new(beat);
        let fallback: Rc<RefCell<Option<(Interval, Timeout)>>> = Rc::default();
        let page_timer = {
            let (beat, fallback) = (beat.clone(), fallback.clone());
            move || {
                let beat = beat.clone();
                fallback.borrow_mut().get_or_insert_with(|| (Interval::new(every_ms, move || beat()), failed()));
            }
        };
        let Ok(worker) = web_sys::Worker::new(HEARTBEAT_CLOCK_URL) else {
            page_timer();
            return Self { worker: None, fallback };
        };
        let page_timer = Rc::new(page_timer);
        let ticked = Rc::new(Cell::new(false));
        let on_tick = {
            let (ticked, beat, fallback) = (ticked.clone(), beat.clone(), fallback.clone());
            Closure::<dyn FnMut()>::new(move || {
                ticked.set(true);
                // A slow worker's first tick: the page's timer (and its
                // retry) stood in since the watchdog, and stop now.
                let stood_in = fallback.borrow_mut().take();
                drop(stood_in);
                beat();
            })
        };
        let on_error = {
            // A worker that failed is ended, so it never ticks beside the page's timer.
            let (broken, page_timer) = (worker.clone(), page_timer.clone());
            Closure::<dyn FnMut()>::new(move || {
                broken.terminate();
                page_timer();
            })
        };
        let watchdog = {
            let fallback = fallback.clone();
            Timeout::new(every_ms + FIRST_TICK_GRACE_MS, move || {
                if !ticked.get() && fallback.borrow().is_none() {
                    // The last beat was when the clock started (the socket's
                    // or a retry's), more than an interval ago.
                    beat();
                    page_timer();
                }
            })
        };
        worker.set_onmessage(Some(on_tick.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let _ = worker.post_message(&JsValue::from(every_ms));
        Self { worker: Some(ClockWorker { worker, _on_tick: on_tick, _on_error: on_error, _watchdog: watchdog }), fallback }
    }

    /// Whether the page's timer stands in for the worker.
    fn on_page_timer(&self) -> bool {
        self.fallback.borrow().is_some()
    }
}

impl Drop for HeartbeatClock {
    fn drop(&mut self) {
        if let Some(ClockWorker { worker, .. }) = &self.worker {
            worker.set_onmessage(None);
            worker.set_onerror(None);
            worker.terminate();
        }
        self.fallback.borrow_mut().take();
    }
}

/// The rings scheduled for one offer (its session and expiry); dropping
/// them silences the rest.
struct Ringing {
    offer: (String, i64),
    tones: Vec<OscillatorNode>,
}

impl Drop for Ringing {
    fn drop(&mut self) {
        for tone in &self.tones {
            let _ = tone.stop();
        }
    }
}

/// Mounts the offer panel in the page's offer slot (`OfferSlot`).
fn mount_offer_panel(console: Console) -> Option<Box<dyn std::any::Any>> {
    let slot = web_sys::window()?.document()?.get_element_by_id(super::offer_slot!())?;
    let slot = slot.dyn_into::<web_sys::HtmlElement>().ok()?;
    let panel = leptos::mount::mount_to(slot, move || view! { <super::OfferPanel console/> });
    Some(Box::new(panel))
}

impl LinkHandle {
    pub fn send(&self, msg: &ConsoleMsg) {
        self.inner.send(msg);
    }

    pub fn stop(&self) {
        (self.stop)(&self.inner);
    }

    /// Asks for notification permission. (Audio is unlocked by the same
    /// gesture through the link's own listeners, `Inner::gestures`: kept
    /// there, the ring's code stays in the link's chunk instead of the
    /// main module every screen loads.)
    pub fn unlock_alerts(&self) {
        if web_sys::Notification::permission() == web_sys::NotificationPermission::Default {
            let _ = web_sys::Notification::request_permission();
        }
    }
}

/// What the ring channel's socket hears, for the console.
struct Ring(Weak<Inner>);

impl Handler for Ring {
    fn connecting(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.console.link.set(Link::Connecting);
        }
    }

    fn opened(&mut self, _reconnected: bool) {
        if let Some(inner) = self.0.upgrade() {
            inner.console.link.set(Link::Open);
            inner.send(&ConsoleMsg::Heartbeat);
            // A worker that failed (say its script's fetch met a deploy)
            // is tried again with the socket as well as on its timer.
            retry_worker(&self.0);
        }
    }

    fn text(&mut self, text: String) {
        let Some(inner) = self.0.upgrade() else { return };
        if let Ok(msg) = crate::page_data::read_json::<RingMsg>(&text) {
            inner.apply(msg);
        }
    }

    /// Retried after the backoff's wait, said with the time of the next
    /// try; a refused console is not.
    fn closed(&mut self, _code: u16, wait_s: u32) -> AfterClose {
        let Some(inner) = self.0.upgrade() else { return AfterClose::Stop };
        if matches!(inner.console.link.get_untracked(), Link::Refused(_)) {
            return AfterClose::Stop;
        }
        let delay_ms = i64::from(wait_s) * 1_000;
        inner.console.link.set(Link::Retrying { at_ms: browser_now() + inner.skew_ms.get() + delay_ms });
        AfterClose::RetryIn(wait_s)
    }
}

impl Inner {
    /// Ends the link: its timers, rings, listeners, audio, offer panel and
    /// socket.
    fn stop(&self) {
        self.timers.borrow_mut().clear();
        self.heartbeat.borrow_mut().take();
        self.ringing.borrow_mut().take();
        for gesture in self.gestures.borrow_mut().drain(..) {
            gesture.remove();
        }
        // A context left open keeps the browser's audio thread running.
        let audio = self.audio.borrow_mut().take();
        if let Some(audio) = audio {
            let _ = audio.close();
        }
        self.panel.borrow_mut().take();
        let socket = self.socket.borrow_mut().take();
        if let Some(socket) = socket {
            socket.stop();
        }
    }

    /// Sends `msg` if the socket is open (dropped otherwise: the server's
    /// state is re-sent on reconnect).
    fn send(&self, msg: &ConsoleMsg) {
        if let Some(socket) = self.socket.borrow().as_ref() {
            if let Ok(text) = serde_json::to_string(msg) {
                socket.send_text(&text);
            }
        }
    }

    /// Makes the audio context on a person's gesture, or resumes it, and
    /// (`ring`: the gesture does not answer the offer) rings for an offer
    /// already shown unless it rings already. A context made on a gesture
    /// the browser does not count as the person's (a touch's pointerdown,
    /// Escape) starts suspended, and what is scheduled on it waits: a later
    /// gesture (the touch's pointerup) resumes it. Any later gesture that
    /// does not answer rings too: one that looked like an answer and was
    /// not (a press on Accept dragged off it, a touch taken for a scroll, an
    /// Enter dropped while the socket reconnects) must not leave the offer
    /// silent. (A touch taken for a scroll is no gesture the browser counts:
    /// if nothing unlocked the audio before, its ring is scheduled and
    /// sounds at the next gesture that counts.)
    fn unlock_audio(&self, ring: bool) {
        let made = self.audio.borrow().is_none();
        if made {
            let audio = AudioContext::new().ok();
            *self.audio.borrow_mut() = audio;
        }
        if let Some(audio) = self.audio.borrow().as_ref() {
            if audio.state() != web_sys::AudioContextState::Running {
                let _ = audio.resume();
            }
        }
        if ring {
            self.ring_for_offer();
        }
    }

    /// An RTT probe, its nonce the time it was sent (`RttProbe`).
    fn ping(&self) {
        self.send(&ConsoleMsg::Ping { nonce: RttProbe::nonce(js_sys_now()) });
    }

    fn tick(&self) {
        let now = browser_now() + self.skew_ms.get();
        self.console.now_ms.set(now);
    }

    /// Rings for the offer shown, once a gesture unlocked audio:
    /// every ring until it expires (`rings_left`), scheduled at once on the
    /// audio clock, which keeps time in a hidden tab whose own timers are
    /// throttled; silenced when the offer closes or another replaces it.
    fn ring_for_offer(&self) {
        // The same session offered again (say its first offer expired
        // while this tab was away) rings again: it has a new expiry.
        let same = self.console.offer.with_untracked(|offer| match (offer, self.ringing.borrow().as_ref()) {
            (Some(offer), Some(ringing)) => ringing.offer.0 == offer.session_id && ringing.offer.1 == offer.expires_at,
            _ => false,
        });
        if same {
            return;
        }
        let silenced = self.ringing.borrow_mut().take();
        drop(silenced);
        let (Some(offer), Some(ctx)) = (self.console.offer.get_untracked(), self.audio.borrow().clone()) else { return };
        let rings = rings_left(browser_now() + self.skew_ms.get(), offer.expires_at);
        let start = ctx.current_time();
        let mut tones = Vec::new();
        for ring in 0..rings {
            let at = start + f64::from(ring) * RING_EVERY_MS as f64 / 1_000.0;
            for (i, freq) in [880.0_f32, 660.0].into_iter().enumerate() {
                let (Ok(osc), Ok(gain)) = (ctx.create_oscillator(), ctx.create_gain()) else { break };
                osc.frequency().set_value(freq);
                gain.gain().set_value(0.15);
                let _ = osc.connect_with_audio_node(&gain);
                let _ = gain.connect_with_audio_node(&ctx.destination());
                let at = at + i as f64 * 0.22;
                let _ = osc.start_with_when(at);
                let _ = osc.stop_with_when(at + 0.2);
                tones.push(osc);
            }
        }
        *self.ringing.borrow_mut() = Some(Ringing { offer: (offer.session_id, offer.expires_at), tones });
    }

    fn notify(&self, title: &str, body: &str) {
        if web_sys::Notification::permission() == web_sys::NotificationPermission::Granted {
            let options = web_sys::NotificationOptions::new();
            options.set_body(body);
            options.set_tag("clutchcall-offer");
            let _ = web_sys::Notification::new_with_options(title, &options);
        }
    }

    fn apply(&self, msg: RingMsg) {
        self.apply_msg(msg);
        // Every change of the offer shown comes through here.
        self.ring_for_offer();
    }

    fn apply_msg(&self, msg: RingMsg) {
        let console = self.console;
        console.last_update_ms.set(Some(browser_now() + self.skew_ms.get()));
        match msg {
            RingMsg::Welcome { name, presence, offer, pops, server_now_ms, .. } => {
                self.skew_ms.set(server_now_ms - browser_now());
                console.welcomed();
                console.name.set(Some(name));
                console.presence.set(Some(presence));
                if let Some(offer) = &offer {
                    self.notify(&format!("Distress call: {}", offer.robot_id), &offer.site);
                }
                console.offer.set(offer);
                // The chat is pushed on this socket only once it is
                // subscribed: a message posted before (the page's load, a
                // reconnect, a resync) is read again now.
                console.chat_version.update(|v| *v += 1);
                *self.pops.borrow_mut() = pops;
                self.rtt.borrow_mut().connected();
                self.ping();
            }
            RingMsg::Presence { presence } => console.presence.set(Some(presence)),
            RingMsg::Offer { offer } => {
                let title = match &offer.handover_from {
                    Some(from) => format!("Handover from {from}: {}", offer.robot_id),
                    None => format!("Distress call: {}", offer.robot_id),
                };
                self.notify(&title, &format!("{} · {} ms", offer.site, offer.rtt_ms));
                console.notice.set(None);
                console.offer.set(Some(offer));
            }
            RingMsg::OfferClosed { session_id, how } => {
                let current = console.offer.get_untracked();
                if current.as_ref().is_some_and(|o| o.session_id == session_id) {
                    console.offer.set(None);
                    let robot = current.map(|o| o.robot_id).unwrap_or_default();
                    let notice = match how {
                        OfferEnd::Expired => Some(format!(
                            "You missed the call from {robot}: you are in aux (missed offer). Press Ready when you are back."
                        )),
                        OfferEnd::Withdrawn => Some(format!("{robot} withdrew its call.")),
                        OfferEnd::Accepted | OfferEnd::Declined => None,
                    };
                    console.notice.set(notice);
                }
            }
            RingMsg::Accepted { session_id } => {
                console.offer.set(None);
                (self.navigate)(&cockpit_path(&session_id));
            }
            RingMsg::Pong { nonce } => {
                let seen = self.rtt.borrow_mut().pong(nonce, js_sys_now());
                // Probe a few times after (re)connecting, then every third heartbeat.
                if seen.probe_again {
                    self.ping();
                }
                if let Some(best) = seen.report {
                    // One socket reaches every PoP of this deployment: the
                    // same measurement stands for each (the ACD floors it).
                    for pop in self.pops.borrow().iter() {
                        self.send(&ConsoleMsg::Rtt { pop: pop.clone(), rtt_ms: best });
                    }
                }
            }
            RingMsg::InactivityWarning { session_id, stop_at_ms } => console.inactivity.set(Some((session_id, stop_at_ms))),
            RingMsg::Chat { .. } => console.chat_version.update(|v| *v += 1),
            RingMsg::Handover { notice } => console.handover.set(Some(notice)),
            RingMsg::PlannedEndSoon { session_id, planned_end_ms } => console.planned_end_soon.set(Some((session_id, planned_end_ms))),
            // Org topics are for the admins' live screens, not the console.
            RingMsg::Org { .. } | RingMsg::Resync => {}
            RingMsg::Error { code, message } => {
                // A refused console, or an ended sign-in: say why and stop
                // reconnecting (a sign-out in this tab navigates by itself).
                if console.name.get_untracked().is_none() || code == crate::ring::RingError::SignedOut {
                    console.link.set(Link::Refused(message.clone()));
                }
                console.notice.set(Some(message));
            }
        }
    }
}
