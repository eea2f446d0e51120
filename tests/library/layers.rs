//! The layering of `src/`, checked on the source: the numbered layers of ARCHITECTURE.md
//! ("Layers") are read from that file, and every import between modules must point down them;
//! no file imports a file that imports it back; the index never reaches a family's read or
//! write code.
//!
//! Imports are read from `crate::…`, `super::…` and `self::…` paths (in `use` lines and in
//! code), each resolved to the file of the longest module path it names; unit test modules are
//! left out. `lib.rs` only declares and re-exports, so paths through it are not counted. A
//! module is a file or folder at the top of `src/`; the binary's files (`main.rs`, `cli/`)
//! reach the library only through its public paths and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["index", "reconcile"]`) → file.
type Modules = BTreeMap<Vec<String>, PathBuf>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn resolve<'m>(modules: &'m Modules, path: &[String]) -> Option<&'m PathBuf> {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n].to_vec()))
}

/// The code of a file without its `#[cfg(test)] mod tests { … }` block and comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path a file's code names: `crate::a::b`, `super::x`, and the items of
/// `use crate::a::{b, c::d}` groups.
fn named_paths(code: &str, me: &[String], is_mod_file: bool) -> Vec<Vec<String>> {
    let base_of = |head: &str| -> Vec<String> {
        match head {
            "crate" => Vec::new(),
            "self" if is_mod_file => me.to_vec(),
            "self" => me[..me.len().saturating_sub(1)].to_vec(),
            // In a `mod.rs`/`lib.rs` file, `super` is the parent of the module itself.
            _ => me[..me.len().saturating_sub(1)].to_vec(),
        }
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..bytes.len().min(i + 7)].iter().collect();
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|h| rest.starts_with(h) && (i == 0 || !ident(bytes[i - 1])));
        let Some(head) = head else {
            i += 1;
            continue;
        };
        let mut path = base_of(head.trim_end_matches("::"));
        i += head.len();
        loop {
            let start = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            let segment: String = bytes[start..i].iter().collect();
            if segment == "super" {
                path.pop();
            } else if !segment.is_empty() {
                path.push(segment);
            }
            if bytes[i..].starts_with(&[':', ':', '{']) {
                let close = bytes[i..]
                    .iter()
                    .position(|c| *c == '}')
                    .map_or(bytes.len(), |p| i + p);
                let group: String = bytes[i + 3..close].iter().collect();
                for item in group.split(',') {
                    let item = item.split(" as ").next().unwrap_or_default().trim();
                    let mut full = path.clone();
                    full.extend(
                        item.split("::")
                            .filter(|s| !s.is_empty() && *s != "self")
                            .map(str::to_string),
                    );
                    found.push(full);
                }
                i = close;
                break;
            }
            if bytes[i..].starts_with(&[':', ':']) {
                i += 2;
                continue;
            }
            found.push(path.clone());
            break;
        }
    }
    found
}

/// The binary's own files: `main.rs` and its `cli` modules.
fn is_binary(src: &Path, file: &Path) -> bool {
    let name = file
        .strip_prefix(src)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let name = name.to_string_lossy();
    name == "main.rs" || name.starts_with("cli/")
}

fn graph() -> (PathBuf, BTreeMap<PathBuf, BTreeSet<PathBuf>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| !is_binary(&src, f));
    let modules: Modules = files
        .iter()
        .map(|f| (module_path(&src, f), f.clone()))
        .collect();
    let lib = src.join("lib.rs");
    let mut edges = BTreeMap::new();
    for file in &files {
        let me = module_path(&src, file);
        let is_mod_file = file.ends_with("mod.rs") || file.ends_with("lib.rs");
        let text = std::fs::read_to_string(file).expect("read");
        let deps: BTreeSet<PathBuf> = named_paths(&code(&text), &me, is_mod_file)
            .into_iter()
            .filter_map(|path| resolve(&modules, &path).cloned())
            .filter(|target| target != file && *target != lib)
            .collect();
        edges.insert(file.clone(), deps);
    }
    (src, edges)
}

#[test]
fn no_file_of_src_imports_one_that_imports_it_back() {
    let (src, edges) = graph();
    // Depth-first search for a cycle, reporting its path.
    fn visit(
        node: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        done: &mut BTreeSet<PathBuf>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            return Some(stack[at..].to_vec());
        }
        if !done.insert(node.clone()) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(cycle) = visit(node, &edges, &mut done, &mut Vec::new()) {
            let names: Vec<String> = cycle
                .iter()
                .map(|p| p.strip_prefix(&src).unwrap_or(p).display().to_string())
                .collect();
            panic!("import loop: {}", names.join(" -> "));
        }
    }
    assert!(
        edges.len() > 40,
        "the walk found too few files: {}",
        edges.len()
    );
}

#[test]
fn the_index_knows_the_families_only_through_their_rules() {
    let (src, edges) = graph();
    let index = src.join("index");
    let families = [
        "skills",
        "system_prompts",
        "agents",
        "directory.rs",
        "family_writes.rs",
    ]
    .map(|f| src.join(f));
    for (file, deps) in &edges {
        if !file.starts_with(&index) {
            continue;
        }
        for dep in deps {
            assert!(
                !families.iter().any(|f| dep.starts_with(f)),
                "{} imports {}",
                file.display(),
                dep.display()
            );
        }
    }
}

/// The top-level module a file of `src/` belongs to (`index` for `src/index/reconcile/mod.rs`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

/// The numbered layers of ARCHITECTURE.md's "Layers" section: each item starts with its
/// modules in backticks, before the first colon.
fn documented_layers() -> BTreeMap<String, usize> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).expect("ARCHITECTURE.md");
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("a \"Layers\" section");
    let mut layers = BTreeMap::new();
    for line in section.lines() {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(number) = number.trim().parse::<usize>() else {
            continue;
        };
        let modules = rest.split(':').next().unwrap_or_default();
        for module in modules.split('`').skip(1).step_by(2) {
            let earlier = layers.insert(module.to_string(), number);
            assert!(
                earlier.is_none(),
                "ARCHITECTURE.md puts `{module}` in two layers"
            );
        }
    }
    assert!(
        layers.len() > 10,
        "too few modules in the layers: {layers:?}"
    );
    layers
}

/// A module may import the modules of lower layers, and the leaves of its own layer (the
/// modules there that import nothing else of that layer); nothing above it.
#[test]
fn imports_point_down_the_numbered_layers() {
    let (src, edges) = graph();
    let layers = documented_layers();
    let mut unplaced: BTreeSet<String> = BTreeSet::new();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut imports: Vec<(PathBuf, PathBuf, String, String)> = Vec::new();
    for (file, deps) in &edges {
        if file.ends_with("lib.rs") {
            continue;
        }
        let from = module_of(&src, file);
        if !layers.contains_key(&from) {
            unplaced.insert(from.clone());
        }
        for dep in deps {
            let to = module_of(&src, dep);
            if to != from {
                uses.entry(from.clone()).or_default().insert(to.clone());
                imports.push((file.clone(), dep.clone(), from.clone(), to));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules missing from ARCHITECTURE.md's layers: {unplaced:?}"
    );
    let layer = |module: &str| layers[module];
    let is_leaf = |module: &str| {
        uses.get(module)
            .is_none_or(|used| used.iter().all(|other| layer(other) != layer(module)))
    };
    let shown = |p: &Path| p.strip_prefix(&src).unwrap_or(p).display().to_string();
    let mut broken = Vec::new();
    for (file, dep, from, to) in &imports {
        let (own, theirs) = (layer(from), layer(to));
        let allowed = theirs < own || (theirs == own && is_leaf(to));
        if !allowed {
            let why = if theirs > own {
                format!("layer {theirs} is above layer {own}")
            } else {
                format!("`{to}` imports another module of layer {own}, so it is not a leaf")
            };
            broken.push(format!(
                "{} (`{from}`, layer {own}) imports {} (`{to}`): {why}",
                shown(file),
                shown(dep)
            ));
        }
    }
    assert!(
        broken.is_empty(),
        "imports against ARCHITECTURE.md's layers:\n{}",
        broken.join("\n")
    );
}
