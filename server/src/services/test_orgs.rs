//! Browser tests' own orgs (`CLUTCHCALL_TEST_ORGS=1`, loopback only): each
//! test asks for a fresh copy of the demo orgs, so it shares no person,
//! robot, call or sign-in limit with any other test, and passes alone, in
//! any order and beside any number of others.

use crate::auth::hash_password;
use crate::seed::{demo_copy, DemoCopyAnswer, DemoNames, DEMO_PASSWORD};
use crate::services::RobotRegistry;
use crate::store::{SharedStore, StoreResult};
use std::sync::Arc;

pub struct TestOrgs {
    store: SharedStore,
    robots: Arc<RobotRegistry>,
    /// The demo password, hashed once: every copy's people share it (a
    /// test run makes dozens of copies of eleven people each).
    password_hash: String,
}

impl TestOrgs {
    pub async fn new(store: SharedStore, robots: Arc<RobotRegistry>) -> TestOrgs {
        let password_hash = tokio::task::spawn_blocking(|| hash_password(DEMO_PASSWORD)).await.expect("hashing thread");
        TestOrgs { store, robots, password_hash }
    }

    /// A new copy of the demo orgs under a tag of its own. Its robots are
    /// known to the registry at once (consoles measure their PoPs); each
    /// org's dispatcher starts on its first call, as any new org's does.
    pub async fn create(&self) -> StoreResult<DemoCopyAnswer> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        // The random tail of a v7 id: copies made in one millisecond differ.
        let tag = format!("t{}", &id[id.len() - 8..]);
        let seed = demo_copy(&DemoNames::tagged(&tag), || self.password_hash.clone());
        self.store.seed(&seed).await?;
        for org in &seed.orgs {
            self.robots.adopt_org(&org.id).await?;
        }
        tracing::info!(%tag, "test orgs created");
        Ok(DemoCopyAnswer::new(&tag))
    }
}
