//! Index.

use super::*;

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
