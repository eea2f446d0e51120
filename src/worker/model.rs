//! The embedding model, made available in the background at start: loaded from
//! `search_model_path`, or from the copy fetched into the cache folder beside the index, which
//! `search_model_download` fetches once when it is not there (`embed::fetch`, its progress
//! logged); a fetched copy damaged since it landed is removed and fetched again once. Nothing
//! waits for it: search is lexical until it is ready, and stays so, said once in the log,
//! without one. The directory's skill vectors and the function search's lane start from it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Directory;
use crate::directory::{MODEL_NAME, ModelState};
use crate::embed::Embedder;
use crate::embed::fetch::{self, Landed, Source};
use crate::search::vectors::FunctionLane;

use super::search::SearchState;

/// How long the model's download may take to connect, and to receive its next bytes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Replaces the pinned download's base URL (a mirror, or the tests' loopback server).
pub const MODEL_URL_ENV: &str = "III_DIRECTORY_MODEL_URL";

/// How long after a download that failed for a passing reason (no network yet at boot, a 5xx,
/// a body cut short) the next attempt starts, doubled after each failure in a row up to
/// [`RETRY_LONGEST`]; `III_DIRECTORY_MODEL_RETRY_MS` sets the first wait in milliseconds (the
/// tests' loopback server).
const RETRY_FIRST: Duration = Duration::from_secs(30);
const RETRY_LONGEST: Duration = Duration::from_secs(3600);
pub const MODEL_RETRY_ENV: &str = "III_DIRECTORY_MODEL_RETRY_MS";

/// The longest one attempt at the download may take: the read timeout bounds a silence, not a
/// server that sends a byte now and then, which would otherwise hold the fetch's lock, and the
/// state at `downloading`, for good. 90 MB at 75 KB/s; a slower link gets there over several
/// attempts, each resuming the last. `III_DIRECTORY_MODEL_ATTEMPT_MS` sets it (the tests).
const ATTEMPT_LONGEST: Duration = Duration::from_secs(20 * 60);
pub const MODEL_ATTEMPT_ENV: &str = "III_DIRECTORY_MODEL_ATTEMPT_MS";

/// A duration from the environment variable `name` in milliseconds, or `default`.
fn duration_from_env(name: &str, default: Duration) -> Duration {
    crate::time::env_millis(name).map_or(default, Duration::from_millis)
}

/// Gives the download up until a restart: said in the log and in the model's state.
fn given_up(directory: &Directory, e: &fetch::FetchError) -> Option<std::path::PathBuf> {
    tracing::warn!("cannot fetch the search model; search ranks lexically: {e}");
    directory.set_model_state(ModelState::Failed(e.to_string()));
    None
}

/// Starts making the model available; returns at once.
pub fn start(
    directory: Arc<Directory>,
    search: Arc<SearchState>,
    runtime: &tokio::runtime::Handle,
) {
    let blocking = runtime.clone();
    runtime.spawn(async move {
        // A fetched copy damaged since it landed is fetched once more, never in a loop.
        let mut fetched_again = false;
        while let Some(folder) = folder(&directory).await {
            let Some(e) = load(&directory, &search, &blocking, &folder).await else {
                return;
            };
            if directory.config().paths.search_model_path.is_some() {
                // The operator's folder: never checked against the pins, never removed.
                tracing::warn!(
                    folder = %folder.display(),
                    "cannot load the search model; search ranks lexically until the worker \
                     restarts with the model's files in place: {e}"
                );
                directory.set_model_state(ModelState::Failed(e));
                return;
            }
            if fetched_again {
                // Checked as it landed: fetching it again would change nothing.
                tracing::warn!(
                    folder = %folder.display(),
                    "cannot load the search model fetched again; search ranks lexically: {e}"
                );
                directory.set_model_state(ModelState::Failed(e));
                return;
            }
            if !removed_when_damaged(&directory, &blocking, e).await {
                return;
            }
            fetched_again = true;
        }
    });
}

/// Loads the model from `folder` and connects it; the load's error when its files could not be
/// loaded (`None` once loaded, or when the load's task stopped, said in the state and the log).
async fn load(
    directory: &Directory,
    search: &Arc<SearchState>,
    blocking: &tokio::runtime::Handle,
    folder: &Path,
) -> Option<String> {
    directory.set_model_state(ModelState::Loading);
    let started = Instant::now();
    let folder = folder.to_path_buf();
    match blocking
        .spawn_blocking(move || Embedder::load(&folder))
        .await
    {
        Ok(Ok(embedder)) => {
            tracing::info!(
                model = MODEL_NAME,
                load_ms = started.elapsed().as_millis() as u64,
                "search model loaded; embedding in the background"
            );
            let embedder = Arc::new(embedder);
            directory.set_model_state(ModelState::Ready(embedder.clone()));
            search
                .connect_lane(Arc::new(FunctionLane::new(embedder)))
                .await;
            None
        }
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => {
            tracing::warn!("the search model's load stopped; search ranks lexically: {e}");
            directory.set_model_state(ModelState::Failed(e.to_string()));
            None
        }
    }
}

/// After the fetched copy failed to load with `why`: whether to look for the model again (the
/// copy was damaged since it landed and is removed, downloads being on; or another process
/// removed or is replacing it). Otherwise the state and the log say why search stays lexical.
async fn removed_when_damaged(
    directory: &Directory,
    blocking: &tokio::runtime::Handle,
    why: String,
) -> bool {
    let cache = directory.config().paths.model_cache();
    let folder = directory.fetched_model_folder();
    let checked = blocking
        .spawn_blocking(move || fetch::discard_if_damaged(&cache, &Source::pinned()))
        .await;
    let failed = |why: String| {
        tracing::warn!(
            folder = %folder.display(),
            "cannot load the fetched search model; search ranks lexically: {why}"
        );
        directory.set_model_state(ModelState::Failed(why));
        false
    };
    let damaged = match checked {
        Ok(Ok(Landed::Removed(damaged))) => damaged,
        // Whatever comes next (a copy another process landed, a fetch, or none) is looked for.
        Ok(Ok(Landed::Gone)) => return true,
        // Its files are the pinned ones: fetching them again would change nothing.
        Ok(Ok(Landed::Intact)) => return failed(why),
        Ok(Err(check)) => return failed(format!("{why}; checking the copy: {check}")),
        Err(check) => return failed(format!("{why}; checking the copy: {check}")),
    };
    let download = directory.settings().search_model_download;
    tracing::warn!(
        folder = %folder.display(),
        files = %damaged.join(", "),
        "the fetched search model was damaged since it landed (its files no longer have their \
         pinned SHA-256) and is removed{}: {why}",
        if download { "; fetching it again" } else { "" }
    );
    if !download {
        directory.set_model_state(ModelState::Failed(format!(
            "the fetched search model at {} was damaged ({why}) and is removed; search ranks \
             lexically until the worker restarts with search_model_download on (to fetch it \
             again) or search_model_path set",
            folder.display()
        )));
    }
    download
}

/// The folder to load the model from: the configured one, or the fetched copy; `None` (the
/// state said, and logged once) when there is none.
async fn folder(directory: &Directory) -> Option<std::path::PathBuf> {
    if let Some(folder) = directory.local_model_folder() {
        return Some(folder);
    }
    if !directory.settings().search_model_download {
        tracing::info!(
            cache = %directory.config().paths.model_cache().display(),
            "no search model (search_model_path is empty, the cache holds no complete copy, and \
             search_model_download is off): search ranks lexically"
        );
        directory.set_model_state(ModelState::Absent);
        return None;
    }
    let mut source = Source::pinned();
    if let Some(url) = std::env::var(MODEL_URL_ENV).ok().filter(|u| !u.is_empty()) {
        source.base_url = url;
    }
    let cache = directory.config().paths.model_cache();
    tracing::info!(
        from = %source.base_url,
        into = %cache.display(),
        "fetching the search model (about 90 MB, once); search ranks lexically meanwhile"
    );
    // A silent server must not hold the lock, and the state at "downloading", for good (nor a
    // trickling one: `ATTEMPT_LONGEST`).
    let client = match reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            let e = fetch::FetchError::Http {
                url: source.base_url.clone(),
                source: e,
            };
            return given_up(directory, &e);
        }
    };
    // A failure that may pass (the network not up yet at boot, a 5xx, a body cut short) is
    // tried again after a growing wait, resuming what arrived: without it, one such failure
    // left the worker lexical until someone restarted it.
    // Never no wait at all: a failure that recurs at once would be tried again at once.
    let mut wait = duration_from_env(MODEL_RETRY_ENV, RETRY_FIRST).max(Duration::from_millis(10));
    let longest = duration_from_env(MODEL_ATTEMPT_ENV, ATTEMPT_LONGEST);
    loop {
        directory.set_model_state(ModelState::Downloading);
        // Dropped at the deadline between two chunks: each `.part` holds whole chunks, and the
        // fetch's lock goes with it.
        let attempt = tokio::time::timeout(longest, fetch::fetch(&client, &source, &cache));
        let fetched = attempt
            .await
            .unwrap_or(Err(fetch::FetchError::TooSlow { after: longest }));
        match fetched {
            Ok(folder) => return Some(folder),
            Err(e) if e.is_transient() => {
                tracing::warn!(
                    retry_in_ms = wait.as_millis() as u64,
                    "cannot fetch the search model yet; search ranks lexically meanwhile: {e}"
                );
                directory.set_model_state(ModelState::Failed(e.to_string()));
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2).min(RETRY_LONGEST);
            }
            Err(e) => return given_up(directory, &e),
        }
    }
}
