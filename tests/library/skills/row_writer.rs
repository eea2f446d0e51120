//! The list row's fast text writer, its exact length and its field-by-field serializer against
//! serde_json, on random rows: every string is drawn from pieces serde_json must escape (quotes,
//! backslashes, every control character), non-ASCII text (accents, emoji, line and paragraph
//! separators) and plain words, at either end and empty; nullable fields are `null` or not;
//! counts span the whole `u64`; descriptions are included or blanked.

use iii_directory::testing::{SkillRow, Source, list_row_forms};
use serde_json::{Value, json};
use test_support::generate::Rng;

const ROWS: usize = 5_000;

/// The pieces a random string is made of.
const PIECES: &[&str] = &[
    "",
    "a",
    "skill",
    " ",
    "\"",
    "\\",
    "\\\"",
    "/",
    "\n",
    "\r\n",
    "\t",
    "\u{0}",
    "\u{1}",
    "\u{8}",
    "\u{c}",
    "\u{1f}",
    "\u{7f}",
    "é",
    "naïve",
    "ünïcödé",
    "🦀",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "</script>",
    "&<>",
    "{\"k\":1}",
    "null",
    "日本語",
];

fn text(rng: &mut Rng) -> String {
    let pieces = rng.below(8);
    let mut out = String::new();
    for _ in 0..pieces {
        if rng.chance(10) {
            // Any control character, not only the listed ones.
            out.push(char::from(rng.below(0x20) as u8));
        } else {
            out.push_str(rng.pick::<&str>(PIECES));
        }
    }
    out
}

fn nullable(rng: &mut Rng) -> Option<String> {
    rng.chance(50).then(|| text(rng))
}

fn count(rng: &mut Rng) -> u64 {
    match rng.below(4) {
        0 => rng.below(10) as u64,
        1 => u64::MAX - rng.below(3) as u64,
        _ => rng.next_u64() >> rng.below(64),
    }
}

fn row(rng: &mut Rng) -> SkillRow {
    SkillRow {
        display_id: text(rng),
        title: text(rng),
        r#type: nullable(rng),
        function_id: nullable(rng),
        disable_model_invocation: rng.chance(50),
        description: text(rng),
        bytes: count(rng),
        modified_at: text(rng),
        name: nullable(rng),
        compatibility: nullable(rng),
        source: Source::Bundled,
        always_visible: rng.chance(50),
        agents_skill: rng.chance(50),
    }
}

/// What the contract says a row is, written independently of the library's column table.
fn expected(row: &SkillRow, include_description: bool) -> Value {
    let mut expected = json!({
        "id": row.display_id,
        "title": row.title,
        "type": row.r#type,
        "function_id": row.function_id,
        "disable_model_invocation": row.disable_model_invocation,
        "description": if include_description { row.description.as_str() } else { "" },
        "bytes": row.bytes,
        "modified_at": row.modified_at,
    });
    // Present only when the file says it.
    if let Some(compatibility) = &row.compatibility {
        expected["compatibility"] = json!(compatibility);
    }
    expected
}

#[test]
fn the_fast_row_writer_writes_what_serde_json_writes() {
    let mut rng = Rng::new(27);
    for i in 0..ROWS {
        let row = row(&mut rng);
        let include_description = i % 3 != 0;
        let forms = list_row_forms(&row, include_description);
        // Byte for byte what serde_json writes from the row's fields: the same keys in the
        // same order, the same escapes, the same numbers.
        assert_eq!(forms.text, forms.serialized, "row {i}: {row:?}");
        assert_eq!(forms.len, forms.text.len(), "row {i}: {}", forms.text);
        let parsed: Value = serde_json::from_str(&forms.text).expect("valid JSON");
        assert_eq!(
            parsed,
            expected(&row, include_description),
            "row {i}: {}",
            forms.text
        );
    }
}
