//! What the load tools (`src/bin`) share: a throwaway database and server
//! configuration, flag parsing, and latency percentiles.

pub mod idle;

use server::config::Config;
use sqlx::Connection;
use std::collections::BTreeMap;
use std::time::Duration;

/// Starts `command`, a server that prints "… listening on <base URL>", and
/// waits for that line: the process (killed when dropped) and its base
/// URL. What it prints after is read and dropped, so a full pipe never
/// stalls it.
pub async fn spawn_listening(mut command: tokio::process::Command) -> anyhow::Result<(tokio::process::Child, String)> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut process = command.stdout(std::process::Stdio::piped()).kill_on_drop(true).spawn()?;
    let mut lines = BufReader::new(process.stdout.take().expect("piped")).lines();
    let base = loop {
        let line = lines.next_line().await?.ok_or_else(|| anyhow::anyhow!("the server exited before listening"))?;
        if let Some(address) = line.split("listening on ").nth(1) {
            break address.trim().to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((process, base))
}

/// A fresh database for one run: a temp SQLite file, or a PostgreSQL
/// database created on `CLUTCHCALL_TEST_PG_URL` (default the local server)
/// and dropped by `finish`.
pub struct ScratchDb {
    pub config: Config,
    _dir: tempfile::TempDir,
    postgres: Option<(String, String)>,
}

impl ScratchDb {
    pub async fn create(backend: &str) -> anyhow::Result<ScratchDb> {
        let dir = tempfile::tempdir()?;
        let postgres = match backend {
            "sqlite" => None,
            "postgres" => {
                let admin = std::env::var("CLUTCHCALL_TEST_PG_URL")
                    .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
                let name = format!("cc_load_{}", std::process::id());
                let mut conn = sqlx::PgConnection::connect(&admin).await?;
                sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await?;
                Some((admin, name))
            }
            other => anyhow::bail!("--db is sqlite or postgres, not {other:?}"),
        };
        let database_url = postgres.as_ref().map(|(admin, name)| {
            format!("{}/{name}", admin.rsplit_once('/').map(|(base, _)| base).unwrap_or(admin))
        });
        let config = Config::local(dir.path().to_path_buf(), database_url, "target/site".into());
        Ok(ScratchDb { config, _dir: dir, postgres })
    }

    /// Drops the PostgreSQL database (the SQLite file goes with the temp dir).
    pub async fn finish(self) -> anyhow::Result<()> {
        if let Some((admin, name)) = self.postgres {
            let mut conn = sqlx::PgConnection::connect(&admin).await?;
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await?;
        }
        Ok(())
    }
}

/// `--name value` pairs over `defaults`; an unknown flag is an error.
pub fn parse_flags(defaults: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
    let mut flags: BTreeMap<String, String> = defaults.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let name = flag.strip_prefix("--").filter(|n| flags.contains_key(*n)).ok_or_else(|| format!("unknown argument {flag}"))?;
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        flags.insert(name.to_string(), value);
    }
    Ok(flags)
}

/// A numeric flag from `parse_flags`.
pub fn number(flags: &BTreeMap<String, String>, name: &str) -> Result<usize, String> {
    flags[name].parse().map_err(|_| format!("--{name} takes a whole number"))
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
