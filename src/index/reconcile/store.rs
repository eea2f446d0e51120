//! The writes a reconcile makes into its transaction: files and their contents, folder facts,
//! and the view rows that changed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rayon::prelude::*;
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, Table, WriteTransaction};
use serde::Serialize;

use super::mirror::{Mirror, Moves};
use super::read::Read;
use super::retired;
use crate::doc::{Hash, ParsedDoc};
use crate::error::{Error, Result};
use crate::index::records::encode;
use crate::index::tables::*;
use crate::index::texts;
use crate::index::views::{Changes, Views};
use crate::index::walk::Unreadable;
use crate::roots::Root;

/// The index tables a file read lands in: the file entry by `(root, relative path)`, the parse,
/// the spec checks and the key of the text by content hash. (The text goes to the texts store, see
/// [`crate::index::texts`].)
pub struct FileTables<'txn> {
    files: Table<'txn, (u8, &'static str), &'static [u8]>,
    docs: Table<'txn, &'static [u8; 32], &'static [u8]>,
    spec: Table<'txn, &'static [u8; 32], &'static [u8]>,
    vectors: Table<'txn, &'static [u8; 32], &'static [u8]>,
    retired: Table<'txn, &'static [u8; 32], &'static [u8]>,
    /// The fingerprint of the model the stored vectors are of (see [`retired`]).
    model: Option<u64>,
    text_ids: Table<'txn, &'static [u8; 32], u64>,
    garbage: Table<'txn, u64, ()>,
}

impl<'txn> FileTables<'txn> {
    pub fn open(txn: &'txn WriteTransaction) -> Result<FileTables<'txn>> {
        let model = {
            let meta = txn.open_table(META).map_err(Error::index)?;
            let model = meta.get(META_VECTORS_MODEL).map_err(Error::index)?;
            model.map(|m| retired::model_print(m.value()))
        };
        Ok(FileTables {
            files: txn.open_table(FILES).map_err(Error::index)?,
            docs: txn.open_table(DOCS).map_err(Error::index)?,
            spec: txn.open_table(SPEC).map_err(Error::index)?,
            vectors: txn.open_table(VECTORS).map_err(Error::index)?,
            retired: txn.open_table(RETIRED_VECTORS).map_err(Error::index)?,
            model,
            text_ids: txn.open_table(TEXT_IDS).map_err(Error::index)?,
            garbage: txn.open_table(TEXTS_GARBAGE).map_err(Error::index)?,
        })
    }

    /// Stores one batch of reads: the file entries that changed, and the new parses in hash
    /// order, so that a cold build's inserts run in key order within each batch. Each new text
    /// gets the next texts store key (`mirror.next_text`); returns them with their keys, in
    /// key order, for the texts store. New parses are also put in `fresh`, by content hash, for
    /// the views.
    pub fn store(
        &mut self,
        reads: Vec<Read>,
        mirror: &mut Mirror,
        moves: &mut Moves,
        fresh: &mut HashMap<Hash, ParsedDoc>,
    ) -> Result<texts::Batch> {
        let mut new = Vec::new();
        for read in reads {
            if let (Some(content), Ok(hash)) = (read.new, &read.meta.content) {
                new.push((*hash, content));
            }
            if mirror.files.get(&read.key) != Some(&read.meta) {
                self.files
                    .insert(
                        (read.key.0 as u8, read.key.1.as_str()),
                        encode(&read.meta).as_slice(),
                    )
                    .map_err(Error::index)?;
                mirror.insert_file(read.key, read.meta, moves);
            }
        }
        new.sort_unstable_by_key(|(hash, _)| *hash);
        for (hash, content) in &new {
            self.docs
                .insert(hash, content.encoded.as_slice())
                .map_err(Error::index)?;
            if !content.spec.is_empty() {
                self.spec
                    .insert(hash, content.spec.as_slice())
                    .map_err(Error::index)?;
            }
        }
        let back = new.iter().map(|(hash, _)| *hash);
        retired::take_back(&mut self.vectors, &mut self.retired, back, self.model)?;
        let mut texts = Vec::with_capacity(new.len());
        for (hash, content) in new {
            let key = mirror.next_text;
            mirror.next_text += 1;
            self.text_ids.insert(&hash, key).map_err(Error::index)?;
            texts.push((key, content.packed));
            fresh.insert(hash, content.parsed);
        }
        Ok(texts)
    }

    /// Forgets a file that vanished.
    pub fn remove(
        &mut self,
        key: &(Root, String),
        mirror: &mut Mirror,
        moves: &mut Moves,
    ) -> Result<()> {
        self.files
            .remove((key.0 as u8, key.1.as_str()))
            .map_err(Error::index)?;
        mirror.remove_file(key, moves);
        Ok(())
    }

    /// Forgets contents no file holds any more: their parses now, their texts at the next
    /// reconcile (listed for it, see [`take_garbage`]); their embeddings are retired (see
    /// [`retired`]).
    pub fn forget(&mut self, orphans: &[Hash]) -> Result<()> {
        retired::retire(&mut self.vectors, &mut self.retired, orphans, self.model)?;
        for hash in orphans {
            self.docs.remove(hash).map_err(Error::index)?;
            self.spec.remove(hash).map_err(Error::index)?;
            let key = self.text_ids.remove(hash).map_err(Error::index)?;
            if let Some(key) = key.map(|key| key.value()) {
                self.garbage.insert(key, ()).map_err(Error::index)?;
            }
        }
        Ok(())
    }
}

/// The texts earlier commits stopped referring to, taken off the list in this transaction (the
/// caller removes them from the texts store before this transaction commits).
pub fn take_garbage(txn: &WriteTransaction) -> Result<Vec<u64>> {
    let mut table = txn.open_table(TEXTS_GARBAGE).map_err(Error::index)?;
    let mut taken = Vec::new();
    table
        .retain(|key, ()| {
            taken.push(key);
            false
        })
        .map_err(Error::index)?;
    Ok(taken)
}

/// Replaces the folder facts: top-level folders and folders that cannot be listed.
pub fn folders(
    txn: &WriteTransaction,
    top_dirs: &BTreeSet<(Root, String)>,
    unreadable: &Unreadable,
) -> Result<()> {
    let mut top = txn.open_table(TOP_DIRS).map_err(Error::index)?;
    top.retain(|_, _| false).map_err(Error::index)?;
    for (root, name) in top_dirs {
        top.insert((*root as u8, name.as_str()), ())
            .map_err(Error::index)?;
    }
    let mut table = txn.open_table(UNREADABLE).map_err(Error::index)?;
    table.retain(|_, _| false).map_err(Error::index)?;
    for ((root, rel), why) in unreadable {
        table
            .insert((*root as u8, rel.as_str()), encode(why).as_slice())
            .map_err(Error::index)?;
    }
    Ok(())
}

/// Which tables a reconcile changed.
pub struct Changed {
    pub skills: bool,
    pub prompts: bool,
    pub agents: bool,
    pub skipped: bool,
    /// Rows in the skip table after the change.
    pub skipped_rows: usize,
}

/// Writes the rows of `views` whose keys changed, and deletes the changed keys it no longer has.
pub fn view_changes(txn: &WriteTransaction, views: &Views, changes: &Changes) -> Result<Changed> {
    rows(txn, SKILLS, &views.skills, &changes.skills)?;
    rows(txn, PROMPTS, &views.prompts, &changes.prompts)?;
    rows(txn, AGENTS, &views.agents, &changes.agents)?;
    let mut table = txn.open_table(SKIPPED).map_err(Error::index)?;
    for key in &changes.skipped {
        let stored = (key.0 as u8, key.1.as_str());
        match views.skipped.get(key) {
            Some(why) => table.insert(stored, encode(why).as_slice()).map(drop),
            None => table.remove(stored).map(drop),
        }
        .map_err(Error::index)?;
    }
    Ok(Changed {
        skills: !changes.skills.is_empty(),
        prompts: !changes.prompts.is_empty(),
        agents: !changes.agents.is_empty(),
        skipped: !changes.skipped.is_empty(),
        skipped_rows: table.len().map_err(Error::index)? as usize,
    })
}

/// Writes the rows of `keys` (encoded on every core first: a cold build writes them all).
fn rows<T: Serialize + Sync>(
    txn: &WriteTransaction,
    def: redb::TableDefinition<'_, &str, &[u8]>,
    rows: &BTreeMap<String, T>,
    keys: &BTreeSet<String>,
) -> Result<()> {
    let keys: Vec<&String> = keys.iter().collect();
    let encoded: Vec<(&String, Option<Vec<u8>>)> = keys
        .into_par_iter()
        .map(|key| (key, rows.get(key).map(encode)))
        .collect();
    let mut table = txn.open_table(def).map_err(Error::index)?;
    for (key, row) in encoded {
        match row {
            Some(row) => table.insert(key.as_str(), row.as_slice()).map(drop),
            None => table.remove(key.as_str()).map(drop),
        }
        .map_err(Error::index)?;
    }
    Ok(())
}

/// Rows in the skip table, read without loading the views.
pub fn skipped_count(db: &redb::Database) -> Result<usize> {
    let txn = db.begin_read().map_err(Error::index)?;
    Ok(txn
        .open_table(SKIPPED)
        .map_err(Error::index)?
        .len()
        .map_err(Error::index)? as usize)
}
