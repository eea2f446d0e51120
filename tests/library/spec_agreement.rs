//! The spec checks (`rules::spec`) against the Agent Skills reference validator (npm
//! `skills-ref` 0.1.5, installed by `npm ci --prefix tests/spec_reference`): the valid or
//! invalid verdict of both on every `SKILL.md` folder of `../shared/corpus` and of a generated
//! tree that plants each rule's violation (and its boundary) in many folders. The validator runs
//! once, in process over every folder (`tests/spec_reference/verdicts.mjs`).
//!
//! Where the verdicts differ, the spec's text and the validator disagree, and these checks
//! follow the text; every such folder is listed below with why, so a new disagreement fails
//! the test, and so does a listed one that went away.
//!
//! Beside the verdicts, `skills::catalog`'s `xml` against the library's `to-prompt`
//! (`tests/spec_reference/prompts.mjs`) on the same folders: the same text but for the location
//! paths.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use iii_directory::testing::spec::{self, MAX_COMPATIBILITY, MAX_DESCRIPTION, MAX_NAME};
use iii_directory::{ReadFunction, doc};
use serde_json::json;
use test_support::common;

/// The validator turns every `metadata` value into a string before it validates (a number,
/// a list, a nested mapping all pass); the spec defines `metadata` as a map from string keys to
/// string values, and clients that read it as such would get something else.
const METADATA_COERCED: &str = "metadata values that are not strings (S141): the validator \
     coerces them with String() before looking; the spec says a map of string to string";

/// Corpus folders (relative to `corpus/`) whose verdicts differ, with why.
/// Each has `metadata` entries that are lists, booleans or nested mappings (tags, globs,
/// `security_reviewed: true`, `capabilities:`).
const CORPUS_DISAGREEMENTS: &[(&str, &str)] = &[
    ("community-skills/golang-testing", METADATA_COERCED),
    ("community-skills/hpc-runtime-doctor", METADATA_COERCED),
    ("community-skills/md-analysis-planner", METADATA_COERCED),
    ("community-skills/nonlinear-solvers", METADATA_COERCED),
    ("community-skills/numerical-integration", METADATA_COERCED),
    ("community-skills/numerical-stability", METADATA_COERCED),
    ("community-skills/ontology-mapper", METADATA_COERCED),
    ("community-skills/performance-profiling", METADATA_COERCED),
    (
        "community-skills/slurm-job-script-generator",
        METADATA_COERCED,
    ),
    ("community-skills/x-twitter-scraper", METADATA_COERCED),
];

/// Planted cases (by label) whose verdicts differ, with why.
const PLANTED_DISAGREEMENTS: &[(&str, &str)] = &[
    ("metadata-number", METADATA_COERCED),
    ("metadata-nested", METADATA_COERCED),
    (
        "metadata-scalar",
        "`metadata` that is not a mapping (S140): the validator skips a scalar; the spec says a map",
    ),
    (
        "allowed-tools-map",
        "`allowed-tools` as a mapping (S150): the validator never looks at it; the spec says a \
         space-delimited string (a list of strings is only a warning, S151, as agents take it)",
    ),
    (
        "description-null",
        "`description:` with no value (S121): the validator reads YAML null as the text \"null\"; \
         the spec says non-empty",
    ),
    (
        "description-list",
        "`description` as a list (S121): the validator joins it with commas; the spec says a \
         string",
    ),
    (
        "bom",
        "a byte-order mark before the frontmatter: every read here skips it, as an encoding mark \
         rather than text (the served skill keeps its frontmatter); the validator takes it for \
         text before the `---`, so no frontmatter",
    ),
    (
        "name-number",
        "`name: 007` in folder `007`: read here as it is written, as every frontmatter value is; \
         the validator reads the YAML number 7, which is not the folder's name",
    ),
    (
        "lone-cr-lines",
        "lines ended by a lone CR (S100): the reader that serves the file (the contract's) ends \
         lines at LF, CRLF included, so it finds no frontmatter block; the validator splits at \
         CR too",
    ),
    (
        "fence-trailing-space",
        "`--- ` with a trailing space (S100): the reader that serves the file takes only `---` \
         alone on its line as a fence; the validator trims the line",
    ),
    (
        "name-null",
        "`name: ~` in folder `null` (S111): YAML null is no name here; the validator reads it as \
         the text \"null\", as it does an empty description",
    ),
    (
        "name-accented",
        "a name with letters outside a-z (S114): the validator accepts some Unicode letters \
         (Latin-1, Cyrillic, CJK); the spec says a-z, 0-9 and hyphens",
    ),
];

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spec_reference")
}

/// Whether the reference package is installed; says so when it is not (the test then skips).
fn reference_installed() -> bool {
    let installed = reference_dir()
        .join("node_modules/skills-ref/package.json")
        .is_file();
    if !installed {
        eprintln!(
            "skipped: tests/spec_reference/node_modules is missing (npm ci --prefix tests/spec_reference)"
        );
    }
    installed
}

/// Runs one of the reference scripts with the folders on stdin, one per line, and reads its
/// JSON answer.
fn run_reference<T: serde::de::DeserializeOwned>(script: &[&str], folders: &[PathBuf]) -> T {
    let dir = reference_dir();
    let mut child = Command::new("node")
        .arg(dir.join(script[0]))
        .args(&script[1..])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs (it installed the reference package)");
    let list: String = folders
        .iter()
        .map(|f| format!("{}\n", f.display()))
        .collect();
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
    let out = child.wait_with_output().expect("the script's output");
    writer
        .join()
        .expect("writer thread")
        .expect("folders written");
    assert!(out.status.success(), "{script:?} failed: {:?}", out.status);
    serde_json::from_slice(&out.stdout).expect("one JSON answer")
}

/// The validator's messages for each folder (empty: valid), or `None` when it is not installed.
fn reference_verdicts(folders: &[PathBuf]) -> Option<Vec<Vec<String>>> {
    if !reference_installed() {
        return None;
    }
    let verdicts: Vec<Vec<String>> = run_reference(&["verdicts.mjs"], folders);
    assert_eq!(verdicts.len(), folders.len());
    Some(verdicts)
}

/// Our verdict on a folder's `SKILL.md`, as the index computes it (the file decoded as the scan
/// decodes it), with the codes of the rules it breaks.
fn our_verdict(folder: &Path) -> (bool, Vec<&'static str>) {
    let bytes = fs::read(folder.join(spec::SKILL_FILE)).expect("SKILL.md reads");
    let text = doc::decode(&bytes).expect("a file the scan serves");
    let name = folder.file_name().expect("a folder name").to_string_lossy();
    let rules = spec::check(text).problems(&name);
    (
        spec::valid(&rules),
        rules.iter().map(|r| r.code()).collect(),
    )
}

struct Tally {
    agreed_valid: usize,
    agreed_invalid: usize,
    /// Label → (ours valid, the validator's messages, our codes).
    disagreements: BTreeMap<String, (bool, Vec<String>, Vec<&'static str>)>,
}

fn compare(cases: &[(String, PathBuf)]) -> Option<Tally> {
    let folders: Vec<PathBuf> = cases.iter().map(|(_, f)| f.clone()).collect();
    let theirs = reference_verdicts(&folders)?;
    let mut tally = Tally {
        agreed_valid: 0,
        agreed_invalid: 0,
        disagreements: BTreeMap::new(),
    };
    for ((label, folder), messages) in cases.iter().zip(theirs) {
        let (valid, codes) = our_verdict(folder);
        match (valid, messages.is_empty()) {
            (true, true) => tally.agreed_valid += 1,
            (false, false) => tally.agreed_invalid += 1,
            _ => {
                tally
                    .disagreements
                    .insert(label.clone(), (valid, messages, codes));
            }
        }
    }
    Some(tally)
}

/// Every disagreement is listed, and every listed one still disagrees.
fn assert_listed(tally: &Tally, listed: &[(&str, &str)]) {
    let unlisted: Vec<String> = tally
        .disagreements
        .iter()
        .filter(|(label, _)| !listed.iter().any(|(l, _)| l == label))
        .map(|(label, (ours, theirs, codes))| {
            format!("{label}: ours valid={ours} {codes:?}; skills-ref {theirs:?}")
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "verdicts differ from skills-ref on folders not listed:\n{}",
        unlisted.join("\n")
    );
    let stale: Vec<&str> = listed
        .iter()
        .map(|(label, _)| *label)
        .filter(|label| !tally.disagreements.contains_key(*label))
        .collect();
    assert!(
        stale.is_empty(),
        "listed disagreements that agree now: {stale:?}"
    );
}

#[test]
fn corpus_verdicts_agree_with_skills_ref() {
    let Some(corpus) = common::shared_path("corpus") else {
        return;
    };
    let mut folders = Vec::new();
    let mut pending = vec![corpus.clone()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("corpus folder lists") {
            let path = entry.expect("corpus entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|n| n == spec::SKILL_FILE) {
                folders.push(dir.clone());
            }
        }
    }
    folders.sort();
    let cases: Vec<(String, PathBuf)> = folders
        .into_iter()
        .map(|f| {
            let label = f
                .strip_prefix(&corpus)
                .expect("under the corpus")
                .display()
                .to_string();
            (label, f)
        })
        .collect();
    let Some(tally) = compare(&cases) else {
        return;
    };
    eprintln!(
        "spec agreement, corpus: {} folders, {} agreed valid, {} agreed invalid, {} listed disagreements",
        cases.len(),
        tally.agreed_valid,
        tally.agreed_invalid,
        tally.disagreements.len()
    );
    assert_listed(&tally, CORPUS_DISAGREEMENTS);
}

/// The planted cases for one base name: a label and the `SKILL.md` of a folder named as the
/// case needs (its name, unless the case is about the folder).
fn planted(n: &str) -> Vec<(&'static str, String, String)> {
    let d = "description: Does one thing well.\n";
    let file = |front: String| format!("---\n{front}---\n# Title\n\nBody text.\n");
    let named = |name: &str, rest: &str| file(format!("name: {name}\n{rest}"));
    let same =
        |label: &'static str, name: String, rest: &str| (label, name.clone(), named(&name, rest));
    let long_name = format!("{n}{}", "x".repeat(MAX_NAME + 1 - n.len()));
    let limit_name = format!("{n}{}", "x".repeat(MAX_NAME - n.len()));
    let upper = n.to_uppercase();
    vec![
        same("valid", n.to_owned(), d),
        same(
            "valid-all-fields",
            n.to_owned(),
            &format!(
                "{d}license: MIT\ncompatibility: Needs git\nmetadata:\n  author: a\n  version: \"2\"\nallowed-tools: Read Bash(git:*)\n"
            ),
        ),
        same("name-at-limit", limit_name, d),
        same(
            "description-at-limit",
            n.to_owned(),
            &format!("description: {}\n", "d".repeat(MAX_DESCRIPTION)),
        ),
        same(
            "description-emoji-at-limit",
            n.to_owned(),
            &format!("description: {}\n", "😀".repeat(MAX_DESCRIPTION / 2)),
        ),
        same(
            "compatibility-at-limit",
            n.to_owned(),
            &format!("{d}compatibility: {}\n", "c".repeat(MAX_COMPATIBILITY)),
        ),
        (
            "body-long-warning",
            n.to_owned(),
            format!("{}{}", named(n, d), "line\n".repeat(700)),
        ),
        (
            "no-frontmatter",
            n.to_owned(),
            "# Title\n\nBody.\n".to_owned(),
        ),
        (
            "not-yaml",
            n.to_owned(),
            named(n, &format!("{d}license: [MIT\n")),
        ),
        ("not-a-mapping", n.to_owned(), file("- a\n- b\n".to_owned())),
        ("key-repeated", n.to_owned(), named(n, &format!("{d}{d}"))),
        ("name-missing", n.to_owned(), file(d.to_owned())),
        ("name-blank", n.to_owned(), named("\"  \"", d)),
        same("name-too-long", long_name, d),
        same("name-upper", upper, d),
        same("name-underscore", n.replace('-', "_") + "_x", d),
        same("name-accented", format!("{n}é"), d),
        same("name-leading-hyphen", format!("-{n}"), d),
        same("name-trailing-hyphen", format!("{n}-"), d),
        same("name-double-hyphen", format!("{n}--x"), d),
        ("name-not-folder", format!("{n}-folder"), named(n, d)),
        ("description-missing", n.to_owned(), named(n, "")),
        (
            "description-empty",
            n.to_owned(),
            named(n, "description: \"\"\n"),
        ),
        ("description-null", n.to_owned(), named(n, "description:\n")),
        (
            "description-list",
            n.to_owned(),
            named(n, "description: [a, b]\n"),
        ),
        (
            "description-too-long",
            n.to_owned(),
            named(
                n,
                &format!("description: {}\n", "d".repeat(MAX_DESCRIPTION + 1)),
            ),
        ),
        (
            "description-emoji-too-long",
            n.to_owned(),
            named(
                n,
                &format!("description: {}\n", "😀".repeat(MAX_DESCRIPTION / 2 + 1)),
            ),
        ),
        (
            "compatibility-list",
            n.to_owned(),
            named(n, &format!("{d}compatibility: [git]\n")),
        ),
        (
            "compatibility-too-long",
            n.to_owned(),
            named(
                n,
                &format!("{d}compatibility: {}\n", "c".repeat(MAX_COMPATIBILITY + 1)),
            ),
        ),
        (
            "metadata-number",
            n.to_owned(),
            named(n, &format!("{d}metadata:\n  version: 2\n")),
        ),
        (
            "metadata-nested",
            n.to_owned(),
            named(n, &format!("{d}metadata:\n  tags: [a]\n")),
        ),
        (
            "metadata-scalar",
            n.to_owned(),
            named(n, &format!("{d}metadata: author\n")),
        ),
        (
            "allowed-tools-list-warning",
            n.to_owned(),
            named(n, &format!("{d}allowed-tools: [Read, Write]\n")),
        ),
        (
            "allowed-tools-map",
            n.to_owned(),
            named(n, &format!("{d}allowed-tools:\n  read: yes\n")),
        ),
        (
            "unknown-key",
            n.to_owned(),
            named(n, &format!("{d}version: 1\n")),
        ),
        // How the block is written rather than what it says.
        ("bom", n.to_owned(), format!("\u{feff}{}", named(n, d))),
        (
            "tab-after-colon",
            n.to_owned(),
            file(format!("name:\t{n}\ndescription:\tDoes one thing well.\n")),
        ),
        (
            "lone-cr-lines",
            n.to_owned(),
            named(n, d).replace('\n', "\r"),
        ),
        (
            "fence-trailing-space",
            n.to_owned(),
            named(n, d).replacen("---\n", "--- \n", 1),
        ),
        same("name-number", "007".to_owned(), d),
        ("name-null", "null".to_owned(), named("~", d)),
    ]
}

/// Base names the planted cases are repeated over: short and long, with digits and hyphens.
const BASES: [&str; 12] = [
    "a",
    "pdf",
    "pdf-tools",
    "x1",
    "web-artifacts-builder",
    "mcp-builder",
    "s3-sync",
    "a-b-c-d",
    "k8s",
    "doc-coauthoring",
    "slack-gif-creator",
    "z",
];

#[test]
fn planted_violations_agree_with_skills_ref() {
    let tree = tempfile::tempdir().expect("temporary folder");
    let mut cases = Vec::new();
    let mut labels: BTreeMap<String, &'static str> = BTreeMap::new();
    for (i, base) in BASES.iter().enumerate() {
        for (j, (label, folder, text)) in planted(base).into_iter().enumerate() {
            let dir = tree.path().join(format!("{i}-{j}")).join(&folder);
            fs::create_dir_all(&dir).expect("case folder");
            fs::write(dir.join(spec::SKILL_FILE), text).expect("SKILL.md written");
            let key = format!("{base}/{label}");
            labels.insert(key.clone(), label);
            cases.push((key, dir));
        }
    }
    let Some(tally) = compare(&cases) else {
        return;
    };
    eprintln!(
        "spec agreement, planted: {} folders, {} agreed valid, {} agreed invalid, {} listed disagreements",
        cases.len(),
        tally.agreed_valid,
        tally.agreed_invalid,
        tally.disagreements.len()
    );
    // Planted disagreements are listed by case, whatever the base name.
    let unlisted: Vec<String> = tally
        .disagreements
        .iter()
        .filter(|(key, _)| {
            !PLANTED_DISAGREEMENTS
                .iter()
                .any(|(l, _)| *l == labels[*key])
        })
        .map(|(key, (ours, theirs, codes))| {
            format!("{key}: ours valid={ours} {codes:?}; skills-ref {theirs:?}")
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "verdicts differ from skills-ref on planted cases not listed:\n{}",
        unlisted.join("\n")
    );
    for (label, _) in PLANTED_DISAGREEMENTS {
        assert_eq!(
            tally
                .disagreements
                .keys()
                .filter(|k| labels[*k] == *label)
                .count(),
            BASES.len(),
            "{label} should disagree for every base name"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The catalog against `to-prompt`
// ---------------------------------------------------------------------------------------------

/// Folders planted beside the corpus for the catalog: characters both escape, a name the
/// folder gives (`to-prompt` refuses it), a skill a model may not invoke (`to-prompt` lists it,
/// the catalog does not), a folded description.
const CATALOG_PLANTED: &[(&str, &str)] = &[
    (
        "escapes",
        "---\nname: escapes\ndescription: Reads <tags> & \"quotes\" and 'apostrophes'.\n---\n# E\n",
    ),
    (
        "unnamed",
        "---\ndescription: Named by its folder.\n---\n# U\n",
    ),
    (
        "manual-only",
        "---\nname: manual-only\ndescription: Only a user runs this.\ndisable-model-invocation: true\n---\n# M\n",
    ),
    (
        "folded",
        "---\nname: folded\ndescription: >\n  One line\n  and the next.\n---\n# F\n",
    ),
];

/// Every folder under `root` that holds a `SKILL.md`, sorted.
fn skill_folders(root: &Path) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("folder lists") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|n| n == spec::SKILL_FILE) {
                folders.push(dir.clone());
            }
        }
    }
    folders.sort();
    folders
}

/// The `<skill>` blocks of an `<available_skills>` text, each with its lines, and the text's
/// lines around them: the text must be the wrapper around whole blocks.
fn skill_blocks(text: &str) -> Vec<String> {
    let inner = text
        .strip_prefix("<available_skills>\n")
        .and_then(|t| t.strip_suffix("</available_skills>"))
        .unwrap_or_else(|| panic!("not an <available_skills> block: {text:.200}"));
    let mut blocks = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let end = rest.find("\n</skill>\n").expect("a closed <skill>") + "\n</skill>\n".len();
        blocks.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    blocks
}

/// A block's location: the line after `<location>`.
fn block_location(block: &str) -> &str {
    let lines: Vec<&str> = block.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "<location>")
        .expect("a location");
    lines[at + 1]
}

/// The text with each location line replaced: what is compared.
fn without_locations(text: &str) -> String {
    let mut out = Vec::new();
    let mut after_location = false;
    for line in text.split('\n') {
        out.push(if after_location { "LOCATION" } else { line });
        after_location = line == "<location>";
    }
    out.join("\n")
}

#[test]
fn catalog_xml_equals_to_prompt_but_for_locations() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    if !reference_installed() {
        return;
    }
    let tree = common::Tree::new();
    let skills = tree.path("skills");
    for folder in skill_folders(&corpus) {
        let rel = folder.strip_prefix(&corpus).expect("under the corpus");
        let to = skills.join(rel);
        fs::create_dir_all(&to).expect("mkdir");
        fs::copy(folder.join(spec::SKILL_FILE), to.join(spec::SKILL_FILE)).expect("copy");
    }
    for (name, text) in CATALOG_PLANTED {
        tree.write(&format!("skills/planted/{name}/SKILL.md"), text);
    }
    let directory = tree.open();
    let answer = common::call(
        &directory,
        ReadFunction::SkillsCatalog,
        json!({ "max_bytes": 8 << 20 }),
    );
    assert_eq!(answer["left_out"], 0, "everything fits 8 MiB");
    let body = answer["body"].as_str().expect("an xml body");
    // A real XML parser reads the whole block: one element per entry, each with its three.
    let xml = roxmltree::Document::parse(body).expect("the catalog parses as XML");
    let entries: Vec<_> = xml
        .root_element()
        .children()
        .filter(|n| n.is_element())
        .collect();
    assert_eq!(xml.root_element().tag_name().name(), "available_skills");
    assert_eq!(
        entries.len() as u64,
        answer["count"].as_u64().expect("count")
    );
    for entry in &entries {
        let tags: Vec<&str> = entry
            .children()
            .filter(|n| n.is_element())
            .map(|n| n.tag_name().name())
            .collect();
        assert_eq!(tags, ["name", "description", "location"]);
    }

    // Which folders each side lists.
    let folders = skill_folders(&skills);
    let theirs: Vec<Option<String>> = run_reference(&["prompts.mjs", "each"], &folders);
    let ours: Vec<String> = skill_blocks(body);
    let our_folders: BTreeMap<PathBuf, &String> = ours
        .iter()
        .map(|b| {
            let location = PathBuf::from(block_location(b));
            (location.parent().expect("a folder").to_path_buf(), b)
        })
        .collect();
    let accepted: BTreeMap<&PathBuf, bool> = folders
        .iter()
        .zip(&theirs)
        .map(|(folder, block)| (folder, block.is_some()))
        .collect();
    let theirs_only: Vec<&PathBuf> = folders
        .iter()
        .filter(|f| accepted[f] && !our_folders.contains_key(*f))
        .collect();
    let ours_only = our_folders.keys().filter(|f| !accepted[f]).count();
    // The folders both list, in the catalog's order.
    let both: Vec<PathBuf> = ours
        .iter()
        .map(|b| {
            PathBuf::from(block_location(b))
                .parent()
                .expect("a folder")
                .to_path_buf()
        })
        .filter(|f| accepted[f])
        .collect();
    // What `to-prompt` lists and the catalog does not: a skill a model may not invoke, or a
    // folder the index does not serve (its path is no skill id).
    for folder in &theirs_only {
        let id = folder
            .strip_prefix(&skills)
            .expect("under skills")
            .display()
            .to_string();
        if let Ok(row) = directory.read(ReadFunction::SkillsGet, &json!({ "id": id }), None) {
            assert_eq!(
                row["disable_model_invocation"], true,
                "{id}: to-prompt lists it, the catalog does not"
            );
        }
    }
    assert!(
        our_folders.contains_key(&skills.join("planted/unnamed")),
        "named by its folder"
    );
    assert!(theirs_only.contains(&&skills.join("planted/manual-only")));
    eprintln!(
        "catalog against to-prompt: {} folders, {} in both, {} only in the catalog (to-prompt refuses them), {} only in to-prompt (not for a model, or not served)",
        folders.len(),
        both.len(),
        ours_only,
        theirs_only.len()
    );

    // On the folders both list, in the catalog's order: the same text but for the locations.
    let reference: String = run_reference(&["prompts.mjs", "all"], &both);
    let ours_on_both: String = both.iter().map(|f| our_folders[f].as_str()).collect();
    let ours_on_both = format!("<available_skills>\n{ours_on_both}</available_skills>");
    let (ours_text, theirs_text) = (
        without_locations(&ours_on_both),
        without_locations(&reference),
    );
    if ours_text != theirs_text {
        let ours_blocks = skill_blocks(&ours_text);
        let theirs_blocks = skill_blocks(&theirs_text);
        let differing: Vec<String> = ours_blocks
            .iter()
            .zip(&theirs_blocks)
            .filter(|(a, b)| a != b)
            .take(5)
            .map(|(a, b)| format!("ours:\n{a}theirs:\n{b}"))
            .collect();
        panic!(
            "the catalog differs from to-prompt ({} blocks against {}):\n{}",
            ours_blocks.len(),
            theirs_blocks.len(),
            differing.join("\n")
        );
    }
    // And an empty catalog is `to-prompt` of no folder.
    let empty = common::Tree::new().open();
    let none = common::call(&empty, ReadFunction::SkillsCatalog, json!({}));
    let reference: String = run_reference(&["prompts.mjs", "all"], &[]);
    assert_eq!(none["body"], reference);
}
