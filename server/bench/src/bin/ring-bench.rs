//! The dispatch benchmark with real consoles: signs in N operators over
//! HTTP, opens their ring channels like browser tabs (WebSocket, heartbeats,
//! Ready), then fires M distress calls through `POST /v1/sessions` with
//! robot tokens at a set rate. Each console accepts its offer as it rings;
//! the robot then ends the session, the operator wraps up briefly and is
//! ready again. Prints calls/s, POST latency, POST → offer received in the
//! operator's socket, offers lost (a 201 whose offer never reached the
//! console) and double offers (a console rung while it held an offer).
//!
//! cargo run -p clutchcall-bench --release --bin ring-bench -- --db sqlite --consoles 1000 --calls 3000 --rate 500

use app::models::Offer;
use app::ring::{ConsoleMsg, RingMsg, HEARTBEAT_MS};
use futures::{SinkExt, StreamExt};
use clutchcall_bench::{ms, number, parse_flags, percentile, ScratchDb};
use server::seed::{load_operator_email, load_org, load_robot_token, LOAD_PASSWORD};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Barrier, Semaphore};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const USAGE: &str = "usage: ring-bench [--db sqlite|postgres] [--consoles N] [--calls M] [--rate R] [--concurrency C]";

struct Args {
    consoles: usize,
    calls: usize,
    /// Calls per second; 0 = as fast as `--concurrency` allows.
    rate: usize,
    concurrency: usize,
}

/// When each session's offer first reached a console, and who was rung twice.
#[derive(Default)]
struct Receipts {
    offered: Mutex<HashMap<String, Instant>>,
    double_offers: AtomicUsize,
}

/// One console tab: Ready, heartbeats, accepts whatever rings, and plays
/// the robot ending the session once it is attached.
async fn console(base: String, cookie: String, receipts: Arc<Receipts>, http: reqwest::Client, ready: Arc<Barrier>) {
    let mut request = format!("{}/ws", base.replace("http://", "ws://")).into_client_request().expect("ws url");
    request.headers_mut().insert("cookie", cookie.parse().expect("cookie header"));
    let (ws, _) = tokio_tungstenite::connect_async(request).await.expect("console connects");
    let (mut sink, mut stream) = ws.split();
    let text = |msg: ConsoleMsg| Message::Text(serde_json::to_string(&msg).expect("json").into());
    sink.send(text(ConsoleMsg::Ready)).await.expect("ready");
    ready.wait().await;
    let mut heartbeat = tokio::time::interval(Duration::from_millis(u64::from(HEARTBEAT_MS)));
    let mut holding: Option<Offer> = None;
    loop {
        tokio::select! {
            _ = heartbeat.tick() => {
                if sink.send(text(ConsoleMsg::Heartbeat)).await.is_err() { return; }
            }
            frame = stream.next() => {
                let frame = match frame {
                    None | Some(Err(_)) => return,
                    Some(Ok(Message::Text(frame))) => frame,
                    Some(Ok(_)) => continue,
                };
                match serde_json::from_str::<RingMsg>(&frame) {
                    Ok(RingMsg::Offer { offer }) => {
                        let now = Instant::now();
                        if holding.is_some() {
                            receipts.double_offers.fetch_add(1, Ordering::Relaxed);
                        }
                        receipts.offered.lock().expect("receipts").entry(offer.session_id.clone()).or_insert(now);
                        let _ = sink.send(text(ConsoleMsg::Accept { session_id: offer.session_id.clone() })).await;
                        holding = Some(offer);
                    }
                    Ok(RingMsg::OfferClosed { session_id, .. }) => {
                        if holding.as_ref().is_some_and(|o| o.session_id == session_id) {
                            holding = None;
                        }
                    }
                    Ok(RingMsg::Accepted { session_id }) => {
                        // The robot is helped: its edge agent ends the session.
                        if let Some(i) = holding.take().and_then(|o| o.robot_id.strip_prefix("lr-").and_then(|n| n.parse::<usize>().ok())) {
                            let _ = http.delete(format!("{base}/v1/sessions/{session_id}")).bearer_auth(load_robot_token(i)).send().await;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = parse_flags(&[("db", "sqlite"), ("consoles", "1000"), ("calls", "3000"), ("rate", "500"), ("concurrency", "64")])
        .map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let args = (|| {
        Ok::<_, String>(Args {
            consoles: number(&flags, "consoles")?.max(1),
            calls: number(&flags, "calls")?,
            rate: number(&flags, "rate")?,
            concurrency: number(&flags, "concurrency")?.max(1),
        })
    })()
    .map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let db = ScratchDb::create(&flags["db"]).await?;
    // Brief wrap-up so operators cycle back to ready within the run.
    let config = server::config::Config { wrap_up_ms: 200, ..db.config.clone() };
    let running = server::start(config).await?;
    running.store.seed(&load_org(args.consoles, args.calls)).await?;
    let base = format!("http://{}", running.addr);
    let http = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency).build()?;

    // Sign in every operator, as their browsers would.
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(16));
    let mut sign_ins = Vec::new();
    for i in 0..args.consoles {
        let (http, base, gate) = (http.clone(), base.clone(), gate.clone());
        sign_ins.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.expect("gate");
            let res = http
                .post(format!("{base}/api/sign_in"))
                .form(&[("email", load_operator_email(i).as_str()), ("password", LOAD_PASSWORD)])
                .send()
                .await
                .expect("sign in");
            let cookie = res.headers().get("set-cookie").expect("session cookie").to_str().expect("ascii");
            cookie.split(';').next().expect("cookie pair").to_string()
        }));
    }
    let mut cookies = Vec::new();
    for s in sign_ins {
        cookies.push(s.await?);
    }
    println!("signed in {} operators in {:.1}s", args.consoles, started.elapsed().as_secs_f64());

    let receipts = Arc::new(Receipts::default());
    let ready = Arc::new(Barrier::new(args.consoles + 1));
    let started = Instant::now();
    for cookie in cookies {
        tokio::spawn(console(base.clone(), cookie, receipts.clone(), http.clone(), ready.clone()));
    }
    ready.wait().await;
    // Ready went out on every socket; give the server a moment to apply them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("{} consoles connected and ready in {:.1}s", args.consoles, started.elapsed().as_secs_f64());

    let gate = Arc::new(Semaphore::new(args.concurrency));
    let pace = (args.rate > 0).then(|| Duration::from_secs_f64(1.0 / args.rate as f64));
    let started = Instant::now();
    let mut calls = Vec::with_capacity(args.calls);
    for i in 0..args.calls {
        if let Some(pace) = pace {
            tokio::time::sleep_until((started + pace * i as u32).into()).await;
        }
        let (http, base, gate) = (http.clone(), base.clone(), gate.clone());
        calls.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.expect("gate");
            let sent = Instant::now();
            let res = http
                .post(format!("{base}/v1/sessions"))
                .bearer_auth(load_robot_token(i))
                .json(&serde_json::json!({ "robotId": format!("lr-{i:03}") }))
                .send()
                .await
                .expect("call");
            let status = res.status().as_u16();
            let body: serde_json::Value = res.json().await.unwrap_or_default();
            (status, sent, sent.elapsed(), body["sessionId"].as_str().unwrap_or_default().to_string())
        }));
    }
    let mut posts = Vec::new();
    let mut matched = Vec::new();
    let (mut queued, mut failed) = (0, 0);
    for call in calls {
        let (status, sent, took, session) = call.await?;
        posts.push(took);
        match status {
            201 => matched.push((session, sent)),
            202 => queued += 1,
            _ => failed += 1,
        }
    }
    let wall = started.elapsed();

    // Give the last offers a moment to land.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let offered = receipts.offered.lock().expect("receipts").clone();
    let mut to_offer: Vec<Duration> = Vec::new();
    let mut lost = 0;
    for (session, sent) in &matched {
        match offered.get(session) {
            Some(at) => to_offer.push(at.saturating_duration_since(*sent)),
            None => lost += 1,
        }
    }
    posts.sort();
    to_offer.sort();
    println!(
        "db={} consoles={} calls={} rate={}/s concurrency={}\n\
         matched={} queued={queued} failed={failed}\n\
         calls/s sustained={:.0} (wall {:.2}s)\n\
         POST latency p50={:.2}ms p99={:.2}ms\n\
         POST → offer in socket p50={:.2}ms p99={:.2}ms max={:.2}ms\n\
         offers lost={lost} double offers={}\n\
         offers received in total (incl. queued calls served later)={}",
        flags["db"],
        args.consoles,
        args.calls,
        args.rate,
        args.concurrency,
        matched.len(),
        args.calls as f64 / wall.as_secs_f64(),
        wall.as_secs_f64(),
        ms(percentile(&posts, 0.5)),
        ms(percentile(&posts, 0.99)),
        ms(percentile(&to_offer, 0.5)),
        ms(percentile(&to_offer, 0.99)),
        ms(to_offer.last().copied().unwrap_or_default()),
        receipts.double_offers.load(Ordering::Relaxed),
        offered.len(),
    );
    running.stop().await?;
    db.finish().await?;
    if failed > 0 || lost > 0 || receipts.double_offers.load(Ordering::Relaxed) > 0 {
        anyhow::bail!("failed={failed} lost={lost} double={}", receipts.double_offers.load(Ordering::Relaxed));
    }
    Ok(())
}
