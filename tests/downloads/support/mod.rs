//! Loopback servers for the download tests and helpers over trees.
#![allow(dead_code)]

pub mod git;
pub mod http;
pub mod registry;

use std::collections::BTreeMap;
use std::path::Path;

/// Every entry under `base` (the index folder `data/` excepted), with its kind and content
/// hash or link target: equal maps mean the tree is byte for byte the same.
pub fn tree_state(base: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(base)
                .expect("under base")
                .to_string_lossy()
                .into_owned();
            if rel == "data" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).expect("read_link");
                out.insert(rel, format!("link {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                walk(base, &path, out);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                out.insert(rel, format!("file {}", blake3::hash(&bytes).to_hex()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(base, base, &mut out);
    out
}
