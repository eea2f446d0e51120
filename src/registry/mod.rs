//! The workers registry client (`registry_url`, by default `https://api.workers.iii.dev`): one
//! HTTP client and one response cache, shared by everything that asks the registry something.
//!
//! - [`Registry::list_workers`]: `GET {base}/w?search=…&cursor=…`, a page of published workers.
//! - [`Registry::worker_info`]: `GET {base}/w/{name}?version=…` and
//!   `GET {base}/w/{name}/skills?version=…` in parallel, merged into one record.
//! - [`Registry::skills_bundle`]: `GET {base}/w/{name}/skills?version=…` with the files' contents,
//!   for downloads (never cached: a download always installs what the registry serves now).
//!
//! Where the registry is, the timeout and the cache lifetime are read live from an [`Endpoint`]
//! source at every call, so a configuration change applies to the next request. Successful
//! `list_workers` and `worker_info` answers are cached for `registry_cache_ttl_ms` (0 = no
//! cache); [`Registry::clear_cache`] forgets them (the worker calls it on every configuration
//! change). Every request carries `User-Agent: iii-directory/<version>`, is bounded by
//! `download_timeout_ms` (a page's or a record's also by the call deadline,
//! [`Endpoint::for_records`]), and reads at most [`Endpoint::max_response_bytes`] of body.
//!
//! Errors are typed ([`RegistryError`]); [`functions`] renders them as the contract's `D310`,
//! `D311` and `D320` messages, which never carry the registry's URL or its response body.
//!
//! The contract functions `directory::registry::workers::list` and `::info` (request checks,
//! response shapes) are in [`functions`]; this module is the client they, the downloads and
//! function search share.

pub mod admission;
mod cache;
mod flight;
pub mod functions;
mod http;
pub mod model;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Settings;
use crate::doc::ids::{WorkerNameError, validate_worker_name};
use cache::{Cache, Cached, Key};
use flight::Flights;
pub use model::{
    ApiReference, Author, BundleFile, Dependency, FunctionContract, Pagination, PromptEntry,
    SkillEntry, SkillsBundle, SkillsTree, TriggerContract, Worker, WorkerInfo, WorkerPage,
};

/// The release every unqualified request asks for (contract: `tag` defaults to `latest`).
pub const LATEST: &str = "latest";

/// Where the registry is and how long to wait for it, as configured right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `registry_url` with any trailing `/` trimmed.
    pub base_url: String,
    /// `download_timeout_ms`: the whole of one request, body included.
    pub timeout: Duration,
    /// `registry_cache_ttl_ms`: how long a successful answer is reused; zero disables the cache.
    pub cache_ttl: Duration,
    /// The most body bytes read from one response. A skills bundle response carries the
    /// bundle's files as JSON strings, so the cap follows `download_max_bytes` (see
    /// [`Endpoint::from_settings`]).
    pub max_response_bytes: u64,
}

/// Slack on top of twice the bundle cap for a response's JSON framing and escapes: a markdown
/// bundle's escapes (`\n`, `\"`) add far less than its own size.
const RESPONSE_FRAMING_BYTES: u64 = 1024 * 1024;

/// The share of the call deadline a request for a page of workers or a worker's record may
/// take (the rest is for the call's other work: the cache, the answer).
const RECORD_SHARE_OF_DEADLINE: f64 = 0.8;

/// The most body bytes read from a registry answer that carries no file contents (a page of
/// workers, a worker's record): a published worker's record is kilobytes, and decoded, such an
/// answer takes tens of times its size in memory (a 15 MB record took 900 MB).
pub const MAX_RECORD_BYTES: u64 = 4 * 1024 * 1024;

impl Endpoint {
    /// The most body bytes read from an answer that carries no file contents.
    fn record_cap(&self) -> u64 {
        MAX_RECORD_BYTES.min(self.max_response_bytes)
    }

    /// This endpoint for a page of workers or a worker's record (`list_workers`,
    /// `worker_info`): their callers are calls on the bus, cut at the call deadline, so a
    /// request ends within [`RECORD_SHARE_OF_DEADLINE`] of it whatever `download_timeout_ms`
    /// says (60 s by default, against a deadline of 25 s): a registry that does not answer is
    /// then reported as the contract says (`D320`), not cut by the watchdog (`D122`).
    fn for_records(mut self) -> Endpoint {
        if let Some(deadline) = crate::time::call_deadline() {
            self.timeout = self.timeout.min(deadline.mul_f64(RECORD_SHARE_OF_DEADLINE));
        }
        self
    }

    /// The endpoint the settings describe.
    pub fn from_settings(settings: &Settings) -> Endpoint {
        Endpoint {
            base_url: settings.registry_url.trim_end_matches('/').to_string(),
            timeout: Duration::from_millis(settings.download_timeout_ms),
            cache_ttl: Duration::from_millis(settings.registry_cache_ttl_ms),
            max_response_bytes: files_cap(settings),
        }
    }
}

/// The most body bytes read from an answer carrying a bundle's files (twice
/// `download_max_bytes`, for the JSON's escapes, and framing): also what a clone's read is
/// admitted for (`admission`).
pub fn files_cap(settings: &Settings) -> u64 {
    settings
        .download_max_bytes
        .saturating_mul(2)
        .saturating_add(RESPONSE_FRAMING_BYTES)
}

/// Which release of a worker to ask for. Callers name a `version` (semver) or a `tag` (such
/// as `latest`); both travel as `?version=<value>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Release {
    Version(String),
    Tag(String),
}

impl Release {
    /// The `latest` tag.
    pub fn latest() -> Release {
        Release::Tag(LATEST.to_string())
    }

    /// The value sent as `?version=`.
    pub fn value(&self) -> &str {
        match self {
            Release::Version(v) | Release::Tag(v) => v,
        }
    }

    /// The request key the caller used: `version` or `tag`.
    pub fn key(&self) -> &'static str {
        match self {
            Release::Version(_) => "version",
            Release::Tag(_) => "tag",
        }
    }
}

/// Why a registry request gave no usable answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The worker name cannot be sent (the validator's reason); nothing was requested.
    #[error(transparent)]
    InvalidName(#[from] WorkerNameError),
    /// No answer: DNS, connection, TLS, or the timeout.
    #[error("could not reach the registry")]
    Unreachable,
    /// HTTP 404: no such worker or release.
    #[error("registry returned HTTP 404")]
    NotFound,
    /// Any other status outside 2xx.
    #[error("registry returned HTTP {0}")]
    Status(u16),
    /// A body over [`Endpoint::max_response_bytes`]; the rest was not read.
    #[error("registry response is larger than {0} bytes")]
    TooLarge(u64),
    /// A body that is not the JSON expected.
    #[error("could not decode the registry response")]
    Decode,
    /// No turn to read a response carrying files within the call deadline (see [`admission`]);
    /// its body was not read.
    #[error(transparent)]
    Busy(#[from] admission::TurnRefused),
}

/// The shared registry client. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Registry {
    http: http::Http,
    endpoint: Box<dyn Fn() -> Endpoint + Send + Sync>,
    cache: Cache,
    /// The `list_workers` and `worker_info` requests under way, shared by identical calls.
    pages: Flights<Key, Arc<WorkerPage>>,
    infos: Flights<Key, Arc<WorkerInfo>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("endpoint", &(self.endpoint)())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A client that reads its endpoint from `endpoint` before every request (the worker passes
    /// a closure over the directory's live settings).
    pub fn new(endpoint: impl Fn() -> Endpoint + Send + Sync + 'static) -> Registry {
        Registry {
            http: http::Http::new(),
            endpoint: Box::new(endpoint),
            cache: Cache::default(),
            pages: Flights::default(),
            infos: Flights::default(),
        }
    }

    /// A client with a fixed endpoint (the command line, tests).
    pub fn fixed(endpoint: Endpoint) -> Registry {
        Registry::new(move || endpoint.clone())
    }

    /// The endpoint as configured right now.
    pub fn endpoint(&self) -> Endpoint {
        (self.endpoint)()
    }

    /// Forgets every cached answer (a configuration change may have moved the registry).
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// One page of published workers, optionally filtered by free text (`search`, matched by
    /// the registry) and continued from an opaque `cursor`. Blank values are not sent. Cached.
    pub async fn list_workers(
        &self,
        search: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<Arc<WorkerPage>, RegistryError> {
        let endpoint = self.endpoint().for_records();
        let search = search.map(str::trim).filter(|s| !s.is_empty());
        let cursor = cursor.map(str::trim).filter(|s| !s.is_empty());
        let key = Key::List {
            base: endpoint.base_url.clone(),
            search: search.map(str::to_string),
            cursor: cursor.map(str::to_string),
        };
        if let Some(Cached::Page(page)) = self.cache.get(&key, endpoint.cache_ttl) {
            return Ok(page);
        }
        let mut query = Vec::new();
        if let Some(search) = search {
            query.push(("search", search));
        }
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor));
        }
        let url = format!("{}/w", endpoint.base_url);
        let cap = endpoint.record_cap();
        let ask = async {
            let body = self.http.get_json(&endpoint, &url, &query, cap).await?;
            let page = Arc::new(model::parse_page(&body)?);
            self.cache
                .put(key.clone(), Cached::Page(page.clone()), endpoint.cache_ttl);
            Ok(page)
        };
        self.pages.join(&key, ask).await
    }

    /// One worker's registry record at a release: its envelope, readme, functions and triggers
    /// (`GET /w/{name}`) merged with its skills tree (`GET /w/{name}/skills`, contents dropped).
    /// Both requests run at once; a 404 on either is [`RegistryError::NotFound`]. Cached.
    pub async fn worker_info(
        &self,
        name: &str,
        release: &Release,
    ) -> Result<Arc<WorkerInfo>, RegistryError> {
        validate_worker_name(name).map_err(RegistryError::InvalidName)?;
        let endpoint = self.endpoint().for_records();
        let key = Key::Info {
            base: endpoint.base_url.clone(),
            name: name.to_string(),
            release: release.clone(),
        };
        if let Some(Cached::Info(info)) = self.cache.get(&key, endpoint.cache_ttl) {
            return Ok(info);
        }
        self.infos
            .join(&key, self.ask_info(&endpoint, &key, name, release))
            .await
    }

    /// [`Registry::worker_info`]'s two requests, merged and cached under `key`.
    async fn ask_info(
        &self,
        endpoint: &Endpoint,
        key: &Key,
        name: &str,
        release: &Release,
    ) -> Result<Arc<WorkerInfo>, RegistryError> {
        let query = [("version", release.value())];
        let detail_url = format!("{}/w/{name}", endpoint.base_url);
        let skills_url = format!("{}/w/{name}/skills", endpoint.base_url);
        let record_cap = endpoint.record_cap();
        // The skills leg carries the files' contents (dropped here): it is read as a bundle
        // is, in its turn, held until the record is built.
        let (detail, skills) = tokio::join!(
            self.http
                .get_json(endpoint, &detail_url, &query, record_cap),
            async {
                let (bytes, turn) = self
                    .http
                    .get_files(endpoint, &skills_url, &query, endpoint.max_response_bytes)
                    .await?;
                Ok((http::decode(bytes).await?, turn))
            },
        );
        // A missing worker is reported as such whichever leg said so first.
        let (detail, skills) = match (detail, skills) {
            (Err(RegistryError::NotFound), _) | (_, Err(RegistryError::NotFound)) => {
                return Err(RegistryError::NotFound);
            }
            (detail, skills) => (detail?, skills?),
        };
        let (skills, _turn) = skills;
        let info = Arc::new(model::merge_info(name, &detail, &skills));
        self.cache
            .put(key.clone(), Cached::Info(info.clone()), endpoint.cache_ttl);
        Ok(info)
    }

    /// A worker's published skills bundle with every file's content, for a download, with the
    /// turn it was read in (see [`admission`]): held as long as the bundle is, it keeps the
    /// bundle within the reads' memory budget. Never cached. The body must be
    /// `{ name?, version?, skills: [{ path, content }] }`.
    pub async fn skills_bundle(
        &self,
        worker: &str,
        release: &Release,
    ) -> Result<(SkillsBundle, admission::Turn<'static>), RegistryError> {
        validate_worker_name(worker).map_err(RegistryError::InvalidName)?;
        let endpoint = self.endpoint();
        let url = format!("{}/w/{worker}/skills", endpoint.base_url);
        let (bytes, turn) = self
            .http
            .get_files(
                &endpoint,
                &url,
                &[("version", release.value())],
                endpoint.max_response_bytes,
            )
            .await?;
        Ok((model::parse_bundle(&bytes)?, turn))
    }
}
