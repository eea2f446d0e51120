//! The skills functions over the shared corpus of real skills (`../shared/corpus`), copied into
//! temporary trees (the corpus itself is never written). Expected ids are computed here from the
//! corpus files with the contract's rules, independently of the library.

use test_support::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use common::{Tree, call, copy_dir, corpus, skill_ids};
use iii_directory::doc::ids::{IdError, SegmentError};
use iii_directory::{Directory, ReadFunction, SkipReason};
use serde_json::{Value, json};

const MAX_FILE_BYTES: u64 = 262_144;

/// On-disk ids of the bundled `iii-directory/*` skills.
const BUNDLED: [&str; 4] = [
    "iii-directory/agent-profiles",
    "iii-directory/authoring-skills",
    "iii-directory/finding-functions",
    "iii-directory/index",
];

/// How many community folders the namespaced test takes (sorted by name).
const COMMUNITY_SAMPLE: usize = 300;

/// A community folder outside the sample whose frontmatter is not valid YAML.
const INVALID_YAML_FOLDER: &str = "laravel-verification-3";

fn valid_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment.len() <= 64
        && segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn valid_id(id: &str) -> bool {
    id.len() <= 1024 && id.split('/').all(valid_segment)
}

/// Sorted sub-folder names of a folder.
fn folders(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_type().expect("type").is_dir())
        .map(|e| e.file_name().into_string().expect("utf-8 name"))
        .collect();
    names.sort();
    names
}

/// Every `.md` file under a folder, as `/`-separated paths relative to it.
fn markdown_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = pending.pop() {
        for entry in fs::read_dir(&path).expect("read_dir") {
            let entry = entry.expect("entry");
            let name = entry.file_name().into_string().expect("utf-8 name");
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if entry.file_type().expect("type").is_dir() {
                pending.push((entry.path(), child));
            } else if name.len() > 3 && name.ends_with(".md") {
                found.push(child);
            }
        }
    }
    found.sort();
    found
}

/// The body of a file after its frontmatter block, following the contract's split (spec 2.4).
fn body_of(text: &str) -> &str {
    let Some(start) = ["---\n", "---\r\n"]
        .iter()
        .find(|o| text.starts_with(**o))
        .map(|o| o.len())
    else {
        return text;
    };
    let mut from = start - 1;
    while let Some(found) = text[from..].find("\n---") {
        let after = from + found + 4;
        let rest = &text[after..];
        if rest.starts_with('\n') {
            return &text[after + 1..];
        }
        if rest.starts_with("\r\n") {
            return &text[after + 2..];
        }
        if rest.is_empty() || rest == "\r" {
            return "";
        }
        from = after - 3;
    }
    text
}

/// Checks `get` for one listed id: it serves the file, or fails only with the read path's error
/// for a file that really is too large, empty after its frontmatter, or not UTF-8.
fn check_get(directory: &Directory, display_id: &str, file: &Path) {
    let bytes = fs::read(file).expect("read corpus copy");
    match directory.read(
        ReadFunction::SkillsGet,
        &json!({ "id": display_id, "raw": true }),
        None,
    ) {
        Ok(answer) => {
            assert_eq!(answer["id"], display_id);
            assert_eq!(answer["path"], file.display().to_string(), "{display_id}");
            let text = String::from_utf8(bytes).expect("served files are UTF-8");
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            assert_eq!(answer["raw"], text, "{display_id}");
            assert_eq!(answer["body"], body_of(text), "{display_id}");
        }
        Err(e) => {
            let e = e.to_string();
            let path = file.display();
            if e.starts_with(&format!("file {path} is too large (")) {
                assert!(bytes.len() as u64 > MAX_FILE_BYTES, "{e}");
            } else if e == format!("file {path} has empty body") {
                let text = String::from_utf8(bytes).expect("utf-8");
                assert!(body_of(&text).trim_matches('\n').is_empty(), "{e}");
            } else if e == format!("file {path} is not UTF-8 text") {
                assert!(String::from_utf8(bytes).is_err(), "{e}");
            } else {
                panic!("get {display_id} failed with a non read-path error: {e}");
            }
        }
    }
}

fn list_rows(directory: &Directory) -> Vec<Value> {
    call(directory, ReadFunction::SkillsList, json!({}))["skills"]
        .as_array()
        .expect("skills")
        .clone()
}

/// The ids callers see, in on-disk id order: `<ns>/index` shown as `<ns>` unless `<ns>` is an id.
fn display_ids(on_disk: &BTreeSet<String>) -> Vec<String> {
    on_disk
        .iter()
        .map(|id| match id.strip_suffix("/index") {
            Some(bare) if !on_disk.contains(bare) => bare.to_string(),
            _ => id.clone(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// (a) community skills as the read-only agents skills root
// ---------------------------------------------------------------------------------------------

#[test]
fn community_skills_served_from_the_agents_skills_root() {
    let Some(corpus) = corpus() else { return };
    let source = corpus.join("community-skills");
    let tree = Tree::new();
    copy_dir(&source, &tree.path(".agents/skills"));
    let d = tree.open();

    // Expected: each folder with a SKILL.md file and a valid name is `<dir>/index`.
    let mut on_disk: BTreeSet<String> = BTreeSet::new();
    let mut invalid = BTreeSet::new();
    let skill_dirs: Vec<String> = folders(&source)
        .into_iter()
        .filter(|d| source.join(d).join("SKILL.md").is_file())
        .collect();
    assert!(
        skill_dirs.len() >= 2_000,
        "{} skill folders",
        skill_dirs.len()
    );
    for dir in &skill_dirs {
        if valid_segment(dir) {
            on_disk.insert(format!("{dir}/index"));
        } else {
            invalid.insert(dir.clone());
        }
    }
    let bundled_served = !on_disk.contains("iii-directory/index");
    if bundled_served {
        on_disk.extend(BUNDLED.iter().map(|s| s.to_string()));
    }
    let expected = display_ids(&on_disk);
    assert_eq!(skill_ids(&d), expected);

    // No support file is a skill: every id is a folder name, bar the bundled ones.
    for id in &expected {
        assert!(
            !id.contains('/') || id.starts_with("iii-directory/"),
            "support file listed: {id}"
        );
    }

    // Nothing is skipped but folders with invalid names, each with a reason; files whose
    // frontmatter is not YAML are served, and listed with that problem.
    for s in d.skipped().expect("skipped") {
        assert_eq!(s.root, "agents_skills_folder", "{s:?}");
        if let Some(problem) = frontmatter_problem(Path::new(&s.path)) {
            assert_eq!(s.reason, problem);
            continue;
        }
        assert!(matches!(s.reason, SkipReason::InvalidId { .. }), "{s:?}");
        let dir = Path::new(&s.path)
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .expect("folder")
            .to_string();
        assert!(invalid.contains(&dir), "{s:?}");
    }

    // list rows carry the file size; get serves every listed id.
    let rows = list_rows(&d);
    assert_eq!(rows.len(), expected.len());
    for row in rows {
        let id = row["id"].as_str().expect("id");
        if bundled_served && (id == "iii-directory" || id.starts_with("iii-directory/")) {
            continue;
        }
        let file = tree.path(&format!(".agents/skills/{id}/SKILL.md"));
        assert_eq!(
            row["bytes"],
            fs::metadata(&file).expect("stat").len(),
            "{id}"
        );
        check_get(&d, id, &file);
    }

    // Agents skills stay out of the per-worker index: only the bundled overview is there.
    let index = call(&d, ReadFunction::SkillsIndex, json!({}));
    assert_eq!(index["workers_count"], 1);
    assert!(
        index["body"]
            .as_str()
            .expect("body")
            .starts_with("# Skills index\n\n1 worker(s).\n\n## iii-directory\n"),
        "{}",
        index["body"]
    );
}

// ---------------------------------------------------------------------------------------------
// (b) anthropic skills and a community sample as namespaces of the skills root
// ---------------------------------------------------------------------------------------------

/// What a file under the skills root is expected to become.
enum Expect {
    Skill(String),
    Skipped(Skip),
    /// A system prompt (not a skill; not checked here).
    Prompt,
}

/// Why a file is expected to be skipped.
enum Skip {
    /// A `prompts` or `agents` segment.
    Segment,
    InvalidId(String),
    Duplicate {
        id: String,
        first: String,
    },
}

impl Skip {
    fn matches(&self, reason: &SkipReason) -> bool {
        match (self, reason) {
            (Skip::Segment, SkipReason::PromptsSegment | SkipReason::AgentsSegment) => true,
            (Skip::InvalidId(want), SkipReason::InvalidId { id, .. }) => id == want,
            (Skip::Duplicate { id, first }, SkipReason::DuplicateId { id: got, first: by }) => {
                id == got && first == by
            }
            _ => false,
        }
    }
}

fn expectations(rels: &[String]) -> BTreeMap<String, Expect> {
    let mut out = BTreeMap::new();
    let mut first_by_id: BTreeMap<String, String> = BTreeMap::new();
    for rel in rels {
        let comps: Vec<&str> = rel.split('/').collect();
        let expect = if comps.contains(&"system-prompts") {
            Expect::Prompt
        } else if comps.contains(&"prompts") || comps.contains(&"agents") {
            Expect::Skipped(Skip::Segment)
        } else {
            let (folder, file) = rel.rsplit_once('/').expect("namespaced");
            let stem = if file == "SKILL.md" || file == "SKILLS.md" {
                "index"
            } else {
                file.strip_suffix(".md").expect("md")
            };
            let id = format!("{folder}/{stem}");
            if !valid_id(&id) {
                Expect::Skipped(Skip::InvalidId(id))
            } else if let Some(first) = first_by_id.get(&id) {
                Expect::Skipped(Skip::Duplicate {
                    id,
                    first: first.clone(),
                })
            } else {
                first_by_id.insert(id.clone(), rel.clone());
                Expect::Skill(id)
            }
        };
        out.insert(rel.clone(), expect);
    }
    out
}

#[test]
fn corpus_reshaped_into_namespaces_of_the_skills_root() {
    let Some(root) = corpus() else { return };
    let anthropic = root.join("anthropic-skills");
    let community = root.join("community-skills");

    // Each skill folder becomes a namespace; community folders named like an anthropic one are
    // left out so that two sources never merge into one namespace.
    let mut namespaces: Vec<(String, PathBuf)> = folders(&anthropic)
        .into_iter()
        .map(|n| (n.clone(), anthropic.join(n)))
        .collect();
    let taken: BTreeSet<String> = namespaces.iter().map(|(n, _)| n.clone()).collect();
    let mut sample: Vec<String> = folders(&community)
        .into_iter()
        .take(COMMUNITY_SAMPLE)
        .collect();
    sample.push(INVALID_YAML_FOLDER.to_string());
    for name in sample {
        if !taken.contains(&name) {
            namespaces.push((name.clone(), community.join(name)));
        }
    }
    assert!(namespaces.len() > 300, "{} namespaces", namespaces.len());

    let tree = Tree::new();
    let mut rels = Vec::new();
    for (ns, dir) in &namespaces {
        copy_dir(dir, &tree.path(&format!("skills/{ns}")));
        rels.extend(markdown_files(dir).into_iter().map(|r| format!("{ns}/{r}")));
    }
    rels.sort();
    let d = tree.open();

    let expected = expectations(&rels);
    let mut on_disk: BTreeMap<String, String> = expected
        .iter()
        .filter_map(|(rel, e)| match e {
            Expect::Skill(id) => Some((id.clone(), format!("skills/{rel}"))),
            _ => None,
        })
        .collect();
    for id in BUNDLED {
        on_disk.insert(id.to_string(), String::new());
    }
    let ids: BTreeSet<String> = on_disk.keys().cloned().collect();
    let displays = display_ids(&ids);
    assert_eq!(skill_ids(&d), displays);

    // Every skipped file is expected to be, with its reason.
    let skipped: BTreeMap<String, SkipReason> = d
        .skipped()
        .expect("skipped")
        .into_iter()
        .map(|s| (s.path, s.reason))
        .collect();
    let mut expected_skips = 0;
    for (rel, e) in &expected {
        let path = tree.path(&format!("skills/{rel}")).display().to_string();
        match e {
            Expect::Skipped(skip) => {
                expected_skips += 1;
                let got = skipped
                    .get(&path)
                    .unwrap_or_else(|| panic!("{rel} is not skipped"));
                assert!(skip.matches(got), "{rel}: {got}");
            }
            Expect::Skill(_) => assert_eq!(
                skipped.get(&path),
                frontmatter_problem(Path::new(&path)).as_ref(),
                "{rel}"
            ),
            Expect::Prompt => {}
        }
    }
    assert!(expected_skips > 0, "the sample should hold skipped files");
    let readme = tree.path("skills/claude-api/csharp/claude-api/README.md");
    let id = "claude-api/csharp/claude-api/README";
    assert_eq!(
        skipped.get(&readme.display().to_string()),
        Some(&SkipReason::InvalidId {
            id: id.into(),
            problem: IdError::Segment {
                id: id.into(),
                position: 4,
                problem: SegmentError::Characters("README".into())
            }
        })
    );
    let agent = tree.path("skills/skill-creator/agents/grader.md");
    assert_eq!(
        skipped[&agent.display().to_string()],
        SkipReason::AgentsSegment
    );

    // get serves every listed id from its file.
    for (id, display) in ids.iter().zip(&displays) {
        let rel = &on_disk[id];
        if rel.is_empty() {
            continue;
        }
        check_get(&d, display, &tree.path(rel));
    }

    // Known files, read by hand.
    let rows = list_rows(&d);
    let row = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no row {id}"))
            .clone()
    };
    let size = |rel: &str| fs::metadata(tree.path(rel)).expect("stat").len();
    // Frontmatter `name` and `description`, no `title`: the name beats the body's H1.
    let pdf = row("pdf");
    assert_eq!(
        (
            &pdf["title"],
            &pdf["type"],
            &pdf["function_id"],
            &pdf["bytes"]
        ),
        (
            &json!("pdf"),
            &Value::Null,
            &Value::Null,
            &json!(size("skills/pdf/SKILL.md"))
        )
    );
    assert_eq!(
        pdf["description"],
        "Use this skill whenever the user wants to do anything with PDF files. This includes reading or extracting text/tables from PDFs, combining or merging multiple PDFs into one, splitting PDFs apart, rotating pages, adding watermarks, creating new PDFs, filling PDF forms, encrypting/decrypting PDFs, extracting images, and OCR on scanned PDFs to make them searchable. If the user mentions a .pdf file or asks to produce one, use this skill."
    );
    // No frontmatter: the first H1 (after a paragraph) and the first paragraph, markup kept.
    let forms = row("pdf/forms");
    assert_eq!(forms["title"], "Fillable fields");
    assert_eq!(
        forms["description"],
        "**CRITICAL: You MUST complete these steps in order. Do not skip ahead to writing code.**"
    );
    // Frontmatter that is not valid YAML (an unquoted `: ` in the description): its
    // one-line `key: value` entries are read, so name and description survive.
    let laravel = row(INVALID_YAML_FOLDER);
    assert_eq!(laravel["title"], "laravel-verification");
    assert_eq!(
        laravel["description"],
        "Verification loop for Laravel projects: env checks, linting, static analysis, tests with coverage, security scans, and deployment readiness."
    );
    assert_eq!(laravel["type"], Value::Null);
    // A placeholder file holding only a path: no title anywhere, so the display id.
    let placeholder = row("a11y-audit");
    assert_eq!(placeholder["title"], "a11y-audit");
    assert_eq!(
        placeholder["description"],
        "../../../engineering-team/a11y-audit/skills/a11y-audit/SKILL.md"
    );

    // No corpus file is typed `index`: the per-worker index holds only the bundled overview.
    assert_eq!(
        call(&d, ReadFunction::SkillsIndex, json!({}))["workers_count"],
        1
    );
}

/// What `check` says of a served file whose frontmatter is not usable YAML, if it is so.
fn frontmatter_problem(path: &Path) -> Option<SkipReason> {
    let bytes = fs::read(path).ok()?;
    let text = iii_directory::doc::decode(&bytes).ok()?;
    SkipReason::of_frontmatter(&iii_directory::doc::ParsedDoc::parse(text).frontmatter)
}
