//! Title and first paragraph of a markdown body.

pub fn title_and_paragraph(body: &str) -> (Option<String>, String) {
    let _ = body;
    todo!()
}
