//! The inputs of the three download functions (contract §3.9), read into the [`Source`] a
//! download fetches from:
//! `download_from_repo {repo, skill, branch?}`, `download_from_registry {worker, version? |
//! tag?}`, and the alias `download`, which takes either group and says which rule a mixed or
//! incomplete request breaks. Values are trimmed; a blank value counts as absent.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::registry::Release;
use crate::registry::functions::release_of;
use crate::request;

use super::guard::OnEdited;

/// The branch a repo download clones when none is given (contract).
pub const DEFAULT_BRANCH: &str = "main";

/// Which of the three functions was called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownloadFunction {
    /// `directory::skills::download`, the alias taking either source.
    Download,
    FromRepo,
    FromRegistry,
}

impl DownloadFunction {
    pub const ALL: [DownloadFunction; 3] = [
        DownloadFunction::Download,
        DownloadFunction::FromRepo,
        DownloadFunction::FromRegistry,
    ];

    /// The function id on the engine bus.
    pub fn id(self) -> &'static str {
        match self {
            DownloadFunction::Download => "directory::skills::download",
            DownloadFunction::FromRepo => "directory::skills::download_from_repo",
            DownloadFunction::FromRegistry => "directory::skills::download_from_registry",
        }
    }
}

/// Where a bundle comes from; also the response's `source` and the event's `source` word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `skills/<skill>/` of a git repository's branch.
    Repo {
        repo: String,
        skill: String,
        branch: String,
    },
    /// A worker's published bundle.
    Registry { worker: String, release: Release },
}

impl Source {
    /// The namespace the bundle lands in: the skill name or the worker name.
    pub fn namespace(&self) -> &str {
        match self {
            Source::Repo { skill, .. } => skill,
            Source::Registry { worker, .. } => worker,
        }
    }

    /// `repo` or `registry`, as change events carry it.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Repo { .. } => "repo",
            Source::Registry { .. } => "registry",
        }
    }

    /// The response's `source`: `{kind:"repo", repo, skill, branch}` (the URL without the
    /// credentials it may carry), or `{kind:"registry", worker}` with exactly one of `version`
    /// and `tag`.
    pub fn to_json(&self) -> Value {
        match self {
            Source::Repo {
                repo,
                skill,
                branch,
            } => json!({
                "kind": "repo",
                "repo": super::url::without_credentials(repo),
                "skill": skill,
                "branch": branch,
            }),
            Source::Registry { worker, release } => {
                json!({ "kind": "registry", "worker": worker, release.key(): release.value() })
            }
        }
    }
}

/// `{force?: bool}`, beside either source's fields.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Force {
    #[serde(deserialize_with = "request::null_as_default")]
    force: bool,
}

/// What a landing does with files the bundle installed and someone edited since: kept, unless
/// the request says `force: true`.
pub fn on_edited(request: &Value) -> Result<OnEdited> {
    let Force { force } = request::parse(request)?;
    Ok(if force {
        OnEdited::Overwrite
    } else {
        OnEdited::Keep
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Fields {
    repo: Option<String>,
    skill: Option<String>,
    branch: Option<String>,
    worker: Option<String>,
    version: Option<String>,
    tag: Option<String>,
}

fn present(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

const EITHER: &str = "specify either {repo, skill, branch?} OR {worker, version?|tag?}";

/// Reads a request of `function` into its source. Only the shape is checked here; the repo
/// URL, skill name and worker name are checked by the source that uses them.
pub fn parse(function: DownloadFunction, request: &Value) -> Result<Source> {
    let fields: Fields = request::parse(request)?;
    let repo_group = [&fields.repo, &fields.skill, &fields.branch]
        .iter()
        .any(|v| present((*v).clone()).is_some());
    let worker_group = [&fields.worker, &fields.version, &fields.tag]
        .iter()
        .any(|v| present((*v).clone()).is_some());
    match function {
        DownloadFunction::FromRepo => repo_source(fields, false),
        DownloadFunction::FromRegistry => registry_source(fields, false),
        DownloadFunction::Download => match (repo_group, worker_group) {
            (true, true) => Err(Error::Invalid(format!("{EITHER}, not both"))),
            (false, false) => Err(Error::Invalid(EITHER.to_string())),
            (true, false) => repo_source(fields, true),
            (false, true) => registry_source(fields, true),
        },
    }
}

/// A required value, with the alias's wording (`x is required when y is set`) or the explicit
/// form's (`x must be non-empty`).
fn required(value: Option<String>, name: &str, alias_because: &str, alias: bool) -> Result<String> {
    present(value).ok_or_else(|| {
        Error::Invalid(if alias {
            format!("{name} is required when {alias_because}")
        } else {
            format!("{name} must be non-empty")
        })
    })
}

fn repo_source(fields: Fields, alias: bool) -> Result<Source> {
    let repo = required(fields.repo, "repo", "skill is set", alias)?;
    let skill = required(fields.skill, "skill", "repo is set", alias)?;
    let branch = present(fields.branch).unwrap_or_else(|| DEFAULT_BRANCH.to_string());
    Ok(Source::Repo {
        repo,
        skill,
        branch,
    })
}

fn registry_source(fields: Fields, alias: bool) -> Result<Source> {
    let worker = required(fields.worker, "worker", "version or tag is set", alias)?;
    let release = release_of(fields.version, fields.tag)?;
    Ok(Source::Registry { worker, release })
}

#[cfg(test)]
mod tests {
    use super::*;
    use DownloadFunction::*;

    fn err(function: DownloadFunction, request: Value) -> String {
        parse(function, &request).expect_err("refused").to_string()
    }

    #[test]
    fn the_alias_takes_one_group() {
        assert_eq!(
            err(
                Download,
                json!({"repo": "https://x", "skill": "s", "worker": "w", "tag": "t"})
            ),
            "specify either {repo, skill, branch?} OR {worker, version?|tag?}, not both"
        );
        assert_eq!(
            err(Download, json!({"repo": "  ", "worker": ""})),
            "specify either {repo, skill, branch?} OR {worker, version?|tag?}"
        );
        assert_eq!(
            err(Download, json!({"skill": "s"})),
            "repo is required when skill is set"
        );
        assert_eq!(
            err(Download, json!({"repo": "https://x", "branch": "b"})),
            "skill is required when repo is set"
        );
        assert_eq!(
            err(Download, json!({"tag": "latest"})),
            "worker is required when version or tag is set"
        );
        assert_eq!(
            err(Download, json!({"worker": "w", "version": "1", "tag": "t"})),
            "specify either version OR tag, not both"
        );
    }

    #[test]
    fn defaults_and_trimming() {
        let repo = parse(
            Download,
            &json!({"repo": " https://x ", "skill": " s ", "branch": " "}),
        )
        .expect("repo");
        assert_eq!(
            repo.to_json(),
            json!({"kind": "repo", "repo": "https://x", "skill": "s", "branch": "main"})
        );
        let latest = parse(Download, &json!({"worker": " w "})).expect("registry");
        assert_eq!(
            latest.to_json(),
            json!({"kind": "registry", "worker": "w", "tag": "latest"})
        );
        let pinned =
            parse(FromRegistry, &json!({"worker": "w", "version": "1.2.3"})).expect("registry");
        assert_eq!(
            pinned.to_json(),
            json!({"kind": "registry", "worker": "w", "version": "1.2.3"})
        );
        assert_eq!(pinned.namespace(), "w");
        assert_eq!(pinned.kind(), "registry");
    }

    #[test]
    fn the_explicit_forms_ignore_the_other_group() {
        let repo = parse(
            FromRepo,
            &json!({"repo": "https://x", "skill": "s", "worker": "ignored"}),
        )
        .expect("repo");
        assert_eq!(repo.namespace(), "s");
        assert_eq!(
            err(FromRepo, json!({"skill": "s"})),
            "repo must be non-empty"
        );
        assert_eq!(
            err(FromRepo, json!({"repo": "r"})),
            "skill must be non-empty"
        );
        assert_eq!(err(FromRegistry, json!({})), "worker must be non-empty");
        assert!(err(FromRegistry, json!({"worker": 3})).starts_with("invalid request"));
    }
}
