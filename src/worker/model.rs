//! The embedding model, made available in the background at start: loaded from
//! `search_model_path`, or with `search_model_download` fetched once into the cache folder
//! beside the index (`embed::fetch`, its progress logged) and then loaded. Nothing waits for
//! it: search is lexical until it is ready, and stays so, said once in the log, without one.
//! The directory's skill vectors and the function search's lane start from it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Directory;
use crate::directory::{MODEL_NAME, ModelState};
use crate::embed::Embedder;
use crate::embed::fetch::{self, Source};
use crate::search::vectors::FunctionLane;

use super::search::SearchState;

/// How long the model's download may take to connect, and to receive its next bytes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Replaces the pinned download's base URL (a mirror, or the tests' loopback server).
pub const MODEL_URL_ENV: &str = "III_DIRECTORY_MODEL_URL";

/// Starts making the model available; returns at once.
pub fn start(
    directory: Arc<Directory>,
    search: Arc<SearchState>,
    runtime: &tokio::runtime::Handle,
) {
    let blocking = runtime.clone();
    runtime.spawn(async move {
        let Some(folder) = folder(&directory).await else {
            return;
        };
        directory.set_model_state(ModelState::Loading);
        let started = Instant::now();
        let loaded = blocking
            .spawn_blocking(move || Embedder::load(&folder).map_err(|e| (folder, e)))
            .await;
        match loaded {
            Ok(Ok(embedder)) => {
                tracing::info!(
                    model = MODEL_NAME,
                    load_ms = started.elapsed().as_millis() as u64,
                    "search model loaded; embedding in the background"
                );
                let embedder = Arc::new(embedder);
                directory.set_model_state(ModelState::Ready(embedder.clone()));
                let lane = Arc::new(FunctionLane::new(embedder));
                search.connect_lane(lane).await;
            }
            Ok(Err((folder, e))) => {
                tracing::warn!(
                    folder = %folder.display(),
                    "cannot load the search model; search ranks lexically until the worker \
                     restarts with the model's files in place: {e}"
                );
                directory.set_model_state(ModelState::Failed(e.to_string()));
            }
            Err(e) => {
                tracing::warn!("the search model's load stopped; search ranks lexically: {e}");
                directory.set_model_state(ModelState::Failed(e.to_string()));
            }
        }
    });
}

/// The folder to load the model from: the configured one, or the fetched copy; `None` (the
/// state said, and logged once) when there is none.
async fn folder(directory: &Directory) -> Option<std::path::PathBuf> {
    if let Some(folder) = directory.local_model_folder() {
        return Some(folder);
    }
    if !directory.settings().search_model_download {
        tracing::info!(
            "no search model (search_model_path is empty and search_model_download is off): \
             search ranks lexically"
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
    directory.set_model_state(ModelState::Downloading);
    // A stalled server must not hold the lock, and the state at "downloading", for good.
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .build();
    let fetched = match client {
        Ok(client) => fetch::fetch(&client, &source, &cache).await,
        Err(e) => Err(fetch::FetchError::Http {
            url: source.base_url.clone(),
            source: e,
        }),
    };
    match fetched {
        Ok(folder) => Some(folder),
        Err(e) => {
            tracing::warn!("cannot fetch the search model; search ranks lexically: {e}");
            directory.set_model_state(ModelState::Failed(e.to_string()));
            None
        }
    }
}
