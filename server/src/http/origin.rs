//! Cross-site request forgery stops here: a browser always says which page
//! sent a request (`Origin`), so a state-changing request that another site
//! sent, or a WebSocket it opened with the person's cookie, is refused.
//!
//! - `/ws`: `Origin` must be one of ours; missing is refused too (every
//!   browser sends it on a WebSocket upgrade).
//! - `/api/*` (server functions) other than GET/HEAD: `Origin` must be one
//!   of ours, or, with no `Origin`, `Sec-Fetch-Site: same-origin`.
//! - `/v1/*`: edge agents send no `Origin`; a foreign one is refused.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// The origins pages of this server are served from.
#[derive(Clone, Debug)]
pub struct PublicOrigins(Arc<Vec<String>>);

impl PublicOrigins {
    /// `configured` (`CLUTCHCALL_PUBLIC_ORIGIN`), else `http://` + the bound
    /// address, and on loopback also `http://localhost:<port>`.
    pub fn new(configured: Option<&str>, bound: SocketAddr) -> PublicOrigins {
        let origins = match configured {
            Some(origin) => vec![origin.trim_end_matches('/').to_ascii_lowercase()],
            None if bound.ip().is_loopback() => {
                vec![format!("http://{bound}"), format!("http://localhost:{}", bound.port())]
            }
            None => vec![format!("http://{bound}")],
        };
        PublicOrigins(Arc::new(origins))
    }

    /// The first (canonical) origin.
    pub fn primary(&self) -> &str {
        &self.0[0]
    }

    pub fn allows(&self, origin: &str) -> bool {
        self.0.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }
}

/// Whether the request may go on, by the rules above.
pub fn allowed(origins: &PublicOrigins, method: &Method, path: &str, headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let same_site_fetch = headers.get("sec-fetch-site").is_some_and(|v| v == "same-origin");
    if path == "/ws" {
        origin.is_some_and(|o| origins.allows(o))
    } else if path.starts_with("/api/") && !matches!(*method, Method::GET | Method::HEAD) {
        match origin {
            Some(o) => origins.allows(o),
            None => same_site_fetch,
        }
    } else if path.starts_with("/v1/") || path.starts_with("/relay/") {
        // Edge agents send no Origin; a browser always does on a socket.
        origin.is_none_or(|o| origins.allows(o))
    } else {
        true
    }
}

pub async fn check_origin(State(origins): State<PublicOrigins>, request: Request, next: Next) -> Response {
    if allowed(&origins, request.method(), request.uri().path(), request.headers()) {
        return next.run(request).await;
    }
    tracing::info!(
        path = request.uri().path(),
        origin = ?request.headers().get(header::ORIGIN),
        "cross-site request refused"
    );
    let message = "This request did not come from a ClutchCall page (Origin check).";
    if request.uri().path().starts_with("/v1/") {
        return crate::api::error::ApiError::Forbidden(message.into()).into_response();
    }
    (StatusCode::FORBIDDEN, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (header::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn only_our_pages_change_state_or_open_sockets() {
        let ours = PublicOrigins::new(None, "127.0.0.1:3000".parse().unwrap());
        let (post, get) = (Method::POST, Method::GET);
        let us = headers(&[("origin", "http://127.0.0.1:3000")]);
        let localhost = headers(&[("origin", "http://localhost:3000")]);
        let evil = headers(&[("origin", "http://evil.example")]);
        let none = HeaderMap::new();
        let fetch_same = headers(&[("sec-fetch-site", "same-origin")]);
        assert!(allowed(&ours, &get, "/ws", &us) && allowed(&ours, &get, "/ws", &localhost));
        assert!(!allowed(&ours, &get, "/ws", &evil) && !allowed(&ours, &get, "/ws", &none));
        assert!(allowed(&ours, &post, "/api/sign_in", &us) && allowed(&ours, &post, "/api/sign_in", &fetch_same));
        assert!(!allowed(&ours, &post, "/api/sign_in", &evil) && !allowed(&ours, &post, "/api/sign_in", &none));
        assert!(allowed(&ours, &post, "/v1/sessions", &none), "edge agents send no Origin");
        assert!(!allowed(&ours, &post, "/v1/sessions", &evil));
        assert!(allowed(&ours, &get, "/signin", &evil), "pages may be linked from anywhere");
    }

    #[test]
    fn a_configured_origin_is_the_only_one() {
        let ours = PublicOrigins::new(Some("https://ops.example.com/"), "0.0.0.0:443".parse().unwrap());
        assert_eq!(ours.primary(), "https://ops.example.com");
        assert!(ours.allows("https://ops.example.com") && !ours.allows("http://ops.example.com"));
    }
}
