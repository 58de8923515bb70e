//! What admins do on `/admin/integrations`: create and revoke org API keys,
//! add, remove and re-enable webhook endpoints, read their delivery log and
//! resend one event. Revoking a key ends its event streams at once, on
//! every instance (through `OpenTabs`, like any credential).

use super::store_failed as internal;
use super::OpenTabs;
use crate::auth::{new_token, token_hash};
use crate::clock::now_ms;
use crate::store::{ApiKeyRow, DeliveryRow, LogRow, NewKeyRow, NewWebhookRow, SharedStore, StoreResult, WebhookRow};
use crate::webhooks::outbound::Outbound;
use app::error::AppError;
use domain::event_log::{resume, types_problem, LogEvent, Resume};
use domain::integrations::{
    hint, name_problem, url_problem, ApiKeyView, DeliveryView, Integrations, NewApiKey, NewWebhook, WebhookState, WebhookView, API_KEY_PREFIX,
    MAX_KEYS, MAX_WEBHOOKS, SCOPE_EVENTS_READ,
};
use domain::rules::rfc3339;
use std::sync::Arc;

/// Attempts shown per endpoint on the screen.
const DELIVERIES_SHOWN: i64 = 20;

pub struct IntegrationService {
    store: SharedStore,
    tabs: Arc<OpenTabs>,
    outbound: Arc<Outbound>,
}

impl IntegrationService {
    pub fn new(store: SharedStore, tabs: Arc<OpenTabs>, outbound: Arc<Outbound>) -> IntegrationService {
        IntegrationService { store, tabs, outbound }
    }

    /// Where a reader whose last id is `after` resumes (rule: 410 when
    /// what follows it is past the retention).
    pub async fn resume(&self, org_id: &str, after: i64) -> StoreResult<Resume> {
        let (oldest, last) = self.store.event_bounds(org_id).await?;
        Ok(resume(after, oldest, last))
    }

    /// The org's records after `after`, at most `limit`, oldest first.
    pub async fn page(&self, org_id: &str, after: i64, limit: i64) -> StoreResult<Vec<LogRow>> {
        self.store.events_after(org_id, after, limit).await
    }

    /// Whether the key (its token hash) still holds.
    pub async fn key_holds(&self, token_hash: &str) -> StoreResult<bool> {
        Ok(self.store.api_key(token_hash).await?.is_some())
    }

    /// Deletes records older than `before` (retention).
    pub async fn prune(&self, before: i64) -> StoreResult<u64> {
        self.store.prune_events(before).await
    }

    /// Everything the screen shows.
    pub async fn overview(&self, org_id: &str) -> Result<Integrations, AppError> {
        let keys = self.store.api_keys(org_id).await.map_err(internal)?.into_iter().map(key_view).collect();
        let mut webhooks = Vec::new();
        for hook in self.store.webhooks(org_id).await.map_err(internal)? {
            let deliveries = self.store.deliveries(&hook.id, DELIVERIES_SHOWN).await.map_err(internal)?;
            webhooks.push(webhook_view(hook, deliveries));
        }
        let last_event_id = self.store.last_event_id(org_id).await.map_err(internal)?;
        Ok(Integrations { keys, webhooks, event_types: LogEvent::TYPES.iter().map(|t| t.to_string()).collect(), last_event_id })
    }

    /// A new key that reads the org's events; the key is shown once.
    pub async fn create_key(&self, org_id: &str, actor: &str, name: &str) -> Result<NewApiKey, AppError> {
        if let Some(problem) = name_problem(name) {
            return Err(AppError::Invalid(problem));
        }
        let live = self.store.api_keys(org_id).await.map_err(internal)?.iter().filter(|k| k.revoked_at.is_none()).count();
        if live >= MAX_KEYS {
            return Err(AppError::Conflict(format!("An organisation holds at most {MAX_KEYS} live keys: revoke one first.")));
        }
        let key = format!("{API_KEY_PREFIX}{}", new_token());
        let id = format!("key-{}", uuid::Uuid::now_v7().simple());
        let row = NewKeyRow {
            id: &id,
            org_id,
            name: name.trim(),
            token_hash: &token_hash(&key),
            hint: &hint(&key),
            scopes: SCOPE_EVENTS_READ,
            created_by: actor,
            at: now_ms(),
        };
        self.store.create_api_key(row).await.map_err(internal)?;
        tracing::info!(org = %org_id, key = %id, by = %actor, "API key created");
        Ok(NewApiKey { id, key })
    }

    /// Revokes a key: it stops working now, and its open streams end.
    pub async fn revoke_key(&self, org_id: &str, actor: &str, key_id: &str) -> Result<(), AppError> {
        let Some(hash) = self.store.revoke_api_key(org_id, key_id, now_ms()).await.map_err(internal)? else {
            return Err(AppError::NotFound("API key".into()));
        };
        let closed = self.tabs.credential_ended(&hash);
        tracing::info!(org = %org_id, key = %key_id, by = %actor, closed, "API key revoked");
        Ok(())
    }

    /// Adds an endpoint for `types` (empty: all); the signing secret is
    /// shown once. It gets the events that follow, not the past ones.
    pub async fn add_webhook(&self, org_id: &str, actor: &str, url: &str, types: Vec<String>) -> Result<NewWebhook, AppError> {
        let url = url.trim();
        if let Some(problem) = url_problem(url).or(types_problem(&types)) {
            return Err(AppError::Invalid(problem));
        }
        if let Some(problem) = self.outbound.refused(url).await {
            return Err(AppError::Invalid(problem));
        }
        if self.store.webhooks(org_id).await.map_err(internal)?.len() >= MAX_WEBHOOKS {
            return Err(AppError::Conflict(format!("An organisation holds at most {MAX_WEBHOOKS} endpoints: remove one first.")));
        }
        let id = format!("wh-{}", uuid::Uuid::now_v7().simple());
        let secret = format!("whsec_{}", new_token());
        let mut types = types;
        types.sort();
        types.dedup();
        let row = NewWebhookRow { id: &id, org_id, url, types: &types.join(" "), secret: &secret, created_by: actor, at: now_ms() };
        self.store.create_webhook(row).await.map_err(internal)?;
        tracing::info!(org = %org_id, endpoint = %id, by = %actor, "webhook endpoint added");
        Ok(NewWebhook { id, secret })
    }

    pub async fn remove_webhook(&self, org_id: &str, actor: &str, id: &str) -> Result<(), AppError> {
        if !self.store.remove_webhook(org_id, id, now_ms()).await.map_err(internal)? {
            return Err(AppError::NotFound("Webhook endpoint".into()));
        }
        tracing::info!(org = %org_id, endpoint = %id, by = %actor, "webhook endpoint removed");
        Ok(())
    }

    /// Delivers to a disabled endpoint again, from where it stopped.
    pub async fn enable_webhook(&self, org_id: &str, actor: &str, id: &str) -> Result<(), AppError> {
        if !self.store.enable_webhook(org_id, id).await.map_err(internal)? {
            return Err(AppError::Conflict("That endpoint is not disabled.".into()));
        }
        tracing::info!(org = %org_id, endpoint = %id, by = %actor, "webhook endpoint enabled again");
        Ok(())
    }

    /// Sends one event to the endpoint again, now, once (outside the
    /// ordered stream); the attempt joins the delivery log.
    pub async fn resend(&self, org_id: &str, id: &str, event_id: i64) -> Result<DeliveryView, AppError> {
        let hook = self.store.webhook(org_id, id).await.map_err(internal)?.ok_or_else(|| AppError::NotFound("Webhook endpoint".into()))?;
        let record = self
            .store
            .events_after(org_id, event_id - 1, 1)
            .await
            .map_err(internal)?
            .into_iter()
            .find(|r| r.id == event_id)
            .ok_or_else(|| AppError::NotFound("Event (it may be past the retention)".into()))?;
        let attempt = self.store.attempts(&hook.id, event_id).await.map_err(internal)? + 1;
        Ok(delivery_view(crate::webhooks::send(&self.store, &self.outbound, &hook, &record, attempt, true).await))
    }
}

fn key_view(k: ApiKeyRow) -> ApiKeyView {
    ApiKeyView {
        scopes: k.scopes.split_whitespace().map(str::to_string).collect(),
        id: k.id,
        name: k.name,
        hint: k.hint,
        created_at: rfc3339(k.created_at),
        created_by: k.created_by,
        revoked_at: k.revoked_at.map(rfc3339),
    }
}

fn webhook_view(h: WebhookRow, deliveries: Vec<DeliveryRow>) -> WebhookView {
    let state = match (h.disabled_at, h.failing_since) {
        (Some(_), _) => WebhookState::Disabled,
        (None, Some(_)) => WebhookState::Failing,
        (None, None) => WebhookState::Healthy,
    };
    WebhookView {
        types: h.types(),
        id: h.id,
        url: h.url,
        state,
        created_at: rfc3339(h.created_at),
        delivered_id: h.delivered_id,
        failing_since: h.failing_since.map(rfc3339),
        disabled_reason: h.disabled_reason,
        deliveries: deliveries.into_iter().map(delivery_view).collect(),
    }
}

fn delivery_view(d: DeliveryRow) -> DeliveryView {
    DeliveryView {
        event_id: d.event_id,
        kind: d.kind,
        attempt: d.attempt,
        at: rfc3339(d.at),
        status: d.status.and_then(|s| u16::try_from(s).ok()),
        latency_ms: d.latency_ms,
        error: d.error,
        resend: d.resend != 0,
    }
}
