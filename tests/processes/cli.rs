//! The real `iii-directory` binary on real trees: `reindex`, `list`, `get`, `index`, `check`,
//! configuration errors, and living beside a process that holds the index as its writer.

use test_support::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use common::Tree;
use iii_directory::testing::beside;
use iii_directory::{Directory, IndexHolder, ReadFunction, WORKER_ROLE, write_index_holder};
use serde_json::{Value, json};

/// How recent a file's mtime or ctime must be for reconcile to read it again next time
/// (`index::reconcile::RACY_WINDOW`).
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The binary with `III_COMPOSE_DIR` pointing at the tree, run from an unrelated folder so
/// that nothing resolves against the current directory by accident.
pub(crate) fn iii(tree: &Tree) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_iii-directory"));
    command
        .env("III_COMPOSE_DIR", tree.base())
        .env_remove("RUST_LOG")
        .current_dir(std::env::temp_dir());
    command
}

/// `list skills --json` started in the background, its output kept for `wait_with_output`.
fn spawn_list_skills(tree: &Tree) -> std::process::Child {
    iii(tree)
        .args(["list", "skills", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn")
}

fn run(tree: &Tree, args: &[&str]) -> Output {
    iii(tree).args(args).output().expect("run iii-directory")
}

/// `run` from another current directory.
fn run_in(tree: &Tree, dir: &Path, args: &[&str]) -> Output {
    iii(tree)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run iii-directory")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a command that must succeed and returns its stdout.
fn ok(tree: &Tree, args: &[&str]) -> String {
    let output = run(tree, args);
    assert!(
        output.status.success(),
        "iii-directory {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Runs a command that must succeed and print JSON.
fn ok_json(tree: &Tree, args: &[&str]) -> Value {
    let stdout = ok(tree, args);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("iii-directory {args:?} printed invalid JSON ({e}): {stdout}"))
}

/// Runs a command that must fail and returns its stderr.
fn fails(tree: &Tree, args: &[&str]) -> String {
    let output = run(tree, args);
    assert!(
        !output.status.success(),
        "iii-directory {args:?} should fail:\nstdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stderr)
}

const SKIPPED_FILES: usize = 3;
/// Agent profiles it serves with a problem, which `check` lists after those files: `captain`
/// names a skill, `nope`, that nothing serves.
const PROFILE_PROBLEMS: usize = 1;

/// A tree with skills in every root, prompts, agents, and `SKIPPED_FILES` files not served.
pub(crate) fn sample_tree() -> Tree {
    let tree = Tree::new();
    tree.write(
        "skills/mailer/index.md",
        "---\ntitle: Mailer\ntype: index\ndescription: Sends email.\n---\n# Mailer\n\nSends email.\n",
    )
    .write(
        "skills/mailer/send-email.md",
        "---\ntype: how-to\n---\n# Send an email\n\nCall mailer::send.\n",
    )
    .write("skills/queue/SKILL.md", "# Queue\n\nQueues work.\n")
    .write("skills/iii/local-ns/index.md", "# Local\n\nA local override.\n")
    .write(
        ".agents/skills/helper/SKILL.md",
        "---\nname: Helper\ndescription: Helps.\n---\nHelper body.\n",
    )
    .write(
        "skills/system-prompts/reviewer.md",
        "---\ndescription: Reviews code.\n---\nYou review code.\n",
    )
    .write(
        "agents/captain.md",
        "---\nname: Captain\ndescription: Ships releases.\nextends: iii\nskills: [mailer, nope]\n---\nYou ship releases.\n",
    )
    // Not served: an invalid id, a prompt without frontmatter, an agent without a name.
    .write("skills/mailer/Bad-Name.md", "invalid id\n")
    .write("skills/system-prompts/broken.md", "no frontmatter\n")
    .write("agents/nameless.md", "---\ndescription: no name\n---\nbody\n");
    tree
}

/// Files the walk counts in the sample tree: the local override under `skills/iii/` counts
/// twice, as it sits in both the global and the local root (spec 2.6).
const SAMPLE_FILES: usize = 11;
/// Distinct contents among them.
const SAMPLE_CONTENTS: usize = 10;

/// Sets every file's mtime 10 s in the past (its ctime stays recent).
fn backdate(dir: &Path) {
    for entry in fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            backdate(&path);
        } else {
            let past = SystemTime::now() - Duration::from_secs(10);
            fs::File::options()
                .write(true)
                .open(&path)
                .expect("open")
                .set_modified(past)
                .expect("set_modified");
        }
    }
}

fn number(summary: &Value, key: &str) -> u64 {
    summary[key]
        .as_u64()
        .unwrap_or_else(|| panic!("summary field {key} is not a number: {summary}"))
}

/// Parses the human summary: `indexed N files in T ms: R read, P parsed, D removed, S skipped`.
fn human_counts(stdout: &str) -> [u64; 5] {
    let line = stdout.lines().next().expect("a summary line");
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .filter(|w| !w.is_empty())
        .collect();
    let before = |word: &str| -> u64 {
        let at = words
            .iter()
            .position(|w| *w == word)
            .unwrap_or_else(|| panic!("no {word:?} in {line:?}"));
        words[at - 1]
            .parse()
            .unwrap_or_else(|_| panic!("no count before {word:?} in {line:?}"))
    };
    [
        before("files"),
        before("read"),
        before("parsed"),
        before("removed"),
        before("skipped"),
    ]
}

#[test]
fn reindex_summarizes_and_then_reads_only_what_is_recent() {
    let tree = sample_tree();
    let backdating = Instant::now();
    backdate(tree.base());
    let backdated = Instant::now();

    let first = ok(&tree, &["reindex"]);
    assert!(first.starts_with("indexed "), "{first}");
    assert_eq!(
        human_counts(&first),
        [
            SAMPLE_FILES as u64,
            SAMPLE_FILES as u64,
            SAMPLE_CONTENTS as u64,
            0,
            SKIPPED_FILES as u64
        ],
        "{first}"
    );
    assert!(first.contains("revision 1"), "{first}");
    let index_path = tree.config().paths.index_path;
    assert!(
        first.contains(&format!("index: {}", index_path.display())),
        "{first}"
    );
    assert!(index_path.is_file());

    // The mtimes are old, but setting them made every ctime recent: within the racy window
    // the files are read again (nothing parsed: their contents are known), and nothing changed.
    let second = ok_json(&tree, &["reindex", "--json"]);
    // Whether that reindex surely scanned within the window of every ctime (on a slow machine
    // it may not have, and then it read nothing).
    let second_was_racy = backdating.elapsed() < RACY_WINDOW - Duration::from_millis(100);
    for key in [
        "files",
        "read",
        "parsed",
        "removed",
        "skipped",
        "revision",
        "duration_ms",
    ] {
        number(&second, key);
    }
    assert_eq!(number(&second, "files"), SAMPLE_FILES as u64);
    assert_eq!(number(&second, "parsed"), 0);
    assert_eq!(number(&second, "removed"), 0);
    assert_eq!(number(&second, "skipped"), SKIPPED_FILES as u64);
    assert_eq!(number(&second, "revision"), 1);
    assert_eq!(second["changed"], false);
    if second_was_racy {
        assert_eq!(number(&second, "read"), SAMPLE_FILES as u64, "{second}");
    }

    // Past the window, the files are read once more (they were recent when last read), and
    // from then on not at all.
    std::thread::sleep(
        (RACY_WINDOW + Duration::from_millis(200)).saturating_sub(backdated.elapsed()),
    );
    let third = ok_json(&tree, &["reindex", "--json"]);
    if second_was_racy {
        assert_eq!(number(&third, "read"), SAMPLE_FILES as u64, "{third}");
    }
    assert_eq!(number(&third, "parsed"), 0, "{third}");
    assert_eq!(third["changed"], false);
    let fourth = ok(&tree, &["reindex"]);
    let [files, read, parsed, removed, _] = human_counts(&fourth);
    assert_eq!(
        [files, read, parsed, removed],
        [SAMPLE_FILES as u64, 0, 0, 0],
        "{fourth}"
    );
    assert!(fourth.contains("(nothing changed)"), "{fourth}");
    assert!(fourth.contains("revision 1"), "{fourth}");

    // A change is read and bumps the revision.
    tree.write("skills/queue/SKILL.md", "# Queue v2\n\nQueues more work.\n");
    let fifth = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(number(&fifth, "read"), 1, "{fifth}");
    assert_eq!(number(&fifth, "parsed"), 1, "{fifth}");
    assert_eq!(fifth["changed"], true);
    assert_eq!(number(&fifth, "revision"), 2);
}

/// Once nothing is recent, a reindex reads nothing; its summary must still count the files that
/// are not served.
#[test]
fn reindex_with_nothing_to_read_still_counts_skipped_files() {
    let tree = sample_tree();
    backdate(tree.base());
    let backdated = Instant::now();
    ok(&tree, &["reindex"]);
    std::thread::sleep(
        (RACY_WINDOW + Duration::from_millis(200)).saturating_sub(backdated.elapsed()),
    );
    ok(&tree, &["reindex"]);
    let quiet = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(number(&quiet, "read"), 0, "{quiet}");
    let check = ok_json(&tree, &["check", "--json"]);
    assert_eq!(
        check.as_array().expect("array").len(),
        SKIPPED_FILES + PROFILE_PROBLEMS
    );
    assert_eq!(number(&quiet, "skipped"), SKIPPED_FILES as u64, "{quiet}");
}

#[test]
fn reindex_from_scratch_rebuilds_the_index() {
    let tree = sample_tree();
    ok(&tree, &["reindex"]);
    tree.write("skills/queue/SKILL.md", "# Queue v2\n\nQueues more work.\n");
    ok(&tree, &["reindex"]);
    let rebuilt = ok_json(&tree, &["reindex", "--from-scratch", "--json"]);
    assert_eq!(number(&rebuilt, "files"), SAMPLE_FILES as u64, "{rebuilt}");
    assert_eq!(number(&rebuilt, "read"), SAMPLE_FILES as u64, "{rebuilt}");
    assert_eq!(
        number(&rebuilt, "parsed"),
        SAMPLE_CONTENTS as u64,
        "{rebuilt}"
    );
    assert_eq!(number(&rebuilt, "removed"), 0, "{rebuilt}");
    assert_eq!(
        number(&rebuilt, "skipped"),
        SKIPPED_FILES as u64,
        "{rebuilt}"
    );
    assert_eq!(
        number(&rebuilt, "revision"),
        1,
        "a new index starts over: {rebuilt}"
    );
    assert_eq!(rebuilt["changed"], true);

    // Also over an index file that is not an index at all.
    fs::write(tree.config().paths.index_path, "garbage").expect("write");
    let rebuilt = ok_json(&tree, &["reindex", "--from-scratch", "--json"]);
    assert_eq!(number(&rebuilt, "read"), SAMPLE_FILES as u64, "{rebuilt}");
    let list = ok_json(&tree, &["list", "skills", "--json"]);
    let directory = tree.open();
    assert_eq!(
        list,
        common::call(&directory, ReadFunction::SkillsList, json!({}))
    );
}

/// Every `--json` read prints exactly what the library answers.
#[test]
fn json_output_is_the_library_answer() {
    let tree = sample_tree();
    let cases: Vec<(Vec<&str>, ReadFunction, Value)> = vec![
        (vec!["list", "skills"], ReadFunction::SkillsList, json!({})),
        (
            vec!["list", "skills", "--prefix", "mailer/"],
            ReadFunction::SkillsList,
            json!({ "prefix": "mailer/" }),
        ),
        (
            vec!["list", "skills", "--search", "QUEUE"],
            ReadFunction::SkillsList,
            json!({ "search": "QUEUE" }),
        ),
        (
            vec!["list", "skills", "--type", "how-to"],
            ReadFunction::SkillsList,
            json!({ "type": "how-to" }),
        ),
        (
            vec!["list", "system-prompts"],
            ReadFunction::SystemPromptsList,
            json!({}),
        ),
        (vec!["list", "agents"], ReadFunction::AgentsList, json!({})),
        (
            vec!["get", "skill", "mailer"],
            ReadFunction::SkillsGet,
            json!({ "id": "mailer" }),
        ),
        (
            vec!["get", "skill", "iii://mailer/send-email.md", "--raw"],
            ReadFunction::SkillsGet,
            json!({ "id": "iii://mailer/send-email.md", "raw": true }),
        ),
        (
            vec!["get", "skill", "helper"],
            ReadFunction::SkillsGet,
            json!({ "id": "helper" }),
        ),
        (
            vec!["get", "system-prompt", "reviewer", "--raw"],
            ReadFunction::SystemPromptsGet,
            json!({ "name": "reviewer", "raw": true }),
        ),
        (
            vec!["get", "system-prompt", "iii-minimal"],
            ReadFunction::SystemPromptsGet,
            json!({ "name": "iii-minimal" }),
        ),
        (
            vec!["get", "agent", "iii"],
            ReadFunction::AgentsGet,
            json!({ "id": "iii" }),
        ),
        (
            vec!["get", "agent", "captain", "--raw"],
            ReadFunction::AgentsGet,
            json!({ "id": "captain", "raw": true }),
        ),
        (vec!["index"], ReadFunction::SkillsIndex, json!({})),
    ];
    // The binary first (it is the index's writer and brings it up to date), then the library.
    let printed: Vec<Value> = cases
        .iter()
        .map(|(args, _, _)| {
            let mut args = args.clone();
            args.push("--json");
            ok_json(&tree, &args)
        })
        .collect();
    let directory = tree.open();
    for ((args, function, request), printed) in cases.iter().zip(printed) {
        let answer = common::call(&directory, *function, request.clone());
        assert_eq!(printed, answer, "iii-directory {args:?} --json");
    }
    let ids = common::skill_ids(&directory);
    for id in [
        "mailer",
        "mailer/send-email",
        "queue",
        "local-ns",
        "helper",
        "iii/local-ns",
    ] {
        assert!(ids.contains(&id.to_string()), "{id} in {ids:?}");
    }
}

#[test]
fn human_output_names_what_it_lists() {
    let tree = sample_tree();
    let skills = ok(&tree, &["list", "skills"]);
    for id in [
        "mailer",
        "mailer/send-email",
        "queue",
        "local-ns",
        "helper",
        "iii-directory",
    ] {
        assert!(
            skills.lines().any(|l| l.starts_with(id)),
            "{id} in:\n{skills}"
        );
    }
    assert!(skills.contains("how-to"), "{skills}");
    let prefixed = ok(&tree, &["list", "skills", "--prefix", "mailer/"]);
    assert!(prefixed.contains("mailer/send-email"), "{prefixed}");
    assert!(!prefixed.contains("queue"), "{prefixed}");
    let prompts = ok(&tree, &["list", "system-prompts"]);
    for name in ["reviewer", "iii-minimal"] {
        assert!(prompts.contains(name), "{name} in:\n{prompts}");
    }
    let agents = ok(&tree, &["list", "agents"]);
    for id in ["captain", "iii", "iii-minimal"] {
        assert!(
            agents.lines().any(|l| l.starts_with(id)),
            "{id} in:\n{agents}"
        );
    }
    let skill = ok(&tree, &["get", "skill", "mailer/send-email"]);
    assert!(skill.contains("Send an email"), "{skill}");
    assert!(skill.contains("Call mailer::send."), "{skill}");
    let path = tree.path("skills/mailer/send-email.md");
    assert!(skill.contains(&path.display().to_string()), "{skill}");
    let raw = ok(&tree, &["get", "skill", "mailer/send-email", "--raw"]);
    assert_eq!(
        raw,
        "---\ntype: how-to\n---\n# Send an email\n\nCall mailer::send.\n"
    );
    let agent = ok(&tree, &["get", "agent", "captain"]);
    assert!(agent.contains("Captain (captain)"), "{agent}");
    assert!(agent.contains("You ship releases."), "{agent}");
    // What `--json` says in `unknown_skills` is said here too.
    assert!(
        agent.contains("skills it names that are not served: nope"),
        "{agent}"
    );
    // An inheritance error names its next step as a command, as every other error does.
    tree.write(
        "agents/orphan.md",
        "---\nname: Orphan\ndescription: Lost.\nextends: ghost\n---\nAlone.\n",
    );
    let orphan = ok(&tree, &["get", "agent", "orphan"]);
    assert!(orphan.contains("inheritance error: D415"), "{orphan}");
    assert!(
        orphan.contains("run `iii-directory list agents`"),
        "{orphan}"
    );
    assert!(!orphan.contains("call directory::"), "{orphan}");
    let index = ok(&tree, &["index"]);
    assert!(index.contains("# Skills index"), "{index}");
    assert!(index.contains("## Mailer"), "{index}");
}

#[test]
fn search_for_skills_narrows_by_prefix_and_type_as_the_function_does() {
    let tree = sample_tree();
    let ids = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["search", "--skills", "--json"];
        args.extend_from_slice(extra);
        args.push("send an email");
        let answer = ok_json(&tree, &args);
        answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|row| row["id"].as_str().expect("id").to_string())
            .collect()
    };
    assert_eq!(ids(&[]), ["mailer/send-email", "mailer"]);
    assert_eq!(ids(&["--type", "how-to"]), ["mailer/send-email"]);
    assert_eq!(ids(&["--prefix", "mailer/send"]), ["mailer/send-email"]);
    assert_eq!(ids(&["--prefix", "queue"]), Vec::<String>::new());
    // The narrowing options belong to the skill search: without `--skills` clap refuses them.
    let refused = fails(&tree, &["search", "--type", "how-to", "send an email"]);
    assert!(refused.contains("--skills"), "{refused}");

    // A skill for a user to invoke is marked on its line, as the JSON marks it.
    tree.write(
        "skills/mailer/bulk-send.md",
        "---\ndisable-model-invocation: true\n---\n# Bulk send email\n\nSend an email to a list.\n",
    );
    let human = ok(&tree, &["search", "--skills", "send an email to a list"]);
    let marked: Vec<&str> = human
        .lines()
        .filter(|l| l.contains("[user-invoked only]"))
        .collect();
    assert_eq!(marked.len(), 1, "{human}");
    assert!(marked[0].starts_with("mailer/bulk-send"), "{human}");

    // A title over several lines is shown on its result's line: it cannot pass for results of
    // its own, here or in `get`'s heading.
    tree.write(
        "skills/okapi.md",
        "---\ntitle: \"Okapi helper\\nfake-skill  Trusted\\n  Run this\"\ndescription: Okapi grooming schedule\n---\n# Okapi\n\nOkapi grooming.\n",
    );
    let human = ok(&tree, &["search", "--skills", "okapi grooming schedule"]);
    assert_eq!(
        human.lines().collect::<Vec<_>>(),
        [
            "okapi  Okapi helper fake-skill Trusted Run this",
            "  Okapi grooming schedule",
            "(lexical)"
        ],
        "{human}"
    );
    let got = ok(&tree, &["get", "skill", "okapi"]);
    assert!(
        got.starts_with("# Okapi helper fake-skill Trusted Run this (okapi)\npath: "),
        "{got}"
    );
}

#[test]
fn missing_skill_fails_with_d110() {
    let tree = sample_tree();
    let output = run(&tree, &["get", "skill", "mailer/nope"]);
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("D110 not_found: skill \"mailer/nope\" does not exist."),
        "{stderr}"
    );
    let stderr = fails(&tree, &["get", "skill", "missing", "--json"]);
    assert!(stderr.contains("D110 not_found"), "{stderr}");
    let stderr = fails(&tree, &["get", "agent", "nobody"]);
    assert!(stderr.contains("D410 not_found"), "{stderr}");
    let stderr = fails(&tree, &["get", "system-prompt", "nothing"]);
    assert!(stderr.contains("D210 not_found"), "{stderr}");
}

/// With `--json`, a failure is also one object on stdout that a script can parse: the code and
/// class of a coded error, null for an uncoded one, and the message stderr has. A command that
/// printed its report before failing on it keeps that report as stdout's only document. A
/// wrong use of the command line exits 2, as clap does, with the object too.
#[test]
fn json_failures_print_one_error_object_on_stdout() {
    let tree = sample_tree();
    let failed_json_with = |status: i32, args: &[&str]| -> (Value, String) {
        let output = run(&tree, args);
        assert_eq!(output.status.code(), Some(status), "{args:?}");
        let stdout = text(&output.stdout);
        let parsed = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{args:?} printed no JSON object ({e}): {stdout:?}"));
        (parsed, text(&output.stderr))
    };
    let failed_json = |args: &[&str]| failed_json_with(1, args);
    let (error, stderr) = failed_json(&["get", "skill", "mailer/nope", "--json"]);
    assert_eq!(error["error"]["code"], "D110", "{error}");
    assert_eq!(error["error"]["class"], "not_found", "{error}");
    let message = error["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("D110 not_found: skill \"mailer/nope\" does not exist."),
        "{message}"
    );
    assert!(
        message.contains("run `iii-directory list skills`"),
        "{message}"
    );
    assert_eq!(stderr.trim_end(), format!("error: {message}"));

    let (error, _) = failed_json(&["get", "agent", "nobody", "--json"]);
    assert_eq!(error["error"]["code"], "D410", "{error}");

    let (error, _) = failed_json(&[
        "--config",
        "/nonexistent/iii.yaml",
        "list",
        "skills",
        "--json",
    ]);
    assert_eq!(error["error"]["code"], Value::Null, "{error}");
    assert_eq!(error["error"]["class"], Value::Null, "{error}");
    let message = error["error"]["message"].as_str().expect("message");
    assert!(message.contains("/nonexistent/iii.yaml"), "{message}");

    for (usage, says) in [
        (&["catalog", "--limit", "0", "--json"][..], "1 or more"),
        (
            &["list", "agents", "--prefix", "x", "--json"],
            "filter skills only",
        ),
        // The reason's whole paragraph, the missing argument on its second line included.
        (&["get", "skill", "--json"], "not provided: <ID>"),
    ] {
        let (error, stderr) = failed_json_with(2, usage);
        assert_eq!(error["error"]["code"], Value::Null, "{error}");
        let message = error["error"]["message"].as_str().expect("message");
        assert!(message.contains(says), "{usage:?}: {message}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains("--help"), "{stderr}");
    }
    let output = run(&tree, &["catalog", "--limit", "0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));

    // A bundle whose file differs from the lock: `verify --json` prints its report, then fails.
    tree.write("skills/demo/SKILL.md", "# Demo, edited here\n");
    let lock = json!({"schema": 1, "bundles": {"demo": {
        "namespace": "demo",
        "source": {"kind": "registry", "worker": "demo", "tag": "latest", "version": "1.0.0",
                   "digest": "sha256:00"},
        "files": [{"path": "demo/SKILL.md", "route": "skills", "size": 7,
                   "sha256": iii_directory::download::lock::sha256_hex(b"# Demo\n")}],
        "landed_at": "2026-12-02T10:41:07Z",
    }}});
    tree.write(
        "skills/iii-bundles.lock.json",
        &serde_json::to_string_pretty(&lock).expect("lock"),
    );
    let (report, _) = failed_json(&["bundles", "verify", "--json"]);
    assert!(report.get("error").is_none(), "{report}");
    assert_eq!(report["bundles"][0]["namespace"], "demo", "{report}");
}

#[test]
fn check_lists_skipped_files_with_reasons() {
    let tree = sample_tree();
    let human = ok(&tree, &["check"]);
    let bad = tree.path("skills/mailer/Bad-Name.md").display().to_string();
    let line = human
        .lines()
        .find(|l| l.contains(&bad))
        .unwrap_or_else(|| panic!("{bad} in:\n{human}"));
    assert!(line.starts_with("skills_folder"), "{line}");
    assert!(line.contains("invalid id \"mailer/Bad-Name\""), "{line}");
    assert!(human.contains("agents_folder"), "{human}");

    let json = ok_json(&tree, &["check", "--json"]);
    let rows = json.as_array().expect("an array");
    assert_eq!(rows.len(), SKIPPED_FILES + PROFILE_PROBLEMS, "{json}");
    for row in rows {
        let keys: Vec<&String> = row.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["family", "id", "path", "reason", "root"], "{row}");
    }
    let bad_row = rows
        .iter()
        .find(|r| r["path"] == bad.as_str())
        .expect("Bad-Name row");
    assert_eq!(bad_row["root"], "skills_folder");
    // The family and id its path gives it, for a reader that shows the problem beside it.
    assert_eq!(bad_row["family"], "skills");
    assert_eq!(bad_row["id"], "mailer/Bad-Name");
    assert!(
        bad_row["reason"]
            .as_str()
            .expect("reason")
            .contains("invalid id")
    );
    // A profile served with a problem comes last, in the same shape.
    let captain = &rows[SKIPPED_FILES];
    assert_eq!(captain["root"], "agents_folder", "{captain}");
    assert_eq!(captain["family"], "agents", "{captain}");
    assert_eq!(captain["id"], "captain", "{captain}");
    assert_eq!(
        captain["path"],
        tree.path("agents/captain.md").display().to_string()
    );
    assert_eq!(
        captain["reason"],
        "its skills filter names skills nothing serves: nope"
    );
    let line = (human.lines())
        .find(|l| l.contains("captain.md"))
        .unwrap_or_else(|| panic!("captain in:\n{human}"));
    assert!(line.contains("nothing serves: nope"), "{line}");
    let directory = tree.open();
    let mut expected = serde_json::to_value(directory.skipped().expect("skipped")).expect("json");
    let problems = directory.profile_problems(None).expect("problems");
    (expected.as_array_mut().expect("array")).extend(
        problems
            .iter()
            .map(|p| serde_json::to_value(p).expect("json")),
    );
    assert_eq!(json, expected);

    // A tree with nothing skipped says so.
    let clean = Tree::new();
    clean.write("skills/a/index.md", "# A\n\nbody\n");
    assert_eq!(ok(&clean, &["check"]).trim(), "every file is served");
    assert_eq!(ok_json(&clean, &["check", "--json"]), json!([]));
}

/// `check --spec`: every served `SKILL.md` against the Agent Skills specification, one coded
/// rule per violation; a file the spec rejects is still served.
#[test]
fn check_spec_reports_each_rule_a_served_skill_breaks() {
    let tree = Tree::new();
    tree.write(
        "skills/pdf-tools/SKILL.md",
        "---\nname: pdf-tools\ndescription: Reads PDFs.\n---\n# PDF\n\nBody.\n",
    );
    tree.write(
        "skills/wrong-folder/SKILL.md",
        "---\nname: Other_Name\ndescription: Misnamed.\nversion: 2\n---\n# X\n\nBody.\n",
    );
    tree.write(
        "skills/long-body/SKILL.md",
        &format!(
            "---\nname: long-body\ndescription: Long.\n---\n# L\n\n{}",
            "line\n".repeat(600)
        ),
    );
    // Not a SKILL.md: the spec does not cover it.
    tree.write("skills/notes/index.md", "# Notes\n\nPlain.\n");
    tree.write(
        ".agents/skills/polish/SKILL.md",
        "---\nname: polish\n---\n# Polish\n\nBody.\n",
    );

    let json = ok_json(&tree, &["check", "--spec", "--json"]);
    assert_eq!(json["checked"], 4, "{json}");
    assert_eq!(json["valid"], 2, "{json}");
    let codes = |id: &str| -> Vec<String> {
        let file = json["files"]
            .as_array()
            .expect("files")
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {json}"));
        file["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .map(|p| p["code"].as_str().expect("code").to_owned())
            .collect()
    };
    assert_eq!(codes("wrong-folder"), ["S113", "S114", "S117", "S160"]);
    assert_eq!(codes("long-body"), ["S170"]);
    assert_eq!(codes("polish"), ["S120"]);
    let files = json["files"].as_array().expect("files");
    assert_eq!(files.len(), 3, "a valid file is not listed: {json}");
    let wrong = files
        .iter()
        .find(|f| f["id"] == "wrong-folder")
        .expect("row");
    assert_eq!(wrong["valid"], false);
    assert_eq!(wrong["root"], "skills_folder");
    assert_eq!(
        wrong["path"],
        tree.path("skills/wrong-folder/SKILL.md")
            .display()
            .to_string()
    );
    assert_eq!(wrong["problems"][0]["severity"], "error");
    let long = files.iter().find(|f| f["id"] == "long-body").expect("row");
    assert_eq!(long["valid"], true, "a warning leaves the file valid");
    assert_eq!(long["problems"][0]["severity"], "warning");

    let human = ok(&tree, &["check", "--spec"]);
    assert!(
        human.starts_with("4 SKILL.md files checked against the Agent Skills specification: 2 valid, 2 invalid, 1 with warnings"),
        "{human}"
    );
    assert!(
        human
            .lines()
            .any(|l| l.starts_with("wrong-folder") && l.contains("S117")),
        "{human}"
    );

    // The checks inform: the files the spec rejects are served all the same.
    let listed = ok_json(&tree, &["list", "skills", "--json"]);
    let ids: Vec<&str> = listed["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    for id in ["wrong-folder", "polish", "long-body", "pdf-tools"] {
        assert!(ids.contains(&id), "{id} served: {ids:?}");
    }
}

/// `check --spec` says which would-be `SKILL.md` files it could not check, or that the worker
/// serves otherwise than written, instead of counting them nowhere.
#[test]
fn check_spec_notes_the_skill_files_the_worker_does_not_serve_as_written() {
    let tree = Tree::new();
    // Not served: an id with capitals; an empty body.
    tree.write(
        "skills/My-Skill/SKILL.md",
        "---\nname: My-Skill\ndescription: Capitals.\n---\n# B\n",
    );
    tree.write(
        "skills/fm-only/SKILL.md",
        "---\nname: fm-only\ndescription: No body.\n---\n",
    );
    // Served as the ordinary skill `lower/skill`.
    tree.write(
        "skills/lower/skill.md",
        "---\nname: lower\ndescription: Lower case.\n---\n# B\n",
    );
    // Served, its frontmatter ignored: the hide flag is not applied.
    tree.write(
        "skills/hide-me/SKILL.md",
        "---\nname: hide-me\ndescription: Hidden.\ndisable-model-invocation: yes\n---\n# H\n\nRun it.\n",
    );
    tree.write(
        "skills/fine/SKILL.md",
        "---\nname: fine\ndescription: Fine.\n---\n# F\n\nBody.\n",
    );
    // Served from its one-line entries: a merge left its conflict markers in the block.
    tree.write(
        "skills/merged/SKILL.md",
        "---\nname: merged\n<<<<<<< HEAD\ndescription: Ours.\n=======\ndescription: Theirs.\n>>>>>>> x\n---\n# M\n\nBody.\n",
    );
    // Read by both `skills_folder` and the local folder inside it: noted once.
    tree.write(
        "skills/iii/local/SKILL.md",
        "---\nname: local\ndescription: Local.\ndisable-model-invocation: yes\n---\n# L\n\nBody.\n",
    );

    let json = ok_json(&tree, &["check", "--spec", "--json"]);
    let note = |file: &str| -> String {
        let path = tree.path(file).display().to_string();
        json["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .find(|n| n["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{file} in {json}"))["note"]
            .as_str()
            .expect("note")
            .to_string()
    };
    assert!(note("skills/My-Skill/SKILL.md").starts_with("not served, so not checked: "));
    assert!(
        note("skills/fm-only/SKILL.md")
            .starts_with("listed, but its text cannot be served, so not checked: empty body")
    );
    let merged = note("skills/merged/SKILL.md");
    assert!(
        merged.starts_with("served from the block's one-line") && merged.contains("conflict"),
        "{merged}"
    );
    let local = tree.path("skills/iii/local/SKILL.md").display().to_string();
    let local_notes = json["notes"].as_array().expect("notes").iter();
    assert_eq!(
        local_notes.filter(|n| n["path"] == local.as_str()).count(),
        1,
        "{json}"
    );
    assert!(
        note("skills/lower/skill.md").contains("ordinary skill `lower/skill`"),
        "{json}"
    );
    let hidden = note("skills/hide-me/SKILL.md");
    assert!(
        hidden.contains("ignored") && hidden.contains("disable-model-invocation"),
        "{hidden}"
    );
    assert_eq!(json["notes"].as_array().map(Vec::len), Some(6), "{json}");
    assert_eq!(json["checked"], 4, "{json}");

    let human = ok(&tree, &["check", "--spec"]);
    assert!(
        human.contains("6 SKILL.md files the worker does not serve as written:"),
        "{human}"
    );
}

#[test]
fn help_mentions_the_subcommands() {
    let tree = Tree::new();
    let help = ok(&tree, &["--help"]);
    for word in [
        "reindex",
        "list",
        "get",
        "index",
        "check",
        "--config",
        "III_COMPOSE_DIR",
    ] {
        assert!(help.contains(word), "{word} in:\n{help}");
    }
    let help = ok(&tree, &["list", "--help"]);
    for word in ["skills", "system-prompts", "agents", "--prefix", "--json"] {
        assert!(help.contains(word), "{word} in:\n{help}");
    }
    let stderr = fails(&tree, &["frobnicate"]);
    assert!(stderr.contains("frobnicate"), "{stderr}");
}

#[test]
fn config_file_sets_the_folders() {
    let tree = Tree::new();
    tree.write("my-skills/team/index.md", "# Team\n\nTeam body.\n")
        .write("my-agents/lead.md", "---\nname: Lead\n---\nYou lead.\n")
        .write("skills/ignored/index.md", "# Not configured\n\nbody\n");
    let config = tree.path("conf/iii.yaml");
    tree.write(
        "conf/iii.yaml",
        "skills_folder: my-skills\nlocal_skills_folder: my-skills/local\nagents_folder: my-agents\nindex_path: cache/idx.redb\n",
    );
    let config = config.to_str().expect("utf-8 path");
    let list = ok_json(&tree, &["--config", config, "list", "skills", "--json"]);
    let ids: Vec<&str> = list["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert!(ids.contains(&"team"), "{ids:?}");
    assert!(!ids.contains(&"ignored"), "{ids:?}");
    assert!(tree.path("cache/idx.redb").is_file());
    assert!(
        !tree.path("data").exists(),
        "the default index path is not used"
    );
    let lead = ok_json(
        &tree,
        &["get", "agent", "lead", "--json", "--config", config],
    );
    assert_eq!(lead["name"], "Lead");
}

#[test]
fn bad_config_names_the_key() {
    let tree = sample_tree();
    tree.write(
        "bad.yaml",
        "skills_folder: skills\nsafety_net_interval_ms: soon\n",
    );
    let config = tree.path("bad.yaml");
    let config = config.to_str().expect("utf-8 path");
    for args in [
        vec!["--config", config, "list", "skills"],
        vec!["--config", config, "reindex"],
    ] {
        let stderr = fails(&tree, &args);
        assert!(stderr.contains("safety_net_interval_ms"), "{stderr}");
        assert!(
            stderr.contains("must be a non-negative integer"),
            "{stderr}"
        );
        assert!(stderr.contains("bad.yaml"), "{stderr}");
    }
    tree.write("bad2.yaml", "filter_unregistered: [1, 2]\n");
    let stderr = fails(
        &tree,
        &[
            "--config",
            tree.path("bad2.yaml").to_str().expect("path"),
            "check",
        ],
    );
    assert!(stderr.contains("filter_unregistered"), "{stderr}");
    let stderr = fails(
        &tree,
        &["--config", "/nonexistent/iii.yaml", "list", "skills"],
    );
    assert!(stderr.contains("/nonexistent/iii.yaml"), "{stderr}");
}

/// The index file locked by a process that is no iii-directory worker or command (a tool that
/// locked it, an older build): a read and a `reindex` say what holds it and how to find it,
/// after a moment, and never that a worker owns it.
#[test]
fn an_index_locked_by_another_program_is_said() {
    let tree = sample_tree();
    ok(&tree, &["reindex"]);
    let index = tree.config().paths.index_path;
    let Ok(mut locker) = Command::new("flock")
        .arg("-x")
        .arg(&index)
        .args(["sleep", "30"])
        .spawn()
    else {
        eprintln!("skipped: util-linux `flock` is not installed");
        return;
    };
    std::thread::sleep(Duration::from_millis(300));
    let said: Vec<String> = [
        &["list", "skills"][..],
        &["reindex", "--no-embed"][..],
        &["reindex", "--from-scratch", "--no-embed"][..],
    ]
    .into_iter()
    .map(|args| fails(&tree, args))
    .collect();
    let _ = locker.kill();
    let _ = locker.wait();
    for stderr in said {
        assert!(
            stderr.contains("iii-directory worker or command") && stderr.contains("fuser"),
            "{stderr}"
        );
        assert!(!stderr.contains("running iii-directory worker"), "{stderr}");
    }
}

/// A path written from the home folder, run where no home folder is set (a cron job or a
/// service without HOME): resolved as the contract says, under a folder called `~`, and said.
#[test]
fn a_home_path_without_a_home_folder_is_said() {
    let tree = sample_tree();
    tree.write("home.yaml", "bundles_lock_path: ~/lock.json\n");
    let config = tree.path("home.yaml");
    let stderr_with = |home: Option<&Path>| {
        let mut command = iii(&tree);
        command.args([
            "--config",
            config.to_str().expect("utf-8"),
            "list",
            "agents",
        ]);
        match home {
            Some(home) => command.env("HOME", home),
            None => command.env_remove("HOME").env_remove("USERPROFILE"),
        };
        let output = command.output().expect("run");
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stderr)
    };
    let stderr = stderr_with(None);
    assert!(
        stderr.contains("bundles_lock_path `~/lock.json` names a folder called `~`")
            && stderr.contains("set HOME"),
        "{stderr}"
    );
    assert!(!stderr_with(Some(tree.base())).contains("names a folder called"));
}

/// Opens the tree's index as its writer and notes the holder as a worker or command of
/// `role` would (`index::holder`), this test process standing in for it.
fn hold_as(tree: &Tree, role: &str) -> Directory {
    let directory = Directory::open(tree.config()).expect("open as writer");
    note_holder(tree, role, tree_folders(tree));
    directory
}

/// The folders the tree's configuration indexes, as a holder's note names them.
fn tree_folders(tree: &Tree) -> Vec<(String, String)> {
    let paths = tree.config().paths;
    [
        ("skills_folder", paths.skills_folder),
        ("local_skills_folder", paths.local_skills_folder),
        ("agents_skills_folder", paths.agents_skills_folder),
        ("agents_folder", paths.agents_folder),
    ]
    .into_iter()
    .map(|(key, path)| (key.to_string(), path.display().to_string()))
    .collect()
}

fn note_holder(tree: &Tree, role: &str, folders: Vec<(String, String)>) {
    let holder = IndexHolder {
        pid: std::process::id(),
        role: role.to_string(),
        folders,
        // A worker stood in for here reconciles before any command runs beside it (its note
        // does not say it is building); a command stood in for is one a read waits for (its
        // note does not say its rows are settled).
        ..IndexHolder::default()
    };
    write_index_holder(&tree.config().paths.index_path, &holder).expect("note the holder");
}

/// Commands started at once, as cron starts them, with no worker: each waits for the one
/// holding the index, and none takes another for a running worker (one that had just let go,
/// its note gone with it, was taken for a worker that did not answer; a `--from-scratch`, which
/// opens twice, took its own note left from the first open for a worker's).
#[test]
fn commands_started_at_once_wait_for_each_other() {
    let tree = sample_tree();
    for round in 0..6 {
        let children: Vec<_> = [&[][..], &[][..], &["--from-scratch"][..]]
            .into_iter()
            .map(|more| {
                iii(&tree)
                    .args(["reindex", "--no-embed", "--json"])
                    .args(more)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .chain(std::iter::once(spawn_list_skills(&tree)))
            .collect();
        for child in children {
            let output = child.wait_with_output().expect("wait");
            assert!(
                output.status.success(),
                "round {round}: {}",
                text(&output.stderr)
            );
            serde_json::from_slice::<Value>(&output.stdout).expect("one JSON answer");
        }
    }
}

/// A read beside a worker that has not finished its first reconcile (its holder note says it
/// is building) waits for it: until then the index holds none of the tree's rows (or a previous
/// run's), and the worker's watcher may not answer a sync cookie yet.
#[test]
fn a_read_beside_a_booting_worker_waits_for_its_first_reconcile() {
    let tree = sample_tree();
    let writer = Directory::open(tree.config()).expect("open as writer");
    let mut note = IndexHolder {
        pid: std::process::id(),
        role: WORKER_ROLE.to_string(),
        folders: tree_folders(&tree),
        building: true,
        ..IndexHolder::default()
    };
    let index = tree.config().paths.index_path;
    write_index_holder(&index, &note).expect("note");
    let mut child = spawn_list_skills(&tree);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the read answered before the worker's first reconcile"
    );
    writer.reconcile().expect("reconcile");
    note.building = false;
    write_index_holder(&index, &note).expect("note");
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let listed: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(
        listed,
        common::call(&writer, ReadFunction::SkillsList, json!({}))
    );
    assert!(
        listed["skills"]
            .as_array()
            .is_some_and(|rows| rows.iter().any(|row| row["id"] == "mailer/send-email")),
        "{listed}"
    );
}

/// A running worker holds the index as its writer: the read commands answer from its live
/// index (and see what it reconciles later); `reindex --from-scratch` refuses and says why.
#[test]
fn beside_a_running_writer_reads_follow_and_reindex_refuses() {
    let tree = sample_tree();
    let writer = hold_as(&tree, WORKER_ROLE);
    writer.reconcile().expect("reconcile");

    let list = ok_json(&tree, &["list", "skills", "--json"]);
    assert_eq!(
        list,
        common::call(&writer, ReadFunction::SkillsList, json!({}))
    );
    let agent = ok_json(&tree, &["get", "agent", "captain", "--json"]);
    assert_eq!(
        agent,
        common::call(&writer, ReadFunction::AgentsGet, json!({ "id": "captain" }))
    );
    let check = ok_json(&tree, &["check", "--json"]);
    assert_eq!(
        check.as_array().expect("array").len(),
        SKIPPED_FILES + PROFILE_PROBLEMS
    );

    let stderr = fails(&tree, &["reindex", "--from-scratch"]);
    assert!(
        stderr.contains("a running iii-directory worker owns the index"),
        "{stderr}"
    );
    // Without --from-scratch, reindex asks the worker to walk every folder again; this one
    // has no watcher to hear it, and reindex says so.
    for args in [&["reindex"][..], &["reindex", "--json"]] {
        let stderr = fails(&tree, args);
        assert!(
            stderr.contains("did not confirm that it walked every folder again"),
            "{args:?}: {stderr}"
        );
    }
    assert!(
        tree.config().paths.index_path.is_file(),
        "--from-scratch left the index alone"
    );

    // A change the writer has not reconciled yet is not visible; once it has, it is.
    tree.write("skills/fresh/index.md", "# Fresh\n\nNew skill.\n");
    let before = ok_json(&tree, &["list", "skills", "--json"]);
    assert_eq!(before, list, "the follower does not reconcile");
    writer.reconcile().expect("reconcile");
    let after = ok_json(&tree, &["list", "skills", "--json"]);
    assert_eq!(
        after,
        common::call(&writer, ReadFunction::SkillsList, json!({}))
    );
    assert!(after.to_string().contains("\"fresh\""), "{after}");

    // Without the writer the binary is the writer again.
    drop(writer);
    let summary = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(number(&summary, "files"), SAMPLE_FILES as u64 + 1);
}

/// Beside a running writer that watches (a worker), a read command is as fresh as a rescan: a
/// change made on disk a moment before is in its answer (the command leaves a sync cookie,
/// and the writer's watcher takes every earlier change in before it answers the cookie).
#[test]
fn beside_a_watching_writer_read_commands_see_changes_made_just_before() {
    let tree = sample_tree();
    let writer = std::sync::Arc::new(hold_as(&tree, WORKER_ROLE));
    writer.reconcile().expect("reconcile");
    let watcher = iii_directory::Watcher::start(writer.clone(), Default::default());
    for round in 0..5 {
        let id = format!("fresh{round}");
        tree.write(
            &format!("skills/{id}/index.md"),
            &format!("# Fresh {round}\n\nNew skill.\n"),
        );
        let got = ok_json(&tree, &["get", "skill", &id, "--json"]);
        assert_eq!(got["title"], format!("Fresh {round}"), "{got}");
        let list = ok_json(
            &tree,
            &["list", "skills", "--prefix", &format!("{id}/"), "--json"],
        );
        assert_eq!(
            list,
            common::call(
                &writer,
                ReadFunction::SkillsList,
                json!({"prefix": format!("{id}/")})
            )
        );
        tree.write(
            &format!("skills/{id}/broken.md"),
            "---\ntitle: [unclosed\n---\n",
        );
        tree.remove(&format!("skills/{id}/index.md"));
        let stderr = fails(&tree, &["get", "skill", &id]);
        assert!(stderr.contains("D110"), "{stderr}");
    }
    tree.write("agents/late.md", "---\nname: Late\n---\nHi.\n");
    let agent = ok_json(&tree, &["get", "agent", "late", "--json"]);
    assert_eq!(agent["name"], "Late");

    // A write the kernel reports to no watch (through a hard link whose other name is outside
    // every folder) is missed by the reads; `reindex` asks the worker to walk every folder
    // again, and then they have it.
    let outside = tempfile::tempdir().expect("temp dir");
    let other_name = outside.path().join("late.md");
    fs::hard_link(tree.path("agents/late.md"), &other_name).expect("hard link");
    fs::write(&other_name, "---\nname: Later\n---\nHi.\n").expect("write through the link");
    let agent = ok_json(&tree, &["get", "agent", "late", "--json"]);
    assert_eq!(agent["name"], "Late", "the kernel says nothing of it");
    let summary = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(summary["rescanned_by_worker"], true, "{summary}");
    let agent = ok_json(&tree, &["get", "agent", "late", "--json"]);
    assert_eq!(agent["name"], "Later");
    let human = ok(&tree, &["reindex"]);
    assert!(
        human.starts_with("the running worker walked every folder again: "),
        "{human}"
    );
    // The texts store removed under the worker (which no watch reports): the worker builds
    // both files again before it answers the next command's cookie.
    let index = tree.config().paths.index_path;
    fs::remove_file(index.with_file_name("index.redb.texts")).expect("remove the texts store");
    let agent = ok_json(&tree, &["get", "agent", "late", "--json"]);
    assert_eq!(agent["name"], "Later");
    // The index file removed, and a command the first to come: it answers from the files the
    // worker builds again (its open made an empty index file in the removed one's place).
    let listed = ok_json(&tree, &["list", "skills", "--json"]);
    fs::remove_file(&index).expect("remove the index file");
    assert_eq!(ok_json(&tree, &["list", "skills", "--json"]), listed);
    let agent = ok_json(&tree, &["get", "agent", "late", "--json"]);
    assert_eq!(agent["name"], "Later");
    assert!(writer.status().expect("status")["index_error"].is_null());
    watcher.stop();
    // Without a watching writer there is no cookie to answer, and no wait.
    let started = Instant::now();
    ok(&tree, &["list", "skills"]);
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A damaged index file whose clean-close stamp still matches it (damage that kept the file's
/// size and time: a disk's fault, a restore from a bad copy) is opened without the page-by-page
/// check, and redb panics on what it reads. The command catches that and rebuilds the index
/// with one warning, with no panic message or backtrace in front of it. Every page in turn.
#[test]
fn a_damaged_index_behind_a_clean_stamp_is_rebuilt_without_a_panic_on_stderr() {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let tree = sample_tree();
    let expected = ok_json(&tree, &["list", "skills", "--json"]);
    let path = tree.config().paths.index_path;
    let stamp = path.with_file_name("index.redb.clean");
    let original = fs::read(&path).expect("read the index");
    let mut rebuilt = 0;
    for page in 1..original.len() / 4096 {
        fs::write(&path, &original).expect("restore the index");
        let meta = fs::metadata(&path).expect("stat");
        let mut file = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        file.seek(SeekFrom::Start((page * 4096 + 8) as u64))
            .expect("seek");
        file.write_all(&[0xff; 64]).expect("damage");
        let times = fs::FileTimes::new().set_modified(meta.modified().expect("mtime"));
        file.set_times(times).expect("keep the time");
        drop(file);
        let meta = fs::metadata(&path).expect("stat");
        let line = format!(
            "{} {} {} {}",
            meta.len(),
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        fs::write(&stamp, line).expect("stamp");
        let output = iii(&tree)
            .args(["list", "skills", "--json"])
            .env("RUST_BACKTRACE", "1")
            .output()
            .expect("run");
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "page {page}: {stderr}");
        assert!(!stderr.contains("panicked"), "page {page}: {stderr}");
        rebuilt += usize::from(stderr.contains("rebuilding it from disk"));
        let listed: Value = serde_json::from_slice(&output.stdout).expect("json");
        assert_eq!(listed, expected, "page {page}");
    }
    assert!(rebuilt > 0, "no damage was noticed");
}

/// A damaged index (a few bytes inside one of its pages) is rebuilt by whichever command opens
/// it as the writer, and `reindex --from-scratch` always recovers. Every page is damaged in turn.
#[test]
fn any_command_recovers_from_a_damaged_index() {
    let tree = sample_tree();
    let expected = ok_json(&tree, &["list", "skills", "--json"]);
    let path = tree.config().paths.index_path;
    let original = fs::read(&path).expect("read index");
    let mut rng = test_support::generate::Rng::new(5);
    let mut failures = Vec::new();
    for page in 0..original.len() / 4096 {
        for (offset, len) in [(16, 64), (100, 8)] {
            let mut damaged = original.clone();
            for byte in &mut damaged[page * 4096 + offset..page * 4096 + offset + len] {
                *byte = rng.next_u64() as u8;
            }
            for args in [
                &["list", "skills", "--json"][..],
                &["reindex", "--from-scratch"],
            ] {
                fs::write(&path, &damaged).expect("write index");
                let output = run(&tree, args);
                let stdout = text(&output.stdout);
                let answered = args[0] != "list"
                    || serde_json::from_str::<Value>(&stdout).ok().as_ref() == Some(&expected);
                if !output.status.success() || !answered {
                    let stderr = text(&output.stderr);
                    failures.push(format!(
                        "page {page}, bytes {offset}..{}: iii-directory {args:?} exited with {:?}: {}",
                        offset + len,
                        output.status.code(),
                        stderr.lines().find(|l| l.contains("panicked") || l.starts_with("error")).unwrap_or(stderr.trim())
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Issue 33: `reindex` with an `index_path` inside a skills folder overwrote a skill. The
/// layout is refused before anything is opened, with the skill untouched.
#[test]
fn reindex_with_an_index_path_inside_a_root_refuses_and_overwrites_nothing() {
    let tree = sample_tree();
    let skill = "# Mine\n\nMy skill, not an index.\n";
    tree.write("skills/mine/index.md", skill);
    for (rel, root) in [
        ("skills/mine/index.md", "skills_folder"),
        ("skills/iii/x.redb", "local_skills_folder"),
        ("agents/index.redb", "agents_folder"),
    ] {
        tree.write("unsafe.yaml", &format!("index_path: {rel}\n"));
        let config = tree.path("unsafe.yaml");
        let config = config.to_str().expect("utf-8 path");
        for args in [
            vec!["--config", config, "reindex"],
            vec!["--config", config, "reindex", "--from-scratch"],
            vec!["--config", config, "list", "skills"],
        ] {
            let stderr = fails(&tree, &args);
            assert!(stderr.contains("index_path"), "{stderr}");
            assert!(stderr.contains(root), "{rel}: {stderr}");
        }
        let [_, texts] = iii_directory::index_files(&tree.path(rel));
        assert!(!texts.exists(), "{rel}: no texts store was made");
    }
    assert_eq!(
        fs::read_to_string(tree.path("skills/mine/index.md")).expect("read"),
        skill
    );
    assert!(!tree.path("skills/iii/x.redb").exists());
}

/// A user's file given as `index_path` (outside every root) is refused by the index's own
/// check: not an index of ours, left byte for byte.
#[test]
fn reindex_onto_a_users_file_refuses_and_leaves_it() {
    let tree = sample_tree();
    let notes = "line one\nline two\n".repeat(100);
    tree.write("notes.txt", &notes);
    tree.write("unsafe.yaml", "index_path: notes.txt\n");
    let config = tree.path("unsafe.yaml");
    let config = config.to_str().expect("utf-8 path");
    for args in [
        vec!["--config", config, "reindex"],
        vec!["--config", config, "reindex", "--from-scratch"],
    ] {
        let stderr = fails(&tree, &args);
        assert!(stderr.contains("index_path"), "{stderr}");
        assert!(stderr.contains("notes.txt"), "{stderr}");
        assert!(stderr.contains("left untouched"), "{stderr}");
    }
    assert_eq!(
        fs::read_to_string(tree.path("notes.txt")).expect("read"),
        notes
    );
}

/// `--config` at a file that is not a configuration (a system file, say): one error that
/// quotes none of its lines, never a warning per line.
#[test]
fn config_that_is_not_a_configuration_is_one_error() {
    let tree = sample_tree();
    tree.write(
        "shadow",
        "root:*:19000:0:99999:7:::\nmail:*:19000:0:99999:7:::\nsecretuser:!:19000::::::\n",
    );
    let config = tree.path("shadow");
    let stderr = fails(
        &tree,
        &["--config", config.to_str().expect("path"), "list", "skills"],
    );
    assert!(!stderr.contains("secretuser"), "{stderr}");
    assert!(!stderr.contains("unknown configuration key"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // A registry that is not reached over HTTP is refused the same way.
    tree.write("file-registry.yaml", "registry_url: file:///etc/passwd\n");
    let config = tree.path("file-registry.yaml");
    let stderr = fails(
        &tree,
        &["--config", config.to_str().expect("path"), "list", "skills"],
    );
    assert!(stderr.contains("registry_url"), "{stderr}");
    assert!(stderr.contains("http"), "{stderr}");
}

/// The user-global folders from a configuration file, with `~` expanded from `HOME`: `reindex`
/// reads them, the lists serve them below the project, `check` names what they lose.
#[test]
fn global_folders_from_the_config_are_reindexed_listed_and_checked() {
    let tree = Tree::new();
    tree.write(
        "home/.agents/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDFs.\n---\nUse pdftotext.\n",
    )
    .write(
        "home/.iii/agents/ops.md",
        "---\nname: Ops\nfunctions: [engine::functions::list]\nskills_index: false\n---\nRun ops.\n",
    )
    .write("home/.iii/agents/lead.md", "---\nname: Global lead\n---\nG.\n")
    .write("agents/lead.md", "---\nname: Lead\n---\nYou lead.\n")
    .write(
        "iii.yaml",
        "global_agents_folder: ~/.iii/agents\nglobal_agents_skills_folder: ~/.agents/skills\n",
    );
    let config = tree.path("iii.yaml");
    let config = config.to_str().expect("utf-8 path");
    let home = tree.path("home");
    let json = |args: &[&str]| -> Value {
        let output = iii(&tree)
            .env("HOME", &home)
            .args(["--config", config])
            .args(args)
            .output()
            .expect("run iii-directory");
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("JSON")
    };
    let summary = json(&["reindex", "--json"]);
    assert!(number(&summary, "files") >= 4, "{summary}");
    let pdf = json(&["get", "skill", "pdf", "--json"]);
    assert_eq!(
        pdf["path"],
        home.join(".agents/skills/pdf/SKILL.md")
            .display()
            .to_string()
    );
    let agents = json(&["list", "agents", "--json"]);
    let row = |id: &str| {
        agents["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {agents}"))
    };
    assert_eq!(row("lead")["name"], "Lead");
    assert_eq!(row("ops")["functions"], json!(["engine::functions::list"]));
    assert_eq!(row("ops")["skills_index"], false);
    let check = json(&["check", "--json"]);
    let shadowed: Vec<&Value> = check
        .as_array()
        .expect("skipped")
        .iter()
        .filter(|s| s["root"] == "global_agents_folder")
        .collect();
    assert_eq!(shadowed.len(), 1, "{check}");
    assert_eq!(
        shadowed[0]["path"],
        home.join(".iii/agents/lead.md").display().to_string()
    );
}

/// A skill a paraphrase shares no word with, and `fillers` others, each its own content.
fn tree_to_embed(fillers: usize) -> Tree {
    let tree = Tree::new();
    tree.write(
        "skills/invoice-reminders/SKILL.md",
        "---\nname: invoice-reminders\ndescription: Chase customers who have not paid their bills.\n---\n# Invoice reminders\n\nSend polite payment reminders for overdue invoices.\n",
    );
    for i in 0..fillers {
        tree.write(
            &format!("skills/notes-{i:02}/SKILL.md"),
            &format!(
                "---\nname: notes-{i:02}\ndescription: Meeting notes of week {i}.\n---\n# Week {i}\n"
            ),
        );
    }
    tree
}

/// A task that shares no word with the skill serving it: lexical ranking finds nothing.
const PARAPHRASE: &str = "nudge people who still owe me money";

/// `search --skills --json` for [`PARAPHRASE`]: its answer and what it said on stderr.
fn search_paraphrase(tree: &Tree, config: &str) -> (Value, String) {
    let output = run(
        tree,
        &[
            "--config", config, "search", "--skills", "--json", PARAPHRASE,
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let answer = serde_json::from_slice(&output.stdout).expect("JSON");
    (answer, text(&output.stderr))
}

#[test]
fn with_the_model_here_reindex_embeds_the_skills_and_search_ranks_as_the_worker_does() {
    let Some(model) = common::model_dir() else {
        return;
    };
    let tree = tree_to_embed(40);
    tree.write(
        "conf.yaml",
        &format!("search_model_path: {}\n", model.display()),
    );
    let config = tree.path("conf.yaml");
    let config = config.to_str().expect("utf-8 path");

    let summary = ok_json(
        &tree,
        &["--config", config, "reindex", "--no-embed", "--json"],
    );
    assert_eq!(summary.get("embeddings"), None, "{summary}");
    // 41 contents without an embedding: more than search embeds before answering.
    let (answer, said) = search_paraphrase(&tree, config);
    assert_eq!(answer, json!({ "mode": "lexical", "results": [] }));
    assert!(
        said.contains("41 skill contents have no embedding yet")
            && said.contains("iii-directory reindex"),
        "{said}"
    );

    let summary = ok_json(&tree, &["--config", config, "reindex", "--json"]);
    let embeddings = &summary["embeddings"];
    assert_eq!(embeddings["model"], "all-MiniLM-L6-v2", "{summary}");
    assert_eq!(
        (
            embeddings["embedded"].as_u64(),
            embeddings["pending"].as_u64()
        ),
        (Some(41), Some(0)),
        "{summary}"
    );
    let again = ok(&tree, &["--config", config, "reindex"]);
    assert!(again.contains("skill embeddings up to date"), "{again}");
    assert_reindex_lets_a_waiting_worker_have_the_index(&tree, config);

    let (answer, said) = search_paraphrase(&tree, config);
    assert_eq!(answer["mode"], "hybrid", "{answer}");
    assert_eq!(answer["results"][0]["id"], "invoice-reminders", "{answer}");
    assert_eq!(said, "");

    // One skill changed while no worker ran: search embeds it before answering.
    tree.write(
        "skills/notes-00/SKILL.md",
        "---\nname: notes-00\ndescription: Minutes of the first board meeting.\n---\n# Minutes\n",
    );
    let (answer, said) = search_paraphrase(&tree, config);
    assert_eq!(answer["mode"], "hybrid", "{answer}");
    assert_eq!(said, "");
    let summary = ok_json(&tree, &["--config", config, "reindex", "--json"]);
    assert_eq!(summary["embeddings"]["embedded"], 0, "{summary}");

    // A large copy after the tree was embedded once: hybrid still, as the worker ranks, the
    // new contents by their words until embedded.
    for n in 0..40 {
        tree.write(
            &format!("skills/copied-{n:02}/SKILL.md"),
            &format!("---\nname: copied-{n:02}\ndescription: Copied notes {n}.\n---\n# Copy {n}\n"),
        );
    }
    let (answer, said) = search_paraphrase(&tree, config);
    assert_eq!(answer["mode"], "hybrid", "{answer}");
    assert_eq!(answer["results"][0]["id"], "invoice-reminders", "{answer}");
    assert!(
        said.contains("40 skill contents changed since they were embedded rank by their words")
            && said.contains("iii-directory reindex"),
        "{said}"
    );
}

/// A worker waiting for the index (its `<index>.wanted` note, stood in for by a live process)
/// ends a `reindex`'s embedding between batches: the worker embeds the rest in the background.
/// A note of a process that died is ignored.
fn assert_reindex_lets_a_waiting_worker_have_the_index(tree: &Tree, config: &str) {
    let wanted = beside(&tree.config().paths.index_path, ".wanted");
    // New contents to embed: every skill's text changes.
    for n in 0..40 {
        let path = tree.path(&format!("skills/notes-{n:02}/SKILL.md"));
        let text = fs::read_to_string(&path).expect("a filler");
        fs::write(&path, format!("{text}\nRevised.\n")).expect("write");
    }
    let mut stand_in = Command::new("sleep").arg("60").spawn().expect("sleep");
    let note = json!({ "pid": stand_in.id(), "role": "worker", "folders": [] });
    fs::write(&wanted, note.to_string()).expect("the note");
    let summary = ok_json(tree, &["--config", config, "reindex", "--json"]);
    let embeddings = &summary["embeddings"];
    assert_eq!(embeddings["embedded"], 0, "{summary}");
    assert_eq!(embeddings["pending"], 40, "{summary}");
    assert_eq!(embeddings["yielded_to_worker"], stand_in.id(), "{summary}");
    let human = ok(tree, &["--config", config, "reindex"]);
    assert!(
        human.contains(&format!(
            "skill embeddings: none computed; stopped there for the worker (pid {}) waiting for the index; it embeds the other 40 in the background if it has the search model",
            stand_in.id()
        )),
        "{human}"
    );
    stand_in.kill().expect("kill");
    stand_in.wait().expect("reap");
    let summary = ok_json(tree, &["--config", config, "reindex", "--json"]);
    assert_eq!(summary["embeddings"]["embedded"], 40, "{summary}");
    assert_eq!(
        summary["embeddings"]["yielded_to_worker"],
        Value::Null,
        "{summary}"
    );
    fs::remove_file(&wanted).expect("remove the stale note");
}

/// Beside a worker whose embeddings another copy of the model made (its files differ), search
/// ranks lexically and says why, rather than that the worker has not embedded the skills yet.
#[test]
fn beside_a_worker_with_another_copy_of_the_model_search_says_so() {
    let Some(model) = common::model_dir() else {
        return;
    };
    let tree = tree_to_embed(1);
    tree.write(
        "conf.yaml",
        &format!("search_model_path: {}\n", model.display()),
    );
    let config = tree.path("conf.yaml");
    let summary = ok_json(
        &tree,
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "reindex",
            "--json",
        ],
    );
    assert_eq!(summary["embeddings"]["embedded"], 2, "{summary}");
    // The same weights, with config.json written otherwise: another fingerprint.
    let copy = tree.path("other-model");
    fs::create_dir_all(&copy).expect("mkdir");
    for name in ["model.safetensors", "tokenizer.json"] {
        std::os::unix::fs::symlink(model.join(name), copy.join(name)).expect("link");
    }
    let config_json = fs::read_to_string(model.join("config.json")).expect("read");
    fs::write(copy.join("config.json"), format!("{config_json}\n")).expect("write");
    tree.write(
        "other.yaml",
        &format!("search_model_path: {}\n", copy.display()),
    );
    let _worker = hold_as(&tree, WORKER_ROLE);
    let other = tree.path("other.yaml");
    let (answer, said) = search_paraphrase(&tree, other.to_str().expect("utf-8"));
    assert_eq!(answer["mode"], "lexical", "{answer}");
    assert!(said.contains("another copy of the search model"), "{said}");
}

#[test]
fn the_copy_of_the_model_the_worker_fetched_is_used_offline() {
    let Some(model) = common::model_dir() else {
        return;
    };
    let tree = tree_to_embed(1);
    // Where the worker lands the model with `search_model_download` (the default).
    let folder = iii_directory::embed::fetch::Source::pinned().folder;
    let fetched = tree.path("data/iii-directory/models").join(folder);
    fs::create_dir_all(&fetched).expect("mkdir");
    for name in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::os::unix::fs::symlink(model.join(name), fetched.join(name)).expect("link");
    }
    let summary = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(
        summary["embeddings"]["model"], "all-MiniLM-L6-v2",
        "{summary}"
    );
    assert_eq!(summary["embeddings"]["embedded"], 2, "{summary}");
    // Downloads turned off stop the network, not the use of the copy fetched before.
    tree.write("offline.yaml", "search_model_download: false\n");
    let offline = tree.path("offline.yaml");
    let summary = ok_json(
        &tree,
        &[
            "--config",
            offline.to_str().expect("utf-8"),
            "reindex",
            "--json",
        ],
    );
    assert_eq!(
        summary["embeddings"]["model"], "all-MiniLM-L6-v2",
        "{summary}"
    );
    // A copy damaged in place (its sizes right) cannot be loaded: the warning says who
    // replaces it, since this command fetches nothing.
    fs::remove_file(fetched.join("tokenizer.json")).expect("remove");
    let size = fs::metadata(model.join("tokenizer.json"))
        .expect("size")
        .len();
    fs::write(fetched.join("tokenizer.json"), "x".repeat(size as usize)).expect("write");
    let output = run(&tree, &["reindex", "--json"]);
    assert!(output.status.success());
    let said = text(&output.stderr);
    assert!(
        said.contains("cannot load the search model")
            && said.contains(
                "(tokenizer.json no longer as fetched: a worker started with \
                 search_model_download on fetches the copy again)"
            ),
        "{said}"
    );
    // A copy cut short (an interrupted fetch that left a file behind) is not used.
    fs::write(fetched.join("tokenizer.json"), "{}").expect("write");
    let summary = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(summary["embeddings"]["model"], Value::Null, "{summary}");
}

#[test]
fn without_a_model_here_reindex_says_so_and_fetches_nothing() {
    let tree = tree_to_embed(2);
    let summary = ok_json(&tree, &["reindex", "--json"]);
    assert_eq!(
        summary["embeddings"],
        json!({ "model": null, "embedded": 0, "pending": 3, "ms": 0, "yielded_to_worker": null }),
        "{summary}"
    );
    assert!(
        !tree.path("data/iii-directory/models").exists(),
        "the offline commands never fetch the model"
    );
    let human = ok(&tree, &["reindex"]);
    assert!(human.contains("no search model on this machine"), "{human}");
    let output = run(&tree, &["search", "--skills", "--json", PARAPHRASE]);
    assert!(output.status.success());
    assert_eq!(
        text(&output.stderr),
        "",
        "lexical by configuration: nothing to say"
    );
    let answer: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["mode"], "lexical");
}

/// A command holds the index only while it runs (a `reindex --from-scratch` rebuilding it from
/// nothing, a read bringing it up to date): a read command started meanwhile waits for it,
/// says so, and then answers from the index brought up to date, never from one half built.
#[test]
fn a_command_waits_for_another_command_that_holds_the_index() {
    let tree = sample_tree();
    let holder = hold_as(&tree, "reindex");
    tree.write(
        "skills/late/index.md",
        "# Late\n\nWritten while the index was held.\n",
    );
    let mut child = spawn_list_skills(&tree);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the read waits while the command holds the index"
    );
    drop(holder);
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let listed: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert!(listed.to_string().contains("\"late\""), "{listed}");
    assert!(
        text(&output.stderr).contains(&format!(
            "waiting for `iii-directory reindex` (pid {}), which holds the index, to finish",
            std::process::id()
        )),
        "{}",
        text(&output.stderr)
    );
}

/// A read started while a `reindex` computes embeddings (its note says its rows are complete)
/// follows it at once, rather than waiting out the embeddings.
#[test]
fn a_read_follows_a_reindex_whose_rows_are_complete() {
    let tree = sample_tree();
    ok(&tree, &["reindex", "--no-embed"]);
    let holder = hold_as(&tree, "reindex");
    let note = IndexHolder {
        pid: std::process::id(),
        role: "reindex".into(),
        folders: tree_folders(&tree),
        settled: true,
        ..IndexHolder::default()
    };
    write_index_holder(&tree.config().paths.index_path, &note).expect("note");
    let started = Instant::now();
    let mut child = spawn_list_skills(&tree);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the read waited for the reindex"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("wait");
    drop(holder);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let listed: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert!(listed.to_string().contains("\"queue\""), "{listed}");
    assert!(
        !text(&output.stderr).contains("waiting for"),
        "{}",
        text(&output.stderr)
    );
}

/// A worker that starts while a command holds the index waits for it, and says so in
/// `<index>.wanted` (so that a `reindex` embedding skills lets go early); the note goes once
/// the worker holds the index.
#[test]
fn a_worker_waiting_for_a_command_notes_that_it_wants_the_index() {
    let tree = sample_tree();
    let holder = hold_as(&tree, "reindex");
    let index = tree.config().paths.index_path;
    let wanted = beside(&index, ".wanted");
    let mut worker = iii(&tree)
        .args(["--url", "ws://127.0.0.1:1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the worker");
    let pid = worker.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    let note_names = |pid: u32| {
        fs::read_to_string(&wanted).is_ok_and(|text| text.contains(&format!("\"pid\":{pid},")))
    };
    while !note_names(pid) {
        assert!(Instant::now() < deadline, "the waiting worker left no note");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(holder);
    let holds = || iii_directory::read_index_holder(&index).is_some_and(|holder| holder.pid == pid);
    while !holds() || wanted.exists() {
        assert!(
            Instant::now() < deadline,
            "the worker never took the index, or left its note"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    worker.kill().expect("kill");
    worker.wait().expect("reap");
}

/// Commands started together on a new project (no index yet): each waits for the one making
/// the index, none takes it, half made, for a file that is not an index.
#[test]
fn commands_started_together_on_a_new_project_all_answer() {
    let tree = sample_tree();
    for round in 0..3 {
        let index = tree.config().paths.index_path;
        let _ = iii_directory::remove_index(&index);
        let children: Vec<_> = (0..3).map(|_| spawn_list_skills(&tree)).collect();
        let answers: Vec<Value> = children
            .into_iter()
            .map(|child| {
                let output = child.wait_with_output().expect("wait");
                assert!(
                    output.status.success(),
                    "round {round}: {}",
                    text(&output.stderr)
                );
                serde_json::from_slice(&output.stdout).expect("json")
            })
            .collect();
        assert!(
            answers.windows(2).all(|pair| pair[0] == pair[1]),
            "round {round}"
        );
    }
}

/// Mistakes on the command line and in the configuration are refused with what to do next:
/// an unknown log level, a revision that is not one, or an engine address that is not a
/// WebSocket URL (usage errors, exit 2), a folder at `index_path`, a search model that is configured but cannot be loaded.
#[test]
fn command_line_and_configuration_mistakes_say_what_to_do() {
    let tree = sample_tree();
    let usage = |args: &[&str]| {
        let output = run(&tree, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        text(&output.stderr)
    };
    let stderr = usage(&["--log-level", "loud", "list", "skills"]);
    assert!(
        stderr.contains("[possible values: error, warn, info, debug, trace, off]"),
        "{stderr}"
    );
    assert!(
        run(&tree, &["--log-level", "DEBUG", "list", "skills"])
            .status
            .success()
    );
    let stderr = usage(&["download"]);
    assert!(
        stderr.contains("<--repo <REPO>|--worker <WORKER>>"),
        "{stderr}"
    );
    let stderr = usage(&["download", "--repo", "https://example.com/skills.git"]);
    assert!(stderr.contains("--skill <SKILL>"), "{stderr}");
    for revision in ["-1", "ten"] {
        let stderr = usage(&["list", "skills", "--since-revision", revision]);
        assert!(
            stderr.contains("a revision is a whole number, 0 or more"),
            "{revision}: {stderr}"
        );
    }
    // Counts outside what the function takes are refused, as on the bus, not brought within.
    for (args, range) in [
        (
            &["catalog", "--limit", "0"][..],
            "a whole number, 1 or more",
        ),
        (
            &["catalog", "--max-bytes", "255"][..],
            "a whole number from 256 to 8388608",
        ),
        (
            &["search", "--skills", "x", "--limit", "51"][..],
            "from 1 to 50",
        ),
        (
            &["search", "--skills", "x", "--limit", "-3"][..],
            "from 1 to 50",
        ),
    ] {
        let stderr = usage(args);
        assert!(stderr.contains(range), "{args:?}: {stderr}");
    }
    for url in ["http://127.0.0.1:49134", "127.0.0.1:49134", "ws://"] {
        let stderr = usage(&["--url", url, "search", "send an email"]);
        assert!(
            stderr.contains(&format!(
                "invalid --url {url:?}: the engine's address is a WebSocket URL, ws://HOST:PORT"
            )),
            "{url}: {stderr}"
        );
    }
    // A wrong III_URL is named as such, and only the commands that reach the engine mind it.
    let with_env = |args: &[&str]| {
        iii(&tree)
            .env("III_URL", "http://x")
            .args(args)
            .output()
            .expect("run")
    };
    let worker = with_env(&[]);
    assert_eq!(worker.status.code(), Some(2));
    assert!(
        text(&worker.stderr).contains("invalid III_URL \"http://x\""),
        "{}",
        text(&worker.stderr)
    );
    for args in [
        &["list", "skills"][..],
        &["search", "--skills", "email"][..],
        &["check"][..],
    ] {
        let output = with_env(args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    // The filters of `list` are the skills' only: refused for the other kinds, not ignored.
    for kind in ["agents", "system-prompts"] {
        let stderr = usage(&["list", kind, "--prefix", "zzz", "--type", "how-to"]);
        assert!(
            stderr.contains(&format!(
                "--prefix, --type filter skills only; `list {kind}` always lists them all"
            )),
            "{stderr}"
        );
        // The usage shown after the reason is the command's own.
        assert!(
            stderr.contains("Usage: iii-directory list [OPTIONS] <KIND>"),
            "{stderr}"
        );
    }
    // `--manifest` prints the surface and exits: a command beside it would never run.
    let stderr = usage(&["--manifest", "list", "skills"]);
    assert!(stderr.contains("give it no command"), "{stderr}");

    fs::create_dir_all(tree.path("a-folder")).expect("mkdir");
    tree.write(
        "folder.yaml",
        "index_path: a-folder\nsearch_model_download: false\n",
    );
    let stderr = fails(
        &tree,
        &[
            "--config",
            tree.path("folder.yaml").to_str().expect("path"),
            "list",
            "skills",
        ],
    );
    assert!(
        stderr.contains(&format!(
            "index_path: {} is not a regular file (a folder, a device or a pipe); it is left untouched. Set index_path to a file of its own\n",
            tree.path("a-folder").display()
        )),
        "{stderr}"
    );

    // A relative --config resolves against the current directory, named in full.
    let stderr = fails(&tree, &["--config", "no-such.yaml", "list", "skills"]);
    assert!(
        stderr.contains(&format!(
            "cannot read configuration file {}: ",
            std::env::temp_dir().join("no-such.yaml").display()
        )),
        "{stderr}"
    );

    tree.write(
        "typo.yaml",
        "skills_folder: skils\nsearch_model_download: false\n",
    );
    let typo = tree.path("typo.yaml");
    let typo = typo.to_str().expect("path");
    for command in [
        &["check"][..],
        &["reindex"],
        &["list", "skills"],
        &["index"],
        &["catalog"],
        &["search", "--skills", "email"],
    ] {
        let output = run(&tree, &[&["--config", typo][..], command].concat());
        assert!(output.status.success(), "{command:?}");
        assert!(
            text(&output.stderr).contains(&format!(
                "skills_folder {} does not exist: nothing is served from it until it does",
                tree.path("skils").display()
            )),
            "{command:?}: {}",
            text(&output.stderr)
        );
    }
    tree.write("a-file.md", "# A file\n\nNot a folder.\n");
    tree.write(
        "file.yaml",
        "skills_folder: a-file.md\nsearch_model_download: false\n",
    );
    let file = tree.path("file.yaml");
    let output = run(
        &tree,
        &["--config", file.to_str().expect("path"), "list", "skills"],
    );
    assert!(
        text(&output.stderr).contains(&format!(
            "skills_folder {} is a file, not a folder: nothing is served from it",
            tree.path("a-file.md").display()
        )),
        "{}",
        text(&output.stderr)
    );
    let missing = tree.path("no-such-compose");
    let output = iii(&tree)
        .env("III_COMPOSE_DIR", &missing)
        .args(["list", "skills"])
        .output()
        .expect("run");
    assert!(
        text(&output.stderr).contains(&format!(
            "III_COMPOSE_DIR {} does not exist (a typo?)",
            missing.display()
        )),
        "{}",
        text(&output.stderr)
    );

    tree.write(
        "model.yaml",
        "search_model_path: no-model-here\nsearch_model_download: false\n",
    );
    let output = run(
        &tree,
        &[
            "--config",
            tree.path("model.yaml").to_str().expect("path"),
            "reindex",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("cannot load the search model from"),
        "{}",
        text(&output.stderr)
    );
    assert!(
        text(&output.stdout).contains(
            "skill embeddings: none computed, the search model could not be loaded (see the warning above)"
        ),
        "{}",
        text(&output.stdout)
    );
}

/// A command whose configuration names other folders than the running worker indexes does not
/// answer from the worker's index as if it were its own tree: it says whose index it is and
/// what differs.
#[test]
fn a_command_does_not_follow_a_worker_serving_other_folders() {
    let tree = sample_tree();
    let writer = hold_as(&tree, WORKER_ROLE);
    writer.reconcile().expect("reconcile");
    assert!(
        run(&tree, &["list", "skills"]).status.success(),
        "same folders"
    );
    // The same folders spelled otherwise (`..`, a link on the way, as a worker started with
    // `III_COMPOSE_DIR=../proj` notes them) are the same folders.
    let base = tree.path("");
    let link = tree.path("through-a-link");
    std::os::unix::fs::symlink(&base, &link).expect("link");
    let respelled: Vec<(String, String)> = tree_folders(&tree)
        .into_iter()
        .map(|(key, path)| {
            let rest = Path::new(&path).strip_prefix(&base).expect("in the tree");
            let spelled = link.join("skills").join("..").join(rest);
            (key, spelled.display().to_string())
        })
        .collect();
    note_holder(&tree, WORKER_ROLE, respelled);
    let output = run(&tree, &["list", "skills"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut elsewhere = tree_folders(&tree);
    elsewhere[0].1 = "/srv/other-project/skills".to_string();
    note_holder(&tree, WORKER_ROLE, elsewhere);
    let stderr = fails(&tree, &["list", "skills"]);
    assert!(
        stderr.contains(&format!(
            "belongs to a running iii-directory worker (pid {}), which serves other folders (skills_folder: /srv/other-project/skills, where this configuration names {})",
            std::process::id(),
            tree.config().paths.skills_folder.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("configuration::get id=iii-directory")
            && stderr.contains("served only after the worker restarts"),
        "{stderr}"
    );
}

/// `bundles` prints what `bundles --json` answers: the plain list, `get` and `verify` name every
/// `.upstream` copy the answer names, an open conflict's as well as a stale one, each with what
/// to do about it. The lock is written here as a landing writes it (the command reads only the
/// lock and the files).
#[test]
fn bundles_in_plain_text_name_the_upstream_copies_the_json_names() {
    use iii_directory::download::lock::sha256_hex;
    let tree = Tree::new();
    let locked = [
        ("SKILL.md", "# Demo\n"),
        ("open.md", "open, theirs\n"),
        ("taken.md", "taken, theirs\n"),
    ];
    for (path, text) in locked {
        tree.write(&format!("skills/demo/{path}"), text);
    }
    // open.md is still in conflict (edited here, upstream's text beside it); taken.md was
    // settled by taking upstream's text, its copy left behind.
    tree.write("skills/demo/open.md", "open, mine\n")
        .write("skills/demo/open.md.upstream", "open, theirs\n")
        .write("skills/demo/taken.md.upstream", "taken, theirs\n");
    let files: Vec<Value> = locked
        .iter()
        .map(|(path, text)| {
            json!({"path": format!("demo/{path}"), "route": "skills", "size": text.len(),
                   "sha256": sha256_hex(text.as_bytes())})
        })
        .collect();
    let lock = json!({"schema": 1, "bundles": {"demo": {
        "namespace": "demo",
        "source": {"kind": "registry", "worker": "demo", "tag": "latest", "version": "2.0.0",
                   "digest": "sha256:00"},
        "files": files,
        "landed_at": "2026-12-02T10:41:07Z",
    }}});
    tree.write(
        "skills/iii-bundles.lock.json",
        &serde_json::to_string_pretty(&lock).expect("lock"),
    );

    let listed = ok_json(&tree, &["bundles", "--json"]);
    let bundle = &listed["bundles"][0];
    assert_eq!(
        bundle["upstream_copies"],
        json!(["open.md.upstream", "taken.md.upstream"]),
        "{listed}"
    );
    assert_eq!(
        bundle["stale_upstream_copies"],
        json!(["taken.md.upstream"])
    );
    let open = "open.md.upstream (upstream's text of a conflict: merge it by hand, then delete it)";
    let stale = "taken.md.upstream (its conflict is settled: delete it)";
    let plain = ok(&tree, &["bundles"]);
    assert!(plain.contains(&format!("copy      {open}")), "{plain}");
    assert!(plain.contains(&format!("stale     {stale}")), "{plain}");
    assert!(plain.contains("modified  open.md"), "{plain}");
    let output = run(&tree, &["bundles", "verify"]);
    assert_eq!(output.status.code(), Some(1));
    let verified = text(&output.stdout);
    assert!(
        verified.contains(&format!("copy      {open}")),
        "{verified}"
    );
    assert!(
        verified.contains(&format!("stale     {stale}")),
        "{verified}"
    );
    let one = ok(&tree, &["bundles", "get", "demo"]);
    assert!(one.contains(open), "{one}");
    assert!(one.contains(stale), "{one}");
}

/// `list --since-revision` answers as the bus does (`--json`), and its summary names only the
/// rows that are gone: a new `ns/SKILL.md` is the changed row `ns`, not also a removed
/// `ns/index`.
#[test]
fn list_since_a_revision_summarizes_what_changed() {
    let tree = sample_tree();
    let first = ok_json(
        &tree,
        &["list", "skills", "--since-revision", "0", "--json"],
    );
    assert_eq!(first["full"], true, "{first}");
    let held = first["revision"].as_u64().expect("revision").to_string();
    let unchanged = ok(&tree, &["list", "skills", "--since-revision", &held]);
    assert!(
        unchanged.starts_with("unchanged at revision"),
        "{unchanged}"
    );

    tree.write("skills/added/SKILL.md", "# Added\n\nA new skill.\n");
    let delta = ok_json(
        &tree,
        &["list", "skills", "--since-revision", &held, "--json"],
    );
    assert_eq!(delta["changed"][0]["id"], "added", "{delta}");
    assert_eq!(delta["removed"], json!(["added/index"]), "{delta}");
    let summary = ok(&tree, &["list", "skills", "--since-revision", &held]);
    assert!(summary.contains("1 skills changed (revision"), "{summary}");
    assert!(!summary.contains("removed"), "{summary}");

    let held = delta["revision"].as_u64().expect("revision").to_string();
    fs::remove_file(tree.path("skills/queue/SKILL.md")).expect("remove");
    let summary = ok(&tree, &["list", "skills", "--since-revision", &held]);
    assert!(
        summary.contains("0 skills changed; removed: queue"),
        "{summary}"
    );
}

/// `get skill` takes back the path it prints: the file of a skill in any skill root, as well
/// as its id.
#[test]
fn get_skill_takes_the_path_it_prints() {
    let tree = sample_tree();
    for id in ["queue", "mailer/send-email", "local-ns", "helper"] {
        let by_id = ok_json(&tree, &["get", "skill", id, "--json"]);
        let path = by_id["path"].as_str().expect("path").to_string();
        let by_path = ok_json(&tree, &["get", "skill", &path, "--json"]);
        assert_eq!(by_path, by_id, "{path}");
    }
    // A path that names no skill file says so, rather than what the id rule makes of it.
    for path in ["/no/such/skill.md", "./nowhere.md", "./skills/queue"] {
        let stderr = fails(&tree, &["get", "skill", path]);
        assert!(
            stderr.contains("D110 not_found: no skill file at /"),
            "{stderr}"
        );
        assert!(stderr.contains("iii-directory list skills"), "{stderr}");
    }
    // A system prompt's or an agent profile's file is said to be one, with its command.
    for (file, command) in [
        ("skills/system-prompts/reviewer.md", "list system-prompts"),
        ("agents/captain.md", "list agents"),
    ] {
        let path = tree.path(file).display().to_string();
        let stderr = fails(&tree, &["get", "skill", &path]);
        assert!(stderr.contains("not a skill's file"), "{stderr}");
        assert!(
            stderr.contains(&format!("run `iii-directory {command}`")),
            "{stderr}"
        );
    }
    // `..` is folded as written, and a path relative to the current directory works.
    let base = tree.base().display().to_string();
    let dotted = format!("{base}/skills/../skills/./queue/SKILL.md");
    let by_dots = ok_json(&tree, &["get", "skill", &dotted, "--json"]);
    assert_eq!(by_dots["id"], "queue");
    let relative = run_in(
        &tree,
        tree.base(),
        &["get", "skill", "skills/queue/SKILL.md", "--json"],
    );
    assert!(relative.status.success(), "{}", text(&relative.stderr));
}

/// The file asked for is the file answered: a file the scan does not serve (shadowed by one of
/// more precedence, or named as no id can be) is refused with `check`'s reason, never answered
/// with the skill another file serves.
#[test]
fn get_skill_by_path_refuses_a_file_that_is_not_served() {
    let tree = sample_tree();
    tree.write(
        ".agents/skills/queue/SKILL.md",
        "# Agents queue\n\nShadowed.\n",
    );
    let shadowed = tree.path(".agents/skills/queue/SKILL.md");
    let stderr = fails(&tree, &["get", "skill", &shadowed.display().to_string()]);
    assert!(
        stderr.contains(&format!(
            "D110 not_found: {} is not served: ",
            shadowed.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("iii-directory check"), "{stderr}");
    assert!(!stderr.contains("Queues work"), "{stderr}");
    let invalid = tree.path("skills/mailer/Bad-Name.md");
    let stderr = fails(&tree, &["get", "skill", &invalid.display().to_string()]);
    assert!(
        stderr.contains(&format!(
            "D110 not_found: {} is not served: ",
            invalid.display()
        )),
        "{stderr}"
    );
    // The file that serves the id still answers by its path.
    let served = ok_json(
        &tree,
        &[
            "get",
            "skill",
            &tree.path("skills/queue/SKILL.md").display().to_string(),
            "--json",
        ],
    );
    assert_eq!(served["body"], "# Queue\n\nQueues work.\n");
}

/// A worker of `tree` started in the background, once it holds the index (its holder note names
/// it). No engine answers on port 1: it serves its index and keeps waiting for one.
fn worker_holding_the_index(tree: &Tree) -> std::process::Child {
    let worker = iii(tree)
        .args(["--url", "ws://127.0.0.1:1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the worker");
    let note = beside(&tree.config().paths.index_path, ".holder");
    let named = format!("\"pid\":{},", worker.id());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fs::read_to_string(&note).is_ok_and(|text| text.contains(&named)) {
        assert!(Instant::now() < deadline, "the worker never held the index");
        std::thread::sleep(Duration::from_millis(50));
    }
    worker
}

/// Whether this process may run a command as `nobody` (root, with `setpriv`); says in one line
/// that `what` is not checked when it may not.
fn may_run_as_nobody(what: &str) -> bool {
    let switch = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let root = fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if !(switch && root) {
        println!("note: not root, or no setpriv: {what} is not checked in this run");
    }
    switch && root
}

/// The binary run as `nobody` over the tree.
fn run_as_nobody(tree: &Tree, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_iii-directory"))
        .args(args)
        .env("III_COMPOSE_DIR", tree.base())
        .env_remove("RUST_LOG")
        .current_dir("/")
        .output()
        .expect("run as nobody")
}

/// A user who may read the folders and the index but not write them (another user than the
/// worker's) reads from the running worker's live index, as its owner does: only a writer needs
/// write permission. Run as `nobody` beside a worker of this user; skipped, saying so, when this
/// process cannot switch users (not root, or no `setpriv`).
#[test]
fn another_user_reads_beside_the_worker_from_its_live_index() {
    if !may_run_as_nobody("another user's read beside the worker") {
        return;
    }
    let tree = sample_tree();
    let mut worker = worker_holding_the_index(&tree);
    // This user's read waits for the worker's first reconcile (the worker's holder note says
    // when it is done); the other user, who cannot leave a cookie, then reads the same rows.
    let own = ok_json(&tree, &["list", "skills", "--json"]);
    // Everyone may read the tree and the index; only this user may write them.
    let status = Command::new("chmod")
        .args(["-R", "go+rX"])
        .arg(tree.base())
        .status()
        .expect("chmod");
    assert!(status.success());
    let as_nobody = run_as_nobody(&tree, &["list", "skills", "--json"]);
    worker.kill().expect("kill");
    worker.wait().expect("reap");
    assert!(as_nobody.status.success(), "{}", text(&as_nobody.stderr));
    // Their read could not wait on the worker's watcher, and says so.
    let warned = text(&as_nobody.stderr);
    assert!(
        warned.contains("cannot leave a sync cookie in "),
        "{warned}"
    );
    let theirs: Value = serde_json::from_slice(&as_nobody.stdout).expect("json");
    assert_eq!(theirs["skills"], own["skills"]);
}

/// A command run by a user who may not list a configured folder says so (it served nothing
/// from it without a word).
#[test]
fn a_folder_this_user_may_not_list_is_named() {
    if !may_run_as_nobody("a folder another user may not list") {
        return;
    }
    let tree = sample_tree();
    let status = Command::new("chmod")
        .args(["-R", "go+rwX"])
        .arg(tree.base())
        .status()
        .expect("chmod");
    assert!(status.success());
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(tree.path("skills"), fs::Permissions::from_mode(0o700)).expect("chmod");
    let output = run_as_nobody(&tree, &["list", "skills"]);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "skills_folder {} cannot be listed (",
            tree.path("skills").display()
        )),
        "{stderr}"
    );
}

/// A second worker on the same index stops at once and names the worker that holds it.
#[test]
fn a_second_worker_names_the_worker_that_holds_the_index() {
    let tree = sample_tree();
    let mut first = worker_holding_the_index(&tree);
    let pid = first.id();
    let stderr = fails(&tree, &["--url", "ws://127.0.0.1:1"]);
    first.kill().expect("kill");
    first.wait().expect("reap");
    assert!(
        stderr.contains(&format!(
            "the index at {} is held by a running iii-directory worker (pid {pid}); stop it first",
            tree.config().paths.index_path.display()
        )),
        "{stderr}"
    );
}
