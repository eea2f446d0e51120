//! The dry run behind the console page's live check (`iii-directory::ui-check`): a proposed
//! file text read with the server's own rules, without writing anything. It answers what the
//! list would show for it (title, description), how its frontmatter block was read, and the
//! error a save would answer with, so that the page never guesses at a rule the server owns
//! (issue 27 §5: the page re-implemented them, with different results).
//!
//! The reading is the write path's: the same content checks and family rules the update
//! functions run (`skills::write`, `system_prompts::write`, `agents::write`), then the scan's
//! reading of the document (`rules`) for what the list shows.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::doc::ids::validate_name;
use crate::doc::{Frontmatter, MAX_FILE_BYTES, ParsedDoc, as_read};
use crate::error::{Error, Result};
use crate::family_writes::check_content;
use crate::request;
use crate::rules::Source;
use crate::rules::skill::{Placement, Visibility, parse_id, row_for};
use crate::{Directory, agents, skills, system_prompts};

/// `{family, id, content}`: the text the editor holds, for the document `id` of `family`
/// (`skills`, `system-prompts` or `agents`, the names of the change events).
#[derive(Deserialize)]
struct Request {
    family: String,
    id: String,
    content: String,
}

/// The server's reading of a proposed text: `{family, id, id_error, frontmatter,
/// frontmatter_error, title, description, refused}`.
///
/// - `frontmatter`: `absent` (no block), `yaml` (a YAML mapping, read as written), `salvaged`
///   (not YAML: read from its `key: value` lines, and `check` lists the file), `ignored` (read
///   but unusable: a recognised key of the wrong shape or given twice; `check` lists the file);
///   `frontmatter_error` says why for the last two.
/// - `title` and `description`: what the family's list would show after a save (a skill's
///   title falls back to its body's heading, then its id; a system prompt's and an agent
///   profile's title is its name). `null` when the save would be refused.
/// - `refused`: the error the family's update would answer with, or `null`.
///
/// A text over the families' size cap is refused as a save would be, unread (`frontmatter`
/// `null`).
/// - `id_error`: why `id` breaks the family's id rule, or `null`.
pub fn check(directory: &Directory, request: &Value) -> Result<Value> {
    let req: Request = request::parse(request)?;
    if req.content.len() as u64 > MAX_FILE_BYTES {
        // Refused unread, as every family's write refuses it.
        let refused = check_content(&req.content).err().map(|e| e.to_string());
        return Ok(json!({
            "family": req.family, "id": req.id, "id_error": null, "frontmatter": null,
            "frontmatter_error": null, "title": null, "description": null, "refused": refused,
        }));
    }
    let doc = ParsedDoc::parse(as_read(&req.content));
    let (frontmatter, frontmatter_error) = match &doc.frontmatter {
        Frontmatter::Absent => ("absent", None),
        Frontmatter::Present(_) => ("yaml", None),
        Frontmatter::Salvaged { error, .. } => ("salvaged", Some(error.clone())),
        Frontmatter::Invalid(why) => ("ignored", Some(why.clone())),
    };
    let (id_error, reading) = match req.family.as_str() {
        "skills" => (
            // The update's own reading of the id: `<folder>/SKILL.md` is `<folder>/index`.
            parse_id(&req.id).err().map(|e| e.to_string()),
            skill(directory, &req.id, &req.content, &doc),
        ),
        "system-prompts" => (
            validate_name(&req.id).err().map(|e| e.to_string()),
            prompt(directory, &req.id, &req.content),
        ),
        "agents" => (
            validate_name(&req.id).err().map(|e| e.to_string()),
            agent(&req.content),
        ),
        other => {
            return Err(Error::Invalid(format!(
                "invalid request: family must be skills, system-prompts or agents, not {}",
                crate::error::quoted(other)
            )));
        }
    };
    let (title, description, refused) = match reading {
        Ok((title, description)) => (Some(title), Some(description), None),
        Err(refused) => (None, None, Some(refused.to_string())),
    };
    Ok(json!({
        "family": req.family,
        "id": req.id,
        "id_error": id_error,
        "frontmatter": frontmatter,
        "frontmatter_error": frontmatter_error,
        "title": title,
        "description": description,
        "refused": refused,
    }))
}

/// A skill: the update's content checks and its read-only rule (a bundled skill, or one under an
/// agents skills root), then the row the scan builds (its title falls back to the id, as the
/// list shows it).
fn skill(
    directory: &Directory,
    id: &str,
    content: &str,
    doc: &ParsedDoc,
) -> Result<(String, String)> {
    check_content(content)?;
    // An id the update would refuse to parse is the page's `id_error`, not a refusal here.
    if let Ok(parsed) = parse_id(id) {
        // Nothing hidden: the page edits what its list shows, whatever is installed.
        let visibility = Visibility {
            filter_unregistered: false,
            installed: None,
        };
        skills::write::check_not_read_only(
            &directory.reader()?,
            directory.roots(),
            visibility,
            &parsed,
        )?;
    }
    let row = row_for(
        id,
        Some(doc),
        Placement {
            display_id: id.to_string(),
            bytes: content.len() as u64,
            modified_at: String::new(),
            source: Source::Bundled,
            agents_skill: false,
            agents_namespace: false,
        },
    );
    Ok((row.title, row.description))
}

/// A system prompt: the update's checks (a declared name never renames it onto another
/// prompt's file); its name is the declared one, else the file's.
fn prompt(directory: &Directory, name: &str, content: &str) -> Result<(String, String)> {
    check_content(content)?;
    let (declared, description) = system_prompts::write::check_frontmatter(content, name)?;
    if let Some(declared) = declared.as_deref().filter(|declared| *declared != name) {
        system_prompts::write::check_rename(&directory.reader()?, name, declared)?;
    }
    Ok((declared.unwrap_or_else(|| name.to_string()), description))
}

/// An agent profile: the update's checks; the list shows its name.
fn agent(content: &str) -> Result<(String, String)> {
    let profile = agents::write::check(content)?;
    Ok((profile.name, profile.description))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::Code;

    /// A directory over a tree holding the system prompt `helper`.
    fn directory() -> (tempfile::TempDir, Directory) {
        let dir = tempfile::tempdir().expect("tempdir");
        let prompts = dir.path().join("skills/system-prompts");
        std::fs::create_dir_all(&prompts).expect("mkdir");
        std::fs::write(
            prompts.join("helper.md"),
            "---\ndescription: Helps.\n---\nHelp.\n",
        )
        .expect("write");
        let directory = Directory::open(crate::config::Config::for_root(dir.path())).expect("open");
        directory.reconcile().expect("reconcile");
        (dir, directory)
    }

    fn dry(family: &str, id: &str, content: &str) -> Value {
        let (_dir, directory) = directory();
        let request = json!({ "family": family, "id": id, "content": content });
        check(&directory, &request).expect("answers")
    }

    #[test]
    fn prompts_and_profiles_are_read_with_their_write_rules() {
        let prompt = dry(
            "system-prompts",
            "reviewer",
            "---\ndescription: Reviews.\n---\nBody\n",
        );
        assert_eq!(
            (&prompt["title"], &prompt["description"], &prompt["refused"]),
            (&json!("reviewer"), &json!("Reviews."), &Value::Null)
        );
        let refused = dry("system-prompts", "reviewer", "---\nname: x\n---\nBody\n");
        assert!(
            refused["refused"]
                .as_str()
                .is_some_and(|r| r.starts_with(&format!(
                    "{} invalid_input: ",
                    Code::PromptFrontmatterRefused
                ))),
            "{refused}"
        );
        // A declared name that renames the prompt onto another prompt's file, as the update.
        let onto = dry(
            "system-prompts",
            "reviewer",
            "---\nname: helper\ndescription: Reviews.\n---\nBody\n",
        );
        assert!(
            onto["refused"]
                .as_str()
                .is_some_and(|r| r.starts_with(&format!(
                    "{} invalid_input: system prompt \"helper\" already exists",
                    Code::PromptExists
                ))),
            "{onto}"
        );
        let agent = dry("agents", "helper", "---\nname: Helper\ncolor: mauve\n---\n");
        assert!(
            agent["refused"]
                .as_str()
                .is_some_and(|r| r.contains("`color` must be one of")),
            "{agent}"
        );
        let agent = dry("agents", "Bad Id", "---\nname: Helper\n---\n");
        assert_eq!(agent["title"], "Helper");
        assert!(agent["id_error"].is_string(), "{agent}");
    }

    #[test]
    fn an_agent_skill_s_file_name_is_an_id_as_the_create_reads_it() {
        let answer = dry(
            "skills",
            "invoice-check/SKILL.md",
            "---\nname: invoice-check\ndescription: Check invoices.\n---\n# B\n",
        );
        assert_eq!(answer["id_error"], Value::Null, "{answer}");
        assert!(dry("skills", "Invoice/x", "# B\n")["id_error"].is_string());
    }

    #[test]
    fn a_read_only_skill_is_refused_as_its_update_is() {
        let (_dir, directory) = directory();
        let request = json!({
            "family": "skills",
            "id": "iii-directory/finding-functions",
            "content": "# Finding functions\n\nEdited.\n",
        });
        let answer = check(&directory, &request).expect("answers");
        let update = skills::write::update(
            &directory.reader().expect("reader"),
            directory.roots(),
            Visibility {
                filter_unregistered: false,
                installed: None,
            },
            &json!({ "id": "iii-directory/finding-functions", "content": "x" }),
        )
        .err()
        .expect("the update refuses a bundled skill");
        assert_eq!(update.code(), Some(Code::SkillReadOnly));
        assert_eq!(answer["refused"], json!(update.to_string()), "{answer}");
        // A skill of the tree's own, and one not written yet, are not refused.
        assert!(dry("skills", "mine/new-one", "# New\n")["refused"].is_null());
    }

    #[test]
    fn a_leading_byte_order_mark_is_read_past_as_the_scan_does() {
        let skill = dry(
            "skills",
            "marked",
            "\u{feff}---\ntitle: Marked\n---\nBody\n",
        );
        assert_eq!(
            (&skill["frontmatter"], &skill["title"], &skill["refused"]),
            (&json!("yaml"), &json!("Marked"), &Value::Null)
        );
    }

    #[test]
    fn an_unknown_family_and_an_oversized_text_are_answered() {
        let (_dir, directory) = directory();
        let err = check(
            &directory,
            &json!({ "family": "x", "id": "a", "content": "" }),
        )
        .expect_err("x");
        assert!(
            err.to_string().starts_with("invalid request: family"),
            "{err}"
        );
        let huge = "a".repeat(MAX_FILE_BYTES as usize + 1);
        let answer = dry("skills", "a", &huge);
        assert!(answer["frontmatter"].is_null());
        assert!(
            answer["refused"]
                .as_str()
                .is_some_and(|r| r.starts_with(&format!("{} ", Code::ContentRefused))),
            "{answer}"
        );
    }
}
