//! Title and first paragraph of a markdown body, read with a CommonMark parser so that what looks
//! like a heading inside a code block, or a callout in a blockquote, is not mistaken for one.
//!
//! Both are taken from the SOURCE text of the block, not its rendering: the contract serves
//! titles and descriptions with their markup as written (`**bold**`, links, inline code), so
//! only the block's own syntax (`#`, `===`) and line structure are removed.

use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag};

/// Tables are recognised so that a leading table is skipped like any other non-paragraph block
/// instead of being read as a paragraph of pipes. No other extension changes block structure in
/// a way the contract cares about.
const PARSER_OPTIONS: Options = Options::ENABLE_TABLES;

/// The body's title and first paragraph.
///
/// Title: the content of the first level-1 heading (ATX `# x` or setext `x` over `===`) that is
/// not inside a container (blockquote, list item), lines trimmed and joined with single spaces;
/// `None` when there is no such heading or it is empty. Containers are excluded because the
/// contract's rule is line-based (a line starting with `# `), which a `> # x` line never meets.
///
/// Paragraph: the source text of the first paragraph that is a top-level block, each line trimmed
/// and the lines joined with single spaces; `""` when there is none. Headings, blockquotes,
/// lists, code blocks, HTML blocks, thematic breaks and tables before it are skipped.
pub fn title_and_paragraph(body: &str) -> (Option<String>, String) {
    let mut title: Option<Option<String>> = None;
    let mut paragraph: Option<String> = None;
    // Blocks (and, inside them, inline elements) currently open.
    let mut depth = 0usize;
    // While inside the first top-level H1: the source span its content covers so far.
    let mut heading: Option<Option<Range<usize>>> = None;

    for (event, range) in Parser::new_ext(body, PARSER_OPTIONS).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if let Some(span) = heading.as_mut() {
                    widen(span, range);
                } else if depth == 0 {
                    match tag {
                        Tag::Heading {
                            level: HeadingLevel::H1,
                            ..
                        } if title.is_none() => heading = Some(None),
                        Tag::Paragraph if paragraph.is_none() => {
                            paragraph = Some(joined_lines(source(body, range)));
                        }
                        _ => {}
                    }
                }
                depth += 1;
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some(span) = heading.take() {
                        let text = span.map(|span| joined_lines(source(body, span)));
                        title = Some(text.filter(|text| !text.is_empty()));
                    }
                } else if let Some(span) = heading.as_mut() {
                    widen(span, range);
                }
            }
            _ => {
                if let Some(span) = heading.as_mut() {
                    widen(span, range);
                }
            }
        }
        // Most bodies open with both; the rest of a long document need not be parsed.
        if title.is_some() && paragraph.is_some() {
            break;
        }
    }
    (title.flatten(), paragraph.unwrap_or_default())
}

fn widen(span: &mut Option<Range<usize>>, range: Range<usize>) {
    *span = Some(match span.take() {
        None => range,
        Some(span) => span.start.min(range.start)..span.end.max(range.end),
    });
}

/// The source text an event covers. The parser's offsets always fall on char boundaries; should
/// one ever not, an empty text is a better outcome than a panic while indexing a whole tree.
fn source(body: &str, range: Range<usize>) -> &str {
    body.get(range).unwrap_or_default()
}

/// Each line trimmed (which also drops a CRLF file's `\r`), blank lines dropped, the rest joined
/// with single spaces.
fn joined_lines(text: &str) -> String {
    let mut joined = String::with_capacity(text.len());
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(line);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn title(body: &str) -> Option<String> {
        title_and_paragraph(body).0
    }

    fn paragraph(body: &str) -> String {
        title_and_paragraph(body).1
    }

    #[test]
    fn simple_document() {
        let body = "# Shell\n\nRuns commands\non the host.\n\nMore.\n";
        assert_eq!(
            title_and_paragraph(body),
            (
                Some("Shell".to_owned()),
                "Runs commands on the host.".to_owned()
            )
        );
    }

    #[test]
    fn empty_body() {
        assert_eq!(title_and_paragraph(""), (None, String::new()));
        assert_eq!(title_and_paragraph("\n\n  \n"), (None, String::new()));
    }

    #[test]
    fn hash_in_a_code_block_is_not_a_title() {
        let body = "```sh\n# not a title\necho hi\n```\n\nText.\n\n# Real\n";
        assert_eq!(title(body).as_deref(), Some("Real"));
        assert_eq!(paragraph(body), "Text.");
        let indented = "    # not a title either\n\nText.\n";
        assert_eq!(title_and_paragraph(indented), (None, "Text.".to_owned()));
    }

    #[test]
    fn setext_level_one_heading_counts() {
        assert_eq!(
            title("Big Title\n=========\n\nBody.\n").as_deref(),
            Some("Big Title")
        );
        assert_eq!(
            title("Two line\ntitle\n===\n").as_deref(),
            Some("Two line title")
        );
        // A setext level-2 heading is not a title, and not a paragraph either.
        assert_eq!(
            title_and_paragraph("Sub\n---\n\nBody.\n"),
            (None, "Body.".to_owned())
        );
    }

    #[test]
    fn title_is_the_first_level_one_heading_anywhere() {
        let body = "Intro paragraph.\n\n## Section\n\n# Late Title\n\n# Second\n";
        assert_eq!(
            title_and_paragraph(body),
            (Some("Late Title".to_owned()), "Intro paragraph.".to_owned())
        );
    }

    #[test]
    fn title_is_trimmed_and_keeps_inline_markup() {
        assert_eq!(title("#    Spaced out   \n").as_deref(), Some("Spaced out"));
        assert_eq!(
            title("# Closing hashes ##\n").as_deref(),
            Some("Closing hashes")
        );
        assert_eq!(
            title("# The `exec` **tool**\n").as_deref(),
            Some("The `exec` **tool**")
        );
    }

    #[test]
    fn empty_first_title_means_none() {
        assert_eq!(title("#\n\n# Later\n"), None);
        assert_eq!(title("#   \n"), None);
    }

    #[test]
    fn headings_inside_containers_are_not_titles() {
        assert_eq!(title("> # Quoted\n\n- # Listed\n"), None);
    }

    #[test]
    fn blockquote_callout_before_the_paragraph_is_skipped() {
        let body = "# T\n\n> **Note:** read this first\n> and this.\n\nThe real description.\n";
        assert_eq!(paragraph(body), "The real description.");
    }

    #[test]
    fn sub_headings_lists_rules_html_and_tables_are_skipped() {
        let body = "\
## Overview

- item one
- item two

---

<div>html block</div>

| a | b |
|---|---|
| 1 | 2 |

The first paragraph.
";
        assert_eq!(paragraph(body), "The first paragraph.");
    }

    #[test]
    fn markup_in_the_paragraph_stays_as_written() {
        let body = "Use **bold** and [a link](https://example.com) and `code`.\n";
        assert_eq!(paragraph(body), body.trim_end());
    }

    #[test]
    fn long_paragraph_is_not_truncated() {
        let sentence = "word ".repeat(40);
        let long = sentence.trim_end();
        assert_eq!(long.len(), 199);
        let body = format!("# Title\n\n{long}!\n");
        assert_eq!(paragraph(&body), format!("{long}!"));
        assert_eq!(paragraph(&body).len(), 200);
    }

    #[test]
    fn lines_are_trimmed_and_joined() {
        let body = "  first line  \n   second line\nthird\n";
        assert_eq!(paragraph(body), "first line second line third");
    }

    #[test]
    fn crlf_bodies() {
        let body = "# Title\r\n\r\nLine one\r\nline two\r\n\r\nNext.\r\n";
        assert_eq!(
            title_and_paragraph(body),
            (Some("Title".to_owned()), "Line one line two".to_owned())
        );
        assert_eq!(title("Setext\r\n===\r\n").as_deref(), Some("Setext"));
    }

    #[test]
    fn paragraph_without_title_and_title_without_paragraph() {
        assert_eq!(
            title_and_paragraph("Just text.\n"),
            (None, "Just text.".to_owned())
        );
        assert_eq!(
            title_and_paragraph("# Only\n\n## Sub\n"),
            (Some("Only".to_owned()), String::new())
        );
    }

    #[test]
    fn paragraph_inside_list_item_is_not_top_level() {
        let body = "1. First step\n\n   Explained here.\n";
        assert_eq!(paragraph(body), "");
    }

    #[test]
    fn multibyte_text() {
        assert_eq!(
            title_and_paragraph("# Café ☕\n\nNaïve — résumé.\n"),
            (Some("Café ☕".to_owned()), "Naïve — résumé.".to_owned())
        );
    }
}
