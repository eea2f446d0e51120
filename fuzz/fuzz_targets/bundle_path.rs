//! The bundle path validator: an accepted path joined onto a root names a visible file below the
//! root, lexically, whatever the path looked like; markdown and payload files alike.

#![no_main]

use std::path::{Component, Path};

use iii_directory::doc::paths::{
    MAX_BUNDLE_PATH_BYTES, MAX_BUNDLE_PATH_SEGMENTS, is_markdown, validate_bundle_path,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(rel) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(path) = validate_bundle_path(rel) else {
        return;
    };
    assert!(rel.len() <= MAX_BUNDLE_PATH_BYTES);
    assert!(!rel.contains('\\') && !rel.contains(':') && !rel.chars().any(char::is_control));
    // No hidden name anywhere: the worker's own names (staging folders, completion markers)
    // start with a dot, so a bundle can never write one.
    assert!(rel.split('/').all(|s| !s.starts_with('.')), "{rel:?}");
    assert_eq!(
        is_markdown(rel),
        rel.rsplit('/')
            .next()
            .is_some_and(|f| f.len() > 3 && f.ends_with(".md")),
        "{rel:?}"
    );

    let components: Vec<Component<'_>> = path.components().collect();
    assert!(!components.is_empty() && components.len() <= MAX_BUNDLE_PATH_SEGMENTS);
    // `components` would hide `a/./b` (it drops inner `.`), so the segments are checked as written.
    assert_eq!(components.len(), rel.split('/').count(), "{rel:?}");
    assert!(
        components.iter().all(|c| matches!(c, Component::Normal(_))),
        "{rel:?}"
    );

    let root = Path::new("/srv/bundle-root");
    let joined = root.join(&path);
    assert!(joined.starts_with(root), "{rel:?} left the root");
    let below = lexically_normal(&joined);
    assert!(
        below.starts_with(root) && below != root,
        "{rel:?} left the root"
    );
    assert_eq!(below, joined, "{rel:?} is not already normal");
});

/// `path` with `.` dropped and each `..` taking away the component before it, without touching
/// the disk.
fn lexically_normal(path: &Path) -> std::path::PathBuf {
    let mut normal = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}
