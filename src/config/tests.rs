//! The configuration's tests: defaults, keys and types, the seed's limits, the schema, paths.

use super::fields::{FIELDS, slot};
use super::*;
use serde_json::json;
use std::path::{Path, PathBuf};

fn yaml(text: &str) -> Result<(Settings, Vec<String>), ConfigError> {
    Settings::from_yaml_str(text)
}

fn yaml_error(text: &str) -> String {
    match yaml(text) {
        Ok(parsed) => panic!("expected an error for {text:?}, got {parsed:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_match_the_contract() {
    let s = Settings::default();
    assert_eq!(s.skills_folder, "skills");
    assert_eq!(s.local_skills_folder, "skills/iii");
    assert_eq!(s.agents_folder, "agents");
    assert_eq!(s.agents_skills_folder, ".agents/skills");
    assert!(s.auto_download);
    assert_eq!(s.registry_url, "https://api.workers.iii.dev");
    assert_eq!(s.download_timeout_ms, 60_000);
    assert_eq!(s.registry_cache_ttl_ms, 60_000);
    assert!(s.filter_unregistered);
    assert!(!s.inject_hint);
    assert_eq!(s.hint_min_workers, 2);
    assert!(s.registry_search);
    assert_eq!(s.download_max_files, 2_000);
    assert_eq!(s.download_max_bytes, 64 * 1024 * 1024);
    assert_eq!(s.index_path, "data/iii-directory/index.redb");
    assert_eq!(s.safety_net_interval_ms, 300_000);
}

#[test]
fn field_table_covers_every_serialized_field() {
    let json = Settings::default().to_json();
    let Some(object) = json.as_object() else {
        panic!("settings serialize to an object");
    };
    let mut serialized: Vec<&str> = object.keys().map(String::as_str).collect();
    let mut table: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
    serialized.sort_unstable();
    table.sort_unstable();
    assert_eq!(serialized, table);
    let mut s = Settings::default();
    for f in FIELDS {
        assert!(slot(&mut s, f.name).is_some(), "{} has no slot", f.name);
    }
}

#[test]
fn empty_documents_give_defaults() {
    for text in ["", "   \n", "# only a comment\n", "---\n", "~\n", "null"] {
        let (s, warnings) = yaml(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(s, Settings::default(), "{text:?}");
        assert!(warnings.is_empty());
    }
}

#[test]
fn every_key_is_read_from_yaml() {
    let text = "\
skills_folder: /srv/skills
local_skills_folder: ./local
agents_folder: ~/agents
agents_skills_folder: other/.agents/skills
auto_download: false
index_path: cache/index.redb
registry_url: http://localhost:9000
download_timeout_ms: 1500
registry_cache_ttl_ms: 0
filter_unregistered: false
inject_hint: true
hint_min_workers: 0
registry_search: false
download_max_files: 10
download_max_bytes: 2048
safety_net_interval_ms: 0
change_log_revisions: 7
search_model_path: ~/models/minilm
search_model_download: false
";
    let (s, warnings) = yaml(text).unwrap_or_else(|e| panic!("{e}"));
    assert!(warnings.is_empty());
    let expected = Settings {
        skills_folder: "/srv/skills".into(),
        local_skills_folder: "./local".into(),
        agents_folder: "~/agents".into(),
        agents_skills_folder: "other/.agents/skills".into(),
        auto_download: false,
        index_path: "cache/index.redb".into(),
        registry_url: "http://localhost:9000".into(),
        download_timeout_ms: 1500,
        registry_cache_ttl_ms: 0,
        filter_unregistered: false,
        inject_hint: true,
        hint_min_workers: 0,
        registry_search: false,
        download_max_files: 10,
        download_max_bytes: 2048,
        safety_net_interval_ms: 0,
        change_log_revisions: 7,
        search_model_path: "~/models/minilm".into(),
        search_model_download: false,
        ..Settings::default()
    };
    assert_eq!(s, expected);
}

#[test]
fn missing_keys_keep_their_defaults() {
    let (s, _) = yaml("inject_hint: true\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s,
        Settings {
            inject_hint: true,
            ..Settings::default()
        }
    );
}

#[test]
fn unknown_keys_warn_and_are_ignored() {
    let (s, warnings) = yaml("skils_folder: x\nwhatever: 1\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s, Settings::default());
    assert_eq!(
        warnings,
        vec![
            "unknown configuration key \"skils_folder\" ignored (did you mean \
                 \"skills_folder\"?)"
                .to_owned(),
            "unknown configuration key \"whatever\" ignored".to_owned(),
        ]
    );
}

#[test]
fn model_settings_take_a_path_or_none_and_suggest_their_names() {
    let (s, warnings) = yaml("search_model_path: \"\"\nsearch_model_dowload: false\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s, Settings::default());
    assert_eq!(
        warnings,
        vec![
            "unknown configuration key \"search_model_dowload\" ignored (did you mean \
             \"search_model_download\"?)"
                .to_owned()
        ]
    );
    let error = yaml("search_model_path: 3\n").err().map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("configuration key \"search_model_path\" must be a string, got an integer")
    );
}

#[test]
fn non_string_keys_are_named_in_warnings() {
    let (_, warnings) = yaml("1: x\ntrue: y\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        warnings,
        vec![
            "unknown configuration key \"1\" ignored".to_owned(),
            "unknown configuration key \"true\" ignored".to_owned(),
        ]
    );
}

#[test]
fn a_count_written_as_a_float_with_nothing_after_the_point_is_that_count() {
    // The engine's schema check admits `20000.0` as an integer, and stores it so.
    for (text, want) in [
        ("download_timeout_ms: 20000.0", 20_000),
        ("download_timeout_ms: 1e5", 100_000),
    ] {
        let (settings, _) = yaml(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(settings.download_timeout_ms, want, "{text}");
    }
    let stored = json!({ "download_timeout_ms": 20000.0 });
    let (settings, _) = fields::settings_from_value(&stored).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(settings.download_timeout_ms, 20_000);
}

#[test]
fn wrong_types_name_the_key_and_the_expected_type() {
    let cases = [
        (
            "download_timeout_ms: soon",
            "configuration key \"download_timeout_ms\" must be a non-negative integer, got a string",
        ),
        (
            "download_timeout_ms: -1",
            "configuration key \"download_timeout_ms\" must be a non-negative integer, got a negative integer",
        ),
        (
            "hint_min_workers: 1.5",
            "configuration key \"hint_min_workers\" must be a non-negative integer, got a fractional number",
        ),
        (
            "download_timeout_ms: -1.0",
            "configuration key \"download_timeout_ms\" must be a non-negative integer, got a negative number",
        ),
        (
            "download_timeout_ms: 99999999999999999999999",
            "configuration key \"download_timeout_ms\" must be a non-negative integer, got a number too large",
        ),
        (
            "registry_cache_ttl_ms: \"60000\"",
            "configuration key \"registry_cache_ttl_ms\" must be a non-negative integer, got a string",
        ),
        (
            "skills_folder: 42",
            "configuration key \"skills_folder\" must be a non-empty string, got an integer",
        ),
        (
            "agents_folder: true",
            "configuration key \"agents_folder\" must be a non-empty string, got a boolean",
        ),
        (
            "registry_url: \"\"",
            "configuration key \"registry_url\" must be a non-empty string, got an empty string",
        ),
        (
            "index_path:",
            "configuration key \"index_path\" must be a non-empty string, got null",
        ),
        (
            "local_skills_folder: [a, b]",
            "configuration key \"local_skills_folder\" must be a non-empty string, got a list",
        ),
        (
            "auto_download: \"yes\"",
            "configuration key \"auto_download\" must be a boolean (true or false), got a string",
        ),
        (
            "inject_hint: 1",
            "configuration key \"inject_hint\" must be a boolean (true or false), got an integer",
        ),
        (
            "registry_search: {on: true}",
            "configuration key \"registry_search\" must be a boolean (true or false), got a mapping",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(yaml_error(text), expected, "{text}");
    }
}

#[test]
fn top_level_must_be_a_mapping() {
    assert_eq!(
        yaml_error("- skills_folder: x\n"),
        "configuration must be a mapping of key: value pairs at the top level, got a list"
    );
    assert_eq!(
        yaml_error("just some text"),
        "configuration must be a mapping of key: value pairs at the top level, got a string"
    );
}

#[test]
fn malformed_yaml_is_an_error() {
    assert!(
        yaml_error("skills_folder: [unclosed\n").starts_with("configuration is not valid YAML")
    );
    assert!(yaml_error("a: 1\na: 2\n").starts_with("configuration is not valid YAML"));
}

#[test]
fn aliases_are_refused() {
    let bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n";
    assert!(matches!(yaml(bomb), Err(ConfigError::Alias)));
}

#[test]
fn deep_nesting_and_large_documents_are_refused() {
    let deep = format!("x: {}{}", "[".repeat(100), "]".repeat(100));
    assert!(matches!(yaml(&deep), Err(ConfigError::TooDeep)));
    let large = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES));
    assert!(matches!(yaml(&large), Err(ConfigError::TooLarge { .. })));
}

#[test]
fn several_documents_are_refused() {
    assert!(matches!(
        yaml("a: 1\n---\nb: 2\n"),
        Err(ConfigError::MultipleDocuments { count: 2 })
    ));
}

#[test]
fn unknown_keys_may_hold_anything() {
    let (_, warnings) =
        yaml("extra: {deep: [1, .inf, !!int nope]}\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(warnings.len(), 1);
}

#[test]
fn json_follows_the_same_rules() {
    assert_eq!(
        Settings::from_json(&Value::Null).map(|(s, _)| s).ok(),
        Some(Settings::default())
    );
    let (s, warnings) = Settings::from_json(&json!({"hint_min_workers": 7, "colour": "blue"}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.hint_min_workers, 7);
    assert_eq!(warnings.len(), 1);
    let error = Settings::from_json(&json!({"download_timeout_ms": "60000"}))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some(
            "configuration key \"download_timeout_ms\" must be a non-negative integer, got a string"
        )
    );
    assert!(matches!(
        Settings::from_json(&json!([1, 2])),
        Err(ConfigError::NotAMapping { got: "a list" })
    ));
}

#[test]
fn json_round_trip() {
    let original = Settings {
        skills_folder: "/x".into(),
        inject_hint: true,
        hint_min_workers: 9,
        safety_net_interval_ms: 0,
        ..Settings::default()
    };
    let (back, warnings) =
        Settings::from_json(&original.to_json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, original);
    assert!(warnings.is_empty());
    // serde agrees with the hand-written validator on a complete value.
    let via_serde: Settings =
        serde_json::from_value(original.to_json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(via_serde, original);
}

#[test]
fn topology_changes_are_named() {
    let a = Settings::default();
    assert!(a.topology_changed(&a.clone()).is_empty());
    let b = Settings {
        agents_folder: "elsewhere".into(),
        index_path: "i.redb".into(),
        auto_download: false,
        registry_url: "http://x".into(),
        inject_hint: true,
        safety_net_interval_ms: 1,
        ..Settings::default()
    };
    assert_eq!(
        a.topology_changed(&b),
        vec!["agents_folder", "auto_download", "index_path"]
    );
}

#[test]
fn schema_describes_every_field_with_its_default() {
    let schema = Settings::json_schema();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], true);
    assert_eq!(schema["example"], Settings::default().to_json());
    for f in FIELDS {
        let p = &schema["properties"][f.name];
        assert_eq!(p["type"], f.kind.schema_type(), "{}", f.name);
        assert_eq!(p["default"], Settings::default().to_json()[f.name]);
        assert!(p["description"].as_str().is_some_and(|d| !d.is_empty()));
        // The annotation and the description's words agree.
        let restart = p["x-restart-required"] == true;
        assert_eq!(
            p["description"]
                .as_str()
                .is_some_and(|d| d.contains("Restart required")),
            restart,
            "{}",
            f.name
        );
    }
    assert_eq!(schema["properties"]["download_timeout_ms"]["minimum"], 1000);
    assert_eq!(schema["properties"]["skills_folder"]["minLength"], 1);
}

#[test]
fn absolute_paths_are_kept() {
    let base = Path::new("/base");
    assert_eq!(
        resolve_path("/srv/skills", base, Some(Path::new("/home/u"))),
        PathBuf::from("/srv/skills")
    );
}

#[test]
fn tilde_expands_to_home() {
    let base = Path::new("/base");
    let home = Some(Path::new("/home/u"));
    assert_eq!(resolve_path("~", base, home), PathBuf::from("/home/u"));
    assert_eq!(
        resolve_path("~/agents/x", base, home),
        PathBuf::from("/home/u/agents/x")
    );
    // `~user` is not expanded: only the caller's own home is known.
    assert_eq!(
        resolve_path("~user/x", base, home),
        PathBuf::from("/base/~user/x")
    );
    // Without a home folder the tilde is an ordinary relative name.
    assert_eq!(resolve_path("~", base, None), PathBuf::from("/base/~"));
    assert_eq!(resolve_path("~/x", base, None), PathBuf::from("/base/~/x"));
}

#[test]
fn the_paths_written_from_home_are_named() {
    let settings = Settings {
        agents_folder: "~/agents".into(),
        index_path: " ~ ".into(),
        skills_folder: "~user/skills".into(),
        search_model_path: "models/~/x".into(),
        ..Settings::default()
    };
    let named: Vec<_> = settings.tilde_paths().collect();
    assert_eq!(named, [("agents_folder", "~/agents"), ("index_path", "~")]);
    assert_eq!(Settings::default().tilde_paths().count(), 0);
}

#[test]
fn relative_paths_drop_dot_components_and_join_the_base() {
    let base = Path::new("/compose");
    assert_eq!(
        resolve_path("skills", base, None),
        PathBuf::from("/compose/skills")
    );
    assert_eq!(
        resolve_path("./skills/./iii", base, None),
        PathBuf::from("/compose/skills/iii")
    );
    assert_eq!(
        resolve_path(".agents/skills", base, None),
        PathBuf::from("/compose/.agents/skills")
    );
}

#[test]
fn defaults_resolve_literally() {
    let paths = Settings::default().resolve(Path::new("/p"), None);
    assert_eq!(
        paths,
        Paths {
            skills_folder: PathBuf::from("/p/skills"),
            local_skills_folder: PathBuf::from("/p/skills/iii"),
            agents_folder: PathBuf::from("/p/agents"),
            agents_skills_folder: PathBuf::from("/p/.agents/skills"),
            global_agents_folder: None,
            global_agents_skills_folder: None,
            index_path: PathBuf::from("/p/data/iii-directory/index.redb"),
            bundles_lock: PathBuf::from("/p/skills/iii-bundles.lock.json"),
            search_model_path: None,
        }
    );
    assert_eq!(
        paths.model_cache(),
        PathBuf::from("/p/data/iii-directory/models")
    );
    let configured = Settings {
        search_model_path: "~/minilm".into(),
        ..Settings::default()
    };
    assert_eq!(
        configured
            .resolve(Path::new("/p"), Some(Path::new("/home/u")))
            .search_model_path,
        Some(PathBuf::from("/home/u/minilm"))
    );
    assert_eq!(Config::for_root(Path::new("/p")).paths, paths);
}

#[test]
fn base_prefers_a_non_empty_compose_dir() {
    let cwd = || Ok(PathBuf::from("/cwd"));
    assert_eq!(
        choose_base(Some("/compose".into()), cwd),
        PathBuf::from("/compose")
    );
    assert_eq!(choose_base(Some("".into()), cwd), PathBuf::from("/cwd"));
    assert_eq!(choose_base(None, cwd), PathBuf::from("/cwd"));
    let gone = || Err(std::io::Error::other("deleted"));
    assert_eq!(choose_base(None, gone), PathBuf::from("."));
}

#[test]
fn home_falls_back_to_userprofile() {
    assert_eq!(
        choose_home(Some("/h".into()), Some("/u".into())),
        Some(PathBuf::from("/h"))
    );
    assert_eq!(
        choose_home(Some("".into()), Some("/u".into())),
        Some(PathBuf::from("/u"))
    );
    assert_eq!(choose_home(None, None), None);
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "hint_min_workers: 4\ntypo: 1\n").unwrap_or_else(|e| panic!("{e}"));
    let (config, warnings) = Config::load(Some(&good)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.settings.hint_min_workers, 4);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("good.yaml"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "inject_hint: maybe\n").unwrap_or_else(|e| panic!("{e}"));
    let message = Config::load(Some(&bad))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(message.contains("bad.yaml"), "{message}");
    assert!(message.contains("\"inject_hint\""), "{message}");

    let missing = dir.path().join("missing.yaml");
    let message = Config::load(Some(&missing))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(message.contains("missing.yaml"), "{message}");
    assert!(message.contains("--config"), "{message}");

    let large = dir.path().join("large.yaml");
    std::fs::write(&large, "#".repeat(MAX_CONFIG_BYTES + 10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        Config::load(Some(&large)),
        Err(ConfigError::InFile { .. })
    ));
}

#[test]
fn load_without_a_file_gives_defaults() {
    let (config, warnings) = Config::load(None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.settings, Settings::default());
    assert!(warnings.is_empty());
    assert!(config.paths.skills_folder.ends_with("skills"));
}

#[test]
fn example_file_parses_to_the_defaults() {
    let text = include_str!("../../config.yaml.example");
    let (settings, warnings) = yaml(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(settings, Settings::default());
    assert!(warnings.is_empty(), "{warnings:?}");
}

// Issue 33: bounds, URL schemes, files that are not configurations, and the layout rules.

#[test]
fn numbers_out_of_range_are_brought_to_their_bounds_with_a_warning() {
    let (s, warnings) = yaml(
        "safety_net_interval_ms: 1
download_timeout_ms: 1
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.safety_net_interval_ms, 1_000,
        "a reconcile at most once a second"
    );
    assert_eq!(s.download_timeout_ms, 1_000);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("safety_net_interval_ms") && w.contains("using 1000")),
        "{warnings:?}"
    );
    // 0 is "off" for the safety net, and stays 0.
    let (s, warnings) = yaml(
        "safety_net_interval_ms: 0
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.safety_net_interval_ms, 0);
    assert!(warnings.is_empty());
    // Stored values (JSON) get the same floors and ceilings.
    let (s, warnings) = Settings::from_json(&json!({
        "safety_net_interval_ms": 1,
        "download_max_files": 0,
        "download_max_bytes": u64::MAX,
        "change_log_revisions": u64::MAX,
        "registry_cache_ttl_ms": u64::MAX,
        "hint_min_workers": u64::MAX,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.safety_net_interval_ms, 1_000);
    assert_eq!(s.download_max_files, 1);
    assert_eq!(s.download_max_bytes, 256 * 1024 * 1024);
    assert_eq!(s.change_log_revisions, 1_000_000);
    assert_eq!(s.registry_cache_ttl_ms, 86_400_000);
    assert_eq!(s.hint_min_workers, 10_000);
    assert_eq!(warnings.len(), 6, "{warnings:?}");
    // Every number setting has bounds, and the defaults lie within them.
    let defaults = Settings::default().to_json();
    for f in FIELDS.iter().filter(|f| f.kind == fields::Kind::Count) {
        let b = fields::bounds(f.name).unwrap_or_else(|| panic!("{} has no bounds", f.name));
        let default = defaults[f.name].as_u64().expect("a number");
        assert_eq!(b.apply(default), default, "{}", f.name);
    }
}

#[test]
fn registry_url_must_be_http_or_https() {
    for bad in [
        "file:///etc/passwd",
        "ftp://example.com/",
        "/etc/passwd",
        "javascript:alert(1)",
        "https://",
        "gopher://x",
    ] {
        let err = Settings::from_json(&json!({ "registry_url": bad }))
            .map(|(s, _)| s.registry_url)
            .expect_err(bad)
            .to_string();
        assert!(err.contains("registry_url"), "{bad}: {err}");
    }
    for good in [
        "https://api.workers.iii.dev",
        "http://localhost:9000",
        "https://[::1]:8443/x",
        "http://127.0.0.1:1",
    ] {
        let (s, _) = Settings::from_json(&json!({ "registry_url": good }))
            .unwrap_or_else(|e| panic!("{good}: {e}"));
        assert_eq!(s.registry_url, good);
    }
}

/// `--config /etc/shadow` logged each line as an unknown key: a file with no known key is one
/// clear error, and never echoes its lines.
#[test]
fn a_file_that_is_not_a_configuration_is_one_error_without_its_lines() {
    let shadow = "root:$6$secrethash$abcdef:19000:0:99999:7:::\nbin:x:19000:0:99999:7:::\n";
    for text in [
        shadow,
        "root:x:0:0:root:/root:/bin/bash\nbin:x:1:1::/:\n",
        "root:*:19000:0:99999:7:::\n",
        "root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
    ] {
        let err = yaml_error(text);
        assert!(
            err.contains("no known key") || err.contains("not valid YAML"),
            "{err}"
        );
        assert!(
            !err.contains("root"),
            "the file's lines are not echoed: {err}"
        );
        assert!(!err.contains("secrethash"), "{err}");
    }
    // A real configuration with many typos names a few and counts the rest.
    let mut text = String::from("inject_hint: true\n");
    for i in 0..50 {
        text.push_str(&format!("unknown_{i}: 1\n"));
    }
    let (_, warnings) = yaml(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(warnings.len(), 9, "{warnings:?}");
    assert!(warnings[8].contains("42 more"), "{warnings:?}");
    // A long key is cut.
    let long = format!("{}: 1\ninject_hint: true\n", "k".repeat(500));
    let (_, warnings) = yaml(&long).unwrap_or_else(|e| panic!("{e}"));
    assert!(warnings[0].len() < 200, "{}", warnings[0].len());
}

#[test]
fn schema_bounds_every_number_and_the_registry_url() {
    let schema = Settings::json_schema();
    let p = &schema["properties"];
    assert_eq!(
        p["safety_net_interval_ms"]["anyOf"],
        json!([{ "const": 0 }, { "minimum": 1000, "maximum": 86_400_000 }])
    );
    for f in FIELDS.iter().filter(|f| f.kind == fields::Kind::Count) {
        let property = &p[f.name];
        let bounded = property.get("maximum").is_some() || property.get("anyOf").is_some();
        assert!(bounded, "{} has no maximum: {property}", f.name);
    }
    assert_eq!(p["registry_url"]["format"], "uri");
    let pattern = p["registry_url"]["pattern"].as_str().expect("a pattern");
    assert!(
        pattern.starts_with("^[Hh][Tt][Tt][Pp][Ss]?://"),
        "{pattern}"
    );
}

fn paths(base: &Path, edit: impl FnOnce(&mut Paths)) -> Paths {
    let mut paths = Settings::default().resolve(base, None);
    edit(&mut paths);
    paths
}

fn layout_error(paths: &Paths) -> String {
    match layout::check(paths) {
        Ok(()) => panic!("expected a refusal of {paths:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn layout_the_defaults_and_separate_folders_are_fine() {
    let base = Path::new("/p");
    layout::check(&paths(base, |_| {})).unwrap_or_else(|e| panic!("{e}"));
    // A shallow root may hold another root (its folders are not its files).
    layout::check(&paths(base, |p| {
        p.agents_skills_folder = PathBuf::from("/p/agents/skills");
    }))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn layout_no_root_is_the_filesystem_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("to-root");
    std::os::unix::fs::symlink("/", &link).expect("link");
    for root in [
        PathBuf::from("/"),
        PathBuf::from("/."),
        PathBuf::from("/srv/.."),
        PathBuf::from("/../.."),
        link,
    ] {
        for key in ["skills_folder", "local_skills_folder", "agents_folder"] {
            let p = paths(Path::new("/p"), |p| match key {
                "skills_folder" => p.skills_folder = root.clone(),
                "local_skills_folder" => p.local_skills_folder = root.clone(),
                _ => p.agents_folder = root.clone(),
            });
            let err = layout_error(&p);
            assert!(err.contains(key), "{root:?}: {err}");
            assert!(err.contains("filesystem root"), "{root:?}: {err}");
        }
    }
}

#[test]
fn layout_the_index_lives_outside_every_root() {
    let base = Path::new("/p");
    for (index, key) in [
        ("/p/skills/a/index.md", "skills_folder"),
        ("/p/skills/iii/x.redb", "local_skills_folder"),
        ("/p/agents/index.redb", "agents_folder"),
        ("/p/.agents/skills/i.redb", "agents_skills_folder"),
        ("/p/skills/../skills/a/b.md", "skills_folder"),
    ] {
        let err = layout_error(&paths(base, |p| p.index_path = PathBuf::from(index)));
        assert!(err.contains("index_path"), "{index}: {err}");
        assert!(err.contains(key), "{index}: {err}");
    }
    // A root that is the index's folder, or above it.
    let err = layout_error(&paths(base, |p| {
        p.agents_folder = PathBuf::from("/p/data/iii-directory")
    }));
    assert!(err.contains("index_path"), "{err}");
    let err = layout_error(&paths(base, |p| p.skills_folder = PathBuf::from("/p")));
    assert!(err.contains("index_path"), "{err}");
}

#[test]
fn layout_no_writable_root_is_a_system_folder_or_the_home_folder() {
    let home = std::env::var("HOME").expect("HOME");
    for root in [
        "/etc".to_string(),
        "/etc/skills".to_string(),
        "/usr/share/skills".to_string(),
        "/home".to_string(),
        "/tmp".to_string(),
        "/dev/shm".to_string(),
        "/usr".to_string(),
        "/var/tmp".to_string(),
        "/var/lib".to_string(),
        "/run".to_string(),
        home.clone(),
    ] {
        for key in [
            "skills_folder",
            "local_skills_folder",
            "agents_folder",
            "global_agents_folder",
        ] {
            let p = paths(Path::new("/p"), |p| match key {
                "skills_folder" => {
                    p.skills_folder = PathBuf::from(&root);
                    p.local_skills_folder = PathBuf::from("/p/local");
                }
                "local_skills_folder" => p.local_skills_folder = PathBuf::from(&root),
                "agents_folder" => p.agents_folder = PathBuf::from(&root),
                _ => p.global_agents_folder = Some(PathBuf::from(&root)),
            });
            let err = layout_error(&p);
            assert!(err.contains(key), "{root}: {err}");
        }
    }
    // The home folder is named as such.
    let err = layout_error(&paths(Path::new("/p"), |p| {
        p.agents_folder = PathBuf::from(&home)
    }));
    assert!(err.contains("is the home folder"), "{err}");
    // A folder of its own inside them is fine, and a read-only root may be one of them.
    layout::check(&paths(Path::new("/p"), |p| {
        p.skills_folder = PathBuf::from(format!("{home}/skills"));
        p.local_skills_folder = PathBuf::from(format!("{home}/skills/iii"));
        p.agents_folder = PathBuf::from("/tmp/agents");
        p.global_agents_folder = Some(PathBuf::from(format!("{home}/.iii/agents")));
        p.agents_skills_folder = PathBuf::from(&home);
    }))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn layout_no_root_is_named_as_a_file_beside_the_index() {
    let base = Path::new("/p");
    for (root, index) in [
        ("/p/team.sync", "/p/team"),
        ("/p/data/x.redb.sync/skills", "/p/data/x.redb"),
        ("/p/data/x.redb.texts", "/p/data/x.redb"),
    ] {
        let err = layout_error(&paths(base, |p| {
            p.skills_folder = PathBuf::from(root);
            p.local_skills_folder = PathBuf::from(format!("{root}/iii"));
            p.index_path = PathBuf::from(index);
        }));
        assert!(err.contains("skills_folder"), "{root}: {err}");
        assert!(err.contains("beside index_path"), "{root}: {err}");
    }
    // Nor the bundles lock.
    let err = layout_error(&paths(base, |p| {
        p.index_path = PathBuf::from("/p/team");
        p.bundles_lock = PathBuf::from("/p/team.holder");
    }));
    assert!(err.contains("bundles_lock_path"), "{err}");
    // A name that only starts the same way is another folder.
    layout::check(&paths(base, |p| {
        p.skills_folder = PathBuf::from("/p/teams");
        p.local_skills_folder = PathBuf::from("/p/teams/iii");
        p.index_path = PathBuf::from("/p/team");
    }))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn layout_roots_overlap_only_as_the_defaults_do() {
    let base = Path::new("/p");
    type Edit = fn(&mut Paths);
    let cases: [(&str, Edit); 5] = [
        ("same folder", |p| {
            p.local_skills_folder = p.skills_folder.clone()
        }),
        ("same folder", |p| {
            p.agents_folder = p.skills_folder.join("iii")
        }),
        ("inside skills_folder", |p| {
            p.agents_folder = PathBuf::from("/p/skills/agents")
        }),
        ("lies inside local_skills_folder", |p| {
            p.agents_skills_folder = PathBuf::from("/p/skills/iii/x")
        }),
        ("inside local_skills_folder", |p| {
            p.skills_folder = PathBuf::from("/p/local/skills");
            p.local_skills_folder = PathBuf::from("/p/local");
        }),
    ];
    for (want, edit) in cases {
        let err = layout_error(&paths(base, edit));
        assert!(err.contains(want), "{want}: {err}");
    }
}

#[test]
fn layout_the_bundles_lock_is_never_a_document_a_root_or_the_index() {
    let base = Path::new("/p");
    for lock in ["/p/skills/bundles.lock.md", "/p/skills/x.MD"] {
        let err = layout_error(&paths(base, |p| p.bundles_lock = PathBuf::from(lock)));
        assert!(
            err.contains("bundles_lock_path") && err.contains(".md"),
            "{err}"
        );
    }
    let err = layout_error(&paths(base, |p| {
        p.bundles_lock = PathBuf::from("/p/agents")
    }));
    assert!(err.contains("is the folder of agents_folder"), "{err}");
    let err = layout_error(&paths(base, |p| {
        p.bundles_lock = PathBuf::from("/p/data/iii-directory/index.redb")
    }));
    assert!(err.contains("the index file"), "{err}");
    layout::check(&paths(base, |p| {
        p.bundles_lock = PathBuf::from("/p/iii.lock.json")
    }))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn layout_the_global_roots_are_checked_only_when_set() {
    let base = Path::new("/p");
    let with_globals = |p: &mut Paths| {
        p.global_agents_folder = Some(PathBuf::from("/home/u/.iii/agents"));
        p.global_agents_skills_folder = Some(PathBuf::from("/home/u/.agents/skills"));
    };
    layout::check(&paths(base, with_globals)).unwrap_or_else(|e| panic!("{e}"));
    // Run from the home folder, the project's agents skills folder is the global one.
    let err = layout_error(&paths(base, |p| {
        p.global_agents_skills_folder = Some(p.agents_skills_folder.clone())
    }));
    assert!(
        err.contains("global_agents_skills_folder") && err.contains("same folder"),
        "{err}"
    );
    let err = layout_error(&paths(base, |p| {
        p.global_agents_folder = Some(PathBuf::from("/p/skills/me"))
    }));
    assert!(err.contains("inside skills_folder"), "{err}");
    let err = layout_error(&paths(base, |p| {
        p.global_agents_folder = Some(PathBuf::from("/"))
    }));
    assert!(err.contains("global_agents_folder"), "{err}");
    let err = layout_error(&paths(base, |p| {
        p.global_agents_skills_folder = Some(PathBuf::from("/p/data"))
    }));
    assert!(err.contains("index_path"), "{err}");
}

#[test]
fn the_global_folders_are_off_unless_set_and_resolve_like_the_others() {
    let off = Settings::default().resolve(Path::new("/p"), Some(Path::new("/home/u")));
    assert_eq!(off.global_agents_folder, None);
    assert_eq!(off.global_agents_skills_folder, None);
    let (settings, warnings) = Settings::from_yaml_str(
        "global_agents_folder: ~/.iii/agents\nglobal_agents_skills_folder: '  '\n",
    )
    .expect("valid");
    assert!(warnings.is_empty(), "{warnings:?}");
    let on = settings.resolve(Path::new("/p"), Some(Path::new("/home/u")));
    assert_eq!(
        on.global_agents_folder,
        Some(PathBuf::from("/home/u/.iii/agents"))
    );
    assert_eq!(on.global_agents_skills_folder, None);
}
