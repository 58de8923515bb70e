//! One simulated operator console: signs in, says Ready on the ring
//! channel, answers offers after a human-ish pause, drives the robot over
//! the relay (actions at 10 Hz, which keep the inactivity chain quiet)
//! and completes the session after a while.

use crate::{nap, ws_url};
use domain::relay::RelayMsg;
use domain::ring::{ConsoleMsg, RingMsg, HEARTBEAT_MS};
use futures::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

pub struct Operator {
    pub email: String,
    pub password: String,
    pub base: String,
    pub session_length: Duration,
    pub seed: u64,
}

impl Operator {
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut rng = StdRng::seed_from_u64(self.seed);
        loop {
            if let Err(e) = self.shift(&mut rng, &mut stop).await {
                tracing::debug!(operator = %self.email, error = %e, "simulated console ended; starting again");
            }
            if !nap(Duration::from_secs(5), &mut stop).await {
                return;
            }
        }
    }

    async fn sign_in(&self) -> anyhow::Result<(reqwest::Client, String)> {
        let http = reqwest::Client::builder().cookie_store(true).timeout(Duration::from_secs(10)).build()?;
        let res = http
            .post(format!("{}/api/sign_in", self.base))
            .header("origin", &self.base)
            .form(&[("email", self.email.as_str()), ("password", self.password.as_str())])
            .send()
            .await?;
        let cookie = res
            .headers()
            .get("set-cookie")
            .and_then(|c| c.to_str().ok())
            .and_then(|c| c.split(';').next())
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("sign-in refused: {}", res.status()))?;
        Ok((http, cookie))
    }

    /// One connected stretch of the console.
    async fn shift(&self, rng: &mut StdRng, stop: &mut watch::Receiver<bool>) -> anyhow::Result<()> {
        let (http, cookie) = self.sign_in().await?;
        let mut request = ws_url(&self.base, "/ws").into_client_request()?;
        request.headers_mut().insert("cookie", cookie.parse()?);
        request.headers_mut().insert("origin", self.base.parse()?);
        let (ws, _) = tokio_tungstenite::connect_async(request).await?;
        let (mut sink, mut stream) = ws.split();
        let text = |msg: ConsoleMsg| Message::Text(serde_json::to_string(&msg).unwrap_or_default().into());
        let mut heartbeat = tokio::time::interval(Duration::from_millis(u64::from(HEARTBEAT_MS)));
        // Sessions finished by the driver: back to Ready after a breather.
        let (done_tx, mut done) = mpsc::unbounded_channel::<()>();
        sink.send(text(ConsoleMsg::Ready)).await?;
        loop {
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                _ = heartbeat.tick() => sink.send(text(ConsoleMsg::Heartbeat)).await?,
                Some(()) = done.recv() => {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(1_000..4_000))).await;
                    sink.send(text(ConsoleMsg::Ready)).await?;
                }
                frame = stream.next() => {
                    let Some(Ok(Message::Text(frame))) = frame else {
                        match frame {
                            Some(Ok(_)) => continue,
                            _ => anyhow::bail!("the ring channel closed"),
                        }
                    };
                    match serde_json::from_str::<RingMsg>(&frame) {
                        Ok(RingMsg::Offer { offer }) => {
                            // A person reads the offer before answering.
                            tokio::time::sleep(Duration::from_millis(rng.gen_range(800..3_000))).await;
                            sink.send(text(ConsoleMsg::Accept { session_id: offer.session_id })).await?;
                        }
                        Ok(RingMsg::Accepted { session_id }) => {
                            let length = self.session_length.mul_f64(rng.gen_range(0.6..1.4));
                            let (base, cookie, http, done) = (self.base.clone(), cookie.clone(), http.clone(), done_tx.clone());
                            tokio::spawn(async move {
                                drive(&base, &cookie, &session_id, length).await;
                                let _ = http
                                    .post(format!("{base}/api/steer_session"))
                                    .header("origin", &base)
                                    .form(&[("session_id", session_id.as_str()), ("to", "COMPLETED")])
                                    .send()
                                    .await;
                                let _ = done.send(());
                            });
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Actions at 10 Hz on the relay for `length` (stops early if the channel closes).
async fn drive(base: &str, cookie: &str, session_id: &str, length: Duration) {
    let Ok(mut request) = ws_url(base, &format!("/relay/{session_id}")).into_client_request() else { return };
    let (Ok(cookie), Ok(origin)) = (cookie.parse(), base.parse()) else { return };
    request.headers_mut().insert("cookie", cookie);
    request.headers_mut().insert("origin", origin);
    let Ok((ws, _)) = tokio_tungstenite::connect_async(request).await else {
        tokio::time::sleep(length).await;
        return;
    };
    let (mut sink, mut stream) = ws.split();
    let reader = tokio::spawn(async move { while let Some(Ok(_)) = stream.next().await {} });
    let end = tokio::time::Instant::now() + length;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut phase = 0.0f32;
    while tokio::time::Instant::now() < end && !reader.is_finished() {
        tick.tick().await;
        phase += 0.1;
        let values = vec![phase.sin() * 0.5, phase.cos() * 0.5, 0.0, 0.0, 0.0, (phase * 0.3).sin() * 0.2];
        let Ok(text) = serde_json::to_string(&RelayMsg::Action { t_ms: 0, values }) else { break };
        if sink.send(Message::Text(text.into())).await.is_err() {
            break;
        }
    }
    reader.abort();
}
