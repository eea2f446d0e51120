//! Ascending lists of `(key, count)` pairs in few bytes: each pair is stored as the gap from the
//! previous key (the first from 0) and a flag for a count above 1, as one LEB128 varint, then
//! the count itself only when flagged. The BM25 index keeps its postings (document, term count)
//! and each document's counted terms (term, count) this way.
//!
//! Why: those two lists are most of skill search's memory, and most of what they hold is small
//! gaps (a common term is in document after document; a document's terms are numbered near
//! each other) and counts of 1. At 50,000 skills, 6 million pairs took 4 bytes each; coded
//! this way they take about half. Reading them stays one pass, in order, which is how both
//! are read.

/// The most bytes one pair takes: a gap below 2^32 with its flag (33 bits, 5 bytes) and a
/// count below 2^32 (5 bytes).
const MAX_PAIR_BYTES: usize = 10;

/// One pair coded, in a buffer of its own, and how many of its bytes are used.
pub struct Coded {
    bytes: [u8; MAX_PAIR_BYTES],
    len: usize,
}

impl Coded {
    /// The pair whose key is `gap` after the previous one's, counted `count` times (at least
    /// 1).
    pub fn new(gap: u32, count: u32) -> Coded {
        debug_assert!(count >= 1, "a pair is counted at least once");
        let mut coded = Coded {
            bytes: [0; MAX_PAIR_BYTES],
            len: 0,
        };
        coded.put(u64::from(gap) << 1 | u64::from(count > 1));
        if count > 1 {
            coded.put(u64::from(count));
        }
        coded
    }

    fn put(&mut self, mut value: u64) {
        loop {
            let low = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.bytes[self.len] = low;
                self.len += 1;
                return;
            }
            self.bytes[self.len] = low | 0x80;
            self.len += 1;
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Codes `pairs` (keys ascending; the first may be 0) into a new list.
pub fn encode(pairs: impl IntoIterator<Item = (u32, u32)>) -> Box<[u8]> {
    let mut out = Vec::new();
    let mut previous = 0;
    for (key, count) in pairs {
        debug_assert!(key >= previous, "keys ascend");
        out.extend_from_slice(Coded::new(key - previous, count).as_bytes());
        previous = key;
    }
    out.into_boxed_slice()
}

/// The pairs of a coded list, in order.
#[derive(Clone)]
pub struct Pairs<'a> {
    bytes: std::slice::Iter<'a, u8>,
    key: u32,
}

impl<'a> Pairs<'a> {
    pub fn new(bytes: &'a [u8]) -> Pairs<'a> {
        Pairs {
            bytes: bytes.iter(),
            key: 0,
        }
    }

    /// The varint whose first byte was `first` (already read).
    fn varint_from(&mut self, first: u8) -> u64 {
        let mut value = u64::from(first & 0x7f);
        let mut shift = 7;
        let mut byte = first;
        while byte & 0x80 != 0 {
            byte = *self
                .bytes
                .next()
                .expect("a coded list ends on a whole pair");
            value |= u64::from(byte & 0x7f) << shift;
            shift += 7;
        }
        value
    }
}

impl Iterator for Pairs<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        let &first = self.bytes.next()?;
        // Most pairs are one byte: a small gap, counted once.
        let head = if first < 0x80 {
            u64::from(first)
        } else {
            self.varint_from(first)
        };
        // Lists are only ever made by this module, from u32 gaps and counts.
        self.key += (head >> 1) as u32;
        let count = if head & 1 == 0 {
            1
        } else {
            let &first = self
                .bytes
                .next()
                .expect("a coded list ends on a whole pair");
            self.varint_from(first) as u32
        };
        Some((self.key, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::seeded::Xorshift;

    #[test]
    fn pairs_read_back_as_written_across_every_width() {
        let pairs = [
            (0, 1),
            (1, 2),
            (63, 1),
            (64, 255),
            (8_255, 1),
            (8_256, 3),
            (1 << 20, 1),
            (1 << 24, 7),
            (u32::MAX - 1, 1),
            (u32::MAX, u32::MAX),
        ];
        let coded = encode(pairs);
        assert_eq!(Pairs::new(&coded).collect::<Vec<_>>(), pairs);
        assert!(Pairs::new(&encode([])).next().is_none());
    }

    #[test]
    fn small_gaps_counted_once_take_one_byte() {
        let pairs: Vec<(u32, u32)> = (0..100).map(|k| (k * 3, 1)).collect();
        assert_eq!(encode(pairs.iter().copied()).len(), 100);
        // A count above 1 adds its own byte; a gap of 64 or more needs a second.
        assert_eq!(Coded::new(5, 2).as_bytes().len(), 2);
        assert_eq!(Coded::new(64, 1).as_bytes().len(), 2);
        assert_eq!(
            Coded::new(u32::MAX, u32::MAX).as_bytes().len(),
            MAX_PAIR_BYTES
        );
    }

    #[test]
    fn random_ascending_lists_round_trip() {
        // A fixed-seed generator: lists of varied density and counts.
        let mut random = Xorshift::new(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200 {
            let spread = 1 + random.below(100_000);
            let mut key = random.below(spread) as u32;
            let pairs: Vec<(u32, u32)> = (0..random.below(300))
                .map(|_| {
                    let pair = (key, 1 + (random.below(4) / 3 * random.below(255)) as u32);
                    key += 1 + random.below(spread) as u32;
                    pair
                })
                .collect();
            let coded = encode(pairs.iter().copied());
            assert_eq!(Pairs::new(&coded).collect::<Vec<_>>(), pairs);
        }
    }
}
