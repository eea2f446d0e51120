//! The gate every call passes before its handler runs: a request is a JSON object (or nothing),
//! each field the function reads has a type its schema allows where a string would otherwise be
//! echoed, and no string is longer than the contract can use. What fails is refused at once with
//! a short error that echoes nothing long, so no request of any size or character class can
//! build an error the engine cannot carry (the last guard is `wire::bounded_error`).
//!
//! The fields and their types come from the registered request schemas (`surface.rs`), so a
//! field added there is screened too; the bounds are per field name, below.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::surface;
use crate::code::Code;
use crate::error::{Error, quoted};

/// The longest id, prefix, path, URL or cursor a request may carry: a skill id is at most 1024
/// bytes (contract), and `get` also takes it as `iii://<id>` or as a path to its file, which
/// the system caps at 4096 (`PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest name, search, type, function id, branch or worker name: names are at most 64
/// bytes (contract), worker and function names are short, a search or a query is a few words.
pub const MAX_NAME_BYTES: usize = 1024;
/// The longest version or tag.
pub const MAX_VERSION_BYTES: usize = 256;

/// The bound of a string field, by its name; `None` for fields the screen leaves to their own
/// checks (`content` has the contract's 262144-byte cap, an update's `base` is only compared
/// with the file, `system_prompt`, descriptions, the
/// search capabilities and a skill search's `query` are read, never echoed: the searches read
/// the first `MAX_CAPABILITY_BYTES` of a task, however it is phrased).
fn bound(key: &str) -> Option<usize> {
    match key {
        "id" | "prefix" | "path" | "repo" | "cursor" => Some(MAX_PATH_BYTES),
        "name" | "search" | "type" | "function_id" | "skill" | "branch" | "worker"
        | "session_id" | "turn_id" | "event" | "expose" | "namespace" | "family" | "format" => {
            Some(MAX_NAME_BYTES)
        }
        "version" | "tag" => Some(MAX_VERSION_BYTES),
        "plan_id" | "on_conflict" => Some(MAX_NAME_BYTES),
        _ => None,
    }
}

/// The code of a refusal: the family's invalid-input code (skills `D117`, system prompts
/// `D212`, agent profiles `D412`, downloads and the registry `D312`), else `D121` for the
/// worker's own functions.
pub fn code(function: &str) -> Code {
    if function.starts_with("directory::skills::download")
        || function.starts_with("directory::registry::")
        || function == surface::ON_WORKER_ADDED
    {
        Code::DownloadRequestRefused
    } else if function.starts_with("directory::skills::") {
        Code::SkillsRequestRefused
    } else if function.starts_with("directory::system-prompts::") {
        Code::PromptsRequestRefused
    } else if function.starts_with("directory::agents::") {
        Code::AgentsRequestRefused
    } else {
        Code::WorkerRequestRefused
    }
}

/// Every function's request schema, by id (built once).
fn schemas() -> &'static HashMap<&'static str, Value> {
    static SCHEMAS: OnceLock<HashMap<&'static str, Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        surface::functions()
            .into_iter()
            .map(|f| (f.id, f.request))
            .collect()
    })
}

/// `Ok` when `request` may go to `function`'s handler; else the refusal to answer with.
///
/// The hooks the engine and the harness call are not screened: they read what they can and
/// never refuse (the worker-added hook answers `{ok: true}` whatever it is sent, the
/// pre-generate hook answers `continue`, the functions-changed hook refreshes its catalog),
/// and they echo nothing (a bad worker name is logged, cut).
pub fn screen(function: &str, request: &Value) -> Result<(), Error> {
    if [
        surface::ON_WORKER_ADDED,
        surface::PRE_GENERATE,
        surface::ON_FUNCTIONS_CHANGE,
    ]
    .contains(&function)
    {
        return Ok(());
    }
    let code = code(function);
    match request {
        Value::Null => return Ok(()),
        Value::Object(_) => {}
        other => {
            return Err(Error::coded(
                code,
                format!("the request must be a JSON object, not {}.", kind(other)),
                &[],
            ));
        }
    }
    match schemas().get(function) {
        Some(schema) => walk(function, code, schema, request, None),
        None => Ok(()),
    }
}

/// Checks `value` against the part of a request schema that describes it; `key` is the name of
/// the field it is the value of.
fn walk(
    function: &str,
    code: Code,
    schema: &Value,
    value: &Value,
    key: Option<&str>,
) -> Result<(), Error> {
    if value.is_null() {
        // Absent and null are the same to every field (serde's own message for a required one
        // echoes nothing).
        return Ok(());
    }
    let allowed = allowed_types(schema);
    if !allowed.is_empty() && !allowed.iter().any(|t| is_of_type(value, t)) {
        return Err(wrong_type(&shown(value), schema, key));
    }
    if let Value::String(text) = value {
        if let Some(values) = schema.get("enum").and_then(Value::as_array)
            && !values.iter().any(|v| v.as_str() == Some(text))
        {
            let names: Vec<String> = values
                .iter()
                .filter_map(Value::as_str)
                .map(|v| format!("`{v}`"))
                .collect();
            return Err(Error::Invalid(format!(
                "invalid request: unknown variant {}, expected one of {}{}",
                quoted(text),
                names.join(", "),
                for_key(key)
            )));
        }
        if let Some(max) = key.and_then(bound)
            && text.len() > max
        {
            return Err(Error::coded(
                code,
                format!(
                    "`{}` is {} bytes long; {function} reads at most {max}.",
                    key.unwrap_or_default(),
                    text.len()
                ),
                &[],
            ));
        }
        return Ok(());
    }
    // A number outside its schema's bounds is refused by name, not clamped to them: `limit: 0`
    // is a mistake to report, not a request for one row (and below 0 serde's message would
    // name only `u64`).
    if let Some(n) = value.as_f64() {
        let bound = |name| schema.get(name).and_then(Value::as_f64);
        let outside = match (bound("minimum"), bound("maximum")) {
            (Some(min), _) if n < min => Some(format!("at least {min}")),
            (_, Some(max)) if n > max => Some(format!("at most {max}")),
            _ => None,
        };
        if let Some(expected) = outside {
            return Err(Error::Invalid(format!(
                "invalid request: invalid value: {}, expected a number of {expected}{}",
                shown(value),
                for_key(key)
            )));
        }
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                let required = schema.get("required").and_then(Value::as_array);
                for (name, property) in properties {
                    let Some(field) = fields.get(name) else {
                        continue;
                    };
                    // Null stands for absent, which a required field may not be.
                    if field.is_null() && required.is_some_and(|r| r.contains(&json!(name))) {
                        return Err(wrong_type("null", property, Some(name)));
                    }
                    walk(function, code, property, field, Some(name))?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for value in items {
                    walk(function, code, item, value, key)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The `type` of a schema as a list (`"string"` or `["string", "null"]`); empty when it has none.
fn allowed_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// ` for `key``, naming the field a refusal is about.
fn for_key(key: Option<&str>) -> String {
    key.map(|k| format!(" for `{k}`")).unwrap_or_default()
}

/// The refusal of a value (`found`, as serde shows it) of a type the field's schema does not
/// allow.
fn wrong_type(found: &str, schema: &Value, key: Option<&str>) -> Error {
    let expected = allowed_types(schema)
        .iter()
        .find_map(|t| type_article(t))
        .unwrap_or("another type");
    Error::Invalid(format!(
        "invalid request: invalid type: {found}, expected {expected}{}",
        for_key(key)
    ))
}

/// Whether `value` (not null) is of JSON schema type `json_type`.
fn is_of_type(value: &Value, json_type: &str) -> bool {
    match (json_type, value) {
        ("string", Value::String(_)) => true,
        ("boolean", Value::Bool(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("object", Value::Object(_)) | ("array", Value::Array(_)) => true,
        _ => false,
    }
}

/// A refused value shown as serde shows it (`integer `5``, `string "x"` cut when long); arrays
/// and objects by their kind only, since they may be long.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("string {}", quoted(text)),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_i64() || n.is_u64() => format!("integer `{n}`"),
        Value::Number(n) => format!("number `{n}`"),
        other => kind(other).to_string(),
    }
}

fn type_article(json_type: &str) -> Option<&'static str> {
    Some(match json_type {
        "string" => "a string",
        "boolean" => "a boolean",
        "integer" => "an integer",
        "number" => "a number",
        "object" => "an object",
        "array" => "an array",
        _ => return None,
    })
}

/// What a JSON value is, with its article ("an array").
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refusal(function: &str, request: Value) -> String {
        screen(function, &request).expect_err("refused").to_string()
    }

    #[test]
    fn objects_and_nothing_pass_everything_else_is_refused_with_the_family_code() {
        assert!(screen("directory::skills::get", &Value::Null).is_ok());
        assert!(screen("directory::skills::get", &json!({"id": "a/b"})).is_ok());
        let huge = "x".repeat(1 << 20);
        assert!(screen(surface::ON_WORKER_ADDED, &json!([huge])).is_ok());
        for (function, code) in [
            ("directory::skills::create", Code::SkillsRequestRefused),
            (
                "directory::system-prompts::create",
                Code::PromptsRequestRefused,
            ),
            ("directory::agents::create", Code::AgentsRequestRefused),
            (
                "directory::skills::download_from_registry",
                Code::DownloadRequestRefused,
            ),
            (
                "directory::registry::workers::info",
                Code::DownloadRequestRefused,
            ),
            ("directory::index::status", Code::WorkerRequestRefused),
            (surface::UI_CONTENT, Code::WorkerRequestRefused),
        ] {
            for (request, what) in [
                (json!(["arr/x", "# x\n\nbody"]), "an array"),
                (json!("arr/x"), "a string"),
                (json!(5), "a number"),
                (json!(true), "a boolean"),
            ] {
                assert_eq!(
                    refusal(function, request),
                    format!("{code} invalid_input: the request must be a JSON object, not {what}.")
                );
            }
        }
    }

    #[test]
    fn every_function_has_a_schema_and_every_echoed_field_a_bound() {
        for function in surface::functions() {
            assert!(schemas().contains_key(function.id), "{}", function.id);
            let Some(properties) = function.request["properties"].as_object() else {
                continue;
            };
            for (key, property) in properties {
                let strings = allowed_types(property).contains(&"string");
                // Read to their own caps, never echoed.
                let unbounded =
                    ["content", "base", "capabilities", "query"].contains(&key.as_str());
                if strings && !unbounded {
                    assert!(
                        bound(key).is_some(),
                        "{}: `{key}` has no bound",
                        function.id
                    );
                }
            }
        }
    }

    #[test]
    fn strings_past_their_bound_are_refused_without_echo() {
        let huge = "\u{80}".repeat(2_500_000);
        for (function, key, code) in [
            ("directory::skills::get", "id", Code::SkillsRequestRefused),
            (
                "directory::skills::delete",
                "id",
                Code::SkillsRequestRefused,
            ),
            (
                "directory::skills::list",
                "prefix",
                Code::SkillsRequestRefused,
            ),
            (
                "directory::skills::list",
                "search",
                Code::SkillsRequestRefused,
            ),
            (
                "directory::system-prompts::get",
                "name",
                Code::PromptsRequestRefused,
            ),
            (
                "directory::agents::delete",
                "id",
                Code::AgentsRequestRefused,
            ),
            (
                "directory::skills::download_from_repo",
                "repo",
                Code::DownloadRequestRefused,
            ),
            (
                "directory::skills::download_from_repo",
                "branch",
                Code::DownloadRequestRefused,
            ),
            (
                "directory::skills::download_from_registry",
                "worker",
                Code::DownloadRequestRefused,
            ),
            (
                "directory::registry::workers::info",
                "name",
                Code::DownloadRequestRefused,
            ),
            (surface::UI_CONTENT, "path", Code::WorkerRequestRefused),
            (
                "directory::engine::functions::info",
                "function_id",
                Code::WorkerRequestRefused,
            ),
        ] {
            let message = refusal(function, json!({ key: huge }));
            assert_eq!(
                message,
                format!(
                    "{code} invalid_input: `{key}` is 5000000 bytes long; {function} reads at most {}.",
                    bound(key).expect("bounded")
                )
            );
        }
        // At the bound it passes to the handler's own checks.
        let id = "a".repeat(MAX_PATH_BYTES);
        assert!(screen("directory::skills::get", &json!({ "id": id })).is_ok());
        // A skill search's task is read up to the search's own cap, as a capability is.
        let task = "deploy the site ".repeat(300);
        assert!(screen("directory::skills::search", &json!({ "query": task })).is_ok());
        // Content is left to the contract's cap (D113).
        let content = "x".repeat(1 << 20);
        assert!(
            screen(
                "directory::skills::create",
                &json!({"id": "a", "content": content})
            )
            .is_ok()
        );
    }

    #[test]
    fn a_string_where_another_type_belongs_is_refused_in_display_form_and_cut() {
        let message = refusal("directory::skills::get", json!({"id": "a", "raw": "yes"}));
        assert_eq!(
            message,
            "invalid request: invalid type: string \"yes\", expected a boolean for `raw`"
        );
        let huge = "\u{80}".repeat(2_500_000);
        let message = refusal("directory::skills::list", json!({"if_revision": huge}));
        assert!(message.len() < 2048, "{}", message.len());
        assert!(message.contains("…\", expected an integer"), "{message}");
        // The lenient hooks take anything.
        let odd = json!({"step": huge, "generate": {"tools": [{"name": "x", "parameters": huge}]}});
        assert!(screen(surface::PRE_GENERATE, &odd).is_ok());
        assert!(screen(surface::ON_FUNCTIONS_CHANGE, &json!([huge])).is_ok());
    }

    #[test]
    fn a_value_of_another_type_a_negative_count_or_an_unknown_choice_names_its_field() {
        for (function, request, expected) in [
            (
                "directory::skills::list",
                json!({"search": 5}),
                "invalid type: integer `5`, expected a string for `search`",
            ),
            (
                "directory::skills::create",
                json!({"id": "a", "content": ["x"]}),
                "invalid type: an array, expected a string for `content`",
            ),
            (
                "directory::agents::update",
                json!({"id": "a", "content": "x", "base": 7}),
                "invalid type: integer `7`, expected a string for `base`",
            ),
            (
                "directory::skills::get",
                json!({"id": "a", "raw": 1}),
                "invalid type: integer `1`, expected a boolean for `raw`",
            ),
            (
                "directory::skills::search",
                json!({"query": "x", "limit": 2.5}),
                "invalid type: number `2.5`, expected an integer for `limit`",
            ),
            (
                "directory::skills::list",
                json!({"since_revision": -1}),
                "invalid value: integer `-1`, expected a number of at least 0 for `since_revision`",
            ),
            (
                "directory::skills::search",
                json!({"query": "x", "limit": 0}),
                "invalid value: integer `0`, expected a number of at least 1 for `limit`",
            ),
            (
                "directory::skills::search",
                json!({"query": "x", "limit": 51}),
                "invalid value: integer `51`, expected a number of at most 50 for `limit`",
            ),
            (
                "directory::skills::catalog",
                json!({"format": "json", "max_bytes": 255}),
                "invalid value: integer `255`, expected a number of at least 256 for `max_bytes`",
            ),
            (
                "directory::skills::catalog",
                json!({"format": "yaml"}),
                "unknown variant \"yaml\", expected one of `xml`, `markdown`, `json` for `format`",
            ),
        ] {
            assert_eq!(
                refusal(function, request),
                format!("invalid request: {expected}"),
                "{function}"
            );
        }
        // Null stands for absent: refused for a required field, by name.
        assert_eq!(
            refusal(
                "directory::system-prompts::create",
                json!({"name": "a", "content": null})
            ),
            "invalid request: invalid type: null, expected a string for `content`"
        );
        // What the schemas allow passes to the handler.
        for (function, request) in [
            (
                "directory::skills::search",
                json!({"query": "x", "limit": 50}),
            ),
            (
                "directory::skills::catalog",
                json!({"format": "json", "limit": 1, "max_bytes": 256}),
            ),
            (
                "directory::skills::list",
                json!({"since_revision": 0, "search": null}),
            ),
        ] {
            assert!(screen(function, &request).is_ok(), "{function} {request}");
        }
    }
}
