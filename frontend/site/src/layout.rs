//! Cuts the browser crate's wasm into a main module, a module per split
//! point (each lazy screen or panel) and the chunks split points share, and
//! reads what the loader must know as data: which files each split point
//! needs (the splitter's manifest) and which of the main module's exports
//! the chunks import (their import sections).

use crate::wasm;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The module the wasm imports the split points' loaders from. leptos's
/// `HydrationScripts` preloads it under this name when files are not hashed.
pub const LOADER_NAME: &str = "__wasm_split.______________________.js";
/// The module chunks import the main module's memory, table and globals
/// from; the loader provides it.
const SHARED_MODULE: &str = "__wasm_split";
/// In debug builds each chunk also imports a constant of this prefix, which
/// tells a chunk of another build from one of this build.
const CANARY_PREFIX: &str = "__canary_";

pub struct SplitPoint {
    pub name: String,
    /// The chunk numbers (`chunk_<n>.wasm`) it needs besides its own module.
    pub chunks: Vec<u32>,
    /// Whether it has a module of its own (`split_<name>.wasm`): none when
    /// everything it needs is in shared chunks.
    pub own_module: bool,
}

impl SplitPoint {
    /// Its files, without `.wasm`: chunks first, its own module last.
    pub fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = self.chunks.iter().map(|n| format!("chunk_{n}")).collect();
        if self.own_module {
            files.push(format!("split_{}", self.name));
        }
        files
    }
}

pub struct Layout {
    pub splits: Vec<SplitPoint>,
    /// The main module's exports the chunks import, by name.
    pub shared: Vec<String>,
    /// The debug builds' canary import, if the chunks have one.
    pub canary: Option<String>,
}

impl Layout {
    pub fn chunk_files(&self) -> usize {
        self.splits.iter().flat_map(|s| s.chunks.iter()).collect::<BTreeSet<_>>().len()
    }

    /// Fails unless the splitter gave the chunks their own read-only data.
    /// It re-packs each chunk's data at its own alignment; when the re-packed
    /// segment comes out longer than the linker's it silently keeps all data
    /// in the main module, and every page then loads every screen's static
    /// text. `frontend/src/lib.rs` reserves room for the re-packing
    /// (`SPLIT_DATA_SLACK`); this says when that room has run out.
    pub fn check_data(&self, pkg: &Path, main: &Path) -> Result<()> {
        let files: BTreeSet<String> = self.splits.iter().flat_map(SplitPoint::files).collect();
        let mut in_chunks = 0;
        for file in &files {
            in_chunks += wasm::data_bytes(&std::fs::read(pkg.join(format!("{file}.wasm")))?)?;
        }
        let in_main = wasm::data_bytes(&std::fs::read(main)?)?;
        println!("clutchcall-site: the main module holds {in_main} bytes of data, its {} chunks {in_chunks}", files.len());
        // Given up, the chunks keep a few bytes each: 7% of the data in a
        // release build. Split, they hold 65% of it in a release build and
        // 46% in a debug one (whose main module keeps every panic message
        // its own code can reach).
        if in_chunks * 4 < in_main + in_chunks {
            bail!("wasm-split kept the data in the main module: raise SPLIT_DATA_SLACK in frontend/src/lib.rs");
        }
        Ok(())
    }
}

/// Runs the splitter on `wasm`: the main module goes to `scratch/main.wasm`
/// (wasm-bindgen reads it there), the chunks and split modules into `pkg`.
pub fn split(wasm: &Path, scratch: &Path, pkg: &Path) -> Result<Layout> {
    let input = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    if scratch.exists() {
        std::fs::remove_dir_all(scratch)?;
    }
    std::fs::create_dir_all(scratch)?;
    let main_out = scratch.join("main.wasm");
    let mut options = wasm_split_cli_support::Options::new(&input);
    options.output_dir = scratch;
    options.main_out_path = &main_out;
    options.main_module = "./clutchcall.js";
    // The wasm imports its loaders from this module specifier, which the
    // bindings then import relative to themselves.
    let link_name = format!("./{LOADER_NAME}");
    options.link_name = &link_name;
    let split = wasm_split_cli_support::transform(options).map_err(|e| anyhow!("wasm-split: {e:?}"))?;
    drop(input);

    let mut splits = Vec::new();
    let manifest: BTreeMap<_, _> = split.prefetch_map.into_iter().collect();
    for (name, files) in manifest {
        let mut point = SplitPoint { name: name.clone(), chunks: Vec::new(), own_module: false };
        for file in files {
            if file == format!("split_{name}") {
                point.own_module = true;
            } else if let Some(n) = file.strip_prefix("chunk_").and_then(|n| n.parse::<u32>().ok()) {
                point.chunks.push(n);
            } else {
                bail!("the splitter lists {file} for {name}: neither chunk_<n> nor split_{name} (has wasm_split_cli_support changed how it names files?)");
            }
        }
        point.chunks.sort_unstable();
        splits.push(point);
    }

    // The chunks and split modules move into the site; the splitter's own
    // loader (which this build does not use) stays behind.
    let mut shared = BTreeSet::new();
    let mut canary = None;
    for point in &splits {
        for file in point.files() {
            let name = format!("{file}.wasm");
            let from = scratch.join(&name);
            if !from.exists() {
                continue; // a chunk shared with a split point moved already
            }
            let module = std::fs::read(&from)?;
            for (module_name, import) in wasm::imports(&module).with_context(|| format!("reading {name}"))? {
                if module_name != SHARED_MODULE {
                    bail!("{name} imports {import} from {module_name}; the loader only provides {SHARED_MODULE} (has the splitter changed what chunks import?)");
                }
                if import.starts_with(CANARY_PREFIX) {
                    canary = Some(import);
                } else {
                    shared.insert(import);
                }
            }
            // Copied, not renamed: the target directory may be on another
            // file system than the site.
            std::fs::copy(&from, pkg.join(&name))?;
            std::fs::remove_file(&from)?;
        }
    }
    // A split point's loader calls back into Rust through the table, whether
    // or not a chunk imports it.
    shared.insert("__indirect_function_table".to_string());
    Ok(Layout { splits, shared: shared.into_iter().collect(), canary })
}
