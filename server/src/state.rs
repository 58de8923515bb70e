//! Everything a request handler may need: the services, the engine and the
//! HTTP layer's own limits, shared by every surface (pages, `/v1`, `/ws`,
//! `/relay`, downloads).

use crate::engine::Engine;
use crate::http::client::Cidr;
use crate::http::origin::PublicOrigins;
use crate::http::robot_rate::RobotRateLimit;
use crate::services::{Accounts, OpenTabs, RobotRegistry, SessionService};
use app::functions::backend::SharedBackend;
use leptos::prelude::LeptosOptions;
use std::sync::Arc;

/// Everything a request handler may need, behind one `Arc`: axum clones
/// the state for every request (and a socket keeps it for its life), so a
/// clone is one count, not one per service.
#[derive(Clone)]
pub struct AppState(Arc<AppServices>);

impl AppState {
    pub fn new(services: AppServices) -> AppState {
        AppState(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppServices;

    fn deref(&self) -> &AppServices {
        &self.0
    }
}

/// What `AppState` holds.
pub struct AppServices {
    pub leptos_options: LeptosOptions,
    pub backend: SharedBackend,
    pub engine: Arc<Engine>,
    pub robots: Arc<RobotRegistry>,
    pub sessions: Arc<SessionService>,
    /// People and link floors of each org's directory.
    pub people: Arc<crate::services::PeopleService>,
    /// The teleop relay (data plane) and its recordings.
    pub relay: Arc<crate::relay::Relay>,
    /// Episodes and their LeRobot exports.
    pub datasets: Arc<crate::datasets::DatasetService>,
    /// API keys, webhooks and the org's event log (`/v1/events`).
    pub integrations: Arc<crate::services::IntegrationService>,
    /// Who is asking (the one door), sign-ins and socket passes.
    pub accounts: Arc<Accounts>,
    /// Each person's open sockets (a cap, and closed at sign-out).
    pub tabs: Arc<OpenTabs>,
    /// Where pages are served from: the `Origin` state changes must carry.
    pub origins: PublicOrigins,
    /// Requests per robot token.
    pub robot_limits: Arc<RobotRateLimit>,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Arc<Vec<Cidr>>,
    /// Attempts at signing in and at taking up invitation links.
    pub throttle: Arc<crate::services::SignInThrottle>,
    /// argon2 work, on its own few threads.
    pub passwords: Arc<crate::services::PasswordChecker>,
    /// How often each kind of write may be made.
    pub quotas: Arc<crate::services::Quotas>,
    /// Browser tests' own orgs (`CLUTCHCALL_TEST_ORGS=1`); `None` in service.
    pub test_orgs: Option<Arc<crate::services::TestOrgs>>,
    /// A console tab silent this long is closed (its presence then lapses).
    pub presence_ttl_ms: i64,
    /// A client that takes nothing for this long is given up: its
    /// connection is cut (`http::connections`), and a download it takes no
    /// piece of let go (`http::export`). 60 s; only tests change it.
    pub client_stall: std::time::Duration,
}

impl axum::extract::FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}
