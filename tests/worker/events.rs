//! Change events.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_fires_one_change_event_to_the_subscribers_of_its_family() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;

    let skill = "# Doc\n\nText.\n";
    let prompt = "---\ndescription: A prompt.\n---\nBe brief.\n";
    let agent = "---\nname: Captain\n---\nYou steer.\n";
    // (function, request, payload delivered, metadata of the family's subscription)
    let writes = [
        (
            "directory::skills::create",
            json!({"id": "mailer/doc", "content": skill}),
            json!({"op": "create", "namespace": "mailer", "id": "mailer/doc"}),
            1,
        ),
        (
            "directory::skills::update",
            json!({"id": "mailer/doc", "content": skill}),
            json!({"op": "update", "namespace": "mailer", "id": "mailer/doc"}),
            1,
        ),
        (
            "directory::skills::delete",
            json!({"id": "mailer/doc"}),
            json!({"op": "delete", "namespace": "mailer", "id": "mailer/doc"}),
            1,
        ),
        (
            "directory::system-prompts::create",
            json!({"name": "brief", "content": prompt}),
            json!({"op": "create", "name": "brief"}),
            2,
        ),
        (
            "directory::system-prompts::update",
            json!({"name": "brief", "content": prompt}),
            json!({"op": "update", "name": "brief"}),
            2,
        ),
        (
            "directory::system-prompts::delete",
            json!({"name": "brief"}),
            json!({"op": "delete", "name": "brief"}),
            2,
        ),
        (
            "directory::agents::create",
            json!({"id": "captain", "content": agent}),
            json!({"op": "create", "name": "captain"}),
            3,
        ),
        (
            "directory::agents::update",
            json!({"id": "captain", "content": agent}),
            json!({"op": "update", "name": "captain"}),
            3,
        ),
        (
            "directory::agents::delete",
            json!({"id": "captain"}),
            json!({"op": "delete", "name": "captain"}),
            3,
        ),
    ];
    for (n, (function, request, _, _)) in writes.iter().enumerate() {
        h.call(function, request.clone()).await;
        // One at a time, so the order of the fires is the order of the writes.
        h.wait_fires(n + 1).await;
    }
    tokio::time::sleep(SETTLE).await;

    let fires = h.fires();
    let seen: Vec<(Value, Option<Value>)> = fires
        .iter()
        .map(|f| (f.data.clone(), f.metadata.clone()))
        .collect();
    let expected: Vec<(Value, Option<Value>)> = writes
        .iter()
        .map(|(_, _, payload, m)| (payload.clone(), Some(json!({ "m": m }))))
        .collect();
    assert_eq!(
        seen, expected,
        "exactly one fire per write, no external echo"
    );
    for fire in &fires {
        assert_eq!(fire.action, Some(json!({"type": "void"})), "{fire:?}");
        assert_eq!(fire.namespace, None, "{fire:?}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_go_to_the_subscribers_namespace() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.engine
        .send_to_worker(json!({
            "type": "registertrigger", "id": "sub-ns", "trigger_type": SKILLS_ON_CHANGE,
            "function_id": "tenant::on-change", "config": {}, "metadata": {"who": "tenant"},
            "namespace": "tenant",
        }))
        .expect("send the binding");
    eventually("the ack of sub-ns", || {
        h.engine
            .registration_results()
            .iter()
            .any(|r| r.id == "sub-ns" && r.error.is_none())
    })
    .await;
    h.call(
        "directory::skills::create",
        json!({"id": "tenant-doc", "content": "# T\n\nText.\n"}),
    )
    .await;
    let fire = h.ok(
        "a fire to the tenant's function",
        h.engine
            .wait_fire(|f| f.function_id == "tenant::on-change", WAIT)
            .await,
    );
    assert_eq!(
        fire.data,
        json!({"op": "create", "namespace": "tenant-doc", "id": "tenant-doc"})
    );
    assert_eq!(fire.namespace.as_deref(), Some("tenant"));
    assert_eq!(fire.metadata, Some(json!({"who": "tenant"})));
    assert_eq!(fire.action, Some(json!({"type": "void"})));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_edit_fires_one_external_event() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    edit_externally(
        h.tree.path(),
        "skills/outside.md",
        "# Outside\n\nWritten by hand.\n",
    );
    let fire = h.ok(
        "an external fire",
        h.engine
            .wait_fire(|f| f.function_id == SUBSCRIBER, WAIT)
            .await,
    );
    assert_eq!(fire.data, json!({"op": "external"}));
    assert_eq!(
        fire.metadata,
        Some(json!({"m": 1})),
        "the skills subscription"
    );
    assert_eq!(fire.action, Some(json!({"type": "void"})));
    tokio::time::sleep(SETTLE).await;
    assert_eq!(h.fires().len(), 1, "one burst, one event: {:?}", h.fires());
    assert!(h.skill_ids().await.contains(&"outside".to_string()));
    h.stop().await;
}

/// `agents_skills_folder` inside `agents_folder`: the agents folder is watched without
/// recursion, so it does not cover the agents skills root, which must be watched itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_skills_root_inside_the_agents_folder_is_watched() {
    let seed = "agents_skills_folder: agents/skills\n";
    let h = Harness::start_with(
        Installed::Mailer,
        Some(seed),
        &[("agents/skills/tool/SKILL.md", "# Tool\n\nA tool skill.\n")],
        None,
    )
    .await;
    assert!(h.skill_ids().await.contains(&"tool".to_string()));
    h.subscribe_all().await;
    edit_externally(
        h.tree.path(),
        "agents/skills/other/SKILL.md",
        "# Other\n\nAnother tool skill.\n",
    );
    let fire = h
        .engine
        .wait_fire(|f| f.function_id == SUBSCRIBER, Duration::from_secs(3))
        .await;
    let fire = match fire {
        Ok(fire) => fire,
        Err(e) => {
            let status = h.call("directory::index::status", json!({})).await;
            panic!(
                "no external event for a new agents skill; watcher: {}\n{e}",
                status["watcher"]
            );
        }
    };
    assert_eq!(fire.data, json!({"op": "external"}));
    assert_eq!(fire.metadata, Some(json!({"m": 1})));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_unsubscribe_nothing_more_fires() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.subscribe_all().await;
    h.call(
        "directory::skills::create",
        json!({"id": "before", "content": "# B\n\nText.\n"}),
    )
    .await;
    assert_eq!(h.wait_fires(1).await.len(), 1);

    for (n, trigger_type) in TRIGGER_TYPES.iter().enumerate() {
        h.engine
            .unsubscribe(&format!("sub-{n}"), trigger_type)
            .expect("unsubscribe");
    }
    // No ack comes for an unbinding. The worker handles frames in order, so once a later
    // call is answered the unbindings have been seen; a short pause covers the rest.
    h.call("directory::index::status", json!({})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.call(
        "directory::skills::create",
        json!({"id": "after", "content": "# A\n\nText.\n"}),
    )
    .await;
    h.call(
        "directory::system-prompts::create",
        json!({"name": "after", "content": "---\ndescription: D.\n---\nBody.\n"}),
    )
    .await;
    h.call(
        "directory::agents::create",
        json!({"id": "after", "content": "---\nname: After\n---\nBody.\n"}),
    )
    .await;
    edit_externally(h.tree.path(), "skills/outside.md", "# Outside\n\nText.\n");
    edit_externally(
        h.tree.path(),
        "agents/outside.md",
        "---\nname: O\n---\nBody.\n",
    );
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        h.fires().len(),
        1,
        "fires after unsubscribe: {:?}",
        h.fires()
    );
    // The edits were seen (so silence is the unsubscribe, not a deaf watcher).
    assert!(h.skill_ids().await.contains(&"outside".to_string()));
    h.stop().await;
}
