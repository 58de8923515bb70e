//! Quick load run of the dispatch path: starts ClutchCall in-process on a
//! fresh database, makes N operators ready, fires M distress calls through
//! `POST /v1/sessions` over HTTP with C in flight, and prints calls/s and
//! POST latency. Figures go in BENCHMARKS.md.
//!
//! cargo run -p clutchcall-bench --release --bin dispatch-load -- --db sqlite --operators 100 --calls 2000 --concurrency 32
//! (`--db postgres` creates and drops a database on CLUTCHCALL_TEST_PG_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres.)

use clutchcall_bench::{ms, number, parse_flags, percentile, ScratchDb};
use server::seed::{load_org, load_robot_token, LOAD_ORG_ID};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

const USAGE: &str = "usage: dispatch-load [--db sqlite|postgres] [--operators N] [--calls M] [--concurrency C]";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = parse_flags(&[("db", "sqlite"), ("operators", "100"), ("calls", "2000"), ("concurrency", "32")])
        .map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let (operators, calls, concurrency) = (|| Ok::<_, String>((number(&flags, "operators")?, number(&flags, "calls")?, number(&flags, "concurrency")?.max(1))))()
        .map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let db = ScratchDb::create(&flags["db"]).await?;
    let config = db.config.clone();
    let running = server::start(config).await?;
    running.store.seed(&load_org(operators, calls)).await?;
    for i in 0..operators {
        running.engine.operator_ready(LOAD_ORG_ID, &format!("u-load-{i:03}"), true).await?;
    }

    let url = format!("http://{}/v1/sessions", running.addr);
    let client = reqwest::Client::builder().pool_max_idle_per_host(concurrency).build()?;
    let gate = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(calls);
    for i in 0..calls {
        let (client, url, gate) = (client.clone(), url.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.expect("semaphore");
            let sent = Instant::now();
            let res = client
                .post(url)
                .bearer_auth(load_robot_token(i))
                .json(&serde_json::json!({ "robotId": format!("lr-{i:03}") }))
                .send()
                .await
                .expect("request");
            (res.status().as_u16(), sent.elapsed())
        }));
    }
    let mut latencies = Vec::with_capacity(calls);
    let (mut matched, mut queued, mut failed) = (0, 0, 0);
    for task in tasks {
        let (status, took) = task.await?;
        latencies.push(took);
        match status {
            201 => matched += 1,
            202 => queued += 1,
            _ => failed += 1,
        }
    }
    let wall = started.elapsed();
    latencies.sort();
    println!(
        "db={} operators={} calls={} concurrency={}\nmatched={matched} queued={queued} failed={failed}\n\
         wall={:.2}s  calls/s={:.0}\nPOST latency p50={:.2}ms p99={:.2}ms max={:.2}ms",
        flags["db"],
        operators,
        calls,
        concurrency,
        wall.as_secs_f64(),
        calls as f64 / wall.as_secs_f64(),
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.99)),
        ms(latencies.last().copied().unwrap_or_default()),
    );
    running.stop().await?;
    db.finish().await?;
    if failed > 0 {
        anyhow::bail!("{failed} calls failed");
    }
    Ok(())
}
