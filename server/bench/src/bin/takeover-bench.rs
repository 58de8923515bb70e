//! Failover time (issue "Scale out", rule D14: another instance owns a dead
//! owner's org within 5 s). Two real server processes on one scratch
//! PostgreSQL database; `--kills` times over, the instance holding the demo
//! org's lease is killed (-9) and the time until the other holds it is
//! measured on the database (`org_leases`), and until the survivor
//! answers a call for the org (a demo robot's raise acknowledged, 201 or
//! 202: the desk loaded; the call is then withdrawn); then the killed one
//! starts again under its name. Printed beside the bound the design sets:
//! the lease's 3 s plus one 1 s take interval (plus, in cluster mode, at
//! most 1 s for the new owner's NATS subscription), then the load.
//!
//! cargo build --release -p clutchcall-bench --bin takeover-bench -p server --bin server
//! target/release/takeover-bench [--kills 20] [--server target/release/server] [--nats nats://127.0.0.1:4222]
//!
//! With `--nats` the two run in cluster mode, as deployed (forwarding,
//! events and the relay over NATS).

use clutchcall_bench::{ms, number, parse_flags, percentile, ScratchDb};
use sqlx::Connection;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const USAGE: &str = "usage: takeover-bench [--kills N] [--server PATH] [--nats URL]";
const ORG: &str = server::seed::DEMO_ORG_ID;
const NAMES: [&str; 2] = ["bench-a", "bench-b"];

/// Starts the server binary as `name` and waits for its listening line:
/// the process and its base URL.
async fn start(binary: &PathBuf, url: &str, nats: &str, data: &std::path::Path, name: &str) -> anyhow::Result<(Child, String)> {
    let mut command = Command::new(binary);
    if !nats.is_empty() {
        command.env("CLUTCHCALL_NATS_URL", nats);
    }
    command
        .env("CLUTCHCALL_ADDR", "127.0.0.1:0")
        .env("CLUTCHCALL_METRICS_ADDR", "off")
        .env("CLUTCHCALL_DATA_DIR", data)
        .env("DATABASE_URL", url)
        .env("CLUTCHCALL_DEMO", "1")
        .env("CLUTCHCALL_INSTANCE", name)
        .env("RUST_LOG", "warn");
    tokio::time::timeout(Duration::from_secs(60), clutchcall_bench::spawn_listening(command))
        .await
        .map_err(|_| anyhow::anyhow!("{name} did not listen within 60 s"))?
}

/// The demo robot whose call tells that an instance answers for the org.
const ROBOT: &str = "uk-pick-01";

/// Raises the demo robot's call at `base` until it is acknowledged (the
/// org's desk is loaded there): how long after `since` it was, timed
/// before the call is withdrawn.
async fn until_answered(http: &reqwest::Client, base: &str, since: Instant) -> anyhow::Result<Duration> {
    let token = server::seed::demo_robot_token(ROBOT);
    loop {
        let raised = http.post(format!("{base}/v1/sessions")).bearer_auth(&token).json(&serde_json::json!({ "robotId": ROBOT })).send().await;
        if let Ok(raised) = raised {
            if matches!(raised.status().as_u16(), 201 | 202) {
                let answered = since.elapsed();
                let body: serde_json::Value = raised.json().await?;
                let id = body["sessionId"].as_str().unwrap_or_default();
                let withdrawn = http.delete(format!("{base}/v1/sessions/{id}")).bearer_auth(&token).send().await?;
                anyhow::ensure!(withdrawn.status().is_success(), "the call could not be withdrawn: {}", withdrawn.status());
                return Ok(answered);
            }
        }
        anyhow::ensure!(since.elapsed() < Duration::from_secs(30), "the survivor did not answer within 30 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn owner(url: &str) -> anyhow::Result<String> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    Ok(sqlx::query_scalar::<_, String>(&format!("SELECT owner FROM org_leases WHERE org_id = '{ORG}'")).fetch_one(&mut conn).await?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let here = std::env::current_exe()?.parent().map(|dir| dir.join("server")).unwrap_or_default();
    let flags = parse_flags(&[("kills", "20"), ("server", here.to_str().unwrap_or("server")), ("nats", "")]).map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let kills = number(&flags, "kills").map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let binary = PathBuf::from(&flags["server"]);
    let db = ScratchDb::create("postgres").await?;
    let url = db.config.database_url();
    let data = tempfile::tempdir()?;
    let nats = flags["nats"].as_str();
    let mut children = [start(&binary, &url, nats, data.path(), NAMES[0]).await?, start(&binary, &url, nats, data.path(), NAMES[1]).await?];
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
    let (mut times, mut answered) = (Vec::with_capacity(kills), Vec::with_capacity(kills));
    for kill in 1..=kills {
        let held = owner(&url).await?;
        let victim = NAMES.iter().position(|name| held.starts_with(&format!("{name}/"))).ok_or_else(|| anyhow::anyhow!("owner {held:?} is neither instance"))?;
        let survivor = NAMES[1 - victim];
        children[victim].0.start_kill()?;
        let killed = Instant::now();
        children[victim].0.wait().await?;
        while !owner(&url).await?.starts_with(&format!("{survivor}/")) {
            anyhow::ensure!(killed.elapsed() < Duration::from_secs(30), "no takeover within 30 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = killed.elapsed();
        let answers = until_answered(&http, &children[1 - victim].1, killed).await?;
        println!("kill {kill:>2}: {} taken over by {survivor} after {:.0} ms, answering for the org after {:.0} ms", NAMES[victim], ms(took), ms(answers));
        times.push(took);
        answered.push(answers);
        children[victim] = start(&binary, &url, nats, data.path(), NAMES[victim]).await?;
    }
    times.sort();
    answered.sort();
    println!(
        "takeover over {kills} kills: p50 {:.0} ms, max {:.0} ms; answering for the org: p50 {:.0} ms, max {:.0} ms (bound: lease {} ms + take interval {} ms, + at most {} ms for NATS in cluster mode, then the load)",
        ms(percentile(&times, 0.5)),
        ms(*times.last().unwrap_or(&Duration::ZERO)),
        ms(percentile(&answered, 0.5)),
        ms(*answered.last().unwrap_or(&Duration::ZERO)),
        server::engine::lease::LEASE_TTL_MS,
        server::engine::lease::TAKE_EVERY.as_millis(),
        server::engine::forward::LISTEN_WITHIN.as_millis()
    );
    drop(children);
    db.finish().await
}
