//! ClutchCall's Leptos app: server functions, pages, the console and the
//! browser's sockets, compiled for the server (`ssr`) and the browser
//! (`hydrate`). The types and rules they share with the server's engine and
//! the simulator are the domain crate's (`app/domain`), re-exported here.

pub mod chunk;
pub mod components;
pub mod console;
pub mod deferred;
pub mod error;
pub mod forms;
pub mod functions;
pub mod live;
pub mod page_data;
pub mod page_user;
pub mod routes;
pub mod socket;
#[cfg(feature = "ssr")]
pub mod session_cookie;

// The domain (types and pure rules), under the paths the screens, the
// server and the tests have always used.
pub use clutchcall_domain::{
    board, booking, chat, datasets, directory, dispatch, event_log, events, handover, inactivity, integrations, lifecycle, models, people, presence, rating, relay, ring,
    roster, rules, teleop, timeline,
};

use components::{ConsoleStatus, Session, SignedInData, TopBar};
use routes::screens;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, Lazy, SsrMode,
};

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="dark"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
                <SignedInData/>
            </head>
            <body>
                // Not hydrated: plain HTML (see `TopBar`). The browser
                // hydrates the app in `#app` (frontend/src/lib.rs).
                <TopBar/>
                <div id="app">
                    <App/>
                </div>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(Session::of_this_page());
    provide_context(console::Console::new());
    view! {
        <Stylesheet id="leptos" href="/pkg/clutchcall.css"/>
        <Title formatter=|page: String| if page.is_empty() { "ClutchCall".to_string() } else { format!("{page} · ClutchCall") }/>
        <Router>
            <ConsoleStatus/>
            <console::OfferSlot/>
            <main class="page">
                <Routes fallback=routes::NotFound>
                    // Guarded screens render fully before the first byte is
                    // sent (SsrMode::Async), so a redirect or a 403 is always
                    // the real HTTP status, never a race with streaming.
                    // Every screen is a lazy route (see routes::screens).
                    <Route path=path!("/") view={Lazy::<screens::HomeScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/signin") view={Lazy::<screens::SignInScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/orgs") view={Lazy::<screens::ChooseOrgScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin") view={Lazy::<screens::OverviewScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/directory") view={Lazy::<screens::DirectoryScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/people") view={Lazy::<screens::PeopleScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/floors") view={Lazy::<screens::FloorsScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/integrations") view={Lazy::<screens::IntegrationsScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/ops/wallboard") view={Lazy::<screens::WallboardScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/ops/roster") view={Lazy::<screens::RosterScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/ops/sessions") view={Lazy::<screens::SessionScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/operator") view={Lazy::<screens::OperatorScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/cockpit/:id") view={Lazy::<screens::CockpitScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/client") view={Lazy::<screens::ClientScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/account") view={Lazy::<screens::AccountScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/invite/:token") view={Lazy::<screens::InviteScreen>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/datasets") view={Lazy::<screens::DatasetsScreen>::new()} ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}
