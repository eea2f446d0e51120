//! Git's merge-conflict markers. A merge that cannot join two branches' changes to a file
//! leaves both versions in it, between marker lines; a parser then complains about the first
//! marker it meets, which tells the user nothing about the merge. The reads that fail on such a
//! text look for the markers, to say what happened and how to fix it.

/// The marker lines as the messages name them, for the constants below to share.
macro_rules! marker_lines {
    () => {
        "lines starting `<<<<<<< `, `=======`, `>>>>>>> `"
    };
}

/// The marker lines, as `check` and the messages name them.
pub const MARKER_LINES: &str = marker_lines!();

/// The reason a frontmatter block holding markers is salvaged with (see
/// `Frontmatter::holds_conflict_markers`); no trailing period, as the parser's reasons.
pub const FRONTMATTER_REASON: &str = concat!(
    "it holds unresolved git merge-conflict markers (",
    marker_lines!(),
    "): keep one side's lines, or both, and delete the marker lines"
);

/// Whether `text` holds a line of a git merge-conflict marker: `<<<<<<<` (the start of this
/// side), `|||||||` (the merge base, with `merge.conflictStyle diff3`), `=======` (the other
/// side) or `>>>>>>>` (the end), each alone on its line or followed by a space and a label.
pub fn has_markers(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        line == "======="
            || ["<<<<<<<", "|||||||", ">>>>>>>"].iter().any(|marker| {
                line.strip_prefix(marker)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_lines_are_found_and_look_alikes_are_not() {
        for text in [
            "name: a\n<<<<<<< HEAD\nname: b\n",
            "x\r\n=======\r\ny\r\n",
            ">>>>>>> feature/agents\n",
            "a\n||||||| merged common ancestors\n",
            "<<<<<<<\n",
        ] {
            assert!(has_markers(text), "{text:?}");
        }
        for text in [
            "name: a\n",
            "========\n",
            "title: <<<<<<< not at the start\n",
            "<<<<<<<<< eight\n",
            " =======\n",
            "# Heading\n\n---\n",
        ] {
            assert!(!has_markers(text), "{text:?}");
        }
    }
}
