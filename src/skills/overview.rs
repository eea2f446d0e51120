//! `directory::skills::index`: a short markdown page with one entry per worker overview.

use serde_json::{Value, json};

use super::cache::SkillCache;
use crate::rules::skill::Visibility;

/// Characters of overview descriptions `skills::index` includes before it leaves the rest out
/// (contract: 3,000).
pub const INDEX_BUDGET_CHARS: usize = 3_000;

/// A worker overview (`type: index`, not from the agents skills root) as the page shows it.
pub struct OverviewEntry<'a> {
    /// The on-disk id (`<ns>/index`), which the page's pointer names.
    pub id: &'a str,
    pub title: &'a str,
    pub description: &'a str,
}

/// `directory::skills::index`: one heading, first paragraph and pointer per visible worker
/// overview of the cached rows, descriptions within a character budget.
pub fn index(cache: &SkillCache, visibility: Visibility<'_>) -> Value {
    let overviews: Vec<OverviewEntry<'_>> = cache
        .overviews()
        .iter()
        .filter(|row| visibility.allows_id(row.id(), row.always_visible))
        .filter_map(|row| {
            row.overview.as_ref().map(|o| OverviewEntry {
                id: row.id(),
                title: &o.title,
                description: &o.description,
            })
        })
        .collect();
    json!({ "body": render_index(&overviews), "workers_count": overviews.len() })
}

pub fn render_index(overviews: &[OverviewEntry<'_>]) -> String {
    let mut body = format!("# Skills index\n\n{} worker(s).\n", overviews.len());
    let mut omitted = false;
    let mut chars = body.chars().count();
    let push = |body: &mut String, chars: &mut usize, text: &str| {
        body.push_str(text);
        *chars += text.chars().count();
    };
    for overview in overviews {
        push(&mut body, &mut chars, &format!("\n## {}\n", overview.title));
        let description = overview.description.trim();
        if !description.is_empty() {
            let len = description.chars().count();
            // The description line and the blank line before it must fit the budget.
            if chars + len + 2 <= INDEX_BUDGET_CHARS {
                push(&mut body, &mut chars, &format!("\n{description}\n"));
            } else {
                omitted = true;
            }
        }
        push(
            &mut body,
            &mut chars,
            &format!("\nRead iii://{}\n", overview.id),
        );
    }
    if omitted {
        body.push_str("\n(some descriptions omitted to save space; call directory::skills::get for the full reference)\n");
    }
    body
}
