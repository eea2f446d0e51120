//! Request payloads: the JSON a caller sends, read into typed requests. Unknown keys are
//! ignored (the engine adds `_caller_worker_id`); a missing request is an empty one.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

pub fn parse<T: DeserializeOwned>(request: &Value) -> Result<T> {
    let empty = Value::Object(Default::default());
    let request = if request.is_null() { &empty } else { request };
    T::deserialize(request).map_err(|e| Error::Invalid(format!("invalid request: {e}")))
}

/// `{id, raw?}`: what `skills::get` and `agents::get` take.
#[derive(Deserialize)]
pub struct GetById {
    pub id: String,
    #[serde(default)]
    pub raw: bool,
}

/// `{name, raw?}`: what `system-prompts::get` takes.
#[derive(Deserialize)]
pub struct GetByName {
    pub name: String,
    #[serde(default)]
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
