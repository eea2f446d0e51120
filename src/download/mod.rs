//! Downloads: `directory::skills::download`, `download_from_repo` and `download_from_registry`
//! (contract §3.9), and the pieces of auto-download that are not about the engine (§3.10).
//!
//! A download is two steps. [`fetch`] gets a bundle from its source (a shallow git clone, or
//! the registry through the shared [`Registry`]) and checks it whole: every path, the limits,
//! collisions (see [`bundle`]). Nothing is written until the bundle passes. Then
//! [`land`] checks it against the tree (what a bundle may touch, see
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
use crate::registry::functions::download_error;
use crate::registry::{Registry, Release};

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

/// Fetches running at once in this process. Each holds its bundle in memory while it is read
/// and checked (up to twice `download_max_bytes` for a registry answer's JSON): thirty
/// concurrent downloads of a large bundle held 2.9 GiB, and one under a raised
/// `download_max_bytes` buffered 2 GiB. So a fetch is admitted against a count and against a
/// budget of memory ([`FETCH_BUDGET_MIB`]): a fetch allowed more runs with fewer beside it, or
/// alone. The others wait their turn, no longer than a call may last on the bus
/// ([`crate::time::call_deadline`]): a fetch whose caller stopped waiting is never started,
/// and the caller hears why (twenty downloads from a source that never answered held every
/// other caller's download back for minutes).
const MAX_FETCHES: u32 = 4;
/// The memory the fetches running at once may hold together, in MiB: four fetches at the
/// default `download_max_bytes` (each reserves twice it and 1 MiB).
const FETCH_BUDGET_MIB: u32 = MAX_FETCHES * 129;
static FETCHING: Admission = Admission::new(MAX_FETCHES, FETCH_BUDGET_MIB);

/// Admission to fetch: a count and a budget of MiB, both waited for in order, so two fetches
/// never each hold what the other waits for.
struct Admission {
    count: tokio::sync::Semaphore,
    mib: tokio::sync::Semaphore,
    limit: u32,
    budget: u32,
}

/// A fetch's turn: held while it runs.
struct Turn<'a> {
    _count: tokio::sync::SemaphorePermit<'a>,
    _mib: tokio::sync::SemaphorePermit<'a>,
}

impl Admission {
    const fn new(count: u32, budget_mib: u32) -> Admission {
        Admission {
            count: tokio::sync::Semaphore::const_new(count as usize),
            mib: tokio::sync::Semaphore::const_new(budget_mib as usize),
            limit: count,
            budget: budget_mib,
        }
    }

    /// A turn for a fetch that may hold `bytes` (the whole budget at most), waited for up to
    /// `wait` (`None`: as long as it takes); `D122` when it does not come in time.
    async fn take(&self, bytes: u64, wait: Option<Duration>) -> Result<Turn<'_>> {
        let mib = u32::try_from(bytes.div_ceil(1024 * 1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.budget);
        let turn = async {
            // Never closed: an acquire only waits.
            let count = self.count.acquire().await.ok()?;
            let mib = self.mib.acquire_many(mib).await.ok()?;
            Some(Turn {
                _count: count,
                _mib: mib,
            })
        };
        let turn = match wait {
            Some(wait) => tokio::time::timeout(wait, turn).await.ok().flatten(),
            None => turn.await,
        };
        turn.ok_or_else(|| {
            Error::coded(
                Code::DeadlinePassed,
                format!(
                    "this worker is already fetching as many bundles as it holds in memory at \
                     once (at most {}, fewer when download_max_bytes is raised), and this \
                     download waited {} s for its turn without starting; nothing was written. \
                     Retry in a moment",
                    self.limit,
                    wait.unwrap_or_default().as_secs()
                ),
                &[],
            )
        })
    }
}

/// Gets the bundle a source names and checks it whole. Nothing is written. At most
/// [`MAX_FETCHES`] run at once.
pub async fn fetch(
    settings: &Settings,
    registry: &Registry,
    source: Source,
    progress: &(dyn Fn(Step) + Send + Sync),
) -> Result<Bundle> {
    let holds = crate::registry::Endpoint::from_settings(settings).max_response_bytes;
    let _turn = FETCHING.take(holds, crate::time::call_deadline()).await?;
    let limits = Limits::from_settings(settings);
    match &source {
        Source::Repo { repo, branch, .. } => {
            repo::check(&source)?;
            guard::check_namespace(source.namespace())?;
            progress(Step::Cloning {
                repo: url::without_credentials(repo).into_owned(),
                branch: branch.clone(),
            });
            let timeout = Duration::from_millis(settings.download_timeout_ms);
            tokio::task::spawn_blocking(move || repo::fetch(source, timeout, limits))
                .await
                .map_err(Error::task("download task"))?
        }
        Source::Registry { worker, release } => {
            validate_worker_name(worker).map_err(Error::invalid)?;
            guard::check_namespace(worker)?;
            progress(Step::Requesting {
                worker: worker.clone(),
                release: release.value().to_string(),
            });
            let published = registry
                .skills_bundle(worker, release)
                .await
                .map_err(|e| download_error(worker, &e))?;
            let worker = worker.clone();
            from_registry::plan(source, &worker, published, limits)
        }
    }
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
/// upstream dropped stay, as the contract keeps siblings), any other through [`land`]. An empty
/// bundle writes nothing, not even a lock entry, locked or not.
pub async fn settle(
    directory: &Arc<Directory>,
    registry: &Registry,
    bundle: Bundle,
    on_edited: OnEdited,
) -> Result<Landed> {
    if !bundle.files.is_empty() {
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    const MIB: u64 = 1024 * 1024;
    const SHORT: Option<Duration> = Some(Duration::from_millis(100));

    #[test]
    fn the_budget_admits_four_fetches_at_the_default_size() {
        let each = crate::registry::Endpoint::from_settings(&Settings::default())
            .max_response_bytes
            .div_ceil(MIB);
        assert_eq!(u64::from(FETCH_BUDGET_MIB), u64::from(MAX_FETCHES) * each);
    }

    #[tokio::test]
    async fn a_fetch_waits_for_its_turn_no_longer_than_asked() {
        let admission = Admission::new(2, 10);
        let first = admission.take(MIB, None).await.expect("a turn");
        let _second = admission.take(MIB, None).await.expect("a turn");
        let started = Instant::now();
        let refused = admission.take(MIB, SHORT).await.err().expect("no turn");
        assert!(started.elapsed() >= Duration::from_millis(100));
        let said = refused.to_string();
        assert!(said.starts_with("D122 timeout:"), "{said}");
        assert!(said.contains("nothing was written"), "{said}");
        drop(first);
        admission
            .take(MIB, SHORT)
            .await
            .expect("a turn once one ends");
    }

    #[tokio::test]
    async fn a_fetch_that_may_hold_the_whole_budget_runs_alone() {
        let admission = Admission::new(4, 10);
        let small = admission.take(3 * MIB, None).await.expect("a turn");
        // Allowed more than the budget: it takes the whole of it, so waits for the small one.
        assert!(admission.take(20 * MIB, SHORT).await.is_err());
        drop(small);
        let large = admission.take(20 * MIB, SHORT).await.expect("alone");
        assert!(
            admission.take(1, SHORT).await.is_err(),
            "nothing runs beside it"
        );
        drop(large);
        admission.take(1, SHORT).await.expect("a turn once it ends");
    }
}
