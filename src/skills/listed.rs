//! One skill row as the caches hold it, kept compact (a tree of 50,000 skills holds 50,000 of
//! these): what the list answer, the filters, the index page and a miss's suggestions read.
//!
//! The row's shape is written once, in [`COLUMNS`]: each column's JSON name, what it holds,
//! where its value comes from in a [`SkillRow`], and what the registered schema says of it. The
//! compact storage, the JSON text writer, its exact length, the field-by-field serializer and
//! the registered schema all follow from that table, so adding a column to the list rows is
//! one line there (and the row field it reads). The text columns are stored once, already
//! escaped as JSON, so that a row is written out as text by copying them between the keys, or
//! serialized field by field into the value the SDK sends, with no text to parse on the way.

use std::borrow::Cow;
use std::cell::RefCell;

use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::{Map, Value, json};

use crate::roots::Root;
use crate::rules::Source;
use crate::rules::skill::SkillRow;
use crate::rules::spec::SKILL_FILE;

/// What a column holds: how it is stored, written, and typed in the registered schema.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A string, always present.
    Text,
    /// A string or `null`.
    NullableText,
    /// A string, or no key at all when the row has none (an addition to the contract's row,
    /// which old readers never see unless the file says it).
    OptionalText,
    /// `true` or `false`.
    Flag,
    /// A non-negative integer.
    Count,
}

/// A column's value as a [`SkillRow`] gives it.
pub enum Cell<'a> {
    Text(Option<&'a str>),
    Flag(bool),
    Count(u64),
}

/// One column of a `skills::list` row; see the module doc.
pub struct Column {
    /// The JSON key.
    pub name: &'static str,
    /// `,"<name>":"`: the key written before the value (the first column's comma becomes the
    /// brace), with the opening quote of a string value, so that a string is three copies.
    open: &'static str,
    pub kind: Kind,
    /// Where the value comes from.
    value: fn(&SkillRow) -> Cell<'_>,
    /// The description the registered schema gives the column (none where the type says it).
    about: Option<&'static str>,
    /// Written as `""` when the request asks for no descriptions (`include_description: false`).
    blankable: bool,
}

/// A [`Column`], its key spelled from its name.
macro_rules! column {
    ($name:literal, $kind:ident, $value:expr, $about:expr $(, $blankable:ident)?) => {
        Column {
            name: $name,
            open: concat!(",\"", $name, "\":\""),
            kind: Kind::$kind,
            value: $value,
            about: $about,
            blankable: column!(@blankable $($blankable)?),
        }
    };
    (@blankable) => { false };
    (@blankable blankable) => { true };
}

/// The columns of a `skills::list` row, in the order the row writes them: the one definition
/// of the row's shape (see the module doc). Every column is required in the schema; a
/// nullable one is present as `null`.
pub const COLUMNS: [Column; 9] = [
    column!(
        "id",
        Text,
        |r| Cell::Text(Some(&r.display_id)),
        Some("skill id; `<ns>/index` is shown as `<ns>`")
    ),
    column!(
        "title",
        Text,
        |r| Cell::Text(Some(&r.title)),
        Some("frontmatter title, then name, then the first H1, then the id")
    ),
    column!(
        "type",
        NullableText,
        |r| Cell::Text(r.r#type.as_deref()),
        None
    ),
    column!(
        "function_id",
        NullableText,
        |r| Cell::Text(r.function_id.as_deref()),
        None
    ),
    column!(
        "disable_model_invocation",
        Flag,
        |r| Cell::Flag(r.disable_model_invocation),
        Some("frontmatter disable-model-invocation")
    ),
    column!(
        "description",
        Text,
        |r| Cell::Text(Some(&r.description)),
        Some("frontmatter description, else the first paragraph"),
        blankable
    ),
    column!("bytes", Count, |r| Cell::Count(r.bytes), None),
    column!(
        "modified_at",
        Text,
        |r| Cell::Text(Some(&r.modified_at)),
        Some("RFC 3339 UTC; empty for bundled content")
    ),
    column!(
        "compatibility",
        OptionalText,
        |r| Cell::Text(r.compatibility.as_deref()),
        Some("Agent Skills frontmatter compatibility; absent when the file has none")
    ),
];

/// The columns the code reads by name (the filters, the shown id), found in the table when
/// compiling (a name not in it does not compile).
const ID: usize = at("id");
const TITLE: usize = at("title");
const TYPE: usize = at("type");
const DESCRIPTION: usize = at("description");
const DISABLE_MODEL_INVOCATION: usize = at("disable_model_invocation");

const fn at(name: &str) -> usize {
    let mut i = 0;
    while i < COLUMNS.len() {
        if same(COLUMNS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("no such column")
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn holds_text(kind: Kind) -> bool {
    matches!(kind, Kind::Text | Kind::NullableText | Kind::OptionalText)
}

/// How many columns of each storage: text, count.
const TEXTS: usize = stored(true);
const COUNTS: usize = stored(false);

const fn stored(text: bool) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < COLUMNS.len() {
        let kind = COLUMNS[i].kind;
        if (text && holds_text(kind)) || (!text && matches!(kind, Kind::Count)) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Each column's place among the columns stored as it is: its text, or its count (flags are
/// bits at the column's own position).
const SLOT: [usize; COLUMNS.len()] = {
    let mut slots = [0; COLUMNS.len()];
    let (mut i, mut texts, mut counts) = (0, 0, 0);
    while i < COLUMNS.len() {
        if holds_text(COLUMNS[i].kind) {
            slots[i] = texts;
            texts += 1;
        } else if matches!(COLUMNS[i].kind, Kind::Count) {
            slots[i] = counts;
            counts += 1;
        }
        i += 1;
    }
    slots
};

/// The length of a row's keys, braces and commas: every key a row always has, the first
/// one's comma being the opening brace, and the closing brace. An optional column's key
/// counts only when the row holds it.
const KEYS_LEN: usize = {
    let (mut i, mut len) = (0, 1);
    while i < COLUMNS.len() {
        // The key: the column's opening without the quote.
        if !matches!(COLUMNS[i].kind, Kind::OptionalText) {
            len += COLUMNS[i].open.len() - 1;
        }
        i += 1;
    }
    len
};

/// Runs `$body` once per column, unrolled, with `$c` the column's position as a constant (up
/// to `Mask::BITS` columns; the positions past the table's end do nothing).
macro_rules! for_each_column {
    (|$c:ident| $body:expr) => {
        for_each_column!(@ $c $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $c:ident $body:expr; $($n:literal)*) => {
        $({
            const $c: usize = $n;
            if $c < COLUMNS.len() {
                $body;
            }
        })*
    };
}

/// A column's bit in a row's masks.
type Mask = u16;
const _: () = assert!(COLUMNS.len() <= Mask::BITS as usize, "a wider Mask");
// The first column opens the row, so it is always written.
const _: () = assert!(!matches!(COLUMNS[0].kind, Kind::OptionalText));

const fn bit(column: usize) -> Mask {
    1 << column
}

/// See the module doc.
pub struct Listed {
    /// Whether the on-disk id ([`Listed::id`]) is kept in `text` after the columns, apart
    /// from the shown id.
    id_apart: bool,
    pub always_visible: bool,
    /// Read from a `SKILL.md` file: the entry of an Agent Skill, whose folder's `scripts/`,
    /// `references/` and `assets/` hold its resources (`skills::resources`).
    pub skill_file: bool,
    /// The root the row's file sits under; `None` for a bundled skill.
    pub root: Option<Root>,
    /// The text columns that are `null`, one bit per column.
    null: Mask,
    /// The text columns whose JSON holds an escape (a quote, a backslash, a control character).
    escaped: Mask,
    /// The flag columns that are `true`.
    flags: Mask,
    counts: [u64; COUNTS],
    /// The hash of the file's text (`None` for a bundled skill or one that cannot be served):
    /// what skill search keys a row's counted terms by.
    pub content: Option<crate::doc::Hash>,
    /// Each text column's JSON string content (escaped, without its quotes), one after another
    /// in column order; `ends[SLOT[c]]` is where column `c` ends. Then, when `id_apart`, the
    /// on-disk id.
    text: Box<str>,
    ends: [u32; TEXTS],
    /// Title and description of a worker overview `skills::index` lists.
    pub overview: Option<Box<Overview>>,
    /// What `skills::catalog` shows of an Agent Skill; `None` for any other row.
    pub catalog: Option<Box<CatalogEntry>>,
}

/// An Agent Skill as `skills::catalog` shows it: a served `SKILL.md` file (the unit of the
/// Agent Skills format, and the file its reference library's `to-prompt` points at) whose
/// content can be read, that a model may invoke (no `disable-model-invocation`) and that has a
/// description to be chosen by. Where it sits is kept as the row's root and relative path, so a
/// catalog names its location from the configured folders without a `stat`.
pub struct CatalogEntry {
    /// Frontmatter `name`; else the folder the file sits in, which the specification says
    /// the name must equal; else the shown id.
    pub name: Box<str>,
    pub root: Root,
    pub rel: Box<str>,
}

impl CatalogEntry {
    fn of(row: &SkillRow) -> Option<CatalogEntry> {
        let Source::File {
            root,
            rel,
            content: Ok(_),
        } = &row.source
        else {
            return None;
        };
        let (folder, file) = rel.rsplit_once('/').unwrap_or(("", rel));
        if file != SKILL_FILE || row.disable_model_invocation || row.description.trim().is_empty() {
            return None;
        }
        let folder = folder.rsplit('/').next().filter(|f| !f.is_empty());
        let name = row.name.as_deref().or(folder).unwrap_or(&row.display_id);
        Some(CatalogEntry {
            name: name.into(),
            root: *root,
            rel: rel.as_str().into(),
        })
    }
}

/// What `skills::index` shows of a worker overview.
pub struct Overview {
    pub title: Box<str>,
    pub description: Box<str>,
}

impl Listed {
    pub fn new(id: String, row: &SkillRow) -> Listed {
        let cells = COLUMNS.each_ref().map(|column| (column.value)(row));
        // The on-disk id is nearly always the shown one, unescaped: then it is read from the
        // id column, and a cache of 50,000 rows holds 2 MiB less.
        let id_apart = row.display_id != id || needs_escape(&id);
        let capacity = cells
            .iter()
            .map(|cell| match cell {
                Cell::Text(Some(text)) => text.len(),
                _ => 0,
            })
            .sum::<usize>()
            + if id_apart { id.len() } else { 0 };
        let mut text = String::with_capacity(capacity);
        let mut ends = [0; TEXTS];
        let mut counts = [0; COUNTS];
        let (mut null, mut escaped, mut flags) = (0, 0, 0);
        for (i, cell) in cells.into_iter().enumerate() {
            let kind = COLUMNS[i].kind;
            match cell {
                Cell::Text(value) => {
                    debug_assert!(holds_text(kind) && (value.is_some() || kind != Kind::Text));
                    match value {
                        None => null |= bit(i),
                        Some(value) if needs_escape(value) => {
                            escaped |= bit(i);
                            let literal =
                                serde_json::to_string(value).expect("a string serializes");
                            text.push_str(&literal[1..literal.len() - 1]);
                        }
                        Some(value) => text.push_str(value),
                    }
                    ends[SLOT[i]] = u32::try_from(text.len()).expect("a row under 4 GiB");
                }
                Cell::Flag(value) => {
                    debug_assert!(kind == Kind::Flag);
                    if value {
                        flags |= bit(i);
                    }
                }
                Cell::Count(value) => {
                    debug_assert!(kind == Kind::Count);
                    counts[SLOT[i]] = value;
                }
            }
        }
        let overview = (!row.agents_skill && row.r#type.as_deref() == Some("index")).then(|| {
            Box::new(Overview {
                title: row.title.as_str().into(),
                description: row.description.as_str().into(),
            })
        });
        if id_apart {
            text.push_str(&id);
        }
        Listed {
            id_apart,
            always_visible: row.always_visible,
            skill_file: matches!(&row.source, Source::File { rel, .. }
                if rel.rsplit('/').next() == Some(SKILL_FILE)),
            root: match &row.source {
                Source::File { root, .. } => Some(*root),
                Source::Bundled => None,
            },
            null,
            escaped,
            flags,
            counts,
            content: match &row.source {
                Source::File {
                    content: Ok(hash), ..
                } => Some(*hash),
                _ => None,
            },
            text: text.into(),
            ends,
            overview,
            catalog: CatalogEntry::of(row).map(Box::new),
        }
    }

    /// The on-disk id, which orders the rows.
    pub fn id(&self) -> &str {
        if self.id_apart {
            &self.text[self.ends[TEXTS - 1] as usize..]
        } else {
            self.escaped(ID).expect("the id column is never null")
        }
    }

    /// Text column `c` as JSON string content (escaped); `None` for `null`.
    fn escaped(&self, c: usize) -> Option<&str> {
        if self.null & bit(c) != 0 {
            return None;
        }
        let slot = SLOT[c];
        let start = if slot == 0 { 0 } else { self.ends[slot - 1] };
        Some(&self.text[start as usize..self.ends[slot] as usize])
    }

    /// Text column `c`'s value; `None` for `null`. Borrowed unless it holds an escape.
    fn value(&self, c: usize) -> Option<Cow<'_, str>> {
        let escaped = self.escaped(c)?;
        Some(if self.escaped & bit(c) == 0 {
            Cow::Borrowed(escaped)
        } else {
            Cow::Owned(
                serde_json::from_str(&format!("\"{escaped}\"")).expect("text serde_json escaped"),
            )
        })
    }

    /// The id the answer shows.
    pub fn shown_id(&self) -> Cow<'_, str> {
        self.value(ID).unwrap_or_default()
    }

    /// The row's title.
    pub fn title(&self) -> Cow<'_, str> {
        self.value(TITLE).unwrap_or_default()
    }

    /// The row's description.
    pub fn description(&self) -> Cow<'_, str> {
        self.value(DESCRIPTION).unwrap_or_default()
    }

    /// Whether the skill's frontmatter says `disable-model-invocation`.
    pub fn disable_model_invocation(&self) -> bool {
        self.flags & bit(DISABLE_MODEL_INVOCATION) != 0
    }

    /// The row's `type`.
    pub fn kind(&self) -> Option<Cow<'_, str>> {
        self.value(TYPE)
    }

    /// Whether column `c` is left out of this row: an optional column the row has no value for.
    fn absent(&self, c: usize) -> bool {
        COLUMNS[c].kind == Kind::OptionalText && self.null & bit(c) != 0
    }

    /// Whether column `c` is written blank for this request.
    fn blank(c: usize, include_description: bool) -> bool {
        COLUMNS[c].blankable && !include_description
    }

    /// Appends the row's list JSON, with or without the description's text.
    pub fn push_json(&self, out: &mut String, include_description: bool) {
        out.push('{');
        for_each_column!(|C| self.push_column::<C>(out, include_description));
        out.push('}');
    }

    /// Appends column `C` (its key, then its value). `C` is a constant, so that its kind, its
    /// slot and its bit fold away: a list writes every column of every row.
    #[inline(always)]
    fn push_column<const C: usize>(&self, out: &mut String, include_description: bool) {
        let column = &COLUMNS[C];
        // The first column's comma is the brace just written.
        let open = if C == 0 {
            &column.open[1..]
        } else {
            column.open
        };
        let key = &open[..open.len() - 1];
        match column.kind {
            Kind::Text | Kind::NullableText => match self.escaped(C) {
                Some(text) => {
                    out.push_str(open);
                    if !Self::blank(C, include_description) {
                        out.push_str(text);
                    }
                    out.push('"');
                }
                None if Self::blank(C, include_description) => {
                    out.push_str(open);
                    out.push('"');
                }
                None => {
                    out.push_str(key);
                    out.push_str("null");
                }
            },
            Kind::OptionalText => {
                if let Some(text) = self.escaped(C) {
                    out.push_str(open);
                    out.push_str(text);
                    out.push('"');
                }
            }
            Kind::Flag => {
                out.push_str(key);
                out.push_str(match self.flags & bit(C) != 0 {
                    true => "true",
                    false => "false",
                });
            }
            Kind::Count => {
                out.push_str(key);
                push_decimal(out, self.counts[SLOT[C]]);
            }
        }
    }

    /// The length of what [`Listed::push_json`] appends, exactly: the wire's limit on one
    /// answer is checked with it before any of the answer is built.
    pub fn json_len(&self, include_description: bool) -> usize {
        let mut len = KEYS_LEN;
        for_each_column!(|C| len += self.column_len::<C>(include_description));
        len
    }

    /// The length of column `C`'s value as [`Listed::push_column`] writes it.
    #[inline(always)]
    fn column_len<const C: usize>(&self, include_description: bool) -> usize {
        match COLUMNS[C].kind {
            Kind::Text | Kind::NullableText => match self.escaped(C) {
                _ if Self::blank(C, include_description) => 2,
                Some(text) => text.len() + 2,
                None => "null".len(),
            },
            // Its whole opening (key and quote), the text and the closing quote; nothing when
            // the row has none.
            Kind::OptionalText => self
                .escaped(C)
                .map_or(0, |text| COLUMNS[C].open.len() + text.len() + 1),
            Kind::Flag if self.flags & bit(C) != 0 => "true".len(),
            Kind::Flag => "false".len(),
            Kind::Count => decimal_len(self.counts[SLOT[C]]),
        }
    }

    /// The row as the list response carries it, as a value to serialize (the same fields as
    /// its JSON), with or without the description's text.
    pub fn as_row(&self, include_description: bool) -> ListRow<'_> {
        ListRow {
            listed: self,
            include_description,
        }
    }
}

/// The registered JSON Schema of a `skills::list` row, from [`COLUMNS`].
pub fn row_schema() -> Value {
    let properties: Map<String, Value> = COLUMNS
        .iter()
        .map(|column| {
            let mut schema = match column.kind {
                Kind::Text => json!({ "type": "string" }),
                Kind::NullableText => json!({ "type": ["string", "null"] }),
                Kind::OptionalText => json!({ "type": "string" }),
                Kind::Flag => json!({ "type": "boolean" }),
                Kind::Count => json!({ "type": "integer", "minimum": 0 }),
            };
            if let Some(about) = column.about {
                schema["description"] = json!(about);
            }
            (column.name.to_string(), schema)
        })
        .collect();
    let required: Vec<&str> = COLUMNS
        .iter()
        .filter(|column| column.kind != Kind::OptionalText)
        .map(|column| column.name)
        .collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

/// Appends `n` in decimal (without the formatting machinery: a list writes one per row).
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
}

/// The number of decimal digits of `n`.
pub(crate) fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Whether serde_json escapes something in `text`: a quote, a backslash or a control character.
fn needs_escape(text: &str) -> bool {
    text.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)
}

/// A `search` word, lowercase, looked for in the lowercase display id, title and description of
/// rows. Each field is lowercased into one buffer kept for the request (rows keep no lowercase
/// copy of their text).
pub struct Search {
    needle: String,
    scratch: RefCell<String>,
}

impl Search {
    /// `None` for an empty word, which filters nothing.
    pub fn new(word: &str) -> Option<Search> {
        let needle = word.to_lowercase();
        (!needle.is_empty()).then(|| Search {
            needle,
            scratch: RefCell::default(),
        })
    }

    pub fn finds_in(&self, listed: &Listed) -> bool {
        let mut scratch = self.scratch.borrow_mut();
        [ID, TITLE, DESCRIPTION].into_iter().any(|c| {
            let text = listed.value(c).unwrap_or_default();
            scratch.clear();
            if text.is_ascii() {
                scratch.push_str(&text);
                scratch.make_ascii_lowercase();
            } else {
                scratch.push_str(&text.to_lowercase());
            }
            scratch.contains(&self.needle)
        })
    }
}

/// A cached row written out field by field; see [`Listed::as_row`].
pub struct ListRow<'a> {
    listed: &'a Listed,
    include_description: bool,
}

impl Serialize for ListRow<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let row = self.listed;
        let mut out = serializer.serialize_struct("ListRow", COLUMNS.len())?;
        for (c, column) in COLUMNS.iter().enumerate() {
            match column.kind {
                _ if row.absent(c) => out.skip_field(column.name)?,
                Kind::Text | Kind::NullableText | Kind::OptionalText => {
                    let value = match Listed::blank(c, self.include_description) {
                        true => Some(Cow::Borrowed("")),
                        false => row.value(c),
                    };
                    out.serialize_field(column.name, &value)?;
                }
                Kind::Flag => out.serialize_field(column.name, &(row.flags & bit(c) != 0))?,
                Kind::Count => out.serialize_field(column.name, &row.counts[SLOT[c]])?,
            }
        }
        out.end()
    }
}

/// A row as `skills::list` answers it, in JSON.
#[cfg(any(test, feature = "testing"))]
pub fn list_row_json(row: &SkillRow) -> String {
    let mut out = String::new();
    Listed::new(String::new(), row).push_json(&mut out, true);
    out
}

/// A list row in each form the library writes it, for the tests that hold them to serde_json.
#[cfg(any(test, feature = "testing"))]
pub struct RowForms {
    /// The text writer's JSON (the command line's, and the wire's length check).
    pub text: String,
    /// The length the wire's limit is checked with.
    pub len: usize,
    /// serde_json writing the row field by field (the value the SDK sends).
    pub serialized: String,
}

#[cfg(any(test, feature = "testing"))]
pub fn list_row_forms(row: &SkillRow, include_description: bool) -> RowForms {
    let listed = Listed::new(String::new(), row);
    let mut text = String::new();
    listed.push_json(&mut text, include_description);
    RowForms {
        text,
        len: listed.json_len(include_description),
        serialized: serde_json::to_string(&listed.as_row(include_description))
            .expect("a row serializes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shown id and the type read back as the row gave them, escapes or not.
    #[test]
    fn a_row_reads_back_its_id_and_type() {
        for text in ["plain", "say \"hi\"", "tab\tand\\", "ünï 🦀"] {
            let row = SkillRow {
                r#type: Some(text.to_string()),
                ..SkillRow::blank(&format!("ns/{text}"))
            };
            let listed = Listed::new("ns/x".into(), &row);
            assert_eq!(*listed.shown_id(), row.display_id);
            assert_eq!(listed.kind().as_deref(), Some(text));
            assert_eq!(listed.id(), "ns/x");
        }
        assert_eq!(Listed::new("x".into(), &SkillRow::blank("x")).kind(), None);
    }

    /// The on-disk id reads back whole whether it is the shown id (read from that column), or
    /// differs from it (`<ns>/index` shown as `<ns>`), or holds a character JSON escapes.
    #[test]
    fn a_row_reads_back_its_on_disk_id() {
        for (id, shown) in [
            ("ns/plain", "ns/plain"),
            ("ns/index", "ns"),
            ("ns/say \"hi\"", "ns/say \"hi\""),
            ("ns/tab\there", "ns/tab\there"),
        ] {
            let row = SkillRow {
                compatibility: Some("the last column".into()),
                ..SkillRow::blank(shown)
            };
            let listed = Listed::new(id.into(), &row);
            assert_eq!(listed.id(), id);
            assert_eq!(*listed.shown_id(), *shown);
            // The id kept after the columns is not read as part of the last one.
            let mut json = String::new();
            listed.push_json(&mut json, true);
            assert_eq!(json.len(), listed.json_len(true), "{id}");
            let value: Value = serde_json::from_str(&json).expect("a row is JSON");
            assert_eq!(value["compatibility"], "the last column", "{id}");
            assert_eq!(value["id"], shown, "{id}");
        }
    }

    /// The schema names every column, each required but the optional ones, in the table's order.
    #[test]
    fn the_schema_has_every_column() {
        let schema = row_schema();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .map(|name| name.as_str().expect("a name"))
            .collect();
        let always: Vec<&str> = COLUMNS
            .iter()
            .filter(|c| c.kind != Kind::OptionalText)
            .map(|c| c.name)
            .collect();
        assert_eq!(required, always);
        for column in &COLUMNS {
            assert!(
                schema["properties"][column.name].is_object(),
                "{}",
                column.name
            );
        }
    }

    /// `search` finds what lowercasing the fields and the word would, ASCII or not.
    #[test]
    fn search_finds_as_lowercasing_would() {
        let fields = [
            "Send MAIL",
            "Straße ÄÖ",
            "K\u{212a}elvin",
            "",
            "a\"quoted\" Word",
        ];
        let words = [
            "mail",
            "send m",
            "STRASSE",
            "straße",
            "äö",
            "k",
            "kelvin",
            "\"quoted\"",
            "Word",
            "x",
        ];
        for field in fields {
            let row = SkillRow {
                title: field.into(),
                ..SkillRow::blank("ns/id")
            };
            let listed = Listed::new("ns/id".into(), &row);
            for word in words {
                let search = Search::new(word).expect("a word");
                assert_eq!(
                    search.finds_in(&listed),
                    field.to_lowercase().contains(&word.to_lowercase()),
                    "{field:?} {word:?}"
                );
            }
        }
        assert!(Search::new("").is_none());
    }
}
