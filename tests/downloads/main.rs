//! Downloads and the workers registry, end to end on real files: the registry client and the
//! `directory::registry::workers::*` functions against a loopback stand-in for the registry
//! (`registry`), registry downloads with every refusal leaving the tree byte for byte as it was
//! (`from_registry`), repo downloads through real git over loopback HTTPS (`from_repo`), the
//! worker's surface and auto-download through the fake engine (`worker`), SIGKILL during
//! downloads (`crash`), and the time to land and index a 1,000-file bundle (`measure`).

use test_support::{common, fake_engine, worker_process};

mod clobber;
mod copies;
mod crash;
mod from_registry;
mod from_repo;
mod lock;
mod measure;
mod plans;
mod registry;
mod restore;
mod turns;
mod updates;
mod worker;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use iii_directory::ChangeEvent;
use iii_directory::Directory;
use iii_directory::config::Config;
use iii_directory::download::{self, DownloadFunction};
use iii_directory::registry::{Endpoint, Registry};
use serde_json::Value;
use test_support::loopback::registry::FakeRegistry;

/// A tree, a directory over it (writer, reconciled), a registry client pointed at a fake
/// registry, and the change events the directory published.
pub struct Setup {
    pub tree: common::Tree,
    pub directory: Arc<Directory>,
    pub registry: Registry,
    pub server: FakeRegistry,
    pub events: Arc<Mutex<Vec<ChangeEvent>>>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup::new()
    }
}

impl Setup {
    pub fn new() -> Setup {
        Setup::with(|_| {})
    }

    /// [`Setup::new`] with settings changed by `edit` before the directory opens.
    pub fn with(edit: impl FnOnce(&mut Config)) -> Setup {
        let server = FakeRegistry::start();
        let tree = common::Tree::new();
        tree.mkdir("skills/iii").mkdir("agents");
        let mut config = tree.config();
        config.settings.registry_url = format!("{}/", server.url());
        edit(&mut config);
        let directory = Arc::new(tree.open_with(config.clone()));
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        directory.subscribe(Arc::new(move |e: &ChangeEvent| {
            sink.lock().expect("events").push(e.clone())
        }));
        let live = directory.clone();
        let registry = Registry::new(move || Endpoint::from_settings(&live.settings()));
        Setup {
            tree,
            directory,
            registry,
            server,
            events,
        }
    }

    pub async fn download(
        &self,
        function: DownloadFunction,
        request: Value,
    ) -> Result<Value, String> {
        download::run(&self.directory, &self.registry, function, &request, &|_| {})
            .await
            .map_err(|e| e.to_string())
    }

    pub fn events(&self) -> Vec<Value> {
        self.events
            .lock()
            .expect("events")
            .iter()
            .map(|e| serde_json::json!({ "family": e.family.trigger_type(), "payload": e.payload }))
            .collect()
    }

    pub fn state(&self) -> std::collections::BTreeMap<String, String> {
        common::tree_state(self.tree.base())
    }
}

/// Polls `check` until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
