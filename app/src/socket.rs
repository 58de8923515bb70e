//! The browser's one WebSocket client, used by the operator console's ring
//! channel (`/ws`), the live screens' watch sockets (`/ws?watch=…`) and the
//! cockpit's relay socket (`/relay/{session}`).
//!
//! One URL builder, one backoff, one reconnect loop; what a socket hears,
//! and whether a close is retried, is the owner's (a [`Handler`]). The
//! bookkeeping is plain functions here ([`socket_url`], [`Reconnect`]),
//! tested without a browser; the socket itself is browser-only.
//!
//! Memory stays flat however often a socket reconnects: every listener is
//! owned by the [`Socket`] and dropped once its WebSocket has closed (at
//! the next try, never while it may still be running), where a forgotten
//! closure was kept by the page for good.

use crate::rules::doubled_wait_s;

/// The URL of a socket at `path` (with its query) on the page's host:
/// `wss:` under `https:`, else `ws:`.
pub fn socket_url(protocol: &str, host: &str, path: &str) -> String {
    let scheme = if protocol == "https:" { "wss" } else { "ws" };
    format!("{scheme}://{host}{path}")
}

/// What a socket's owner says once the socket has closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterClose {
    /// Try again after this many seconds (usually the wait the backoff
    /// proposed); the wait after that doubles from it.
    RetryIn(u32),
    /// Stop for good: no more tries, and the owner's handler is dropped.
    Stop,
}

/// The reconnect loop's bookkeeping: the backoff (1, 2, 4, … up to a cap,
/// `rules::doubled_wait_s`, from 1 again once a socket opens), the tries
/// made, and whether the loop has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    wait_s: u32,
    cap_s: u32,
    tries: u32,
    stopped: bool,
}

impl Reconnect {
    /// Waits of at most `cap_s` seconds.
    pub const fn new(cap_s: u32) -> Self {
        Reconnect { wait_s: 1, cap_s, tries: 0, stopped: false }
    }

    /// A try begins, unless the loop has stopped (then false: no try).
    pub fn try_now(&mut self) -> bool {
        if self.stopped {
            return false;
        }
        self.tries = self.tries.saturating_add(1);
        true
    }

    /// A socket opened: the backoff starts over. True if it is a reconnect
    /// (a try came before this one), so what changed meanwhile may be
    /// missing from the page; false for the first try's socket.
    pub fn opened(&mut self) -> bool {
        self.wait_s = 1;
        self.tries > 1
    }

    /// The wait the backoff proposes for the next try, in seconds.
    pub fn wait_s(&self) -> u32 {
        self.wait_s
    }

    /// A socket closed (or could not be made) and its owner said what to
    /// do: the delay before the next try, in ms, or `None` once stopped.
    pub fn closed(&mut self, after: AfterClose) -> Option<u32> {
        if self.stopped {
            return None;
        }
        match after {
            AfterClose::RetryIn(wait_s) => {
                self.wait_s = doubled_wait_s(wait_s, self.cap_s);
                Some(wait_s.saturating_mul(1_000))
            }
            AfterClose::Stop => {
                self.stopped = true;
                None
            }
        }
    }

    /// Stops for good: no more tries.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

/// The close code given to the owner when a WebSocket could not even be
/// made (an abnormal closure).
pub const NOT_MADE: u16 = 1006;

#[cfg(feature = "hydrate")]
pub use browser::{Handler, Socket};

#[cfg(feature = "hydrate")]
mod browser {
    use super::{socket_url, AfterClose, Reconnect, NOT_MADE};
    use gloo_timers::callback::Timeout;
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;
    use web_sys::{BinaryType, CloseEvent, MessageEvent, WebSocket};

    /// What a socket's owner does with what the socket hears. Called from
    /// the socket's listeners, never while the socket is borrowed: a
    /// handler may send on its socket, or stop it.
    pub trait Handler {
        /// A try to connect begins.
        fn connecting(&mut self) {}
        /// The socket opened; `reconnected` unless it is the first try's.
        fn opened(&mut self, reconnected: bool);
        fn text(&mut self, text: String);
        /// A binary message (only for a socket opened with `binary`).
        fn binary(&mut self, _bytes: Vec<u8>) {}
        /// The socket closed with `code` ([`super::NOT_MADE`] if it could
        /// not be made); `wait_s` is what the backoff proposes.
        fn closed(&mut self, code: u16, wait_s: u32) -> AfterClose;
    }

    /// One socket that reconnects until stopped. Clones are the same
    /// socket; dropping the last one closes it.
    #[derive(Clone)]
    pub struct Socket(Rc<State>);

    struct State {
        url: String,
        binary: bool,
        plan: Cell<Reconnect>,
        /// The owner's; `None` once stopped (or while it is being called).
        handler: RefCell<Option<Box<dyn Handler>>>,
        /// The socket now, with its listeners.
        current: RefCell<Option<Wired>>,
        /// The last closed socket, with its listeners: set aside from
        /// inside one of them (dropping a closure while it runs is an
        /// error), dropped at the next try.
        spent: RefCell<Option<Wired>>,
        /// The pending retry.
        retry: RefCell<Option<Timeout>>,
        /// The retry timer that started the current try: it was running
        /// when it was taken out of `retry`, so it is dropped at the next.
        fired: RefCell<Option<Timeout>>,
    }

    /// A WebSocket and the listeners it calls (owned here, never forgotten).
    struct Wired {
        ws: WebSocket,
        _on_open: Closure<dyn FnMut()>,
        _on_message: Closure<dyn FnMut(MessageEvent)>,
        _on_close: Closure<dyn FnMut(CloseEvent)>,
    }

    impl Wired {
        /// Unhooks the listeners (so the browser never calls them once they
        /// are dropped) and closes the socket (a no-op once closed).
        fn shut(&self) {
            self.ws.set_onopen(None);
            self.ws.set_onmessage(None);
            self.ws.set_onclose(None);
            let _ = self.ws.close();
        }
    }

    impl Drop for Wired {
        fn drop(&mut self) {
            self.shut();
        }
    }

    impl Socket {
        /// Opens a socket at `path` (with its query) on the page's host,
        /// reconnecting after the backoff (waits of at most `cap_s`) for as
        /// long as `handler` says so and the socket is not stopped. With
        /// `binary`, binary messages arrive as bytes.
        pub fn open(path: &str, binary: bool, cap_s: u32, handler: Box<dyn Handler>) -> Socket {
            let url = web_sys::window()
                .map(|w| w.location())
                .map(|l| socket_url(&l.protocol().unwrap_or_default(), &l.host().unwrap_or_default(), path))
                .unwrap_or_default();
            let state = Rc::new(State {
                url,
                binary,
                plan: Cell::new(Reconnect::new(cap_s)),
                handler: RefCell::new(Some(handler)),
                current: RefCell::new(None),
                spent: RefCell::new(None),
                retry: RefCell::new(None),
                fired: RefCell::new(None),
            });
            connect(&state);
            Socket(state)
        }

        /// Sends `text` if the socket is open now; false if not sent.
        pub fn send_text(&self, text: &str) -> bool {
            let current = self.0.current.borrow();
            current.as_ref().is_some_and(|w| w.ws.ready_state() == WebSocket::OPEN && w.ws.send_with_str(text).is_ok())
        }

        /// Closes the socket, cancels a pending retry and drops the
        /// handler, for good.
        pub fn stop(&self) {
            self.0.stop();
        }
    }

    impl State {
        fn update_plan<R>(&self, f: impl FnOnce(&mut Reconnect) -> R) -> R {
            let mut plan = self.plan.get();
            let r = f(&mut plan);
            self.plan.set(plan);
            r
        }

        /// Calls the owner's handler, unless stopped. It is taken out for
        /// the call, so that it may send or stop; if it stopped the socket,
        /// it is dropped here, once it has returned.
        fn call<R>(&self, f: impl FnOnce(&mut dyn Handler) -> R) -> Option<R> {
            let mut handler = self.handler.borrow_mut().take()?;
            let r = f(handler.as_mut());
            if !self.plan.get().stopped() {
                *self.handler.borrow_mut() = Some(handler);
            }
            Some(r)
        }

        fn stop(&self) {
            self.update_plan(Reconnect::stop);
            self.retry.borrow_mut().take();
            self.handler.borrow_mut().take();
            // Closed now; its listeners (one may be running: this can be
            // called from a handler) go with the next try's or the socket.
            let current = self.current.borrow_mut().take();
            if let Some(wired) = current {
                wired.shut();
                *self.spent.borrow_mut() = Some(wired);
            }
        }
    }

    fn connect(state: &Rc<State>) {
        // Nothing of the last socket is running now (this runs from `open`
        // or a retry timer): its listeners go.
        state.spent.borrow_mut().take();
        if !state.update_plan(Reconnect::try_now) {
            return;
        }
        state.call(|h| h.connecting());
        let Ok(ws) = WebSocket::new(&state.url) else {
            closed(state, NOT_MADE);
            return;
        };
        if state.binary {
            ws.set_binary_type(BinaryType::Arraybuffer);
        }
        let weak = Rc::downgrade(state);
        let on_open = Closure::<dyn FnMut()>::new(move || {
            if let Some(state) = weak.upgrade() {
                let reconnected = state.update_plan(Reconnect::opened);
                state.call(|h| h.opened(reconnected));
            }
        });
        let weak = Rc::downgrade(state);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let Some(state) = weak.upgrade() else { return };
            let data = ev.data();
            if let Some(text) = data.as_string() {
                state.call(|h| h.text(text));
            } else if let Ok(buffer) = data.dyn_into::<js_sys::ArrayBuffer>() {
                let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
                state.call(|h| h.binary(bytes));
            }
        });
        let weak = Rc::downgrade(state);
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |ev: CloseEvent| {
            if let Some(state) = weak.upgrade() {
                closed(&state, ev.code());
            }
        });
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        *state.current.borrow_mut() = Some(Wired { ws, _on_open: on_open, _on_message: on_message, _on_close: on_close });
    }

    /// The socket closed (or could not be made): ask the owner, then retry
    /// after the wait or stop.
    fn closed(state: &Rc<State>, code: u16) {
        // Set aside, not dropped: this may run inside its own listener.
        let current = state.current.borrow_mut().take();
        if current.is_some() {
            *state.spent.borrow_mut() = current;
        }
        let wait_s = state.plan.get().wait_s();
        let after = state.call(|h| h.closed(code, wait_s)).unwrap_or(AfterClose::Stop);
        match state.update_plan(|plan| plan.closed(after)) {
            Some(delay_ms) => {
                let weak = Rc::downgrade(state);
                let timer = Timeout::new(delay_ms, move || {
                    if let Some(state) = weak.upgrade() {
                        // This timer is running: moved aside, not dropped.
                        let fired = state.retry.borrow_mut().take();
                        *state.fired.borrow_mut() = fired;
                        connect(&state);
                    }
                });
                *state.retry.borrow_mut() = Some(timer);
            }
            None => state.stop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::{after_relay_close, AfterRelayClose, RELAY_MAX_WAIT_S};
    use crate::rules::MAX_RETRY_WAIT_S;

    #[test]
    fn a_socket_is_wss_under_https_and_ws_otherwise_on_the_pages_host() {
        assert_eq!(socket_url("https:", "clutchcall.example", "/ws"), "wss://clutchcall.example/ws");
        assert_eq!(socket_url("http:", "127.0.0.1:3000", "/ws?watch=org"), "ws://127.0.0.1:3000/ws?watch=org");
        assert_eq!(socket_url("http:", "localhost:8080", "/relay/ses-1"), "ws://localhost:8080/relay/ses-1");
        assert_eq!(socket_url("", "h", "/ws"), "ws://h/ws", "no protocol known: plain ws");
    }

    /// Closes `n` times without opening, each retried after the proposed wait.
    fn waits(plan: &mut Reconnect, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| {
                assert!(plan.try_now());
                plan.closed(AfterClose::RetryIn(plan.wait_s())).unwrap() / 1_000
            })
            .collect()
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_and_starts_over_once_a_socket_opens() {
        let mut plan = Reconnect::new(MAX_RETRY_WAIT_S);
        assert_eq!(waits(&mut plan, 8), [1, 2, 4, 8, 16, 30, 30, 30]);
        assert!(plan.try_now());
        assert!(plan.opened(), "the ninth try's socket is a reconnect");
        assert_eq!(plan.wait_s(), 1, "open: from 1 s again");
        assert_eq!(waits(&mut plan, 3), [1, 2, 4]);
    }

    #[test]
    fn only_the_first_tries_socket_is_not_a_reconnect() {
        let mut plan = Reconnect::new(MAX_RETRY_WAIT_S);
        assert!(plan.try_now());
        assert!(!plan.opened(), "the first socket follows a fresh page load");
        assert_eq!(plan.closed(AfterClose::RetryIn(plan.wait_s())), Some(1_000));
        assert!(plan.try_now());
        assert!(plan.opened(), "a reconnect: the page may have missed changes");

        let mut failed_first = Reconnect::new(MAX_RETRY_WAIT_S);
        assert!(failed_first.try_now());
        assert_eq!(failed_first.closed(AfterClose::RetryIn(failed_first.wait_s())), Some(1_000), "the first try failed");
        assert!(failed_first.try_now());
        assert!(failed_first.opened(), "opened after a failed try: a reconnect too");
    }

    #[test]
    fn a_stop_is_for_good_whether_the_owner_or_a_close_says_so() {
        let mut plan = Reconnect::new(MAX_RETRY_WAIT_S);
        assert!(plan.try_now());
        assert_eq!(plan.closed(AfterClose::Stop), None);
        assert!(plan.stopped());
        assert!(!plan.try_now(), "no try once stopped");
        assert_eq!(plan.closed(AfterClose::RetryIn(1)), None, "a late close does not restart it");

        let mut stopped = Reconnect::new(MAX_RETRY_WAIT_S);
        assert!(stopped.try_now());
        assert_eq!(stopped.closed(AfterClose::RetryIn(stopped.wait_s())), Some(1_000));
        stopped.stop();
        assert!(!stopped.try_now(), "a retry already scheduled makes no try");
    }

    /// The cockpit's owner: the relay's rule on its close code.
    fn relay_after(code: u16, wait_s: u32) -> AfterClose {
        match after_relay_close(code, wait_s) {
            AfterRelayClose::Released => AfterClose::Stop,
            AfterRelayClose::RetryIn(wait_s) => AfterClose::RetryIn(wait_s),
        }
    }

    #[test]
    fn the_relay_socket_backs_off_to_its_own_cap_and_stops_when_released() {
        let mut plan = Reconnect::new(RELAY_MAX_WAIT_S);
        let waits: Vec<u32> = (0..6)
            .map(|_| {
                assert!(plan.try_now());
                plan.closed(relay_after(1006, plan.wait_s())).unwrap() / 1_000
            })
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 15, 15]);
        assert!(plan.try_now());
        assert_eq!(plan.closed(relay_after(1000, plan.wait_s())), None, "released: closed for good");
        assert!(!plan.try_now());
    }

    #[test]
    fn the_wait_is_whole_seconds_in_ms_and_never_overflows() {
        let mut plan = Reconnect::new(MAX_RETRY_WAIT_S);
        assert!(plan.try_now());
        assert_eq!(plan.closed(AfterClose::RetryIn(u32::MAX)), Some(u32::MAX));
        assert_eq!(plan.wait_s(), MAX_RETRY_WAIT_S);
    }
}
