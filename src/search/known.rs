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

/// The tools of the last fetch, each with the stamp it was fetched under. Slim: what search
/// reads of a contract, not the whole schema.
#[derive(Default)]
pub struct Known {
    tools: HashMap<String, (u64, SlimTool)>,
}

impl Known {
    /// The tool fetched before under this same stamp.
    pub fn kept(&self, id: &str, stamp: u64) -> Option<&SlimTool> {
        self.tools
            .get(id)
            .filter(|(known, _)| *known == stamp)
            .map(|(_, tool)| tool)
    }

    /// Remembers the tools of this fetch that have a stamp, and forgets every other.
    pub fn replace(&mut self, tools: &[SlimTool], stamps: &HashMap<&str, u64>) {
        self.tools = tools
            .iter()
            .filter_map(|tool| {
                let stamp = *stamps.get(tool.name.as_str())?;
                Some((tool.name.clone(), (stamp, tool.clone())))
            })
            .collect();
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
    fn only_stamped_tools_are_kept_and_only_under_their_stamp() {
        let tool = |name: &str| SlimTool {
            name: name.into(),
            description: String::new(),
            parameters: json!({ "type": "object" }),
            group: None,
            engine_namespace: None,
        };
        let mut known = Known::default();
        let stamps = HashMap::from([("a::x", 7)]);
        known.replace(&[tool("a::x"), tool("b::y")], &stamps);
        assert_eq!(known.tools.len(), 1);
        assert_eq!(known.kept("a::x", 7), Some(&tool("a::x")));
        assert_eq!(known.kept("a::x", 8), None);
        assert_eq!(known.kept("b::y", 7), None);
        known.replace(&[], &HashMap::new());
        assert!(known.tools.is_empty());
    }
}
