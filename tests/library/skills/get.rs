//! Get.

use super::*;

#[test]
fn get_returns_exactly_the_contract_fields() {
    let tree = no_bundled();
    let text = "---\ntitle: Exec\ntype: reference\nfunction_id: shell::exec\ndescription: Not in get.\n---\n# Exec\n\nRuns.\n";
    tree.write("skills/shell/exec.md", text);
    tree.set_mtime("skills/shell/exec.md");
    let d = tree.open();
    assert_eq!(
        get(&d, "shell/exec"),
        json!({
            "id": "shell/exec",
            "title": "Exec",
            "type": "reference",
            "function_id": "shell::exec",
            "disable_model_invocation": false,
            "path": tree.abs("skills/shell/exec.md"),
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
    assert_eq!(skill["path"], tree.abs("skills/sandbox/index.md"));
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
    assert_eq!(answer["path"], tree.abs("skills/iii-sandbox/index.md"));
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
