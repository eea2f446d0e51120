//! Fresh reads through symbolic links, at random: small trees with links across the four roots
//! (folder links within a root and between roots, into a shallow root's deeper folders, back
//! up, to links, to a root itself, broken, to files, out of the roots), then random changes
//! made by another process (`sh`), each followed by a read that must answer what a rescan of
//! the disk answers.
//!
//! Knobs (environment): `LINKS_FUZZ_SEEDS` (how many seeds), `LINKS_FUZZ_SEED_START` (the
//! first), `LINKS_FUZZ_ROUNDS` (changes per seed), `LINKS_FUZZ_KEEP_GOING=1` (a failing seed
//! does not stop the others: every failure is listed at the end), `LINKS_FUZZ_MINIMIZE=1` (a
//! failure is shrunk to a standalone test, printed), `LINKS_FUZZ_INSIDE_ONLY=1` (no link leads
//! out of the roots, and nothing outside them changes), `LINKS_FUZZ_OUTSIDE_CHANGES=1` (a change
//! out of the roots is judged too, see [`outside_changes`]), `LINKS_FUZZ_VERBOSE=1` (each
//! change).
//! The default, 8 seeds of 50 rounds, takes about 12 s in the debug profile; 60 seeds of 50
//! rounds about 75 s.
//! A failure prints its seed, round and change, the tree before it (files and links), and the
//! changes that led there.
//!
//! Long runs still find one kind of difference, a limit the project's notes name: the watcher
//! knows a link by the place it leads to and how it fails, not by the links its text passes
//! through, so when a change that makes or removes no link (a file renamed away from under a
//! file link on the way) or one in a folder no watch covers (on the way to a place out of the
//! roots) changes how a link fails, its `check` row keeps its old reason until the safety-net
//! reconcile (seeds 96, 144 and 177 of 1 to 240; what is served is not affected).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The folders a change never removes or renames: the roots, the folders above them, and the
/// index's.
const KEPT: [&str; 5] = [
    "skills",
    "skills/iii",
    ".agents",
    ".agents/skills",
    "agents",
];
const FOLDER_NAMES: [&str; 8] = ["a", "b", "c", "x", "deep", "sub", "system-prompts", "iii"];
const FILE_NAMES: [&str; 6] = ["index.md", "f.md", "g.md", "SKILL.md", "p.md", "a.md"];
const LINK_NAMES: [&str; 10] = [
    "l", "m", "up", "ali", "hop", "b.md", "k.md", "SKILL.md", "y", "sub",
];
/// Written as a link's text for a link that leads to an absolute path (`$BASE/…`).
const BASE: &str = "$BASE";
/// The change before the random ones: the watcher's first burst resolves every link again.
const WARM_UP: &str = "printf '# Warm\\n\\nx\\n' > skills/warm.md";

/// What is under the base folder (the index's `data/` aside), links not followed.
#[derive(Clone, Default, Debug, PartialEq)]
struct Disk {
    /// Folders, relative to the base folder.
    dirs: BTreeSet<String>,
    /// Regular files and their text.
    files: BTreeMap<String, String>,
    /// Links and their text (an absolute one under the base folder starts with [`BASE`]).
    links: BTreeMap<String, String>,
}

impl Disk {
    fn scan(base: &Path) -> Disk {
        let mut disk = Disk::default();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let Ok(entries) = fs::read_dir(base.join(&rel)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                if path == "data" {
                    continue;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_symlink() {
                    let text = fs::read_link(entry.path()).unwrap_or_default();
                    let text = text.to_string_lossy().into_owned();
                    let base_text = base.to_string_lossy();
                    let text = match text.strip_prefix(&*base_text) {
                        Some(rest) => format!("{BASE}{rest}"),
                        None => text,
                    };
                    disk.links.insert(path, text);
                } else if kind.is_dir() {
                    disk.dirs.insert(path.clone());
                    stack.push(path);
                } else if kind.is_file() {
                    let text = fs::read_to_string(entry.path()).unwrap_or_default();
                    disk.files.insert(path, text);
                }
            }
        }
        disk
    }

    /// The entries whose paths `keep` keeps.
    fn only(&self, keep: impl Fn(&str) -> bool) -> Disk {
        let mut kept = self.clone();
        kept.dirs.retain(|d| keep(d));
        kept.files.retain(|f, _| keep(f));
        kept.links.retain(|l, _| keep(l));
        kept
    }

    /// What lies out of the roots.
    fn outside(&self) -> Disk {
        self.only(|path| !within_the_roots(path))
    }

    /// Every path there is, of any kind.
    fn exists(&self, path: &str) -> bool {
        self.dirs.contains(path) || self.files.contains_key(path) || self.links.contains_key(path)
    }

    /// The folders a change may make things in: every folder but the index's (the base
    /// folder too, as a link's target).
    fn folders(&self) -> Vec<String> {
        self.dirs.iter().cloned().collect()
    }

    /// Folders a change may remove or rename.
    fn movable(&self) -> Vec<String> {
        self.dirs
            .iter()
            .filter(|d| !KEPT.contains(&d.as_str()))
            .cloned()
            .collect()
    }

    fn depth(path: &str) -> usize {
        path.split('/').count()
    }

    /// A listing for a failure message, with one line per entry.
    fn listing(&self) -> String {
        let mut out = String::new();
        for dir in &self.dirs {
            out.push_str(&format!("  dir  {dir}\n"));
        }
        for (file, text) in &self.files {
            out.push_str(&format!("  file {file} {text:?}\n"));
        }
        for (link, text) in &self.links {
            out.push_str(&format!("  link {link} -> {text}\n"));
        }
        out
    }
}

/// The text of a link in the folder `from` to `to` (both relative to the base folder): `..`
/// up to their common folder, then down.
fn relative(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let to: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

fn join(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}

/// A document's text, each kind reading it as one of its own (a skill, a `SKILL.md`, a system
/// prompt, an agent profile).
fn printf(path: &str, v: u64) -> String {
    format!(
        "printf -- '---\\nname: n{v}\\ndescription: d{v}\\n---\\n# T{v}\\n\\nBody.\\n' > {path}"
    )
}

/// A link's text leading into the tree as it is: to a folder, a file, another link, back up,
/// to itself, to nothing yet, through another link then up, or an absolute path.
fn link_text(rng: &mut Rng, disk: &Disk, folder: &str) -> String {
    let files: Vec<&String> = disk.files.keys().filter(|p| in_roots(p)).collect();
    let links: Vec<&String> = disk.links.keys().filter(|p| in_roots(p)).collect();
    let dirs: Vec<String> = disk.folders().into_iter().filter(|p| in_roots(p)).collect();
    loop {
        let text = match rng.below(12) {
            0..=3 => relative(folder, rng.pick(&dirs).expect("the roots")),
            4 => relative(folder, rng.pick(KEPT.as_slice()).expect("roots")),
            5 => match rng.pick(&files) {
                Some(file) => relative(folder, file),
                None => continue,
            },
            6 => match rng.pick(&links) {
                Some(link) => relative(folder, link),
                None => continue,
            },
            7 if !inside_only() => ["..", ".", "../..", "../../.."][rng.below(4)].to_string(),
            7 => ["..", "."][rng.below(2)].to_string(),
            8 => {
                let dir = rng.pick(&dirs).expect("the roots");
                let gone = ["gone", "gone.md", "gone/deeper"][rng.below(3)];
                relative(folder, &join(dir, gone))
            }
            9 => match rng.pick(&links) {
                Some(link) => {
                    let up = relative(folder, link);
                    let name = rng.pick(&FOLDER_NAMES).expect("names");
                    format!("{up}/../{name}")
                }
                None => continue,
            },
            _ => {
                let dir = rng.pick(&dirs).expect("the roots");
                format!("{BASE}/{dir}")
            }
        };
        if inside_only() && !text.starts_with(BASE) {
            let mut parts: Vec<&str> = folder.split('/').collect();
            for part in text.split('/') {
                match part {
                    ".." => {
                        parts.pop();
                    }
                    "." | "" => {}
                    _ => parts.push(part),
                }
            }
            if !in_roots(&parts.join("/")) || parts.is_empty() {
                continue;
            }
        }
        return text;
    }
}

/// `LINKS_FUZZ_INSIDE_ONLY=1`: links lead only to paths inside the roots, and nothing is made
/// outside them (links that leave the roots, and changes to what they lead to, which no watch
/// hears, are left out).
fn inside_only() -> bool {
    flag("LINKS_FUZZ_INSIDE_ONLY")
}

/// `LINKS_FUZZ_OUTSIDE_CHANGES=1`: a round whose change altered something out of the roots
/// (under `outside/`, in `.agents/` beside the agents skills root, or through a link that leads
/// out) is judged too. Nothing out of the roots is watched, so what such a change does to the
/// links in the roots is brought level by the safety-net reconcile, not by the next read (a
/// limit the project's notes name). By default such a round is not judged: the index is
/// reconciled whole, and the next round goes on from there.
fn outside_changes() -> bool {
    flag("LINKS_FUZZ_OUTSIDE_CHANGES")
}

/// Whether `path` is a root's or lies in one.
fn within_the_roots(path: &str) -> bool {
    ["skills", ".agents/skills", "agents"]
        .iter()
        .any(|root| path == *root || path.starts_with(&format!("{root}/")))
}

/// Whether `path` is one a link may lead to, or a change be made in (see [`inside_only`]).
fn in_roots(path: &str) -> bool {
    !inside_only()
        || KEPT.iter().any(|root| {
            *root != ".agents" && (path == *root || path.starts_with(&format!("{root}/")))
        })
}

/// A link's text as `sh` writes it (an absolute one from the base folder, its working folder).
fn shell_text(text: &str) -> String {
    match text.strip_prefix(BASE) {
        Some(rest) => format!("\"$PWD{rest}\""),
        None => format!("'{text}'"),
    }
}

/// One random change, as a script `sh` runs in the base folder: `None` when the one drawn
/// does not apply to this tree (the caller draws again).
fn change(rng: &mut Rng, disk: &Disk, base: &Path, setup: bool) -> Option<String> {
    // Out of the roots only while the tree is set up, unless such changes are judged.
    let may_change =
        |path: &str| in_roots(path) && (setup || outside_changes() || within_the_roots(path));
    let folders: Vec<String> = disk
        .folders()
        .into_iter()
        .filter(|d| Disk::depth(d) <= 5 && may_change(d))
        .collect();
    let movable: Vec<String> = disk
        .movable()
        .into_iter()
        .filter(|p| may_change(p))
        .collect();
    let files: Vec<&String> = disk.files.keys().filter(|p| may_change(p)).collect();
    let links: Vec<&String> = disk.links.keys().filter(|p| may_change(p)).collect();
    let many_links = disk.links.len() >= 16;
    let v = rng.next() % 100_000;
    let op = if setup {
        [3, 6, 6, 6, 0, 0][rng.below(6)]
    } else {
        rng.below(24)
    };
    let script = match op {
        // Write (or overwrite, or write through a file link) a document.
        0..=3 => {
            let folder = rng.pick(&folders)?;
            let path = join(folder, rng.pick(&FILE_NAMES)?);
            if disk.dirs.contains(&path) || base.join(&path).is_dir() {
                return None;
            }
            printf(&path, v)
        }
        // Write a document through a link to a folder.
        4 => {
            let link = rng.pick(&links)?;
            if !base.join(link).is_dir() {
                return None;
            }
            let path = join(link, rng.pick(&FILE_NAMES)?);
            if base.join(&path).is_dir() {
                return None;
            }
            printf(&path, v)
        }
        // Remove a file.
        5 => format!("rm {}", rng.pick(&files)?),
        // Make a folder with documents, one level deeper too.
        6 | 7 => {
            let parent = rng.pick(&folders)?;
            let folder = join(parent, rng.pick(&FOLDER_NAMES)?);
            if disk.exists(&folder) || Disk::depth(&folder) > 5 {
                return None;
            }
            let sub = join(&folder, rng.pick(&FOLDER_NAMES)?);
            let mut script = format!("mkdir -p {sub}");
            for _ in 0..1 + rng.below(2) {
                let at = if rng.chance(50) { &folder } else { &sub };
                script.push_str(" && ");
                script.push_str(&printf(&join(at, rng.pick(&FILE_NAMES)?), v));
            }
            script
        }
        // Rename a folder, within its root or to another (or out of the roots).
        8 | 9 => {
            let from = rng.pick(&movable)?;
            let parent = rng.pick(&folders)?;
            if parent == from || parent.starts_with(&format!("{from}/")) {
                return None;
            }
            let to = join(parent, rng.pick(&FOLDER_NAMES)?);
            if disk.exists(&to) {
                return None;
            }
            format!("mv -T {from} {to}")
        }
        // Remove a folder.
        10 => format!("rm -rf {}", rng.pick(&movable)?),
        // Make a link.
        11..=14 if !many_links || setup => {
            let folder = rng.pick(&folders)?;
            if folder.is_empty() {
                return None;
            }
            let path = join(folder, rng.pick(&LINK_NAMES)?);
            if disk.exists(&path) {
                return None;
            }
            let text = link_text(rng, disk, folder);
            format!("ln -s {} {path}", shell_text(&text))
        }
        // Point a link elsewhere.
        11..=17 => {
            let link = rng.pick(&links)?;
            let text = link_text(rng, disk, parent_of(link));
            format!("ln -sfn {} {link}", shell_text(&text))
        }
        // Remove a link.
        18 | 19 => format!("rm {}", rng.pick(&links)?),
        // Rename a link (a relative one then leads elsewhere).
        20 => {
            let link = rng.pick(&links)?;
            let parent = rng.pick(&folders)?;
            let to = join(parent, rng.pick(&LINK_NAMES)?);
            if disk.exists(&to) || parent.is_empty() {
                return None;
            }
            format!("mv -T {link} {to}")
        }
        // Rename a new link, or a new file, over a link.
        21 | 22 => {
            let link = rng.pick(&links)?;
            let folder = parent_of(link);
            let tmp = join(folder, "tmp-new");
            if rng.chance(70) {
                let text = link_text(rng, disk, folder);
                format!("ln -s {} {tmp} && mv -T {tmp} {link}", shell_text(&text))
            } else {
                format!("{} && mv -T {tmp} {link}", printf(&tmp, v))
            }
        }
        // Rename a file (over another, as an editor saves, or elsewhere).
        _ => {
            let from = rng.pick(&files)?;
            let to = if rng.chance(50) {
                join(parent_of(from), rng.pick(&FILE_NAMES)?)
            } else {
                join(rng.pick(&folders)?, rng.pick(&FILE_NAMES)?)
            };
            if *from == &to || base.join(&to).is_dir() {
                return None;
            }
            format!("mv -T {from} {to}")
        }
    };
    Some(script)
}

/// Runs `script` in the base folder; whether it succeeded (a change that fails halfway, a
/// rename into a folder a link replaced, is a change all the same).
fn run(base: &Path, script: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(base)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("sh")
        .success()
}

/// How the read after a change went: the time of its first call (which catches up), and how
/// it differs from a rescan (empty: it does not).
fn compare(env: &Env) -> (Duration, String) {
    let started = Instant::now();
    let _ = env
        .directory
        .read(ReadFunction::SkillsList, &json!({}), None);
    let first = started.elapsed();
    let ours = common::dump(&env.directory);
    let fresh = common::dump(&common::fresh_index(&env.tree.config()));
    let mut diff = common::dump_diff(&ours, &fresh);
    if !diff.is_empty() {
        diff.push_str(&rows_diff(&ours, &fresh));
    }
    (first, diff)
}

/// The rows of the lists that differ (the ones only the index has, and only the rescan), each
/// whole: [`common::dump_diff`] cuts an answer short.
fn rows_diff(
    ours: &BTreeMap<String, Result<Value, String>>,
    fresh: &BTreeMap<String, Result<Value, String>>,
) -> String {
    let rows = |answer: Option<&Result<Value, String>>| -> Vec<String> {
        let Some(Ok(value)) = answer else {
            return Vec::new();
        };
        let list = match value {
            Value::Array(list) => list.clone(),
            Value::Object(fields) => fields
                .values()
                .find_map(|v| v.as_array().cloned())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        list.iter().map(Value::to_string).collect()
    };
    let mut out = String::new();
    for (key, answer) in ours {
        if fresh.get(key) == Some(answer) {
            continue;
        }
        let (mine, theirs) = (rows(Some(answer)), rows(fresh.get(key)));
        for row in mine.iter().filter(|row| !theirs.contains(row)) {
            out.push_str(&format!("\n{key}: only in the index: {row}"));
        }
        for row in theirs.iter().filter(|row| !mine.contains(row)) {
            out.push_str(&format!("\n{key}: only in the rescan: {row}"));
        }
    }
    out
}

/// A read slower than this is reported.
const SLOW: Duration = Duration::from_secs(1);

struct Failure {
    seed: u64,
    round: usize,
    change: String,
    before: Disk,
    message: String,
}

/// One seed: a random tree, the warm-up change, then `rounds` random changes, each read.
fn run_seed(
    seed: u64,
    rounds: usize,
    slow: &mut Vec<String>,
    unjudged: &mut usize,
) -> Result<(), Box<Failure>> {
    let mut rng = Rng::new(seed);
    let setup: RefCell<Vec<String>> = RefCell::default();
    let env = Env::start(|tree| {
        tree.mkdir("outside/o")
            .write("outside/o/index.md", "# Out\n\nx\n");
        let made = 6 + rng.below(10);
        while setup.borrow().len() < made {
            let disk = Disk::scan(tree.base());
            if let Some(script) = change(&mut rng, &disk, tree.base(), true) {
                run(tree.base(), &script);
                setup.borrow_mut().push(script);
            }
        }
    });
    let base = env.tree.base().to_path_buf();
    let verbose = flag("LINKS_FUZZ_VERBOSE");
    let mut history: Vec<String> = Vec::new();
    for round in 0..=rounds {
        let before = Disk::scan(&base);
        let script = if round == 0 {
            WARM_UP.to_string()
        } else {
            loop {
                if let Some(script) = change(&mut rng, &before, &base, false) {
                    break script;
                }
            }
        };
        let ok = run(&base, &script);
        let shown = if ok {
            script.clone()
        } else {
            format!("{script}   (failed)")
        };
        if verbose {
            eprintln!("seed {seed} round {round}: {shown}");
        }
        if !outside_changes() && Disk::scan(&base).outside() != before.outside() {
            env.directory.reconcile().expect("reconcile");
            *unjudged += 1;
            history.push(format!(
                "{shown}   (out of the roots: reconciled, not judged)"
            ));
            continue;
        }
        let (first, diff) = compare(&env);
        if first > SLOW {
            let line = format!("seed {seed} round {round}: a read took {first:?} after {shown}");
            eprintln!("links_fuzz: {line}");
            slow.push(line);
        }
        if !diff.is_empty() {
            let message = format!(
                "links fuzz: seed {seed}, round {round}: the read after `{shown}` differs from \
                 a rescan:{diff}\n\nthe tree before the change:\n{}\nthe tree after it:\n{}\
                 \nthe setup (before the watcher started):\n  {}\nthe changes (each read):\n  {}\n\
                 replay: LINKS_FUZZ_SEED_START={seed} LINKS_FUZZ_SEEDS=1 \
                 LINKS_FUZZ_ROUNDS={round}\n",
                before.listing(),
                Disk::scan(&base).listing(),
                setup.borrow().join("\n  "),
                history.join("\n  "),
            );
            return Err(Box::new(Failure {
                seed,
                round,
                change: script,
                before,
                message,
            }));
        }
        history.push(shown);
    }
    Ok(())
}

/// Random trees of links across the four roots, and random changes: the read after each is
/// what a rescan answers.
#[test]
fn random_changes_around_random_links_are_in_the_next_read() {
    let seeds = knob("LINKS_FUZZ_SEEDS", 8);
    let start = knob("LINKS_FUZZ_SEED_START", 1);
    let rounds = knob("LINKS_FUZZ_ROUNDS", 50) as usize;
    let keep_going = flag("LINKS_FUZZ_KEEP_GOING");
    let minimize = flag("LINKS_FUZZ_MINIMIZE");
    let mut failures: Vec<String> = Vec::new();
    let mut slow: Vec<String> = Vec::new();
    let mut unjudged = 0;
    // Shrunk failures by their shape, with the seeds and rounds that gave each.
    let mut distinct: BTreeMap<String, (String, Vec<(u64, usize)>)> = BTreeMap::new();
    let started = Instant::now();
    for seed in start..start + seeds {
        let seed_started = Instant::now();
        let outcome = run_seed(seed, rounds, &mut slow, &mut unjudged);
        if keep_going {
            eprintln!(
                "links_fuzz: seed {seed}: {} in {:?}",
                if outcome.is_ok() { "ok" } else { "FAILED" },
                seed_started.elapsed()
            );
        }
        if let Err(failure) = outcome {
            eprintln!("{}", failure.message);
            let mut message = failure.message.clone();
            if minimize {
                let repro = shrink(&failure);
                eprintln!("{repro}");
                message.push_str(&repro);
                let shape: Vec<&str> = repro
                    .lines()
                    .filter(|line| !line.starts_with("fn links_fuzz_seed_"))
                    .collect();
                distinct
                    .entry(shape.join("\n"))
                    .or_insert_with(|| (repro.clone(), Vec::new()))
                    .1
                    .push((seed, failure.round));
            }
            failures.push(message);
            if !keep_going {
                break;
            }
        }
    }
    for (repro, cases) in distinct.values() {
        eprintln!("links_fuzz: a distinct failure, at (seed, round) {cases:?}:{repro}");
    }
    eprintln!(
        "links_fuzz: {seeds} seeds × {rounds} rounds in {:?}: {} failed, {} slow reads, \
         {unjudged} changes out of the roots not judged",
        started.elapsed(),
        failures.len(),
        slow.len()
    );
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// --- Shrinking a failure to a standalone test ---------------------------------------------

/// What `Env::start` makes before its setup runs.
fn env_defaults() -> Disk {
    let env = Env::start(|_| {});
    Disk::scan(env.tree.base())
}

/// Makes `tree` hold exactly `disk`.
fn build(tree: &Tree, disk: &Disk) {
    let now = Disk::scan(tree.base());
    for top in now.dirs.iter().filter(|d| !d.contains('/')) {
        fs::remove_dir_all(tree.path(top)).unwrap();
    }
    for file in now.files.keys().filter(|f| !f.contains('/')) {
        fs::remove_file(tree.path(file)).unwrap();
    }
    for dir in &disk.dirs {
        tree.mkdir(dir);
    }
    for (file, text) in &disk.files {
        tree.write(file, text);
    }
    for (link, text) in &disk.links {
        let path = tree.path(link);
        match text.strip_prefix(BASE) {
            Some(rest) => symlink(tree.path(rest.trim_start_matches('/')), path),
            None => symlink(text, path),
        }
        .unwrap();
    }
}

/// Whether `disk`, watched, then the warm-up change, then `script`, gives a read that differs
/// from a rescan.
fn fails(disk: &Disk, script: &str) -> bool {
    let env = Env::start(|tree| build(tree, disk));
    let base = env.tree.base().to_path_buf();
    run(&base, WARM_UP);
    if !compare(&env).1.is_empty() {
        return false;
    }
    run(&base, script);
    !compare(&env).1.is_empty()
}

/// `disk` without `path` and what is under it.
fn without(disk: &Disk, path: &str) -> Disk {
    disk.only(|p| p != path && !p.starts_with(&format!("{path}/")))
}

/// `disk` without a link or file at `path` (a folder is to be made there).
fn without_link(disk: &Disk, path: &str) -> Disk {
    let mut less = disk.clone();
    less.files.remove(path);
    less.links.remove(path);
    less
}

/// The failure's tree made as small as it still fails with (entries removed one at a time
/// while it does), as a test to paste into `fresh.rs`.
fn shrink(failure: &Failure) -> String {
    let script = &failure.change;
    if !fails(&failure.before, script) {
        return format!(
            "\nshrink: the tree before round {} does not fail on its own (the watcher's \
             history matters): replay the seed\n",
            failure.round
        );
    }
    let mut disk = failure.before.clone();
    // `skills/warm.md` is made again by the warm-up.
    disk.files.remove("skills/warm.md");
    // What `Env::start` makes stays, as the test will have it anyway.
    let defaults = env_defaults();
    let kept = |path: &String, disk: &Disk| {
        KEPT.contains(&path.as_str())
            || defaults.dirs.contains(path)
            || defaults
                .files
                .get(path)
                .is_some_and(|text| disk.files.get(path) == Some(text))
    };
    // What the changes took from `Env::start`'s tree (or changed in it) is put back, where
    // it still fails so: the test need not undo it.
    for path in defaults.dirs.iter().chain(defaults.files.keys()) {
        if kept(path, &disk) {
            continue;
        }
        let mut back = disk.clone();
        for ancestor in Path::new(path).ancestors().skip(1) {
            let ancestor = ancestor.to_string_lossy().into_owned();
            if !ancestor.is_empty() {
                back = without_link(&back, &ancestor);
                back.dirs.insert(ancestor);
            }
        }
        back = without(&back, path);
        match defaults.files.get(path) {
            Some(text) => {
                back.files.insert(path.clone(), text.clone());
            }
            None => {
                back.dirs.insert(path.clone());
            }
        }
        if fails(&back, script) {
            disk = back;
        }
    }
    loop {
        let mut smaller = false;
        let candidates: Vec<String> = disk
            .dirs
            .iter()
            .chain(disk.links.keys())
            .chain(disk.files.keys())
            .filter(|path| !kept(path, &disk))
            .cloned()
            .collect();
        for path in candidates {
            if !disk.exists(&path) {
                continue;
            }
            let less = without(&disk, &path);
            if fails(&less, script) {
                disk = less;
                smaller = true;
            }
        }
        if !smaller {
            break;
        }
    }
    let again = (0..3).filter(|_| fails(&disk, script)).count();
    format!(
        "\nshrunk (fails {again} of 3 runs again):\n{}\n",
        repro_test(failure, &disk)
    )
}

/// `disk` and `script` as a test in the style of `fresh.rs`.
fn repro_test(failure: &Failure, disk: &Disk) -> String {
    let defaults = env_defaults();
    let mut setup = String::new();
    // What `Env::start` made that the tree lacks.
    let mut removed: Vec<&String> = Vec::new();
    for path in defaults.dirs.iter().chain(defaults.files.keys()) {
        if !disk.exists(path) && !removed.iter().any(|r| path.starts_with(&format!("{r}/"))) {
            removed.push(path);
        }
    }
    for path in removed {
        setup.push_str(&format!("        tree.remove({path:?});\n"));
    }
    for dir in &disk.dirs {
        let holds = |p: &String| p.starts_with(&format!("{dir}/"));
        let empty = !disk.dirs.iter().any(holds)
            && !disk.files.keys().any(holds)
            && !disk.links.keys().any(holds);
        if empty && !defaults.dirs.contains(dir) {
            setup.push_str(&format!("        tree.mkdir({dir:?});\n"));
        }
    }
    for (file, text) in &disk.files {
        if defaults.files.get(file) != Some(text) {
            setup.push_str(&format!("        tree.write({file:?}, {text:?});\n"));
        }
    }
    let mut mkdirs = BTreeSet::new();
    for (link, text) in &disk.links {
        let parent = parent_of(link);
        let holds = |p: &String| p.starts_with(&format!("{parent}/"));
        let made = disk.files.keys().any(holds) || disk.dirs.iter().any(holds);
        if !made && !defaults.dirs.contains(parent) && mkdirs.insert(parent) {
            setup.push_str(&format!("        tree.mkdir({parent:?});\n"));
        }
        let target = match text.strip_prefix(BASE) {
            Some(rest) => format!("tree.path({:?})", rest.trim_start_matches('/')),
            None => format!("{text:?}"),
        };
        setup.push_str(&format!(
            "        std::os::unix::fs::symlink({target}, tree.path({link:?})).unwrap();\n"
        ));
    }
    format!(
        "#[test]\nfn links_fuzz_seed_{}_round_{}() {{\n    let env = Env::start(|tree| {{\n{setup}    }});\n    \
         sh(&env, {WARM_UP:?});\n    assert_as_rescan(&env, \"the warm-up\");\n    \
         sh(&env, {:?});\n    assert_as_rescan(&env, {:?});\n}}",
        failure.seed, failure.round, failure.change, failure.change
    )
}
