//! Change events: what the `directory::*::on-change` trigger types deliver. The library
//! produces them (one per write, one `external` per family per watcher burst) and hands them
//! to subscribers; the worker adapter fans them out on the bus.

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

/// The three families with a change trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Skills,
    SystemPrompts,
    Agents,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Skills, Family::SystemPrompts, Family::Agents];

    /// The trigger type id that carries this family's events.
    pub fn trigger_type(self) -> &'static str {
        match self {
            Family::Skills => "directory::skills::on-change",
            Family::SystemPrompts => "directory::system-prompts::on-change",
            Family::Agents => "directory::agents::on-change",
        }
    }
}

/// One change, with the contract's payload.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeEvent {
    pub family: Family,
    pub payload: Value,
}

impl ChangeEvent {
    /// A skill written through the library: `{op, namespace, id}`.
    pub fn skill(op: &str, id: &str) -> ChangeEvent {
        let namespace = crate::doc::ids::first_segment(id);
        ChangeEvent {
            family: Family::Skills,
            payload: json!({ "op": op, "namespace": namespace, "id": id }),
        }
    }

    /// A system prompt or agent profile written through the library: `{op, name}`.
    pub fn named(family: Family, op: &str, name: &str) -> ChangeEvent {
        ChangeEvent {
            family,
            payload: json!({ "op": op, "name": name }),
        }
    }

    /// Files changed on disk behind the library's back: `{op: "external"}`.
    pub fn external(family: Family) -> ChangeEvent {
        ChangeEvent {
            family,
            payload: json!({ "op": "external" }),
        }
    }
}

/// A receiver of change events. It is called on the thread that made the change, so it should
/// hand the event off rather than do slow work.
pub type Subscriber = Arc<dyn Fn(&ChangeEvent) + Send + Sync>;

/// The subscribers of a directory.
#[derive(Default)]
pub struct Subscribers {
    list: RwLock<Vec<Subscriber>>,
}

impl Subscribers {
    pub fn add(&self, subscriber: Subscriber) {
        if let Ok(mut list) = self.list.write() {
            list.push(subscriber);
        }
    }

    pub fn publish(&self, event: &ChangeEvent) {
        tracing::debug!(family = ?event.family, payload = %event.payload, "change event");
        if let Ok(list) = self.list.read() {
            for subscriber in list.iter() {
                subscriber(event);
            }
        }
    }
}
