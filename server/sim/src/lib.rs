//! The fleet simulator: real edge agents and (optionally) operator consoles
//! played against a running ClutchCall over its real HTTP and WebSocket
//! endpoints, so the wallboard, overview and roster are alive on a first
//! start. Robots heartbeat, raise distress calls, report safety telemetry
//! that moves through the seed's states near each path's floor, and stream
//! state (30 Hz) and camera (5 fps) frames on the relay while attached,
//! with occasional stalls and heartbeat loss. Simulated operators take
//! calls, drive the robot over the relay and complete the session.

mod camera;
mod operator;
mod robot;

use std::time::Duration;
use tokio::sync::watch;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// `http://host:port` of the server.
    pub base: String,
    /// Robot ids and their bearer tokens.
    pub robots: Vec<(String, String)>,
    /// Operators to play: (email, password).
    pub operators: Vec<(String, String)>,
    /// Each idle robot raises a call about this often (jittered).
    pub call_every: Duration,
    /// How long a simulated operator keeps a session before completing it.
    pub session_length: Duration,
    /// Calls each robot raises at most (none: for as long as it runs).
    pub max_calls: Option<u32>,
    pub seed: u64,
}

impl SimConfig {
    /// The demo org: its robots with their public demo tokens, and its
    /// operators except `skip` (people who sign in by hand).
    pub fn demo(base: &str, operators: bool, skip: &[String]) -> SimConfig {
        let robots = server::seed::demo_robot_ids().into_iter().map(|id| (id.to_string(), server::seed::demo_robot_token(id))).collect();
        let operators = if operators {
            server::seed::demo_operator_emails()
                .into_iter()
                .filter(|email| !skip.iter().any(|s| s == email))
                .map(|email| (email.to_string(), server::seed::DEMO_PASSWORD.to_string()))
                .collect()
        } else {
            Vec::new()
        };
        SimConfig {
            base: base.trim_end_matches('/').to_string(),
            robots,
            operators,
            call_every: Duration::from_secs(45),
            session_length: Duration::from_secs(60),
            max_calls: None,
            seed: 7,
        }
    }
}

/// Runs until `stop` turns true.
pub async fn run(config: SimConfig, stop: watch::Receiver<bool>) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("http client");
    let mut tasks = Vec::new();
    for (i, (id, token)) in config.robots.iter().enumerate() {
        let agent = robot::Robot {
            id: id.clone(),
            token: token.clone(),
            base: config.base.clone(),
            http: http.clone(),
            call_every: config.call_every,
            max_calls: config.max_calls,
            seed: config.seed.wrapping_add(i as u64),
        };
        tasks.push(tokio::spawn(agent.run(stop.clone())));
    }
    for (i, (email, password)) in config.operators.iter().enumerate() {
        let console = operator::Operator {
            email: email.clone(),
            password: password.clone(),
            base: config.base.clone(),
            session_length: config.session_length,
            seed: config.seed.wrapping_mul(31).wrapping_add(i as u64),
        };
        tasks.push(tokio::spawn(console.run(stop.clone())));
    }
    for task in tasks {
        let _ = task.await;
    }
}

/// Sleeps `d`, or less when `stop` turns true; false when stopped.
pub(crate) async fn nap(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => !*stop.borrow(),
        _ = stop.changed() => false,
    }
}

/// `ws://…` of `base` + `path`.
pub(crate) fn ws_url(base: &str, path: &str) -> String {
    format!("{}{path}", base.replacen("http", "ws", 1))
}
