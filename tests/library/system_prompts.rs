//! `directory::system-prompts::{list,get}` against real files in temporary trees: where prompts
//! are found, the frontmatter they need, names, precedence between roots, and the bundled
//! `iii-minimal` / `iii-runtime` prompts.

use test_support::common;

use std::fs;

use common::{MTIME_TEXT, Tree, asset, asset_body, asset_field, call, call_err, skipped, strings};
use iii_directory::doc::ids::NameError;
use iii_directory::doc::{ReadIssue, ServeIssue};
use iii_directory::{Directory, FrontmatterProblem, PromptProblem, ReadFunction, SkipReason};
use serde_json::{Value, json};

const LIST: ReadFunction = ReadFunction::SystemPromptsList;
const GET: ReadFunction = ReadFunction::SystemPromptsGet;

const BUNDLED: [&str; 2] = ["iii-minimal", "iii-runtime"];

fn names(directory: &Directory) -> Vec<String> {
    common::names(directory, LIST)
}

fn row(directory: &Directory, name: &str) -> Value {
    common::row(directory, LIST, name)
}

fn get(directory: &Directory, name: &str) -> Value {
    common::get(directory, GET, name)
}

fn get_err(directory: &Directory, name: &str) -> String {
    common::get_err(directory, GET, name)
}

/// A prompt file with the given description and body.
fn prompt(description: &str, body: &str) -> String {
    format!("---\ndescription: {description}\n---\n{body}")
}

/// The names listed besides the bundled ones.
fn file_names(directory: &Directory) -> Vec<String> {
    names(directory)
        .into_iter()
        .filter(|n| !BUNDLED.contains(&n.as_str()))
        .collect()
}

fn bundled_row(name: &str) -> Value {
    let rel = format!("skills/system-prompts/{name}.md");
    json!({
        "name": name,
        "description": asset_field(&rel, "description"),
        "modified_at": "",
        "builtin": true,
    })
}

// ---------------------------------------------------------------------------------------------
// Where prompts are found
// ---------------------------------------------------------------------------------------------

/// The reason `check` gives a file under `system-prompts/` that is not a system prompt.
fn not_a_prompt(problem: PromptProblem) -> SkipReason {
    SkipReason::NotAPrompt(problem)
}

#[test]
fn lists_a_prompt_beside_the_bundled_ones() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/reviewer.md",
        &prompt("  Reviews code.  ", "You review.\n"),
    );
    tree.set_mtime("skills/system-prompts/reviewer.md");
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({ "ignored": 1 })),
        json!({ "prompts": [
            bundled_row("iii-minimal"),
            bundled_row("iii-runtime"),
            { "name": "reviewer", "description": "Reviews code.", "modified_at": MTIME_TEXT },
        ]})
    );
}

#[test]
fn lists_only_the_bundled_prompts_without_files() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(
        call(&d, LIST, json!({})),
        json!({ "prompts": [bundled_row("iii-minimal"), bundled_row("iii-runtime")] })
    );
}

#[test]
fn prompts_are_found_under_any_system_prompts_segment() {
    let tree = Tree::new();
    tree.write("skills/ns/system-prompts/alpha.md", &prompt("A.", "A.\n"));
    tree.write(
        "skills/x/y/system-prompts/z/deep.md",
        &prompt("Deep.", "D.\n"),
    );
    tree.write(
        "skills/prompts/system-prompts/both.md",
        &prompt("Both segments.", "B.\n"),
    );
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["alpha", "both", "deep"]));
}

#[test]
fn prompts_segment_alone_is_not_a_system_prompt() {
    let tree = Tree::new();
    tree.write("skills/ns/prompts/old.md", &prompt("Old.", "O.\n"));
    tree.write(
        "skills/ns/system-promptsx/near.md",
        &prompt("Near.", "N.\n"),
    );
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
}

#[test]
fn only_skills_roots_hold_system_prompts() {
    let tree = Tree::new();
    tree.write("agents/system-prompts/a.md", &prompt("A.", "A.\n"));
    tree.write(
        ".agents/skills/tool/system-prompts/b.md",
        &prompt("B.", "B.\n"),
    );
    tree.write(".agents/skills/tool/SKILL.md", "# Tool\n");
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// Required frontmatter and names
// ---------------------------------------------------------------------------------------------

#[test]
fn missing_frontmatter_is_skipped_with_a_reason() {
    let tree = Tree::new();
    tree.write("skills/system-prompts/bare.md", "You are bare.\n");
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
    assert_eq!(
        skipped(
            &d,
            "skills_folder",
            &tree.abs("skills/system-prompts/bare.md")
        ),
        Some(not_a_prompt(FrontmatterProblem::Missing.into()))
    );
}

#[test]
fn invalid_yaml_is_skipped_with_a_reason() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/broken.md",
        "---\ndescription: [unclosed\n---\nBody.\n",
    );
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
    let reason = skipped(
        &d,
        "skills_folder",
        &tree.abs("skills/system-prompts/broken.md"),
    )
    .expect("skipped");
    assert!(
        matches!(
            reason,
            SkipReason::NotAPrompt(PromptProblem::Frontmatter(FrontmatterProblem::InvalidYaml(
                _
            )))
        ),
        "{reason}"
    );
}

#[test]
fn frontmatter_that_is_not_yaml_is_served_from_its_lines_and_reported() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/colon.md",
        "---\ndescription: Reviews code: carefully.\n---\nReview.\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "colon")["description"], "Reviews code: carefully.");
    let reason = skipped(
        &d,
        "skills_folder",
        &tree.abs("skills/system-prompts/colon.md"),
    )
    .expect("reported by check");
    assert!(
        matches!(reason, SkipReason::FrontmatterSalvaged(_)),
        "{reason}"
    );
}

#[test]
fn missing_description_is_skipped_with_a_reason() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/none.md",
        "---\nname: none\n---\nBody.\n",
    );
    tree.write(
        "skills/system-prompts/blank.md",
        "---\ndescription: \"   \"\n---\nBody.\n",
    );
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
    for rel in [
        "skills/system-prompts/none.md",
        "skills/system-prompts/blank.md",
    ] {
        assert_eq!(
            skipped(&d, "skills_folder", &tree.abs(rel)),
            Some(not_a_prompt(PromptProblem::NoDescription)),
            "{rel}"
        );
    }
}

#[test]
fn name_defaults_to_the_file_stem() {
    let tree = Tree::new();
    tree.write("skills/system-prompts/pirate.md", &prompt("Arr.", "Arr.\n"));
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["pirate"]));
}

#[test]
fn frontmatter_name_overrides_the_file_stem() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/Upper Case.md",
        "---\nname: \"  captain  \"\ndescription: Leads.\n---\nLead.\n",
    );
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["captain"]));
    assert_eq!(get(&d, "captain")["body"], "Lead.\n");
}

#[test]
fn blank_frontmatter_name_falls_back_to_the_file_stem() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/pirate.md",
        "---\nname: \"  \"\ndescription: Arr.\n---\nArr.\n",
    );
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["pirate"]));
}

#[test]
fn invalid_name_is_skipped_with_a_reason() {
    let tree = Tree::new();
    let long = "p".repeat(65);
    tree.write(
        "skills/system-prompts/declared.md",
        "---\nname: Bad Name\ndescription: D.\n---\nBody.\n",
    );
    tree.write("skills/system-prompts/Upper.md", &prompt("U.", "Body.\n"));
    tree.write(
        &format!("skills/system-prompts/{long}.md"),
        &prompt("L.", "Body.\n"),
    );
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
    let invalid = |name: &str, why: NameError| {
        not_a_prompt(PromptProblem::InvalidName {
            name: name.to_string(),
            why,
        })
    };
    let characters = |name: &str| invalid(name, NameError::Characters(name.to_string()));
    for (rel, reason) in [
        (
            "skills/system-prompts/declared.md".to_string(),
            characters("Bad Name"),
        ),
        (
            "skills/system-prompts/Upper.md".to_string(),
            characters("Upper"),
        ),
        (
            format!("skills/system-prompts/{long}.md"),
            invalid(&long, NameError::TooLong(65)),
        ),
    ] {
        assert_eq!(
            skipped(&d, "skills_folder", &tree.abs(&rel)),
            Some(reason),
            "{rel}"
        );
    }
}

#[test]
fn duplicate_name_first_file_wins() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/a.md",
        "---\nname: dup\ndescription: From a.\n---\nA.\n",
    );
    tree.write(
        "skills/system-prompts/b.md",
        "---\nname: dup\ndescription: From b.\n---\nB.\n",
    );
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["dup"]));
    assert_eq!(row(&d, "dup")["description"], "From a.");
    assert_eq!(
        skipped(&d, "skills_folder", &tree.abs("skills/system-prompts/b.md")),
        Some(SkipReason::DuplicatePromptName { name: "dup".into() })
    );
}

#[test]
fn too_large_prompt_is_skipped_with_a_reason() {
    let tree = Tree::new();
    let head = "---\ndescription: Big.\n---\n";
    tree.write(
        "skills/system-prompts/big.md",
        &format!("{head}{}", "x".repeat(262_145 - head.len())),
    );
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
    assert_eq!(
        skipped(
            &d,
            "skills_folder",
            &tree.abs("skills/system-prompts/big.md")
        ),
        Some(SkipReason::Unservable(ServeIssue::Read(
            ReadIssue::TooLarge(262_145)
        )))
    );
}

#[test]
fn empty_body_prompt_is_listed_but_get_fails_naming_the_file() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/hollow.md",
        &prompt("Hollow.", "\n\n"),
    );
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["hollow"]));
    assert_eq!(
        get_err(&d, "hollow"),
        format!(
            "file {} has empty body",
            tree.abs("skills/system-prompts/hollow.md")
        )
    );
    // `check` says why `get` refuses it, as it does for a skill with an empty body.
    assert_eq!(
        skipped(
            &d,
            "skills_folder",
            &tree.abs("skills/system-prompts/hollow.md")
        ),
        Some(SkipReason::Unservable(ServeIssue::EmptyBody))
    );
}

// ---------------------------------------------------------------------------------------------
// Precedence between roots
// ---------------------------------------------------------------------------------------------

#[test]
fn local_prompt_wins_on_a_duplicate_name() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/pirate.md",
        &prompt("Global.", "Global body.\n"),
    );
    tree.write(
        "skills/iii/team/system-prompts/pirate.md",
        &prompt("Local.", "Local body.\n"),
    );
    let d = tree.open();
    assert_eq!(file_names(&d), strings(&["pirate"]));
    let answer = get(&d, "pirate");
    assert_eq!(answer["description"], "Local.");
    assert_eq!(answer["body"], "Local body.\n");
    assert_eq!(
        skipped(
            &d,
            "skills_folder",
            &tree.abs("skills/system-prompts/pirate.md")
        ),
        Some(SkipReason::DuplicatePromptName {
            name: "pirate".into()
        })
    );
}

#[test]
fn local_system_prompts_folder_shadows_the_global_one_wholesale() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/global-only.md",
        &prompt("G.", "G.\n"),
    );
    tree.write("skills/ns/system-prompts/nested.md", &prompt("N.", "N.\n"));
    tree.write(
        "skills/iii/system-prompts/local-only.md",
        &prompt("L.", "L.\n"),
    );
    let d = tree.open();
    // Only the top-level `system-prompts/` namespace is shadowed; `ns/system-prompts/` is not.
    assert_eq!(file_names(&d), strings(&["local-only", "nested"]));
    assert_eq!(
        skipped(
            &d,
            "skills_folder",
            &tree.abs("skills/system-prompts/global-only.md")
        ),
        Some(SkipReason::NamespaceShadowed {
            namespace: "system-prompts".into()
        })
    );
}

#[test]
fn empty_local_system_prompts_folder_shadows_the_global_one() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/global-only.md",
        &prompt("G.", "G.\n"),
    );
    tree.mkdir("skills/iii/system-prompts");
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
}

#[test]
fn local_namespace_folder_shadows_global_prompts_in_that_namespace() {
    let tree = Tree::new();
    tree.write(
        "skills/team/system-prompts/global.md",
        &prompt("G.", "G.\n"),
    );
    tree.mkdir("skills/iii/team");
    let d = tree.open();
    assert_eq!(file_names(&d), Vec::<String>::new());
    assert_eq!(
        skipped(
            &d,
            "skills_folder",
            &tree.abs("skills/team/system-prompts/global.md")
        ),
        Some(SkipReason::NamespaceShadowed {
            namespace: "team".into()
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Bundled prompts
// ---------------------------------------------------------------------------------------------

#[test]
fn file_with_a_bundled_name_shadows_the_bundled_prompt() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/iii-minimal.md",
        &prompt("Mine.", "My minimal.\n"),
    );
    tree.set_mtime("skills/system-prompts/iii-minimal.md");
    let d = tree.open();
    assert_eq!(
        row(&d, "iii-minimal"),
        json!({ "name": "iii-minimal", "description": "Mine.", "modified_at": MTIME_TEXT })
    );
    assert_eq!(
        get(&d, "iii-minimal"),
        json!({
            "name": "iii-minimal",
            "description": "Mine.",
            "body": "My minimal.\n",
            "modified_at": MTIME_TEXT,
        })
    );
    assert_eq!(row(&d, "iii-runtime"), bundled_row("iii-runtime"));
}

#[test]
fn skipped_file_with_a_bundled_name_does_not_shadow_it() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/iii-runtime.md",
        "No frontmatter here.\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "iii-runtime"), bundled_row("iii-runtime"));
    assert_eq!(get(&d, "iii-runtime")["builtin"], true);
}

#[test]
fn get_bundled_prompt_has_builtin_and_an_empty_modified_at() {
    let tree = Tree::new();
    let d = tree.open();
    let rel = "skills/system-prompts/iii-minimal.md";
    assert_eq!(
        get(&d, "iii-minimal"),
        json!({
            "name": "iii-minimal",
            "description": asset_field(rel, "description"),
            "body": asset_body(rel),
            "modified_at": "",
            "builtin": true,
        })
    );
}

#[test]
fn get_bundled_prompt_raw_is_the_embedded_file() {
    let tree = Tree::new();
    let d = tree.open();
    let answer = call(&d, GET, json!({ "name": "iii-runtime", "raw": true }));
    assert_eq!(answer["raw"], asset("skills/system-prompts/iii-runtime.md"));
}

/// The placeholders the seed's text lost (`iii trigger --help`, `name=`, `"name":""`, `ids are
/// ::`), which the bundled prompt puts back: an agent told to run `iii trigger --help` for a
/// function's contract runs the CLI's own help instead.
const RESTORED_PLACEHOLDERS: [(&str, &str); 6] = [
    ("iii trigger --help —", "iii trigger <function_id> --help —"),
    ("workers::info name= —", "workers::info name=<worker> —"),
    (
        "'{\"search\":\"\"}' pages",
        "'{\"search\":\"<words>\"}' pages",
    ),
    (
        "workers::info name= returns",
        "workers::info name=<worker> returns",
    ),
    ("\"name\":\"\"}}'", "\"name\":\"<worker>\"}}'"),
    ("ids are ::,", "ids are <worker>::<function>,"),
];

#[test]
fn iii_runtime_body_is_the_shared_seed_with_its_placeholders_restored() {
    let tree = Tree::new();
    let d = tree.open();
    let Some(seed) = common::shared_path("seeds/iii-runtime.md") else {
        return;
    };
    let mut seed = fs::read_to_string(seed).expect("read the iii-runtime seed");
    for (lost, restored) in RESTORED_PLACEHOLDERS {
        assert_eq!(seed.matches(lost).count(), 1, "{lost}");
        seed = seed.replace(lost, restored);
    }
    assert_eq!(get(&d, "iii-runtime")["body"], seed);
}

// ---------------------------------------------------------------------------------------------
// get
// ---------------------------------------------------------------------------------------------

#[test]
fn get_returns_exactly_the_contract_fields() {
    let tree = Tree::new();
    tree.write(
        "skills/system-prompts/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews code.\nextra: ignored\n---\n\nYou review.\n\n",
    );
    tree.set_mtime("skills/system-prompts/reviewer.md");
    let d = tree.open();
    assert_eq!(
        get(&d, "reviewer"),
        json!({
            "name": "reviewer",
            "description": "Reviews code.",
            "body": "\nYou review.\n\n",
            "modified_at": MTIME_TEXT,
        })
    );
}

#[test]
fn get_raw_true_adds_the_whole_file() {
    let tree = Tree::new();
    let text = prompt("Reviews code.", "You review.\n");
    tree.write("skills/system-prompts/reviewer.md", &text);
    let d = tree.open();
    let answer = call(&d, GET, json!({ "name": "reviewer", "raw": true }));
    assert_eq!(answer["raw"], text);
    let plain = call(&d, GET, json!({ "name": "reviewer", "raw": false }));
    assert!(plain.get("raw").is_none(), "{plain}");
    assert!(plain.get("builtin").is_none(), "{plain}");
}

#[test]
fn get_miss_is_d210_with_the_closest_names() {
    let tree = Tree::new();
    for name in ["pirate", "poet", "private"] {
        tree.write(
            &format!("skills/system-prompts/{name}.md"),
            &prompt("D.", "B.\n"),
        );
    }
    let d = tree.open();
    // Edit distances from "pirat": pirate 1, poet 3, private 3 (ties by name), the bundled 8+.
    assert_eq!(
        get_err(&d, "pirat"),
        "D210 not_found: system prompt \"pirat\" does not exist. Did you mean: pirate, poet, private. Next: call directory::system-prompts::list to browse system prompt names."
    );
}

#[test]
fn get_miss_suggests_bundled_names() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(
        get_err(&d, "iii-minimum"),
        "D210 not_found: system prompt \"iii-minimum\" does not exist. Did you mean: iii-minimal, iii-runtime. Next: call directory::system-prompts::list to browse system prompt names."
    );
}

#[test]
fn get_rejects_invalid_names() {
    let tree = Tree::new();
    let d = tree.open();
    assert_eq!(get_err(&d, ""), "name must be non-empty");
    assert_eq!(
        get_err(&d, "Reviewer"),
        "name may only contain lowercase ASCII letters, digits, '-' and '_': \"Reviewer\""
    );
    assert_eq!(
        get_err(&d, "system-prompts/reviewer"),
        "name may only contain lowercase ASCII letters, digits, '-' and '_': \"system-prompts/reviewer\""
    );
}

#[test]
fn get_rejects_wrong_request_shapes() {
    let tree = Tree::new();
    let d = tree.open();
    for request in [
        json!({}),
        json!({ "name": 7 }),
        json!({ "name": "x", "raw": "yes" }),
    ] {
        let e = call_err(&d, GET, request.clone());
        assert!(e.starts_with("invalid request: "), "{request}: {e}");
    }
}
