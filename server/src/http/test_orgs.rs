//! `POST /test/orgs`: a fresh copy of the demo orgs for one browser test
//! (`services::TestOrgs`). The route exists only when the server was
//! started with `CLUTCHCALL_TEST_ORGS=1` on a loopback address.

use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use axum::Router;
use serde_json::json;

/// The route when test orgs are on; nothing otherwise (a 404, as for any
/// unknown path).
pub fn routes(state: &AppState) -> Router<AppState> {
    match state.test_orgs {
        Some(_) => Router::new().route("/test/orgs", post(create)),
        None => Router::new(),
    }
}

async fn create(State(state): State<AppState>) -> Response {
    let Some(orgs) = state.test_orgs.as_ref() else { return StatusCode::NOT_FOUND.into_response() };
    match orgs.create().await {
        Ok(copy) => (StatusCode::CREATED, Json(copy)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "test orgs not created");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": "database unavailable" }))).into_response()
        }
    }
}
