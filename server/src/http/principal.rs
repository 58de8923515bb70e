//! Who is asking, as an axum extractor for REST and WebSocket alike: what
//! `services::Accounts` says (the one door), with a robot's and an API
//! key's requests rate-limited per token.

use crate::api::error::ApiError;
use crate::services::{NoPrincipal, Principal};
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let principal = state.accounts.principal(&parts.headers).await.map_err(|refused| match refused {
            NoPrincipal::MalformedBearer => ApiError::Unauthenticated("Authorization must be `Bearer <robot token>`".into()),
            NoPrincipal::UnknownRobotToken => ApiError::Unauthenticated("unknown robot token".into()),
            NoPrincipal::UnknownApiKey => ApiError::Unauthenticated("unknown or revoked API key".into()),
            NoPrincipal::NoCredential => ApiError::Unauthenticated("sign in, or send `Authorization: Bearer <robot token>`".into()),
            NoPrincipal::SignInEnded => ApiError::Unauthenticated("the sign-in session has ended".into()),
            NoPrincipal::Store(e) => e.into(),
        })?;
        if let Principal::Robot { token_hash, .. } | Principal::Integration { token_hash, .. } = &principal {
            state.robot_limits.admit(token_hash).await.map_err(|wait| ApiError::RateLimited { retry_after_s: wait.as_secs().max(1) })?;
        }
        Ok(principal)
    }
}
