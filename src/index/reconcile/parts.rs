//! What a reconcile reads back from its own transaction to bring the views up to date: the
//! parsed documents of the files the recomputed parts look at, and the rows those parts had.
//! Only the parts a change touched are read, so a one-file change reads a namespace, not the
//! tree.

use std::collections::{BTreeMap, HashMap};

use redb::{ReadableTable, WriteTransaction};
use serde::de::DeserializeOwned;

use crate::doc::{Hash, ParsedDoc};
use crate::error::{Error, IndexError, Result};
use crate::index::records::{FileMeta, decode};
use crate::index::tables::*;
use crate::index::views::{self, Dirty, Inputs, Views};
use crate::roots::Root;

/// The parsed documents of `needed` files by content hash: those parsed by this reconcile
/// (`fresh`), the others read from the docs table.
pub fn docs(
    txn: &WriteTransaction,
    needed: &[(&(Root, String), &FileMeta)],
    mut fresh: HashMap<Hash, ParsedDoc>,
) -> Result<HashMap<Hash, ParsedDoc>> {
    let table = txn.open_table(DOCS).map_err(Error::index)?;
    for ((root, rel), meta) in needed {
        let Ok(hash) = &meta.content else { continue };
        if fresh.contains_key(hash) {
            continue;
        }
        let stored = table
            .get(hash)
            .map_err(Error::index)?
            .ok_or_else(|| IndexError::Missing(format!("the stored parse of {rel} in {root:?}")))?;
        fresh.insert(*hash, decode(stored.value())?);
    }
    Ok(fresh)
}

/// Every stored row (for a recompute from scratch).
pub fn all(txn: &WriteTransaction) -> Result<Views> {
    let skipped = decode_paths(
        &txn.open_table(SKIPPED).map_err(Error::index)?,
        |why: &[u8]| decode(why),
    )?;
    Ok(Views {
        skills: whole(txn, SKILLS)?,
        prompts: whole(txn, PROMPTS)?,
        agents: whole(txn, AGENTS)?,
        skipped: skipped.into_iter().collect(),
    })
}

/// The stored rows of the parts `dirty` names, and the skip reasons they own. `removed` are
/// the files this reconcile dropped (a system prompt's skip reason is found by its path, and
/// a removed one is no longer among `inputs.prompt_files`).
pub fn stored(
    txn: &WriteTransaction,
    inputs: &Inputs<'_>,
    dirty: &Dirty,
    removed: &[(Root, String)],
) -> Result<Views> {
    let mut views = Views::default();
    let skills = txn.open_table(SKILLS).map_err(Error::index)?;
    for ns in &dirty.namespaces {
        if let Some(row) = skills.get(ns.as_str()).map_err(Error::index)? {
            views.skills.insert(ns.clone(), decode(row.value())?);
        }
        let (from, to) = views::namespace_id_range(ns);
        for entry in skills
            .range(from.as_str()..to.as_str())
            .map_err(Error::index)?
        {
            let (id, row) = entry.map_err(Error::index)?;
            views
                .skills
                .insert(id.value().to_string(), decode(row.value())?);
        }
    }
    for id in dirty.skill_ids.values().flatten() {
        if let Some(row) = skills.get(id.as_str()).map_err(Error::index)? {
            views.skills.insert(id.clone(), decode(row.value())?);
        }
    }
    if dirty.prompts {
        views.prompts = whole(txn, PROMPTS)?;
    }
    if dirty.agents {
        views.agents = whole(txn, AGENTS)?;
    }

    let skipped = txn.open_table(SKIPPED).map_err(Error::index)?;
    let mut keep = |root: Root, rel: &str, why: &[u8]| -> Result<()> {
        let key = (root, rel.to_string());
        if views::owns(inputs, dirty, &key) {
            views.skipped.insert(key, decode(why)?);
        }
        Ok(())
    };
    for ns in &dirty.namespaces {
        for (root, from, to) in views::namespace_key_ranges(ns) {
            let range = (root as u8, from.as_str())..(root as u8, to.as_str());
            for entry in skipped.range(range).map_err(Error::index)? {
                let (key, why) = entry.map_err(Error::index)?;
                keep(root, key.value().1, why.value())?;
            }
        }
    }
    for ids in dirty.skill_ids.values() {
        for (root, rel) in views::id_file_keys(ids) {
            if let Some(why) = skipped
                .get((root as u8, rel.as_str()))
                .map_err(Error::index)?
            {
                keep(root, &rel, why.value())?;
            }
        }
    }
    if dirty.agents {
        for profiles in [Root::Agents, Root::GlobalAgents] {
            let wanted = profiles as u8;
            for entry in skipped.range((wanted, "")..).map_err(Error::index)? {
                let (key, why) = entry.map_err(Error::index)?;
                let (root, rel) = key.value();
                if root != wanted {
                    break;
                }
                keep(profiles, rel, why.value())?;
            }
        }
    }
    if dirty.prompts {
        let prompt_keys = inputs.prompt_files.iter().chain(
            removed
                .iter()
                .filter(|(root, rel)| views::is_prompt_file(*root, rel)),
        );
        for (root, rel) in prompt_keys {
            if let Some(why) = skipped
                .get((*root as u8, rel.as_str()))
                .map_err(Error::index)?
            {
                keep(*root, rel, why.value())?;
            }
        }
    }
    for (root, rel) in &dirty.notes {
        if let Some(why) = skipped
            .get((*root as u8, rel.as_str()))
            .map_err(Error::index)?
        {
            views
                .skipped
                .insert((*root, rel.clone()), decode(why.value())?);
        }
    }
    Ok(views)
}

fn whole<T: DeserializeOwned>(
    txn: &WriteTransaction,
    def: redb::TableDefinition<'_, &str, &[u8]>,
) -> Result<BTreeMap<String, T>> {
    let table = txn.open_table(def).map_err(Error::index)?;
    Ok(decode_rows(&table)?.into_iter().collect())
}
