//! The worker's surface on the bus: every function id with its description and JSON Schemas,
//! and the trigger types. `--manifest` prints it; registration reads it.

use serde_json::{Value, json};

use crate::directory::{ReadFunction, WriteFunction};
use crate::download::DownloadFunction;
use crate::events::Family;
use crate::registry::functions::{INFO as REGISTRY_INFO, LIST as REGISTRY_LIST};

/// The internal function the `worker` trigger calls when a worker is added (contract §3.10).
pub const ON_WORKER_ADDED: &str = "directory::__on_worker_added";

/// The console page's assets (internal; see `console.rs`).
pub const UI_CONTENT: &str = "iii-directory::ui-content";

/// The internal functions of function search, by id.
pub const ON_FUNCTIONS_CHANGE: &str = "directory::on-functions-change";
pub const PRE_GENERATE: &str = "directory::pre-generate";
pub const HINT_PREVIEW: &str = "directory::hint-preview";

/// What a registered function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    Read(ReadFunction),
    Write(WriteFunction),
    Status,
    EngineFunctionInfo,
    OnConfigChange,
    SearchFunctions,
    OnFunctionsChange,
    PreGenerate,
    HintPreview,
    Download(DownloadFunction),
    RegistryList,
    RegistryInfo,
    OnWorkerAdded,
    /// The console page's assets (`console.rs`).
    UiContent,
}

/// One function of the surface.
pub struct Function {
    pub id: &'static str,
    pub handler: Handler,
    pub description: &'static str,
    pub request: Value,
    pub response: Value,
    /// Internal functions carry `metadata.internal = true` (hidden from search and listings).
    pub internal: bool,
}

impl Function {
    /// The metadata registered with the function: internal functions carry `internal: true`
    /// (hidden from search and listings); the pre-generate hook, which runs on every
    /// generation, is also kept out of traces.
    pub fn metadata(&self) -> Option<Value> {
        match (self.internal, self.handler) {
            (true, Handler::PreGenerate) => Some(json!({ "internal": true, "trace_hidden": true })),
            (true, _) => Some(json!({ "internal": true })),
            (false, _) => None,
        }
    }
}

/// The JSON Schema dialect, named once at the root of each registered schema.
const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
    })
}

/// `schema` as registered: its dialect named at its root. Schemas stay small, without nested
/// `$schema` keys or repeated parts: iii-sdk 0.23 copies a function's whole registration,
/// schemas included, on every call, on the thread that reads the engine's socket (a third of
/// the cost of the polls a UI makes most, `{if_revision}` on a list, issue 15).
fn rooted(mut schema: Value) -> Value {
    if let Some(object) = schema.as_object_mut() {
        object.insert("$schema".into(), json!(DRAFT_07));
    }
    schema
}

fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn nullable_string() -> Value {
    json!({ "type": ["string", "null"] })
}

fn boolean(description: &str) -> Value {
    json!({ "type": "boolean", "description": description })
}

fn integer() -> Value {
    json!({ "type": "integer", "minimum": 0 })
}

fn array_of(items: Value) -> Value {
    json!({ "type": "array", "items": items })
}

/// The `connection` object of `directory::index::status` (`connection.rs`, `setup.rs`).
fn connection_status() -> Value {
    let nullable = |kind: &str| json!({ "type": [kind, "null"] });
    let counts = object(
        json!({ "done": integer(), "replayed": integer(), "skipped": integer(), "failed": integer() }),
        &["done", "replayed", "skipped", "failed"],
    );
    let step = object(
        json!({
            "name": string("setup step, e.g. configuration.register"),
            "outcome": { "type": ["string", "null"], "enum": ["done", "replayed", "skipped", "failed", null], "description": "on the latest run; null if it has not run there" },
            "detail": nullable_string(),
            "duration_ms": nullable("integer"),
            "counts": counts,
        }),
        &["name", "outcome", "detail", "duration_ms", "counts"],
    );
    let setup = object(
        json!({
            "runs": integer(),
            "connection": nullable("integer"),
            "state": { "type": "string", "enum": ["pending", "running", "done", "interrupted"] },
            "started_at": nullable_string(),
            "finished_at": nullable_string(),
            "duration_ms": nullable("integer"),
            "steps": array_of(step),
        }),
        &[
            "runs",
            "connection",
            "state",
            "started_at",
            "finished_at",
            "duration_ms",
            "steps",
        ],
    );
    let mut connection = object(
        json!({
            "state": { "type": "string", "enum": ["connecting", "connected", "reconnecting", "disconnected", "failed"] },
            "url": string("the engine's WebSocket address"),
            "connected_since": { "type": ["string", "null"], "description": "RFC 3339 UTC start of the current connection; null when not connected" },
            "connections": integer(),
            "reconnections": integer(),
            "last_error": {
                "type": ["object", "null"],
                "properties": { "message": string("what failed"), "at": string("RFC 3339 UTC") },
                "required": ["message", "at"],
            },
            "detection": { "type": "string", "enum": ["sdk_events", "state_polling"] },
            "setup": setup,
        }),
        &[
            "state",
            "url",
            "connected_since",
            "connections",
            "reconnections",
            "last_error",
            "detection",
            "setup",
        ],
    );
    connection["type"] = json!(["object", "null"]);
    connection
}

fn candidate() -> Value {
    object(
        json!({ "function_id": string("function id"), "description": string("first sentence of its description") }),
        &["function_id", "description"],
    )
}

fn skill_row() -> Value {
    object(
        json!({
            "id": string("skill id; `<ns>/index` is shown as `<ns>`"),
            "title": string("frontmatter title, then name, then the first H1, then the id"),
            "type": nullable_string(),
            "function_id": nullable_string(),
            "disable_model_invocation": boolean("frontmatter disable-model-invocation"),
            "description": string("frontmatter description, else the first paragraph"),
            "bytes": integer(),
            "modified_at": string("RFC 3339 UTC; empty for bundled content"),
            "compatibility": string("Agent Skills compatibility, when the file has one"),
        }),
        &[
            "id",
            "title",
            "type",
            "function_id",
            "disable_model_invocation",
            "description",
            "bytes",
            "modified_at",
        ],
    )
}

fn skill_written() -> Value {
    object(
        json!({
            "id": string("skill id"), "title": string("title of the new content"),
            "type": nullable_string(), "function_id": nullable_string(),
            "bytes": integer(), "modified_at": string("RFC 3339 UTC"),
        }),
        &["id", "title", "type", "function_id", "bytes", "modified_at"],
    )
}

fn skill_id_request() -> Value {
    object(
        json!({ "id": string("skill id, `iii://<id>`, or a path ending in .md") }),
        &["id"],
    )
}

fn content_request(key: &str, what: &str) -> Value {
    object(
        json!({ key: string(what), "content": string("the whole file, frontmatter included (at most 262144 bytes)") }),
        &[key, "content"],
    )
}

fn prompt_written() -> Value {
    object(
        json!({ "name": string("system prompt name"), "description": string("frontmatter description"), "bytes": integer(), "modified_at": string("RFC 3339 UTC") }),
        &["name", "description", "bytes", "modified_at"],
    )
}

fn agent_written() -> Value {
    object(
        json!({ "id": string("agent id"), "name": string("display name"), "description": string("description"), "logo": nullable_string(), "bytes": integer(), "modified_at": string("RFC 3339 UTC") }),
        &["id", "name", "description", "logo", "bytes", "modified_at"],
    )
}

fn agent_fields() -> Value {
    json!({
        "id": string("agent id (the file stem)"),
        "name": string("display name"),
        "description": string("description"),
        "logo": nullable_string(),
        "model": nullable_string(),
        "reasoning_effort": nullable_string(),
        "icon": nullable_string(),
        "color": nullable_string(),
        "extends": nullable_string(),
        "builtin": boolean("present (true) on bundled profiles only"),
        "inheritance_error": string("D415 text when the extends chain does not resolve"),
        "modified_at": string("RFC 3339 UTC; empty for bundled profiles"),
    })
}

/// A `list` request: the family's own fields plus the revision fields (beyond the contract).
fn list_request(mut properties: Value) -> Value {
    properties["if_revision"] = json!({ "type": "integer", "minimum": 0, "description": "a revision from an earlier answer: { unchanged, revision } while it is current, else the whole list with revision" });
    properties["since_revision"] = json!({ "type": "integer", "minimum": 0, "description": "a revision from an earlier answer (0 on the first call): { unchanged, revision }, { revision, changed, removed } (what changed since, filters applied), or the whole list with revision and full: true" });
    object(properties, &[])
}

/// A `list` response: the whole list (with `revision` and `full` when asked with a revision),
/// `{unchanged, revision}`, or a delta `{revision, changed, removed}`.
fn list_response(field: &str, row: Value) -> Value {
    let rows = || array_of(json!({ "$ref": "#/definitions/row" }));
    let mut whole = json!({ "revision": integer(), "full": { "const": true } });
    whole[field] = rows();
    json!({
        "definitions": { "row": row },
        "oneOf": [
            object(whole, &[field]),
            object(json!({ "unchanged": { "const": true }, "revision": integer() }), &["unchanged", "revision"]),
            object(
                json!({
                    "revision": integer(),
                    "changed": rows(),
                    "removed": array_of(json!({ "type": "string", "description": "an id to drop" })),
                }),
                &["revision", "changed", "removed"],
            ),
        ],
    })
}

/// Every function this worker registers.
pub fn functions() -> Vec<Function> {
    use Handler::*;
    let read = |f: ReadFunction| Read(f);
    let write = |f: WriteFunction| Write(f);
    let mut agent_get = agent_fields();
    agent_get["system_prompt"] =
        string("each ancestor's body root-first, then this profile's body");
    agent_get["skills"] = array_of(json!({ "type": "string" }));
    agent_get["unknown_skills"] = array_of(json!({ "type": "string" }));
    agent_get["raw"] = string("the profile's whole file (with raw: true)");
    let mut agent_row = agent_fields();
    agent_row["skill_count"] = json!({ "type": ["integer", "null"] });
    vec![
        Function {
            id: ReadFunction::SkillsList.id(),
            handler: read(ReadFunction::SkillsList),
            description: "List skills as rows { id, title, type, function_id, disable_model_invocation, description, bytes, modified_at }, sorted by id. Filters: prefix (on the on-disk id), type, search (id, title, description). Pass since_revision (0 at first) to get only what changed since: { unchanged, revision }, { revision, changed, removed }, or the whole list with full: true.",
            request: list_request(json!({
                "search": string("case-insensitive substring of id, title or description"),
                "prefix": string("on-disk id prefix, e.g. `resend/`"),
                "type": string("exact frontmatter type, e.g. `index`"),
                "include_description": boolean("false blanks descriptions (default true)"),
            })),
            response: list_response("skills", skill_row()),
            internal: false,
        },
        Function {
            id: ReadFunction::SkillsGet.id(),
            handler: read(ReadFunction::SkillsGet),
            description: "Read one skill by id (also iii://<id> or <id>.md; a bare namespace reads its index): { id, title, type, function_id, disable_model_invocation, path, body, modified_at }, plus the whole file as raw with raw: true.",
            request: object(
                json!({ "id": string("skill id"), "raw": boolean("also return the whole file") }),
                &["id"],
            ),
            response: object(
                json!({
                    "id": string("skill id"), "title": string("title"), "type": nullable_string(),
                    "function_id": nullable_string(), "disable_model_invocation": boolean("flag"),
                    "path": string("absolute path of the file; empty for bundled skills"),
                    "body": string("markdown after the frontmatter"), "modified_at": string("RFC 3339 UTC"),
                    "raw": string("the whole file (with raw: true)"),
                    "license": string("Agent Skills license, when the file has one"),
                    "compatibility": string("Agent Skills compatibility, when the file has one"),
                    "metadata": json!({ "type": "object", "additionalProperties": { "type": "string" }, "description": "Agent Skills metadata, its string entries, when the file has it" }),
                    "allowed_tools": string("Agent Skills allowed-tools, space-separated, when the file has it"),
                    "problems": array_of(object(
                        json!({ "code": string("S100..S171"), "severity": string("error or warning"), "message": string("what breaks the rule") }),
                        &["code", "severity", "message"],
                    )),
                }),
                &[
                    "id",
                    "title",
                    "type",
                    "function_id",
                    "disable_model_invocation",
                    "path",
                    "body",
                    "modified_at",
                ],
            ),
            internal: false,
        },
        Function {
            id: ReadFunction::SkillsIndex.id(),
            handler: read(ReadFunction::SkillsIndex),
            description: "Render a short markdown index with one entry per installed worker overview (skills with type: index): heading, first paragraph, and a pointer to read the full doc.",
            request: object(json!({}), &[]),
            response: object(
                json!({ "body": string("markdown"), "workers_count": integer() }),
                &["body", "workers_count"],
            ),
            internal: false,
        },
        Function {
            id: WriteFunction::SkillsCreate.id(),
            handler: write(WriteFunction::SkillsCreate),
            description: "Create a new skill file at <skills_folder>/<id>.md from full-file content. Never overwrites; fires directory::skills::on-change { op: create }.",
            request: content_request("id", "new skill id, `[a-z0-9_-]{1,64}` per `/` segment"),
            response: skill_written(),
            internal: false,
        },
        Function {
            id: WriteFunction::SkillsUpdate.id(),
            handler: write(WriteFunction::SkillsUpdate),
            description: "Overwrite an existing skill file with full-file content (the edited raw from get). Never creates; read-only agents skills are refused (D116). Fires on-change { op: update }.",
            request: content_request("id", "existing skill id"),
            response: skill_written(),
            internal: false,
        },
        Function {
            id: WriteFunction::SkillsDelete.id(),
            handler: write(WriteFunction::SkillsDelete),
            description: "Delete an existing skill file and the folders it leaves empty; returns the resolved id. Fires on-change { op: delete }.",
            request: skill_id_request(),
            response: object(json!({ "id": string("the deleted on-disk id") }), &["id"]),
            internal: false,
        },
        Function {
            id: ReadFunction::SystemPromptsList.id(),
            handler: read(ReadFunction::SystemPromptsList),
            description: "List system prompts: { prompts: [{ name, description, modified_at, builtin? }] }, bundled ones included unless a file shadows them. Pass since_revision (0 at first) to get only what changed since.",
            request: list_request(json!({})),
            response: list_response(
                "prompts",
                object(json!({ "name": string("name"), "description": string("description"), "modified_at": string("RFC 3339 UTC"), "builtin": boolean("bundled") }), &["name", "description", "modified_at"]),
            ),
            internal: false,
        },
        Function {
            id: ReadFunction::SystemPromptsGet.id(),
            handler: read(ReadFunction::SystemPromptsGet),
            description: "Read one system prompt: { name, description, body, modified_at }, plus raw with raw: true. iii-runtime and iii-minimal are bundled.",
            request: object(
                json!({ "name": string("system prompt name"), "raw": boolean("also return the whole file") }),
                &["name"],
            ),
            response: object(
                json!({ "name": string("name"), "description": string("description"), "body": string("the prompt"), "modified_at": string("RFC 3339 UTC"), "builtin": boolean("bundled"), "raw": string("whole file") }),
                &["name", "description", "body", "modified_at"],
            ),
            internal: false,
        },
        Function {
            id: WriteFunction::SystemPromptsCreate.id(),
            handler: write(WriteFunction::SystemPromptsCreate),
            description: "Create <skills_folder>/system-prompts/<name>.md from full-file content (frontmatter with a non-empty description). Fires directory::system-prompts::on-change { op: create }.",
            request: content_request("name", "new system prompt name"),
            response: prompt_written(),
            internal: false,
        },
        Function {
            id: WriteFunction::SystemPromptsUpdate.id(),
            handler: write(WriteFunction::SystemPromptsUpdate),
            description: "Overwrite an existing system prompt file (or shadow a bundled one) with full-file content; returns its effective name. Fires on-change { op: update }.",
            request: content_request("name", "existing system prompt name"),
            response: prompt_written(),
            internal: false,
        },
        Function {
            id: WriteFunction::SystemPromptsDelete.id(),
            handler: write(WriteFunction::SystemPromptsDelete),
            description: "Delete an existing system prompt file. Fires on-change { op: delete }.",
            request: object(json!({ "name": string("system prompt name") }), &["name"]),
            response: object(json!({ "name": string("name") }), &["name"]),
            internal: false,
        },
        Function {
            id: ReadFunction::AgentsList.id(),
            handler: read(ReadFunction::AgentsList),
            description: "List agent profiles (files in agents_folder plus the bundled iii and iii-minimal) with skill_count, model and reasoning_effort resolved through extends. Pass since_revision (0 at first) to get only what changed since.",
            request: list_request(json!({})),
            response: list_response(
                "agents",
                object(agent_row, &["id", "name", "description", "modified_at"]),
            ),
            internal: false,
        },
        Function {
            id: ReadFunction::AgentsGet.id(),
            handler: read(ReadFunction::AgentsGet),
            description: "Read one agent profile with its resolved system_prompt (ancestors root-first), inherited skills, unknown_skills, model and reasoning_effort; raw with raw: true.",
            request: object(
                json!({ "id": string("agent id"), "raw": boolean("also return the whole file") }),
                &["id"],
            ),
            response: object(
                agent_get,
                &[
                    "id",
                    "name",
                    "description",
                    "system_prompt",
                    "skills",
                    "unknown_skills",
                    "modified_at",
                ],
            ),
            internal: false,
        },
        Function {
            id: WriteFunction::AgentsCreate.id(),
            handler: write(WriteFunction::AgentsCreate),
            description: "Create <agents_folder>/<id>.md from full-file content (frontmatter with a non-empty name). Creating a bundled id shadows it. Fires directory::agents::on-change { op: create }.",
            request: content_request("id", "new agent id"),
            response: agent_written(),
            internal: false,
        },
        Function {
            id: WriteFunction::AgentsUpdate.id(),
            handler: write(WriteFunction::AgentsUpdate),
            description: "Overwrite an existing agent profile with full-file content; updating a bundled profile writes the local file that shadows it. Fires on-change { op: update }.",
            request: content_request("id", "existing agent id"),
            response: agent_written(),
            internal: false,
        },
        Function {
            id: WriteFunction::AgentsDelete.id(),
            handler: write(WriteFunction::AgentsDelete),
            description: "Delete an agent profile file; a bundled profile comes back. Fires on-change { op: delete }.",
            request: object(json!({ "id": string("agent id") }), &["id"]),
            response: object(json!({ "id": string("agent id") }), &["id"]),
            internal: false,
        },
        Function {
            id: "directory::index::status",
            handler: Status,
            description: "Index health: revision, rows per family, every skipped file with its reason, the last reconcile, the file watcher's state, the engine connection (reconnections, last error, what was set up again), and the configuration values refused at boot or live.",
            request: object(json!({}), &[]),
            response: object(
                json!({
                    "revision": integer(), "index_path": string("index file"), "files": integer(),
                    "counts": object(json!({ "skills": integer(), "system_prompts": integer(), "agents": integer() }), &["skills", "system_prompts", "agents"]),
                    "skipped": array_of(object(json!({ "root": string("configuration key"), "path": string("absolute path"), "reason": string("why") }), &["root", "path", "reason"])),
                    "last_reconcile": { "type": ["object", "null"] },
                    "watcher": { "type": ["object", "null"] },
                    "connection": connection_status(),
                    "configuration": object(
                        json!({ "refused": array_of(object(json!({ "at": string("RFC 3339 time"), "what": string("the value refused, and why") }), &["at", "what"])) }),
                        &["refused"],
                    ),
                }),
                &["revision", "counts", "skipped"],
            ),
            internal: false,
        },
        Function {
            id: "directory::engine::functions::info",
            handler: EngineFunctionInfo,
            description: "Thin proxy to engine::functions::info for one function_id, for callers limited to the directory:: namespace.",
            request: object(
                json!({ "function_id": string("function id, e.g. mailer::send") }),
                &["function_id"],
            ),
            response: object(
                json!({
                    "function_id": string("id"), "worker_name": nullable_string(), "description": nullable_string(),
                    "request_schema": { "type": ["object", "null"] }, "response_schema": { "type": ["object", "null"] },
                    "metadata": { "type": ["object", "null"] },
                    "registered_triggers": array_of(object(json!({ "id": string("id"), "trigger_type": string("type"), "config": { "type": "object" } }), &["id", "trigger_type"])),
                }),
                &["function_id", "registered_triggers"],
            ),
            internal: false,
        },
        Function {
            id: "directory::on-config-change",
            handler: OnConfigChange,
            description: "Internal: re-reads the iii-directory configuration after configuration:updated.",
            request: object(json!({}), &[]),
            response: object(json!({ "ok": { "type": "boolean" } }), &["ok"]),
            internal: true,
        },
        Function {
            id: crate::search::catalog::SEARCH_FUNCTION_ID,
            handler: SearchFunctions,
            description: "Search the engine's functions for one to six external capabilities (short English phrases); returns compact function-id candidates grouped by worker, and registry workers that would match but are not installed.",
            request: object(
                json!({
                    "capabilities": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 6,
                        "items": { "type": "string", "minLength": 1 },
                        "description": "One entry per unmet external capability, in English (keep proper names, URLs and function ids as written). Requests to summarize provided text or content are ignored.",
                    },
                }),
                &["capabilities"],
            ),
            response: object(
                json!({
                    "guidance": string("what to do with the candidates"),
                    "workers": array_of(object(
                        json!({ "namespace": string("worker"), "functions": array_of(candidate()) }),
                        &["namespace", "functions"],
                    )),
                    "installable": array_of(object(
                        json!({
                            "name": string("registry worker"), "version": string("version"),
                            "description": string("description"), "functions": array_of(candidate()),
                            "install": object(
                                json!({ "function": { "const": "compose::add" }, "payload": object(json!({ "worker": string("registry worker") }), &["worker"]) }),
                                &["function", "payload"],
                            ),
                        }),
                        &["name", "version", "description", "functions", "install"],
                    )),
                    "latency_ms": { "type": "number" },
                }),
                &["guidance", "workers", "latency_ms"],
            ),
            internal: false,
        },
        Function {
            id: ON_FUNCTIONS_CHANGE,
            handler: OnFunctionsChange,
            description: "Internal: refreshes the function-search catalog when the engine's functions change (engine::functions-available).",
            request: object(
                json!({ "event": string("functions_changed"), "functions": array_of(json!({ "type": "object" })) }),
                &[],
            ),
            response: object(json!({ "ok": { "type": "boolean" } }), &["ok"]),
            internal: true,
        },
        Function {
            id: PRE_GENERATE,
            handler: PreGenerate,
            description: "Internal: harness pre-generate hook that appends the function-search hint to a generation's system prompt, at most once per turn and only when its gates allow.",
            request: object(
                json!({
                    "session_id": string("harness session"),
                    "turn_id": string("turn"),
                    "step": integer(),
                    "depth": integer(),
                    "generate": object(
                        json!({
                            "system_prompt": string("the generation's system prompt"),
                            "messages": array_of(json!({ "type": "object" })),
                            "functions_generation": integer(),
                            "tools": array_of(object(json!({ "name": string("function id"), "description": string("description"), "parameters": { "type": "object" } }), &["name"])),
                            "expose": string("agent_trigger (default), native, or another mode"),
                        }),
                        &["system_prompt", "messages", "tools"],
                    ),
                }),
                &["session_id", "turn_id", "step", "generate"],
            ),
            response: object(
                json!({
                    "decision": { "const": "continue" },
                    "mutations": object(json!({ "system_prompt": string("the prompt with the hint appended") }), &["system_prompt"]),
                    "annotations": { "type": "object" },
                }),
                &["decision", "annotations"],
            ),
            internal: true,
        },
        Function {
            id: HINT_PREVIEW,
            handler: HintPreview,
            description: "Internal: the exact function-search hint per exposure mode (agent_trigger, native), as the configuration UI shows it.",
            request: object(json!({}), &[]),
            response: object(
                json!({ "agent_trigger": string("hint for agent_trigger exposure"), "native": string("hint for native exposure") }),
                &["agent_trigger", "native"],
            ),
            internal: true,
        },
    ]
    .into_iter()
    .chain(download_functions())
    .map(|f| Function {
        request: rooted(f.request),
        response: rooted(f.response),
        ..f
    })
    .collect()
}

/// `{namespace, skills_written, system_prompts_written, agents_written, source}`.
fn download_response() -> Value {
    let names =
        |what: &str| json!({ "type": "array", "items": { "type": "string" }, "description": what });
    object(
        json!({
            "namespace": string("the skill name (repo) or worker name (registry) the files landed under"),
            "skills_written": names("paths written under <skills_folder>/<namespace>/, payload files included"),
            "system_prompts_written": names("names of the system prompts written"),
            "agents_written": names("ids of the agent profiles written to agents_folder"),
            "source": object(
                json!({
                    "kind": { "enum": ["repo", "registry"] },
                    "repo": string("repo URL"), "skill": string("skill folder"), "branch": string("branch cloned"),
                    "worker": string("registry worker"), "version": string("version asked for"), "tag": string("tag asked for"),
                }),
                &["kind"],
            ),
        }),
        &[
            "namespace",
            "skills_written",
            "system_prompts_written",
            "agents_written",
            "source",
        ],
    )
}

fn repo_fields() -> Value {
    json!({
        "repo": string("https://, ssh:// or git@ URL of a git repository"),
        "skill": string("folder name under the repository's skills/"),
        "branch": string("branch to clone (default main)"),
    })
}

fn registry_fields(key: &str, what: &str) -> Value {
    json!({
        key: string(what),
        "version": string("exact published version (semver); not with tag"),
        "tag": string("release tag, e.g. latest (the default); not with version"),
    })
}

fn registry_worker() -> Value {
    json!({ "type": "object", "required": ["name"], "properties": {
        "name": string("worker name"), "description": nullable_string(), "type": nullable_string(),
        "version": nullable_string(), "repo": nullable_string(), "config": { "type": "object" },
        "supported_targets": array_of(json!({ "type": "string" })), "image": string("container image"),
        "total_downloads": integer(), "dependencies": array_of(json!({ "type": "object" })),
        "author": { "type": ["object", "null"] },
    }})
}

/// The downloads, the registry proxy and the worker-added hook.
fn download_functions() -> Vec<Function> {
    use Handler::*;
    let mut alias_fields = repo_fields();
    if let (Some(alias), Value::Object(registry)) = (
        alias_fields.as_object_mut(),
        registry_fields("worker", "registry worker name"),
    ) {
        alias.extend(registry);
    }
    vec![
        Function {
            id: DownloadFunction::Download.id(),
            handler: Download(DownloadFunction::Download),
            description: "Download a skill bundle from either source: {repo, skill, branch?} (branch defaults to main) or {worker, version? | tag?} (tag defaults to latest). Checked whole, landed all or nothing; fires the on-change triggers { op: download }. Prefer the explicit forms.",
            request: object(alias_fields, &[]),
            response: download_response(),
            internal: false,
        },
        Function {
            id: DownloadFunction::FromRepo.id(),
            handler: Download(DownloadFunction::FromRepo),
            description: "Copy skills/<skill>/ of a git repository (shallow clone of one branch) into <skills_folder>/<skill>/. Paths under prompts/ and agents/ are ignored; re-pulls overwrite file by file and keep other files.",
            request: object(repo_fields(), &["repo", "skill"]),
            response: download_response(),
            internal: false,
        },
        Function {
            id: DownloadFunction::FromRegistry.id(),
            handler: Download(DownloadFunction::FromRegistry),
            description: "Install a published worker's skills bundle from the workers registry into <skills_folder>/<worker>/; exact agents/<id>.md entries become agent profiles in agents_folder.",
            request: object(
                registry_fields("worker", "registry worker name"),
                &["worker"],
            ),
            response: download_response(),
            internal: false,
        },
        Function {
            id: REGISTRY_LIST,
            handler: RegistryList,
            description: "Browse or search workers published in the workers registry: { workers, pagination: { next_cursor, has_more, page_size } }. Free-text search; opaque cursor for the next page.",
            request: object(
                json!({ "search": string("free text matched by the registry"), "cursor": string("next_cursor of the previous page") }),
                &[],
            ),
            response: object(
                json!({
                    "workers": array_of(registry_worker()),
                    "pagination": object(json!({ "next_cursor": nullable_string(), "has_more": boolean("more pages"), "page_size": integer() }), &["next_cursor", "has_more", "page_size"]),
                }),
                &["workers", "pagination"],
            ),
            internal: false,
        },
        Function {
            id: REGISTRY_INFO,
            handler: RegistryInfo,
            description: "One registry worker in full: { worker, readme, api_reference: { functions, triggers }, skills_tree: { skills, prompts } }, at a version or tag (default latest).",
            request: object(registry_fields("name", "registry worker name"), &["name"]),
            response: object(
                json!({
                    "worker": registry_worker(),
                    "readme": string("the worker's README (markdown)"),
                    "api_reference": object(json!({ "functions": array_of(json!({ "type": "object" })), "triggers": array_of(json!({ "type": "object" })) }), &["functions", "triggers"]),
                    "skills_tree": object(json!({ "skills": array_of(json!({ "type": "object" })), "prompts": array_of(json!({ "type": "object" })) }), &["skills", "prompts"]),
                }),
                &["worker", "api_reference", "skills_tree"],
            ),
            internal: false,
        },
        Function {
            id: ON_WORKER_ADDED,
            handler: OnWorkerAdded,
            description: "Internal: downloads an added worker's skills bundle (tag latest) when auto_download is on; always answers { ok: true }.",
            request: object(json!({ "worker": string("the worker just added") }), &[]),
            response: object(json!({ "ok": { "type": "boolean" } }), &["ok"]),
            internal: true,
        },
        Function {
            id: UI_CONTENT,
            handler: UiContent,
            description: "Internal: the console page's assets for the iii console's injectable UI: { path } (iii-directory/page.js or iii-directory/styles.css) -> { content, content_type }.",
            request: object(
                json!({ "path": string("asset path, e.g. iii-directory/page.js") }),
                &["path"],
            ),
            response: object(
                json!({ "content": string("the asset's text"), "content_type": string("text/javascript or text/css, charset utf-8") }),
                &["content", "content_type"],
            ),
            internal: true,
        },
    ]
}

/// The trigger types this worker provides, with the payload they deliver.
pub fn trigger_types() -> Vec<(Family, &'static str, Value)> {
    // Every family has the same `download` and `external` payloads; only an edit's differs.
    let payload = |edit: Value, edit_keys: &[&str]| {
        json!({ "oneOf": [
            object(edit, edit_keys),
            object(json!({ "op": { "const": "download" }, "namespace": { "type": "string" }, "source": { "enum": ["repo", "registry"] } }), &["op", "namespace", "source"]),
            object(json!({ "op": { "const": "external" } }), &["op"]),
        ]})
    };
    let edit_op = json!({ "enum": ["create", "update", "delete"] });
    let named = payload(
        json!({ "op": edit_op, "name": { "type": "string" } }),
        &["op", "name"],
    );
    vec![
        (
            Family::Skills,
            "Fires after a skill is created, updated or deleted through directory::skills::*, after a download that wrote skills, or when skills change on disk ({ op: external }).",
            payload(
                json!({ "op": edit_op, "namespace": { "type": "string" }, "id": { "type": "string" } }),
                &["op", "namespace", "id"],
            ),
        ),
        (
            Family::SystemPrompts,
            "Fires after a system prompt is created, updated or deleted through directory::system-prompts::*, after a download that wrote system prompts, or when they change on disk ({ op: external }).",
            named.clone(),
        ),
        (
            Family::Agents,
            "Fires after an agent profile is created, updated or deleted through directory::agents::*, after a download that wrote agent profiles, or when they change on disk ({ op: external }).",
            named,
        ),
    ]
}

/// The whole surface as JSON, for `--manifest`.
pub fn manifest() -> Value {
    let functions: Vec<Value> = functions()
        .into_iter()
        .map(|f| {
            json!({
                "id": f.id, "description": f.description, "request_format": f.request,
                "response_format": f.response, "internal": f.internal, "metadata": f.metadata(),
            })
        })
        .collect();
    let triggers: Vec<Value> = trigger_types()
        .into_iter()
        .map(|(family, description, _)| {
            json!({ "id": family.trigger_type(), "description": description, "call_request_format": registered_payload(family) })
        })
        .collect();
    json!({ "name": "iii-directory", "version": env!("CARGO_PKG_VERSION"), "functions": functions, "trigger_types": triggers })
}

/// The payload schema of a family's trigger type, as a type the SDK can register (it takes
/// `call_request_format` only from a `JsonSchema` type).
pub struct Payload<const FAMILY: u8>;

/// `Payload` parameters, one per family.
pub const SKILLS: u8 = 0;
pub const SYSTEM_PROMPTS: u8 = 1;
pub const AGENTS: u8 = 2;

impl<const FAMILY: u8> schemars::JsonSchema for Payload<FAMILY> {
    fn schema_name() -> String {
        format!("on-change-payload-{FAMILY}")
    }

    fn json_schema(_: &mut schemars::r#gen::SchemaGenerator) -> schemars::schema::Schema {
        let family = match FAMILY {
            SKILLS => Family::Skills,
            SYSTEM_PROMPTS => Family::SystemPrompts,
            _ => Family::Agents,
        };
        let payload = trigger_types()
            .into_iter()
            .find(|(f, _, _)| *f == family)
            .map(|(_, _, payload)| payload)
            .unwrap_or_default();
        serde_json::from_value(payload).expect("the payload schemas are valid JSON Schema")
    }
}

/// A family's payload schema exactly as the SDK registers it (draft-07 root schema).
pub fn registered_payload(family: Family) -> Value {
    fn root<T: schemars::JsonSchema>() -> Value {
        let schema = schemars::r#gen::SchemaSettings::draft07()
            .into_generator()
            .into_root_schema_for::<T>();
        serde_json::to_value(schema).unwrap_or_default()
    }
    match family {
        Family::Skills => root::<Payload<SKILLS>>(),
        Family::SystemPrompts => root::<Payload<SYSTEM_PROMPTS>>(),
        Family::Agents => root::<Payload<AGENTS>>(),
    }
}
