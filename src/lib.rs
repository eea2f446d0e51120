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
pub mod error;
pub mod generate;
pub mod index;
mod request;
pub mod skills;
pub mod system_prompts;
pub mod time;

use std::collections::BTreeSet;

use serde_json::Value;

pub use error::{Error, Result};
pub use index::{OpenError, Report, Roots, Scope};

use config::Config;
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

/// The folders of a configuration, the index over them, and the functions that read it.
pub struct Directory {
    config: Config,
    roots: Roots,
    index: Index,
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
        let roots = Roots::from_paths(&config.paths);
        Directory {
            config,
            roots,
            index,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Brings the index up to date with the disk.
    pub fn reconcile(&self) -> Result<Report> {
        self.index.reconcile(&self.roots, &Scope::All, &|_| {})
    }

    pub fn reconcile_with_progress(
        &self,
        progress: &dyn Fn(index::reconcile::Progress),
    ) -> Result<Report> {
        self.index.reconcile(&self.roots, &Scope::All, progress)
    }

    fn visibility<'a>(&self, installed: Option<&'a BTreeSet<String>>) -> Visibility<'a> {
        Visibility {
            filter_unregistered: self.config.settings.filter_unregistered,
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
            ReadFunction::SkillsList => skills::list(&reader, visibility, request),
            ReadFunction::SkillsGet => skills::get(&reader, &self.roots, visibility, request),
            ReadFunction::SkillsIndex => skills::index(&reader, visibility),
            ReadFunction::SystemPromptsList => system_prompts::list(&reader),
            ReadFunction::SystemPromptsGet => system_prompts::get(&reader, &self.roots, request),
            ReadFunction::AgentsList => agents::list(&reader),
            ReadFunction::AgentsGet => agents::get(&reader, &self.roots, visibility, request),
        }
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
