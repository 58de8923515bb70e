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
    /// `CLUTCHCALL_SECURE_COOKIES=1` marks the session cookie `Secure` (behind HTTPS).
    pub secure_cookies: bool,
    /// `CLUTCHCALL_DEMO=0` skips creating the demo org on an empty database.
    pub seed_demo: bool,
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
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
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
            secure_cookies: var("CLUTCHCALL_SECURE_COOKIES").is_some_and(|v| v == "1" || v == "true"),
            seed_demo: var("CLUTCHCALL_DEMO").is_none_or(|v| v != "0" && v != "false"),
            offer_window_ms: crate::engine::OFFER_WINDOW_MS,
            wrap_up_ms: seconds(var("CLUTCHCALL_WRAP_UP_S"), "CLUTCHCALL_WRAP_UP_S")?.unwrap_or(app::ring::DEFAULT_WRAP_UP_MS),
            presence_ttl_ms: app::ring::PRESENCE_TTL_MS,
            cooloff_ms: seconds(var("CLUTCHCALL_REOFFER_COOLDOWN_S"), "CLUTCHCALL_REOFFER_COOLDOWN_S")?
                .unwrap_or(crate::engine::DEFAULT_COOLOFF_MS),
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
            secure_cookies: false,
            seed_demo: true,
            offer_window_ms: crate::engine::OFFER_WINDOW_MS,
            wrap_up_ms: app::ring::DEFAULT_WRAP_UP_MS,
            presence_ttl_ms: app::ring::PRESENCE_TTL_MS,
            cooloff_ms: crate::engine::DEFAULT_COOLOFF_MS,
        }
    }

    /// The engine's timings.
    pub fn engine_settings(&self) -> crate::engine::Settings {
        crate::engine::Settings {
            offer_window_ms: self.offer_window_ms,
            wrap_up_ms: self.wrap_up_ms,
            presence_ttl_ms: self.presence_ttl_ms,
            cooloff_ms: self.cooloff_ms,
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
        let config = Config::from_env().unwrap();
        assert_eq!(config.cooloff_ms, 60_000, "rule D08: a 60 s cool-off by default");
        assert_eq!(config.presence_ttl_ms, 20_000, "presence lapses 20 s after the last heartbeat");
        assert_eq!(config.wrap_up_ms, 60_000, "wrap-up defaults to 60 s");
        assert_eq!(config.offer_window_ms, 30_000, "offers ring for 30 s");
    }
}
