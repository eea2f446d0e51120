//! Agent profiles and `extends` resolution. The input is a small catalog: documents separated by
//! NUL bytes, each one `<id>\n<profile file>`. Every document is parsed and validated as a profile,
//! and every valid profile's chain is resolved; resolution must end with a chain that follows
//! `extends` without repeating an id and within the hop cap, or with the D415 text.

#![no_main]

use std::collections::BTreeMap;

use iii_directory::doc::{ParsedDoc, decode};
use iii_directory::testing::Profile;
use iii_directory::testing::{MAX_EXTENDS_HOPS, Reading, extends_chain, profile, quoted};
use libfuzzer_sys::fuzz_target;

/// More profiles than an `extends` chain can visit, few enough to keep each run fast.
const MAX_PROFILES: usize = 32;

fuzz_target!(|bytes: &[u8]| {
    let mut catalog: BTreeMap<&str, Profile> = BTreeMap::new();
    for document in bytes.split(|b| *b == 0).take(MAX_PROFILES) {
        let Ok(text) = decode(document) else {
            continue;
        };
        let (id, file) = text.split_once('\n').unwrap_or((text, ""));
        let Ok(profile) = profile(&ParsedDoc::parse(file), Reading::Scan) else {
            continue;
        };
        check_profile(&profile);
        // Like file ids, the first one found wins.
        catalog.entry(id).or_insert(profile);
    }
    for (id, profile) in &catalog {
        check_chain(&catalog, id, profile);
    }
});

fn check_profile(profile: &Profile) {
    let trimmed = |value: &str| !value.is_empty() && value.trim() == value;
    assert!(trimmed(&profile.name));
    assert_eq!(profile.description.trim(), profile.description);
    for value in [&profile.extends, &profile.model, &profile.logo] {
        assert!(value.as_deref().is_none_or(trimmed));
    }
}

fn check_chain(catalog: &BTreeMap<&str, Profile>, id: &str, profile: &Profile) {
    let resolved = extends_chain(
        id,
        profile,
        |profile| profile.extends.as_deref(),
        |parent| catalog.get(parent),
    );
    match resolved {
        Ok(chain) => {
            assert!(std::ptr::eq(chain[0], profile));
            assert!(
                chain.len() <= MAX_EXTENDS_HOPS + 1,
                "{} profiles",
                chain.len()
            );
            for pair in chain.windows(2) {
                let parent = pair[0].extends.as_deref().expect("a profile with a parent");
                assert!(std::ptr::eq(pair[1], &catalog[parent]));
            }
            assert_eq!(chain.last().and_then(|last| last.extends.as_ref()), None);
            // No profile twice: the chain would be a loop.
            for (i, a) in chain.iter().enumerate() {
                assert!(chain[i + 1..].iter().all(|b| !std::ptr::eq(*a, *b)));
            }
        }
        Err(error) => {
            let error = error.to_string();
            let head = format!("D415 invalid_input: agent profile {} ", quoted(id));
            assert!(error.starts_with(&head), "{error}");
            assert!(
                [
                    "extends unknown",
                    "has an extends loop",
                    "extends chain is deeper"
                ]
                .iter()
                .any(|problem| error[head.len()..].starts_with(problem)),
                "{error}"
            );
        }
    }
}
