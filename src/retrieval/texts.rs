//! What a skill and a function are embedded as: the one place that decides it, for the vectors
//! kept in the index and for the evaluation that tuned the choice (`tests/search/quality.rs`,
//! on the `dev` cases). A stored vector is valid only for the text this module made, so a
//! change here changes the name skill vectors are stored under (`skills::skill_passages_digest`)
//! and the keys of function vectors (their text's hash): both are embedded again.
//!
//! The dense lane finds what the lexical lane misses: a task in other words than the skill's.
//! Names are split into words (`pdf-tools` → `pdf tools`, `tailscale::peers::list` →
//! `tailscale peers list`) so the encoder reads them as words; the description says when to
//! use a skill and leads; the body's start adds the vocabulary of what it does, and a second
//! passage that of its later steps. The encoder reads at most `embed::MAX_TOKENS` tokens (128),
//! so each passage's body is cut ([`SKILL_BODY_CHARS`], [`SKILL_CONTINUATION_CHARS`]) before
//! tokenizing: more would be dropped anyway.

use super::tokenize::truncate_at_char_boundary;

/// How much of a skill's body (after its frontmatter) its lead passage embeds, in bytes cut on
/// a char boundary: about what fits in the encoder's 128 tokens after the name and description.
pub const SKILL_BODY_CHARS: usize = 600;
/// How much of the body after that its continuation passage embeds (bytes, cut on a char
/// boundary): about what fits in 128 tokens after the name.
pub const SKILL_CONTINUATION_CHARS: usize = 700;

/// The passages a skill is embedded as, each a text of its own: the lead ([`skill_text`]) and,
/// when the body goes on past the lead's cut, a continuation (the name, then the next
/// [`SKILL_CONTINUATION_CHARS`] of the body). A search scores a skill by its nearest passage.
///
/// Why a second passage: a skill's description and first paragraphs say what it is, but a
/// task phrased indirectly often meets the words of its procedure further down rather than
/// those of its summary, and one vector of both blurs the two. Tuned on the
/// `dev` skill tasks (`tests/search/quality.rs`): the continuation lifted recall@10 from 0.70
/// to 0.76 with no more no-match tasks answered; a third view (the name and description alone)
/// changed nothing, and the continuation with the description again in front of it found less.
pub fn skill_passages(name: &str, title: &str, description: &str, body: &str) -> Vec<String> {
    let mut passages = vec![skill_text(name, title, description, body)];
    let (_, after) = split_lead(body);
    let rest = collapse_markup(truncate_at_char_boundary(after, SKILL_CONTINUATION_CHARS));
    if !rest.is_empty() {
        let mut continuation = words_of_id(name);
        push_part(&mut continuation, &rest);
        passages.push(continuation);
    }
    passages
}

/// The text a skill is embedded from: its name (shown id), title, description and the leading
/// part of its body (the text after the frontmatter). Empty parts are left out.
pub fn skill_text(name: &str, title: &str, description: &str, body: &str) -> String {
    let name = words_of_id(name);
    let mut out = name.clone();
    let title = title.trim();
    // A title that only repeats the name adds nothing.
    if !title.is_empty() && !title.eq_ignore_ascii_case(&name) {
        push_part(&mut out, title);
    }
    push_part(&mut out, description.trim());
    let (lead, _) = split_lead(body);
    push_part(&mut out, &collapse_markup(lead));
    out
}

/// A body's part the lead passage embeds (its first [`SKILL_BODY_CHARS`], leading whitespace
/// skipped) and what follows it: the one cut both passages are made by.
fn split_lead(body: &str) -> (&str, &str) {
    let body = body.trim_start();
    let lead = truncate_at_char_boundary(body, SKILL_BODY_CHARS);
    (lead, &body[lead.len()..])
}

/// The text a function is embedded from: its id as words, then its description.
pub fn function_text(id: &str, description: &str) -> String {
    let mut out = words_of_id(id);
    push_part(&mut out, description.trim());
    out
}

/// The forms a capability is embedded in for function search: it is asked as the description
/// of a software function would put it, in two phrasings, and a function scores by the mean of
/// its cosines with both (`search::vectors::function_query`).
///
/// Why: an agent states a capability in everyday words ("book a hotel room", "wake someone up
/// about an outage"), which the encoder places near whatever functions share its topic, served
/// or not. Put as what a software tool does, a need a function serves moves toward it, and a
/// need no function serves stands out less. On the `dev` function cases (30 paraphrased, 34
/// no-match), at the gate that answers at most 2 no-match cases, the plain capability found 19
/// paraphrases (0.63), one form 16 to 24 depending on the phrasing, and the mean of these two
/// 26 (0.87); the best single form and the best pairs of seven phrasings tried were within a
/// case of each other, so no one wording carries it.
pub fn function_query_forms(capability: &str) -> [String; 2] {
    let capability = capability.trim();
    [
        format!("a software tool that can {capability}"),
        format!("Function: {capability}"),
    ]
}

/// Whether the sentence encoder reads `text`: at least half of its letters are Latin (accented
/// ones included). all-MiniLM-L6-v2 learned from English; a query in Chinese, Japanese, Arabic
/// or Cyrillic embeds near whatever else is written in that script, whatever it says (a
/// Japanese task found three unrelated Japanese skills and not the one titled with its words;
/// "bake bread" in Chinese found a mail function described in Chinese). Such a query is
/// answered by the lexical lane alone, which reads every script (`script_terms`) for skills.
pub fn encoder_reads(text: &str) -> bool {
    let (mut latin, mut other) = (0usize, 0usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        if is_latin(c) {
            latin += 1;
        } else {
            other += 1;
        }
    }
    latin >= other
}

/// Whether `c` is a letter of the Latin script: ASCII, the Latin-1 and Latin Extended blocks,
/// or a full-width Latin letter.
fn is_latin(c: char) -> bool {
    c.is_ascii_alphabetic()
        || matches!(c as u32, 0xC0..=0x24F | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF | 0xFF21..=0xFF3A | 0xFF41..=0xFF5A)
}

/// An id's words: separators (`::`, `/`, `-`, `_`, `.`) become spaces.
fn words_of_id(id: &str) -> String {
    let spaced: String = id
        .chars()
        .map(|c| {
            if matches!(c, ':' | '/' | '-' | '_' | '.') {
                ' '
            } else {
                c
            }
        })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Appends `part` as a sentence of its own.
fn push_part(out: &mut String, part: &str) {
    if part.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str(if out.ends_with(['.', '!', '?', ':']) {
            " "
        } else {
            ". "
        });
    }
    out.push_str(part);
}

/// Markdown's markup (heading marks, emphasis, code ticks, table bars and rules) dropped and
/// runs of whitespace made single spaces: they would spend the encoder's tokens on
/// punctuation.
fn collapse_markup(text: &str) -> String {
    let plain: String = text
        .chars()
        .map(|c| {
            if matches!(c, '#' | '*' | '`' | '|' | '>' | '=') {
                ' '
            } else {
                c
            }
        })
        .collect();
    plain
        .split_whitespace()
        .filter(|word| !word.chars().all(|c| matches!(c, '-' | ':' | '~')))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoder_reads_text_mostly_in_latin_letters() {
        for read in [
            "send an email report",
            "Rechnungsprüfung für März",
            "traduire ce document en français",
            "translate this into 日本語",
            "ＡＰＩ keys",
            "2024-05-01",
            "",
        ] {
            assert!(encoder_reads(read), "{read}");
        }
        for unread in [
            "クロスポスト",
            "PDFを翻訳する",
            "烤面包",
            "إرسال البريد",
            "Развертывание сайта",
        ] {
            assert!(!encoder_reads(unread), "{unread}");
        }
    }

    #[test]
    fn a_skill_reads_as_sentences_of_its_parts() {
        let text = skill_text(
            "team/pdf-tools",
            "PDF tools",
            "Use when the user asks to merge or split PDF files.",
            "# PDF tools\n\n## Steps\n\n1. Run `qpdf --split` on the **input**.\n\n| a | b |\n|---|---|\n",
        );
        assert_eq!(
            text,
            "team pdf tools. PDF tools. Use when the user asks to merge or split PDF files. \
             PDF tools Steps 1. Run qpdf --split on the input . a b"
        );
    }

    #[test]
    fn empty_parts_and_a_title_that_repeats_the_name_are_left_out() {
        assert_eq!(skill_text("pdf", "PDF", "", "  "), "pdf");
        assert_eq!(skill_text("x", "", "Does y:", "z"), "x. Does y: z");
    }

    #[test]
    fn the_body_is_cut_on_a_char_boundary() {
        let body = "é".repeat(SKILL_BODY_CHARS);
        let text = skill_text("a", "", "", &body);
        assert!(text.len() <= "a. ".len() + SKILL_BODY_CHARS);
        assert!(text.ends_with('é'));
    }

    #[test]
    fn a_long_body_adds_a_continuation_passage_after_the_lead() {
        let lead_words = "a".repeat(SKILL_BODY_CHARS);
        let body = format!("{lead_words}## Later steps\n\nRotate the **keys** weekly.");
        let passages = skill_passages("ops/keys", "", "Key care.", &body);
        assert_eq!(passages.len(), 2);
        assert_eq!(passages[0], skill_text("ops/keys", "", "Key care.", &body));
        assert_eq!(passages[1], "ops keys. Later steps Rotate the keys weekly.");
        // A body the lead holds whole, or followed only by markup, has one passage.
        assert_eq!(skill_passages("x", "", "d", "short body").len(), 1);
        let markup = format!("{lead_words}\n\n---\n| |\n");
        assert_eq!(skill_passages("x", "", "d", &markup).len(), 1);
    }

    #[test]
    fn the_continuation_is_cut_on_a_char_boundary() {
        let body = format!(
            "{}{}",
            "a".repeat(SKILL_BODY_CHARS),
            "é".repeat(SKILL_CONTINUATION_CHARS)
        );
        let passages = skill_passages("a", "", "", &body);
        assert!(passages[1].len() <= "a. ".len() + SKILL_CONTINUATION_CHARS);
        assert!(passages[1].ends_with('é'));
        assert_eq!(passages.len(), 2, "a lead and one continuation at most");
    }

    #[test]
    fn a_capability_is_asked_in_two_software_phrasings() {
        assert_eq!(
            function_query_forms("  book a flight "),
            [
                "a software tool that can book a flight".to_string(),
                "Function: book a flight".to_string()
            ]
        );
    }

    #[test]
    fn a_function_reads_as_its_id_words_then_its_description() {
        assert_eq!(
            function_text("tailscale::peers::list", "List the devices of the tailnet."),
            "tailscale peers list. List the devices of the tailnet."
        );
        assert_eq!(function_text("publish", ""), "publish");
    }
}
