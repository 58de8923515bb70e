//! The one error type of the browser ↔ server boundary (server functions).
//! Every variant carries a message a person can act on.

use leptos::prelude::{FromServerFnError, ServerFnErrorErr};
use leptos::server_fn::codec::JsonEncoding;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    #[error("Sign in to continue.")]
    Unauthenticated,
    #[error("Email or password is incorrect.")]
    BadCredentials,
    #[error("Too many sign-in attempts. Try again in {0} s.")]
    TooManyAttempts(u64),
    #[error("Choose an organisation first.")]
    NoOrgSelected,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found.")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// The request is fine but the thing is not in a state for it.
    #[error("{0}")]
    Conflict(String),
    #[error("Many people are signing in right now. Try again in a moment.")]
    Busy,
    #[error("The server could not complete the request ({0}).")]
    Internal(String),
    #[error("Could not reach the server: {0}")]
    Transport(String),
}

impl AppError {
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            AppError::Unauthenticated | AppError::BadCredentials => StatusCode::UNAUTHORIZED,
            AppError::TooManyAttempts(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::NoOrgSelected | AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) | AppError::Transport(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Seconds to wait before retrying, for `Retry-After`.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            AppError::TooManyAttempts(s) => Some(*s),
            AppError::Busy => Some(1),
            _ => None,
        }
    }

    pub fn admins_only() -> AppError {
        AppError::Forbidden("This screen is for admins of the organisation.".into())
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::Request(msg) => AppError::Transport(msg),
            other => AppError::Internal(other.to_string()),
        }
    }
}
