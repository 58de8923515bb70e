//! `GET /metrics` for the ops team's tools, in the Prometheus text format
//! (`metrics` + `metrics-exporter-prometheus`). The figures span orgs, so
//! it listens on its own address (`CLUTCHCALL_METRICS_ADDR`, loopback by
//! default), never on the public port.
//!
//! Gauges are computed at scrape time from the same picture the overview
//! shows (`OrgViews::ops_board`, rules in `domain::board`); the dispatch
//! latency histogram is recorded by the engine as calls are raised.

use crate::services::OrgViews;
use domain::models::PresenceState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

/// Seconds from a distress call reaching the engine to its answer (offer or queue).
pub const DISPATCH_SECONDS: &str = "clutchcall_dispatch_seconds";
const DISPATCH_BUCKETS: &[f64] = &[0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0];

/// 1 for each org this instance dispatches (holds the lease of), 0 for
/// one it stopped dispatching: which instance owns which org (cluster mode).
const DISPATCHING: &str = "clutchcall_dispatching";

/// Requests an org's dispatcher has decided and not yet answered: they wait
/// for their batch's commit (a backlog here is the database, not the desk).
const UNCOMMITTED: &str = "clutchcall_dispatch_uncommitted";

/// The org's count of decided, unanswered requests (`UNCOMMITTED`).
pub fn uncommitted(org: &str) -> metrics::Gauge {
    metrics::gauge!(UNCOMMITTED, "org" => org.to_string())
}

/// This instance took (`true`) or gave up (`false`) the org's dispatch.
pub fn dispatching(org: &str, here: bool) {
    metrics::gauge!(DISPATCHING, "org" => org.to_string()).set(if here { 1.0 } else { 0.0 });
}

/// SQLite WAL rewinds (RESTART checkpoints) by how they ended: `done`, or
/// `gave_up` when a reader outlasted the wait (the WAL then keeps growing
/// until a later one succeeds).
const WAL_REWINDS: &str = "clutchcall_sqlite_wal_rewinds_total";

/// One WAL rewind ended: `done` or not.
pub fn wal_rewound(done: bool) {
    metrics::counter!(WAL_REWINDS, "outcome" => if done { "done" } else { "gave_up" }).increment(1);
}

/// The process's recorder (one per process: tests start several servers).
pub fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(DISPATCH_SECONDS.into()), DISPATCH_BUCKETS)
                .expect("non-empty buckets")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics shows only what this one records");
            }
            handle
        })
        .clone()
}

#[derive(Clone)]
struct Scrape {
    views: Arc<OrgViews>,
    handle: PrometheusHandle,
}

/// Binds the metrics address and serves `/metrics` until the task is aborted.
pub async fn serve(addr: SocketAddr, views: Arc<OrgViews>) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new().route("/metrics", get(scrape)).with_state(Scrape { views, handle: handle() });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "metrics listener stopped");
        }
    });
    Ok((bound, task))
}

async fn scrape(State(s): State<Scrape>) -> String {
    match s.views.org_ids().await {
        Ok(orgs) => {
            for org in orgs {
                match s.views.ops_board(&org).await {
                    Ok(board) => record(&org, &board),
                    Err(e) => tracing::warn!(%org, error = %e, "metrics: org picture failed"),
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "metrics: org list failed"),
    }
    s.handle.render()
}

/// The overview's figures for one org, as gauges labelled by org.
fn record(org: &str, board: &domain::board::OpsBoard) {
    let h = board.headline();
    let org = org.to_string();
    metrics::gauge!("clutchcall_live_sessions", "org" => org.clone()).set(h.live_sessions as f64);
    metrics::gauge!("clutchcall_robots_online", "org" => org.clone()).set(h.robots_online as f64);
    metrics::gauge!("clutchcall_robots_total", "org" => org.clone()).set(h.robots_total as f64);
    metrics::gauge!("clutchcall_operators_available", "org" => org.clone()).set(h.operators_available as f64);
    metrics::gauge!("clutchcall_estops_24h", "org" => org.clone()).set(h.estops_24h as f64);
    for (state, n) in domain::board::state_counts(&board.live) {
        metrics::gauge!("clutchcall_sessions_by_state", "org" => org.clone(), "state" => state.as_str()).set(n as f64);
    }
    for state in PresenceState::ALL {
        let n = board.presences.iter().filter(|p| p.state == state).count();
        metrics::gauge!("clutchcall_presences", "org" => org.clone(), "state" => state.as_str()).set(n as f64);
    }
    // Every skill of the fleet, so an emptied queue reads 0, not its last depth.
    let mut skills: Vec<&str> = board.robots.iter().map(|r| r.skill.as_str()).chain(board.queue.iter().map(|q| q.skill.as_str())).collect();
    skills.sort_unstable();
    skills.dedup();
    for skill in skills {
        let waiting = board.queue.iter().find(|q| q.skill == skill).map_or(0, |q| q.waiting);
        metrics::gauge!("clutchcall_queue_depth", "org" => org.clone(), "skill" => skill.to_string()).set(waiting as f64);
    }
}
