//! The families' rules, pure: from one parsed document (and where its file sits) to a skill row,
//! a system prompt or an agent profile, or the reason the file is not one. The index builds its
//! views with these rules and the writes validate with the same ones, so a scan and a write
//! never disagree about what a file is.
//!
//! Architecture invariant: no I/O and no index here; everything is a function of its arguments.

pub mod agent;
pub mod prompt;
pub mod skill;
pub mod skip;
pub mod spec;

use serde::{Deserialize, Serialize};

use crate::doc::{Fields, Frontmatter, Hash, ServeIssue};
use crate::roots::Root;

/// Where a row's content comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A file under a root; `content` is the hash of its text in the content table, or why it
    /// cannot be served.
    File {
        root: Root,
        rel: String,
        content: Result<Hash, ServeIssue>,
    },
    /// Compiled into the binary (see `bundled`).
    Bundled,
}

/// Why a document has no frontmatter fields a family can use (system prompts and agent
/// profiles require them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum FrontmatterProblem {
    #[error("missing YAML frontmatter (expected --- ... --- block at file start)")]
    Missing,
    /// The block is not YAML the family can read: the parser's reason, without a period.
    #[error("invalid frontmatter YAML: {0}")]
    InvalidYaml(String),
}

/// How a block that is not YAML is taken: the scan serves it from its salvaged `key: value`
/// lines (and `check` reports the file); a write refuses it, so that a write never creates
/// such a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Scan,
    Write,
}

/// The fields of a frontmatter block a family requires, or why there are none.
pub fn required_fields(
    frontmatter: &Frontmatter,
    reading: Reading,
) -> Result<&Fields, FrontmatterProblem> {
    match frontmatter {
        Frontmatter::Absent => Err(FrontmatterProblem::Missing),
        Frontmatter::Invalid(why) => Err(FrontmatterProblem::InvalidYaml(why.clone())),
        Frontmatter::Salvaged { fields, .. } if reading == Reading::Scan => Ok(fields),
        Frontmatter::Salvaged { error, .. } => Err(FrontmatterProblem::InvalidYaml(error.clone())),
        Frontmatter::Present(fields) => Ok(fields),
    }
}

/// Checks required fields with `check`; when a salvaged block fails it, its YAML error is the
/// reason given, which tells the author more than a missing key would.
pub fn with_required_fields<T, E: From<FrontmatterProblem>>(
    frontmatter: &Frontmatter,
    reading: Reading,
    check: impl FnOnce(&Fields) -> Result<T, E>,
) -> Result<T, E> {
    let fields = required_fields(frontmatter, reading)?;
    check(fields).map_err(|why| match frontmatter {
        Frontmatter::Salvaged { error, .. } => {
            FrontmatterProblem::InvalidYaml(error.clone()).into()
        }
        _ => why,
    })
}

/// A frontmatter value trimmed, when it is not blank.
pub fn trimmed(value: Option<&String>) -> Option<String> {
    value
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
