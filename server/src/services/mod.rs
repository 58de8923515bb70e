//! The ways in besides the engine: every change that is not a dispatch
//! decision goes through one of these, which write the store and publish
//! the change on its topic. Handlers and sockets call these, never the store.

pub mod bookings;
pub mod passwords;
pub mod people;
pub mod quotas;
pub mod registry;
pub mod sessions;
pub mod signins;
pub mod tabs;
pub mod throttle;

pub use bookings::BookingService;
pub use passwords::PasswordChecker;
pub use people::PeopleService;
pub use quotas::{Quotas, Write};
pub use registry::RobotRegistry;
pub use sessions::SessionService;
pub use signins::SignIns;
pub use tabs::{Credential, Ended, OpenTabs, TabPass};
pub use throttle::SignInThrottle;
