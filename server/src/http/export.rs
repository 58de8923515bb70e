//! Downloads: `GET /admin/directory/people.csv`, the org's people in the
//! import's format (admins), and an environment's dataset as LeRobot.

use crate::api::error::ApiError;
use crate::services::Principal;
use crate::state::AppState;
use domain::models::Role;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

pub async fn people_csv(State(state): State<AppState>, principal: Principal) -> Result<Response, ApiError> {
    let org = principal.selected_org().filter(|org| org.role == Role::Admin).ok_or_else(|| ApiError::Forbidden("only admins export the directory".into()))?;
    let csv = state.people.export(&org.org_id).await.map_err(|e| match e {
        crate::services::people::PeopleError::Store(e) => ApiError::from(e),
        other => {
            tracing::error!(error = %other, "directory export failed");
            ApiError::Internal
        }
    })?;
    let disposition = format!("attachment; filename=\"people-{}.csv\"", org.org_id);
    Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()), (header::CONTENT_DISPOSITION, disposition), (header::CACHE_CONTROL, "no-store".into())], csv).into_response())
}

#[derive(serde::Deserialize)]
pub struct ExportParams {
    /// `v3.0` (default) or `v2.1`.
    version: Option<String>,
}

/// `GET /datasets/{environment}/lerobot.tar?version=v3.0|v2.1`: the
/// environment's episodes as a LeRobot dataset. Admins get all of the
/// org's; a client only the episodes of sessions they booked; nobody else.
pub async fn dataset_tar(
    State(state): State<AppState>,
    principal: Principal,
    axum::extract::Path(environment): axum::extract::Path<String>,
    axum::extract::Query(params): axum::extract::Query<ExportParams>,
) -> Result<Response, ApiError> {
    let Principal::User { user, .. } = &principal else {
        return Err(ApiError::Forbidden("datasets are for people".into()));
    };
    let org = user.selected_org.as_ref().ok_or_else(|| ApiError::Forbidden("choose an organisation first".into()))?;
    let client = domain::datasets::episode_scope(org.role, &user.user_id).map_err(|why| ApiError::Forbidden(why.into()))?;
    let version = crate::datasets::lerobot::Version::parse(params.version.as_deref().unwrap_or("v3.0"))
        .ok_or_else(|| ApiError::Invalid("version must be v3.0 or v2.1".into()))?;
    // At most two at once per org; the place is held until the tar is sent.
    let place = state.datasets.export_place(&org.org_id).await.map_err(|_| ApiError::RateLimited { retry_after_s: 30 })?;
    let tar = state.datasets.export(&org.org_id, &environment, version, client, place).await.map_err(|e| {
        tracing::error!(error = %e, "dataset export failed");
        ApiError::Internal
    })?;
    let tar = tar.ok_or_else(|| ApiError::not_found("dataset", &environment))?;
    let name = format!("attachment; filename=\"lerobot-{}-{}.tar\"", crate::datasets::slug(&environment), version.as_str());
    let headers = [(header::CONTENT_TYPE, "application/x-tar".to_string()), (header::CONTENT_DISPOSITION, name), (header::CACHE_CONTROL, "no-store".into())];
    Ok((headers, axum::body::Body::from_stream(tar)).into_response())
}
