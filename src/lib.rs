//! iii-directory: skills, system prompts and agent profiles served from folders on disk through
//! an embedded redb index.
//!
//! [`Directory`] is the whole library surface a caller needs: open it on a [`config::Config`],
//! [`Directory::reconcile`] it with the disk, and call the `directory::*` read functions, which
//! answer in the contract's exact JSON shapes from one read snapshot of the index.

pub mod agents;
pub mod bundled;
mod bundled_docs;
pub mod config;
pub mod doc;
pub mod download;
pub mod error;
pub mod events;
pub mod generate;
pub mod index;
pub mod registry;
mod request;
pub mod skills;
pub mod store;
pub mod system_prompts;
pub mod time;
pub mod watch;
pub mod worker;
mod write;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde_json::Value;

pub use error::{Error, Result};
pub use index::{OpenError, Report, Roots, Scope};

use config::Config;
use events::{ChangeEvent, Family, Subscriber, Subscribers};
use index::Index;
use skills::Visibility;

/// The read functions of the contract that the library answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFunction {
    SkillsList,
    SkillsGet,
    SkillsIndex,
    SystemPromptsList,
    SystemPromptsGet,
    AgentsList,
    AgentsGet,
}

impl ReadFunction {
    pub const ALL: [ReadFunction; 7] = [
        ReadFunction::SkillsList,
        ReadFunction::SkillsGet,
        ReadFunction::SkillsIndex,
        ReadFunction::SystemPromptsList,
        ReadFunction::SystemPromptsGet,
        ReadFunction::AgentsList,
        ReadFunction::AgentsGet,
    ];

    /// The function id on the engine bus.
    pub fn id(self) -> &'static str {
        match self {
            ReadFunction::SkillsList => "directory::skills::list",
            ReadFunction::SkillsGet => "directory::skills::get",
            ReadFunction::SkillsIndex => "directory::skills::index",
            ReadFunction::SystemPromptsList => "directory::system-prompts::list",
            ReadFunction::SystemPromptsGet => "directory::system-prompts::get",
            ReadFunction::AgentsList => "directory::agents::list",
            ReadFunction::AgentsGet => "directory::agents::get",
        }
    }

    pub fn from_id(id: &str) -> Option<ReadFunction> {
        ReadFunction::ALL.into_iter().find(|f| f.id() == id)
    }
}

/// The write functions of the contract that the library answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteFunction {
    SkillsCreate,
    SkillsUpdate,
    SkillsDelete,
    SystemPromptsCreate,
    SystemPromptsUpdate,
    SystemPromptsDelete,
    AgentsCreate,
    AgentsUpdate,
    AgentsDelete,
}

impl WriteFunction {
    pub const ALL: [WriteFunction; 9] = [
        WriteFunction::SkillsCreate,
        WriteFunction::SkillsUpdate,
        WriteFunction::SkillsDelete,
        WriteFunction::SystemPromptsCreate,
        WriteFunction::SystemPromptsUpdate,
        WriteFunction::SystemPromptsDelete,
        WriteFunction::AgentsCreate,
        WriteFunction::AgentsUpdate,
        WriteFunction::AgentsDelete,
    ];

    /// The function id on the engine bus.
    pub fn id(self) -> &'static str {
        match self {
            WriteFunction::SkillsCreate => "directory::skills::create",
            WriteFunction::SkillsUpdate => "directory::skills::update",
            WriteFunction::SkillsDelete => "directory::skills::delete",
            WriteFunction::SystemPromptsCreate => "directory::system-prompts::create",
            WriteFunction::SystemPromptsUpdate => "directory::system-prompts::update",
            WriteFunction::SystemPromptsDelete => "directory::system-prompts::delete",
            WriteFunction::AgentsCreate => "directory::agents::create",
            WriteFunction::AgentsUpdate => "directory::agents::update",
            WriteFunction::AgentsDelete => "directory::agents::delete",
        }
    }

    pub fn from_id(id: &str) -> Option<WriteFunction> {
        WriteFunction::ALL.into_iter().find(|f| f.id() == id)
    }
}

/// The folders of a configuration, the index over them, and the functions that read and
/// write them.
pub struct Directory {
    config: Config,
    roots: Roots,
    index: Index,
    /// Held across a write's checks, its disk write and its reconcile, and across every other
    /// reconcile: a write is never interleaved with another write, and a reconcile never sees
    /// a write on disk before the write's own reconcile (which would report it as external).
    write_lock: Mutex<()>,
    subscribers: Subscribers,
    /// The decoded skill rows of the last revision `list` served.
    list_cache: Mutex<Option<Arc<skills::ListCache>>>,
    /// The live settings: tunable fields change with the configuration worker.
    settings: RwLock<config::Settings>,
}

impl Directory {
    /// Opens the index as its writer (the worker, or the CLI when no worker runs).
    pub fn open(config: Config) -> Result<Directory, OpenError> {
        let index = Index::open_writer(&config.paths.index_path)?;
        Ok(Directory::with_index(config, index))
    }

    /// Opens the index read-only, following the writer of another process.
    pub fn open_read_only(config: Config) -> Result<Directory> {
        let index = Index::open_reader(&config.paths.index_path)?;
        Ok(Directory::with_index(config, index))
    }

    /// Opens as the writer when no other process is, else as a read-only follower.
    pub fn open_shared(config: Config) -> Result<Directory> {
        match Index::open_writer(&config.paths.index_path) {
            Ok(index) => Ok(Directory::with_index(config, index)),
            Err(OpenError::Busy(_)) => Directory::open_read_only(config),
            Err(e) => Err(Error::Index(e.to_string())),
        }
    }

    fn with_index(config: Config, index: Index) -> Directory {
        if index.is_writer() {
            // Before the first reconcile: a download killed mid-landing is finished or undone.
            download::recover_at_open(&config.paths);
        }
        let roots = Roots::from_paths(&config.paths);
        let settings = RwLock::new(config.settings.clone());
        Directory {
            config,
            roots,
            index,
            write_lock: Mutex::new(()),
            subscribers: Subscribers::default(),
            list_cache: Mutex::new(None),
            settings,
        }
    }

    /// The configuration the directory was opened with (its folders are fixed for its life).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The live settings.
    pub fn settings(&self) -> config::Settings {
        self.settings
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Applies new settings live. Topology fields (folders, index path, `auto_download`) cannot
    /// change while the directory is open: if any differs, nothing is applied and their names
    /// are returned.
    pub fn apply_settings(&self, new: config::Settings) -> Result<(), Vec<&'static str>> {
        let mut settings = self.settings.write().unwrap_or_else(|p| p.into_inner());
        let refused = settings.topology_changed(&new);
        if !refused.is_empty() {
            return Err(refused);
        }
        *settings = new;
        Ok(())
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Receives every change event from now on.
    pub fn subscribe(&self, subscriber: Subscriber) {
        self.subscribers.add(subscriber);
    }

    fn lock(&self) -> Result<MutexGuard<'_, ()>> {
        self.write_lock
            .lock()
            .map_err(|_| Error::Index("write lock poisoned by a panic".into()))
    }

    /// Brings the index up to date with the disk. Changes found here were made behind the
    /// library's back: each family whose answers changed gets one `external` event.
    pub fn reconcile(&self) -> Result<Report> {
        self.reconcile_scope(&Scope::All, &|_| {})
    }

    pub fn reconcile_with_progress(
        &self,
        progress: &dyn Fn(index::reconcile::Progress),
    ) -> Result<Report> {
        self.reconcile_scope(&Scope::All, progress)
    }

    /// Reconciles only these paths (and what is under them), as for a watcher burst.
    pub fn reconcile_paths(&self, paths: Vec<PathBuf>) -> Result<Report> {
        self.reconcile_scope(&Scope::Paths(paths), &|_| {})
    }

    fn reconcile_scope(
        &self,
        scope: &Scope,
        progress: &dyn Fn(index::reconcile::Progress),
    ) -> Result<Report> {
        let report = {
            let _guard = self.lock()?;
            self.index.reconcile(&self.roots, scope, progress)?
        };
        // Holding the index's writer lock means no other process writes these folders through
        // us, so the temporary files killed writers left behind (which a full walk saw) can go.
        let sweep = store::sweep_found_temps(&report.temps);
        if !sweep.removed.is_empty() {
            tracing::info!(
                removed = sweep.removed.len(),
                kept = sweep.kept,
                "removed temporary files left by interrupted writes"
            );
        }
        let changed = [
            (Family::Skills, report.skills_changed),
            (Family::SystemPrompts, report.system_prompts_changed),
            (Family::Agents, report.agents_changed),
        ];
        for (family, _) in changed.into_iter().filter(|(_, changed)| *changed) {
            self.subscribers.publish(&ChangeEvent::external(family));
        }
        Ok(report)
    }

    /// Runs a write function: checks, an atomic write on disk, then the index updated in the
    /// same call (so the next read sees it), then exactly one change event.
    pub fn write(
        &self,
        function: WriteFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Value> {
        if !self.index.is_writer() {
            return Err(Error::Index(
                "this index is open read-only (a running worker owns it); write through the worker"
                    .into(),
            ));
        }
        let outcome = {
            let _guard = self.lock()?;
            let reader = self.index.read()?;
            let visibility = self.visibility(installed);
            let roots = &self.roots;
            let outcome = match function {
                WriteFunction::SkillsCreate => {
                    skills::write::create(&reader, roots, visibility, request)
                }
                WriteFunction::SkillsUpdate => {
                    skills::write::update(&reader, roots, visibility, request)
                }
                WriteFunction::SkillsDelete => {
                    skills::write::delete(&reader, roots, visibility, request)
                }
                WriteFunction::SystemPromptsCreate => {
                    system_prompts::write::create(&reader, roots, request)
                }
                WriteFunction::SystemPromptsUpdate => {
                    system_prompts::write::update(&reader, roots, request)
                }
                WriteFunction::SystemPromptsDelete => {
                    system_prompts::write::delete(&reader, roots, request)
                }
                WriteFunction::AgentsCreate => agents::write::create(&reader, roots, request),
                WriteFunction::AgentsUpdate => agents::write::update(&reader, roots, request),
                WriteFunction::AgentsDelete => agents::write::delete(&reader, roots, request),
            }?;
            drop(reader);
            self.index
                .reconcile(&self.roots, &Scope::Paths(outcome.touched.clone()), &|_| {})?;
            outcome
        };
        self.subscribers.publish(&outcome.event);
        Ok(outcome.response)
    }

    fn visibility<'a>(&self, installed: Option<&'a BTreeSet<String>>) -> Visibility<'a> {
        Visibility {
            filter_unregistered: self.settings().filter_unregistered,
            installed,
        }
    }

    /// Answers a read function with the contract's response shape. `installed` is the set of
    /// installed worker names for `filter_unregistered`; `None` when unknown (nothing hidden).
    pub fn read(
        &self,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<Value> {
        let reader = self.index.read()?;
        let visibility = self.visibility(installed);
        match function {
            ReadFunction::SkillsList => {
                let text = self.list_cache(&reader)?.list_json(visibility, request)?;
                serde_json::from_str(&text).map_err(|e| Error::Index(e.to_string()))
            }
            ReadFunction::SkillsGet => skills::get(&reader, &self.roots, visibility, request),
            ReadFunction::SkillsIndex => skills::index(&reader, visibility),
            ReadFunction::SystemPromptsList => system_prompts::list(&reader),
            ReadFunction::SystemPromptsGet => system_prompts::get(&reader, &self.roots, request),
            ReadFunction::AgentsList => agents::list(&reader),
            ReadFunction::AgentsGet => agents::get(&reader, &self.roots, visibility, request),
        }
    }

    /// Answers a read function with the response's JSON text, as it goes on the wire. `list`,
    /// which UIs call constantly, is served from rows decoded once per index revision.
    pub fn read_json(
        &self,
        function: ReadFunction,
        request: &Value,
        installed: Option<&BTreeSet<String>>,
    ) -> Result<String> {
        if function == ReadFunction::SkillsList {
            let reader = self.index.read()?;
            return self
                .list_cache(&reader)?
                .list_json(self.visibility(installed), request);
        }
        let value = self.read(function, request, installed)?;
        serde_json::to_string(&value).map_err(|e| Error::Index(e.to_string()))
    }

    /// The list rows of the snapshot's revision, decoded now if the cached ones are older.
    fn list_cache(&self, reader: &index::Reader) -> Result<Arc<skills::ListCache>> {
        let revision = reader.revision()?;
        let mut cache = self
            .list_cache
            .lock()
            .map_err(|_| Error::Index("list cache poisoned by a panic".into()))?;
        if let Some(cached) = cache.as_ref().filter(|c| c.revision == revision) {
            return Ok(cached.clone());
        }
        let fresh = Arc::new(skills::ListCache::build(reader)?);
        *cache = Some(fresh.clone());
        Ok(fresh)
    }

    /// `directory::index::status`, beyond the original: the index revision, how many rows each
    /// family serves, every skipped file with its reason, the last reconcile, and the watcher's
    /// health when one runs.
    pub fn status(&self, watcher: Option<&watch::WatchStatus>) -> Result<Value> {
        let reader = self.index.read()?;
        let count = |v: Value, key: &str| v[key].as_array().map_or(0, Vec::len);
        let last = reader.last_reconcile()?;
        Ok(serde_json::json!({
            "revision": reader.revision()?,
            "index_path": self.index.path().display().to_string(),
            "files": reader.file_count()?,
            "counts": {
                "skills": reader.skills()?.len(),
                "system_prompts": count(system_prompts::list(&reader)?, "prompts"),
                "agents": count(agents::list(&reader)?, "agents"),
            },
            "skipped": self.skipped()?,
            "last_reconcile": last.map(|l| serde_json::json!({
                "at": l.at.rfc3339(),
                "duration_ms": l.duration_ms,
            })),
            "watcher": watcher,
        }))
    }

    /// Every file (or folder) the index does not serve, with why.
    pub fn skipped(&self) -> Result<Vec<Skipped>> {
        let reader = self.index.read()?;
        Ok(reader
            .skipped()?
            .into_iter()
            .map(|(root, rel, reason)| Skipped {
                root: root.config_key(),
                path: self.roots.file(root, &rel).display().to_string(),
                reason,
            })
            .collect())
    }
}

/// A file the index does not serve.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The configuration key of the root it sits under.
    pub root: &'static str,
    pub path: String,
    pub reason: String,
}
