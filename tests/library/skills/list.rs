//! List.

use super::*;

#[test]
fn list_row_has_exactly_the_contract_fields() {
    let tree = no_bundled();
    let text = "---\ntitle: Exec commands\ntype: how-to\nfunction_id: shell::exec\ndescription: Runs a command.\ndisable-model-invocation: true\nextra: ignored\n---\n# Heading\n\nParagraph.\n";
    tree.write("skills/shell/exec.md", text);
    tree.set_mtime("skills/shell/exec.md");
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
    tree.set_mtime("skills/plain.md");
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
    tree.set_mtime("skills/a.md");
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
        .find(|s| s.path == tree.abs("skills/a.md"))
        .expect("the file is listed by check");
    assert!(
        matches!(reported.reason, SkipReason::FrontmatterSalvaged(_)),
        "{reported:?}"
    );
}

#[test]
fn a_skill_whose_frontmatter_holds_merge_conflict_markers_is_served_and_check_names_them() {
    let tree = no_bundled();
    tree.write(
        "skills/a.md",
        "---\ntitle: Merged\n<<<<<<< HEAD\ndescription: Ours.\n=======\ndescription: Theirs.\n>>>>>>> feature\n---\n# Body\n\nText.\n",
    );
    let d = tree.open();
    assert_eq!(row(&d, "a")["title"], "Merged");
    let skipped = d.skipped().expect("check");
    let reported = skipped
        .iter()
        .find(|s| s.path == tree.abs("skills/a.md"))
        .expect("the file is listed by check");
    assert_eq!(reported.reason, SkipReason::FrontmatterConflicted);
    let sentence = reported.reason.to_string();
    assert!(
        sentence.starts_with("frontmatter holds unresolved git merge-conflict markers"),
        "{sentence}"
    );
    assert!(!sentence.contains("mapping values"), "{sentence}");
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
        SkipReason::FrontmatterIgnored("`title` must be a string".into())
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
        format!("file {} is not UTF-8 text", tree.abs("skills/latin1.md"))
    );
}

#[test]
fn too_large_file_is_listed_with_defaults() {
    let tree = no_bundled();
    let head = "---\ntitle: Big\ntype: index\n---\n# Big\n\n";
    let text = format!("{head}{}", "x".repeat(262_145 - head.len()));
    assert_eq!(text.len(), 262_145);
    tree.write("skills/big/index.md", &text);
    tree.set_mtime("skills/big/index.md");
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
            tree.abs("skills/big.md")
        )
    );
}

#[test]
fn empty_body_file_is_listed_with_defaults() {
    let tree = no_bundled();
    let text = "---\ntitle: Empty\ntype: index\ndescription: Has no body.\n---\n\n\n";
    tree.write("skills/empty/index.md", text);
    tree.set_mtime("skills/empty/index.md");
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
            format!("file {} has empty body", tree.abs(rel))
        );
    }
}

#[test]
fn modified_at_is_rfc3339_utc() {
    let tree = no_bundled();
    tree.write("skills/a.md", "# A\n");
    tree.set_mtime("skills/a.md");
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

/// The worker checks an answer's length against what the engine carries before building it, so
/// `json_len` must be exact: for a whole list (with and without descriptions, revision and
/// `full`), a prefix, an empty list, a delta and a plain value, whatever the rows' text holds.
#[test]
fn an_answers_json_len_is_the_length_of_its_json() {
    let tree = no_bundled();
    tree.write(
        "skills/quotes/index.md",
        "---\ndescription: \"say \\\"hi\\\" \\\\ back\\tslash\"\ntype: index\n---\n# Quotes\n",
    );
    tree.write(
        "skills/quotes/unicode.md",
        "---\nfunction_id: q::u\ndisable-model-invocation: true\n---\n# Naïve 🦀\n\nÜnïcödé \u{2028} line.\n",
    );
    tree.write("skills/plain.md", "# Plain\n\nJust text.\n");
    let d = tree.open();
    let requests = [
        json!({}),
        json!({ "include_description": false }),
        json!({ "since_revision": 0 }),
        json!({ "since_revision": 0, "include_description": false }),
        json!({ "if_revision": 0 }),
        json!({ "prefix": "quotes/" }),
        json!({ "prefix": "nothing/" }),
        json!({ "search": "hi" }),
    ];
    for request in requests {
        let answer = d.read_answer(LIST, &request, None).expect("list");
        let len = answer.json_len();
        let text = d
            .read_answer(LIST, &request, None)
            .unwrap()
            .into_json()
            .unwrap();
        assert_eq!(len, text.len(), "{request}: {text}");
        let value = answer.into_value().expect("value");
        assert_eq!(
            len,
            serde_json::to_string(&value).unwrap().len(),
            "{request}"
        );
    }
    let revision = call(&d, LIST, json!({ "since_revision": 0 }))["revision"].clone();
    tree.write("skills/plain.md", "# Plain\n\nOther text.\n");
    d.reconcile().expect("reconcile");
    for request in [
        json!({ "since_revision": revision }),
        json!({ "if_revision": revision }),
    ] {
        let answer = d.read_answer(LIST, &request, None).expect("list");
        let len = answer.json_len();
        assert_eq!(len, answer.into_json().unwrap().len(), "{request}");
    }
    let answer = d
        .read_answer(GET, &json!({ "id": "quotes" }), None)
        .expect("get");
    let len = answer.json_len();
    assert_eq!(len, answer.into_json().unwrap().len());
}
