//! The model's tokenizer: the added tokens a text spells out (`[MASK]`, …), then BERT's uncased
//! normalizer, its whitespace-and-punctuation split and WordPiece over the vocabulary of
//! `tokenizer.json`. Written here rather than taken from the
//! `tokenizers` crate: the model needs only this one pipeline, it cannot fail once loaded, and
//! the crate would bring a regex engine and a dozen dependencies for it. It follows the
//! Hugging Face implementation step by step (the same Unicode tables for control characters
//! and punctuation), and the fixture test compares its ids with that implementation's.

use std::collections::HashMap;

use serde::Deserialize;
use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use super::EmbedError;

/// Words longer than this many characters become one unknown token (WordPiece's own limit).
const MAX_WORD_CHARS: usize = 100;

/// A loaded WordPiece vocabulary, the ids of the special tokens around every sequence, and the
/// added tokens a text may spell out.
#[derive(Debug)]
pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    added: AddedTokens,
    /// The same vocabulary for continuation pieces, without their `##` prefix, so a lookup
    /// needs no allocation.
    continuations: HashMap<String, u32>,
    unknown: u32,
    cls: u32,
    sep: u32,
}

/// The parts of `tokenizer.json` this tokenizer reads, and checks, since it implements only
/// one pipeline: a file describing another one is refused rather than misread.
#[derive(Deserialize)]
struct File {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    normalizer: Normalizer,
    pre_tokenizer: Tagged,
    model: Model,
}

/// An entry of `added_tokens`: a token matched in the raw text, before normalization. Every
/// field is required, as the reference requires them.
#[derive(Deserialize)]
struct AddedToken {
    id: u32,
    content: String,
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
    normalized: bool,
}

#[derive(Deserialize)]
struct Normalizer {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    clean_text: bool,
    #[serde(default)]
    handle_chinese_chars: bool,
    #[serde(default)]
    strip_accents: Option<bool>,
    #[serde(default)]
    lowercase: bool,
}

#[derive(Deserialize)]
struct Tagged {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type")]
    kind: String,
    unk_token: String,
    continuing_subword_prefix: String,
    max_input_chars_per_word: usize,
    vocab: HashMap<String, u32>,
}

impl Tokenizer {
    /// Reads `tokenizer.json` text; refuses a pipeline other than uncased BERT WordPiece.
    pub fn from_json(text: &str) -> Result<Tokenizer, EmbedError> {
        let file: File = serde_json::from_str(text).map_err(EmbedError::TokenizerJson)?;
        let n = &file.normalizer;
        let supported = n.kind == "BertNormalizer"
            && n.clean_text
            && n.handle_chinese_chars
            && n.lowercase
            && n.strip_accents != Some(false)
            && file.pre_tokenizer.kind == "BertPreTokenizer"
            && file.model.kind == "WordPiece"
            && file.model.continuing_subword_prefix == "##"
            && file.model.max_input_chars_per_word == MAX_WORD_CHARS;
        if !supported {
            return Err(EmbedError::Unsupported(
                "tokenizer.json is not an uncased BERT WordPiece tokenizer",
            ));
        }
        let special = |token: &str| {
            file.model
                .vocab
                .get(token)
                .copied()
                .ok_or(EmbedError::Unsupported(
                    "tokenizer.json lacks a special token",
                ))
        };
        let added = AddedTokens::from_file(&file.added_tokens, &file.model.vocab)?;
        let unknown = special(&file.model.unk_token)?;
        let cls = special("[CLS]")?;
        let sep = special("[SEP]")?;
        let continuations = file
            .model
            .vocab
            .iter()
            .filter_map(|(piece, &id)| Some((piece.strip_prefix("##")?.to_owned(), id)))
            .collect();
        Ok(Tokenizer {
            vocab: file.model.vocab,
            added,
            continuations,
            unknown,
            cls,
            sep,
        })
    }

    /// Whether `text` spells out an added token (`[MASK]`, …): the texts whose tokens
    /// [`TOKENS_REVISION`](super::TOKENS_REVISION) 1 changed.
    pub fn spells_added_token(&self, text: &str) -> bool {
        self.added
            .tokens
            .iter()
            .any(|(token, _)| text.contains(token.as_str()))
    }

    /// The largest id the tokenizer hands out.
    pub fn max_id(&self) -> u32 {
        let added = self.added.tokens.iter().map(|(_, id)| *id);
        self.vocab.values().copied().chain(added).max().unwrap_or(0)
    }

    /// The ids of `text` between `[CLS]` and `[SEP]`, at most `max_tokens` in all (the text's
    /// tail is dropped, as the reference truncates). The text is read a piece at a time and
    /// only as far as the tokens kept: a query of megabytes costs what its first words do.
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        self.encode_in_pieces(text, max_tokens, PIECE_BYTES)
    }

    fn encode_in_pieces(&self, text: &str, max_tokens: usize, piece_bytes: usize) -> Vec<u32> {
        let room = max_tokens.saturating_sub(2);
        let mut ids = Vec::with_capacity(room.min(64) + 2);
        ids.push(self.cls);
        'text: for piece in pieces(text, piece_bytes) {
            for segment in self.added.split(piece) {
                let (added, normalized) = match segment {
                    Segment::Added(id) => (Some(id), String::new()),
                    Segment::Text(text) => (None, normalize(text)),
                };
                // Lazily: no word past the last one kept is cut into pieces.
                let words = pre_tokenize(&normalized).flat_map(|word| self.word_pieces(word));
                for id in added.into_iter().chain(words) {
                    if ids.len() > room {
                        break 'text;
                    }
                    ids.push(id);
                }
            }
        }
        ids.push(self.sep);
        ids
    }

    /// Greedy longest-match-first WordPiece; a word with a part that matches nothing is one
    /// unknown token, as is a word over the length limit.
    fn word_pieces(&self, word: &str) -> Vec<u32> {
        if word.chars().count() > MAX_WORD_CHARS {
            return vec![self.unknown];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < word.len() {
            let table = if start == 0 {
                &self.vocab
            } else {
                &self.continuations
            };
            let mut end = word.len();
            let found = loop {
                if let Some(&id) = table.get(&word[start..end]) {
                    break Some(id);
                }
                match word[start..end].char_indices().next_back() {
                    Some((last, _)) if last > 0 => end = start + last,
                    _ => break None,
                }
            };
            match found {
                Some(id) => {
                    pieces.push(id);
                    start = end;
                }
                None => return vec![self.unknown],
            }
        }
        pieces
    }
}

/// The added tokens (`[CLS]`, `[MASK]`, …) as the reference matches them: spelled out
/// exactly, case and all, anywhere in the raw text, each one token whatever surrounds it; the
/// text between them is normalized and split as usual. Only tokens matched as written are
/// implemented (not normalized, no word or space rules), and none holds a whitespace, so a
/// text read in pieces (`pieces`) never splits one.
#[derive(Debug, Default)]
struct AddedTokens {
    /// Content and id, longest first: of two starting at the same place the longer wins.
    tokens: Vec<(String, u32)>,
}

/// A part of a text: an added token spelled out, or the text between.
#[derive(Debug, PartialEq)]
enum Segment<'a> {
    Added(u32),
    Text(&'a str),
}

impl AddedTokens {
    /// The entries of `added_tokens`, each with its id in `vocab` when it is there (the
    /// reference's choice when the two disagree), else the entry's own.
    fn from_file(
        entries: &[AddedToken],
        vocab: &HashMap<String, u32>,
    ) -> Result<AddedTokens, EmbedError> {
        let mut tokens = Vec::with_capacity(entries.len());
        for entry in entries {
            let plain = !(entry.single_word || entry.lstrip || entry.rstrip || entry.normalized);
            if !plain || entry.content.is_empty() || entry.content.chars().any(is_whitespace) {
                return Err(EmbedError::Unsupported(
                    "tokenizer.json has an added token matched in a way this tokenizer does \
                     not implement",
                ));
            }
            let id = vocab.get(&entry.content).copied().unwrap_or(entry.id);
            tokens.push((entry.content.clone(), id));
        }
        tokens.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(AddedTokens { tokens })
    }

    /// `text` cut at the added tokens it spells out, leftmost first. Each token's next place is
    /// looked up once and again only once the cut has passed it: a text is read once per token.
    fn split<'a>(&self, text: &'a str) -> Vec<Segment<'a>> {
        let mut next: Vec<Option<usize>> = self
            .tokens
            .iter()
            .map(|(token, _)| text.find(token.as_str()))
            .collect();
        let mut segments = Vec::new();
        let mut at = 0;
        loop {
            // The leftmost match; of those at one place, the longest (the order of `tokens`).
            let found = next
                .iter()
                .enumerate()
                .filter_map(|(i, start)| start.map(|start| (start, i)))
                .min();
            let Some((start, i)) = found else {
                break;
            };
            if start > at {
                segments.push(Segment::Text(&text[at..start]));
            }
            let (token, id) = &self.tokens[i];
            segments.push(Segment::Added(*id));
            at = start + token.len();
            for (slot, (token, _)) in next.iter_mut().zip(&self.tokens) {
                if slot.is_some_and(|start| start < at) {
                    *slot = text[at..].find(token.as_str()).map(|found| at + found);
                }
            }
        }
        if at < text.len() {
            segments.push(Segment::Text(&text[at..]));
        }
        segments
    }
}

/// Bytes of a text normalized at a time, at least (a piece ends before a whitespace).
const PIECE_BYTES: usize = 4_096;

/// `text` as consecutive pieces of at least `size` bytes (the last may be shorter; a text
/// without whitespace is one piece), each ending just before a whitespace character. The
/// normalizer and the pre-tokenizer give the pieces, one after another, the very words of the
/// whole: a whitespace character ends every word, every step of the normalizer but the
/// decomposition looks at one character alone, and the decomposition never reorders across
/// a whitespace character (each is a starter).
fn pieces(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = rest
            .char_indices()
            .skip_while(|&(at, _)| at < size.max(1))
            .find(|&(_, c)| is_whitespace(c))
            .map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// BERT's normalizer, in its order: drop control characters and turn whitespace into spaces,
/// put spaces around CJK ideographs, decompose and drop combining marks, lowercase.
pub fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_whitespace(c) {
            cleaned.push(' ');
        } else if is_chinese(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    let mut out = String::with_capacity(cleaned.len());
    for c in cleaned.nfd().filter(|c| !c.is_mark_nonspacing()) {
        out.extend(c.to_lowercase());
    }
    out
}

/// BERT's pre-tokenizer: words split on whitespace, each punctuation character a word of its
/// own.
pub fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                words.push(&text[s..at]);
            }
        } else if is_punctuation(c) {
            if let Some(s) = start.take() {
                words.push(&text[s..at]);
            }
            words.push(&text[at..at + c.len_utf8()]);
        } else if start.is_none() {
            start = Some(at);
        }
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words.into_iter()
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_control(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' => false,
        _ => c.is_other(),
    }
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// The CJK Unified Ideographs blocks, which BERT tokenizes one character at a time.
fn is_chinese(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> Tokenizer {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "want", "##ed", "runn",
            "##ing", ",", "!", "cafe", "中", "a", "[MASK]",
        ];
        let vocab: serde_json::Map<String, serde_json::Value> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| ((*t).to_owned(), serde_json::Value::from(i)))
            .collect();
        let added: Vec<serde_json::Value> = [
            ("[PAD]", 0),
            ("[UNK]", 1),
            ("[CLS]", 2),
            ("[SEP]", 3),
            ("[MASK]", 16),
        ]
        .iter()
        .map(|(content, id)| {
            serde_json::json!({"id": id, "content": content,
                "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
                "special": true})
        })
        .collect();
        let json = serde_json::json!({
            "added_tokens": added,
            "normalizer": {"type": "BertNormalizer", "clean_text": true,
                "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100, "vocab": vocab},
        });
        Tokenizer::from_json(&json.to_string()).expect("tokenizer")
    }

    #[test]
    fn splits_words_into_longest_pieces() {
        let t = tokenizer();
        assert_eq!(t.encode("unaffable", 512), [2, 4, 5, 6, 3]);
        // "wanted" after "un" matches no continuation piece: the whole word is unknown.
        assert_eq!(
            t.encode("UNWANTED, running!", 512),
            [2, 1, 11, 9, 10, 12, 3]
        );
    }

    #[test]
    fn a_word_with_an_unmatched_part_is_one_unknown() {
        let t = tokenizer();
        assert_eq!(t.encode("wantx", 512), [2, 1, 3]);
        assert_eq!(t.encode(&"a".repeat(101), 512), [2, 1, 3]);
        assert_eq!(t.encode("", 512), [2, 3]);
    }

    #[test]
    fn accents_case_controls_and_ideographs_are_normalized() {
        assert_eq!(normalize("Café\u{0}\u{200b}\tX"), "cafe x");
        assert_eq!(normalize("a中b"), "a 中 b");
        let t = tokenizer();
        assert_eq!(t.encode("CAFÉ中", 512), [2, 13, 14, 3]);
    }

    #[test]
    fn punctuation_is_a_word_of_its_own() {
        let words: Vec<&str> = pre_tokenize("it's  a-b (c)").collect();
        assert_eq!(words, ["it", "'", "s", "a", "-", "b", "(", "c", ")"]);
        // Symbols that are not punctuation (`$`, `+`, `^` are ASCII punctuation; `€` is not).
        let words: Vec<&str> = pre_tokenize("5€+x").collect();
        assert_eq!(words, ["5€", "+", "x"]);
    }

    #[test]
    fn a_text_read_in_pieces_gives_the_ids_of_the_whole() {
        let t = tokenizer();
        // Characters that exercise each step: every kind of whitespace, controls, combining
        // marks (after a space too), ideographs, punctuation, case, pieces of the vocabulary.
        let alphabet = [
            "un", "aff", "able", "want", "ed", "runn", "ing", "a", "cafe", "CAFÉ", "e\u{301}",
            "\u{301}", "中", ",", "!", "-", " ", "  ", "\t", "\n", "\r\n", "\u{a0}", "\u{3000}",
            "\u{0}", "\u{200b}", "\u{7}", "x", "Ω", "[MASK]", "[SEP]", "[", "]", "MASK",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as usize
        };
        for _ in 0..500 {
            let text: String = (0..next() % 60)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            let max_tokens = 2 + next() % 40;
            let whole = t.encode_in_pieces(&text, max_tokens, usize::MAX);
            for size in [1, 2, 3, 5, 8, 13] {
                assert_eq!(
                    t.encode_in_pieces(&text, max_tokens, size),
                    whole,
                    "{text:?} in pieces of {size} bytes, {max_tokens} tokens"
                );
            }
        }
    }

    #[test]
    fn an_added_token_spelled_out_is_one_token_wherever_it_stands() {
        let t = tokenizer();
        // Matched in the raw text, before the normalizer lowercases it or the pre-tokenizer
        // cuts at its brackets, and cutting the words it touches.
        assert_eq!(t.encode("want [MASK] a", 512), [2, 7, 16, 15, 3]);
        assert_eq!(t.encode("want[MASK]a", 512), [2, 7, 16, 15, 3]);
        assert_eq!(t.encode("[[SEP]]", 512), [2, 1, 3, 1, 3]);
        // Only as written: lowercase is plain text ("[", "mask", "]", each unknown here).
        assert_eq!(t.encode("[mask]", 512), [2, 1, 1, 1, 3]);
        // One token, truncated like any other.
        assert_eq!(t.encode("[MASK][MASK][MASK]", 4), [2, 16, 16, 3]);
    }

    /// An added token matched as written.
    fn plain_token(content: &str, id: u32) -> AddedToken {
        AddedToken {
            id,
            content: content.to_string(),
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
        }
    }

    #[test]
    fn added_tokens_are_cut_leftmost_then_longest() {
        let entries: Vec<AddedToken> = [("<a>", 1), ("<a>>", 2), ("a><", 3)]
            .into_iter()
            .map(|(content, id)| plain_token(content, id))
            .collect();
        let added = AddedTokens::from_file(&entries, &HashMap::new()).expect("added tokens");
        assert_eq!(
            added.split("x<a>>y<a><a>"),
            [
                Segment::Text("x"),
                Segment::Added(2),
                Segment::Text("y"),
                Segment::Added(1),
                Segment::Added(1),
            ]
        );
        assert_eq!(added.split("plain"), [Segment::Text("plain")]);
        assert_eq!(added.split(""), []);
    }

    #[test]
    fn an_added_token_matched_another_way_is_refused() {
        let base = serde_json::json!({"id": 5, "content": "[X]", "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false});
        for (field, value) in [
            ("single_word", serde_json::json!(true)),
            ("lstrip", serde_json::json!(true)),
            ("rstrip", serde_json::json!(true)),
            ("normalized", serde_json::json!(true)),
            ("content", serde_json::json!("[ X ]")),
            ("content", serde_json::json!("")),
        ] {
            let mut entry = base.clone();
            entry[field] = value.clone();
            let entry: AddedToken = serde_json::from_value(entry).expect("entry");
            assert!(
                AddedTokens::from_file(&[entry], &HashMap::new()).is_err(),
                "{field}: {value} accepted"
            );
        }
        // A flag left out is refused too, not read as false.
        let mut entry = base.clone();
        entry.as_object_mut().expect("entry").remove("normalized");
        assert!(serde_json::from_value::<AddedToken>(entry).is_err());
    }

    #[test]
    fn an_added_tokens_id_is_the_vocabularys_when_it_is_there() {
        let vocab: HashMap<String, u32> = [("[MASK]".to_string(), 103)].into();
        let entries = [plain_token("[MASK]", 5), plain_token("<x>", 7)];
        let added = AddedTokens::from_file(&entries, &vocab).expect("added tokens");
        assert_eq!(
            added.split("[MASK]<x>"),
            [Segment::Added(103), Segment::Added(7)]
        );
    }

    #[test]
    fn a_long_text_is_cut_after_its_first_words() {
        let t = tokenizer();
        let long = format!("{}unaffable", "want ".repeat(200_000));
        assert_eq!(t.encode(&long, 5), [2, 7, 7, 7, 3]);
        assert_eq!(t.encode(&long, 2), [2, 3]);
    }

    #[test]
    fn truncation_keeps_the_special_tokens() {
        let t = tokenizer();
        let ids = t.encode("a a a a a a", 5);
        assert_eq!(ids, [2, 15, 15, 15, 3]);
    }
}
