//! One module a screen.

mod account;
mod chat_panel;
mod client;
mod cockpit;
mod directory;
mod handover_panel;
mod home;
mod not_found;
pub(crate) mod operator;
mod orgs;
mod overview;
mod roster;
mod session_dispatch;
mod session_rating;
mod session_timeline;
mod session_view;
mod signin;
pub(crate) mod wallboard;

pub use account::AccountPage;
pub use client::ClientPage;
pub use cockpit::CockpitPage;
pub use directory::{AdminArea, DirectoryPage};
pub use home::Home;
pub use not_found::NotFound;
pub use operator::OperatorHome;
pub use orgs::ChooseOrg;
pub use overview::Overview;
pub use roster::Roster;
pub use session_view::SessionView;
pub use wallboard::Wallboard;
pub use signin::SignIn;
