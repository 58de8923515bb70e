//! Optimises the site's wasm for size with binaryen (`wasm-opt.mjs`, in one
//! Node process; `scripts/setup.sh` installs binaryen from npm).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn all(root: &Path, pkg: &Path) -> Result<()> {
    let binaryen = tools_dir().join("node_modules/binaryen/index.js");
    if !binaryen.exists() {
        bail!("binaryen is not installed at {} (scripts/setup.sh installs it)", binaryen.display());
    }
    let output = Command::new("node")
        .arg(root.join("frontend/site/wasm-opt.mjs"))
        .arg(&binaryen)
        .arg(pkg)
        .output()
        .context("starting node")?;
    // binaryen warns once per module about the name section's subsections
    // it does not know (those rustc writes): its output only matters when
    // it failed.
    if !output.status.success() {
        bail!("wasm-opt.mjs failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    print!("{}", String::from_utf8_lossy(&output.stdout));
    Ok(())
}

/// Where `scripts/setup.sh` puts tools that outlive a clone.
fn tools_dir() -> PathBuf {
    match std::env::var_os("CLUTCHCALL_TOOLS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/clutchcall-tools"),
    }
}
