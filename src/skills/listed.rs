//! One skill row as the caches hold it, kept compact (a tree of 50,000 skills holds 50,000 of
//! these): what the list answer, the filters, the index page and a miss's suggestions read.
//! The text fields are stored once, already escaped as JSON, so that a row is written out as
//! text by copying them between the keys, or serialized field by field into the value the SDK
//! sends, with no text to parse on the way.

use std::borrow::Cow;
use std::cell::RefCell;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::rules::skill::SkillRow;

/// See the module doc.
pub struct Listed {
    /// The on-disk id, which orders the rows.
    pub id: Box<str>,
    pub always_visible: bool,
    disable_model_invocation: bool,
    /// The text fields that are `null`, one bit per [`Field`].
    null: u8,
    /// The text fields whose JSON holds an escape (a quote, a backslash, a control character).
    escaped: u8,
    bytes: u64,
    /// Each text field's JSON string content (escaped, without its quotes), one after another
    /// in [`Field`] order; `ends[f]` is where field `f` ends.
    text: Box<str>,
    ends: [u32; Field::COUNT],
    /// Title and description of a worker overview `skills::index` lists.
    pub overview: Option<Box<Overview>>,
}

/// What `skills::index` shows of a worker overview.
pub struct Overview {
    pub title: Box<str>,
    pub description: Box<str>,
}

/// The text fields of a list row, in the order the row writes them.
#[derive(Clone, Copy)]
enum Field {
    /// The id the row is shown under (`<ns>/index` is shown as `<ns>`).
    Id,
    Title,
    Type,
    FunctionId,
    Description,
    ModifiedAt,
    /// Agent Skills `compatibility`: in the row only when the file has one.
    Compatibility,
}

impl Field {
    const COUNT: usize = 7;
    const ALL: [Field; Field::COUNT] = [
        Field::Id,
        Field::Title,
        Field::Type,
        Field::FunctionId,
        Field::Description,
        Field::ModifiedAt,
        Field::Compatibility,
    ];

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl Listed {
    pub fn new(id: String, row: &SkillRow) -> Listed {
        let values = [
            Some(row.display_id.as_str()),
            Some(row.title.as_str()),
            row.r#type.as_deref(),
            row.function_id.as_deref(),
            Some(row.description.as_str()),
            Some(row.modified_at.as_str()),
            row.compatibility.as_deref(),
        ];
        let mut text = String::with_capacity(values.iter().flatten().map(|v| v.len()).sum());
        let mut ends = [0; Field::COUNT];
        let (mut null, mut escaped) = (0, 0);
        for (field, value) in Field::ALL.into_iter().zip(values) {
            match value {
                None => null |= field.bit(),
                Some(value) if needs_escape(value) => {
                    escaped |= field.bit();
                    let literal = serde_json::to_string(value).expect("a string serializes");
                    text.push_str(&literal[1..literal.len() - 1]);
                }
                Some(value) => text.push_str(value),
            }
            ends[field as usize] = u32::try_from(text.len()).expect("a row under 4 GiB");
        }
        let overview = (!row.agents_skill && row.r#type.as_deref() == Some("index")).then(|| {
            Box::new(Overview {
                title: row.title.as_str().into(),
                description: row.description.as_str().into(),
            })
        });
        Listed {
            id: id.into(),
            always_visible: row.always_visible,
            disable_model_invocation: row.disable_model_invocation,
            null,
            escaped,
            bytes: row.bytes,
            text: text.into(),
            ends,
            overview,
        }
    }

    /// A text field as JSON string content (escaped); `None` for `null`.
    fn escaped(&self, field: Field) -> Option<&str> {
        if self.null & field.bit() != 0 {
            return None;
        }
        let i = field as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(&self.text[start as usize..self.ends[i] as usize])
    }

    /// A text field's value; `None` for `null`. Borrowed unless it holds an escape.
    fn value(&self, field: Field) -> Option<Cow<'_, str>> {
        let escaped = self.escaped(field)?;
        Some(if self.escaped & field.bit() == 0 {
            Cow::Borrowed(escaped)
        } else {
            Cow::Owned(
                serde_json::from_str(&format!("\"{escaped}\"")).expect("text serde_json escaped"),
            )
        })
    }

    /// The id the answer shows.
    pub fn shown_id(&self) -> Cow<'_, str> {
        self.value(Field::Id).unwrap_or_default()
    }

    /// The row's `type`.
    pub fn kind(&self) -> Option<Cow<'_, str>> {
        self.value(Field::Type)
    }

    /// Appends the row's list JSON, with or without the description's text.
    pub fn push_json(&self, out: &mut String, include_description: bool) {
        // The keys and the quotes around them, in as few pieces as the nullable fields allow.
        let text = |field| self.escaped(field).unwrap_or_default();
        let nullable = |out: &mut String, field| match self.escaped(field) {
            Some(text) => {
                out.push('"');
                out.push_str(text);
                out.push('"');
            }
            None => out.push_str("null"),
        };
        out.push_str("{\"id\":\"");
        out.push_str(text(Field::Id));
        out.push_str("\",\"title\":\"");
        out.push_str(text(Field::Title));
        out.push_str("\",\"type\":");
        nullable(out, Field::Type);
        out.push_str(",\"function_id\":");
        nullable(out, Field::FunctionId);
        out.push_str(match self.disable_model_invocation {
            true => ",\"disable_model_invocation\":true,\"description\":\"",
            false => ",\"disable_model_invocation\":false,\"description\":\"",
        });
        if include_description {
            out.push_str(text(Field::Description));
        }
        out.push_str("\",\"bytes\":");
        push_decimal(out, self.bytes);
        out.push_str(",\"modified_at\":\"");
        out.push_str(text(Field::ModifiedAt));
        if let Some(compatibility) = self.escaped(Field::Compatibility) {
            out.push_str("\",\"compatibility\":\"");
            out.push_str(compatibility);
        }
        out.push_str("\"}");
    }

    /// The length of what [`Listed::push_json`] appends, exactly: the wire's limit on one
    /// answer is checked with it before any of the answer is built.
    pub fn json_len(&self, include_description: bool) -> usize {
        /// The keys and punctuation of a row whose nullable fields hold strings, with
        /// `disable_model_invocation: true`: `{"id":"","title":"","type":"","function_id":"",
        /// "disable_model_invocation":true,"description":"","bytes":,"modified_at":""}`.
        const FRAME: usize = 122;
        let nullable = |field| match self.escaped(field) {
            Some(text) => text.len(),
            // `null` in place of the two quotes.
            None => 2,
        };
        let mut len = FRAME
            + self.escaped(Field::Id).unwrap_or_default().len()
            + self.escaped(Field::Title).unwrap_or_default().len()
            + nullable(Field::Type)
            + nullable(Field::FunctionId)
            + usize::from(!self.disable_model_invocation)
            + decimal_len(self.bytes)
            + self.escaped(Field::ModifiedAt).unwrap_or_default().len();
        if include_description {
            len += self.escaped(Field::Description).unwrap_or_default().len();
        }
        if let Some(compatibility) = self.escaped(Field::Compatibility) {
            // `,"compatibility":""` and the text.
            len += 19 + compatibility.len();
        }
        len
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
        [Field::Id, Field::Title, Field::Description]
            .into_iter()
            .any(|field| {
                let text = listed.value(field).unwrap_or_default();
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
        let mut out = serializer.serialize_struct("ListRow", 8)?;
        out.serialize_field("id", &row.value(Field::Id))?;
        out.serialize_field("title", &row.value(Field::Title))?;
        out.serialize_field("type", &row.value(Field::Type))?;
        out.serialize_field("function_id", &row.value(Field::FunctionId))?;
        out.serialize_field("disable_model_invocation", &row.disable_model_invocation)?;
        let description = match self.include_description {
            true => row.value(Field::Description),
            false => Some(Cow::Borrowed("")),
        };
        out.serialize_field("description", &description)?;
        out.serialize_field("bytes", &row.bytes)?;
        out.serialize_field("modified_at", &row.value(Field::ModifiedAt))?;
        if let Some(compatibility) = row.value(Field::Compatibility) {
            out.serialize_field("compatibility", &compatibility)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Source;

    /// A row written out field by field (the wire's value) and as text (the command line's)
    /// says the same as serde_json writing the row's fields, with and without the
    /// description, whatever its text holds: quotes, backslashes, control characters,
    /// non-ASCII, escapes at either end, empty and absent fields.
    #[test]
    fn a_row_written_either_way_says_what_serde_json_says() {
        let texts = [
            "",
            "plain",
            "say \"hi\"",
            "back\\slash at the end\\",
            "\"",
            "tab\tnew\nline\u{1}bell\u{7f}",
            "naïve – ünïcödé 🦀 \u{2028}",
            "</script>&<>",
        ];
        for (i, text) in texts.iter().enumerate() {
            let other = texts[(i + 3) % texts.len()];
            let row = SkillRow {
                display_id: format!("ns/{text}"),
                title: text.to_string(),
                r#type: (i % 2 == 0).then(|| other.to_string()),
                function_id: (i % 3 == 0).then(|| text.to_string()),
                disable_model_invocation: i % 2 == 1,
                description: other.to_string(),
                compatibility: (i % 4 == 1).then(|| text.to_string()),
                bytes: [i as u64, 1_000_003 * i as u64, u64::MAX - i as u64][i % 3],
                modified_at: text.to_string(),
                source: Source::Bundled,
                always_visible: false,
                agents_skill: false,
            };
            let listed = Listed::new(format!("ns/{i}"), &row);
            for include_description in [true, false] {
                let mut expected = serde_json::json!({
                    "id": row.display_id,
                    "title": row.title,
                    "type": row.r#type,
                    "function_id": row.function_id,
                    "disable_model_invocation": row.disable_model_invocation,
                    "description": if include_description { other } else { "" },
                    "bytes": row.bytes,
                    "modified_at": row.modified_at,
                });
                if let Some(compatibility) = &row.compatibility {
                    expected["compatibility"] = compatibility.as_str().into();
                }
                let mut text = String::new();
                listed.push_json(&mut text, include_description);
                assert_eq!(listed.json_len(include_description), text.len(), "{text}");
                let from_text: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(from_text, expected, "{text}");
                let by_field = serde_json::to_value(listed.as_row(include_description)).unwrap();
                assert_eq!(by_field, expected);
            }
            assert_eq!(*listed.shown_id(), row.display_id);
            assert_eq!(listed.kind().as_deref(), row.r#type.as_deref());
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
