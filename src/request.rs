//! Request payloads: the JSON a caller sends, read into typed requests. Unknown keys are
//! ignored (the engine adds `_caller_worker_id`); a missing request is an empty one.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::{Error, Result, bounded};

/// The longest message a request's own parse error may have: serde's messages quote what they
/// refused in full (`invalid type: string "…"`); the worker screens each field first
/// (`worker::screen`), and this bounds what is left.
const MAX_PARSE_ERROR_BYTES: usize = 1024;

/// Reads a request. It must be a JSON object (or nothing, an empty request): an array would
/// otherwise fill the fields in order (`["a/b", "# x"]` as `{id, content}`).
pub fn parse<T: DeserializeOwned>(request: &Value) -> Result<T> {
    let empty = Value::Object(Default::default());
    let request = match request {
        Value::Null => &empty,
        Value::Object(_) => request,
        other => {
            let kind = match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                _ => "a boolean",
            };
            return Err(Error::Invalid(format!(
                "invalid request: the request must be a JSON object, not {kind}"
            )));
        }
    };
    T::deserialize(request).map_err(|e| {
        Error::Invalid(bounded(
            format!("invalid request: {e}"),
            MAX_PARSE_ERROR_BYTES,
        ))
    })
}

/// A field's `null` read as its default: to a caller, `null` and absent are the same for every
/// field (the worker's screen lets a `null` through on that rule), and serde's refusal of a
/// `null` flag ("invalid type: null, expected a boolean") names no field.
pub fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `{id, raw?}`: what `skills::get` and `agents::get` take.
#[derive(Deserialize)]
pub struct GetById {
    pub id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub raw: bool,
}

/// `{name, raw?}`: what `system-prompts::get` takes.
#[derive(Deserialize)]
pub struct GetByName {
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub raw: bool,
}

/// `{id, content}`: a skill or agent profile written whole.
#[derive(Deserialize)]
pub struct IdContent {
    pub id: String,
    pub content: String,
}

/// `{name, content}`: a system prompt written whole.
#[derive(Deserialize)]
pub struct NameContent {
    pub name: String,
    pub content: String,
}

/// `{id, content, base?}`: a skill or agent profile updated whole; `base` is the whole file as
/// the caller's edit started from it (`raw` from `get`), which makes the update conditional.
#[derive(Deserialize)]
pub struct IdUpdate {
    pub id: String,
    pub content: String,
    #[serde(default)]
    pub base: Option<String>,
}

/// `{name, content, base?}`: a system prompt updated whole, conditionally with `base`.
#[derive(Deserialize)]
pub struct NameUpdate {
    pub name: String,
    pub content: String,
    #[serde(default)]
    pub base: Option<String>,
}

/// `{id}`: a skill or agent profile to delete.
#[derive(Deserialize)]
pub struct ById {
    pub id: String,
}

/// `{name}`: a system prompt to delete.
#[derive(Deserialize)]
pub struct ByName {
    pub name: String,
}
