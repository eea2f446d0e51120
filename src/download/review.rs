//! What a bundle brings that a person reviewing it wants named before trusting it (issue 29):
//! executable files, scripts, hidden names the source held, and files of at least
//! `download_large_file_bytes`. Every download's response carries it as `review`, and with
//! `download_allow_executables: false` a bundle holding an executable is refused whole
//! (`D333`), before anything is written.
//!
//! A file is executable when its source gave it an executable bit (a repository's mode
//! `100755`), when it starts with `#!`, or when it starts with the magic number of a program
//! (ELF, Mach-O, a Windows `MZ` executable). A script is a file whose extension names a
//! language an interpreter runs. Paths are as the response's `skills_written` gives them
//! (relative to the namespace), and `agents/<id>.md` for agent profiles.

use serde::Serialize;
use serde_json::Value;

use crate::code::Code;
use crate::error::{Error, Result};

use super::bundle::{Bundle, Dest};

/// Extensions of files an interpreter runs.
const SCRIPT_EXTENSIONS: [&str; 16] = [
    "sh", "bash", "zsh", "fish", "ksh", "py", "rb", "pl", "php", "js", "mjs", "cjs", "ts", "ps1",
    "bat", "cmd",
];

/// Leading bytes of programs: ELF, Mach-O (both byte orders, 32 and 64 bits, fat), `MZ`.
const PROGRAM_MAGIC: [&[u8]; 7] = [
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"MZ",
];

/// The `review` of a download's response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Review {
    pub executables: Vec<String>,
    pub scripts: Vec<String>,
    /// Entries of the source skipped because their name starts with `.` (never landed).
    pub hidden: Vec<String>,
    /// Files of at least `download_large_file_bytes`.
    pub large: Vec<String>,
}

impl Review {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Whether `bytes` read as a program of their own.
fn runs(bytes: &[u8]) -> bool {
    bytes.starts_with(b"#!") || PROGRAM_MAGIC.iter().any(|magic| bytes.starts_with(magic))
}

fn is_script(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && SCRIPT_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
    })
}

/// The review of `bundle` as fetched (its files still under `<namespace>/`).
pub fn review(bundle: &Bundle, large_bytes: u64) -> Review {
    let prefix = format!("{}/", bundle.source.namespace());
    let mut review = Review {
        hidden: bundle.hidden.clone(),
        ..Review::default()
    };
    for file in &bundle.files {
        let shown = match file.dest {
            Dest::Agents => format!("agents/{}", file.rel),
            _ => file
                .rel
                .strip_prefix(&prefix)
                .unwrap_or(&file.rel)
                .to_string(),
        };
        if file.executable || runs(&file.bytes) {
            review.executables.push(shown.clone());
        }
        if is_script(&file.rel) {
            review.scripts.push(shown.clone());
        }
        if file.bytes.len() as u64 >= large_bytes {
            review.large.push(shown);
        }
    }
    review
}

/// Refuses a bundle with executables when `download_allow_executables` is off.
pub fn allow(review: &Review, allow_executables: bool) -> Result<()> {
    if allow_executables || review.executables.is_empty() {
        return Ok(());
    }
    let mut named: Vec<String> = review
        .executables
        .iter()
        .take(5)
        .map(|p| format!("{p:?}"))
        .collect();
    if review.executables.len() > 5 {
        named.push(format!("and {} more", review.executables.len() - 5));
    }
    Err(Error::coded(
        Code::BundleExecutableRefused,
        format!(
            "the bundle holds executable files ({}) and download_allow_executables is false; the bundle was refused and nothing was written. Read those files, and if you trust them set download_allow_executables: true and download again.",
            named.join(", ")
        ),
        &[],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::download::bundle::{File, Written};
    use crate::download::lock::Resolved;
    use crate::download::source::Source;
    use crate::registry::Release;

    fn bundle(files: &[(Dest, &str, &[u8])], bits: &[&str]) -> Bundle {
        Bundle {
            source: Source::Registry {
                worker: "w".into(),
                release: Release::latest(),
            },
            files: files
                .iter()
                .map(|(dest, rel, bytes)| File {
                    dest: *dest,
                    rel: rel.to_string(),
                    bytes: bytes.to_vec(),
                    executable: bits.contains(rel),
                })
                .collect(),
            written: Written::default(),
            resolved: Resolved::default(),
            hidden: vec![".env".into()],
        }
    }

    #[test]
    fn executables_scripts_hidden_and_large_files_are_named() {
        let b = bundle(
            &[
                (Dest::Skills, "w/SKILL.md", b"# W\n"),
                (Dest::Skills, "w/scripts/send.sh", b"#!/bin/sh\necho hi\n"),
                (Dest::Skills, "w/tool.py", b"print(1)\n"),
                (Dest::Skills, "w/bin/tool", b"\x7fELF\x02\x01"),
                (Dest::Skills, "w/run", b"plain"),
                (Dest::Skills, "w/assets/big.bin", &[0u8; 64]),
                (Dest::Agents, "captain.md", b"---\nname: c\n---\n"),
            ],
            &["w/run"],
        );
        let review = review(&b, 64);
        assert_eq!(review.executables, ["scripts/send.sh", "bin/tool", "run"]);
        assert_eq!(review.scripts, ["scripts/send.sh", "tool.py"]);
        assert_eq!(review.hidden, [".env"]);
        assert_eq!(review.large, ["assets/big.bin"]);
        allow(&review, true).expect("allowed");
        let err = allow(&review, false).expect_err("refused");
        assert_eq!(err.code(), Some(Code::BundleExecutableRefused));
        assert!(err.to_string().contains("\"scripts/send.sh\""), "{err}");
    }
}
