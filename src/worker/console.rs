//! The worker's side of the iii console's injectable UI (`../shared/spec/console-ui.md`):
//! `iii-directory::ui-content` hands out the page's script and stylesheet, and one trigger per
//! asset, on the console's `console:script` and `console:style` types, tells the console they
//! exist. The console fetches each asset once through `ui-content` and serves it to browsers.
//!
//! The assets (`ui/page.js`, `ui/styles.css` at the crate root) are compiled into the binary.
//! With [`DEV_DIR_ENV`] set to a folder, they are read from that folder on every call instead,
//! and a change to a file there is announced the protocol's way: a new trigger for the same
//! path, then the old trigger unregistered, so the console replaces the asset in open tabs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::surface::UI_CONTENT;
use crate::error::{Error, Result, io_error, quoted};
use iii_sdk::IIIClient;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::triggers::Trigger;
use serde_json::{Value, json};

/// The development switch: a folder holding `page.js` and `styles.css`.
pub const DEV_DIR_ENV: &str = "III_DIRECTORY_UI_DIR";
/// The console refuses assets larger than this (protocol §2).
const MAX_ASSET_BYTES: usize = 8 * 1024 * 1024;
/// How often development mode looks at the asset files.
const DEV_POLL: Duration = Duration::from_millis(250);

/// One asset the console loads.
#[derive(Clone, Copy, Debug)]
pub struct Asset {
    /// The path in the console's namespace; its first segment is the page's CSS scope.
    pub path: &'static str,
    /// The file name under `ui/` (or the development folder).
    pub file: &'static str,
    /// The console's trigger type for this kind of asset.
    pub trigger_type: &'static str,
    pub content_type: &'static str,
    /// The bytes compiled into the binary.
    pub compiled: &'static str,
}

/// The page's assets.
pub const ASSETS: [Asset; 2] = [
    Asset {
        path: "iii-directory/page.js",
        file: "page.js",
        trigger_type: "console:script",
        content_type: "text/javascript; charset=utf-8",
        compiled: include_str!("../../ui/page.js"),
    },
    Asset {
        path: "iii-directory/styles.css",
        file: "styles.css",
        trigger_type: "console:style",
        content_type: "text/css; charset=utf-8",
        compiled: include_str!("../../ui/styles.css"),
    },
];

/// Where the bytes come from, decided once per process.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    Compiled,
    Folder(PathBuf),
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| match std::env::var_os(DEV_DIR_ENV) {
        Some(dir) if !dir.is_empty() => Source::Folder(PathBuf::from(dir)),
        _ => Source::Compiled,
    })
}

/// `iii-directory::ui-content`: `{path}` → `{content, content_type}`.
pub fn content(input: &Value) -> Result<Value> {
    let path = input
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::Invalid("invalid request: path must be a string".to_string()))?;
    let asset = ASSETS.iter().find(|a| a.path == path).ok_or_else(|| {
        let known: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
        Error::Invalid(format!(
            "unknown UI asset path {path}; this worker serves {}",
            known.join(", "),
            path = quoted(path)
        ))
    })?;
    let content = match source() {
        Source::Compiled => asset.compiled.to_string(),
        Source::Folder(dir) => read_asset(dir, asset)?,
    };
    Ok(json!({ "content": content, "content_type": asset.content_type }))
}

/// An asset from the development folder, as text, within the console's size limit.
fn read_asset(dir: &Path, asset: &Asset) -> Result<String> {
    let file = dir.join(asset.file);
    let content =
        std::fs::read_to_string(&file).map_err(io_error("read the console asset", &file))?;
    if content.len() > MAX_ASSET_BYTES {
        return Err(Error::Invalid(format!(
            "{} is too large for the console ({} bytes; max {MAX_ASSET_BYTES})",
            file.display(),
            content.len()
        )));
    }
    Ok(content)
}

/// The trigger that tells the console about one asset (the config is exactly `{path}`).
fn announce(iii: &IIIClient, asset: &Asset) -> Option<Trigger> {
    let input = RegisterTriggerInput::new(
        asset.trigger_type,
        UI_CONTENT,
        json!({ "path": asset.path }),
    );
    match iii.register_trigger(input) {
        Ok(trigger) => Some(trigger),
        Err(e) => {
            tracing::warn!(path = asset.path, "cannot register the console asset: {e}");
            None
        }
    }
}

/// Registers one trigger per asset; in development mode also starts the watch over the folder.
/// The SDK keeps the triggers and replays them on every reconnect, so this runs once (from
/// `setup.rs`). Returns how many assets were announced.
pub fn register(iii: &IIIClient) -> usize {
    let triggers: Vec<Option<Trigger>> = ASSETS.iter().map(|a| announce(iii, a)).collect();
    let announced = triggers.iter().flatten().count();
    if let Source::Folder(dir) = source() {
        tracing::info!(folder = %dir.display(), "console page served from {DEV_DIR_ENV}; changes are pushed to the console");
        let iii = iii.clone();
        let dir = dir.clone();
        let spawned = std::thread::Builder::new()
            .name("ui-dev-reload".into())
            .spawn(move || follow_folder(&iii, &dir, triggers));
        if let Err(e) = spawned {
            tracing::warn!("cannot watch {DEV_DIR_ENV}: {e}");
        }
    }
    announced
}

/// The fingerprint of an asset file, or `None` when it cannot be read.
fn fingerprint(dir: &Path, asset: &Asset) -> Option<blake3::Hash> {
    std::fs::read(dir.join(asset.file))
        .ok()
        .map(|bytes| blake3::hash(&bytes))
}

/// Development mode: when an asset file changes, registers a new trigger for its path and only
/// then unregisters the old one (the console replaces an asset when a second trigger for the
/// same path arrives; unregistering first would remove the page from open tabs meanwhile).
fn follow_folder(iii: &IIIClient, dir: &Path, mut triggers: Vec<Option<Trigger>>) {
    let mut seen: Vec<Option<blake3::Hash>> = ASSETS.iter().map(|a| fingerprint(dir, a)).collect();
    loop {
        std::thread::sleep(DEV_POLL);
        for (n, asset) in ASSETS.iter().enumerate() {
            let now = fingerprint(dir, asset);
            if now == seen[n] || now.is_none() {
                continue;
            }
            seen[n] = now;
            let fresh = announce(iii, asset);
            if let Some(old) = std::mem::replace(&mut triggers[n], fresh) {
                old.unregister();
            }
            tracing::info!(path = asset.path, "console asset changed; announced again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_paths_follow_the_protocol_rules() {
        for asset in ASSETS {
            assert!(!asset.path.is_empty() && asset.path.len() <= 512);
            assert!(!asset.path.starts_with('/') && !asset.path.contains('\\'));
            for segment in asset.path.split('/') {
                let mut chars = segment.chars();
                let first = chars.next().expect("non-empty segment");
                assert!(
                    first.is_ascii_lowercase() || first.is_ascii_digit(),
                    "{segment}"
                );
                assert!(
                    chars.all(|c| c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || matches!(c, '.' | '_' | '-')),
                    "{segment}"
                );
            }
            let extension = if asset.trigger_type == "console:script" {
                ".js"
            } else {
                ".css"
            };
            assert!(asset.path.ends_with(extension), "{}", asset.path);
            assert_eq!(asset.path.split('/').next(), Some("iii-directory"));
            assert!(asset.compiled.len() < MAX_ASSET_BYTES);
        }
    }

    #[test]
    fn an_unknown_path_names_itself_and_the_known_ones() {
        let err = content(&json!({ "path": "iii-directory/nope.js" }))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"iii-directory/nope.js\""), "{err}");
        assert!(
            err.contains("iii-directory/page.js") && err.contains("iii-directory/styles.css"),
            "{err}"
        );
        let err = content(&json!({})).unwrap_err().to_string();
        assert!(err.starts_with("invalid request:"), "{err}");
    }
}
