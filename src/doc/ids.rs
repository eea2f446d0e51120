//! Skill ids, names and their validation.
