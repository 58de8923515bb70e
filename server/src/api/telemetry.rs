//! `POST /v1/sessions/{id}/telemetry`: the edge agent reports its session's
//! safety state and link numbers (PROTECTIVE_STOP latched until cleared).

use super::{ApiError, ApiJson, Caller, ErrorBody, ErrorCode};
use crate::state::AppState;
use crate::store::{Telemetry, TelemetryOutcome};
use domain::models::{SafetyState, SessionRecord};
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelemetryBody {
    pub state: SafetyState,
    /// Whole milliseconds (`55713.0` is accepted as 55713).
    #[serde(deserialize_with = "whole_ms")]
    #[schema(minimum = 0, maximum = 4294967295_u64)]
    pub rtt_ms: u32,
    /// Commanded-versus-observed arm divergence, degrees, ≥ 0.
    #[schema(minimum = 0.0)]
    pub divergence_deg: f64,
    /// Fraction of full commanded velocity allowed, 0 to 1.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub velocity_scale: f64,
}

/// A JSON number that is a whole count of milliseconds: JSON Schema's
/// `integer` includes `55713.0`, so it is accepted as 55713.
fn whole_ms<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let ms = f64::deserialize(deserializer)?;
    if ms.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&ms) {
        Ok(ms as u32)
    } else {
        Err(serde::de::Error::custom("rttMs must be a whole number of milliseconds ≥ 0"))
    }
}

/// Report safety state and link numbers.
#[utoipa::path(
    post, path = "/v1/sessions/{id}/telemetry", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = TelemetryBody,
    responses(
        (status = 200, description = "The updated session", body = SessionRecord),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "`protective_stop_latched`: PROTECTIVE_STOP holds until cleared; `session_ended`", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("robot_token" = []), ("admin_session" = []))
)]
pub async fn report_telemetry(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TelemetryBody>,
) -> Result<Json<SessionRecord>, ApiError> {
    if !body.divergence_deg.is_finite() || body.divergence_deg < 0.0 {
        return Err(ApiError::Invalid("divergenceDeg must be a number ≥ 0".into()));
    }
    if !body.velocity_scale.is_finite() || !(0.0..=1.0).contains(&body.velocity_scale) {
        return Err(ApiError::Invalid("velocityScale must be between 0 and 1".into()));
    }
    caller.session(&state, &id).await?;
    let telemetry = Telemetry {
        state: body.state,
        rtt_ms: body.rtt_ms,
        divergence_deg: body.divergence_deg,
        velocity_scale: body.velocity_scale,
    };
    match state.sessions.telemetry(caller.org_id(), &id, telemetry).await? {
        TelemetryOutcome::Applied { row, .. } => Ok(Json(row.record()?)),
        TelemetryOutcome::Latched => Err(ApiError::Conflict {
            code: ErrorCode::ProtectiveStopLatched,
            message: "the session is latched in PROTECTIVE_STOP; only an explicit clear on the session detail view leaves it".into(),
        }),
        TelemetryOutcome::Ended => Err(ApiError::Conflict { code: ErrorCode::SessionEnded, message: "the session has already ended".into() }),
        TelemetryOutcome::NotFound => Err(ApiError::not_found("session", &id)),
    }
}
