//! Org API keys and webhook endpoints (`domain::integrations`): the rows,
//! the claims that give each endpoint's deliveries to one instance, and the
//! delivery log. The service (services/integrations.rs) decides; this
//! reads and writes.

use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use async_trait::async_trait;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ApiKeyRow {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub hint: String,
    /// Space-separated.
    pub scopes: String,
    pub created_at: i64,
    pub created_by: Option<String>,
    pub revoked_at: Option<i64>,
}

impl ApiKeyRow {
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.split_whitespace().any(|s| s == scope)
    }
}

/// A key to store: only its hash.
pub struct NewKeyRow<'a> {
    pub id: &'a str,
    pub org_id: &'a str,
    pub name: &'a str,
    pub token_hash: &'a str,
    pub hint: &'a str,
    pub scopes: &'a str,
    pub created_by: &'a str,
    pub at: i64,
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookRow {
    pub id: String,
    pub org_id: String,
    pub url: String,
    /// Space-separated; empty: every type.
    pub types: String,
    pub secret: String,
    pub created_at: i64,
    pub delivered_id: i64,
    pub failing_since: Option<i64>,
    pub disabled_at: Option<i64>,
    pub disabled_reason: Option<String>,
}

impl WebhookRow {
    pub fn types(&self) -> Vec<String> {
        self.types.split_whitespace().map(str::to_string).collect()
    }
}

pub struct NewWebhookRow<'a> {
    pub id: &'a str,
    pub org_id: &'a str,
    pub url: &'a str,
    pub types: &'a str,
    pub secret: &'a str,
    pub created_by: &'a str,
    pub at: i64,
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DeliveryRow {
    pub endpoint_id: String,
    pub org_id: String,
    pub event_id: i64,
    pub kind: String,
    pub attempt: i64,
    pub at: i64,
    pub status: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
    pub resend: i64,
}

/// A `WebhookRow`'s columns.
macro_rules! webhook_columns {
    () => {
        "id, org_id, url, types, secret, created_at, delivered_id, failing_since, disabled_at, disabled_reason"
    };
}
const API_KEY: &str = "SELECT id, org_id, name, hint, scopes, created_at, created_by, revoked_at FROM api_keys";
const WEBHOOK: &str = concat!("SELECT ", webhook_columns!(), " FROM webhook_endpoints");

#[async_trait]
pub trait IntegrationStore: Send + Sync {
    async fn create_api_key(&self, key: NewKeyRow<'_>) -> StoreResult<()>;
    /// The org's keys, revoked ones too, newest first.
    async fn api_keys(&self, org_id: &str) -> StoreResult<Vec<ApiKeyRow>>;
    /// The live (not revoked) key with this token hash.
    async fn api_key(&self, token_hash: &str) -> StoreResult<Option<ApiKeyRow>>;
    /// Revokes a live key of the org; its token hash, or `None` if there is
    /// no such live key.
    async fn revoke_api_key(&self, org_id: &str, key_id: &str, at: i64) -> StoreResult<Option<String>>;

    /// Adds an endpoint that gets the org's events after the newest one now.
    async fn create_webhook(&self, hook: NewWebhookRow<'_>) -> StoreResult<()>;
    /// The org's endpoints not removed, oldest first.
    async fn webhooks(&self, org_id: &str) -> StoreResult<Vec<WebhookRow>>;
    async fn webhook(&self, org_id: &str, id: &str) -> StoreResult<Option<WebhookRow>>;
    /// Removes an endpoint; false if the org has no such endpoint.
    async fn remove_webhook(&self, org_id: &str, id: &str, at: i64) -> StoreResult<bool>;
    /// Enables a disabled endpoint again (from where it stopped).
    async fn enable_webhook(&self, org_id: &str, id: &str) -> StoreResult<bool>;
    /// Claims (or keeps) for `owner` until `until` every live endpoint that
    /// no other instance holds; the endpoints `owner` now holds.
    async fn claim_webhooks(&self, owner: &str, now: i64, until: i64) -> StoreResult<Vec<WebhookRow>>;
    /// Lets go of `owner`'s claims (a clean stop).
    async fn release_webhooks(&self, owner: &str) -> StoreResult<()>;
    /// Moves the endpoint's cursor to `delivered_id` and clears its failing
    /// mark, if `owner` still holds it; false if it does not.
    async fn advance_webhook(&self, id: &str, owner: &str, delivered_id: i64) -> StoreResult<bool>;
    /// Marks the endpoint failing since `since` (kept if already failing);
    /// since when it fails, as the database holds it (`None`: not held by
    /// `owner` any more).
    async fn webhook_failing(&self, id: &str, owner: &str, since: i64) -> StoreResult<Option<i64>>;
    /// Disables the endpoint, if `owner` still holds it.
    async fn disable_webhook(&self, id: &str, owner: &str, at: i64, reason: &str) -> StoreResult<()>;
    async fn record_delivery(&self, delivery: &DeliveryRow) -> StoreResult<()>;
    /// The endpoint's latest attempts, newest first (through its
    /// (endpoint_id, id) index: one read an endpoint, at most
    /// `MAX_WEBHOOKS` a screen, reads `limit` rows each; one read for all
    /// would walk every attempt kept).
    async fn deliveries(&self, endpoint_id: &str, limit: i64) -> StoreResult<Vec<DeliveryRow>>;
    /// How many attempts the endpoint has made at this event in order
    /// (resends not counted): where a new claimant's retries go on from.
    async fn attempts(&self, endpoint_id: &str, event_id: i64) -> StoreResult<i64>;
}

macro_rules! integration_store {
    ($store:ident) => {
        #[async_trait]
        impl IntegrationStore for $store {
            async fn create_api_key(&self, k: NewKeyRow<'_>) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO api_keys (id, org_id, name, token_hash, hint, scopes, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(k.id).bind(k.org_id).bind(k.name).bind(k.token_hash).bind(k.hint).bind(k.scopes).bind(k.at).bind(k.created_by)
                .execute(&self.pool).await?;
                Ok(())
            }

            async fn api_keys(&self, org_id: &str) -> StoreResult<Vec<ApiKeyRow>> {
                Ok(sqlx::query_as(&format!("{API_KEY} WHERE org_id = $1 ORDER BY created_at DESC, id DESC"))
                .bind(org_id).fetch_all(&self.pool).await?)
            }

            async fn api_key(&self, token_hash: &str) -> StoreResult<Option<ApiKeyRow>> {
                Ok(sqlx::query_as(&format!("{API_KEY} WHERE token_hash = $1 AND revoked_at IS NULL"))
                .bind(token_hash).fetch_optional(&self.pool).await?)
            }

            async fn revoke_api_key(&self, org_id: &str, key_id: &str, at: i64) -> StoreResult<Option<String>> {
                Ok(sqlx::query_scalar(
                    "UPDATE api_keys SET revoked_at = $1 WHERE org_id = $2 AND id = $3 AND revoked_at IS NULL RETURNING token_hash",
                )
                .bind(at).bind(org_id).bind(key_id).fetch_optional(&self.pool).await?)
            }

            async fn create_webhook(&self, h: NewWebhookRow<'_>) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO webhook_endpoints (id, org_id, url, types, secret, created_at, created_by, delivered_id) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE((SELECT last FROM org_event_counters WHERE org_id = $2), 0))",
                )
                .bind(h.id).bind(h.org_id).bind(h.url).bind(h.types).bind(h.secret).bind(h.at).bind(h.created_by)
                .execute(&self.pool).await?;
                Ok(())
            }

            async fn webhooks(&self, org_id: &str) -> StoreResult<Vec<WebhookRow>> {
                Ok(sqlx::query_as(&format!("{WEBHOOK} WHERE org_id = $1 AND removed_at IS NULL ORDER BY created_at, id")).bind(org_id).fetch_all(&self.pool).await?)
            }

            async fn webhook(&self, org_id: &str, id: &str) -> StoreResult<Option<WebhookRow>> {
                Ok(sqlx::query_as(&format!("{WEBHOOK} WHERE org_id = $1 AND id = $2 AND removed_at IS NULL")).bind(org_id).bind(id).fetch_optional(&self.pool).await?)
            }

            async fn remove_webhook(&self, org_id: &str, id: &str, at: i64) -> StoreResult<bool> {
                let done = sqlx::query("UPDATE webhook_endpoints SET removed_at = $1 WHERE org_id = $2 AND id = $3 AND removed_at IS NULL")
                    .bind(at).bind(org_id).bind(id).execute(&self.pool).await?;
                Ok(done.rows_affected() == 1)
            }

            async fn enable_webhook(&self, org_id: &str, id: &str) -> StoreResult<bool> {
                let done = sqlx::query(
                    "UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL \
                     WHERE org_id = $1 AND id = $2 AND removed_at IS NULL AND disabled_at IS NOT NULL",
                )
                .bind(org_id).bind(id).execute(&self.pool).await?;
                Ok(done.rows_affected() == 1)
            }

            async fn claim_webhooks(&self, owner: &str, now: i64, until: i64) -> StoreResult<Vec<WebhookRow>> {
                // Asked every second by every instance: with no live endpoint
                // (most orgs) a read, not a write (on SQLite an UPDATE takes
                // the write lock the engine's batches need, even for no row).
                let any: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE removed_at IS NULL AND disabled_at IS NULL)")
                    .fetch_one(&self.pool).await?;
                if !any {
                    return Ok(Vec::new());
                }
                Ok(sqlx::query_as(concat!(
                    "UPDATE webhook_endpoints SET claimed_by = $1, claimed_until = $2 \
                     WHERE removed_at IS NULL AND disabled_at IS NULL \
                     AND (claimed_by = $1 OR claimed_by IS NULL OR claimed_until IS NULL OR claimed_until < $3) RETURNING ",
                    webhook_columns!()
                ))
                .bind(owner).bind(until).bind(now).fetch_all(&self.pool).await?)
            }

            async fn release_webhooks(&self, owner: &str) -> StoreResult<()> {
                sqlx::query("UPDATE webhook_endpoints SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = $1").bind(owner).execute(&self.pool).await?;
                Ok(())
            }

            async fn advance_webhook(&self, id: &str, owner: &str, delivered_id: i64) -> StoreResult<bool> {
                let done = sqlx::query(
                    "UPDATE webhook_endpoints SET delivered_id = $1, failing_since = NULL \
                     WHERE id = $2 AND claimed_by = $3 AND delivered_id < $1",
                )
                .bind(delivered_id).bind(id).bind(owner).execute(&self.pool).await?;
                Ok(done.rows_affected() == 1)
            }

            async fn webhook_failing(&self, id: &str, owner: &str, since: i64) -> StoreResult<Option<i64>> {
                Ok(sqlx::query_scalar("UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, $1) WHERE id = $2 AND claimed_by = $3 RETURNING failing_since")
                    .bind(since).bind(id).bind(owner).fetch_optional(&self.pool).await?)
            }

            async fn disable_webhook(&self, id: &str, owner: &str, at: i64, reason: &str) -> StoreResult<()> {
                sqlx::query(
                    "UPDATE webhook_endpoints SET disabled_at = $1, disabled_reason = $2, claimed_by = NULL, claimed_until = NULL WHERE id = $3 AND claimed_by = $4",
                )
                .bind(at).bind(reason).bind(id).bind(owner).execute(&self.pool).await?;
                Ok(())
            }

            async fn record_delivery(&self, d: &DeliveryRow) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO webhook_deliveries (org_id, endpoint_id, event_id, kind, attempt, at, status, latency_ms, error, resend) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .bind(&d.org_id).bind(&d.endpoint_id).bind(d.event_id).bind(&d.kind).bind(d.attempt).bind(d.at).bind(d.status)
                .bind(d.latency_ms).bind(&d.error).bind(d.resend)
                .execute(&self.pool).await?;
                Ok(())
            }

            async fn deliveries(&self, endpoint_id: &str, limit: i64) -> StoreResult<Vec<DeliveryRow>> {
                Ok(sqlx::query_as(
                    "SELECT endpoint_id, org_id, event_id, kind, attempt, at, status, latency_ms, error, resend FROM webhook_deliveries \
                     WHERE endpoint_id = $1 ORDER BY id DESC LIMIT $2",
                )
                .bind(endpoint_id).bind(limit).fetch_all(&self.pool).await?)
            }

            async fn attempts(&self, endpoint_id: &str, event_id: i64) -> StoreResult<i64> {
                Ok(sqlx::query_scalar("SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND event_id = $2 AND resend = 0")
                    .bind(endpoint_id).bind(event_id).fetch_one(&self.pool).await?)
            }
        }
    };
}

integration_store!(SqliteStore);
integration_store!(PgStore);
