//! The nine write functions on real files: every code path, every response shape, the exact
//! change event of a successful write (and none for a failed one), read-your-writes without a
//! reconcile, and a failed write leaving nothing behind (no file, no `*.tmp`).

use test_support::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::Tree;
use iii_directory::{ChangeEvent, Code, Family, SkipReason, Special};
use iii_directory::{Directory, ReadFunction, WriteFunction};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// A tree, its directory, and every event the directory published.
struct Env {
    tree: Tree,
    directory: Directory,
    events: Arc<Mutex<Vec<ChangeEvent>>>,
}

impl Env {
    fn new(setup: impl FnOnce(&Tree)) -> Env {
        Env::with_config(setup, |_| {})
    }

    fn with_config(
        setup: impl FnOnce(&Tree),
        adjust: impl FnOnce(&mut iii_directory::config::Config),
    ) -> Env {
        let tree = Tree::new();
        tree.mkdir("skills/iii").mkdir("agents");
        setup(&tree);
        let mut config = tree.config();
        adjust(&mut config);
        let directory = tree.open_with(config);
        let events: Arc<Mutex<Vec<ChangeEvent>>> = Arc::default();
        let sink = events.clone();
        directory.subscribe(Arc::new(move |e: &ChangeEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
        Env {
            tree,
            directory,
            events,
        }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.tree.path(rel)
    }

    fn event_count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    /// A successful write: exactly one event with this family and payload, no temporary file
    /// left anywhere, and the index equal to a fresh one.
    fn ok(&self, function: WriteFunction, request: Value, family: Family, payload: Value) -> Value {
        self.ok_installed(function, request, None, family, payload)
    }

    fn ok_installed(
        &self,
        function: WriteFunction,
        request: Value,
        installed: Option<&BTreeSet<String>>,
        family: Family,
        payload: Value,
    ) -> Value {
        let before = self.event_count();
        let response = self
            .directory
            .write(function, &request, installed)
            .unwrap_or_else(|e| panic!("{} {request} failed: {e}", function.id()));
        let events = self.events.lock().unwrap();
        assert_eq!(
            events.len(),
            before + 1,
            "{} {request}: exactly one event, got {:?}",
            function.id(),
            &events[before..]
        );
        assert_eq!(events[before].family, family, "{}", function.id());
        assert_eq!(events[before].payload, payload, "{}", function.id());
        drop(events);
        assert_eq!(temp_files(self.tree.base()), Vec::<String>::new());
        assert_matches_fresh(&self.tree, &self.directory);
        response
    }

    /// A failed write: no event, nothing on disk changed, no temporary file.
    fn err(&self, function: WriteFunction, request: Value) -> iii_directory::Error {
        self.err_installed(function, request, None)
    }

    fn err_installed(
        &self,
        function: WriteFunction,
        request: Value,
        installed: Option<&BTreeSet<String>>,
    ) -> iii_directory::Error {
        let disk = snapshot(self.tree.base());
        let before = self.event_count();
        let error = match self.directory.write(function, &request, installed) {
            Ok(v) => panic!("{} {request} should fail, answered {v}", function.id()),
            Err(e) => e,
        };
        assert_eq!(
            self.event_count(),
            before,
            "{} {request}: a failed write publishes nothing",
            function.id()
        );
        assert_eq!(
            snapshot(self.tree.base()),
            disk,
            "{} {request}: a failed write changes nothing on disk",
            function.id()
        );
        error
    }

    /// The error's code and its whole message.
    fn coded(&self, function: WriteFunction, request: Value) -> (Option<&'static str>, String) {
        let e = self.err(function, request);
        (e.code().map(Code::text), e.to_string())
    }

    fn read(&self, function: ReadFunction, request: Value) -> Value {
        common::call(&self.directory, function, request)
    }

    fn read_err(&self, function: ReadFunction, request: Value) -> String {
        common::call_err(&self.directory, function, request)
    }
}

/// Every file, folder and link under the base (the index folder excepted), with file contents
/// and link targets.
fn snapshot(base: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if child == "data" {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                // A link as itself: its target, never what it leads to.
                let target = fs::read_link(entry.path()).unwrap();
                out.insert(
                    format!("{child}@"),
                    Some(target.into_os_string().into_encoded_bytes()),
                );
            } else if kind.is_dir() {
                out.insert(format!("{child}/"), None);
                walk(&entry.path(), &child, out);
            } else {
                out.insert(child, Some(fs::read(entry.path()).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(base, "", &mut out);
    out
}

/// Temporary files under the base.
fn temp_files(base: &Path) -> Vec<String> {
    snapshot(base)
        .into_keys()
        .filter(|k| k.ends_with(".tmp"))
        .collect()
}

fn text(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn names(value: &Value, list: &str, key: &str) -> Vec<String> {
    value[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[key].as_str().unwrap().to_string())
        .collect()
}

fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

/// Every read answer of `directory` equals the answer of a fresh index built from scratch.
fn assert_matches_fresh(_tree: &Tree, directory: &Directory) {
    let fresh = common::fresh_index(directory.config());
    let (ours, theirs) = (common::dump(directory), common::dump(&fresh));
    assert!(
        ours == theirs,
        "index != fresh index:{}",
        common::dump_diff(&ours, &theirs)
    );
}

const BODY: &str = "# Heading\n\nSome body text.\n";

fn skill_event(op: &str, id: &str) -> Value {
    json!({"op": op, "namespace": id.split('/').next().unwrap(), "id": id})
}

fn named_event(op: &str, name: &str) -> Value {
    json!({"op": op, "name": name})
}

/// The standard tree most tests start from.
fn standard(tree: &Tree) {
    tree.write(
        "skills/mailer/index.md",
        "---\ntitle: Mailer\ntype: index\n---\n# Mailer\n\nSend mail.\n",
    )
    .write("skills/mailer/send.md", "# Send\n\nSend one mail.\n")
    .write("skills/mailer/spend.md", "# Spend\n\nSpend.\n")
    .write("skills/mailer/sender.md", "# Sender\n\nSender.\n")
    .write("skills/kit/SKILL.md", "# Kit\n\nA kit.\n")
    .write("skills/shell/index.md", "# Global shell\n\nGlobal.\n")
    .write("skills/shell/exec.md", "# Global exec\n\nGlobal exec.\n")
    .write("skills/iii/shell/index.md", "# Local shell\n\nLocal.\n")
    .write(
        ".agents/skills/impeccable/SKILL.md",
        "---\nname: impeccable\ndescription: Polish.\n---\nPolish things.\n",
    );
}

/// A valid system prompt file.
const PIRATE: &str = "---\ndescription: Talk like a pirate\n---\nArr.\n";

mod across_families;
mod agents;
mod conditional;
mod escape;
mod globals;
mod links;
mod skills_create;
mod skills_delete;
mod skills_update;
mod stale_index;
mod system_prompts;
