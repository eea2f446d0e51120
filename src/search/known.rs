//! The contracts a catalog refresh may keep from the one before. The engine's list answer
//! carries no schemas, so a refresh asks `engine::functions::info` for every function unless it
//! knows the contract did not change: at thousands of functions that is a hundred megabytes
//! read on every push, and every short-lived client (an `iii trigger`) fires two pushes.
//!
//! A contract is kept while the function's list entries (description, metadata, worker name,
//! engine namespace) are the same and the worker that registered it is still the same
//! connection. A worker redeployed with a new schema connects again under a new id, so its
//! functions are asked for again. What this cannot see, a function registered again on the
//! same connection with a new schema and the same description, is what the full fetches are
//! for ([`Reuse::Nothing`]: at each connection, and one periodic round in ten).

use std::collections::HashMap;

use serde_json::Value;

use super::catalog::{DEFAULT_ENGINE_NAMESPACE, SlimTool, list_items, listed_id};

/// How much of the last fetch a refresh may keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Every contract is fetched again (each connection, one periodic round in ten).
    Nothing,
    /// A function whose stamp is unchanged keeps the contract fetched before (the pushes, and
    /// the other periodic rounds).
    Unchanged,
}

/// A worker's connection id by the engine namespace and name it registered under (names are
/// unique within a namespace).
pub type Connections = HashMap<(String, String), String>;

/// The connections of an `engine::workers::list` answer (`{workers: [{name, namespace, id}]}`).
/// A worker without a name is left out: its functions' contracts are always fetched.
pub fn connections(answer: &Value) -> Connections {
    answer["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|worker| {
            let name = worker["name"].as_str()?;
            let id = worker["id"].as_str()?;
            let namespace = worker["namespace"]
                .as_str()
                .unwrap_or(DEFAULT_ENGINE_NAMESPACE);
            Some(((namespace.to_string(), name.to_string()), id.to_string()))
        })
        .collect()
}

/// Each listed id's stamp: a digest of its list entries and of the connection of the worker
/// behind each. An id with an entry whose worker is not among `connections` has no stamp.
pub fn stamps<'a>(list: &'a Value, connections: &Connections) -> HashMap<&'a str, u64> {
    let mut hashers: HashMap<&str, Option<blake3::Hasher>> = HashMap::new();
    for item in list_items(list).into_iter().flatten() {
        let Some(id) = listed_id(item) else { continue };
        let hasher = hashers
            .entry(id)
            .or_insert_with(|| Some(blake3::Hasher::new()));
        let connection = connection_of(item, connections);
        match (hasher.as_mut(), connection) {
            (Some(hasher), Some(connection)) => {
                // Written into the hasher: a list entry can be kilobytes, thousands of them.
                let _ = serde_json::to_writer(&mut *hasher, item);
                hasher.update(&[0]);
                hasher.update(connection.as_bytes());
                hasher.update(&[0]);
            }
            _ => *hasher = None,
        }
    }
    hashers
        .into_iter()
        .filter_map(|(id, hasher)| Some((id, crate::digest::u64_of(&hasher?.finalize()))))
        .collect()
}

/// The connection of the worker that registered a list entry, when the engine lists it.
fn connection_of<'a>(entry: &Value, connections: &'a Connections) -> Option<&'a str> {
    let name = entry["worker_name"].as_str()?;
    let namespace = entry["namespace"]
        .as_str()
        .unwrap_or(DEFAULT_ENGINE_NAMESPACE);
    connections
        .get(&(namespace.to_string(), name.to_string()))
        .map(String::as_str)
}

/// What the last fetch settled for each function, with the stamp it was fetched under: its
/// slim tool (what search reads of a contract, not the whole schema), or `None` when the
/// engine answered with no usable contract (an error entry, an internal function), which is
/// not asked for again while its stamp stays.
#[derive(Default)]
pub struct Known {
    tools: HashMap<String, (u64, Option<SlimTool>)>,
}

impl Known {
    /// What was settled before under this same stamp: `Some(None)` for a function the engine
    /// gave no usable contract for.
    pub fn kept(&self, id: &str, stamp: u64) -> Option<Option<&SlimTool>> {
        self.tools
            .get(id)
            .filter(|(known, _)| *known == stamp)
            .map(|(_, tool)| tool.as_ref())
    }

    /// The tool fetched before under any stamp: what a function whose contract could not be
    /// fetched this time is searched by meanwhile.
    pub fn earlier(&self, id: &str) -> Option<&SlimTool> {
        self.tools.get(id).and_then(|(_, tool)| tool.as_ref())
    }

    /// Whether anything was settled before for `id`, under any stamp.
    pub fn knows(&self, id: &str) -> bool {
        self.tools.contains_key(id)
    }

    /// Keeps what `earlier` held of `id`, under its stamp then: a function whose batch failed
    /// is searched by that contract until a fetch settles it, however many fail meanwhile.
    pub fn carry(&mut self, earlier: &Known, id: &str) {
        if let Some(entry) = earlier.tools.get(id) {
            self.tools.insert(id.to_string(), entry.clone());
        }
    }

    /// Notes what this fetch settled for `id` under `stamp`.
    pub fn settle(&mut self, id: &str, stamp: u64, tool: Option<SlimTool>) {
        self.tools.insert(id.to_string(), (stamp, tool));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workers(pairs: &[(&str, &str)]) -> Connections {
        connections(&json!({ "workers": pairs.iter().map(|(name, id)| json!({
            "name": name, "namespace": "default", "id": id, "function_count": 1
        })).collect::<Vec<_>>() }))
    }

    fn list(description: &str) -> Value {
        json!({ "functions": [
            { "function_id": "mailer::send", "namespace": "default", "worker_name": "mailer", "description": description },
            { "function_id": "storage::put", "namespace": "default", "worker_name": "storage" },
        ]})
    }

    #[test]
    fn a_stamp_changes_with_the_entry_and_with_the_workers_connection() {
        let before = workers(&[("mailer", "w1"), ("storage", "w2")]);
        let first = list("Send mail.");
        let stamps = stamps(&first, &before);
        assert_eq!(stamps.len(), 2);

        let same = super::stamps(&first, &workers(&[("storage", "w2"), ("mailer", "w1")]));
        assert_eq!(same, stamps, "the order of the workers does not matter");

        let described = list("Send mail, now with attachments.");
        let redescribed = super::stamps(&described, &before);
        assert_ne!(redescribed["mailer::send"], stamps["mailer::send"]);
        assert_eq!(redescribed["storage::put"], stamps["storage::put"]);

        let redeployed = super::stamps(&first, &workers(&[("mailer", "w3"), ("storage", "w2")]));
        assert_ne!(redeployed["mailer::send"], stamps["mailer::send"]);
        assert_eq!(redeployed["storage::put"], stamps["storage::put"]);
    }

    #[test]
    fn an_entry_whose_worker_is_not_listed_has_no_stamp() {
        let only_storage = workers(&[("storage", "w2")]);
        let listed = list("Send mail.");
        let stamps = stamps(&listed, &only_storage);
        assert!(!stamps.contains_key("mailer::send"));
        assert!(stamps.contains_key("storage::put"));
        // A bare list of ids names no worker: nothing can be kept.
        assert!(super::stamps(&json!(["mailer::send"]), &only_storage).is_empty());
    }

    #[test]
    fn an_id_in_two_namespaces_is_stamped_by_both_entries() {
        let both = json!({ "functions": [
            { "function_id": "ledger::post", "namespace": "team-b", "worker_name": "ledger" },
            { "function_id": "ledger::post", "namespace": "default", "worker_name": "ledger" },
        ]});
        let mut pairs = connections(&json!({ "workers": [
            { "name": "ledger", "namespace": "team-b", "id": "b1" },
            { "name": "ledger", "namespace": "default", "id": "d1" },
        ]}));
        let first = stamps(&both, &pairs)["ledger::post"];
        pairs.insert(("team-b".into(), "ledger".into()), "b2".into());
        assert_ne!(stamps(&both, &pairs)["ledger::post"], first);
        pairs.remove(&("team-b".to_string(), "ledger".to_string()));
        assert!(stamps(&both, &pairs).is_empty(), "one unknown worker");
    }

    #[test]
    fn what_was_settled_is_kept_only_under_its_stamp() {
        let tool = |name: &str| SlimTool {
            name: name.into(),
            description: String::new(),
            parameters: json!({ "type": "object" }),
            group: None,
            engine_namespace: None,
        };
        let mut known = Known::default();
        known.settle("a::x", 7, Some(tool("a::x")));
        known.settle("b::y", 7, None);
        assert_eq!(known.kept("a::x", 7), Some(Some(&tool("a::x"))));
        assert_eq!(known.kept("a::x", 8), None);
        assert_eq!(
            known.kept("b::y", 7),
            Some(None),
            "no usable contract, settled"
        );
        assert_eq!(known.kept("c::z", 7), None);
        assert_eq!(known.earlier("a::x"), Some(&tool("a::x")));
        assert_eq!(known.earlier("b::y"), None);
        assert!(known.knows("b::y") && !known.knows("c::z"));
    }
}
