//! What a skill and a function are embedded as: the one place that decides it, for the vectors
//! kept in the index and for the evaluation that tuned the choice (`tests/search/quality.rs`,
//! on the `dev` cases). A stored vector is valid only for the text this module made, so a
//! change here changes every key the vectors are stored under (the text's hash).
//!
//! The dense lane finds what the lexical lane misses: a task in other words than the skill's.
//! Names are split into words (`pdf-tools` → `pdf tools`, `tailscale::peers::list` →
//! `tailscale peers list`) so the encoder reads them as words; the description says when to
//! use a skill and leads; the body's start adds the vocabulary of what it does. The encoder
//! reads at most `embed::MAX_TOKENS` tokens (128), so the body is cut at [`SKILL_BODY_CHARS`]
//! before tokenizing: more would be dropped anyway.

use super::tokenize::truncate_at_char_boundary;

/// How much of a skill's body (after its frontmatter) is embedded, in bytes cut on a char
/// boundary: about what fits in the encoder's 128 tokens after the name and description.
pub const SKILL_BODY_CHARS: usize = 600;

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
    let body = truncate_at_char_boundary(body.trim_start(), SKILL_BODY_CHARS);
    push_part(&mut out, &collapse_markup(body));
    out
}

/// The text a function is embedded from: its id as words, then its description.
pub fn function_text(id: &str, description: &str) -> String {
    let mut out = words_of_id(id);
    push_part(&mut out, description.trim());
    out
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
    fn a_function_reads_as_its_id_words_then_its_description() {
        assert_eq!(
            function_text("tailscale::peers::list", "List the devices of the tailnet."),
            "tailscale peers list. List the devices of the tailnet."
        );
        assert_eq!(function_text("publish", ""), "publish");
    }
}
