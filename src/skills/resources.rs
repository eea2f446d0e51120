//! The resources of an Agent Skill: the files of its `scripts/`, `references/` and `assets/`
//! folders, which the specification names as what a skill's instructions send the agent to
//! read when it needs them. In `skills_folder` every `.md` file is a skill row (the contract),
//! so a downloaded Agent Skill brings its reference documents in as rows of their own; `list`
//! and `get` serve them as any other, but skill search ranks skills: a task is answered with
//! the `SKILL.md` to start from, which names its resources, not with one of them.
//!
//! Why: laid out as a downloaded tree (`tests/search/quality.rs`, the corpus in
//! `skills_folder`), the shared corpus has 2,459 resource rows beside its 2,217 skills, and
//! they took two fifths of the answers' places. On the `dev` skill tasks, leaving them out
//! brought hybrid recall@10 from 0.597 back to 0.662 (that of the same skills without their
//! resources) and the no-match tasks answered from 3 to 2 of 20; counting a resource's match
//! for its skill instead found less (0.636). An iii worker bundle's pages (`mailer/send-email`)
//! sit beside its entry or in folders of other names, and stay skills.

use super::listed::Listed;
use super::rows::Rows;

/// The folders of a skill (the folder holding its `SKILL.md`) that hold its resources.
pub const RESOURCE_FOLDERS: [&str; 3] = ["scripts", "references", "assets"];

/// The on-disk ids of the skill entries `id` would be a resource of: for each segment of `id`
/// (but its last) that is a resource folder, the entry of the folder above it
/// (`pdf/references/forms` → `pdf/index`; `references/forms` → `index`). `id` is a resource
/// when one of them is read from a `SKILL.md` file.
pub fn possible_owners(id: &str) -> Vec<String> {
    let segments: Vec<&str> = id.split('/').collect();
    let last = segments.len().saturating_sub(1);
    (0..last)
        .filter(|&i| RESOURCE_FOLDERS.contains(&segments[i]))
        .map(|i| match i {
            0 => "index".to_string(),
            _ => format!("{}/index", segments[..i].join("/")),
        })
        .collect()
}

/// Whether a `prefix` of ids reaches into a resource folder (`pdf/references/`, or
/// `pdf/references` without its slash): a caller narrowing a search to one skill's resources
/// asks for them, and is answered with them.
pub fn reaches_into_resources(prefix: &str) -> bool {
    let folder = prefix.trim_end_matches('/');
    !folder.is_empty() && !possible_owners(&format!("{folder}/x")).is_empty()
}

/// Whether `row` (in `rows`) is a resource of an Agent Skill whose `SKILL.md` is a row too.
fn is_resource(rows: &Rows, row: &Listed) -> bool {
    // Most ids hold no resource folder: nothing is allocated for them.
    if !RESOURCE_FOLDERS
        .iter()
        .any(|folder| row.id().contains(folder))
    {
        return false;
    }
    possible_owners(row.id()).iter().any(|owner| {
        rows.search(owner)
            .is_ok_and(|position| rows.at(position).skill_file)
    })
}

/// One flag per row of `rows`, in row order: whether it is an Agent Skill's resource.
pub fn resource_flags(rows: &Rows) -> Vec<bool> {
    rows.iter().map(|row| is_resource(rows, row)).collect()
}

#[cfg(test)]
mod tests {
    use super::possible_owners as owners;
    use super::reaches_into_resources;

    #[test]
    fn a_document_in_a_resource_folder_names_the_entry_above_that_folder() {
        assert_eq!(owners("pdf/references/forms"), ["pdf/index"]);
        assert_eq!(owners("team/pdf/assets/template"), ["team/pdf/index"]);
        assert_eq!(owners("pdf/scripts/deep/notes"), ["pdf/index"]);
        assert_eq!(owners("references/forms"), ["index"]);
        assert_eq!(
            owners("a/references/b/assets/c"),
            ["a/index", "a/references/b/index"]
        );
    }

    #[test]
    fn pages_beside_an_entry_or_in_other_folders_name_none() {
        for id in [
            "mailer/send-email",
            "mailer/emails/send-email",
            "pdf/reference",
            "pdf/references",
            "references",
            "mailer/index",
        ] {
            assert!(owners(id).is_empty(), "{id}");
        }
    }

    #[test]
    fn a_prefix_reaches_into_resources_when_it_names_a_resource_folder() {
        for prefix in [
            "pdf/references/",
            "pdf/references",
            "pdf/scripts/deep",
            "references/",
        ] {
            assert!(reaches_into_resources(prefix), "{prefix}");
        }
        for prefix in [
            "",
            "/",
            "pdf",
            "pdf/",
            "pdf/ref",
            "pdf/references-old",
            "mailer/send",
        ] {
            assert!(!reaches_into_resources(prefix), "{prefix}");
        }
    }
}
