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
    /// `CLUTCHCALL_NATS_URL`: cluster mode (events between instances);
    /// requires PostgreSQL.
    pub nats_url: Option<String>,
    /// `CLUTCHCALL_INSTANCE`: this instance's name in org leases and logs;
    /// `None`: the host name and the bound port.
    pub instance: Option<String>,
    /// `CLUTCHCALL_TEST_ORGS=1`: browser tests make their own copies of the
    /// demo orgs (`POST /test/orgs`). Loopback addresses only.
    pub test_orgs: bool,
    /// `CLUTCHCALL_METRICS_ADDR`: where `/metrics` listens (its figures
    /// span orgs: keep it private). Default `127.0.0.1:9464`; `off` disables.
    pub metrics_addr: Option<SocketAddr>,
    /// `CLUTCHCALL_SIGNIN_PER_MINUTE`: sign-in attempts one client address
    /// may make per minute (any emails). Default 60.
    pub sign_ins_per_address_per_minute: u32,
    /// `CLUTCHCALL_TABS_PER_PERSON`: sockets one person may hold open at
    /// once (consoles, watch tabs, cockpits). Default 16.
    pub tabs_per_person: usize,
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
    pub booking_caps: domain::booking::BookingCaps,
    /// How long an offer rings: 30 s (seed 000). Only tests change it.
    pub offer_window_ms: i64,
    /// `CLUTCHCALL_WRAP_UP_S`: wrap-up (`acw`) after a session before the
    /// operator is ready again. Default 60 s.
    pub wrap_up_ms: i64,
    /// Presence lapses this long after a console's last heartbeat: 20 s. Only tests change it.
    pub presence_ttl_ms: i64,
    /// A client whose connection takes nothing of what is written to it for
    /// this long is cut off (`http::connections`), as is a download it takes
    /// no piece of (`http::export`): 60 s. Only tests change it.
    pub client_stall: std::time::Duration,
    /// `CLUTCHCALL_REOFFER_COOLDOWN_S`: a decliner or misser is not offered
    /// the same call again for this long (rule D08). Default 60 s.
    pub cooloff_ms: i64,
    /// `CLUTCHCALL_PENDING_TIMEOUT_S`: a call nobody took (ringing or
    /// queued) is cancelled by the platform after this long. Default 15 min.
    pub pending_timeout_ms: i64,
    /// `CLUTCHCALL_ACTIVITY_CHECK_S` (30), `CLUTCHCALL_INACTIVITY_WARNING_S`
    /// (120 s idle) and `CLUTCHCALL_INACTIVITY_STOP_S` (60 s after the
    /// warning): the inactivity chain of ACTIVE sessions (rule L07).
    pub inactivity: domain::inactivity::InactivityPolicy,
    /// `CLUTCHCALL_SESSION_MIN`: a session outside any booking is planned
    /// to end this long after it starts (rule L13). Default 30 min.
    pub session_ms: i64,
    /// `CLUTCHCALL_EVENT_RETENTION_DAYS`: the org event log keeps records
    /// this long (`/v1/events`, webhooks). Default 7.
    pub event_retention_days: u32,
    /// `CLUTCHCALL_WEBHOOK_ALLOW_PRIVATE=1`: webhooks may go to private and
    /// loopback addresses (tests, labs); `CLUTCHCALL_WEBHOOK_RETRY_MS`: the
    /// first retry's wait (5 s).
    pub webhooks: WebhookSettings,
    /// `CLUTCHCALL_REVOCATION_SWEEP_S`: in cluster mode, how often every
    /// socket and cached robot token here is checked against the store even
    /// when no revocation seems lost (one whose sender died before telling
    /// anyone leaves no trace to notice). Default 60 s.
    pub revocation_sweep: std::time::Duration,
    /// `CLUTCHCALL_RECORDING_TIDY_S`: how often recordings nothing was
    /// written to for as long are looked for, and finished if their session
    /// ended (an instance that died mid-session leaves its part; an episode
    /// whose row could not be written keeps its parts). Default 60 s.
    pub recording_tidy: std::time::Duration,
}

#[derive(Clone, Copy, Debug)]
pub struct WebhookSettings {
    pub allow_private: bool,
    pub first_retry_ms: i64,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings { allow_private: false, first_retry_ms: domain::integrations::FIRST_RETRY_MS }
    }
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

/// Every setting, each read from its environment variable (or a flag of
/// the same name), with its default: `server --help` lists them all, and a
/// test holds README's configuration table to this list.
#[derive(Clone, Debug, clap::Args)]
pub struct Settings {
    /// Listen address (`127.0.0.1:0` picks a free port). Default: `LEPTOS_SITE_ADDR`, else 127.0.0.1:3000.
    #[arg(long, env = "CLUTCHCALL_ADDR")]
    pub addr: Option<SocketAddr>,
    /// Set by cargo-leptos: the listen address when `CLUTCHCALL_ADDR` is unset.
    #[arg(long = "site-addr", env = "LEPTOS_SITE_ADDR", hide = true)]
    pub site_addr: Option<SocketAddr>,
    /// Where the SQLite file `clutchcall.db` lives (created on first start).
    #[arg(long, env = "CLUTCHCALL_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// `postgres://user@host:5432/db` for PostgreSQL, or an explicit `sqlite://path`; unset: SQLite in the data dir.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// The built wasm, JS, CSS and `public/` assets.
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,
    /// The origin people open, e.g. `https://ops.example.com`: state changes and socket upgrades must come from it.
    #[arg(long, env = "CLUTCHCALL_PUBLIC_ORIGIN", value_parser = origin)]
    pub public_origin: Option<String>,
    /// `1`/`0`: whether the sign-in cookie is `Secure`; default: exactly when the public origin is `https://`.
    #[arg(long, env = "CLUTCHCALL_SECURE_COOKIES", value_parser = clap::builder::BoolishValueParser::new())]
    pub secure_cookies: Option<bool>,
    /// `1` creates the demo org on any empty database, `0` never; default: only on a loopback address.
    #[arg(long, env = "CLUTCHCALL_DEMO", value_parser = clap::builder::BoolishValueParser::new())]
    pub demo: Option<bool>,
    /// Cluster mode: several instances on one PostgreSQL database, their events carried by the NATS server at this URL (e.g. `nats://127.0.0.1:4222`); requires `DATABASE_URL=postgres://…`.
    #[arg(long, env = "CLUTCHCALL_NATS_URL")]
    pub nats_url: Option<String>,
    /// This instance's name, in the org leases that say which instance dispatches which org, and in logs; unique among the instances on one database; default: the host name and the port.
    #[arg(long, env = "CLUTCHCALL_INSTANCE", value_parser = instance_name)]
    pub instance: Option<String>,
    /// Browser tests only: `1` opens `POST /test/orgs`, which makes a fresh copy of the demo orgs (public password) for each test; refused on a non-loopback address.
    #[arg(long, env = "CLUTCHCALL_TEST_ORGS", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub test_orgs: bool,
    /// Where `GET /metrics` listens (its figures span orgs: keep it private); `off` disables it.
    #[arg(long, env = "CLUTCHCALL_METRICS_ADDR", default_value = "127.0.0.1:9464", value_parser = metrics_addr)]
    pub metrics_addr: MetricsAddr,
    /// Sign-in attempts one client address may make per minute, across all emails.
    #[arg(long = "signin-per-minute", env = "CLUTCHCALL_SIGNIN_PER_MINUTE", default_value_t = crate::services::throttle::DEFAULT_PER_ADDRESS_PER_MINUTE)]
    pub sign_ins_per_minute: u32,
    /// Sockets one person may hold open at once (consoles, watch tabs, cockpits).
    #[arg(long, env = "CLUTCHCALL_TABS_PER_PERSON", default_value_t = crate::services::tabs::TABS_PER_PERSON, value_parser = clap::value_parser!(usize))]
    pub tabs_per_person: usize,
    /// CIDR blocks (comma-separated) of reverse proxies whose `X-Forwarded-For` is believed for limits and logs.
    #[arg(long, env = "CLUTCHCALL_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<TrustedBlock>,
    /// Frames per second each direction of a session's relay carries; past it frames are held back (and counted).
    #[arg(long, env = "CLUTCHCALL_RELAY_MAX_FPS", default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..))]
    pub relay_max_fps: u32,
    /// KiB per second each direction of a session's relay carries; past it frames are held back (and counted).
    #[arg(long = "relay-max-kib-s", env = "CLUTCHCALL_RELAY_MAX_KIB_S", default_value_t = 32 * 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub relay_max_kib_per_s: u32,
    /// One session's recording stops taking samples at this size (MiB).
    #[arg(long, env = "CLUTCHCALL_RECORDING_MAX_MB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub recording_max_mb: u64,
    /// Upcoming bookings one client may hold on one robot.
    #[arg(long, env = "CLUTCHCALL_BOOKINGS_PER_ROBOT", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub bookings_per_robot: u32,
    /// Bookings one client may make starting in one UTC month.
    #[arg(long, env = "CLUTCHCALL_BOOKINGS_PER_MONTH", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub bookings_per_month: u32,
    /// Wrap-up (`acw`) after a session before the operator is ready again, in seconds.
    #[arg(long, env = "CLUTCHCALL_WRAP_UP_S", default_value_t = 60)]
    pub wrap_up_s: u32,
    /// An operator who declined or missed a call is not offered that same call again for this long (s, rule D08).
    #[arg(long, env = "CLUTCHCALL_REOFFER_COOLDOWN_S", default_value_t = 60)]
    pub reoffer_cooldown_s: u32,
    /// A call nobody took (ringing or queued) is cancelled by the platform after this long (s).
    #[arg(long, env = "CLUTCHCALL_PENDING_TIMEOUT_S", default_value_t = 900)]
    pub pending_timeout_s: u32,
    /// Inactivity chain of an ACTIVE session: an `ACTIVITY_CHECK` this often (s, rule L07).
    #[arg(long, env = "CLUTCHCALL_ACTIVITY_CHECK_S", default_value_t = 30)]
    pub activity_check_s: u32,
    /// No operator input this long (s) → `INACTIVITY_WARNING`.
    #[arg(long, env = "CLUTCHCALL_INACTIVITY_WARNING_S", default_value_t = 120)]
    pub inactivity_warning_s: u32,
    /// Still none this long (s) after the warning → `INACTIVITY_STOP`.
    #[arg(long, env = "CLUTCHCALL_INACTIVITY_STOP_S", default_value_t = 60)]
    pub inactivity_stop_s: u32,
    /// A session outside any booking is planned to end this many minutes after it starts (rule L13).
    #[arg(long, env = "CLUTCHCALL_SESSION_MIN", default_value_t = domain::booking::DEFAULT_SESSION_MIN as u32)]
    pub session_min: u32,
    /// Days the org event log keeps its records (`/v1/events`, webhooks); a reader further behind gets 410.
    #[arg(long, env = "CLUTCHCALL_EVENT_RETENTION_DAYS", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    pub event_retention_days: u32,
    /// Let webhooks reach private and loopback addresses (tests, labs): off, only public addresses are sent to.
    #[arg(long, env = "CLUTCHCALL_WEBHOOK_ALLOW_PRIVATE", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub webhook_allow_private: bool,
    /// The first webhook retry's wait (ms); it doubles per attempt up to an hour.
    #[arg(long, env = "CLUTCHCALL_WEBHOOK_RETRY_MS", default_value_t = domain::integrations::FIRST_RETRY_MS, value_parser = clap::value_parser!(i64).range(1..))]
    pub webhook_retry_ms: i64,
    /// Cluster mode: seconds between checks of every socket and cached robot token against the store, lost revocations or not.
    #[arg(long = "revocation-sweep-s", env = "CLUTCHCALL_REVOCATION_SWEEP_S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub revocation_sweep_s: u64,
    /// Seconds between looks for recordings nothing was written to for as long whose session ended (they are finished then).
    #[arg(long = "recording-tidy-s", env = "CLUTCHCALL_RECORDING_TIDY_S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub recording_tidy_s: u64,
}

/// `CLUTCHCALL_METRICS_ADDR`: an address, or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricsAddr(pub Option<SocketAddr>);

/// One block of `CLUTCHCALL_TRUSTED_PROXIES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrustedBlock(pub crate::http::client::Cidr);

impl std::str::FromStr for TrustedBlock {
    type Err = String;

    fn from_str(text: &str) -> Result<TrustedBlock, String> {
        text.parse().map(TrustedBlock)
    }
}

fn metrics_addr(text: &str) -> Result<MetricsAddr, String> {
    match text.trim() {
        "off" => Ok(MetricsAddr(None)),
        address => address.parse().map(|a| MetricsAddr(Some(a))).map_err(|_| format!("{address:?} is not a socket address (e.g. 127.0.0.1:9464) nor `off`")),
    }
}

/// An instance name: unique among the instances on one database, and
/// without `/` (a lease names its holder `instance/boot`).
fn instance_name(text: &str) -> Result<String, String> {
    match text.trim() {
        name if name.contains('/') => Err(format!("{name:?}: an instance name has no '/'")),
        name => Ok(name.to_string()),
    }
}

/// An origin: `http(s)://host[:port]`, nothing after (lower-cased, no trailing slash).
fn origin(text: &str) -> Result<String, String> {
    let trimmed = text.trim().trim_end_matches('/');
    let rest = trimmed.strip_prefix("https://").or_else(|| trimmed.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ']) => Ok(trimmed.to_ascii_lowercase()),
        _ => Err(format!("{text:?} must be a scheme and host with no path, e.g. https://ops.example.com")),
    }
}

/// Treats a setting's variable that is set but empty (`CLUTCHCALL_X=`) as
/// unset, as the server always has. Call before any thread starts: it
/// edits the process environment.
pub fn forget_empty_settings() {
    use clap::CommandFactory;
    for arg in SettingsOnly::command().get_arguments() {
        if let Some(name) = arg.get_env() {
            if std::env::var_os(name).is_some_and(|v| v.to_string_lossy().trim().is_empty()) {
                std::env::remove_var(name);
            }
        }
    }
}

/// The settings alone, as the server binary reads them (no subcommand).
#[derive(clap::Parser)]
struct SettingsOnly {
    #[command(flatten)]
    settings: Settings,
}

impl Config {
    /// The settings from the environment (flags aside): what `server` reads.
    pub fn from_env() -> Result<Config, clap::Error> {
        use clap::Parser;
        Ok(Config::from_settings(SettingsOnly::try_parse_from(["server"])?.settings))
    }

    /// A configuration of `settings` (already checked by their parsers).
    pub fn from_settings(s: Settings) -> Config {
        let seconds = |s: u32| i64::from(s) * 1000;
        Config {
            addr: s.addr.or(s.site_addr).unwrap_or(SocketAddr::from(([127, 0, 0, 1], 3000))),
            data_dir: s.data_dir,
            database_url: s.database_url.filter(|url| !url.trim().is_empty()),
            site_root: s.site_root,
            public_origin: s.public_origin,
            metrics_addr: s.metrics_addr.0,
            secure_cookies: s.secure_cookies,
            demo: match s.demo {
                None => DemoSeed::LoopbackOnly,
                Some(true) => DemoSeed::Always,
                Some(false) => DemoSeed::Never,
            },
            test_orgs: s.test_orgs,
            instance: s.instance.filter(|name| !name.trim().is_empty()),
            nats_url: s.nats_url.filter(|url| !url.trim().is_empty()),
            sign_ins_per_address_per_minute: s.sign_ins_per_minute,
            tabs_per_person: s.tabs_per_person.max(1),
            trusted_proxies: s.trusted_proxies.into_iter().map(|b| b.0).collect(),
            relay: crate::relay::RelayLimits {
                max_fps: s.relay_max_fps,
                max_kib_per_s: s.relay_max_kib_per_s,
                recording_max_bytes: s.recording_max_mb.saturating_mul(1024 * 1024),
            },
            booking_caps: domain::booking::BookingCaps { per_robot: s.bookings_per_robot as usize, per_month: s.bookings_per_month as usize },
            offer_window_ms: crate::engine::OFFER_WINDOW_MS,
            wrap_up_ms: seconds(s.wrap_up_s),
            presence_ttl_ms: domain::ring::PRESENCE_TTL_MS,
            client_stall: crate::http::connections::CLIENT_STALL,
            cooloff_ms: seconds(s.reoffer_cooldown_s),
            pending_timeout_ms: seconds(s.pending_timeout_s),
            inactivity: domain::inactivity::InactivityPolicy {
                check_ms: seconds(s.activity_check_s),
                warning_after_ms: seconds(s.inactivity_warning_s),
                stop_after_warning_ms: seconds(s.inactivity_stop_s),
            },
            session_ms: i64::from(s.session_min) * 60_000,
            event_retention_days: s.event_retention_days,
            webhooks: WebhookSettings { allow_private: s.webhook_allow_private, first_retry_ms: s.webhook_retry_ms },
            revocation_sweep: std::time::Duration::from_secs(s.revocation_sweep_s),
            recording_tidy: std::time::Duration::from_secs(s.recording_tidy_s),
        }
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
            test_orgs: false,
            instance: None,
            nats_url: None,
            sign_ins_per_address_per_minute: crate::services::throttle::DEFAULT_PER_ADDRESS_PER_MINUTE,
            tabs_per_person: crate::services::tabs::TABS_PER_PERSON,
            trusted_proxies: Vec::new(),
            relay: crate::relay::RelayLimits::default(),
            booking_caps: domain::booking::BookingCaps::default(),
            offer_window_ms: crate::engine::OFFER_WINDOW_MS,
            wrap_up_ms: domain::ring::DEFAULT_WRAP_UP_MS,
            presence_ttl_ms: domain::ring::PRESENCE_TTL_MS,
            client_stall: crate::http::connections::CLIENT_STALL,
            cooloff_ms: crate::engine::DEFAULT_COOLOFF_MS,
            pending_timeout_ms: crate::engine::DEFAULT_PENDING_TIMEOUT_MS,
            inactivity: domain::inactivity::InactivityPolicy::default(),
            session_ms: domain::booking::DEFAULT_SESSION_MIN * 60_000,
            event_retention_days: 7,
            webhooks: WebhookSettings::default(),
            revocation_sweep: std::time::Duration::from_secs(60),
            recording_tidy: std::time::Duration::from_secs(60),
        }
    }

    /// This instance's name: as configured, else `host:port` of `addr`.
    pub fn instance_name(&self, addr: SocketAddr) -> String {
        if let Some(name) = &self.instance {
            return name.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}:{}", addr.port())
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

    /// The defaults of every setting are the documented ones (the same
    /// figures `Config::local` gives tests).
    #[test]
    fn every_setting_defaults_to_the_documented_value() {
        use clap::Parser;
        let parsed = SettingsOnly::try_parse_from(["server", "--addr", "127.0.0.1:0", "--data-dir", "data", "--site-root", "site", "--demo", "1", "--metrics-addr", "127.0.0.1:0"]).unwrap();
        let from_flags = Config::from_settings(parsed.settings);
        let local = Config::local("data".into(), None, "site".into());
        assert_eq!(format!("{from_flags:?}"), format!("{local:?}"));
        let off = SettingsOnly::try_parse_from(["server", "--metrics-addr", "off", "--trusted-proxies", "10.0.0.0/8,::1"]).unwrap().settings;
        assert_eq!((off.metrics_addr, off.trusted_proxies.len()), (MetricsAddr(None), 2));
        assert!(SettingsOnly::try_parse_from(["server", "--relay-max-fps", "0"]).is_err(), "a cap of nothing is refused");
        assert!(SettingsOnly::try_parse_from(["server", "--trusted-proxies", "10.0.0.0/33"]).is_err());
    }

    /// An instance is named as configured, else by its host and port
    /// (unique among instances on one host, readable in a lease's owner).
    #[test]
    fn an_instance_is_named_by_its_host_and_port_unless_named() {
        let addr: SocketAddr = "0.0.0.0:3002".parse().unwrap();
        let mut config = Config::local("data".into(), None, "site".into());
        assert_eq!(config.instance, None);
        let named = config.instance_name(addr);
        assert!(named.strip_suffix(":3002").is_some_and(|host| !host.is_empty()), "{named}");
        config.instance = Some("node-2".into());
        assert_eq!(config.instance_name(addr), "node-2");
    }

    /// README's configuration table names exactly the variables `server
    /// --help` lists (the hidden cargo-leptos address aside).
    #[test]
    fn the_readme_table_lists_every_setting() {
        use clap::CommandFactory;
        let readme = include_str!("../../README.md");
        let table = &readme[readme.find("## Configuration").expect("a configuration section")..];
        let table = &table[..table.find("\n\n#").unwrap_or(table.len())];
        let documented: std::collections::BTreeSet<String> =
            table.lines().filter_map(|line| line.strip_prefix("| `")).filter_map(|rest| rest.split('`').next()).map(str::to_string).collect();
        let command = SettingsOnly::command();
        let known: std::collections::BTreeSet<String> = command
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect();
        let extra: Vec<&String> = documented.iter().filter(|d| !known.contains(*d) && d.as_str() != "RUST_LOG").collect();
        let missing: Vec<&String> = known.iter().filter(|k| !documented.contains(*k)).collect();
        assert!(extra.is_empty() && missing.is_empty(), "README documents {extra:?} that `server --help` lacks, and lacks {missing:?}");
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
        config.public_origin = Some(origin("https://ops.example.com/").unwrap());
        assert_eq!(config.public_origin.as_deref(), Some("https://ops.example.com"));
        assert!(config.cookies_secure());
        config.secure_cookies = Some(false);
        assert!(!config.cookies_secure(), "an explicit setting wins");
        assert!(origin("ops.example.com").is_err());
        assert!(origin("https://ops.example.com/app").is_err());
    }
}
