//! A bundle as it will land: every file with its destination root, its path under that root
//! and its bytes, plus what the response lists. The sources add files one by one through
//! [`BundleBuilder`], which refuses a file as soon as the bundle goes over a limit (so a huge
//! clone is not read to the end), and [`BundleBuilder::finish`] checks the bundle whole (paths
//! that collide by case, a path that is both a file and a folder). A refused bundle writes
//! nothing: these checks all run before the first byte goes to disk.

use std::collections::{BTreeMap, BTreeSet};

use unicode_normalization::UnicodeNormalization;

use crate::config::Settings;
use crate::doc::MAX_FILE_BYTES;
use crate::doc::paths::is_markdown;
use crate::error::{Error, Result};

use super::lock::Resolved;
use super::source::Source;

pub use crate::store::landing::{Dest, FileToLand as File};

/// The response's lists: what this download materialised, by family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Paths relative to the namespace, payload files included.
    pub skills: Vec<String>,
    /// System prompt file stems.
    pub system_prompts: Vec<String>,
    /// Agent profile ids.
    pub agents: Vec<String>,
}

/// Which list a file goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listed {
    Skill,
    SystemPrompt,
    Agent,
}

/// A checked bundle, ready to land.
#[derive(Clone, Debug)]
pub struct Bundle {
    pub source: Source,
    pub files: Vec<File>,
    pub written: Written,
    /// The commit, version and digest its fetch resolved, for the lock.
    pub resolved: Resolved,
    /// Entries of the source skipped for a name starting with `.`, under the namespace.
    pub hidden: Vec<String>,
}

/// A bundle's size limits (`download_max_files`, `download_max_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_files: u64,
    pub max_bytes: u64,
}

impl Limits {
    pub fn from_settings(settings: &Settings) -> Limits {
        Limits {
            max_files: settings.download_max_files,
            max_bytes: settings.download_max_bytes,
        }
    }
}

/// Collects a bundle's files, enforcing the limits as they come.
pub struct BundleBuilder {
    source: Source,
    limits: Limits,
    files: Vec<File>,
    written: Written,
    /// Every file the source offered (skipped ones included), for the count limit.
    seen: u64,
    bytes: u64,
    resolved: Resolved,
    hidden: Vec<String>,
}

impl BundleBuilder {
    pub fn new(source: Source, limits: Limits) -> BundleBuilder {
        BundleBuilder {
            source,
            limits,
            files: Vec::new(),
            written: Written::default(),
            seen: 0,
            bytes: 0,
            resolved: Resolved::default(),
            hidden: Vec::new(),
        }
    }

    /// Records what the fetch resolved about its source.
    pub fn resolved(&mut self, resolved: Resolved) {
        self.resolved = resolved;
    }

    /// Notes a source entry skipped for its hidden name.
    pub fn hidden(&mut self, rel: String) {
        self.hidden.push(rel);
    }

    /// Counts a file the source looked at, whether it keeps it or skips it: a bundle of
    /// 100,000 ignored files is refused as surely as one of 100,000 kept ones.
    pub fn count(&mut self) -> Result<()> {
        self.seen += 1;
        if self.seen > self.limits.max_files {
            return Err(Error::Invalid(format!(
                "the bundle has more than {} files (download_max_files); nothing was written",
                self.limits.max_files
            )));
        }
        Ok(())
    }

    /// Whether `size` more bytes keep the bundle within `download_max_bytes`; sources check
    /// before reading a file.
    pub fn check_size(&self, rel: &str, size: u64) -> Result<()> {
        if is_markdown(rel) && size > MAX_FILE_BYTES {
            return Err(Error::Invalid(format!(
                "bundle file {rel:?} is too large ({size} bytes; max {MAX_FILE_BYTES} for a markdown file); nothing was written"
            )));
        }
        if self.bytes.saturating_add(size) > self.limits.max_bytes {
            return Err(Error::Invalid(format!(
                "the bundle is larger than {} bytes (download_max_bytes); nothing was written",
                self.limits.max_bytes
            )));
        }
        Ok(())
    }

    /// Adds a file the source keeps (already counted), without an executable bit (a registry
    /// bundle has no modes). `listed` is the response entry it adds, if any.
    pub fn add(
        &mut self,
        dest: Dest,
        rel: String,
        bytes: Vec<u8>,
        listed: Option<(Listed, String)>,
    ) -> Result<()> {
        let file = File {
            dest,
            rel,
            bytes,
            executable: false,
        };
        self.add_file(file, listed)
    }

    /// [`BundleBuilder::add`] for a file with its mode at the source (a repository's).
    pub fn add_file(&mut self, file: File, listed: Option<(Listed, String)>) -> Result<()> {
        let rel = &file.rel;
        self.check_size(rel, file.bytes.len() as u64)?;
        // Our own temporary files (`<file>.<pid>-<n>.tmp`) are swept by the next reconcile;
        // a bundle file with that shape would be removed behind the user's back.
        if let Some(name) = rel
            .rsplit('/')
            .next()
            .filter(|n| crate::store::is_temp_name(n))
        {
            return Err(Error::Invalid(format!(
                "bundle file {rel:?} has the name of a temporary file ({name}); nothing was written"
            )));
        }
        // `<file>.upstream` is the name an update gives upstream's text beside a file changed
        // on both sides: a bundle shipping one could never be updated (its own file would be
        // taken for a conflict's copy, and the next copy would have nowhere to go).
        if rel.ends_with(crate::rules::skip::UPSTREAM_SUFFIX) {
            return Err(Error::Invalid(format!(
                "bundle file {rel:?} ends in .upstream, the name an update gives the upstream text of a file changed on both sides; a bundle may not ship one, and nothing was written"
            )));
        }
        self.bytes += file.bytes.len() as u64;
        match listed {
            Some((Listed::Skill, entry)) => self.written.skills.push(entry),
            Some((Listed::SystemPrompt, entry)) => self.written.system_prompts.push(entry),
            Some((Listed::Agent, entry)) => self.written.agents.push(entry),
            None => {}
        }
        self.files.push(file);
        Ok(())
    }

    /// The bundle, once checked whole: no two paths of a root equal or differing only by case or
    /// Unicode normalization (they would collide on a file system that ignores them, and one
    /// would silently replace the other), and no path that is a file and a folder of another
    /// path at once.
    pub fn finish(self) -> Result<Bundle> {
        for dest in Dest::ALL {
            check_paths(
                self.files
                    .iter()
                    .filter(|f| f.dest == dest)
                    .map(|f| f.rel.as_str()),
            )?;
        }
        Ok(Bundle {
            source: self.source,
            files: self.files,
            written: self.written,
            resolved: self.resolved,
            hidden: self.hidden,
        })
    }
}

/// A path as a file system that ignores case and Unicode normalization may take it (macOS
/// keeps one file for the composed and decomposed `é`, as for `A` and `a`): two paths folded
/// alike would be one file there.
fn folded(path: &str) -> String {
    path.nfc().collect::<String>().to_lowercase()
}

/// The whole-bundle path rules for the files of one root.
fn check_paths<'a>(paths: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut by_folded: BTreeMap<String, &str> = BTreeMap::new();
    for path in paths {
        if let Some(other) = by_folded.insert(folded(path), path) {
            return Err(Error::Invalid(if other == path {
                format!("the bundle lists {path:?} twice; nothing was written")
            } else {
                format!(
                    "the bundle has two paths that differ only by case or Unicode normalization, {other:?} and {path:?}; nothing was written"
                )
            }));
        }
    }
    let folders: BTreeSet<String> = by_folded
        .keys()
        .flat_map(|path| {
            let segments: Vec<&str> = path.split('/').collect();
            (1..segments.len())
                .map(|n| segments[..n].join("/"))
                .collect::<Vec<_>>()
        })
        .collect();
    if let Some((_, path)) = by_folded
        .iter()
        .find(|(folded, _)| folders.contains(*folded))
    {
        return Err(Error::Invalid(format!(
            "bundle path {path:?} is both a file and a folder; nothing was written"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Release;

    fn builder(max_files: u64, max_bytes: u64) -> BundleBuilder {
        BundleBuilder::new(
            Source::Registry {
                worker: "w".into(),
                release: Release::latest(),
            },
            Limits {
                max_files,
                max_bytes,
            },
        )
    }

    fn add(b: &mut BundleBuilder, rel: &str, bytes: &[u8]) -> Result<()> {
        b.count()?;
        b.add(Dest::Skills, rel.to_string(), bytes.to_vec(), None)
    }

    #[test]
    fn limits_stop_the_bundle_early() {
        let mut b = builder(2, 100);
        add(&mut b, "w/a.md", b"a").expect("first");
        add(&mut b, "w/b.md", b"b").expect("second");
        let err = add(&mut b, "w/c.md", b"c").expect_err("third").to_string();
        assert!(err.contains("more than 2 files"), "{err}");

        let mut b = builder(10, 100);
        add(&mut b, "w/a.bin", &[0; 60]).expect("60 bytes");
        let err = add(&mut b, "w/b.bin", &[0; 41])
            .expect_err("101 bytes")
            .to_string();
        assert!(err.contains("larger than 100 bytes"), "{err}");
    }

    #[test]
    fn markdown_files_keep_the_read_cap_and_payload_files_do_not() {
        let mut b = builder(10, u64::MAX);
        let big = vec![b'x'; MAX_FILE_BYTES as usize + 1];
        let err = add(&mut b, "w/big.md", &big).expect_err("md").to_string();
        assert!(err.contains("too large"), "{err}");
        add(&mut b, "w/assets/big.bin", &big).expect("payload");
    }

    #[test]
    fn case_collisions_duplicates_and_file_folder_clashes_are_refused() {
        for (paths, needle) in [
            (&["w/a.md", "w/A.md"][..], "differ only by case"),
            (
                &["w/x/a.md", "w/X/b.md", "w/x/b.md"][..],
                "differ only by case",
            ),
            (&["w/a.md", "w/a.md"][..], "twice"),
            // One name to a file system that normalizes Unicode (macOS): NFC and NFD "é".
            (
                &["w/caf\u{e9}.md", "w/cafe\u{301}.md"][..],
                "differ only by case or Unicode normalization",
            ),
            (&["w/a.md", "w/a.md/b.md"][..], "both a file and a folder"),
            (&["w/s/x.md", "w/S"][..], "both a file and a folder"),
        ] {
            let mut b = builder(10, 1000);
            for path in paths {
                add(&mut b, path, b"x").expect("added");
            }
            let err = b.finish().expect_err("refused").to_string();
            assert!(err.contains(needle), "{paths:?}: {err}");
        }
        let mut b = builder(10, 1000);
        for path in ["w/a.md", "w/a/b.md", "w/ab.md"] {
            add(&mut b, path, b"x").expect("added");
        }
        assert_eq!(b.finish().expect("fine").files.len(), 3);
    }

    #[test]
    fn temporary_file_names_are_refused() {
        let mut b = builder(10, 1000);
        let err = add(&mut b, "w/x.md.123-4.tmp", b"x")
            .expect_err("temp")
            .to_string();
        assert!(err.contains("temporary file"), "{err}");
    }

    #[test]
    fn conflict_copy_names_are_refused() {
        for rel in ["w/SKILL.md.upstream", "w/proxy.conf.upstream"] {
            let mut b = builder(10, 1000);
            let err = add(&mut b, rel, b"x")
                .expect_err("a copy's name")
                .to_string();
            assert!(err.contains("ends in .upstream"), "{err}");
        }
        let mut b = builder(10, 1000);
        add(&mut b, "w/upstream.md", b"x").expect("an ordinary name");
        add(&mut b, "w/notes.upstreams", b"x").expect("another suffix");
    }
}
