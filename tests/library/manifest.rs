//! The registered surface is a contract: every function's id, description, request and response
//! schemas, metadata, and each trigger type's payload, exactly as the worker registers them.
//! They are compared with a committed snapshot, so a change to how the surface is built (one
//! table entry per function, schemas derived from the request types) cannot change what is
//! registered unnoticed. A deliberate change to the surface updates the snapshot:
//! `UPDATE_SNAPSHOTS=1 cargo test --test library manifest::`, then review its diff.

use std::path::PathBuf;

use iii_directory::Family;
use iii_directory::worker::surface::{manifest, registered_payload};
use serde_json::{Value, json};

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/library/snapshots/manifest.json")
}

/// The manifest without its version (which follows the crate's), plus each family's payload
/// schema as the SDK registers it.
fn surface() -> Value {
    let mut manifest = manifest();
    manifest
        .as_object_mut()
        .expect("an object")
        .remove("version");
    let payloads: serde_json::Map<String, Value> =
        [Family::Skills, Family::SystemPrompts, Family::Agents]
            .into_iter()
            .map(|family| {
                (
                    family.trigger_type().to_string(),
                    registered_payload(family),
                )
            })
            .collect();
    json!({ "manifest": manifest, "registered_payloads": payloads })
}

#[test]
fn the_registered_surface_is_the_snapshot() {
    let actual = serde_json::to_string_pretty(&surface()).expect("JSON") + "\n";
    let path = snapshot_path();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).expect("the committed snapshot");
    if actual != expected {
        let (a, e): (Vec<_>, Vec<_>) = (actual.lines().collect(), expected.lines().collect());
        let at = a
            .iter()
            .zip(&e)
            .position(|(a, e)| a != e)
            .unwrap_or(a.len().min(e.len()));
        panic!(
            "the registered surface differs from {} at line {}:\n  now:      {}\n  snapshot: {}\n\
             (a deliberate change: UPDATE_SNAPSHOTS=1 cargo test --test library manifest::)",
            path.display(),
            at + 1,
            a.get(at).unwrap_or(&"<end>"),
            e.get(at).unwrap_or(&"<end>"),
        );
    }
}
