//! Whether a sign-in still holds, for long-lived sockets: the pass a
//! socket holds while open (ended by sign-out, expiry, a password change
//! or a change of membership, see `tabs`), and the re-check of commands.

use super::tabs::{Credential, OpenTabs, TabPass};
use crate::auth::token_hash;
use crate::clock::now_ms;
use crate::store::{SharedStore, StoreResult};
use app::models::Role;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub struct SignIns {
    store: SharedStore,
    tabs: Arc<OpenTabs>,
}

/// Why a socket was not opened.
#[derive(Debug, PartialEq, Eq)]
pub enum SocketRefused {
    /// The sign-in ended, or the role it was judged on changed meanwhile.
    Ended,
    TooManyTabs,
    Unavailable,
}

impl IntoResponse for SocketRefused {
    fn into_response(self) -> Response {
        match self {
            SocketRefused::Ended => (StatusCode::UNAUTHORIZED, "the sign-in session has ended").into_response(),
            SocketRefused::TooManyTabs => (StatusCode::TOO_MANY_REQUESTS, "Too many open ClutchCall tabs: close one and retry.").into_response(),
            SocketRefused::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "try again in a moment").into_response(),
        }
    }
}

impl SignIns {
    pub fn new(store: SharedStore, tabs: Arc<OpenTabs>) -> SignIns {
        SignIns { store, tabs }
    }

    /// The pass of a socket that `person` opens with the sign-in `token`,
    /// judged to hold `role` in `org_id`. The pass exists before the sign-in
    /// and role are read again, so a change committed after that read finds
    /// the pass and ends it, and one committed before is seen here.
    pub async fn socket_pass(&self, token: &str, person: &str, org_id: &str, role: Role) -> Result<TabPass, SocketRefused> {
        let hash = token_hash(token);
        let expires_at = match self.store.web_session(&hash).await {
            Ok(Some(session)) if session.expires_at > now_ms() => session.expires_at,
            Ok(_) => return Err(SocketRefused::Ended),
            Err(e) => {
                tracing::error!(error = %e, "sign-in lookup failed");
                return Err(SocketRefused::Unavailable);
            }
        };
        let left = Duration::from_millis((expires_at - now_ms()).max(0) as u64);
        let credential = Credential::SignIn { person: person.to_string(), sign_in: hash, org_id: org_id.to_string() };
        let pass = self.tabs.open(credential, Some(Instant::now() + left)).map_err(|_| {
            tracing::info!(user = %person, "socket refused: too many open tabs");
            SocketRefused::TooManyTabs
        })?;
        match self.role(token, org_id).await {
            Ok(Some(now)) if now == role => Ok(pass),
            Ok(_) => Err(SocketRefused::Ended),
            Err(e) => {
                tracing::error!(error = %e, "sign-in lookup failed");
                Err(SocketRefused::Unavailable)
            }
        }
    }

    /// The role the sign-in behind `token` holds in `org_id`, if it still holds.
    pub async fn role(&self, token: &str, org_id: &str) -> StoreResult<Option<Role>> {
        self.store.signed_in_role(&token_hash(token), org_id, now_ms()).await
    }
}
