//! The one error type of the REST boundary. Every failure answers
//! `{"error":{"code","message"}}` with its HTTP status.

use crate::engine::EngineError;
use crate::store::StoreError;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    MalformedJson(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("request body is larger than 64 KiB")]
    PayloadTooLarge,
    #[error("{message}")]
    Conflict { code: ErrorCode, message: String },
    #[error("the server could not complete the request")]
    Internal,
    /// Over the robot token's request rate (`Retry-After`).
    #[error("too many requests for this token: retry in {retry_after_s} s")]
    RateLimited { retry_after_s: u64 },
    /// Retry after `retry_after_s` (`Retry-After`; 1 unless the route
    /// says otherwise).
    #[error("{message}")]
    Unavailable { code: ErrorCode, message: String, retry_after_s: u64 },
    /// What was asked for was deleted (events past the retention).
    #[error("{0}")]
    Gone(String),
}

/// Every code a `/v1` error answers with: the wire's stable strings, named
/// once (a client matches on them; a typo here would be a silent break).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    MalformedJson,
    InvalidBody,
    Unauthenticated,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    Internal,
    RateLimited,
    CallInProgress,
    NoOpenOffer,
    SessionEnded,
    SessionPaused,
    IllegalTransition,
    HandoverRinging,
    NotHandoverCandidate,
    CannotExtend,
    RobotExists,
    ProtectiveStopLatched,
    Unavailable,
    DispatchedElsewhere,
    /// `410`: the events after the reader's last id are past the retention.
    EventsGone,
}

/// `{"error": {"code", "message"}}`
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code, e.g. `not_found`, `protective_stop_latched`.
    pub code: ErrorCode,
    /// What went wrong, for a person.
    pub message: String,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Gone(_) => StatusCode::GONE,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::MalformedJson(_) => ErrorCode::MalformedJson,
            ApiError::Invalid(_) => ErrorCode::InvalidBody,
            ApiError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::PayloadTooLarge => ErrorCode::PayloadTooLarge,
            ApiError::Conflict { code, .. } | ApiError::Unavailable { code, .. } => *code,
            ApiError::Internal => ErrorCode::Internal,
            ApiError::RateLimited { .. } => ErrorCode::RateLimited,
            ApiError::Gone(_) => ErrorCode::EventsGone,
        }
    }

    pub fn not_found(what: &str, id: &str) -> ApiError {
        ApiError::NotFound(format!("{what} {id} not found"))
    }

    /// A 503 unavailable for `code`, to be retried after a second.
    pub fn unavailable(code: ErrorCode, message: String) -> ApiError {
        ApiError::Unavailable { code, message, retry_after_s: 1 }
    }

    /// A 503 `Unavailable` asking to be retried after `seconds` instead of
    /// a second; any other error as it is.
    pub fn with_retry_after(self, seconds: u64) -> ApiError {
        match self {
            ApiError::Unavailable { code, message, .. } => ApiError::Unavailable { code, message, retry_after_s: seconds },
            other => other,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { code: self.code(), message: self.to_string() } };
        let mut response = (self.status(), axum::Json(body)).into_response();
        let retry_after_s = match self {
            ApiError::Unavailable { retry_after_s, .. } | ApiError::RateLimited { retry_after_s } => Some(retry_after_s),
            _ => None,
        };
        if let Some(seconds) = retry_after_s {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::JsonDataError(e) => ApiError::Invalid(e.body_text()),
            JsonRejection::JsonSyntaxError(e) => ApiError::MalformedJson(e.body_text()),
            JsonRejection::MissingJsonContentType(_) => {
                ApiError::MalformedJson("expected a JSON body with Content-Type: application/json".into())
            }
            other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            other => ApiError::MalformedJson(other.body_text()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if let StoreError::Unanswered(_) = e {
            tracing::warn!(error = %e, "store unanswered");
            return ApiError::unavailable(ErrorCode::Unavailable, e.to_string());
        }
        tracing::error!(error = %e, "store failure");
        ApiError::Internal
    }
}

/// A stream tied to a sign-in (`Accounts::socket_pass`) that could not be
/// opened, answered as the API answers (JSON); a socket's upgrade is
/// answered in plain text (`SocketRefused`'s own `IntoResponse`).
impl From<crate::services::SocketRefused> for ApiError {
    fn from(refused: crate::services::SocketRefused) -> Self {
        match refused {
            crate::services::SocketRefused::TooManyTabs => ApiError::RateLimited { retry_after_s: 5 },
            crate::services::SocketRefused::Ended => ApiError::Unauthenticated("the sign-in session has ended".into()),
            crate::services::SocketRefused::Unavailable => ApiError::unavailable(ErrorCode::Unavailable, "the sign-in could not be checked: try again in a moment".into()),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            EngineError::CallInProgress { .. } => ApiError::Conflict { code: ErrorCode::CallInProgress, message: e.to_string() },
            EngineError::NoSkill(_) | EngineError::ImplausibleRtt => ApiError::Invalid(e.to_string()),
            EngineError::NoOpenOffer => ApiError::Conflict { code: ErrorCode::NoOpenOffer, message: e.to_string() },
            EngineError::SessionEnded => ApiError::Conflict { code: ErrorCode::SessionEnded, message: e.to_string() },
            // Someone else's session answers as an unknown one: no oracle.
            EngineError::NotAttached => ApiError::NotFound("session not found".into()),
            EngineError::Inactive => ApiError::Forbidden(e.to_string()),
            EngineError::Paused => ApiError::Conflict { code: ErrorCode::SessionPaused, message: e.to_string() },
            EngineError::IllegalTransition { .. } => ApiError::Conflict { code: ErrorCode::IllegalTransition, message: e.to_string() },
            EngineError::HandoverRinging(_) => ApiError::Conflict { code: ErrorCode::HandoverRinging, message: e.to_string() },
            EngineError::NotHandoverCandidate => ApiError::Conflict { code: ErrorCode::NotHandoverCandidate, message: e.to_string() },
            EngineError::CannotExtend(_) => ApiError::Conflict { code: ErrorCode::CannotExtend, message: e.to_string() },
            EngineError::CannotTakeOver(_) => ApiError::Conflict { code: ErrorCode::NotHandoverCandidate, message: e.to_string() },
            EngineError::Unavailable => ApiError::unavailable(ErrorCode::Unavailable, e.to_string()),
            EngineError::DispatchedElsewhere => ApiError::unavailable(ErrorCode::DispatchedElsewhere, e.to_string()),
            EngineError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// The wire's codes are what clients were promised (README's table):
    /// typing them changed no string.
    #[test]
    fn every_error_code_keeps_its_wire_string() {
        let codes = [
            (ErrorCode::MalformedJson, "malformed_json"),
            (ErrorCode::InvalidBody, "invalid_body"),
            (ErrorCode::Unauthenticated, "unauthenticated"),
            (ErrorCode::Forbidden, "forbidden"),
            (ErrorCode::NotFound, "not_found"),
            (ErrorCode::PayloadTooLarge, "payload_too_large"),
            (ErrorCode::Internal, "internal"),
            (ErrorCode::RateLimited, "rate_limited"),
            (ErrorCode::CallInProgress, "call_in_progress"),
            (ErrorCode::NoOpenOffer, "no_open_offer"),
            (ErrorCode::SessionEnded, "session_ended"),
            (ErrorCode::SessionPaused, "session_paused"),
            (ErrorCode::IllegalTransition, "illegal_transition"),
            (ErrorCode::HandoverRinging, "handover_ringing"),
            (ErrorCode::NotHandoverCandidate, "not_handover_candidate"),
            (ErrorCode::CannotExtend, "cannot_extend"),
            (ErrorCode::RobotExists, "robot_exists"),
            (ErrorCode::ProtectiveStopLatched, "protective_stop_latched"),
            (ErrorCode::Unavailable, "unavailable"),
            (ErrorCode::DispatchedElsewhere, "dispatched_elsewhere"),
            (ErrorCode::EventsGone, "events_gone"),
        ];
        for (code, wire) in codes {
            assert_eq!(serde_json::to_value(code).unwrap(), wire);
        }
    }
}
