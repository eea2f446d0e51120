//! The pieces of the JSON Schemas the worker registers: an object with its required keys, a
//! described string or boolean, a count, an array. Each function's schemas are built from these
//! where the function is defined (the library's in `directory/functions.rs`, the worker's own in
//! `worker/surface.rs`).

use serde_json::{Value, json};

pub fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
    })
}

pub fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

pub fn nullable_string() -> Value {
    json!({ "type": ["string", "null"] })
}

pub fn boolean(description: &str) -> Value {
    json!({ "type": "boolean", "description": description })
}

pub fn integer() -> Value {
    json!({ "type": "integer", "minimum": 0 })
}

pub fn array_of(items: Value) -> Value {
    json!({ "type": "array", "items": items })
}
