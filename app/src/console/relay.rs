//! The cockpit's socket on its session's relay channel (`/relay/{id}`):
//! robot state for the plot, camera frames for the picture, and the
//! operator's actions out. An admin's live view of a session is the same
//! client on `/relay/{id}/watch`, read-only: it also hears the operator's
//! actions. Reconnects while the cockpit is open, until the
//! relay lets it go (the session ended or control moved).

use leptos::prelude::*;

/// Joint samples kept for the plot (5 s at 30 Hz, with room).
#[cfg(feature = "hydrate")]
const KEPT_SAMPLES: usize = 200;

/// What the cockpit shows of the data plane.
#[derive(Clone, Copy)]
pub struct CockpitRelay {
    /// `(browser ms, joints)`, oldest first.
    pub joints: RwSignal<Vec<(i64, Vec<f32>)>>,
    /// An object URL of the latest camera frame, and the camera's name.
    pub camera: RwSignal<Option<(String, String)>>,
    pub robot_connected: RwSignal<bool>,
    pub connected: RwSignal<bool>,
    /// The relay's last refusal (e.g. input while PAUSED).
    pub refused: RwSignal<Option<String>>,
    /// The admins watching the session's live view, by name.
    pub watching: RwSignal<Vec<String>>,
    /// The operator's last action, as a live view hears it.
    pub last_action: RwSignal<Option<Vec<f32>>>,
    /// Whether the session is live (ACTIVE or PAUSED): the socket is open
    /// only then, and an ended session is not reconnected to.
    pub live: RwSignal<bool>,
    /// The socket on the relay while the session is live.
    #[cfg(feature = "hydrate")]
    socket: StoredValue<Option<crate::socket::Socket>, LocalStorage>,
}

impl CockpitRelay {
    /// Sends an action (the relay forwards it to the robot and counts it as input).
    pub fn send_action(&self, values: &[f32]) {
        #[cfg(feature = "hydrate")]
        self.socket.with_value(|socket| {
            if let Some(socket) = socket {
                let t_ms = js_sys_now();
                let msg = crate::relay::RelayMsg::Action { t_ms, values: values.to_vec() };
                if let Ok(text) = serde_json::to_string(&msg) {
                    socket.send_text(&text);
                }
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = values;
    }

    #[cfg(feature = "hydrate")]
    fn push_joints(&self, at: i64, joints: Vec<f32>) {
        self.joints.update(|kept| {
            kept.push((at, joints));
            let extra = kept.len().saturating_sub(KEPT_SAMPLES);
            kept.drain(..extra);
        });
    }
}

#[cfg(feature = "hydrate")]
fn js_sys_now() -> i64 {
    web_sys::window().and_then(|w| w.performance()).map(|p| p.time_origin() + p.now()).unwrap_or(0.0) as i64
}

impl CockpitRelay {
    /// What the cockpit shows of the data plane: nothing yet, no socket.
    pub fn new() -> Self {
        CockpitRelay {
            joints: RwSignal::new(Vec::new()),
            camera: RwSignal::new(None),
            robot_connected: RwSignal::new(false),
            connected: RwSignal::new(false),
            refused: RwSignal::new(None),
            watching: RwSignal::new(Vec::new()),
            last_action: RwSignal::new(None),
            live: RwSignal::new(false),
            #[cfg(feature = "hydrate")]
            socket: StoredValue::new_local(None),
        }
    }

    /// Keeps the socket on `session_id`'s relay open while the session is
    /// live and the calling component lives. Called by the cockpit's
    /// deferred panels, so that its code is not loaded with the page.
    pub fn keep_open(self, session_id: String) {
        #[cfg(feature = "hydrate")]
        keep_open(self, format!("/relay/{session_id}"));
        #[cfg(not(feature = "hydrate"))]
        let _ = (self, session_id);
    }

    /// As `keep_open`, as an admin's read-only live view of the session.
    pub fn keep_watching(self, session_id: String) {
        #[cfg(feature = "hydrate")]
        keep_open(self, format!("/relay/{session_id}/watch"));
        #[cfg(not(feature = "hydrate"))]
        let _ = (self, session_id);
    }
}

impl Default for CockpitRelay {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "hydrate")]
fn keep_open(relay: CockpitRelay, path: String) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // Set when the relay lets the cockpit go: not reopened after that.
    let released = Arc::new(AtomicBool::new(false));
    let socket = relay.socket;
    // Stops the socket (and its retries); true if there was one.
    let close = move || {
        let open = socket.try_update_value(Option::take).flatten();
        open.map(|socket| socket.stop()).is_some()
    };
    on_cleanup(move || {
        close();
        // The last camera frame's object URL goes with the view.
        #[cfg(feature = "hydrate")]
        if let Some((url, _)) = relay.camera.try_get_untracked().flatten() {
            let _ = web_sys::Url::revoke_object_url(&url);
        }
    });
    // Open while the session is live; closed (and not retried) once it ends.
    Effect::new(move |_| {
        if relay.live.get() {
            if socket.with_value(Option::is_none) && !released.load(Ordering::Relaxed) {
                let cockpit = browser::Cockpit { relay, released: released.clone() };
                let opened = crate::socket::Socket::open(&path, true, crate::relay::RELAY_MAX_WAIT_S, Box::new(cockpit));
                socket.set_value(Some(opened));
            }
        } else if close() {
            relay.connected.set(false);
            relay.robot_connected.set(false);
        }
    });
}

#[cfg(feature = "hydrate")]
mod browser {
    use super::{js_sys_now, CockpitRelay};
    use crate::relay::{after_relay_close, AfterRelayClose, CameraFrame, RelayMsg};
    use crate::socket::{AfterClose, Handler};
    use leptos::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use web_sys::{Blob, BlobPropertyBag, Url};

    /// What the relay socket hears, for the cockpit.
    pub struct Cockpit {
        pub relay: CockpitRelay,
        pub released: Arc<AtomicBool>,
    }

    impl Handler for Cockpit {
        fn opened(&mut self, _reconnected: bool) {
            self.relay.connected.set(true);
        }

        fn text(&mut self, text: String) {
            let relay = self.relay;
            match crate::page_data::read_json::<RelayMsg>(&text) {
                Ok(RelayMsg::State { joints, .. }) => relay.push_joints(js_sys_now(), joints),
                Ok(RelayMsg::Peers { robot, watching, .. }) => {
                    relay.robot_connected.set(robot);
                    relay.watching.set(watching);
                }
                Ok(RelayMsg::Action { values, .. }) => relay.last_action.set(Some(values)),
                Ok(RelayMsg::Refused { reason }) => relay.refused.set(Some(reason)),
                _ => {}
            }
        }

        /// A camera frame.
        fn binary(&mut self, bytes: Vec<u8>) {
            if let Some(frame) = CameraFrame::decode(&bytes) {
                show_frame(self.relay, frame);
            }
        }

        fn closed(&mut self, code: u16, wait_s: u32) -> AfterClose {
            self.relay.connected.set(false);
            self.relay.robot_connected.set(false);
            match after_relay_close(code, wait_s) {
                // Stopped for good: a record reloaded after this may
                // still say ACTIVE, and must not reopen it (a 409).
                AfterRelayClose::Released => {
                    self.released.store(true, Ordering::Relaxed);
                    AfterClose::Stop
                }
                AfterRelayClose::RetryIn(wait_s) => AfterClose::RetryIn(wait_s),
            }
        }
    }

    /// The frame as an object URL for the `<img>`; the previous one is freed.
    fn show_frame(relay: CockpitRelay, frame: CameraFrame) {
        let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(frame.jpeg.as_slice()));
        let options = BlobPropertyBag::new();
        options.set_type("image/jpeg");
        let Ok(blob) = Blob::new_with_u8_array_sequence_and_options(&parts, &options) else { return };
        let Ok(url) = Url::create_object_url_with_blob(&blob) else { return };
        if let Some((old, _)) = relay.camera.get_untracked() {
            let _ = Url::revoke_object_url(&old);
        }
        relay.camera.set(Some((url, frame.name)));
    }
}
