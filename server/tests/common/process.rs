//! The real server binary as a child process: for a kill -9, for memory
//! measured on the server alone, and for its command line.

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub struct ServerProcess {
    pub child: Child,
    pub base: String,
    /// What it printed before it listened (banners, instructions).
    pub banner: String,
}

/// Set to a file name, every server process a test starts logs at info
/// into it, each line after the process's address (for a failing cluster test).
const CHILD_LOG: &str = "CLUTCHCALL_TEST_CHILD_LOG";

/// The binary with the test's environment: its own data dir, logs at warn.
pub fn command(data_dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_server"));
    command
        .env("CLUTCHCALL_DATA_DIR", data_dir)
        .env("LEPTOS_SITE_ROOT", super::site_root())
        .env("RUST_LOG", if std::env::var_os(CHILD_LOG).is_some() { "info,tower_http=warn,sqlx=warn" } else { "warn" })
        .env("CLUTCHCALL_METRICS_ADDR", "127.0.0.1:0")
        .env_remove("DATABASE_URL")
        .env_remove("CLUTCHCALL_DEMO")
        .kill_on_drop(true);
    command
}

impl ServerProcess {
    /// Starts `command` and waits for its listening line.
    pub async fn start(mut command: Command) -> ServerProcess {
        let mut child = command.stdout(Stdio::piped()).spawn().expect("server binary starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (base, banner) = tokio::time::timeout(Duration::from_secs(60), async {
            let mut banner = String::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    return (addr.trim().to_string(), banner);
                }
                banner.push_str(&line);
                banner.push('\n');
            }
            panic!("server exited before listening: {banner}");
        })
        .await
        .expect("listening within 60 s");
        // Keep draining stdout so the child never blocks on a full pipe
        // (into the file `CLUTCHCALL_TEST_CHILD_LOG` names, when set).
        let log = std::env::var_os(CHILD_LOG).map(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).expect("child log"));
        let me = base.clone();
        tokio::spawn(async move {
            use std::io::Write;
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(mut file) = log.as_ref() {
                    let _ = writeln!(file, "{me} {line}");
                }
            }
        });
        ServerProcess { child, base, banner }
    }

    /// Resident memory of the server process, in bytes.
    pub fn rss_bytes(&self) -> u64 {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kb * 1024
    }

    /// SIGTERM, as a deploy stops it (a graceful stop), and its exit.
    #[allow(dead_code)]
    pub async fn terminate(&mut self) {
        let pid = self.child.id().expect("running") as i32;
        unsafe { libc::kill(pid, libc::SIGTERM) };
        self.child.wait().await.expect("it exits");
    }

    /// SIGKILL, as a crash would.
    pub async fn kill9(mut self) {
        self.child.start_kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
        let _ = self.child.wait().await;
    }
}
