//! The build's one reader of wasm modules (wasmparser): sections, imports
//! and the size of the data section.

use anyhow::{bail, Context, Result};

/// One section as the module stores it: its id, then the bytes after the id
/// (the LEB128 length and the body), which the bundle format keeps as is.
pub struct Section<'a> {
    pub id: u8,
    pub stored: &'a [u8],
}

pub const MAGIC: [u8; 8] = [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0];
const DATA_SECTION: u8 = 11;

pub fn sections(module: &[u8]) -> Result<Vec<Section<'_>>> {
    if module.len() < 8 || module[..8] != MAGIC {
        bail!("not a wasm module");
    }
    let mut out = Vec::new();
    let mut at = 8;
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        let Some((id, range)) = payload?.as_section() else { continue };
        let end = usize::try_from(range.end)?;
        if module.get(at) != Some(&id) || end > module.len() {
            bail!("section {id} is not where the module says");
        }
        out.push(Section { id, stored: &module[at + 1..end] });
        at = end;
    }
    if at != module.len() {
        bail!("{} bytes after the last section", module.len() - at);
    }
    Ok(out)
}

/// (module, name) of every import.
pub fn imports(module: &[u8]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let wasmparser::Payload::ImportSection(reader) = payload? {
            for import in reader.into_imports() {
                let import = import?;
                out.push((import.module.to_string(), import.name.to_string()));
            }
        }
    }
    Ok(out)
}

/// Bytes in the data section (0 without one).
pub fn data_bytes(module: &[u8]) -> Result<usize> {
    Ok(sections(module)
        .context("reading sections")?
        .iter()
        .find(|s| s.id == DATA_SECTION)
        .map_or(0, |s| s.stored.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with one type section (one `() -> ()` type) and one custom
    /// section named "x" holding "hi".
    fn module() -> Vec<u8> {
        let mut m = MAGIC.to_vec();
        m.extend([1, 4, 1, 0x60, 0, 0]);
        m.extend([0, 4, 1, b'x', b'h', b'i']);
        m
    }

    #[test]
    fn sections_keep_their_stored_bytes() {
        let m = module();
        let s = sections(&m).unwrap();
        assert_eq!(s.iter().map(|s| s.id).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(s[0].stored, &[4, 1, 0x60, 0, 0]);
        assert_eq!(s[1].stored, &[4, 1, b'x', b'h', b'i']);
        assert_eq!(data_bytes(&m).unwrap(), 0);
    }

    #[test]
    fn garbage_is_not_a_module() {
        assert!(sections(b"not wasm").is_err());
        let mut m = module();
        m.push(1);
        assert!(sections(&m).is_err());
    }
}
