//! Whether a sign-in still holds, for long-lived sockets that re-check it
//! on every command (sign-out, expiry or a removed membership ends them).

use crate::auth::token_hash;
use crate::clock::now_ms;
use crate::store::{SharedStore, StoreResult};
use app::models::Role;

pub struct SignIns {
    store: SharedStore,
}

impl SignIns {
    pub fn new(store: SharedStore) -> SignIns {
        SignIns { store }
    }

    /// When the sign-in behind `token` expires (Unix ms), if it is live.
    pub async fn expires_at(&self, token: &str) -> StoreResult<Option<i64>> {
        let session = self.store.web_session(&token_hash(token)).await?;
        Ok(session.map(|s| s.expires_at).filter(|&at| at > now_ms()))
    }

    /// The role the sign-in behind `token` holds in `org_id`, if it still holds.
    pub async fn role(&self, token: &str, org_id: &str) -> StoreResult<Option<Role>> {
        self.store.signed_in_role(&token_hash(token), org_id, now_ms()).await
    }
}
