//! Why a file (or folder) under a root is not served, or is served with a problem: the reasons
//! `check` and `index::status` list beside each path. The walk gives the reasons of entries it
//! never opens (links, FIFOs, folders it cannot list), the views those of files that are no
//! document of their family or lose to another file; each is a variant with its data, and
//! `Display` gives the sentence a person reads. The index stores them as they are (postcard),
//! so callers compare variants, never sentences.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::agent::ProfileProblem;
use super::prompt;
use crate::doc::ids::{IdError, NameError, first_segment};
use crate::doc::{Frontmatter, ServeIssue, conflict};

/// How many paths through symbolic links the walk follows into one folder besides its own;
/// the others are not followed, each listed by `check` ([`SkipReason::TooManyLinkedPaths`]):
/// enough for a real tree (a shared folder linked into a few namespaces), and a bound on trees
/// built to multiply paths. A folder's own path, crossing no link, is always walked, so a
/// folder is never displaced by the links to it.
pub const MAX_LINKED_PATHS_TO_A_FOLDER: u32 = 16;

/// Why a path is listed by `check`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SkipReason {
    // What the walk finds without opening anything.
    /// A folder the walk could not list: the system's reason.
    Unlistable(String),
    /// A link named like a document that leads nowhere: the system's reason.
    LinkBroken(String),
    /// Links that lead to each other and never reach a folder: the system's reason.
    LinkLoops(String),
    /// A link that leads out of every root (design: nothing outside the roots is served), to
    /// this real path.
    LinkOutside(String),
    /// A folder reached again below itself through a link.
    LinkToAncestor,
    /// A FIFO, socket or device named like a document: never opened (opening a FIFO blocks).
    NotRegular(Special),
    /// A temporary file of a write whose process may still run (`store`'s naming).
    UnfinishedWrite { pid: u32 },

    // Where a file sits.
    /// A `prompts` segment: neither a skill nor a system prompt.
    PromptsSegment,
    /// An `agents` segment under a skills root.
    AgentsSegment,
    /// The skill id the path gives breaks the id rules.
    InvalidId { id: String, problem: IdError },
    /// Another file of the same root gives the same id first (`first`, its relative path).
    DuplicateId { id: String, first: String },
    /// `local_skills_folder` has a folder named like this file's namespace, which overrides it.
    NamespaceShadowed { namespace: String },
    /// `local_skills_folder` has a skill with the same id.
    SkillShadowed,
    /// An agents skill whose namespace is a folder of a higher-precedence skills root.
    AgentsSkillShadowed { namespace: String },

    // What a file holds.
    /// Listed with defaults, but its content cannot be served.
    Unservable(ServeIssue),
    /// Served, but its frontmatter block was ignored: the reason.
    FrontmatterIgnored(String),
    /// Served from the `key: value` lines of a block that is not YAML: the parser's reason.
    FrontmatterSalvaged(String),
    /// Under a `system-prompts` folder, but not a system prompt.
    NotAPrompt(prompt::Problem),
    /// A system prompt whose name a file read earlier already serves.
    DuplicatePromptName { name: String },
    /// An agent profile file whose stem is not a valid id.
    InvalidAgentId { id: String, problem: NameError },
    /// In `agents_folder`, but not an agent profile.
    NotAProfile(ProfileProblem),
    /// A skill of `global_agents_skills_folder` whose namespace a higher step serves: the
    /// project's `agents_skills_folder`, or (`bundled`) the worker's bundled skills.
    GlobalSkillShadowed { namespace: String, bundled: bool },
    /// A profile of `global_agents_folder` whose id `agents_folder` serves.
    ProfileShadowed,

    // What a bundle update left.
    /// `<name>.md.upstream`: the upstream text of a file an update found changed on both
    /// sides, landed beside the user's copy (`download::plan`); never served.
    UpstreamCopy,

    // What the walk finds without opening anything (appended: the index stores variants by
    // their position).
    /// A folder, or a file named like a document, whose name is not UTF-8: no id can name it
    /// (listed under its name with each byte that is not UTF-8 written `\xNN`).
    NameNotUtf8 { folder: bool },

    // What a file holds (appended, as above).
    /// Served from the `key: value` lines of a block a git merge left its conflict markers in.
    FrontmatterConflicted,

    // What the walk finds (appended, as above).
    /// A path through symbolic links into a folder the walk already follows
    /// [`MAX_LINKED_PATHS_TO_A_FOLDER`] such paths into: not followed.
    TooManyLinkedPaths,
}

/// The suffix a bundle update gives the upstream text it lands beside a conflicting file.
pub const UPSTREAM_SUFFIX: &str = ".upstream";

/// Whether `name` (a file name or a path) is the upstream copy of a markdown file.
pub fn is_upstream_copy(name: &str) -> bool {
    name.strip_suffix(UPSTREAM_SUFFIX)
        .is_some_and(|stem| stem.len() > 3 && stem.ends_with(".md"))
}

/// What a special file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Special {
    Fifo,
    Socket,
    Device,
}

impl SkipReason {
    /// Whether this is a note on one file that is not a document (an update's conflict copy, a
    /// writer's temporary file): no row of the views depends on it, so its coming and going
    /// changes its own skipped row and nothing else.
    pub fn is_file_note(&self) -> bool {
        matches!(
            self,
            SkipReason::UpstreamCopy
                | SkipReason::UnfinishedWrite { .. }
                | SkipReason::NameNotUtf8 { .. }
        )
    }

    /// The reason `check` gives for the file whose skill namespace a local folder overrides.
    pub fn namespace_shadowed(rel: &str) -> SkipReason {
        SkipReason::NamespaceShadowed {
            namespace: first_segment(rel).to_string(),
        }
    }

    /// What is wrong with a frontmatter block that is there but served regardless.
    pub fn of_frontmatter(frontmatter: &Frontmatter) -> Option<SkipReason> {
        match frontmatter {
            Frontmatter::Absent | Frontmatter::Present(_) => None,
            Frontmatter::Invalid(why) => Some(SkipReason::FrontmatterIgnored(why.clone())),
            conflicted if conflicted.holds_conflict_markers() => {
                Some(SkipReason::FrontmatterConflicted)
            }
            Frontmatter::Salvaged { error, .. } => {
                Some(SkipReason::FrontmatterSalvaged(error.clone()))
            }
        }
    }
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Special::Fifo => "a FIFO (named pipe)",
            Special::Socket => "a socket",
            Special::Device => "a device",
        })
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Unlistable(why) => write!(f, "folder cannot be listed: {why}"),
            SkipReason::LinkBroken(why) => write!(f, "symbolic link cannot be followed: {why}"),
            SkipReason::LinkLoops(why) => {
                write!(f, "symbolic link loops and is not followed: {why}")
            }
            SkipReason::LinkOutside(real) => {
                write!(f, "symbolic link leads outside the roots (to {real})")
            }
            SkipReason::LinkToAncestor => {
                f.write_str("symbolic link loops back to a folder above it; not followed")
            }
            SkipReason::NotRegular(what) => write!(f, "{what}, not a regular file; never opened"),
            SkipReason::UnfinishedWrite { pid } => write!(
                f,
                "temporary file of an unfinished write (process {pid}); removed once that \
                 process is gone or after an hour"
            ),
            SkipReason::PromptsSegment => f.write_str(
                "ignored: paths with a `prompts` segment hold neither skills nor system prompts",
            ),
            SkipReason::AgentsSegment => f.write_str(
                "ignored: `agents` is a reserved path segment under a skills root (agent \
                 profiles live in agents_folder)",
            ),
            SkipReason::InvalidId { id, problem } => write!(f, "invalid id {id:?}: {problem}"),
            SkipReason::DuplicateId { id, first } => {
                write!(f, "duplicate id {id:?} also produced by {first}")
            }
            SkipReason::NamespaceShadowed { namespace } => write!(
                f,
                "shadowed: local_skills_folder has a {namespace:?} folder, which overrides this \
                 namespace"
            ),
            SkipReason::SkillShadowed => {
                f.write_str("shadowed: local_skills_folder has a skill with the same id")
            }
            SkipReason::AgentsSkillShadowed { namespace } => write!(
                f,
                "shadowed: namespace {namespace:?} is also a folder of a higher-precedence \
                 skills root"
            ),
            SkipReason::Unservable(issue) => issue.fmt(f),
            SkipReason::FrontmatterIgnored(why) => write!(f, "frontmatter ignored: {why}"),
            SkipReason::FrontmatterSalvaged(error) => write!(
                f,
                "frontmatter is not a YAML mapping ({error}); only its one-line `key: value` \
                 entries were read"
            ),
            SkipReason::NotAPrompt(problem) => problem.fmt(f),
            SkipReason::DuplicatePromptName { name } => {
                write!(f, "duplicate system prompt name {name:?}")
            }
            SkipReason::InvalidAgentId { id, problem } => {
                write!(f, "invalid agent id {id:?}: {problem}")
            }
            SkipReason::NotAProfile(problem) => problem.fmt(f),
            SkipReason::GlobalSkillShadowed { namespace, bundled } => write!(
                f,
                "shadowed: namespace {namespace:?} is served by {}, which comes before \
                 global_agents_skills_folder",
                if *bundled {
                    "the worker's bundled skills"
                } else {
                    "agents_skills_folder"
                }
            ),
            SkipReason::ProfileShadowed => {
                f.write_str("shadowed: agents_folder has a profile with the same id")
            }
            SkipReason::UpstreamCopy => f.write_str(
                "the upstream text of a bundle file changed both here and upstream, kept beside your copy: merge it by hand, then delete this file (`iii-directory bundles verify` names its bundle and says when the conflict is settled already)",
            ),
            SkipReason::FrontmatterConflicted => write!(
                f,
                "frontmatter holds unresolved git merge-conflict markers ({}), so only its \
                 one-line `key: value` entries were read (a list such as `skills:` is lost): \
                 resolve the conflict, keeping one side's lines or both, and delete the marker \
                 lines",
                conflict::MARKER_LINES
            ),
            SkipReason::TooManyLinkedPaths => write!(
                f,
                "path through symbolic links into a folder that {} other such paths already \
                 lead into; not followed (the walk bounds trees built to multiply paths): link \
                 to the folder from fewer places",
                MAX_LINKED_PATHS_TO_A_FOLDER
            ),
            SkipReason::NameNotUtf8 { folder } => write!(
                f,
                "its name is not valid UTF-8, so no id can name it{}: rename it in UTF-8 (for \
                 example `convmv -f latin1 -t utf8 --notest <path>`)",
                if *folder { " or anything in it" } else { "" }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::ReadIssue;
    use crate::doc::ids::validate_skill_id;
    use crate::rules::FrontmatterProblem;

    /// The sentences `check` printed before the reasons were typed, for a reason of each kind:
    /// callers and their scripts read them, so they stay as they were.
    #[test]
    fn reasons_read_as_before() {
        let id_problem = validate_skill_id("Shell/exec").expect_err("upper case");
        for (reason, sentence) in [
            (
                SkipReason::LinkOutside("/etc".into()),
                "symbolic link leads outside the roots (to /etc)",
            ),
            (
                SkipReason::NotRegular(Special::Fifo),
                "a FIFO (named pipe), not a regular file; never opened",
            ),
            (
                SkipReason::InvalidId {
                    id: "Shell/exec".into(),
                    problem: id_problem,
                },
                "invalid id \"Shell/exec\": invalid id (segment 1 of \"Shell/exec\"): segment may \
                 only contain lowercase ASCII letters, digits, '-' and '_': \"Shell\"",
            ),
            (
                SkipReason::DuplicateId {
                    id: "ns/a".into(),
                    first: "ns/a.md".into(),
                },
                "duplicate id \"ns/a\" also produced by ns/a.md",
            ),
            (
                SkipReason::namespace_shadowed("ns/a.md"),
                "shadowed: local_skills_folder has a \"ns\" folder, which overrides this namespace",
            ),
            (
                SkipReason::Unservable(ServeIssue::Read(ReadIssue::TooLarge(300_000))),
                "too large (300000 bytes; max 262144)",
            ),
            (
                SkipReason::NotAPrompt(prompt::Problem::Frontmatter(FrontmatterProblem::Missing)),
                "missing YAML frontmatter (expected --- ... --- block at file start)",
            ),
            (
                SkipReason::NotAProfile(ProfileProblem::NoName),
                "frontmatter missing non-empty `name`",
            ),
            (
                SkipReason::UnfinishedWrite { pid: 42 },
                "temporary file of an unfinished write (process 42); removed once that process \
                 is gone or after an hour",
            ),
        ] {
            assert_eq!(reason.to_string(), sentence);
        }
    }

    #[test]
    fn a_reason_survives_the_index_encoding() {
        let reason = SkipReason::InvalidAgentId {
            id: "Bad".into(),
            problem: crate::doc::ids::validate_name("Bad").expect_err("upper case"),
        };
        let bytes = postcard::to_stdvec(&reason).expect("encode");
        let back: SkipReason = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!(back, reason);
    }
}
