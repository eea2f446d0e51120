//! The user-global roots (`global_agents_skills_folder`, `global_agents_folder`) on real
//! folders: where they stand in the precedence of their families, what `check` says of what
//! they lose, and what each write does to them.

use super::*;

const GLOBAL_SKILLS: &str = "home/.agents/skills";
const GLOBAL_AGENTS: &str = "home/.iii/agents";

/// Both global roots on, under the tree's `home/`.
fn globals_on(config: &mut iii_directory::config::Config) {
    let base = config
        .paths
        .skills_folder
        .parent()
        .expect("base")
        .to_path_buf();
    config.paths.global_agents_skills_folder = Some(base.join(GLOBAL_SKILLS));
    config.paths.global_agents_folder = Some(base.join(GLOBAL_AGENTS));
}

fn agents_skill(name: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} skill.\n---\nUse {name}.\n")
}

fn profile(name: &str, extra: &str) -> String {
    format!("---\nname: {name}\n{extra}---\n{name} body.\n")
}

/// A global skill of each fate, and global profiles beside project ones.
fn global_tree(t: &Tree) {
    t.write(
        &format!("{GLOBAL_SKILLS}/pdf/SKILL.md"),
        &agents_skill("pdf"),
    )
    // The project's agents skills root serves `lint` first.
    .write(
        &format!("{GLOBAL_SKILLS}/lint/SKILL.md"),
        &agents_skill("global-lint"),
    )
    .write(
        ".agents/skills/lint/SKILL.md",
        &agents_skill("project-lint"),
    )
    // A skills root folder of the name shadows it, as it shadows a project agents skill.
    .write(
        &format!("{GLOBAL_SKILLS}/mailer/SKILL.md"),
        &agents_skill("mailer"),
    )
    .write("skills/mailer/send.md", BODY)
    // The worker's bundled namespace comes first too.
    .write(
        &format!("{GLOBAL_SKILLS}/iii-directory/SKILL.md"),
        &agents_skill("mine"),
    )
    // Only `<dir>/SKILL.md` is an entry.
    .write(&format!("{GLOBAL_SKILLS}/pdf/reference/more.md"), BODY)
    .write(
        &format!("{GLOBAL_AGENTS}/reviewer.md"),
        &profile("Reviewer", ""),
    )
    .write(
        &format!("{GLOBAL_AGENTS}/shared.md"),
        &profile("Global shared", ""),
    )
    .write("agents/shared.md", &profile("Project shared", ""))
    .write(
        &format!("{GLOBAL_AGENTS}/nested/deep.md"),
        &profile("Deep", ""),
    );
}

fn ids(env: &Env) -> Vec<String> {
    names(
        &env.read(ReadFunction::SkillsList, json!({})),
        "skills",
        "id",
    )
}

fn agent_ids(env: &Env) -> Vec<String> {
    names(
        &env.read(ReadFunction::AgentsList, json!({})),
        "agents",
        "id",
    )
}

#[test]
fn global_skills_come_last_and_check_says_what_shadows_them() {
    let env = Env::with_config(global_tree, globals_on);
    let listed = ids(&env);
    for id in ["pdf", "lint", "mailer/send", "iii-directory"] {
        assert!(listed.contains(&id.to_string()), "{id} in {listed:?}");
    }
    assert!(
        !listed.iter().any(|id| id.starts_with("pdf/")),
        "{listed:?}"
    );
    let got = env.read(ReadFunction::SkillsGet, json!({"id": "pdf"}));
    assert_eq!(got["title"], "pdf");
    assert_eq!(
        got["path"],
        env.path(&format!("{GLOBAL_SKILLS}/pdf/SKILL.md"))
            .display()
            .to_string()
    );
    let lint = env.read(ReadFunction::SkillsGet, json!({"id": "lint"}));
    assert_eq!(lint["title"], "project-lint");
    assert_eq!(
        env.read_err(ReadFunction::SkillsGet, json!({"id": "mailer"}))
            .get(..4),
        Some("D110")
    );

    let reason = |rel: &str| {
        common::skipped(
            &env.directory,
            "global_agents_skills_folder",
            &env.path(&format!("{GLOBAL_SKILLS}/{rel}"))
                .display()
                .to_string(),
        )
    };
    assert_eq!(
        reason("lint/SKILL.md"),
        Some(SkipReason::GlobalSkillShadowed {
            namespace: "lint".into(),
            bundled: false
        })
    );
    assert_eq!(
        reason("iii-directory/SKILL.md"),
        Some(SkipReason::GlobalSkillShadowed {
            namespace: "iii-directory".into(),
            bundled: true
        })
    );
    assert_eq!(
        reason("mailer/SKILL.md"),
        Some(SkipReason::AgentsSkillShadowed {
            namespace: "mailer".into()
        })
    );
    assert_eq!(reason("pdf/SKILL.md"), None);
    assert_eq!(
        reason("lint/SKILL.md").map(|r| r.to_string()).as_deref(),
        Some(
            "shadowed: namespace \"lint\" is served by agents_skills_folder, which comes before \
             global_agents_skills_folder"
        )
    );

    // A global skill is an agents skill: no installed worker hides it.
    let installed = BTreeSet::new();
    let visible = env.directory.read(
        ReadFunction::SkillsGet,
        &json!({"id": "pdf"}),
        Some(&installed),
    );
    assert!(visible.is_ok(), "{visible:?}");

    // Off (the default), the same folders serve nothing, and nothing is said about them.
    let off = Env::new(global_tree);
    assert!(!ids(&off).contains(&"pdf".to_string()));
    assert!(!agent_ids(&off).contains(&"reviewer".to_string()));
    assert!(
        off.directory
            .skipped()
            .expect("skipped")
            .iter()
            .all(|s| !s.path.contains("/home/"))
    );
}

#[test]
fn global_skills_are_read_only_and_their_namespace_is_not_created_into() {
    let env = Env::with_config(global_tree, globals_on);
    let global = env.path(GLOBAL_SKILLS).display().to_string();
    for (function, request) in [
        (
            WriteFunction::SkillsUpdate,
            json!({"id": "pdf", "content": BODY}),
        ),
        (WriteFunction::SkillsDelete, json!({"id": "pdf"})),
    ] {
        let (code, message) = env.coded(function, request);
        assert_eq!(code, Some(Code::SkillReadOnly.text()), "{message}");
        assert!(message.contains(&global), "{message}");
    }
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "pdf/notes", "content": BODY}),
    );
    assert_eq!(code, Some(Code::SkillPlacementRefused.text()), "{message}");
    assert!(message.contains(&global), "{message}");
    let (code, _) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "pdf/index", "content": BODY}),
    );
    assert_eq!(code, Some(Code::SkillPlacementRefused.text()));
    // Nor through the default local folder, whose new `pdf/` would shadow it as well.
    for id in ["iii/pdf/notes", "iii/pdf/SKILL.md"] {
        let (code, message) = env.coded(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": BODY}),
        );
        assert_eq!(code, Some(Code::SkillPlacementRefused.text()), "{message}");
        assert!(message.contains(&global), "{message}");
    }
    assert!(!env.path("skills/iii/pdf").exists());
    // Elsewhere a create lands in skills_folder as always.
    env.ok(
        WriteFunction::SkillsCreate,
        json!({"id": "notes", "content": BODY}),
        Family::Skills,
        skill_event("create", "notes"),
    );
    assert_eq!(text(&env.path("skills/notes.md")), BODY);
    assert_eq!(
        text(&env.path(&format!("{GLOBAL_SKILLS}/pdf/SKILL.md"))),
        agents_skill("pdf")
    );
}

#[test]
fn a_project_profile_wins_and_global_ones_are_edited_in_place() {
    let env = Env::with_config(global_tree, globals_on);
    let listed = agent_ids(&env);
    for id in ["reviewer", "shared"] {
        assert!(listed.contains(&id.to_string()), "{id} in {listed:?}");
    }
    assert!(!listed.contains(&"deep".to_string()), "{listed:?}");
    let shared = env.read(ReadFunction::AgentsGet, json!({"id": "shared"}));
    assert_eq!(shared["name"], "Project shared");
    assert_eq!(
        common::skipped(
            &env.directory,
            "global_agents_folder",
            &env.path(&format!("{GLOBAL_AGENTS}/shared.md"))
                .display()
                .to_string(),
        ),
        Some(SkipReason::ProfileShadowed)
    );

    // Update writes the global file where it is.
    let global_reviewer = env.path(&format!("{GLOBAL_AGENTS}/reviewer.md"));
    let v2 = profile("Reviewer two", "");
    env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "reviewer", "content": v2}),
        Family::Agents,
        named_event("update", "reviewer"),
    );
    assert_eq!(text(&global_reviewer), v2);
    assert!(!env.path("agents/reviewer.md").exists());

    // Create writes a project profile, which shadows the global one; deleting it brings the
    // global one back; deleting again removes the global file.
    let project = profile("Project reviewer", "");
    env.ok(
        WriteFunction::AgentsCreate,
        json!({"id": "reviewer", "content": project}),
        Family::Agents,
        named_event("create", "reviewer"),
    );
    assert_eq!(text(&env.path("agents/reviewer.md")), project);
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "reviewer"}));
    assert_eq!(got["name"], "Project reviewer");
    let (code, _) = env.coded(
        WriteFunction::AgentsCreate,
        json!({"id": "reviewer", "content": project}),
    );
    assert_eq!(code, Some(Code::AgentExists.text()));
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "reviewer"}),
        Family::Agents,
        named_event("delete", "reviewer"),
    );
    assert!(!env.path("agents/reviewer.md").exists());
    let got = env.read(ReadFunction::AgentsGet, json!({"id": "reviewer"}));
    assert_eq!(got["name"], "Reviewer two");
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "reviewer"}),
        Family::Agents,
        named_event("delete", "reviewer"),
    );
    assert!(!global_reviewer.exists());
    assert!(env.path(GLOBAL_AGENTS).is_dir(), "a root is never removed");
    let missed = env.read_err(ReadFunction::AgentsGet, json!({"id": "reviewer"}));
    assert!(missed.starts_with("D410"), "{missed}");
}

#[test]
fn functions_and_skills_index_are_served_and_inherited_through_extends() {
    let env = Env::with_config(
        |t| {
            global_tree(t);
            t.write(
                &format!("{GLOBAL_AGENTS}/ops.md"),
                &profile(
                    "Ops",
                    "functions:\n  - engine::functions::list\n  - directory::skills::get\nskills_index: false\n",
                ),
            )
            // A project profile extends a global one: it inherits both fields.
            .write("agents/oncall.md", &profile("Oncall", "extends: ops\n"))
            // Its own values replace the parent's.
            .write(
                "agents/lead.md",
                &profile("Lead", "extends: ops\nfunctions: [engine::triggers::list]\nskills_index: true\n"),
            )
            .write(
                "agents/bad.md",
                &profile("Bad", "functions: [engine::functions::list, list]\n"),
            );
        },
        globals_on,
    );
    let field = |id: &str| {
        let got = env.read(ReadFunction::AgentsGet, json!({"id": id}));
        let present = |key: &str| got.get(key).cloned();
        (present("functions"), present("skills_index"))
    };
    let ops = (
        Some(json!(["engine::functions::list", "directory::skills::get"])),
        Some(json!(false)),
    );
    assert_eq!(field("ops"), ops);
    assert_eq!(field("oncall"), ops);
    // `skills_index: true` overrides the parent's false, and true is the default: absent.
    assert_eq!(
        field("lead"),
        (Some(json!(["engine::triggers::list"])), None)
    );
    // Without either, the row keeps the 1.2.8 shape.
    assert_eq!(field("reviewer"), (None, None));
    assert_eq!(field("iii"), (None, None));
    let list = env.read(ReadFunction::AgentsList, json!({}));
    let row = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "oncall")
        .unwrap()
        .clone();
    assert_eq!(
        (
            row.get("functions").cloned(),
            row.get("skills_index").cloned()
        ),
        ops
    );

    // A bad function id makes the file no profile, as a bad icon does; a write says why.
    assert!(!agent_ids(&env).contains(&"bad".to_string()));
    let reason = common::skipped(
        &env.directory,
        "agents_folder",
        &env.path("agents/bad.md").display().to_string(),
    )
    .expect("a reason");
    assert!(
        reason
            .to_string()
            .starts_with("`functions` entry \"list\": function id must be namespaced"),
        "{reason}"
    );
    let refused = env
        .err(
            WriteFunction::AgentsCreate,
            json!({"id": "worse", "content": profile("Worse", "skills_index: maybe\n")}),
        )
        .to_string();
    assert!(
        refused.contains("`skills_index` must be true or false"),
        "{refused}"
    );
}

/// An agents skills root serves a folder by its exact `SKILL.md` alone, so a `skill.md` in
/// another case is neither served nor skipped by the index: `check --spec` notes it, in the
/// project's root and the global one alike (in `skills_folder` it is a row, noted already).
#[test]
fn check_spec_notes_a_skill_md_in_another_case_under_the_agents_roots() {
    let env = Env::with_config(
        |t| {
            global_tree(t);
            t.write(".agents/skills/lowonly/skill.md", &agents_skill("lowonly"))
                .write(".agents/skills/twice/SKILL.md", &agents_skill("twice"))
                .write(".agents/skills/twice/skill.md", &agents_skill("twice"))
                .write(
                    &format!("{GLOBAL_SKILLS}/glow/Skill.md"),
                    &agents_skill("glow"),
                );
        },
        globals_on,
    );
    for id in ["lowonly", "glow"] {
        let missing = env.read_err(ReadFunction::SkillsGet, json!({"id": id}));
        assert!(missing.contains("D110"), "{missing}");
    }
    let spec = env.directory.spec_check().expect("spec check");
    for (file, root) in [
        (".agents/skills/lowonly/skill.md", "agents_skills_folder"),
        (
            "home/.agents/skills/glow/Skill.md",
            "global_agents_skills_folder",
        ),
    ] {
        let path = env.path(file).display().to_string();
        let note = spec
            .notes
            .iter()
            .find(|n| n.path == path)
            .unwrap_or_else(|| panic!("{file} noted: {:?}", spec.notes));
        assert_eq!(note.root, root);
        assert!(
            note.note.starts_with("not served, so not checked: ")
                && note.note.ends_with("rename the file to SKILL.md"),
            "{}",
            note.note
        );
    }
    // Beside a served SKILL.md, renaming would replace it: the note says to merge instead.
    let twice = env
        .path(".agents/skills/twice/skill.md")
        .display()
        .to_string();
    let note = spec.notes.iter().find(|n| n.path == twice);
    let note = note.unwrap_or_else(|| panic!("twice noted: {:?}", spec.notes));
    assert!(
        note.note.contains("merge this file into it"),
        "{}",
        note.note
    );
}
