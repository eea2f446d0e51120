//! A read function's answer before it is written out. Most answers are small values; a whole
//! `skills::list` is tens of megabytes on a large tree, and stays the cached rows it lists until
//! its one writer (JSON text for the command line, the SDK's value for the wire) takes it, so
//! no copy of it is ever parsed back or built twice.

use serde::ser::{Serialize, Serializer};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::skills::{ListAnswer, ListRows};

/// See the module doc.
pub enum Answer {
    Value(Value),
    SkillList(ListRows),
}

impl Answer {
    /// The answer as a JSON value (what the contract's shapes are written in).
    pub fn into_value(self) -> Result<Value> {
        match self {
            Answer::Value(value) => Ok(value),
            Answer::SkillList(rows) => serde_json::to_value(&rows).map_err(Error::json),
        }
    }

    /// The length of the answer as compact JSON, exactly, without building it: a list adds up
    /// its rows, a value is written to a counter.
    pub fn json_len(&self) -> usize {
        match self {
            Answer::Value(value) => {
                let mut counter = ByteCounter(0);
                serde_json::to_writer(&mut counter, value).expect("a value serializes");
                counter.0
            }
            Answer::SkillList(rows) => rows.json_len(),
        }
    }

    /// The answer as JSON text.
    pub fn into_json(self) -> Result<String> {
        match self {
            Answer::Value(value) => serde_json::to_string(&value).map_err(Error::json),
            Answer::SkillList(rows) => Ok(rows.to_json()),
        }
    }
}

impl From<ListAnswer> for Answer {
    fn from(answer: ListAnswer) -> Answer {
        match answer {
            ListAnswer::Rows(rows) => Answer::SkillList(rows),
            ListAnswer::Value(value) => Answer::Value(value),
        }
    }
}

impl Serialize for Answer {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Answer::Value(value) => value.serialize(serializer),
            // Only the SDK serializes an answer (into its value): a long list builds that
            // value in the answer arena, and frees it at once when sent.
            Answer::SkillList(rows) if rows.len() >= ARENA_ROWS => {
                crate::arena::building_large(|| rows.serialize(serializer))
            }
            Answer::SkillList(rows) => rows.serialize(serializer),
        }
    }
}

/// Lists of at least this many rows build the SDK's value in the answer arena (`arena.rs`).
/// A row is about 20 allocations: a shorter list is freed quickly enough on glibc, and leaves
/// the region to the long ones.
const ARENA_ROWS: usize = 1000;

/// A writer that only counts what it is given.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
