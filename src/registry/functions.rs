//! `directory::registry::workers::list` and `directory::registry::workers::info`: request
//! checks, the calls to the shared [`Registry`], and the contract's error messages (§2.2: `D310`
//! for a worker or release the registry does not have, `D311` for a name that cannot be one,
//! `D320` for everything else). No message carries the registry's URL or its response body.

use serde::Deserialize;
use serde_json::Value;

use super::model::CardParts;
use super::{Registry, RegistryError, Release};
use crate::code::Code;
use crate::doc::ids::{WorkerNameError, validate_worker_name};
use crate::error::{Error, Result, quoted};
use crate::error::{Next, next};
use crate::request;

pub const LIST: &str = "directory::registry::workers::list";
pub const INFO: &str = "directory::registry::workers::info";

const BROWSE_NAMES: Next = next(LIST, "browse worker names");
const BROWSE_VALID_NAMES: Next = next(LIST, "browse valid worker names");

#[derive(Deserialize)]
struct ListRequest {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Deserialize)]
struct InfoRequest {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    /// Add the README to the card.
    #[serde(default, deserialize_with = "request::null_as_default")]
    readme: bool,
    /// Add each function's and trigger's schemas and metadata to the card.
    #[serde(default, deserialize_with = "request::null_as_default")]
    schemas: bool,
}

/// A trimmed value, `None` when absent or blank.
fn present(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The release named by optional `version` and `tag` inputs: both is an error, neither is
/// the `latest` tag.
pub fn release_of(version: Option<String>, tag: Option<String>) -> Result<Release> {
    match (present(version), present(tag)) {
        (Some(_), Some(_)) => Err(Error::Invalid(
            "specify either version OR tag, not both".into(),
        )),
        (Some(version), None) => Ok(Release::Version(version)),
        (None, Some(tag)) => Ok(Release::Tag(tag)),
        (None, None) => Ok(Release::latest()),
    }
}

/// `directory::registry::workers::list {search?, cursor?}` → `{workers, pagination}`.
pub async fn list(registry: &Registry, request: &Value) -> Result<Value> {
    let req: ListRequest = request::parse(request)?;
    let (search, cursor) = (present(req.search), present(req.cursor));
    let page = registry
        .list_workers(search.as_deref(), cursor.as_deref())
        .await
        .map_err(|e| registry_error(&e))?;
    serde_json::to_value(&*page).map_err(Error::json)
}

/// `directory::registry::workers::info {name, version? | tag?, readme?, schemas?}` →
/// `{worker, readme?, api_reference, skills_tree}`: the pre-install card, whole with `readme`
/// and `schemas` (see [`CardParts`]). The registry's record is cached whole; each answer is
/// cut from it.
pub async fn info(registry: &Registry, request: &Value) -> Result<Value> {
    let req: InfoRequest = request::parse(request)?;
    let name = req.name.unwrap_or_default().trim().to_string();
    if name.is_empty() {
        return Err(Error::Invalid("name must be non-empty".into()));
    }
    validate_worker_name(&name).map_err(|why| invalid_name(&why))?;
    let release = release_of(req.version, req.tag)?;
    let info = registry
        .worker_info(&name, &release)
        .await
        .map_err(|e| info_error(&name, &release, &e))?;
    info.card(CardParts {
        readme: req.readme,
        schemas: req.schemas,
    })
    .map_err(Error::json)
}

/// `D311 invalid_input: <validator reason>. Next: …`
fn invalid_name(why: &WorkerNameError) -> Error {
    Error::coded(
        Code::RegistryWorkerNameInvalid,
        format!("{why}."),
        &[BROWSE_VALID_NAMES],
    )
}

/// A `D320` error with one of the contract's fixed texts (list and downloads); `D122` for a
/// read that got no turn.
pub fn registry_error(e: &RegistryError) -> Error {
    let problem = match e {
        RegistryError::Decode => "could not decode the registry response.".to_string(),
        RegistryError::InvalidName(why) => return Error::invalid(why),
        RegistryError::Busy(refused) => return busy(refused),
        other => format!("{other}. Next: retry shortly."),
    };
    Error::coded(Code::RegistryUnavailable, problem, &[])
}

/// The errors of `info`: `D310` for a 404 on either leg (the worker at that release), `D311`
/// for a name the validator refuses, `D320` with the reason otherwise.
fn info_error(name: &str, release: &Release, e: &RegistryError) -> Error {
    match e {
        RegistryError::NotFound => Error::not_found(
            Code::RegistryWorkerNotFound,
            "registry worker",
            &format!("{name}@{}", release.value()),
            &[],
            &[BROWSE_NAMES],
        ),
        RegistryError::InvalidName(why) => invalid_name(why),
        RegistryError::Busy(refused) => busy(refused),
        other => Error::coded(
            Code::RegistryUnavailable,
            format!("{other}. Next: retry shortly, or call {LIST} to browse worker names."),
            &[],
        ),
    }
}

/// `D122`: no turn to read the files within the call deadline.
fn busy(refused: &crate::registry::admission::TurnRefused) -> Error {
    Error::coded(Code::DeadlinePassed, refused.to_string(), &[])
}

/// The errors of a registry download: `D310` when the registry has no bundle for the worker,
/// the fixed `D320` texts otherwise.
pub fn download_error(worker: &str, e: &RegistryError) -> Error {
    match e {
        RegistryError::NotFound => Error::coded(
            Code::RegistryWorkerNotFound,
            format!(
                "registry worker {worker} has no published skills bundle. Next: call {LIST} to browse worker names.",
                worker = quoted(worker)
            ),
            &[],
        ),
        other => registry_error(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_the_contract() {
        assert_eq!(
            registry_error(&RegistryError::Unreachable).to_string(),
            format!(
                "{} registry_error: could not reach the registry. Next: retry shortly.",
                Code::RegistryUnavailable
            )
        );
        assert_eq!(
            registry_error(&RegistryError::Status(502)).to_string(),
            format!(
                "{} registry_error: registry returned HTTP 502. Next: retry shortly.",
                Code::RegistryUnavailable
            )
        );
        assert_eq!(
            registry_error(&RegistryError::Decode).to_string(),
            format!(
                "{} registry_error: could not decode the registry response.",
                Code::RegistryUnavailable
            )
        );
        assert_eq!(
            download_error("ghost", &RegistryError::NotFound).to_string(),
            format!(
                "{} not_found: registry worker \"ghost\" has no published skills bundle. Next: call directory::registry::workers::list to browse worker names.",
                Code::RegistryWorkerNotFound
            )
        );
        let latest = Release::latest();
        assert_eq!(
            info_error("missing", &latest, &RegistryError::NotFound).to_string(),
            format!(
                "{} not_found: registry worker \"missing@latest\" does not exist. Next: call directory::registry::workers::list to browse worker names.",
                Code::RegistryWorkerNotFound
            )
        );
        assert_eq!(
            info_error("w", &latest, &RegistryError::Status(500)).to_string(),
            format!(
                "{} registry_error: registry returned HTTP 500. Next: retry shortly, or call directory::registry::workers::list to browse worker names.",
                Code::RegistryUnavailable
            )
        );
    }

    #[test]
    fn releases() {
        assert_eq!(release_of(None, None).expect("latest"), Release::latest());
        assert_eq!(
            release_of(Some(" 1.2.3 ".into()), Some("  ".into())).expect("version"),
            Release::Version("1.2.3".into())
        );
        assert_eq!(
            release_of(None, Some("beta".into())).expect("tag"),
            Release::Tag("beta".into())
        );
        let err = release_of(Some("1".into()), Some("beta".into())).expect_err("both");
        assert!(err.to_string().contains("either version OR tag"), "{err}");
    }

    #[test]
    fn hostile_names_are_d311_before_any_request() {
        for name in [
            "../../admin",
            "shell/../../etc",
            "x?admin=1",
            "x#frag",
            "a/b",
            "Shell",
            "shell name",
            "`rm`",
            "-x",
        ] {
            let why = validate_worker_name(name).expect_err(name);
            let e = invalid_name(&why);
            assert_eq!(e.code(), Some(Code::RegistryWorkerNameInvalid), "{name}");
            assert!(e.to_string().ends_with("browse valid worker names."), "{e}");
        }
        for name in ["shell", "iii-http", "iii-database", "coder", "x2"] {
            assert!(validate_worker_name(name).is_ok(), "{name}");
        }
    }
}
