mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use iii_directory::events::ChangeEvent;
use iii_directory::watch::{WatchOptions, Watcher};
use iii_directory::{ReadFunction, WriteFunction};
use serde_json::json;

#[test]
fn writes_emit_one_event_and_external_edits_one_per_family() {
    let tree = common::Tree::new();
    tree.write("skills/mailer/index.md", "# Mailer\n\nSend mail.\n");
    let directory = Arc::new(tree.open());
    let events: Arc<Mutex<Vec<ChangeEvent>>> = Arc::default();
    let sink = events.clone();
    directory.subscribe(Arc::new(move |e: &ChangeEvent| {
        sink.lock().unwrap().push(e.clone())
    }));
    let watcher = Watcher::start(directory.clone(), WatchOptions::default());

    let created = directory
        .write(
            WriteFunction::SkillsCreate,
            &json!({"id": "solo", "content": "# Solo\n\nAlone.\n"}),
            None,
        )
        .unwrap();
    assert_eq!(created["title"], "Solo");
    assert!(common::skill_ids(&directory).contains(&"solo".to_string()));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        events.lock().unwrap().len(),
        1,
        "{:?}",
        events.lock().unwrap()
    );

    tree.write("skills/mailer/extra.md", "# Extra\n\nMore.\n");
    tree.write("skills/mailer/extra2.md", "# Extra 2\n\nMore.\n");
    tree.write("agents/bot.md", "---\nname: Bot\n---\nHi.\n");
    std::thread::sleep(Duration::from_millis(400));
    let got: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.payload.clone())
        .collect();
    assert_eq!(
        got,
        vec![
            json!({"op":"create","namespace":"solo","id":"solo"}),
            json!({"op":"external"}),
            json!({"op":"external"})
        ]
    );
    let ids = common::skill_ids(&directory);
    assert!(ids.contains(&"mailer/extra".to_string()), "{ids:?}");
    let agents = common::call(&directory, ReadFunction::AgentsList, json!({}));
    assert!(agents.to_string().contains("\"bot\""));
    watcher.stop();
}
