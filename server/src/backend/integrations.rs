//! The server's side of `app::functions::backend::IntegrationsAdmin`.

use crate::services::IntegrationService;
use app::error::AppError;
use app::functions::backend::IntegrationsAdmin;
use async_trait::async_trait;
use domain::integrations::{DeliveryView, Integrations, NewApiKey, NewWebhook};
use std::sync::Arc;

pub struct IntegrationsBackend(pub Arc<IntegrationService>);

#[async_trait]
impl IntegrationsAdmin for IntegrationsBackend {
    async fn integrations(&self, org_id: &str) -> Result<Integrations, AppError> {
        self.0.overview(org_id).await
    }

    async fn create_key(&self, org_id: &str, actor: &str, name: &str) -> Result<NewApiKey, AppError> {
        self.0.create_key(org_id, actor, name).await
    }

    async fn revoke_key(&self, org_id: &str, actor: &str, key_id: &str) -> Result<(), AppError> {
        self.0.revoke_key(org_id, actor, key_id).await
    }

    async fn add_webhook(&self, org_id: &str, actor: &str, url: &str, types: Vec<String>) -> Result<NewWebhook, AppError> {
        self.0.add_webhook(org_id, actor, url, types).await
    }

    async fn remove_webhook(&self, org_id: &str, actor: &str, id: &str) -> Result<(), AppError> {
        self.0.remove_webhook(org_id, actor, id).await
    }

    async fn enable_webhook(&self, org_id: &str, actor: &str, id: &str) -> Result<(), AppError> {
        self.0.enable_webhook(org_id, actor, id).await
    }

    async fn resend(&self, org_id: &str, id: &str, event_id: i64) -> Result<DeliveryView, AppError> {
        self.0.resend(org_id, id, event_id).await
    }
}
