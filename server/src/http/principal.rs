//! Who is asking, for REST and WebSocket alike: a robot by its bearer
//! token (looked up in the registry's memory), or a signed-in person by the
//! session cookie. One extractor, so every door checks the same way.

use super::AppState;
use crate::api::ApiError;
use crate::auth::token_hash;
use crate::store::RobotRecord;
use app::models::{CurrentUser, OrgMembership};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::header;

pub enum Principal {
    /// An edge agent; `token_hash` is its bearer token's (long-lived
    /// sockets end when it is rotated or the robot retired).
    Robot { robot: RobotRecord, token_hash: String },
    /// A signed-in person; `token` is their session token (re-checked by
    /// long-lived sockets).
    User { token: String, user: CurrentUser },
}

impl Principal {
    /// The person's role in their selected org, if they chose one.
    pub fn selected_org(&self) -> Option<&OrgMembership> {
        match self {
            Principal::User { user, .. } => user.selected_org.as_ref(),
            Principal::Robot { .. } => None,
        }
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| ApiError::Unauthenticated("Authorization must be `Bearer <robot token>`".into()))?;
            let hash = token_hash(token);
            let robot = state
                .robots
                .by_token_hash(&hash)
                .await?
                .ok_or_else(|| ApiError::Unauthenticated("unknown robot token".into()))?;
            state.robot_limits.admit(&hash).map_err(|wait| ApiError::RateLimited { retry_after_s: wait.as_secs().max(1) })?;
            return Ok(Principal::Robot { robot, token_hash: hash });
        }
        let tokens = state.backend.session_cookie().tokens(&parts.headers);
        if tokens.is_empty() {
            return Err(ApiError::Unauthenticated("sign in, or send `Authorization: Bearer <robot token>`".into()));
        }
        // Cookies may share the name (one planted by a sibling site): the
        // first that is a live sign-in counts.
        for token in tokens {
            if let Some(user) = state.backend.session_user(&token).await.map_err(|_| ApiError::Internal)? {
                return Ok(Principal::User { token, user });
            }
        }
        Err(ApiError::Unauthenticated("the sign-in session has ended".into()))
    }
}
