//! The registry's records as this worker answers them, and the tolerant parsing that gets them
//! from what the registry sends (contract §6): rows that cannot be read are dropped rather than
//! failing the whole answer, missing lists are empty, missing pagination has defaults.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::RegistryError;
// `null` reads as the type's default (registries send `"config": null`).
use crate::request::null_as_default;

/// A published worker, as `directory::registry::workers::list` and `::info` answer it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Worker {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub repo: Option<String>,
    /// The worker's configuration schema or defaults, as published (an object; `{}` when none).
    #[serde(default, deserialize_with = "null_as_default")]
    pub config: Map<String, Value>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub supported_targets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub total_downloads: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub dependencies: Vec<Dependency>,
    #[serde(default)]
    pub author: Option<Author>,
}

impl Worker {
    /// The envelope answered when the registry's own cannot be read: the requested name, every
    /// other field empty.
    fn named(name: &str) -> Worker {
        Worker {
            name: name.to_string(),
            ..Worker::default()
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dependency {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Author {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub pfp: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub verified: bool,
}

/// `{ next_cursor, has_more, page_size }`; defaults when the registry sends none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pagination {
    #[serde(default)]
    pub next_cursor: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub has_more: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    pub page_size: u64,
}

/// The answer of `directory::registry::workers::list`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorkerPage {
    pub workers: Vec<Worker>,
    pub pagination: Pagination,
}

/// A function a worker publishes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionContract {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, alias = "request_format")]
    pub request_schema: Value,
    #[serde(default, alias = "response_format")]
    pub response_schema: Value,
    #[serde(default)]
    pub metadata: Value,
}

impl FunctionContract {
    /// Whether the worker marks the function internal (`metadata.internal: true`): not for
    /// models, kept out of search.
    pub fn is_internal(&self) -> bool {
        self.metadata.get("internal") == Some(&Value::Bool(true))
    }
}

/// A trigger type a worker publishes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TriggerContract {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub invocation_schema: Value,
    #[serde(default)]
    pub return_schema: Value,
    #[serde(default)]
    pub metadata: Value,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ApiReference {
    pub functions: Vec<FunctionContract>,
    pub triggers: Vec<TriggerContract>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SkillEntry {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptEntry {
    pub name: String,
    pub description: Option<String>,
}

/// A bundle's file list without contents.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SkillsTree {
    pub skills: Vec<SkillEntry>,
    pub prompts: Vec<PromptEntry>,
}

/// The answer of `directory::registry::workers::info`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerInfo {
    pub worker: Worker,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readme: Option<String>,
    pub api_reference: ApiReference,
    pub skills_tree: SkillsTree,
}

/// What `directory::registry::workers::info` answers of a [`WorkerInfo`]: a pre-install card
/// by default (the worker, each function and trigger by name and description, the skills tree),
/// as the bundled `iii-runtime` prompt tells agents; the README with `readme`; each function's
/// request and response schemas and metadata, and each trigger's invocation and return schemas
/// and metadata, with `schemas`. With both it is the whole record, the answer of 1.2.8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CardParts {
    pub readme: bool,
    pub schemas: bool,
}

/// A function or trigger on the card: its name and description.
#[derive(Serialize)]
struct Named<'a> {
    name: &'a str,
    description: Option<&'a str>,
}

impl WorkerInfo {
    /// The answer with `parts`; see [`CardParts`].
    pub fn card(&self, parts: CardParts) -> Result<Value, serde_json::Error> {
        if parts.readme && parts.schemas {
            return serde_json::to_value(self);
        }
        let api_reference = match parts.schemas {
            true => serde_json::to_value(&self.api_reference)?,
            false => {
                let functions = self.api_reference.functions.iter().map(|f| Named {
                    name: &f.name,
                    description: f.description.as_deref(),
                });
                let triggers = self.api_reference.triggers.iter().map(|t| Named {
                    name: &t.name,
                    description: t.description.as_deref(),
                });
                serde_json::json!({
                    "functions": functions.collect::<Vec<_>>(),
                    "triggers": triggers.collect::<Vec<_>>(),
                })
            }
        };
        let mut card = serde_json::json!({
            "worker": self.worker,
            "api_reference": api_reference,
            "skills_tree": self.skills_tree,
        });
        if let (true, Some(readme)) = (parts.readme, &self.readme) {
            card["readme"] = Value::String(readme.clone());
        }
        Ok(card)
    }
}

/// One file of a published bundle.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct BundleFile {
    pub path: String,
    pub content: String,
}

/// A published skills bundle with contents, as a download receives it. Other fields (a
/// legacy `prompts` list) are ignored.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct SkillsBundle {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    pub skills: Vec<BundleFile>,
}

/// A list page: rows without a string `name`, or that do not read as a worker, are dropped;
/// pagination is defaulted when absent or unreadable. The body must be a JSON object.
pub fn parse_page(body: &Value) -> Result<WorkerPage, RegistryError> {
    let object = body.as_object().ok_or(RegistryError::Decode)?;
    let workers = object
        .get("workers")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .filter(|row| row.get("name").is_some_and(Value::is_string))
                .filter_map(|row| Worker::deserialize(row).ok())
                .collect()
        })
        .unwrap_or_default();
    let pagination = object
        .get("pagination")
        .and_then(|p| Pagination::deserialize(p).ok())
        .unwrap_or_default();
    Ok(WorkerPage {
        workers,
        pagination,
    })
}

/// The two legs of `info` merged. The detail record is the body's `worker` object, or the body
/// itself (the legacy flat shape); `readme`, `functions` and `triggers` are looked up there
/// first, then at the top of the body. A list that does not read as a whole is empty.
pub fn merge_info(requested: &str, detail_body: &Value, skills_body: &Value) -> WorkerInfo {
    let detail = detail_body
        .get("worker")
        .filter(|w| w.is_object())
        .unwrap_or(detail_body);
    let field = |key: &str| {
        detail
            .get(key)
            .filter(|v| !v.is_null())
            .or_else(|| detail_body.get(key).filter(|v| !v.is_null()))
    };
    let worker = Worker::deserialize(detail).unwrap_or_else(|_| Worker::named(requested));
    let readme = field("readme").and_then(Value::as_str).map(str::to_string);
    let functions = field("functions")
        .and_then(|f| Vec::<FunctionContract>::deserialize(f).ok())
        .unwrap_or_default();
    let triggers = field("triggers")
        .and_then(|t| Vec::<TriggerContract>::deserialize(t).ok())
        .unwrap_or_default();
    WorkerInfo {
        worker,
        readme,
        api_reference: ApiReference {
            functions,
            triggers,
        },
        skills_tree: skills_tree(skills_body),
    }
}

/// The skills leg without contents: entries without a string `path` (skills) or `name`
/// (prompts) are dropped.
fn skills_tree(body: &Value) -> SkillsTree {
    // Borrowed: the rows hold every file's content.
    let rows = |key: &str| {
        body.get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let text = |row: &Value, key: &str| row.get(key).and_then(Value::as_str).map(str::to_string);
    SkillsTree {
        skills: rows("skills")
            .iter()
            .filter_map(|row| text(row, "path"))
            .map(|path| SkillEntry { path })
            .collect(),
        prompts: rows("prompts")
            .iter()
            .filter_map(|row| {
                Some(PromptEntry {
                    name: text(row, "name")?,
                    description: text(row, "description"),
                })
            })
            .collect(),
    }
}

/// A bundle with contents: anything but `{ skills: [{ path, content }] }` (strings) is
/// undecodable.
pub fn parse_bundle(bytes: &[u8]) -> Result<SkillsBundle, RegistryError> {
    serde_json::from_slice(bytes).map_err(|_| RegistryError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_rows_without_a_name_or_unreadable_are_dropped() {
        let body = json!({
            "workers": [
                {"name": "resend", "version": "1.2.3", "author": {"name": "R", "verified": true}},
                {"description": "no name"},
                {"name": 7},
                {"name": "bad-config", "config": "not an object"},
                {"name": "nulls", "config": null, "dependencies": null, "total_downloads": null},
            ],
        });
        let page = parse_page(&body).expect("page");
        let names: Vec<&str> = page.workers.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["resend", "nulls"]);
        assert_eq!(page.pagination, Pagination::default());
        let resend = serde_json::to_value(&page.workers[0]).expect("json");
        assert_eq!(
            resend,
            json!({
                "name": "resend", "description": null, "type": null, "version": "1.2.3",
                "repo": null, "config": {}, "supported_targets": [], "total_downloads": 0,
                "dependencies": [], "author": {"name": "R", "pfp": null, "verified": true},
            }),
            "image is omitted when null, every other field present"
        );
    }

    #[test]
    fn pagination_is_read_or_defaulted() {
        let page = parse_page(&json!({
            "workers": [],
            "pagination": {"next_cursor": "n", "has_more": true, "page_size": 20},
        }))
        .expect("page");
        assert_eq!(
            page.pagination,
            Pagination {
                next_cursor: Some("n".into()),
                has_more: true,
                page_size: 20
            }
        );
        let page = parse_page(&json!({"pagination": "junk"})).expect("page");
        assert!(page.workers.is_empty());
        assert_eq!(page.pagination, Pagination::default());
        assert_eq!(parse_page(&json!([1])), Err(RegistryError::Decode));
    }

    #[test]
    fn info_reads_the_envelope_and_the_flat_legacy_shape() {
        let skills = json!({
            "skills": [{"path": "index.md", "content": "x"}, {"content": "no path"}],
            "prompts": [{"name": "p", "description": "d"}, {"description": "no name"}],
        });
        let envelope = json!({
            "worker": {"name": "w", "version": "1.0.0", "readme": "# W"},
            "functions": [{"name": "w::f", "metadata": {"internal": true}}],
            "triggers": [{"name": "w::t"}],
        });
        let info = merge_info("w", &envelope, &skills);
        assert_eq!(info.worker.version.as_deref(), Some("1.0.0"));
        assert_eq!(info.readme.as_deref(), Some("# W"));
        assert_eq!(info.api_reference.functions.len(), 1);
        assert!(info.api_reference.functions[0].is_internal());
        assert_eq!(info.api_reference.triggers.len(), 1);
        assert_eq!(
            info.skills_tree.skills,
            vec![SkillEntry {
                path: "index.md".into()
            }]
        );
        assert_eq!(info.skills_tree.prompts.len(), 1);

        let flat = json!({"name": "w", "readme": "flat", "functions": "junk"});
        let info = merge_info("w", &flat, &json!({}));
        assert_eq!(info.readme.as_deref(), Some("flat"));
        assert!(info.api_reference.functions.is_empty());
        let json = serde_json::to_value(&info).expect("json");
        assert_eq!(json["skills_tree"], json!({"skills": [], "prompts": []}));

        let info = merge_info("asked", &json!({"worker": {"name": 3}}), &json!({}));
        assert_eq!(info.worker, Worker::named("asked"));
        let json = serde_json::to_value(&info).expect("json");
        assert!(
            json.get("readme").is_none(),
            "readme is omitted when absent"
        );
    }

    #[test]
    fn the_card_leaves_out_what_was_not_asked_for() {
        let envelope = json!({
            "worker": {"name": "w", "readme": "# W"},
            "functions": [{"name": "w::f", "description": "Does f.", "request_schema": {"type": "object"}, "metadata": {"internal": true}}],
            "triggers": [{"name": "w::t", "invocation_schema": {"type": "object"}}],
        });
        let info = merge_info("w", &envelope, &json!({"skills": [{"path": "index.md"}]}));
        let full = serde_json::to_value(&info).expect("json");
        let card = |readme, schemas| info.card(CardParts { readme, schemas }).expect("card");
        assert_eq!(card(true, true), full);
        let compact = card(false, false);
        assert_eq!(
            compact["api_reference"],
            json!({
                "functions": [{"name": "w::f", "description": "Does f."}],
                "triggers": [{"name": "w::t", "description": null}],
            })
        );
        assert!(compact.get("readme").is_none());
        assert_eq!(compact["worker"], full["worker"]);
        assert_eq!(compact["skills_tree"], full["skills_tree"]);
        assert_eq!(card(true, false)["readme"], "# W");
        assert_eq!(card(false, true)["api_reference"], full["api_reference"]);
        assert!(card(false, true).get("readme").is_none());
    }

    #[test]
    fn bundles_must_carry_paths_and_contents() {
        let bundle =
            parse_bundle(br#"{"name":"w","skills":[{"path":"a.md","content":"A"}],"prompts":[1]}"#)
                .expect("bundle");
        assert_eq!(bundle.skills.len(), 1);
        for bad in [
            &br#"{"skills":[{"path":"a.md"}]}"#[..],
            br#"{"skills":[{"path":1,"content":"x"}]}"#,
            br#"{"name":"w"}"#,
            b"<html>",
        ] {
            assert_eq!(parse_bundle(bad), Err(RegistryError::Decode));
        }
    }
}
