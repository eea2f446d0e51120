//! Across families.

use super::*;

#[test]
fn every_write_is_read_at_once_and_reads_publish_nothing() {
    let env = Env::new(standard);
    for i in 0..20 {
        let id = format!("burst/s{i}");
        env.ok(
            WriteFunction::SkillsCreate,
            json!({"id": id, "content": format!("# Title {i}\n\nx\n")}),
            Family::Skills,
            skill_event("create", &id),
        );
        assert_eq!(
            env.read(ReadFunction::SkillsGet, json!({"id": id}))["title"],
            format!("Title {i}")
        );
        env.ok(
            WriteFunction::SkillsUpdate,
            json!({"id": id, "content": format!("# Retitled {i}\n\nx\n")}),
            Family::Skills,
            skill_event("update", &id),
        );
        assert_eq!(
            env.read(ReadFunction::SkillsGet, json!({"id": id}))["title"],
            format!("Retitled {i}")
        );
        let rows = env.read(
            ReadFunction::SkillsList,
            json!({"search": format!("retitled {i}")}),
        );
        assert!(names(&rows, "skills", "id").contains(&id));
    }
    let before = env.event_count();
    for f in ReadFunction::ALL {
        let _ = env
            .directory
            .read(f, &json!({"id": "burst/s1", "name": "iii-minimal"}), None);
    }
    env.directory.reconcile().unwrap();
    assert_eq!(
        env.event_count(),
        before,
        "reads and a no-op reconcile publish nothing"
    );
    assert_eq!(temp_files(env.tree.base()), Vec::<String>::new());
}

#[test]
fn write_function_ids_round_trip() {
    for f in WriteFunction::ALL {
        assert_eq!(WriteFunction::from_id(f.id()), Some(f));
    }
    assert_eq!(WriteFunction::from_id("directory::skills::get"), None);
}
