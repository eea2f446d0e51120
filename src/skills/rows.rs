//! The rows of one revision in on-disk id order, held in chunks that later revisions share
//! (issue 31). A flat list of 50,000 shared rows cost every new revision a pass over all of
//! them: one reference count raised per row when the next revision copied the list, one
//! lowered when the old list went, each on a row of its own somewhere in the heap. That was
//! most of what the first read after a write paid (about 2 ms at 50,000 skills). Here a new
//! revision copies one handle per chunk and rebuilds only the chunks its changes fall in, so
//! it costs what the change costs: about √n handles plus the rows of the touched chunks.
//!
//! Rows are still addressed by position (what the miss postings and list picks store): a
//! position is found through the chunks' start positions.

use std::ops::Range;
use std::sync::Arc;

use super::listed::Listed;
use crate::rules::skill::Visibility;

/// Chunks hold at least this many rows when there are that many (a tiny tree is one chunk).
const MIN_CHUNK: usize = 16;

type Chunk = Arc<Vec<Arc<Listed>>>;

/// See the module doc.
#[derive(Clone)]
pub struct Rows {
    /// None empty, each sorted, every id in one below every id in the next.
    chunks: Vec<Chunk>,
    /// `starts[c]` is the position of chunk `c`'s first row; one more entry holds the length.
    starts: Vec<u32>,
    /// The length chunks are cut to; one that grows to twice it is split in two.
    chunk: usize,
}

fn position(n: usize) -> u32 {
    u32::try_from(n).expect("under 4 billion rows")
}

impl Rows {
    /// Rows already in id order, cut into chunks of about √n rows (the length at which a
    /// revision's copy of the chunk handles costs what rebuilding one chunk does).
    pub fn new(rows: Vec<Arc<Listed>>) -> Rows {
        let chunk = (rows.len() as f64).sqrt().ceil() as usize;
        let chunk = chunk.max(MIN_CHUNK);
        let mut chunks = Vec::with_capacity(rows.len().div_ceil(chunk));
        let mut rest = rows.into_iter().peekable();
        while rest.peek().is_some() {
            chunks.push(Arc::new(rest.by_ref().take(chunk).collect::<Vec<_>>()));
        }
        let mut out = Rows {
            chunks,
            starts: Vec::new(),
            chunk,
        };
        out.renumber();
        out
    }

    fn renumber(&mut self) {
        self.starts.clear();
        self.starts.reserve(self.chunks.len() + 1);
        let mut at = 0;
        for chunk in &self.chunks {
            self.starts.push(position(at));
            at += chunk.len();
        }
        self.starts.push(position(at));
    }

    pub fn len(&self) -> usize {
        *self.starts.last().expect("starts hold the length") as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chunk holding `position` (which must be below the length).
    fn chunk_of(&self, position: usize) -> usize {
        self.starts.partition_point(|&s| s as usize <= position) - 1
    }

    /// The row at a position.
    pub fn at(&self, position: usize) -> &Arc<Listed> {
        let c = self.chunk_of(position);
        &self.chunks[c][position - self.starts[c] as usize]
    }

    /// The position of `id` (`Ok`), or where it would go (`Err`), as `slice::binary_search`.
    pub fn search(&self, id: &str) -> Result<usize, usize> {
        let c = self.chunks.partition_point(|chunk| chunk[0].id() <= id);
        if c == 0 {
            return Err(0);
        }
        let start = self.starts[c - 1] as usize;
        self.chunks[c - 1]
            .binary_search_by(|r| r.id().cmp(id))
            .map(|i| start + i)
            .map_err(|i| start + i)
    }

    /// Whether the row `id` exists and `visibility` lets the caller see it.
    pub fn seen(&self, id: &str, visibility: Visibility<'_>) -> bool {
        self.search(id).is_ok_and(|at| {
            let row = self.at(at);
            visibility.allows_id(row.id(), row.always_visible)
        })
    }

    /// The first position whose row fails `pred`, which holds for a leading run of the rows.
    pub fn partition_point(&self, pred: impl Fn(&Listed) -> bool) -> usize {
        let c = self
            .chunks
            .partition_point(|chunk| pred(chunk.last().expect("no empty chunk")));
        match self.chunks.get(c) {
            Some(chunk) => self.starts[c] as usize + chunk.partition_point(|r| pred(r)),
            None => self.len(),
        }
    }

    /// Every row, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Arc<Listed>> + '_ {
        self.span(0..self.len())
    }

    /// The rows at the positions of `range`, in order.
    pub fn span(&self, range: Range<usize>) -> Span<'_> {
        let (chunk, offset) = if range.start < self.len() {
            let c = self.chunk_of(range.start);
            (c, range.start - self.starts[c] as usize)
        } else {
            (self.chunks.len(), 0)
        };
        Span {
            chunks: &self.chunks,
            chunk,
            offset,
            left: range.len(),
        }
    }

    /// The rows at ascending `positions`, found chunk by chunk rather than each searched for.
    pub fn picked<'a>(&'a self, positions: &'a [u32]) -> Picked<'a> {
        Picked {
            rows: self,
            positions: positions.iter(),
            chunk: 0,
        }
    }

    /// Puts `row` at `position` in place of the row there.
    pub fn replace(&mut self, position: usize, row: Arc<Listed>) {
        let c = self.chunk_of(position);
        let start = self.starts[c] as usize;
        Arc::make_mut(&mut self.chunks[c])[position - start] = row;
    }

    /// Inserts `row` at `position` (where [`Rows::search`] said its id goes).
    pub fn insert(&mut self, position: usize, row: Arc<Listed>) {
        if self.is_empty() {
            self.chunks = vec![Arc::new(vec![row])];
            self.renumber();
            return;
        }
        // At a chunk's border the row goes at the end of the earlier chunk.
        let c = self.chunk_of(position.saturating_sub(1).min(self.len() - 1));
        let start = self.starts[c] as usize;
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        chunk.insert(position - start, row);
        if chunk.len() >= 2 * self.chunk {
            let second = chunk.split_off(chunk.len() / 2);
            self.chunks.insert(c + 1, Arc::new(second));
            self.renumber();
        } else {
            for s in &mut self.starts[c + 1..] {
                *s += 1;
            }
        }
    }

    /// Removes the row at `position`, and returns it.
    pub fn remove(&mut self, position: usize) -> Arc<Listed> {
        let c = self.chunk_of(position);
        let start = self.starts[c] as usize;
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        let gone = chunk.remove(position - start);
        if chunk.is_empty() {
            self.chunks.remove(c);
            self.renumber();
        } else {
            for s in &mut self.starts[c + 1..] {
                *s -= 1;
            }
        }
        gone
    }

    /// Whether the chunks keep their rules: none empty, none of twice the chunk length or
    /// more, ids ascending across them, starts matching their lengths.
    #[cfg(any(test, feature = "testing"))]
    pub fn well_formed(&self) -> bool {
        let mut copy = self.clone();
        copy.renumber();
        copy.starts == self.starts
            && self
                .chunks
                .iter()
                .all(|c| !c.is_empty() && c.len() < 2 * self.chunk)
            && self
                .iter()
                .zip(self.iter().skip(1))
                .all(|(a, b)| a.id() < b.id())
    }
}

/// The rows of a range of positions, chunk after chunk.
pub struct Span<'a> {
    chunks: &'a [Chunk],
    chunk: usize,
    offset: usize,
    left: usize,
}

impl<'a> Iterator for Span<'a> {
    type Item = &'a Arc<Listed>;

    fn next(&mut self) -> Option<&'a Arc<Listed>> {
        if self.left == 0 {
            return None;
        }
        while self.offset >= self.chunks[self.chunk].len() {
            self.chunk += 1;
            self.offset = 0;
        }
        let row = &self.chunks[self.chunk][self.offset];
        self.offset += 1;
        self.left -= 1;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Span<'_> {}

/// The rows at ascending positions.
pub struct Picked<'a> {
    rows: &'a Rows,
    positions: std::slice::Iter<'a, u32>,
    chunk: usize,
}

impl<'a> Iterator for Picked<'a> {
    type Item = &'a Arc<Listed>;

    fn next(&mut self) -> Option<&'a Arc<Listed>> {
        let position = *self.positions.next()?;
        while self.rows.starts[self.chunk + 1] <= position {
            self.chunk += 1;
        }
        let start = self.rows.starts[self.chunk];
        Some(&self.rows.chunks[self.chunk][(position - start) as usize])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.positions.size_hint()
    }
}

impl ExactSizeIterator for Picked<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::skill::SkillRow;

    fn row(id: &str) -> Arc<Listed> {
        Arc::new(Listed::new(id.to_string(), &SkillRow::blank(id)))
    }

    fn ids(rows: &Rows) -> Vec<String> {
        rows.iter().map(|r| r.id().to_string()).collect()
    }

    /// Random inserts, replacements and removals, each checked against a plain sorted list:
    /// the order, every lookup, ranges and picks, and that the chunks split and go as they
    /// should.
    #[test]
    fn chunked_rows_act_as_one_sorted_list() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut below = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut model: Vec<String> = (0..40).map(|i| format!("m{:04}", i * 10)).collect();
        let mut rows = Rows::new(model.iter().map(|id| row(id)).collect());
        let mut splits = 0;
        for step in 0..3000 {
            let chunks = rows.chunks.len();
            let id = format!("m{:04}", below(600));
            match (rows.search(&id), model.binary_search(&id)) {
                (Ok(at), Ok(expected)) => {
                    assert_eq!(at, expected, "step {step}");
                    if below(3) == 0 {
                        rows.replace(at, row(&id));
                    } else {
                        assert_eq!(*rows.remove(at).id(), *id);
                        model.remove(at);
                    }
                }
                (Err(at), Err(expected)) => {
                    assert_eq!(at, expected, "step {step}");
                    rows.insert(at, row(&id));
                    model.insert(at, id);
                }
                other => panic!("step {step}: {other:?}"),
            }
            splits += usize::from(rows.chunks.len() > chunks);
            assert!(rows.well_formed(), "step {step}");
            assert_eq!(ids(&rows), model, "step {step}");
            let (a, b) = (below(model.len() + 1), below(model.len() + 1));
            let range = a.min(b)..a.max(b);
            let spanned: Vec<&str> = rows.span(range.clone()).map(|r| r.id()).collect();
            assert_eq!(spanned, model[range.clone()], "step {step}");
            let picked: Vec<u32> = range.clone().step_by(3).map(|p| p as u32).collect();
            let got: Vec<&str> = rows.picked(&picked).map(|r| r.id()).collect();
            let want: Vec<&str> = picked.iter().map(|&p| &*model[p as usize]).collect();
            assert_eq!(got, want, "step {step}");
            let bound = format!("m{:04}", below(600));
            assert_eq!(
                rows.partition_point(|r| r.id() < bound.as_str()),
                model.partition_point(|m| *m < bound),
                "step {step}"
            );
        }
        assert!(splits > 0, "no chunk grew to a split");
        // Emptied and filled again.
        while !rows.is_empty() {
            rows.remove(below(rows.len()));
        }
        assert!(rows.chunks.is_empty() && rows.well_formed());
        rows.insert(0, row("b"));
        rows.insert(0, row("a"));
        assert_eq!(ids(&rows), ["a", "b"]);
        assert_eq!(rows.search("c"), Err(2));
    }

    #[test]
    fn a_new_revision_copies_chunk_handles_not_rows() {
        let rows = Rows::new((0..10_000).map(|i| row(&format!("r{i:05}"))).collect());
        assert_eq!(rows.chunk, 100);
        assert_eq!(rows.chunks.len(), 100);
        let mut next = rows.clone();
        next.replace(5_050, row("r05050"));
        // Only the chunk the change fell in is new; each row outside it is held by both.
        let fresh = rows
            .chunks
            .iter()
            .zip(&next.chunks)
            .filter(|(a, b)| !Arc::ptr_eq(a, b))
            .count();
        assert_eq!(fresh, 1);
        assert_eq!(Arc::strong_count(rows.at(0)), 1);
        assert_eq!(Arc::strong_count(rows.at(5_000)), 2);
    }
}
