//! `GET /admin/directory/people.csv`: the org's people in the import's
//! format (admins of the selected org).

use super::principal::Principal;
use super::AppState;
use crate::api::ApiError;
use app::models::Role;
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
