//! Webhook deliveries: each endpoint gets its org's events of the types it
//! chose, in id order, signed (signing.rs), at least once. The event log is
//! the outbox: an endpoint's cursor (`delivered_id`) moves only after the
//! receiver answered 2xx, so a crash between a commit and its delivery
//! loses nothing; the next claimant sends it.
//!
//! One instance delivers for an endpoint at a time: it claims the endpoint
//! in the database for `CLAIM_MS` under its name and renews the claim every
//! second; when it dies the claim lapses and another instance goes on from
//! the cursor (or the same one, restarted under its name, at once).
//! Each endpoint has its own task, so a slow or dead endpoint delays no
//! other, and none of this runs on the dispatcher's path.

pub mod outbound;
pub mod signing;

use crate::clock::now_ms;
use crate::store::{DeliveryRow, LogRow, SharedStore, WebhookRow};
use crate::task::OwnedTask;
use domain::event_log::wanted;
use domain::integrations::{delivered, retry_after_ms, to_disable};
use outbound::Outbound;
use rand::Rng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long a claim holds without renewal: another instance takes over an
/// endpoint within this after its deliverer died.
pub const CLAIM_MS: i64 = 15_000;
/// How often claims are renewed and new endpoints picked up.
const TICK: Duration = Duration::from_secs(1);
/// How often an idle endpoint looks for new events.
const IDLE: Duration = Duration::from_millis(250);
/// Events read per step.
const PAGE: i64 = 100;

#[derive(Clone)]
pub struct Settings {
    /// The first retry's wait (doubling from there).
    pub first_retry_ms: i64,
}

/// Signs and sends one record; the attempt is logged.
pub async fn send(store: &SharedStore, outbound: &Outbound, hook: &WebhookRow, record: &LogRow, attempt: i64, resend: bool) -> DeliveryRow {
    let body = record.body();
    let signature = signing::sign(&hook.secret, now_ms() / 1000, &body);
    let headers = vec![
        (signing::SIGNATURE_HEADER, signature),
        (signing::EVENT_ID_HEADER, record.id.to_string()),
        (signing::EVENT_TYPE_HEADER, record.kind.clone()),
    ];
    let answer = outbound.post(&hook.url, headers, body).await;
    let error = match (answer.status, answer.error) {
        (Some(status), _) if !delivered(status) => Some(format!("answered {status}")),
        (_, error) => error,
    };
    let row = DeliveryRow {
        endpoint_id: hook.id.clone(),
        org_id: hook.org_id.clone(),
        event_id: record.id,
        kind: record.kind.clone(),
        attempt,
        at: now_ms(),
        status: answer.status.map(i64::from),
        latency_ms: answer.latency_ms,
        error,
        resend: resend as i64,
    };
    if let Err(e) = store.record_delivery(&row).await {
        tracing::warn!(error = %e, endpoint = %hook.id, "delivery log write failed");
    }
    row
}

/// Runs this instance's share of deliveries until the task is dropped.
pub fn start(store: SharedStore, outbound: Arc<Outbound>, owner: String, settings: Settings) -> JoinHandle<()> {
    tokio::spawn(async move {
        // Each endpoint's task ends with this one (an aborted job, a kill).
        let mut running: HashMap<String, OwnedTask> = HashMap::new();
        // When the claims were last renewed: a task sends only while they
        // surely still hold (a stalled instance's tasks stop by themselves).
        let renewed = Arc::new(AtomicI64::new(0));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = now_ms();
            let held = match store.claim_webhooks(&owner, now, now + CLAIM_MS).await {
                Ok(held) => {
                    renewed.store(now, Ordering::SeqCst);
                    held
                }
                Err(e) => {
                    tracing::warn!(error = %e, "webhook claims could not be renewed");
                    continue;
                }
            };
            // Endpoints no longer held (removed, disabled, taken over) stop.
            running.retain(|id, task| held.iter().any(|h| &h.id == id) && !task.is_finished());
            for hook in held {
                if !running.contains_key(&hook.id) {
                    tracing::info!(endpoint = %hook.id, org = %hook.org_id, from = hook.delivered_id, "delivering webhook events");
                    let id = hook.id.clone();
                    let claim = Claim { owner: owner.clone(), renewed: renewed.clone() };
                    running.insert(id, OwnedTask::spawn(deliver(store.clone(), outbound.clone(), claim, settings.clone(), hook)));
                }
            }
        }
    })
}

/// Lets go of this instance's claims, so another takes them at once.
pub async fn release(store: &SharedStore, owner: &str) {
    if let Err(e) = store.release_webhooks(owner).await {
        tracing::warn!(error = %e, "webhook claims not released");
    }
}

/// This instance's hold on its endpoints.
struct Claim {
    owner: String,
    renewed: Arc<AtomicI64>,
}

impl Claim {
    /// The claim surely still holds: renewed less than `CLAIM_MS` minus a
    /// margin ago (for the clocks of other instances).
    fn holds(&self) -> bool {
        now_ms() - self.renewed.load(Ordering::SeqCst) < CLAIM_MS - 3_000
    }
}

/// One endpoint's ordered deliveries, from its cursor on.
async fn deliver(store: SharedStore, outbound: Arc<Outbound>, claim: Claim, settings: Settings, hook: WebhookRow) {
    let owner = claim.owner.as_str();
    let types = hook.types();
    let mut cursor = hook.delivered_id;
    loop {
        if !claim.holds() {
            return;
        }
        let rows = match store.events_after(&hook.org_id, cursor, PAGE).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, endpoint = %hook.id, "event log read failed");
                tokio::time::sleep(TICK).await;
                continue;
            }
        };
        if rows.is_empty() {
            tokio::time::sleep(IDLE).await;
            continue;
        }
        if rows[0].id > cursor + 1 {
            // Ids are 1, 2, 3… per org: these were deleted by retention
            // before this endpoint got them (disabled, or failing, too long).
            tracing::warn!(endpoint = %hook.id, org = %hook.org_id, from = cursor + 1, to = rows[0].id - 1, "webhook events past the retention were never delivered");
        }
        let mut passed = cursor;
        for row in rows {
            let id = row.id;
            // Decided on the stored type: one this build does not know is
            // sent as stored to an endpoint that wants every type.
            if !wanted(&types, &row.kind) {
                passed = id;
                continue;
            }
            // Passed-over records first, so the cursor never skips ahead of a failure.
            if passed > cursor && !advance(&store, &hook, owner, passed).await {
                return;
            }
            let mut attempt = store.attempts(&hook.id, id).await.unwrap_or(0);
            loop {
                if !claim.holds() {
                    return;
                }
                attempt += 1;
                let sent = send(&store, &outbound, &hook, &row, attempt, false).await;
                if sent.status.is_some_and(|s| delivered(s as u16)) {
                    break;
                }
                let now = now_ms();
                // The database's mark counts (an earlier claimant's, or an
                // admin's enable that cleared it).
                let since = match store.webhook_failing(&hook.id, owner, now).await {
                    Ok(Some(since)) => since,
                    Ok(None) => return, // no longer ours
                    Err(e) => {
                        tracing::warn!(error = %e, endpoint = %hook.id, "failing mark not written");
                        now
                    }
                };
                if to_disable(Some(since), now) {
                    let reason = format!("failing for 24 h; the last attempt: {}", sent.error.unwrap_or_default());
                    tracing::warn!(endpoint = %hook.id, org = %hook.org_id, %reason, "webhook endpoint disabled");
                    if let Err(e) = store.disable_webhook(&hook.id, owner, now, &reason).await {
                        tracing::warn!(error = %e, endpoint = %hook.id, "endpoint not disabled");
                    }
                    return;
                }
                let wait = retry_after_ms(attempt as u32, rand::thread_rng().gen::<f64>(), settings.first_retry_ms);
                tracing::debug!(endpoint = %hook.id, event = id, attempt, wait_ms = wait, "delivery failed; retrying");
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
            }
            if !advance(&store, &hook, owner, id).await {
                return;
            }
            cursor = id;
            passed = id;
        }
        if passed > cursor {
            if !advance(&store, &hook, owner, passed).await {
                return;
            }
            cursor = passed;
        }
    }
}

/// Moves the cursor; false when this instance no longer holds the endpoint
/// (its deliveries stop; the holder goes on from the cursor).
async fn advance(store: &SharedStore, hook: &WebhookRow, owner: &str, to: i64) -> bool {
    match store.advance_webhook(&hook.id, owner, to).await {
        Ok(true) => true,
        Ok(false) => {
            tracing::info!(endpoint = %hook.id, "webhook endpoint held elsewhere now (or removed): its deliveries stop here");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, endpoint = %hook.id, "webhook cursor not moved");
            false
        }
    }
}
