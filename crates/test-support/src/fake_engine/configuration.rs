//! The engine's `configuration` worker, modelled on iii engine 0.23
//! (`engine/src/workers/configuration/{configuration,store,trigger}.rs`), with its `fs`
//! adapter's split between what survives an engine restart and what does not:
//!
//! - the stored value of each entry lives "on disk" and survives [`super::FakeEngine::go_away`];
//! - the schema, name, description and metadata live in the engine's memory only: after a
//!   restart an entry has its value but no schema until its worker registers it again, and
//!   `configuration::set` fails with `SCHEMA_UNAVAILABLE` meanwhile (the symptom of issue 17).
//!
//! Functions: `register` (idempotent; keeps the stored value unless `initial_value` is given;
//! fires `configuration:registered` for a new entry and `configuration:updated` for a known
//! one), `set` (`NOT_REGISTERED`, `SCHEMA_UNAVAILABLE`; fires `configuration:updated`), `get`
//! (`NOT_FOUND`), `list` and `schema`; ids must match `[a-z0-9_-]{1,64}` (`INVALID_ID`).
//! Events go to every live binding of the `configuration` trigger type whose
//! `configuration_id` and `event_types` match, delivered to the connection that registered the
//! bound function, as the engine does. Not modelled: JSON Schema validation, `${VAR}`
//! expansion, the TTL cleanup, `condition_function_id`, deletes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::FakeEngine;
use super::frames::{result_frame, str_field};
use super::records::ErrorBody;
use super::state::{KIND_INVOCATION, Pending, State};

/// The trigger type the configuration worker provides.
pub const TRIGGER_TYPE: &str = "configuration";
pub const REGISTERED: &str = "configuration:registered";
pub const UPDATED: &str = "configuration:updated";

/// One entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub value: Value,
    /// `Null` until registered in this engine session.
    pub schema: Value,
    pub name: String,
    pub description: String,
    pub metadata: Option<Value>,
}

/// A configuration event delivered to a bound function.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub connection: u64,
    pub function_id: String,
    pub event_type: String,
    pub id: String,
    pub new_value: Value,
}

/// A `configuration::get` held back by [`super::FakeEngine::hold_configuration_reads`].
pub(super) struct HeldRead {
    pub connection: u64,
    pub invocation_id: String,
    pub data: Value,
}

#[derive(Default)]
pub(super) struct Store {
    pub entries: BTreeMap<String, Entry>,
    pub deliveries: Vec<Delivery>,
    pub hold_reads: bool,
    pub held: Vec<HeldRead>,
}

impl Store {
    /// What an engine restart keeps: the stored values, nothing else.
    pub fn restart(&mut self) {
        for entry in self.entries.values_mut() {
            entry.schema = Value::Null;
            entry.name = String::new();
            entry.description = String::new();
            entry.metadata = None;
        }
        self.held.clear();
    }
}

fn error(code: &str, message: String) -> ErrorBody {
    ErrorBody::new(code, message)
}

fn valid_id(id: &str) -> Result<(), ErrorBody> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(error(
            "INVALID_ID",
            format!("invalid configuration id '{id}': must match [a-z0-9_-]{{1,64}}"),
        ))
    }
}

/// Whether `function_id` is one of the modelled functions.
pub(super) fn provides(function_id: &str) -> bool {
    matches!(
        function_id,
        "configuration::register"
            | "configuration::set"
            | "configuration::get"
            | "configuration::list"
            | "configuration::schema"
    )
}

/// Answers a call to one of the modelled functions; `None` when the answer is held back.
pub(super) fn call(
    st: &mut State,
    conn: u64,
    invocation_id: &str,
    function_id: &str,
    data: &Value,
) -> Option<Result<Value, ErrorBody>> {
    let store = st.configuration.as_mut()?;
    if function_id == "configuration::get" && store.hold_reads {
        store.held.push(HeldRead {
            connection: conn,
            invocation_id: invocation_id.to_string(),
            data: data.clone(),
        });
        return None;
    }
    Some(match function_id {
        "configuration::register" => register(st, data),
        "configuration::set" => set(st, &str_field(data, "id"), data.get("value").cloned()),
        "configuration::get" => get(st, data),
        "configuration::list" => Ok(list(st)),
        "configuration::schema" => schema(st, data),
        other => Err(error(
            "function_not_found",
            format!("Function {other} not found"),
        )),
    })
}

fn store(st: &mut State) -> &mut Store {
    st.configuration.get_or_insert_with(Store::default)
}

fn register(st: &mut State, data: &Value) -> Result<Value, ErrorBody> {
    let id = str_field(data, "id");
    valid_id(&id)?;
    let initial = data.get("initial_value").cloned();
    let prior = store(st).entries.get(&id).cloned();
    let old_value = prior.as_ref().map(|e| e.value.clone());
    let value = match (initial, &prior) {
        (Some(v), _) => v,
        (None, Some(existing)) => existing.value.clone(),
        (None, None) => Value::Null,
    };
    let entry = Entry {
        value,
        schema: data.get("schema").cloned().unwrap_or(Value::Null),
        name: str_field(data, "name"),
        description: str_field(data, "description"),
        metadata: data.get("metadata").filter(|m| !m.is_null()).cloned(),
    };
    store(st).entries.insert(id.clone(), entry.clone());
    let event_type = if prior.is_some() { UPDATED } else { REGISTERED };
    fan_out(
        st,
        &id,
        &entry,
        event_type,
        old_value.unwrap_or(Value::Null),
    );
    Ok(entry_value(&id, &entry))
}

/// `configuration::set`, also what an operator's `iii trigger configuration::set` does.
pub(super) fn set(st: &mut State, id: &str, value: Option<Value>) -> Result<Value, ErrorBody> {
    valid_id(id)?;
    let value = value.unwrap_or(Value::Null);
    let Some(entry) = store(st).entries.get_mut(id) else {
        return Err(error(
            "NOT_REGISTERED",
            format!("configuration '{id}' is not registered; call configuration::register first"),
        ));
    };
    if entry.schema.is_null() {
        return Err(error(
            "SCHEMA_UNAVAILABLE",
            format!(
                "configuration '{id}' has no schema available yet; the owning worker must register before values can be set"
            ),
        ));
    }
    let old_value = std::mem::replace(&mut entry.value, value.clone());
    let entry = entry.clone();
    fan_out(st, id, &entry, UPDATED, old_value.clone());
    Ok(json!({ "old_value": old_value, "new_value": value }))
}

fn get(st: &mut State, data: &Value) -> Result<Value, ErrorBody> {
    let id = str_field(data, "id");
    match store(st).entries.get(&id) {
        Some(entry) => Ok(json!({ "id": id, "value": entry.value })),
        None => Err(error(
            "NOT_FOUND",
            format!("configuration '{id}' not found"),
        )),
    }
}

fn list(st: &mut State) -> Value {
    let rows: Vec<Value> = store(st)
        .entries
        .iter()
        .map(|(id, e)| {
            json!({ "id": id, "name": e.name, "description": e.description, "schema": e.schema, "metadata": e.metadata })
        })
        .collect();
    json!({ "configurations": rows })
}

fn schema(st: &mut State, data: &Value) -> Result<Value, ErrorBody> {
    let id = str_field(data, "id");
    match store(st).entries.get(&id) {
        Some(e) => Ok(
            json!({ "id": id, "name": e.name, "description": e.description, "schema": e.schema, "metadata": e.metadata }),
        ),
        None => Err(error(
            "NOT_FOUND",
            format!("configuration '{id}' not found"),
        )),
    }
}

fn entry_value(id: &str, entry: &Entry) -> Value {
    json!({
        "id": id, "name": entry.name, "description": entry.description,
        "schema": entry.schema, "value": entry.value, "metadata": entry.metadata,
    })
}

/// Delivers an event to every matching live binding, as the engine's `fan_out` does.
fn fan_out(st: &mut State, id: &str, entry: &Entry, event_type: &str, old_value: Value) {
    let payload = json!({
        "type": TRIGGER_TYPE, "event_type": event_type, "id": id, "name": entry.name,
        "description": entry.description, "schema": entry.schema,
        "old_value": old_value, "new_value": entry.value, "metadata": entry.metadata,
    });
    let bound: Vec<(String, Option<Value>)> = st
        .worker_triggers
        .values()
        .filter(|t| t.trigger_type == TRIGGER_TYPE && st.is_open(t.connection))
        .filter(|t| {
            t.config
                .get("configuration_id")
                .and_then(Value::as_str)
                .is_none_or(|wanted| wanted == id)
        })
        .filter(|t| {
            t.config
                .get("event_types")
                .and_then(Value::as_array)
                .is_none_or(|types| types.iter().any(|t| t == event_type))
        })
        .map(|t| (t.function_id.clone(), t.metadata.clone()))
        .collect();
    for (function_id, metadata) in bound {
        let Some(owner) = st.function_owner(&function_id) else {
            continue;
        };
        let delivery_id = st.fresh_id(KIND_INVOCATION);
        let mut frame = json!({
            "type": "invokefunction",
            "invocation_id": delivery_id,
            "function_id": function_id,
            "data": payload,
        });
        if let Some(metadata) = metadata {
            frame["metadata"] = metadata;
        }
        st.pending
            .insert(delivery_id, Pending::Discard { connection: owner });
        st.send_to(owner, frame);
        store(st).deliveries.push(Delivery {
            connection: owner,
            function_id,
            event_type: event_type.to_string(),
            id: id.to_string(),
            new_value: entry.value.clone(),
        });
    }
}

// ---- The model as tests drive it ------------------------------------------------------------

impl FakeEngine {
    /// Answer `configuration::*` calls from a model of the engine's configuration worker
    /// (this module) instead of `function_not_found`; canned answers still win.
    pub fn model_configuration_worker(&self) {
        let mut st = self.shared.lock();
        if st.configuration.is_none() {
            st.configuration = Some(Store::default());
        }
    }

    /// The simplest configuration worker, as canned answers (no model): `configuration::get`
    /// answers NOT_FOUND until a value is stored, then the value; `configuration::register`
    /// stores its `initial_value` when nothing is stored yet (as the engine does) and echoes
    /// its input. Returns the stored value, for the test to read or replace.
    pub fn canned_configuration_worker(&self) -> Arc<Mutex<Option<Value>>> {
        let stored = Arc::new(Mutex::new(None::<Value>));
        let for_get = stored.clone();
        self.respond_with("configuration::get", move |data| {
            let value = for_get.lock().expect("stored").clone();
            match value {
                Some(value) => Ok(json!({ "id": data["id"], "value": value })),
                None => Err((
                    "NOT_FOUND".to_string(),
                    format!("configuration {} not found", data["id"]),
                )),
            }
        });
        let for_register = stored.clone();
        self.respond_with("configuration::register", move |data| {
            let mut value = for_register.lock().expect("stored");
            if value.is_none()
                && let Some(initial) = data.get("initial_value")
            {
                *value = Some(initial.clone());
            }
            Ok(data)
        });
        stored
    }

    /// `configuration::set` as an operator calls it (`iii trigger configuration::set`): the
    /// model's answer, and the `configuration:updated` event to the live bindings.
    pub fn configuration_set(&self, id: &str, value: Value) -> Result<Value, ErrorBody> {
        let outcome = {
            let mut st = self.shared.lock();
            if st.configuration.is_none() {
                return Err(ErrorBody::new(
                    "function_not_found",
                    "Function configuration::set not found (the model is off)",
                ));
            }
            set(&mut st, id, Some(value))
        };
        self.shared.bump();
        outcome
    }

    /// Replace a stored value behind the engine's back, as an edit of `config/<id>.yaml` while
    /// the engine is stopped: no event, no schema check.
    pub fn configuration_store(&self, id: &str, value: Value) {
        let mut st = self.shared.lock();
        let store = st.configuration.get_or_insert_with(Store::default);
        match store.entries.get_mut(id) {
            Some(entry) => entry.value = value,
            None => {
                store.entries.insert(
                    id.to_string(),
                    Entry {
                        value,
                        schema: Value::Null,
                        name: String::new(),
                        description: String::new(),
                        metadata: None,
                    },
                );
            }
        }
    }

    /// The model's entry for `id`.
    pub fn configuration_entry(&self, id: &str) -> Option<Entry> {
        self.shared
            .lock()
            .configuration
            .as_ref()
            .and_then(|store| store.entries.get(id).cloned())
    }

    /// Every configuration event delivered so far.
    pub fn configuration_deliveries(&self) -> Vec<Delivery> {
        self.shared
            .lock()
            .configuration
            .as_ref()
            .map(|store| store.deliveries.clone())
            .unwrap_or_default()
    }

    /// With `true`, `configuration::get` calls get no answer (a read in flight); with `false`,
    /// the held ones still on an open connection are answered now.
    pub fn hold_configuration_reads(&self, hold: bool) {
        let mut st = self.shared.lock();
        let Some(store) = st.configuration.as_mut() else {
            return;
        };
        store.hold_reads = hold;
        if hold {
            return;
        }
        let held = std::mem::take(&mut store.held);
        for read in held {
            if let Some(outcome) = call(
                &mut st,
                read.connection,
                &read.invocation_id,
                "configuration::get",
                &read.data,
            ) {
                st.send_to(
                    read.connection,
                    result_frame(&read.invocation_id, "configuration::get", outcome),
                );
            }
        }
    }

    /// How many `configuration::get` calls are held right now.
    pub fn held_configuration_reads(&self) -> usize {
        self.shared
            .lock()
            .configuration
            .as_ref()
            .map_or(0, |store| store.held.len())
    }
}
