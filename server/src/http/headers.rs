//! Headers every answer carries (issue "Hardening II", finding 6): no other
//! site may frame a page (the cockpit's E-stop, the directory's rotate and
//! retire buttons under a decoy), scripts come only from this origin, and
//! the browser neither sniffs types nor sends invitation links onwards in
//! the `Referer`.

use axum::http::{header, HeaderName, HeaderValue};
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

/// The page's policy. Scripts: this origin, the hydration and resource
/// scripts Leptos writes inline into the shell, and wasm compilation
/// (`wasm-unsafe-eval`, which allows WebAssembly but not `eval`). Sockets
/// (`/ws`, `/relay`) and fetches go to this origin only; camera frames
/// are shown from `blob:` URLs.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; \
script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; \
style-src 'self' 'unsafe-inline'; \
img-src 'self' data: blob:; \
connect-src 'self'; \
object-src 'none'; \
base-uri 'self'; \
form-action 'self'; \
frame-ancestors 'none'";

/// (name, value) of each header, for the layer and for tests.
pub const SECURITY_HEADERS: [(HeaderName, &str); 4] = [
    (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "same-origin"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
];

/// Adds each header to every answer that does not set it itself.
pub fn with_security_headers<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    SECURITY_HEADERS.into_iter().fold(router, |router, (name, value)| {
        router.layer(SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value)))
    })
}
