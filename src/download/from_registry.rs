//! A registry bundle routed to where its files land (contract §3.9, registry source): one
//! leading `skills/` stripped from each path, `SKILL.md` preferred over `index.md` for the
//! namespace's overview, `prompts/` paths skipped, exact `agents/<id>.md` entries with a valid
//! id installed as agent profiles, any other `agents` path refused (`D332`: it could never be
//! served, and dropping it would be silent), and everything else (system prompts and
//! payload files included) under `<skills_folder>/<worker>/`. Any path the bundle validator
//! refuses refuses the whole bundle.

use crate::code::Code;
use crate::doc::classify::{PathClass, classify};
use crate::doc::paths::{is_markdown, validate_bundle_path};
use crate::error::{Error, Result};
use crate::registry::SkillsBundle;

use super::bundle::{Bundle, BundleBuilder, Dest, Limits, Listed};
use super::lock::{Resolved, registry_digest};
use super::source::Source;
use crate::doc::ids::validate_name;

const SKILLS_PREFIX: &str = "skills/";
const OVERVIEW: &str = "SKILL.md";
const LEGACY_OVERVIEW: &str = "index.md";
const AGENTS_DIR: &str = "agents";
const MARKDOWN_EXTENSION: &str = ".md";

/// Routes and checks `bundle`, published by `worker`, into a bundle ready to land.
pub fn plan(source: Source, worker: &str, bundle: SkillsBundle, limits: Limits) -> Result<Bundle> {
    if let Some(name) = bundle.name.as_deref().filter(|name| *name != worker) {
        return Err(Error::Invalid(format!(
            "registry returned worker name {name:?}, expected {worker:?}"
        )));
    }
    let stripped = |path: &str| path.strip_prefix(SKILLS_PREFIX).unwrap_or(path).to_string();
    let has_overview = bundle.skills.iter().any(|f| stripped(&f.path) == OVERVIEW);
    let mut builder = BundleBuilder::new(source, limits);
    builder.resolved(Resolved {
        commit: None,
        tag: None,
        version: bundle.version.clone(),
        digest: Some(registry_digest(
            bundle
                .skills
                .iter()
                .map(|f| (f.path.as_str(), f.content.as_str())),
        )),
    });
    for file in bundle.skills {
        builder.count()?;
        let rel = stripped(&file.path);
        if has_overview && rel == LEGACY_OVERVIEW {
            continue;
        }
        validate_bundle_path(&rel)
            .map_err(|why| Error::Invalid(format!("invalid skill path {:?}: {why}", file.path)))?;
        let bytes = file.content.into_bytes();
        match classify(&rel) {
            PathClass::Prompts => {}
            PathClass::Agents => {
                let id = agent_id(&rel).ok_or_else(|| unservable(&file.path, NOT_A_PROFILE))?;
                validate_name(id).map_err(|why| {
                    unservable(
                        &file.path,
                        &format!(
                            "is not a valid agent profile id ({why}) and could never be served"
                        ),
                    )
                })?;
                let listed = Some((Listed::Agent, id.to_string()));
                builder.add(Dest::Agents, format!("{id}.md"), bytes, listed)?;
            }
            PathClass::SystemPrompt => {
                let listed = is_markdown(&rel).then(|| (Listed::SystemPrompt, stem(&rel)));
                builder.add(Dest::Skills, format!("{worker}/{rel}"), bytes, listed)?;
            }
            PathClass::Skill => {
                let listed = Some((Listed::Skill, rel.clone()));
                builder.add(Dest::Skills, format!("{worker}/{rel}"), bytes, listed)?;
            }
        }
    }
    builder.finish()
}

const NOT_A_PROFILE: &str = "is under an agents folder but is not an agent profile (only agents/<id>.md is), so it could never be served";

/// The refusal of a bundle file that could never be served as what its path says it is.
fn unservable(path: &str, why: &str) -> Error {
    Error::coded(
        Code::BundleFileUnservable,
        format!("bundle file {path:?} {why}; the bundle was refused and nothing was written."),
        &[],
    )
}

/// The id of an entry shaped exactly `agents/<id>.md`.
fn agent_id(rel: &str) -> Option<&str> {
    let (dir, file) = rel.split_once('/')?;
    let id = file.strip_suffix(MARKDOWN_EXTENSION)?;
    (dir == AGENTS_DIR && !id.is_empty() && !id.contains('/')).then_some(id)
}

/// A markdown file's name without its folders and `.md`.
fn stem(rel: &str) -> String {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    file.strip_suffix(MARKDOWN_EXTENSION)
        .unwrap_or(file)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{BundleFile, Release};

    fn bundle(name: Option<&str>, paths: &[&str]) -> SkillsBundle {
        SkillsBundle {
            name: name.map(str::to_string),
            version: None,
            skills: paths
                .iter()
                .map(|p| BundleFile {
                    path: p.to_string(),
                    content: format!("# {p}\n"),
                })
                .collect(),
        }
    }

    fn route(paths: &[&str]) -> Result<Bundle> {
        let source = Source::Registry {
            worker: "w".into(),
            release: Release::latest(),
        };
        let limits = Limits {
            max_files: 100,
            max_bytes: 1 << 20,
        };
        plan(source, "w", bundle(Some("w"), paths), limits)
    }

    #[test]
    fn routing_follows_the_contract() {
        let b = route(&[
            "skills/SKILL.md",
            "skills/index.md",
            "emails/send.md",
            "prompts/old.md",
            "agents/captain.md",
            "system-prompts/reviewer.md",
            "system-prompts/notes.txt",
            "scripts/run.sh",
        ])
        .expect("routed");
        let files: Vec<(Dest, &str)> = b.files.iter().map(|f| (f.dest, f.rel.as_str())).collect();
        assert_eq!(
            files,
            [
                (Dest::Skills, "w/SKILL.md"),
                (Dest::Skills, "w/emails/send.md"),
                (Dest::Agents, "captain.md"),
                (Dest::Skills, "w/system-prompts/reviewer.md"),
                (Dest::Skills, "w/system-prompts/notes.txt"),
                (Dest::Skills, "w/scripts/run.sh"),
            ]
        );
        assert_eq!(
            b.written.skills,
            ["SKILL.md", "emails/send.md", "scripts/run.sh"]
        );
        assert_eq!(b.written.system_prompts, ["reviewer"]);
        assert_eq!(b.written.agents, ["captain"]);
    }

    #[test]
    fn agents_paths_that_could_never_be_served_refuse_the_bundle() {
        for path in [
            "agents/UPPER.md",
            "agents/a/b.md",
            "x/agents/y.md",
            "agents/notes.txt",
        ] {
            let err = route(&["ok.md", path]).expect_err(path);
            assert_eq!(
                err.code(),
                Some(Code::BundleFileUnservable),
                "{path}: {err}"
            );
            assert!(err.to_string().contains(&format!("{path:?}")), "{err}");
        }
    }

    #[test]
    fn index_md_stays_without_a_skill_md() {
        let b = route(&["index.md", "skills/x/SKILL.md"]).expect("routed");
        assert_eq!(b.written.skills, ["index.md", "x/SKILL.md"]);
    }

    #[test]
    fn a_bad_path_or_a_foreign_name_refuses_the_bundle() {
        for path in [
            "../x.md",
            "/etc/x.md",
            "skills/../../x.md",
            ".git/x.md",
            "a\\b.md",
            "C:x.md",
        ] {
            let err = route(&["ok.md", path]).expect_err(path).to_string();
            assert!(err.starts_with("invalid skill path"), "{path}: {err}");
        }
        let source = Source::Registry {
            worker: "w".into(),
            release: Release::latest(),
        };
        let limits = Limits {
            max_files: 10,
            max_bytes: 1000,
        };
        let err = plan(source, "w", bundle(Some("other"), &["a.md"]), limits)
            .expect_err("mismatch")
            .to_string();
        assert_eq!(
            err,
            "registry returned worker name \"other\", expected \"w\""
        );
    }
}
