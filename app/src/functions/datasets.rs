//! Server function of the dataset browser.

#[cfg(feature = "ssr")]
use super::guard;
use crate::datasets::Episode;
use crate::error::AppError;
use leptos::prelude::*;

/// The episodes the caller may see: an admin's org's, a client's own
/// (sessions they booked); operators see none.
#[server(endpoint = "load_datasets")]
pub async fn load_datasets() -> Result<Vec<Episode>, AppError> {
    use crate::models::Role;
    let (_, user) = guard::signed_in().await.map_err(guard::fail)?;
    let org = user.selected_org.clone().ok_or(AppError::NoOrgSelected).map_err(guard::fail)?;
    let client = match org.role {
        Role::Admin => None,
        Role::Client => Some(user.user_id.as_str()),
        Role::Operator => return Err(guard::fail(AppError::Forbidden("Datasets belong to the clients who booked the sessions.".into()))),
    };
    let datasets = use_context::<super::backend::SharedDatasets>().ok_or_else(|| AppError::Internal("datasets missing".into()))?;
    datasets.episodes(&org.org_id, client).await.map_err(guard::fail)
}
