//! The writer's in-memory copy of what reconcile compares disk against: the file table, the
//! folder facts, and (loaded on the first reconcile that changes something) the parsed
//! documents and the current views.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use serde::de::DeserializeOwned;

use super::RACY_WINDOW;
use crate::doc::{Hash, ParsedDoc};
use crate::error::{Error, Result};
use crate::index::records::{FileMeta, decode};
use crate::index::tables::*;
use crate::index::views::Views;
use crate::roots::Root;

/// See the module doc. A boot with nothing changed only loads the file and folder tables.
pub struct Mirror {
    pub files: BTreeMap<(Root, String), FileMeta>,
    pub top_dirs: BTreeSet<(Root, String)>,
    pub unreadable: BTreeMap<(Root, String), String>,
    pub docs: Option<HashMap<Hash, ParsedDoc>>,
    pub views: Option<Views>,
    pub revision: u64,
    /// Whether the views were ever computed into this index (a new index has none, and must
    /// compute them even when the roots are empty: the bundled skills are rows too).
    pub computed: bool,
    /// See [`RACY_WINDOW`]; tests that control their own timing set it lower.
    pub racy_window: Duration,
    /// Revisions the change log keeps (`change_log_revisions`).
    pub log_keep: u64,
}

impl Default for Mirror {
    fn default() -> Mirror {
        Mirror {
            files: BTreeMap::new(),
            top_dirs: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            docs: None,
            views: None,
            revision: 0,
            computed: false,
            racy_window: RACY_WINDOW,
            log_keep: crate::config::DEFAULT_CHANGE_LOG_REVISIONS,
        }
    }
}

impl Mirror {
    pub fn load(db: &redb::Database) -> Result<Mirror> {
        let txn = db.begin_read().map_err(Error::index)?;
        let files = decode_paths(
            &txn.open_table(FILES).map_err(Error::index)?,
            |v: &[u8]| decode(v),
        )?;
        let top_dirs = decode_paths(
            &txn.open_table(TOP_DIRS).map_err(Error::index)?,
            |()| Ok(()),
        )?;
        let unreadable = decode_paths(
            &txn.open_table(UNREADABLE).map_err(Error::index)?,
            |why: &str| Ok(why.to_string()),
        )?;
        let meta = txn.open_table(META).map_err(Error::index)?;
        let revision = match meta.get(META_REVISION).map_err(Error::index)? {
            Some(v) => decode(v.value())?,
            None => 0,
        };
        Ok(Mirror {
            files: files.into_iter().collect(),
            top_dirs: top_dirs.into_iter().map(|(key, ())| key).collect(),
            unreadable: unreadable.into_iter().collect(),
            computed: meta.get(META_RECONCILE).map_err(Error::index)?.is_some(),
            revision,
            ..Mirror::default()
        })
    }

    /// Loads the parsed documents and the views, when they are not in memory yet.
    pub fn load_rest(&mut self, txn: &WriteTransaction) -> Result<()> {
        if self.docs.is_none() {
            let table = txn.open_table(DOCS).map_err(Error::index)?;
            let mut docs = HashMap::new();
            for entry in table.iter().map_err(Error::index)? {
                let (k, v) = entry.map_err(Error::index)?;
                docs.insert(*k.value(), decode(v.value())?);
            }
            self.docs = Some(docs);
        }
        if self.views.is_none() {
            let skipped = decode_paths(
                &txn.open_table(SKIPPED).map_err(Error::index)?,
                |why: &str| Ok(why.to_string()),
            )?;
            self.views = Some(Views {
                skills: rows(txn, SKILLS)?,
                prompts: rows(txn, PROMPTS)?,
                agents: rows(txn, AGENTS)?,
                skipped: skipped.into_iter().collect(),
            });
        }
        Ok(())
    }

    /// The parsed documents (loaded by [`Mirror::load_rest`]).
    pub fn docs(&self) -> &HashMap<Hash, ParsedDoc> {
        self.docs.as_ref().expect("loaded by load_rest first")
    }
}

fn rows<T: DeserializeOwned>(
    txn: &WriteTransaction,
    def: redb::TableDefinition<&str, &[u8]>,
) -> Result<BTreeMap<String, T>> {
    let table = txn.open_table(def).map_err(Error::index)?;
    Ok(decode_rows(&table)?.into_iter().collect())
}
