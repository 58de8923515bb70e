//! The dispatch benchmark with real consoles, against a server in another
//! process: ClutchCall's release binary (started here on a scratch
//! database, as the README starts it), a floor server (`floor-server`, the
//! same exchanges without dispatch logic), or `--target URL`.
//!
//! It signs in N operators over HTTP, opens their ring channels like browser
//! tabs (WebSocket, heartbeats, Ready) and starts the clock only once every
//! Ready is acknowledged. Then, per `--mode`:
//! - `cycle`: robots raise calls through `POST /v1/sessions`; each console
//!   accepts as it rings and the robot ends the session (wrap-up 0), so
//!   operators cycle. `--rate 0` is a closed loop of `--concurrency`
//!   callers, each waiting for its cycle to end; `--rate R` an open loop.
//! - `queue`: no console; raises only (each answered 202).
//!
//! Reported: cycles (or raises) per second, POST latency, POST → offer in
//! the console's socket, warm-up (the first `--warmup-s`) and steady state
//! apart (and, with `--every-s S`, each S seconds of the run apart), offers lost (a 201 whose offer never reached the console), double
//! offers, and the server's RSS.
//!
//! `--idle N --tabs T` opens N more console tabs, T per person (the
//! server's per-person cap is set to match), from loopback source addresses
//! 127.0.0.2 on, that only heartbeat; it reports the server's memory per
//! tab and its CPU with heartbeats alone before the call phase runs on top.
//! `--heartbeat-ms H` has those tabs heartbeat every H ms instead of a
//! browser's `HEARTBEAT_MS` (the run's consoles keep theirs): `--idle
//! 18000 --heartbeat-ms 3600` beside the 1,000 consoles sends 5,100
//! heartbeats a second, those of 51,000 tabs at 10 s, where the open-file
//! limit stops one process short of 50,000 sockets (H must stay under the
//! presence TTL, 20 s).
//!
//! `--robot-heartbeats R` has the call phase's robots (`lr-000`…) send R
//! edge-agent heartbeats a second between them (`POST
//! /v1/robots/{id}/heartbeat`, each a write of its own), as a fleet does
//! beside its calls; their answers and latency are reported.
//!
//! `--instances N` (cluster mode, `--db postgres`, NATS at `--nats`) starts
//! N servers on the one database, as behind a round-robin balancer:
//! console k signs in at instance k mod N and call i is raised at instance
//! i mod N, so most raises are forwarded to the org's owner (the first).
//!
//! cargo build --release -p server -p clutchcall-bench
//! target/release/ring-bench --server clutchcall --db sqlite --consoles 1000 --calls 6000 --concurrency 4
//! target/release/ring-bench --server floor --consoles 1000 --calls 6000 --concurrency 4
//! target/release/ring-bench --server clutchcall --db postgres --instances 3 --consoles 1000 --calls 6000 --concurrency 4

use domain::ring::{ConsoleMsg, RingMsg, HEARTBEAT_MS};
use clutchcall_bench::{ms, number, parse_flags, percentile, ScratchDb};
use futures::{SinkExt, StreamExt};
use server::seed::{load_operator_email, load_org, load_robot_token, LOAD_PASSWORD};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Semaphore};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const USAGE: &str = "usage: ring-bench [--server clutchcall|floor] [--target URL] [--db sqlite|postgres] [--mode cycle|queue] \
                     [--consoles N] [--calls M] [--rate R] [--concurrency C] [--warmup-s S] [--every-s S] [--idle N --tabs T [--heartbeat-ms H]] [--robot-heartbeats R] [--instances N --nats URL]";

/// What the consoles saw.
#[derive(Default)]
struct Receipts {
    /// Session → when its offer reached a console.
    offered: Mutex<HashMap<String, Instant>>,
    double_offers: AtomicUsize,
    /// Console messages the server refused (each reported as it comes).
    refusals: AtomicUsize,
    /// Robot index → told when its session has ended (closed loop).
    cycle_done: Mutex<HashMap<usize, oneshot::Sender<()>>>,
}

/// One console tab: Ready (acknowledged), heartbeats, accepts whatever
/// rings, and plays the robot ending the session once it is attached.
/// `confirms_ready`: ClutchCall answers Ready with the new presence; the
/// floor applies it silently.
async fn console(base: String, confirms_ready: bool, cookie: String, receipts: Arc<Receipts>, http: reqwest::Client, ready: oneshot::Sender<()>) {
    let mut request = format!("{}/ws", base.replace("http://", "ws://")).into_client_request().expect("ws url");
    request.headers_mut().insert("cookie", cookie.parse().expect("cookie header"));
    request.headers_mut().insert("origin", base.parse().expect("origin header"));
    // As a browser's socket: no Nagle delay, and a read buffer tungstenite
    // does not zero-fill 128 KiB of before every read (its default;
    // snapview/tungstenite-rs#547): the server's console sockets read 4 KiB.
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4 * 1024);
    let (ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await.expect("console connects");
    // Names the console in what it reports (the end of its session cookie).
    let cookie_tail: String = cookie.chars().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect();
    let (mut sink, mut stream) = ws.split();
    let text = |msg: ConsoleMsg| Message::Text(serde_json::to_string(&msg).expect("json").into());
    sink.send(text(ConsoleMsg::Ready)).await.expect("ready");
    let mut ready = Some(ready);
    if !confirms_ready {
        let _ = ready.take().map(|r| r.send(()));
    }
    let mut heartbeat = tokio::time::interval(Duration::from_millis(u64::from(HEARTBEAT_MS)));
    let mut holding: Option<String> = None;
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
                let msg = match serde_json::from_str::<RingMsg>(&frame) {
                    // A resync (in cluster mode: the tab's events were not
                    // relayed to its instance yet) says it all again in a
                    // welcome: its presence, and any offer ringing.
                    Ok(RingMsg::Welcome { presence, offer, .. }) => {
                        if presence.state == domain::models::PresenceState::Ready {
                            if let Some(r) = ready.take() { let _ = r.send(()); }
                        }
                        match offer {
                            Some(offer) => Ok(RingMsg::Offer { offer }),
                            None => continue,
                        }
                    }
                    Ok(RingMsg::Error { code, message }) => {
                        eprintln!("console {cookie_tail}: refused ({code:?}): {message}");
                        receipts.refusals.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    other => other,
                };
                match msg {
                    Ok(RingMsg::Presence { presence }) if presence.state == domain::models::PresenceState::Ready => {
                        if let Some(r) = ready.take() { let _ = r.send(()); }
                    }
                    Ok(RingMsg::Offer { offer }) => {
                        let now = Instant::now();
                        if holding.is_some() {
                            receipts.double_offers.fetch_add(1, Ordering::Relaxed);
                        }
                        receipts.offered.lock().expect("receipts").entry(offer.session_id.clone()).or_insert(now);
                        let _ = sink.send(text(ConsoleMsg::Accept { session_id: offer.session_id.clone() })).await;
                        holding = Some(offer.robot_id);
                    }
                    Ok(RingMsg::OfferClosed { .. }) => holding = None,
                    Ok(RingMsg::Accepted { session_id }) => {
                        // The robot is helped: its edge agent ends the session.
                        let robot = holding.take().and_then(|r| r.strip_prefix("lr-").and_then(|n| n.parse::<usize>().ok()));
                        if let Some(i) = robot {
                            let _ = http.delete(format!("{base}/v1/sessions/{session_id}")).bearer_auth(load_robot_token(i)).send().await;
                            if let Some(done) = receipts.cycle_done.lock().expect("receipts").remove(&i) {
                                let _ = done.send(());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A server this run started, and how to read its memory.
struct Child {
    process: tokio::process::Child,
    base: String,
}

impl Child {
    fn rss_mb(&self, field: &str) -> f64 {
        let Some(pid) = self.process.id() else { return 0.0 };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }
}

async fn spawn(command: tokio::process::Command) -> anyhow::Result<Child> {
    let (process, base) = clutchcall_bench::spawn_listening(command).await?;
    Ok(Child { process, base })
}

fn sibling(name: &str) -> std::path::PathBuf {
    std::env::current_exe().expect("exe").with_file_name(name)
}

struct Phase {
    posts: Vec<Duration>,
    to_offer: Vec<Duration>,
    done: usize,
    wall: Duration,
}

fn report(label: &str, p: &mut Phase) {
    p.posts.sort();
    p.to_offer.sort();
    println!(
        "{label}: {} in {:.2}s = {:.0}/s | POST p50 {:.2} ms p99 {:.2} ms | POST→offer p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        p.done,
        p.wall.as_secs_f64(),
        p.done as f64 / p.wall.as_secs_f64().max(1e-9),
        ms(percentile(&p.posts, 0.5)),
        ms(percentile(&p.posts, 0.99)),
        ms(percentile(&p.to_offer, 0.5)),
        ms(percentile(&p.to_offer, 0.99)),
        ms(p.to_offer.last().copied().unwrap_or_default()),
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = parse_flags(&[
        ("server", "clutchcall"),
        ("target", ""),
        ("db", "sqlite"),
        ("mode", "cycle"),
        ("consoles", "1000"),
        ("calls", "6000"),
        ("rate", "0"),
        ("concurrency", "4"),
        ("warmup-s", "2"),
        ("every-s", "0"),
        ("idle", "0"),
        ("tabs", "50"),
        ("heartbeat-ms", &HEARTBEAT_MS.to_string()),
        ("robot-heartbeats", "0"),
        ("instances", "1"),
        ("nats", "nats://127.0.0.1:4222"),
    ])
    .map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let num = |name: &str| number(&flags, name).map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"));
    let (calls, rate, concurrency, warmup) = (num("calls")?, num("rate")?, num("concurrency")?.max(1), Duration::from_secs(num("warmup-s")? as u64));
    let queue_mode = flags["mode"] == "queue";
    let consoles = if queue_mode { 0 } else { num("consoles")? };
    let instances = num("instances")?.max(1);
    // `--idle N`: N more console tabs, T per person, that only heartbeat.
    let (idle, tabs) = (num("idle")?, num("tabs")?.max(1));
    let idle_people = idle.div_ceil(tabs);
    if idle > 0 {
        if instances > 1 || flags["server"] != "clutchcall" || !flags["target"].is_empty() {
            anyhow::bail!("--idle is for one ClutchCall server this run starts\n{USAGE}");
        }
        // One end of every socket here, the other in the server.
        clutchcall_bench::idle::raise_open_files((idle + consoles) as u64 + 1_000)?;
    }
    if instances > 1 && (flags["db"] != "postgres" || flags["server"] != "clutchcall" || !flags["target"].is_empty()) {
        anyhow::bail!("--instances > 1 is cluster mode: --server clutchcall --db postgres, no --target\n{USAGE}");
    }

    // The server under test, in its own process.
    let db = ScratchDb::create(&flags["db"]).await?;
    let mut children = Vec::new();
    let bases: Vec<String> = if !flags["target"].is_empty() {
        vec![flags["target"].clone()]
    } else if flags["server"] == "floor" {
        let mut command = tokio::process::Command::new(sibling("floor-server"));
        let file = db.config.data_dir.join("floor.db");
        command.args(["--mode", if queue_mode { "queue" } else { "full" }, "--db", &file.display().to_string()]);
        children.push(spawn(command).await?);
        children.iter().map(|c| c.base.clone()).collect()
    } else {
        let store = server::store::connect(&db.config.database_url()).await?;
        store.seed(&load_org((consoles + idle_people).max(1), calls)).await?;
        drop(store);
        // One after another: the first takes the org's lease.
        for k in 0..instances {
            let mut command = tokio::process::Command::new(sibling("server"));
            command
                .env("DATABASE_URL", db.config.database_url())
                .env("CLUTCHCALL_DATA_DIR", &db.config.data_dir)
                .env("CLUTCHCALL_ADDR", "127.0.0.1:0")
                .env("CLUTCHCALL_DEMO", "0")
                .env("CLUTCHCALL_WRAP_UP_S", "0")
                .env("CLUTCHCALL_METRICS_ADDR", "127.0.0.1:0")
                // 1,000 consoles sign in from one address.
                .env("CLUTCHCALL_SIGNIN_PER_MINUTE", "1000000")
                .env("CLUTCHCALL_TABS_PER_PERSON", tabs.max(16).to_string())
                .env("RUST_LOG", "warn");
            if instances > 1 {
                command.env("CLUTCHCALL_NATS_URL", &flags["nats"]).env("CLUTCHCALL_INSTANCE", format!("bench-{k}"));
            }
            children.push(spawn(command).await?);
        }
        children.iter().map(|c| c.base.clone()).collect()
    };
    let base_of = |i: usize| bases[i % bases.len()].clone();
    let confirms_ready = flags["server"] != "floor";
    let rss = |field: &str| children.iter().map(|c| c.rss_mb(field)).sum::<f64>();
    let rss_idle = rss("VmRSS");
    let http = reqwest::Client::builder().pool_max_idle_per_host(64).timeout(Duration::from_secs(60)).build()?;

    // Sign in every operator, as their browsers would.
    let sign_in_all = |people: std::ops::Range<usize>| {
        let gate = Arc::new(Semaphore::new(8));
        let mut sign_ins = Vec::new();
        for i in people {
            let (http, base, gate) = (http.clone(), base_of(i), gate.clone());
            sign_ins.push(tokio::spawn(async move {
                let _permit = gate.acquire().await.expect("gate");
                let res = http
                    .post(format!("{base}/api/sign_in"))
                    .header("origin", &base)
                    .form(&[("email", load_operator_email(i).as_str()), ("password", LOAD_PASSWORD)])
                    .send()
                    .await
                    .expect("sign in");
                let cookie = res.headers().get("set-cookie").expect("session cookie").to_str().expect("ascii");
                cookie.split(';').next().expect("cookie pair").to_string()
            }));
        }
        async move {
            let mut cookies = Vec::new();
            for s in sign_ins {
                cookies.push(s.await.expect("sign-in task"));
            }
            cookies
        }
    };
    let started = Instant::now();
    let cookies = sign_in_all(0..consoles).await;
    let signed_in = started.elapsed();

    let receipts = Arc::new(Receipts::default());
    let started = Instant::now();
    let mut acks = Vec::new();
    for (k, cookie) in cookies.into_iter().enumerate() {
        let (ack, acked) = oneshot::channel();
        tokio::spawn(console(base_of(k), confirms_ready, cookie, receipts.clone(), http.clone(), ack));
        acks.push(acked);
    }
    // Every Ready is acknowledged within a minute, or the run stops and
    // says how many were not (rather than wait for ever).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut unacked = 0;
    for acked in acks {
        if tokio::time::timeout_at(deadline, acked).await.is_err() {
            unacked += 1;
        }
    }
    if unacked > 0 {
        anyhow::bail!("{unacked} of {consoles} consoles' Ready not acknowledged within 60 s ({} refusals)", receipts.refusals.load(Ordering::Relaxed));
    }
    println!(
        "server={} db={} mode={} instances={} consoles={consoles}: signed in {:.1}s, all Ready acknowledged {:.1}s later; RSS {:.0} MB idle, {:.0} MB with consoles",
        flags["server"],
        flags["db"],
        flags["mode"],
        bases.len(),
        signed_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        rss_idle,
        rss("VmRSS"),
    );
    if idle > 0 {
        let (with_consoles, started) = (rss("VmRSS"), Instant::now());
        let cookies = sign_in_all(consoles..consoles + idle_people).await;
        let signed_in = started.elapsed();
        let every = Duration::from_millis(num("heartbeat-ms")?.max(1) as u64);
        let open = clutchcall_bench::idle::open(&bases[0], &cookies, tabs, every).await?;
        let opened = started.elapsed() - signed_in;
        // Settled, then a window of heartbeats alone.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let pid = children[0].process.id().expect("server pid");
        let (cpu, window) = (clutchcall_bench::idle::cpu_seconds(pid), Instant::now());
        tokio::time::sleep(Duration::from_secs(20)).await;
        let busy = (clutchcall_bench::idle::cpu_seconds(pid) - cpu) / window.elapsed().as_secs_f64();
        // Heartbeats a second: the idle tabs' and the run's consoles'.
        let beats = open as f64 / every.as_secs_f64() + consoles as f64 * 1000.0 / f64::from(HEARTBEAT_MS);
        let now = rss("VmRSS");
        println!(
"idle tabs={open} ({idle_people} people × {tabs}): signed in {:.1}s, opened {:.1}s | server RSS {now:.0} MB: {:.1} KB per tab beyond the idle process, {:.1} KB per idle tab beyond the run's {consoles} consoles | server CPU with heartbeats alone ({:.0}/s) {:.1} % of one core, {:.1} µs a heartbeat",
            signed_in.as_secs_f64(),
            opened.as_secs_f64(),
            (now - rss_idle) * 1024.0 / (open + consoles) as f64,
            (now - with_consoles) * 1024.0 / open as f64,
            beats,
            busy * 100.0,
            busy * 1e6 / beats,
        );
    }

    // The call phase: the clock starts now.
    let samples: Arc<Mutex<Vec<(Instant, Duration, u16, String)>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    let fleet = robot_heartbeats(&http, &bases, num("robot-heartbeats")?, calls.max(1));
    let one_call = {
        let (http, bases, samples, receipts) = (http.clone(), bases.clone(), samples.clone(), receipts.clone());
        move |i: usize| {
        let (http, base, samples, receipts) = (http.clone(), bases[i % bases.len()].clone(), samples.clone(), receipts.clone());
        async move {
            let (done, cycle) = oneshot::channel();
            receipts.cycle_done.lock().expect("receipts").insert(i, done);
            let sent = Instant::now();
            let res = http
                .post(format!("{base}/v1/sessions"))
                .bearer_auth(load_robot_token(i))
                .json(&serde_json::json!({ "robotId": format!("lr-{i:03}") }))
                .send()
                .await;
            let (status, session) = match res {
                Ok(res) => {
                    let status = res.status().as_u16();
                    let body: serde_json::Value = res.json().await.unwrap_or_default();
                    (status, body["sessionId"].as_str().unwrap_or_default().to_string())
                }
                Err(_) => (0, String::new()),
            };
            samples.lock().expect("samples").push((sent, sent.elapsed(), status, session));
            (status, cycle)
        }
        }
    };
    if rate == 0 {
        for _ in 0..concurrency {
            let (next, one_call) = (next.clone(), one_call.clone());
            let cycle_mode = !queue_mode;
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        return;
                    }
                    let (status, cycle) = one_call(i).await;
                    if cycle_mode && status == 201 {
                        let _ = tokio::time::timeout(Duration::from_secs(40), cycle).await;
                    }
                }
            }));
        }
    } else {
        let pace = Duration::from_secs_f64(1.0 / rate as f64);
        for i in 0..calls {
            tokio::time::sleep_until((started + pace * i as u32).into()).await;
            let one_call = one_call.clone();
            tasks.push(tokio::spawn(async move {
                let _ = one_call(i).await;
            }));
        }
    }
    for task in tasks {
        task.await?;
    }
    let wall = started.elapsed();
    let fleet = match fleet {
        Some((stop, task)) => {
            let _ = stop.send(());
            Some(task.await?)
        }
        None => None,
    };
    // Give the last offers a moment to land.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_peak = rss("VmHWM");
    let rss_end = rss("VmRSS");

    let offered = receipts.offered.lock().expect("receipts").clone();
    let samples = samples.lock().expect("samples").clone();
    let warm_end = started + warmup;
    let mut warm = Phase { posts: vec![], to_offer: vec![], done: 0, wall: warmup.min(wall) };
    let mut steady = Phase { posts: vec![], to_offer: vec![], done: 0, wall: wall.saturating_sub(warmup) };
    let (mut matched, mut queued, mut failed, mut lost) = (0, 0, 0, 0);
    for (sent, took, status, session) in &samples {
        let phase = if *sent < warm_end { &mut warm } else { &mut steady };
        phase.posts.push(*took);
        phase.done += 1;
        match status {
            201 => {
                matched += 1;
                match offered.get(session) {
                    Some(at) => phase.to_offer.push(at.saturating_duration_since(*sent)),
                    None => lost += 1,
                }
            }
            202 => queued += 1,
            _ => failed += 1,
        }
    }
    let unit = if queue_mode { "raises" } else { "cycles" };
    println!("calls={calls} rate={rate}/s concurrency={concurrency} warm-up={}s", warmup.as_secs());
    report(&format!("warm-up {unit}"), &mut warm);
    report(&format!("steady {unit}"), &mut steady);
    // `--every-s S`: the run in slices of S seconds, to see it slow down.
    let every = num("every-s")?;
    if every > 0 {
        let mut slices: Vec<Phase> = Vec::new();
        for (sent, took, status, session) in &samples {
            let at = sent.saturating_duration_since(started).as_secs() as usize / every;
            while slices.len() <= at {
                let from = Duration::from_secs((slices.len() * every) as u64);
                slices.push(Phase { posts: vec![], to_offer: vec![], done: 0, wall: wall.saturating_sub(from).min(Duration::from_secs(every as u64)) });
            }
            let slice = &mut slices[at];
            slice.posts.push(*took);
            slice.done += 1;
            if let (201, Some(offered_at)) = (status, offered.get(session)) {
                slice.to_offer.push(offered_at.saturating_duration_since(*sent));
            }
        }
        for (i, slice) in slices.iter_mut().enumerate() {
            report(&format!("{}-{} s {unit}", i * every, (i + 1) * every), slice);
        }
    }
    println!(
        "overall {:.0} {unit}/s | matched={matched} queued={queued} failed={failed} | offers lost={lost} double={} | server RSS {:.0} MB at the end, peak {:.0} MB",
        samples.len() as f64 / wall.as_secs_f64(),
        receipts.double_offers.load(Ordering::Relaxed),
        rss_end,
        rss_peak,
    );
    if let Some(beats) = fleet {
        // The latency of those stored (200) only: a refusal's may be a
        // timeout's, or nothing's.
        let sent = beats.len();
        let mut took: Vec<Duration> = beats.into_iter().filter(|(status, _)| *status == 200).map(|(_, took)| took).collect();
        let others = sent - took.len();
        took.sort();
        let latency = match took.last() {
            None => "none answered 200".to_string(),
            Some(max) => format!("answered 200: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", ms(percentile(&took, 0.50)), ms(percentile(&took, 0.99)), ms(*max)),
        };
        println!("robot heartbeats {:.0}/s: {sent} sent, {others} not answered 200 | {latency}", sent as f64 / wall.as_secs_f64());
    }
    drop(children);
    db.finish().await?;
    if failed > 0 || lost > 0 || receipts.double_offers.load(Ordering::Relaxed) > 0 {
        anyhow::bail!("failed={failed} lost={lost} double={}", receipts.double_offers.load(Ordering::Relaxed));
    }
    Ok(())
}

/// `--robot-heartbeats R`: robots `lr-000`… (`robots` of them) heartbeat R
/// times a second between them, each on its own task, until told to stop;
/// answers each heartbeat's status and latency.
fn robot_heartbeats(
    http: &reqwest::Client,
    bases: &[String],
    per_second: usize,
    robots: usize,
) -> Option<(oneshot::Sender<()>, tokio::task::JoinHandle<Vec<(u16, Duration)>>)> {
    if per_second == 0 {
        return None;
    }
    let (stop, mut stopped) = oneshot::channel();
    let (http, bases) = (http.clone(), bases.to_vec());
    let task = tokio::spawn(async move {
        let (pace, started) = (Duration::from_secs_f64(1.0 / per_second as f64), tokio::time::Instant::now());
        let mut sent = Vec::new();
        for k in 0.. {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep_until(started + pace * k) => {}
            }
            let (http, base, i) = (http.clone(), bases[k as usize % bases.len()].clone(), k as usize % robots);
            sent.push(tokio::spawn(async move {
                let at = Instant::now();
                let res = http.post(format!("{base}/v1/robots/lr-{i:03}/heartbeat")).bearer_auth(load_robot_token(i)).send().await;
                (res.map(|r| r.status().as_u16()).unwrap_or(0), at.elapsed())
            }));
        }
        let mut beats = Vec::with_capacity(sent.len());
        for beat in sent {
            beats.push(beat.await.unwrap_or((0, Duration::ZERO)));
        }
        beats
    });
    Some((stop, task))
}
