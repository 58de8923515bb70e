//! Release builds' size work, in Node with npm packages `scripts/setup.sh`
//! installs: every wasm module optimised with binaryen (`wasm-opt.mjs`),
//! the scripts minified with terser (`minify.mjs`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn wasm(root: &Path, pkg: &Path) -> Result<()> {
    node(root, "wasm-opt.mjs", "binaryen/index.js", &[pkg.to_path_buf()])
}

pub fn scripts(root: &Path, files: &[PathBuf]) -> Result<()> {
    node(root, "minify.mjs", "terser/main.js", files)
}

/// Runs `frontend/site/<script>` with the package entry `module` and `args`.
fn node(root: &Path, script: &str, module: &str, args: &[PathBuf]) -> Result<()> {
    let module = tools_dir().join("node_modules").join(module);
    if !module.exists() {
        bail!("{} is not installed (scripts/setup.sh installs it)", module.display());
    }
    let output = Command::new("node")
        .arg(root.join("frontend/site").join(script))
        .arg(&module)
        .args(args)
        .output()
        .context("starting node")?;
    // binaryen warns once per module about the name section's subsections
    // it does not know (those rustc writes): what a tool says on stderr only
    // matters when it failed.
    if !output.status.success() {
        bail!("{script} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
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
