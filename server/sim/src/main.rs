//! `clutchcall-sim`: plays the demo org's edge agents and the consoles of
//! its operators nobody signs in as by hand, against a running server.
//! `scripts/run.sh` (README command 1) starts it beside the server.

use clap::Parser;
use clutchcall_sim::{run, SimConfig};
use std::time::Duration;

#[derive(Parser)]
#[command(about = "ClutchCall fleet simulator (demo org)")]
struct Flags {
    /// The server to play against.
    #[arg(long, env = "CLUTCHCALL_SIM_BASE", default_value = "http://127.0.0.1:3000")]
    base: String,
    /// Play operator consoles too.
    #[arg(long, env = "CLUTCHCALL_SIM_OPERATORS", default_value_t = true, action = clap::ArgAction::Set)]
    operators: bool,
    /// Operators left to people (comma-separated emails): the ones the
    /// README signs in as.
    #[arg(long, env = "CLUTCHCALL_SIM_SKIP", value_delimiter = ',', default_value = "asha.rao@northstar.example")]
    skip: Vec<String>,
    /// Robots to play with their own tokens, `id=token` (repeatable),
    /// instead of the demo org's.
    #[arg(long = "robot", value_name = "ID=TOKEN")]
    robot_tokens: Vec<String>,
    /// Only these robots (comma-separated ids); all of the demo org's by default.
    #[arg(long, env = "CLUTCHCALL_SIM_ROBOTS", value_delimiter = ',')]
    robots: Vec<String>,
    /// Each idle robot raises a call about this often, in seconds (jittered).
    #[arg(long, env = "CLUTCHCALL_SIM_CALL_EVERY_S", default_value_t = 45)]
    call_every_s: u64,
    /// Calls each robot raises at most (unlimited when absent).
    #[arg(long, env = "CLUTCHCALL_SIM_CALLS")]
    calls: Option<u32>,
    /// How long a simulated operator keeps a session, in seconds (jittered).
    #[arg(long, env = "CLUTCHCALL_SIM_SESSION_S", default_value_t = 60)]
    session_s: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())).init();
    let flags = Flags::parse();
    let mut config = SimConfig::demo(&flags.base, flags.operators, &flags.skip);
    if !flags.robot_tokens.is_empty() {
        config.robots = flags
            .robot_tokens
            .iter()
            .map(|pair| pair.split_once('=').map(|(id, token)| (id.to_string(), token.to_string())).ok_or_else(|| anyhow::anyhow!("--robot takes ID=TOKEN, not {pair:?}")))
            .collect::<anyhow::Result<_>>()?;
    }
    if !flags.robots.is_empty() {
        config.robots.retain(|(id, _)| flags.robots.contains(id));
    }
    config.call_every = Duration::from_secs(flags.call_every_s.max(1));
    config.max_calls = flags.calls;
    config.session_length = Duration::from_secs(flags.session_s.max(1));
    // Wait for the server (command 1 starts both at once).
    let http = reqwest::Client::new();
    for _ in 0..600 {
        if http.get(format!("{}/healthz", config.base)).send().await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tracing::info!(base = %config.base, robots = config.robots.len(), operators = config.operators.len(), "simulator running");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = stop.send(true);
    });
    run(config, stopped).await;
    Ok(())
}
