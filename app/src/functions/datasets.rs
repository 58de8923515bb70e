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
    let user = guard::user().await.map_err(guard::fail)?;
    let org = user.selected_org.clone().ok_or(AppError::NoOrgSelected).map_err(guard::fail)?;
    let client = crate::datasets::episode_scope(org.role, &user.user_id).map_err(|why| guard::fail(AppError::Forbidden(why.into())))?;
    let datasets = use_context::<super::backend::SharedDatasets>().ok_or_else(|| AppError::Internal("datasets missing".into()))?;
    datasets.episodes(&org.org_id, client).await.map_err(guard::fail)
}
