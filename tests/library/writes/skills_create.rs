//! Skills::create.

use super::*;

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
    // Named by its file, an Agent Skill is written as that file (1.2.8 wrote `index.md`).
    assert!(env.path("skills/newns/SKILL.md").is_file());
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
    assert_eq!(e.code(), Some(Code::SkillPlacementRefused));
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
        ("kit", "kit"),     // `kit/SKILL.md`
        ("shell", "shell"), // the local overview
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
    // A read-only skill (an agents skill, via the alias; a bundled one): the contract's
    // sentence, then why an update would be refused too, and no update to call.
    for (id, why) in [
        (
            "impeccable",
            "is system-installed under an agents skills root",
        ),
        (
            "iii-directory/index",
            "is bundled with the worker and read-only; create yours under another id.",
        ),
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D114"), "{id}: {message}");
        assert!(
            message.starts_with(&format!(
                "D114 invalid_input: skill \"{id}\" already exists. It is not yours to write: skill \"{id}\" "
            )),
            "{message}"
        );
        assert!(message.contains(why), "{message}");
        assert!(
            message.ends_with(" Next: call directory::skills::list to browse skill ids."),
            "{message}"
        );
        assert!(!message.contains("skills::update"), "{message}");
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

/// The contract's create writes `skills_folder/<id>.md` even where a `local_skills_folder`
/// folder of the same namespace hides it from every read (the original answered success for a
/// skill no call could then get); this worker refuses it, as it refuses an id the visibility
/// filter would hide, and writes nothing.
#[test]
fn skills_create_refuses_an_id_a_local_namespace_would_hide() {
    let env = Env::new(|tree| {
        standard(tree);
        tree.mkdir("skills/iii/empty-override");
    });
    // `shell` is a local namespace (skills/iii/shell), and a folder overrides even empty.
    for id in ["shell/newcmd", "shell/deeper/newcmd", "empty-override"] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        let namespace = id.split('/').next().unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "D115 invalid_input: skill {id:?} would be written in skills_folder/{namespace}/, which local_skills_folder overrides with its own {namespace}/ folder ("
            )),
            "{message}"
        );
        assert!(message.ends_with("Write it on disk in that folder, or move that folder away."));
    }
    // The namespace's own id is the local skill: it exists.
    let (code, _) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "shell", "content": BODY}),
    );
    assert_eq!(code, Some("D114"));
    // Once the local folder is gone, the namespace is skills_folder's again.
    fs::remove_dir_all(env.path("skills/iii/shell")).expect("remove the local folder");
    env.directory.reconcile().expect("reconcile");
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "shell/newcmd", "content": BODY}),
        Family::Skills,
        skill_event("create", "shell/newcmd"),
    );
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "shell/newcmd"}))["path"],
        env.path("skills/shell/newcmd.md").display().to_string()
    );
}

/// A file where the new skill's folder must be: the system's error names that folder.
#[test]
fn skills_create_under_a_file_names_the_folder_it_could_not_make() {
    let env = Env::new(|tree| {
        tree.write("skills/zz", "a plain file\n");
    });
    let error = env.err(
        WriteFunction::SkillsCreate,
        json!({"id": "zz/a", "content": BODY}),
    );
    let folder = env.path("skills/zz");
    assert!(
        error
            .to_string()
            .starts_with(&format!("create_dir_all {}: ", folder.display())),
        "{error}"
    );
}

/// A write reached through a symbolic link back to a folder above it (`hz/loop/up -> ..`)
/// would land where the walk serves it under another id (`hz/up/pwn`), while the answer named
/// the id asked for: refused, nothing written. (A link to a sibling folder is walked, and
/// stays open: `store::way`'s units.)
#[test]
fn skills_create_refuses_a_path_through_a_link_loop() {
    let env = Env::new(|tree| {
        tree.write("skills/hz/loop/index.md", "# Loop\n\nServed.\n");
        std::os::unix::fs::symlink("..", tree.path("skills/hz/loop/up")).expect("link");
    });
    for id in ["hz/loop/up/up/pwn", "hz/loop/up/pwn"] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        assert!(
            message.contains("link back to a folder above it"),
            "{message}"
        );
    }
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "hz/loop/pwn", "content": BODY}),
        Family::Skills,
        skill_event("create", "hz/loop/pwn"),
    );
}

/// By default `local_skills_folder` (`skills/iii`) sits inside `skills_folder`, so a create of
/// `iii/<ns>/…` lands in the local folder. Starting there a namespace `skills_folder` serves
/// would override it whole and hide its skills: refused (D115), nothing written. Into a local
/// namespace that exists already, or a new name, the create lands.
#[test]
fn skills_create_refuses_to_start_a_local_namespace_that_hides_a_global_one() {
    let env = Env::new(standard);
    for (id, shown, local_id) in [
        ("iii/mailer/note", "iii/mailer/note", "mailer/note"),
        // An Agent Skill is created by naming its file: so is the suggestion.
        ("iii/mailer/SKILL.md", "iii/mailer/index", "mailer/SKILL.md"),
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        let namespace = local_id.split('/').next().unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "D115 invalid_input: skill {shown:?} would start a {namespace} namespace in local_skills_folder ("
            )),
            "{message}"
        );
        assert!(
            message.contains(&format!("Create it as {local_id:?} in skills_folder")),
            "{message}"
        );
    }
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "mailer/send"}))["title"],
        "Send"
    );
    // `shell` is a local namespace already; `fresh` is no namespace of skills_folder.
    for id in ["iii/shell/extra", "iii/fresh/note"] {
        env.ok(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
            Family::Skills,
            skill_event("create", id),
        );
    }
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "shell/extra"}))["path"],
        env.path("skills/iii/shell/extra.md").display().to_string()
    );
}

/// In the default layout `iii/<ns>/…` lands in `local_skills_folder` and starts a folder of
/// namespace `<ns>` there, which shadows an agents skill `<ns>` as `skills_folder/<ns>/` would:
/// refused (D115) as `<ns>/…` is, with nothing written and the agents skill still served.
#[test]
fn skills_create_refuses_a_local_folder_that_hides_an_agents_skill() {
    let env = Env::new(standard);
    let root = env.path(".agents/skills").display().to_string();
    for (id, shown) in [
        ("iii/impeccable/x", "iii/impeccable/x"),
        ("iii/impeccable/SKILL.md", "iii/impeccable/index"),
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        assert!(
            message.contains("namespace \"impeccable\" is reserved"),
            "{message}"
        );
        assert!(message.contains(&root), "{message}");
        assert!(
            message.contains(&format!("{shown:?} would start a impeccable/ folder")),
            "{message}"
        );
    }
    assert!(!env.path("skills/iii/impeccable").exists());
    assert_eq!(
        env.read(ReadFunction::SkillsGet, json!({"id": "impeccable"}))["path"],
        env.path(".agents/skills/impeccable/SKILL.md")
            .display()
            .to_string()
    );
}

/// In the default layout the local folder is itself `skills_folder`'s namespace `iii`: an
/// `iii/iii/…` create would start a local `iii/` folder, which takes that namespace over, so
/// the new file is served as `iii/…` one level up (never as the id answered) and every other
/// `iii/…` row of `skills_folder` vanishes. Refused (D115), nothing written, rows kept.
#[test]
fn skills_create_refuses_an_iii_folder_inside_the_local_folder() {
    let env = Env::new(|tree| {
        standard(tree);
        tree.write("skills/iii/newns/x.md", BODY)
            .write("skills/iii/index.md", "# Local index\n\nx\n");
    });
    let listed = |env: &Env| {
        names(
            &env.read(ReadFunction::SkillsList, json!({"prefix": "iii/"})),
            "skills",
            "id",
        )
    };
    let before = listed(&env);
    assert!(before.contains(&"iii/newns/x".to_string()), "{before:?}");
    for (id, served) in [("iii/iii/x", "iii/x"), ("iii/iii/SKILL.md", "iii/SKILL.md")] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        assert!(
            message.contains(&format!("would be served as {served:?}")),
            "{message}"
        );
        assert!(
            message.contains("hiding every skill skills_folder serves under \"iii/\""),
            "{message}"
        );
        assert!(!env.path("skills/iii/iii").exists(), "{id}");
    }
    assert_eq!(listed(&env), before);
}

/// `iii/<x>` lands as the local file `<x>.md`, served as `<x>` from `local_skills_folder`, which
/// wins: it takes the id `<x>` from the skill `get <x>` answers now (a single file, a folder's
/// overview, an agents skill). The refusal names that skill, and its next step works.
#[test]
fn skills_create_refuses_a_local_file_that_takes_an_id_over() {
    let env = Env::new(|tree| {
        standard(tree);
        tree.write("skills/hello.md", "# Hello\n\nHi.\n");
    });
    for (id, taken, file) in [
        ("iii/hello", "hello", "skills/hello.md"),
        ("iii/kit", "kit", "skills/kit/SKILL.md"),
        (
            "iii/impeccable",
            "impeccable",
            ".agents/skills/impeccable/SKILL.md",
        ),
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        assert!(
            message.starts_with(&format!(
                "D115 invalid_input: skill {id:?} would also be served as {taken:?} from local_skills_folder ("
            )),
            "{message}"
        );
        assert!(
            message.contains(&env.path(file).display().to_string()),
            "{message}"
        );
        assert!(!message.contains("namespace"), "{message}");
        assert!(!env.path(&format!("skills/{id}.md")).exists(), "{id}");
    }
    // The next step it gives for a writable skill is one that works.
    let (_, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "iii/hello", "content": BODY}),
    );
    assert!(
        message
            .ends_with("To change that skill, update \"hello\"; for a new one, choose another id."),
        "{message}"
    );
    env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "hello", "content": BODY}),
        Family::Skills,
        skill_event("update", "hello"),
    );
    let (_, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "iii/impeccable", "content": BODY}),
    );
    assert!(
        message.ends_with("It is read-only: choose another id."),
        "{message}"
    );
    // The bundled overview's bare id is taken the same way.
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "iii/iii-directory", "content": BODY}),
    );
    assert_eq!(code, Some("D115"), "{message}");
    assert!(message.contains("(bundled with the worker)"), "{message}");
}

/// The worker's bundled skills (`iii-directory/…`) give way whole to a folder of their
/// namespace on disk: a create that would start that folder (in `skills_folder`, or in the
/// default local folder as `iii/iii-directory/…`) would hide them all, and is refused with
/// nothing written. Once the user has forked them on disk, the namespace is theirs.
#[test]
fn skills_create_refuses_to_hide_the_bundled_skills() {
    let env = Env::new(standard);
    let bundled = |env: &Env| {
        names(
            &env.read(ReadFunction::SkillsList, json!({"prefix": "iii-directory"})),
            "skills",
            "id",
        )
    };
    let before = bundled(&env);
    assert!(before.len() > 1, "{before:?}");
    for (id, folder) in [
        ("iii-directory/notes", "skills/iii-directory"),
        ("iii/iii-directory/notes", "skills/iii/iii-directory"),
    ] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some("D115"), "{id}: {message}");
        assert!(
            message.contains(&format!(
                "namespace \"iii-directory\" holds the worker's {} bundled skills (read-only); creating {id:?} would start",
                before.len()
            )),
            "{message}"
        );
        assert!(!env.path(folder).exists(), "{id}: nothing written");
    }
    assert_eq!(bundled(&env), before);
    // A fork on disk: the namespace is the user's, and a create adds to it.
    env.tree
        .write("skills/iii-directory/index.md", "# My fork\n\nMine.\n");
    env.directory.reconcile().expect("reconcile");
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "iii-directory/notes", "content": BODY}),
        Family::Skills,
        skill_event("create", "iii-directory/notes"),
    );
    assert_eq!(
        bundled(&env),
        ["iii-directory", "iii-directory/notes"],
        "the fork serves the namespace"
    );
}

/// An Agent Skill is created by naming its file: `<folder>/SKILL.md` is written as that file
/// (the id is `<folder>/index` either way), so the catalog offers it and `check --spec` checks
/// it; any other id is written as `<id>.md`, as the contract writes it.
#[test]
fn skills_create_of_a_folder_s_skill_md_writes_that_file() {
    let env = Env::new(standard);
    let content = "---\nname: invoice-check\ndescription: Check invoices against purchase orders.\n---\n# Invoice check\n\nCompare totals.\n";
    let response = env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "invoice-check/SKILL.md", "content": content}),
        Family::Skills,
        skill_event("create", "invoice-check/index"),
    );
    assert_eq!(response["id"], "invoice-check/index");
    assert_eq!(text(&env.path("skills/invoice-check/SKILL.md")), content);
    assert!(!env.path("skills/invoice-check/index.md").exists());
    let catalog = env.read(
        ReadFunction::SkillsCatalog,
        json!({"format": "json", "prefix": "invoice"}),
    );
    assert_eq!(catalog["count"], 1, "{catalog}");
    assert_eq!(
        catalog["skills"][0]["location"],
        env.path("skills/invoice-check/SKILL.md")
            .display()
            .to_string()
    );
    // It exists now, by either name.
    for id in [
        "invoice-check/SKILL.md",
        "invoice-check",
        "invoice-check/index",
    ] {
        let (code, _) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": content}),
        );
        assert_eq!(code, Some("D114"), "{id}");
    }
    // The contract's alias by any other spelling is written as the contract writes it.
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "ledger/index", "content": content}),
        Family::Skills,
        skill_event("create", "ledger/index"),
    );
    assert!(env.path("skills/ledger/index.md").is_file());
}
