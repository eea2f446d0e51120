//! The worker's configuration: the settings fields and their defaults, how a YAML seed or the
//! live JSON value from the engine's `configuration` worker becomes [`Settings`], the JSON
//! Schema registered for them, which fields need a restart to change, and how the configured
//! folders become absolute paths.
//!
//! Nothing here talks to the engine or watches files; the worker adapter fetches values and
//! decides what to do with a topology change, using [`Settings::topology_changed`].

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use yaml_rust2::parser::{MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;
use yaml_rust2::{Event, Yaml, YamlLoader};

/// Environment variable naming the Compose project folder; relative folders resolve against it
/// when set (contract: spec 2.6).
pub const COMPOSE_DIR_ENV: &str = "III_COMPOSE_DIR";

/// Largest configuration document accepted. A settings file is a dozen lines; the cap keeps a
/// mistaken `--config` (a log file, a binary) from being parsed at all.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// Deepest nesting of YAML collections accepted. Settings are flat scalars, so anything deeper
/// is a mistake, and bounding it keeps the recursive YAML-to-JSON conversion (and the drop of
/// the parsed tree) far from the stack limit.
pub const MAX_CONFIG_DEPTH: usize = 32;

/// Largest edit distance at which an unknown key is reported as a likely typo of a known one.
const TYPO_DISTANCE: usize = 2;

/// Every setting of the worker. Field names are the contract's configuration keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    // Topology: fixed for the process lifetime (a change needs a restart).
    /// Writable root of skills and system prompts.
    pub skills_folder: String,
    /// Project-scoped root whose top-level namespaces shadow `skills_folder` wholesale.
    pub local_skills_folder: String,
    /// Writable root of direct `<id>.md` agent profiles.
    pub agents_folder: String,
    /// Read-only root of agent skills installed by other tools.
    pub agents_skills_folder: String,
    /// Subscribe to worker-add events and run the boot reconcile of worker skill bundles.
    pub auto_download: bool,
    /// Where the redb index file lives (ours, not in the upstream contract).
    pub index_path: String,

    // Tunable: applied in place on a configuration update.
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
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            skills_folder: "skills".to_owned(),
            local_skills_folder: "skills/iii".to_owned(),
            agents_folder: "agents".to_owned(),
            agents_skills_folder: ".agents/skills".to_owned(),
            auto_download: true,
            index_path: "data/iii-directory/index.redb".to_owned(),
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
        }
    }
}

/// Default of `download_max_files`: far above any real skill bundle (tens of files), far below
/// what would make a download a denial of service.
pub const DEFAULT_DOWNLOAD_MAX_FILES: u64 = 2_000;
/// Default of `download_max_bytes` (64 MiB): a bundle is text and a few small assets.
pub const DEFAULT_DOWNLOAD_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The JSON type a setting takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A non-empty string.
    Text,
    /// A boolean.
    Flag,
    /// A non-negative integer.
    Count,
}

impl Kind {
    /// How the expected type reads in an error message.
    fn expected(self) -> &'static str {
        match self {
            Kind::Text => "a non-empty string",
            Kind::Flag => "a boolean (true or false)",
            Kind::Count => "a non-negative integer",
        }
    }

    fn schema_type(self) -> &'static str {
        match self {
            Kind::Text => "string",
            Kind::Flag => "boolean",
            Kind::Count => "integer",
        }
    }
}

/// One configuration key: its type, whether changing it needs a restart, and its schema text.
struct Field {
    name: &'static str,
    kind: Kind,
    topology: bool,
    description: &'static str,
}

/// Every key, in the order the schema and the example file present them. Validation, the schema
/// and `topology_changed` all read this table, so a new field is added here and in [`slot`].
const FIELDS: &[Field] = &[
    Field {
        name: "skills_folder",
        kind: Kind::Text,
        topology: true,
        description: "Writable root of skills and system prompts. Relative paths resolve against \
                      III_COMPOSE_DIR, else the current directory. Restart required.",
    },
    Field {
        name: "local_skills_folder",
        kind: Kind::Text,
        topology: true,
        description: "Project-scoped skills root; a top-level namespace here shadows the same \
                      namespace in skills_folder. Restart required.",
    },
    Field {
        name: "agents_folder",
        kind: Kind::Text,
        topology: true,
        description: "Writable root of agent profiles, one <id>.md file each. Restart required.",
    },
    Field {
        name: "agents_skills_folder",
        kind: Kind::Text,
        topology: true,
        description: "Read-only root of agent skills (<dir>/SKILL.md) installed by other tools; \
                      never written. Restart required.",
    },
    Field {
        name: "auto_download",
        kind: Kind::Flag,
        topology: true,
        description: "Download a worker's skills when it is added, and reconcile installed \
                      workers at boot. Restart required.",
    },
    Field {
        name: "index_path",
        kind: Kind::Text,
        topology: true,
        description: "File of the embedded index (a cache of the folders; safe to delete). \
                      Resolved like the folders. Restart required.",
    },
    Field {
        name: "registry_url",
        kind: Kind::Text,
        topology: false,
        description: "Base URL of the public workers registry.",
    },
    Field {
        name: "download_timeout_ms",
        kind: Kind::Count,
        topology: false,
        description: "Timeout of each git clone or registry request, in milliseconds.",
    },
    Field {
        name: "registry_cache_ttl_ms",
        kind: Kind::Count,
        topology: false,
        description: "How long registry responses and the installed-workers list are cached, \
                      in milliseconds.",
    },
    Field {
        name: "filter_unregistered",
        kind: Kind::Flag,
        topology: false,
        description: "Hide skills whose namespace is not an installed worker.",
    },
    Field {
        name: "inject_hint",
        kind: Kind::Flag,
        topology: false,
        description: "Bind the directory::pre-generate hook that points models at \
                      directory::search_functions.",
    },
    Field {
        name: "hint_min_workers",
        kind: Kind::Count,
        topology: false,
        description: "Fewest distinct workers a surface must span before the hint fires \
                      (0 = always).",
    },
    Field {
        name: "registry_search",
        kind: Kind::Flag,
        topology: false,
        description: "Also return installable registry workers from directory::search_functions.",
    },
    Field {
        name: "download_max_files",
        kind: Kind::Count,
        topology: false,
        description: "Most files one downloaded skill bundle may hold; a larger bundle is refused \
                      whole, with nothing written.",
    },
    Field {
        name: "download_max_bytes",
        kind: Kind::Count,
        topology: false,
        description: "Most bytes one downloaded skill bundle may hold, all files together; a \
                      larger bundle is refused whole, with nothing written.",
    },
    Field {
        name: "safety_net_interval_ms",
        kind: Kind::Count,
        topology: false,
        description: "Interval of the background rescan that catches changes the file watcher \
                      missed, in milliseconds (0 = off).",
    },
];

/// A mutable view of one field of [`Settings`], typed by its [`Kind`].
enum Slot<'a> {
    Text(&'a mut String),
    Flag(&'a mut bool),
    Count(&'a mut u64),
}

/// The field of `settings` named `name`, or `None` for a key we do not know.
fn slot<'a>(settings: &'a mut Settings, name: &str) -> Option<Slot<'a>> {
    let s = settings;
    Some(match name {
        "skills_folder" => Slot::Text(&mut s.skills_folder),
        "local_skills_folder" => Slot::Text(&mut s.local_skills_folder),
        "agents_folder" => Slot::Text(&mut s.agents_folder),
        "agents_skills_folder" => Slot::Text(&mut s.agents_skills_folder),
        "auto_download" => Slot::Flag(&mut s.auto_download),
        "index_path" => Slot::Text(&mut s.index_path),
        "registry_url" => Slot::Text(&mut s.registry_url),
        "download_timeout_ms" => Slot::Count(&mut s.download_timeout_ms),
        "registry_cache_ttl_ms" => Slot::Count(&mut s.registry_cache_ttl_ms),
        "filter_unregistered" => Slot::Flag(&mut s.filter_unregistered),
        "inject_hint" => Slot::Flag(&mut s.inject_hint),
        "hint_min_workers" => Slot::Count(&mut s.hint_min_workers),
        "registry_search" => Slot::Flag(&mut s.registry_search),
        "download_max_files" => Slot::Count(&mut s.download_max_files),
        "download_max_bytes" => Slot::Count(&mut s.download_max_bytes),
        "safety_net_interval_ms" => Slot::Count(&mut s.safety_net_interval_ms),
        _ => return None,
    })
}

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
    #[error("configuration must be a mapping of key: value pairs at the top level, got {got}")]
    NotAMapping { got: &'static str },
    #[error("configuration key \"{key}\" must be {expected}, got {got}")]
    InvalidValue {
        key: &'static str,
        expected: &'static str,
        got: &'static str,
    },
}

/// How a JSON value reads in an error message.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "an integer",
        Value::Number(n) if n.is_i64() => "a negative integer",
        Value::Number(_) => "a fractional number",
        Value::String(s) if s.trim().is_empty() => "an empty string",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Store `value` into `slot` when it has the field's type.
fn assign(field: &Field, slot: Slot<'_>, value: &Value) -> Result<(), ConfigError> {
    let stored = match slot {
        // Whitespace-only counts as empty: an unset `${VAR}` expands to nothing, and an empty
        // folder would silently point a root at the base directory itself.
        Slot::Text(dst) => value
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .map(|s| *dst = s.to_owned()),
        Slot::Flag(dst) => value.as_bool().map(|b| *dst = b),
        // `as_u64` is `Some` only for integers that are not negative.
        Slot::Count(dst) => value.as_u64().map(|n| *dst = n),
    };
    stored.ok_or_else(|| ConfigError::InvalidValue {
        key: field.name,
        expected: field.kind.expected(),
        got: describe(value),
    })
}

/// Classic Levenshtein distance, used only to suggest a known key for a misspelt one.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The warning for a key we do not know, naming the closest known key when it looks like a typo.
fn unknown_key_warning(key: &str) -> String {
    let closest = FIELDS
        .iter()
        .map(|f| (edit_distance(key, f.name), f.name))
        .min()
        .filter(|(distance, _)| *distance <= TYPO_DISTANCE);
    match closest {
        Some((_, known)) => {
            format!("unknown configuration key {key:?} ignored (did you mean {known:?}?)")
        }
        None => format!("unknown configuration key {key:?} ignored"),
    }
}

/// The one place keys are checked, for YAML and JSON alike: starts from the defaults and
/// overwrites each key that is present.
fn settings_from_value(value: &Value) -> Result<(Settings, Vec<String>), ConfigError> {
    let mut settings = Settings::default();
    let mut warnings = Vec::new();
    let map = match value {
        Value::Null => return Ok((settings, warnings)),
        Value::Object(map) => map,
        other => {
            return Err(ConfigError::NotAMapping {
                got: describe(other),
            });
        }
    };
    for (key, value) in map {
        let known = FIELDS.iter().find(|f| f.name == key.as_str());
        match known.and_then(|f| slot(&mut settings, f.name).map(|s| (f, s))) {
            Some((field, slot)) => assign(field, slot, value)?,
            None => warnings.push(unknown_key_warning(key)),
        }
    }
    Ok((settings, warnings))
}

/// Parser events checked before the document is built: aliases are refused (the loader copies
/// the anchored tree at every alias, so a few lines can expand exponentially) and nesting is
/// bounded.
#[derive(Default)]
struct Guard {
    depth: usize,
    problem: Option<ConfigError>,
}

impl MarkedEventReceiver for Guard {
    fn on_event(&mut self, event: Event, _mark: Marker) {
        if self.problem.is_some() {
            return;
        }
        match event {
            Event::Alias(_) => self.problem = Some(ConfigError::Alias),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                self.depth += 1;
                if self.depth > MAX_CONFIG_DEPTH {
                    self.problem = Some(ConfigError::TooDeep);
                }
            }
            Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }
}

/// Parse `text` as at most one YAML document, refusing oversized input, aliases and deep
/// nesting before anything is built.
fn load_yaml(text: &str) -> Result<Option<Yaml>, ConfigError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            bytes: u64::try_from(text.len()).unwrap_or(u64::MAX),
        });
    }
    let mut guard = Guard::default();
    Parser::new_from_str(text)
        .load(&mut guard, true)
        .map_err(|e| ConfigError::Yaml(e.to_string()))?;
    if let Some(problem) = guard.problem {
        return Err(problem);
    }
    let mut docs = YamlLoader::load_from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
    match docs.len() {
        0 => Ok(None),
        1 => Ok(docs.pop()),
        count => Err(ConfigError::MultipleDocuments { count }),
    }
}

/// The text of a mapping key, so that a key that is not a string can still be named in a warning.
fn key_text(key: &Yaml) -> String {
    match key {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".to_owned(),
        Yaml::Array(_) | Yaml::Hash(_) | Yaml::Alias(_) | Yaml::BadValue => {
            "<complex key>".to_owned()
        }
    }
}

/// The JSON form of a YAML value, so that one validator serves both inputs. A float JSON cannot
/// hold (`.inf`, `.nan`) keeps its text; a scalar with an impossible tag (`!!int abc`) becomes
/// `null`. Depth is already bounded by [`Guard`].
fn yaml_to_json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(text.clone()), Value::Number),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (key_text(k), yaml_to_json(v)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

impl Settings {
    /// Settings from a YAML document (the `--config` seed). An empty document gives the
    /// defaults; unknown keys come back as warnings; a value of the wrong type is an error.
    pub fn from_yaml_str(text: &str) -> Result<(Settings, Vec<String>), ConfigError> {
        let value = load_yaml(text)?.map_or(Value::Null, |doc| yaml_to_json(&doc));
        settings_from_value(&value)
    }

    /// Settings from the live JSON value held by the engine's `configuration` worker, with the
    /// same rules as [`Settings::from_yaml_str`]; `null` gives the defaults.
    pub fn from_json(value: &Value) -> Result<(Settings, Vec<String>), ConfigError> {
        settings_from_value(value)
    }

    /// Every field as a JSON object keyed by the configuration keys.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self)
            .expect("Settings holds only strings, booleans and integers, which always serialize")
    }

    /// The restart-required fields whose values differ between `self` and `other`, in schema
    /// order. Empty means the change can be applied in place.
    pub fn topology_changed(&self, other: &Settings) -> Vec<&'static str> {
        let (mine, theirs) = (self.to_json(), other.to_json());
        FIELDS
            .iter()
            .filter(|f| f.topology && mine.get(f.name) != theirs.get(f.name))
            .map(|f| f.name)
            .collect()
    }

    /// The draft-07 JSON Schema registered with the `configuration` worker, with the defaults as
    /// its `example`.
    pub fn json_schema() -> Value {
        let defaults = Settings::default().to_json();
        let properties: Map<String, Value> = FIELDS
            .iter()
            .map(|f| {
                let mut property = json!({
                    "type": f.kind.schema_type(),
                    "description": f.description,
                    "default": defaults.get(f.name).cloned().unwrap_or(Value::Null),
                });
                let bound = match f.kind {
                    Kind::Text => Some(("minLength", 1)),
                    Kind::Count => Some(("minimum", 0)),
                    Kind::Flag => None,
                };
                if let (Some((keyword, limit)), Some(object)) = (bound, property.as_object_mut()) {
                    object.insert(keyword.to_owned(), Value::from(limit));
                }
                (f.name.to_owned(), property)
            })
            .collect();
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "iii-directory",
            "description": "Folders served by iii-directory and how it reaches the workers \
                            registry. Fields marked 'Restart required' apply only after the \
                            worker restarts; the others apply immediately.",
            "type": "object",
            "properties": properties,
            "additionalProperties": true,
            "example": defaults,
        })
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
            index_path: at(&self.index_path),
        }
    }
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
    pub index_path: PathBuf,
}

/// Settings together with the paths they resolve to.
#[derive(Clone, Debug)]
pub struct Config {
    pub settings: Settings,
    pub paths: Paths,
}

impl Config {
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
        let in_file = |error: ConfigError| ConfigError::InFile {
            path: path.to_path_buf(),
            error: Box::new(error),
        };
        let text = read_capped(path).map_err(|e| match e {
            ConfigError::TooLarge { .. } => in_file(e),
            other => other,
        })?;
        let (settings, warnings) = Settings::from_yaml_str(&text).map_err(in_file)?;
        let warnings = warnings
            .into_iter()
            .map(|w| format!("{}: {w}", path.display()))
            .collect();
        Ok((Config::from_settings(settings), warnings))
    }

    /// The defaults with every relative path resolved against `root` and no `~` expansion, so
    /// tests get a self-contained tree.
    pub fn for_root(root: &Path) -> Config {
        let settings = Settings::default();
        let paths = settings.resolve(root, None);
        Config { settings, paths }
    }
}

/// Read `path` as text, refusing a file larger than [`MAX_CONFIG_BYTES`]. The size is checked
/// up front and the read is capped too, for files whose size is not known in advance (pipes).
fn read_capped(path: &Path) -> Result<String, ConfigError> {
    let read_error = |error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    };
    // Widening a small constant: usize always fits in u64 on supported targets.
    let cap = MAX_CONFIG_BYTES as u64;
    let file = File::open(path).map_err(read_error)?;
    let size = file.metadata().map_err(read_error)?.len();
    if size > cap {
        return Err(ConfigError::TooLarge { bytes: size });
    }
    let mut text = String::new();
    file.take(cap + 1)
        .read_to_string(&mut text)
        .map_err(read_error)?;
    if text.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            bytes: cap.saturating_add(1),
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Result<(Settings, Vec<String>), ConfigError> {
        Settings::from_yaml_str(text)
    }

    fn yaml_error(text: &str) -> String {
        match yaml(text) {
            Ok(parsed) => panic!("expected an error for {text:?}, got {parsed:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_match_the_contract() {
        let s = Settings::default();
        assert_eq!(s.skills_folder, "skills");
        assert_eq!(s.local_skills_folder, "skills/iii");
        assert_eq!(s.agents_folder, "agents");
        assert_eq!(s.agents_skills_folder, ".agents/skills");
        assert!(s.auto_download);
        assert_eq!(s.registry_url, "https://api.workers.iii.dev");
        assert_eq!(s.download_timeout_ms, 60_000);
        assert_eq!(s.registry_cache_ttl_ms, 60_000);
        assert!(s.filter_unregistered);
        assert!(!s.inject_hint);
        assert_eq!(s.hint_min_workers, 2);
        assert!(s.registry_search);
        assert_eq!(s.download_max_files, 2_000);
        assert_eq!(s.download_max_bytes, 64 * 1024 * 1024);
        assert_eq!(s.index_path, "data/iii-directory/index.redb");
        assert_eq!(s.safety_net_interval_ms, 300_000);
    }

    #[test]
    fn field_table_covers_every_serialized_field() {
        let json = Settings::default().to_json();
        let Some(object) = json.as_object() else {
            panic!("settings serialize to an object");
        };
        let mut serialized: Vec<&str> = object.keys().map(String::as_str).collect();
        let mut table: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        serialized.sort_unstable();
        table.sort_unstable();
        assert_eq!(serialized, table);
        let mut s = Settings::default();
        for f in FIELDS {
            assert!(slot(&mut s, f.name).is_some(), "{} has no slot", f.name);
        }
    }

    #[test]
    fn empty_documents_give_defaults() {
        for text in ["", "   \n", "# only a comment\n", "---\n", "~\n", "null"] {
            let (s, warnings) = yaml(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(s, Settings::default(), "{text:?}");
            assert!(warnings.is_empty());
        }
    }

    #[test]
    fn every_key_is_read_from_yaml() {
        let text = "\
skills_folder: /srv/skills
local_skills_folder: ./local
agents_folder: ~/agents
agents_skills_folder: other/.agents/skills
auto_download: false
index_path: cache/index.redb
registry_url: http://localhost:9000
download_timeout_ms: 5
registry_cache_ttl_ms: 0
filter_unregistered: false
inject_hint: true
hint_min_workers: 0
registry_search: false
download_max_files: 10
download_max_bytes: 2048
safety_net_interval_ms: 0
";
        let (s, warnings) = yaml(text).unwrap_or_else(|e| panic!("{e}"));
        assert!(warnings.is_empty());
        let expected = Settings {
            skills_folder: "/srv/skills".into(),
            local_skills_folder: "./local".into(),
            agents_folder: "~/agents".into(),
            agents_skills_folder: "other/.agents/skills".into(),
            auto_download: false,
            index_path: "cache/index.redb".into(),
            registry_url: "http://localhost:9000".into(),
            download_timeout_ms: 5,
            registry_cache_ttl_ms: 0,
            filter_unregistered: false,
            inject_hint: true,
            hint_min_workers: 0,
            registry_search: false,
            download_max_files: 10,
            download_max_bytes: 2048,
            safety_net_interval_ms: 0,
        };
        assert_eq!(s, expected);
    }

    #[test]
    fn missing_keys_keep_their_defaults() {
        let (s, _) = yaml("inject_hint: true\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s,
            Settings {
                inject_hint: true,
                ..Settings::default()
            }
        );
    }

    #[test]
    fn unknown_keys_warn_and_are_ignored() {
        let (s, warnings) =
            yaml("skils_folder: x\nwhatever: 1\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s, Settings::default());
        assert_eq!(
            warnings,
            vec![
                "unknown configuration key \"skils_folder\" ignored (did you mean \
                 \"skills_folder\"?)"
                    .to_owned(),
                "unknown configuration key \"whatever\" ignored".to_owned(),
            ]
        );
    }

    #[test]
    fn non_string_keys_are_named_in_warnings() {
        let (_, warnings) = yaml("1: x\ntrue: y\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            warnings,
            vec![
                "unknown configuration key \"1\" ignored".to_owned(),
                "unknown configuration key \"true\" ignored".to_owned(),
            ]
        );
    }

    #[test]
    fn wrong_types_name_the_key_and_the_expected_type() {
        let cases = [
            (
                "download_timeout_ms: soon",
                "configuration key \"download_timeout_ms\" must be a non-negative integer, got a string",
            ),
            (
                "download_timeout_ms: -1",
                "configuration key \"download_timeout_ms\" must be a non-negative integer, got a negative integer",
            ),
            (
                "hint_min_workers: 1.5",
                "configuration key \"hint_min_workers\" must be a non-negative integer, got a fractional number",
            ),
            (
                "registry_cache_ttl_ms: \"60000\"",
                "configuration key \"registry_cache_ttl_ms\" must be a non-negative integer, got a string",
            ),
            (
                "skills_folder: 42",
                "configuration key \"skills_folder\" must be a non-empty string, got an integer",
            ),
            (
                "agents_folder: true",
                "configuration key \"agents_folder\" must be a non-empty string, got a boolean",
            ),
            (
                "registry_url: \"\"",
                "configuration key \"registry_url\" must be a non-empty string, got an empty string",
            ),
            (
                "index_path:",
                "configuration key \"index_path\" must be a non-empty string, got null",
            ),
            (
                "local_skills_folder: [a, b]",
                "configuration key \"local_skills_folder\" must be a non-empty string, got a list",
            ),
            (
                "auto_download: \"yes\"",
                "configuration key \"auto_download\" must be a boolean (true or false), got a string",
            ),
            (
                "inject_hint: 1",
                "configuration key \"inject_hint\" must be a boolean (true or false), got an integer",
            ),
            (
                "registry_search: {on: true}",
                "configuration key \"registry_search\" must be a boolean (true or false), got a mapping",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(yaml_error(text), expected, "{text}");
        }
    }

    #[test]
    fn top_level_must_be_a_mapping() {
        assert_eq!(
            yaml_error("- skills_folder: x\n"),
            "configuration must be a mapping of key: value pairs at the top level, got a list"
        );
        assert_eq!(
            yaml_error("just some text"),
            "configuration must be a mapping of key: value pairs at the top level, got a string"
        );
    }

    #[test]
    fn malformed_yaml_is_an_error() {
        assert!(
            yaml_error("skills_folder: [unclosed\n").starts_with("configuration is not valid YAML")
        );
        assert!(yaml_error("a: 1\na: 2\n").starts_with("configuration is not valid YAML"));
    }

    #[test]
    fn aliases_are_refused() {
        let bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n";
        assert!(matches!(yaml(bomb), Err(ConfigError::Alias)));
    }

    #[test]
    fn deep_nesting_and_large_documents_are_refused() {
        let deep = format!("x: {}{}", "[".repeat(100), "]".repeat(100));
        assert!(matches!(yaml(&deep), Err(ConfigError::TooDeep)));
        let large = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES));
        assert!(matches!(yaml(&large), Err(ConfigError::TooLarge { .. })));
    }

    #[test]
    fn several_documents_are_refused() {
        assert!(matches!(
            yaml("a: 1\n---\nb: 2\n"),
            Err(ConfigError::MultipleDocuments { count: 2 })
        ));
    }

    #[test]
    fn unknown_keys_may_hold_anything() {
        let (_, warnings) =
            yaml("extra: {deep: [1, .inf, !!int nope]}\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn json_follows_the_same_rules() {
        assert_eq!(
            Settings::from_json(&Value::Null).map(|(s, _)| s).ok(),
            Some(Settings::default())
        );
        let (s, warnings) = Settings::from_json(&json!({"hint_min_workers": 7, "colour": "blue"}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.hint_min_workers, 7);
        assert_eq!(warnings.len(), 1);
        let error = Settings::from_json(&json!({"download_timeout_ms": "60000"}))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "configuration key \"download_timeout_ms\" must be a non-negative integer, got a string"
            )
        );
        assert!(matches!(
            Settings::from_json(&json!([1, 2])),
            Err(ConfigError::NotAMapping { got: "a list" })
        ));
    }

    #[test]
    fn json_round_trip() {
        let original = Settings {
            skills_folder: "/x".into(),
            inject_hint: true,
            hint_min_workers: 9,
            safety_net_interval_ms: 0,
            ..Settings::default()
        };
        let (back, warnings) =
            Settings::from_json(&original.to_json()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, original);
        assert!(warnings.is_empty());
        // serde agrees with the hand-written validator on a complete value.
        let via_serde: Settings =
            serde_json::from_value(original.to_json()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(via_serde, original);
    }

    #[test]
    fn topology_changes_are_named() {
        let a = Settings::default();
        assert!(a.topology_changed(&a.clone()).is_empty());
        let b = Settings {
            agents_folder: "elsewhere".into(),
            index_path: "i.redb".into(),
            auto_download: false,
            registry_url: "http://x".into(),
            inject_hint: true,
            safety_net_interval_ms: 1,
            ..Settings::default()
        };
        assert_eq!(
            a.topology_changed(&b),
            vec!["agents_folder", "auto_download", "index_path"]
        );
    }

    #[test]
    fn schema_describes_every_field_with_its_default() {
        let schema = Settings::json_schema();
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], true);
        assert_eq!(schema["example"], Settings::default().to_json());
        for f in FIELDS {
            let p = &schema["properties"][f.name];
            assert_eq!(p["type"], f.kind.schema_type(), "{}", f.name);
            assert_eq!(p["default"], Settings::default().to_json()[f.name]);
            assert!(p["description"].as_str().is_some_and(|d| !d.is_empty()));
        }
        assert_eq!(schema["properties"]["download_timeout_ms"]["minimum"], 0);
        assert_eq!(schema["properties"]["skills_folder"]["minLength"], 1);
    }

    #[test]
    fn absolute_paths_are_kept() {
        let base = Path::new("/base");
        assert_eq!(
            resolve_path("/srv/skills", base, Some(Path::new("/home/u"))),
            PathBuf::from("/srv/skills")
        );
    }

    #[test]
    fn tilde_expands_to_home() {
        let base = Path::new("/base");
        let home = Some(Path::new("/home/u"));
        assert_eq!(resolve_path("~", base, home), PathBuf::from("/home/u"));
        assert_eq!(
            resolve_path("~/agents/x", base, home),
            PathBuf::from("/home/u/agents/x")
        );
        // `~user` is not expanded: only the caller's own home is known.
        assert_eq!(
            resolve_path("~user/x", base, home),
            PathBuf::from("/base/~user/x")
        );
        // Without a home folder the tilde is an ordinary relative name.
        assert_eq!(resolve_path("~", base, None), PathBuf::from("/base/~"));
        assert_eq!(resolve_path("~/x", base, None), PathBuf::from("/base/~/x"));
    }

    #[test]
    fn relative_paths_drop_dot_components_and_join_the_base() {
        let base = Path::new("/compose");
        assert_eq!(
            resolve_path("skills", base, None),
            PathBuf::from("/compose/skills")
        );
        assert_eq!(
            resolve_path("./skills/./iii", base, None),
            PathBuf::from("/compose/skills/iii")
        );
        assert_eq!(
            resolve_path(".agents/skills", base, None),
            PathBuf::from("/compose/.agents/skills")
        );
    }

    #[test]
    fn defaults_resolve_literally() {
        let paths = Settings::default().resolve(Path::new("/p"), None);
        assert_eq!(
            paths,
            Paths {
                skills_folder: PathBuf::from("/p/skills"),
                local_skills_folder: PathBuf::from("/p/skills/iii"),
                agents_folder: PathBuf::from("/p/agents"),
                agents_skills_folder: PathBuf::from("/p/.agents/skills"),
                index_path: PathBuf::from("/p/data/iii-directory/index.redb"),
            }
        );
        assert_eq!(Config::for_root(Path::new("/p")).paths, paths);
    }

    #[test]
    fn base_prefers_a_non_empty_compose_dir() {
        let cwd = || Ok(PathBuf::from("/cwd"));
        assert_eq!(
            choose_base(Some("/compose".into()), cwd),
            PathBuf::from("/compose")
        );
        assert_eq!(choose_base(Some("".into()), cwd), PathBuf::from("/cwd"));
        assert_eq!(choose_base(None, cwd), PathBuf::from("/cwd"));
        let gone = || Err(std::io::Error::other("deleted"));
        assert_eq!(choose_base(None, gone), PathBuf::from("."));
    }

    #[test]
    fn home_falls_back_to_userprofile() {
        assert_eq!(
            choose_home(Some("/h".into()), Some("/u".into())),
            Some(PathBuf::from("/h"))
        );
        assert_eq!(
            choose_home(Some("".into()), Some("/u".into())),
            Some(PathBuf::from("/u"))
        );
        assert_eq!(choose_home(None, None), None);
    }

    #[test]
    fn load_reads_a_file_and_names_it_in_errors() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let good = dir.path().join("good.yaml");
        std::fs::write(&good, "hint_min_workers: 4\ntypo: 1\n").unwrap_or_else(|e| panic!("{e}"));
        let (config, warnings) = Config::load(Some(&good)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.settings.hint_min_workers, 4);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("good.yaml"));

        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "inject_hint: maybe\n").unwrap_or_else(|e| panic!("{e}"));
        let message = Config::load(Some(&bad))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("bad.yaml"), "{message}");
        assert!(message.contains("\"inject_hint\""), "{message}");

        let missing = dir.path().join("missing.yaml");
        let message = Config::load(Some(&missing))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("missing.yaml"), "{message}");
        assert!(message.contains("--config"), "{message}");

        let large = dir.path().join("large.yaml");
        std::fs::write(&large, "#".repeat(MAX_CONFIG_BYTES + 10)).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            Config::load(Some(&large)),
            Err(ConfigError::InFile { .. })
        ));
    }

    #[test]
    fn load_without_a_file_gives_defaults() {
        let (config, warnings) = Config::load(None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.settings, Settings::default());
        assert!(warnings.is_empty());
        assert!(config.paths.skills_folder.ends_with("skills"));
    }

    #[test]
    fn example_file_parses_to_the_defaults() {
        let text = include_str!("../config.yaml.example");
        let (settings, warnings) = yaml(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(settings, Settings::default());
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
