//! Writes the split points' loader (`loader.js` with the build's data) and
//! the manifest the server preloads from.

use crate::layout::{Layout, LOADER_NAME};
use crate::OUTPUT_NAME;
use anyhow::Result;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;

const TEMPLATE: &str = include_str!("loader.js");

pub fn write(layout: &Layout, bundled: &BTreeSet<String>, pkg: &Path) -> Result<()> {
    std::fs::write(pkg.join(LOADER_NAME), loader(layout, bundled)?)?;
    // What leptos preloads for a page whose screens it knows: the screen's
    // bundle, or its one file.
    let manifest: serde_json::Map<String, serde_json::Value> = layout
        .splits
        .iter()
        .map(|s| {
            let files = if bundled.contains(&s.name) { vec![format!("bundle_{}", s.name)] } else { s.files() };
            (s.name.clone(), json!(files))
        })
        .collect();
    std::fs::write(pkg.join("__wasm_split_manifest.json"), serde_json::to_string_pretty(&manifest)?)?;
    Ok(())
}

fn loader(layout: &Layout, bundled: &BTreeSet<String>) -> Result<String> {
    let splits: serde_json::Map<String, serde_json::Value> = layout
        .splits
        .iter()
        .map(|s| (s.name.clone(), json!([u8::from(s.own_module), u8::from(bundled.contains(&s.name)), ranges(&s.chunks)])))
        .collect();
    let mut out = format!("import {{ initSync }} from \"./{OUTPUT_NAME}.js\";\n");
    out.push_str(&format!("const ccShared = {};\n", serde_json::to_string(&layout.shared)?));
    out.push_str(&format!("const ccCanary = {};\n", serde_json::to_string(&layout.canary)?));
    out.push_str(&format!("const ccSplits = {};\n", serde_json::to_string(&splits)?));
    // Every page loads this file: the template goes in without its comment
    // lines and indentation (none of its strings spans lines).
    for line in TEMPLATE.lines().map(str::trim_start).filter(|l| !l.is_empty() && !l.starts_with("//")) {
        out.push_str(line);
        out.push('\n');
    }
    for split in &layout.splits {
        out.push_str(&format!("export const __wasm_split_load_{0} = ccSplit({0:?});\n", split.name));
    }
    Ok(out)
}

/// "3-7,9": the runs in sorted chunk numbers.
fn ranges(numbers: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => runs.push((n, n)),
        }
    }
    runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::SplitPoint;

    #[test]
    fn chunk_numbers_are_written_as_runs() {
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[3, 4, 5, 6, 7, 9]), "3-7,9");
        assert_eq!(ranges(&[1, 3, 5]), "1,3,5");
    }

    #[test]
    fn the_loader_exports_one_loader_per_split_point_with_the_build_data() {
        let layout = Layout {
            splits: vec![
                SplitPoint { name: "__a_view".into(), chunks: vec![1, 2, 3], own_module: true },
                SplitPoint { name: "__b_view".into(), chunks: vec![], own_module: true },
            ],
            shared: vec!["__indirect_function_table".into(), "memory".into()],
            canary: None,
        };
        let bundled = BTreeSet::from(["__a_view".to_string()]);
        let js = loader(&layout, &bundled).unwrap();
        assert!(js.starts_with("import { initSync } from \"./clutchcall.js\";\n"));
        assert!(js.contains(r#"const ccSplits = {"__a_view":[1,1,"1-3"],"__b_view":[1,0,""]};"#));
        assert!(js.contains("export const __wasm_split_load___a_view = ccSplit(\"__a_view\");\n"));
        assert!(js.contains("export const __wasm_split_load___b_view = ccSplit(\"__b_view\");\n"));
        assert!(!js.lines().any(|l| l.starts_with("//") || l.starts_with(' ')), "comment lines and indentation are dropped");
    }
}
