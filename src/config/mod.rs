//! The worker's configuration: the settings model and its defaults, and how the configured
//! folders become absolute paths. `fields` holds the keys (types, restart rules, schema,
//! validation); `seed` reads a YAML `--config` file.
//!
//! Nothing here talks to the engine or watches files; the worker adapter fetches values and
//! decides what to do with a topology change, using [`Settings::topology_changed`].

mod fields;
pub mod layout;
mod seed;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use seed::{MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH};

/// Environment variable naming the Compose project folder; relative folders resolve against it
/// when set (contract: spec 2.6).
pub const COMPOSE_DIR_ENV: &str = "III_COMPOSE_DIR";

/// Every setting of the worker. Field names are the contract's configuration keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    // Topology: fixed for the process lifetime (a change needs a restart). So are the two
    // `search_model_*` fields at the end (`fields` marks them `topology`).
    /// Writable root of skills and system prompts.
    pub skills_folder: String,
    /// Project-scoped root whose top-level namespaces shadow `skills_folder` wholesale.
    pub local_skills_folder: String,
    /// Writable root of direct `<id>.md` agent profiles.
    pub agents_folder: String,
    /// Read-only root of agent skills installed by other tools.
    pub agents_skills_folder: String,
    /// The user's agent profiles for every project, edited in place; empty for none (ours:
    /// added after 1.2.8 upstream).
    pub global_agents_folder: String,
    /// The user's read-only agent skills for every agent, below every other skill root; empty
    /// for none (ours: added after 1.2.8 upstream).
    pub global_agents_skills_folder: String,
    /// Subscribe to worker-add events and run the boot reconcile of worker skill bundles.
    pub auto_download: bool,
    /// Where the redb index file lives (ours, not in the upstream contract).
    pub index_path: String,
    /// The bundles lock: what every downloaded bundle landed, with its provenance (ours).
    pub bundles_lock_path: String,

    // Tunable: applied in place on a configuration update, all but the last two
    // (`search_model_path`, `search_model_download`), which need a restart.
    /// Base URL of the public workers registry.
    pub registry_url: String,
    /// Timeout of one git clone or registry HTTP request, in milliseconds.
    pub download_timeout_ms: u64,
    /// How long registry responses (and the installed-workers set) are cached, in milliseconds.
    pub registry_cache_ttl_ms: u64,
    /// Hide skills whose top namespace is not an installed worker.
    pub filter_unregistered: bool,
    /// Bind the `directory::pre-generate` search-hint hook.
    pub inject_hint: bool,
    /// Fewest distinct workers in a surface before the hint fires (0 = always).
    pub hint_min_workers: u64,
    /// Include installable registry workers in every function search.
    pub registry_search: bool,
    /// Most files one downloaded bundle may hold (ours, not in the upstream contract).
    pub download_max_files: u64,
    /// Most bytes one downloaded bundle may hold, all files together (ours).
    pub download_max_bytes: u64,
    /// Interval of the slow reconcile that catches what the watcher missed, in milliseconds;
    /// 0 disables it (ours, not in the upstream contract).
    pub safety_net_interval_ms: u64,
    /// Index revisions whose changed rows the index keeps, so that a `list` with
    /// `since_revision` can answer with only what changed (ours, not in the upstream contract).
    pub change_log_revisions: u64,
    /// Whether a bundle holding executable files may land (ours).
    pub download_allow_executables: bool,
    /// Bundle files of at least this many bytes are listed in a download's `review` (ours).
    pub download_large_file_bytes: u64,
    /// Folder holding the embedding model's `model.safetensors`, `tokenizer.json` and
    /// `config.json`; empty for none; read at start, a change needs a restart (ours, not in the
    /// upstream contract).
    pub search_model_path: String,
    /// Without `search_model_path`, fetch the model once into `models/` beside the index file
    /// (pinned URLs, checked files); off for an air-gapped deployment; read at start, a change
    /// needs a restart (ours).
    pub search_model_download: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            skills_folder: "skills".to_owned(),
            local_skills_folder: "skills/iii".to_owned(),
            agents_folder: "agents".to_owned(),
            agents_skills_folder: ".agents/skills".to_owned(),
            global_agents_folder: String::new(),
            global_agents_skills_folder: String::new(),
            auto_download: true,
            index_path: "data/iii-directory/index.redb".to_owned(),
            bundles_lock_path: DEFAULT_BUNDLES_LOCK_PATH.to_owned(),
            registry_url: "https://api.workers.iii.dev".to_owned(),
            download_timeout_ms: 60_000,
            registry_cache_ttl_ms: 60_000,
            filter_unregistered: true,
            inject_hint: false,
            hint_min_workers: 2,
            registry_search: true,
            download_max_files: DEFAULT_DOWNLOAD_MAX_FILES,
            download_max_bytes: DEFAULT_DOWNLOAD_MAX_BYTES,
            safety_net_interval_ms: 300_000,
            change_log_revisions: DEFAULT_CHANGE_LOG_REVISIONS,
            download_allow_executables: true,
            download_large_file_bytes: DEFAULT_DOWNLOAD_LARGE_FILE_BYTES,
            search_model_path: String::new(),
            search_model_download: true,
        }
    }
}

/// Default of `download_max_files`: far above any real skill bundle (tens of files), far below
/// what would make a download a denial of service.
pub const DEFAULT_DOWNLOAD_MAX_FILES: u64 = 2_000;
/// Default of `download_max_bytes` (64 MiB): a bundle is text and a few small assets.
pub const DEFAULT_DOWNLOAD_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Default of `bundles_lock_path`: in the default skills folder, beside the namespaces it
/// describes (a `.json` file is never served).
pub const DEFAULT_BUNDLES_LOCK_PATH: &str = "skills/iii-bundles.lock.json";
/// Default of `download_large_file_bytes` (1 MiB): a skill is text; a file this large is an
/// asset or a binary a reviewer wants to see named.
pub const DEFAULT_DOWNLOAD_LARGE_FILE_BYTES: u64 = 1024 * 1024;
/// Default of `change_log_revisions`: every write is one revision, so this covers about 20
/// minutes of 8 writes a second, or 3 minutes of 50 (a UI that polls every few seconds never
/// falls that far behind); the log then holds a few hundred KiB.
pub const DEFAULT_CHANGE_LOG_REVISIONS: u64 = 10_000;

/// Why a configuration could not be used. Each message says where the problem is and what to
/// change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "cannot read configuration file {}: {error}; check the path passed to --config",
        path.display()
    )]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("in configuration file {}: {error}", path.display())]
    InFile {
        path: PathBuf,
        error: Box<ConfigError>,
    },
    #[error(
        "configuration is too large ({bytes} bytes; max {max}); a settings document needs only \
         a few lines",
        max = MAX_CONFIG_BYTES
    )]
    TooLarge { bytes: u64 },
    #[error("configuration is not valid YAML: {0}")]
    Yaml(String),
    #[error(
        "configuration uses a YAML alias (*name); aliases are not supported, write the value out \
         in full"
    )]
    Alias,
    #[error(
        "configuration nests collections more than {max} levels deep; settings are plain \
         key: value pairs",
        max = MAX_CONFIG_DEPTH
    )]
    TooDeep,
    #[error("configuration holds {count} YAML documents; put every setting in a single document")]
    MultipleDocuments { count: usize },
    /// A mapping of which no key is a setting: not a configuration file at all (a `--config`
    /// pointed at the wrong file), refused with one error rather than a warning per line.
    #[error(
        "configuration holds no known key ({unknown} unknown); is this an iii-directory \
         configuration file? (see config.yaml.example)"
    )]
    NoKnownKey { unknown: usize },
    #[error("configuration must be a mapping of key: value pairs at the top level, got {got}")]
    NotAMapping { got: &'static str },
    /// A value that would let the worker walk, serve or overwrite what is not its own (see
    /// [`layout`]).
    #[error("configuration key \"{key}\" refused: {} {why}", path.display())]
    Unsafe {
        key: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("configuration key \"{key}\" must be {expected}, got {got}")]
    InvalidValue {
        key: &'static str,
        expected: &'static str,
        got: &'static str,
    },
}

impl Settings {
    /// Settings from a YAML document (the `--config` seed). An empty document gives the
    /// defaults; unknown keys come back as warnings; a value of the wrong type is an error.
    pub fn from_yaml_str(text: &str) -> Result<(Settings, Vec<String>), ConfigError> {
        fields::settings_from_value(&seed::yaml_value(text)?)
    }

    /// Settings from the live JSON value held by the engine's `configuration` worker, with the
    /// same rules as [`Settings::from_yaml_str`]; `null` gives the defaults.
    pub fn from_json(value: &Value) -> Result<(Settings, Vec<String>), ConfigError> {
        fields::settings_from_value(value)
    }

    /// Every field as a JSON object keyed by the configuration keys.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self)
            .expect("Settings holds only strings, booleans and integers, which always serialize")
    }

    /// The path settings written from the home folder (`~`, `~/…`), as `(key, value)`.
    pub fn tilde_paths(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("skills_folder", &self.skills_folder),
            ("local_skills_folder", &self.local_skills_folder),
            ("agents_folder", &self.agents_folder),
            ("agents_skills_folder", &self.agents_skills_folder),
            ("global_agents_folder", &self.global_agents_folder),
            (
                "global_agents_skills_folder",
                &self.global_agents_skills_folder,
            ),
            ("index_path", &self.index_path),
            ("bundles_lock_path", &self.bundles_lock_path),
            ("search_model_path", &self.search_model_path),
        ]
        .into_iter()
        .map(|(key, raw)| (key, raw.trim()))
        .filter(|(_, raw)| *raw == "~" || raw.starts_with("~/"))
    }

    /// The configured folders and index file as paths: relative ones joined onto `base`, `~`
    /// expanded with `home`. Resolved literally: the default local folder sits inside the
    /// default skills folder, as upstream does.
    pub fn resolve(&self, base: &Path, home: Option<&Path>) -> Paths {
        let at = |raw: &str| resolve_path(raw, base, home);
        Paths {
            skills_folder: at(&self.skills_folder),
            local_skills_folder: at(&self.local_skills_folder),
            agents_folder: at(&self.agents_folder),
            agents_skills_folder: at(&self.agents_skills_folder),
            global_agents_folder: optional(&self.global_agents_folder).map(at),
            global_agents_skills_folder: optional(&self.global_agents_skills_folder).map(at),
            index_path: at(&self.index_path),
            bundles_lock: at(&self.bundles_lock_path),
            search_model_path: optional(&self.search_model_path).map(at),
        }
    }
}

/// A setting that may be empty for none, trimmed.
fn optional(raw: &str) -> Option<&str> {
    Some(raw.trim()).filter(|raw| !raw.is_empty())
}

/// A warning for each path setting written from the home folder while no home folder is set
/// (a service or cron job without HOME): the contract resolves it under a folder called `~`.
pub fn homeless_paths(settings: &Settings) -> Vec<String> {
    if home_dir().is_some() {
        return Vec::new();
    }
    settings
        .tilde_paths()
        .map(|(key, raw)| {
            format!(
                "{key} `{raw}` names a folder called `~` in {}, since no home folder is set \
                 (HOME is unset or empty); set HOME, or write the full path",
                base_dir().display()
            )
        })
        .collect()
}

/// Resolve one configured path (contract: spec 2.6). Absolute stays as is; `~` alone is the home
/// folder and `~/x` is `x` under it (without a home folder both are taken as relative);
/// anything else has its `.` components dropped and is joined onto `base`.
pub fn resolve_path(raw: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let path = Path::new(raw);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    if let (Some(home), Some(rest)) = (home, raw.strip_prefix('~')) {
        if rest.is_empty() {
            return home.to_path_buf();
        }
        let mut chars = rest.chars();
        if chars.next().is_some_and(std::path::is_separator) {
            return home.join(chars.as_str());
        }
    }
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .fold(base.to_path_buf(), |acc, c| acc.join(c))
}

/// The folder relative paths resolve against: `III_COMPOSE_DIR` when set and non-empty, else
/// the current directory.
pub fn base_dir() -> PathBuf {
    choose_base(std::env::var_os(COMPOSE_DIR_ENV), std::env::current_dir)
}

/// [`base_dir`] without the environment, so the rule can be tested. A relative
/// `III_COMPOSE_DIR` is taken from the current directory, so that every resolved path (and the
/// `path` that `skills::get` returns) is absolute. When even the current directory is unknown
/// (it was deleted), `.` keeps relative paths relative rather than failing.
fn choose_base(
    compose_dir: Option<OsString>,
    current_dir: impl FnOnce() -> std::io::Result<PathBuf>,
) -> PathBuf {
    let cwd = || current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match compose_dir {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                resolve_path(&dir.to_string_lossy(), &cwd(), None)
            }
        }
        _ => cwd(),
    }
}

/// The home folder used to expand `~`: `HOME`, then `USERPROFILE` (Windows).
pub fn home_dir() -> Option<PathBuf> {
    choose_home(std::env::var_os("HOME"), std::env::var_os("USERPROFILE"))
}

/// [`home_dir`] without the environment; an empty variable counts as unset.
fn choose_home(home: Option<OsString>, user_profile: Option<OsString>) -> Option<PathBuf> {
    [home, user_profile]
        .into_iter()
        .flatten()
        .find(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The configured locations as absolute (or base-relative) paths.
#[derive(Clone, Debug, PartialEq)]
pub struct Paths {
    pub skills_folder: PathBuf,
    pub local_skills_folder: PathBuf,
    pub agents_folder: PathBuf,
    pub agents_skills_folder: PathBuf,
    /// `global_agents_folder`, when set.
    pub global_agents_folder: Option<PathBuf>,
    /// `global_agents_skills_folder`, when set.
    pub global_agents_skills_folder: Option<PathBuf>,
    pub index_path: PathBuf,
    /// The bundles lock file (`bundles_lock_path`).
    pub bundles_lock: PathBuf,
    /// The configured embedding model folder, if any.
    pub search_model_path: Option<PathBuf>,
}

impl Paths {
    /// Where a fetched embedding model is kept: `models/` beside the index file.
    pub fn model_cache(&self) -> PathBuf {
        self.index_path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join("models")
    }
}

/// Settings together with the paths they resolve to.
#[derive(Clone, Debug)]
pub struct Config {
    pub settings: Settings,
    pub paths: Paths,
}

impl Config {
    /// Checks the layout rules of [`layout`]: no root is `/`, the index is inside no root, and
    /// roots overlap only as the contract's defaults do.
    pub fn check(&self) -> Result<(), ConfigError> {
        layout::check(&self.paths)
    }

    /// Resolve `settings` against the process's base and home folders.
    pub fn from_settings(settings: Settings) -> Config {
        let paths = settings.resolve(&base_dir(), home_dir().as_deref());
        Config { settings, paths }
    }

    /// The defaults (no path) or the YAML file at `path`, with any warnings about it. A missing,
    /// unreadable, oversized or invalid file is an error naming the file.
    pub fn load(path: Option<&Path>) -> Result<(Config, Vec<String>), ConfigError> {
        let Some(path) = path else {
            return Ok((Config::from_settings(Settings::default()), Vec::new()));
        };
        // Messages name the file in full: a relative path resolves against the current
        // directory, not III_COMPOSE_DIR, which is easy to get wrong.
        let path = &std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let in_file = |error: ConfigError| ConfigError::InFile {
            path: path.to_path_buf(),
            error: Box::new(error),
        };
        let text = seed::read_capped(path).map_err(|e| match e {
            ConfigError::TooLarge { .. } => in_file(e),
            other => other,
        })?;
        let (settings, warnings) = Settings::from_yaml_str(&text).map_err(in_file)?;
        let mut warnings: Vec<String> = warnings
            .into_iter()
            .map(|w| format!("{}: {w}", path.display()))
            .collect();
        let config = Config::from_settings(settings);
        warnings.extend(
            homeless_paths(&config.settings)
                .into_iter()
                .map(|w| format!("{}: {w}", path.display())),
        );
        Ok((config, warnings))
    }

    /// The defaults with every relative path resolved against `root` and no `~` expansion, so
    /// tests get a self-contained tree.
    pub fn for_root(root: &Path) -> Config {
        let settings = Settings::default();
        let paths = settings.resolve(root, None);
        Config { settings, paths }
    }
}
