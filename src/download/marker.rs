//! The completion marker of an automatic download (contract §3.10):
//! `<skills_folder>/<worker>/.iii-skill-complete`, pretty JSON `{worker, source: "registry",
//! tag_or_version, schema: 1}`, written atomically once a worker's bundle has landed. The boot
//! reconcile skips workers that have one. Its name starts with a dot and does not end in `.md`,
//! so the index never serves it, and no bundle can write it (bundle paths have no dot names).
//! Beside it in the namespace folder, `guard::RECORD_FILE` (`.iii-bundle-files`) records what the
//! bundle wrote, by the same rules.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{Error, Result};
use crate::registry::Release;
use crate::store::{self, Mode};

/// The marker's file name (contract).
pub const MARKER_FILE: &str = ".iii-skill-complete";
/// The marker's format version (contract).
const MARKER_SCHEMA: u64 = 1;

pub fn marker_path(skills_folder: &Path, worker: &str) -> PathBuf {
    skills_folder.join(worker).join(MARKER_FILE)
}

/// Whether `worker`'s bundle was auto-downloaded to completion before.
pub fn has_marker(skills_folder: &Path, worker: &str) -> bool {
    marker_path(skills_folder, worker).is_file()
}

/// Records that `worker`'s bundle at `release` landed whole.
pub fn write_marker(skills_folder: &Path, worker: &str, release: &Release) -> Result<()> {
    let record = json!({
        "worker": worker,
        "source": "registry",
        "tag_or_version": release.value(),
        "schema": MARKER_SCHEMA,
    });
    let text = serde_json::to_string_pretty(&record).map_err(Error::json)?;
    store::write_atomic(
        &[skills_folder],
        &marker_path(skills_folder, worker),
        text.as_bytes(),
        Mode::Replace,
    )
    .map(drop)
    .map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_pretty_json_with_the_contract_fields() {
        let dir = tempfile::tempdir().expect("temp");
        assert!(!has_marker(dir.path(), "mailer"));
        write_marker(dir.path(), "mailer", &Release::Version("1.2.3".into())).expect("write");
        assert!(has_marker(dir.path(), "mailer"));
        let text = std::fs::read_to_string(marker_path(dir.path(), "mailer")).expect("read");
        assert!(text.contains('\n'), "pretty: {text}");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            value,
            json!({"worker": "mailer", "source": "registry", "tag_or_version": "1.2.3", "schema": 1})
        );
    }
}
