//! The library's functions, one entry each: the id, what a read needs of the installed
//! workers, the description and request and response schemas the worker registers, and the
//! handler (the family function it calls). `library_functions!` turns the table into the
//! [`ReadFunction`] and [`WriteFunction`] enums with their ids, `ALL`, the dispatch of
//! [`Directory::read`] and [`Directory::write`], and the surface the worker registers
//! ([`LIBRARY`], in the table's order). Adding a function is one entry here, its request type
//! in its family, and its test.
//!
//! An entry is `read Name { id, installed, description, request, response, answer },` or
//! `write Name { id, description, request, response, apply },`, its fields in that order, each
//! followed by a comma. `answer` is called with the directory, the snapshot, the caller's
//! visibility and the request; `apply` with the snapshot, the roots, the visibility and the
//! request, under the write lock.

use serde_json::{Value, json};

use super::Directory;
use crate::answer::Answer;
use crate::code::Code;
use crate::error::Result;
use crate::family_writes::Outcome;
use crate::index::Reader;
use crate::roots::Roots;
use crate::rules::skill::Visibility;
use crate::schema::{array_of, boolean, integer, nullable_string, object, string};
use crate::skills::Audience;
use crate::{agents, skills, system_prompts};

/// What a read needs of the installed workers' names (`filter_unregistered`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstalledNeed {
    /// Nothing: the read hides nothing.
    Never,
    /// The names, as cached for `registry_cache_ttl_ms`.
    Cached,
    /// The names asked of the engine now (`skills::index`, whose entries are the workers).
    Fresh,
}

/// A function's registered text: its description and its request and response schemas.
pub struct Described {
    pub description: &'static str,
    pub request: Value,
    pub response: Value,
}

/// A function of the library, in [`LIBRARY`]'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LibraryFunction {
    Read(ReadFunction),
    Write(WriteFunction),
}

impl LibraryFunction {
    pub fn id(self) -> &'static str {
        match self {
            LibraryFunction::Read(f) => f.id(),
            LibraryFunction::Write(f) => f.id(),
        }
    }

    pub fn described(self) -> Described {
        match self {
            LibraryFunction::Read(f) => f.described(),
            LibraryFunction::Write(f) => f.described(),
        }
    }
}

/// A read's handler, typed so that the table's closures need no annotations.
fn answer_with(
    answer: impl FnOnce(&Directory, &Reader, Visibility<'_>, &Value) -> Result<Answer>,
    directory: &Directory,
    reader: &Reader,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Answer> {
    answer(directory, reader, visibility, request)
}

/// A write's handler, likewise.
fn apply_with(
    apply: impl FnOnce(&Reader, &Roots, Visibility<'_>, &Value) -> Result<Outcome>,
    reader: &Reader,
    roots: &Roots,
    visibility: Visibility<'_>,
    request: &Value,
) -> Result<Outcome> {
    apply(reader, roots, visibility, request)
}

/// Builds the enums and their dispatch from the table: sorts the entries into reads and writes
/// (`@sort`), keeping the table's order for [`LIBRARY`], then writes them out.
macro_rules! library_functions {
    (@sort [$($reads:tt)*] [$($writes:tt)*] [$($all:tt)*]
        read $name:ident { $($body:tt)* }, $($rest:tt)*) => {
        library_functions!(@sort
            [$($reads)* $name { $($body)* }]
            [$($writes)*]
            [$($all)* LibraryFunction::Read(ReadFunction::$name),]
            $($rest)*);
    };
    (@sort [$($reads:tt)*] [$($writes:tt)*] [$($all:tt)*]
        write $name:ident { $($body:tt)* }, $($rest:tt)*) => {
        library_functions!(@sort
            [$($reads)*]
            [$($writes)* $name { $($body)* }]
            [$($all)* LibraryFunction::Write(WriteFunction::$name),]
            $($rest)*);
    };
    (@sort
        [$($read:ident {
            id: $read_id:literal,
            installed: $installed:expr,
            description: $read_description:literal,
            request: $read_request:expr,
            response: $read_response:expr,
            answer: $answer:expr,
        })*]
        [$($write:ident {
            id: $write_id:literal,
            description: $write_description:literal,
            request: $write_request:expr,
            response: $write_response:expr,
            apply: $apply:expr,
        })*]
        [$($all:tt)*]
    ) => {
        /// The read functions of the contract that the library answers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ReadFunction {
            $($read,)*
        }

        impl ReadFunction {
            pub const ALL: [ReadFunction; [$(stringify!($read)),*].len()] =
                [$(ReadFunction::$read,)*];

            pub fn id(self) -> &'static str {
                match self {
                    $(ReadFunction::$read => $read_id,)*
                }
            }

            pub fn from_id(id: &str) -> Option<ReadFunction> {
                ReadFunction::ALL.into_iter().find(|f| f.id() == id)
            }

            /// What the read needs of the installed workers.
            pub fn installed(self) -> InstalledNeed {
                match self {
                    $(ReadFunction::$read => $installed,)*
                }
            }

            pub fn described(self) -> Described {
                match self {
                    $(ReadFunction::$read => Described {
                        description: $read_description,
                        request: $read_request,
                        response: $read_response,
                    },)*
                }
            }

            /// Answers the read from `reader`'s snapshot.
            pub(super) fn answer(
                self,
                directory: &Directory,
                reader: &Reader,
                visibility: Visibility<'_>,
                request: &Value,
            ) -> Result<Answer> {
                match self {
                    $(ReadFunction::$read => {
                        answer_with($answer, directory, reader, visibility, request)
                    })*
                }
            }
        }

        /// The write functions of the contract.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum WriteFunction {
            $($write,)*
        }

        impl WriteFunction {
            pub const ALL: [WriteFunction; [$(stringify!($write)),*].len()] =
                [$(WriteFunction::$write,)*];

            pub fn id(self) -> &'static str {
                match self {
                    $(WriteFunction::$write => $write_id,)*
                }
            }

            pub fn from_id(id: &str) -> Option<WriteFunction> {
                WriteFunction::ALL.into_iter().find(|f| f.id() == id)
            }

            pub fn described(self) -> Described {
                match self {
                    $(WriteFunction::$write => Described {
                        description: $write_description,
                        request: $write_request,
                        response: $write_response,
                    },)*
                }
            }

            /// Checks and makes the write on disk (under the write lock; see
            /// [`Directory::write`]).
            pub(super) fn apply(
                self,
                reader: &Reader,
                roots: &Roots,
                visibility: Visibility<'_>,
                request: &Value,
            ) -> Result<Outcome> {
                match self {
                    $(WriteFunction::$write => apply_with($apply, reader, roots, visibility, request),)*
                }
            }
        }

        /// Every library function, in the table's order (the order the worker registers them).
        pub const LIBRARY: [LibraryFunction; ReadFunction::ALL.len() + WriteFunction::ALL.len()] =
            [$($all)*];
    };
    ($($entries:tt)*) => {
        library_functions!(@sort [] [] [] $($entries)*);
    };
}

library_functions! {
    read SkillsList {
        id: "directory::skills::list",
        installed: InstalledNeed::Cached,
        description: "List skills as rows { id, title, type, function_id, disable_model_invocation, description, bytes, modified_at }, sorted by id. Filters: prefix (on the on-disk id), type, search (id, title, description). Pass since_revision (0 at first) to get only what changed since: { unchanged, revision }, { revision, changed, removed }, or the whole list with full: true.",
        request: list_request(json!({
            "search": string("case-insensitive substring of id, title or description"),
            "prefix": string("on-disk id prefix, e.g. `resend/`"),
            "type": string("exact frontmatter type, e.g. `index`"),
            "include_description": boolean("false blanks descriptions (default true)"),
        })),
        response: list_response("skills", skills::list_row_schema()),
        answer: |directory, reader, visibility, request| {
            let cache = || directory.skill_cache(reader);
            skills::list(reader, visibility, request, cache).map(Answer::from)
        },
    },
    read SkillsGet {
        id: "directory::skills::get",
        installed: InstalledNeed::Cached,
        description: "Read one skill by id (also iii://<id> or <id>.md; a bare namespace reads its index; or the absolute path of its file, as directory::skills::catalog gives a location): { id, title, type, function_id, disable_model_invocation, path, body, modified_at }, plus the whole file as raw with raw: true.",
        request: object(
            json!({ "id": string("skill id, or the absolute path of its .md file (a catalog location)"), "raw": boolean("also return the whole file") }),
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
        answer: |directory, reader, visibility, request| {
            let cache = || directory.skill_cache(reader);
            skills::get(reader, &directory.roots, visibility, request, cache).map(Answer::Value)
        },
    },
    read SkillsIndex {
        id: "directory::skills::index",
        installed: InstalledNeed::Fresh,
        description: "Render a short markdown index with one entry per installed worker overview (skills with type: index): heading, first paragraph, and a pointer to read the full doc.",
        request: object(json!({}), &[]),
        response: object(
            json!({ "body": string("markdown"), "workers_count": integer() }),
            &["body", "workers_count"],
        ),
        answer: |directory, reader, visibility, _| {
            Ok(Answer::Value(skills::index(&*directory.skill_cache(reader)?, visibility)))
        },
    },
    read SkillsSearch {
        id: "directory::skills::search",
        installed: InstalledNeed::Cached,
        description: "Rank the skills for a task phrased as a user would (BM25 over name, title, description and the leading body; fused with sentence embeddings when a model is ready): { mode, results: [{ id, title, description, type, score, disable_model_invocation }] }, best first, the same visibility as list. A task no skill serves answers no results. An Agent Skill's resources (files in the scripts/, references/ and assets/ folders beside its SKILL.md) are answered only when prefix reaches into such a folder.",
        request: object(
            json!({
                "query": string("the task, in words"),
                "limit": { "type": "integer", "minimum": 1, "maximum": 50, "description": "results (default 10)" },
                "prefix": string("on-disk id prefix, e.g. `resend/`"),
                "type": string("exact frontmatter type, e.g. `index`"),
            }),
            &["query"],
        ),
        response: object(
            json!({
                "mode": { "type": "string", "enum": ["lexical", "hybrid"] },
                "results": array_of(object(
                    json!({
                        "id": string("skill id"), "title": string("title"),
                        "description": string("description"), "type": nullable_string(),
                        "score": { "type": "number", "description": "the ranking's score; compare within one answer" },
                        "disable_model_invocation": boolean("flag"),
                    }),
                    &["id", "title", "description", "type", "score", "disable_model_invocation"],
                )),
            }),
            &["mode", "results"],
        ),
        answer: |directory, reader, visibility, request| {
            let cache = directory.skill_cache(reader)?;
            directory
                .rank_skills(reader, &cache, visibility, Audience::Caller, request, None)
                .map(Answer::Value)
        },
    },
    read SkillsCatalog {
        id: "directory::skills::catalog",
        installed: InstalledNeed::Cached,
        description: "The Agent Skills served (each SKILL.md a model may pick: list's visibility, without disable-model-invocation or an empty description) as names, descriptions and file locations, in on-disk id order, for a prompt: format xml (the <available_skills> block of the reference to-prompt, the default), markdown (one line each) or json. Kept within max_bytes (default 16384) and limit; left_out says how many did not fit.",
        request: object(
            json!({
                "prefix": string("on-disk id prefix, e.g. `resend/`"),
                "type": string("exact frontmatter type, e.g. `index`"),
                "format": { "type": "string", "enum": ["xml", "markdown", "json"], "description": "xml (default), markdown or json" },
                "limit": { "type": "integer", "minimum": 1, "description": "at most this many entries (default: as many as fit)" },
                "max_bytes": { "type": "integer", "minimum": 256, "maximum": 8388608, "description": "budget of the body (xml, markdown) or of the skills array's JSON (default 16384, about 4,000 tokens); entries stop at the first that does not fit" },
            }),
            &[],
        ),
        response: object(
            json!({
                "format": { "type": "string", "enum": ["xml", "markdown", "json"] },
                "body": string("the catalog as text (xml, markdown)"),
                "skills": array_of(object(
                    json!({
                        "id": string("skill id"), "name": string("Agent Skills name (frontmatter name, else the folder)"),
                        "description": string("description"), "location": string("absolute path of the SKILL.md"),
                    }),
                    &["id", "name", "description", "location"],
                )),
                "count": integer(),
                "left_out": { "type": "integer", "minimum": 0, "description": "entries the filters admitted that the budget or limit left out" },
                "max_bytes": integer(),
            }),
            &["format", "count", "left_out", "max_bytes"],
        ),
        answer: |directory, reader, visibility, request| {
            let cache = directory.skill_cache(reader)?;
            skills::catalog(&cache, &directory.roots, visibility, request).map(Answer::Value)
        },
    },
    write SkillsCreate {
        id: "directory::skills::create",
        description: "Create a new skill file at <skills_folder>/<id>.md from full-file content. Never overwrites; fires directory::skills::on-change { op: create }.",
        request: content_request("id", "new skill id, `[a-z0-9_-]{1,64}` per `/` segment"),
        response: skill_written(),
        apply: |reader, roots, visibility, request| {
            skills::write::create(reader, roots, visibility, request)
        },
    },
    write SkillsUpdate {
        id: "directory::skills::update",
        description: "Overwrite an existing skill file with full-file content (the edited raw from get). Never creates; read-only agents skills are refused (D116). Fires on-change { op: update }.",
        request: update_request("id", "existing skill id", Code::SkillChangedOnDisk),
        response: skill_written(),
        apply: |reader, roots, visibility, request| {
            skills::write::update(reader, roots, visibility, request)
        },
    },
    write SkillsDelete {
        id: "directory::skills::delete",
        description: "Delete an existing skill file and the folders it leaves empty. Answers the resolved id and fires on-change { op: delete }.",
        request: skill_id_request(),
        response: object(json!({ "id": string("the deleted on-disk id") }), &["id"]),
        apply: |reader, roots, visibility, request| {
            skills::write::delete(reader, roots, visibility, request)
        },
    },
    read SystemPromptsList {
        id: "directory::system-prompts::list",
        installed: InstalledNeed::Never,
        description: "List system prompts: { prompts: [{ name, description, modified_at, builtin? }] }, bundled ones included unless a file shadows them. Pass since_revision (0 at first) to get only what changed since.",
        request: list_request(json!({})),
        response: list_response(
            "prompts",
            object(json!({ "name": string("name"), "description": string("description"), "modified_at": string("RFC 3339 UTC"), "builtin": boolean("bundled") }), &["name", "description", "modified_at"]),
        ),
        answer: |_, reader, _, request| system_prompts::list_answer(reader, request).map(Answer::Value),
    },
    read SystemPromptsGet {
        id: "directory::system-prompts::get",
        installed: InstalledNeed::Never,
        description: "Read one system prompt: { name, description, body, modified_at }, plus raw with raw: true. iii-runtime and iii-minimal are bundled.",
        request: object(
            json!({ "name": string("system prompt name"), "raw": boolean("also return the whole file") }),
            &["name"],
        ),
        response: object(
            json!({ "name": string("name"), "description": string("description"), "body": string("the prompt"), "modified_at": string("RFC 3339 UTC"), "builtin": boolean("bundled"), "raw": string("whole file") }),
            &["name", "description", "body", "modified_at"],
        ),
        answer: |directory, reader, _, request| {
            system_prompts::get(reader, &directory.roots, request).map(Answer::Value)
        },
    },
    write SystemPromptsCreate {
        id: "directory::system-prompts::create",
        description: "Create <skills_folder>/system-prompts/<name>.md from full-file content (frontmatter with a non-empty description). Fires directory::system-prompts::on-change { op: create }.",
        request: content_request("name", "new system prompt name"),
        response: prompt_written(),
        apply: |reader, roots, _, request| system_prompts::write::create(reader, roots, request),
    },
    write SystemPromptsUpdate {
        id: "directory::system-prompts::update",
        description: "Overwrite an existing system prompt file (or shadow a bundled one) with full-file content. Answers its effective name and fires on-change { op: update }.",
        request: update_request("name", "existing system prompt name", Code::PromptChangedOnDisk),
        response: prompt_written(),
        apply: |reader, roots, _, request| system_prompts::write::update(reader, roots, request),
    },
    write SystemPromptsDelete {
        id: "directory::system-prompts::delete",
        description: "Delete an existing system prompt file. Fires on-change { op: delete }.",
        request: object(json!({ "name": string("system prompt name") }), &["name"]),
        response: object(json!({ "name": string("name") }), &["name"]),
        apply: |reader, roots, _, request| system_prompts::write::delete(reader, roots, request),
    },
    read AgentsList {
        id: "directory::agents::list",
        installed: InstalledNeed::Never,
        description: "List agent profiles (files in agents_folder and global_agents_folder, the project's first, plus the bundled iii and iii-minimal) with skill_count, model, reasoning_effort, functions and skills_index resolved through extends. Pass since_revision (0 at first) to get only what changed since.",
        request: list_request(json!({})),
        response: list_response(
            "agents",
            object(agent_row(), &["id", "name", "description", "modified_at"]),
        ),
        answer: |_, reader, _, request| agents::list_answer(reader, request).map(Answer::Value),
    },
    read AgentsGet {
        id: "directory::agents::get",
        installed: InstalledNeed::Cached,
        description: "Read one agent profile with its resolved system_prompt (ancestors root-first), inherited skills, unknown_skills, model, reasoning_effort, functions and skills_index; raw with raw: true.",
        request: object(
            json!({ "id": string("agent id"), "raw": boolean("also return the whole file") }),
            &["id"],
        ),
        response: object(
            agent_get(),
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
        answer: |directory, reader, visibility, request| {
            agents::get(reader, &directory.roots, visibility, request).map(Answer::Value)
        },
    },
    write AgentsCreate {
        id: "directory::agents::create",
        description: "Create <agents_folder>/<id>.md from full-file content (frontmatter with a non-empty name). Creating a bundled id, or one of global_agents_folder, shadows it. Fires directory::agents::on-change { op: create }.",
        request: content_request("id", "new agent id"),
        response: agent_written(),
        apply: |reader, roots, _, request| agents::write::create(reader, roots, request),
    },
    write AgentsUpdate {
        id: "directory::agents::update",
        description: "Overwrite an existing agent profile with full-file content, in the folder it is in (agents_folder or global_agents_folder); updating a bundled profile writes the local file that shadows it. Fires on-change { op: update }.",
        request: update_request("id", "existing agent id", Code::AgentChangedOnDisk),
        response: agent_written(),
        apply: |reader, roots, _, request| agents::write::update(reader, roots, request),
    },
    write AgentsDelete {
        id: "directory::agents::delete",
        description: "Delete an agent profile file, in the folder it is in; a profile it shadowed (global or bundled) comes back. Fires on-change { op: delete }.",
        request: object(json!({ "id": string("agent id") }), &["id"]),
        response: object(json!({ "id": string("agent id") }), &["id"]),
        apply: |reader, roots, _, request| agents::write::delete(reader, roots, request),
    },
}

// The shapes the entries share.

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

/// An update's request: a create's, and the optional `base` that makes it conditional (`code`
/// its refusal).
fn update_request(key: &str, what: &str, code: Code) -> Value {
    let mut request = content_request(key, what);
    request["properties"]["base"] = string(&format!(
        "optional: the whole file as your edit started from it (raw from get). When given, the update writes only if the file still holds it (or already holds content); if another writer changed it since, nothing is written and the answer is {code} {class}: read it again, merge, and update with the new text as base",
        class = code.class()
    ));
    request
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
        "functions": array_of(json!({ "type": "string", "description": "present when non-empty: the function ids a session preloads, the first non-empty list along extends" })),
        "skills_index": { "const": false, "description": "present (false) only when a session gets no skills index: the nearest value set along extends; absent means true" },
        "builtin": boolean("present (true) on bundled profiles only"),
        "inheritance_error": string(&format!("{} text when the extends chain does not resolve", Code::AgentInheritance)),
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

/// An agent profile as `agents::get` answers it.
fn agent_get() -> Value {
    let mut fields = agent_fields();
    fields["system_prompt"] = string("each ancestor's body root-first, then this profile's body");
    fields["skills"] = array_of(json!({ "type": "string" }));
    fields["unknown_skills"] = array_of(json!({ "type": "string" }));
    fields["raw"] = string("the profile's whole file (with raw: true)");
    fields
}

/// An `agents::list` row.
fn agent_row() -> Value {
    let mut fields = agent_fields();
    fields["skill_count"] = json!({ "type": ["integer", "null"] });
    fields
}
