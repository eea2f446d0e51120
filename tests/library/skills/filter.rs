//! Filter_unregistered.

use super::*;

fn filter_tree() -> Tree {
    let tree = Tree::new();
    tree.write("skills/solo.md", "# Solo\n");
    tree.write("skills/shell/exec.md", "# Exec\n");
    tree.write("skills/ghost/doc.md", "# Ghost\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Tool\n");
    tree
}

#[test]
fn filter_keeps_single_segment_ids() {
    let tree = filter_tree();
    let d = tree.open();
    assert!(installed_ids(&d, &[]).contains(&"solo".to_string()));
}

#[test]
fn filter_hides_namespaces_that_are_not_installed() {
    let tree = filter_tree();
    let d = tree.open();
    let ids = installed_ids(&d, &[]);
    assert!(!ids.contains(&"shell/exec".to_string()), "{ids:?}");
    assert!(!ids.contains(&"ghost/doc".to_string()), "{ids:?}");
}

#[test]
fn filter_keeps_the_directory_namespace() {
    let tree = filter_tree();
    let d = tree.open();
    let ids = installed_ids(&d, &[]);
    for id in BUNDLED_IDS {
        assert!(ids.contains(&id.to_string()), "{id}: {ids:?}");
    }
}

#[test]
fn filter_keeps_the_iii_namespace() {
    let tree = Tree::new();
    tree.write("skills/iii/runtime/index.md", "# Engine runtime\n");
    let d = tree.open();
    let ids = installed_ids(&d, &[]);
    assert!(ids.contains(&"iii/runtime".to_string()), "{ids:?}");
    // The same file seen from the local root, `runtime/index`, is an uninstalled namespace.
    assert!(!ids.contains(&"runtime".to_string()), "{ids:?}");
}

#[test]
fn filter_keeps_installed_worker_namespaces() {
    let tree = filter_tree();
    let d = tree.open();
    assert_eq!(
        installed_ids(&d, &["shell"]),
        strings(&[
            "iii-directory/agent-profiles",
            "iii-directory/authoring-skills",
            "iii-directory/finding-functions",
            "iii-directory",
            "shell/exec",
            "solo",
            "tool",
        ])
    );
}

#[test]
fn filter_keeps_agents_skills_namespaces() {
    let tree = filter_tree();
    let d = tree.open();
    assert!(installed_ids(&d, &[]).contains(&"tool".to_string()));
}

/// An agents skill's namespace stays an agents namespace when a skills root folder of its name
/// shadows it (a project fork, made as a read-only skill's refusal advises): the fork, and an
/// edit of it afterwards, stay visible.
#[test]
fn filter_keeps_a_project_fork_of_an_agents_skill() {
    let tree = filter_tree();
    tree.write("skills/tool/SKILL.md", "# Tool, forked\n\nOurs.\n");
    tree.write("skills/iii/tool2/SKILL.md", "# Tool two\n\nLocal.\n");
    tree.write(".agents/skills/tool2/SKILL.md", "# Tool two upstream\n");
    let d = tree.open();
    let ids = installed_ids(&d, &[]);
    assert!(ids.contains(&"tool".to_string()), "{ids:?}");
    assert!(ids.contains(&"tool2".to_string()), "{ids:?}");
    let got = d
        .read(GET, &json!({ "id": "tool" }), Some(&Default::default()))
        .expect("the fork is visible");
    assert_eq!(got["title"], "Tool, forked");
    // An edit inside the fork's folder recomputes only its ids: still visible.
    tree.write("skills/tool/notes.md", "# Notes\n\nMore.\n");
    d.reconcile().expect("reconcile");
    let ids = installed_ids(&d, &[]);
    assert!(ids.contains(&"tool/notes".to_string()), "{ids:?}");
    assert!(ids.contains(&"tool".to_string()), "{ids:?}");
    // Without the agents skill, the fork's namespace is an uninstalled worker's.
    tree.remove(".agents/skills/tool/SKILL.md");
    d.reconcile().expect("reconcile");
    let ids = installed_ids(&d, &[]);
    assert!(!ids.contains(&"tool/notes".to_string()), "{ids:?}");
}

#[test]
fn filter_off_hides_nothing() {
    let tree = filter_tree();
    let mut config = tree.config();
    config.settings.filter_unregistered = false;
    let d = tree.open_with(config);
    assert_eq!(installed_ids(&d, &[]), skill_ids(&d));
    assert!(installed_ids(&d, &[]).contains(&"ghost/doc".to_string()));
}

#[test]
fn unknown_installed_set_hides_nothing() {
    let tree = filter_tree();
    let d = tree.open();
    let mut expected = strings(&["ghost/doc"]);
    expected.extend(strings(&BUNDLED_IDS));
    expected.extend(strings(&["shell/exec", "solo", "tool"]));
    assert_eq!(skill_ids(&d), expected);
}

#[test]
fn filter_applies_to_get() {
    let tree = filter_tree();
    let d = tree.open();
    let hidden = d
        .read(
            GET,
            &json!({ "id": "ghost/doc" }),
            Some(&Default::default()),
        )
        .expect_err("hidden")
        .to_string();
    assert!(
        hidden.starts_with("D110 not_found: skill \"ghost/doc\" does not exist."),
        "{hidden}"
    );
    assert_eq!(
        call_installed(&d, GET, json!({ "id": "ghost/doc" }), &["ghost"])["id"],
        "ghost/doc"
    );
}
