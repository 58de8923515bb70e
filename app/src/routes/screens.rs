//! Every screen is a lazy route. Split by the site build (`frontend/site`),
//! each screen's code leaves the main wasm for a chunk of its own that the browser
//! fetches when the screen is entered (and, on a server-rendered first load,
//! preloads from the `<link rel="preload">` the server puts in the head), so a
//! page loads the shell plus its own screen, not every screen of the app.
//!
//! A screen loads its own data inside (resources in its components), so its
//! `data()` half is empty.

use super::AdminArea;
use crate::components::RequireMember;
use leptos::prelude::*;
use leptos_router::{lazy_route, LazyRoute};

macro_rules! lazy_screens {
    ($($(#[$doc:meta])* $screen:ident => $view:expr;)*) => {$(
        $(#[$doc])*
        pub struct $screen;

        #[lazy_route]
        impl LazyRoute for $screen {
            fn data() -> Self {
                Self
            }

            fn view(_this: Self) -> AnyView {
                $view.into_any()
            }
        }
    )*};
}

// Admin screens are flat routes, each inside its own guard: an `<Outlet/>`
// under the guard's Suspense was built twice on the server (its closure runs
// at the dry run and again at the render), and the browser then read the
// discarded copy's data and failed to hydrate.
lazy_screens! {
    /// `/`
    HomeScreen => view! { <super::Home/> };
    /// `/signin`
    SignInScreen => view! { <super::SignIn/> };
    /// `/orgs`
    ChooseOrgScreen => view! { <super::ChooseOrg/> };
    /// `/admin`
    OverviewScreen => view! { <AdminArea><super::Overview/></AdminArea> };
    /// `/admin/directory`
    DirectoryScreen => view! { <AdminArea><super::DirectoryPage/></AdminArea> };
    /// `/admin/people`
    PeopleScreen => view! { <AdminArea><super::PeoplePage/></AdminArea> };
    /// `/admin/floors`
    FloorsScreen => view! { <AdminArea><super::FloorsPage/></AdminArea> };
    /// `/admin/integrations`
    IntegrationsScreen => view! { <AdminArea><super::IntegrationsPage/></AdminArea> };
    /// `/ops/wallboard`
    WallboardScreen => view! { <AdminArea><super::Wallboard/></AdminArea> };
    /// `/ops/roster`
    RosterScreen => view! { <AdminArea><super::Roster/></AdminArea> };
    /// `/ops/sessions`
    SessionScreen => view! { <RequireMember><super::SessionView/></RequireMember> };
    /// `/operator`
    OperatorScreen => view! { <super::OperatorHome/> };
    /// `/cockpit/:id`
    CockpitScreen => view! { <super::CockpitPage/> };
    /// `/client`
    ClientScreen => view! { <super::ClientPage/> };
    /// `/account`
    AccountScreen => view! { <super::AccountPage/> };
    /// `/invite/:token`
    InviteScreen => view! { <super::InvitePage/> };
    /// `/datasets`
    DatasetsScreen => view! { <super::DatasetsPage/> };
}
