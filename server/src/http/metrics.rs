//! `GET /metrics` for the ops team's tools, in the Prometheus text format.
//! The figures span orgs, so it listens on its own address
//! (`CLUTCHCALL_METRICS_ADDR`, loopback by default), never on the public
//! port. Gauges are computed at scrape time from the same picture the
//! overview shows (`OrgViews::ops_board`, rules in `domain::board`); the
//! counters and histograms are recorded as things happen (`crate::metrics`).

use crate::metrics::handle;
use crate::services::OrgViews;
use domain::models::PresenceState;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// The database's part of a scrape waits at most this: past it the
/// counters and the gauges as last read are served, and
/// `clutchcall_scrape_read_database` says 0, as it does when a read failed
/// (a scrape is most wanted when the database is away or cut off).
const READS_WITHIN: Duration = Duration::from_secs(2);

async fn scrape(State(s): State<Scrape>) -> String {
    let read = match tokio::time::timeout(READS_WITHIN, read_orgs(&s.views)).await {
        Ok(read) => read,
        Err(_) => {
            tracing::warn!("metrics: the database did not answer within {READS_WITHIN:?}; the org gauges are as last read");
            false
        }
    };
    metrics::gauge!("clutchcall_scrape_read_database").set(if read { 1.0 } else { 0.0 });
    s.handle.render()
}

/// Every org's gauges, from the database: whether every read succeeded.
async fn read_orgs(views: &OrgViews) -> bool {
    let orgs = match views.org_ids().await {
        Ok(orgs) => orgs,
        Err(e) => {
            tracing::warn!(error = %e, "metrics: org list failed");
            return false;
        }
    };
    let mut all = true;
    for org in orgs {
        match views.ops_board(&org).await {
            Ok(board) => record(&org, &board),
            Err(e) => {
                tracing::warn!(%org, error = %e, "metrics: org picture failed");
                all = false;
            }
        }
    }
    all
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
