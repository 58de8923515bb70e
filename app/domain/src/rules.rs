//! Pure domain rules, written once and used by the server and the browser.

use crate::models::RegistryStatus;

/// Without an edge-agent heartbeat for this long a robot reads `offline`.
pub const ROBOT_HEARTBEAT_TIMEOUT_MS: i64 = 15_000;

/// How often an edge agent heartbeats (within the timeout above).
pub const ROBOT_HEARTBEAT_EVERY_MS: i64 = 10_000;
const _: () = assert!(ROBOT_HEARTBEAT_EVERY_MS < ROBOT_HEARTBEAT_TIMEOUT_MS, "a robot that heartbeats reads online");

/// The middle dot that separates a certification's skill from its tier.
const MIDDOT: char = '\u{00B7}';

/// Why a `reqCert` (or a certification) cannot yield a skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillError {
    /// Nothing but separators.
    Empty,
}

/// The skill the ACD matches on: the first token of a certification string,
/// split on a middle dot or any whitespace (seed 000, rule A02).
/// `pick-place · tier-2` → `pick-place`; `inspection\ttier-3` → `inspection`.
pub fn skill_of(cert: &str) -> Result<&str, SkillError> {
    cert.split(|c: char| c == MIDDOT || c.is_whitespace())
        .find(|token| !token.is_empty())
        .ok_or(SkillError::Empty)
}

/// The set of skills an operator holds: every certification's skill, sorted,
/// each once. Certifications that yield no skill are ignored.
pub fn skills_of<'a>(certs: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut skills: Vec<String> = certs
        .into_iter()
        .filter_map(|c| skill_of(c).ok())
        .map(str::to_owned)
        .collect();
    skills.sort();
    skills.dedup();
    skills
}

/// Registry status from the last heartbeat: `online` while heartbeats keep
/// arriving, `offline` once none came for `ROBOT_HEARTBEAT_TIMEOUT_MS`.
pub fn registry_status(last_heartbeat_ms: Option<i64>, now_ms: i64) -> RegistryStatus {
    match last_heartbeat_ms {
        Some(at) if now_ms - at <= ROBOT_HEARTBEAT_TIMEOUT_MS => RegistryStatus::Online,
        _ => RegistryStatus::Offline,
    }
}

/// Longest robot fields, in characters: ids and PoPs are codes, the rest
/// are names a person reads in a table cell.
pub const MAX_ROBOT_ID_CHARS: usize = 64;
pub const MAX_ROBOT_MODEL_CHARS: usize = 64;
pub const MAX_ROBOT_SITE_CHARS: usize = 96;
pub const MAX_POP_CHARS: usize = 32;
pub const MAX_REQ_CERT_CHARS: usize = 96;

/// What is wrong with a new robot's fields, as a sentence naming the field
/// (`None`: all fine). `known_pops` are the PoPs of the link-health table.
pub fn robot_fields_problem(id: &str, model: &str, site: &str, pop: &str, req_cert: &str, known_pops: &[String]) -> Option<String> {
    let valid_id = !id.is_empty()
        && id.len() <= MAX_ROBOT_ID_CHARS
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid_id {
        return Some(format!("id must be 1–{MAX_ROBOT_ID_CHARS} lowercase letters, digits or dashes"));
    }
    for (name, value, max) in [
        ("model", model, MAX_ROBOT_MODEL_CHARS),
        ("site", site, MAX_ROBOT_SITE_CHARS),
        ("pop", pop, MAX_POP_CHARS),
        ("reqCert", req_cert, MAX_REQ_CERT_CHARS),
    ] {
        let value = value.trim();
        if value.is_empty() {
            return Some(format!("{name} must not be empty"));
        }
        if value.chars().count() > max || value.chars().any(char::is_control) {
            return Some(format!("{name} must be at most {max} characters, with no control characters"));
        }
    }
    if !known_pops.iter().any(|p| p == pop.trim()) {
        return Some(format!("pop must be one of the link-health table's PoPs: {}", known_pops.join(", ")));
    }
    if skill_of(req_cert).is_err() {
        return Some("reqCert must name a skill, e.g. `pick-place · tier-2`".into());
    }
    None
}

/// A value for a URL query string: unreserved characters kept, every other
/// byte percent-encoded.
pub fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The longest email a sign-in or an invitation accepts (RFC 5321's path limit).
pub const MAX_EMAIL_CHARS: usize = 254;
/// A reason given by a person (a stop clear): one readable paragraph.
pub const MAX_REASON_CHARS: usize = 500;

/// `next` after sign-in, if it is a path on this site: it must start with a
/// single `/`, and contain no backslash (browsers read `/\evil.example` as
/// `//evil.example`), no control character and no scheme.
pub fn local_redirect(next: &str) -> Option<&str> {
    let rest = next.strip_prefix('/')?;
    let safe = !rest.starts_with('/')
        && !next.contains('\\')
        && !next.chars().any(char::is_control)
        && !next.split(['?', '#']).next().unwrap_or_default().contains(':');
    safe.then_some(next)
}

/// Emails compare case-insensitively and without surrounding spaces.
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

/// How long something has been so (seed 003, rule R07): seconds below a
/// minute, minutes below an hour, then hours; missing or zero → `—`.
pub fn format_age(since_ms: Option<i64>, now_ms: i64) -> String {
    match since_ms {
        None | Some(0) => "—".to_string(),
        Some(since) => {
            let secs = ((now_ms - since).max(0)) / 1000;
            if secs < 60 {
                format!("{secs}s")
            } else if secs < 3600 {
                format!("{}m", secs / 60)
            } else {
                format!("{}h", secs / 3600)
            }
        }
    }
}

/// `value` with `places` decimals, as `format!("{value:.places$}")` writes
/// it, except that halves round away from zero and there is no `-0.0`.
/// Written out so that the browser build carries no fixed-precision float
/// formatter (issue "wallboard", Budget): use it for every decimal shown.
pub fn fixed(value: f64, places: u32) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    let scale = 10_i64.pow(places.min(6));
    let scaled = (value.abs() * scale as f64).round() as i64;
    let sign = if value < 0.0 && scaled != 0 { "-" } else { "" };
    match places {
        0 => format!("{sign}{scaled}"),
        _ => format!("{sign}{}.{:0width$}", scaled / scale, scaled % scale, width = places.min(6) as usize),
    }
}

/// A duration to the second, `1h 02m 03s` / `2m 03s` / `45s`.
pub fn format_duration(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    match (secs / 3600, secs / 60 % 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, s) => format!("{h}h {m:02}m {s:02}s"),
    }
}

/// `HH:MM:SS UTC` of a Unix ms timestamp, for "as of" lines on live screens.
pub fn utc_clock(ms: i64) -> String {
    let secs = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02} UTC", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Case-insensitive substring match of `query` against any of `fields`
/// joined; an empty query matches everything.
pub fn matches_query(query: &str, fields: &[&str]) -> bool {
    let query = query.trim().to_lowercase();
    query.is_empty() || fields.join(" ").to_lowercase().contains(&query)
}

/// `s` percent-encoded, every byte but the URL-unreserved ones (for a path
/// segment or a `data:` URL).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for byte in s.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// RFC 3339 UTC with milliseconds (`2026-11-29T16:34:40.123Z`), the API's
/// timestamp format.
pub fn rfc3339(ms: i64) -> String {
    use time::macros::format_description;
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"))
        .unwrap_or_default()
}

/// Parses an RFC 3339 time (any offset, fraction optional) to Unix ms.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let at = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

/// serde for Unix-ms fields that travel as RFC 3339 strings.
pub mod rfc3339_ms {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::rfc3339(*ms))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_rfc3339(&text).ok_or_else(|| D::Error::custom(format!("not an RFC 3339 UTC time: {text:?}")))
    }

    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(ms: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
            match ms {
                Some(ms) => super::serialize(ms, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
            let text: Option<String> = Option::deserialize(d)?;
            text.map(|t| super::super::parse_rfc3339(&t).ok_or_else(|| serde::de::Error::custom("not an RFC 3339 UTC time")))
                .transpose()
        }
    }
}

/// A new password is at least this long.
pub const MIN_PASSWORD_CHARS: usize = 12;
pub const MAX_PASSWORD_CHARS: usize = 256;

/// What is wrong with a new password and its confirmation, if anything.
pub fn new_password_problem(new: &str, confirm: &str) -> Option<String> {
    let length = new.chars().count();
    if length < MIN_PASSWORD_CHARS {
        return Some(format!("The new password must be at least {MIN_PASSWORD_CHARS} characters."));
    }
    if length > MAX_PASSWORD_CHARS {
        return Some(format!("The new password must be at most {MAX_PASSWORD_CHARS} characters."));
    }
    if new != confirm {
        return Some("The two new passwords differ.".into());
    }
    None
}

/// The longest wait between tries of the ring link, the watch socket and a
/// chunk's fetch.
pub const MAX_RETRY_WAIT_S: u32 = 30;

/// The wait before the next try of something that doubles its wait after
/// each failure, up to `cap_s` (a socket reconnecting, a chunk fetched
/// again): from 1 s, 1, 2, 4, 8, … `cap_s`.
pub fn doubled_wait_s(wait_s: u32, cap_s: u32) -> u32 {
    wait_s.saturating_mul(2).clamp(1, cap_s)
}

/// Names as a sentence says them: "Dana", "Dana and Sam", "Ana, Dana and Sam".
pub fn name_list(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_listed_as_a_sentence_says_them() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(name_list(&n(&[])), "");
        assert_eq!(name_list(&n(&["Dana"])), "Dana");
        assert_eq!(name_list(&n(&["Dana", "Sam"])), "Dana and Sam");
        assert_eq!(name_list(&n(&["Ana", "Dana", "Sam"])), "Ana, Dana and Sam");
    }

    #[test]
    fn fixed_decimals_read_as_the_float_formatter_writes_them() {
        for (value, places) in [(0.0, 1), (12.34, 1), (8.05, 2), (123.456, 0), (-3.21, 2), (0.5, 3), (99.99, 1), (1e9 + 0.25, 2), (-7.0, 0)] {
            assert_eq!(super::fixed(value, places), format!("{value:.*}", places as usize), "{value} to {places}");
        }
        // Not a tie-to-even and never a negative zero.
        assert_eq!(super::fixed(0.25, 1), "0.3");
        assert_eq!(super::fixed(-0.04, 1), "0.0");
        assert_eq!(super::fixed(f64::NAN, 1), "—");
    }

    use super::*;

    #[test]
    fn a_new_password_is_long_enough_and_typed_twice_the_same() {
        assert!(new_password_problem("short", "short").is_some());
        assert!(new_password_problem("long enough pass", "long enough pasS").is_some());
        assert_eq!(new_password_problem("long enough pass", "long enough pass"), None);
        assert!(new_password_problem(&"x".repeat(MAX_PASSWORD_CHARS + 1), &"x".repeat(MAX_PASSWORD_CHARS + 1)).is_some());
    }

    #[test]
    fn durations_read_to_the_second() {
        assert_eq!(format_duration(45_900), "45s");
        assert_eq!(format_duration(123_000), "2m 03s");
        assert_eq!(format_duration(3_723_000), "1h 02m 03s");
        assert_eq!(format_duration(-5), "0s");
    }

    #[test]
    fn robot_fields_are_bounded_and_the_pop_must_be_known() {
        let pops = vec!["us-east".to_string(), "uk-london".to_string()];
        let ok = |id: &str, model: &str, pop: &str| robot_fields_problem(id, model, "Leeds Hub", pop, "pick-place · tier-1", &pops);
        assert_eq!(ok("uk-pick-09", "UR10e", "uk-london"), None);
        assert!(ok("UK_PICK", "UR10e", "uk-london").unwrap().starts_with("id"));
        assert!(ok("uk-pick-09", &"x".repeat(65), "uk-london").unwrap().starts_with("model"));
        assert!(ok("uk-pick-09", "UR\u{7}10e", "uk-london").unwrap().starts_with("model"));
        assert!(ok("uk-pick-09", "UR10e", "mars-1").unwrap().starts_with("pop must be one of"));
        assert!(robot_fields_problem("a", "m", "s", "us-east", "  ", &pops).unwrap().starts_with("reqCert"));
    }

    #[test]
    fn a02_skill_is_first_token_split_on_middot_or_whitespace() {
        assert_eq!(skill_of("pick-place · tier-2"), Ok("pick-place"));
        assert_eq!(skill_of("pick-place·tier-2"), Ok("pick-place"));
        assert_eq!(skill_of("inspection tier-3"), Ok("inspection"));
        assert_eq!(skill_of("inspection\ttier-3"), Ok("inspection"));
        assert_eq!(skill_of("  welding  ·  tier-1 "), Ok("welding"));
        assert_eq!(skill_of("palletize"), Ok("palletize"));
        // Hyphens and dots are part of a skill name, not separators.
        assert_eq!(skill_of("mobile-manip.v2 · t1"), Ok("mobile-manip.v2"));
    }

    #[test]
    fn a02_empty_req_cert_has_no_skill() {
        assert_eq!(skill_of(""), Err(SkillError::Empty));
        assert_eq!(skill_of("  · \t"), Err(SkillError::Empty));
    }

    #[test]
    fn a08_operator_skills_are_the_set_of_certification_skills() {
        let certs = vec![
            "pick-place · tier-2".to_string(),
            "welding tier-1".to_string(),
            "pick-place · tier-1".to_string(),
            " ".to_string(),
        ];
        assert_eq!(skills_of(&certs), vec!["pick-place", "welding"]);
    }

    #[test]
    fn robot_reads_offline_fifteen_seconds_after_last_heartbeat() {
        assert_eq!(registry_status(None, 1_000_000), RegistryStatus::Offline);
        assert_eq!(registry_status(Some(1_000_000), 1_000_000), RegistryStatus::Online);
        assert_eq!(registry_status(Some(1_000_000), 1_015_000), RegistryStatus::Online);
        assert_eq!(registry_status(Some(1_000_000), 1_015_001), RegistryStatus::Offline);
    }

    #[test]
    fn r07_age_is_seconds_then_minutes_then_hours_and_dash_when_missing() {
        let now = 10_000_000;
        assert_eq!(format_age(None, now), "—");
        assert_eq!(format_age(Some(0), now), "—");
        assert_eq!(format_age(Some(now), now), "0s");
        assert_eq!(format_age(Some(now - 59_999), now), "59s");
        assert_eq!(format_age(Some(now - 60_000), now), "1m");
        assert_eq!(format_age(Some(now - 3_599_000), now), "59m");
        assert_eq!(format_age(Some(now - 3_600_000), now), "1h");
        assert_eq!(format_age(Some(now + 5_000), now), "0s", "a clock ahead never shows a negative age");
    }

    #[test]
    fn utc_clock_formats_time_of_day() {
        assert_eq!(utc_clock(0), "00:00:00 UTC");
        assert_eq!(utc_clock(1_764_430_245_999), "15:30:45 UTC");
    }

    #[test]
    fn query_matches_any_field_case_insensitively() {
        assert!(matches_query("", &["x"]));
        assert!(matches_query("PICK", &["ue-pick-01", "Reno"]));
        assert!(matches_query("reno dc", &["x", "Reno DC-4"]));
        assert!(!matches_query("weld", &["ue-pick-01", "Reno"]));
    }

    #[test]
    fn rfc3339_round_trips_and_matches_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_764_430_245_999), "2025-11-29T15:30:45.999Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z", "leap day");
        for ms in [0, 1, 951_782_400_000, 1_764_430_245_999, 4_102_444_800_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("2025-11-29T15:30:45Z"), Some(1_764_430_245_000));
        assert_eq!(parse_rfc3339("2025-11-29T15:30:45.5Z"), Some(1_764_430_245_500));
        assert_eq!(parse_rfc3339("2025-11-29T15:30:45"), None, "a time without its offset is ambiguous");
        assert_eq!(parse_rfc3339("2025-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(parse_rfc3339("2025-11-29T16:30:45+01:00"), Some(1_764_430_245_000), "offsets are understood");
    }

    #[test]
    fn open_redirect_sign_in_next_stays_on_this_site() {
        assert_eq!(local_redirect("/operator"), Some("/operator"));
        assert_eq!(local_redirect("/ops/roster?state=ready#top"), Some("/ops/roster?state=ready#top"));
        for attack in ["//evil.example/x", "/\\evil.example", "/\\/evil.example", "https://evil.example", "evil.example", "/\t/evil.example", "/javascript:alert(1)", ""] {
            assert_eq!(local_redirect(attack), None, "{attack:?}");
        }
    }

    #[test]
    fn emails_compare_case_insensitively() {
        assert_eq!(normalize_email("  Dana@Northstar.Example "), "dana@northstar.example");
    }

    #[test]
    fn a_doubled_wait_grows_from_one_second_to_its_cap_and_stays() {
        let waits: Vec<u32> = std::iter::successors(Some(1), |w| Some(doubled_wait_s(*w, 30))).take(7).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(doubled_wait_s(0, 30), 1);
        assert_eq!(doubled_wait_s(u32::MAX, 15), 15);
    }
}
