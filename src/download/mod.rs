//! Downloads: `directory::skills::download`, `download_from_repo` and `download_from_registry`
//! (contract §3.9), and the pieces of auto-download that are not about the engine (§3.10).
//!
//! A download is two steps. [`fetch`] gets a bundle from its source (a shallow git clone, or
//! the registry through the shared [`Registry`]) and checks it whole: every path, the limits,
//! collisions (see [`bundle`]). Nothing is written until the bundle passes. Then
//! [`land()`] checks it against the tree (what a bundle may touch, see
//! [`guard`]) and lands it all or nothing through a staging folder under the directory's
//! write lock, reconciles the written paths, and publishes one
//! `{op: "download", namespace, source}` event per family that got files (`store::landing` says how
//! a crash at any moment still leaves the old tree or the whole bundle).

pub mod bundle;
mod from_registry;
pub mod guard;
mod land;
pub mod lock;
pub mod marker;
pub mod merge;
pub mod plan;
pub mod repo;
pub mod restore;
pub mod review;
pub mod source;
pub mod status;
pub mod updates;
mod url;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::code::Code;
use crate::config::Settings;
use crate::directory::Directory;
use crate::doc::ids::validate_worker_name;
use crate::error::{Error, Result};
use crate::registry::functions::{download_error, registry_error};
use crate::registry::{Registry, Release, admission};

pub use crate::store::landing::Recovery;
pub use bundle::{Bundle, Limits};
pub use guard::OnEdited;
pub use land::{Landed, land, unindexed};
pub use source::{DownloadFunction, Source};
pub use status::BundlesFunction;

/// What a download is doing, for a progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `git clone` of this repository is running.
    Cloning { repo: String, branch: String },
    /// The registry request for this worker's bundle is running.
    Requesting { worker: String, release: String },
    /// The bundle passed its checks; its files are landing.
    Landing { files: usize },
}

/// Gets the bundle a source names and checks it whole. Nothing is written. A clone, like a
/// registry answer carrying files, waits for its turn (`registry::admission`).
pub async fn fetch(
    settings: &Settings,
    registry: &Registry,
    source: Source,
    progress: &(dyn Fn(Step) + Send + Sync),
) -> Result<Bundle> {
    match &source {
        Source::Repo { .. } => {
            repo::check(&source)?;
            guard::check_namespace(source.namespace())?;
            fetch_repo(settings, source, None, progress).await
        }
        Source::Registry { worker, release } => {
            validate_worker_name(worker).map_err(Error::invalid)?;
            guard::check_namespace(worker)?;
            progress(Step::Requesting {
                worker: worker.clone(),
                release: release.value().to_string(),
            });
            // Its turn is held until the bundle is checked.
            let (published, _turn) = registry
                .skills_bundle(worker, release)
                .await
                .map_err(|e| download_error(worker, &e))?;
            let worker = worker.clone();
            from_registry::plan(source, &worker, published, Limits::from_settings(settings))
        }
    }
}

/// Clones a repository source (at `commit` when one is given) and reads its skill folder into
/// a checked bundle. The clone runs in a clone's turn, and its files are read in a read's
/// (`registry::admission`): a git host that never answers holds one of the first, never one
/// that registry reads wait for. Nothing is written but the clone, removed before this returns.
pub async fn fetch_repo(
    settings: &Settings,
    source: Source,
    commit: Option<String>,
    progress: &(dyn Fn(Step) + Send + Sync),
) -> Result<Bundle> {
    let Source::Repo { repo, branch, .. } = &source else {
        return Err(Error::Invalid("not a repo source".into()));
    };
    let refused = |refused: admission::TurnRefused| registry_error(&refused.into());
    let _cloning = admission::take_clone_turn().await.map_err(refused)?;
    progress(Step::Cloning {
        repo: url::without_credentials(repo).into_owned(),
        branch: branch.clone(),
    });
    let timeout = Duration::from_millis(settings.download_timeout_ms);
    let cloned =
        tokio::task::spawn_blocking(move || repo::clone_at(source, commit.as_deref(), timeout))
            .await
            .map_err(Error::task("download task"))??;
    // A clone's files are read into memory as a registry answer's are: the same turns.
    let holds = crate::registry::files_cap(settings);
    let _reading = admission::take_turn(holds).await.map_err(refused)?;
    let limits = Limits::from_settings(settings);
    tokio::task::spawn_blocking(move || cloned.read(limits))
        .await
        .map_err(Error::task("download task"))?
}

/// One download function call, from request to response: the request read, the bundle
/// fetched and checked, then landed on the blocking pool.
pub async fn run(
    directory: &Arc<Directory>,
    registry: &Registry,
    function: DownloadFunction,
    request: &Value,
    progress: &(dyn Fn(Step) + Send + Sync),
) -> Result<Value> {
    let source = source::parse(function, request)?;
    let on_edited = source::on_edited(request)?;
    let bundle = fetch(&directory.settings(), registry, source, progress).await?;
    progress(Step::Landing {
        files: bundle.files.len(),
    });
    Ok(settle(directory, registry, bundle, on_edited)
        .await?
        .response)
}

/// Lands a fetched bundle: a namespace the bundles lock already holds through an update plan
/// applied at once (`plan`: local edits kept or merged three-way, `force` taking upstream; files
/// upstream dropped stay, as the contract keeps siblings), any other through [`land()`]. An empty
/// bundle of a namespace nobody downloaded writes nothing, not even a lock entry; one of a
/// locked namespace (upstream emptied its folder) moves the lock to the new pin, which then
/// lists no file, and every file stays where it is.
pub async fn settle(
    directory: &Arc<Directory>,
    registry: &Registry,
    bundle: Bundle,
    on_edited: OnEdited,
) -> Result<Landed> {
    plan::remember_base(registry, &bundle);
    let settings = directory.settings();
    // Refused before any plan, as a first landing refuses it.
    review::allow(
        &review::review(&bundle, settings.download_large_file_bytes),
        settings.download_allow_executables,
    )?;
    let planned = plan::land_locked(directory, registry, bundle.clone(), on_edited.into());
    if let Some(landed) = planned.await? {
        return Ok(landed);
    }
    let directory = directory.clone();
    tokio::task::spawn_blocking(move || land(&directory, bundle, on_edited))
        .await
        .map_err(Error::task("download task"))?
}

/// How an automatic download of one worker's bundle ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AutoOutcome {
    /// The bundle landed and its completion marker was written.
    Installed { files: usize },
    /// The registry publishes no bundle for the worker (404): nothing to do.
    NotPublished,
}

/// Downloads `worker`'s bundle at `release` as auto-download does: the same checks and landing
/// (and change events) as an explicit download, then the completion marker. A 404 is not an
/// error here.
pub async fn install_worker(
    directory: &Arc<Directory>,
    registry: &Registry,
    worker: &str,
    release: Release,
) -> Result<AutoOutcome> {
    let source = Source::Registry {
        worker: worker.to_string(),
        release: release.clone(),
    };
    let bundle = match fetch(&directory.settings(), registry, source, &|_| {}).await {
        Ok(bundle) => bundle,
        Err(e) if e.code() == Some(Code::RegistryWorkerNotFound) => {
            return Ok(AutoOutcome::NotPublished);
        }
        Err(e) => return Err(e),
    };
    let files = bundle.files.len();
    settle(directory, registry, bundle, OnEdited::Keep).await?;
    let skills_folder = directory.config().paths.skills_folder.clone();
    let worker = worker.to_string();
    tokio::task::spawn_blocking(move || marker::write_marker(&skills_folder, &worker, &release))
        .await
        .map_err(Error::task("download task"))??;
    Ok(AutoOutcome::Installed { files })
}
