//! Each function and its result.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_answer_with_their_documented_shapes() {
    let h = Harness::start(Installed::Mailer, None).await;
    let row_keys = set(&[
        "id",
        "title",
        "type",
        "function_id",
        "disable_model_invocation",
        "description",
        "bytes",
        "modified_at",
    ]);

    // skills::list: rows sorted by on-disk id (`mailer/index` shows as `mailer`).
    let list = h.call("directory::skills::list", json!({})).await;
    assert_eq!(keys(&list), set(&["skills"]));
    assert_eq!(own(ids(&list)), ["hello", "mailer/guide", "mailer"]);
    let rows = list["skills"].as_array().expect("rows");
    for row in rows {
        assert_eq!(keys(row), row_keys, "{row}");
    }
    let guide = rows
        .iter()
        .find(|r| r["id"] == "mailer/guide")
        .expect("mailer/guide");
    assert_timestamp(&guide["modified_at"], "mailer/guide modified_at");
    let mut without_time = guide.clone();
    without_time["modified_at"] = json!("");
    assert_eq!(
        without_time,
        json!({
            "id": "mailer/guide", "title": "Mailer guide", "type": null, "function_id": null,
            "disable_model_invocation": false, "description": "How to send mail.",
            "bytes": MAILER_GUIDE.len(), "modified_at": "",
        })
    );

    // skills::get, without and with raw.
    let got = h
        .call("directory::skills::get", json!({"id": "mailer/guide"}))
        .await;
    assert_timestamp(&got["modified_at"], "get modified_at");
    let mut expected = json!({
        "id": "mailer/guide", "title": "Mailer guide", "type": null, "function_id": null,
        "disable_model_invocation": false,
        "path": h.path("skills/mailer/guide.md").display().to_string(),
        "body": "# Guide\n\nSend mail.\n", "modified_at": got["modified_at"],
    });
    assert_eq!(got, expected);
    let raw = h
        .call(
            "directory::skills::get",
            json!({"id": "iii://mailer/guide", "raw": true}),
        )
        .await;
    expected["raw"] = json!(MAILER_GUIDE);
    assert_eq!(raw, expected);
    // The engine adds `_caller_worker_id` to calls from other workers: it is ignored.
    let from_a_worker = h
        .call(
            "directory::skills::get",
            json!({"id": "mailer/guide", "raw": true, "_caller_worker_id": "w-1"}),
        )
        .await;
    assert_eq!(from_a_worker, expected);

    // skills::index: one entry per worker overview.
    let index = h.call("directory::skills::index", json!({})).await;
    assert_eq!(keys(&index), set(&["body", "workers_count"]));
    let body = index["body"].as_str().expect("body");
    assert!(body.starts_with("# Skills index\n"), "{body}");
    assert!(
        body.contains("\n## Mailer\n\nThe mailer worker.\n"),
        "{body}"
    );
    assert_eq!(
        index["workers_count"],
        json!(body.matches("\n## ").count()),
        "{body}"
    );

    // system prompts: the bundled iii-runtime.
    let prompts = h.call("directory::system-prompts::list", json!({})).await;
    let runtime = prompts["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .find(|p| p["name"] == "iii-runtime")
        .expect("iii-runtime listed")
        .clone();
    assert_eq!(runtime["builtin"], true);
    assert_eq!(runtime["modified_at"], "");
    let prompt = h
        .call(
            "directory::system-prompts::get",
            json!({"name": "iii-runtime"}),
        )
        .await;
    assert_eq!(
        keys(&prompt),
        set(&["name", "description", "body", "modified_at", "builtin"])
    );
    assert_eq!(prompt["name"], "iii-runtime");
    assert_eq!(prompt["description"], runtime["description"]);
    assert!(prompt["body"].as_str().is_some_and(|b| b.len() > 100));
    assert_eq!(prompt["builtin"], true);

    // agents: the bundled iii.
    let agents = h.call("directory::agents::list", json!({})).await;
    let iii = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["id"] == "iii")
        .expect("iii listed")
        .clone();
    assert_eq!(
        (&iii["name"], &iii["builtin"]),
        (&json!("iii"), &json!(true))
    );
    let agent = h.call("directory::agents::get", json!({"id": "iii"})).await;
    for key in [
        "id",
        "name",
        "description",
        "system_prompt",
        "skills",
        "unknown_skills",
        "modified_at",
    ] {
        assert!(agent.get(key).is_some(), "agents::get lacks {key}: {agent}");
    }
    assert_eq!(agent["id"], "iii");
    assert_eq!(agent["description"], iii["description"]);
    assert!(
        agent["system_prompt"]
            .as_str()
            .is_some_and(|p| p.len() > 100)
    );
    assert!(agent["skills"].is_array() && agent["unknown_skills"].is_array());
    assert_eq!(agent["modified_at"], "");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_each_family_answer_and_land_on_disk() {
    let h = Harness::start(Installed::Mailer, None).await;

    // Skills.
    let v1 = "---\ntitle: New doc\n---\nFirst.\n";
    let v2 = "---\ntitle: New doc, again\ntype: guide\n---\nSecond.\n";
    let created = h
        .call(
            "directory::skills::create",
            json!({"id": "mailer/new-doc", "content": v1}),
        )
        .await;
    assert_timestamp(&created["modified_at"], "create modified_at");
    assert_eq!(
        created,
        json!({"id": "mailer/new-doc", "title": "New doc", "type": null, "function_id": null,
               "bytes": v1.len(), "modified_at": created["modified_at"]})
    );
    let file = h.path("skills/mailer/new-doc.md");
    assert_eq!(fs::read_to_string(&file).expect("created file"), v1);
    let updated = h
        .call(
            "directory::skills::update",
            json!({"id": "mailer/new-doc", "content": v2}),
        )
        .await;
    assert_eq!(
        updated,
        json!({"id": "mailer/new-doc", "title": "New doc, again", "type": "guide",
               "function_id": null, "bytes": v2.len(), "modified_at": updated["modified_at"]})
    );
    assert_eq!(fs::read_to_string(&file).expect("updated file"), v2);
    let deleted = h
        .call("directory::skills::delete", json!({"id": "mailer/new-doc"}))
        .await;
    assert_eq!(deleted, json!({"id": "mailer/new-doc"}));
    assert!(!file.exists());

    // System prompts.
    let p1 = "---\ndescription: Talk like a pirate.\n---\nArr.\n";
    let p2 = "---\ndescription: Talk like a polite pirate.\n---\nArr, please.\n";
    let created = h
        .call(
            "directory::system-prompts::create",
            json!({"name": "pirate", "content": p1}),
        )
        .await;
    assert_timestamp(&created["modified_at"], "prompt create modified_at");
    assert_eq!(
        created,
        json!({"name": "pirate", "description": "Talk like a pirate.", "bytes": p1.len(),
               "modified_at": created["modified_at"]})
    );
    let file = h.path("skills/system-prompts/pirate.md");
    assert_eq!(fs::read_to_string(&file).expect("prompt file"), p1);
    let updated = h
        .call(
            "directory::system-prompts::update",
            json!({"name": "pirate", "content": p2}),
        )
        .await;
    assert_eq!(
        updated,
        json!({"name": "pirate", "description": "Talk like a polite pirate.", "bytes": p2.len(),
               "modified_at": updated["modified_at"]})
    );
    assert_eq!(fs::read_to_string(&file).expect("prompt file"), p2);
    let deleted = h
        .call(
            "directory::system-prompts::delete",
            json!({"name": "pirate"}),
        )
        .await;
    assert_eq!(deleted, json!({"name": "pirate"}));
    assert!(!file.exists());

    // Agent profiles.
    let a1 = "---\nname: Captain\ndescription: Steers.\n---\nYou steer.\n";
    let a2 = "---\nname: Captain\ndescription: Steers well.\nlogo: \"⚓\"\n---\nYou steer well.\n";
    let created = h
        .call(
            "directory::agents::create",
            json!({"id": "captain", "content": a1}),
        )
        .await;
    assert_timestamp(&created["modified_at"], "agent create modified_at");
    assert_eq!(
        created,
        json!({"id": "captain", "name": "Captain", "description": "Steers.", "logo": null,
               "bytes": a1.len(), "modified_at": created["modified_at"]})
    );
    let file = h.path("agents/captain.md");
    assert_eq!(fs::read_to_string(&file).expect("agent file"), a1);
    let updated = h
        .call(
            "directory::agents::update",
            json!({"id": "captain", "content": a2}),
        )
        .await;
    assert_eq!(
        updated,
        json!({"id": "captain", "name": "Captain", "description": "Steers well.", "logo": "⚓",
               "bytes": a2.len(), "modified_at": updated["modified_at"]})
    );
    assert_eq!(fs::read_to_string(&file).expect("agent file"), a2);
    let deleted = h
        .call("directory::agents::delete", json!({"id": "captain"}))
        .await;
    assert_eq!(deleted, json!({"id": "captain"}));
    assert!(!file.exists());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_status_reports_revision_counts_skips_and_the_watcher() {
    let h = Harness::start(Installed::Mailer, None).await;
    let status = h.call("directory::index::status", json!({})).await;
    assert_eq!(
        keys(&status),
        set(&[
            "revision",
            "index_path",
            "files",
            "counts",
            "skipped",
            "skipped_total",
            "search",
            "last_reconcile",
            "index_error",
            "watcher",
            "connection",
            "configuration"
        ])
    );
    // A healthy index has no error, and lists every skipped file it counts.
    assert_eq!(status["index_error"], Value::Null, "{status}");
    assert_eq!(
        status["skipped_total"].as_u64(),
        status["skipped"].as_array().map(|s| s.len() as u64),
        "{status}"
    );
    assert!(
        status["revision"].as_u64().is_some_and(|r| r > 0),
        "{status}"
    );
    assert_eq!(
        status["index_path"],
        h.path("data/iii-directory/index.redb")
            .display()
            .to_string()
    );
    // The five files of the tree (the skipped one included).
    assert_eq!(status["files"], 5, "{status}");
    // Skills rows: the fixture's four (ghost too: the filter applies at read time) and the
    // bundled `directory` docs; prompts and agents: the bundled two each.
    let bundled_docs = bundled_skill_count(&h).await;
    assert_eq!(
        status["counts"],
        json!({"skills": 4 + bundled_docs, "system_prompts": 2, "agents": 2})
    );
    let skipped = status["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 1, "{status}");
    assert_eq!(skipped[0]["root"], "skills_folder");
    assert_eq!(skipped[0]["path"], h.path(BAD_NAME).display().to_string());
    assert!(
        skipped[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("invalid id \"Bad Name\"")),
        "{status}"
    );
    assert_eq!(keys(&status["last_reconcile"]), set(&["at", "duration_ms"]));
    assert_timestamp(&status["last_reconcile"]["at"], "last_reconcile.at");
    let watcher = &status["watcher"];
    assert_eq!(watcher["degraded"], false, "{status}");
    assert_eq!(watcher["problems"], json!([]));
    let watched: BTreeSet<String> = watcher["watched"]
        .as_array()
        .expect("watched")
        .iter()
        .map(|w| w.as_str().expect("folder").to_string())
        .collect();
    // `skills/iii` (local_skills_folder) is created and watched (inside the watch of `skills`);
    // `.agents/skills` does not exist, so it is not created, and it is waited for.
    let expected: BTreeSet<String> = ["skills", "skills/iii", "agents"]
        .iter()
        .map(|rel| h.path(rel).display().to_string())
        .collect();
    assert_eq!(watched, expected, "{status}");
    assert!(h.path("skills/iii").is_dir());
    assert!(!h.path(".agents/skills").exists());
    let states: Vec<(String, String, bool)> = watcher["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| {
            (
                r["root"].as_str().expect("root").to_string(),
                r["state"].as_str().expect("state").to_string(),
                r["fresh_reads"] == json!(true),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("skills_folder", "watched"),
            ("local_skills_folder", "watched"),
            ("agents_folder", "watched"),
            ("agents_skills_folder", "absent"),
        ]
        .map(|(root, state)| (root.to_string(), state.to_string(), true))
    );

    // The engine connection: the first one, set up (the setup may still be finishing).
    let deadline = Instant::now() + WAIT;
    let connection = loop {
        let status = h.call("directory::index::status", json!({})).await;
        if status["connection"]["setup"]["state"] == "done" || Instant::now() >= deadline {
            break status["connection"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        keys(&connection),
        set(&[
            "state",
            "url",
            "connected_since",
            "connections",
            "reconnections",
            "last_error",
            "detection",
            "setup"
        ])
    );
    assert_eq!(connection["state"], "connected");
    assert_eq!(connection["url"], h.engine.url());
    assert_timestamp(&connection["connected_since"], "connected_since");
    assert_eq!(connection["connections"], 1);
    assert_eq!(connection["reconnections"], 0);
    assert_eq!(connection["last_error"], Value::Null);
    assert_eq!(connection["detection"], "sdk_events");
    let setup = &connection["setup"];
    assert_eq!(setup["state"], "done", "{connection:#}");
    assert_eq!(setup["connection"], 1);
    assert_eq!(setup["runs"], 1);
    assert_timestamp(&setup["started_at"], "setup.started_at");
    assert_timestamp(&setup["finished_at"], "setup.finished_at");
    let outcomes: Vec<(String, String)> = setup["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            assert_eq!(
                keys(s),
                set(&["name", "outcome", "detail", "duration_ms", "counts"])
            );
            (
                s["name"].as_str().expect("name").to_string(),
                s["outcome"].as_str().expect("outcome").to_string(),
            )
        })
        .collect();
    let expected = [
        ("caches", "skipped"),
        ("configuration.register", "done"),
        ("configuration.read", "done"),
        ("configuration.bind", "done"),
        ("downloads.bind", "done"),
        ("downloads.reconcile", "done"),
        ("search.follow", "done"),
        // The fake engine has no engine::functions::list.
        ("search.catalog", "failed"),
        ("search.hint", "skipped"),
        ("console.assets", "done"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, o)| (n.to_string(), o.to_string()))
        .collect();
    assert_eq!(outcomes, expected, "{connection:#}");
    h.stop().await;
}

/// How many bundled `directory` docs `skills::list` serves (they ship in the binary).
async fn bundled_skill_count(h: &Harness) -> usize {
    let all = h.skill_ids().await;
    all.len() - own(all.clone()).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_if_revision_answers_unchanged_until_a_write() {
    let h = Harness::start(Installed::Mailer, None).await;
    let first = h
        .call("directory::skills::list", json!({"if_revision": 0}))
        .await;
    assert_eq!(keys(&first), set(&["skills", "revision"]));
    let revision = first["revision"].as_u64().expect("revision");
    assert!(revision > 0);
    // The list revision folds in what decides visibility, so it is its own number, not the
    // index revision that status reports.
    let status = h.call("directory::index::status", json!({})).await;
    assert!(status["revision"].as_u64().expect("index revision") >= 1);
    assert_eq!(
        ids(&first),
        h.skill_ids().await,
        "the same rows as without if_revision"
    );

    let again = h
        .call("directory::skills::list", json!({"if_revision": revision}))
        .await;
    assert_eq!(again, json!({"unchanged": true, "revision": revision}));

    h.call(
        "directory::skills::create",
        json!({"id": "fresh", "content": "# Fresh\n\nNew.\n"}),
    )
    .await;
    let after = h
        .call("directory::skills::list", json!({"if_revision": revision}))
        .await;
    let newer = after["revision"].as_u64().expect("a new revision");
    assert!(newer > revision, "{after}");
    assert!(ids(&after).contains(&"fresh".to_string()), "{after}");
    h.stop().await;
}

/// `if_revision` is a cache token: when the rows a caller would get change, so must the
/// answer, even if no file changed (here `filter_unregistered` is switched off live).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_if_revision_sees_a_visibility_change() {
    let h = Harness::start(Installed::Mailer, None).await;
    let first = h
        .call("directory::skills::list", json!({"if_revision": 0}))
        .await;
    let revision = first["revision"].as_u64().expect("revision");
    assert!(!ids(&first).contains(&"ghost/guide".to_string()));

    let mut value = h.stored.lock().expect("stored").clone().expect("a value");
    value["filter_unregistered"] = json!(false);
    *h.stored.lock().expect("stored") = Some(value);
    assert_eq!(
        h.call(ON_CONFIG_CHANGE, json!({})).await,
        json!({"ok": true})
    );
    assert!(h.skill_ids().await.contains(&"ghost/guide".to_string()));

    let again = h
        .call("directory::skills::list", json!({"if_revision": revision}))
        .await;
    assert!(
        ids_or_empty(&again).contains(&"ghost/guide".to_string()),
        "the caller's rows (without ghost/guide) are stale, yet the answer is {again}"
    );
    h.stop().await;
}

fn ids_or_empty(list: &Value) -> Vec<String> {
    if list.get("skills").is_some() {
        ids(list)
    } else {
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_functions_info_is_proxied_to_the_engine() {
    let h = Harness::start(Installed::Mailer, None).await;
    let request_schema =
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]});
    let response_schema = json!({"type": "object", "properties": {"id": {"type": "string"}}});
    h.engine.respond(
        "engine::functions::info",
        json!({
            "function_id": "mailer::send", "namespace": "default", "worker_name": "mailer",
            "description": "Send an email", "request_schema": request_schema,
            "response_schema": response_schema, "metadata": {"tier": "gold"},
            "registered_triggers": [{"id": "t1", "trigger_type": "http",
                                     "config": {"api_path": "send"}, "extra": 1}],
        }),
    );
    let info = h
        .call(
            "directory::engine::functions::info",
            json!({"function_id": "mailer::send"}),
        )
        .await;
    assert_eq!(
        info,
        json!({
            "function_id": "mailer::send", "worker_name": "mailer",
            "description": "Send an email", "request_schema": request_schema,
            "response_schema": response_schema, "metadata": {"tier": "gold"},
            "registered_triggers": [{"id": "t1", "trigger_type": "http",
                                     "config": {"api_path": "send"}}],
        })
    );
    let call = h.ok(
        "the proxied call",
        h.engine
            .wait_call(|c| c.function_id == "engine::functions::info", WAIT)
            .await,
    );
    assert_eq!(call.data, json!({"function_id": "mailer::send"}));
    // A function only another engine namespace holds says which (beyond the contract).
    h.engine.respond(
        "engine::functions::info",
        json!({ "function_id": "ledger::close", "namespace": "team-b", "worker_name": "ledger",
                "registered_triggers": [] }),
    );
    let info = h
        .call(
            "directory::engine::functions::info",
            json!({"function_id": "ledger::close"}),
        )
        .await;
    assert_eq!(info["engine_namespace"], "team-b");
    assert_eq!(info["worker_name"], "ledger");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_functions_info_passes_the_engines_error_on() {
    let h = Harness::start(Installed::Mailer, None).await;
    h.engine.respond_error(
        "engine::functions::info",
        "NOT_FOUND",
        "function mailer::nope not found",
    );
    let err = h
        .call_err(
            "directory::engine::functions::info",
            json!({"function_id": "mailer::nope"}),
        )
        .await;
    assert_eq!(err.code, "invocation_failed", "{err}");
    assert!(
        err.message
            .starts_with("handler error: engine::functions::info proxy:")
            && err.message.contains("function mailer::nope not found"),
        "{err}"
    );
    h.stop().await;
}

/// An idle poll is answered without the blocking pool (`Directory::read_if_unchanged`), for
/// each list; the answer, and the error of a request that is wrong beside a current revision,
/// are those of the ordinary read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_revision_is_answered_unchanged_by_every_list() {
    let h = Harness::start(Installed::Mailer, None).await;
    for list in [
        "directory::skills::list",
        "directory::system-prompts::list",
        "directory::agents::list",
    ] {
        let first = h.call(list, json!({"since_revision": 0})).await;
        let revision = first["revision"].as_u64().expect("revision");
        for field in ["since_revision", "if_revision"] {
            let again = h.call(list, json!({ field: revision })).await;
            assert_eq!(
                again,
                json!({"unchanged": true, "revision": revision}),
                "{list} {field}"
            );
        }
        // `since_revision` wins over a stale `if_revision`.
        let both = h
            .call(list, json!({"since_revision": revision, "if_revision": 1}))
            .await;
        assert_eq!(both["unchanged"], true, "{list}: {both}");
    }
    let skills = h
        .call("directory::skills::list", json!({"since_revision": 0}))
        .await;
    let revision = skills["revision"].clone();
    let wrong = h
        .call_err(
            "directory::skills::list",
            json!({"since_revision": revision, "prefix": 5}),
        )
        .await;
    let plain = h
        .call_err("directory::skills::list", json!({"prefix": 5}))
        .await;
    assert!(wrong.message.contains("invalid request"), "{wrong}");
    assert_eq!(wrong.message, plain.message);
    h.stop().await;
}
