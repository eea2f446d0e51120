//! Id input normalization and the validators: whatever they accept can be joined onto a root
//! without leaving it, and normalizing an accepted id changes nothing. Also the edit distance,
//! its bit-parallel form and its cheap lower bound, against a plain reference implementation.

#![no_main]

use iii_directory::doc::distance::{Pattern, Shape, levenshtein};
use iii_directory::doc::ids::{
    MAX_ID_BYTES, MAX_SEGMENT_BYTES, normalize_id_input, skill_id_for, validate_name,
    validate_skill_id, validate_worker_name,
};
use libfuzzer_sys::fuzz_target;

/// Inputs longer than this (in chars) skip the quadratic reference distance, to keep runs fast.
const MAX_REFERENCE_CHARS: usize = 128;

fuzz_target!(|bytes: &[u8]| {
    let Ok(input) = std::str::from_utf8(bytes) else {
        return;
    };
    check_id_input(input);
    check_names(input);
    // Two strings for the distance: the input split at its first NUL.
    let (a, b) = input.split_once('\0').unwrap_or((input, ""));
    check_levenshtein(a, b);
});

/// What no accepted id, name or path may contain, so that joining it onto a root stays there.
fn assert_cannot_escape(accepted: &str) {
    assert!(!accepted.is_empty());
    assert!(!accepted.starts_with('/'), "{accepted:?}");
    assert!(
        !accepted.contains('\\') && !accepted.contains('\0'),
        "{accepted:?}"
    );
    assert!(!accepted.contains(':'), "{accepted:?}");
    for segment in accepted.split('/') {
        assert!(
            !segment.is_empty() && segment != "." && segment != "..",
            "{accepted:?}"
        );
    }
}

fn check_id_input(input: &str) {
    if validate_skill_id(input).is_ok() {
        assert_cannot_escape(input);
        assert!(input.len() <= MAX_ID_BYTES);
        assert!(input.split('/').all(|s| s.len() <= MAX_SEGMENT_BYTES));
        // An id is its own normal form, and its file maps back to it.
        assert_eq!(normalize_id_input(input).as_deref(), Ok(input));
        assert_eq!(skill_id_for(&format!("{input}.md")), input);
    }
    let Ok(normalized) = normalize_id_input(input) else {
        return;
    };
    assert!(normalized.len() <= input.len() + "index".len());
    if validate_skill_id(&normalized).is_ok() {
        assert_cannot_escape(&normalized);
        assert_eq!(
            normalize_id_input(&normalized).as_deref(),
            Ok(normalized.as_str()),
            "normalizing an accepted id is idempotent"
        );
    }
}

fn check_names(input: &str) {
    if validate_name(input).is_ok() {
        assert_cannot_escape(input);
        assert!(!input.contains('/') && input.len() <= MAX_SEGMENT_BYTES);
        // A name is a one-segment id.
        assert!(validate_skill_id(input).is_ok());
    }
    if validate_worker_name(input).is_ok() {
        assert_cannot_escape(input);
        assert!(!input.contains('/') && !input.contains('.'));
        assert!(!input.starts_with('-') && !input.starts_with('_'));
    }
}

fn check_levenshtein(a: &str, b: &str) {
    let distance = levenshtein(a, b);
    let (len_a, len_b) = (a.chars().count(), b.chars().count());
    assert_eq!(distance, levenshtein(b, a), "symmetric");
    assert!(distance <= len_a.max(len_b));
    assert!(distance >= len_a.abs_diff(len_b));
    assert_eq!(distance == 0, a == b);
    assert_eq!(levenshtein(a, a), 0);
    assert_eq!(
        Pattern::new(a).distance_under(b, usize::MAX),
        Some(distance),
        "bit-parallel {a:?} {b:?}"
    );
    for limit in [distance, distance + 1] {
        assert_eq!(
            Pattern::new(a).distance_under(b, limit),
            (distance < limit).then_some(distance),
            "cut short at {limit}: {a:?} {b:?}"
        );
    }
    assert!(
        Shape::of(a).distance_at_least(&Shape::of(b)) <= distance,
        "bound {a:?} {b:?}"
    );
    if len_a <= MAX_REFERENCE_CHARS && len_b <= MAX_REFERENCE_CHARS {
        assert_eq!(distance, reference_distance(a, b), "{a:?} {b:?}");
    }
}

/// The textbook full-table edit distance over chars.
fn reference_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut table = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in table.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in table[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let substitution = table[i - 1][j - 1] + usize::from(a[i - 1] != b[j - 1]);
            table[i][j] = substitution
                .min(table[i - 1][j] + 1)
                .min(table[i][j - 1] + 1);
        }
    }
    table[a.len()][b.len()]
}
