//! The Agent Skills specification's checks as the skills family serves them: per served
//! `SKILL.md`, the rules its text breaks (stored by the index at reconcile, see
//! `rules::spec`) plus the one that depends on where it sits (its name equals its folder's).
//! The checks inform: a file the spec rejects is served all the same.

use std::path::{Path, PathBuf};

use serde::ser::SerializeStruct;

use crate::doc::Hash;
use crate::error::Result;
use crate::index::{Reader, Specs};
use crate::roots::{Root, Roots};
use crate::rules::Source;
use crate::rules::skill::SkillRow;
use crate::rules::skip::SkipReason;
use crate::rules::spec::{self, Conformance, Rule, Severity};

/// One served `SKILL.md` and the rules it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecReport {
    /// The id it is served under (display form).
    pub id: String,
    /// The configuration key of the root it sits under.
    pub root: &'static str,
    pub path: String,
    /// In code order; warnings included.
    pub problems: Vec<Rule>,
}

impl SpecReport {
    /// Whether the spec accepts the file (warnings allowed).
    pub fn valid(&self) -> bool {
        spec::valid(&self.problems)
    }
}

impl serde::Serialize for SpecReport {
    fn serialize<S: serde::Serializer>(&self, out: S) -> std::result::Result<S::Ok, S::Error> {
        let mut s = out.serialize_struct("SpecReport", 5)?;
        s.serialize_field("id", &self.id)?;
        s.serialize_field("root", self.root)?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("valid", &self.valid())?;
        s.serialize_field("problems", &problems_json(&self.problems))?;
        s.end()
    }
}

/// Rules as the answers carry them: `[{code, severity, message}]`.
pub fn problems_json(rules: &[Rule]) -> serde_json::Value {
    serde_json::Value::Array(rules.iter().map(Rule::to_json).collect())
}

/// What the checks of the whole tree found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpecSummary {
    /// Served `SKILL.md` files checked.
    pub checked: usize,
    /// Of those, the ones the spec accepts (warnings allowed).
    pub valid: usize,
    /// The ones breaking at least one rule, warnings included, in on-disk id order.
    pub files: Vec<SpecReport>,
    /// What the worker does with a `SKILL.md` beyond the rules: not served (and so not
    /// checked), its name's case differs (a skills root serves it as an ordinary skill, an
    /// agents skills root not at all), or served with its frontmatter ignored or read line by
    /// line.
    pub notes: Vec<SpecNote>,
}

/// A `SKILL.md` the worker does not serve as written, and how it serves it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SpecNote {
    /// The configuration key of the root it sits under.
    pub root: &'static str,
    pub path: String,
    pub note: String,
}

/// Whether a file name is `SKILL.md` in some case.
pub fn named_skill_md(rel: &str) -> bool {
    Path::new(rel)
        .file_name()
        .is_some_and(|name| name.eq_ignore_ascii_case(spec::SKILL_FILE))
}

/// Whether a served row is a file the specification covers (a `SKILL.md`).
fn spec_file(row: &SkillRow) -> Option<(&Source, &str)> {
    match &row.source {
        Source::File { rel, .. }
            if Path::new(rel).file_name() == Some(spec::SKILL_FILE.as_ref()) =>
        {
            Some((&row.source, rel))
        }
        _ => None,
    }
}

/// What the specification says of a row's text: stored at reconcile for a content first seen
/// as a `SKILL.md`, else checked now (the same text first indexed under another name). `None`
/// for bundled content and for a file whose content could not be read.
pub fn conformance(reader: &Reader, row: &SkillRow) -> Result<Option<Conformance>> {
    conformance_from(reader, row, |hash| reader.spec(hash))
}

/// [`conformance`] from an open spec table. A content is checked at reconcile only when the
/// first file read with it is a `SKILL.md`: one first read under another name (a `notes.md`
/// renamed to `SKILL.md`, a copy) has no stored check, and is checked here, as `get` does.
fn stored_in(reader: &Reader, specs: &Specs, row: &SkillRow) -> Result<Option<Conformance>> {
    conformance_from(reader, row, |hash| specs.get(hash))
}

/// [`conformance`] with the stored check looked up by `stored` (one read, or a table open
/// for a pass over every row).
fn conformance_from(
    reader: &Reader,
    row: &SkillRow,
    stored: impl FnOnce(&Hash) -> Result<Option<Conformance>>,
) -> Result<Option<Conformance>> {
    let Source::File {
        content: Ok(hash), ..
    } = &row.source
    else {
        return Ok(None);
    };
    if let Some(stored) = stored(hash)? {
        return Ok(Some(stored));
    }
    Ok(reader.content(hash)?.map(|text| spec::check(&text)))
}

/// The rules a served row's file breaks, the folder rule included, from its stored
/// `conformance`; `None` for a row the spec does not cover (not a `SKILL.md` file).
pub fn problems(
    roots: &Roots,
    row: &SkillRow,
    conformance: Option<&Conformance>,
) -> Option<Vec<Rule>> {
    let (Source::File { root, .. }, rel) = spec_file(row)? else {
        return None;
    };
    Some(with_folder(conformance?, &roots.file(*root, rel)))
}

fn with_folder(conformance: &Conformance, path: &Path) -> Vec<Rule> {
    let folder = path
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    conformance.problems(&folder)
}

/// Checks every served `SKILL.md`, in on-disk id order, and notes each `SKILL.md` the worker
/// does not serve as written (see [`SpecSummary::notes`]). A file the local folder and
/// `skills_folder` both read is checked, and noted, once.
pub fn check(reader: &Reader, roots: &Roots) -> Result<SpecSummary> {
    let mut summary = SpecSummary::default();
    let rows = reader.map_skills(|_, row| match &row.source {
        Source::File { rel, .. } if named_skill_md(rel) => Some(row),
        _ => None,
    })?;
    let specs = reader.specs()?;
    let doubled = super::doubled::Doubled::of(roots);
    let once = |row: &SkillRow| match &row.source {
        Source::File { root, rel, .. } => !doubled.holds(Some(*root), rel),
        Source::Bundled => true,
    };
    for row in rows.into_iter().flatten().filter(once) {
        if let (Source::File { root, rel, .. }, None) = (&row.source, spec_file(&row)) {
            summary.notes.push(SpecNote {
                root: root.config_key(),
                path: roots.file(*root, rel).display().to_string(),
                note: format!(
                    "served as the ordinary skill `{}`: agents look for the exact name {}; \
                     rename the file to check it",
                    row.display_id,
                    spec::SKILL_FILE
                ),
            });
            continue;
        }
        let stored = stored_in(reader, &specs, &row)?;
        let Some(problems) = problems(roots, &row, stored.as_ref()) else {
            continue;
        };
        summary.checked += 1;
        if spec::valid(&problems) {
            summary.valid += 1;
        }
        if problems.is_empty() {
            continue;
        }
        let Source::File { root, rel, .. } = &row.source else {
            continue;
        };
        summary.files.push(SpecReport {
            id: row.display_id.clone(),
            root: root.config_key(),
            path: roots.file(*root, rel).display().to_string(),
            problems,
        });
    }
    for (root, rel, reason) in reader.skipped()? {
        if named_skill_md(&rel) && !doubled.holds(Some(root), &rel) {
            summary.notes.push(SpecNote {
                root: root.config_key(),
                path: roots.file(root, &rel).display().to_string(),
                note: skip_note(&reason),
            });
        }
    }
    summary.notes.extend(misnamed_agents_skill_files(roots));
    Ok(summary)
}

/// The `SKILL.md` files of the agents skills roots (the project's and the global one) named in
/// another case (`<dir>/skill.md`). Those roots are walked shallow, for the exact name alone, so
/// such a file is neither a row nor a skipped entry of the index, and only a look at the disk
/// finds it. Only real folders and files are looked at: a link is the walk's to judge (it
/// may lead outside the roots), and a link the walk follows to such a file is rare enough.
fn misnamed_agents_skill_files(roots: &Roots) -> Vec<SpecNote> {
    let mut notes = Vec::new();
    for (root, dir) in roots.active() {
        if matches!(root, Root::AgentsSkills | Root::GlobalAgentsSkills) {
            for path in real_entries(dir, |t| t.is_dir()).flat_map(misnamed_skill_files) {
                // Renaming over a SKILL.md beside it would replace the one served.
                let next = match path.with_file_name(spec::SKILL_FILE).is_file() {
                    true => format!(
                        "its folder's {} is the one served: merge this file into it, then remove it",
                        spec::SKILL_FILE
                    ),
                    false => format!("rename the file to {}", spec::SKILL_FILE),
                };
                notes.push(SpecNote {
                    root: root.config_key(),
                    path: path.display().to_string(),
                    note: format!(
                        "not served, so not checked: this root serves a folder by its {} alone, \
                         the exact name agents look for; {next}",
                        spec::SKILL_FILE
                    ),
                });
            }
        }
    }
    notes
}

/// The files of `folder` named `SKILL.md` in another case, in name order. On a file system
/// that ignores case the walk opened such a file as `SKILL.md` and serves it: none then.
fn misnamed_skill_files(folder: PathBuf) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = real_entries(&folder, |t| t.is_file()).collect();
    let name = |path: &PathBuf| path.file_name().and_then(|n| n.to_str()).map(str::to_owned);
    let exact = files
        .iter()
        .any(|p| name(p).as_deref() == Some(spec::SKILL_FILE));
    if !exact && folder.join(spec::SKILL_FILE).is_file() {
        return Vec::new();
    }
    files
        .into_iter()
        .filter(|p| name(p).is_some_and(|n| named_skill_md(&n) && n != spec::SKILL_FILE))
        .collect()
}

/// The entries of `dir` whose own type (a link not followed) `kind` accepts, in name order; none
/// when it cannot be listed (the walk says why, where it matters).
fn real_entries(
    dir: &Path,
    kind: impl Fn(std::fs::FileType) -> bool,
) -> std::vec::IntoIter<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(&kind))
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    paths.into_iter()
}

/// What `check --spec` says of a `SKILL.md` the index skipped, or serves with a problem.
fn skip_note(reason: &SkipReason) -> String {
    match reason {
        SkipReason::FrontmatterIgnored(why) => format!(
            "served without its frontmatter, which the worker ignored ({why}): no name or \
             description of its own, and no `disable-model-invocation`; fix the value"
        ),
        SkipReason::FrontmatterSalvaged(why) => format!(
            "served from the block's one-line `key: value` entries only; it is not YAML ({why})"
        ),
        SkipReason::FrontmatterConflicted => "served from the block's one-line `key: value` \
             entries only: it holds the conflict markers a git merge left; settle the conflict"
            .to_string(),
        SkipReason::Unservable(issue) => {
            format!("listed, but its text cannot be served, so not checked: {issue}")
        }
        other => format!("not served, so not checked: {other}"),
    }
}

impl SpecSummary {
    /// How many files break a rule of this severity.
    pub fn breaking(&self, severity: Severity) -> usize {
        self.files
            .iter()
            .filter(|r| r.problems.iter().any(|p| p.severity() == severity))
            .count()
    }
}
