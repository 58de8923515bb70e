//! A page's server render always runs to its end (issue "Hardening II",
//! finding 15). Leptos keeps the request's reactive owner in the response
//! body stream and drops it with that stream; a browser that goes away a
//! few milliseconds into a load dropped it mid-render, while Suspense and
//! resource tasks on other workers still read its signals, and each such
//! read panicked ("Tried to access a reactive value that has already been
//! disposed"). Here the handler runs in a task of its own, and another
//! task reads the body to its end whether or not anyone still listens, so
//! the owner is cleaned up by Leptos itself, after the last chunk. An
//! aborted load costs what a finished one does, and no more: the render
//! is bounded by `RENDER_LIMIT`.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::StatusCode;
use std::time::Duration;
use tokio::sync::mpsc;

/// Longest a render may take once its client has gone.
const RENDER_LIMIT: Duration = Duration::from_secs(60);
/// Chunks read ahead of a slow client.
const CHUNKS_AHEAD: usize = 8;

/// Whether the request renders a page: a GET that is not a server function
/// (`/api/`) nor the wasm, scripts and styles (`/pkg/`). (The API, the
/// sockets and `/healthz` are routed outside the layers that ask.)
pub fn renders_page(request: &Request) -> bool {
    let path = request.uri().path();
    request.method() == http::Method::GET && !path.starts_with("/api/") && !path.starts_with("/pkg/")
}

pub async fn run_to_end(request: Request, next: Next) -> Response {
    if !renders_page(&request) {
        return next.run(request).await;
    }
    let response = match tokio::spawn(next.run(request)).await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(error = %e, "a page render failed");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let (parts, body) = response.into_parts();
    let (chunks, received) = mpsc::channel::<Result<Bytes, axum::Error>>(CHUNKS_AHEAD);
    tokio::spawn(async move {
        let mut body = body.into_data_stream();
        let mut listening = true;
        let drained = tokio::time::timeout(RENDER_LIMIT, async {
            while let Some(chunk) = body.next().await {
                if listening && chunks.send(chunk).await.is_err() {
                    // The browser went away: keep reading, send nothing.
                    listening = false;
                }
            }
        });
        if drained.await.is_err() {
            tracing::warn!("a page render outlived its limit after its client left");
        }
    });
    let stream = futures::stream::unfold(received, |mut received| async move { received.recv().await.map(|chunk| (chunk, received)) });
    Response::from_parts(parts, Body::from_stream(stream))
}
