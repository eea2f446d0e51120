//! The writer's in-memory copy of what reconcile compares disk against: the file table (stat
//! and content hash per file), how many files hold each content, the folder facts, and which
//! files are system prompts. Parsed documents and view rows are not kept here: a reconcile
//! reads the few it needs from its transaction (see `parts`), so the writer's memory follows
//! the number of files, not their content.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use redb::ReadableDatabase;

use super::RACY_WINDOW;
use crate::doc::Hash;
use crate::error::{Error, Result};
use crate::index::records::{FileMeta, decode};
use crate::index::tables::*;
use crate::index::views;
use crate::roots::Root;
use crate::rules::skip::SkipReason;

/// See the module doc. A boot with nothing changed only loads the file and folder tables.
pub struct Mirror {
    /// Change it through [`Mirror::insert_file`] and [`Mirror::remove_file`], which keep
    /// `prompt_files` in step and note the contents a file took or left.
    pub files: BTreeMap<(Root, String), FileMeta>,
    /// How many files of `files` hold each content. The docs and text ids tables hold exactly
    /// these hashes: a content whose count falls to zero is garbage, found without looking at
    /// every file (see [`Moves`]).
    pub contents: HashMap<Hash, u32>,
    /// The keys of `files` that are system prompts (`views::is_prompt_file`).
    pub prompt_files: BTreeSet<(Root, String)>,
    pub top_dirs: BTreeSet<(Root, String)>,
    pub unreadable: crate::index::walk::Unreadable,
    pub revision: u64,
    /// The texts store key the next new text gets ([`META_NEXT_TEXT`]).
    pub next_text: u64,
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
            contents: HashMap::new(),
            prompt_files: BTreeSet::new(),
            top_dirs: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            revision: 0,
            next_text: 0,
            computed: false,
            racy_window: RACY_WINDOW,
            log_keep: crate::config::DEFAULT_CHANGE_LOG_REVISIONS,
        }
    }
}

impl Mirror {
    /// The roots where the last walk turned a path through links away for the bound on paths
    /// into one folder (see `walk::walk_scoped`).
    pub fn bounded_roots(&self) -> BTreeSet<Root> {
        self.unreadable
            .iter()
            .filter(|(_, why)| matches!(why, SkipReason::TooManyLinkedPaths))
            .map(|((root, _), _)| *root)
            .collect()
    }

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
            |why: &[u8]| decode(why),
        )?;
        let meta = txn.open_table(META).map_err(Error::index)?;
        let revision = meta_u64(&meta, META_REVISION)?.unwrap_or(0);
        let next_text = meta_u64(&meta, META_NEXT_TEXT)?.unwrap_or(0);
        let files: BTreeMap<(Root, String), FileMeta> = files.into_iter().collect();
        let mut contents = HashMap::new();
        for hash in files.values().filter_map(|m| m.content.as_ref().ok()) {
            *contents.entry(*hash).or_insert(0) += 1;
        }
        Ok(Mirror {
            prompt_files: views::prompt_files(files.keys()),
            contents,
            files,
            top_dirs: top_dirs.into_iter().map(|(key, ())| key).collect(),
            unreadable: unreadable.into_iter().collect(),
            computed: meta.get(META_RECONCILE).map_err(Error::index)?.is_some(),
            revision,
            next_text,
            ..Mirror::default()
        })
    }

    pub fn insert_file(&mut self, key: (Root, String), meta: FileMeta, moves: &mut Moves) {
        if views::is_prompt_file(key.0, &key.1) {
            self.prompt_files.insert(key.clone());
        }
        moves.took(&meta);
        if let Some(old) = self.files.insert(key, meta) {
            moves.left(&old);
        }
    }

    pub fn remove_file(&mut self, key: &(Root, String), moves: &mut Moves) {
        self.prompt_files.remove(key);
        if let Some(old) = self.files.remove(key) {
            moves.left(&old);
        }
    }

    /// Applies a reconcile's moves to [`Mirror::contents`]; returns the contents no file holds
    /// any more.
    pub fn count(&mut self, moves: Moves) -> Vec<Hash> {
        for hash in moves.taken {
            *self.contents.entry(hash).or_insert(0) += 1;
        }
        let mut orphans = Vec::new();
        for hash in moves.left {
            if let Some(count) = self.contents.get_mut(&hash) {
                *count -= 1;
                if *count == 0 {
                    self.contents.remove(&hash);
                    orphans.push(hash);
                }
            }
        }
        orphans
    }
}

/// The contents files took and left during one reconcile, applied to the counts at its end
/// (all taken first, so a content that moved from one file to another is never counted as
/// held by none).
#[derive(Default)]
pub struct Moves {
    taken: Vec<Hash>,
    left: Vec<Hash>,
}

impl Moves {
    fn took(&mut self, meta: &FileMeta) {
        if let Ok(hash) = &meta.content {
            self.taken.push(*hash);
        }
    }

    fn left(&mut self, meta: &FileMeta) {
        if let Ok(hash) = &meta.content {
            self.left.push(*hash);
        }
    }
}
