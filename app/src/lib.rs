//! ClutchCall's shared crate: domain types and rules, server functions, and
//! the Leptos pages, compiled for the server (`ssr`) and the browser
//! (`hydrate`).

pub mod board;
pub mod booking;
pub mod chat;
pub mod components;
pub mod console;
pub mod datasets;
pub mod directory;
pub mod dispatch;
pub mod error;
pub mod events;
pub mod functions;
pub mod handover;
pub mod inactivity;
pub mod lifecycle;
pub mod live;
pub mod models;
pub mod people;
pub mod presence;
pub mod rating;
pub mod relay;
pub mod teleop;
pub mod ring;
pub mod roster;
pub mod routes;
pub mod rules;
#[cfg(feature = "ssr")]
pub mod session_cookie;
pub mod timeline;

use components::{Session, TopBar};
use routes::AdminArea;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, SsrMode,
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
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(Session::new());
    provide_context(console::Console::new());
    // Effects run only in the browser: this marks the moment the wasm took
    // over the server-rendered page (browser tests wait for it).
    Effect::new(|_| {
        #[cfg(feature = "hydrate")]
        if let Some(body) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.body()) {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });

    view! {
        <Stylesheet id="leptos" href="/pkg/clutchcall.css"/>
        <Title formatter=|page: String| if page.is_empty() { "ClutchCall".to_string() } else { format!("{page} · ClutchCall") }/>
        <Router>
            <TopBar/>
            <console::OfferPanel/>
            <main class="page">
                <Routes fallback=routes::NotFound>
                    // Guarded screens render fully before the first byte is
                    // sent (SsrMode::Async), so a redirect or a 403 is always
                    // the real HTTP status, never a race with streaming.
                    <Route path=path!("/") view=routes::Home ssr=SsrMode::Async/>
                    <Route path=path!("/signin") view=routes::SignIn ssr=SsrMode::Async/>
                    <Route path=path!("/orgs") view=routes::ChooseOrg ssr=SsrMode::Async/>
                    // Admin screens are flat routes, each inside its own guard:
                    // an `<Outlet/>` under the guard's Suspense was built twice
                    // on the server (its closure runs at the dry run and again
                    // at the render), and the browser then read the discarded
                    // copy's data and failed to hydrate.
                    <Route path=path!("/admin") view=|| view! { <AdminArea><routes::Overview/></AdminArea> } ssr=SsrMode::Async/>
                    <Route path=path!("/admin/directory") view=|| view! { <AdminArea><routes::DirectoryPage/></AdminArea> } ssr=SsrMode::Async/>
                    <Route path=path!("/ops/wallboard") view=|| view! { <AdminArea><routes::Wallboard/></AdminArea> } ssr=SsrMode::Async/>
                    <Route path=path!("/ops/roster") view=|| view! { <AdminArea><routes::Roster/></AdminArea> } ssr=SsrMode::Async/>
                    <Route path=path!("/ops/sessions") view=|| view! { <components::RequireMember><routes::SessionView/></components::RequireMember> } ssr=SsrMode::Async/>
                    <Route path=path!("/operator") view=routes::OperatorHome ssr=SsrMode::Async/>
                    <Route path=path!("/cockpit/:id") view=routes::CockpitPage ssr=SsrMode::Async/>
                    <Route path=path!("/client") view=routes::ClientPage ssr=SsrMode::Async/>
                    <Route path=path!("/account") view=routes::AccountPage ssr=SsrMode::Async/>
                    <Route path=path!("/invite/:token") view=routes::InvitePage ssr=SsrMode::Async/>
                    <Route path=path!("/datasets") view=routes::DatasetsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/people") view=|| view! { <AdminArea><routes::PeoplePage/></AdminArea> } ssr=SsrMode::Async/>
                    <Route path=path!("/admin/floors") view=|| view! { <AdminArea><routes::FloorsPage/></AdminArea> } ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}
