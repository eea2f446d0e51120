//! The worker's surface on the bus: every function id with its description and JSON Schemas,
//! and the trigger types. `--manifest` prints it; registration reads it.

use serde_json::{Value, json};

use crate::events::Family;
use crate::{ReadFunction, WriteFunction};

/// What a registered function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    Read(ReadFunction),
    Write(WriteFunction),
    Status,
    EngineFunctionInfo,
    OnConfigChange,
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

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": properties,
        "required": required,
    })
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

/// Every function this worker registers.
pub fn functions() -> Vec<Function> {
    use Handler::*;
    let read = |f: ReadFunction| Read(f);
    let write = |f: WriteFunction| Write(f);
    let skills_list_response = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "oneOf": [
            object(json!({ "skills": array_of(skill_row()), "revision": integer() }), &["skills"]),
            object(json!({ "unchanged": { "const": true }, "revision": integer() }), &["unchanged", "revision"]),
        ],
    });
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
            description: "List skills as rows { id, title, type, function_id, disable_model_invocation, description, bytes, modified_at }, sorted by id. Filters: prefix (on the on-disk id), type, search (id, title, description). Pass if_revision to get { unchanged, revision } when nothing changed.",
            request: object(
                json!({
                    "search": string("case-insensitive substring of id, title or description"),
                    "prefix": string("on-disk id prefix, e.g. `resend/`"),
                    "type": string("exact frontmatter type, e.g. `index`"),
                    "include_description": boolean("false blanks descriptions (default true)"),
                    "if_revision": integer(),
                }),
                &[],
            ),
            response: skills_list_response,
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
            description: "List system prompts: { prompts: [{ name, description, modified_at, builtin? }] }, bundled ones included unless a file shadows them.",
            request: object(json!({}), &[]),
            response: object(
                json!({ "prompts": array_of(object(json!({ "name": string("name"), "description": string("description"), "modified_at": string("RFC 3339 UTC"), "builtin": boolean("bundled") }), &["name", "description", "modified_at"])) }),
                &["prompts"],
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
            description: "List agent profiles (files in agents_folder plus the bundled iii and iii-minimal) with skill_count, model and reasoning_effort resolved through extends.",
            request: object(json!({}), &[]),
            response: object(
                json!({ "agents": array_of(object(agent_row, &["id", "name", "description", "modified_at"])) }),
                &["agents"],
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
            description: "Index health: revision, rows per family, every skipped file with its reason, the last reconcile, and the file watcher's state.",
            request: object(json!({}), &[]),
            response: object(
                json!({
                    "revision": integer(), "index_path": string("index file"), "files": integer(),
                    "counts": object(json!({ "skills": integer(), "system_prompts": integer(), "agents": integer() }), &["skills", "system_prompts", "agents"]),
                    "skipped": array_of(object(json!({ "root": string("configuration key"), "path": string("absolute path"), "reason": string("why") }), &["root", "path", "reason"])),
                    "last_reconcile": { "type": ["object", "null"] },
                    "watcher": { "type": ["object", "null"] },
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
            id: super::console::UI_CONTENT,
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
    let edit = |id_key: &str| json!({ "op": { "enum": ["create", "update", "delete"] }, id_key: { "type": "string" } });
    vec![
        (
            Family::Skills,
            "Fires after a skill is created, updated or deleted through directory::skills::*, or changed on disk ({ op: external }).",
            json!({ "oneOf": [
                object(json!({ "op": { "enum": ["create", "update", "delete"] }, "namespace": { "type": "string" }, "id": { "type": "string" } }), &["op", "namespace", "id"]),
                object(json!({ "op": { "const": "download" }, "namespace": { "type": "string" }, "source": { "enum": ["repo", "registry"] } }), &["op", "namespace", "source"]),
                object(json!({ "op": { "const": "external" } }), &["op"]),
            ]}),
        ),
        (
            Family::SystemPrompts,
            "Fires after a system prompt is created, updated or deleted through directory::system-prompts::*, or changed on disk ({ op: external }).",
            json!({ "oneOf": [object(edit("name"), &["op", "name"]), object(json!({ "op": { "const": "external" } }), &["op"])] }),
        ),
        (
            Family::Agents,
            "Fires after an agent profile is created, updated or deleted through directory::agents::*, or changed on disk ({ op: external }).",
            json!({ "oneOf": [object(edit("name"), &["op", "name"]), object(json!({ "op": { "const": "external" } }), &["op"])] }),
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
                "response_format": f.response, "internal": f.internal,
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
