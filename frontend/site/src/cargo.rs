//! The two cargo builds: the browser crate for wasm32, and the server.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Build {
    root: PathBuf,
    target_dir: PathBuf,
    release: bool,
}

impl Build {
    /// The flags both builds need come from `.cargo/config.toml`; a RUSTFLAGS
    /// variable replaces them, so one without `--cfg erase_components` is
    /// refused (server and browser would render different views). The
    /// wasm's own flag is added for its build alone (below).
    pub fn new(root: &Path, release: bool) -> Result<Build> {
        if let Ok(flags) = std::env::var("RUSTFLAGS") {
            if !flags.contains("--cfg erase_components") {
                bail!("RUSTFLAGS is set, which replaces the flags in .cargo/config.toml, and lacks `--cfg erase_components`: unset it or add that");
            }
        }
        let target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let target_dir = if target_dir.is_absolute() { target_dir } else { root.join(target_dir) };
        Ok(Build { root: root.to_path_buf(), target_dir, release })
    }

    /// Where the browser crate is built: a target directory of its own (as
    /// cargo-leptos had it), so its wasm32 artefacts never evict the
    /// server's.
    fn front_dir(&self) -> PathBuf {
        self.target_dir.join("front")
    }

    /// The splitter's output before it is placed in the site.
    pub fn scratch_dir(&self) -> PathBuf {
        self.front_dir().join(if self.release { "split-release" } else { "split-debug" })
    }

    /// Builds `frontend` for the browser; returns its wasm.
    pub fn frontend(&self) -> Result<PathBuf> {
        let mut cargo = Command::new(cargo_bin());
        cargo
            .current_dir(&self.root)
            .args(["build", "--package=frontend", "--lib", "--target=wasm32-unknown-unknown", "--no-default-features"])
            .arg(format!("--target-dir={}", self.front_dir().display()));
        // The splitter needs the linker's relocations: `.cargo/config.toml`
        // asks for them, unless a RUSTFLAGS variable replaced it.
        if let Ok(flags) = std::env::var("RUSTFLAGS") {
            if !flags.contains("--emit-relocs") {
                cargo.env("RUSTFLAGS", format!("{flags} -Clink-args=--emit-relocs"));
            }
        }
        if self.release {
            cargo.arg("--profile=wasm-release");
        }
        run(cargo, "cargo build -p frontend (wasm32)")?;
        let profile_dir = if self.release { "wasm-release" } else { "debug" };
        Ok(self.front_dir().join("wasm32-unknown-unknown").join(profile_dir).join("frontend.wasm"))
    }

    /// Builds the server binary (with the flags the wasm was built with:
    /// `.cargo/config.toml`).
    pub fn server(&self) -> Result<()> {
        let mut cargo = Command::new(cargo_bin());
        cargo
            .current_dir(&self.root)
            .args(["build", "--package=server", "--bin=server"]);
        if self.release {
            cargo.arg("--release");
        }
        run(cargo, "cargo build -p server")
    }
}

/// The cargo that runs this tool when it runs under `cargo run`, else the one
/// on PATH.
fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn run(mut command: Command, what: &str) -> Result<()> {
    let status = command.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
