//! `clutchcall-site`: the one site build. `run.sh`, `test.sh` and the
//! benchmarks all call it; nothing else writes `target/site`.
//!
//! It does what cargo-leptos 0.3.10 did for this project, with the same
//! libraries (`wasm_split_cli_support` cuts the wasm, `wasm-bindgen-cli-support`
//! writes the bindings), and writes the chunk loader from a template of its
//! own (`loader.js`) instead of rewriting the splitter's: the splitter's
//! output is read as data (its manifest and the chunks' imports), never as
//! text. It is a crate of ours rather than cargo-leptos because cargo-leptos
//! took 21 of the 54 minutes a fresh machine needed before it served.
//!
//! Steps: build the browser crate for wasm32 (with relocations, which the
//! splitter needs); cut it into a module per screen and the chunks they
//! share; generate the bindings for the main module; in release, optimise
//! every module for size (`wasm-opt.mjs`, binaryen in one Node process)
//! and minify the scripts (`minify.mjs`, terser);
//! bundle each screen's chunks into one file and write the loader and the
//! server's preload manifest; copy the stylesheet and assets; in release,
//! precompress; then build the server (with the wasm's flags, from
//! `.cargo/config.toml`: the views it renders are the views the browser
//! hydrates).

mod bundle;
mod cargo;
mod compress;
mod layout;
mod loader;
mod optimize;
mod wasm;

use anyhow::{Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The name the server gives the site's files (`LeptosOptions::output_name`,
/// and `LEPTOS_OUTPUT_NAME` in `.cargo/config.toml`).
pub const OUTPUT_NAME: &str = "clutchcall";
/// The console's heartbeat worker (`app/src/console/link.rs` starts it
/// from `/pkg/heartbeat_clock.js`).
const HEARTBEAT_CLOCK_SOURCE: &str = "app/src/console/heartbeat_clock.js";
const HEARTBEAT_CLOCK_FILE: &str = "heartbeat_clock.js";

#[derive(Parser, Debug)]
#[command(about = "Builds ClutchCall's site (target/site) and its server")]
struct Args {
    /// Release build: the wasm built for size and optimised, every file
    /// precompressed, the server optimised.
    #[arg(long)]
    release: bool,
    /// Build the site only, not the server binary.
    #[arg(long)]
    no_server: bool,
    /// The workspace. Default: the one this tool was built from.
    #[arg(long, env = "CLUTCHCALL_ROOT")]
    root: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("clutchcall-site: {e:#}");
        std::process::exit(1);
    }
}

/// The workspace this tool builds: the one `cargo run` ran it from (cargo
/// sets `CARGO_MANIFEST_DIR` at run time too), else the one it was compiled
/// in. Two checkouts sharing a target directory share this binary, and the
/// compiled-in path alone built the other checkout's site.
fn workspace_of(running_from: Option<PathBuf>) -> PathBuf {
    running_from.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR"))).join("../..")
}

fn run(args: &Args) -> Result<()> {
    let root = args.root.clone().unwrap_or_else(|| workspace_of(std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from)));
    let root = root.canonicalize().with_context(|| format!("workspace {}", root.display()))?;
    let build = cargo::Build::new(&root, args.release)?;
    let site = root.join("target/site");
    let pkg = site.join("pkg");
    let started = Instant::now();

    let wasm = build.frontend()?;
    say(started, "browser crate built");

    // Everything the pkg directory had is replaced: a chunk of an earlier
    // build must not be served beside this build's loader.
    if pkg.exists() {
        std::fs::remove_dir_all(&pkg).with_context(|| format!("clearing {}", pkg.display()))?;
    }
    std::fs::create_dir_all(&pkg)?;
    let scratch = build.scratch_dir();
    let layout = layout::split(&wasm, &scratch, &pkg)?;
    say(started, &format!("split into {} split points and {} chunk files", layout.splits.len(), layout.chunk_files()));

    bindgen(&scratch.join("main.wasm"), &pkg)?;
    say(started, "bindings written");

    if args.release {
        optimize::wasm(&root, &pkg)?;
        say(started, "wasm optimised");
    }
    layout.check_data(&pkg, &pkg.join(format!("{OUTPUT_NAME}.wasm")))?;

    let bundles = bundle::write_all(&layout, &pkg)?;
    loader::write(&layout, &bundles, &pkg)?;
    say(started, &format!("{} bundles, the loader and the manifest written", bundles.len()));

    if args.release {
        optimize::scripts(&root, &[pkg.join(format!("{OUTPUT_NAME}.js")), pkg.join(layout::LOADER_NAME)])?;
        say(started, "scripts minified");
    }
    std::fs::copy(root.join("style/main.css"), pkg.join(format!("{OUTPUT_NAME}.css"))).context("copying style/main.css")?;
    // The console's heartbeat worker: under /pkg, whose files are answered
    // as files (a revalidation gets its 304, not the app's not-found page).
    std::fs::copy(root.join(HEARTBEAT_CLOCK_SOURCE), pkg.join(HEARTBEAT_CLOCK_FILE)).context("copying the heartbeat clock")?;
    copy_dir(&root.join("public"), &site)?;
    if args.release {
        compress::all(&site)?;
        say(started, "precompressed");
    }

    if !args.no_server {
        build.server()?;
        say(started, "server built");
    }
    Ok(())
}

/// wasm-bindgen as its CLI runs for a split build (`--target web
/// --keep-lld-exports --no-demangle`): the chunks import the main module's
/// exports by their linker names. The wasm is then renamed from
/// `<name>_bg.wasm` to `<name>.wasm`, the name leptos's hydration script
/// asks for when `LEPTOS_OUTPUT_NAME` is set at compile time.
fn bindgen(main: &Path, pkg: &Path) -> Result<()> {
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen
        .input_path(main)
        .out_name(OUTPUT_NAME)
        .keep_lld_exports(true)
        .demangle(false)
        .omit_default_module_path(false);
    bindgen.web(true).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    bindgen.generate(pkg).map_err(|e| anyhow::anyhow!("wasm-bindgen: {e:#}"))?;
    std::fs::rename(pkg.join(format!("{OUTPUT_NAME}_bg.wasm")), pkg.join(format!("{OUTPUT_NAME}.wasm")))?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}

fn say(started: Instant, what: &str) {
    println!("clutchcall-site: {what} ({:.1} s)", started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_is_built_for_the_checkout_cargo_ran_it_from() {
        assert_eq!(workspace_of(Some(PathBuf::from("/elsewhere/frontend/site"))), Path::new("/elsewhere/frontend/site/../.."));
        assert_eq!(workspace_of(None), Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."), "run directly: where it was compiled");
    }
}
