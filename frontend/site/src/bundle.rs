//! A screen's chunks travel as one file.
//!
//! The splitter cuts a screen into its own module plus every chunk it shares
//! with other screens, so a page fetched 40–240 files, most under 1 KB, each
//! compressed alone: a quarter of their size lost (BENCHMARKS.md, fifth
//! pass). Each chunk is a module of its own that imports the main module's
//! memory and table, so several can travel in one response and still be
//! instantiated apart. The chunk files stay too: a screen reached by a link
//! after another fetches only the chunks it still lacks, one by one.
//!
//! Format (read in the browser by `ccParts` in `loader.js`): a little-endian
//! u32 header length; a JSON header `[[file, [section id, ...]], ...]`; then
//! the modules' sections grouped by section id (ascending), each as the
//! module stores it (LEB128 length, body), module by module in header order.
//! Like with like (code beside code, imports beside imports) compresses 3–5
//! KB better on the big screens than whole modules end to end.

use crate::layout::Layout;
use crate::wasm::{self, MAGIC};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Writes `bundle_<split point>.wasm` for every split point with more than
/// one file; returns the split points bundled.
pub fn write_all(layout: &Layout, pkg: &Path) -> Result<BTreeSet<String>> {
    let mut bundled = BTreeSet::new();
    for split in &layout.splits {
        let files = split.files();
        if files.len() < 2 {
            continue;
        }
        let mut modules = Vec::new();
        for file in files {
            let bytes = std::fs::read(pkg.join(format!("{file}.wasm")))?;
            modules.push((file, bytes));
        }
        let bytes = bundle(modules).with_context(|| format!("bundling {}", split.name))?;
        std::fs::write(pkg.join(format!("bundle_{}.wasm", split.name)), bytes)?;
        bundled.insert(split.name.clone());
    }
    Ok(bundled)
}

/// The bundle of `modules` (file name, bytes), checked to give every module
/// back byte for byte.
fn bundle(mut modules: Vec<(String, Vec<u8>)>) -> Result<Vec<u8>> {
    // Smallest first: similar small chunks sit within gzip's 32 KB window.
    modules.sort_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| a.0.cmp(&b.0)));
    let mut header = Vec::new();
    let mut by_id: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    for (file, bytes) in &modules {
        let sections = wasm::sections(bytes).with_context(|| format!("reading {file}"))?;
        header.push((file.clone(), sections.iter().map(|s| s.id).collect::<Vec<_>>()));
        for section in sections {
            by_id.entry(section.id).or_default().extend_from_slice(section.stored);
        }
    }
    let header = serde_json::to_vec(&header)?;
    let mut out = Vec::with_capacity(4 + header.len() + by_id.values().map(Vec::len).sum::<usize>());
    out.extend_from_slice(&u32::try_from(header.len())?.to_le_bytes());
    out.extend_from_slice(&header);
    for body in by_id.values() {
        out.extend_from_slice(body);
    }
    let back = unbundle(&out)?;
    for (file, bytes) in &modules {
        if back.get(file) != Some(bytes) {
            bail!("the bundle does not give {file} back as it was");
        }
    }
    Ok(out)
}

/// The modules of a bundle, by file name: what `ccParts` does in the
/// browser, here to check every bundle written.
fn unbundle(bundle: &[u8]) -> Result<BTreeMap<String, Vec<u8>>> {
    let header_len = u32::from_le_bytes(bundle.get(..4).context("no header length")?.try_into()?) as usize;
    let header: Vec<(String, Vec<u8>)> = serde_json::from_slice(bundle.get(4..4 + header_len).context("short header")?)?;
    let ids: BTreeSet<u8> = header.iter().flat_map(|(_, ids)| ids.iter().copied()).collect();
    let mut at = 4 + header_len;
    // (module, id) -> its sections of that id, in order.
    let mut pieces: BTreeMap<(usize, u8), Vec<&[u8]>> = BTreeMap::new();
    for id in ids {
        for (m, (_, sections)) in header.iter().enumerate() {
            for _ in sections.iter().filter(|&&s| s == id) {
                let start = at;
                at = section_end(bundle, at)?;
                pieces.entry((m, id)).or_default().push(&bundle[start..at]);
            }
        }
    }
    if at != bundle.len() {
        bail!("{} bytes left over", bundle.len() - at);
    }
    let mut out = BTreeMap::new();
    for (m, (file, sections)) in header.iter().enumerate() {
        let mut module = MAGIC.to_vec();
        let mut next: BTreeMap<u8, usize> = BTreeMap::new();
        for &id in sections {
            let i = next.entry(id).or_default();
            module.push(id);
            module.extend_from_slice(pieces[&(m, id)][*i]);
            *i += 1;
        }
        out.insert(file.clone(), module);
    }
    Ok(out)
}

/// The end of the section whose LEB128 length starts at `at`.
fn section_end(bytes: &[u8], mut at: usize) -> Result<usize> {
    let (mut len, mut shift) = (0usize, 0);
    loop {
        let b = *bytes.get(at).context("a section runs past the end")?;
        at += 1;
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let end = at + len;
    if end > bytes.len() {
        bail!("a section runs past the end");
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(types: u8, custom: &[u8]) -> Vec<u8> {
        let mut m = MAGIC.to_vec();
        m.extend([1, 1 + 3 * types, types]);
        for _ in 0..types {
            m.extend([0x60, 0, 0]);
        }
        m.extend([0, 2 + custom.len() as u8, 1, b'c']);
        m.extend_from_slice(custom);
        m
    }

    #[test]
    fn a_bundle_gives_back_every_module_and_groups_sections_by_id() {
        let a = module(2, b"aaaa");
        let b = module(1, b"b");
        let out = bundle(vec![("chunk_1".into(), a.clone()), ("split_x".into(), b.clone())]).unwrap();
        let back = unbundle(&out).unwrap();
        assert_eq!(back["chunk_1"], a);
        assert_eq!(back["split_x"], b);
        let header_len = u32::from_le_bytes(out[..4].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&out[4..4 + header_len]).unwrap();
        // Smallest first; custom sections (id 0) of both before their types.
        assert_eq!(header, serde_json::json!([["split_x", [1, 0]], ["chunk_1", [1, 0]]]));
        assert_eq!(out[4 + header_len], 3, "the first section after the header is split_x's custom one (length 3)");
    }

    #[test]
    fn a_cut_bundle_is_refused() {
        let out = bundle(vec![("chunk_1".into(), module(1, b"a")), ("chunk_2".into(), module(1, b"b"))]).unwrap();
        assert!(unbundle(&out[..out.len() - 1]).is_err());
    }
}
