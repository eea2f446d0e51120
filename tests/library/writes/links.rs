//! Updates and deletes of a document whose file is a symbolic link that the scan serves.

use std::os::unix::fs::symlink;

use super::*;

/// The link at `rel` is still a link, to `to`.
fn assert_still_links(env: &Env, rel: &str, to: &str) {
    let path = env.path(rel);
    assert!(
        fs::symlink_metadata(&path).unwrap().is_symlink(),
        "{rel} became a plain file"
    );
    assert_eq!(fs::read_link(&path).unwrap(), Path::new(to), "{rel}");
}

fn raw_skill(env: &Env, id: &str) -> Value {
    env.read(ReadFunction::SkillsGet, json!({"id": id, "raw": true}))["raw"].clone()
}

#[test]
fn skills_update_through_a_file_link_writes_where_it_leads_and_keeps_the_link() {
    let env = Env::new(|t| {
        t.write("skills/target.md", "# Target\n\nOld text.\n")
            .write("skills/ops/run.md", "# Run\n\nOld run.\n");
        symlink("target.md", t.path("skills/alias.md")).unwrap();
        symlink("ops", t.path("skills/opsalias")).unwrap();
    });
    let new = "# Target\n\nNew text.\n";
    env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "alias", "content": new}),
        Family::Skills,
        skill_event("update", "alias"),
    );
    assert_still_links(&env, "skills/alias.md", "target.md");
    assert_eq!(text(&env.path("skills/target.md")), new);
    assert_eq!(raw_skill(&env, "alias"), new);
    assert_eq!(raw_skill(&env, "target"), new);
    // A folder link did so already: the file is written in the folder it leads to.
    let run = "# Run\n\nNew run.\n";
    env.ok(
        WriteFunction::SkillsUpdate,
        json!({"id": "opsalias/run", "content": run}),
        Family::Skills,
        skill_event("update", "opsalias/run"),
    );
    assert_still_links(&env, "skills/opsalias", "ops");
    assert_eq!(text(&env.path("skills/ops/run.md")), run);
    assert_eq!(raw_skill(&env, "ops/run"), run);
}

#[test]
fn skills_update_through_a_link_into_a_read_only_root_is_refused_and_writes_nothing() {
    let env = Env::new(|t| {
        standard(t);
        symlink(
            "../.agents/skills/impeccable/SKILL.md",
            t.path("skills/polish.md"),
        )
        .unwrap();
    });
    let target = env.path(".agents/skills/impeccable/SKILL.md");
    let before = fs::read(&target).expect("the read-only skill");
    // The scan serves the link (it stays inside the roots), but where it leads is read-only.
    assert!(
        raw_skill(&env, "polish")
            .as_str()
            .unwrap()
            .contains("Polish things.")
    );
    let (code, message) = env.coded(
        WriteFunction::SkillsUpdate,
        json!({"id": "polish", "content": BODY}),
    );
    assert_eq!(code, Some("D115"), "{message}");
    assert!(message.contains("through a symbolic link"), "{message}");
    assert_still_links(
        &env,
        "skills/polish.md",
        "../.agents/skills/impeccable/SKILL.md",
    );
    assert_eq!(fs::read(&target).expect("still there"), before);
}

#[test]
fn skills_delete_of_a_file_link_removes_the_link_and_keeps_what_it_leads_to() {
    let env = Env::new(|t| {
        t.write("skills/target.md", "# Target\n\nKept.\n");
        symlink("target.md", t.path("skills/alias.md")).unwrap();
    });
    env.ok(
        WriteFunction::SkillsDelete,
        json!({"id": "alias"}),
        Family::Skills,
        skill_event("delete", "alias"),
    );
    assert!(fs::symlink_metadata(env.path("skills/alias.md")).is_err());
    assert_eq!(text(&env.path("skills/target.md")), "# Target\n\nKept.\n");
    assert_eq!(raw_skill(&env, "target"), "# Target\n\nKept.\n");
    let message = env.read_err(ReadFunction::SkillsGet, json!({"id": "alias"}));
    assert!(message.starts_with("D110"), "{message}");
}

#[test]
fn agents_update_through_a_file_link_writes_where_it_leads_and_keeps_the_link() {
    let env = Env::new(|t| {
        t.write("agents/builder.md", "---\nname: Builder\n---\nBuild.\n");
        symlink("builder.md", t.path("agents/bld2.md")).unwrap();
    });
    let new = "---\nname: Builder\n---\nBuild it twice.\n";
    env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "bld2", "content": new}),
        Family::Agents,
        named_event("update", "bld2"),
    );
    assert_still_links(&env, "agents/bld2.md", "builder.md");
    assert_eq!(text(&env.path("agents/builder.md")), new);
    for id in ["bld2", "builder"] {
        let got = env.read(ReadFunction::AgentsGet, json!({"id": id, "raw": true}));
        assert_eq!(got["raw"], new, "{id}");
    }
    env.ok(
        WriteFunction::AgentsDelete,
        json!({"id": "bld2"}),
        Family::Agents,
        named_event("delete", "bld2"),
    );
    assert!(fs::symlink_metadata(env.path("agents/bld2.md")).is_err());
    assert_eq!(text(&env.path("agents/builder.md")), new);
}

/// A profile linked from another writable root (the skills folder): the scan serves it, so the
/// update writes where it leads.
#[test]
fn agents_update_through_a_link_into_the_skills_folder_writes_there() {
    let env = Env::new(|t| {
        t.write(
            "skills/team/profiles/shared.md",
            "---\nname: Shared\n---\nShare.\n",
        );
        symlink(
            "../skills/team/profiles/shared.md",
            t.path("agents/shared.md"),
        )
        .unwrap();
    });
    let new = "---\nname: Shared\n---\nShare more.\n";
    env.ok(
        WriteFunction::AgentsUpdate,
        json!({"id": "shared", "content": new}),
        Family::Agents,
        named_event("update", "shared"),
    );
    assert_still_links(
        &env,
        "agents/shared.md",
        "../skills/team/profiles/shared.md",
    );
    assert_eq!(text(&env.path("skills/team/profiles/shared.md")), new);
    let got = env.read(
        ReadFunction::AgentsGet,
        json!({"id": "shared", "raw": true}),
    );
    assert_eq!(got["raw"], new);
}

#[test]
fn system_prompts_update_through_a_file_link_writes_where_it_leads_and_keeps_the_link() {
    let env = Env::new(|t| {
        t.write(
            "skills/system-prompts/terse.md",
            "---\ndescription: Terse\n---\nBe brief.\n",
        );
        symlink("terse.md", t.path("skills/system-prompts/short.md")).unwrap();
    });
    let new = "---\ndescription: Terse\n---\nBe briefer.\n";
    env.ok(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "short", "content": new}),
        Family::SystemPrompts,
        named_event("update", "short"),
    );
    assert_still_links(&env, "skills/system-prompts/short.md", "terse.md");
    assert_eq!(text(&env.path("skills/system-prompts/terse.md")), new);
    for name in ["short", "terse"] {
        let got = env.read(ReadFunction::SystemPromptsGet, json!({"name": name}));
        assert_eq!(got["body"], "Be briefer.\n", "{name}");
    }
    env.ok(
        WriteFunction::SystemPromptsDelete,
        json!({"name": "short"}),
        Family::SystemPrompts,
        named_event("delete", "short"),
    );
    assert!(fs::symlink_metadata(env.path("skills/system-prompts/short.md")).is_err());
    assert_eq!(text(&env.path("skills/system-prompts/terse.md")), new);
}

/// A rename through a link would rename the file other names read too: refused, nothing
/// written.
#[test]
fn system_prompts_rename_through_a_file_link_is_refused() {
    let env = Env::new(|t| {
        t.write(
            "skills/ns/system-prompts/sp.md",
            "---\ndescription: Plain\n---\nBe plain.\n",
        );
        symlink("sp.md", t.path("skills/ns/system-prompts/splink.md")).unwrap();
    });
    let e = env.err(
        WriteFunction::SystemPromptsUpdate,
        json!({"name": "splink", "content": "---\nname: renamed2\ndescription: R\n---\nR.\n"}),
    );
    assert_eq!(e.code().map(|c| c.text()), Some("D214"), "{e}");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_still_links(&env, "skills/ns/system-prompts/splink.md", "sp.md");
    // Nor may either name declare a name: the link's own, or the target's, which the link
    // reads too.
    for (name, declared) in [("splink", "splink"), ("sp", "sp2"), ("sp", "sp")] {
        let content = format!("---\nname: {declared}\ndescription: R\n---\nR.\n");
        let e = env.err(
            WriteFunction::SystemPromptsUpdate,
            json!({"name": name, "content": content}),
        );
        assert_eq!(e.code().map(|c| c.text()), Some("D214"), "{name}: {e}");
    }
}
