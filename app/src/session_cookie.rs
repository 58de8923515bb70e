//! The sign-in cookie: its name, how it is set and cleared, and how a
//! request's token is read. One place, used by the server functions and by
//! the server's principal extractor alike.

use cookie::{Cookie, SameSite};

/// The cookie's name over plain HTTP (development, loopback demos).
pub const PLAIN_NAME: &str = "cc_session";
/// Its name behind HTTPS: the `__Host-` prefix makes the browser refuse it
/// unless it is `Secure`, host-only and `Path=/`, so a sibling subdomain
/// cannot plant one (cookie tossing).
pub const HOST_NAME: &str = "__Host-cc_session";
/// Cookies of the same name looked at in one request, at most.
const MAX_CANDIDATES: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionCookie {
    /// Behind HTTPS: `Secure` and the `__Host-` name.
    pub secure: bool,
}

impl SessionCookie {
    pub fn name(self) -> &'static str {
        if self.secure {
            HOST_NAME
        } else {
            PLAIN_NAME
        }
    }

    /// `Set-Cookie` value storing `token` for `max_age_s` seconds.
    pub fn set(self, token: &str, max_age_s: i64) -> String {
        self.build(token.to_string(), cookie::time::Duration::seconds(max_age_s))
    }

    /// `Set-Cookie` value removing it.
    pub fn clear(self) -> String {
        self.build(String::new(), cookie::time::Duration::ZERO)
    }

    fn build(self, value: String, max_age: cookie::time::Duration) -> String {
        Cookie::build((self.name(), value))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .secure(self.secure)
            .max_age(max_age)
            .build()
            .to_string()
    }

    /// Every value the request's `Cookie` headers carry under this name.
    /// Several may share a name (one planted by another site of the same
    /// domain): the caller takes the first that is a live sign-in.
    pub fn tokens(self, headers: &http::HeaderMap) -> Vec<String> {
        headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .filter(|c| c.name() == self.name() && !c.value().is_empty())
            .map(|c| c.value().to_string())
            .take(MAX_CANDIDATES)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for v in values {
            map.append(http::header::COOKIE, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn behind_https_the_cookie_is_host_prefixed_and_secure() {
        let set = SessionCookie { secure: true }.set("tok", 60);
        assert!(set.starts_with("__Host-cc_session=tok"), "{set}");
        for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=60"] {
            assert!(set.contains(part), "{set} lacks {part}");
        }
        assert!(!set.contains("Domain"), "host-only");
        let plain = SessionCookie { secure: false }.set("tok", 60);
        assert!(plain.starts_with("cc_session=tok") && !plain.contains("Secure"), "{plain}");
        assert!(SessionCookie { secure: false }.clear().contains("Max-Age=0"));
    }

    #[test]
    fn every_cookie_of_the_name_is_a_candidate_and_others_are_ignored() {
        let plain = SessionCookie { secure: false };
        let h = headers(&["theme=dark; cc_session=planted", "cc_session=mine; x=1"]);
        assert_eq!(plain.tokens(&h), vec!["planted".to_string(), "mine".to_string()]);
        let secure = SessionCookie { secure: true };
        assert!(secure.tokens(&h).is_empty(), "behind HTTPS only the __Host- cookie counts");
        assert_eq!(secure.tokens(&headers(&["cc_session=a; __Host-cc_session=b"])), vec!["b".to_string()]);
        assert!(plain.tokens(&headers(&["cc_session="])).is_empty());
    }
}
