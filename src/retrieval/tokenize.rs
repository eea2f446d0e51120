//! Text to search terms, the same way for catalog documents and capability queries: split on
//! anything that is not an ASCII letter or digit, add the parts of camelCase tokens, lowercase,
//! drop the 22 grammatical stopwords, fold plurals conservatively. Also the capability-side
//! preparation (length cap, JSON-key stripping) and the intrinsic-capability filter.
//!
//! Pure functions over strings.

/// The grammatical stoplist (contract: exactly these 22 words).
pub const STOPWORDS: [&str; 22] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "was", "with",
];

/// Personal pronouns, possessives and reflexives, space-separated: words that say whose thing a
/// need concerns, never which capability serves it. The contract's lexical ranking keeps them
/// (its stoplist is exactly [`STOPWORDS`]); a lexical lane ranked beside an embedder leaves them
/// out, see [`content_terms`]. `us` and `mine` are not here: they are also a region code and a
/// verb.
pub const PRONOUNS: &str = "i me my myself we our ours ourselves you your yours yourself \
    yourselves he him his himself she her hers herself they them their theirs themselves \
    its itself";

/// `terms` without the [`PRONOUNS`] (as [`terms`] makes them: `ours` is folded to `our`).
///
/// Beside an embedder, a lexical hit is evidence enough to answer a capability, so a hit made
/// of a pronoun and one other word is costly: "file my tax return" matched `mysql::query`,
/// whose `MySQL` splits into `my` and `sql`, and that one hit let the dense lane answer a need
/// no function serves. A pronoun says nothing of which function serves a need, and the
/// embedder still reads it in the whole text.
pub fn content_terms(terms: &[String]) -> Vec<String> {
    static FOLDED: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| PRONOUNS.split_whitespace().map(singularize).collect());
    terms
        .iter()
        .filter(|term| !FOLDED.contains(term))
        .cloned()
        .collect()
}

/// Capability text beyond this many bytes is ignored (contract: 2048, cut on a char boundary).
pub const MAX_CAPABILITY_BYTES: usize = 2048;

/// The search terms of `text`, in order of appearance (duplicates kept: documents count them).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |term| out.push(term.to_string()));
    out
}

/// Hands each search term of `text` to `found`, in the order [`terms`] lists them, in one
/// reused buffer ([`ascii_token_terms`]): no allocation per term.
///
/// A token of ASCII letters and digits gives its camelCase parts, when it has two or more,
/// then itself; each lowercased, dropped when a stopword, else folded to its singular.
pub fn for_each_term(text: &str, mut found: impl FnMut(&str)) {
    let mut term = String::new();
    for token in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
    {
        ascii_token_terms(token, &mut term, &mut found);
    }
}

/// Hands each search term of one token of ASCII letters and digits to `found`: its camelCase
/// parts, when it has two or more, then itself; each lowercased in `term` (a reused buffer),
/// dropped when a stopword, else folded to its singular. Why the buffer: counting every
/// skill's text (a first skill search at 50,000 skills, 15 million terms, through
/// `script_terms`) spent a third of its time allocating and freeing terms.
pub(super) fn ascii_token_terms(token: &str, term: &mut String, found: &mut impl FnMut(&str)) {
    let mut emit = |word: &str| {
        term.clear();
        term.push_str(word);
        term.make_ascii_lowercase();
        if !is_stopword(term) {
            singularize_in_place(term);
            found(term);
        }
    };
    let mut start = 0;
    for cut in camel_cuts(token) {
        emit(&token[start..cut]);
        start = cut;
    }
    if start > 0 {
        emit(&token[start..]);
    }
    emit(token);
}

/// Whether `lowered` is one of the [`STOPWORDS`], none longer than 4 bytes: most words are
/// turned away by their length before any comparison.
fn is_stopword(lowered: &str) -> bool {
    lowered.len() <= 4 && STOPWORDS.contains(&lowered)
}

/// Where `presignUrl` splits into `presign`, `Url`: before each uppercase letter that follows a
/// lowercase letter or a digit (so `HTTPServer` stays whole, `s3Bucket` splits).
fn camel_cuts(token: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = token.as_bytes();
    (1..bytes.len()).filter(move |&i| {
        bytes[i].is_ascii_uppercase()
            && (bytes[i - 1].is_ascii_lowercase() || bytes[i - 1].is_ascii_digit())
    })
}

/// Conservative plural folding: `queries` → `query`, `files` → `file`; words ending in `ss`,
/// `us` or `is` (`process`, `status`, `analysis`) and short words are left alone.
pub fn singularize(term: &str) -> String {
    let mut folded = term.to_string();
    singularize_in_place(&mut folded);
    folded
}

/// [`singularize`] in place.
fn singularize_in_place(term: &mut String) {
    if term.len() > 4 && term.ends_with("ies") {
        term.truncate(term.len() - 3);
        term.push('y');
    } else if term.len() > 3
        && term.ends_with('s')
        && !term.ends_with("ss")
        && !term.ends_with("us")
        && !term.ends_with("is")
    {
        term.pop();
    }
}

/// A capability as it is searched: trimmed, capped at [`MAX_CAPABILITY_BYTES`], and with JSON
/// object keys removed (a model pasting `{"to": "bob@example.com"}` means the value, and the
/// key `to` would only add noise).
pub fn prepare_capability(capability: &str) -> String {
    let trimmed = capability.trim();
    let capped = truncate_at_char_boundary(trimmed, MAX_CAPABILITY_BYTES);
    strip_json_keys(capped).trim().to_string()
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub fn truncate_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest prefix of `text` of at most `max` bytes that does not end inside an ASCII
/// word: a word the cap cut in two is left out whole, since its first letters are another
/// word (`depl` of `deploy`), which no text may hold. Text that fits is returned whole. Text
/// in other scripts is cut on a character boundary only: text written without spaces is
/// searched by pairs of characters, which a cut harms no more than any pair.
pub fn truncate_at_word_boundary(text: &str, max: usize) -> &str {
    let cut = truncate_at_char_boundary(text, max);
    let inside = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !inside(text[cut.len()..].chars().next()) || !inside(cut.chars().next_back()) {
        return cut;
    }
    match cut.rfind(|c: char| !c.is_ascii_alphanumeric()) {
        Some(at) => &cut[..at],
        None => cut,
    }
}

/// Removes every double-quoted string (backslash escapes honoured) that is followed by optional
/// whitespace and a colon, together with the colon. Other quoted strings stay.
pub fn strip_json_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..open]);
        let quoted = &rest[open..];
        let Some(close) = closing_quote(quoted) else {
            // An unterminated string is just text.
            out.push_str(quoted);
            return out;
        };
        let after = &quoted[close + 1..];
        let spaced = after.trim_start();
        if let Some(value) = spaced.strip_prefix(':') {
            rest = value;
        } else {
            out.push_str(&quoted[..=close]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The byte offset of the quote that closes the string opening at byte 0 of `quoted`.
fn closing_quote(quoted: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in quoted.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// Summarizing text the caller already has is the model's own work, never a function: such a
/// capability names a summary and the provided text or content.
pub fn is_intrinsic(terms: &[String]) -> bool {
    let summary = terms.iter().any(|t| {
        matches!(
            t.as_str(),
            "summarize" | "summarise" | "summary" | "summarization"
        )
    });
    let given = terms
        .iter()
        .any(|t| matches!(t.as_str(), "provided" | "text" | "content"));
    summary && given
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::seeded::Xorshift;

    fn t(text: &str) -> Vec<String> {
        terms(text)
    }

    /// The rules of [`terms`] written out plainly, one allocation at a time: what the
    /// buffered [`for_each_term`] must give term for term.
    fn plainly(text: &str) -> Vec<String> {
        let keep = |word: String| (!STOPWORDS.contains(&word.as_str())).then(|| singularize(&word));
        let mut out = Vec::new();
        for token in text.split(|c: char| !c.is_ascii_alphanumeric()) {
            if token.is_empty() {
                continue;
            }
            let chars: Vec<char> = token.chars().collect();
            let mut parts = vec![String::new()];
            for (i, &c) in chars.iter().enumerate() {
                let after_lower_or_digit =
                    i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
                if c.is_ascii_uppercase() && after_lower_or_digit {
                    parts.push(String::new());
                }
                parts.last_mut().unwrap().push(c);
            }
            if parts.len() >= 2 {
                out.extend(parts.into_iter().filter_map(|p| keep(p.to_lowercase())));
            }
            out.extend(keep(token.to_lowercase()));
        }
        out
    }

    #[test]
    fn no_stopword_is_longer_than_the_length_check_allows() {
        assert!(STOPWORDS.iter().all(|word| is_stopword(word)));
    }

    #[test]
    fn terms_are_the_plain_rules_on_random_text() {
        // Fixed-seed text from pieces that exercise every rule: camelCase and digits, runs of
        // capitals, plural endings, stopwords in any case, separators and non-ASCII letters.
        const PIECES: [&str; 24] = [
            "presignUrl",
            "HTTPServer",
            "s3Bucket",
            "queries",
            "files",
            "status",
            "process",
            "analysis",
            "The",
            "AND",
            "of",
            "ties",
            "bus",
            "iOS",
            "ABCdefGhi",
            "x9Y",
            "café",
            "naïveQueries",
            "::",
            "-",
            "_",
            " ",
            "\n",
            "/",
        ];
        let mut random = Xorshift::new(0x51_7cc1_b727_220a);
        for _ in 0..2_000 {
            let text: String = (0..random.below(12))
                .map(|_| PIECES[random.below(PIECES.len() as u64) as usize])
                .collect();
            assert_eq!(terms(&text), plainly(&text), "{text:?}");
        }
    }

    #[test]
    fn splits_on_anything_not_alphanumeric_and_lowercases() {
        assert_eq!(
            t("mailer::send_email-now"),
            ["mailer", "send", "email", "now"]
        );
        assert_eq!(t("  Hello,  WORLD!! "), ["hello", "world"]);
        assert_eq!(t("été résumé"), ["t", "r", "sum"]);
        assert!(t("").is_empty());
        assert!(t(":: -- __").is_empty());
    }

    #[test]
    fn camel_case_tokens_add_their_parts_before_the_whole_token() {
        assert_eq!(t("presignUrl"), ["presign", "url", "presignurl"]);
        assert_eq!(t("s3Bucket"), ["s3", "bucket", "s3bucket"]);
        assert_eq!(
            t("getHTTPResponse"),
            ["get", "httpresponse", "gethttpresponse"]
        );
        // Upper to upper is not a boundary, and one part adds nothing.
        assert_eq!(t("HTTPServer"), ["httpserver"]);
        assert_eq!(t("Send"), ["send"]);
    }

    #[test]
    fn drops_exactly_the_22_stopwords() {
        let all = STOPWORDS.join(" ");
        assert!(t(&all).is_empty(), "{:?}", t(&all));
        assert_eq!(t("The Queue FOR jobs"), ["queue", "job"]);
        // Near misses are kept.
        assert_eq!(t("into onto these"), ["into", "onto", "these"]);
    }

    #[test]
    fn content_terms_leave_out_every_pronoun_and_keep_the_rest_in_order() {
        let all = t(PRONOUNS);
        assert_eq!(all.len(), 28, "no pronoun is a stopword");
        assert!(content_terms(&all).is_empty(), "{:?}", content_terms(&all));
        assert_eq!(
            content_terms(&t("file my tax return with Theirs and Ours")),
            ["file", "tax", "return"]
        );
        // The camelCase parts of a name are terms like any other: only the pronoun part goes.
        assert_eq!(content_terms(&t("MySQL")), ["sql", "mysql"]);
        // Words that only look like pronouns, and the two left out of the list, are kept.
        assert_eq!(
            content_terms(&t("mine us-east-1 mythic theme")),
            ["mine", "us", "east", "1", "mythic", "theme"]
        );
    }

    #[test]
    fn folds_plurals_conservatively() {
        for (word, folded) in [
            ("queries", "query"),
            ("entries", "entry"),
            ("files", "file"),
            ("emails", "email"),
            ("buckets", "bucket"),
            ("status", "status"),
            ("process", "process"),
            ("analysis", "analysis"),
            ("ties", "tie"),
            ("bus", "bus"),
            ("gas", "gas"),
            ("uses", "use"),
        ] {
            assert_eq!(singularize(word), folded, "{word}");
        }
        assert_eq!(t("sendEmails"), ["send", "email", "sendemail"]);
    }

    #[test]
    fn json_keys_are_stripped_with_their_colon() {
        assert_eq!(
            strip_json_keys(r#"{"to": "bob@example.com", "subject" : "hi"}"#),
            r#"{ "bob@example.com",  "hi"}"#
        );
        // Escaped quotes inside a key do not end it.
        assert_eq!(strip_json_keys(r#"{"a\"b": 1}"#), "{ 1}");
        // A quoted value not followed by a colon stays; an unterminated quote is text.
        assert_eq!(strip_json_keys(r#"say "hello" now"#), r#"say "hello" now"#);
        assert_eq!(strip_json_keys(r#"x "open: y"#), r#"x "open: y"#);
        assert_eq!(
            t(&prepare_capability(r#"send {"recipient": "ops team"}"#)),
            ["send", "ops", "team"]
        );
    }

    #[test]
    fn capabilities_are_trimmed_and_capped_on_a_char_boundary() {
        assert_eq!(prepare_capability("  send mail \n"), "send mail");
        let long = "é".repeat(MAX_CAPABILITY_BYTES); // 2 bytes each
        let prepared = prepare_capability(&long);
        assert_eq!(prepared.len(), MAX_CAPABILITY_BYTES);
        let odd = format!("x{}", "é".repeat(MAX_CAPABILITY_BYTES));
        assert_eq!(prepare_capability(&odd).len(), MAX_CAPABILITY_BYTES - 1);
    }

    #[test]
    fn intrinsic_needs_a_summary_word_and_a_given_text_word() {
        let intrinsic = |s: &str| is_intrinsic(&t(&prepare_capability(s)));
        assert!(intrinsic("summarize the provided text"));
        assert!(intrinsic("Summarise this content"));
        assert!(intrinsic("write a summary of the texts"));
        assert!(intrinsic("summarization of provided contents"));
        assert!(!intrinsic("summarize a web page"));
        assert!(!intrinsic("extract text from a pdf"));
        assert!(!intrinsic("send an email"));
    }

    #[test]
    fn a_cap_inside_a_word_leaves_the_word_out() {
        assert_eq!(truncate_at_word_boundary("deploy deploy", 9), "deploy");
        assert_eq!(truncate_at_word_boundary("deploy deploy", 7), "deploy ");
        assert_eq!(
            truncate_at_word_boundary("deploy deploy", 20),
            "deploy deploy"
        );
        // One word longer than the cap keeps what fits: there is nothing else to search.
        assert_eq!(truncate_at_word_boundary("deployment", 6), "deploy");
        assert_eq!(truncate_at_word_boundary("deploy crème", 10), "deploy cr");
        // Unspaced text keeps all it can hold.
        assert_eq!(truncate_at_word_boundary("、翻译助手", 9), "、翻译");
    }
}
