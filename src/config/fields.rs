//! The configuration keys: their types, which need a restart, the JSON Schema registered with
//! the engine's configuration worker, and how a JSON value (from the seed or the engine)
//! becomes [`Settings`] with per-key errors and warnings.

use serde_json::{Map, Value, json};

use super::{ConfigError, Settings};
use crate::doc::distance::closest_by;

/// Largest edit distance at which an unknown key is reported as a likely typo of a known one.
const TYPO_DISTANCE: usize = 2;

/// The JSON type a setting takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A non-empty string.
    Text,
    /// A string, empty for none.
    OptionalText,
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
            Kind::OptionalText => "a string",
            Kind::Flag => "a boolean (true or false)",
            Kind::Count => "a non-negative integer",
        }
    }

    pub(super) fn schema_type(self) -> &'static str {
        match self {
            Kind::Text | Kind::OptionalText => "string",
            Kind::Flag => "boolean",
            Kind::Count => "integer",
        }
    }
}

/// One configuration key: its type, whether changing it needs a restart, and its schema text.
pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) kind: Kind,
    topology: bool,
    description: &'static str,
}

/// Every key, in the order the schema and the example file present them. Validation, the schema
/// and `topology_changed` all read this table, so a new field is added here and in [`slot`].
pub(super) const FIELDS: &[Field] = &[
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
        name: "global_agents_folder",
        kind: Kind::OptionalText,
        topology: true,
        description: "The user's agent profiles for every project (<id>.md each, e.g. \
                      ~/.iii/agents); a profile of agents_folder with the same id wins. Served, \
                      edited and deleted in place; creates go to agents_folder. Empty (the \
                      default) for none. Restart required.",
    },
    Field {
        name: "global_agents_skills_folder",
        kind: Kind::OptionalText,
        topology: true,
        description: "The user's agent skills for every agent (<dir>/SKILL.md, e.g. \
                      ~/.agents/skills): read-only, below every other skill root. Empty (the \
                      default) for none. Restart required.",
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
        name: "bundles_lock_path",
        kind: Kind::Text,
        topology: true,
        description: "The bundles lock: a JSON file recording, for every downloaded bundle, its \
                      source (resolved commit or version and digest) and the sha256 of every \
                      file it landed. Resolved like the folders; never served. Restart required.",
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
    Field {
        name: "change_log_revisions",
        kind: Kind::Count,
        topology: false,
        description: "Index revisions whose changed rows the index keeps, so that a list called \
                      with since_revision answers with only the rows that changed (an older \
                      revision gets the whole list; 0 = keep none).",
    },
    Field {
        name: "download_allow_executables",
        kind: Kind::Flag,
        topology: false,
        description: "Let a bundle holding executable files (an executable bit, #!, or a binary \
                      program) land; when false such a bundle is refused whole (D333).",
    },
    Field {
        name: "download_large_file_bytes",
        kind: Kind::Count,
        topology: false,
        description: "Bundle files of at least this many bytes are named in a download's review \
                      (review.large).",
    },
    Field {
        name: "search_model_path",
        kind: Kind::OptionalText,
        topology: true,
        description: "Folder holding the sentence-embedding model (all-MiniLM-L6-v2: \
                      model.safetensors, tokenizer.json, config.json); empty for none. Resolved \
                      like the folders. Restart required.",
    },
    Field {
        name: "search_model_download",
        kind: Kind::Flag,
        topology: true,
        description: "Without search_model_path, fetch the model once (about 90 MB, pinned \
                      revision, size and SHA-256 checked) into models/ beside the index file; \
                      false for an air-gapped deployment. Restart required.",
    },
];

/// A mutable view of one field of [`Settings`], typed by its [`Kind`].
pub(super) enum Slot<'a> {
    Text(&'a mut String),
    OptionalText(&'a mut String),
    Flag(&'a mut bool),
    Count(&'a mut u64),
}

/// The field of `settings` named `name`, or `None` for a key we do not know.
pub(super) fn slot<'a>(settings: &'a mut Settings, name: &str) -> Option<Slot<'a>> {
    let s = settings;
    Some(match name {
        "skills_folder" => Slot::Text(&mut s.skills_folder),
        "local_skills_folder" => Slot::Text(&mut s.local_skills_folder),
        "agents_folder" => Slot::Text(&mut s.agents_folder),
        "agents_skills_folder" => Slot::Text(&mut s.agents_skills_folder),
        "global_agents_folder" => Slot::OptionalText(&mut s.global_agents_folder),
        "global_agents_skills_folder" => Slot::OptionalText(&mut s.global_agents_skills_folder),
        "auto_download" => Slot::Flag(&mut s.auto_download),
        "index_path" => Slot::Text(&mut s.index_path),
        "bundles_lock_path" => Slot::Text(&mut s.bundles_lock_path),
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
        "change_log_revisions" => Slot::Count(&mut s.change_log_revisions),
        "download_allow_executables" => Slot::Flag(&mut s.download_allow_executables),
        "download_large_file_bytes" => Slot::Count(&mut s.download_large_file_bytes),
        "search_model_path" => Slot::OptionalText(&mut s.search_model_path),
        "search_model_download" => Slot::Flag(&mut s.search_model_download),
        _ => return None,
    })
}

/// The range a number setting must lie in. A value out of range is refused by the registered
/// schema at `configuration::set`, and brought to the nearest bound when it is read (a stored
/// value may predate the schema, and a seed file has no schema), with a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub min: u64,
    pub max: u64,
    /// 0 is allowed below `min`, meaning "off".
    pub zero_is_off: bool,
}

/// Bounds of every number setting, by key (`None` for the other keys).
pub fn bounds(name: &str) -> Option<Bounds> {
    const MINUTE_MS: u64 = 60_000;
    const HOUR_MS: u64 = 60 * MINUTE_MS;
    const DAY_MS: u64 = 24 * HOUR_MS;
    let range = |min, max| Bounds {
        min,
        max,
        zero_is_off: false,
    };
    Some(match name {
        // A clone or a registry request still running after ten minutes is stuck, and it holds
        // one of the few fetches that run at once (`download::fetch`).
        "download_timeout_ms" => range(1_000, 10 * MINUTE_MS),
        "registry_cache_ttl_ms" => range(0, DAY_MS),
        "hint_min_workers" => range(0, 10_000),
        "download_max_files" => range(1, 1_000_000),
        // A fetch holds up to twice this in memory while it reads and checks a bundle (markdown
        // and a few assets: 64 MiB by default); a stored value of 16 GiB let any caller make
        // the worker buffer gigabytes.
        "download_max_bytes" => range(1, 256 * 1024 * 1024),
        // A full reconcile walks every root: not more often than once a second.
        "safety_net_interval_ms" => Bounds {
            min: 1_000,
            max: DAY_MS,
            zero_is_off: true,
        },
        "change_log_revisions" => range(0, 1_000_000),
        "download_large_file_bytes" => range(1, 16 * 1024 * 1024 * 1024),
        _ => return None,
    })
}

impl Bounds {
    /// `value` brought into range: below the floor it is the floor (0 stays 0 where 0 is off),
    /// above the ceiling the ceiling.
    pub fn apply(self, value: u64) -> u64 {
        if value == 0 && self.zero_is_off {
            0
        } else {
            value.clamp(self.min, self.max)
        }
    }

    /// The JSON Schema keywords that refuse what [`Bounds::apply`] would change.
    fn schema(self) -> Value {
        if self.zero_is_off {
            json!({ "anyOf": [
                { "const": 0 },
                { "minimum": self.min, "maximum": self.max },
            ] })
        } else {
            json!({ "minimum": self.min, "maximum": self.max })
        }
    }
}

/// Whether `url` is an `http://` or `https://` URL with a host: the registry is reached over
/// HTTP and nothing else (`file:`, `ftp:`, a bare path are refused).
pub fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url.trim()).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    })
}

/// The pattern the schema gives `registry_url` (with `format: uri`).
const HTTP_URL_PATTERN: &str = "^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#]+([/?#]\\S*)?$";

/// Most unknown keys named one by one in warnings; the rest are counted.
const MAX_UNKNOWN_WARNINGS: usize = 8;
/// Longest unknown key quoted in a warning, in characters.
const MAX_KEY_SHOWN: usize = 64;

/// How a JSON value reads in an error message.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "an integer",
        Value::Number(n) if n.is_i64() => "a negative integer",
        // YAML reads digits past u64 as floats: say so, not "fractional".
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f < 0.0 => "a negative number",
            Some(f) if f.fract() == 0.0 => "a number too large",
            _ => "a fractional number",
        },
        Value::String(s) if s.trim().is_empty() => "an empty string",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Largest integer a JSON number written as a float holds exactly (2^53).
const EXACT_FLOAT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// A count: an integer that is not negative, or a number written as a float with nothing after
/// the point (`20000.0`, `1e5`). JSON does not tell the two apart, and the engine's schema
/// check admits both as integers, so a stored value of `20000.0` is the value 20000.
fn count_of(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        let f = value.as_f64()?;
        (f.fract() == 0.0 && (0.0..=EXACT_FLOAT_INTEGER).contains(&f)).then_some(f as u64)
    })
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
        Slot::OptionalText(dst) => value.as_str().map(|s| *dst = s.trim().to_owned()),
        Slot::Flag(dst) => value.as_bool().map(|b| *dst = b),
        Slot::Count(dst) => count_of(value).map(|n| *dst = n),
    };
    stored.ok_or_else(|| ConfigError::InvalidValue {
        key: field.name,
        expected: field.kind.expected(),
        got: describe(value),
    })
}

/// The warning for a key we do not know, naming the closest known key when it looks like a typo.
fn unknown_key_warning(key: &str) -> String {
    let shown: String = key.chars().take(MAX_KEY_SHOWN).collect();
    let key = if shown.len() < key.len() {
        format!("{shown}…")
    } else {
        shown
    };
    let key = key.as_str();
    let closest = closest_by(key, FIELDS, |f| f.name, 1)
        .into_iter()
        .find(|(distance, _)| *distance <= TYPO_DISTANCE);
    match closest {
        Some((_, Field { name: known, .. })) => {
            format!("unknown configuration key {key:?} ignored (did you mean {known:?}?)")
        }
        None => format!("unknown configuration key {key:?} ignored"),
    }
}

/// The one place keys are checked, for YAML and JSON alike: starts from the defaults and
/// overwrites each key that is present. Numbers are brought into their [`bounds`] and
/// `registry_url` must be an http(s) URL.
pub(super) fn settings_from_value(value: &Value) -> Result<(Settings, Vec<String>), ConfigError> {
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
    let mut unknown = 0usize;
    for (key, value) in map {
        let known = FIELDS.iter().find(|f| f.name == key.as_str());
        match known.and_then(|f| slot(&mut settings, f.name).map(|s| (f, s))) {
            Some((field, slot)) => {
                assign(field, slot, value)?;
                if let (Some(bounds), Some(Slot::Count(n))) =
                    (bounds(field.name), self::slot(&mut settings, field.name))
                {
                    let applied = bounds.apply(*n);
                    if applied != *n {
                        warnings.push(format!(
                            "configuration key {:?} is {}, out of its range ({}{}..={}); using {applied}",
                            field.name,
                            *n,
                            if bounds.zero_is_off { "0 = off, or " } else { "" },
                            bounds.min,
                            bounds.max,
                        ));
                        *n = applied;
                    }
                }
            }
            None => {
                unknown += 1;
                if unknown <= MAX_UNKNOWN_WARNINGS {
                    warnings.push(unknown_key_warning(key));
                }
            }
        }
    }
    if unknown > MAX_UNKNOWN_WARNINGS {
        warnings.push(format!(
            "and {} more unknown configuration keys ignored",
            unknown - MAX_UNKNOWN_WARNINGS
        ));
    }
    // A file of other lines (`--config /etc/shadow`): no key is a setting, and some are not
    // even names. One error, which quotes none of them.
    let plausible = |key: &str| {
        !key.is_empty()
            && key.len() <= MAX_KEY_SHOWN
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if unknown == map.len() && map.keys().any(|key| !plausible(key)) {
        return Err(ConfigError::NoKnownKey { unknown });
    }
    if !is_http_url(&settings.registry_url) {
        return Err(ConfigError::InvalidValue {
            key: "registry_url",
            expected: "an http:// or https:// URL",
            got: "another kind of URL",
        });
    }
    Ok((settings, warnings))
}

impl Settings {
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
                // `x-restart-required`: an annotation (validators ignore `x-` keys) that tells a
                // settings form which changes wait for a restart, without parsing the text.
                let mut property = json!({
                    "type": f.kind.schema_type(),
                    "description": f.description,
                    "default": defaults.get(f.name).cloned().unwrap_or(Value::Null),
                    "x-restart-required": f.topology,
                });
                let extra = match (f.kind, bounds(f.name)) {
                    (Kind::Count, Some(bounds)) => bounds.schema(),
                    (Kind::Count, None) => json!({ "minimum": 0 }),
                    (Kind::Text, _) if f.name == "registry_url" => json!({
                        "minLength": 1,
                        "format": "uri",
                        "pattern": HTTP_URL_PATTERN,
                    }),
                    (Kind::Text, _) => json!({ "minLength": 1 }),
                    (Kind::Flag | Kind::OptionalText, _) => json!({}),
                };
                if let (Some(extra), Some(object)) = (extra.as_object(), property.as_object_mut()) {
                    object.extend(extra.clone());
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
}
