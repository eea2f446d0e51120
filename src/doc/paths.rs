//! Checking a relative path taken from a downloaded bundle before anything is written under the
//! destination folder. A bundle is untrusted input: a path such as `../../.bashrc`, `/etc/x.md`,
//! `C:\x.md` or `a\..\..\x.md` must never leave the destination, whatever platform joins it.
//!
//! The check is lexical and strict on purpose: it accepts only plain `/`-separated names, none
//! hidden (a leading `.`), so joining an accepted path onto a root can only name a visible file
//! below that root. Markdown files are the documents the index serves; any other accepted name
//! is a skill's payload (`scripts/`, `references/`, `assets/` in the Agent Skills layout), kept
//! on disk beside its documents and never served. It does not look at the disk (symbolic links
//! already under the destination are the writer's concern).

use crate::error::quoted;
use std::path::PathBuf;

/// Longest accepted path, in bytes. Real bundle paths are a few dozen bytes; 240 leaves room
/// below the 255-byte name limit of common file systems once a namespace folder is prefixed.
pub const MAX_BUNDLE_PATH_BYTES: usize = 240;

/// Most segments (folders plus the file name) an accepted path may have. Real bundles are a few
/// folders deep; the cap keeps a hostile bundle from creating absurdly deep trees.
pub const MAX_BUNDLE_PATH_SEGMENTS: usize = 32;

const MARKDOWN_EXTENSION: &str = ".md";

/// Accepts `rel` when it is a safe relative path and returns it as a relative path built segment
/// by segment (so the platform's own separator is used when it is joined). Refused, with the
/// reason: empty or too long paths, too many segments, absolute paths, backslashes, `:` (drive
/// letters such as `C:`, and NTFS alternate streams), NUL or other control characters, empty,
/// `.` or `..` segments, segments that start with a dot (hidden files and folders, `.git`, and
/// the names this worker keeps for itself), and segments ending in a dot or a space (Windows
/// drops those, so `.. ` could name the parent there).
pub fn validate_bundle_path(rel: &str) -> Result<PathBuf, BundlePathError> {
    let owned = || rel.to_owned();
    if rel.is_empty() {
        return Err(BundlePathError::Empty);
    }
    if rel.len() > MAX_BUNDLE_PATH_BYTES {
        return Err(BundlePathError::TooLong(rel.len()));
    }
    if let Some(bad) = rel
        .chars()
        .find(|c| c.is_control() || *c == '\\' || *c == ':')
    {
        return Err(BundlePathError::Character { bad, rel: owned() });
    }
    if rel.starts_with('/') {
        return Err(BundlePathError::Absolute(owned()));
    }
    let segments: Vec<&str> = rel.split('/').collect();
    if segments.len() > MAX_BUNDLE_PATH_SEGMENTS {
        return Err(BundlePathError::TooDeep {
            segments: segments.len(),
            rel: owned(),
        });
    }
    for segment in &segments {
        validate_segment(segment).map_err(|problem| BundlePathError::Segment {
            problem,
            rel: owned(),
        })?;
    }
    Ok(segments.iter().collect())
}

/// Why a bundle path is refused; the path is echoed quoted and cut.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BundlePathError {
    #[error("bundle path must be non-empty")]
    Empty,
    #[error("bundle path too long ({0} bytes; max {MAX_BUNDLE_PATH_BYTES})")]
    TooLong(usize),
    #[error(
        "bundle path may not contain {bad:?} (backslashes, ':' and control characters are \
         refused): {}",
        quoted(rel)
    )]
    Character { bad: char, rel: String },
    #[error("bundle path must be relative: {}", quoted(.0))]
    Absolute(String),
    #[error(
        "bundle path has too many segments ({segments}; max {MAX_BUNDLE_PATH_SEGMENTS}): {}",
        quoted(rel)
    )]
    TooDeep { segments: usize, rel: String },
    #[error("{problem}: {}", quoted(rel))]
    Segment {
        problem: SegmentProblem,
        rel: String,
    },
}

/// Why one segment of a bundle path is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SegmentProblem {
    #[error("bundle path has an empty segment")]
    Empty,
    #[error("bundle path may not have `.` or `..` segments")]
    Dots,
    #[error("bundle path segments may not start with a dot (hidden names are refused)")]
    Hidden,
    #[error("bundle path segments may not end in a dot or a space")]
    TrailingDotOrSpace,
}

/// Whether an accepted bundle path names a markdown document (`<name>.md`), as opposed to a
/// payload file.
pub fn is_markdown(rel: &str) -> bool {
    rel.rsplit('/')
        .next()
        .and_then(|file| file.strip_suffix(MARKDOWN_EXTENSION))
        .is_some_and(|stem| !stem.is_empty())
}

fn validate_segment(segment: &str) -> Result<(), SegmentProblem> {
    match segment {
        "" => Err(SegmentProblem::Empty),
        "." | ".." => Err(SegmentProblem::Dots),
        _ if segment.starts_with('.') => Err(SegmentProblem::Hidden),
        _ if segment.ends_with('.') || segment.ends_with(' ') => {
            Err(SegmentProblem::TrailingDotOrSpace)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Component, Path};

    #[test]
    fn plain_paths_are_accepted() {
        for rel in [
            "index.md",
            "SKILL.md",
            "shell/exec.md",
            "a/b/c/SKILLS.md",
            "naïve/café.md",
            "with space/x y.md",
            "a/x.md.md",
            "v1.2/notes.md",
            "scripts/run.sh",
            "scripts/run",
            "references/api.txt",
            "assets/logo.png",
            "LICENSE",
            "a.MD",
        ] {
            let path = validate_bundle_path(rel).unwrap_or_else(|why| panic!("{rel:?}: {why}"));
            assert_eq!(path, Path::new(rel), "{rel:?}");
            assert!(
                path.components()
                    .all(|component| matches!(component, Component::Normal(_))),
                "{rel:?}"
            );
        }
    }

    #[test]
    fn escapes_and_absolute_forms_are_refused() {
        for rel in [
            "",
            "..",
            "../x.md",
            "a/../../x.md",
            "a/..",
            "./x.md",
            "a/./x.md",
            "/etc/x.md",
            "//server/share/x.md",
            "a//x.md",
            "a/x.md/",
            "C:x.md",
            "C:/x.md",
            "c:\\x.md",
            "\\\\server\\share\\x.md",
            "a\\..\\x.md",
            "x.md:stream",
            "a/\0/x.md",
            "a\u{7}.md",
            "a\n.md",
            "a\u{85}.md",
            ".. /x.md",
            "... /x.md",
            "a./x.md",
            "scripts/run.sh:x",
            "scripts\\run.sh",
        ] {
            assert!(validate_bundle_path(rel).is_err(), "{rel:?} was accepted");
        }
    }

    #[test]
    fn hidden_segments_are_refused() {
        for rel in [
            ".hidden/a.md",
            "a/.md",
            ".md",
            "a/.md.md",
            ".git/config",
            "ns/.iii-skill-complete",
            "scripts/.env",
            ".iii-staging-1-2/files/x.md",
        ] {
            let err = validate_bundle_path(rel).expect_err(rel);
            assert!(
                matches!(
                    err,
                    BundlePathError::Segment {
                        problem: SegmentProblem::Hidden,
                        ..
                    }
                ),
                "{rel:?}: {err}"
            );
        }
    }

    #[test]
    fn markdown_is_told_from_payload() {
        for rel in ["index.md", "a/b.md", "x.md.md"] {
            assert!(is_markdown(rel), "{rel:?}");
        }
        for rel in [
            "a",
            "a/b",
            "a.txt",
            "a.MD",
            "a.md.txt",
            "scripts/run.sh",
            "a/md",
        ] {
            assert!(!is_markdown(rel), "{rel:?}");
        }
    }

    #[test]
    fn length_and_depth_are_bounded() {
        let longest = format!("{}.md", "a".repeat(MAX_BUNDLE_PATH_BYTES - 3));
        assert!(validate_bundle_path(&longest).is_ok());
        let too_long = format!("a{longest}");
        let err = validate_bundle_path(&too_long).expect_err("too long");
        assert_eq!(err, BundlePathError::TooLong(MAX_BUNDLE_PATH_BYTES + 1));
        assert!(err.to_string().contains("too long"), "{err}");

        let deepest = format!("{}x.md", "a/".repeat(MAX_BUNDLE_PATH_SEGMENTS - 1));
        assert!(validate_bundle_path(&deepest).is_ok());
        let too_deep = format!("a/{deepest}");
        let err = validate_bundle_path(&too_deep).expect_err("too deep");
        assert!(err.to_string().contains("too many segments"), "{err}");
    }

    #[test]
    fn accepted_paths_stay_under_the_root() {
        let root = Path::new("/dest/root");
        let joined = root.join(validate_bundle_path("a/b/c.md").expect("valid"));
        assert!(joined.starts_with(root));
        assert_eq!(joined, Path::new("/dest/root/a/b/c.md"));
    }
}
