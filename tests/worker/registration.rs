//! Registration.

use super::*;

/// The `required` keys of an object schema (which must be `type: object`, list each required
/// key in `properties`, and not be the SDK's trivial `{"title":"AnyValue"}`).
fn required_of(schema: &Value, what: &str) -> BTreeSet<String> {
    assert_ne!(
        schema.get("title"),
        Some(&json!("AnyValue")),
        "{what} is the trivial schema"
    );
    assert_eq!(
        schema["type"], "object",
        "{what} is not an object: {schema}"
    );
    let required: BTreeSet<String> = schema["required"]
        .as_array()
        .unwrap_or_else(|| panic!("{what} has no required list: {schema}"))
        .iter()
        .map(|k| k.as_str().expect("key").to_string())
        .collect();
    for key in &required {
        assert!(
            schema["properties"].get(key).is_some(),
            "{what} requires {key} but does not describe it: {schema}"
        );
    }
    required
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_every_manifest_function_with_its_schemas_and_the_trigger_types() {
    let h = Harness::start(Installed::Mailer, None).await;
    let manifest = manifest();
    assert_eq!(manifest["name"], WORKER_NAME);

    let documented: BTreeSet<String> = DOCUMENTED.iter().map(|d| d.0.to_string()).collect();
    let listed: BTreeSet<String> = manifest_function_ids().into_iter().collect();
    assert_eq!(
        listed, documented,
        "the manifest lists the documented surface"
    );
    let registered: BTreeSet<String> = h.engine.functions().keys().cloned().collect();
    assert_eq!(
        registered, documented,
        "the wire carries exactly that surface"
    );

    let functions = h.engine.functions();
    for entry in manifest["functions"].as_array().expect("functions") {
        let id = entry["id"].as_str().expect("id");
        let f = &functions[id];
        assert_eq!(
            f.description.as_deref(),
            entry["description"].as_str(),
            "{id}: description"
        );
        assert!(
            f.description.as_deref().is_some_and(|d| d.len() > 20),
            "{id}: a real description"
        );
        let request = f.request_format.as_ref().expect("request_format");
        let response = f.response_format.as_ref().expect("response_format");
        assert_eq!(request, &entry["request_format"], "{id}: request_format");
        assert_eq!(response, &entry["response_format"], "{id}: response_format");

        let (_, request_keys, response_keys) =
            DOCUMENTED.iter().find(|d| d.0 == id).expect("documented");
        assert_eq!(
            required_of(request, &format!("{id} request")),
            set(request_keys),
            "{id}: required request keys"
        );
        let lists = [
            "directory::skills::list",
            "directory::system-prompts::list",
            "directory::agents::list",
        ];
        if lists.contains(&id) {
            // The whole list, `{unchanged, revision}`, or a delta (beyond the contract).
            let shapes = response["oneOf"].as_array().expect("list answers oneOf");
            let required: Vec<BTreeSet<String>> = shapes
                .iter()
                .map(|s| required_of(s, &format!("{id} response")))
                .collect();
            assert_eq!(
                required,
                vec![
                    set(response_keys),
                    set(&["unchanged", "revision"]),
                    set(&["revision", "changed", "removed"])
                ]
            );
            for revision_field in ["if_revision", "since_revision"] {
                assert_eq!(
                    request["properties"][revision_field]["type"], "integer",
                    "{id}: {revision_field}"
                );
            }
        } else {
            assert_eq!(
                required_of(response, &format!("{id} response")),
                set(response_keys),
                "{id}: required response keys"
            );
        }

        let expected_metadata: Option<Value> = INTERNAL
            .iter()
            .find(|(internal, _)| *internal == id)
            .map(|(_, metadata)| serde_json::from_str(metadata).expect("metadata JSON"));
        assert_eq!(
            entry["internal"],
            json!(expected_metadata.is_some()),
            "{id}: manifest internal"
        );
        assert_eq!(f.metadata, expected_metadata, "{id}: metadata");
        assert_eq!(
            entry["metadata"],
            expected_metadata.clone().unwrap_or(Value::Null),
            "{id}: manifest metadata"
        );
    }

    let trigger_types = h.engine.trigger_types();
    assert_eq!(
        trigger_types.keys().cloned().collect::<BTreeSet<_>>(),
        set(&TRIGGER_TYPES)
    );
    for entry in manifest["trigger_types"].as_array().expect("trigger_types") {
        let id = entry["id"].as_str().expect("id");
        assert_eq!(
            trigger_types[id].description, entry["description"],
            "{id}: description"
        );
    }

    let ready = h.engine.ready().expect("engine::workers::register");
    assert_eq!(ready["name"], WORKER_NAME);
    assert_eq!(ready["runtime"], "rust");
    assert_eq!(ready["pid"], json!(h.worker.pid()));
    h.stop().await;
}

/// The manifest advertises each trigger type's payload (`call_request_format`); the engine
/// should get the same schema, so `engine::triggers::info` can show subscribers what they
/// receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_types_are_registered_with_their_payload_schema() {
    let h = Harness::start(Installed::Mailer, None).await;
    let trigger_types = h.engine.trigger_types();
    for entry in manifest()["trigger_types"]
        .as_array()
        .expect("trigger_types")
    {
        let id = entry["id"].as_str().expect("id");
        assert_eq!(
            trigger_types[id].call_request_format.as_ref(),
            Some(&entry["call_request_format"]),
            "{id}: call_request_format"
        );
        // Every family carries the contract's three payloads: an edit, a download, external.
        let variants = entry["call_request_format"]["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{id}: a oneOf of payloads"));
        let ops: Vec<&Value> = variants.iter().map(|v| &v["properties"]["op"]).collect();
        assert_eq!(
            ops,
            [
                &json!({"enum": ["create", "update", "delete"]}),
                &json!({"const": "download"}),
                &json!({"const": "external"}),
            ],
            "{id}"
        );
        // (schemars sorts the `required` list.)
        assert_eq!(
            variants[1]["required"],
            json!(["namespace", "op", "source"]),
            "{id}"
        );
    }
    h.stop().await;
}
