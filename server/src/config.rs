//! Configuration from the environment. Every setting has a default, so a
//! first start with no configuration serves the demo on SQLite.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct Config {
    /// `CLUTCHCALL_ADDR`, else cargo-leptos's `LEPTOS_SITE_ADDR`, else 127.0.0.1:3000.
    pub addr: SocketAddr,
    /// `CLUTCHCALL_DATA_DIR`: where the SQLite file lives. Default `./data`.
    pub data_dir: PathBuf,
    /// `DATABASE_URL`: `postgres://…` for PostgreSQL; unset means SQLite in `data_dir`.
    pub database_url: Option<String>,
    /// `LEPTOS_SITE_ROOT`: the built wasm, JS, CSS and assets. Default `target/site`.
    pub site_root: PathBuf,
    /// `CLUTCHCALL_PUBLIC_ORIGIN`: the origin people open, e.g.
    /// `https://ops.example.com`. Requests that change state and WebSocket
    /// upgrades must come from it. Default `http://` + the bound address.
    pub public_origin: Option<String>,
    /// `CLUTCHCALL_SECURE_COOKIES=1|0` overrides whether the sign-in cookie
    /// is `Secure` (and `__Host-` prefixed); by default it is exactly when
    /// the public origin is `https://`.
    pub secure_cookies: Option<bool>,
    /// `CLUTCHCALL_DEMO`: whether an empty database gets the demo org.
    pub demo: DemoSeed,
    /// `CLUTCHCALL_METRICS_ADDR`: where `/metrics` listens (its figures
    /// span orgs: keep it private). Default `127.0.0.1:9464`; `off` disables.
    pub metrics_addr: Option<SocketAddr>,
    /// `CLUTCHCALL_SIGNIN_PER_MINUTE`: sign-in attempts one client address
    /// may make per minute (any emails). Default 60.
    pub sign_ins_per_address_per_minute: u32,
    /// `CLUTCHCALL_TRUSTED_PROXIES`: CIDR blocks (comma-separated) of
    /// reverse proxies whose `X-Forwarded-For` is believed for sign-in
    /// limits and logs. Default none: the TCP peer is the client.
    pub trusted_proxies: Vec<crate::http::client::Cidr>,
    /// `CLUTCHCALL_RELAY_MAX_FPS` (frames per second per direction of a
    /// session's relay, default 120) and `CLUTCHCALL_RECORDING_MAX_MB`
    /// (one session's recording, default 1024).
    pub relay: crate::relay::RelayLimits,
    /// `CLUTCHCALL_BOOKINGS_PER_ROBOT` (a client's upcoming bookings of
    /// one robot, default 10) and `CLUTCHCALL_BOOKINGS_PER_MONTH` (a
    /// client's bookings starting in one UTC month, default 100).
    pub booking_caps: app::booking::BookingCaps,
    /// How long an offer rings: 30 s (seed 000). Only tests change it.
    pub offer_window_ms: i64,
    /// `CLUTCHCALL_WRAP_UP_S`: wrap-up (`acw`) after a session before the
    /// operator is ready again. Default 60 s.
    pub wrap_up_ms: i64,
    /// Presence lapses this long after a console's last heartbeat: 20 s. Only tests change it.
    pub presence_ttl_ms: i64,
    /// `CLUTCHCALL_REOFFER_COOLDOWN_S`: a decliner or misser is not offered
    /// the same call again for this long (rule D08). Default 60 s.
    pub cooloff_ms: i64,
    /// `CLUTCHCALL_PENDING_TIMEOUT_S`: a call nobody took (ringing or
    /// queued) is cancelled by the platform after this long. Default 15 min.
    pub pending_timeout_ms: i64,
    /// `CLUTCHCALL_ACTIVITY_CHECK_S` (30), `CLUTCHCALL_INACTIVITY_WARNING_S`
    /// (120 s idle) and `CLUTCHCALL_INACTIVITY_STOP_S` (60 s after the
    /// warning): the inactivity chain of ACTIVE sessions (rule L07).
    pub inactivity: app::inactivity::InactivityPolicy,
    /// `CLUTCHCALL_SESSION_MIN`: a session outside any booking is planned
    /// to end this long after it starts (rule L13). Default 30 min.
    pub session_ms: i64,
}

/// `/metrics`'s default port (loopback only).
pub const DEFAULT_METRICS_PORT: u16 = 9464;

/// When the demo org (public password and robot tokens) is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoSeed {
    /// Unset: only when the server listens on a loopback address, so demo
    /// credentials never reach a reachable deployment by accident.
    LoopbackOnly,
    /// `CLUTCHCALL_DEMO=1`: on any empty database.
    Always,
    /// `CLUTCHCALL_DEMO=0`.
    Never,
}

impl DemoSeed {
    pub fn applies(self, addr: SocketAddr) -> bool {
        match self {
            DemoSeed::LoopbackOnly => addr.ip().is_loopback(),
            DemoSeed::Always => true,
            DemoSeed::Never => false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("CLUTCHCALL_PUBLIC_ORIGIN={0:?} must be a scheme and host with no path, e.g. https://ops.example.com")]
    Origin(String),
    #[error("CLUTCHCALL_TRUSTED_PROXIES: {0}")]
    TrustedProxies(String),
    #[error("{name}={value:?} must be 1 or 0")]
    Flag { name: &'static str, value: String },
    #[error("{name}={value:?} is not a valid socket address (e.g. 127.0.0.1:3000)")]
    Addr { name: &'static str, value: String },
    #[error("{name}={value:?} is not a whole number")]
    Number { name: &'static str, value: String },
}

/// A whole number of seconds from the environment, in ms.
fn seconds(value: Option<String>, name: &'static str) -> Result<Option<i64>, ConfigError> {
    value
        .map(|v| v.trim().parse::<u32>().map(|s| i64::from(s) * 1000).map_err(|_| ConfigError::Number { name, value: v.clone() }))
        .transpose()
}

/// `1`/`true` or `0`/`false`.
fn flag(value: Option<String>, name: &'static str) -> Result<Option<bool>, ConfigError> {
    value
        .map(|v| match v.trim() {
            "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            _ => Err(ConfigError::Flag { name, value: v.clone() }),
        })
        .transpose()
}

/// An origin: `http(s)://host[:port]`, nothing after.
fn origin(value: Option<String>) -> Result<Option<String>, ConfigError> {
    value
        .map(|v| {
            let trimmed = v.trim().trim_end_matches('/');
            let rest = trimmed.strip_prefix("https://").or_else(|| trimmed.strip_prefix("http://"));
            match rest {
                Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ']) => Ok(trimmed.to_ascii_lowercase()),
                _ => Err(ConfigError::Origin(v.clone())),
            }
        })
        .transpose()
}

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let (addr_name, addr_value) = match (var("CLUTCHCALL_ADDR"), var("LEPTOS_SITE_ADDR")) {
            (Some(v), _) => ("CLUTCHCALL_ADDR", v),
            (None, Some(v)) => ("LEPTOS_SITE_ADDR", v),
            (None, None) => ("CLUTCHCALL_ADDR", "127.0.0.1:3000".to_string()),
        };
        let addr = addr_value
            .parse()
            .map_err(|_| ConfigError::Addr { name: addr_name, value: addr_value.clone() })?;
        Ok(Config {
            addr,
            data_dir: var("CLUTCHCALL_DATA_DIR").unwrap_or_else(|| "data".into()).into(),
            database_url: var("DATABASE_URL"),
            site_root: var("LEPTOS_SITE_ROOT").unwrap_or_else(|| "target/site".into()).into(),
            public_origin: origin(var("CLUTCHCALL_PUBLIC_ORIGIN"))?,
            metrics_addr: match var("CLUTCHCALL_METRICS_ADDR") {
                Some(v) if v.trim() == "off" => None,
                Some(v) => Some(v.trim().parse().map_err(|_| ConfigError::Addr { name: "CLUTCHCALL_METRICS_ADDR", value: v.clone() })?),
                None => Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_METRICS_PORT))),
            },
            secure_cookies: flag(var("CLUTCHCALL_SECURE_COOKIES"), "CLUTCHCALL_SECURE_COOKIES")?,
            demo: match flag(var("CLUTCHCALL_DEMO"), "CLUTCHCALL_DEMO")? {
                None => DemoSeed::LoopbackOnly,
                Some(true) => DemoSeed::Always,
                Some(false) => DemoSeed::Never,
            },
            sign_ins_per_address_per_minute: var("CLUTCHCALL_SIGNIN_PER_MINUTE")
                .map(|v| v.trim().parse::<u32>().map_err(|_| ConfigError::Number { name: "CLUTCHCALL_SIGNIN_PER_MINUTE", value: v.clone() }))
                .transpose()?
                .unwrap_or(crate::services::throttle::DEFAULT_PER_ADDRESS_PER_MINUTE),
            trusted_proxies: crate::http::client::parse_trusted(&var("CLUTCHCALL_TRUSTED_PROXIES").unwrap_or_default())
                .map_err(ConfigError::TrustedProxies)?,
            relay: {
                let d = crate::relay::RelayLimits::default();
                let number = |name: &'static str| {
                    var(name).map(|v| v.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or(ConfigError::Number { name, value: v.clone() })).transpose()
                };
                crate::relay::RelayLimits {
                    max_fps: number("CLUTCHCALL_RELAY_MAX_FPS")?.map_or(d.max_fps, |n| n.min(u64::from(u32::MAX)) as u32),
                    recording_max_bytes: number("CLUTCHCALL_RECORDING_MAX_MB")?.map_or(d.recording_max_bytes, |mb| mb.saturating_mul(1024 * 1024)),
                }
            },
            booking_caps: {
                let d = app::booking::BookingCaps::default();
                let count = |name: &'static str, default: usize| -> Result<usize, ConfigError> {
                    var(name).map_or(Ok(default), |v| v.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or(ConfigError::Number { name, value: v.clone() }))
                };
                app::booking::BookingCaps { per_robot: count("CLUTCHCALL_BOOKINGS_PER_ROBOT", d.per_robot)?, per_month: count("CLUTCHCALL_BOOKINGS_PER_MONTH", d.per_month)? }
            },
            offer_window_ms: crate::engine::OFFER_WINDOW_MS,
            wrap_up_ms: seconds(var("CLUTCHCALL_WRAP_UP_S"), "CLUTCHCALL_WRAP_UP_S")?.unwrap_or(app::ring::DEFAULT_WRAP_UP_MS),
            presence_ttl_ms: app::ring::PRESENCE_TTL_MS,
            cooloff_ms: seconds(var("CLUTCHCALL_REOFFER_COOLDOWN_S"), "CLUTCHCALL_REOFFER_COOLDOWN_S")?
                .unwrap_or(crate::engine::DEFAULT_COOLOFF_MS),
            pending_timeout_ms: seconds(var("CLUTCHCALL_PENDING_TIMEOUT_S"), "CLUTCHCALL_PENDING_TIMEOUT_S")?
                .unwrap_or(crate::engine::DEFAULT_PENDING_TIMEOUT_MS),
            inactivity: {
                let d = app::inactivity::InactivityPolicy::default();
                app::inactivity::InactivityPolicy {
                    check_ms: seconds(var("CLUTCHCALL_ACTIVITY_CHECK_S"), "CLUTCHCALL_ACTIVITY_CHECK_S")?.unwrap_or(d.check_ms),
                    warning_after_ms: seconds(var("CLUTCHCALL_INACTIVITY_WARNING_S"), "CLUTCHCALL_INACTIVITY_WARNING_S")?.unwrap_or(d.warning_after_ms),
                    stop_after_warning_ms: seconds(var("CLUTCHCALL_INACTIVITY_STOP_S"), "CLUTCHCALL_INACTIVITY_STOP_S")?.unwrap_or(d.stop_after_warning_ms),
                }
            },
            session_ms: seconds(var("CLUTCHCALL_SESSION_MIN"), "CLUTCHCALL_SESSION_MIN")?
                .map_or(app::booking::DEFAULT_SESSION_MIN * 60_000, |s| s * 60),
        })
    }

    /// The production defaults on a free loopback port, for tests and load
    /// tools: `data_dir` for SQLite unless `database_url` names a database.
    pub fn local(data_dir: PathBuf, database_url: Option<String>, site_root: PathBuf) -> Config {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            database_url,
            site_root,
            public_origin: None,
            metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            secure_cookies: None,
            demo: DemoSeed::Always,
            sign_ins_per_address_per_minute: crate::services::throttle::DEFAULT_PER_ADDRESS_PER_MINUTE,
            trusted_proxies: Vec::new(),
            relay: crate::relay::RelayLimits::default(),
            booking_caps: app::booking::BookingCaps::default(),
            offer_window_ms: crate::engine::OFFER_WINDOW_MS,
            wrap_up_ms: app::ring::DEFAULT_WRAP_UP_MS,
            presence_ttl_ms: app::ring::PRESENCE_TTL_MS,
            cooloff_ms: crate::engine::DEFAULT_COOLOFF_MS,
            pending_timeout_ms: crate::engine::DEFAULT_PENDING_TIMEOUT_MS,
            inactivity: app::inactivity::InactivityPolicy::default(),
            session_ms: app::booking::DEFAULT_SESSION_MIN * 60_000,
        }
    }

    /// Whether the sign-in cookie is `Secure`: as configured, else exactly
    /// when the public origin is HTTPS.
    pub fn cookies_secure(&self) -> bool {
        self.secure_cookies.unwrap_or_else(|| self.public_origin.as_deref().is_some_and(|o| o.starts_with("https://")))
    }

    /// The engine's timings.
    pub fn engine_settings(&self) -> crate::engine::Settings {
        crate::engine::Settings {
            offer_window_ms: self.offer_window_ms,
            wrap_up_ms: self.wrap_up_ms,
            presence_ttl_ms: self.presence_ttl_ms,
            cooloff_ms: self.cooloff_ms,
            pending_timeout_ms: self.pending_timeout_ms,
            inactivity: self.inactivity,
            session_ms: self.session_ms,
        }
    }

    /// The database to open: `DATABASE_URL`, or the SQLite file in the data dir.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("clutchcall.db").display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r08_production_defaults_lapse_after_20_s_and_wrap_up_for_60_s() {
        std::env::remove_var("CLUTCHCALL_WRAP_UP_S");
        std::env::remove_var("CLUTCHCALL_REOFFER_COOLDOWN_S");
        std::env::remove_var("CLUTCHCALL_PENDING_TIMEOUT_S");
        let config = Config::from_env().unwrap();
        assert_eq!(config.pending_timeout_ms, 15 * 60_000, "a call nobody takes is cancelled after 15 min");
        assert_eq!(config.cooloff_ms, 60_000, "rule D08: a 60 s cool-off by default");
        assert_eq!(config.presence_ttl_ms, 20_000, "presence lapses 20 s after the last heartbeat");
        assert_eq!(config.wrap_up_ms, 60_000, "wrap-up defaults to 60 s");
        assert_eq!(config.offer_window_ms, 30_000, "offers ring for 30 s");
    }

    #[test]
    fn demo_data_is_seeded_by_default_only_on_loopback() {
        let (loopback, public) = ("127.0.0.1:3000".parse().unwrap(), "0.0.0.0:3000".parse().unwrap());
        assert!(DemoSeed::LoopbackOnly.applies(loopback) && !DemoSeed::LoopbackOnly.applies(public));
        assert!(DemoSeed::Always.applies(public) && !DemoSeed::Never.applies(loopback));
    }

    #[test]
    fn cookies_are_secure_by_default_behind_https() {
        let mut config = Config::local("data".into(), None, "site".into());
        assert!(!config.cookies_secure());
        config.public_origin = origin(Some("https://ops.example.com/".into())).unwrap();
        assert_eq!(config.public_origin.as_deref(), Some("https://ops.example.com"));
        assert!(config.cookies_secure());
        config.secure_cookies = Some(false);
        assert!(!config.cookies_secure(), "an explicit setting wins");
        assert!(origin(Some("ops.example.com".into())).is_err());
        assert!(origin(Some("https://ops.example.com/app".into())).is_err());
    }
}
