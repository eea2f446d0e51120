//! The searchable catalog: the engine's answers to `engine::functions::list` and batched
//! `engine::functions::info` turned into slim tools (name, first sentence, argument names),
//! their fingerprint, and the BM25 index over them, built once per catalog.
//!
//! Pure: parsing and building only; fetching is the service's job (`service.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::SearchError;
use super::bm25::Index;
use super::tokenize::{terms, truncate_at_char_boundary};

/// The search function itself never shows up in its own results (contract).
pub const SEARCH_FUNCTION_ID: &str = "directory::search_functions";
/// Engine introspection is how the model got here; never a search result (contract).
pub const ENGINE_PREFIX: &str = "engine::";
/// A slim description is at most this many bytes (contract: 160, cut on a char boundary).
pub const MAX_DESCRIPTION_BYTES: usize = 160;
/// The function name is indexed this many times (contract: 3× weight).
pub const NAME_WEIGHT: usize = 3;

/// Whether a function id may appear in search results at all.
pub fn is_excluded(function_id: &str) -> bool {
    function_id == SEARCH_FUNCTION_ID || function_id.starts_with(ENGINE_PREFIX)
}

/// A function's namespace (its worker): the part before the first `::`, when there is one.
/// A catalog groups a function without one under the worker that registered it
/// ([`SlimTool::worker`]).
pub fn namespace(function_id: &str) -> Option<&str> {
    let (namespace, _) = function_id.split_once("::")?;
    (!namespace.is_empty()).then_some(namespace)
}

/// A function as the engine describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// The request schema (`parameters`, `request_format` or `request_schema`).
    pub parameters: Value,
    /// The worker that registered it (the engine's `worker_name`), when the engine says.
    pub worker: Option<String>,
    /// The engine namespace it is registered in, when not the default one: a caller invokes
    /// it there (the engine resolves an id in one namespace only).
    pub engine_namespace: Option<String>,
}

/// A tool reduced to what search reads and what the fingerprint covers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlimTool {
    pub name: String,
    /// The first sentence of the first line, at most [`MAX_DESCRIPTION_BYTES`].
    pub description: String,
    /// `{type: "object", properties: {<arg>: {}}, required?}`, keys sorted.
    pub parameters: Value,
    /// For an id without a namespace (the engine's pub/sub registers `publish`), the worker
    /// that registered it, when the engine named one. Absent otherwise, so the fingerprint of a
    /// catalog of namespaced ids is the contract's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// [`Tool::engine_namespace`]; absent for the default namespace, so the fingerprint of a
    /// catalog of one namespace is the contract's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_namespace: Option<String>,
}

impl SlimTool {
    pub fn from_tool(tool: &Tool) -> SlimTool {
        let group = tool
            .worker
            .clone()
            .filter(|w| namespace(&tool.name).is_none() && !w.trim().is_empty());
        SlimTool {
            name: tool.name.clone(),
            description: slim_description(&tool.description),
            parameters: slim_parameters(&tool.parameters),
            group,
            engine_namespace: tool.engine_namespace.clone(),
        }
    }

    /// The worker a search groups this function under: its namespace, or for an id without
    /// one, [`SlimTool::group`], else the id itself. Why not drop such ids, as the contract's search did: an agent
    /// asking to "publish an event" could then never be shown the engine's `publish`.
    pub fn worker(&self) -> &str {
        namespace(&self.name)
            .or(self.group.as_deref())
            .unwrap_or(&self.name)
    }

    /// The argument names, sorted.
    pub fn argument_names(&self) -> impl Iterator<Item = &str> {
        self.parameters["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.keys().map(String::as_str))
    }

    /// What BM25 indexes: the name three times, the slim description, the argument names.
    pub fn document_terms(&self) -> Vec<String> {
        let mut out = Vec::new();
        let name = terms(&self.name);
        for _ in 0..NAME_WEIGHT {
            out.extend(name.iter().cloned());
        }
        out.extend(terms(&self.description));
        for argument in self.argument_names() {
            out.extend(terms(argument));
        }
        out
    }
}

/// The first sentence of the first line: up to the first `.`, `?` or `!` that ends the line or
/// is followed by whitespace; trimmed and capped at [`MAX_DESCRIPTION_BYTES`].
pub fn slim_description(description: &str) -> String {
    let line = description.trim_start().lines().next().unwrap_or_default();
    let mut end = line.len();
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '?' | '!') && chars.peek().is_none_or(|(_, next)| next.is_whitespace())
        {
            end = i + c.len_utf8();
            break;
        }
    }
    truncate_at_char_boundary(line[..end].trim(), MAX_DESCRIPTION_BYTES)
        .trim_end()
        .to_string()
}

/// A request schema reduced to its argument names (and the required ones), keys sorted.
pub fn slim_parameters(parameters: &Value) -> Value {
    let properties: Map<String, Value> = parameters["properties"]
        .as_object()
        .map(|p| p.keys().map(|k| (k.clone(), json!({}))).collect())
        .unwrap_or_default();
    let mut slim = json!({ "type": "object", "properties": sorted(properties) });
    if let Some(required) = parameters["required"].as_array() {
        let mut names: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
        names.sort_unstable();
        names.dedup();
        slim["required"] = json!(names);
    }
    slim
}

/// A map whose keys serialize sorted whatever serde_json's map order is.
fn sorted(map: Map<String, Value>) -> Value {
    let ordered: BTreeMap<String, Value> = map.into_iter().collect();
    json!(ordered)
}

/// The function ids of an `engine::functions::list` answer, in listed order, excluded ids
/// removed. Accepts an array, or an object with a `functions` or `items` array; each item a
/// string or an object with `function_id`, `id` or `name`. An id listed twice is the contract's
/// `ListDuplicate`, unless each time in another engine namespace (workers in two namespaces
/// may register the same id): it is listed once, and [`tools_from_info`] picks its entry.
pub fn parse_list(answer: &Value) -> Result<Vec<String>, SearchError> {
    let items = list_items(answer).ok_or(SearchError::ListMalformed)?;
    let mut seen: HashMap<&str, HashSet<Option<&str>>> = HashMap::with_capacity(items.len());
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id = match item {
            Value::String(id) => id.as_str(),
            Value::Object(_) => listed_id(item).ok_or(SearchError::ListMalformed)?,
            _ => return Err(SearchError::ListMalformed),
        };
        let namespaces = seen.entry(id).or_default();
        let first = namespaces.is_empty();
        if !namespaces.insert(item["namespace"].as_str()) {
            return Err(SearchError::ListDuplicate);
        }
        if first && !is_excluded(id) {
            ids.push(id.to_string());
        }
    }
    Ok(ids)
}

/// The entries of a list answer: the array itself, or its `functions` (or `items`) array.
pub fn list_items(answer: &Value) -> Option<&Vec<Value>> {
    match answer {
        Value::Array(items) => Some(items),
        Value::Object(object) => object
            .get("functions")
            .or_else(|| object.get("items"))
            .and_then(Value::as_array),
        _ => None,
    }
}

/// The function id of a list or info entry object.
pub fn listed_id(entry: &Value) -> Option<&str> {
    ["function_id", "id", "name"]
        .iter()
        .find_map(|key| entry.get(*key).and_then(Value::as_str))
}

/// The detail entries of one `engine::functions::info {function_ids}` answer: a `functions`
/// (or `items`) array, a bare array, or a single detail object.
pub fn info_entries(answer: &Value) -> Vec<&Value> {
    match list_items(answer) {
        Some(items) => items.iter().collect(),
        None if listed_id(answer).is_some() => vec![answer],
        None => Vec::new(),
    }
}

/// Whether an entry is published with `metadata.internal: true`.
pub fn is_internal(entry: &Value) -> bool {
    entry["metadata"]["internal"].as_bool() == Some(true)
}

/// The engine namespace a worker registers in unless it declares another.
pub const DEFAULT_ENGINE_NAMESPACE: &str = "default";

/// The engine namespace an `engine::functions::info` (or list) entry names, unless it is the
/// default one: a caller in the default namespace must name it to reach the function.
pub fn other_engine_namespace(entry: &Value) -> Option<&str> {
    entry["namespace"]
        .as_str()
        .filter(|ns| !ns.is_empty() && *ns != DEFAULT_ENGINE_NAMESPACE)
}

/// The tools of the listed ids, in listed order, from the info entries of every answered
/// batch. Entries that carry an `error` or are internal are dropped, as are listed ids no
/// entry describes.
pub fn tools_from_info<'a>(
    listed: &[String],
    entries: impl IntoIterator<Item = &'a Value>,
) -> Vec<Tool> {
    // An id several engine namespaces hold is the default namespace's (a caller reaches it
    // without naming one), else the first entry's.
    let default = |entry: &Value| other_engine_namespace(entry).is_none();
    let mut pool: HashMap<&str, &Value> = HashMap::new();
    for entry in entries {
        if let Some(id) = listed_id(entry) {
            let kept = pool.entry(id).or_insert(entry);
            if !default(kept) && default(entry) {
                *kept = entry;
            }
        }
    }
    listed
        .iter()
        .filter_map(|id| pool.get(id.as_str()).map(|entry| (id, *entry)))
        .filter(|(_, entry)| entry.get("error").is_none_or(Value::is_null) && !is_internal(entry))
        .map(|(id, entry)| Tool {
            name: id.clone(),
            description: entry["description"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            parameters: ["parameters", "request_format", "request_schema"]
                .iter()
                .map(|key| &entry[*key])
                .find(|v| v.is_object())
                .cloned()
                .unwrap_or_else(|| json!({ "type": "object" })),
            worker: entry["worker_name"].as_str().map(str::to_string),
            engine_namespace: other_engine_namespace(entry).map(str::to_string),
        })
        .collect()
}

/// A searchable catalog: slim tools sorted by name, their fingerprint, and their index.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<SlimTool>,
    fingerprint: String,
    index: Index,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Builds the catalog of these tools (excluded ids dropped, duplicates keep the first).
    pub fn build(tools: &[Tool]) -> Catalog {
        Draft::new(tools.iter().map(SlimTool::from_tool).collect()).finish()
    }

    pub fn tools(&self) -> &[SlimTool] {
        &self.tools
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn get(&self, name: &str) -> Option<&SlimTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The worker a function is grouped under ([`SlimTool::worker`]): its namespace, read off
    /// the id without a lookup (a search asks this of every hit); for an id without one, its
    /// [`SlimTool::group`], or `None` when the catalog does not hold it.
    pub fn worker_of<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        namespace(name).or_else(|| self.get(name).map(SlimTool::worker))
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The workers of every tool ([`SlimTool::worker`]: the installed workers, as far as
    /// search can tell).
    pub fn namespaces(&self) -> HashSet<&str> {
        self.tools.iter().map(SlimTool::worker).collect()
    }
}

/// A catalog's tools and fingerprint before its index is built: a refresh that fetched the
/// catalog in use compares fingerprints and builds nothing.
pub struct Draft {
    tools: Vec<SlimTool>,
    fingerprint: String,
}

impl Draft {
    /// These tools, excluded ids dropped, duplicates keeping the first, sorted by name.
    pub fn new(tools: Vec<SlimTool>) -> Draft {
        let mut seen = HashSet::new();
        let mut tools: Vec<SlimTool> = tools
            .into_iter()
            .filter(|t| !is_excluded(&t.name) && seen.insert(t.name.clone()))
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let fingerprint = fingerprint(&tools);
        Draft { tools, fingerprint }
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The catalog, its index built.
    pub fn finish(self) -> Catalog {
        let documents: Vec<Vec<String>> = self.tools.iter().map(SlimTool::document_terms).collect();
        let index = Index::build(&documents);
        let by_name = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Catalog {
            tools: self.tools,
            fingerprint: self.fingerprint,
            index,
            by_name,
        }
    }
}

/// blake3 of the canonical JSON of the slim tool list, hex.
pub fn fingerprint(tools: &[SlimTool]) -> String {
    let canonical = serde_json::to_vec(tools).expect("slim tools serialize");
    blake3::hash(&canonical).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slim_description_is_the_first_sentence_of_the_first_line() {
        assert_eq!(
            slim_description("Send an email. Retries twice."),
            "Send an email."
        );
        assert_eq!(slim_description("Is it up? Checks health."), "Is it up?");
        assert_eq!(slim_description("Deploy now!\nMore."), "Deploy now!");
        assert_eq!(
            slim_description("  Version 1.2 of the API\nnext"),
            "Version 1.2 of the API"
        );
        assert_eq!(slim_description("Ends with a dot."), "Ends with a dot.");
        assert_eq!(slim_description("file.txt reader"), "file.txt reader");
        assert_eq!(slim_description(""), "");
        let long = format!("{} end.", "é".repeat(100));
        let slim = slim_description(&long);
        assert!(slim.len() <= MAX_DESCRIPTION_BYTES);
        assert_eq!(slim, "é".repeat(80));
    }

    #[test]
    fn slim_parameters_keep_sorted_argument_names_and_required() {
        let schema = json!({
            "type": "object",
            "properties": { "zeta": { "type": "string" }, "alpha": { "type": "integer" } },
            "required": ["zeta", "alpha", 3],
            "additionalProperties": false,
        });
        let slim = slim_parameters(&schema);
        assert_eq!(
            serde_json::to_string(&slim).unwrap_or_default(),
            r#"{"properties":{"alpha":{},"zeta":{}},"required":["alpha","zeta"],"type":"object"}"#
        );
        assert_eq!(
            slim_parameters(&json!({ "title": "AnyValue" })),
            json!({ "type": "object", "properties": {} })
        );
    }

    #[test]
    fn list_answers_in_every_accepted_shape() {
        let want = vec!["a::x".to_string(), "b::y".to_string()];
        for answer in [
            json!(["a::x", "b::y"]),
            json!({ "functions": [{ "function_id": "a::x" }, { "id": "b::y" }] }),
            json!({ "items": [{ "name": "a::x" }, "b::y"] }),
        ] {
            assert_eq!(parse_list(&answer).ok(), Some(want.clone()), "{answer}");
        }
        let excluded = json!([
            "engine::functions::list",
            "directory::search_functions",
            "a::x"
        ]);
        assert_eq!(parse_list(&excluded).ok(), Some(vec!["a::x".to_string()]));
        for malformed in [
            json!("a::x"),
            json!({ "workers": [] }),
            json!([1]),
            json!([{ "description": "no id" }]),
        ] {
            assert!(
                matches!(parse_list(&malformed), Err(SearchError::ListMalformed)),
                "{malformed}"
            );
        }
        assert!(matches!(
            parse_list(&json!(["a::x", { "id": "a::x" }])),
            Err(SearchError::ListDuplicate)
        ));
    }

    /// Workers in two engine namespaces may register the same id: the engine lists it once per
    /// namespace, which is no duplicate (a catalog refusing it would never refresh while they
    /// run); the default namespace's entry is the one searched, as a caller reaches it
    /// without naming a namespace.
    #[test]
    fn an_id_in_two_engine_namespaces_is_listed_once_as_the_default_ones() {
        let list = json!({ "functions": [
            { "function_id": "ledger::post", "namespace": "team-b" },
            { "function_id": "ledger::post", "namespace": "default" },
            { "function_id": "team::only", "namespace": "team-b" },
        ]});
        let listed = parse_list(&list).expect("listed");
        assert_eq!(listed, ["ledger::post", "team::only"]);
        let info = json!({ "functions": [
            { "function_id": "ledger::post", "namespace": "team-b", "description": "Team B's." },
            { "function_id": "ledger::post", "namespace": "default", "description": "Default's." },
            { "function_id": "team::only", "namespace": "team-b", "description": "Only B's." },
        ]});
        let tools = tools_from_info(&listed, info_entries(&info));
        assert_eq!(tools[0].description, "Default's.");
        assert_eq!(tools[0].engine_namespace, None);
        assert_eq!(tools[1].engine_namespace.as_deref(), Some("team-b"));
        // The same id twice in one namespace is still the contract's duplicate.
        let twice = json!({ "functions": [
            { "function_id": "ledger::post", "namespace": "team-b" },
            { "function_id": "ledger::post", "namespace": "team-b" },
        ]});
        assert!(matches!(
            parse_list(&twice),
            Err(SearchError::ListDuplicate)
        ));
    }

    #[test]
    fn info_entries_become_tools_in_listed_order() {
        let listed: Vec<String> = ["b::two", "a::one", "c::gone", "d::secret", "e::broken"]
            .map(String::from)
            .to_vec();
        let answer = json!({ "functions": [
            { "function_id": "a::one", "description": "One.", "request_schema": { "properties": { "x": {} } } },
            { "function_id": "b::two", "request_format": { "properties": { "y": {} } } },
            { "function_id": "d::secret", "metadata": { "internal": true } },
            { "function_id": "e::broken", "error": "forbidden" },
        ]});
        let tools = tools_from_info(&listed, info_entries(&answer));
        assert_eq!(
            tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["b::two", "a::one"]
        );
        assert_eq!(tools[0].description, "");
        assert_eq!(tools[0].parameters, json!({ "properties": { "y": {} } }));
        assert_eq!(tools[1].parameters, json!({ "properties": { "x": {} } }));
        let single = json!({ "function_id": "a::one", "parameters": { "type": "object" } });
        assert_eq!(info_entries(&single).len(), 1);
        let none = tools_from_info(&listed[..1], info_entries(&json!({ "nothing": true })));
        assert!(none.is_empty());
        let bare = tools_from_info(&listed[..1], info_entries(&json!([{ "name": "b::two" }])));
        assert_eq!(bare[0].parameters, json!({ "type": "object" }));
    }

    #[test]
    fn the_fingerprint_covers_the_canonical_list_only() {
        let tool = |name: &str, description: &str| Tool {
            name: name.into(),
            description: description.into(),
            parameters: json!({ "properties": { "to": { "type": "string" } } }),
            worker: None,
            engine_namespace: None,
        };
        let a = Catalog::build(&[
            tool("m::send", "Send mail. Long tail."),
            tool("s::put", "Put."),
        ]);
        // Order, the text after the first sentence and argument types do not matter.
        let b = Catalog::build(&[
            tool("s::put", "Put."),
            Tool {
                parameters: json!({ "properties": { "to": { "type": "integer" } } }),
                ..tool("m::send", "Send mail. Other tail.")
            },
        ]);
        assert_eq!(a.fingerprint(), b.fingerprint());
        let c = Catalog::build(&[tool("m::send", "Send email."), tool("s::put", "Put.")]);
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.tools()[0].name, "m::send");
        assert_eq!(a.len(), 2);
        assert!(a.contains("s::put") && !a.contains("x::y"));
    }

    #[test]
    fn a_function_without_a_namespace_is_grouped_under_the_worker_that_registered_it() {
        let listed: Vec<String> = ["publish", "ping", "state::get"].map(String::from).to_vec();
        let answer = json!({ "functions": [
            { "function_id": "publish", "description": "Publishes an event", "worker_name": "iii-pubsub" },
            { "function_id": "ping", "worker_name": " " },
            { "function_id": "state::get", "worker_name": "iii-state" },
        ]});
        let catalog = Catalog::build(&tools_from_info(&listed, info_entries(&answer)));
        // The engine's worker for an id without a namespace; the id itself when the engine
        // names none; a namespace wins over the engine's worker name.
        assert_eq!(catalog.worker_of("publish"), Some("iii-pubsub"));
        assert_eq!(catalog.worker_of("ping"), Some("ping"));
        assert_eq!(catalog.worker_of("state::get"), Some("state"));
        assert_eq!(catalog.worker_of("gone"), None);
        assert_eq!(
            catalog.namespaces(),
            HashSet::from(["iii-pubsub", "ping", "state"])
        );

        // The fingerprint: a namespaced function's worker name is not part of it (a catalog of
        // namespaced ids keeps the contract's); the worker of one without a namespace is.
        let tool = |name: &str, worker: Option<&str>| Tool {
            name: name.into(),
            description: "D.".into(),
            parameters: json!({}),
            worker: worker.map(String::from),
            engine_namespace: None,
        };
        let fingerprint = |tools: &[Tool]| Catalog::build(tools).fingerprint().to_string();
        assert_eq!(
            fingerprint(&[tool("state::get", Some("iii-state"))]),
            fingerprint(&[tool("state::get", None)])
        );
        assert_ne!(
            fingerprint(&[tool("publish", Some("iii-pubsub"))]),
            fingerprint(&[tool("publish", Some("other"))])
        );
    }

    #[test]
    fn excluded_functions_never_enter_the_catalog() {
        let tool = |name: &str| Tool {
            name: name.into(),
            description: String::new(),
            parameters: json!({}),
            worker: None,
            engine_namespace: None,
        };
        let catalog = Catalog::build(&[
            tool("engine::functions::info"),
            tool(SEARCH_FUNCTION_ID),
            tool("directory::skills::list"),
        ]);
        assert_eq!(catalog.len(), 1);
        assert_eq!(catalog.namespaces(), HashSet::from(["directory"]));
    }

    #[test]
    fn document_terms_weigh_the_name_three_times() {
        let slim = SlimTool::from_tool(&Tool {
            name: "mailer::send".into(),
            description: "Deliver a message.".into(),
            parameters: json!({ "properties": { "toAddress": {} } }),
            worker: None,
            engine_namespace: None,
        });
        assert_eq!(
            slim.document_terms(),
            [
                "mailer",
                "send",
                "mailer",
                "send",
                "mailer",
                "send",
                "deliver",
                "message",
                // `to` is a stopword, camelCase part or not.
                "address",
                "toaddress"
            ]
        );
    }
}
