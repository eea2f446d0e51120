//! Finding the sentence-embedding model (all-MiniLM-L6-v2's `model.safetensors`,
//! `tokenizer.json`, `config.json`). A fresh clone does not have it: a test that needs it then
//! skips, naming the variable that enables it, and passes. CI fetches the model
//! (`tools/search-model`) and sets the variable, so there a folder without the files fails.

use std::path::PathBuf;

/// Names the folder holding the model's three files.
pub const MODEL_ENV: &str = "III_DIRECTORY_SEARCH_MODEL";

/// The model folder, absolute (a worker the test starts runs in a folder of its own), or `None`
/// (after saying so in one line) when [`MODEL_ENV`] is unset.
pub fn model_dir() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os(MODEL_ENV).map(PathBuf::from) else {
        eprintln!(
            "skipped: needs the embedding model (set {MODEL_ENV}=<folder>; tools/search-model \
             fetches it)"
        );
        return None;
    };
    for name in ["model.safetensors", "tokenizer.json", "config.json"] {
        assert!(
            dir.join(name).is_file(),
            "{MODEL_ENV} is set, but {} is missing",
            dir.join(name).display()
        );
    }
    Some(std::path::absolute(&dir).expect("the model folder as an absolute path"))
}
