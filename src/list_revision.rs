//! List revisions: the number a `list` answer carries as `revision` and takes back as
//! `if_revision` or `since_revision`, and what a `since_revision` can be answered with.
//!
//! A list revision is a JSON-safe integer (below 2^53) made of two parts:
//!
//! - the position, in the high [`POSITION_BITS`] bits: the index revision plus an offset
//!   drawn from the index file's random epoch (`meta.epoch`, set when the file is created).
//!   Successive revisions of one index file are successive positions, so a position says how
//!   many revisions back a caller is;
//! - the tag, in the low [`TAG_BITS`] bits, never 0: a hash of the epoch, the list (skills,
//!   system prompts, agents), the binary's version (bundled rows are part of the answers) and,
//!   for skills, what decides visibility (`filter_unregistered` and the installed workers) and
//!   the request's filters (`prefix`, `type`, `search`, `include_description`).
//!
//! A revision is taken back only when its tag equals the current one and its position is at
//! most the current one: then it is current (`{unchanged}`), or the change log says which keys
//! changed since (a delta), or it is older than the log reaches (the whole list, `full: true`).
//! Anything else (another index file, rebuilt or of another tree; a change of visibility; the
//! revision of another list or of the same list filtered otherwise; a number the worker never
//! gave) gets the whole list too. A
//! revision of another index is mistaken for one of this index only if both its random tag and
//! its random position fall in range, about one chance in 2^20 × 2^32 / (kept revisions).
//! 0 is never a revision: a first call sends `since_revision: 0`.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::Result;
use crate::index::changelog::Logged;
use crate::index::{Latest, Reader};
use crate::request;
use crate::rules::skill::Visibility;

/// Bits of the visibility-and-identity tag (the low bits of a list revision).
const TAG_BITS: u32 = 20;
/// Bits of the position (the high bits); with the tag, 53: exact in every JSON client.
const POSITION_BITS: u32 = 33;
/// The epoch's offset is below this, so a position does not wrap for the first 2^32
/// revisions of an index: within one index file, later revisions are larger numbers.
const OFFSET_SPAN: u64 = 1 << (POSITION_BITS - 1);

/// The revision a list reports now, and what it is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListRevision {
    /// The number the answer carries.
    pub token: u64,
    index_revision: u64,
    table: Logged,
}

/// What a `since_revision` can be answered with.
#[derive(Debug, PartialEq, Eq)]
pub enum Since {
    /// It is the current revision.
    Unchanged,
    /// These row keys changed since (each list turns them into rows and removed ids).
    Delta(BTreeSet<String>),
    /// Only the whole list will do.
    Full,
}

/// What decides a skills list's rows besides the index: who may see what, and the request's
/// filters. A revision of one scope is never taken back for another: a caller that changed its
/// filters holds rows of another list.
#[derive(Clone, Copy)]
pub struct ListScope<'a> {
    pub visibility: Visibility<'a>,
    /// The filters as bytes, equal for requests that answer the same rows and fields.
    pub filters: &'a [u8],
}

/// The revision fields every list request may carry (beyond the contract).
#[derive(Deserialize, Default)]
pub struct RevisionRequest {
    /// The revision the caller holds: the answer is `{unchanged, revision}` while it is
    /// current, else the whole list with `revision`.
    pub if_revision: Option<u64>,
    /// The revision the caller holds: the answer is `{unchanged, revision}`, what changed since
    /// (`{revision, changed, removed}`), or the whole list with `revision` and `full: true`.
    pub since_revision: Option<u64>,
}

impl ListRevision {
    /// The current revision of a list in this snapshot. `scope` is what decides which rows a
    /// caller sees besides the index (skills only).
    pub fn current(
        reader: &Reader,
        table: Logged,
        scope: Option<ListScope<'_>>,
    ) -> Result<ListRevision> {
        Ok(ListRevision::of(reader.latest()?, table, scope))
    }

    /// The revision of a list at an index file's `latest` state.
    pub fn of(latest: Latest, table: Logged, scope: Option<ListScope<'_>>) -> ListRevision {
        let Latest { epoch, revision } = latest;
        ListRevision {
            token: (position(epoch, revision) << TAG_BITS) | tag(epoch, table, scope),
            index_revision: revision,
            table,
        }
    }

    /// What a caller holding revision `asked` needs.
    pub fn since(&self, reader: &Reader, asked: u64) -> Result<Since> {
        let Some(back) = self.revisions_behind(asked) else {
            return Ok(Since::Full);
        };
        if back == 0 {
            return Ok(Since::Unchanged);
        }
        let held = self.index_revision - back;
        Ok(match reader.changed_since(self.table, held)? {
            Some(keys) => Since::Delta(keys),
            None => Since::Full,
        })
    }

    /// How many index revisions behind this one `asked` is, when it is a revision of this
    /// list, index and visibility.
    fn revisions_behind(&self, asked: u64) -> Option<u64> {
        let mask = (1u64 << TAG_BITS) - 1;
        if asked >> (TAG_BITS + POSITION_BITS) != 0 || asked & mask != self.token & mask {
            return None;
        }
        let span = 1u64 << POSITION_BITS;
        let back = ((self.token >> TAG_BITS) + span - (asked >> TAG_BITS)) % span;
        (back <= self.index_revision).then_some(back)
    }
}

fn position(epoch: u64, index_revision: u64) -> u64 {
    ((epoch % OFFSET_SPAN) + index_revision) % (1 << POSITION_BITS)
}

/// Never 0, so that no revision is 0.
fn tag(epoch: u64, table: Logged, scope: Option<ListScope<'_>>) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&epoch.to_le_bytes());
    hasher.update(&[table as u8]);
    hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.update(&[0]);
    if let Some(ListScope {
        visibility,
        filters,
    }) = scope
    {
        // Only what changes the rows: with the filter off, or the installed set unknown, every
        // row is visible whatever else is set.
        match visibility {
            Visibility {
                filter_unregistered: true,
                installed: Some(installed),
            } => {
                hasher.update(b"installed");
                for name in installed {
                    hasher.update(name.as_bytes());
                    hasher.update(&[0]);
                }
            }
            _ => {
                hasher.update(b"all");
            }
        }
        hasher.update(&(filters.len() as u64).to_le_bytes());
        hasher.update(filters);
    }
    let hash = crate::digest::u64_of(&hasher.finalize());
    1 + hash % ((1 << TAG_BITS) - 1)
}

/// The answer that says the caller's rows are current.
pub fn unchanged(revision: u64) -> Value {
    json!({ "unchanged": true, "revision": revision })
}

/// A list whose rows are JSON values keyed by a name (system prompts, agent profiles).
pub trait KeyedRows {
    /// The field of the answer that holds the rows (`prompts`, `agents`).
    const FIELD: &'static str;
    /// Every row, in answer order, with its key.
    fn rows(&self) -> &[(String, Value)];
    /// Whether the row of `key` may differ once `changed` keys changed (its own key, or one
    /// it is derived from).
    fn touched(&self, key: &str, changed: &BTreeSet<String>) -> bool;
}

/// Answers a list request of a [`KeyedRows`] list: the plain answer without revision fields,
/// else as the module doc says. `load` is called only when rows are needed.
pub fn answer_keyed<R: KeyedRows>(
    reader: &Reader,
    table: Logged,
    request: &Value,
    load: impl FnOnce() -> Result<R>,
) -> Result<Value> {
    let req: RevisionRequest = request::parse(request)?;
    if req.if_revision.is_none() && req.since_revision.is_none() {
        return Ok(whole::<R>(&load()?, &[]));
    }
    let current = ListRevision::current(reader, table, None)?;
    let revision = current.token;
    let since = match (req.since_revision, req.if_revision) {
        (Some(asked), _) => current.since(reader, asked)?,
        (None, Some(asked)) if asked == revision => Since::Unchanged,
        (None, _) => {
            return Ok(whole::<R>(&load()?, &[("revision", json!(revision))]));
        }
    };
    Ok(match since {
        Since::Unchanged => unchanged(revision),
        Since::Full => whole::<R>(
            &load()?,
            &[("revision", json!(revision)), ("full", json!(true))],
        ),
        Since::Delta(keys) => {
            let list = load()?;
            let rows = list.rows();
            let present: BTreeSet<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
            let removed: Vec<&String> = keys
                .iter()
                .filter(|k| !present.contains(k.as_str()))
                .collect();
            let changed: Vec<&Value> = rows
                .iter()
                .filter(|(k, _)| list.touched(k, &keys))
                .map(|(_, v)| v)
                .collect();
            json!({ "revision": revision, "changed": changed, "removed": removed })
        }
    })
}

/// The whole list, `{<field>: [row…]}`, with `extra` fields after the rows.
fn whole<R: KeyedRows>(list: &R, extra: &[(&str, Value)]) -> Value {
    let mut out = serde_json::Map::new();
    let rows: Vec<Value> = list.rows().iter().map(|(_, v)| v.clone()).collect();
    out.insert(R::FIELD.into(), Value::Array(rows));
    for (key, value) in extra {
        out.insert((*key).into(), value.clone());
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(epoch: u64, index_revision: u64, table: Logged) -> ListRevision {
        ListRevision {
            token: (position(epoch, index_revision) << TAG_BITS) | tag(epoch, table, None),
            index_revision,
            table,
        }
    }

    #[test]
    fn revisions_are_json_safe_and_never_zero() {
        for epoch in [0, 1, u64::MAX, OFFSET_SPAN - 1, 0x1234_5678_9abc_def0] {
            for r in [0, 1, 1 << 31, (1 << 32) - 1] {
                let token = revision(epoch, r, Logged::Skills).token;
                assert!(token > 0 && token < (1 << 53), "{epoch} {r}: {token}");
            }
        }
    }

    #[test]
    fn within_one_index_later_revisions_are_larger_and_count_back() {
        let epoch = 0xfeed_beef_cafe_f00d;
        let now = revision(epoch, 120, Logged::Skills);
        for back in [0, 1, 7, 120] {
            let held = revision(epoch, 120 - back, Logged::Skills);
            assert!(held.token <= now.token);
            assert_eq!(now.revisions_behind(held.token), Some(back));
        }
        // Ahead of the current one, or before the index's first revision: not ours.
        assert_eq!(
            now.revisions_behind(revision(epoch, 121, Logged::Skills).token),
            None
        );
        assert_eq!(now.revisions_behind(now.token - (121 << TAG_BITS)), None);
    }

    #[test]
    fn another_epoch_another_list_or_another_visibility_is_not_taken_back() {
        let now = revision(1, 50, Logged::Skills);
        assert_eq!(
            now.revisions_behind(revision(2, 50, Logged::Skills).token),
            None
        );
        assert_eq!(
            now.revisions_behind(revision(1, 50, Logged::Agents).token),
            None
        );
        let installed: BTreeSet<String> = ["a".to_string()].into();
        let scope = |filter_unregistered, installed, filters| {
            let visibility = Visibility {
                filter_unregistered,
                installed,
            };
            Some(ListScope {
                visibility,
                filters,
            })
        };
        let visible_tag = tag(1, Logged::Skills, scope(false, None, b""));
        assert_ne!(
            tag(1, Logged::Skills, scope(true, Some(&installed), b"")),
            visible_tag
        );
        // With the filter off, or the installed set unknown, every row is visible: same tag.
        assert_eq!(
            tag(1, Logged::Skills, scope(false, Some(&installed), b"")),
            visible_tag
        );
        assert_eq!(tag(1, Logged::Skills, scope(true, None, b"")), visible_tag);
        // Other filters answer other rows: another list.
        assert_ne!(
            tag(1, Logged::Skills, scope(false, None, b"pdf/")),
            visible_tag
        );
        assert_eq!(now.revisions_behind(0), None);
        assert_eq!(now.revisions_behind(u64::MAX), None);
    }
}
