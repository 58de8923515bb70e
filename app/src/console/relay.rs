//! The cockpit's socket on its session's relay channel (`/relay/{id}`):
//! robot state for the plot, camera frames for the picture, and the
//! operator's actions out. Reconnects while the cockpit is open, until the
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
    /// Whether the session is live (ACTIVE or PAUSED): the socket is open
    /// only then, and an ended session is not reconnected to.
    pub live: RwSignal<bool>,
    #[cfg(feature = "hydrate")]
    socket: StoredValue<Option<web_sys::WebSocket>, LocalStorage>,
}

impl CockpitRelay {
    /// Sends an action (the relay forwards it to the robot and counts it as input).
    pub fn send_action(&self, values: &[f32]) {
        #[cfg(feature = "hydrate")]
        self.socket.with_value(|socket| {
            if let Some(ws) = socket.as_ref().filter(|ws| ws.ready_state() == web_sys::WebSocket::OPEN) {
                let t_ms = js_sys_now();
                let msg = crate::relay::RelayMsg::Action { t_ms, values: values.to_vec() };
                if let Ok(text) = serde_json::to_string(&msg) {
                    let _ = ws.send_with_str(&text);
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
        keep_open(self, session_id);
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
fn keep_open(relay: CockpitRelay, session_id: String) {
    // Set when the cockpit closes, or when the relay lets it go.
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = stopped.clone();
    let socket = relay.socket;
    let close = move || {
        socket.update_value(|ws| {
            if let Some(ws) = ws.take() {
                let _ = ws.close();
            }
        });
    };
    on_cleanup(move || {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        close();
    });
    // Open while the session is live; closed (and not retried) once it ends.
    Effect::new(move |_| {
        if relay.live.get() {
            if relay.socket.with_value(Option::is_none) {
                browser::connect(relay, session_id.clone(), stopped.clone(), 1);
            }
        } else {
            close();
        }
    });
}

#[cfg(feature = "hydrate")]
mod browser {
    use super::{js_sys_now, CockpitRelay};
    use crate::relay::{after_relay_close, AfterRelayClose, CameraFrame, RelayMsg, RELAY_MAX_WAIT_S};
    use crate::rules::doubled_wait_s;
    use leptos::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;
    use web_sys::{BinaryType, Blob, BlobPropertyBag, MessageEvent, Url, WebSocket};

    pub fn connect(relay: CockpitRelay, session_id: String, stopped: Arc<AtomicBool>, wait_s: u32) {
        if stopped.load(Ordering::Relaxed) || !relay.live.get_untracked() {
            return;
        }
        let Some(location) = web_sys::window().map(|w| w.location()) else { return };
        let scheme = if location.protocol().as_deref() == Ok("https:") { "wss" } else { "ws" };
        let Ok(host) = location.host() else { return };
        let Ok(ws) = WebSocket::new(&format!("{scheme}://{host}/relay/{session_id}")) else { return };
        ws.set_binary_type(BinaryType::Arraybuffer);
        let on_open = Closure::<dyn FnMut()>::new(move || relay.connected.set(true));
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        on_open.forget();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(text) = ev.data().as_string() {
                match crate::page_data::read_json::<RelayMsg>(&text) {
                    Ok(RelayMsg::State { joints, .. }) => relay.push_joints(js_sys_now(), joints),
                    Ok(RelayMsg::Peers { robot, .. }) => relay.robot_connected.set(robot),
                    Ok(RelayMsg::Refused { reason }) => relay.refused.set(Some(reason)),
                    _ => {}
                }
            } else if let Ok(buffer) = ev.data().dyn_into::<js_sys::ArrayBuffer>() {
                let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
                if let Some(frame) = CameraFrame::decode(&bytes) {
                    show_frame(relay, frame);
                }
            }
        });
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
        let on_close = {
            let (session_id, stopped) = (session_id.clone(), stopped.clone());
            Closure::<dyn FnMut(web_sys::CloseEvent)>::new(move |ev: web_sys::CloseEvent| {
                relay.connected.set(false);
                relay.robot_connected.set(false);
                relay.socket.set_value(None);
                match after_relay_close(ev.code(), wait_s) {
                    // Stopped for good: a record reloaded after this may
                    // still say ACTIVE, and must not reopen it (a 409).
                    AfterRelayClose::Released => stopped.store(true, Ordering::Relaxed),
                    AfterRelayClose::RetryIn(wait_s) => {
                        let (session_id, stopped) = (session_id.clone(), stopped.clone());
                        let retry = move || connect(relay, session_id, stopped, doubled_wait_s(wait_s, RELAY_MAX_WAIT_S));
                        gloo_timers::callback::Timeout::new(wait_s * 1_000, retry).forget();
                    }
                }
            })
        };
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        on_close.forget();
        relay.socket.set_value(Some(ws));
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
