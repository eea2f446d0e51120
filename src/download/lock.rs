//! The bundles lock (`bundles_lock_path`, by default `<skills_folder>/iii-bundles.lock.json`):
//! one JSON file, meant to be committed, recording for every downloaded bundle where it came
//! from and what it landed. Keys come out in a fixed order (struct fields in declaration order,
//! bundles by namespace, files by route and path), so two landings of the same bytes give the
//! same text and a diff shows only what changed.
//!
//! ```json
//! { "schema": 1,
//!   "bundles": {
//!     "mailer": {
//!       "namespace": "mailer",
//!       "source": { "kind": "registry", "worker": "mailer", "tag": "latest",
//!                   "version": "1.2.3", "digest": "sha256:…" },
//!       "files": [ { "path": "mailer/SKILL.md", "route": "skills", "size": 812,
//!                    "sha256": "…" } ],
//!       "landed_at": "2026-12-02T10:41:07.123456789+00:00" } } }
//! ```
//!
//! A file's `path` is relative to the root its route lands in (`skills_folder` for `skills`
//! and `system-prompts`, `agents_folder` for `agents`), exactly where it sits. The lock lands
//! in the same staged, all-or-nothing landing as the files (`store::landing`, destination
//! `BundlesLock`), read and rewritten under the landing lock: after a crash, the recovery rolls
//! both forward or neither. The file's name does not end in `.md` (the layout rules refuse
//! one that would), so the index never serves it.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::doc::classify::{PathClass, classify};
use crate::doc::conflict;
use crate::doc::paths::is_markdown;
use crate::error::{Error, Result, io_error};
use crate::registry::Release;

use super::source::Source;
use crate::store::landing::{Dest, FileToLand as File};

/// The lock's format version.
pub const LOCK_SCHEMA: u32 = 1;
/// The largest lock read: 2,000 files per bundle take about 250 KiB, so this is hundreds of
/// bundles; a larger file is not one of ours.
const MAX_LOCK_BYTES: u64 = 64 << 20;

/// The whole lock file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub schema: u32,
    /// One entry per bundle, by namespace.
    pub bundles: BTreeMap<String, Entry>,
}

/// One bundle's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub namespace: String,
    pub source: LockedSource,
    /// Every file the bundle brought, as upstream has it (a file kept with a local edit is
    /// listed with the upstream bytes, so it reads as modified).
    pub files: Vec<LockedFile>,
    /// When it landed (RFC 3339, UTC).
    pub landed_at: String,
}

impl Entry {
    /// Its files as the landing's check reads them when the namespace lost its record.
    pub fn locked_bytes(&self) -> Vec<super::guard::LockedBytes> {
        self.files
            .iter()
            .map(|f| super::guard::LockedBytes {
                dest: f.route.dest(),
                rel: f.path.clone(),
                size: f.size,
                sha256: f.sha256.clone(),
            })
            .collect()
    }
}

/// Where a bundle came from, resolved: what another machine needs to fetch the same bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LockedSource {
    Repo {
        repo: String,
        branch: String,
        /// The folder of the repository the bundle was read from (`skills/<skill>`).
        folder: String,
        /// The commit the branch pointed at (`git rev-parse HEAD` of the clone).
        commit: Option<String>,
    },
    Registry {
        worker: String,
        /// The tag asked for, when one was (absent for a pinned version).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tag: Option<String>,
        /// The version the registry answered with (the one asked for when it named none).
        version: Option<String>,
        /// `sha256:<hex>` of the registry's bundle (see [`registry_digest`]).
        digest: String,
    },
}

/// Where a file was routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    Skills,
    SystemPrompts,
    Agents,
}

impl Route {
    /// The root the route's paths are relative to.
    pub fn dest(self) -> Dest {
        match self {
            Route::Skills | Route::SystemPrompts => Dest::Skills,
            Route::Agents => Dest::Agents,
        }
    }
}

/// One landed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedFile {
    pub path: String,
    pub route: Route,
    pub size: u64,
    pub sha256: String,
}

/// What a fetch learned about its source beyond the request: the resolved commit or version
/// and the digest, kept on the [`Bundle`](super::Bundle) until it lands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub commit: Option<String>,
    pub version: Option<String>,
    pub digest: Option<String>,
    /// The tag a restore keeps in the lock while it fetches the locked version.
    pub tag: Option<String>,
}

/// The hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// The hex sha256 of the file at `path`, streamed; `None` when it is not a regular file or
/// cannot be read.
pub fn file_sha256(path: &Path) -> Option<(u64, String)> {
    let meta = fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut file = fs::File::open(path).ok()?;
    let size = std::io::copy(&mut file, &mut hasher).ok()?;
    Some((size, hex(&hasher.finalize())))
}

/// The digest of a registry bundle as the registry served it: sha256 over its entries sorted by
/// path, each as `path`, a zero byte, the content's length in decimal, a zero byte, the content.
/// Routing does not enter it, so it names the published bytes themselves.
pub fn registry_digest<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut entries: Vec<(&str, &str)> = entries.collect();
    entries.sort_unstable();
    let mut hasher = Sha256::new();
    for (path, content) in entries {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(content.len().to_string().as_bytes());
        hasher.update([0]);
        hasher.update(content.as_bytes());
    }
    format!("sha256:{}", hex(&hasher.finalize()))
}

/// The route of a file landed under `dest` at `rel_in_namespace` (its path inside the
/// namespace folder for `skills_folder`).
pub fn route_of(dest: Dest, rel_in_namespace: &str) -> Route {
    match dest {
        Dest::Agents => Route::Agents,
        _ if is_markdown(rel_in_namespace)
            && classify(rel_in_namespace) == PathClass::SystemPrompt =>
        {
            Route::SystemPrompts
        }
        _ => Route::Skills,
    }
}

impl LockedSource {
    /// The locked form of `source` with what its fetch resolved.
    pub fn of(source: &Source, resolved: &Resolved) -> LockedSource {
        match source {
            Source::Repo {
                repo,
                skill,
                branch,
            } => LockedSource::Repo {
                // The lock is meant to be committed: the clone's credentials stay out of it
                // (an update or restore asks git's credential helpers).
                repo: super::url::without_credentials(repo).into_owned(),
                branch: branch.clone(),
                folder: format!("skills/{skill}"),
                commit: resolved.commit.clone(),
            },
            Source::Registry { worker, release } => {
                let (tag, asked) = match release {
                    Release::Tag(tag) => (Some(tag.clone()), None),
                    Release::Version(version) => (None, Some(version.clone())),
                };
                LockedSource::Registry {
                    worker: worker.clone(),
                    tag: resolved.tag.clone().or(tag),
                    version: resolved.version.clone().or(asked),
                    digest: resolved.digest.clone().unwrap_or_default(),
                }
            }
        }
    }
}

/// The entry of a bundle whose files (placed, under their roots) are `files`; `folder` is the
/// namespace's folder under `skills_folder`.
pub fn entry<'a>(
    namespace: &str,
    source: LockedSource,
    folder: &str,
    files: impl Iterator<Item = &'a File>,
) -> Entry {
    let prefix = format!("{folder}/");
    let mut files: Vec<LockedFile> = files
        .map(|file| {
            let inside = file.rel.strip_prefix(&prefix).unwrap_or(&file.rel);
            LockedFile {
                path: file.rel.clone(),
                route: route_of(file.dest, inside),
                size: file.bytes.len() as u64,
                sha256: sha256_hex(&file.bytes),
            }
        })
        .collect();
    files.sort_by(|a, b| (a.route.dest(), &a.path).cmp(&(b.route.dest(), &b.path)));
    Entry {
        namespace: namespace.to_string(),
        source,
        files,
        landed_at: crate::time::Stamp::now().rfc3339(),
    }
}

/// The lock at `path`: empty when there is none yet. A file that is not a lock of ours (or of a
/// later schema) is an error rather than a fresh lock, which would drop every other bundle's
/// entry.
pub fn read(path: &Path) -> Result<Lock> {
    let meta = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Lock {
                schema: LOCK_SCHEMA,
                ..Lock::default()
            });
        }
        Err(e) => return Err(Error::Io(io_error("stat", path)(e))),
        Ok(meta) => meta,
    };
    let unreadable = |why: String| {
        Error::Invalid(format!(
            "the bundles lock {} is not a lock this worker can read ({why}); fix or move it away (bundles_lock_path); nothing was written",
            path.display()
        ))
    };
    if !meta.is_file() {
        return Err(unreadable("not a regular file".into()));
    }
    if meta.len() > MAX_LOCK_BYTES {
        return Err(unreadable(format!("larger than {MAX_LOCK_BYTES} bytes")));
    }
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_LOCK_BYTES).read_to_end(&mut bytes))
        .map_err(io_error("read", path))?;
    let lock: Lock = serde_json::from_slice(&bytes).map_err(|e| {
        match conflict::has_markers(&String::from_utf8_lossy(&bytes)) {
            true => conflicted(path),
            false => unreadable(e.to_string()),
        }
    })?;
    if lock.schema != LOCK_SCHEMA {
        return Err(unreadable(format!("schema {}", lock.schema)));
    }
    // The lock is meant to be committed, so a cloned project's may say anything: a namespace
    // or a path that leaves its root would have the status, the plans and the restore look at
    // (and report the digest or the names of) files elsewhere.
    let stray_namespace = lock
        .bundles
        .iter()
        .find(|(key, entry)| *key != &entry.namespace || !one_folder_name(&entry.namespace));
    if let Some((key, entry)) = stray_namespace {
        return Err(unreadable(format!(
            "the entry {} names the namespace {}, which is not the name of one folder of \
             skills_folder matching its key",
            crate::error::quoted(key),
            crate::error::quoted(&entry.namespace)
        )));
    }
    let stray = lock.bundles.values().find_map(|entry| {
        entry
            .files
            .iter()
            .find(|file| !plain_relative(&file.path))
            .map(|file| (&entry.namespace, &file.path))
    });
    if let Some((namespace, path)) = stray {
        return Err(unreadable(format!(
            "bundle {} lists the file {}, which is not a plain relative path inside its root",
            crate::error::quoted(namespace),
            crate::error::quoted(path)
        )));
    }
    Ok(lock)
}

/// The lock holds a merge's conflict markers: the lock is committed, and two branches that each
/// downloaded a bundle both changed it. Says how to resolve it; no JSON parser error would.
fn conflicted(path: &Path) -> Error {
    Error::Invalid(format!(
        "the bundles lock {path} holds unresolved git merge-conflict markers ({markers}): two \
         branches each changed it, and the merge left both versions in the file; nothing was \
         written. Resolve it, then `git add` it: either keep the entries of both sides, delete \
         the marker lines and make sure what is left is one valid JSON object (a comma between \
         two entries, none after the last); or take one side whole with `git checkout --ours -- \
         {path}` (or `--theirs`) and download again each bundle only the other side had \
         (`iii-directory download …`), so that the lock records it. Where both sides changed \
         the same bundle, `iii-directory bundles restore <namespace> --force` then lands it \
         exactly as the lock you kept records it (without `--force`, files that differ from the \
         lock stay as local edits), and `iii-directory bundles verify` checks every file \
         against the lock",
        path = path.display(),
        markers = conflict::MARKER_LINES,
    ))
}

/// Whether `path` names a file under a root: relative, each `/`-separated part a name (no
/// `.`, `..` or empty part, no backslash or NUL).
fn plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains(['\\', '\0'])
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Whether `name` names one folder: a plain relative path of one part.
fn one_folder_name(name: &str) -> bool {
    plain_relative(name) && !name.contains('/')
}

impl Lock {
    /// The lock as it is written: pretty JSON and a final newline.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(Error::json)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// `D334`: `namespace` has no entry in the bundles lock; `then` says what that means for the
/// call (its own sentence), and the error points at the bundles the lock does record.
pub fn not_locked(namespace: &str, then: &str) -> Error {
    Error::coded(
        crate::code::Code::BundleNotLocked,
        format!(
            "bundle {} is not in the bundles lock; {then}",
            crate::error::quoted(namespace)
        ),
        &[crate::error::next(
            super::BundlesFunction::List.id(),
            "see the bundles the lock records",
        )],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_reads_back_and_keeps_its_key_order() {
        let source = LockedSource::Registry {
            worker: "mailer".into(),
            tag: Some("latest".into()),
            version: Some("1.2.3".into()),
            digest: registry_digest([("SKILL.md", "# Mailer\n")].into_iter()),
        };
        let files = [
            File {
                dest: Dest::Skills,
                rel: "mailer/system-prompts/clerk.md".into(),
                bytes: b"---\ndescription: d\n---\n".to_vec(),
                executable: false,
            },
            File {
                dest: Dest::Agents,
                rel: "captain.md".into(),
                bytes: b"---\nname: c\n---\n".to_vec(),
                executable: false,
            },
            File {
                dest: Dest::Skills,
                rel: "mailer/SKILL.md".into(),
                bytes: b"# Mailer\n".to_vec(),
                executable: false,
            },
        ];
        let mut lock = Lock {
            schema: LOCK_SCHEMA,
            ..Lock::default()
        };
        let entry = entry("mailer", source, "mailer", files.iter());
        let routes: Vec<(Route, &str)> = entry
            .files
            .iter()
            .map(|f| (f.route, f.path.as_str()))
            .collect();
        assert_eq!(
            routes,
            [
                (Route::Skills, "mailer/SKILL.md"),
                (Route::SystemPrompts, "mailer/system-prompts/clerk.md"),
                (Route::Agents, "captain.md"),
            ]
        );
        lock.bundles.insert("mailer".into(), entry);
        let text = String::from_utf8(lock.to_bytes().expect("bytes")).expect("utf8");
        let order: Vec<usize> = [
            "\"schema\"",
            "\"bundles\"",
            "\"namespace\"",
            "\"source\"",
            "\"kind\"",
            "\"worker\"",
            "\"tag\"",
            "\"version\"",
            "\"digest\"",
            "\"files\"",
            "\"landed_at\"",
        ]
        .iter()
        .map(|k| text.find(k).unwrap_or(usize::MAX))
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("lock.json");
        assert_eq!(read(&path).expect("absent").bundles.len(), 0);
        fs::write(&path, &text).expect("write");
        assert_eq!(read(&path).expect("read"), lock);
        fs::write(&path, "{}").expect("write");
        let err = read(&path).expect_err("not ours").to_string();
        assert!(err.contains("fix or move it away"), "{err}");
        // A committed lock may name a path out of its root: the whole lock is refused, naming it.
        for stray in [
            "mailer/../../../canary/secret.md",
            "/etc/passwd",
            "mailer//x.md",
            "./mailer/x.md",
            "mailer\\..\\x.md",
        ] {
            let mut hostile = lock.clone();
            let entry = hostile.bundles.get_mut("mailer").expect("entry");
            entry.files[0].path = stray.into();
            fs::write(&path, hostile.to_bytes().expect("bytes")).expect("write");
            let err = read(&path).expect_err(stray).to_string();
            assert!(err.contains("not a plain relative path"), "{stray}: {err}");
            assert!(err.contains("\"mailer\""), "{err}");
        }
        // So is a namespace out of `skills_folder` (status would list the files there), or
        // one its key does not name.
        for (key, stray) in [
            ("../../etc", "../../etc"),
            ("..", ".."),
            ("a/b", "a/b"),
            ("", ""),
            ("mailer", "other"),
        ] {
            let mut hostile = lock.clone();
            let mut entry = hostile.bundles.remove("mailer").expect("entry");
            entry.namespace = stray.into();
            hostile.bundles.insert(key.into(), entry);
            fs::write(&path, hostile.to_bytes().expect("bytes")).expect("write");
            let err = read(&path).expect_err(stray).to_string();
            assert!(err.contains("not the name of one folder"), "{stray}: {err}");
        }
    }

    #[test]
    fn a_lock_with_merge_conflict_markers_says_so_and_how_to_resolve_it() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("iii-bundles.lock.json");
        fs::write(
            &path,
            "{\n  \"schema\": 1,\n  \"bundles\": {\n<<<<<<< HEAD\n    \"a\": {}\n=======\n    \"b\": {}\n>>>>>>> feature\n  }\n}\n",
        )
        .expect("write");
        let err = read(&path).expect_err("conflicted").to_string();
        for part in [
            "holds unresolved git merge-conflict markers",
            "`git checkout --ours",
            "iii-directory bundles restore",
            "nothing was written",
        ] {
            assert!(err.contains(part), "{part}: {err}");
        }
        assert!(!err.contains("key must be a string"), "{err}");
    }

    #[test]
    fn sha256_matches_the_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
