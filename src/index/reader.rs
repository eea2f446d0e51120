//! A consistent read snapshot of the index: the rows the read functions answer from, the text
//! of a row's file, and the bookkeeping `status` and `check` show. Nothing here reads the
//! folders on disk; one `lstat` tells a row whose file could not be read that is gone since
//! (`not found`) from one still unreadable (`Reader::text`).

use std::collections::BTreeSet;

use redb::{ReadableTableMetadata, TableDefinition};
use serde::de::DeserializeOwned;

use super::changelog::{self, Logged};
use super::records::{self, ReconcileStamp, decode};
use super::tables::*;
use crate::bundled;
use crate::doc::Hash;
use crate::error::{Error, IndexError, Result};
use crate::roots::{Root, Roots};
use crate::rules::Source;
use crate::rules::agent::AgentRow;
use crate::rules::prompt::PromptRow;
use crate::rules::skill::{SkillRow, Visibility};
use crate::rules::skip::SkipReason;
use crate::rules::spec::Conformance;

/// The spec table of a snapshot, open (see [`Reader::specs`]).
pub struct Specs(redb::ReadOnlyTable<&'static [u8; 32], &'static [u8]>);

impl Specs {
    pub fn get(&self, hash: &Hash) -> Result<Option<Conformance>> {
        match self.0.get(hash).map_err(Error::index)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }
}

/// A consistent read snapshot of the index.
pub struct Reader {
    pub(super) txn: redb::ReadTransaction,
    /// The texts store, as of the same moment (see [`super::texts`]).
    pub(super) texts: redb::ReadTransaction,
}

impl Reader {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<'_, K, V>,
    ) -> Result<redb::ReadOnlyTable<K, V>> {
        self.txn.open_table(def).map_err(Error::index)
    }

    fn row<T: DeserializeOwned>(
        &self,
        def: TableDefinition<'_, &str, &[u8]>,
        key: &str,
    ) -> Result<Option<T>> {
        match self.table(def)?.get(key).map_err(Error::index)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// [`Reader::row`] of a table keyed by a root's file, `(root, relative path)`.
    fn path_row<T: DeserializeOwned>(
        &self,
        def: TableDefinition<'_, (u8, &str), &[u8]>,
        root: Root,
        rel: &str,
    ) -> Result<Option<T>> {
        match self
            .table(def)?
            .get((root as u8, rel))
            .map_err(Error::index)?
        {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// Bumped by every reconcile that changed anything.
    pub fn revision(&self) -> Result<u64> {
        self.meta_u64(META_REVISION)
    }

    /// The snapshot's index file identity and revision together.
    pub fn latest(&self) -> Result<super::Latest> {
        Ok(super::Latest {
            epoch: self.epoch()?,
            revision: self.revision()?,
        })
    }

    /// The index file's identity, random at its creation (0 for a file that has none).
    pub fn epoch(&self) -> Result<u64> {
        self.meta_u64(META_EPOCH)
    }

    /// The keys of a list table that changed after revision `since`, up to this snapshot's
    /// revision; `None` when the change log no longer reaches back that far.
    pub fn changed_since(&self, table: Logged, since: u64) -> Result<Option<BTreeSet<String>>> {
        let floor = self.meta_u64(META_LOG_FLOOR)?;
        changelog::changed_since(&self.table(CHANGE_LOG)?, floor, table, since)
    }

    fn meta_u64(&self, key: &str) -> Result<u64> {
        Ok(meta_u64(&self.table(META)?, key)?.unwrap_or(0))
    }

    pub fn last_reconcile(&self) -> Result<Option<ReconcileStamp>> {
        match self
            .table(META)?
            .get(META_RECONCILE)
            .map_err(Error::index)?
        {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// Every visible skill (before `filter_unregistered`), sorted by on-disk id.
    pub fn skills(&self) -> Result<Vec<(String, SkillRow)>> {
        decode_rows(&self.table(SKILLS)?)
    }

    /// Every skill row, in on-disk id order, each turned into what `f` makes of it as it is
    /// decoded (a whole tree's decoded rows are never all alive at once).
    pub fn map_skills<Out>(&self, f: impl FnMut(String, SkillRow) -> Out) -> Result<Vec<Out>> {
        map_rows(&self.table(SKILLS)?, f)
    }

    pub fn skill(&self, id: &str) -> Result<Option<SkillRow>> {
        self.row(SKILLS, id)
    }

    /// The agents skills root (project or user-global) that serves namespace `ns`, if one does
    /// (its `<ns>/index` row is an agents skill): one lookup, where asking every row would grow
    /// with the tree.
    pub fn agents_namespace_root(&self, ns: &str) -> Result<Option<Root>> {
        Ok(self
            .skill(&format!("{ns}/index"))?
            .filter(|row| row.agents_skill)
            .and_then(|row| match row.source {
                Source::File { root, .. } => Some(root),
                Source::Bundled => None,
            }))
    }

    /// How many of the worker's bundled skills of namespace `ns` are served from the bundle
    /// now (no folder on disk has taken the namespace over): one lookup per bundled skill.
    pub fn bundled_skills_served(&self, ns: &str) -> Result<usize> {
        let mut served = 0;
        for (file, _) in bundled::parsed_skills() {
            if crate::doc::ids::first_segment(file.id) == ns
                && self
                    .skill(file.id)?
                    .is_some_and(|row| row.source == Source::Bundled)
            {
                served += 1;
            }
        }
        Ok(served)
    }

    /// Finds a skill this caller may see by id: the exact id wins, then the `<id>/index`
    /// overview alias (contract §3.4).
    pub fn resolve_skill(
        &self,
        visibility: Visibility<'_>,
        id: &str,
    ) -> Result<Option<(String, SkillRow)>> {
        for candidate in [id.to_string(), format!("{id}/index")] {
            if let Some(row) = self.skill(&candidate)? {
                if visibility.allows(&candidate, &row) {
                    return Ok(Some((candidate, row)));
                }
            }
        }
        Ok(None)
    }

    /// The skills this caller may see, in on-disk id order.
    pub fn visible_skills(&self, visibility: Visibility<'_>) -> Result<Vec<(String, SkillRow)>> {
        let mut rows = self.skills()?;
        rows.retain(|(id, row)| visibility.allows(id, row));
        Ok(rows)
    }

    pub fn prompts(&self) -> Result<Vec<(String, PromptRow)>> {
        decode_rows(&self.table(PROMPTS)?)
    }

    pub fn prompt(&self, name: &str) -> Result<Option<PromptRow>> {
        self.row(PROMPTS, name)
    }

    pub fn agents(&self) -> Result<Vec<(String, AgentRow)>> {
        decode_rows(&self.table(AGENTS)?)
    }

    pub fn agent(&self, id: &str) -> Result<Option<AgentRow>> {
        self.row(AGENTS, id)
    }

    /// The text of a file by content hash.
    pub fn content(&self, hash: &Hash) -> Result<Option<String>> {
        let key = self.table(TEXT_IDS)?.get(hash).map_err(Error::index)?;
        match key {
            Some(key) => super::texts::get(&self.texts, key.value()),
            None => Ok(None),
        }
    }

    /// What the Agent Skills specification says of a content, checked at reconcile.
    pub fn spec(&self, hash: &Hash) -> Result<Option<Conformance>> {
        self.specs()?.get(hash)
    }

    /// The stored checks, the table opened once for many lookups (`check --spec` looks up
    /// every served `SKILL.md`).
    pub fn specs(&self) -> Result<Specs> {
        Ok(Specs(self.table(SPEC)?))
    }

    /// How many texts the texts store holds.
    #[cfg(any(test, feature = "testing"))]
    pub fn texts_held(&self) -> Result<u64> {
        super::texts::count(&self.texts)
    }

    /// The whole text of a row's file (a bundled skill's from the binary), or the read path's
    /// error for a file that cannot be served. A file that could not be read because it was
    /// removed meanwhile (the reconcile read it a moment after it went; the removal's own
    /// event is on its way) is `missing()`, the family's not-found answer.
    pub fn text(
        &self,
        roots: &Roots,
        source: &Source,
        bundled_id: &str,
        missing: impl FnOnce() -> Error,
    ) -> Result<String> {
        match source {
            Source::File { root, rel, content } => {
                let path = roots.file(*root, rel);
                match content {
                    Err(crate::doc::ServeIssue::Read(crate::doc::ReadIssue::Io(why)))
                        if gone_when_read(why)
                            || std::fs::symlink_metadata(&path)
                                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
                    {
                        Err(missing())
                    }
                    Err(issue) => Err(Error::Unservable(issue.message(&path))),
                    Ok(hash) => self.content(hash)?.ok_or_else(|| {
                        IndexError::Missing(format!("the content of {}", path.display())).into()
                    }),
                }
            }
            Source::Bundled => bundled::skill_raw(bundled_id)
                .map(str::to_string)
                .ok_or_else(|| IndexError::Missing(format!("bundled skill {bundled_id}")).into()),
        }
    }

    /// Every file (or folder) that is not served, or served with a problem, with why; sorted
    /// by root and path.
    pub fn skipped(&self) -> Result<Vec<(Root, String, SkipReason)>> {
        Ok(
            decode_paths(&self.table(SKIPPED)?, |why: &[u8]| decode(why))?
                .into_iter()
                .map(|((root, rel), why)| (root, rel, why))
                .collect(),
        )
    }

    /// Why the scan skipped the file (or folder) `rel` of `root`, as `check` lists it, if it did.
    pub fn skip_reason(&self, root: Root, rel: &str) -> Result<Option<SkipReason>> {
        self.path_row(SKIPPED, root, rel)
    }

    /// The first of the files `check` lists (root, relative path, why) that `wanted` picks: a
    /// scan of the skipped rows, which a miss can afford (they are few, and a miss is rare).
    pub fn skipped_where(
        &self,
        wanted: impl Fn(Root, &str, &SkipReason) -> bool,
    ) -> Result<Option<(Root, String, SkipReason)>> {
        Ok(self
            .skipped()?
            .into_iter()
            .find(|(root, rel, why)| wanted(*root, rel, why)))
    }

    /// One file's record as last reconciled (its stat and content hash), if the index tracks it.
    pub fn file(&self, root: Root, rel: &str) -> Result<Option<records::FileMeta>> {
        self.path_row(FILES, root, rel)
    }

    /// Number of files the index tracks.
    pub fn file_count(&self) -> Result<u64> {
        self.table(FILES)?.len().map_err(Error::index)
    }
}

/// Whether a read error recorded for a file says it was not there when read: removed between
/// the walk's `stat` and the read. The reconcile that met it ran after the read asking began
/// (its catch-up), so not-found is that read's answer even when the file is back by now (a
/// checkout removing and writing it again): the event of its coming is queued, and the next
/// read serves it. Its read error (`No such file…`) describes no state of the disk.
fn gone_when_read(why: &str) -> bool {
    why == std::io::Error::from_raw_os_error(libc::ENOENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::Code;
    use crate::doc::{ReadIssue, ServeIssue};
    use crate::roots::Root;

    /// Roots under `dir` (the skills root made) and a fresh index there.
    fn tree(dir: &std::path::Path) -> (Roots, crate::index::Index) {
        let root = |name: &str| dir.join(name);
        let roots = Roots::new(
            root("skills"),
            root("local"),
            root("agents-skills"),
            root("agents"),
        );
        std::fs::create_dir_all(root("skills")).expect("mkdir");
        let index = crate::index::Index::open_writer(&root("index.redb")).expect("open");
        (roots, index)
    }

    /// A skills file whose read failed with the system's error `errno`, as a reconcile
    /// records it.
    fn unread(rel: &str, errno: i32) -> Source {
        let why = std::io::Error::from_raw_os_error(errno).to_string();
        Source::File {
            root: Root::Skills,
            rel: rel.into(),
            content: Err(ServeIssue::Read(ReadIssue::Io(why))),
        }
    }

    /// A row whose file could not be read is answered with the family's not-found error when
    /// the file is gone (it was removed while the reconcile read it), and with the read's own
    /// error while it is there.
    #[test]
    fn a_file_removed_before_its_read_is_answered_as_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (roots, index) = tree(dir.path());
        let reader = index.read().expect("read");
        let missing = || Error::not_found(Code::SkillNotFound, "skill", "ns/gone", &[], &[]);
        let gone = reader
            .text(&roots, &unread("ns/gone.md", libc::ENOENT), "", missing)
            .expect_err("gone");
        assert_eq!(gone.code(), Some(Code::SkillNotFound), "{gone}");
        std::fs::write(dir.path().join("skills/here.md"), "x").expect("write");
        let here = reader
            .text(&roots, &unread("here.md", libc::EACCES), "", missing)
            .expect_err("unreadable");
        assert!(matches!(here, Error::Unservable(_)), "{here}");
    }

    /// A file removed between the walk and the read, and written again since (a checkout
    /// that removes and writes it, under a reader): the read that met its absence answers
    /// not-found, never `No such file or directory` for a file that is there.
    #[test]
    fn a_file_removed_before_its_read_and_back_since_is_answered_as_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (roots, index) = tree(dir.path());
        std::fs::write(dir.path().join("skills/back.md"), "# Back\n\nx\n").expect("write");
        let reader = index.read().expect("read");
        let missing = || Error::not_found(Code::SkillNotFound, "skill", "back", &[], &[]);
        let answer = reader
            .text(&roots, &unread("back.md", libc::ENOENT), "", missing)
            .expect_err("not served");
        assert_eq!(answer.code(), Some(Code::SkillNotFound), "{answer}");
    }
}
