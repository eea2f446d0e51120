//! Skills::delete.

use super::*;

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
