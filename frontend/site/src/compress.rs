//! Precompression: `.gz` and `.br` beside every file of the site the
//! browser fetches (wasm, scripts, styles, SVG), which the server sends to
//! browsers that accept them.

use anyhow::Result;
use std::io::Write;
use std::path::Path;

pub fn all(site: &Path) -> Result<()> {
    let mut files = Vec::new();
    collect(site, &mut files)?;
    // Brotli at quality 11 is the slow part: one file list per core.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let per_core = files.len().div_ceil(cores).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = files.chunks(per_core).map(|part| scope.spawn(move || part.iter().try_for_each(|p| compress(p)))).collect();
        workers.into_iter().try_for_each(|w| w.join().expect("a compression thread panicked"))
    })
}

fn collect(dir: &Path, files: &mut Vec<std::path::PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("wasm" | "js" | "css" | "svg")) {
            files.push(path);
        }
    }
    Ok(())
}

fn compress(path: &Path) -> Result<()> {
    let bytes = std::fs::read(path)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&bytes)?;
    std::fs::write(with_suffix(path, "gz"), gz.finish()?)?;
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, ..Default::default() };
    brotli::BrotliCompress(&mut bytes.as_slice(), &mut br, &params)?;
    std::fs::write(with_suffix(path, "br"), br)?;
    Ok(())
}

fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    name.into()
}
