//! Request payloads: the JSON a caller sends, read into typed requests. Unknown keys are
//! ignored (the engine adds `_caller_worker_id`); a missing request is an empty one.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

pub fn parse<T: DeserializeOwned>(request: &Value) -> Result<T> {
    let empty = Value::Object(Default::default());
    let request = if request.is_null() { &empty } else { request };
    T::deserialize(request).map_err(|e| Error::Invalid(format!("invalid request: {e}")))
}
