//! The distinct `/`-separated segments of the on-disk ids, each with a number, found by name:
//! what a `get` miss's postings (`cache.rs`) are keyed by. The names sit in one text, and the
//! hash table holds only their numbers: at 50,000 skills the ids have about 57,000 segments,
//! which took 4 MiB of the worker's resident set as the `Arc<str>` keys of a hash map, and take
//! 1.3 MiB here.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

/// See the module doc. Numbers run from 0 in the order the names were first numbered.
#[derive(Clone, Default)]
pub struct Segments {
    /// The names one after another, in number order; `ends[n]` is where name `n` ends.
    names: String,
    ends: Vec<u32>,
    /// The numbers, placed by their names' hashes.
    table: HashTable<u32>,
    hasher: RandomState,
}

impl Segments {
    /// The number of `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.find(self.hasher.hash_one(name), name)
    }

    /// The number of `name`, whose hash is `hash`, if it has one.
    fn find(&self, hash: u64, name: &str) -> Option<u32> {
        self.table
            .find(hash, |&n| name_of(&self.names, &self.ends, n) == name)
            .copied()
    }

    /// The number of `name`, and whether it is new: a name not numbered yet takes the next
    /// number.
    pub fn number(&mut self, name: &str) -> (u32, bool) {
        let hash = self.hasher.hash_one(name);
        if let Some(n) = self.find(hash, name) {
            return (n, false);
        }
        let n = u32::try_from(self.ends.len()).expect("under 4 billion names");
        self.names.push_str(name);
        self.ends
            .push(u32::try_from(self.names.len()).expect("names under 4 GiB"));
        let Segments {
            names,
            ends,
            table,
            hasher,
        } = self;
        table.insert_unique(hash, n, |&m| hasher.hash_one(name_of(names, ends, m)));
        (n, true)
    }

    /// Every name, in number order.
    #[cfg(any(test, feature = "testing"))]
    pub fn names(&self) -> impl Iterator<Item = &str> {
        (0..self.ends.len() as u32).map(|n| name_of(&self.names, &self.ends, n))
    }
}

/// Name `n` of `names`, which end at `ends`.
fn name_of<'a>(names: &'a str, ends: &[u32], n: u32) -> &'a str {
    let n = n as usize;
    let start = if n == 0 { 0 } else { ends[n - 1] as usize };
    &names[start..ends[n] as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names keep their numbers, in a copy too, new ones take the next, and every name is
    /// found by its number, a missing one by none.
    #[test]
    fn names_are_numbered_once_and_found_by_name() {
        let mut segments = Segments::default();
        let numbers: Vec<(u32, bool)> = ["m", "b", "z", "b", "a", "m"]
            .iter()
            .map(|name| segments.number(name))
            .collect();
        let new = |n| (n, true);
        let old = |n| (n, false);
        assert_eq!(numbers, [new(0), new(1), new(2), old(1), new(3), old(0)]);
        assert_eq!(segments.names().collect::<Vec<_>>(), ["m", "b", "z", "a"]);

        let mut later = segments.clone();
        let numbers: Vec<u32> = ["c", "z", "", "zz", "a"]
            .iter()
            .map(|name| later.number(name).0)
            .collect();
        assert_eq!(numbers, [4, 2, 5, 6, 3]);
        for (n, name) in ["m", "b", "z", "a", "c", "", "zz"].iter().enumerate() {
            assert_eq!(later.get(name), Some(n as u32), "{name:?}");
        }
        for missing in ["d", "mm", "y", "zzz", "A"] {
            assert_eq!(later.get(missing), None, "{missing:?}");
        }
        assert_eq!(
            segments.get("c"),
            None,
            "the copy numbered it, not the first"
        );

        // Enough names that the table grows several times.
        let mut many = Segments::default();
        for i in 0..10_000u32 {
            assert_eq!(many.number(&format!("s{i}")), (i, true));
        }
        for i in (0..10_000u32).step_by(7) {
            assert_eq!(many.get(&format!("s{i}")), Some(i));
        }
    }
}
