//! Quick load run of the dispatch path: starts ClutchCall in-process on a
//! fresh database, makes N operators ready, fires M distress calls through
//! `POST /v1/sessions` over HTTP with C in flight, and prints calls/s and
//! POST latency. Figures go in BENCHMARKS.md.
//!
//! cargo run -p server --release --bin dispatch-load -- --db sqlite --operators 100 --calls 2000 --concurrency 32
//! (`--db postgres` creates and drops a database on CLUTCHCALL_TEST_PG_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres.)

use server::config::Config;
use server::seed::{load_org, load_robot_token, LOAD_ORG_ID};
use sqlx::Connection;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

struct Args {
    db: String,
    operators: usize,
    calls: usize,
    concurrency: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { db: "sqlite".into(), operators: 100, calls: 2000, concurrency: 32 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|_| format!("{flag} takes a number"));
        match flag.as_str() {
            "--db" if value == "sqlite" || value == "postgres" => args.db = value.clone(),
            "--operators" => args.operators = number()?,
            "--calls" => args.calls = number()?,
            "--concurrency" => args.concurrency = number()?.max(1),
            _ => return Err(format!("unknown argument {flag} {value}")),
        }
    }
    Ok(args)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args().map_err(|e| anyhow::anyhow!("{e}\nusage: dispatch-load [--db sqlite|postgres] [--operators N] [--calls M] [--concurrency C]"))?;
    let dir = tempfile::tempdir()?;
    let pg_admin = std::env::var("CLUTCHCALL_TEST_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let pg_db = format!("cc_load_{}", std::process::id());
    let database_url = if args.db == "postgres" {
        let mut conn = sqlx::PgConnection::connect(&pg_admin).await?;
        sqlx::query(&format!("CREATE DATABASE {pg_db}")).execute(&mut conn).await?;
        Some(format!("{}/{pg_db}", pg_admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&pg_admin)))
    } else {
        None
    };
    let config = Config {
        addr: "127.0.0.1:0".parse()?,
        data_dir: dir.path().to_path_buf(),
        database_url,
        site_root: "target/site".into(),
        secure_cookies: false,
        seed_demo: true,
        offer_window_ms: server::acd::OFFER_WINDOW_MS,
        wrap_up_ms: app::ring::DEFAULT_WRAP_UP_MS,
        presence_ttl_ms: app::ring::PRESENCE_TTL_MS,
    };
    let running = server::start(config).await?;
    running.store.seed(&load_org(args.operators, args.calls)).await?;
    for i in 0..args.operators {
        running.acd.operator_ready(LOAD_ORG_ID, &format!("u-load-{i:03}"), true).await?;
    }

    let url = format!("http://{}/v1/sessions", running.addr);
    let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency).build()?;
    let gate = Arc::new(Semaphore::new(args.concurrency));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.calls);
    for i in 0..args.calls {
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
    let mut latencies = Vec::with_capacity(args.calls);
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
        args.db,
        args.operators,
        args.calls,
        args.concurrency,
        wall.as_secs_f64(),
        args.calls as f64 / wall.as_secs_f64(),
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    running.stop().await?;
    if args.db == "postgres" {
        let mut conn = sqlx::PgConnection::connect(&pg_admin).await?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {pg_db} WITH (FORCE)")).execute(&mut conn).await?;
    }
    if failed > 0 {
        anyhow::bail!("{failed} calls failed");
    }
    Ok(())
}
