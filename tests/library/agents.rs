//! `directory::agents::{list,get}` against real files in temporary trees: which files are
//! profiles, frontmatter rules, row shapes, `extends` inheritance and the bundled `iii` /
//! `iii-minimal` bases.

use test_support::common;

use common::{
    MTIME_TEXT, Tree, asset, asset_body, asset_field, call, call_err, call_installed, strings,
};
use iii_directory::doc::ids::NameError;
use iii_directory::{Directory, FrontmatterProblem, ProfileProblem, ReadFunction, SkipReason};
use serde_json::{Value, json};

const LIST: ReadFunction = ReadFunction::AgentsList;
const GET: ReadFunction = ReadFunction::AgentsGet;

const BUNDLED: [&str; 2] = ["iii", "iii-minimal"];
const D415_NEXT: &str = " Next: call directory::agents::list to browse agent profile ids.";

fn ids(directory: &Directory) -> Vec<String> {
    common::names(directory, LIST)
}

fn row(directory: &Directory, id: &str) -> Value {
    common::row(directory, LIST, id)
}

fn get(directory: &Directory, id: &str) -> Value {
    common::get(directory, GET, id)
}

fn get_err(directory: &Directory, id: &str) -> String {
    common::get_err(directory, GET, id)
}

/// Writes `agents/<id>.md` with the given frontmatter lines and body.
fn profile(tree: &Tree, id: &str, frontmatter: &str, body: &str) {
    tree.write(
        &format!("agents/{id}.md"),
        &format!("---\n{frontmatter}\n---\n{body}"),
    );
}

/// A profile with a name, an optional parent and a body.
fn chained(tree: &Tree, id: &str, extends: Option<&str>, body: &str) {
    let extends = extends.map_or(String::new(), |p| format!("\nextends: {p}"));
    profile(tree, id, &format!("name: {id}{extends}"), body);
}

/// The ids listed besides the bundled ones.
fn file_ids(directory: &Directory) -> Vec<String> {
    ids(directory)
        .into_iter()
        .filter(|n| !BUNDLED.contains(&n.as_str()))
        .collect()
}

fn skipped(directory: &Directory, path: &str) -> Option<SkipReason> {
    directory
        .skipped()
        .expect("skipped")
        .into_iter()
        .find(|s| s.root == "agents_folder" && s.path == path)
        .map(|s| s.reason)
}

fn bundled_row(id: &str) -> Value {
    let rel = format!("agents/{id}.md");
    json!({
        "id": id,
        "name": asset_field(&rel, "name"),
        "description": asset_field(&rel, "description"),
        "logo": asset_field(&rel, "logo"),
        "skill_count": null,
        "model": null,
        "reasoning_effort": null,
        "icon": asset_field(&rel, "icon"),
        "color": asset_field(&rel, "color"),
        "extends": null,
        "builtin": true,
        "modified_at": "",
    })
}

fn d415(id: &str, problem: &str) -> String {
    format!("D415 invalid_input: agent profile \"{id}\" {problem}.{D415_NEXT}")
}

// ---------------------------------------------------------------------------------------------
// Which files are profiles
// ---------------------------------------------------------------------------------------------

#[test]
fn lists_the_bundled_profiles_without_files() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({ "ignored": true })),
        json!({ "agents": [bundled_row("iii"), bundled_row("iii-minimal")] })
    );
}

#[test]
fn list_row_has_exactly_the_contract_fields() {
    let tree = Tree::new();
    profile(
        &tree,
        "release-captain",
        "name: Release Captain\ndescription: \"  Ships releases.  \"\nlogo: \"🚀\"\nskills: [shell, git/index]\nmodel: gpt-x\nreasoning_effort: high\nicon: terminal\ncolor: teal\nunknown: ignored",
        "You ship releases.\n",
    );
    tree.set_mtime("agents/release-captain.md");
    let d = tree.open();
    assert_eq!(
        row(&d, "release-captain"),
        json!({
            "id": "release-captain",
            "name": "Release Captain",
            "description": "Ships releases.",
            "logo": "🚀",
            "skill_count": 2,
            "model": "gpt-x",
            "reasoning_effort": "high",
            "icon": "terminal",
            "color": "teal",
            "extends": null,
            "modified_at": MTIME_TEXT,
        })
    );
}

#[test]
fn minimal_profile_row_has_nulls_and_an_empty_description() {
    let tree = Tree::new();
    profile(&tree, "min", "name: Min", "Body.\n");
    tree.set_mtime("agents/min.md");
    let d = tree.open();
    assert_eq!(
        row(&d, "min"),
        json!({
            "id": "min",
            "name": "Min",
            "description": "",
            "logo": null,
            "skill_count": null,
            "model": null,
            "reasoning_effort": null,
            "icon": null,
            "color": null,
            "extends": null,
            "modified_at": MTIME_TEXT,
        })
    );
}

#[test]
fn only_direct_files_of_the_agents_folder_are_profiles() {
    let tree = Tree::new();
    profile(&tree, "direct", "name: Direct", "Body.\n");
    tree.write("agents/team/nested.md", "---\nname: Nested\n---\nBody.\n");
    tree.write("agents/notes.txt", "---\nname: Notes\n---\nBody.\n");
    tree.write(
        "skills/ns/agents/legacy.md",
        "---\nname: Legacy\n---\nBody.\n",
    );
    let d = tree.open();
    assert_eq!(file_ids(&d), strings(&["direct"]));
    assert!(get_err(&d, "nested").starts_with("D410 not_found:"));
    assert!(get_err(&d, "legacy").starts_with("D410 not_found:"));
}

#[test]
fn list_is_sorted_by_id_with_the_bundled_ones_merged_in() {
    let tree = Tree::new();
    for id in ["zeta", "alpha", "iii-a", "ii"] {
        profile(&tree, id, &format!("name: {id}"), "Body.\n");
    }
    let d = tree.open();
    assert_eq!(
        ids(&d),
        strings(&["alpha", "ii", "iii", "iii-a", "iii-minimal", "zeta"])
    );
}

#[test]
fn invalid_file_id_is_skipped_with_a_reason() {
    let tree = Tree::new();
    profile(&tree, "Captain", "name: Captain", "Body.\n");
    profile(&tree, "has space", "name: Space", "Body.\n");
    let d = tree.open();
    assert_eq!(file_ids(&d), Vec::<String>::new());
    assert_eq!(
        skipped(&d, &tree.abs("agents/Captain.md")),
        Some(SkipReason::InvalidAgentId {
            id: "Captain".into(),
            problem: NameError::Characters("Captain".into())
        })
    );
    assert_eq!(
        skipped(&d, &tree.abs("agents/has space.md")),
        Some(SkipReason::InvalidAgentId {
            id: "has space".into(),
            problem: NameError::Characters("has space".into())
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Frontmatter rules
// ---------------------------------------------------------------------------------------------

/// Writes `agents/x.md` with the given full text and returns why it was skipped.
fn skip_reason(text: &str) -> Option<SkipReason> {
    let tree = Tree::new();
    tree.write("agents/x.md", text);
    let d = tree.open();
    let listed = file_ids(&d);
    let reason = skipped(&d, &tree.abs("agents/x.md"));
    assert_eq!(
        listed.is_empty(),
        reason.is_some(),
        "listed {listed:?}, skipped {reason:?}"
    );
    reason
}

/// What `skip_reason` gives for a file in `agents_folder` that is not an agent profile.
fn not_a_profile(problem: ProfileProblem) -> Option<SkipReason> {
    Some(SkipReason::NotAProfile(problem))
}

#[test]
fn missing_frontmatter_is_skipped() {
    assert_eq!(
        skip_reason("You are an agent.\n"),
        not_a_profile(FrontmatterProblem::Missing.into())
    );
}

#[test]
fn invalid_frontmatter_yaml_is_skipped() {
    let reason = skip_reason("---\nname: [unclosed\n---\nBody.\n").expect("skipped");
    assert!(
        matches!(
            reason,
            SkipReason::NotAProfile(ProfileProblem::Frontmatter(
                FrontmatterProblem::InvalidYaml(_)
            ))
        ),
        "{reason}"
    );
}

#[test]
fn frontmatter_that_is_not_yaml_is_served_from_its_lines_and_reported() {
    let tree = Tree::new();
    profile(
        &tree,
        "colon",
        "name: Captain: of the ship\nlogo: \"\\uD83D\\uDEA2\"",
        "Sail.\n",
    );
    let d = tree.open();
    let colon = row(&d, "colon");
    assert_eq!(
        (&colon["name"], &colon["logo"]),
        (&json!("Captain: of the ship"), &json!("🚢"))
    );
    let reason = skipped(&d, &tree.abs("agents/colon.md")).expect("reported by check");
    assert!(
        matches!(reason, SkipReason::FrontmatterSalvaged(_)),
        "{reason}"
    );
}

#[test]
fn frontmatter_with_merge_conflict_markers_is_served_from_its_lines_and_check_names_the_markers() {
    let tree = Tree::new();
    profile(
        &tree,
        "builder",
        "name: Builder\n<<<<<<< HEAD\nskills:\n  - mailer\n=======\nskills:\n  - shell\n>>>>>>> feature",
        "Build.\n",
    );
    let d = tree.open();
    // Served by the salvage rule, without the `skills:` list it lost.
    assert_eq!(row(&d, "builder")["name"], "Builder");
    let reason = skipped(&d, &tree.abs("agents/builder.md")).expect("reported by check");
    assert_eq!(reason, SkipReason::FrontmatterConflicted);
    let sentence = reason.to_string();
    for part in [
        "unresolved git merge-conflict markers",
        "`<<<<<<< `, `=======`, `>>>>>>> `",
        "`skills:` is lost",
    ] {
        assert!(sentence.contains(part), "{part}: {sentence}");
    }
}

#[test]
fn missing_or_blank_name_is_skipped() {
    for text in [
        "---\ndescription: No name.\n---\nBody.\n",
        "---\nname: \"   \"\n---\nBody.\n",
        "---\n---\nBody.\n",
    ] {
        assert_eq!(
            skip_reason(text),
            not_a_profile(ProfileProblem::NoName),
            "{text:?}"
        );
    }
}

#[test]
fn empty_logo_is_skipped() {
    assert_eq!(
        skip_reason("---\nname: X\nlogo: \"  \"\n---\nBody.\n"),
        not_a_profile(ProfileProblem::EmptyLogo)
    );
}

#[test]
fn logo_longer_than_16_bytes_is_skipped() {
    // Five 4-byte emoji: 20 bytes.
    assert_eq!(
        skip_reason("---\nname: X\nlogo: \"🚀🚀🚀🚀🚀\"\n---\nBody.\n"),
        not_a_profile(ProfileProblem::LogoTooLong(20))
    );
}

#[test]
fn logo_of_exactly_16_bytes_is_accepted() {
    assert_eq!(
        skip_reason("---\nname: X\nlogo: \"🚀🚀🚀🚀\"\n---\nBody.\n"),
        None
    );
}

#[test]
fn logo_with_path_characters_or_whitespace_is_skipped() {
    for logo in ["a/b", "a\\\\b", "🚀 🚀", "🚀\\t🚀"] {
        assert_eq!(
            skip_reason(&format!("---\nname: X\nlogo: \"{logo}\"\n---\nBody.\n")),
            not_a_profile(ProfileProblem::LogoCharacters),
            "{logo}"
        );
    }
}

#[test]
fn icon_must_be_in_the_closed_set() {
    for icon in [
        "agent", "code", "search", "terminal", "database", "test", "review", "docs", "design",
    ] {
        assert_eq!(
            skip_reason(&format!("---\nname: X\nicon: {icon}\n---\nBody.\n")),
            None,
            "{icon}"
        );
    }
    assert_eq!(
        skip_reason("---\nname: X\nicon: rocket\n---\nBody.\n"),
        not_a_profile(ProfileProblem::Icon("rocket".into()))
    );
}

#[test]
fn color_must_be_in_the_closed_set() {
    for color in [
        "neutral", "blue", "purple", "teal", "green", "amber", "rose",
    ] {
        assert_eq!(
            skip_reason(&format!("---\nname: X\ncolor: {color}\n---\nBody.\n")),
            None,
            "{color}"
        );
    }
    assert_eq!(
        skip_reason("---\nname: X\ncolor: red\n---\nBody.\n"),
        not_a_profile(ProfileProblem::Color("red".into()))
    );
}

#[test]
fn empty_body_is_allowed() {
    let tree = Tree::new();
    tree.write("agents/quiet.md", "---\nname: Quiet\n---\n");
    tree.write("agents/eof.md", "---\nname: Eof\n---");
    let d = tree.open();
    assert_eq!(file_ids(&d), strings(&["eof", "quiet"]));
    assert_eq!(get(&d, "quiet")["system_prompt"], "");
    assert_eq!(get(&d, "eof")["system_prompt"], "");
}

// ---------------------------------------------------------------------------------------------
// get
// ---------------------------------------------------------------------------------------------

#[test]
fn get_returns_exactly_the_contract_fields() {
    let tree = Tree::new();
    tree.write("skills/shell/index.md", "# Shell\n");
    profile(
        &tree,
        "release-captain",
        "name: Release Captain\ndescription: Ships releases.\nlogo: \"🚀\"\nskills: [shell, git/index]\nmodel: gpt-x\nreasoning_effort: high\nicon: terminal\ncolor: teal",
        "You ship releases.\n",
    );
    tree.set_mtime("agents/release-captain.md");
    let d = tree.open();
    assert_eq!(
        get(&d, "release-captain"),
        json!({
            "id": "release-captain",
            "name": "Release Captain",
            "description": "Ships releases.",
            "logo": "🚀",
            "system_prompt": "You ship releases.\n",
            "skills": ["shell", "git/index"],
            "unknown_skills": ["git/index"],
            "model": "gpt-x",
            "reasoning_effort": "high",
            "icon": "terminal",
            "color": "teal",
            "extends": null,
            "modified_at": MTIME_TEXT,
        })
    );
}

#[test]
fn get_single_profile_prompt_is_its_body_byte_for_byte() {
    let tree = Tree::new();
    profile(&tree, "a", "name: A", "\n\n  Indented.\n\nTrailing.\n\n\n");
    let d = tree.open();
    assert_eq!(
        get(&d, "a")["system_prompt"],
        "\n\n  Indented.\n\nTrailing.\n\n\n"
    );
}

#[test]
fn get_raw_true_adds_the_profile_file() {
    let tree = Tree::new();
    let text = "---\nname: A\nextends: iii\n---\nChild.\n";
    tree.write("agents/a.md", text);
    let d = tree.open();
    assert_eq!(
        call(&d, GET, json!({ "id": "a", "raw": true }))["raw"],
        text
    );
    let plain = call(&d, GET, json!({ "id": "a", "raw": false }));
    assert!(plain.get("raw").is_none(), "{plain}");
    assert!(plain.get("builtin").is_none(), "{plain}");
    assert!(plain.get("inheritance_error").is_none(), "{plain}");
    assert!(plain.get("skill_count").is_none(), "{plain}");
}

#[test]
fn get_raw_of_a_bundled_profile_is_the_embedded_file() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(
        call(&d, GET, json!({ "id": "iii", "raw": true }))["raw"],
        asset("agents/iii.md")
    );
}

#[test]
fn get_bundled_iii_profile() {
    let tree = Tree::new();
    let d = tree.open();
    let mut expected = bundled_row("iii");
    let object = expected.as_object_mut().expect("object");
    object.remove("skill_count");
    object.insert("system_prompt".into(), json!(asset_body("agents/iii.md")));
    object.insert("skills".into(), json!([]));
    object.insert("unknown_skills".into(), json!([]));
    assert_eq!(get(&d, "iii"), expected);
}

#[test]
fn bundled_iii_minimal_profile_prompt_is_the_bundled_system_prompt() {
    let tree = Tree::new();
    let d = tree.open();
    let prompt = call(
        &d,
        ReadFunction::SystemPromptsGet,
        json!({ "name": "iii-minimal" }),
    );
    assert_eq!(get(&d, "iii-minimal")["system_prompt"], prompt["body"]);
}

#[test]
fn local_iii_file_shadows_the_bundled_profile() {
    let tree = Tree::new();
    profile(&tree, "iii", "name: My iii", "Mine.\n");
    tree.set_mtime("agents/iii.md");
    let d = tree.open();
    let r = row(&d, "iii");
    assert_eq!(r["name"], "My iii");
    assert_eq!(r["modified_at"], MTIME_TEXT);
    assert!(r.get("builtin").is_none(), "{r}");
    let answer = get(&d, "iii");
    assert_eq!(answer["system_prompt"], "Mine.\n");
    assert!(answer.get("builtin").is_none(), "{answer}");
    assert_eq!(row(&d, "iii-minimal"), bundled_row("iii-minimal"));
}

#[test]
fn invalid_local_iii_file_does_not_shadow_the_bundled_profile() {
    let tree = Tree::new();
    tree.write("agents/iii.md", "No frontmatter.\n");
    let d = tree.open();
    assert_eq!(row(&d, "iii"), bundled_row("iii"));
}

#[test]
fn get_miss_is_d410_with_the_closest_ids() {
    let tree = Tree::new();
    for id in ["reviewer", "writer", "planner"] {
        profile(&tree, id, &format!("name: {id}"), "Body.\n");
    }
    let d = tree.open();
    // Edit distances from "reviewr": reviewer 1, writer 5, iii 6, planner 6 (ties by id).
    assert_eq!(
        get_err(&d, "reviewr"),
        "D410 not_found: agent profile \"reviewr\" does not exist. Did you mean: reviewer, writer, iii. Next: call directory::agents::list to browse agent profile ids."
    );
}

#[test]
fn get_rejects_invalid_ids() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(get_err(&d, ""), "name must be non-empty");
    assert_eq!(
        get_err(&d, "Reviewer"),
        "name may only contain lowercase ASCII letters, digits, '-' and '_': \"Reviewer\""
    );
    assert_eq!(
        get_err(&d, "team/reviewer"),
        "name may only contain lowercase ASCII letters, digits, '-' and '_': \"team/reviewer\""
    );
}

#[test]
fn get_rejects_wrong_request_shapes() {
    let tree = Tree::new();
    let d = tree.open();
    for request in [
        json!({}),
        json!({ "id": 1 }),
        json!({ "id": "iii", "raw": 1 }),
    ] {
        let e = call_err(&d, GET, request.clone());
        assert!(e.starts_with("invalid request: "), "{request}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// extends: prompt composition
// ---------------------------------------------------------------------------------------------

#[test]
fn extends_puts_the_parent_prompt_first_with_one_blank_line() {
    let tree = Tree::new();
    chained(&tree, "base", None, "Base body.\n");
    chained(&tree, "child", Some("base"), "Child body.\n");
    let d = tree.open();
    assert_eq!(
        get(&d, "child")["system_prompt"],
        "Base body.\n\nChild body.\n"
    );
}

#[test]
fn extends_trims_the_parent_trailing_newlines() {
    let tree = Tree::new();
    chained(&tree, "base", None, "Base body.\n\n\n\n");
    chained(&tree, "child", Some("base"), "\nChild body.\n\n");
    let d = tree.open();
    assert_eq!(
        get(&d, "child")["system_prompt"],
        "Base body.\n\n\nChild body.\n\n"
    );
}

#[test]
fn extends_chain_concatenates_root_first() {
    let tree = Tree::new();
    chained(&tree, "a", None, "A.\n");
    chained(&tree, "b", Some("a"), "B.\n");
    chained(&tree, "c", Some("b"), "C.\n");
    let d = tree.open();
    assert_eq!(get(&d, "c")["system_prompt"], "A.\n\nB.\n\nC.\n");
    assert_eq!(get(&d, "b")["system_prompt"], "A.\n\nB.\n");
}

#[test]
fn blank_child_body_serves_the_parent_prompt_unchanged() {
    let tree = Tree::new();
    chained(&tree, "base", None, "Base body.\n");
    chained(&tree, "child", Some("base"), "\n  \n");
    let d = tree.open();
    assert_eq!(get(&d, "child")["system_prompt"], "Base body.\n");
}

#[test]
fn blank_parent_body_contributes_nothing() {
    let tree = Tree::new();
    chained(&tree, "base", None, "");
    chained(&tree, "mid", Some("base"), "   \n");
    chained(&tree, "child", Some("mid"), "Child body.\n");
    let d = tree.open();
    assert_eq!(get(&d, "child")["system_prompt"], "Child body.\n");
}

#[test]
fn extends_the_bundled_iii_base() {
    let tree = Tree::new();
    chained(&tree, "frontend-design", Some("iii"), "Design things.\n");
    let d = tree.open();
    let base = asset_body("agents/iii.md");
    assert_eq!(
        get(&d, "frontend-design")["system_prompt"],
        format!("{}\n\nDesign things.\n", base.trim_end_matches('\n'))
    );
    assert_eq!(row(&d, "frontend-design")["extends"], "iii");
}

#[test]
fn chain_of_eight_hops_resolves() {
    let tree = Tree::new();
    chained(&tree, "p8", None, "P8.\n");
    for i in 0..8 {
        chained(
            &tree,
            &format!("p{i}"),
            Some(&format!("p{}", i + 1)),
            &format!("P{i}.\n"),
        );
    }
    let d = tree.open();
    let answer = get(&d, "p0");
    assert!(answer.get("inheritance_error").is_none(), "{answer}");
    assert_eq!(
        answer["system_prompt"],
        "P8.\n\nP7.\n\nP6.\n\nP5.\n\nP4.\n\nP3.\n\nP2.\n\nP1.\n\nP0.\n"
    );
}

#[test]
fn chain_of_nine_hops_is_too_deep() {
    let tree = Tree::new();
    chained(&tree, "p9", None, "P9.\n");
    for i in 0..9 {
        chained(
            &tree,
            &format!("p{i}"),
            Some(&format!("p{}", i + 1)),
            &format!("P{i}.\n"),
        );
    }
    let d = tree.open();
    let error = d415(
        "p0",
        "extends chain is deeper than 8 levels: p0 → p1 → p2 → p3 → p4 → p5 → p6 → p7 → p8 → p9",
    );
    let answer = get(&d, "p0");
    assert_eq!(answer["inheritance_error"], error);
    // Served from its own file meanwhile.
    assert_eq!(answer["system_prompt"], "P0.\n");
    assert_eq!(row(&d, "p0")["inheritance_error"], error);
    // One hop shorter is fine.
    assert!(row(&d, "p1").get("inheritance_error").is_none());
}

#[test]
fn two_profile_loop_is_reported_on_both() {
    let tree = Tree::new();
    chained(&tree, "a", Some("b"), "A.\n");
    chained(&tree, "b", Some("a"), "B.\n");
    let d = tree.open();
    assert_eq!(
        row(&d, "a")["inheritance_error"],
        d415("a", "has an extends loop: a → b → a")
    );
    assert_eq!(
        row(&d, "b")["inheritance_error"],
        d415("b", "has an extends loop: b → a → b")
    );
    assert_eq!(get(&d, "a")["system_prompt"], "A.\n");
}

#[test]
fn self_extension_is_a_loop() {
    let tree = Tree::new();
    chained(&tree, "c", Some("c"), "C.\n");
    let d = tree.open();
    assert_eq!(
        get(&d, "c")["inheritance_error"],
        d415("c", "has an extends loop: c → c")
    );
}

#[test]
fn local_iii_extending_iii_is_a_self_loop() {
    let tree = Tree::new();
    chained(&tree, "iii", Some("iii"), "Local iii.\n");
    let d = tree.open();
    let answer = get(&d, "iii");
    assert_eq!(
        answer["inheritance_error"],
        d415("iii", "has an extends loop: iii → iii")
    );
    assert_eq!(answer["system_prompt"], "Local iii.\n");
}

#[test]
fn unknown_parent_is_a_soft_error() {
    let tree = Tree::new();
    profile(
        &tree,
        "orphan",
        "name: Orphan\nextends: ghost\nmodel: own-model",
        "Own body.\n",
    );
    tree.set_mtime("agents/orphan.md");
    let d = tree.open();
    let error = d415("orphan", "extends unknown agent profile \"ghost\"");
    assert_eq!(
        row(&d, "orphan"),
        json!({
            "id": "orphan",
            "name": "Orphan",
            "description": "",
            "logo": null,
            "skill_count": null,
            "model": "own-model",
            "reasoning_effort": null,
            "icon": null,
            "color": null,
            "extends": "ghost",
            "inheritance_error": error,
            "modified_at": MTIME_TEXT,
        })
    );
    let answer = get(&d, "orphan");
    assert_eq!(answer["inheritance_error"], error);
    assert_eq!(answer["system_prompt"], "Own body.\n");
}

#[test]
fn parent_that_is_skipped_is_unknown() {
    let tree = Tree::new();
    tree.write("agents/broken.md", "No frontmatter.\n");
    chained(&tree, "child", Some("broken"), "Child.\n");
    let d = tree.open();
    assert_eq!(
        get(&d, "child")["inheritance_error"],
        d415("child", "extends unknown agent profile \"broken\"")
    );
}

// ---------------------------------------------------------------------------------------------
// extends: inherited settings
// ---------------------------------------------------------------------------------------------

fn inheritance_tree() -> Tree {
    let tree = Tree::new();
    profile(
        &tree,
        "base",
        "name: Base\ndescription: Base description.\nlogo: \"🅱\"\nicon: code\ncolor: blue\nskills: [a, b]\nmodel: base-model\nreasoning_effort: high",
        "Base.\n",
    );
    profile(
        &tree,
        "mid",
        "name: Mid\nextends: base\nskills: []\nmodel: mid-model",
        "Mid.\n",
    );
    profile(
        &tree,
        "child",
        "name: Child\nextends: mid\nreasoning_effort: \"  low  \"",
        "Child.\n",
    );
    profile(
        &tree,
        "narrow",
        "name: Narrow\nextends: base\nskills: [c]\nmodel: \"  \"",
        "Narrow.\n",
    );
    tree
}

#[test]
fn skills_come_from_the_first_non_empty_list_up_the_chain() {
    let tree = inheritance_tree();
    let d = tree.open();
    assert_eq!(get(&d, "child")["skills"], json!(["a", "b"]));
    assert_eq!(row(&d, "child")["skill_count"], 2);
    assert_eq!(row(&d, "mid")["skill_count"], 2);
}

#[test]
fn a_non_empty_skills_list_replaces_the_inherited_one() {
    let tree = inheritance_tree();
    let d = tree.open();
    assert_eq!(get(&d, "narrow")["skills"], json!(["c"]));
    assert_eq!(row(&d, "narrow")["skill_count"], 1);
}

#[test]
fn model_and_reasoning_effort_come_from_the_nearest_profile_setting_each() {
    let tree = inheritance_tree();
    let d = tree.open();
    let child = get(&d, "child");
    assert_eq!(child["model"], "mid-model");
    assert_eq!(child["reasoning_effort"], "low");
    // A blank model is no model: the parent's applies.
    let narrow = get(&d, "narrow");
    assert_eq!(narrow["model"], "base-model");
    assert_eq!(narrow["reasoning_effort"], "high");
}

#[test]
fn display_fields_are_never_inherited() {
    let tree = inheritance_tree();
    let d = tree.open();
    let child = row(&d, "child");
    assert_eq!(child["name"], "Child");
    assert_eq!(child["description"], "");
    assert_eq!(child["logo"], Value::Null);
    assert_eq!(child["icon"], Value::Null);
    assert_eq!(child["color"], Value::Null);
    assert_eq!(child["extends"], "mid");
}

#[test]
fn skill_count_is_null_when_nothing_narrows_the_skills() {
    let tree = Tree::new();
    profile(&tree, "open", "name: Open\nskills: []", "Body.\n");
    let d = tree.open();
    assert_eq!(row(&d, "open")["skill_count"], Value::Null);
    assert_eq!(get(&d, "open")["skills"], json!([]));
}

#[test]
fn unknown_skills_resolve_with_the_index_alias() {
    let tree = Tree::new();
    tree.write("skills/shell/index.md", "# Shell\n");
    tree.write("skills/shell/exec.md", "# Exec\n");
    tree.write("skills/solo.md", "# Solo\n");
    profile(
        &tree,
        "base",
        "name: Base\nskills: [shell, shell/index, shell/exec, solo, ghost, shell/ghost, iii-directory]",
        "Base.\n",
    );
    chained(&tree, "child", Some("base"), "Child.\n");
    let d = tree.open();
    // The child checks its inherited filter.
    assert_eq!(
        get(&d, "child")["unknown_skills"],
        json!(["ghost", "shell/ghost"])
    );
}

#[test]
fn unknown_skills_respect_the_visibility_filter() {
    let tree = Tree::new();
    tree.write("skills/shell/index.md", "# Shell\n");
    tree.write("skills/solo.md", "# Solo\n");
    tree.write(".agents/skills/tool/SKILL.md", "# Tool\n");
    profile(
        &tree,
        "a",
        "name: A\nskills: [shell, solo, tool, iii-directory/agent-profiles]",
        "Body.\n",
    );
    let d = tree.open();
    assert_eq!(
        call_installed(&d, GET, json!({ "id": "a" }), &[])["unknown_skills"],
        json!(["shell"])
    );
    assert_eq!(
        call_installed(&d, GET, json!({ "id": "a" }), &["shell"])["unknown_skills"],
        json!([])
    );
    assert_eq!(get(&d, "a")["unknown_skills"], json!([]));
}

/// `check` lists the profiles served with a problem: a chain that does not resolve (with the
/// same D415 text `get` carries), and skills the filter names that nothing serves, as seen
/// with `filter_unregistered`. The worker's own profiles and sound ones are not listed.
#[test]
fn profiles_served_with_a_problem_are_listed_with_why() {
    let tree = Tree::new();
    tree.write("skills/mailer/index.md", "# Mailer\n\nSends email.\n");
    tree.write("skills/notes/index.md", "# Notes\n\nKeeps notes.\n");
    chained(&tree, "orphan", Some("ghost"), "Alone.\n");
    chained(&tree, "loop-a", Some("loop-b"), "A.\n");
    chained(&tree, "loop-b", Some("loop-a"), "B.\n");
    profile(
        &tree,
        "picky",
        "name: Picky\nskills: [mailer, nope]",
        "P.\n",
    );
    profile(
        &tree,
        "sound",
        "name: Sound\nextends: iii\nskills: [notes]",
        "S.\n",
    );
    // Inherits its parent's filter, so its unknown skill too.
    chained(&tree, "heir", Some("picky"), "H.\n");
    let d = tree.open();
    let listed: Vec<(String, String)> = (d.profile_problems(None).expect("problems").into_iter())
        .map(|p| {
            assert_eq!(p.root, "agents_folder");
            assert_eq!(p.family, "agents");
            assert_eq!(p.path, tree.abs(&format!("agents/{}.md", p.id)));
            (p.id, p.reason)
        })
        .collect();
    let unknown = "its skills filter names skills nothing serves: nope";
    let expected: Vec<(String, String)> = [
        ("heir", unknown.to_string()),
        (
            "loop-a",
            get(&d, "loop-a")["inheritance_error"].as_str().expect("error").to_string(),
        ),
        (
            "loop-b",
            get(&d, "loop-b")["inheritance_error"].as_str().expect("error").to_string(),
        ),
        (
            "orphan",
            format!("D415 invalid_input: agent profile \"orphan\" extends unknown agent profile \"ghost\".{D415_NEXT}"),
        ),
        ("picky", unknown.to_string()),
    ]
    .into_iter()
    .map(|(id, reason)| (id.to_string(), reason))
    .collect();
    assert_eq!(listed, expected);

    // Seen with `filter_unregistered` and `mailer` not installed, `mailer` is unknown too.
    let installed = std::collections::BTreeSet::new();
    let filtered = d.profile_problems(Some(&installed)).expect("problems");
    let picky = filtered.iter().find(|p| p.id == "picky").expect("picky");
    assert_eq!(
        picky.reason,
        "its skills filter names skills nothing serves: mailer, nope"
    );
}
