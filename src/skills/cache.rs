//! The skill rows of one index revision, decoded once and kept sorted by on-disk id, each a
//! compact [`Listed`] ready to be written out: what `list`, `index` and a `get` miss read, instead of decoding every
//! row of the index per call. A later revision of the same index patches only the rows the
//! change log names; a rebuilt index, or a log that no longer reaches back, decodes them all.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use super::listed::Listed;
use crate::doc::distance::Shape;
use crate::error::Result;
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::retrieval::lexical;

/// A patch touching more than this share of the rows (1/n) decodes them all instead: one
/// parallel pass beats that many lookups.
const PATCH_AT_MOST_ONE_IN: usize = 8;

/// See the module doc.
pub struct SkillCache {
    pub revision: u64,
    /// The index file's identity: a rebuilt index starts its revisions again.
    pub epoch: u64,
    /// Sorted by on-disk id; shared with the caches of later revisions where unchanged.
    rows: Vec<Arc<Listed>>,
    /// Built on the first `get` miss of the revision.
    postings: OnceLock<Postings>,
    /// Built on the first `search` of the revision.
    search: OnceLock<Arc<lexical::Index>>,
}

impl SkillCache {
    /// Decodes every skill row of a snapshot, each into its compact row as it is read: on a
    /// large tree the decoded rows would take more memory than the cache itself.
    pub fn build(reader: &Reader) -> Result<SkillCache> {
        let rows = reader.map_skills(|id, row| Arc::new(Listed::new(id, &row)))?;
        Ok(SkillCache {
            revision: reader.revision()?,
            epoch: reader.epoch()?,
            rows,
            postings: OnceLock::new(),
            search: OnceLock::new(),
        })
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
        for id in changed {
            let at = rows.binary_search_by(|r| (*r.id).cmp(id.as_str()));
            match (reader.skill(&id)?, at) {
                (Some(row), Ok(i)) => rows[i] = Arc::new(Listed::new(id, &row)),
                (Some(row), Err(i)) => rows.insert(i, Arc::new(Listed::new(id, &row))),
                (None, Ok(i)) => {
                    rows.remove(i);
                }
                (None, Err(_)) => {}
            }
        }
        Ok(Some(SkillCache {
            revision,
            epoch: self.epoch,
            rows,
            postings: OnceLock::new(),
            search: OnceLock::new(),
        }))
    }

    /// Every row, in on-disk id order.
    pub fn rows(&self) -> &[Arc<Listed>] {
        &self.rows
    }

    /// The rows whose on-disk id starts with `prefix` (they sit together in id order).
    pub fn with_prefix(&self, prefix: &str) -> &[Arc<Listed>] {
        &self.rows[self.prefix_range(prefix)]
    }

    /// The positions of the rows whose on-disk id starts with `prefix`.
    pub fn prefix_range(&self, prefix: &str) -> Range<usize> {
        let start = self.rows.partition_point(|r| *r.id < *prefix);
        let len = self.rows[start..].partition_point(|r| r.id.starts_with(prefix));
        start..start + len
    }

    /// The row of an on-disk id.
    pub fn row(&self, id: &str) -> Option<&Listed> {
        self.rows
            .binary_search_by(|r| (*r.id).cmp(id))
            .ok()
            .map(|i| &*self.rows[i])
    }

    /// The rows of namespace `ns`: the id `ns` itself and every id under `ns/`, in id order.
    pub fn namespace<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Listed> + 'a {
        self.row(ns)
            .into_iter()
            .chain(self.with_prefix(&format!("{ns}/")).iter().map(|r| &**r))
    }

    /// The rows whose on-disk id has `segment` as one of its `/`-separated parts.
    pub fn sharing_segment(&self, segment: &str) -> &Posting {
        static NONE: Posting = Posting {
            positions: Vec::new(),
            shapes: Vec::new(),
        };
        self.postings().segments.get(segment).unwrap_or(&NONE)
    }

    /// The lowercase on-disk id at `position`, read from one contiguous text rather than the
    /// row (a miss measures thousands of candidates).
    pub fn lowercase_id_at(&self, position: u32) -> &str {
        let postings = self.postings();
        let i = position as usize;
        let start = if i == 0 { 0 } else { postings.ends[i - 1] } as usize;
        &postings.ids[start..postings.ends[i] as usize]
    }

    fn postings(&self) -> &Postings {
        self.postings.get_or_init(|| {
            let mut segments: HashMap<Box<str>, Posting> = HashMap::new();
            let mut ids = String::new();
            let mut ends = Vec::with_capacity(self.rows.len());
            for (i, row) in self.rows.iter().enumerate() {
                let lowercase = row.id.to_lowercase();
                let shape = Shape::of(&lowercase);
                for part in row.id.split('/') {
                    segments
                        .entry(part.into())
                        .or_default()
                        .push(i as u32, shape);
                }
                ids.push_str(&lowercase);
                ends.push(u32::try_from(ids.len()).expect("ids under 4 GiB"));
            }
            Postings {
                segments,
                ids,
                ends,
            }
        })
    }

    /// The revision's skill search index, built by `build` on the first call (two searches
    /// racing on a new revision may both build it; one is kept).
    pub fn search_index(
        &self,
        build: impl FnOnce() -> Result<lexical::Index>,
    ) -> Result<Arc<lexical::Index>> {
        if let Some(index) = self.search.get() {
            return Ok(index.clone());
        }
        let built = Arc::new(build()?);
        Ok(self.search.get_or_init(|| built).clone())
    }

    /// The row at a position [`SkillCache::sharing_segment`] gave.
    pub fn at(&self, position: u32) -> &Listed {
        &self.rows[position as usize]
    }
}

/// What a `get` miss looks candidates up by.
struct Postings {
    /// Each `/`-separated segment of the on-disk ids, with the rows that have it.
    segments: HashMap<Box<str>, Posting>,
    /// The lowercase on-disk ids one after another; `ends[i]` is where row `i`'s ends.
    ids: String,
    ends: Vec<u32>,
}

/// The rows that have one segment: their positions (in id order) ascending, and beside each
/// the [`Shape`] of its lowercase id, a bound of its edit distance that passes most candidates
/// over without reading them. The shapes are kept in the posting's order, not the rows', because
/// a miss walks a posting of thousands of rows spread over the whole tree: one array indexed by
/// position cost a cache miss per row, which was most of a miss's time.
#[derive(Default)]
pub struct Posting {
    positions: Vec<u32>,
    /// `shapes[i]` is the shape of the row at `positions[i]`.
    shapes: Vec<Shape>,
}

impl Posting {
    fn push(&mut self, position: u32, shape: Shape) {
        // An id that repeats a segment is listed once under it.
        if self.positions.last() != Some(&position) {
            self.positions.push(position);
            self.shapes.push(shape);
        }
    }

    /// The positions, ascending.
    pub fn positions(&self) -> &[u32] {
        &self.positions
    }

    /// Each position with its row's shape, in position order.
    pub fn rows(&self) -> impl Iterator<Item = (u32, &Shape)> {
        self.positions.iter().copied().zip(&self.shapes)
    }
}

#[cfg(test)]
impl SkillCache {
    /// A cache of hand-made rows, for tests of what reads it.
    pub fn of_rows(mut rows: Vec<Listed>) -> SkillCache {
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        SkillCache {
            revision: 0,
            epoch: 0,
            rows: rows.into_iter().map(Arc::new).collect(),
            postings: OnceLock::new(),
            search: OnceLock::new(),
        }
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
                (r.id.to_string(), json)
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
