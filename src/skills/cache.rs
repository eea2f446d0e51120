//! The skill rows of one index revision, decoded once and kept sorted by on-disk id, each a
//! compact [`Listed`] ready to be written out: what `list`, `index` and a `get` miss read, instead of decoding every
//! row of the index per call. A later revision of the same index patches only the rows the
//! change log names; a rebuilt index, or a log that no longer reaches back, decodes them all.
//!
//! What a revision derives from its rows follows the change too (issue 31): the worker
//! overviews `index` lists are patched with the rows, and the postings a `get` miss looks
//! candidates up by depend on the ids alone, so a revision whose ids are those of the previous
//! one (an update) shares its postings, and one that added or removed ids derives them from the
//! last postings built, moving positions rather than lowercasing, measuring and hashing every
//! id again.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::catalog_index::CatalogIndex;
use super::doubled::Doubled;
use super::listed::Listed;
use super::resources::resource_flags;
use super::rows::{Rows, Span};
use super::segments::Segments;
use crate::doc::distance::Shape;
use crate::error::Result;
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::locks;
use crate::retrieval::lexical;

/// A patch touching more than this share of the rows (1/n) decodes them all instead: one
/// parallel pass beats that many lookups. Postings whose ids changed by more than this share
/// since they were built are built again too.
const PATCH_AT_MOST_ONE_IN: usize = 8;

/// See the module doc.
pub struct SkillCache {
    pub revision: u64,
    /// The index file's identity: a rebuilt index starts its revisions again.
    pub epoch: u64,
    /// Sorted by on-disk id; the chunks a change did not touch are shared with the caches of
    /// later revisions (`rows.rs`).
    rows: Rows,
    /// The rows that are worker overviews, in id order (what `index` lists).
    overviews: Vec<Arc<Listed>>,
    /// Built on the first `get` miss of the revision (see [`Earlier`]), or shared with the
    /// previous revision's when the ids are the same.
    postings: OnceLock<Arc<Postings>>,
    /// What the first miss derives the postings from; taken when it does.
    earlier: Mutex<Option<Earlier>>,
    /// Built on the first `search` of the revision; replaced when the terms were numbered
    /// again since (`SkillTerms::resolve`).
    search: RwLock<Option<Arc<lexical::Index>>>,
    /// Built on the first `catalog` of the revision.
    catalog: OnceLock<Arc<CatalogIndex>>,
    /// Which rows are Agent Skill resources (`skills::resources`), by position; computed on
    /// the revision's first search or embedding pass.
    resources: OnceLock<Vec<bool>>,
}

/// The postings of an earlier revision, and the ids added and removed since.
#[derive(Clone)]
struct Earlier {
    postings: Arc<Postings>,
    added: BTreeSet<Box<str>>,
    removed: BTreeSet<Box<str>>,
}

impl Earlier {
    fn add(&mut self, id: &str) {
        if !self.removed.remove(id) {
            self.added.insert(id.into());
        }
    }

    fn remove(&mut self, id: &str) {
        if !self.added.remove(id) {
            self.removed.insert(id.into());
        }
    }

    fn changes(&self) -> usize {
        self.added.len() + self.removed.len()
    }
}

impl SkillCache {
    /// Decodes every skill row of a snapshot, each into its compact row as it is read: on a
    /// large tree the decoded rows would take more memory than the cache itself.
    pub fn build(reader: &Reader) -> Result<SkillCache> {
        let rows = reader.map_skills(|id, row| Arc::new(Listed::new(id, &row)))?;
        Ok(SkillCache::of(reader.revision()?, reader.epoch()?, rows))
    }

    fn of(revision: u64, epoch: u64, rows: Vec<Arc<Listed>>) -> SkillCache {
        let overviews = rows
            .iter()
            .filter(|r| r.overview.is_some())
            .cloned()
            .collect();
        SkillCache {
            revision,
            epoch,
            rows: Rows::new(rows),
            overviews,
            postings: OnceLock::new(),
            earlier: Mutex::new(None),
            search: RwLock::default(),
            catalog: OnceLock::new(),
            resources: OnceLock::new(),
        }
    }

    /// This cache brought to `reader`'s revision: the rows the change log names since this
    /// one's revision decoded again, the others shared. `None` when `reader` is not a later
    /// revision of the same index file, when the log no longer reaches back, or when so much
    /// changed that [`SkillCache::build`] is cheaper.
    pub fn advance(&self, reader: &Reader) -> Result<Option<SkillCache>> {
        let revision = reader.revision()?;
        if reader.epoch()? != self.epoch || revision < self.revision {
            return Ok(None);
        }
        let Some(changed) = reader.changed_since(Logged::Skills, self.revision)? else {
            return Ok(None);
        };
        if changed.len() > self.rows.len() / PATCH_AT_MOST_ONE_IN {
            return Ok(None);
        }
        let mut rows = self.rows.clone();
        let mut overviews = self.overviews.clone();
        let mut earlier = self.earlier_for_next();
        for id in changed {
            let at = rows.search(&id);
            match (reader.skill(&id)?, at) {
                (Some(row), Ok(i)) => {
                    let row = Arc::new(Listed::new(id, &row));
                    patch_overview(&mut overviews, row.id(), Some(&row));
                    rows.replace(i, row);
                }
                (Some(row), Err(i)) => {
                    let row = Arc::new(Listed::new(id, &row));
                    patch_overview(&mut overviews, row.id(), Some(&row));
                    if let Some(earlier) = &mut earlier {
                        earlier.add(row.id());
                    }
                    rows.insert(i, row);
                }
                (None, Ok(i)) => {
                    let gone = rows.remove(i);
                    patch_overview(&mut overviews, gone.id(), None);
                    if let Some(earlier) = &mut earlier {
                        earlier.remove(gone.id());
                    }
                }
                (None, Err(_)) => {}
            }
        }
        let earlier = earlier.filter(|e| e.changes() <= rows.len() / PATCH_AT_MOST_ONE_IN);
        let (postings, earlier) = match earlier {
            Some(e) if e.changes() == 0 => (OnceLock::from(e.postings), None),
            other => (OnceLock::new(), other),
        };
        Ok(Some(SkillCache {
            revision,
            epoch: self.epoch,
            rows,
            overviews,
            postings,
            earlier: Mutex::new(earlier),
            search: RwLock::default(),
            catalog: OnceLock::new(),
            resources: OnceLock::new(),
        }))
    }

    /// What the next revision's postings can come from: this one's when built, else what this
    /// one would have derived its own from.
    fn earlier_for_next(&self) -> Option<Earlier> {
        match self.postings.get() {
            Some(postings) => Some(Earlier {
                postings: postings.clone(),
                added: BTreeSet::new(),
                removed: BTreeSet::new(),
            }),
            None => locks::lock(&self.earlier).clone(),
        }
    }

    /// The revision's Agent Skills, as `catalog` reads them (built on its first call; `doubled`
    /// is the same for every call of a directory, whose roots are fixed).
    pub fn catalog_index(&self, doubled: &Doubled) -> Arc<CatalogIndex> {
        self.catalog
            .get_or_init(|| Arc::new(CatalogIndex::build(&self.rows, doubled)))
            .clone()
    }

    /// Whether the row at `position` is an Agent Skill's resource, which skill search neither
    /// ranks nor embeds (`skills::resources`).
    pub fn is_resource(&self, position: u32) -> bool {
        self.resources()
            .get(position as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Which rows are Agent Skill resources, by position (computed on first use).
    pub fn resources(&self) -> &[bool] {
        self.resources.get_or_init(|| resource_flags(&self.rows))
    }

    /// Every row, in on-disk id order.
    pub fn rows(&self) -> &Rows {
        &self.rows
    }

    /// The worker overviews among the rows, in on-disk id order.
    pub fn overviews(&self) -> &[Arc<Listed>] {
        &self.overviews
    }

    /// The rows whose on-disk id starts with `prefix`.
    fn with_prefix(&self, prefix: &str) -> Span<'_> {
        self.rows.span(self.prefix_range(prefix))
    }

    /// The positions of the rows whose on-disk id starts with `prefix` (they sit together in
    /// id order).
    pub fn prefix_range(&self, prefix: &str) -> Range<usize> {
        let start = self.rows.partition_point(|r| r.id() < prefix);
        let end = self
            .rows
            .partition_point(|r| r.id() < prefix || r.id().starts_with(prefix));
        start..end
    }

    /// The row of an on-disk id.
    pub fn row(&self, id: &str) -> Option<&Listed> {
        self.rows.search(id).ok().map(|i| &**self.rows.at(i))
    }

    /// The position of an on-disk id's row in this revision.
    pub fn position_of(&self, id: &str) -> Option<u32> {
        self.rows.search(id).ok().map(|i| i as u32)
    }

    /// The rows of namespace `ns`: the id `ns` itself and every id under `ns/`, in id order.
    pub fn namespace<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Listed> + 'a {
        self.row(ns)
            .into_iter()
            .chain(self.with_prefix(&format!("{ns}/")).map(|r| &**r))
    }

    /// The rows whose on-disk id has `segment` as one of its `/`-separated parts.
    pub fn sharing_segment(&self, segment: &str) -> Posting<'_> {
        self.postings().posting(segment)
    }

    /// The lowercase on-disk id at `position`, read from one contiguous text rather than the
    /// row (a miss measures thousands of candidates).
    pub fn lowercase_id_at(&self, position: u32) -> &str {
        self.postings().id_at(position as usize)
    }

    fn postings(&self) -> &Postings {
        self.postings.get_or_init(|| {
            let started = std::time::Instant::now();
            let earlier = locks::lock(&self.earlier).take();
            let postings = earlier
                .and_then(|e| Postings::derive(&e, &self.rows))
                .unwrap_or_else(|| Postings::build(&self.rows));
            tracing::debug!(
                derived = postings.derived,
                rows = self.rows.len(),
                micros = started.elapsed().as_micros() as u64,
                "miss postings made"
            );
            Arc::new(postings)
        })
    }

    /// The revision's skill search index, built by `build` on the first call (two searches
    /// racing on a new revision may both build it; one is kept).
    pub fn search_index(
        &self,
        build: impl FnOnce() -> Result<lexical::Index>,
    ) -> Result<Arc<lexical::Index>> {
        if let Some(index) = self.kept_search_index() {
            return Ok(index);
        }
        let built = Arc::new(build()?);
        Ok(locks::write(&self.search).get_or_insert(built).clone())
    }

    /// The revision's skill search index, if one was built.
    pub fn kept_search_index(&self) -> Option<Arc<lexical::Index>> {
        locks::read(&self.search).clone()
    }

    /// Keeps `index` as the revision's skill search index in place of the one built before,
    /// under terms since numbered again.
    pub fn replace_search_index(&self, index: Arc<lexical::Index>) {
        *locks::write(&self.search) = Some(index);
    }

    /// The row at a position in this revision, as [`SkillCache::sharing_segment`] and the
    /// skill search's lanes give them.
    pub fn at(&self, position: u32) -> &Listed {
        self.rows.at(position as usize)
    }
}

/// Puts `row` (or nothing) where the overview of `id` sits in `overviews`, if it is one.
fn patch_overview(overviews: &mut Vec<Arc<Listed>>, id: &str, row: Option<&Arc<Listed>>) {
    let at = overviews.binary_search_by(|r| r.id().cmp(id));
    let row = row.filter(|r| r.overview.is_some()).cloned();
    match (at, row) {
        (Ok(i), Some(row)) => overviews[i] = row,
        (Ok(i), None) => {
            overviews.remove(i);
        }
        (Err(i), Some(row)) => overviews.insert(i, row),
        (Err(_), None) => {}
    }
}

/// What a `get` miss looks candidates up by: for each `/`-separated segment of the on-disk ids,
/// the rows that have it (one array for all segments, each segment a range of it), and the
/// lowercase ids one after another. They depend on the ids alone.
struct Postings {
    /// Each segment's number: its rows are `positions[starts[n]..starts[n + 1]]`. A derived
    /// set keeps the segments no id has any more, with no rows.
    segments: Segments,
    starts: Vec<u32>,
    /// Row positions (in id order), ascending within a segment.
    positions: Vec<u32>,
    /// `shapes[i]` is the shape of the row at `positions[i]`.
    shapes: Vec<Shape>,
    /// The lowercase on-disk ids one after another; `ends[i]` is where row `i`'s ends.
    ids: String,
    ends: Vec<u32>,
    /// Derived from an earlier revision's rather than built from every row.
    derived: bool,
}

fn text_offset(len: usize) -> u32 {
    u32::try_from(len).expect("ids and postings under 4 GiB")
}

impl Postings {
    /// From every row.
    fn build(rows: &Rows) -> Postings {
        let mut segments = Segments::default();
        let mut lists: Vec<Vec<(u32, Shape)>> = Vec::new();
        let mut ids = String::new();
        let mut ends = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let lowercase = row.id().to_lowercase();
            let shape = Shape::of(&lowercase);
            for part in row.id().split('/') {
                let (n, new) = segments.number(part);
                if new {
                    lists.push(Vec::new());
                }
                push_once(&mut lists[n as usize], i as u32, shape);
            }
            ids.push_str(&lowercase);
            ends.push(text_offset(ids.len()));
        }
        Postings::flatten(segments, &lists, ids, ends)
    }

    fn flatten(
        segments: Segments,
        lists: &[Vec<(u32, Shape)>],
        ids: String,
        ends: Vec<u32>,
    ) -> Postings {
        let total = lists.iter().map(Vec::len).sum();
        let mut starts = Vec::with_capacity(lists.len() + 1);
        let mut positions = Vec::with_capacity(total);
        let mut shapes = Vec::with_capacity(total);
        starts.push(0);
        for list in lists {
            for &(position, shape) in list {
                positions.push(position);
                shapes.push(shape);
            }
            starts.push(text_offset(positions.len()));
        }
        Postings {
            segments,
            starts,
            positions,
            shapes,
            ids,
            ends,
            derived: false,
        }
    }

    /// `earlier`'s postings brought to `rows` (the rows of a later revision, whose ids are the
    /// earlier ones with `added` and without `removed`): each position moved past the rows
    /// added and removed before it, the removed rows dropped, the added ones put in. `None`
    /// when the rows do not hold what `earlier` says they hold.
    fn derive(earlier: &Earlier, rows: &Rows) -> Option<Postings> {
        let base = &earlier.postings;
        let position = |id: &str| rows.search(id);
        // The new positions of the added rows, ascending (the set is in id order).
        let mut added = Vec::with_capacity(earlier.added.len());
        for id in &earlier.added {
            added.push(u32::try_from(position(id).ok()?).ok()?);
        }
        // The earlier positions of the removed rows: the rows before one in the earlier
        // revision are the rows before it now, less the added, plus the removed.
        let mut removed = Vec::with_capacity(earlier.removed.len());
        for (rank, id) in earlier.removed.iter().enumerate() {
            let now_before = position(id).err()?;
            let added_before = earlier.added.iter().take_while(|a| a < &id).count();
            removed.push(u32::try_from(now_before - added_before + rank).ok()?);
        }
        if base.ends.len() + added.len() != rows.len() + removed.len() {
            return None;
        }
        // The k-th kept row moves past the added rows `a` with `added[a] - a <= k`.
        let thresholds: Vec<u32> = added
            .iter()
            .enumerate()
            .map(|(a, &p)| p - a as u32)
            .collect();

        let mut segments = base.segments.clone();
        let mut additions: HashMap<u32, Vec<(u32, Shape)>> = HashMap::new();
        let mut lowercase_added = Vec::with_capacity(added.len());
        let mut new_lists: Vec<Vec<(u32, Shape)>> = Vec::new();
        let first_new = base.starts.len() as u32 - 1;
        for &q in &added {
            let id = rows.at(q as usize).id();
            let lowercase = id.to_lowercase();
            let shape = Shape::of(&lowercase);
            for part in id.split('/') {
                let (n, new) = segments.number(part);
                if new {
                    new_lists.push(Vec::new());
                }
                if n >= first_new {
                    push_once(&mut new_lists[(n - first_new) as usize], q, shape);
                } else {
                    push_once(additions.entry(n).or_default(), q, shape);
                }
            }
            lowercase_added.push(lowercase);
        }

        let total = base.positions.len() + additions.values().map(Vec::len).sum::<usize>();
        let mut starts = Vec::with_capacity(base.starts.len() + new_lists.len());
        let mut positions = Vec::with_capacity(total);
        let mut shapes = Vec::with_capacity(total);
        starts.push(0);
        for n in 0..first_new {
            let range = base.starts[n as usize] as usize..base.starts[n as usize + 1] as usize;
            let mut extra = additions
                .get(&n)
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .peekable();
            let (mut r, mut t) = (0, 0);
            for (&p, &shape) in base.positions[range.clone()]
                .iter()
                .zip(&base.shapes[range])
            {
                while removed.get(r).is_some_and(|&x| x < p) {
                    r += 1;
                }
                if removed.get(r) == Some(&p) {
                    continue;
                }
                let kept = p - r as u32;
                while thresholds.get(t).is_some_and(|&x| x <= kept) {
                    t += 1;
                }
                let q = kept + t as u32;
                while let Some(&(a, a_shape)) = extra.next_if(|e| e.0 < q) {
                    positions.push(a);
                    shapes.push(a_shape);
                }
                positions.push(q);
                shapes.push(shape);
            }
            for &(a, a_shape) in extra {
                positions.push(a);
                shapes.push(a_shape);
            }
            starts.push(text_offset(positions.len()));
        }
        for list in &new_lists {
            for &(q, shape) in list {
                positions.push(q);
                shapes.push(shape);
            }
            starts.push(text_offset(positions.len()));
        }

        // The lowercase ids: the kept ones copied, the added ones put in between.
        let mut ids = String::with_capacity(base.ids.len());
        let mut ends = Vec::with_capacity(rows.len());
        let (mut b, mut r, mut a) = (0usize, 0usize, 0usize);
        for q in 0..rows.len() as u32 {
            if added.get(a) == Some(&q) {
                ids.push_str(&lowercase_added[a]);
                a += 1;
            } else {
                while removed.get(r) == Some(&(b as u32)) {
                    b += 1;
                    r += 1;
                }
                ids.push_str(base.id_at(b));
                b += 1;
            }
            ends.push(text_offset(ids.len()));
        }
        Some(Postings {
            segments,
            starts,
            positions,
            shapes,
            ids,
            ends,
            derived: true,
        })
    }

    fn posting(&self, segment: &str) -> Posting<'_> {
        match self.segments.get(segment) {
            Some(n) => {
                let range = self.starts[n as usize] as usize..self.starts[n as usize + 1] as usize;
                Posting {
                    positions: &self.positions[range.clone()],
                    shapes: &self.shapes[range],
                }
            }
            None => Posting {
                positions: &[],
                shapes: &[],
            },
        }
    }

    fn id_at(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] } as usize;
        &self.ids[start..self.ends[i] as usize]
    }
}

/// Lists a row under a segment once, though its id may repeat the segment.
fn push_once(list: &mut Vec<(u32, Shape)>, position: u32, shape: Shape) {
    if list.last().map(|(p, _)| *p) != Some(position) {
        list.push((position, shape));
    }
}

/// The rows that have one segment: their positions (in id order) ascending, and beside each
/// the [`Shape`] of its lowercase id, a bound of its edit distance that passes most candidates
/// over without reading them. The shapes are kept in the posting's order, not the rows', because
/// a miss walks a posting of thousands of rows spread over the whole tree: one array indexed by
/// position cost a cache miss per row, which was most of a miss's time.
#[derive(Clone, Copy)]
pub struct Posting<'a> {
    positions: &'a [u32],
    shapes: &'a [Shape],
}

impl<'a> Posting<'a> {
    /// The positions, ascending.
    pub fn positions(&self) -> &'a [u32] {
        self.positions
    }

    /// Each position with its row's shape, in position order.
    pub fn rows(&self) -> impl Iterator<Item = (u32, &'a Shape)> + 'a {
        self.positions.iter().copied().zip(self.shapes)
    }
}

/// The per-revision structures of a cache in a form that does not depend on how they were
/// made, for tests that compare derived structures with ones built from scratch.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, PartialEq)]
pub struct Structures {
    /// Each segment with rows, and its rows' positions and shapes.
    pub segments: std::collections::BTreeMap<String, Vec<(u32, Shape)>>,
    pub lowercase_ids: Vec<String>,
    pub overviews: Vec<String>,
    /// Each row's id and list JSON, in order.
    pub rows: Vec<(String, String)>,
    /// Whether the row chunks keep their rules (`rows.rs`).
    pub chunks_well_formed: bool,
}

#[cfg(any(test, feature = "testing"))]
impl SkillCache {
    /// This cache's structures (its postings built, or derived, first).
    pub fn structures(&self) -> Structures {
        let postings = self.postings();
        Structures {
            segments: postings
                .segments
                .names()
                .map(|s| {
                    let p = postings.posting(s);
                    (
                        s.to_string(),
                        p.rows().map(|(q, sh)| (q, *sh)).collect::<Vec<_>>(),
                    )
                })
                .filter(|(_, rows)| !rows.is_empty())
                .collect(),
            lowercase_ids: (0..self.rows.len())
                .map(|i| postings.id_at(i).to_string())
                .collect(),
            overviews: self.overviews.iter().map(|r| r.id().to_string()).collect(),
            rows: self
                .rows
                .iter()
                .map(|r| {
                    let mut json = String::new();
                    r.push_json(&mut json, true);
                    (r.id().to_string(), json)
                })
                .collect(),
            chunks_well_formed: self.rows.well_formed(),
        }
    }

    /// Whether this revision's postings are built, or shared with the revision before.
    pub fn postings_ready(&self) -> bool {
        self.postings.get().is_some()
    }

    /// Whether this revision's postings (made by now) were derived from an earlier revision's,
    /// here or in a revision they are shared with.
    pub fn postings_reused(&self) -> bool {
        self.postings().derived
    }
}

#[cfg(test)]
impl SkillCache {
    /// A cache of hand-made rows, for tests of what reads it.
    pub fn of_rows(mut rows: Vec<Listed>) -> SkillCache {
        rows.sort_by(|a, b| a.id().cmp(b.id()));
        SkillCache::of(0, 0, rows.into_iter().map(Arc::new).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;
    use crate::Directory;
    use crate::config::Config;

    fn write_skill(skills: &Path, id: &str, body: &str) {
        let file = skills.join(format!("{id}.md"));
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, body).unwrap();
    }

    /// What a cache answers with: each row's id and list JSON, in order.
    fn answers(cache: &SkillCache) -> Vec<(String, String)> {
        cache
            .rows()
            .iter()
            .map(|r| {
                let mut json = String::new();
                r.push_json(&mut json, true);
                (r.id().to_string(), json)
            })
            .collect()
    }

    #[test]
    fn an_advanced_cache_equals_one_built_at_its_revision() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::for_root(dir.path());
        let skills = config.paths.skills_folder.clone();
        for i in 0..64 {
            write_skill(
                &skills,
                &format!("ns{}/skill-{i:02}", i % 4),
                "# Title\n\nBody.\n",
            );
        }
        write_skill(&skills, "ns1/index", "# Overview\n\nThe ns1 worker.\n");
        let directory = Directory::open(config).unwrap();
        directory.reconcile().unwrap();
        let mut cache = SkillCache::build(&directory.reader().unwrap()).unwrap();

        // Each step changes a few rows: an edit, a new id between existing ones, a new one at
        // the end, a removal, a namespace overview appearing (which changes the row shown
        // under the namespace's id) and going.
        let steps: [&dyn Fn(); 5] = [
            &|| write_skill(&skills, "ns0/skill-04", "# Edited\n\nNew text.\n"),
            &|| write_skill(&skills, "ns2/skill-05a", "# Between\n\nInserted.\n"),
            &|| write_skill(&skills, "zz/last", "---\ntype: index\n---\n# Z\n\nLast.\n"),
            &|| fs::remove_file(skills.join("ns3/skill-07.md")).unwrap(),
            &|| {
                fs::remove_file(skills.join("ns1/index.md")).unwrap();
                write_skill(&skills, "ns2/index", "# Overview\n\nThe ns2 worker.\n");
            },
        ];
        for step in steps {
            step();
            directory.reconcile().unwrap();
            let reader = directory.reader().unwrap();
            let advanced = cache
                .advance(&reader)
                .unwrap()
                .expect("a few changes patch the cache");
            let built = SkillCache::build(&reader).unwrap();
            assert_eq!(advanced.revision, built.revision);
            assert_eq!(answers(&advanced), answers(&built));
            cache = advanced;
        }
    }

    #[test]
    fn a_cache_does_not_advance_into_another_index_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::for_root(dir.path());
        write_skill(&config.paths.skills_folder, "a/b", "# B\n");
        let directory = Directory::open(config.clone()).unwrap();
        directory.reconcile().unwrap();
        let cache = SkillCache::build(&directory.reader().unwrap()).unwrap();
        drop(directory);

        let mut other = config;
        other.paths.index_path = dir.path().join("other.redb");
        let directory = Directory::open(other).unwrap();
        directory.reconcile().unwrap();
        assert!(
            cache
                .advance(&directory.reader().unwrap())
                .unwrap()
                .is_none()
        );
    }
}
