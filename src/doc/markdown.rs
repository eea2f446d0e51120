//! Title and description of a markdown body, read line by line as the contract does (§3.2):
//!
//! - title: the first line whose left-trimmed text starts with `# `, its text trimmed (a line
//!   whose text is empty does not count);
//! - description: skipping leading blank lines, headings (`#…`) and blockquote lines (`>…`),
//!   the trimmed lines up to the next blank line, heading or blockquote line, joined with single
//!   spaces; no markup is removed and nothing is cut.
//!
//! Three refinements keep the rule's spirit where it reads real documents badly:
//! - a fenced code block (```` ``` ```` or `~~~`, closed by a fence of the same character at
//!   least as long, or by the end of the body) is not content: a `# comment` inside one is no
//!   title, and its lines are never part of a description (a fence ends one being collected);
//! - a setext heading (text lines underlined with `===` or `---`) is a heading: a `===` one can
//!   be the title, and neither becomes a description;
//! - a leading byte-order mark is not content (dropped when the file is decoded, see
//!   [`super::decode`]).

/// The fewest fence characters that open a code fence (CommonMark).
const MIN_FENCE: usize = 3;

/// A code fence being read: its character and length.
#[derive(Clone, Copy)]
struct Fence {
    marker: char,
    len: usize,
}

/// What one line of the body is, for the title and description rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line<'a> {
    /// Blank after trimming.
    Blank,
    /// Inside a fenced code block, or one of its fences.
    Code,
    /// Starts with `#`; the text after `# ` when it is a non-empty level-1 heading.
    Heading(Option<&'a str>),
    /// Starts with `>`.
    Quote,
    /// Only `=` (a setext level-1 underline) or only `-` (level 2), when it follows text.
    Underline { level_one: bool },
    /// Anything else, trimmed.
    Text(&'a str),
}

/// The body's lines, classified; fences are tracked across lines.
fn lines(body: &str) -> impl Iterator<Item = Line<'_>> {
    let mut fence: Option<Fence> = None;
    // Whether the previous line was text (a setext underline must follow text).
    let mut after_text = false;
    body.lines().map(move |raw| {
        let line = classify(raw, &mut fence, after_text);
        after_text = matches!(line, Line::Text(_));
        line
    })
}

fn classify<'a>(raw: &'a str, fence: &mut Option<Fence>, after_text: bool) -> Line<'a> {
    let start = raw.trim_start();
    let trimmed = start.trim_end();
    if let Some(open) = *fence {
        if closes(trimmed, open) {
            *fence = None;
        }
        return Line::Code;
    }
    if let Some(open) = opens(start) {
        *fence = Some(open);
        return Line::Code;
    }
    if trimmed.is_empty() {
        return Line::Blank;
    }
    if let Some(rest) = start.strip_prefix('#') {
        let h1 = rest
            .strip_prefix(' ')
            .map(str::trim)
            .filter(|t| !t.is_empty());
        return Line::Heading(h1);
    }
    if trimmed.starts_with('>') {
        return Line::Quote;
    }
    if after_text {
        if trimmed.chars().all(|c| c == '=') {
            return Line::Underline { level_one: true };
        }
        if trimmed.chars().all(|c| c == '-') {
            return Line::Underline { level_one: false };
        }
    }
    Line::Text(trimmed)
}

/// The fence a left-trimmed line opens, if it opens one: at least three backticks or tildes;
/// after backticks, no backtick may follow (that is inline code, not a fence).
fn opens(start: &str) -> Option<Fence> {
    let marker = start.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = start.chars().take_while(|c| *c == marker).count();
    let info = &start[len * marker.len_utf8()..];
    (len >= MIN_FENCE && !(marker == '`' && info.contains('`'))).then_some(Fence { marker, len })
}

/// Whether a trimmed line closes the open fence: only its character, at least as many.
fn closes(trimmed: &str, open: Fence) -> bool {
    trimmed.chars().count() >= open.len && trimmed.chars().all(|c| c == open.marker)
}

/// The body's title (see the module doc), when it has one.
pub fn title(body: &str) -> Option<String> {
    // Text lines since the last line of another kind: the text of a setext heading.
    let mut run: Vec<&str> = Vec::new();
    for line in lines(body) {
        match line {
            Line::Heading(Some(text)) => return Some(text.to_owned()),
            Line::Underline { level_one: true } => return Some(run.join(" ")),
            Line::Text(text) => run.push(text),
            _ => run.clear(),
        }
    }
    None
}

/// The body's description (see the module doc); `""` when it has none.
pub fn description(body: &str) -> String {
    let mut collected: Vec<&str> = Vec::new();
    for line in lines(body) {
        match line {
            Line::Text(text) => collected.push(text),
            // The lines collected so far were a heading's text: keep looking after it.
            Line::Underline { .. } => collected.clear(),
            Line::Blank | Line::Code | Line::Heading(_) | Line::Quote => {
                if !collected.is_empty() {
                    break;
                }
            }
        }
    }
    collected.join(" ")
}

/// Both, in one call.
pub fn title_and_description(body: &str) -> (Option<String>, String) {
    (title(body), description(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_document() {
        let body = "# Shell\n\nRuns commands\non the host.\n\nMore.\n";
        assert_eq!(
            title_and_description(body),
            (
                Some("Shell".to_owned()),
                "Runs commands on the host.".to_owned()
            )
        );
    }

    #[test]
    fn empty_body() {
        assert_eq!(title_and_description(""), (None, String::new()));
        assert_eq!(title_and_description("\n\n  \n"), (None, String::new()));
    }

    #[test]
    fn a_list_after_the_first_line_belongs_to_the_description() {
        let body = "# Mailer\n\nUse this skill when:\n- you send mail\n- you queue it\n\nMore.\n";
        assert_eq!(
            description(body),
            "Use this skill when: - you send mail - you queue it"
        );
    }

    #[test]
    fn a_body_that_opens_with_a_list_describes_with_the_list() {
        assert_eq!(description("- one\n- two\n\nText.\n"), "- one - two");
        assert_eq!(
            description("1. First step\n\n   Explained.\n"),
            "1. First step"
        );
    }

    #[test]
    fn html_blocks_and_tables_are_text() {
        assert_eq!(
            description("<div>html block</div>\n\nLater.\n"),
            "<div>html block</div>"
        );
        assert_eq!(
            description("| a | b |\n|---|---|\n| 1 | 2 |\n"),
            "| a | b | |---|---| | 1 | 2 |"
        );
    }

    #[test]
    fn headings_and_blockquotes_are_skipped_until_text_then_end_it() {
        let body =
            "## Overview\n> **Note:** read this first\n> and this.\n\nThe real text.\n## Next\n";
        assert_eq!(description(body), "The real text.");
        assert_eq!(description("First\n> quoted\nafter\n"), "First");
        assert_eq!(description("First\n# Heading\nafter\n"), "First");
    }

    #[test]
    fn a_fenced_block_holding_headings_and_fences_is_not_content() {
        let body = "```sh\n# not a title\n---\necho hi\n```\n\n# Real\n\nText.\n";
        assert_eq!(
            title_and_description(body),
            (Some("Real".to_owned()), "Text.".to_owned())
        );
        let tilde = "~~~~\n# no\n~~~\nstill code\n~~~~~\n# Yes\n";
        assert_eq!(title(tilde).as_deref(), Some("Yes"));
        // A fence ends a description being collected; its lines never join it.
        assert_eq!(
            description("Run this:\n```\nmake\n```\nthen go.\n"),
            "Run this:"
        );
        // A fence left open runs to the end of the body.
        assert_eq!(
            title_and_description("```\n# x\ntext\n"),
            (None, String::new())
        );
        // A backtick fence with a backtick in its info string is inline code, not a fence.
        assert_eq!(description("```a`b```\nrest\n"), "```a`b``` rest");
        // A fence is a fence at any indentation (lists indent them).
        assert_eq!(
            title("1. Step\n\n    ```bash\n    # comment\n    ```\n# Title\n").as_deref(),
            Some("Title")
        );
    }

    #[test]
    fn the_title_is_the_first_h1_line_with_text() {
        assert_eq!(title("#\n\n#   \n# Later\n").as_deref(), Some("Later"));
        assert_eq!(title("#No space\n").as_deref(), None);
        assert_eq!(title("## Sub\n# Main\n").as_deref(), Some("Main"));
        // Text after `# ` as written: inline markup and closing hashes are kept.
        assert_eq!(
            title("#    The `exec` **tool** ##  \n").as_deref(),
            Some("The `exec` **tool** ##")
        );
        assert_eq!(title("   # Indented\n").as_deref(), Some("Indented"));
        assert_eq!(title("> # Quoted\n- # Listed\n"), None);
    }

    #[test]
    fn setext_headings() {
        assert_eq!(
            title_and_description("Big Title\n=========\n\nBody.\n"),
            (Some("Big Title".to_owned()), "Body.".to_owned())
        );
        assert_eq!(
            title("Two line\ntitle\n===\n").as_deref(),
            Some("Two line title")
        );
        // A level-2 setext heading is no title, and no description either.
        assert_eq!(
            title_and_description("Sub\n---\n\nBody.\n"),
            (None, "Body.".to_owned())
        );
        // Underlines that follow no text are text.
        assert_eq!(description("===\n"), "===");
        assert_eq!(description("\n---\nAfter a rule.\n"), "--- After a rule.");
    }

    #[test]
    fn long_text_is_not_cut_and_lines_are_trimmed() {
        let long = "word ".repeat(80);
        assert_eq!(description(&format!("{long}\n")), long.trim());
        assert_eq!(
            description("  first line  \n   second line\nthird\n"),
            "first line second line third"
        );
    }

    #[test]
    fn crlf_bodies() {
        let body = "# Title\r\n\r\nLine one\r\nline two\r\n\r\nNext.\r\n";
        assert_eq!(
            title_and_description(body),
            (Some("Title".to_owned()), "Line one line two".to_owned())
        );
        assert_eq!(title("Setext\r\n===\r\n").as_deref(), Some("Setext"));
    }

    #[test]
    fn multibyte_text() {
        assert_eq!(
            title_and_description("# Café ☕\n\nNaïve — résumé.\n"),
            (Some("Café ☕".to_owned()), "Naïve — résumé.".to_owned())
        );
    }
}
