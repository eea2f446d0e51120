//! Lengths as the Agent Skills reference validator measures them. It is JavaScript, where a
//! string's `length` counts UTF-16 code units: a character outside the Basic Multilingual Plane
//! (most emoji) counts two. Counting chars or bytes instead would move the 64, 500 and 1,024
//! limits for such text, and the checks would disagree with the reference at the boundary.

/// The length of `text` in UTF-16 code units (JavaScript's `String.prototype.length`).
pub fn js_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Whitespace as JavaScript's `String.prototype.trim` removes it: Unicode `White_Space` plus the
/// byte-order mark, which Rust's `trim` keeps.
pub fn js_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_utf16_units() {
        assert_eq!(js_len("abc"), 3);
        assert_eq!(js_len("é"), 1);
        assert_eq!(js_len("日本"), 2);
        assert_eq!(js_len("😀"), 2);
        assert_eq!(js_len(""), 0);
    }

    #[test]
    fn trim_takes_the_byte_order_mark_too() {
        assert_eq!(js_trim("\u{feff} a \u{3000}"), "a");
        assert_eq!(js_trim("\t\n"), "");
    }
}
