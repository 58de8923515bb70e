//! The relay's load mode: N live sessions (default 200), each with an edge
//! agent and a cockpit on `/relay/{session}`, frames at R Hz (default 30)
//! each way for S seconds; prints the added latency per direction (send →
//! receive, p50 / p99 / max). The floor, in the same run and with the same
//! clients: a bare WebSocket forwarder (pairs two sockets per path and
//! forwards, dropping on a full queue like the relay) — what any relay
//! costs on this machine. Figures go in BENCHMARKS.md.
//!
//! `--instances 2` (cluster mode: PostgreSQL, NATS at `--nats`) starts two
//! instances in this process and measures, in one run, the relay with both
//! sides on the first instance and with the edge agents on the first and
//! the cockpits on the second (frames crossing over NATS), then the floor,
//! then the floor across NATS: the same bare forwarder, each frame
//! published on one NATS connection and heard on another, as two instances
//! would (what the NATS hop alone costs on this machine).
//!
//! cargo run -p clutchcall-bench --release --bin relay-bench -- --sessions 200 --hz 30 --seconds 10
//! cargo run -p clutchcall-bench --release --bin relay-bench -- --sessions 200 --hz 30 --seconds 10 --instances 2
//!
//! `--slow-ms 1` prints every frame slower than 1 ms (stderr), with when it
//! arrived on CLOCK_MONOTONIC: lined up with `perf record -a -k
//! CLOCK_MONOTONIC`, it shows what the machine ran while the frame waited.

use axum::extract::ws::{Message as AxumMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use clutchcall_bench::{ms, number, parse_flags, percentile, ScratchDb};
use futures::{SinkExt, StreamExt};
use server::seed::{load_operator_email, load_org, load_robot_token, LOAD_ORG_ID, LOAD_PASSWORD};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const USAGE: &str = "usage: relay-bench [--sessions N] [--hz R] [--seconds S] [--instances 1|2] [--nats URL] [--slow-ms N]";

/// `--slow-ms`: frames slower than this are printed to stderr, each with
/// when it was sent in its run and when it arrived (to find, in a `perf`
/// profile, what ran while it waited).
static SLOW_US: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// µs since the run began, split so it survives an f32 vector.
fn stamp(origin: Instant) -> (f32, f32) {
    let us = origin.elapsed().as_micros() as u64;
    ((us / 1_000_000) as f32, (us % 1_000_000) as f32)
}

fn unstamp(seconds: f32, micros: f32) -> u64 {
    seconds as u64 * 1_000_000 + micros as u64
}

/// Sends at `hz` until `until`; each frame carries its send time.
async fn sender(mut sink: futures::stream::SplitSink<Socket, Message>, robot: bool, hz: u64, origin: Instant, until: Instant) {
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / hz));
    while Instant::now() < until {
        tick.tick().await;
        let (s, us) = stamp(origin);
        let msg = if robot {
            domain::relay::RelayMsg::State { t_ms: 0, joints: vec![s, us, 0.1, 0.2, 0.3, 0.4], fields: Default::default() }
        } else {
            domain::relay::RelayMsg::Action { t_ms: 0, values: vec![s, us, 0.0, 0.0, 0.0, 0.0] }
        };
        if sink.send(Message::Text(serde_json::to_string(&msg).expect("json").into())).await.is_err() {
            return;
        }
    }
}

/// Receives until the stream ends or `until`; the latencies in µs.
async fn receiver(mut stream: futures::stream::SplitStream<Socket>, origin: Instant, until: Instant) -> Vec<u64> {
    let mut latencies = Vec::new();
    loop {
        let Ok(Some(Ok(Message::Text(text)))) = tokio::time::timeout_at(until.into(), stream.next()).await else {
            if Instant::now() >= until {
                return latencies;
            }
            continue;
        };
        let now = origin.elapsed().as_micros() as u64;
        let sent = match serde_json::from_str::<domain::relay::RelayMsg>(&text) {
            Ok(domain::relay::RelayMsg::State { joints, .. }) if joints.len() >= 2 => unstamp(joints[0], joints[1]),
            Ok(domain::relay::RelayMsg::Action { values, .. }) if values.len() >= 2 => unstamp(values[0], values[1]),
            _ => continue,
        };
        let latency = now.saturating_sub(sent);
        latencies.push(latency);
        if SLOW_US.get().is_some_and(|slow| latency > *slow) {
            // CLOCK_MONOTONIC, as `perf record -k CLOCK_MONOTONIC` stamps its samples.
            let mut at = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes only the timespec it is given.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut at) };
            eprintln!("slow sent_us={sent} latency_us={latency} received_monotonic={}.{:09}", at.tv_sec, at.tv_nsec);
        }
    }
}

async fn connect(url: &str, headers: &[(&'static str, String)]) -> anyhow::Result<Socket> {
    let mut request = url.into_client_request()?;
    for (name, value) in headers {
        request.headers_mut().insert(*name, value.parse()?);
    }
    // As a browser's or an edge agent's socket: no Nagle delay, and a read
    // buffer tungstenite does not zero-fill 128 KiB of before every read
    // (snapview/tungstenite-rs#547; it was 16 % of this process's samples).
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(16 * 1024);
    Ok(tokio_tungstenite::connect_async_with_config(request, Some(config), true).await?.0)
}

/// Drives the pairs for `seconds`; (robot → cockpit, cockpit → robot) latencies.
async fn drive(pairs: Vec<(Socket, Socket)>, hz: u64, seconds: u64) -> (Vec<Duration>, Vec<Duration>) {
    let origin = Instant::now();
    let until = origin + Duration::from_secs(seconds);
    let (mut up, mut down) = (Vec::new(), Vec::new());
    let mut tasks = Vec::new();
    for (robot, cockpit) in pairs {
        let (robot_sink, robot_stream) = robot.split();
        let (cockpit_sink, cockpit_stream) = cockpit.split();
        tokio::spawn(sender(robot_sink, true, hz, origin, until));
        tokio::spawn(sender(cockpit_sink, false, hz, origin, until));
        tasks.push((tokio::spawn(receiver(cockpit_stream, origin, until + Duration::from_secs(1))), tokio::spawn(receiver(robot_stream, origin, until + Duration::from_secs(1)))));
    }
    for (at_cockpit, at_robot) in tasks {
        up.extend(at_cockpit.await.unwrap_or_default().into_iter().map(Duration::from_micros));
        down.extend(at_robot.await.unwrap_or_default().into_iter().map(Duration::from_micros));
    }
    up.sort();
    down.sort();
    (up, down)
}

fn report(label: &str, direction: &str, sorted: &[Duration], expected: usize) {
    if sorted.is_empty() {
        println!("{label:>10} {direction:>16}: no frames");
        return;
    }
    println!(
        "{label:>10} {direction:>16}: {} of {} frames · p50 {:.2} ms · p99 {:.2} ms · max {:.2} ms",
        sorted.len(),
        expected,
        ms(percentile(sorted, 0.50)),
        ms(percentile(sorted, 0.99)),
        ms(*sorted.last().expect("non-empty"))
    );
}

/// The floor: a bare forwarder. `/relay/{id}?side=robot|cockpit`.
#[derive(Clone, Default)]
struct Forwarder(Arc<Mutex<HashMap<(String, bool), mpsc::Sender<AxumMessage>>>>);

async fn floor_socket(ws: WebSocketUpgrade, State(hub): State<Forwarder>, Path(id): Path<String>, Query(q): Query<HashMap<String, String>>) -> Response {
    let robot = q.get("side").is_some_and(|s| s == "robot");
    // The relay's read buffer: the floor pays no zero-fill the relay does not.
    ws.read_buffer_size(server::relay::READ_BUFFER_BYTES).on_upgrade(move |socket: WebSocket| async move {
        let (mut sink, mut stream) = socket.split();
        let (tx, mut rx) = mpsc::channel::<AxumMessage>(64);
        hub.0.lock().expect("hub").insert((id.clone(), robot), tx);
        let writer = tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, AxumMessage::Text(_)) {
                let peer = hub.0.lock().expect("hub").get(&(id.clone(), !robot)).cloned();
                if let Some(peer) = peer {
                    let _ = peer.try_send(message);
                }
            }
        }
        writer.abort();
    })
}

/// The floor across NATS: the bare forwarder with each frame published on
/// one NATS connection and heard on another (a subscription per session
/// and side, as the relay's link has), then handed to the peer's socket.
/// `/relay/{id}?side=robot|cockpit`.
#[derive(Clone)]
struct NatsForwarder {
    publish: async_nats::Client,
    hear: async_nats::Client,
}

async fn floor_nats_socket(ws: WebSocketUpgrade, State(nats): State<NatsForwarder>, Path(id): Path<String>, Query(q): Query<HashMap<String, String>>) -> Response {
    let robot = q.get("side").is_some_and(|s| s == "robot");
    let side = |robot: bool| format!("relay-floor.{id}.{}", if robot { "robot" } else { "cockpit" });
    let (mine, peers) = (side(robot), side(!robot));
    ws.read_buffer_size(server::relay::READ_BUFFER_BYTES).on_upgrade(move |socket: WebSocket| async move {
        use futures::FutureExt;
        let (mut sink, mut stream) = socket.split();
        let (tx, mut rx) = mpsc::channel::<AxumMessage>(64);
        let Ok(mut frames) = nats.hear.subscribe(mine).await else { return };
        let _ = nats.hear.flush().await;
        let writer = tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let hearer = tokio::spawn(async move {
            while let Some(frame) = frames.next().await {
                if let Ok(text) = std::str::from_utf8(&frame.payload) {
                    let _ = tx.try_send(AxumMessage::Text(text.into()));
                }
            }
        });
        while let Some(Ok(message)) = stream.next().await {
            if let AxumMessage::Text(text) = message {
                // As the relay's link: taken at once or dropped.
                let publish = nats.publish.publish(peers.clone(), bytes::Bytes::copy_from_slice(text.as_bytes()));
                let _ = tokio::task::unconstrained(publish).now_or_never();
            }
        }
        writer.abort();
        hearer.abort();
    })
}

/// Serves `app` on a loopback port with TCP_NODELAY (as the server sets
/// it, or Nagle's algorithm would be measured); its address and task.
async fn serve(app: axum::Router) -> anyhow::Result<(std::net::SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    Ok((addr, tokio::spawn(async move { axum::serve(listener, app).await })))
}

/// Drives `n` pairs of bare forwarder sockets at `addr` and reports them as `label`.
async fn drive_floor(label: &str, addr: std::net::SocketAddr, n: usize, hz: u64, seconds: u64, expected: usize) -> anyhow::Result<()> {
    let mut pairs = Vec::with_capacity(n);
    for i in 0..n {
        let url = format!("ws://{addr}/relay/s{i}");
        let edge = connect(&format!("{url}?side=robot"), &[]).await?;
        let cockpit = connect(&format!("{url}?side=cockpit"), &[]).await?;
        pairs.push((edge, cockpit));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (up, down) = drive(pairs, hz, seconds).await;
    report(label, "robot → cockpit", &up, expected);
    report(label, "cockpit → robot", &down, expected);
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = parse_flags(&[("sessions", "200"), ("hz", "30"), ("seconds", "10"), ("instances", "1"), ("nats", "nats://127.0.0.1:4222"), ("slow-ms", "0")])
        .map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let n = number(&flags, "sessions").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let hz = number(&flags, "hz").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?.max(1) as u64;
    let seconds = number(&flags, "seconds").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?.max(1) as u64;
    let cluster = match number(&flags, "instances").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))? {
        0 | 1 => false,
        2 => true,
        _ => anyhow::bail!("--instances is 1 or 2\n{USAGE}"),
    };
    let expected = n * hz as usize * seconds as usize;
    if let slow @ 1.. = number(&flags, "slow-ms").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))? {
        let _ = SLOW_US.set(slow as u64 * 1000);
    }

    // ClutchCall: n attached sessions (on one instance, or two in cluster mode).
    let db = ScratchDb::create(if cluster { "postgres" } else { "sqlite" }).await?;
    let mut config = db.config.clone();
    config.sign_ins_per_address_per_minute = 1_000_000;
    if cluster {
        config.nats_url = Some(flags["nats"].clone());
        config.instance = Some("bench-a".into());
    }
    let running = server::start(config.clone()).await?;
    let second = match cluster {
        true => Some(server::start(server::config::Config { instance: Some("bench-b".into()), ..config }).await?),
        false => None,
    };
    running.store.seed(&load_org(n, n)).await?;
    let base = format!("http://{}", running.addr);
    let http = reqwest::Client::builder().cookie_store(false).build()?;
    let mut cookies = HashMap::new();
    for i in 0..n {
        let res = http.post(format!("{base}/api/sign_in")).header("origin", &base).form(&[("email", load_operator_email(i).as_str()), ("password", LOAD_PASSWORD)]).send().await?;
        let cookie = res.headers().get("set-cookie").and_then(|c| c.to_str().ok()).and_then(|c| c.split(';').next()).map(str::to_string);
        cookies.insert(format!("u-load-{i:03}"), cookie.ok_or_else(|| anyhow::anyhow!("sign-in {i} refused"))?);
        running.engine.operator_ready(LOAD_ORG_ID, &format!("u-load-{i:03}"), true).await?;
    }
    let mut sessions = Vec::with_capacity(n);
    for i in 0..n {
        let robot = running.store.robot(LOAD_ORG_ID, &format!("lr-{i:03}")).await?.ok_or_else(|| anyhow::anyhow!("robot {i}"))?;
        let (session, operator) = match running.engine.raise_call(&robot).await? {
            server::engine::CallOutcome::Matched { session_id, operator, .. } => (session_id, operator.id),
            other => anyhow::bail!("call {i} was not matched: {other:?}"),
        };
        running.engine.answer(LOAD_ORG_ID, &operator, &session).await?;
        sessions.push((i, session, operator));
    }
    // Edge agents on the first instance; cockpits on `cockpits_at`.
    let pairs = |cockpits_at: std::net::SocketAddr| {
        let (sessions, cookies, base) = (&sessions, &cookies, base.clone());
        async move {
            let mut pairs = Vec::with_capacity(sessions.len());
            for (i, session, operator) in sessions {
                let edge = connect(&format!("{}/relay/{session}", base.replacen("http", "ws", 1)), &[("authorization", format!("Bearer {}", load_robot_token(*i)))]).await?;
                let cockpit = connect(&format!("ws://{cockpits_at}/relay/{session}"), &[("cookie", cookies[operator].clone()), ("origin", format!("http://{cockpits_at}"))]).await?;
                pairs.push((edge, cockpit));
            }
            anyhow::Ok(pairs)
        }
    };
    println!("{n} sessions × {hz} Hz each way for {seconds} s ({expected} frames each way){}", if cluster { "; cluster mode, two instances" } else { "" });
    let ready = pairs(running.addr).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (up, down) = drive(ready, hz, seconds).await;
    report("relay", "robot → cockpit", &up, expected);
    report("relay", "cockpit → robot", &down, expected);
    if let Some(second) = second {
        // The same sessions, the cockpits now on the other instance.
        let ready = pairs(second.addr).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (up, down) = drive(ready, hz, seconds).await;
        report("across", "robot → cockpit", &up, expected);
        report("across", "cockpit → robot", &down, expected);
        second.stop().await?;
    }
    running.stop().await?;
    db.finish().await?;

    // The floor: the same clients on a bare forwarder.
    let (addr, floor) = serve(axum::Router::new().route("/relay/{id}", axum::routing::get(floor_socket)).with_state(Forwarder::default())).await?;
    drive_floor("floor", addr, n, hz, seconds, expected).await?;
    floor.abort();
    if cluster {
        // And across NATS: two connections without echo, as two instances' links.
        let connect_nats = |name: &'static str| async_nats::ConnectOptions::new().name(name).no_echo().connect(flags["nats"].as_str());
        let nats = NatsForwarder { publish: connect_nats("relay-bench floor a").await?, hear: connect_nats("relay-bench floor b").await? };
        let (addr, floor) = serve(axum::Router::new().route("/relay/{id}", axum::routing::get(floor_nats_socket)).with_state(nats)).await?;
        drive_floor("floor nats", addr, n, hz, seconds, expected).await?;
        floor.abort();
    }
    Ok(())
}
