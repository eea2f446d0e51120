//! Bundled `iii-directory/*` skills.

use super::*;

#[test]
fn bundled_directory_skills_are_listed_when_nothing_shadows_them() {
    let tree = Tree::new();
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    let mut expected = strings(&BUNDLED_IDS);
    expected.push("solo".into());
    assert_eq!(skill_ids(&d), expected);
    let raw = asset("skills/iii-directory/index.md");
    assert_eq!(
        row(&d, "iii-directory"),
        json!({
            "id": "iii-directory",
            "title": "iii-directory",
            "type": "index",
            "function_id": null,
            "disable_model_invocation": false,
            "description": asset_field("skills/iii-directory/index.md", "description"),
            "bytes": raw.len(),
            "modified_at": "",
        })
    );
}

#[test]
fn bundled_directory_skill_get_has_an_empty_path() {
    let tree = Tree::new();
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    let raw = asset("skills/iii-directory/index.md");
    let body_start = raw[4..].find("\n---\n").expect("frontmatter end") + 4 + 5;
    assert_eq!(
        call(&d, GET, json!({ "id": "iii-directory", "raw": true })),
        json!({
            "id": "iii-directory",
            "title": "iii-directory",
            "type": "index",
            "function_id": null,
            "disable_model_invocation": false,
            "path": "",
            "body": raw[body_start..],
            "modified_at": "",
            "raw": raw,
        })
    );
}

#[test]

fn bundled_directory_skills_are_served_on_an_empty_tree() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&BUNDLED_IDS));
    assert_eq!(get(&d, "iii-directory")["title"], "iii-directory");
    assert_eq!(call(&d, INDEX, json!({}))["workers_count"], 1);
}

#[test]
fn empty_directory_folder_in_the_skills_root_shadows_the_bundled_skills() {
    let tree = Tree::new();
    tree.mkdir("skills/iii-directory");
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["solo"]));
}

#[test]
fn directory_folder_in_the_skills_root_replaces_the_whole_bundled_namespace() {
    let tree = Tree::new();
    tree.write("skills/iii-directory/index.md", "# My directory\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["iii-directory"]));
    assert_eq!(get(&d, "iii-directory")["title"], "My directory");
    // The bundled doc is gone: `iii-directory` is always a known worker, so the miss falls back to
    // the (now local) overview with a note.
    let fallback = get(&d, "iii-directory/authoring-skills");
    assert_eq!(fallback["id"], "iii-directory");
    assert_recovered(
        &fallback,
        "# My directory\n",
        &["`iii-directory/authoring-skills`"],
    );
}

#[test]
fn directory_folder_in_the_local_root_shadows_the_bundled_skills() {
    let tree = Tree::new();
    tree.mkdir("skills/iii/iii-directory");
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["solo"]));
}

#[test]
fn agents_skills_directory_shadows_the_bundled_skills() {
    let tree = Tree::new();
    tree.write(
        ".agents/skills/iii-directory/SKILL.md",
        "# Agents directory\n",
    );
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["iii-directory"]));
    assert_eq!(get(&d, "iii-directory")["title"], "Agents directory");
}

#[test]
fn agents_skills_folder_without_skill_md_does_not_shadow_the_bundled_skills() {
    let tree = Tree::new();
    tree.write(".agents/skills/iii-directory/notes.md", "# Not a skill\n");
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    let mut expected = strings(&BUNDLED_IDS);
    expected.push("solo".into());
    assert_eq!(skill_ids(&d), expected);
}
