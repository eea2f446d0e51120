//! `directory::skills::index`: a short markdown page with one entry per worker overview.

use serde_json::{Value, json};

use crate::error::Result;
use crate::index::Reader;
use crate::rules::skill::{SkillRow, Visibility};

/// Characters of overview descriptions `skills::index` includes before it leaves the rest out
/// (contract: 3,000).
pub const INDEX_BUDGET_CHARS: usize = 3_000;

/// `directory::skills::index`: one heading, first paragraph and pointer per worker overview
/// (`type: index`), descriptions within a character budget.
pub fn index(reader: &Reader, visibility: Visibility<'_>) -> Result<Value> {
    let overviews: Vec<(String, SkillRow)> = reader
        .visible_skills(visibility)?
        .into_iter()
        .filter(|(_, row)| !row.agents_skill && row.r#type.as_deref() == Some("index"))
        .collect();
    Ok(json!({ "body": render_index(&overviews), "workers_count": overviews.len() }))
}

pub fn render_index(overviews: &[(String, SkillRow)]) -> String {
    let mut body = format!("# Skills index\n\n{} worker(s).\n", overviews.len());
    let mut omitted = false;
    let mut chars = body.chars().count();
    let push = |body: &mut String, chars: &mut usize, text: &str| {
        body.push_str(text);
        *chars += text.chars().count();
    };
    for (id, row) in overviews {
        push(&mut body, &mut chars, &format!("\n## {}\n", row.title));
        let description = row.description.trim();
        if !description.is_empty() {
            let len = description.chars().count();
            // The description line and the blank line before it must fit the budget.
            if chars + len + 2 <= INDEX_BUDGET_CHARS {
                push(&mut body, &mut chars, &format!("\n{description}\n"));
            } else {
                omitted = true;
            }
        }
        push(&mut body, &mut chars, &format!("\nRead iii://{id}\n"));
    }
    if omitted {
        body.push_str("\n(some descriptions omitted to save space; call directory::skills::get for the full reference)\n");
    }
    body
}
