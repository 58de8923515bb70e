//! A page's server render always runs to its end (issue "Hardening II",
//! finding 15). Leptos keeps the request's reactive owner in the response
//! body stream and drops it with that stream; a browser that goes away a
//! few milliseconds into a load dropped it mid-render, while Suspense and
//! resource tasks on other workers still read its signals, and each such
//! read panicked ("Tried to access a reactive value that has already been
//! disposed"). Here one task runs the handler and reads its body to the
//! end whether or not anyone still listens, so the owner is cleaned up by
//! Leptos itself, after the last chunk; the connection only receives the
//! head and the chunks. An aborted load costs what a finished one does.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::StatusCode;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Longest a page may take to render and send in all; past it the body is
/// dropped (a client reading a page this slowly is not reading it).
const RENDER_LIMIT: Duration = Duration::from_secs(120);
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
    let (head, headed) = oneshot::channel::<http::response::Parts>();
    let (chunks, received) = mpsc::channel::<Result<Bytes, axum::Error>>(CHUNKS_AHEAD);
    tokio::spawn(async move {
        let render = async {
            let (parts, body) = next.run(request).await.into_parts();
            // Nobody waiting for the head: the body is still read to its end.
            let mut listening = head.send(parts).is_ok();
            let mut body = body.into_data_stream();
            while let Some(chunk) = body.next().await {
                if listening && chunks.send(chunk).await.is_err() {
                    listening = false;
                }
            }
        };
        if tokio::time::timeout(RENDER_LIMIT, render).await.is_err() {
            tracing::warn!("a page took longer than {RENDER_LIMIT:?} to render and send");
        }
    });
    let Ok(parts) = headed.await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let stream = futures::stream::unfold(received, |mut received| async move { received.recv().await.map(|chunk| (chunk, received)) });
    Response::from_parts(parts, Body::from_stream(stream))
}
