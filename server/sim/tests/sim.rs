//! The simulator against a real server (in-process, fresh SQLite, the demo
//! org) for a few seconds: robots raise calls, simulated operators take
//! them and drive over the relay, sessions move through several safety
//! states, and completed sessions become dataset episodes.

use clutchcall_sim::{run, SimConfig};
use std::time::Duration;

async fn count(url: &str, sql: &str) -> i64 {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_raises_answers_and_completes_sessions_in_several_safety_states() {
    let dir = tempfile::tempdir().unwrap();
    let config = server::config::Config::local(dir.path().to_path_buf(), None, dir.path().join("site"));
    let db = config.database_url();
    let running = server::start(config).await.unwrap();
    let mut sim = SimConfig::demo(&format!("http://{}", running.addr), true, &[]);
    sim.call_every = Duration::from_secs(2);
    sim.session_length = Duration::from_secs(3);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run(sim, stopped));
    // Long enough for calls, answers, a few seconds of frames and the completions.
    let mut completed = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        completed = count(&db, "SELECT COUNT(*) FROM sessions WHERE lifecycle = 'COMPLETED'").await;
        if completed >= 2 && count(&db, "SELECT COUNT(*) FROM episodes").await >= 1 {
            break;
        }
    }
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(15), task).await;
    let sessions = count(&db, "SELECT COUNT(*) FROM sessions").await;
    let states = count(&db, "SELECT COUNT(DISTINCT to_state) FROM safety_transitions").await;
    let episodes = count(&db, "SELECT COUNT(*) FROM episodes").await;
    let heartbeats = count(&db, "SELECT COUNT(*) FROM robots WHERE last_heartbeat_at IS NOT NULL").await;
    assert!(sessions >= 3, "{sessions} sessions raised");
    assert!(completed >= 2, "{completed} sessions completed by simulated operators");
    assert!(states >= 2, "sessions moved through {states} safety state(s)");
    assert!(episodes >= 1, "completed sessions' recordings became {episodes} episode(s)");
    assert!(heartbeats >= 10, "{heartbeats} robots heartbeating");
    running.stop().await.unwrap();
}
