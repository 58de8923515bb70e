//! The process's metrics (`metrics` + `metrics-exporter-prometheus`): the
//! names, the recorder, and what the engine, the store and the listener
//! record as they go (the dispatch latency histogram, who dispatches, WAL
//! rewinds, clients cut off). The `/metrics` endpoint that renders them,
//! with the per-org gauges computed at scrape time, is `http::metrics`.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

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

/// Connections cut off because their client took nothing for the stall
/// (`http::connections`): a download given up, a socket whose browser
/// froze, a client on a dead link.
pub const CLIENTS_CUT: &str = "clutchcall_clients_cut_total";

/// A client was cut off for taking nothing (`CLIENTS_CUT`).
pub fn client_cut() {
    metrics::counter!(CLIENTS_CUT).increment(1);
}

/// Other instances found gone from NATS while their relay report stood
/// (killed, or cut off from NATS): their relay sockets forgotten then
/// rather than when the report lapsed (`relay::Relay::ask_the_silent`).
pub const RELAY_INSTANCES_GONE: &str = "clutchcall_relay_instances_gone_total";

/// An instance was found gone (`RELAY_INSTANCES_GONE`).
pub fn relay_instance_gone() {
    metrics::counter!(RELAY_INSTANCES_GONE).increment(1);
}

/// Dispatch batches the org's epoch refused (rule D13), a load's recovery
/// commit among them: the org was taken over while its dispatcher decided
/// them (paused, or cut off past its lease), so none of them happened, and
/// the dispatcher steps down (or was stopping).
pub const BATCHES_FENCED: &str = "clutchcall_batches_fenced_total";

/// A batch was refused by the epoch (`BATCHES_FENCED`): counted where the
/// store reads the refusal, so every commit path counts it once.
pub fn batch_fenced() {
    metrics::counter!(BATCHES_FENCED).increment(1);
}

/// The value of an unlabelled counter in a Prometheus rendering (0 when
/// it is not there yet; for tests).
pub fn counter_value(rendered: &str, name: &str) -> u64 {
    rendered.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0)
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
            // Shown from the start at 0, so the first cut is an increase.
            metrics::describe_counter!(CLIENTS_CUT, "Connections cut off because their client took nothing for the stall");
            metrics::counter!(CLIENTS_CUT).increment(0);
            metrics::describe_counter!(RELAY_INSTANCES_GONE, "Other instances found gone from NATS while their relay report stood");
            metrics::counter!(RELAY_INSTANCES_GONE).increment(0);
            metrics::describe_counter!(BATCHES_FENCED, "Batches refused because another instance had taken the org over (rule D13)");
            metrics::counter!(BATCHES_FENCED).increment(0);
            handle
        })
        .clone()
}
