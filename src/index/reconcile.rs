//! Reconcile: make the index equal to what a fresh scan of the roots computes, reading only
//! what changed. Walk and stat every root; read, hash and parse the files whose stat changed
//! (in parallel, in bounded batches); drop what vanished; recompute the merged views in memory
//! and write only the rows that differ; all in one write transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use redb::{ReadableTable, WriteTransaction};

use super::Roots;
use super::records::{FileMeta, Hash, ReconcileStamp, Root, Stat, compress_text, decode, encode};
use super::tables::*;
use super::views::{self, Changes, Inputs, Views};
use super::walk::{walk, walk_scoped};
use crate::doc::{self, MAX_FILE_BYTES, ParsedDoc, ReadIssue};
use crate::time::Stamp;
use crate::{Error, Result};

/// Files read per batch: bounds the memory a cold reindex holds at once.
const BATCH: usize = 1024;

/// A file whose mtime or ctime is this close to the scan is read again next time: a later
/// write in the same timestamp tick (coarse on many file systems) could leave its stat
/// unchanged.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What one reconcile did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Candidate files found on disk.
    pub files: usize,
    /// Files read (new or changed since the last reconcile).
    pub read: usize,
    /// Distinct contents parsed (content already known is not parsed again).
    pub parsed: usize,
    /// Files that vanished.
    pub removed: usize,
    /// Files and folders not served, with a reason (see `check`).
    pub skipped: usize,
    /// Whether any answer of the read functions changed (and so the revision was bumped).
    pub changed: bool,
    /// Which families' rows changed (the `external` events a watcher burst sends).
    pub skills_changed: bool,
    pub system_prompts_changed: bool,
    pub agents_changed: bool,
    pub revision: u64,
    pub duration_ms: u64,
    /// After a full reconcile: files that look like writers' temporary files (for the sweep
    /// of the ones killed writers left; see `store::sweep_found_temps`).
    #[serde(skip)]
    pub temps: Vec<std::path::PathBuf>,
}

/// Reconcile progress, for a progress line on long runs.
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    Walked { files: usize, to_read: usize },
    Read { done: usize, total: usize },
}

/// The writer's in-memory copy of the index state reconcile compares against. `docs` and
/// `views` are loaded on the first reconcile that changes something, so a boot with nothing
/// changed only loads the file table.
pub struct Mirror {
    files: BTreeMap<(Root, String), FileMeta>,
    top_dirs: BTreeSet<(Root, String)>,
    unreadable: BTreeMap<(Root, String), String>,
    docs: Option<HashMap<Hash, ParsedDoc>>,
    views: Option<Views>,
    revision: u64,
    /// Whether the views were ever computed into this index (a new index has none, and must
    /// compute them even when the roots are empty: the bundled skills are rows too).
    computed: bool,
    /// See [`RACY_WINDOW`]; tests that control their own timing set it lower.
    pub racy_window: Duration,
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
        }
    }
}

impl Mirror {
    pub fn load(db: &redb::Database) -> Result<Mirror> {
        use redb::ReadableDatabase;
        let txn = db.begin_read().map_err(Error::index)?;
        let mut mirror = Mirror::default();
        for entry in txn
            .open_table(FILES)
            .map_err(Error::index)?
            .iter()
            .map_err(Error::index)?
        {
            let (k, v) = entry.map_err(Error::index)?;
            let (root, rel) = k.value();
            if let Some(root) = Root::from_u8(root) {
                mirror
                    .files
                    .insert((root, rel.to_string()), decode(v.value())?);
            }
        }
        for entry in txn
            .open_table(TOP_DIRS)
            .map_err(Error::index)?
            .iter()
            .map_err(Error::index)?
        {
            let (k, _) = entry.map_err(Error::index)?;
            let (root, name) = k.value();
            if let Some(root) = Root::from_u8(root) {
                mirror.top_dirs.insert((root, name.to_string()));
            }
        }
        for entry in txn
            .open_table(UNREADABLE)
            .map_err(Error::index)?
            .iter()
            .map_err(Error::index)?
        {
            let (k, v) = entry.map_err(Error::index)?;
            let (root, rel) = k.value();
            if let Some(root) = Root::from_u8(root) {
                mirror
                    .unreadable
                    .insert((root, rel.to_string()), v.value().to_string());
            }
        }
        let meta = txn.open_table(META).map_err(Error::index)?;
        mirror.computed = meta.get(META_RECONCILE).map_err(Error::index)?.is_some();
        if let Some(v) = txn
            .open_table(META)
            .map_err(Error::index)?
            .get(META_REVISION)
            .map_err(Error::index)?
        {
            mirror.revision = decode(v.value())?;
        }
        Ok(mirror)
    }
}

/// What a reconcile looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every root, in full.
    All,
    /// Only these paths (files or folders, absolute) and what is under them; paths outside
    /// every root are ignored. Used for a library write and for watcher events.
    Paths(Vec<std::path::PathBuf>),
}

/// One file read from disk.
struct Read {
    key: (Root, String),
    meta: FileMeta,
    /// Its content, when that content was not known yet.
    new: Option<NewContent>,
}

/// A content seen for the first time: its parse and, for the content table, its compressed
/// text (compressed on the reading threads, so the single writer thread only inserts).
struct NewContent {
    parsed: ParsedDoc,
    packed: Vec<u8>,
}

pub fn run(
    db: &redb::Database,
    mirror: &mut Mirror,
    roots: &Roots,
    scope: &Scope,
    progress: &dyn Fn(Progress),
) -> Result<Report> {
    let started = Instant::now();
    let scan_start = Stamp::now();
    let found = match scope {
        Scope::All => walk(roots),
        Scope::Paths(paths) => walk_scoped(roots, paths),
    };
    tracing::debug!(
        files = found.files.len(),
        walk_ms = started.elapsed().as_millis() as u64,
        "roots walked"
    );
    let in_scope = |key: &(Root, String)| match scope {
        Scope::All => true,
        Scope::Paths(_) => found.covers(key),
    };
    let to_read: Vec<(&(Root, String), &Stat)> = found
        .files
        .iter()
        .filter(|(key, stat)| {
            mirror
                .files
                .get(*key)
                .is_none_or(|m| m.stat != **stat || m.racy)
        })
        .collect();
    let removed: Vec<(Root, String)> = mirror
        .files
        .keys()
        .filter(|k| in_scope(k) && !found.files.contains_key(*k))
        .cloned()
        .collect();
    progress(Progress::Walked {
        files: found.files.len(),
        to_read: to_read.len(),
    });
    let mut report = Report {
        read: to_read.len(),
        removed: removed.len(),
        temps: match scope {
            Scope::All => found.temps.clone(),
            Scope::Paths(_) => Vec::new(),
        },
        ..Report::default()
    };
    let (top_dirs, unreadable) = match scope {
        Scope::All => (found.top_dirs.clone(), found.unreadable.clone()),
        Scope::Paths(_) => found.merge_folders(&mirror.top_dirs, &mirror.unreadable),
    };
    let unreadable_changed = unreadable != mirror.unreadable;
    let folders_changed = top_dirs != mirror.top_dirs || unreadable_changed;
    // Views are recomputed from scratch for a new index or when folders became (un)listable;
    // otherwise only the namespaces these files and top-level folders belong to.
    let full_views = !mirror.computed || unreadable_changed;
    let dirty = if full_views {
        BTreeSet::new()
    } else {
        views::dirty_namespaces(
            to_read.iter().map(|(key, _)| *key).chain(&removed),
            top_dirs.symmetric_difference(&mirror.top_dirs),
        )
    };
    if mirror.computed && to_read.is_empty() && removed.is_empty() && !folders_changed {
        report.revision = mirror.revision;
        report.files = mirror.files.len();
        report.skipped = match &mirror.views {
            Some(views) => views.skipped.len(),
            None => skipped_count(db)?,
        };
        report.duration_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }

    let txn = db.begin_write().map_err(Error::index)?;
    if mirror.docs.is_none() {
        mirror.docs = Some(load_docs(&txn)?);
    }
    if mirror.views.is_none() {
        mirror.views = Some(load_views(&txn)?);
    }
    {
        let mut files = txn.open_table(FILES).map_err(Error::index)?;
        let mut docs_table = txn.open_table(DOCS).map_err(Error::index)?;
        let mut content = txn.open_table(CONTENT).map_err(Error::index)?;
        let known = mirror.docs.as_ref().expect("docs loaded above");
        let claimed = Mutex::new(HashSet::new());
        let racy_after = scan_start.minus(mirror.racy_window);
        let read_batch = |batch: &[(&(Root, String), &Stat)]| -> Vec<Read> {
            batch
                .par_iter()
                .map(|(key, stat)| read_file(roots, key, **stat, racy_after, known, &claimed, true))
                .collect()
        };
        let mut fresh: HashMap<Hash, ParsedDoc> = HashMap::new();
        let mut done = 0;
        let mut store = |reads: Vec<Read>| -> Result<()> {
            done += reads.len();
            for read in reads {
                if let (Some(new), Ok(hash)) = (read.new, &read.meta.content) {
                    docs_table
                        .insert(hash, encode(&new.parsed).as_slice())
                        .map_err(Error::index)?;
                    content
                        .insert(hash, new.packed.as_slice())
                        .map_err(Error::index)?;
                    fresh.insert(*hash, new.parsed);
                }
                if mirror.files.get(&read.key) != Some(&read.meta) {
                    files
                        .insert(
                            (read.key.0 as u8, read.key.1.as_str()),
                            encode(&read.meta).as_slice(),
                        )
                        .map_err(Error::index)?;
                    mirror.files.insert(read.key, read.meta);
                }
            }
            progress(Progress::Read {
                done,
                total: to_read.len(),
            });
            Ok(())
        };
        // A pipeline: the next batch is read and parsed on the pool while this thread stores
        // the previous one, so storing (single-threaded in redb) does not leave a core idle.
        std::thread::scope(|scope| -> Result<()> {
            let mut batches = to_read.chunks(BATCH);
            let mut current = batches.next().map(read_batch);
            while let Some(reads) = current.take() {
                let next = batches
                    .next()
                    .map(|batch| scope.spawn(move || read_batch(batch)));
                store(reads)?;
                current = next.map(|reading| reading.join().expect("a read batch panicked"));
            }
            Ok(())
        })?;
        report.parsed = fresh.len();
        let docs = mirror.docs.as_mut().expect("docs loaded above");
        docs.extend(fresh);
        for key in &removed {
            files
                .remove((key.0 as u8, key.1.as_str()))
                .map_err(Error::index)?;
            mirror.files.remove(key);
        }
        // Drop contents no file refers to any more.
        let referenced: HashSet<&Hash> = mirror
            .files
            .values()
            .filter_map(|m| m.content.as_ref().ok())
            .collect();
        let orphans: Vec<Hash> = docs
            .keys()
            .filter(|h| !referenced.contains(h))
            .copied()
            .collect();
        for hash in orphans {
            docs_table.remove(&hash).map_err(Error::index)?;
            content.remove(&hash).map_err(Error::index)?;
            docs.remove(&hash);
        }
    }
    tracing::debug!(
        read = to_read.len(),
        parsed = report.parsed,
        read_ms = started.elapsed().as_millis() as u64,
        "files read and stored"
    );
    if folders_changed {
        write_folders(&txn, &top_dirs, &unreadable)?;
        mirror.top_dirs = top_dirs;
        mirror.unreadable = unreadable;
    }
    let inputs = Inputs {
        files: &mirror.files,
        docs: mirror.docs.as_ref().expect("docs loaded above"),
        top_dirs: &mirror.top_dirs,
        unreadable: &mirror.unreadable,
    };
    let mut views = mirror.views.take().unwrap_or_default();
    let changes = if full_views {
        let fresh = views::compute(&inputs);
        let changes = Changes::between(&views, &fresh);
        views = fresh;
        changes
    } else {
        views::update(&inputs, &mut views, &dirty)
    };
    let changed = write_view_changes(&txn, &views, &changes)?;
    tracing::debug!(
        full = full_views,
        namespaces = dirty.len(),
        views_ms = started.elapsed().as_millis() as u64,
        "views updated"
    );
    report.skills_changed = changed.skills;
    report.system_prompts_changed = changed.prompts;
    report.agents_changed = changed.agents;
    let changed_views = changed.skills || changed.prompts || changed.agents || changed.skipped;
    report.skipped = views.skipped.len();
    mirror.views = Some(views);
    mirror.computed = true;
    // The revision tells callers whether answers changed, so file bookkeeping alone (a racy
    // file read again with the same content) does not bump it.
    report.changed = changed_views;
    if report.changed {
        mirror.revision += 1;
    }
    report.revision = mirror.revision;
    report.files = mirror.files.len();
    report.duration_ms = started.elapsed().as_millis() as u64;
    {
        let mut meta = txn.open_table(META).map_err(Error::index)?;
        meta.insert(META_REVISION, encode(&mirror.revision).as_slice())
            .map_err(Error::index)?;
        let stamp = ReconcileStamp {
            at: scan_start,
            duration_ms: report.duration_ms,
        };
        meta.insert(META_RECONCILE, encode(&stamp).as_slice())
            .map_err(Error::index)?;
    }
    txn.commit().map_err(Error::index)?;
    tracing::debug!(
        commit_ms = started.elapsed().as_millis() as u64,
        "reconcile committed"
    );
    Ok(report)
}

/// Reads one file. Its content is parsed (and, with `pack`, compressed for the content table)
/// when it is neither `known` nor already `claimed` by another file of this reconcile, so each
/// new content is parsed once however many files hold it.
fn read_file(
    roots: &Roots,
    key: &(Root, String),
    stat: Stat,
    racy_after: Stamp,
    known: &HashMap<Hash, ParsedDoc>,
    claimed: &Mutex<HashSet<Hash>>,
    pack: bool,
) -> Read {
    let racy = stat.mtime >= racy_after || stat.ctime >= racy_after;
    let meta = |content| FileMeta {
        stat,
        content,
        racy,
    };
    if stat.size > MAX_FILE_BYTES {
        return Read {
            key: key.clone(),
            meta: meta(Err(ReadIssue::TooLarge(stat.size))),
            new: None,
        };
    }
    // Capped: a file that grew past the cap since its stat is not read whole.
    let bytes = match std::fs::File::open(roots.file(key.0, &key.1)).and_then(|file| {
        let mut bytes = Vec::with_capacity(stat.size as usize);
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
        Ok(bytes)
    }) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Read {
                key: key.clone(),
                meta: meta(Err(ReadIssue::Io(e.to_string()))),
                new: None,
            };
        }
    };
    let text = match doc::decode(&bytes) {
        Ok(text) => text,
        Err(issue) => {
            return Read {
                key: key.clone(),
                meta: meta(Err(issue)),
                new: None,
            };
        }
    };
    let hash = *blake3::hash(text.as_bytes()).as_bytes();
    let first = !known.contains_key(&hash)
        && claimed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(hash);
    let new = first.then(|| NewContent {
        parsed: ParsedDoc::parse(text),
        packed: if pack {
            compress_text(text)
        } else {
            Vec::new()
        },
    });
    Read {
        key: key.clone(),
        meta: meta(Ok(hash)),
        new,
    }
}

fn skipped_count(db: &redb::Database) -> Result<usize> {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let txn = db.begin_read().map_err(Error::index)?;
    Ok(txn
        .open_table(SKIPPED)
        .map_err(Error::index)?
        .len()
        .map_err(Error::index)? as usize)
}

fn load_docs(txn: &WriteTransaction) -> Result<HashMap<Hash, ParsedDoc>> {
    let table = txn.open_table(DOCS).map_err(Error::index)?;
    let mut docs = HashMap::new();
    for entry in table.iter().map_err(Error::index)? {
        let (k, v) = entry.map_err(Error::index)?;
        docs.insert(*k.value(), decode(v.value())?);
    }
    Ok(docs)
}

fn load_views(txn: &WriteTransaction) -> Result<Views> {
    fn rows<T: serde::de::DeserializeOwned>(
        txn: &WriteTransaction,
        def: redb::TableDefinition<&str, &[u8]>,
    ) -> Result<BTreeMap<String, T>> {
        let table = txn.open_table(def).map_err(Error::index)?;
        let mut out = BTreeMap::new();
        for entry in table.iter().map_err(Error::index)? {
            let (k, v) = entry.map_err(Error::index)?;
            out.insert(k.value().to_string(), decode(v.value())?);
        }
        Ok(out)
    }
    let mut skipped = BTreeMap::new();
    for entry in txn
        .open_table(SKIPPED)
        .map_err(Error::index)?
        .iter()
        .map_err(Error::index)?
    {
        let (k, v) = entry.map_err(Error::index)?;
        let (root, rel) = k.value();
        if let Some(root) = Root::from_u8(root) {
            skipped.insert((root, rel.to_string()), v.value().to_string());
        }
    }
    Ok(Views {
        skills: rows(txn, SKILLS)?,
        prompts: rows(txn, PROMPTS)?,
        agents: rows(txn, AGENTS)?,
        skipped,
    })
}

fn write_folders(
    txn: &WriteTransaction,
    top_dirs: &BTreeSet<(Root, String)>,
    unreadable: &BTreeMap<(Root, String), String>,
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
            .insert((*root as u8, rel.as_str()), why.as_str())
            .map_err(Error::index)?;
    }
    Ok(())
}

/// Which tables a reconcile changed.
struct Changed {
    skills: bool,
    prompts: bool,
    agents: bool,
    skipped: bool,
}

/// Writes the rows of `views` whose keys changed, and deletes the changed keys it no longer has.
fn write_view_changes(txn: &WriteTransaction, views: &Views, changes: &Changes) -> Result<Changed> {
    write_rows(txn, SKILLS, &views.skills, &changes.skills)?;
    write_rows(txn, PROMPTS, &views.prompts, &changes.prompts)?;
    write_rows(txn, AGENTS, &views.agents, &changes.agents)?;
    let mut table = txn.open_table(SKIPPED).map_err(Error::index)?;
    for key in &changes.skipped {
        let stored = (key.0 as u8, key.1.as_str());
        match views.skipped.get(key) {
            Some(why) => table.insert(stored, why.as_str()).map(drop),
            None => table.remove(stored).map(drop),
        }
        .map_err(Error::index)?;
    }
    Ok(Changed {
        skills: !changes.skills.is_empty(),
        prompts: !changes.prompts.is_empty(),
        agents: !changes.agents.is_empty(),
        skipped: !changes.skipped.is_empty(),
    })
}

fn write_rows<T: serde::Serialize>(
    txn: &WriteTransaction,
    def: redb::TableDefinition<&str, &[u8]>,
    rows: &BTreeMap<String, T>,
    keys: &BTreeSet<String>,
) -> Result<()> {
    let mut table = txn.open_table(def).map_err(Error::index)?;
    for key in keys {
        match rows.get(key) {
            Some(row) => table.insert(key.as_str(), encode(row).as_slice()).map(drop),
            None => table.remove(key.as_str()).map(drop),
        }
        .map_err(Error::index)?;
    }
    Ok(())
}

/// Computes the views of the roots from scratch without any index: walk, read and parse every
/// file. This is what a reconcile must agree with, and what a rescan-on-every-read baseline
/// pays on each call.
pub fn fresh_views(roots: &Roots) -> Views {
    let found = walk(roots);
    let never = Stamp {
        secs: i64::MAX,
        nanos: 0,
    };
    let empty = HashMap::new();
    let claimed = Mutex::new(HashSet::new());
    let reads: Vec<Read> = found
        .files
        .par_iter()
        .map(|(key, stat)| read_file(roots, key, *stat, never, &empty, &claimed, false))
        .collect();
    let mut files = BTreeMap::new();
    let mut docs = HashMap::new();
    for read in reads {
        if let (Ok(hash), Some(new)) = (&read.meta.content, read.new) {
            docs.insert(*hash, new.parsed);
        }
        files.insert(read.key, read.meta);
    }
    views::compute(&Inputs {
        files: &files,
        docs: &docs,
        top_dirs: &found.top_dirs,
        unreadable: &found.unreadable,
    })
}
