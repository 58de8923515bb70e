//! `POST /test/orgs`: a fresh copy of the demo orgs for one browser test
//! (`services::TestOrgs`). The route exists only when the server was
//! started with `CLUTCHCALL_TEST_ORGS=1` on a loopback address.

use crate::state::AppState;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use axum::Router;
use serde_json::json;
use std::net::SocketAddr;

/// The route when test orgs are on; nothing otherwise (a 404, as for any
/// unknown path).
pub fn routes(state: &AppState) -> Router<AppState> {
    match state.test_orgs {
        Some(_) => Router::new().route("/test/orgs", post(create)),
        None => Router::new(),
    }
}

async fn create(State(state): State<AppState>, ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap) -> Response {
    let Some(orgs) = state.test_orgs.as_ref() else { return StatusCode::NOT_FOUND.into_response() };
    // Only a test on this machine: not through a proxy that makes a
    // loopback server reachable from elsewhere.
    if !peer.ip().is_loopback() || headers.contains_key("x-forwarded-for") || headers.contains_key("forwarded") {
        return StatusCode::NOT_FOUND.into_response();
    }
    match orgs.create().await {
        Ok(copy) => (StatusCode::CREATED, Json(copy)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "test orgs not created");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": "database unavailable" }))).into_response()
        }
    }
}
