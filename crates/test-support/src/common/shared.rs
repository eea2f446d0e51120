//! Finding `../shared`, the seeds and skills corpus the project was started from. A fresh clone
//! does not have it: a test that needs it then skips, saying in one line how to enable it, and
//! passes. CI, which has the folder, sets [`REQUIRE_ENV`] so that a missing folder fails there.
//!
//! Shared by the unit tests and the integration tests.

use std::path::{Path, PathBuf};

/// Points the tests at a copy of the shared folder (default: `../shared` beside the crate).
pub const SHARED_ENV: &str = "III_DIRECTORY_SHARED";

/// When set, a missing shared file fails the test instead of skipping it.
pub const REQUIRE_ENV: &str = "III_DIRECTORY_REQUIRE_SHARED";

/// `rel` under the shared folder, or `None` (after saying so) when it is not there.
pub fn shared_path(rel: &str) -> Option<PathBuf> {
    let base = std::env::var_os(SHARED_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| crate_dir().join("../shared"));
    let path = base.join(rel);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os(REQUIRE_ENV).is_none(),
        "{} is missing and {REQUIRE_ENV} is set",
        path.display()
    );
    eprintln!(
        "skipped: needs {} (run from a checkout beside the project's shared/ folder, or set \
         {SHARED_ENV}=<folder>)",
        path.display()
    );
    None
}

/// The `iii-directory` crate's folder (the repository's root), where this crate sits under
/// `crates/test-support`.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/test-support sits two folders below the crate")
}
