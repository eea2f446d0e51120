//! The `--config` seed: a YAML file read with bounded cost (size, nesting, no aliases) through
//! the crate's one YAML loader, turned into the JSON value the settings are checked from.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use super::ConfigError;
use crate::yaml::{self, Limits, LoadError, Node};

/// Largest configuration document accepted. A settings file is a dozen lines; the cap keeps a
/// mistaken `--config` (a log file, a binary) from being parsed at all.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// Deepest nesting of YAML collections accepted. Settings are flat scalars, so anything deeper
/// is a mistake, and bounding it keeps the recursive YAML-to-JSON conversion (and the drop of
/// the parsed tree) far from the stack limit.
pub const MAX_CONFIG_DEPTH: usize = 32;

/// Aliases are refused: a settings file has no use for them, and each would be expanded into
/// the JSON value. Without aliases a document has fewer nodes than bytes.
const LIMITS: Limits = Limits {
    max_nodes: MAX_CONFIG_BYTES,
    max_depth: MAX_CONFIG_DEPTH,
    aliases: false,
};

/// The JSON value of a YAML settings document; `null` for an empty one.
pub fn yaml_value(text: &str) -> Result<Value, ConfigError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            bytes: u64::try_from(text.len()).unwrap_or(u64::MAX),
        });
    }
    let root = yaml::load(text, &LIMITS).map_err(|e| match e {
        LoadError::Alias | LoadError::SelfAlias => ConfigError::Alias,
        LoadError::TooDeep(_) => ConfigError::TooDeep,
        LoadError::Documents(count) => ConfigError::MultipleDocuments { count },
        other => ConfigError::Yaml(other.to_string()),
    })?;
    root.map_or(Ok(Value::Null), |root| to_json(&root))
}

/// The JSON form of a YAML value, so that one validator serves both inputs. A float JSON cannot
/// hold (`.inf`, `.nan`) keeps its text; so does a number too large for JSON. A key given twice
/// in one mapping is an error, since either reading of it would be a guess.
fn to_json(node: &Node) -> Result<Value, ConfigError> {
    Ok(match &**node {
        yaml::Value::Null => Value::Null,
        yaml::Value::Bool(flag, _) => Value::Bool(*flag),
        yaml::Value::Number(text) => number(text),
        yaml::Value::Text(text) => Value::String(text.clone()),
        yaml::Value::Seq(items) => {
            Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        yaml::Value::Map(entries) => {
            let mut map = Map::new();
            for (key, value) in entries {
                let key = key_text(key);
                if map.insert(key.clone(), to_json(value)?).is_some() {
                    return Err(ConfigError::Yaml(format!("duplicate key {key:?}")));
                }
            }
            Value::Object(map)
        }
    })
}

/// A core-schema number: integers in decimal, hex or octal, else a float when JSON can hold it.
fn number(text: &str) -> Value {
    let integer = if let Some(hex) = text.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(octal) = text.strip_prefix("0o") {
        i64::from_str_radix(octal, 8).ok()
    } else {
        text.parse::<i64>().ok()
    };
    if let Some(n) = integer {
        return Value::from(n);
    }
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or_else(|| Value::String(text.to_owned()), Value::Number)
}

/// The text of a mapping key, so that a key that is not a string can still be named in a warning.
fn key_text(key: &Node) -> String {
    match &**key {
        yaml::Value::Null => "null".to_owned(),
        other => other
            .scalar_text()
            .map_or_else(|| "<complex key>".to_owned(), str::to_owned),
    }
}

/// Read `path` as text, refusing a file larger than [`MAX_CONFIG_BYTES`]. The size is checked
/// up front and the read is capped too, for files whose size is not known in advance (pipes).
pub fn read_capped(path: &Path) -> Result<String, ConfigError> {
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
