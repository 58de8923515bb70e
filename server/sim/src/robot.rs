//! One simulated edge agent: heartbeats, a distress call now and then,
//! safety telemetry while its session is live, and state and camera
//! frames on the relay while attached.

use crate::{camera, nap, ws_url};
use domain::models::{LifecycleState, SafetyState};
use domain::relay::{CameraFrame, RelayMsg};
use futures::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const HEARTBEAT_EVERY: Duration = Duration::from_millis(domain::rules::ROBOT_HEARTBEAT_EVERY_MS as u64);
const JOINTS: usize = 6;

pub struct Robot {
    pub id: String,
    pub token: String,
    pub base: String,
    pub http: reqwest::Client,
    pub call_every: Duration,
    pub max_calls: Option<u32>,
    pub seed: u64,
}

impl Robot {
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut rng = StdRng::seed_from_u64(self.seed);
        // Heartbeats go on whatever the robot is doing, sessions included.
        let heartbeats = tokio::spawn(heartbeat(self.base.clone(), self.id.clone(), self.token.clone(), self.http.clone(), rng.r#gen(), stop.clone()));
        // Spread the fleet's first calls over the first interval.
        let mut wait = self.call_every.mul_f64(rng.gen_range(0.05..0.6));
        let mut calls = 0;
        while nap(wait, &mut stop).await {
            if self.max_calls.is_some_and(|max| calls >= max) {
                wait = HEARTBEAT_EVERY;
                continue;
            }
            if let Some(session) = self.raise().await {
                calls += 1;
                self.live(&session, &mut rng, &mut stop).await;
            }
            wait = self.call_every.mul_f64(rng.gen_range(0.5..1.5));
        }
        heartbeats.abort();
    }

    /// Raises a distress call; the session's id.
    async fn raise(&self) -> Option<String> {
        let res = self.http.post(format!("{}/v1/sessions", self.base)).bearer_auth(&self.token).json(&serde_json::json!({ "robotId": self.id })).send().await.ok()?;
        let body: serde_json::Value = res.json().await.ok()?;
        body["sessionId"].as_str().map(str::to_string)
    }

    async fn lifecycle(&self, session: &str) -> Option<LifecycleState> {
        let res = self.http.get(format!("{}/v1/sessions/{session}", self.base)).bearer_auth(&self.token).send().await.ok()?;
        let body: serde_json::Value = res.json().await.ok()?;
        LifecycleState::parse(body["lifecycle"].as_str()?)
    }

    /// From the call to the session's end: telemetry every second, frames
    /// on the relay while attached.
    async fn live(&self, session: &str, rng: &mut StdRng, stop: &mut watch::Receiver<bool>) {
        let mut safety = SafetyState::Boot;
        let mut relay: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            let Some(lifecycle) = self.lifecycle(session).await else { break };
            if lifecycle.is_terminal() {
                break;
            }
            if matches!(lifecycle, LifecycleState::Active | LifecycleState::Paused) {
                safety = next_safety(safety, rng);
                self.telemetry(session, safety, rng).await;
                if relay.as_ref().is_none_or(|r| r.is_finished()) {
                    relay = Some(tokio::spawn(stream_frames(self.base.clone(), self.token.clone(), session.to_string(), rng.r#gen())));
                }
            }
            if !nap(Duration::from_secs(1), stop).await {
                break;
            }
        }
        if let Some(relay) = relay {
            relay.abort();
        }
    }

    async fn telemetry(&self, session: &str, state: SafetyState, rng: &mut StdRng) {
        // Link numbers near the paths' floors (162–275 ms in the demo).
        let rtt: u32 = rng.gen_range(150..320);
        let (divergence, velocity) = match state {
            SafetyState::Degraded => (rng.gen_range(4.0..12.0), rng.gen_range(0.3..0.8)),
            SafetyState::Diverged => (rng.gen_range(15.5..25.0), 0.2),
            SafetyState::ProtectiveStop => (rng.gen_range(5.0..20.0), 0.0),
            _ => (rng.gen_range(0.2..3.0), 1.0),
        };
        let body = serde_json::json!({ "state": state.as_str(), "rttMs": rtt, "divergenceDeg": divergence, "velocityScale": velocity });
        let _ = self.http.post(format!("{}/v1/sessions/{session}/telemetry", self.base)).bearer_auth(&self.token).json(&body).send().await;
    }
}

/// A heartbeat every `HEARTBEAT_EVERY`; now and then (2%) none for a
/// minute, so the registry shows the robot offline.
async fn heartbeat(base: String, id: String, token: String, http: reqwest::Client, seed: u64, mut stop: watch::Receiver<bool>) {
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        let _ = http.post(format!("{base}/v1/robots/{id}/heartbeat")).bearer_auth(&token).send().await;
        let pause = if rng.gen_bool(0.02) { Duration::from_secs(60) + HEARTBEAT_EVERY } else { HEARTBEAT_EVERY };
        if !nap(pause, &mut stop).await {
            return;
        }
    }
}

/// The seed's states, mostly healthy: SAFE → ARMED, now and then DEGRADED
/// or DIVERGED and back, rarely a PROTECTIVE_STOP (latched by the server).
fn next_safety(now: SafetyState, rng: &mut StdRng) -> SafetyState {
    let roll: f64 = rng.r#gen();
    match now {
        SafetyState::Boot => SafetyState::Safe,
        SafetyState::Safe => SafetyState::Armed,
        SafetyState::Armed if roll < 0.06 => SafetyState::Degraded,
        SafetyState::Armed if roll < 0.09 => SafetyState::Diverged,
        SafetyState::Armed if roll < 0.095 => SafetyState::ProtectiveStop,
        SafetyState::Degraded | SafetyState::Diverged if roll < 0.25 => SafetyState::Armed,
        other => other,
    }
}

/// State at 30 Hz and camera at 5 fps on the relay; now and then a stall of
/// a few seconds (the wallboard's relay panel shows it). Actions from the
/// cockpit are read and dropped (a real agent would move the arm).
async fn stream_frames(base: String, token: String, session: String, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let Ok(mut request) = ws_url(&base, &format!("/relay/{session}")).into_client_request() else { return };
    let Ok(auth) = format!("Bearer {token}").parse() else { return };
    request.headers_mut().insert("authorization", auth);
    let Ok((ws, _)) = tokio_tungstenite::connect_async(request).await else { return };
    let (mut sink, mut stream) = ws.split();
    let reader = tokio::spawn(async move { while let Some(Ok(_)) = stream.next().await {} });
    let mut tick = tokio::time::interval(Duration::from_millis(33));
    let mut phase = 0.0f32;
    let tint: u8 = rng.r#gen();
    for n in 0u64.. {
        tick.tick().await;
        if reader.is_finished() {
            break;
        }
        if rng.gen_bool(0.0015) {
            // A stall: nothing for 3–5 s.
            tokio::time::sleep(Duration::from_millis(rng.gen_range(3_000..5_000))).await;
        }
        phase += 0.05;
        let joints: Vec<f32> = (0..JOINTS).map(|j| (phase + j as f32 * 0.8).sin() * (1.0 + j as f32 * 0.2)).collect();
        let t_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let state = RelayMsg::State { t_ms, joints, fields: Default::default() };
        let Ok(text) = serde_json::to_string(&state) else { break };
        if sink.send(Message::Text(text.into())).await.is_err() {
            break;
        }
        if n % 6 == 0 {
            let frame = CameraFrame { name: "front".into(), t_ms, jpeg: camera::frame(phase, tint) };
            if sink.send(Message::Binary(frame.encode().into())).await.is_err() {
                break;
            }
        }
    }
    reader.abort();
}
