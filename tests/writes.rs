//! The nine write functions on real files: every code path, every response shape, the exact
//! change event of a successful write (and none for a failed one), read-your-writes without a
//! reconcile, and a failed write leaving nothing behind (no file, no `*.tmp`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::Tree;
use iii_directory::{ChangeEvent, Family};
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A tree, its directory, and every event the directory published.
struct Env {
    tree: Tree,
    directory: Directory,
    events: Arc<Mutex<Vec<ChangeEvent>>>,
}

impl Env {
    fn new(setup: impl FnOnce(&Tree)) -> Env {
        Env::with_config(setup, |_| {})
    }

    fn with_config(
        setup: impl FnOnce(&Tree),
        adjust: impl FnOnce(&mut iii_directory::config::Config),
    ) -> Env {
        let tree = Tree::new();
        tree.mkdir("skills/iii").mkdir("agents");
        setup(&tree);
        let mut config = tree.config();
        adjust(&mut config);
        let directory = tree.open_with(config);
        let events: Arc<Mutex<Vec<ChangeEvent>>> = Arc::default();
        let sink = events.clone();
        directory.subscribe(Arc::new(move |e: &ChangeEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
        Env {
            tree,
            directory,
            events,
        }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.tree.path(rel)
    }

    fn event_count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    /// A successful write: exactly one event with this family and payload, no temporary file
    /// left anywhere, and the index equal to a fresh one.
    fn ok(&self, function: WriteFunction, request: Value, family: Family, payload: Value) -> Value {
        self.ok_installed(function, request, None, family, payload)
    }

    fn ok_installed(
        &self,
        function: WriteFunction,
        request: Value,
        installed: Option<&BTreeSet<String>>,
        family: Family,
        payload: Value,
    ) -> Value {
        let before = self.event_count();
        let response = self
            .directory
            .write(function, &request, installed)
            .unwrap_or_else(|e| panic!("{} {request} failed: {e}", function.id()));
        let events = self.events.lock().unwrap();
        assert_eq!(
            events.len(),
            before + 1,
            "{} {request}: exactly one event, got {:?}",
            function.id(),
            &events[before..]
        );
        assert_eq!(events[before].family, family, "{}", function.id());
        assert_eq!(events[before].payload, payload, "{}", function.id());
        drop(events);
        assert_eq!(temp_files(self.tree.base()), Vec::<String>::new());
        assert_matches_fresh(&self.tree, &self.directory);
        response
    }

    /// A failed write: no event, nothing on disk changed, no temporary file.
    fn err(&self, function: WriteFunction, request: Value) -> iii_directory::Error {
        self.err_installed(function, request, None)
    }

    fn err_installed(
        &self,
        function: WriteFunction,
        request: Value,
        installed: Option<&BTreeSet<String>>,
    ) -> iii_directory::Error {
        let disk = snapshot(self.tree.base());
        let before = self.event_count();
        let error = match self.directory.write(function, &request, installed) {
            Ok(v) => panic!("{} {request} should fail, answered {v}", function.id()),
            Err(e) => e,
        };
        assert_eq!(
            self.event_count(),
            before,
            "{} {request}: a failed write publishes nothing",
            function.id()
        );
        assert_eq!(
            snapshot(self.tree.base()),
            disk,
            "{} {request}: a failed write changes nothing on disk",
            function.id()
        );
        error
    }

    /// The error's code and its whole message.
    fn coded(&self, function: WriteFunction, request: Value) -> (Option<&'static str>, String) {
        let e = self.err(function, request);
        (e.code(), e.to_string())
    }

    fn read(&self, function: ReadFunction, request: Value) -> Value {
        common::call(&self.directory, function, request)
    }

    fn read_err(&self, function: ReadFunction, request: Value) -> String {
        common::call_err(&self.directory, function, request)
    }
}

/// Every file and folder under the base (the index folder excepted), with file contents.
fn snapshot(base: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if child == "data" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{child}/"), None);
                walk(&entry.path(), &child, out);
            } else {
                out.insert(child, Some(fs::read(entry.path()).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(base, "", &mut out);
    out
}

/// Temporary files under the base.
fn temp_files(base: &Path) -> Vec<String> {
    snapshot(base)
        .into_keys()
        .filter(|k| k.ends_with(".tmp"))
        .collect()
}

fn text(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn names(value: &Value, list: &str, key: &str) -> Vec<String> {
    value[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[key].as_str().unwrap().to_string())
        .collect()
}

fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

/// Every read answer of `directory` equals the answer of a fresh index built from scratch.
fn assert_matches_fresh(_tree: &Tree, directory: &Directory) {
    let fresh_dir = tempfile::tempdir().unwrap();
    let mut config = directory.config().clone();
    config.paths.index_path = fresh_dir.path().join("fresh.redb");
    let fresh = Directory::open(config).unwrap();
    fresh.reconcile().unwrap();
    let (ours, theirs) = (dump(directory), dump(&fresh));
    if ours != theirs {
        let keys: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        let mut diff = String::new();
        for key in keys {
            if ours.get(key) != theirs.get(key) {
                let show = |v: Option<&Value>| {
                    let s = v.map_or("(absent)".to_string(), |v| v.to_string());
                    s.chars().take(600).collect::<String>()
                };
                diff.push_str(&format!(
                    "\n{key}:\n  index: {}\n  fresh: {}",
                    show(ours.get(key)),
                    show(theirs.get(key))
                ));
            }
        }
        panic!("index != fresh index:{diff}");
    }
}

/// Every read answer, keyed by call.
fn dump(directory: &Directory) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let read = |f: ReadFunction, r: Value| match directory.read(f, &r, None) {
        Ok(v) => v,
        Err(e) => json!({ "error": e.to_string() }),
    };
    let list = read(ReadFunction::SkillsList, json!({}));
    for id in names(&list, "skills", "id") {
        out.insert(
            format!("skills::get {id}"),
            read(ReadFunction::SkillsGet, json!({"id": id, "raw": true})),
        );
    }
    out.insert("skills::list".into(), list);
    out.insert(
        "skills::index".into(),
        read(ReadFunction::SkillsIndex, json!({})),
    );
    let prompts = read(ReadFunction::SystemPromptsList, json!({}));
    for name in names(&prompts, "prompts", "name") {
        out.insert(
            format!("system-prompts::get {name}"),
            read(
                ReadFunction::SystemPromptsGet,
                json!({"name": name, "raw": true}),
            ),
        );
    }
    out.insert("system-prompts::list".into(), prompts);
    let agents = read(ReadFunction::AgentsList, json!({}));
    for id in names(&agents, "agents", "id") {
        out.insert(
            format!("agents::get {id}"),
            read(ReadFunction::AgentsGet, json!({"id": id, "raw": true})),
        );
    }
    out.insert("agents::list".into(), agents);
    out.insert(
        "skipped".into(),
        serde_json::to_value(directory.skipped().unwrap()).unwrap(),
    );
    out
}

const BODY: &str = "# Heading\n\nSome body text.\n";

fn skill_event(op: &str, id: &str) -> Value {
    json!({"op": op, "namespace": id.split('/').next().unwrap(), "id": id})
}

fn named_event(op: &str, name: &str) -> Value {
    json!({"op": op, "name": name})
}

/// The standard tree most tests start from.
fn standard(tree: &Tree) {
    tree.write(
        "skills/mailer/index.md",
        "---\ntitle: Mailer\ntype: index\n---\n# Mailer\n\nSend mail.\n",
    )
    .write("skills/mailer/send.md", "# Send\n\nSend one mail.\n")
    .write("skills/mailer/spend.md", "# Spend\n\nSpend.\n")
    .write("skills/mailer/sender.md", "# Sender\n\nSender.\n")
    .write("skills/kit/SKILL.md", "# Kit\n\nA kit.\n")
    .write("skills/shell/index.md", "# Global shell\n\nGlobal.\n")
    .write("skills/shell/exec.md", "# Global exec\n\nGlobal exec.\n")
    .write("skills/iii/shell/index.md", "# Local shell\n\nLocal.\n")
    .write(
        ".agents/skills/impeccable/SKILL.md",
        "---\nname: impeccable\ndescription: Polish.\n---\nPolish things.\n",
    );
}

// ---------------------------------------------------------------------------------------------
// skills::create
// ---------------------------------------------------------------------------------------------

#[test]
fn skills_create_success_response_event_and_read_your_writes() {
    let env = Env::new(standard);
    let content = "---\ntitle: '  Fresh title  '\ntype: how-to\nfunction_id: mailer::send\n---\n# H1 ignored\n\nBody.\n";
    let response = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "mailer/fresh", "content": content}),
        Family::Skills,
        skill_event("create", "mailer/fresh"),
    );
    assert_eq!(
        keys(&response),
        ["bytes", "function_id", "id", "modified_at", "title", "type"]
    );
    assert_eq!(response["id"], "mailer/fresh");
    assert_eq!(response["title"], "Fresh title");
    assert_eq!(response["type"], "how-to");
    assert_eq!(response["function_id"], "mailer::send");
    assert_eq!(response["bytes"], content.len());
    let path = env.path("skills/mailer/fresh.md");
    assert_eq!(text(&path), content);
    // Read your writes: no reconcile in between.
    let got = env.read(ReadFunction::SkillsGet, json!({"id": "mailer/fresh"}));
    assert_eq!(got["title"], "Fresh title");
    assert_eq!(got["body"], "# H1 ignored\n\nBody.\n");
    assert_eq!(got["path"], path.display().to_string());
    assert_eq!(got["modified_at"], response["modified_at"]);
    assert!(!response["modified_at"].as_str().unwrap().is_empty());
    let listed = env.read(ReadFunction::SkillsList, json!({"prefix": "mailer/fresh"}));
    assert_eq!(names(&listed, "skills", "id"), ["mailer/fresh"]);
    assert_eq!(listed["skills"][0]["bytes"], content.len());

    // Title fallbacks in the response: name, then H1, then the id; type/function_id null.
    let by_name = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "named", "content": "---\nname: By name\n---\n# H1\n\nx\n"}),
        Family::Skills,
        skill_event("create", "named"),
    );
    assert_eq!(by_name["title"], "By name");
    assert_eq!(by_name["type"], Value::Null);
    assert_eq!(by_name["function_id"], Value::Null);
    let by_h1 = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "headed", "content": "Intro.\n\n# The H1\n\nx\n"}),
        Family::Skills,
        skill_event("create", "headed"),
    );
    assert_eq!(by_h1["title"], "The H1");
    let by_id = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "deep/er/plain", "content": "no heading at all\n"}),
        Family::Skills,
        skill_event("create", "deep/er/plain"),
    );
    assert_eq!(by_id["title"], "deep/er/plain");
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "deep/er/plain"}))["title"],
        "deep/er/plain"
    );

    // Normalized input forms: `iii://` and `.md` are stripped; a bare namespace creates the
    // file `<ns>.md` (not `<ns>/index.md`).
    let normalized = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "iii://fromuri.md", "content": BODY}),
        Family::Skills,
        skill_event("create", "fromuri"),
    );
    assert_eq!(normalized["id"], "fromuri");
    assert!(env.path("skills/fromuri.md").is_file());
    let overview = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "newns/SKILL.md", "content": BODY}),
        Family::Skills,
        skill_event("create", "newns/index"),
    );
    assert_eq!(overview["id"], "newns/index");
    assert!(env.path("skills/newns/index.md").is_file());
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "newns"}))["id"],
        "newns"
    );
}

#[test]
fn skills_create_d112_and_plain_id_errors() {
    let env = Env::new(standard);
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "database::execute", "content": BODY}),
    );
    assert_eq!(code, Some("D112"));
    assert_eq!(
        message,
        "D112 invalid_input: \"database::execute\" looks like a FUNCTION id (service::name), not a skill id. Skill ids use '/' (e.g. \"database/index\"). To CALL that function pass the id to agent_trigger; to READ its skill doc, look up the skill id. Next: call directory::skills::list to browse skill ids; or call directory::skills::index to see the per-worker overview."
    );
    let plain = [
        ("", "id must be non-empty"),
        ("   ", "id must be non-empty"),
        (
            "/lead",
            "id may not have a leading or trailing '/': \"/lead\"",
        ),
        (
            "trail/",
            "id may not have a leading or trailing '/': \"trail/\"",
        ),
        (
            "a//b",
            "invalid id (segment 2 of \"a//b\"): segment must be non-empty",
        ),
        (
            "Upper/x",
            "invalid id (segment 1 of \"Upper/x\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"Upper\"",
        ),
        (
            "../etc/passwd",
            "invalid id (segment 1 of \"../etc/passwd\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"..\"",
        ),
        (
            "https://example.com/x",
            "Invalid id (must be a bare skill path, a path ending in .md, or an iii:// URI): https://example.com/x",
        ),
    ];
    for (id, expected) in plain {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, None, "{id:?}: {message}");
        assert_eq!(message, expected, "{id:?}");
    }
    let long = "a".repeat(65);
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": long, "content": BODY}),
    );
    assert_eq!(code, None);
    assert!(
        message.contains("segment too long (65 chars; max 64)"),
        "{message}"
    );
    // Missing fields are a request error, not a panic.
    let e = env.err(WriteFunction::SkillsCreate, json!({"id": "x"}));
    assert!(e.to_string().starts_with("invalid request:"), "{e}");
}

#[test]
fn skills_create_d115_variants() {
    let env = Env::new(standard);
    let root = env.path(".agents/skills");
    let cases = [
        (
            "ns/prompts/foo",
            "D115 invalid_input: id \"ns/prompts/foo\" contains the reserved `prompts` path segment; rename that segment before creating the skill.",
        ),
        (
            "prompts/foo",
            "D115 invalid_input: id \"prompts/foo\" contains the reserved `prompts` path segment; rename that segment before creating the skill.",
        ),
        (
            "ns/system-prompts/foo",
            "D115 invalid_input: id \"ns/system-prompts/foo\" contains a `system-prompts` path segment, which the scanner classifies as a prompt — the created file would be invisible to directory::skills::list. Use directory::system-prompts::create for prompt files.",
        ),
        (
            "agents/foo",
            "D115 invalid_input: id \"agents/foo\" contains an `agents` path segment, which the scanner classifies as an agent — the created file would be invisible to directory::skills::list. Use directory::agents::create for agent profiles.",
        ),
        (
            "ns/agents/foo",
            "D115 invalid_input: id \"ns/agents/foo\" contains an `agents` path segment, which the scanner classifies as an agent — the created file would be invisible to directory::skills::list. Use directory::agents::create for agent profiles.",
        ),
    ];
    for (id, expected) in cases {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}");
        assert_eq!(message, expected, "{id}");
    }
    // A multi-segment id under an agents-skills namespace.
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "impeccable/extra", "content": BODY}),
    );
    assert_eq!(code, Some("D115"));
    assert_eq!(
        message,
        format!(
            "D115 invalid_input: namespace \"impeccable\" is reserved by a system-installed skill under an agents skills root ({}); edit it with its owning tool, or copy it into skills_folder on disk to fork it.",
            root.display()
        )
    );
    // filter_unregistered with a known installed set hides `ghost/…`.
    let installed: BTreeSet<String> = ["mailer".to_string()].into();
    let e = env.err_installed(
        WriteFunction::SkillsCreate,
        json!({"id": "ghost/doc", "content": BODY}),
        Some(&installed),
    );
    assert_eq!(e.code(), Some("D115"));
    assert_eq!(
        e.to_string(),
        "D115 invalid_input: id \"ghost/doc\" would be hidden by filter_unregistered: its top namespace segment \"ghost\" is not an installed worker. Use a single-segment id, install the worker first, or set filter_unregistered: false."
    );
    // Without a known set nothing is hidden, so the same id is fine.
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "ghost/doc", "content": BODY}),
        Family::Skills,
        skill_event("create", "ghost/doc"),
    );
    // Exempt or installed namespaces pass with the set.
    for id in ["solo", "mailer/extra", "iii/note"] {
        env.ok_installed(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
            Some(&installed),
            Family::Skills,
            skill_event("create", id),
        );
        let got = env
            .directory
            .read(
                ReadFunction::SkillsGet,
                &json!({"id": id}),
                Some(&installed),
            )
            .unwrap();
        assert_eq!(got["body"], BODY, "{id}");
    }
}

#[test]
fn skills_create_in_directory_namespace_passes_the_filter() {
    let env = Env::new(standard);
    let installed: BTreeSet<String> = BTreeSet::new();
    env.ok_installed(
        WriteFunction::SkillsCreate,
        json!({"id": "directory/note", "content": BODY}),
        Some(&installed),
        Family::Skills,
        skill_event("create", "directory/note"),
    );
    assert!(env.path("skills/directory/note.md").is_file());
    let got = env
        .directory
        .read(
            ReadFunction::SkillsGet,
            &json!({"id": "directory/note"}),
            Some(&installed),
        )
        .unwrap();
    assert_eq!(got["body"], BODY);
}

#[test]
fn skills_create_d114_visible_alias_agents_and_skipped_file() {
    let env = Env::new(|t| {
        standard(t);
        // A global file in a namespace the local root shadows: on disk, but skipped.
        t.write("skills/shell/hidden.md", "# Hidden\n\nx\n");
    });
    let next = " Next: call directory::skills::update to edit the existing skill; or call directory::skills::list to browse skill ids.";
    for (id, shown) in [
        ("mailer/send", "mailer/send"),
        ("mailer", "mailer"), // `<id>/index` alias
        ("mailer/index", "mailer/index"),
        ("kit", "kit"),                                 // `kit/SKILL.md`
        ("impeccable", "impeccable"),                   // agents skill, via the alias
        ("shell", "shell"),                             // the local overview
        ("iii-directory/index", "iii-directory/index"), // bundled
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D114"), "{id}: {message}");
        assert_eq!(
            message,
            format!("D114 invalid_input: skill \"{shown}\" already exists.{next}")
        );
    }
    let path = env.path("skills/shell/hidden.md");
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "shell/hidden", "content": BODY}),
    );
    assert_eq!(code, Some("D114"));
    assert_eq!(
        message,
        format!(
            "D114 invalid_input: a file already exists at {} (currently skipped by the scanner); edit or remove it on disk.{next}",
            path.display()
        )
    );
    assert_eq!(text(&path), "# Hidden\n\nx\n");
    // D114 comes before the content checks.
    let (code, _) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "mailer/send", "content": ""}),
    );
    assert_eq!(code, Some("D114"));
}

#[test]
fn skills_create_d113_too_large_and_empty_body() {
    let env = Env::new(standard);
    let big = format!("# Big\n\n{}", "x".repeat(262_144));
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "big", "content": big}),
    );
    assert_eq!(code, Some("D113"));
    assert_eq!(
        message,
        format!(
            "D113 invalid_input: content is too large ({} bytes; max 262144).",
            big.len()
        )
    );
    // Exactly at the cap is fine.
    let exact = format!("# Cap\n\n{}", "y".repeat(262_144 - 7));
    assert_eq!(exact.len(), 262_144);
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "cap", "content": exact}),
        Family::Skills,
        skill_event("create", "cap"),
    );
    let empty = "D113 invalid_input: content has an empty body after the frontmatter block; readers reject empty bodies.";
    for content in [
        "",
        "\n\n",
        " \t\n",
        "---\ntitle: x\n---\n",
        "---\ntitle: x\n---\n \n\t\n",
        "---\ntitle: x\n---",
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": "empty", "content": content}),
        );
        assert_eq!(code, Some("D113"), "{content:?}");
        assert_eq!(message, empty, "{content:?}");
    }
    assert!(!env.path("skills/empty.md").exists());
}

#[test]
fn skills_create_lands_in_skills_folder_even_in_a_local_namespace() {
    let env = Env::new(standard);
    // `shell` is a local namespace (skills/iii/shell): the file still goes to skills_folder,
    // where the local namespace shadows it.
    let response = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "shell/newcmd", "content": BODY}),
        Family::Skills,
        skill_event("create", "shell/newcmd"),
    );
    assert_eq!(response["id"], "shell/newcmd");
    assert_eq!(text(&env.path("skills/shell/newcmd.md")), BODY);
    assert!(!env.path("skills/iii/shell/newcmd.md").exists());
    let skipped = env.directory.skipped().unwrap();
    assert!(
        skipped
            .iter()
            .any(|s| s.path.ends_with("skills/shell/newcmd.md") && s.reason.contains("shadowed")),
        "{skipped:?}"
    );
    // And, being shadowed, a second create of the same id meets the file on disk.
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "shell/newcmd", "content": BODY}),
    );
    assert_eq!(code, Some("D114"));
    assert!(
        message.contains("currently skipped by the scanner"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// skills::update
// ---------------------------------------------------------------------------------------------

#[test]
fn skills_update_never_creates_d110_with_suggestions() {
    let env = Env::new(standard);
    let (code, message) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "mailer/sen", "content": BODY}),
    );
    assert_eq!(code, Some("D110"));
    assert_eq!(
        message,
        "D110 not_found: skill \"mailer/sen\" does not exist. Did you mean: mailer/send, mailer/spend, mailer/sender. Next: call directory::skills::list to browse skill ids; or call directory::skills::download to materialize a missing bundle first; or call directory::skills::create to author a new skill."
    );
    assert!(!env.path("skills/mailer/sen.md").exists());
    // Content is checked before the id resolves (D113 wins over D110).
    let (code, _) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "nowhere", "content": "---\na: b\n---\n"}),
    );
    assert_eq!(code, Some("D113"));
    let (code, _) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "x::y", "content": BODY}),
    );
    assert_eq!(code, Some("D112"));
    // A global file shadowed by a local namespace is not visible: update does not reach it.
    let (code, _) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "shell/exec", "content": BODY}),
    );
    assert_eq!(code, Some("D110"));
    // Hidden by filter_unregistered ⇒ not found either.
    let installed: BTreeSet<String> = BTreeSet::new();
    let e = env.err_installed(
        WriteFunction::SkillsUpdate,
        json!({"id": "mailer/send", "content": BODY}),
        Some(&installed),
    );
    assert_eq!(e.code(), Some("D110"), "{e}");
}

#[test]
fn skills_update_d110_suggestions_use_display_ids() {
    let env = Env::new(|t| {
        t.write("skills/alpha/index.md", "# Alpha\n\nx\n");
    });
    let (code, message) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "alpha/missing", "content": BODY}),
    );
    assert_eq!(code, Some("D110"));
    // Contract §3.1: display ids apply to suggestion lists (`alpha/index` shows as `alpha`).
    assert!(
        message.contains("Did you mean: alpha,") || message.contains("Did you mean: alpha."),
        "{message}"
    );
}

#[test]
fn skills_update_d116_agents_skills_and_bundled() {
    let env = Env::new(standard);
    let root = env.path(".agents/skills");
    for id in ["impeccable", "impeccable/index", "impeccable/SKILL.md"] {
        let normalized = if id == "impeccable/SKILL.md" {
            "impeccable/index"
        } else {
            id
        };
        let expected = format!(
            "D116 invalid_input: skill \"{normalized}\" is system-installed under an agents skills root ({}) and read-only; edit it with its owning tool, or copy it into skills_folder on disk to fork it.",
            root.display()
        );
        let (code, message) = env.coded(
            WriteFunction::SkillsUpdate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D116"), "{id}");
        assert_eq!(message, expected, "{id}");
        let (code, message) = env.coded(WriteFunction::SkillsDelete, json!({"id": id}));
        assert_eq!(code, Some("D116"), "{id}");
        assert_eq!(message, expected, "{id}");
    }
    assert!(env.path(".agents/skills/impeccable/SKILL.md").is_file());
    // Bundled `iii-directory/*` skills are read-only too.
    for id in [
        "iii-directory/index",
        "iii-directory",
        "iii-directory/authoring-skills",
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsUpdate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D116"), "{id}: {message}");
        assert!(message.contains("read-only"), "{message}");
        let (code, _) = env.coded(WriteFunction::SkillsDelete, json!({"id": id}));
        assert_eq!(code, Some("D116"), "{id}");
    }
    assert!(!env.path("skills/directory").exists());
}

#[test]
fn skills_update_writes_the_resolved_file_and_answers_the_input_id() {
    let env = Env::new(|t| {
        standard(t);
        t.write("skills/alias/index.md", "# Old alias\n\nold\n");
    });
    // `mailer` ⇒ mailer/index.md; the response and event carry the normalized input `mailer`.
    let content = "---\ntitle: New mailer\ntype: index\n---\nnew body\n";
    let response = env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "mailer", "content": content}),
        Family::Skills,
        skill_event("update", "mailer"),
    );
    assert_eq!(
        keys(&response),
        ["bytes", "function_id", "id", "modified_at", "title", "type"]
    );
    assert_eq!(response["id"], "mailer");
    assert_eq!(response["title"], "New mailer");
    assert_eq!(response["type"], "index");
    assert_eq!(response["bytes"], content.len());
    assert_eq!(text(&env.path("skills/mailer/index.md")), content);
    assert!(!env.path("skills/mailer.md").exists());
    let got = env.read(
        ReadFunction::SkillsGet,
        json!({"id": "mailer", "raw": true}),
    );
    assert_eq!(got["raw"], content);
    assert_eq!(got["title"], "New mailer");
    assert_eq!(got["modified_at"], response["modified_at"]);
    // `kit` ⇒ kit/SKILL.md.
    env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "kit", "content": "# Kit v2\n\nv2\n"}),
        Family::Skills,
        skill_event("update", "kit"),
    );
    assert_eq!(text(&env.path("skills/kit/SKILL.md")), "# Kit v2\n\nv2\n");
    assert!(!env.path("skills/kit/index.md").exists());
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "kit"}))["title"],
        "Kit v2"
    );
    // Other input forms normalize: `iii://`, `.md`, `/SKILL.md`.
    let r = env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "iii://alias/SKILL.md", "content": "# A2\n\nx\n"}),
        Family::Skills,
        skill_event("update", "alias/index"),
    );
    assert_eq!(r["id"], "alias/index");
    assert_eq!(text(&env.path("skills/alias/index.md")), "# A2\n\nx\n");
    let r = env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "mailer/send.md", "content": "# Send v2\n\nx\n"}),
        Family::Skills,
        skill_event("update", "mailer/send"),
    );
    assert_eq!(r["id"], "mailer/send");
    // The local overview of a local namespace is written in the local root.
    env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "shell", "content": "# Local shell v2\n\nx\n"}),
        Family::Skills,
        skill_event("update", "shell"),
    );
    assert_eq!(
        text(&env.path("skills/iii/shell/index.md")),
        "# Local shell v2\n\nx\n"
    );
    assert_eq!(
        text(&env.path("skills/shell/index.md")),
        "# Global shell\n\nGlobal.\n"
    );
    // An update that empties the body, or is too big, is refused and leaves the file alone.
    let (code, _) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "kit", "content": "---\ntitle: x\n---\n\n"}),
    );
    assert_eq!(code, Some("D113"));
    let (code, _) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "kit", "content": "z".repeat(262_145)}),
    );
    assert_eq!(code, Some("D113"));
    assert_eq!(text(&env.path("skills/kit/SKILL.md")), "# Kit v2\n\nv2\n");
}

#[test]
fn skills_update_of_a_file_the_scanner_cannot_serve_is_allowed() {
    // An empty-body file is listed (with defaults) but not served; update repairs it.
    let env = Env::new(|t| {
        t.write("skills/broken.md", "---\ntitle: Broken\n---\n");
    });
    assert!(
        env.read_err(ReadFunction::SkillsGet, json!({"id": "broken"}))
            .contains("empty body")
    );
    env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "broken", "content": "# Fixed\n\nok\n"}),
        Family::Skills,
        skill_event("update", "broken"),
    );
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "broken"}))["title"],
        "Fixed"
    );
}

#[test]
fn skills_update_store_failure_leaves_no_temporary_file() {
    let env = Env::new(standard);
    // Behind the library's back the file becomes a folder: disk is the truth, so the skill is
    // missing (nothing is written over the folder).
    let path = env.path("skills/mailer/send.md");
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    let e = env.err(
        WriteFunction::SkillsUpdate,
        json!({"id": "mailer/send", "content": BODY}),
    );
    assert_eq!(e.code(), Some("D110"), "{e}");
    assert!(path.is_dir());
    assert_eq!(temp_files(env.tree.base()), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// skills::delete
// ---------------------------------------------------------------------------------------------

#[test]
fn skills_delete_answers_the_resolved_id_and_removes_empty_parents() {
    let env = Env::new(|t| {
        standard(t);
        t.write("skills/deep/a/b/c.md", "# C\n\nx\n");
        t.write("skills/deep/keep.md", "# Keep\n\nx\n");
    });
    let response = env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "mailer"}),
        Family::Skills,
        skill_event("delete", "mailer/index"),
    );
    assert_eq!(response, json!({"id": "mailer/index"}));
    assert!(!env.path("skills/mailer/index.md").exists());
    assert!(env.path("skills/mailer/send.md").exists());
    let message = env.read_err(ReadFunction::SkillsGet, json!({"id": "mailer"}));
    assert!(message.starts_with("D110"), "{message}");
    // `kit` ⇒ kit/SKILL.md ⇒ id kit/index; the emptied folder goes too.
    let response = env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "kit"}),
        Family::Skills,
        skill_event("delete", "kit/index"),
    );
    assert_eq!(response, json!({"id": "kit/index"}));
    assert!(!env.path("skills/kit").exists());
    // Empty parents are removed up to the first non-empty folder.
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "deep/a/b/c.md"}),
        Family::Skills,
        skill_event("delete", "deep/a/b/c"),
    );
    assert!(!env.path("skills/deep/a").exists());
    assert!(env.path("skills/deep/keep.md").exists());
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "deep/keep"}),
        Family::Skills,
        skill_event("delete", "deep/keep"),
    );
    assert!(!env.path("skills/deep").exists());
    // Never a root.
    for id in [
        "mailer/send",
        "mailer/spend",
        "mailer/sender",
        "shell/index",
    ] {
        let resolved = env
            .directory
            .write(WriteFunction::SkillsDelete, &json!({"id": id}), None)
            .unwrap();
        assert_eq!(resolved["id"], id);
    }
    assert!(env.path("skills").is_dir());
    assert!(env.path("skills/iii").is_dir());
    assert_matches_fresh(&env.tree, &env.directory);
    // Deleting again is a D110.
    let (code, message) = env.coded(WriteFunction::SkillsDelete, json!({"id": "mailer/send"}));
    assert_eq!(code, Some("D110"));
    assert!(
        message.ends_with("Next: call directory::skills::list to browse skill ids; or call directory::skills::download to materialize a missing bundle first; or call directory::skills::create to author a new skill."),
        "{message}"
    );
}

#[test]
fn skills_delete_of_the_last_local_file_keeps_the_local_root() {
    let env = Env::new(|t| {
        t.write("skills/iii/note.md", "# Note\n\nx\n");
    });
    // The local root's top-level file is `note` (local) and also `iii/note` (global view).
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "note"}),
        Family::Skills,
        skill_event("delete", "note"),
    );
    assert!(env.path("skills/iii").is_dir(), "the local root stays");
    assert!(env.path("skills").is_dir());
}

#[test]
fn skills_delete_of_the_last_file_keeps_skills_folder() {
    // With the local root outside skills_folder, the global root can become empty.
    let env = Env::with_config(
        |t| {
            t.remove("skills/iii");
            t.write("skills/ns/only.md", "# Only\n\nx\n");
            t.write("local/loc/only.md", "# Local only\n\nx\n");
            // Keeps the tree from becoming empty (see `a_fresh_index_of_an_empty_tree_…`).
            t.write("agents/keep.md", "---\nname: Keep\n---\nx\n");
        },
        |c| c.paths.local_skills_folder = c.paths.skills_folder.with_file_name("local"),
    );
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "ns/only"}),
        Family::Skills,
        skill_event("delete", "ns/only"),
    );
    assert!(env.path("skills").is_dir(), "skills_folder stays");
    assert_eq!(fs::read_dir(env.path("skills")).unwrap().count(), 0);
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "loc/only"}),
        Family::Skills,
        skill_event("delete", "loc/only"),
    );
    assert!(env.path("local").is_dir(), "local_skills_folder stays");
    assert_eq!(fs::read_dir(env.path("local")).unwrap().count(), 0);
}

#[test]
fn a_fresh_index_of_an_empty_tree_serves_the_bundled_skills() {
    let tree = Tree::new();
    let directory = tree.open();
    let ids = common::skill_ids(&directory);
    assert!(ids.contains(&"iii-directory".to_string()), "{ids:?}");
    let index = common::call(&directory, ReadFunction::SkillsIndex, json!({}));
    assert_eq!(index["workers_count"], 1, "{index}");
}

#[test]
fn skills_delete_through_the_global_view_keeps_the_local_root() {
    let env = Env::new(|t| {
        t.write("skills/iii/note.md", "# Note\n\nx\n");
        t.write("agents/keep.md", "---\nname: Keep\n---\nx\n");
    });
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "iii/note"}),
        Family::Skills,
        skill_event("delete", "iii/note"),
    );
    assert!(
        env.path("skills/iii").is_dir(),
        "local_skills_folder was removed by a delete"
    );
}

#[test]
fn skills_delete_of_a_local_namespace_stops_shadowing_the_global_one() {
    let env = Env::new(standard);
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "shell"}))["body"],
        "# Local shell\n\nLocal.\n"
    );
    assert!(
        env.read_err(ReadFunction::SkillsGet, json!({"id": "shell/exec"}))
            .starts_with("D110")
    );
    let response = env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "shell"}),
        Family::Skills,
        skill_event("delete", "shell/index"),
    );
    assert_eq!(response, json!({"id": "shell/index"}));
    assert!(!env.path("skills/iii/shell").exists());
    assert!(env.path("skills/iii").is_dir());
    // The global namespace is back, at once.
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "shell"}))["body"],
        "# Global shell\n\nGlobal.\n"
    );
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "shell/exec"}))["title"],
        "Global exec"
    );
}

#[test]
fn skills_delete_errors() {
    let env = Env::new(standard);
    let (code, _) = env.coded(WriteFunction::SkillsDelete, json!({"id": "a::b"}));
    assert_eq!(code, Some("D112"));
    let (code, message) = env.coded(WriteFunction::SkillsDelete, json!({"id": "/x"}));
    assert_eq!(code, None);
    assert!(message.contains("leading or trailing"), "{message}");
    let (code, message) = env.coded(WriteFunction::SkillsDelete, json!({"id": "mailer/sen"}));
    assert_eq!(code, Some("D110"));
    assert!(
        message.contains("Did you mean: mailer/send, mailer/spend, mailer/sender."),
        "{message}"
    );
    // A shadowed global file is invisible, so delete does not reach it.
    let (code, _) = env.coded(WriteFunction::SkillsDelete, json!({"id": "shell/exec"}));
    assert_eq!(code, Some("D110"));
    assert!(env.path("skills/shell/exec.md").exists());
}

// ---------------------------------------------------------------------------------------------
// system-prompts
// ---------------------------------------------------------------------------------------------

const PIRATE: &str = "---\ndescription: Talk like a pirate\n---\nArr.\n";

fn prompts_tree(t: &Tree) {
    t.write(
        "skills/system-prompts/helper.md",
        "---\nname: helper\ndescription: Helps.\n---\nHelp.\n",
    )
    .write("skills/system-prompts/broken.md", "no frontmatter here\n");
}

#[test]
fn system_prompts_create_update_delete() {
    let env = Env::new(prompts_tree);
    let response = env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pirate", "content": PIRATE}),
        Family::SystemPrompts,
        named_event("create", "pirate"),
    );
    assert_eq!(
        keys(&response),
        ["bytes", "description", "modified_at", "name"]
    );
    assert_eq!(response["name"], "pirate");
    assert_eq!(response["description"], "Talk like a pirate");
    assert_eq!(response["bytes"], PIRATE.len());
    let path = env.path("skills/system-prompts/pirate.md");
    assert_eq!(text(&path), PIRATE);
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "pirate", "raw": true}),
    );
    assert_eq!(got["body"], "Arr.\n");
    assert_eq!(got["raw"], PIRATE);
    assert_eq!(got["modified_at"], response["modified_at"]);
    assert!(got.get("builtin").is_none());

    // Declared name equal to the request is fine on create.
    env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "named", "content": "---\nname: named\ndescription: D\n---\nx\n"}),
        Family::SystemPrompts,
        named_event("create", "named"),
    );

    let v2 = "---\ndescription: Pirate v2\n---\nArr arr.\n";
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": v2}),
        Family::SystemPrompts,
        named_event("update", "pirate"),
    );
    assert_eq!(response["name"], "pirate");
    assert_eq!(response["description"], "Pirate v2");
    assert_eq!(text(&path), v2);
    assert_eq!(
        env.read(ReadFunction::SystemPromptsGet, json!({"name": "pirate"}))["body"],
        "Arr arr.\n"
    );

    // Rename via the declared name: the file stays, the prompt's name changes.
    let renamed = "---\nname: corsair\ndescription: Now a corsair\n---\nYo.\n";
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "pirate", "content": renamed}),
        Family::SystemPrompts,
        named_event("update", "corsair"),
    );
    assert_eq!(response["name"], "corsair");
    assert_eq!(text(&path), renamed);
    let listed = env.read(ReadFunction::SystemPromptsList, json!({}));
    let listed_names = names(&listed, "prompts", "name");
    assert!(listed_names.contains(&"corsair".to_string()));
    assert!(!listed_names.contains(&"pirate".to_string()));
    assert!(
        env.read_err(ReadFunction::SystemPromptsGet, json!({"name": "pirate"}))
            .starts_with("D210")
    );

    let response = env.ok(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "corsair"}),
        Family::SystemPrompts,
        named_event("delete", "corsair"),
    );
    assert_eq!(response, json!({"name": "corsair"}));
    assert!(!path.exists());
    // No parent cleanup for prompts, but the folder still holds the others anyway.
    assert!(env.path("skills/system-prompts").is_dir());
    assert!(
        env.read_err(ReadFunction::SystemPromptsGet, json!({"name": "corsair"}))
            .starts_with("D210")
    );
}

#[test]
fn system_prompts_errors() {
    let env = Env::new(prompts_tree);
    let next_list = " Next: call directory::system-prompts::list to browse system prompt names.";
    // D210 on update and delete, with the closest file names.
    for function in [
        WriteFunction::SystemPromptsUpdate,
        WriteFunction::SystemPromptsDelete,
    ] {
        let (code, message) = env.coded(function, json!({"name": "helpr", "content": PIRATE}));
        assert_eq!(code, Some("D210"));
        assert_eq!(
            message,
            format!(
                "D210 not_found: system prompt \"helpr\" does not exist. Did you mean: helper.{next_list}"
            )
        );
    }
    // A bundled prompt without a file has nothing to delete.
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(code, Some("D210"));
    assert!(message.starts_with("D210 not_found: system prompt \"iii-minimal\" does not exist."));

    // Plain name validation.
    for name in ["", "Bad", "a/b", "../x"] {
        let (code, _) = env.coded(
            WriteFunction::SystemPromptsCreate,
            json!({"name": name, "content": PIRATE}),
        );
        assert_eq!(code, None, "{name:?}");
    }

    // D213, each message (create).
    let d213 = [
        (
            "no frontmatter\n",
            "D213 invalid_input: missing YAML frontmatter (expected --- ... --- block at file start).",
        ),
        (
            "---\ndescription: [unclosed\n---\nx\n",
            "D213 invalid_input: invalid frontmatter YAML: ",
        ),
        // The scan would serve this one from its lines, but a write does not create it.
        (
            "---\ndescription: Reviews code: carefully.\n---\nx\n",
            "D213 invalid_input: invalid frontmatter YAML: ",
        ),
        (
            "---\nname: fresh\n---\nx\n",
            "D213 invalid_input: frontmatter is missing a non-empty `description`; the next scan would skip this prompt.",
        ),
        (
            "---\ndescription: '   '\n---\nx\n",
            "D213 invalid_input: frontmatter is missing a non-empty `description`; the next scan would skip this prompt.",
        ),
        (
            "---\nname: Bad Name\ndescription: d\n---\nx\n",
            "D213 invalid_input: frontmatter `name` is invalid (name may only contain lowercase ASCII letters, digits, '-' and '_': \"Bad Name\"); the next scan would skip this prompt.",
        ),
        (
            "---\nname: other\ndescription: d\n---\nx\n",
            "D213 invalid_input: frontmatter `name` (\"other\") must match the requested system prompt name (\"fresh\").",
        ),
    ];
    for (content, expected) in d213 {
        let (code, message) = env.coded(
            WriteFunction::SystemPromptsCreate,
            json!({"name": "fresh", "content": content}),
        );
        assert_eq!(code, Some("D213"), "{content:?}: {message}");
        assert!(message.starts_with(expected), "{content:?}: {message}");
        if !expected.ends_with(": ") {
            assert_eq!(message, expected);
        }
    }
    // D213 on update (declared name invalid; description missing).
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "helper", "content": "---\nname: Nope!\ndescription: d\n---\nx\n"}),
    );
    assert_eq!(code, Some("D213"));
    assert!(
        message.contains("frontmatter `name` is invalid"),
        "{message}"
    );
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "helper", "content": "---\nname: helper\n---\nx\n"}),
    );
    assert_eq!(code, Some("D213"));
    // D113 for prompts.
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "fresh", "content": "---\ndescription: d\n---\n"}),
    );
    assert_eq!(code, Some("D113"));
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "helper", "content": format!("---\ndescription: d\n---\n{}", "x".repeat(262_144))}),
    );
    assert_eq!(code, Some("D113"));

    // D214, both texts.
    let next_conflict = " Next: call directory::system-prompts::update to edit the existing system prompt; or call directory::system-prompts::list to browse system prompt names.";
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "helper", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert_eq!(
        message,
        format!("D214 invalid_input: system prompt \"helper\" already exists.{next_conflict}")
    );
    let broken = env.path("skills/system-prompts/broken.md");
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "broken", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert_eq!(
        message,
        format!(
            "D214 invalid_input: a file already exists at {} (currently skipped by the scanner); edit or remove it on disk.{next_conflict}",
            broken.display()
        )
    );
    assert_eq!(text(&broken), "no frontmatter here\n");
}

#[test]
fn system_prompts_bundled_copy_on_write_and_fallback() {
    let env = Env::new(|_| {});
    let before = env.read(ReadFunction::SystemPromptsList, json!({}));
    let row = before["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "iii-minimal")
        .unwrap()
        .clone();
    assert_eq!(row["builtin"], true);
    assert_eq!(row["modified_at"], "");
    // Declared name must match on copy-on-write.
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": "---\nname: other\ndescription: d\n---\nx\n"}),
    );
    assert_eq!(code, Some("D213"));
    let content = "---\ndescription: My minimal\n---\nMine.\n";
    let response = env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": content}),
        Family::SystemPrompts,
        named_event("update", "iii-minimal"),
    );
    assert_eq!(response["name"], "iii-minimal");
    let path = env.path("skills/system-prompts/iii-minimal.md");
    assert_eq!(text(&path), content);
    let listed = env.read(ReadFunction::SystemPromptsList, json!({}));
    let row = listed["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "iii-minimal")
        .unwrap()
        .clone();
    assert!(row.get("builtin").is_none(), "{row}");
    assert_eq!(row["description"], "My minimal");
    assert_eq!(row["modified_at"], response["modified_at"]);
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(got["body"], "Mine.\n");
    // An ordinary update of it now.
    env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": "---\ndescription: v3\n---\nv3\n"}),
        Family::SystemPrompts,
        named_event("update", "iii-minimal"),
    );
    // Delete falls back to the bundled prompt.
    env.ok(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "iii-minimal"}),
        Family::SystemPrompts,
        named_event("delete", "iii-minimal"),
    );
    assert!(!path.exists());
    assert_eq!(env.read(ReadFunction::SystemPromptsList, json!({})), before);
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(got["builtin"], true);
    let (code, _) = env.coded(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "iii-minimal"}),
    );
    assert_eq!(code, Some("D210"));
    // Creating a bundled name is allowed and shadows it.
    env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "iii-runtime", "content": "---\ndescription: Mine\n---\nr\n"}),
        Family::SystemPrompts,
        named_event("create", "iii-runtime"),
    );
    let got = env.read(
        ReadFunction::SystemPromptsGet,
        json!({"name": "iii-runtime"}),
    );
    assert!(got.get("builtin").is_none());
    assert_eq!(got["body"], "r\n");
}

#[test]
fn system_prompts_bundled_update_with_a_skipped_file_in_the_way_is_d214() {
    let env = Env::new(|t| {
        t.write("skills/system-prompts/iii-minimal.md", "not a prompt\n");
    });
    let path = env.path("skills/system-prompts/iii-minimal.md");
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "iii-minimal", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert!(
        message.starts_with(&format!(
            "D214 invalid_input: a file already exists at {} (currently skipped by the scanner)",
            path.display()
        )),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// agents
// ---------------------------------------------------------------------------------------------

const CAPTAIN: &str =
    "---\nname: Captain\ndescription: Leads releases.\nlogo: \"🚀\"\n---\nYou lead.\n";

fn agents_tree(t: &Tree) {
    t.write("agents/helper.md", "---\nname: Helper\n---\nHelp.\n")
        .write("agents/broken.md", "no frontmatter\n")
        .write("agents/sub/nested.md", "---\nname: Nested\n---\nx\n");
}

#[test]
fn agents_create_update_delete() {
    let env = Env::new(agents_tree);
    let response = env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "captain", "content": CAPTAIN}),
        Family::Agents,
        named_event("create", "captain"),
    );
    assert_eq!(
        keys(&response),
        ["bytes", "description", "id", "logo", "modified_at", "name"]
    );
    assert_eq!(response["id"], "captain");
    assert_eq!(response["name"], "Captain");
    assert_eq!(response["description"], "Leads releases.");
    assert_eq!(response["logo"], "🚀");
    assert_eq!(response["bytes"], CAPTAIN.len());
    let path = env.path("agents/captain.md");
    assert_eq!(text(&path), CAPTAIN);
    let got = env.read(
        ReadFunction::AgentsGet,
        json!({"id": "captain", "raw": true}),
    );
    assert_eq!(got["system_prompt"], "You lead.\n");
    assert_eq!(got["raw"], CAPTAIN);
    assert_eq!(got["modified_at"], response["modified_at"]);
    // Without a logo the response says null; an empty body is allowed; unknown `extends` too.
    let response = env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "quiet", "content": "---\nname: Quiet\nextends: nobody\n---\n"}),
        Family::Agents,
        named_event("create", "quiet"),
    );
    assert_eq!(response["logo"], Value::Null);
    assert_eq!(response["description"], "");
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "quiet"}));
    assert!(
        got["inheritance_error"]
            .as_str()
            .unwrap()
            .starts_with("D415")
    );

    // Update keeps the id; the display name may change.
    let v2 = "---\nname: Skipper\n---\nYou skip.\n";
    let response = env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "captain", "content": v2}),
        Family::Agents,
        named_event("update", "captain"),
    );
    assert_eq!(response["id"], "captain");
    assert_eq!(response["name"], "Skipper");
    assert_eq!(text(&path), v2);
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "captain"}));
    assert_eq!(got["name"], "Skipper");
    assert_eq!(got["system_prompt"], "You skip.\n");

    let response = env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "captain"}),
        Family::Agents,
        named_event("delete", "captain"),
    );
    assert_eq!(response, json!({"id": "captain"}));
    assert!(!path.exists());
    assert!(env.path("agents").is_dir());
    assert!(
        env.read_err(ReadFunction::AgentsGet, json!({"id": "captain"}))
            .starts_with("D410")
    );
}

#[test]
fn agents_errors() {
    let env = Env::new(agents_tree);
    let next_list = " Next: call directory::agents::list to browse agent profile ids.";
    for function in [WriteFunction::AgentsUpdate, WriteFunction::AgentsDelete] {
        let (code, message) = env.coded(function, json!({"id": "helpr", "content": CAPTAIN}));
        assert_eq!(code, Some("D410"));
        assert_eq!(
            message,
            format!(
                "D410 not_found: agent profile \"helpr\" does not exist. Did you mean: helper, iii, iii-minimal.{next_list}"
            )
        );
    }
    // A nested file is not a profile.
    let (code, _) = env.coded(
        WriteFunction::AgentsUpdate,
        json!({"id": "nested", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D410"));

    let next_conflict = " Next: call directory::agents::update to edit the existing agent profile; or call directory::agents::list to browse agent profile ids.";
    let (code, message) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "helper", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    assert_eq!(
        message,
        format!("D414 invalid_input: agent profile \"helper\" already exists.{next_conflict}")
    );
    let broken = env.path("agents/broken.md");
    let (code, message) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "broken", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    assert_eq!(
        message,
        format!(
            "D414 invalid_input: a file already exists at {} (currently skipped by the scanner); edit or remove it on disk.{next_conflict}",
            broken.display()
        )
    );
    let (code, message) = env.coded(WriteFunction::AgentsDelete, json!({"id": "iii"}));
    assert_eq!(code, Some("D414"));
    assert_eq!(
        message,
        format!(
            "D414 invalid_input: agent profile \"iii\" is bundled with the worker and has no local file to delete.{next_conflict}"
        )
    );
    // Plain (uncoded) frontmatter and size errors.
    let plain = [
        (
            "You lead.\n".to_string(),
            "missing YAML frontmatter (expected --- ... --- block at file start)".to_string(),
        ),
        (
            "---\nname: [x\n---\nx\n".to_string(),
            "invalid frontmatter YAML: ".to_string(),
        ),
        (
            "---\ndescription: d\n---\nx\n".to_string(),
            "frontmatter missing non-empty `name`".to_string(),
        ),
        (
            "---\nname: '  '\n---\nx\n".to_string(),
            "frontmatter missing non-empty `name`".to_string(),
        ),
        (
            "---\nname: A\nlogo: ''\n---\nx\n".to_string(),
            "`logo` must be non-empty when present (emoji only)".to_string(),
        ),
        (
            "---\nname: A\nlogo: abcdefghijklmnopq\n---\nx\n".to_string(),
            "`logo` too long (17 bytes; max 16) — emoji only".to_string(),
        ),
        (
            "---\nname: A\nlogo: a/b\n---\nx\n".to_string(),
            "`logo` may not contain path separators or whitespace — emoji only".to_string(),
        ),
        (
            "---\nname: A\nicon: rocket\n---\nx\n".to_string(),
            "`icon` must be one of agent, code, search, terminal, database, test, review, docs, design (got \"rocket\")".to_string(),
        ),
        (
            "---\nname: A\ncolor: pink\n---\nx\n".to_string(),
            "`color` must be one of neutral, blue, purple, teal, green, amber, rose (got \"pink\")".to_string(),
        ),
        (
            format!("---\nname: A\n---\n{}", "x".repeat(262_144)),
            format!(
                "content too large ({} bytes; max 262144)",
                262_144 + "---\nname: A\n---\n".len()
            ),
        ),
    ];
    for (content, expected) in &plain {
        for function in [WriteFunction::AgentsCreate, WriteFunction::AgentsUpdate] {
            let id = if function == WriteFunction::AgentsCreate {
                "fresh"
            } else {
                "helper"
            };
            let (code, message) = env.coded(function, json!({"id": id, "content": content}));
            assert_eq!(code, None, "{content:?}: {message}");
            assert!(
                message.starts_with(expected.as_str()),
                "{content:?}: {message}"
            );
        }
    }
    for id in ["", "Bad", "a/b", "a.b"] {
        let (code, _) = env.coded(
            WriteFunction::AgentsCreate,
            json!({"id": id, "content": CAPTAIN}),
        );
        assert_eq!(code, None, "{id:?}");
    }
    assert_eq!(
        text(&env.path("agents/helper.md")),
        "---\nname: Helper\n---\nHelp.\n"
    );
}

#[test]
fn agents_bundled_copy_on_write_fallback_and_shadow() {
    let env = Env::new(|_| {});
    let before = env.read(ReadFunction::AgentsList, json!({}));
    assert_eq!(names(&before, "agents", "id"), ["iii", "iii-minimal"]);
    assert_eq!(before["agents"][0]["builtin"], true);
    let content = "---\nname: My iii\n---\nMine.\n";
    let response = env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "iii", "content": content}),
        Family::Agents,
        named_event("update", "iii"),
    );
    assert_eq!(response["id"], "iii");
    assert_eq!(response["name"], "My iii");
    let path = env.path("agents/iii.md");
    assert_eq!(text(&path), content);
    let listed = env.read(ReadFunction::AgentsList, json!({}));
    assert!(listed["agents"][0].get("builtin").is_none(), "{listed}");
    assert_eq!(listed["agents"][0]["name"], "My iii");
    assert_eq!(
        env.read(ReadFunction::AgentsGet, json!({"id": "iii"}))["system_prompt"],
        "Mine.\n"
    );
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "iii"}),
        Family::Agents,
        named_event("delete", "iii"),
    );
    assert!(!path.exists());
    assert_eq!(env.read(ReadFunction::AgentsList, json!({})), before);
    let (code, _) = env.coded(WriteFunction::AgentsDelete, json!({"id": "iii"}));
    assert_eq!(code, Some("D414"));
    // Creating a bundled id shadows it.
    env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "iii-minimal", "content": "---\nname: Min\n---\nmin\n"}),
        Family::Agents,
        named_event("create", "iii-minimal"),
    );
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "iii-minimal"}));
    assert!(got.get("builtin").is_none());
    assert_eq!(got["name"], "Min");
    // …and a second create of it meets the file.
    let (code, _) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "iii-minimal", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "iii-minimal"}),
        Family::Agents,
        named_event("delete", "iii-minimal"),
    );
    assert_eq!(env.read(ReadFunction::AgentsList, json!({})), before);
}

#[test]
fn agents_bundled_update_with_a_skipped_file_in_the_way_is_d414() {
    let env = Env::new(|t| {
        t.write("agents/iii.md", "not a profile\n");
    });
    let (code, message) = env.coded(
        WriteFunction::AgentsUpdate,
        json!({"id": "iii", "content": CAPTAIN}),
    );
    assert_eq!(code, Some("D414"));
    assert!(
        message.contains("currently skipped by the scanner"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// Across families
// ---------------------------------------------------------------------------------------------

#[test]
fn every_write_is_read_at_once_and_reads_publish_nothing() {
    let env = Env::new(standard);
    for i in 0..20 {
        let id = format!("burst/s{i}");
        env.ok(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": format!("# Title {i}\n\nx\n")}),
            Family::Skills,
            skill_event("create", &id),
        );
        assert_eq!(
            env.read(ReadFunction::SkillsGet, json!({"id": id}))["title"],
            format!("Title {i}")
        );
        env.ok(
            WriteFunction::SkillsUpdate,
            json!({"id": id, "content": format!("# Retitled {i}\n\nx\n")}),
            Family::Skills,
            skill_event("update", &id),
        );
        assert_eq!(
            env.read(ReadFunction::SkillsGet, json!({"id": id}))["title"],
            format!("Retitled {i}")
        );
        let rows = env.read(
            ReadFunction::SkillsList,
            json!({"search": format!("retitled {i}")}),
        );
        assert!(names(&rows, "skills", "id").contains(&id));
    }
    let before = env.event_count();
    for f in ReadFunction::ALL {
        let _ = env
            .directory
            .read(f, &json!({"id": "burst/s1", "name": "iii-minimal"}), None);
    }
    env.directory.reconcile().unwrap();
    assert_eq!(
        env.event_count(),
        before,
        "reads and a no-op reconcile publish nothing"
    );
    assert_eq!(temp_files(env.tree.base()), Vec::<String>::new());
}

#[test]
fn write_function_ids_round_trip() {
    for f in WriteFunction::ALL {
        assert_eq!(WriteFunction::from_id(f.id()), Some(f));
    }
    assert_eq!(WriteFunction::from_id("directory::skills::get"), None);
}

// ---------------------------------------------------------------------------------------------
// Writes against an index that has not caught up with the disk yet (no watcher running here:
// the same window exists for the ~50 ms before a watcher burst is reconciled).
// ---------------------------------------------------------------------------------------------

#[test]
fn skills_update_after_an_unreconciled_external_delete_does_not_resurrect_the_file() {
    let env = Env::new(standard);
    let path = env.path("skills/mailer/send.md");
    fs::remove_file(&path).unwrap();
    let result = env.directory.write(
        WriteFunction::SkillsUpdate,
        &json!({"id": "mailer/send", "content": BODY}),
        None,
    );
    assert!(
        !path.exists(),
        "update re-created a file deleted on disk (answered {result:?})"
    );
    assert_eq!(result.unwrap_err().code(), Some("D110"));
}

#[test]
fn skills_delete_after_an_unreconciled_external_delete_is_d110() {
    let env = Env::new(standard);
    fs::remove_file(env.path("skills/mailer/send.md")).unwrap();
    let e = env
        .directory
        .write(
            WriteFunction::SkillsDelete,
            &json!({"id": "mailer/send"}),
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), Some("D110"), "{e}");
}

#[test]
fn skills_create_over_an_unreconciled_external_file_is_d114() {
    let env = Env::new(standard);
    env.tree.write("skills/mailer/late.md", "# Late\n\nx\n");
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "mailer/late", "content": BODY}),
    );
    assert_eq!(code, Some("D114"));
    assert!(message.contains("a file already exists at"), "{message}");
    assert_eq!(text(&env.path("skills/mailer/late.md")), "# Late\n\nx\n");
}

#[test]
fn system_prompts_create_under_a_local_system_prompts_folder_is_shadowed() {
    // Contract §4: a local top-level `system-prompts/` folder shadows the global one wholesale,
    // and create always writes `<skills_folder>/system-prompts/<name>.md`: the new prompt is on
    // disk but not served (recorded as skipped), and a second create meets the file.
    let env = Env::new(|t| {
        t.write(
            "skills/iii/system-prompts/local.md",
            "---\ndescription: Local\n---\nLocal.\n",
        );
    });
    env.ok(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pirate", "content": PIRATE}),
        Family::SystemPrompts,
        named_event("create", "pirate"),
    );
    assert_eq!(text(&env.path("skills/system-prompts/pirate.md")), PIRATE);
    assert!(
        env.read_err(ReadFunction::SystemPromptsGet, json!({"name": "pirate"}))
            .starts_with("D210")
    );
    let (code, message) = env.coded(
        WriteFunction::SystemPromptsCreate,
        json!({"name": "pirate", "content": PIRATE}),
    );
    assert_eq!(code, Some("D214"));
    assert!(
        message.contains("currently skipped by the scanner"),
        "{message}"
    );
}
