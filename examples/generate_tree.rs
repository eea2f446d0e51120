//! Writes a deterministic skills tree for benchmarks and manual testing.
//!
//! ```sh
//! cargo run --release --example generate_tree -- /tmp/tree10k 10000 ../shared/corpus
//! III_COMPOSE_DIR=/tmp/tree10k cargo run --release -- reindex
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use test_support::generate::{TreeSpec, write_tree};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(skills)) = (args.first(), args.get(1).and_then(|n| n.parse().ok())) else {
        eprintln!(
            "usage: generate_tree DIR SKILLS [CORPUS_DIR] [SEED]\n  writes SKILLS skills (plus local overrides, agents skills, system prompts and agent profiles) under DIR"
        );
        return ExitCode::FAILURE;
    };
    let spec = TreeSpec {
        skills,
        corpus: args.get(2).map(PathBuf::from),
        seed: args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1),
    };
    match write_tree(&PathBuf::from(dir), &spec) {
        Ok(stats) => {
            println!("{stats:?}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
