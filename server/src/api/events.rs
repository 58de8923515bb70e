//! `POST /v1/sessions/{id}/errors`: an edge agent reports a fault on its
//! session (a stream drop, a control fault), logged as an `ERROR` activity
//! event (rule L06). It changes no state; the safety state is telemetry's.

use super::{ApiError, ApiJson, Caller, ErrorBody};
use crate::state::AppState;
use domain::lifecycle::ActivityEntry;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

/// The longest error description kept.
pub const MAX_ERROR_CHARS: usize = 500;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorReport {
    /// What went wrong, e.g. `camera stream dropped`. 1–500 characters.
    #[schema(min_length = 1, max_length = 500)]
    pub detail: String,
}

/// Report an error on the session (logged as `ERROR`).
#[utoipa::path(
    post, path = "/v1/sessions/{id}/errors", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = ErrorReport,
    responses(
        (status = 201, description = "Logged", body = ActivityEntry),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "`session_ended`: nothing reports into a finished session", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("robot_token" = []), ("admin_session" = []))
)]
pub async fn report_error(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ErrorReport>,
) -> Result<(StatusCode, Json<ActivityEntry>), ApiError> {
    let detail = body.detail.trim();
    if detail.is_empty() || detail.chars().count() > MAX_ERROR_CHARS {
        return Err(ApiError::Invalid(format!("detail must be 1–{MAX_ERROR_CHARS} characters")));
    }
    caller.session(&state, &id).await?;
    let entry = state.engine.report_error(caller.org_id(), &id, detail).await?;
    Ok((StatusCode::CREATED, Json(entry)))
}
