//! The worker's surface on the bus: every function, one entry each (id, description, JSON
//! Schemas, exposure, deadline class and handler), and the trigger types. `--manifest` prints
//! it; registration and the engine-less dispatch (`local.rs`) read it.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::error::WorkerError;
use super::local::Local;
use super::{Call, configuration, console, downloads, engine, search};
use crate::directory::{Directory, LIBRARY, LibraryFunction};
use crate::download::{BundlesFunction, DownloadFunction, plan, status};
use crate::events::Family;
use crate::registry::functions::{INFO as REGISTRY_INFO, LIST as REGISTRY_LIST};
use crate::schema::{array_of, boolean, integer, nullable_string, object, string};

/// The internal function the `worker` trigger calls when a worker is added (contract §3.10).
pub const ON_WORKER_ADDED: &str = "directory::__on_worker_added";

/// The console page's assets (internal; see `console.rs`).
pub const UI_CONTENT: &str = "iii-directory::ui-content";
/// The console page's dry run of a proposed text (internal; see `dry_run.rs`).
pub const UI_CHECK: &str = "iii-directory::ui-check";

/// The internal functions of function search, by id.
pub const ON_FUNCTIONS_CHANGE: &str = "directory::on-functions-change";
pub const PRE_GENERATE: &str = "directory::pre-generate";
pub const HINT_PREVIEW: &str = "directory::hint-preview";

/// One function of the surface: everything about it, its handler included. Adding a function
/// of the worker's own is one entry in [`functions`] and its handler fn.
pub struct Function {
    pub id: &'static str,
    pub description: &'static str,
    pub request: Value,
    pub response: Value,
    pub exposure: Exposure,
    /// Whether the watchdog cuts a call that runs long (`watchdog.rs`).
    pub deadline: Deadline,
    pub(super) handler: Handler,
}

/// Who the function is for, as its registered metadata says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Listed and searchable.
    Public,
    /// `metadata.internal = true`: hidden from search and listings.
    Internal,
    /// Internal, and kept out of traces too (a hook that runs on every generation).
    InternalUntraced,
}

/// Whether a call is answered `D122` when it runs past the watchdog's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Cut at the deadline: the caller hears why before its own timeout.
    Cut,
    /// Cut as [`Deadline::Cut`], for a write: once its blocking part started it goes on after
    /// the answer, so the answer says it may still land (a create retried on "Retry" found its
    /// own file, `D114 already exists`).
    CutWrite,
    /// Never cut: a download has its own timeouts, and its callers wait longer than 30 s.
    Uncut,
}

/// A handler of the worker's own functions on the bus: given the call's engine and state and
/// the request, the answer to come.
pub(super) type OnBus = fn(Call, Value) -> Answering;

/// An answer to come from a handler of the worker's own functions.
pub(super) type Answering = BoxFuture<'static, Result<Value, WorkerError>>;

/// What the dispatch without an engine (`local.rs`) does with a call instead.
pub(super) type Offline = fn(&Local, &Value) -> Result<Value, WorkerError>;

/// How a function is answered: by kind of work, each kind holding its function's handler.
#[derive(Clone, Copy)]
pub(super) enum Handler {
    /// A library function: its handler is its entry in the library's table
    /// (`directory/functions.rs`).
    Library(LibraryFunction),
    /// Work on the directory alone, on the blocking pool; answered the same without an engine.
    Directory(fn(&Directory, &Value) -> crate::error::Result<Value>),
    /// Work that needs the engine or the worker's state.
    Worker { run: OnBus, offline: Offline },
}

impl Function {
    /// The metadata registered with the function.
    pub fn metadata(&self) -> Option<Value> {
        match self.exposure {
            Exposure::Public => None,
            Exposure::Internal => Some(json!({ "internal": true })),
            Exposure::InternalUntraced => Some(json!({ "internal": true, "trace_hidden": true })),
        }
    }

    /// Whether the function is registered as internal.
    pub fn internal(&self) -> bool {
        self.exposure != Exposure::Public
    }
}

/// The JSON Schema dialect, named once at the root of each registered schema.
const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

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
        json!({
            "function_id": string("function id"),
            "description": string("first sentence of its description"),
            "engine_namespace": string("the engine namespace it is registered in, when not the default one: call it there"),
        }),
        &["function_id", "description"],
    )
}

/// Every function this worker registers.
pub fn functions() -> Vec<Function> {
    let library = LIBRARY.into_iter().map(|function| {
        let described = function.described();
        Function {
            id: function.id(),
            description: described.description,
            request: described.request,
            response: described.response,
            exposure: Exposure::Public,
            deadline: match function {
                LibraryFunction::Read(_) => Deadline::Cut,
                LibraryFunction::Write(_) => Deadline::CutWrite,
            },
            handler: Handler::Library(function),
        }
    });
    let own = vec![
        Function {
            id: "directory::index::status",
            description: "Index health: revision, rows per family, skipped files with their reasons (the first 1,000 by path; skipped_total counts them all; `iii-directory check` lists every one), the last reconcile, the index's error while it cannot record changes, the file watcher's state, the engine connection (reconnections, last error, what was set up again), the configuration values refused at boot or live, and how search ranks (search: mode, model, state of the model, skill contents embedded and pending, error when the model could not be fetched or loaded).",
            request: object(json!({}), &[]),
            response: object(
                json!({
                    "revision": integer(), "index_path": string("index file"), "files": integer(),
                    "counts": object(json!({ "skills": integer(), "system_prompts": integer(), "agents": integer() }), &["skills", "system_prompts", "agents"]),
                    "skipped": array_of(object(json!({ "root": string("configuration key"), "path": string("absolute path"), "family": nullable_string(), "id": nullable_string(), "reason": string("why") }), &["root", "path", "reason"])),
                    "skipped_total": integer(),
                    "last_reconcile": { "type": ["object", "null"] },
                    "index_error": {
                        "type": ["object", "null"],
                        "description": "set while the index cannot record changes (a full disk under it, say): reads serve its last recorded state until then",
                        "properties": { "error": string("the last attempt's error"), "since": string("RFC 3339 time of the first failure"), "attempts": integer() },
                    },
                    "watcher": { "type": ["object", "null"] },
                    "connection": connection_status(),
                    "configuration": object(
                        json!({ "refused": array_of(object(json!({ "at": string("RFC 3339 time"), "what": string("the value refused, and why") }), &["at", "what"])) }),
                        &["refused"],
                    ),
                    "search": object(
                        json!({
                            "mode": { "type": "string", "enum": ["lexical", "hybrid"] },
                            "model": nullable_string(),
                            "state": { "type": "string", "enum": ["absent", "downloading", "loading", "ready", "failed"] },
                            "embedded": integer(), "pending": integer(), "error": string("why the model is not loaded"),
                        }),
                        &["mode", "model", "state", "embedded", "pending"],
                    ),
                }),
                &["revision", "counts", "skipped"],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(super::status(call, input)),
                offline: Local::status,
            },
        },
        Function {
            id: "directory::engine::functions::info",
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
                    "engine_namespace": string("the engine namespace it is registered in, when not the default one: call it there"),
                }),
                &["function_id", "registered_triggers"],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(engine::function_info(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: "directory::on-config-change",
            description: "Internal: re-reads the iii-directory configuration after configuration:updated.",
            request: object(json!({}), &[]),
            response: object(json!({ "ok": { "type": "boolean" } }), &["ok"]),
            exposure: Exposure::Internal,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(configuration::on_change(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: crate::search::catalog::SEARCH_FUNCTION_ID,
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
                    "skills": array_of(object(
                        json!({
                            "capability": string("the capability, as the request wrote it"),
                            "skills": array_of(object(
                                json!({ "id": string("skill id"), "title": string("title"), "description": string("description") }),
                                &["id", "title", "description"],
                            )),
                        }),
                        &["capability", "skills"],
                    )),
                }),
                &["guidance", "workers", "latency_ms"],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(search::search_functions(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: ON_FUNCTIONS_CHANGE,
            description: "Internal: refreshes the function-search catalog when the engine's functions change (engine::functions-available).",
            request: object(
                json!({ "event": string("functions_changed"), "functions": array_of(json!({ "type": "object" })) }),
                &[],
            ),
            response: object(json!({ "ok": { "type": "boolean" } }), &["ok"]),
            exposure: Exposure::Internal,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(search::on_functions_change(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: PRE_GENERATE,
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
            exposure: Exposure::InternalUntraced,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(search::pre_generate(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: HINT_PREVIEW,
            description: "Internal: the exact function-search hint per exposure mode (agent_trigger, native), as the configuration UI shows it.",
            request: object(json!({}), &[]),
            response: object(
                json!({ "agent_trigger": string("hint for agent_trigger exposure"), "native": string("hint for native exposure") }),
                &["agent_trigger", "native"],
            ),
            exposure: Exposure::Internal,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(search::hint_preview(call, input)),
                offline: Local::unanswered,
            },
        },
    ];
    library
        .chain(own)
        .chain(download_functions())
        .chain(bundles_functions())
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
            "kept_local": names("files the bundle installed and you edited since, kept as they are (agents/<id>.md for a profile); force: true replaces them"),
            "merged": names("re-download of a locked bundle: files edited here and changed upstream, merged three-way"),
            "conflicts": array_of(object(
                json!({ "path": string("the file, kept as you have it"), "upstream_copy": string("where the upstream text landed beside it (<name>.upstream), when it did") }),
                &["path"],
            )),
            "removed": names("files removed (always empty for a download, which keeps files upstream dropped)"),
            "upstream_copies_removed": names("re-download of a locked bundle: <name>.upstream copies of earlier conflicts that this landing settled, removed"),
            "base_problem": string("re-download of a locked bundle with conflicts: why no three-way merge was tried (the locked version could not be fetched again), when none was"),
            "review": object(
                json!({
                    "executables": names("executable files (a mode bit, #!, or a program)"),
                    "scripts": names("script files, by extension"),
                    "hidden": names("source entries named with a leading dot, not downloaded"),
                    "large": names("files of at least download_large_file_bytes"),
                }),
                &["executables", "scripts", "hidden", "large"],
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

/// `force`, which every download function takes.
fn force_field() -> Value {
    boolean(
        "replace files the bundle installed even where they were edited since (default false: kept, listed in kept_local)",
    )
}

fn repo_fields() -> Value {
    json!({
        "repo": string("https://, ssh:// or git@ URL of a git repository"),
        "skill": string("folder name under the repository's skills/"),
        "branch": string("branch to clone (default main)"),
        "force": force_field(),
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
            description: "Download a skill bundle from either source: {repo, skill, branch?} (branch defaults to main) or {worker, version? | tag?} (tag defaults to latest). Checked whole, landed all or nothing; fires the on-change triggers { op: download }. Prefer the explicit forms.",
            request: object(alias_fields, &[]),
            response: download_response(),
            exposure: Exposure::Public,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| {
                    Box::pin(downloads::download(call, DownloadFunction::Download, input))
                },
                offline: |local, input| local.check_download(DownloadFunction::Download, input),
            },
        },
        Function {
            id: DownloadFunction::FromRepo.id(),
            description: "Copy skills/<skill>/ of a git repository (shallow clone of one branch) into <skills_folder>/<skill>/. Paths under prompts/ and agents/ are ignored; re-pulls overwrite file by file and keep other files.",
            request: object(repo_fields(), &["repo", "skill"]),
            response: download_response(),
            exposure: Exposure::Public,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| {
                    Box::pin(downloads::download(call, DownloadFunction::FromRepo, input))
                },
                offline: |local, input| local.check_download(DownloadFunction::FromRepo, input),
            },
        },
        Function {
            id: DownloadFunction::FromRegistry.id(),
            description: "Install a published worker's skills bundle from the workers registry into <skills_folder>/<worker>/; exact agents/<id>.md entries become agent profiles in agents_folder.",
            request: object(
                {
                    let mut fields = registry_fields("worker", "registry worker name");
                    fields["force"] = force_field();
                    fields
                },
                &["worker"],
            ),
            response: download_response(),
            exposure: Exposure::Public,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| {
                    Box::pin(downloads::download(
                        call,
                        DownloadFunction::FromRegistry,
                        input,
                    ))
                },
                offline: |local, input| local.check_download(DownloadFunction::FromRegistry, input),
            },
        },
        Function {
            id: REGISTRY_LIST,
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
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::registry_list(call, input)),
                offline: Local::registry_list,
            },
        },
        Function {
            id: REGISTRY_INFO,
            description: "One registry worker's pre-install card, at a version or tag (default latest): { worker, api_reference: { functions, triggers } (each by name and description), skills_tree: { skills, prompts } }. readme: true adds the README; schemas: true adds each function's request and response schemas and each trigger's invocation and return schemas, with their metadata (both: the whole registry record).",
            request: object(
                {
                    let mut fields = registry_fields("name", "registry worker name");
                    fields["readme"] = boolean("add the worker's README (default false)");
                    fields["schemas"] = boolean(
                        "add the functions' and triggers' schemas and metadata (default false)",
                    );
                    fields
                },
                &["name"],
            ),
            response: object(
                json!({
                    "worker": registry_worker(),
                    "readme": string("the worker's README (markdown; with readme: true)"),
                    "api_reference": object(
                        json!({
                            "functions": array_of(object(
                                json!({
                                    "name": string("function id"), "description": nullable_string(),
                                    "request_schema": { "description": "JSON Schema of the request (with schemas: true)" },
                                    "response_schema": { "description": "JSON Schema of the response (with schemas: true)" },
                                    "metadata": { "description": "as published (with schemas: true)" },
                                }),
                                &["name", "description"],
                            )),
                            "triggers": array_of(object(
                                json!({
                                    "name": string("trigger type"), "description": nullable_string(),
                                    "invocation_schema": { "description": "JSON Schema of a binding's configuration (with schemas: true)" },
                                    "return_schema": { "description": "JSON Schema of what the handler returns (with schemas: true)" },
                                    "metadata": { "description": "as published (with schemas: true)" },
                                }),
                                &["name", "description"],
                            )),
                        }),
                        &["functions", "triggers"],
                    ),
                    "skills_tree": object(json!({ "skills": array_of(json!({ "type": "object" })), "prompts": array_of(json!({ "type": "object" })) }), &["skills", "prompts"]),
                }),
                &["worker", "api_reference", "skills_tree"],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::registry_info(call, input)),
                offline: Local::registry_info,
            },
        },
        Function {
            id: ON_WORKER_ADDED,
            description: "Internal: downloads an added worker's skills bundle (tag latest) when auto_download is on; always answers { ok: true }.",
            request: object(json!({ "worker": string("the worker just added") }), &[]),
            response: object(json!({ "ok": { "type": "boolean" } }), &["ok"]),
            exposure: Exposure::Internal,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::on_worker_added(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: UI_CONTENT,
            description: "Internal: the console page's assets for the iii console's injectable UI: { path } (iii-directory/page.js or iii-directory/styles.css) -> { content, content_type }.",
            request: object(
                json!({ "path": string("asset path, e.g. iii-directory/page.js") }),
                &["path"],
            ),
            response: object(
                json!({ "content": string("the asset's text"), "content_type": string("text/javascript or text/css, charset utf-8") }),
                &["content", "content_type"],
            ),
            exposure: Exposure::Internal,
            deadline: Deadline::Cut,
            handler: Handler::Directory(|_, input| console::content(input)),
        },
        Function {
            id: UI_CHECK,
            description: "Internal: the console page's dry run: { family, id, content } -> how the server would read that text (title, description, frontmatter and its error, the error a save would answer with); writes nothing.",
            request: object(
                json!({
                    "family": string("skills, system-prompts or agents"),
                    "id": string("the document's id (a system prompt's name)"),
                    "content": string("the proposed file text"),
                }),
                &["family", "id", "content"],
            ),
            response: object(
                json!({
                    "family": string("as asked"),
                    "id": string("as asked"),
                    "id_error": nullable_string(),
                    "frontmatter": { "type": ["string", "null"], "description": "absent, yaml, salvaged or ignored; null for a text too large to read" },
                    "frontmatter_error": nullable_string(),
                    "title": nullable_string(),
                    "description": nullable_string(),
                    "refused": nullable_string(),
                }),
                &["family", "id", "frontmatter", "refused"],
            ),
            exposure: Exposure::Internal,
            deadline: Deadline::Cut,
            handler: Handler::Directory(crate::dry_run::check),
        },
    ]
}

/// `directory::skills::bundles::restore`.
pub const RESTORE: &str = "directory::skills::bundles::restore";
/// `directory::skills::bundles::check-updates`.
pub const CHECK_UPDATES: &str = "directory::skills::bundles::check-updates";

/// `directory::skills::bundles::{list, get, restore, check-updates, plan-update, apply, verify}`:
/// the bundles lock against the disk and its sources.
fn bundles_functions() -> Vec<Function> {
    let paths = || json!({ "type": "array", "items": { "type": "string" } });
    let names =
        |what: &str| json!({ "type": "array", "items": { "type": "string" }, "description": what });
    let bundle = object(
        json!({
            "namespace": string("the bundle's namespace"),
            "state": { "enum": ["missing", "modified", "untracked", "clean"] },
            "source": { "type": "object", "description": "the locked source: repo (repo, branch, folder, commit) or registry (worker, tag?, version, digest)" },
            "landed_at": string("RFC 3339 UTC"),
            "files": integer(),
            "modified": paths(),
            "missing": paths(),
            "untracked": paths(),
            "upstream_copies": names("<name>.upstream copies an update's conflict left beside the bundle's files"),
            "stale_upstream_copies": names("the copies whose conflict is settled (the file is clean again, no longer locked, or upstream moved on): safe to delete; the next apply that lands the file removes them"),
            "recorded": { "type": "boolean", "description": "whether the namespace holds the bundle's record of the files it wrote (.iii-bundle-files); without it a landing takes as the bundle's the files holding the bytes the lock lists, and a restore refuses a file of the bundle edited here" },
            "detail": array_of(object(
                json!({ "path": string("as a download's response names it"), "route": { "enum": ["skills", "system-prompts", "agents"] }, "state": { "enum": ["clean", "modified", "missing"] } }),
                &["path", "route", "state"],
            )),
        }),
        &[
            "namespace",
            "state",
            "source",
            "landed_at",
            "files",
            "modified",
            "missing",
            "untracked",
            "upstream_copies",
            "stale_upstream_copies",
            "recorded",
        ],
    );
    vec![
        Function {
            id: BundlesFunction::List.id(),
            description: "Every downloaded bundle the bundles lock records, each compared with the disk: state missing, modified, untracked or clean, with the files of each kind.",
            request: object(json!({}), &[]),
            response: object(json!({ "bundles": array_of(bundle.clone()) }), &["bundles"]),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Directory(|directory, input| {
                status::answer(&directory.config().paths, BundlesFunction::List, input)
            }),
        },
        Function {
            id: BundlesFunction::Get.id(),
            description: "One downloaded bundle from the bundles lock: its source (commit or version and digest), when it landed, and every file's state on disk (D334 when the lock has no such bundle).",
            request: object(
                json!({ "namespace": string("the bundle's namespace (skill or worker name)") }),
                &["namespace"],
            ),
            response: bundle,
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Directory(|directory, input| {
                status::answer(&directory.config().paths, BundlesFunction::Get, input)
            }),
        },
        Function {
            id: RESTORE,
            description: "Fetches exactly what the bundles lock records (each repository at its locked commit, each registry worker at its locked version) and lands it only if every file has its locked sha256 (D335 naming the file otherwise, nothing written). Files edited locally are kept unless force: true.",
            request: object(
                json!({
                    "namespace": string("restore only this bundle (default: every locked bundle)"),
                    "force": force_field(),
                }),
                &[],
            ),
            response: object(
                json!({
                    "namespace": string("with a namespace: the bundle restored"),
                    "files": integer(),
                    "kept_local": array_of(json!({ "type": "string" })),
                    "restored": array_of(json!({ "type": "object" })),
                    "failed": array_of(object(json!({ "namespace": string("bundle"), "error": string("why it was not restored") }), &["namespace", "error"])),
                }),
                &[],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::restore(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: CHECK_UPDATES,
            description: "Asks each locked bundle's source whether it moved on: the registry for what the locked tag answers now, git ls-remote for the branch. Parallel, bounded by download_timeout_ms (10 s at most) and cached for registry_cache_ttl_ms; a source that fails is unknown with a reason. { bundles: [{ namespace, state: current | update-available | pinned | unknown, locked, upstream?, reason? }] }",
            request: object(
                json!({ "namespace": string("check only this bundle (default: every locked bundle)") }),
                &[],
            ),
            response: object(
                json!({ "bundles": array_of(object(
                json!({
                    "namespace": string("the bundle"),
                    "state": { "enum": ["current", "update-available", "pinned", "unknown"] },
                    "locked": { "type": "object" },
                    "upstream": { "type": "object" },
                    "reason": string("why the state is unknown or pinned"),
                }),
                &["namespace", "state", "locked"],
            )) }),
                &["bundles"],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::check_updates(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: plan::PLAN_UPDATE,
            description: "Fetches a locked bundle's upstream candidate (the locked tag or branch, or the version, tag or branch given) and compares every file's base (the lock), disk and upstream; writes nothing. Answers a plan kept ten minutes: per file upstream added | changed | removed | unchanged, local clean | modified | missing | same | absent | present, conflict where both changed and whether the three-way merge is clean, plus the review of what it would add (D334 when the lock has no such bundle).",
            request: object(
                json!({
                    "namespace": string("the locked bundle"),
                    "version": string("registry bundle: this version"),
                    "tag": string("registry bundle: this tag (default: the locked tag, else latest)"),
                    "branch": string("repository bundle: this branch (default: the locked branch)"),
                }),
                &["namespace"],
            ),
            response: plan_response(),
            exposure: Exposure::Public,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::plan_update(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: plan::APPLY,
            description: "Lands an update plan all or nothing, the bundles lock in the same commit. Refuses a plan whose files or lock entry changed since it was made (D336, carrying a fresh plan; D337 for an unknown or expired plan). Files nobody edited take upstream (or go when upstream removed them); local edits are kept; a file changed on both sides is merged three-way (on_conflict merge, the default) or, on a conflict, kept with the upstream text beside it as <name>.upstream; keep-local keeps it; take-upstream overwrites.",
            request: object(
                json!({
                    "plan_id": string("the plan's id from plan-update"),
                    "on_conflict": { "enum": ["keep-local", "take-upstream", "merge"], "description": "what a file changed on both sides becomes (default merge)" },
                }),
                &["plan_id"],
            ),
            response: object(
                json!({
                    "plan_id": string("the plan applied"),
                    "namespace": string("the bundle"),
                    "written": names("files written (upstream bytes or a merge)"),
                    "removed": names("files removed because upstream removed them"),
                    "kept_local": names("files edited here and kept (merged ones included)"),
                    "merged": names("files merged three-way"),
                    "conflicts": array_of(object(
                        json!({ "path": string("the file, kept as you have it"), "upstream_copy": string("<name>.upstream, when the upstream text landed beside it") }),
                        &["path"],
                    )),
                    "upstream_copies_removed": names("<name>.upstream copies of earlier conflicts that this landing settled, removed"),
                    "base_problem": string("with conflicts: why no three-way merge was tried (the locked version could not be fetched again), when none was"),
                    "source": { "type": "object", "description": "the locked source now" },
                }),
                &[
                    "plan_id",
                    "namespace",
                    "written",
                    "removed",
                    "kept_local",
                    "merged",
                    "conflicts",
                    "upstream_copies_removed",
                    "source",
                ],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Uncut,
            handler: Handler::Worker {
                run: |call, input| Box::pin(downloads::apply(call, input)),
                offline: Local::unanswered,
            },
        },
        Function {
            id: BundlesFunction::Verify.id(),
            description: "Compares every file the bundles lock records with its sha256 on disk: { ok, checked: { bundles, files }, bundles } with only the bundles that are not clean.",
            request: object(json!({}), &[]),
            response: object(
                json!({
                    "ok": boolean("every locked file is on disk with its locked bytes, and nothing untracked"),
                    "checked": object(json!({ "bundles": integer(), "files": integer() }), &["bundles", "files"]),
                    "bundles": array_of(json!({ "type": "object" })),
                }),
                &["ok", "checked", "bundles"],
            ),
            exposure: Exposure::Public,
            deadline: Deadline::Cut,
            handler: Handler::Directory(|directory, input| {
                status::answer(&directory.config().paths, BundlesFunction::Verify, input)
            }),
        },
    ]
}

/// `plan-update`'s answer.
fn plan_response() -> Value {
    let count = integer;
    object(
        json!({
            "plan_id": string("what apply takes"),
            "namespace": string("the bundle"),
            "expires_at": string("RFC 3339 UTC; the plan is kept in this process until then"),
            "expires_in_ms": integer(),
            "from": { "type": "object", "description": "the locked source" },
            "to": { "type": "object", "description": "the upstream candidate's source (commit or version and digest)" },
            "summary": object(
                json!({ "added": count(), "changed": count(), "removed": count(), "modified_locally": count(), "conflicts": count(), "merges": count(), "upstream_copies_removed": count() }),
                &["added", "changed", "removed", "modified_locally", "conflicts", "merges", "upstream_copies_removed"],
            ),
            "files": array_of(object(
                json!({
                    "path": string("as a download's response names it"),
                    "route": { "enum": ["skills", "system-prompts", "agents"] },
                    "upstream": { "enum": ["added", "changed", "removed", "unchanged"] },
                    "local": { "enum": ["clean", "modified", "missing", "same", "absent", "present"] },
                    "conflict": boolean("changed on both sides"),
                    "merge": { "enum": ["clean", "conflict"], "description": "for a file changed on both sides: the three-way merge's outcome" },
                    "upstream_copy": object(
                        json!({
                            "path": string("the <name>.upstream copy an earlier conflict left beside the file"),
                            "removed_by": { "type": "array", "items": { "enum": ["keep-local", "take-upstream", "merge"] }, "description": "the on_conflict choices under which apply removes the copy, its conflict settled" },
                            "edited": boolean("the copy was changed here since its conflict wrote it: the user's, never removed, and a new conflict over it is refused"),
                        }),
                        &["path", "removed_by", "edited"],
                    ),
                }),
                &["path", "route", "upstream", "local", "conflict"],
            )),
            "review": { "type": "object", "description": "executables, scripts, hidden and large files among what the update adds or changes" },
            "base_problem": string("why the locked bytes could not be fetched again for the merges, when they could not"),
        }),
        &[
            "plan_id",
            "namespace",
            "expires_at",
            "expires_in_ms",
            "from",
            "to",
            "summary",
            "files",
            "review",
        ],
    )
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
                "response_format": f.response, "internal": f.internal(), "metadata": f.metadata(),
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

/// A family as a type: the SDK takes a trigger type's `call_request_format` only from a
/// `JsonSchema` type, so each family's payload schema is [`OnChange`] of one of these.
pub trait FamilyType {
    const FAMILY: Family;
}

/// The family types [`OnChange`] takes.
pub mod family {
    use super::{Family, FamilyType};

    pub struct Skills;
    pub struct SystemPrompts;
    pub struct Agents;

    impl FamilyType for Skills {
        const FAMILY: Family = Family::Skills;
    }
    impl FamilyType for SystemPrompts {
        const FAMILY: Family = Family::SystemPrompts;
    }
    impl FamilyType for Agents {
        const FAMILY: Family = Family::Agents;
    }
}

/// The payload schema of family `F`'s trigger type, as a type the SDK can register.
pub struct OnChange<F>(std::marker::PhantomData<F>);

impl<F: FamilyType> schemars::JsonSchema for OnChange<F> {
    fn schema_name() -> String {
        format!("on-change-payload-{}", F::FAMILY as u8)
    }

    fn json_schema(_: &mut schemars::r#gen::SchemaGenerator) -> schemars::schema::Schema {
        let payload = trigger_types()
            .into_iter()
            .find(|(family, _, _)| *family == F::FAMILY)
            .map(|(_, _, payload)| payload)
            .unwrap_or_default();
        serde_json::from_value(payload).expect("the payload schemas are valid JSON Schema")
    }
}

/// A family's payload schema exactly as the SDK registers it (draft-07 root schema).
pub fn registered_payload(family: Family) -> Value {
    fn root<F: FamilyType>() -> Value {
        let schema = schemars::r#gen::SchemaSettings::draft07()
            .into_generator()
            .into_root_schema_for::<OnChange<F>>();
        serde_json::to_value(schema).unwrap_or_default()
    }
    match family {
        Family::Skills => root::<family::Skills>(),
        Family::SystemPrompts => root::<family::SystemPrompts>(),
        Family::Agents => root::<family::Agents>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine keeps one registration per id: a second entry would silently replace the first.
    #[test]
    fn every_function_is_one_entry() {
        let mut seen = std::collections::BTreeSet::new();
        for function in functions() {
            assert!(seen.insert(function.id), "{} twice", function.id);
        }
    }

    /// The worker's own functions are in every engine's catalog, so their descriptions must
    /// not answer everyday needs through boilerplate ("file" and "returns" once made
    /// `skills::delete` and `system-prompts::update` answer "file my tax return").
    #[test]
    fn our_own_functions_do_not_answer_needs_they_do_not_serve() {
        use crate::search::catalog::{Catalog, Tool};
        use crate::search::{query, select};
        let tools: Vec<Tool> = functions()
            .into_iter()
            .filter(|f| f.exposure == Exposure::Public)
            .map(|f| Tool {
                name: f.id.to_string(),
                description: f.description.to_string(),
                parameters: f.request,
                worker: None,
                engine_namespace: None,
            })
            .collect();
        let catalog = Catalog::build(&tools);
        let found = |need: &str| select(&catalog, &query::prepare(&[need.to_string()]));
        for need in ["file my tax return", "book a hotel room", "order a pizza"] {
            assert!(found(need).is_empty(), "{need}: {:?}", found(need));
        }
        // What they serve, they answer.
        assert!(found("delete a skill file").contains(&"directory::skills::delete".to_string()));
    }
}
