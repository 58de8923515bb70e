//! The ways in besides the engine: every change that is not a dispatch
//! decision goes through one of these, which write the store and publish
//! the change on its topic. Handlers and sockets call these, never the store.

pub mod accounts;
pub mod bookings;
pub mod heartbeats;
pub mod integrations;
pub mod passwords;
pub mod people;
pub mod places;
pub mod quotas;
pub mod registry;
pub mod sessions;
pub mod tabs;
pub mod test_orgs;
pub mod views;
pub mod limits;
pub mod throttle;

pub use accounts::{Accounts, NoPrincipal, Principal, SocketRefused};
pub use bookings::BookingService;
pub use integrations::IntegrationService;
pub use passwords::PasswordChecker;
pub use people::PeopleService;
pub use quotas::{Quotas, Write};
pub use registry::RobotRegistry;
pub use sessions::SessionService;
pub use tabs::{Credential, Ended, OpenTabs, TabPass};
pub use test_orgs::TestOrgs;
pub use throttle::SignInThrottle;
pub use views::OrgViews;

/// A store failure, for a person: logged here, answered without its detail.
pub(crate) fn store_failed(e: crate::store::StoreError) -> app::error::AppError {
    tracing::error!(error = %e, "store failure");
    app::error::AppError::Internal("database unavailable".into())
}
