//! The HTTP surface's router: the Leptos app and its server functions,
//! static files, the `/v1` API, the ring channel and operational endpoints,
//! and the layers every request passes. Handlers stay thin: they take the
//! state (`crate::state`), who is asking (`services::Principal`) and answer
//! with their surface's error; they reach the engine and the services,
//! never the store. Only `lib.rs` uses the router; the files beside it
//! (client address, origins, the robot-token rate, connections and a
//! socket's writer) are used by the state, the services and the sockets
//! too, and import nothing back from here.

pub mod client;
pub mod connections;
mod export;
pub mod headers;
pub mod metrics;
pub mod origin;
mod principal;
mod render;
pub mod robot_rate;
pub mod socket_writer;
mod test_orgs;

use crate::state::AppState;
use app::functions::backend::SharedBackend;
use app::{shell, App};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{file_and_error_handler_with_context, generate_route_list, site_pkg_dir_service, site_pkg_dir_service_route_path, LeptosRoutes};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// No page or API call may hang a user: past this the answer is a 503.
/// (A WebSocket upgrade answers at once; the socket itself is not bounded.)
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest body a page or server function accepts.
pub const APP_BODY_LIMIT: usize = 16 * 1024;
/// The people CSV of an import (5,000 rows is about 400 KiB).
pub const IMPORT_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// The server functions that carry a CSV.
/// The CSV import's two server functions, by their own paths (a renamed
/// endpoint cannot leave this list behind).
const IMPORT_PATHS: [&str; 2] = [
    <app::functions::PreviewPeopleImport as leptos::server_fn::ServerFn>::PATH,
    <app::functions::ImportPeople as leptos::server_fn::ServerFn>::PATH,
];

/// Bodies are limited to `APP_BODY_LIMIT`, a CSV import's to
/// `IMPORT_BODY_LIMIT`: a declared length over it is refused unread, and a
/// body that runs past it stops being read. The larger limit is only for
/// an admin of the selected org, checked before a byte of the body is read
/// (the import's own admin check runs after Leptos has buffered it).
async fn body_limit(State(state): State<AppState>, request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let limit = if IMPORT_PATHS.contains(&request.uri().path()) && imports_people(&state, request.headers()).await { IMPORT_BODY_LIMIT } else { APP_BODY_LIMIT };
    let declared = request.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        return (StatusCode::PAYLOAD_TOO_LARGE, "The request body is too large.").into_response();
    }
    next.run(request.map(|body| axum::body::Body::new(http_body_util::Limited::new(body, limit)))).await
}

/// Whether the request is signed in as an admin of its selected org.
async fn imports_people(state: &AppState, headers: &http::HeaderMap) -> bool {
    match app::functions::page_user(&state.backend, headers).await {
        Ok(Some(user)) => user.selected_org.is_some_and(|org| org.role == domain::models::Role::Admin),
        _ => false,
    }
}

/// Who asks for a page, resolved before it renders: the app reads it from
/// the request's extensions as it renders, and writes it into the page for
/// the browser (`app::components::Session`), so nothing waits on it.
/// Someone already signed in who opens the sign-in page goes straight to
/// their landing screen. Decided here rather than in the page, so the
/// sign-in screen's wasm carries no code for it (issue "wallboard", Budget).
async fn page_user(State(state): State<AppState>, mut request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    if !render::renders_page(&request) {
        return next.run(request).await;
    }
    let path = request.uri().path();
    let user = app::functions::page_user(&state.backend, request.headers()).await;
    if let (Ok(Some(user)), "/signin") = (&user, path) {
        return axum::response::Redirect::to(user.landing_path()).into_response();
    }
    request.extensions_mut().insert(app::components::Session::new(user));
    next.run(request).await
}

/// The app's routes, generated once per process.
///
/// Generating them renders the app with resource loading suppressed by a
/// process-global flag (leptos_server's `SuppressResourceLoad`): a resource
/// first polled on another thread meanwhile waits forever (leptos issue
/// #4773). Tests start many servers in one process while others render
/// pages, and one in ~30 runs a page never answered. Generated once, before
/// the first server serves, no render can ever overlap it.
pub fn route_list() -> Vec<leptos_axum::AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

pub fn router(state: AppState) -> Router {
    let routes = route_list();
    let backend = state.backend.clone();
    let admin: app::functions::backend::SharedDirectoryAdmin = Arc::new(crate::backend::PeopleBackend::new(
        state.people.clone(),
        state.robots.clone(),
        state.throttle.clone(),
        state.passwords.clone(),
        state.quotas.clone(),
    ));
    let datasets: app::functions::backend::SharedDatasets = Arc::new(crate::backend::DatasetsBackend(state.datasets.clone()));
    let integrations: app::functions::backend::SharedIntegrations = Arc::new(crate::backend::IntegrationsBackend(state.integrations.clone()));
    let provide_backend = move || {
        provide_context::<SharedBackend>(backend.clone());
        provide_context(admin.clone());
        provide_context(datasets.clone());
        provide_context(integrations.clone());
    };
    let options = state.leptos_options.clone();

    // The wasm, its chunks, JS and CSS are served as files, precompressed
    // when the build wrote .br/.gz. Not through the fallback: it answers
    // anything but a 200 with the app's not-found page, so a browser
    // revalidating a cached chunk (304) got a 404, the chunk failed to load
    // and the page never hydrated.
    let pkg_route = site_pkg_dir_service_route_path(&state.leptos_options);
    let pkg_files = site_pkg_dir_service(&state.leptos_options);

    let router = Router::new()
        .leptos_routes_with_context(&state, routes, provide_backend.clone(), move || shell(options.clone()))
        .route_service(&pkg_route, pkg_files)
        .fallback(file_and_error_handler_with_context::<AppState, _>(provide_backend, shell))
        // Pages and server functions (`/api/*`) read no body over 16 KiB: a
        // 1.5 MB "email" is refused before anything reads it. (`/v1` has its
        // own 64 KiB limit with JSON errors; layers wrap the routes above.)
        .layer(axum::middleware::from_fn_with_state(state.clone(), body_limit))
        .layer(axum::middleware::from_fn_with_state(state.clone(), page_user))
        .layer(axum::middleware::from_fn(render::run_to_end))
        .route("/healthz", get(healthz))
        .route("/admin/directory/people.csv", get(export::people_csv))
        .route("/datasets/{environment}/lerobot.tar", get(export::dataset_tar))
        .nest("/v1", crate::api::router())
        .route("/ws", get(crate::ring::ws_handler))
        .route("/relay/{session_id}", get(crate::relay::relay_handler))
        .route("/relay/{session_id}/watch", get(crate::relay::watch_handler))
        .merge(test_orgs::routes(&state))
        .layer(axum::middleware::from_fn_with_state(state.origins.clone(), origin::check_origin))
        .layer(axum::middleware::from_fn_with_state(state.trusted_proxies.clone(), client::record))
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, REQUEST_TIMEOUT))
        .layer(TraceLayer::new_for_http());
    headers::with_security_headers(router).with_state(state)
}

/// Liveness and readiness in one: the process answers and the database
/// does a round trip.
async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let database = state.sessions.backend_name();
    match state.sessions.ping().await {
        Ok(()) => (StatusCode::OK, Json(json!({ "status": "ok", "database": database }))),
        Err(e) => {
            tracing::error!(error = %e, "health check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "status": "unavailable", "database": database, "error": "database unreachable" })),
            )
        }
    }
}
