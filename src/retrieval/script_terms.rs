//! Search terms of text in any script, for skill search: a skill written in Chinese, German or
//! Russian is found by the words it is written in. Function search keeps the contract's terms
//! (`tokenize::for_each_term`: anything but an ASCII letter or digit splits), under which `翻译`
//! has no term at all and `Prüfung` is the two terms `pr` and `fung`.
//!
//! Text is cut into runs of three kinds:
//! - a word of ASCII letters and digits: its terms are exactly `tokenize`'s (camelCase parts,
//!   lowercase, stopwords, plurals), so an English skill ranks as it always has;
//! - a word with other letters (accented Latin, Cyrillic, Greek, Devanagari: a letter, digit or
//!   combining mark): compatibility-decomposed with its accents dropped (the combining
//!   diacritics; other scripts' marks stay), `ß` written `ss`, so that `Prüfung` meets
//!   `Prufung`, `résumé` meets `resume`, and a full-width `ＡＰＩ` meets `API`; a word that is
//!   then ASCII goes the ASCII way, any other is lowercased (Greek's final `ς` as `σ`);
//! - a run of a script written without spaces between words (Chinese, Japanese, Korean, Thai,
//!   Lao, Khmer, Myanmar): its overlapping pairs of characters (`翻译助手` gives `翻译`, `译助`,
//!   `助手`), a lone character itself, after compatibility composition (a decomposed kana meets
//!   the composed one, a half-width one the full-width one). Pairs find a word without knowing
//!   where words end; Korean is spaced, but its particles join the word before them.
//!
//! Pure functions over strings; an ASCII word goes through `tokenize`'s steps untouched, with
//! no allocation per term.

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use super::tokenize::ascii_token_terms;

/// The search terms of `text` (see the module doc), in order of appearance, duplicates kept.
pub fn script_terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_script_term(text, |term| out.push(term.to_string()));
    out
}

/// Hands each search term of `text` to `found`, in the order [`script_terms`] lists them, in
/// reused buffers.
pub fn for_each_script_term(text: &str, mut found: impl FnMut(&str)) {
    let mut term = String::new();
    let mut folded = String::new();
    // Cut at ASCII separators first, as `tokenize` does: most tokens of most texts are then
    // ASCII words, and only a token holding another character is read run by run.
    let tokens = text
        .split(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty());
    for token in tokens {
        if token.is_ascii() {
            ascii_token_terms(token, &mut term, &mut found);
            continue;
        }
        for (kind, run) in runs(token) {
            match kind {
                Run::Word if run.is_ascii() => ascii_token_terms(run, &mut term, &mut found),
                Run::Word => word_terms(run, &mut term, &mut folded, &mut found),
                Run::Unspaced => pairs_of(run, &mut term, &mut folded, &mut found),
            }
        }
    }
}

/// Hands the terms of a word holding a character other than ASCII to `found`: folded
/// ([`fold_word`]) into `folded`, then the ASCII way when that is all it holds, else
/// lowercased whole in `term`.
fn word_terms(word: &str, term: &mut String, folded: &mut String, found: &mut impl FnMut(&str)) {
    fold_word(word, folded);
    if folded.is_empty() {
        return;
    }
    if folded.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return ascii_token_terms(folded, term, found);
    }
    term.clear();
    // Greek's final sigma is the same letter as σ: `ΕΛΕΓΧΟΣ` meets `έλεγχος`.
    term.extend(
        folded
            .chars()
            .flat_map(char::to_lowercase)
            .map(|c| if c == 'ς' { 'σ' } else { c }),
    );
    found(term);
}

/// What a run of text is (see the module doc); anything else separates runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    Word,
    Unspaced,
}

/// The kind of run `c` belongs to, `None` for a separator.
fn kind_of(c: char) -> Option<Run> {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric().then_some(Run::Word);
    }
    if is_unspaced_script(c) {
        Some(Run::Unspaced)
    } else if c.is_alphanumeric() || c.is_mark() {
        Some(Run::Word)
    } else {
        None
    }
}

/// The maximal runs of one kind in `text`, in order.
fn runs(text: &str) -> impl Iterator<Item = (Run, &str)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find(|c: char| kind_of(c).is_some())?;
        rest = &rest[start..];
        let kind = kind_of(rest.chars().next()?)?;
        let end = rest
            .find(|c: char| kind_of(c) != Some(kind))
            .unwrap_or(rest.len());
        let (run, after) = rest.split_at(end);
        rest = after;
        Some((kind, run))
    })
}

/// `word` with its compatibility forms decomposed, its accents dropped and `ß` written `ss`,
/// into `out` (case kept: the ASCII way still reads camelCase from it).
fn fold_word(word: &str, out: &mut String) {
    out.clear();
    for c in word.nfkd().filter(|&c| !is_accent(c)) {
        match c {
            'ß' | 'ẞ' => out.push_str("ss"),
            _ => out.push(c),
        }
    }
}

/// Whether `c` is a combining diacritic (the accents of Latin, Greek and Cyrillic letters once
/// decomposed). Other scripts' combining marks are letters' parts that tell words apart
/// (Devanagari's vowel signs: `कुल`, total, is not `कल`, tomorrow), so they stay.
fn is_accent(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// Hands `run`'s overlapping pairs of characters to `found` (its one character when it has one),
/// after compatibility composition into `composed`; each pair is built in `term`.
fn pairs_of(run: &str, term: &mut String, composed: &mut String, found: &mut impl FnMut(&str)) {
    composed.clear();
    composed.extend(run.nfkc());
    let mut chars = composed.chars().peekable();
    let Some(mut previous) = chars.next() else {
        return;
    };
    if chars.peek().is_none() {
        term.clear();
        term.push(previous);
        return found(term);
    }
    for c in chars {
        term.clear();
        term.push(previous);
        term.push(c);
        found(term);
        previous = c;
    }
}

/// Whether `c` belongs to a script written without spaces between words: Han ideographs (with
/// their radicals and the iteration marks), kana, Hangul, Thai, Lao, Khmer or Myanmar.
fn is_unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FDF // CJK radicals, Kangxi radicals
        | 0x3005..=0x3007 // 々 〆 〇
        | 0x3040..=0x30FF // hiragana, katakana
        | 0x31F0..=0x31FF // katakana extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0xFF66..=0xFF9F // half-width katakana
        | 0x20000..=0x2FA1F // CJK extensions B to F, compatibility supplement
        | 0x1100..=0x11FF // Hangul jamo
        | 0x3130..=0x318F // Hangul compatibility jamo
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0x0E00..=0x0EFF // Thai, Lao
        | 0x1000..=0x109F // Myanmar
        | 0x1780..=0x17FF // Khmer
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::tokenize::terms;

    #[test]
    fn ascii_text_has_the_contract_terms() {
        for text in [
            "Send an email with presignUrl to the HTTPServer",
            "queries, files and statuses: the s3Bucket",
            "",
        ] {
            assert_eq!(script_terms(text), terms(text), "{text}");
        }
    }

    #[test]
    fn ascii_words_in_other_text_keep_their_contract_terms() {
        assert_eq!(
            script_terms("Upload files — “quickly” with s3Bucket ✨"),
            ["upload", "file", "quickly", "s3", "bucket", "s3bucket"]
        );
    }

    #[test]
    fn accents_and_case_fold_so_either_spelling_meets_the_other() {
        assert_eq!(script_terms("Rechnungsprüfung"), ["rechnungsprufung"]);
        assert_eq!(script_terms("Résumés"), ["resume"]);
        // Decomposed (as macOS writes names) and composed spellings give one term.
        assert_eq!(script_terms("cafe\u{301}"), script_terms("caf\u{e9}"));
        assert_eq!(script_terms("Straße STRASSE"), ["strasse", "strasse"]);
        assert_eq!(script_terms("İstanbul"), ["istanbul"]);
        // Full-width letters are the ASCII ones.
        assert_eq!(script_terms("ＡＰＩ"), ["api"]);
    }

    #[test]
    fn other_alphabets_are_lowercased_words() {
        assert_eq!(
            script_terms("Проверка СЧЕТОВ, Ελέγχος"),
            ["проверка", "счетов", "ελεγχοσ"]
        );
        // A combining vowel sign belongs to its word, and tells it from another.
        assert_eq!(script_terms("हिन्दी अनुवाद").len(), 2);
        assert_ne!(script_terms("कुल"), script_terms("कल"));
        // Case folds whole words, final sigma included.
        assert_eq!(script_terms("ΕΛΕΓΧΟΣ"), script_terms("έλεγχος"));
    }

    #[test]
    fn unspaced_scripts_give_overlapping_pairs() {
        assert_eq!(script_terms("翻译助手"), ["翻译", "译助", "助手"]);
        assert_eq!(
            script_terms("将英文翻译成中文。译"),
            ["将英", "英文", "文翻", "翻译", "译成", "成中", "中文", "译"]
        );
        // Kanji and kana in one run; the ASCII word beside them keeps its terms.
        assert_eq!(
            script_terms("PDFを翻訳する"),
            ["pdf", "を翻", "翻訳", "訳す", "する"]
        );
        assert_eq!(script_terms("파일을 정리"), ["파일", "일을", "정리"]);
    }

    #[test]
    fn decomposed_and_half_width_kana_meet_the_composed_form() {
        // ガ written as カ and a combining voiced mark, and in half-width forms.
        assert_eq!(script_terms("\u{30AB}\u{3099}イド"), script_terms("ガイド"));
        assert_eq!(script_terms("ｶﾞｲﾄﾞ"), script_terms("ガイド"));
    }

    #[test]
    fn symbols_and_punctuation_of_any_script_separate() {
        assert_eq!(script_terms("✨🚀 — «»、。"), Vec::<String>::new());
        assert_eq!(script_terms("naïve—café"), ["naive", "cafe"]);
    }
}
