//! Display ids.

use super::*;

#[test]
fn namespace_index_is_displayed_as_the_namespace() {
    let tree = no_bundled();
    tree.write("skills/ns/index.md", "# Ns\n");
    tree.write("skills/a/b/index.md", "# Deep\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["a/b", "ns"]));
}

#[test]
fn namespace_index_keeps_its_suffix_when_a_literal_namespace_file_exists() {
    let tree = no_bundled();
    tree.write("skills/ns.md", "# Literal\n");
    tree.write("skills/ns/index.md", "# Overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns", "ns/index"]));
    assert_eq!(get(&d, "ns/index")["id"], "ns/index");
}

#[test]
fn single_segment_index_is_never_stripped() {
    let tree = no_bundled();
    tree.write("skills/index.md", "# Root index\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["index"]));
    assert_eq!(get(&d, "index")["id"], "index");
}

#[test]
fn agents_skill_keeps_its_suffix_when_a_literal_file_has_its_name() {
    let tree = no_bundled();
    tree.write("skills/tool.md", "# Literal tool\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["tool", "tool/index"]));
}
