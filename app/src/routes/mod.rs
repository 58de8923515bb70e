//! One module a screen.

mod directory;
mod home;
mod not_found;
mod operator;
mod orgs;
mod signin;

pub use directory::{AdminArea, DirectoryPage};
pub use home::Home;
pub use not_found::NotFound;
pub use operator::OperatorHome;
pub use orgs::ChooseOrg;
pub use signin::SignIn;
