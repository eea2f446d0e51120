//! The skill rows of one index revision, decoded once and kept sorted by on-disk id, each with
//! its list JSON ready: what `list`, `index` and a `get` miss read, instead of decoding every
//! row of the index per call. A later revision of the same index patches only the rows the
//! change log names; a rebuilt index, or a log that no longer reaches back, decodes them all.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::doc::distance::Shape;
use crate::error::Result;
use crate::index::Reader;
use crate::index::changelog::Logged;
use crate::rules::skill::SkillRow;

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
}

impl SkillCache {
    /// Decodes every skill row of a snapshot, on every core.
    pub fn build(reader: &Reader) -> Result<SkillCache> {
        use rayon::prelude::*;
        let rows = reader
            .skills()?
            .into_par_iter()
            .map(|(id, row)| Arc::new(Listed::new(id, &row)))
            .collect();
        Ok(SkillCache {
            revision: reader.revision()?,
            epoch: reader.epoch()?,
            rows,
            postings: OnceLock::new(),
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

    /// The positions (in id order) of the rows whose on-disk id has `segment` as one of its
    /// `/`-separated parts, ascending.
    pub fn sharing_segment(&self, segment: &str) -> &[u32] {
        self.postings()
            .segments
            .get(segment)
            .map_or(&[], Vec::as_slice)
    }

    /// The lowercase on-disk id at `position`, read from one contiguous text rather than the
    /// row (a miss measures thousands of candidates).
    pub fn lowercase_id_at(&self, position: u32) -> &str {
        let postings = self.postings();
        let i = position as usize;
        let start = if i == 0 { 0 } else { postings.ends[i - 1] } as usize;
        &postings.ids[start..postings.ends[i] as usize]
    }

    /// The [`Shape`] of the lowercase on-disk id at `position`: a bound of its edit distance
    /// that passes most candidates over without reading them.
    pub fn shape(&self, position: u32) -> &Shape {
        &self.postings().shapes[position as usize]
    }

    fn postings(&self) -> &Postings {
        self.postings.get_or_init(|| {
            let mut segments: HashMap<Box<str>, Vec<u32>> = HashMap::new();
            let mut ids = String::new();
            let mut ends = Vec::with_capacity(self.rows.len());
            let mut shapes = Vec::with_capacity(self.rows.len());
            for (i, row) in self.rows.iter().enumerate() {
                for part in row.id.split('/') {
                    let rows = segments.entry(part.into()).or_default();
                    // An id that repeats a segment is listed once under it.
                    if rows.last() != Some(&(i as u32)) {
                        rows.push(i as u32);
                    }
                }
                ids.push_str(row.lowercase_id());
                ends.push(u32::try_from(ids.len()).expect("ids under 4 GiB"));
                shapes.push(Shape::of(row.lowercase_id()));
            }
            Postings {
                segments,
                ids,
                ends,
                shapes,
            }
        })
    }

    /// The row at a position [`SkillCache::sharing_segment`] gave.
    pub fn at(&self, position: u32) -> &Listed {
        &self.rows[position as usize]
    }
}

/// What a `get` miss looks candidates up by, by position.
struct Postings {
    /// Each `/`-separated segment of the on-disk ids, with the positions of the rows that have it.
    segments: HashMap<Box<str>, Vec<u32>>,
    /// The lowercase on-disk ids one after another; `ends[i]` is where row `i`'s ends.
    ids: String,
    ends: Vec<u32>,
    shapes: Vec<Shape>,
}

/// One cached row, kept compact (a tree of 50,000 skills holds 50,000 of these): the list
/// response text and only what the filters, the index page and a miss's suggestions look at.
pub struct Listed {
    pub id: Box<str>,
    /// The id the row is shown under, when it is not `id` (`<ns>/index` shown as `<ns>`).
    display: Option<Box<str>>,
    pub always_visible: bool,
    pub kind: Option<Box<str>>,
    /// Lowercase display id, title and description one after another, for `search`; `ends`
    /// marks where the first two end.
    lowercase: Box<str>,
    /// The lowercase on-disk id, when the row is shown under another id.
    lowercase_id: Option<Box<str>>,
    ends: [u32; 2],
    /// The row as the list response carries it.
    json: Box<str>,
    /// Where each field's JSON literal sits in `json`: a row is written out either by copying
    /// `json` (text answers) or field by field from these (answers the SDK takes as a value),
    /// without parsing the text again.
    spans: [Span; Field::COUNT],
    bytes: u64,
    disable_model_invocation: bool,
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
    Id,
    Title,
    Type,
    FunctionId,
    Description,
    ModifiedAt,
}

impl Field {
    const COUNT: usize = 6;
}

/// A byte range of a row's JSON: one field's literal (`"…"` or `null`).
#[derive(Clone, Copy, Default)]
struct Span {
    start: u32,
    end: u32,
}

/// Writes a list row's JSON, noting where each text field's literal lands.
struct RowWriter {
    out: Vec<u8>,
    spans: [Span; Field::COUNT],
}

impl RowWriter {
    fn key(&mut self, key: &str) {
        self.out.push(if self.out.is_empty() { b'{' } else { b',' });
        self.value(key);
        self.out.push(b':');
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) {
        serde_json::to_writer(&mut self.out, value).expect("a list field serializes");
    }

    fn text(&mut self, key: &str, field: Field, value: Option<&str>) {
        self.key(key);
        let start = self.out.len();
        self.value(&value);
        self.spans[field as usize] = Span {
            start: start as u32,
            end: self.out.len() as u32,
        };
    }
}

impl RowWriter {
    /// A row's list JSON, and where its text fields' literals are in it.
    fn write(row: &SkillRow) -> (String, [Span; Field::COUNT]) {
        let mut w = RowWriter {
            out: Vec::with_capacity(160 + row.title.len() + row.description.len()),
            spans: [Span::default(); Field::COUNT],
        };
        w.text("id", Field::Id, Some(&row.display_id));
        w.text("title", Field::Title, Some(&row.title));
        w.text("type", Field::Type, row.r#type.as_deref());
        w.text("function_id", Field::FunctionId, row.function_id.as_deref());
        w.key("disable_model_invocation");
        w.value(&row.disable_model_invocation);
        w.text("description", Field::Description, Some(&row.description));
        w.key("bytes");
        w.value(&row.bytes);
        w.text("modified_at", Field::ModifiedAt, Some(&row.modified_at));
        w.out.push(b'}');
        assert!(w.out.len() <= u32::MAX as usize, "a list row under 4 GiB");
        let json = String::from_utf8(w.out).expect("serde_json writes UTF-8");
        (json, w.spans)
    }
}

impl Listed {
    pub fn new(id: String, row: &SkillRow) -> Listed {
        let (json, spans) = RowWriter::write(row);
        let fields = [&row.display_id, &row.title, &row.description].map(|f| f.to_lowercase());
        let display = (row.display_id != id).then(|| row.display_id.as_str().into());
        let lowercase_id = display.is_some().then(|| id.to_lowercase().into());
        let overview = (!row.agents_skill && row.r#type.as_deref() == Some("index")).then(|| {
            Box::new(Overview {
                title: row.title.as_str().into(),
                description: row.description.as_str().into(),
            })
        });
        let ends = [fields[0].len(), fields[0].len() + fields[1].len()];
        Listed {
            id: id.into(),
            display,
            always_visible: row.always_visible,
            kind: row.r#type.as_deref().map(Into::into),
            ends: ends.map(|e| u32::try_from(e).expect("fields under 4 GiB")),
            lowercase: fields.concat().into(),
            lowercase_id,
            json: json.into(),
            spans,
            bytes: row.bytes,
            disable_model_invocation: row.disable_model_invocation,
            overview,
        }
    }

    /// The on-disk id in lowercase, for edit distances.
    pub fn lowercase_id(&self) -> &str {
        self.lowercase_id
            .as_deref()
            .unwrap_or(&self.lowercase[..self.ends[0] as usize])
    }

    /// The id the answer shows.
    pub fn shown_id(&self) -> &str {
        self.display.as_deref().unwrap_or(&self.id)
    }

    /// Whether the lowercase `needle` is in the display id, the title or the description.
    pub fn matches(&self, needle: &str) -> bool {
        let [a, b] = self.ends.map(|e| e as usize);
        [
            &self.lowercase[..a],
            &self.lowercase[a..b],
            &self.lowercase[b..],
        ]
        .iter()
        .any(|field| field.contains(needle))
    }

    /// Appends the row's list JSON, with or without the description's text.
    pub fn push_json(&self, out: &mut String, include_description: bool) {
        if include_description {
            out.push_str(&self.json);
        } else {
            let description = self.spans[Field::Description as usize];
            // Keep the literal's quotes: the description becomes "".
            out.push_str(&self.json[..description.start as usize + 1]);
            out.push_str(&self.json[description.end as usize - 1..]);
        }
    }

    /// The length of the row's list JSON with its description.
    pub fn json_len(&self) -> usize {
        self.json.len()
    }

    /// A text field's value: `None` for `null`; borrowed from the JSON unless it holds an
    /// escape (rare: a quote, a backslash or a control character in the text).
    fn text(&self, field: Field) -> Option<Cow<'_, str>> {
        let Span { start, end } = self.spans[field as usize];
        let literal = &self.json[start as usize..end as usize];
        let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
        Some(if inner.contains('\\') {
            Cow::Owned(serde_json::from_str(literal).expect("a literal serde_json wrote"))
        } else {
            Cow::Borrowed(inner)
        })
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

/// A cached row written out field by field; see [`Listed::as_row`].
pub struct ListRow<'a> {
    listed: &'a Listed,
    include_description: bool,
}

impl Serialize for ListRow<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let row = self.listed;
        let mut out = serializer.serialize_struct("ListRow", 8)?;
        out.serialize_field("id", &row.text(Field::Id))?;
        out.serialize_field("title", &row.text(Field::Title))?;
        out.serialize_field("type", &row.text(Field::Type))?;
        out.serialize_field("function_id", &row.text(Field::FunctionId))?;
        out.serialize_field("disable_model_invocation", &row.disable_model_invocation)?;
        let description = match self.include_description {
            true => row.text(Field::Description),
            false => Some(Cow::Borrowed("")),
        };
        out.serialize_field("description", &description)?;
        out.serialize_field("bytes", &row.bytes)?;
        out.serialize_field("modified_at", &row.text(Field::ModifiedAt))?;
        out.end()
    }
}

/// A row as `skills::list` answers it, in JSON.
#[cfg(any(test, feature = "testing"))]
pub fn list_row_json(row: &SkillRow) -> String {
    RowWriter::write(row).0
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
            .map(|r| (r.id.to_string(), r.json.to_string()))
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

    /// A row written out field by field (the wire's value) says what its JSON text says, with
    /// and without the description, whatever its text holds: quotes, backslashes, control
    /// characters, non-ASCII, escapes at either end, empty and absent fields.
    #[test]
    fn a_row_serialized_by_field_equals_its_json_text() {
        use crate::rules::Source;
        let texts = [
            "",
            "plain",
            "say \"hi\"",
            "back\\slash at the end\\",
            "\"",
            "tab\tnew\nline\u{1}bell",
            "naïve – ünïcödé 🦀",
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
                bytes: i as u64 * 1_000_003,
                modified_at: text.to_string(),
                source: Source::Bundled,
                always_visible: false,
                agents_skill: false,
            };
            let listed = Listed::new(format!("ns/{i}"), &row);
            for include_description in [true, false] {
                let mut text = String::new();
                listed.push_json(&mut text, include_description);
                let from_text: serde_json::Value = serde_json::from_str(&text).unwrap();
                let by_field = serde_json::to_value(listed.as_row(include_description)).unwrap();
                assert_eq!(by_field, from_text, "{text}");
                assert_eq!(
                    from_text["description"],
                    if include_description { other } else { "" }
                );
            }
            assert_eq!(list_row_json(&row), listed.json.as_ref());
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
