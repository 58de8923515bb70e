//! Integrations: org API keys that read the event log (`/v1/events`) and
//! webhook endpoints that get it pushed, as admins see and set them on
//! `/admin/integrations`, with the rules of both as pure functions.

use serde::{Deserialize, Serialize};

/// An API key's prefix: it tells a key from a robot token at a glance
/// (and to secret scanners).
pub const API_KEY_PREFIX: &str = "cck_";
/// The one scope there is today.
pub const SCOPE_EVENTS_READ: &str = "events:read";
/// A webhook endpoint failing this long is disabled (and admins told).
pub const DISABLE_AFTER_MS: i64 = 24 * 60 * 60 * 1000;
/// A receiver refuses a signature older than this (replay window).
pub const SIGNATURE_TOLERANCE_S: i64 = 5 * 60;
/// The first retry's wait in service (`CLUTCHCALL_WEBHOOK_RETRY_MS`).
pub const FIRST_RETRY_MS: i64 = 5_000;
/// The longest endpoint URL and key name accepted.
pub const MAX_URL_CHARS: usize = 2048;
pub const MAX_NAME_CHARS: usize = 64;
/// Endpoints and live keys one org may hold.
pub const MAX_WEBHOOKS: usize = 20;
pub const MAX_KEYS: usize = 50;

/// An API key as the screen lists it (never the key itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    /// `cck_…` and the key's last four characters.
    pub hint: String,
    pub scopes: Vec<String>,
    pub created_at: String,
    pub created_by: Option<String>,
    pub revoked_at: Option<String>,
}

/// A key just created: the only time the key is shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewApiKey {
    pub id: String,
    pub key: String,
}

/// Where an endpoint's deliveries stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookState {
    /// Deliveries succeed (or none was due yet).
    Healthy,
    /// The last delivery failed; it is retried.
    Failing,
    /// Failing for 24 h: no longer delivered to until enabled again.
    Disabled,
}

/// A webhook endpoint as the screen lists it (never its secret).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    /// Empty: every type.
    pub types: Vec<String>,
    pub state: WebhookState,
    pub created_at: String,
    /// The last event id delivered (or passed over as not wanted).
    pub delivered_id: i64,
    pub failing_since: Option<String>,
    pub disabled_reason: Option<String>,
    /// The most recent attempts, newest first.
    pub deliveries: Vec<DeliveryView>,
}

/// One delivery attempt, as the delivery log shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    pub event_id: i64,
    pub kind: String,
    pub attempt: i64,
    pub at: String,
    /// The receiver's HTTP status; `None` when no answer came.
    pub status: Option<u16>,
    pub latency_ms: i64,
    pub error: Option<String>,
    /// Sent again by an admin (not part of the ordered stream).
    pub resend: bool,
}

/// A webhook just added: the only time its signing secret is shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewWebhook {
    pub id: String,
    pub secret: String,
}

/// Everything `/admin/integrations` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Integrations {
    pub keys: Vec<ApiKeyView>,
    pub webhooks: Vec<WebhookView>,
    /// Every event type, for the endpoint form's choices.
    pub event_types: Vec<String>,
    /// The org's newest event id (0: none yet).
    pub last_event_id: i64,
}

/// Whether a delivery answered with `status` succeeded: any 2xx.
pub fn delivered(status: u16) -> bool {
    (200..300).contains(&status)
}

/// How long to wait before attempt `attempt + 1` after `attempt` failed
/// (1-based): `first_ms` (5 s in service) doubling to at most an hour,
/// spread by `jitter` in [0, 1) over ±20 % so endpoints that failed
/// together do not retry together.
pub fn retry_after_ms(attempt: u32, jitter: f64, first_ms: i64) -> i64 {
    let base = first_ms.max(1).saturating_mul(1i64 << attempt.saturating_sub(1).min(20)).min(60 * 60 * 1000);
    let spread = (jitter.clamp(0.0, 1.0) * 0.4 - 0.2) * base as f64;
    (base as f64 + spread).round() as i64
}

/// Whether an endpoint failing since `failing_since` is to be disabled now.
pub fn to_disable(failing_since: Option<i64>, now_ms: i64) -> bool {
    failing_since.is_some_and(|since| now_ms - since >= DISABLE_AFTER_MS)
}

/// What is wrong with an endpoint URL an admin typed, in a sentence. The
/// address its host resolves to is the server's to check (public only).
pub fn url_problem(url: &str) -> Option<String> {
    let url = url.trim();
    if url.is_empty() {
        return Some("Enter the endpoint's URL.".into());
    }
    if url.chars().count() > MAX_URL_CHARS {
        return Some(format!("The URL is longer than {MAX_URL_CHARS} characters."));
    }
    let rest = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("http") => rest,
        _ => return Some("The URL must start with https:// (or http://).".into()),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Some("The URL must not carry a user name or password.".into());
    }
    // `[2001:db8::1]:8443` or `host:8080`.
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    if host.is_empty() || host.chars().any(char::is_whitespace) {
        return Some("The URL has no host.".into());
    }
    None
}

/// What is wrong with a key's name, in a sentence.
pub fn name_problem(name: &str) -> Option<String> {
    let name = name.trim();
    if name.is_empty() {
        return Some("Name the key (what it is for).".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!("The name is longer than {MAX_NAME_CHARS} characters."));
    }
    None
}

/// The hint a key is listed by: its prefix and last four characters.
pub fn hint(key: &str) -> String {
    let tail: String = key.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    format!("{API_KEY_PREFIX}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2xx_is_delivered_and_anything_else_is_retried() {
        assert!(delivered(200) && delivered(204));
        assert!(!delivered(301) && !delivered(404) && !delivered(500));
    }

    #[test]
    fn retries_double_from_five_seconds_to_an_hour_spread_by_a_fifth() {
        assert_eq!(retry_after_ms(1, 0.5, FIRST_RETRY_MS), 5_000);
        assert_eq!(retry_after_ms(2, 0.5, FIRST_RETRY_MS), 10_000);
        assert_eq!(retry_after_ms(3, 0.5, FIRST_RETRY_MS), 20_000);
        assert_eq!(retry_after_ms(30, 0.5, FIRST_RETRY_MS), 3_600_000, "capped");
        assert_eq!(retry_after_ms(1, 0.0, FIRST_RETRY_MS), 4_000);
        assert_eq!(retry_after_ms(1, 1.0, FIRST_RETRY_MS), 6_000);
        // Attempts over 24 h: the schedule keeps retrying until disabled.
        let total: i64 = (1..=40).map(|a| retry_after_ms(a, 0.5, FIRST_RETRY_MS)).sum();
        assert!(total > DISABLE_AFTER_MS, "{total}");
    }

    #[test]
    fn an_endpoint_failing_for_a_day_is_disabled() {
        assert!(!to_disable(None, 10 * DISABLE_AFTER_MS));
        assert!(!to_disable(Some(0), DISABLE_AFTER_MS - 1));
        assert!(to_disable(Some(0), DISABLE_AFTER_MS));
    }

    #[test]
    fn an_endpoint_url_is_http_or_https_with_a_host_and_no_credentials() {
        assert_eq!(url_problem("https://hooks.example.com/clutchcall"), None);
        assert_eq!(url_problem("http://127.0.0.1:8080/hook"), None);
        assert_eq!(url_problem("https://[2001:db8::1]:8443/x"), None);
        assert!(url_problem("").is_some());
        assert!(url_problem("ftp://example.com").is_some());
        assert!(url_problem("file:///etc/passwd").is_some());
        assert!(url_problem("https://").is_some());
        assert!(url_problem("https://user:pw@example.com/").is_some());
        assert!(url_problem(&format!("https://e.com/{}", "a".repeat(MAX_URL_CHARS))).is_some());
    }

    #[test]
    fn a_key_is_named_and_listed_by_its_hint() {
        assert!(name_problem("  ").is_some());
        assert!(name_problem(&"n".repeat(MAX_NAME_CHARS + 1)).is_some());
        assert_eq!(name_problem("WMS"), None);
        assert_eq!(hint("cck_abcdefgh"), "cck_…efgh");
    }
}
