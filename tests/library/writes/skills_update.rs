//! Skills::update.

use super::*;

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
    assert_eq!(e.code(), Some(Code::SkillNotFound), "{e}");
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
    // A create of its id says it exists, and that an update would be refused too (it used to
    // send the caller to update).
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "impeccable", "content": BODY}),
    );
    assert_eq!(code, Some("D114"), "{message}");
    assert!(
        message.contains("already exists. It is not yours to write: ")
            && message.contains("read-only"),
        "{message}"
    );
    assert!(!message.contains("directory::skills::update"), "{message}");
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
    assert_eq!(e.code(), Some(Code::SkillNotFound), "{e}");
    assert!(path.is_dir());
    assert_eq!(temp_files(env.tree.base()), Vec::<String>::new());
}

/// An update changes a file's text, not who may read it: the replaced file's permissions carry
/// over (a private 0600 skill stayed private only until its first edit).
#[test]
fn skills_update_keeps_the_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new(standard);
    let path = env.path("skills/mailer/send.md");
    for bits in [0o600, 0o755, 0o640] {
        fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
        env.ok(
            WriteFunction::SkillsUpdate,
            json!({"id": "mailer/send", "content": format!("# Send\n\nMode {bits:o}.\n")}),
            Family::Skills,
            skill_event("update", "mailer/send"),
        );
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, bits, "{bits:o}");
        assert_eq!(text(&path), format!("# Send\n\nMode {bits:o}.\n"));
    }
}
