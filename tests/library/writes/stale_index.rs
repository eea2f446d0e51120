//! Writes against an index that has not caught up with the disk yet (no watcher running here: the same window exists for the ~50 ms before a watcher burst is reconciled)..

use super::*;

#[test]
fn skills_update_after_an_unreconciled_external_delete_does_not_resurrect_the_file() {
    let env = Env::new(standard);
    let path = env.path("skills/mailer/send.md");
    fs::remove_file(&path).unwrap();
    let result = env.directory.write(
        WriteFunction::SkillsUpdate,
        &json!({"id": "mailer/send", "content": BODY}),
        None,
    );
    assert!(
        !path.exists(),
        "update re-created a file deleted on disk (answered {result:?})"
    );
    assert_eq!(result.unwrap_err().code(), Some(Code::SkillNotFound));
}

#[test]
fn skills_delete_after_an_unreconciled_external_delete_is_d110() {
    let env = Env::new(standard);
    fs::remove_file(env.path("skills/mailer/send.md")).unwrap();
    let e = env
        .directory
        .write(
            WriteFunction::SkillsDelete,
            &json!({"id": "mailer/send"}),
            None,
        )
        .unwrap_err();
    assert_eq!(e.code(), Some(Code::SkillNotFound), "{e}");
}

#[test]
fn skills_create_over_an_unreconciled_external_file_is_d114() {
    let env = Env::new(standard);
    env.tree.write("skills/mailer/late.md", "# Late\n\nx\n");
    let (code, message) = env.coded(
        WriteFunction::SkillsCreate,
        json!({"id": "mailer/late", "content": BODY}),
    );
    assert_eq!(code, Some("D114"));
    assert!(message.contains("a file already exists at"), "{message}");
    assert_eq!(text(&env.path("skills/mailer/late.md")), "# Late\n\nx\n");
}
