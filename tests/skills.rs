//! `directory::skills::{list,get,index}` against real files in temporary trees: how files become
//! skills, how the roots merge, display ids, `filter_unregistered`, and each function's answers.
//!
//! Note on the default layout: `local_skills_folder` (`skills/iii`) sits inside `skills_folder`
//! (`skills`), so the global scan also sees every local file under the `iii/` namespace (spec
//! 2.6, reproduced literally). Tests that put files in the local root expect those extra ids.

// `tests/common/mod.rs` is not rustfmt-clean and is not ours to change.
mod common;

use std::fs;
use std::time::{Duration, UNIX_EPOCH};

use common::{Tree, call, call_err, call_installed, skill_ids};
use iii_directory::{Directory, ReadFunction};
use serde_json::{Value, json};

const LIST: ReadFunction = ReadFunction::SkillsList;
const GET: ReadFunction = ReadFunction::SkillsGet;
const INDEX: ReadFunction = ReadFunction::SkillsIndex;

/// A fixed file time and how the contract prints it.
const MTIME_SECS: u64 = 1_777_926_161;
const MTIME_NANOS: u32 = 123_456_789;
const MTIME_TEXT: &str = "2026-05-04T20:22:41.123456789+00:00";

const NEXT_ON_MISS: &str = " Next: call directory::skills::list to browse skill ids; or call directory::skills::index to see the per-worker overview.";

const OMITTED_NOTE: &str = "\n(some descriptions omitted to save space; call directory::skills::get for the full reference)\n";

/// The bundled `iii-directory/*` skills, by display id in on-disk id order.
const BUNDLED_IDS: [&str; 4] = [
    "iii-directory/agent-profiles",
    "iii-directory/authoring-skills",
    "iii-directory/finding-functions",
    "iii-directory",
];

/// A tree whose `skills/iii-directory/` folder (empty) shadows the bundled `iii-directory/*` skills, so
/// that answers hold only what a test writes.
fn no_bundled() -> Tree {
    let tree = Tree::new();
    tree.mkdir("skills/iii-directory");
    tree
}

fn set_mtime(tree: &Tree, rel: &str) {
    let file = fs::File::options()
        .write(true)
        .open(tree.path(rel))
        .expect("open for mtime");
    file.set_modified(UNIX_EPOCH + Duration::new(MTIME_SECS, MTIME_NANOS))
        .expect("set mtime");
}

fn abs(tree: &Tree, rel: &str) -> String {
    tree.path(rel).display().to_string()
}

fn rows(directory: &Directory, request: Value) -> Vec<Value> {
    call(directory, LIST, request)["skills"]
        .as_array()
        .expect("skills array")
        .clone()
}

fn ids_of(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

fn list_ids(directory: &Directory, request: Value) -> Vec<String> {
    ids_of(&rows(directory, request))
}

fn installed_ids(directory: &Directory, installed: &[&str]) -> Vec<String> {
    let list = call_installed(directory, LIST, json!({}), installed);
    ids_of(list["skills"].as_array().expect("skills"))
}

fn row(directory: &Directory, id: &str) -> Value {
    rows(directory, json!({}))
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no list row {id}"))
}

fn get(directory: &Directory, id: &str) -> Value {
    call(directory, GET, json!({ "id": id }))
}

fn get_err(directory: &Directory, id: &str) -> String {
    call_err(directory, GET, json!({ "id": id }))
}

fn index_body(directory: &Directory) -> String {
    call(directory, INDEX, json!({}))["body"]
        .as_str()
        .expect("body")
        .to_string()
}

/// The reason a file under a root is skipped, if it is.
fn skipped(directory: &Directory, root: &str, path: &str) -> Option<String> {
    directory
        .skipped()
        .expect("skipped")
        .into_iter()
        .find(|s| s.root == root && s.path == path)
        .map(|s| s.reason)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A frontmatter key of a bundled asset, read straight from the crate's markdown file.
fn asset_field(rel: &str, key: &str) -> String {
    let text = fs::read_to_string(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))).expect("asset");
    let prefix = format!("{key}: ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{rel} has no {key}"));
    line[prefix.len()..].trim_matches('"').to_string()
}

fn asset(rel: &str) -> String {
    fs::read_to_string(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))).expect("asset")
}

// ---------------------------------------------------------------------------------------------
// Classification of files under a skills root
// ---------------------------------------------------------------------------------------------

#[test]
fn system_prompts_segment_is_not_a_skill() {
    let tree = no_bundled();
    tree.write("skills/ns/a.md", "# A\n");
    tree.write(
        "skills/ns/system-prompts/reviewer.md",
        "---\ndescription: Reviews.\n---\nBody.\n",
    );
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    let prompts = call(&d, ReadFunction::SystemPromptsList, json!({}));
    assert!(
        prompts["prompts"]
            .as_array()
            .expect("prompts")
            .iter()
            .any(|p| p["name"] == "reviewer")
    );
}

#[test]
fn prompts_segment_is_ignored_with_a_reason() {
    let tree = no_bundled();
    tree.write("skills/ns/a.md", "# A\n");
    tree.write(
        "skills/ns/prompts/say-hello.md",
        "---\ndescription: Hi.\n---\nHello.\n",
    );
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    let prompts = call(&d, ReadFunction::SystemPromptsList, json!({}));
    assert!(
        !prompts["prompts"]
            .as_array()
            .expect("prompts")
            .iter()
            .any(|p| p["name"] == "say-hello")
    );
    let reason = skipped(
        &d,
        "skills_folder",
        &abs(&tree, "skills/ns/prompts/say-hello.md"),
    )
    .expect("skipped");
    assert!(
        reason.starts_with("ignored:") && reason.contains("`prompts`"),
        "{reason}"
    );
}

#[test]
fn agents_segment_is_reserved_under_a_skills_root() {
    let tree = no_bundled();
    tree.write(
        "skills/ns/agents/helper.md",
        "---\nname: Helper\n---\nBody.\n",
    );
    tree.write("skills/agents/top.md", "---\nname: Top\n---\nBody.\n");
    tree.write("skills/ns/a.md", "# A\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    for rel in ["skills/ns/agents/helper.md", "skills/agents/top.md"] {
        let reason = skipped(&d, "skills_folder", &abs(&tree, rel)).expect("skipped");
        assert!(
            reason.starts_with("ignored:") && reason.contains("reserved"),
            "{reason}"
        );
    }
    // Nor are they agent profiles: only the bundled ones are listed.
    let agents = call(&d, ReadFunction::AgentsList, json!({}));
    let agent_ids: Vec<&str> = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["id"].as_str().expect("id"))
        .collect();
    assert_eq!(agent_ids, ["iii", "iii-minimal"]);
}

#[test]
fn segments_that_only_contain_the_reserved_words_are_skills() {
    let tree = no_bundled();
    tree.write("skills/promptsx/a.md", "# A\n");
    tree.write("skills/agentsx/b.md", "# B\n");
    tree.write("skills/prompts-extra/c.md", "# C\n");
    tree.write("skills/ns/system-promptsx/d.md", "# D\n");
    tree.write("skills/ns/my-agents/e.md", "# E\n");
    let d = tree.open();
    assert_eq!(
        skill_ids(&d),
        strings(&[
            "agentsx/b",
            "ns/my-agents/e",
            "ns/system-promptsx/d",
            "prompts-extra/c",
            "promptsx/a",
        ])
    );
}

#[test]
fn skill_md_is_the_folder_overview() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL.md", "# Overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns"]));
    assert_eq!(get(&d, "ns/index")["id"], "ns");
    assert_eq!(
        get(&d, "ns/index")["path"],
        abs(&tree, "skills/ns/SKILL.md")
    );
}

#[test]
fn skills_md_is_the_folder_overview() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILLS.md", "# Overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns"]));
    assert_eq!(
        get(&d, "ns/index")["path"],
        abs(&tree, "skills/ns/SKILLS.md")
    );
}

#[test]
fn lowercase_skill_md_is_not_an_overview_alias() {
    let tree = no_bundled();
    tree.write("skills/ns/skill.md", "# Lower\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/skill"]));
}

#[test]
fn skill_md_beats_skills_md_beats_index_md() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL.md", "From SKILL.md\n");
    tree.write("skills/ns/SKILLS.md", "From SKILLS.md\n");
    tree.write("skills/ns/index.md", "From index.md\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns"]));
    assert_eq!(get(&d, "ns")["body"], "From SKILL.md\n");
    for rel in ["skills/ns/SKILLS.md", "skills/ns/index.md"] {
        assert_eq!(
            skipped(&d, "skills_folder", &abs(&tree, rel)).as_deref(),
            Some("duplicate id \"ns/index\" also produced by ns/SKILL.md"),
            "{rel}"
        );
    }
}

#[test]
fn skills_md_beats_index_md() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILLS.md", "From SKILLS.md\n");
    tree.write("skills/ns/index.md", "From index.md\n");
    let d = tree.open();
    assert_eq!(get(&d, "ns")["body"], "From SKILLS.md\n");
    assert_eq!(
        skipped(&d, "skills_folder", &abs(&tree, "skills/ns/index.md")).as_deref(),
        Some("duplicate id \"ns/index\" also produced by ns/SKILLS.md")
    );
}

#[test]
fn root_level_skill_md_is_index() {
    let tree = no_bundled();
    tree.write("skills/SKILL.md", "# Root overview\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["index"]));
    assert_eq!(get(&d, "index")["path"], abs(&tree, "skills/SKILL.md"));
}

#[test]
fn folder_named_skill_is_not_renamed() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL/x.md", "# X\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), Vec::<String>::new());
    assert_eq!(
        skipped(&d, "skills_folder", &abs(&tree, "skills/ns/SKILL/x.md")).as_deref(),
        Some(
            "invalid id \"ns/SKILL/x\": invalid id (segment 2 of \"ns/SKILL/x\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"SKILL\""
        )
    );
}

#[test]
fn invalid_ids_are_skipped_with_their_reason() {
    let tree = no_bundled();
    let long = "a".repeat(65);
    tree.write("skills/Upper.md", "# U\n");
    tree.write("skills/has space.md", "# S\n");
    tree.write("skills/ns/Bad/x.md", "# B\n");
    tree.write("skills/ns/README.md", "# R\n");
    tree.write("skills/dotted.name.md", "# D\n");
    tree.write(&format!("skills/{long}.md"), "# L\n");
    tree.write("skills/ok.md", "# Ok\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ok"]));
    let chars = "segment may only contain lowercase ASCII letters, digits, '-' and '_'";
    let expected = [
        (
            "skills/Upper.md".to_string(),
            format!(
                "invalid id \"Upper\": invalid id (segment 1 of \"Upper\"): {chars}: \"Upper\""
            ),
        ),
        (
            "skills/has space.md".to_string(),
            format!(
                "invalid id \"has space\": invalid id (segment 1 of \"has space\"): {chars}: \"has space\""
            ),
        ),
        (
            "skills/ns/Bad/x.md".to_string(),
            format!(
                "invalid id \"ns/Bad/x\": invalid id (segment 2 of \"ns/Bad/x\"): {chars}: \"Bad\""
            ),
        ),
        (
            "skills/ns/README.md".to_string(),
            format!(
                "invalid id \"ns/README\": invalid id (segment 2 of \"ns/README\"): {chars}: \"README\""
            ),
        ),
        (
            "skills/dotted.name.md".to_string(),
            format!(
                "invalid id \"dotted.name\": invalid id (segment 1 of \"dotted.name\"): {chars}: \"dotted.name\""
            ),
        ),
        (
            format!("skills/{long}.md"),
            format!(
                "invalid id \"{long}\": invalid id (segment 1 of \"{long}\"): segment too long (65 chars; max 64): \"{long}\""
            ),
        ),
    ];
    for (rel, reason) in expected {
        assert_eq!(
            skipped(&d, "skills_folder", &abs(&tree, &rel)),
            Some(reason),
            "{rel}"
        );
    }
}

#[test]
fn non_markdown_files_are_ignored() {
    let tree = no_bundled();
    tree.write("skills/ns/a.md", "# A\n");
    tree.write("skills/ns/notes.txt", "# not markdown\n");
    tree.write("skills/ns/run.py", "print('hi')\n");
    tree.write("skills/ns/old.md.bak", "# backup\n");
    tree.write("skills/ns/upper.MD", "# upper extension\n");
    tree.write("skills/ns/.md", "# only an extension\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ns/a"]));
    assert_eq!(d.skipped().expect("skipped"), Vec::new());
}

// ---------------------------------------------------------------------------------------------
// Merge precedence: local > global > agents skills > bundled
// ---------------------------------------------------------------------------------------------

#[test]
fn default_local_root_is_also_seen_by_the_global_scan() {
    let tree = no_bundled();
    tree.write("skills/iii/team/notes.md", "# Notes\n");
    let d = tree.open();
    // Local id `team/notes`, and the same file as the global id `iii/team/notes` (spec 2.6).
    assert_eq!(skill_ids(&d), strings(&["iii/team/notes", "team/notes"]));
}

#[test]
fn local_namespace_shadows_the_global_namespace_wholesale() {
    let tree = no_bundled();
    tree.write("skills/shell/index.md", "# Global shell\n");
    tree.write("skills/shell/exec.md", "# Global exec\n");
    tree.write("skills/iii/shell/index.md", "# Local shell\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["iii/shell", "shell"]));
    let shell = get(&d, "shell");
    assert_eq!(shell["title"], "Local shell");
    assert_eq!(shell["path"], abs(&tree, "skills/iii/shell/index.md"));
    assert!(get_err(&d, "shell/exec").starts_with("D110 not_found: skill \"shell/exec\""));
    assert_eq!(
        skipped(&d, "skills_folder", &abs(&tree, "skills/shell/exec.md")).as_deref(),
        Some(
            "shadowed: local_skills_folder has a \"shell\" folder, which overrides this namespace"
        )
    );
}

#[test]
fn empty_local_namespace_folder_shadows_the_global_namespace() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Global exec\n");
    tree.mkdir("skills/iii/shell");
    let d = tree.open();
    assert_eq!(skill_ids(&d), Vec::<String>::new());
}

#[test]
fn empty_local_root_shadows_nothing() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Global exec\n");
    tree.mkdir("skills/iii");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["shell/exec"]));
}

#[test]
fn local_file_wins_over_a_global_file_with_the_same_id() {
    let tree = no_bundled();
    tree.write("skills/solo.md", "# Global solo\n");
    tree.write("skills/iii/solo.md", "# Local solo\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["iii/solo", "solo"]));
    let solo = get(&d, "solo");
    assert_eq!(solo["title"], "Local solo");
    assert_eq!(solo["path"], abs(&tree, "skills/iii/solo.md"));
    assert_eq!(
        skipped(&d, "skills_folder", &abs(&tree, "skills/solo.md")).as_deref(),
        Some("shadowed: local_skills_folder has a skill with the same id")
    );
}

#[test]
fn global_namespace_shadows_the_agents_skills_namespace() {
    let tree = no_bundled();
    tree.write("skills/tool/other.md", "# Global other\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["tool/other"]));
    assert_eq!(
        skipped(
            &d,
            "agents_skills_folder",
            &abs(&tree, ".agents/skills/tool/SKILL.md")
        )
        .as_deref(),
        Some("shadowed: namespace \"tool\" is also a folder of a higher-precedence skills root")
    );
}

#[test]
fn empty_global_folder_shadows_the_agents_skills_namespace() {
    let tree = no_bundled();
    tree.mkdir("skills/tool");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), Vec::<String>::new());
}

#[test]
fn local_folder_shadows_the_agents_skills_namespace() {
    let tree = no_bundled();
    tree.write("skills/iii/tool/index.md", "# Local tool\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Agents tool\n");
    let d = tree.open();
    assert_eq!(get(&d, "tool")["title"], "Local tool");
    assert_eq!(skill_ids(&d), strings(&["iii/tool", "tool"]));
}

#[test]
fn agents_skills_scan_is_shallow() {
    let tree = no_bundled();
    tree.write(".agents/skills/tool/SKILL.md", "# Tool\n");
    tree.write(".agents/skills/tool/reference/api.md", "# Ref\n");
    tree.write(".agents/skills/tool/scripts/run.md", "# Run\n");
    tree.write(".agents/skills/tool/notes.md", "# Notes\n");
    tree.write(".agents/skills/tool/sub/SKILL.md", "# Nested skill\n");
    tree.write(".agents/skills/stray.md", "# Stray\n");
    tree.write(".agents/skills/nodoc/readme.md", "# No SKILL.md\n");
    tree.write(".agents/skills/plural/SKILLS.md", "# Plural\n");
    tree.write(".agents/skills/idx/index.md", "# Index\n");
    tree.mkdir(".agents/skills/empty");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["tool"]));
    assert_eq!(d.skipped().expect("skipped"), Vec::new());
}

#[test]
fn agents_skills_uppercase_folder_is_skipped_with_a_reason() {
    let tree = no_bundled();
    tree.write(".agents/skills/Upper/SKILL.md", "# Upper\n");
    tree.write(".agents/skills/ok/SKILL.md", "# Ok\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&["ok"]));
    assert_eq!(
        skipped(
            &d,
            "agents_skills_folder",
            &abs(&tree, ".agents/skills/Upper/SKILL.md")
        )
        .as_deref(),
        Some(
            "invalid id \"Upper/index\": invalid id (segment 1 of \"Upper/index\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"Upper\""
        )
    );
}

#[test]
fn agents_skill_is_displayed_and_served_as_its_folder_name() {
    let tree = no_bundled();
    tree.write(
        ".agents/skills/tool/SKILL.md",
        "---\nname: Tool\n---\nUse the tool.\n",
    );
    let d = tree.open();
    for id in ["tool", "tool/index", "iii://tool", "tool/SKILL.md"] {
        let skill = get(&d, id);
        assert_eq!(skill["id"], "tool", "{id}");
        assert_eq!(
            skill["path"],
            abs(&tree, ".agents/skills/tool/SKILL.md"),
            "{id}"
        );
    }
    assert_eq!(row(&d, "tool")["title"], "Tool");
}

#[test]
fn missing_roots_are_empty() {
    let tree = Tree::new();
    // Only the agents folder exists; no skills root, no local root, no agents skills root.
    tree.write("agents/helper.md", "---\nname: Helper\n---\nBody.\n");
    let d = tree.open();
    assert_eq!(skill_ids(&d), strings(&BUNDLED_IDS));
    assert_eq!(d.skipped().expect("skipped"), Vec::new());
}

// ---------------------------------------------------------------------------------------------
// Bundled `iii-directory/*` skills
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Display ids
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// filter_unregistered
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------------------------

#[test]
fn list_row_has_exactly_the_contract_fields() {
    let tree = no_bundled();
    let text = "---\ntitle: Exec commands\ntype: how-to\nfunction_id: shell::exec\ndescription: Runs a command.\ndisable-model-invocation: true\nextra: ignored\n---\n# Heading\n\nParagraph.\n";
    tree.write("skills/shell/exec.md", text);
    set_mtime(&tree, "skills/shell/exec.md");
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({})),
        json!({ "skills": [{
            "id": "shell/exec",
            "title": "Exec commands",
            "type": "how-to",
            "function_id": "shell::exec",
            "disable_model_invocation": true,
            "description": "Runs a command.",
            "bytes": text.len(),
            "modified_at": MTIME_TEXT,
        }]})
    );
}

#[test]
fn list_row_has_null_type_and_function_id_when_absent() {
    let tree = no_bundled();
    let text = "# Plain\n\nJust text.\n";
    tree.write("skills/plain.md", text);
    set_mtime(&tree, "skills/plain.md");
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({})),
        json!({ "skills": [{
            "id": "plain",
            "title": "Plain",
            "type": null,
            "function_id": null,
            "disable_model_invocation": false,
            "description": "Just text.",
            "bytes": text.len(),
            "modified_at": MTIME_TEXT,
        }]})
    );
}

#[test]
fn list_of_an_empty_catalog_is_an_empty_array() {
    let tree = no_bundled();
    let d = tree.open();
    assert_eq!(call(&d, LIST, json!({})), json!({ "skills": [] }));
}

#[test]
fn list_is_sorted_by_on_disk_id() {
    let tree = no_bundled();
    tree.write("skills/ab-test/index.md", "# A\n");
    tree.write("skills/ab-test-2/index.md", "# B\n");
    tree.write("skills/ab.md", "# C\n");
    tree.write("skills/ab-test/zeta.md", "# D\n");
    let d = tree.open();
    // On disk: ab, ab-test-2/index, ab-test/index, ab-test/zeta ('-' sorts before '/').
    assert_eq!(
        skill_ids(&d),
        strings(&["ab", "ab-test-2", "ab-test", "ab-test/zeta"])
    );
}

#[test]
fn list_prefix_matches_the_raw_on_disk_id() {
    let tree = no_bundled();
    tree.write("skills/database/index.md", "# Database\n");
    tree.write("skills/database/query.md", "# Query\n");
    tree.write("skills/databases/other.md", "# Other\n");
    tree.write("skills/misc.md", "# Misc\n");
    let d = tree.open();
    assert_eq!(
        list_ids(&d, json!({ "prefix": "database/" })),
        strings(&["database", "database/query"])
    );
    // The raw id still ends in `/index`, though the row shows `database`.
    assert_eq!(
        list_ids(&d, json!({ "prefix": "database/index" })),
        strings(&["database"])
    );
    assert_eq!(
        list_ids(&d, json!({ "prefix": "database" })),
        strings(&["database", "database/query", "databases/other"])
    );
    assert_eq!(
        list_ids(&d, json!({ "prefix": "nothing" })),
        Vec::<String>::new()
    );
}

#[test]
fn list_type_filter_is_an_exact_match() {
    let tree = no_bundled();
    tree.write("skills/a/index.md", "---\ntype: index\n---\nA.\n");
    tree.write("skills/b/index.md", "---\ntype: Index\n---\nB.\n");
    tree.write("skills/c/index.md", "---\ntype: index-extra\n---\nC.\n");
    tree.write("skills/d/index.md", "D without a type.\n");
    tree.write("skills/e/index.md", "---\ntype: \"  index  \"\n---\nE.\n");
    let d = tree.open();
    assert_eq!(
        list_ids(&d, json!({ "type": "index" })),
        strings(&["a", "e"])
    );
    assert_eq!(list_ids(&d, json!({ "type": "Index" })), strings(&["b"]));
    assert_eq!(list_ids(&d, json!({ "type": "" })), Vec::<String>::new());
}

#[test]
fn list_search_is_case_insensitive_over_display_id_title_and_description() {
    let tree = no_bundled();
    tree.write("skills/shell-tools/index.md", "Runs things.\n");
    tree.write(
        "skills/by-title.md",
        "---\ntitle: The SHELL guide\n---\nText.\n",
    );
    tree.write(
        "skills/by-description.md",
        "---\ndescription: Wraps a Shell.\n---\nText.\n",
    );
    tree.write("skills/unrelated.md", "# Nothing here\n\nAt all.\n");
    let d = tree.open();
    assert_eq!(
        list_ids(&d, json!({ "search": "sHeLl" })),
        strings(&["by-description", "by-title", "shell-tools"])
    );
}

#[test]
fn list_search_looks_at_the_display_id_not_the_on_disk_id() {
    let tree = no_bundled();
    tree.write("skills/ns/index.md", "# Title\n\nText.\n");
    let d = tree.open();
    assert_eq!(
        list_ids(&d, json!({ "search": "index" })),
        Vec::<String>::new()
    );
    assert_eq!(list_ids(&d, json!({ "search": "NS" })), strings(&["ns"]));
}

#[test]
fn list_empty_search_matches_everything() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    tree.write("skills/b.md", "# B\n");
    let d = tree.open();
    assert_eq!(list_ids(&d, json!({ "search": "" })), strings(&["a", "b"]));
}

#[test]
fn list_include_description_false_blanks_descriptions() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ndescription: From frontmatter.\n---\nBody.\n",
    );
    tree.write("skills/b.md", "# B\n\nFrom the body.\n");
    let d = tree.open();
    let blanked = rows(&d, json!({ "include_description": false }));
    assert_eq!(blanked.len(), 2);
    for r in &blanked {
        assert_eq!(r["description"], "", "{r}");
    }
    let full = rows(&d, json!({ "include_description": true }));
    assert_eq!(full[0]["description"], "From frontmatter.");
    assert_eq!(full[1]["description"], "From the body.");
}

#[test]
fn list_ignores_unknown_request_keys() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    let d = tree.open();
    let plain = call(&d, LIST, json!({}));
    assert_eq!(
        call(
            &d,
            LIST,
            json!({ "_caller_worker_id": "w-1", "limit": 3, "id": "x" })
        ),
        plain
    );
    assert_eq!(call(&d, LIST, Value::Null), plain);
}

#[test]
fn list_rejects_wrongly_typed_fields() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    let d = tree.open();
    for request in [
        json!({ "search": 5 }),
        json!({ "prefix": ["a"] }),
        json!({ "type": true }),
        json!({ "include_description": "no" }),
    ] {
        let e = call_err(&d, LIST, request.clone());
        assert!(e.starts_with("invalid request: "), "{request}: {e}");
    }
}

#[test]
fn title_prefers_frontmatter_title() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ntitle: \"  The Title  \"\nname: the-name\n---\n# Heading\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["title"], "The Title");
}

#[test]
fn title_falls_back_to_frontmatter_name() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ntitle: \"   \"\nname: the-name\n---\n# Heading\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["title"], "the-name");
}

#[test]
fn title_falls_back_to_the_first_h1() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ndescription: D.\n---\nIntro.\n\n## Sub\n\n# The H1\n\n# Second\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["title"], "The H1");
}

#[test]
fn title_falls_back_to_the_display_id() {
    let tree = no_bundled();
    tree.write(
        "skills/ns/index.md",
        "No heading at all.\n\n## Only a sub-heading\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "ns")["title"], "ns");
}

#[test]
fn hash_inside_a_code_block_is_not_a_title() {
    let tree = no_bundled();
    tree.write("skills/a.md", "```sh\n# not a title\n```\n\nText.\n");
    tree.write("skills/b.md", "```sh\n# not a title\n```\n\n# Real title\n");
    let d = tree.open();
    assert_eq!(row(&d, "a")["title"], "a");
    assert_eq!(row(&d, "b")["title"], "Real title");
}

#[test]
fn description_prefers_frontmatter_description() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ndescription: \"  From frontmatter.  \"\n---\n# T\n\nFrom the body.\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["description"], "From frontmatter.");
}

#[test]
fn description_falls_back_to_the_first_paragraph() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ndescription: \"\"\n---\n# T\n\n> **Note:** a callout\n> on two lines.\n\n## Sub-heading\n\n  The real\n  description, **as written**.\n\nSecond paragraph.\n",
    );
    let d = tree.open();
    assert_eq!(
        row(&d, "a")["description"],
        "The real description, **as written**."
    );
}

#[test]
fn description_is_not_truncated() {
    let tree = no_bundled();
    let long = "word ".repeat(100);
    tree.write("skills/a.md", &format!("# T\n\n{}\n", long.trim_end()));
    let d = tree.open();
    assert_eq!(row(&d, "a")["description"], long.trim_end());
}

#[test]
fn a_list_is_text_of_the_description() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A title\n\n- a list\n- only\n");
    tree.write(
        "skills/b.md",
        "# B\n\nUse this skill when:\n- mail goes out\n- mail comes back\n\nMore.\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["description"], "- a list - only");
    assert_eq!(
        row(&d, "b")["description"],
        "Use this skill when: - mail goes out - mail comes back"
    );
}

#[test]
fn description_is_empty_without_text() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "# Only headings\n\n## Sub\n\n```sh\nand code\n```\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["description"], "");
}

#[test]
fn frontmatter_that_is_not_yaml_is_read_line_by_line_and_reported() {
    let tree = no_bundled();
    let text = "---\ntitle: [oops\ntype: index\ndescription: Read: line by line.\n---\n# From Body\n\nBody paragraph.\n";
    tree.write("skills/a.md", text);
    set_mtime(&tree, "skills/a.md");
    let d = tree.open();
    // The broken `title` line is left out; the other one-line entries are read.
    assert_eq!(
        row(&d, "a"),
        json!({
            "id": "a",
            "title": "From Body",
            "type": "index",
            "function_id": null,
            "disable_model_invocation": false,
            "description": "Read: line by line.",
            "bytes": text.len(),
            "modified_at": MTIME_TEXT,
        })
    );
    // The block is still split off the body.
    assert_eq!(get(&d, "a")["body"], "# From Body\n\nBody paragraph.\n");
    let skipped = d.skipped().expect("check");
    let reported = skipped
        .iter()
        .find(|s| s.path == abs(&tree, "skills/a.md"))
        .expect("the file is listed by check");
    assert!(
        reported
            .reason
            .starts_with("frontmatter is not a YAML mapping ("),
        "{reported:?}"
    );
}

#[test]
fn emoji_written_as_surrogate_pair_escapes_keep_the_frontmatter() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\nname: Scope\ndescription: \"Looks far \\uD83D\\uDD2D\"\nemoji: \"\\uD83D\\uDD2D\"\n---\n# Body\n",
    );
    let d = tree.open();
    let a = row(&d, "a");
    assert_eq!(
        (&a["title"], &a["description"]),
        (&json!("Scope"), &json!("Looks far 🔭"))
    );
    assert!(d.skipped().expect("check").is_empty());
}

#[test]
fn badly_shaped_frontmatter_is_ignored_and_reported() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ntitle: [a, list]\ndescription: Not read.\n---\n# From Body\n\nBody.\n",
    );
    let d = tree.open();
    let a = row(&d, "a");
    assert_eq!(
        (&a["title"], &a["description"]),
        (&json!("From Body"), &json!("Body."))
    );
    assert_eq!(
        d.skipped().expect("check")[0].reason,
        "frontmatter ignored: `title` must be a string"
    );
}

#[test]
fn crlf_frontmatter_and_body_are_read() {
    let tree = no_bundled();
    let text =
        "---\r\ntitle: Crlf Title\r\ntype: index\r\n---\r\n# H\r\n\r\nLine one\r\nline two.\r\n";
    tree.write("skills/crlf.md", text);
    let d = tree.open();
    let r = row(&d, "crlf");
    assert_eq!(r["title"], "Crlf Title");
    assert_eq!(r["type"], "index");
    assert_eq!(r["description"], "Line one line two.");
    assert_eq!(
        get(&d, "crlf")["body"],
        "# H\r\n\r\nLine one\r\nline two.\r\n"
    );
}

#[test]
fn unclosed_frontmatter_is_no_frontmatter() {
    let tree = no_bundled();
    let text = "---\ntitle: Never\n# Real title\n";
    tree.write("skills/a.md", text);
    let d = tree.open();
    assert_eq!(row(&d, "a")["title"], "Real title");
    assert_eq!(get(&d, "a")["body"], text);
}

#[test]
fn non_utf8_file_is_listed_with_defaults_and_get_fails() {
    let tree = no_bundled();
    tree.write("skills/latin1.md", "");
    fs::write(tree.path("skills/latin1.md"), b"# Caf\xe9\n\nText.\n").expect("write");
    let d = tree.open();
    let r = row(&d, "latin1");
    assert_eq!(r["title"], "latin1");
    assert_eq!(r["description"], "");
    assert_eq!(r["bytes"], 14);
    assert_eq!(
        get_err(&d, "latin1"),
        format!("file {} is not UTF-8 text", abs(&tree, "skills/latin1.md"))
    );
}

#[test]
fn too_large_file_is_listed_with_defaults() {
    let tree = no_bundled();
    let head = "---\ntitle: Big\ntype: index\n---\n# Big\n\n";
    let text = format!("{head}{}", "x".repeat(262_145 - head.len()));
    assert_eq!(text.len(), 262_145);
    tree.write("skills/big/index.md", &text);
    set_mtime(&tree, "skills/big/index.md");
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({})),
        json!({ "skills": [{
            "id": "big",
            "title": "big",
            "type": null,
            "function_id": null,
            "disable_model_invocation": false,
            "description": "",
            "bytes": 262_145,
            "modified_at": MTIME_TEXT,
        }]})
    );
}

#[test]
fn file_of_exactly_the_size_cap_is_served() {
    let tree = no_bundled();
    let frontmatter = "---\ntitle: Big\n---\n";
    let head = format!("{frontmatter}# Big\n\n");
    let text = format!("{head}{}", "x".repeat(262_144 - head.len()));
    assert_eq!(text.len(), 262_144);
    tree.write("skills/big.md", &text);
    let d = tree.open();
    assert_eq!(row(&d, "big")["title"], "Big");
    assert_eq!(get(&d, "big")["body"], text[frontmatter.len()..]);
}

#[test]
fn too_large_file_get_fails_naming_the_file() {
    let tree = no_bundled();
    tree.write("skills/big.md", &"x".repeat(262_145));
    let d = tree.open();
    assert_eq!(
        get_err(&d, "big"),
        format!(
            "file {} is too large (262145 bytes; max 262144)",
            abs(&tree, "skills/big.md")
        )
    );
}

#[test]
fn empty_body_file_is_listed_with_defaults() {
    let tree = no_bundled();
    let text = "---\ntitle: Empty\ntype: index\ndescription: Has no body.\n---\n\n\n";
    tree.write("skills/empty/index.md", text);
    set_mtime(&tree, "skills/empty/index.md");
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({})),
        json!({ "skills": [{
            "id": "empty",
            "title": "empty",
            "type": null,
            "function_id": null,
            "disable_model_invocation": false,
            "description": "",
            "bytes": text.len(),
            "modified_at": MTIME_TEXT,
        }]})
    );
    // And it is no worker overview.
    assert_eq!(index_body(&d), "# Skills index\n\n0 worker(s).\n");
}

#[test]
fn empty_body_file_get_fails_naming_the_file() {
    let tree = no_bundled();
    tree.write("skills/empty.md", "---\ntitle: Empty\n---\n\n");
    tree.write("skills/blank.md", "");
    let d = tree.open();
    for (id, rel) in [("empty", "skills/empty.md"), ("blank", "skills/blank.md")] {
        assert_eq!(
            get_err(&d, id),
            format!("file {} has empty body", abs(&tree, rel))
        );
    }
}

#[test]
fn modified_at_is_rfc3339_utc() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    set_mtime(&tree, "skills/a.md");
    tree.write("skills/b.md", "# B\n");
    let d = tree.open();
    assert_eq!(row(&d, "a")["modified_at"], MTIME_TEXT);
    assert_eq!(get(&d, "a")["modified_at"], MTIME_TEXT);
    let fresh = row(&d, "b")["modified_at"]
        .as_str()
        .expect("text")
        .to_string();
    assert!(fresh.ends_with("+00:00"), "{fresh}");
    assert_eq!(&fresh[4..5], "-");
    assert_eq!(&fresh[10..11], "T");
}

// ---------------------------------------------------------------------------------------------
// get
// ---------------------------------------------------------------------------------------------

#[test]
fn get_returns_exactly_the_contract_fields() {
    let tree = no_bundled();
    let text = "---\ntitle: Exec\ntype: reference\nfunction_id: shell::exec\ndescription: Not in get.\n---\n# Exec\n\nRuns.\n";
    tree.write("skills/shell/exec.md", text);
    set_mtime(&tree, "skills/shell/exec.md");
    let d = tree.open();
    assert_eq!(
        get(&d, "shell/exec"),
        json!({
            "id": "shell/exec",
            "title": "Exec",
            "type": "reference",
            "function_id": "shell::exec",
            "disable_model_invocation": false,
            "path": abs(&tree, "skills/shell/exec.md"),
            "body": "# Exec\n\nRuns.\n",
            "modified_at": MTIME_TEXT,
        })
    );
}

#[test]
fn get_path_is_absolute() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    let d = tree.open();
    let path = get(&d, "a")["path"].as_str().expect("path").to_string();
    assert!(std::path::Path::new(&path).is_absolute(), "{path}");
    assert_eq!(fs::read_to_string(&path).expect("read"), "# A\n");
}

#[test]
fn get_body_is_verbatim_after_the_frontmatter() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ntitle: A\n---\n\n\n  indented\n\ntrailing\n\n\n",
    );
    let d = tree.open();
    assert_eq!(get(&d, "a")["body"], "\n\n  indented\n\ntrailing\n\n\n");
}

#[test]
fn get_accepts_the_iii_scheme() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Exec\n");
    let d = tree.open();
    assert_eq!(get(&d, "iii://shell/exec")["id"], "shell/exec");
    assert_eq!(get(&d, "  iii://shell/exec  ")["id"], "shell/exec");
}

#[test]
fn get_accepts_a_md_suffix() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Exec\n");
    tree.write("skills/shell/index.md", "# Shell\n");
    let d = tree.open();
    assert_eq!(get(&d, "shell/exec.md")["id"], "shell/exec");
    assert_eq!(get(&d, "shell/index.md")["id"], "shell");
    assert_eq!(get(&d, "iii://shell/exec.md")["id"], "shell/exec");
}

#[test]
fn get_accepts_overview_file_paths() {
    let tree = no_bundled();
    tree.write("skills/resend/emails/index.md", "# Emails\n");
    let d = tree.open();
    for id in ["resend/emails/SKILL.md", "resend/emails/SKILLS.md"] {
        assert_eq!(get(&d, id)["id"], "resend/emails", "{id}");
    }
}

#[test]
fn get_root_skill_md_is_index() {
    let tree = no_bundled();
    tree.write("skills/index.md", "# Root\n");
    let d = tree.open();
    assert_eq!(get(&d, "SKILL.md")["id"], "index");
    assert_eq!(get(&d, "SKILLS.md")["id"], "index");
}

#[test]
fn get_bare_namespace_resolves_its_index() {
    let tree = no_bundled();
    tree.write("skills/sandbox/index.md", "# Sandbox\n");
    let d = tree.open();
    let skill = get(&d, "sandbox");
    assert_eq!(skill["id"], "sandbox");
    assert_eq!(skill["path"], abs(&tree, "skills/sandbox/index.md"));
    assert_eq!(get(&d, "sandbox/index")["id"], "sandbox");
}

#[test]
fn get_literal_file_beats_the_index_alias() {
    let tree = no_bundled();
    tree.write("skills/sandbox.md", "# Literal\n");
    tree.write("skills/sandbox/index.md", "# Overview\n");
    let d = tree.open();
    let literal = get(&d, "sandbox");
    assert_eq!(literal["id"], "sandbox");
    assert_eq!(literal["title"], "Literal");
    let overview = get(&d, "sandbox/index");
    assert_eq!(overview["id"], "sandbox/index");
    assert_eq!(overview["title"], "Overview");
}

#[test]
fn get_raw_true_adds_the_whole_file() {
    let tree = no_bundled();
    let text = "---\ntitle: A\n---\nBody.\n";
    tree.write("skills/a.md", text);
    let d = tree.open();
    let skill = call(&d, GET, json!({ "id": "a", "raw": true }));
    assert_eq!(skill["raw"], text);
    assert_eq!(skill["body"], "Body.\n");
}

#[test]
fn get_raw_is_absent_unless_asked() {
    let tree = no_bundled();
    tree.write("skills/a.md", "---\ntitle: A\n---\nBody.\n");
    let d = tree.open();
    for request in [json!({ "id": "a" }), json!({ "id": "a", "raw": false })] {
        let skill = call(&d, GET, request);
        let keys: Vec<&str> = skill
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert!(!keys.contains(&"raw"), "{keys:?}");
        assert!(!keys.contains(&"description"), "{keys:?}");
        assert!(!keys.contains(&"bytes"), "{keys:?}");
    }
}

#[test]
fn get_miss_suggests_up_to_three_ranked_ids() {
    let tree = no_bundled();
    for rel in [
        "alpha/index",
        "alpha/beta",
        "alpha/gamma",
        "alpha/zzzzzzzzzz",
        "zeta/beta",
        "delta",
    ] {
        tree.write(&format!("skills/{rel}.md"), "# X\n");
    }
    let d = tree.open();
    // Scores: alpha/beta 100-1, alpha/gamma 100-4, alpha/index 100-5, alpha/zzzzzzzzzz 100-10,
    // zeta/beta and delta below zero.
    assert_eq!(
        get_err(&d, "alpha/betta"),
        format!(
            "D110 not_found: skill \"alpha/betta\" does not exist. Did you mean: alpha/beta, alpha/gamma, alpha.{NEXT_ON_MISS}"
        )
    );
}

#[test]
fn get_miss_drops_suggestions_that_score_zero_or_less() {
    let tree = no_bundled();
    tree.write("skills/zeta/beta.md", "# X\n");
    tree.write("skills/delta.md", "# X\n");
    let d = tree.open();
    assert_eq!(
        get_err(&d, "alpha/betta"),
        format!("D110 not_found: skill \"alpha/betta\" does not exist.{NEXT_ON_MISS}")
    );
}

#[test]
fn get_miss_on_an_empty_catalog_has_no_suggestions() {
    let tree = no_bundled();
    let d = tree.open();
    assert_eq!(
        get_err(&d, "ghost"),
        format!("D110 not_found: skill \"ghost\" does not exist.{NEXT_ON_MISS}")
    );
}

#[test]
fn get_miss_suggests_a_deeper_path_sharing_segments() {
    let tree = no_bundled();
    tree.write("skills/sandbox/skills/sandbox/exec.md", "# Exec\n");
    let d = tree.open();
    assert_eq!(
        get_err(&d, "sandbox/exec"),
        format!(
            "D110 not_found: skill \"sandbox/exec\" does not exist. Did you mean: sandbox/skills/sandbox/exec.{NEXT_ON_MISS}"
        )
    );
}

#[test]
fn get_miss_under_iii_suggests_the_namespace_overview_first() {
    let tree = no_bundled();
    tree.write("skills/sandbox/index.md", "# Sandbox\n");
    tree.write("skills/sandbox/exec.md", "# Exec\n");
    let d = tree.open();
    let e = get_err(&d, "iii/skills/sandbox/index");
    assert!(
        e.starts_with(
            "D110 not_found: skill \"iii/skills/sandbox/index\" does not exist. Did you mean: sandbox, "
        ),
        "{e}"
    );
}

#[test]
fn get_function_id_is_d112() {
    let tree = no_bundled();
    tree.write("skills/database/index.md", "# Database\n");
    let d = tree.open();
    assert_eq!(
        get_err(&d, "database::execute"),
        format!(
            "D112 invalid_input: \"database::execute\" looks like a FUNCTION id (service::name), not a skill id. Skill ids use '/' (e.g. \"database/index\"). To CALL that function pass the id to agent_trigger; to READ its skill doc, look up the skill id.{NEXT_ON_MISS}"
        )
    );
}

#[test]
fn get_rejects_other_url_schemes() {
    let tree = no_bundled();
    let d = tree.open();
    for id in [
        "https://example.com/skill",
        "file:///etc/passwd",
        "iii://iii://x",
    ] {
        let e = get_err(&d, id);
        assert_eq!(
            e,
            format!(
                "Invalid id (must be a bare skill path, a path ending in .md, or an iii:// URI): {id}"
            )
        );
        assert!(e.contains("iii://"));
    }
}

#[test]
fn get_rejects_an_empty_id() {
    let tree = no_bundled();
    let d = tree.open();
    for id in ["", "   ", "iii://"] {
        assert_eq!(get_err(&d, id), "id must be non-empty", "{id:?}");
    }
}

#[test]
fn get_rejects_uppercase() {
    let tree = no_bundled();
    tree.write("skills/shell/exec.md", "# Exec\n");
    let d = tree.open();
    assert_eq!(
        get_err(&d, "Shell/exec"),
        "invalid id (segment 1 of \"Shell/exec\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"Shell\""
    );
}

#[test]
fn get_rejects_a_trailing_slash() {
    let tree = no_bundled();
    tree.write("skills/shell/index.md", "# Shell\n");
    let d = tree.open();
    assert_eq!(
        get_err(&d, "shell/"),
        "id may not have a leading or trailing '/': \"shell/\""
    );
    assert_eq!(
        get_err(&d, "/shell"),
        "id may not have a leading or trailing '/': \"/shell\""
    );
}

#[test]
fn get_rejects_a_double_slash() {
    let tree = no_bundled();
    let d = tree.open();
    assert_eq!(
        get_err(&d, "shell//exec"),
        "invalid id (segment 2 of \"shell//exec\"): segment must be non-empty"
    );
}

#[test]
fn get_rejects_path_traversal_and_non_ascii() {
    let tree = no_bundled();
    let d = tree.open();
    assert_eq!(
        get_err(&d, "../etc/passwd"),
        "invalid id (segment 1 of \"../etc/passwd\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"..\""
    );
    assert_eq!(
        get_err(&d, "café"),
        "invalid id (segment 1 of \"café\"): segment may only contain lowercase ASCII letters, digits, '-' and '_': \"café\""
    );
}

#[test]
fn get_rejects_wrong_request_shapes() {
    let tree = no_bundled();
    let d = tree.open();
    for request in [
        json!({}),
        json!({ "id": 5 }),
        json!({ "id": "a", "raw": "yes" }),
    ] {
        let e = call_err(&d, GET, request.clone());
        assert!(e.starts_with("invalid request: "), "{request}: {e}");
    }
}

#[test]
fn get_ignores_unknown_request_keys() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    let d = tree.open();
    assert_eq!(
        call(
            &d,
            GET,
            json!({ "id": "a", "_caller_worker_id": "w", "junk": [1] })
        ),
        get(&d, "a")
    );
}

/// The note `get` puts before a recovered body: a `> Note:` line, a blank line, `---`, a blank
/// line, then the served body verbatim.
fn assert_recovered(answer: &Value, served_body: &str, mentions: &[&str]) {
    let body = answer["body"].as_str().expect("body");
    assert!(body.starts_with("> Note: "), "{body}");
    let suffix = format!("\n\n---\n\n{served_body}");
    assert!(body.ends_with(&suffix), "{body}");
    let note = &body[..body.len() - suffix.len()];
    assert!(!note.contains('\n'), "the note is one line: {note}");
    for word in mentions {
        assert!(note.contains(word), "{word} not in {note}");
    }
}

#[test]
fn get_miss_serves_the_installed_worker_overview() {
    let tree = no_bundled();
    tree.write(
        "skills/iii-sandbox/index.md",
        "# Sandbox worker\n\nRuns code.\n",
    );
    tree.write("skills/iii-sandbox/exec.md", "# Exec\n");
    let d = tree.open();
    let answer = call_installed(&d, GET, json!({ "id": "sandbox" }), &["iii-sandbox"]);
    assert_eq!(answer["id"], "iii-sandbox");
    assert_eq!(answer["title"], "Sandbox worker");
    assert_eq!(answer["path"], abs(&tree, "skills/iii-sandbox/index.md"));
    assert_recovered(
        &answer,
        "# Sandbox worker\n\nRuns code.\n",
        &["`sandbox`", "iii-sandbox"],
    );
}

#[test]
fn get_miss_of_a_sub_path_serves_the_overview_when_it_is_the_only_doc() {
    let tree = no_bundled();
    tree.write("skills/iii-sandbox/index.md", "# Sandbox worker\n");
    let d = tree.open();
    let answer = call_installed(
        &d,
        GET,
        json!({ "id": "sandbox/missing" }),
        &["iii-sandbox"],
    );
    assert_eq!(answer["id"], "iii-sandbox");
    assert_recovered(&answer, "# Sandbox worker\n", &["`sandbox/missing`"]);
}

#[test]
fn get_miss_of_a_sub_path_is_d110_when_the_worker_has_other_docs() {
    let tree = no_bundled();
    tree.write("skills/iii-sandbox/index.md", "# Sandbox worker\n");
    tree.write("skills/iii-sandbox/exec.md", "# Exec\n");
    let d = tree.open();
    let e = d
        .read(
            GET,
            &json!({ "id": "sandbox/missing" }),
            Some(&["iii-sandbox".to_string()].into()),
        )
        .expect_err("miss")
        .to_string();
    assert!(
        e.starts_with("D110 not_found: skill \"sandbox/missing\" does not exist."),
        "{e}"
    );
}

#[test]
fn get_miss_without_an_installed_set_does_not_recover() {
    let tree = no_bundled();
    tree.write("skills/iii-sandbox/index.md", "# Sandbox worker\n");
    let d = tree.open();
    assert!(get_err(&d, "sandbox").starts_with("D110 not_found: skill \"sandbox\""));
}

#[test]
fn get_miss_with_ambiguous_worker_names_does_not_recover() {
    let tree = no_bundled();
    tree.write("skills/iii-foobar/index.md", "# Foobar\n");
    tree.write("skills/iii-fooqux/index.md", "# Fooqux\n");
    let d = tree.open();
    let installed = ["iii-foobar".to_string(), "iii-fooqux".to_string()].into();
    let e = d
        .read(GET, &json!({ "id": "foo" }), Some(&installed))
        .expect_err("miss")
        .to_string();
    assert!(
        e.starts_with("D110 not_found: skill \"foo\" does not exist."),
        "{e}"
    );
}

#[test]
fn get_miss_falls_back_to_the_engine_overview() {
    let tree = no_bundled();
    tree.write("skills/iii/index.md", "# iii engine\n\nThe engine.\n");
    let d = tree.open();
    let answer = call_installed(&d, GET, json!({ "id": "shell" }), &["shell"]);
    assert_eq!(answer["id"], "iii");
    assert_eq!(answer["title"], "iii engine");
    assert_recovered(&answer, "# iii engine\n\nThe engine.\n", &["`shell`"]);
}

#[test]
fn get_miss_without_the_engine_overview_is_the_special_d110() {
    let tree = no_bundled();
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    let installed = ["shell".to_string()].into();
    let e = d
        .read(GET, &json!({ "id": "shell" }), Some(&installed))
        .expect_err("miss")
        .to_string();
    assert!(
        e.starts_with("D110 not_found: \"shell\" does not exist"),
        "{e}"
    );
    assert!(
        e.contains("the worker `shell` is installed but ships no skill doc"),
        "{e}"
    );
    assert!(!e.contains("Did you mean"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// index
// ---------------------------------------------------------------------------------------------

fn overview(tree: &Tree, ns: &str, title: &str, description: &str) {
    tree.write(
        &format!("skills/{ns}/index.md"),
        &format!(
            "---\ntitle: {title}\ntype: index\ndescription: \"{description}\"\n---\n# {title}\n"
        ),
    );
}

#[test]
fn index_of_an_empty_catalog() {
    let tree = no_bundled();
    let d = tree.open();
    assert_eq!(
        call(&d, INDEX, json!({})),
        json!({ "body": "# Skills index\n\n0 worker(s).\n", "workers_count": 0 })
    );
}

#[test]
fn index_renders_heading_description_and_pointer_per_worker() {
    let tree = no_bundled();
    overview(&tree, "alpha", "Alpha", "Alpha does things.");
    overview(&tree, "beta", "Beta", "Beta too.");
    let d = tree.open();
    assert_eq!(
        call(&d, INDEX, json!({ "ignored": true })),
        json!({
            "body": "# Skills index\n\n2 worker(s).\n\n## Alpha\n\nAlpha does things.\n\nRead iii://alpha/index\n\n## Beta\n\nBeta too.\n\nRead iii://beta/index\n",
            "workers_count": 2,
        })
    );
}

#[test]
fn index_lists_only_rows_typed_index() {
    let tree = no_bundled();
    tree.write(
        "skills/untyped/index.md",
        "# Untyped overview\n\nNo type.\n",
    );
    tree.write("skills/howto/index.md", "---\ntype: how-to\n---\n# How\n");
    tree.write(
        "skills/guides/overview.md",
        "---\ntitle: Guides\ntype: index\n---\nAll the guides.\n",
    );
    let d = tree.open();
    assert_eq!(
        call(&d, INDEX, json!({})),
        json!({
            "body": "# Skills index\n\n1 worker(s).\n\n## Guides\n\nAll the guides.\n\nRead iii://guides/overview\n",
            "workers_count": 1,
        })
    );
}

#[test]
fn index_pointer_uses_the_on_disk_id() {
    let tree = no_bundled();
    tree.write("skills/ns/SKILL.md", "---\ntype: index\n---\nOverview.\n");
    let d = tree.open();
    // Title falls back to the display id `ns`; the pointer keeps `ns/index`.
    assert_eq!(
        index_body(&d),
        "# Skills index\n\n1 worker(s).\n\n## ns\n\nOverview.\n\nRead iii://ns/index\n"
    );
}

#[test]
fn index_excludes_agents_skills() {
    let tree = no_bundled();
    tree.write(
        ".agents/skills/tool/SKILL.md",
        "---\ntype: index\n---\n# Tool\n\nA tool.\n",
    );
    overview(&tree, "alpha", "Alpha", "A.");
    let d = tree.open();
    assert_eq!(
        call(&d, INDEX, json!({})),
        json!({
            "body": "# Skills index\n\n1 worker(s).\n\n## Alpha\n\nA.\n\nRead iii://alpha/index\n",
            "workers_count": 1,
        })
    );
}

#[test]
fn index_blank_description_goes_straight_to_the_pointer() {
    let tree = no_bundled();
    tree.write(
        "skills/quiet/index.md",
        "---\ntitle: Quiet\ntype: index\n---\n# Quiet\n",
    );
    let d = tree.open();
    assert_eq!(
        index_body(&d),
        "# Skills index\n\n1 worker(s).\n\n## Quiet\n\nRead iii://quiet/index\n"
    );
}

#[test]
fn index_lists_every_worker_and_budgets_descriptions() {
    let tree = no_bundled();
    let description = |i: usize| format!("{i:02}{}", "d".repeat(198));
    for i in 1..=50 {
        overview(
            &tree,
            &format!("w{i:02}"),
            &format!("Worker {i:02}"),
            &description(i),
        );
    }
    let d = tree.open();
    // Header 30 chars; each worker with its description 238 chars; the 13th description would
    // reach 3,102 > 3,000, so the first 12 are kept and the rest left out.
    let mut expected = String::from("# Skills index\n\n50 worker(s).\n");
    for i in 1..=50 {
        expected.push_str(&format!("\n## Worker {i:02}\n"));
        if i <= 12 {
            expected.push_str(&format!("\n{}\n", description(i)));
        }
        expected.push_str(&format!("\nRead iii://w{i:02}/index\n"));
    }
    expected.push_str(OMITTED_NOTE);
    let answer = call(&d, INDEX, json!({}));
    assert_eq!(answer["workers_count"], 50);
    assert_eq!(answer["body"], expected);
}

#[test]
fn index_budget_includes_a_description_that_reaches_exactly_3000() {
    let tree = no_bundled();
    // Header 29 chars + "\n## T\n" 6 = 35; 35 + 2963 + 2 = 3000.
    let description = "x".repeat(2963);
    overview(&tree, "solo", "T", &description);
    let d = tree.open();
    assert_eq!(
        index_body(&d),
        format!(
            "# Skills index\n\n1 worker(s).\n\n## T\n\n{description}\n\nRead iii://solo/index\n"
        )
    );
}

#[test]
fn index_budget_omits_a_description_one_char_over() {
    let tree = no_bundled();
    overview(&tree, "solo", "T", &"x".repeat(2964));
    let d = tree.open();
    assert_eq!(
        index_body(&d),
        format!("# Skills index\n\n1 worker(s).\n\n## T\n\nRead iii://solo/index\n{OMITTED_NOTE}")
    );
}

#[test]
fn index_budget_counts_characters_not_bytes() {
    let tree = no_bundled();
    let description = "é".repeat(2963);
    overview(&tree, "solo", "T", &description);
    let d = tree.open();
    assert_eq!(
        index_body(&d),
        format!(
            "# Skills index\n\n1 worker(s).\n\n## T\n\n{description}\n\nRead iii://solo/index\n"
        )
    );
}

#[test]
fn index_applies_the_filter() {
    let tree = no_bundled();
    overview(&tree, "alpha", "Alpha", "A.");
    overview(&tree, "beta", "Beta", "B.");
    let d = tree.open();
    assert_eq!(
        call_installed(&d, INDEX, json!({}), &["beta"]),
        json!({
            "body": "# Skills index\n\n1 worker(s).\n\n## Beta\n\nB.\n\nRead iii://beta/index\n",
            "workers_count": 1,
        })
    );
}

#[test]
fn index_includes_the_bundled_directory_overview() {
    let tree = Tree::new();
    tree.write("skills/solo.md", "# Solo\n");
    let d = tree.open();
    let description = asset_field("skills/iii-directory/index.md", "description");
    assert_eq!(
        call(&d, INDEX, json!({})),
        json!({
            "body": format!("# Skills index\n\n1 worker(s).\n\n## iii-directory\n\n{description}\n\nRead iii://iii-directory/index\n"),
            "workers_count": 1,
        })
    );
}
