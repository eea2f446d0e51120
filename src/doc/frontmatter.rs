//! Splitting a file into its frontmatter block and body, and reading the block's YAML.
use super::Fields;

/// Where a file's frontmatter YAML and body are.
pub struct Split<'a> {
    pub yaml: Option<&'a str>,
    pub body_offset: usize,
}

pub fn split(content: &str) -> Split<'_> {
    let _ = content;
    todo!()
}

pub fn parse_fields(yaml: &str) -> Result<Fields, String> {
    let _ = yaml;
    todo!()
}
