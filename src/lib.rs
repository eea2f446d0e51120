//! iii-directory: skills, system prompts and agent profiles served from folders on disk through
//! an embedded index.

pub mod bundled;
pub mod config;
pub mod doc;
