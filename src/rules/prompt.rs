//! What a system prompt is: a file under a `system-prompts` folder whose frontmatter carries a
//! non-empty `description` and, optionally, a valid `name` (else the file stem names it). The
//! scan skips a file that breaks a rule, with the reason; a write refuses it with `D213`.

use serde::{Deserialize, Serialize};

use super::{FrontmatterProblem, Reading, Source, required_fields, trimmed};
use crate::code::Code;
use crate::doc::ids::{NameError, validate_name};
use crate::doc::{Frontmatter, ParsedDoc};
use crate::error::{Error, quoted};

/// One system prompt found on disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRow {
    pub description: String,
    pub modified_at: String,
    pub bytes: u64,
    pub source: Source,
}

/// What a valid system prompt's frontmatter says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// The name it is served under: the declared `name`, else the file stem.
    pub name: String,
    /// The `name` the frontmatter declares, when it declares one.
    pub declared: Option<String>,
    pub description: String,
}

/// Why a file is not a system prompt; `Display` gives the reason the scan records when it
/// skips the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Problem {
    /// No frontmatter, or none that can be used.
    #[error(transparent)]
    Frontmatter(#[from] FrontmatterProblem),
    #[error("frontmatter is missing a non-empty `description`")]
    NoDescription,
    #[error("invalid system prompt name {}: {why}", quoted(name))]
    InvalidName { name: String, why: NameError },
}

impl Problem {
    /// The error a write answers with (`D213`): the same rule, said as what the next scan
    /// would do.
    pub fn write_error(&self) -> Error {
        let problem = match self {
            Problem::Frontmatter(why) => format!("{why}."),
            Problem::NoDescription => "frontmatter is missing a non-empty `description`; the next scan would skip this prompt.".into(),
            Problem::InvalidName { why, .. } => format!(
                "frontmatter `name` is invalid ({why}); the next scan would skip this prompt."
            ),
        };
        Error::coded(Code::PromptFrontmatterRefused, problem, &[])
    }
}

/// Reads a system prompt's frontmatter. `stem` is the file stem (for a write, the requested
/// name, which the caller has validated).
pub fn read(doc: &ParsedDoc, stem: &str, reading: Reading) -> Result<Prompt, Problem> {
    let fields = required_fields(&doc.frontmatter, reading)?;
    let checked = (|| {
        let declared = trimmed(fields.name.as_ref());
        let name = declared.clone().unwrap_or_else(|| stem.to_string());
        validate_name(&name).map_err(|why| Problem::InvalidName {
            name: name.clone(),
            why,
        })?;
        let description = trimmed(fields.description.as_ref()).ok_or(Problem::NoDescription)?;
        Ok(Prompt {
            name,
            declared,
            description,
        })
    })();
    // A salvaged block that breaks a rule: its YAML error tells the author more.
    match (&doc.frontmatter, checked) {
        (Frontmatter::Salvaged { error, .. }, Err(_)) => Err(Problem::Frontmatter(
            FrontmatterProblem::InvalidYaml(error.clone()),
        )),
        (_, checked) => checked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Result<Prompt, Problem> {
        read(&ParsedDoc::parse(text), "stem", Reading::Scan)
    }

    #[test]
    fn name_defaults_to_the_stem_and_description_is_required() {
        let prompt = scan("---\ndescription: ' Reviews. '\n---\nBody.\n").expect("valid");
        assert_eq!(
            prompt,
            Prompt {
                name: "stem".into(),
                declared: None,
                description: "Reviews.".into()
            }
        );
        assert_eq!(scan("---\nname: x\n---\nB\n"), Err(Problem::NoDescription));
        let bad = scan("---\nname: Bad\ndescription: d\n---\nB\n").expect_err("bad name");
        assert!(
            bad.to_string()
                .starts_with("invalid system prompt name \"Bad\": ")
        );
        assert!(bad.write_error().to_string().starts_with(&format!(
            "{} invalid_input: frontmatter `name` is invalid (",
            Code::PromptFrontmatterRefused
        )));
    }

    #[test]
    fn scan_and_write_differ_only_on_blocks_that_are_not_yaml() {
        let salvaged = "---\ndescription: Reviews code: carefully.\n---\nB\n";
        let doc = ParsedDoc::parse(salvaged);
        assert!(read(&doc, "stem", Reading::Scan).is_ok());
        let refused = read(&doc, "stem", Reading::Write).expect_err("not YAML");
        assert!(refused.write_error().to_string().starts_with(&format!(
            "{} invalid_input: invalid frontmatter YAML: ",
            Code::PromptFrontmatterRefused
        )));
        let broken = ParsedDoc::parse("---\ndescription: [x\n---\nB\n");
        let reason = read(&broken, "stem", Reading::Scan)
            .expect_err("no description")
            .to_string();
        assert!(reason.starts_with("invalid frontmatter YAML: "), "{reason}");
    }
}
