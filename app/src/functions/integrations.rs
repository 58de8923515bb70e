//! Server functions of `/admin/integrations` (admins): org API keys for
//! the event stream, webhook endpoints and their delivery log. The work is
//! the server's `IntegrationsAdmin`.

#[cfg(feature = "ssr")]
use super::guard;
use crate::error::AppError;
use crate::integrations::{DeliveryView, Integrations, NewApiKey, NewWebhook};
use leptos::prelude::*;

#[cfg(feature = "ssr")]
async fn admin() -> Result<(String, String, super::backend::SharedIntegrations), AppError> {
    let (user, org) = guard::require(crate::models::Role::Admin).await.map_err(guard::fail)?;
    Ok((user.user_id, org.org_id, guard::integrations()?))
}

/// The org's keys, endpoints with their latest deliveries, and event types.
#[server(endpoint = "load_integrations")]
pub async fn load_integrations() -> Result<Integrations, AppError> {
    let (_, org_id, admin) = admin().await?;
    admin.integrations(&org_id).await.map_err(guard::fail)
}

/// A new API key (`events:read`); the key is in the answer and nowhere else.
#[server(endpoint = "create_api_key")]
pub async fn create_api_key(name: String) -> Result<NewApiKey, AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.create_key(&org_id, &actor, &name).await.map_err(guard::fail)
}

#[server(endpoint = "revoke_api_key")]
pub async fn revoke_api_key(key_id: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.revoke_key(&org_id, &actor, &key_id).await.map_err(guard::fail)
}

/// A new endpoint for `types` (none: every type); the secret is in the answer.
#[server(endpoint = "add_webhook")]
pub async fn add_webhook(url: String, types: Option<Vec<String>>) -> Result<NewWebhook, AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.add_webhook(&org_id, &actor, &url, types.unwrap_or_default()).await.map_err(guard::fail)
}

#[server(endpoint = "remove_webhook")]
pub async fn remove_webhook(webhook_id: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.remove_webhook(&org_id, &actor, &webhook_id).await.map_err(guard::fail)
}

/// Delivers to a disabled endpoint again, from where it stopped.
#[server(endpoint = "enable_webhook")]
pub async fn enable_webhook(webhook_id: String) -> Result<(), AppError> {
    let (actor, org_id, admin) = admin().await?;
    admin.enable_webhook(&org_id, &actor, &webhook_id).await.map_err(guard::fail)
}

/// Sends one event to the endpoint again, now (the attempt is logged).
#[server(endpoint = "resend_webhook")]
pub async fn resend_webhook(webhook_id: String, event_id: i64) -> Result<DeliveryView, AppError> {
    let (_, org_id, admin) = admin().await?;
    admin.resend(&org_id, &webhook_id, event_id).await.map_err(guard::fail)
}
