//! Skill search with the embedder connected (`Directory::set_model_state`,
//! `Directory::embed_pending`) over real files and a real redb index: the vectors are stored
//! by content hash and survive a restart, only contents that changed are embedded again, the
//! vectors of removed contents leave the index, and search answers `hybrid` once the tree is
//! embedded, finding a skill a paraphrase shares no word with; the function lane embeds the
//! newest catalog once, not each one a burst of changes superseded. Needs the model
//! (`III_DIRECTORY_SEARCH_MODEL`); skips without it. Few texts: the embedder is slow in a
//! debug build.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use iii_directory::embed::{Embedder, Quantized};
use iii_directory::retrieval::fusion::{DenseHit, DenseRanker};
use iii_directory::retrieval::texts::skill_passages;
use iii_directory::search::catalog::{Catalog, Tool};
use iii_directory::search::vectors::FunctionLane;
use iii_directory::{Directory, ModelState, vectors_model};
use serde_json::{Value, json};
use test_support::common::{Tree, model_dir, result_ids};

fn embedder() -> Option<Arc<Embedder>> {
    static MODEL: OnceLock<Option<Arc<Embedder>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            // Shared by every test thread: never turned away as a burst of queries.
            model_dir()
                .map(|dir| Arc::new(Embedder::load(&dir).expect("load").without_query_bound()))
        })
        .clone()
}

const SKILLS: [(&str, &str); 3] = [
    (
        "skills/invoice-reminders/SKILL.md",
        "---\nname: invoice-reminders\ndescription: Chase customers who have not paid their bills.\n---\n# Invoice reminders\n\nSend polite payment reminders for overdue invoices.\n",
    ),
    (
        "skills/garden-planner/SKILL.md",
        "---\nname: garden-planner\ndescription: Plan vegetable beds and planting dates.\n---\n# Garden planner\n\nWhich seeds to sow in which month.\n",
    ),
    (
        "skills/k8s-rollout/SKILL.md",
        "---\nname: k8s-rollout\ndescription: Roll out a new container image to a Kubernetes cluster.\n---\n# Rollout\n\nkubectl set image, then watch the rollout.\n",
    ),
];

fn tree() -> Tree {
    let tree = Tree::new();
    for (path, text) in SKILLS {
        tree.write(path, text);
    }
    tree
}

fn search(directory: &Directory, query: &str) -> Value {
    directory
        .search_skills(&json!({ "query": query }), None, None)
        .expect("search")
}

fn stored(directory: &Directory) -> u64 {
    directory
        .index()
        .read()
        .expect("read")
        .vector_count()
        .expect("count")
}

#[test]
fn search_is_hybrid_once_the_tree_is_embedded() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    // Without a model: lexical, and the paraphrase finds nothing.
    let paraphrase = "nudge people who still owe me money";
    let before = search(&directory, paraphrase);
    assert_eq!(before["mode"], "lexical");
    assert_eq!(result_ids(&before), Vec::<String>::new());
    let status = directory.search_status().expect("status");
    assert_eq!(
        status,
        json!({ "mode": "lexical", "model": null, "state": "absent", "embedded": 0, "pending": 3 })
    );
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 3);
    let status = directory.search_status().expect("status");
    assert_eq!(status["mode"], "hybrid", "{status}");
    assert_eq!(status["state"], "ready");
    assert_eq!(
        (status["embedded"].as_u64(), status["pending"].as_u64()),
        (Some(3), Some(0))
    );
    let after = search(&directory, paraphrase);
    assert_eq!(after["mode"], "hybrid");
    assert_eq!(
        result_ids(&after).first().map(String::as_str),
        Some("invoice-reminders"),
        "{after}"
    );
    // A task no skill serves stays empty in hybrid mode too.
    assert_eq!(
        result_ids(&search(&directory, "bake sourdough bread")),
        Vec::<String>::new()
    );
}

/// The bundled skills are in the dense lane too (embedded by each process, held in memory, not
/// counted among the index's contents): a paraphrase of one that shares few of its words finds
/// it, by meaning.
#[test]
fn the_bundled_skills_are_found_by_meaning_too() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let directory = tree.open();
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 3, "files only");
    let status = directory.search_status().expect("status");
    assert_eq!(
        (status["embedded"].as_u64(), status["pending"].as_u64()),
        (Some(3), Some(0))
    );
    // A paraphrase its words alone do not reach: found by meaning.
    let query = "work out which functions to call for a task, and read what they take";
    let found = search(&directory, query);
    assert_eq!(found["mode"], "hybrid");
    assert!(
        result_ids(&found).contains(&"iii-directory/finding-functions".to_string()),
        "{found}"
    );
}

/// A file that holds a bundled skill's text byte for byte (a copy made to start a fork): the
/// content's vectors serve both rows, the file's and the bundled skill's.
#[test]
fn a_bundled_skill_and_a_file_with_its_text_are_both_found_by_meaning() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let raw = include_str!("../../skills/iii-directory/finding-functions.md");
    tree.write("skills/my-finding/SKILL.md", raw);
    let directory = tree.open();
    // A paraphrase the words alone do not reach: what is found is found by meaning.
    let query = "work out which functions to call for a task, and read what they take";
    assert_eq!(search(&directory, query)["results"], json!([]));
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 4);
    let found = search(&directory, query);
    assert_eq!(found["mode"], "hybrid");
    let ids = result_ids(&found);
    assert_eq!(
        ids[..2],
        ["my-finding", "iii-directory/finding-functions"],
        "{found}"
    );
}

#[test]
fn a_process_without_a_pass_of_its_own_ranks_as_the_writer_does() {
    // The offline commands run no background pass: a follower beside a running worker reads
    // the vectors the worker stored. It is hybrid when none is missing, or when the index
    // records that the model embedded the tree once (as the worker stays hybrid then).
    let Some(model) = embedder() else { return };
    let tree = tree();
    let writer = tree.open();
    writer.reconcile().expect("reconcile");
    let paraphrase = "nudge people who still owe me money";
    let follower = Directory::open_shared(tree.config()).expect("open shared");
    assert!(!follower.is_writer());
    assert_eq!(
        follower.hybrid_when_embedded().expect("pending"),
        3,
        "without the model every content counts as pending"
    );
    follower.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(follower.hybrid_when_embedded().expect("pending"), 3);
    assert_eq!(
        search(&follower, paraphrase)["mode"],
        "lexical",
        "never embedded"
    );
    assert_eq!(
        follower.embed_pending().expect("embed"),
        0,
        "a follower never stores vectors"
    );

    writer.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(writer.embed_pending().expect("embed"), 3);
    tree.write(
        "skills/tide-tables/SKILL.md",
        "---\nname: tide-tables\ndescription: When the sea is high and low.\n---\n# Tides\n",
    );
    writer.reconcile().expect("reconcile");
    assert_eq!(search(&writer, paraphrase)["mode"], "hybrid");
    let follower = Directory::open_shared(tree.config()).expect("open shared");
    follower.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(follower.hybrid_when_embedded().expect("pending"), 1);
    let during = search(&follower, paraphrase);
    assert_eq!(during["mode"], "hybrid", "as the writer: {during}");
    assert_eq!(
        result_ids(&during).first().map(String::as_str),
        Some("invoice-reminders"),
        "{during}"
    );

    assert_eq!(writer.embed_pending().expect("embed"), 1);
    let follower = Directory::open_shared(tree.config()).expect("open shared");
    follower.set_model_state(ModelState::Ready(model));
    assert_eq!(follower.hybrid_when_embedded().expect("pending"), 0);
    assert_eq!(search(&follower, paraphrase)["mode"], "hybrid");
}

#[test]
fn vectors_survive_a_restart_and_only_changed_contents_are_embedded_again() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    {
        let directory = tree.open();
        directory.reconcile().expect("reconcile");
        directory.set_model_state(ModelState::Ready(model.clone()));
        assert_eq!(directory.embed_pending().expect("embed"), 3);
        assert_eq!(stored(&directory), 3);
    }
    // A content changed while the worker was stopped: after the restart, search is hybrid at
    // once (the tree was embedded), the changed content ranking by its words until embedded.
    tree.write(
        "skills/garden-planner/SKILL.md",
        "---\nname: garden-planner\ndescription: Plan rose beds and planting dates.\n---\n# Garden planner\n",
    );
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    assert_eq!(stored(&directory), 2, "kept in the index file");
    directory.set_model_state(ModelState::Ready(model));
    let status = directory.search_status().expect("status");
    assert_eq!(
        (status["mode"].as_str(), status["pending"].as_u64()),
        (Some("hybrid"), Some(1)),
        "{status}"
    );
    assert_eq!(
        directory.embed_pending().expect("embed"),
        1,
        "only the changed content embedded again"
    );
    assert_eq!(search(&directory, "kubernetes rollout")["mode"], "hybrid");
    // One edit, one copy of an existing content (same hash: nothing to embed), one removal.
    tree.write(
        "skills/garden-planner/SKILL.md",
        "---\nname: garden-planner\ndescription: Plan flower beds and planting dates.\n---\n# Garden planner\n",
    );
    tree.write("skills/k8s-copy/SKILL.md", SKILLS[2].1);
    tree.remove("skills/invoice-reminders/SKILL.md");
    directory.reconcile().expect("reconcile");
    assert_eq!(
        directory.embed_pending().expect("embed"),
        1,
        "only the edited content"
    );
    // The old garden content and the removed skill's content left the index with their vectors.
    assert_eq!(stored(&directory), 2);
    let status = directory.search_status().expect("status");
    assert_eq!(
        (status["embedded"].as_u64(), status["pending"].as_u64()),
        (Some(2), Some(0))
    );
    // A content two skills share answers both.
    let both = result_ids(&search(
        &directory,
        "deploy a container image to the cluster",
    ));
    assert!(
        both.contains(&"k8s-rollout".to_string()) && both.contains(&"k8s-copy".to_string()),
        "{both:?}"
    );
}

/// A `git switch` away and back: the contents that left come back with the vectors they had,
/// and nothing is embedded again.
#[test]
fn a_content_that_leaves_and_comes_back_takes_its_vectors_back() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 3);
    let gone = std::fs::read_to_string(tree.path("skills/invoice-reminders/SKILL.md")).unwrap();
    tree.remove("skills/invoice-reminders/SKILL.md");
    directory.reconcile().expect("reconcile");
    assert_eq!(stored(&directory), 2);
    // The background pass runs meanwhile and lets go of what no row holds.
    assert_eq!(directory.embed_pending().expect("embed"), 0);
    tree.write("skills/invoice-reminders/SKILL.md", &gone);
    directory.reconcile().expect("reconcile");
    assert_eq!(stored(&directory), 3, "its vectors came back with it");
    assert_eq!(
        directory.embed_pending().expect("embed"),
        0,
        "nothing embedded again"
    );
    let status = directory.search_status().expect("status");
    assert_eq!(
        (status["embedded"].as_u64(), status["pending"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(
        result_ids(&search(&directory, "chase unpaid bills"))
            .first()
            .map(String::as_str),
        Some("invoice-reminders")
    );
}

#[test]
fn a_pass_racing_the_models_arrival_finds_the_stored_vectors_already_held() {
    let Some(model) = embedder() else { return };
    // Enough contents that reading their vectors back takes a while next to a spinning pass.
    const SKILLS: usize = 2_000;
    let tree = Tree::new();
    for i in 0..SKILLS {
        tree.write(
            &format!("skills/s{i}/SKILL.md"),
            &format!("---\nname: s{i}\ndescription: Skill number {i}.\n---\n# Skill {i}\n"),
        );
    }
    {
        let directory = tree.open();
        directory.reconcile().expect("reconcile");
        let stand_in = model.embed_query_quantized("a stand-in passage");
        let stored_now = directory
            .store_stand_in_vectors(&model, |_| vec![stand_in.clone()])
            .expect("store");
        assert_eq!(stored_now, SKILLS);
    }
    // After a restart, a pass (the background one, here a thread calling it without pause)
    // that runs as the model arrives must find every content held: none is embedded again.
    let directory = Arc::new(tree.open());
    directory.reconcile().expect("reconcile");
    // The skill rows already cached, as in a worker that has answered calls: the pass then
    // knows at once what is pending.
    assert_eq!(
        directory.search_status().expect("status")["state"],
        "absent"
    );
    let racing = {
        let directory = directory.clone();
        std::thread::spawn(move || {
            let mut embedded = 0;
            loop {
                let ready_before = directory.embedder().is_some();
                embedded += directory.embed_pending().expect("embed");
                if ready_before {
                    return embedded;
                }
            }
        })
    };
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(
        racing.join().expect("the racing pass"),
        0,
        "nothing embedded again"
    );
    assert_eq!(directory.embedded_count(), 0);
    let status = directory.search_status().expect("status");
    assert_eq!(status["pending"], 0, "{status}");
}

#[test]
fn a_background_pass_that_failed_to_store_is_tried_again_without_a_change() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let directory = Arc::new(tree.open());
    directory.reconcile().expect("reconcile");
    // The first two stores fail as on a full disk; nothing in the tree changes after.
    directory.fail_next_vector_stores(2);
    directory.start_background();
    directory.set_model_state(ModelState::Ready(model));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        let status = directory.search_status().expect("status");
        if status["mode"] == "hybrid" || std::time::Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status["mode"], "hybrid", "{status}");
    assert_eq!(status["pending"], 0, "{status}");
    assert_eq!(stored(&directory), SKILLS.len() as u64);
    assert_eq!(
        result_ids(&search(&directory, "nudge people who still owe me money"))[0],
        "invoice-reminders"
    );
}

/// A caller's dense lane that is ready and finds nothing: the search ranks in hybrid mode on
/// the lexical lane alone.
struct FindsNothing;

impl DenseRanker for FindsNothing {
    fn nearest(&self, _: &str, _: usize) -> Option<Vec<DenseHit>> {
        Some(Vec::new())
    }
}

#[test]
fn filters_choose_among_every_match_in_hybrid_mode_too() {
    // 60 skills of `team/` match the task better than `zzz/mailer`, more than the fusion takes
    // from the lexical lane: the filters must apply before it does.
    let tree = Tree::new();
    for i in 0..60 {
        tree.write(
            &format!("skills/team/s{i:02}.md"),
            "---\ndescription: Send the weekly email report.\n---\n# Report\n\nsend email report\n",
        );
    }
    tree.write(
        "skills/zzz/mailer.md",
        "---\ndescription: Send email.\n---\n# Mailer\n\nmail\n",
    );
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    let lane = FindsNothing;
    let ask = |request: Value, installed: Option<&BTreeSet<String>>, hybrid: bool| {
        let dense = hybrid.then_some(&lane as &dyn DenseRanker);
        let answer = directory
            .search_skills(&request, installed, dense)
            .expect("search");
        (answer["mode"].clone(), result_ids(&answer))
    };
    let prefixed = json!({ "query": "send email report", "prefix": "zzz/" });
    let only_zzz: BTreeSet<String> = ["zzz".to_string()].into();
    let plain = json!({ "query": "send email report" });
    for hybrid in [false, true] {
        let mode = if hybrid { "hybrid" } else { "lexical" };
        assert_eq!(
            ask(prefixed.clone(), None, hybrid),
            (json!(mode), vec!["zzz/mailer".to_string()])
        );
        // `filter_unregistered`: only the registered worker's namespace is visible.
        assert_eq!(
            ask(plain.clone(), Some(&only_zzz), hybrid),
            (json!(mode), vec!["zzz/mailer".to_string()])
        );
    }
}

/// The encoder reads English: a task mostly in another script is ranked by the lexical lane
/// alone (which reads every script) and says so, so a lane placing it near unrelated skills
/// offers none of them; a task in Latin letters still fuses both.
#[test]
fn a_task_the_encoder_cannot_read_is_ranked_lexically() {
    let tree = tree();
    tree.write(
        "skills/zh/fanyi.md",
        "---\ndescription: 将英文技术文档翻译成简体中文。\n---\n# 翻译助手\n\n保持术语一致。\n",
    );
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    let lane = super::FindsOne("garden-planner/index".into());
    let ask = |query: &str| {
        let answer = directory
            .search_skills(&json!({ "query": query }), None, Some(&lane))
            .expect("search");
        (answer["mode"].clone(), result_ids(&answer))
    };
    assert_eq!(
        ask("翻译成中文"),
        (json!("lexical"), vec!["zh/fanyi".to_string()])
    );
    let (mode, ids) = ask("Kubernetes-Rollout prüfen");
    assert_eq!(mode, "hybrid");
    assert_eq!(ids, ["k8s-rollout", "garden-planner"]);
}

#[test]
fn a_search_for_a_model_ranks_only_the_skills_a_model_may_invoke() {
    let tree = Tree::new();
    for i in 0..6 {
        tree.write(
            &format!("skills/manual-{i}.md"),
            "---\ndescription: Send the weekly email report.\ndisable-model-invocation: true\n---\n# Report\n\nsend email report\n",
        );
    }
    tree.write(
        "skills/mailer.md",
        "---\ndescription: Send email.\n---\n# Mailer\n\nreport\n",
    );
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    let request = json!({ "query": "send email report", "limit": 3 });
    let caller = directory
        .search_skills(&request, None, None)
        .expect("search");
    assert_eq!(
        result_ids(&caller),
        ["manual-0", "manual-1", "manual-2"],
        "a caller sees them, marked"
    );
    let model = directory
        .search_skills_for_model(&request, None, None)
        .expect("search");
    assert_eq!(result_ids(&model), ["mailer"]);
}

#[test]
fn skills_offered_beside_functions_are_near_the_capability_in_meaning() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    // Shares "store", "value" and "key" with the capability, and nothing of its meaning.
    tree.write(
        "skills/storefront/SKILL.md",
        "---\nname: storefront\ndescription: Design a store window display that shows the value of the brand.\n---\n# Storefront\n\nMannequins, lights, key pieces.\n",
    );
    let directory = tree.open();
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 4);
    let ask = |query: &str| json!({ "query": query, "limit": 3 });
    let capability = ask("store a value under a key");
    let asked = directory
        .search_skills(&capability, None, None)
        .expect("search");
    assert_eq!(asked["mode"], "hybrid");
    assert_eq!(
        result_ids(&asked),
        ["storefront"],
        "a caller who asks sees it"
    );
    let offered = directory
        .search_skills_for_model(&capability, None, None)
        .expect("search");
    assert_eq!(result_ids(&offered), Vec::<String>::new(), "{offered}");
    // A skill near the capability in meaning is offered, words in common or not.
    for query in [
        "nudge people who still owe me money",
        "send invoice reminders",
    ] {
        let offered = directory
            .search_skills_for_model(&ask(query), None, None)
            .expect("search");
        assert_eq!(
            result_ids(&offered),
            ["invoice-reminders"],
            "{query}: {offered}"
        );
    }
}

#[test]
fn a_query_of_megabytes_is_searched_as_its_first_words() {
    let tree = tree();
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    // The first 2,048 bytes name the task; 200,000 distinct words follow, which would all be
    // terms of the query if it were not cut there.
    let task = "kubernetes rollout ".repeat(2_048 / 19 + 1);
    let distinct: String = (0..200_000).map(|i| format!("w{i} ")).collect();
    let answer = search(&directory, &format!("{task}{distinct}"));
    assert_eq!(result_ids(&answer), ["k8s-rollout"]);
}

#[test]
fn switching_models_in_a_process_embeds_again_with_the_new_one() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 3);
    let other = Arc::new(
        Embedder::load(&model_dir().expect("model"))
            .expect("load")
            .with_max_tokens(16),
    );
    directory.set_model_state(ModelState::Ready(other.clone()));
    let status = directory.search_status().expect("status");
    assert_eq!(status["mode"], "lexical", "{status}");
    assert_eq!(directory.embed_pending().expect("embed"), 3);
    let reader = directory.index().read().expect("read");
    assert_eq!(
        reader.vectors_model().expect("model").as_deref(),
        Some(&*vectors_model(&other))
    );
    drop(reader);
    assert_eq!(search(&directory, "kubernetes rollout")["mode"], "hybrid");
}

#[test]
fn a_renamed_skill_is_embedded_again_under_its_new_name() {
    let Some(model) = embedder() else { return };
    let tree = Tree::new();
    // No frontmatter name: the file's name is the skill's name, and part of what is embedded.
    let text = "---\ndescription: Run the command, then watch its progress.\n---\n# Steps\n\nRun it and wait until every step reports done.\n";
    tree.write("skills/untitled.md", text);
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(directory.embed_pending().expect("embed"), 1);
    let task = "roll out a new version to kubernetes";
    assert_eq!(result_ids(&search(&directory, task)), Vec::<String>::new());
    tree.remove("skills/untitled.md");
    tree.write("skills/kubernetes-rollout.md", text);
    directory.reconcile().expect("reconcile");
    assert_eq!(
        directory.embed_pending().expect("embed"),
        1,
        "the same content, another name"
    );
    let found = search(&directory, task);
    assert_eq!(found["mode"], "hybrid");
    assert_eq!(result_ids(&found), ["kubernetes-rollout"], "{found}");
    // A copy under another name leaves the vectors as they are, and a restart keeps them.
    tree.write("skills/another-copy.md", text);
    directory.reconcile().expect("reconcile");
    assert_eq!(directory.embed_pending().expect("embed"), 0);
    drop(directory);
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 0);
    // The two names share the content's vectors, and so its similarity.
    assert_eq!(
        result_ids(&search(&directory, task)),
        ["another-copy", "kubernetes-rollout"]
    );
}

#[test]
fn another_models_vectors_are_never_compared_and_are_embedded_again() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    // The same files reading at most 64 tokens: another fingerprint, so another model's
    // vectors as far as the index can tell.
    let other = Embedder::load(&model_dir().expect("model"))
        .expect("load")
        .with_max_tokens(64);
    assert_ne!(vectors_model(&other), vectors_model(&model));
    {
        let directory = tree.open();
        directory.reconcile().expect("reconcile");
        // Every content stored as the garden planner, so that using them would show.
        let garden = other.embed_query_quantized("plan vegetable beds and planting dates");
        let stored_now = directory
            .store_stand_in_vectors(&other, |_| vec![garden.clone()])
            .expect("store");
        assert_eq!(stored_now, 3);
        // And recorded as that model's complete embedding of the tree.
        directory
            .index()
            .note_vectors_caught_up(&vectors_model(&other))
            .expect("note");
    }
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    assert_eq!(stored(&directory), 3);
    directory.set_model_state(ModelState::Ready(model.clone()));
    let status = directory.search_status().expect("status");
    assert_eq!(
        (status["embedded"].as_u64(), status["pending"].as_u64()),
        (Some(0), Some(3)),
        "none of the other model's vectors is taken"
    );
    assert_eq!(
        status["mode"], "lexical",
        "the other model's catch-up is not this one's"
    );
    assert_eq!(directory.embed_pending().expect("embed"), 3);
    let reader = directory.index().read().expect("read");
    assert_eq!(
        reader.vectors_model().expect("model").as_deref(),
        Some(&*vectors_model(&model))
    );
    assert_eq!(
        reader.vector_count().expect("count"),
        3,
        "replaced, not added to"
    );
    drop(reader);
    let found = search(&directory, "nudge people who still owe me money");
    assert_eq!(found["mode"], "hybrid");
    assert_eq!(
        result_ids(&found).first().map(String::as_str),
        Some("invoice-reminders"),
        "{found}"
    );
    // The same model after a restart takes them as they are.
    drop(directory);
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(directory.embed_pending().expect("embed"), 0);
}

#[test]
fn a_long_body_is_stored_as_its_lead_and_its_continuation() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    let steps = "1. Collect the merged pull requests since the last tag.\n".repeat(12);
    let body = format!(
        "# Release notes\n\n{steps}\n## Translating\n\nHave the notes translated for the regional teams.\n"
    );
    tree.write(
        "skills/release-notes/SKILL.md",
        &format!(
            "---\nname: release-notes\ndescription: Write the notes of a version.\n---\n{body}"
        ),
    );
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(directory.embed_pending().expect("embed"), 4);
    let reader = directory.index().read().expect("read");
    let mut stored = Vec::new();
    reader
        .each_vector(&vectors_model(&model), |content| {
            stored.push(content.passages)
        })
        .expect("read the vectors");
    let mut counts: Vec<usize> = stored.iter().map(Vec::len).collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        [1, 1, 1, 2],
        "the three short skills have their lead alone"
    );
    // The second vector is the continuation's embedding: the name, then the body after the
    // lead's cut, where the later steps are).
    let continuation = &skill_passages("release-notes", "", "", &body)[1];
    assert!(
        continuation.starts_with("release notes. "),
        "{continuation}"
    );
    assert!(continuation.contains("Translating"), "{continuation}");
    let fresh = Quantized::from_vector(&model.embed_batch(&[continuation.as_str()])[0]);
    let long = stored.iter().find(|p| p.len() == 2).expect("two passages");
    assert!(long[1].cosine(&fresh) > 0.999, "{}", long[1].cosine(&fresh));
    assert!(long[0].cosine(&fresh) < 0.99, "the lead is another text");
}

/// A catalog of `n` functions in the namespace `name`, each with a text of its own.
fn functions(name: &str, n: usize) -> Arc<Catalog> {
    Arc::new(Catalog::build(&tools(name, n)))
}

/// The tools of [`functions`].
fn tools(name: &str, n: usize) -> Vec<Tool> {
    (0..n)
        .map(|i| Tool {
            name: format!("{name}::f{i}"),
            description: format!("Handle {name} record number {i}."),
            parameters: json!({}),
            worker: None,
            engine_namespace: None,
        })
        .collect()
}

#[test]
fn the_function_lane_embeds_the_catalog_current_when_it_is_free_not_each_superseded_one() {
    let Some(model) = embedder() else { return };
    let lane = Arc::new(FunctionLane::new(model));
    let current = Arc::new(Mutex::new(functions("alpha", 3)));
    let now = |current: &Mutex<Arc<Catalog>>| current.lock().expect("lock").clone();
    // The catalog changes while the call embeds the first one: the call goes on to the new one.
    let calls = AtomicUsize::new(0);
    let embedded = lane.follow(|| {
        let catalog = now(&current);
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            *current.lock().expect("lock") = functions("beta", 3);
        }
        catalog
    });
    assert_eq!(embedded, 6, "alpha, then beta");
    let ids = |lane: &FunctionLane| -> Vec<String> {
        lane.nearest("handle a record", 50)
            .expect("a table")
            .into_iter()
            .map(|hit| hit.key)
            .collect()
    };
    assert!(
        ids(&lane).iter().all(|id| id.starts_with("beta::")),
        "{:?}",
        ids(&lane)
    );
    // A burst: five changes, each starting a call that waits for the lane. Whichever call
    // takes it first embeds the newest catalog; the others find it done. None embeds a
    // superseded one.
    for i in 0..5 {
        *current.lock().expect("lock") = functions(&format!("burst{i}"), 4);
    }
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let (lane, current) = (lane.clone(), current.clone());
            std::thread::spawn(move || lane.follow(|| now(&current)))
        })
        .collect();
    let embedded: usize = calls.into_iter().map(|c| c.join().expect("call")).sum();
    assert_eq!(embedded, 4, "the newest catalog's texts, once");
    let ids = ids(&lane);
    assert!(ids.iter().all(|id| id.starts_with("burst4::")), "{ids:?}");
    assert_eq!(ids.len(), 4);
}

/// Until a new catalog's texts are embedded, the lane answers with the vectors of the functions
/// whose text did not change: a function re-described has none (it ranks by its words, never by
/// its old description's vector), the others keep theirs. And should the catalog the lane had
/// come back before its successor is embedded, its whole table is swapped in again (the lane
/// stayed on the successor's partial table).
#[test]
fn until_a_catalog_is_embedded_only_its_unchanged_functions_keep_their_vectors() {
    let Some(model) = embedder() else { return };
    let lane = FunctionLane::new(model);
    let first = functions("alpha", 12);
    lane.follow(|| first.clone());
    let keys = |lane: &FunctionLane| -> Option<Vec<String>> {
        let hits = lane.nearest("handle a record", 200)?;
        let mut keys: Vec<String> = hits.into_iter().map(|hit| hit.key).collect();
        keys.sort();
        Some(keys)
    };
    let alpha = keys(&lane).expect("a table");
    assert_eq!(alpha.len(), 12);

    // The second catalog: alpha::f0 described anew, and 100 new functions (two chunks).
    let mut changed = tools("alpha", 12);
    changed[0].description = "Resize an image to a thumbnail.".to_string();
    changed.extend(tools("beta", 100));
    let second = Arc::new(Catalog::build(&changed));
    // Asked after the first chunk: what the lane answers with meanwhile, then the first
    // catalog back (the second one reverted before it was embedded).
    let calls = AtomicUsize::new(0);
    let meanwhile = Mutex::new(None);
    lane.follow(|| match calls.fetch_add(1, Ordering::SeqCst) {
        0 => second.clone(),
        1 => {
            *meanwhile.lock().expect("lock") = Some(keys(&lane));
            first.clone()
        }
        _ => first.clone(),
    });
    let meanwhile = meanwhile.into_inner().expect("lock").expect("asked");
    let unchanged: Vec<String> = alpha
        .iter()
        .filter(|k| *k != "alpha::f0")
        .cloned()
        .collect();
    assert_eq!(meanwhile, Some(unchanged));
    assert_eq!(
        keys(&lane),
        Some(alpha),
        "the first catalog's table, whole again"
    );
}

/// A description changed back to one the lane embedded before (every text known, nothing to
/// embed) is not ranked by the other text's vector while the new table waits for the
/// background pool (busy with a skill embedding, here held by the test).
#[test]
fn a_description_changed_back_is_not_ranked_by_the_other_texts_vector_meanwhile() {
    let Some(model) = embedder() else { return };
    let lane = Arc::new(FunctionLane::new(model));
    let first = functions("alpha", 12);
    lane.follow(|| first.clone());
    let mut changed = tools("alpha", 12);
    changed[0].description = "Resize an image to a thumbnail.".to_string();
    let second = Arc::new(Catalog::build(&changed));
    lane.follow(|| second.clone());
    let thumbnail = |lane: &FunctionLane| -> Vec<String> {
        let hits = lane
            .nearest("resize an image to a thumbnail", 3)
            .unwrap_or_default();
        hits.into_iter().map(|hit| hit.key).collect()
    };
    assert_eq!(
        thumbnail(&lane).first().map(String::as_str),
        Some("alpha::f0")
    );

    // Every thread of the background pool held until `release` is dropped (on a failed
    // assertion too: the other tests of this binary need the pool).
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Mutex::new(held);
    let (started, running) = std::sync::mpsc::channel::<usize>();
    let blocker = std::thread::spawn(move || {
        iii_directory::embed::in_background(|| {
            rayon::broadcast(|context| {
                started.send(context.num_threads()).expect("started");
                let _ = held.lock().expect("held").recv();
            })
        })
    });
    let threads = running.recv().expect("a pool thread");
    for _ in 1..threads {
        running.recv().expect("every pool thread");
    }
    let following = {
        let (lane, first) = (lane.clone(), first.clone());
        std::thread::spawn(move || lane.follow(|| first.clone()))
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !thumbnail(&lane).contains(&"alpha::f0".to_string()),
        "{:?}",
        thumbnail(&lane)
    );
    drop(release);
    blocker.join().expect("blocker");
    assert_eq!(following.join().expect("follow"), 0, "nothing to embed");
}

/// A catalog superseded while its texts are embedded is left after the chunk in progress:
/// thousands of functions that had left the engine held both cores for minutes.
#[test]
fn the_function_lane_leaves_a_superseded_catalog_after_its_chunk_in_progress() {
    let Some(model) = embedder() else { return };
    let lane = FunctionLane::new(model);
    let current = Mutex::new(functions("many", 200));
    let calls = AtomicUsize::new(0);
    let embedded = lane.follow(|| {
        let catalog = current.lock().expect("lock").clone();
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            *current.lock().expect("lock") = functions("few", 3);
        }
        catalog
    });
    assert_eq!(
        embedded,
        64 + 3,
        "one chunk of the old catalog, then the new one"
    );
    let ids: Vec<String> = lane
        .nearest("handle a record", 50)
        .expect("a table")
        .into_iter()
        .map(|hit| hit.key)
        .collect();
    assert!(ids.iter().all(|id| id.starts_with("few::")), "{ids:?}");
    assert_eq!(ids.len(), 3);
}

/// A worker shutting down stops the lane's embedding at its next chunk: a catalog of
/// thousands of new functions held a SIGTERM for a minute.
#[test]
fn a_stopped_function_lane_ends_its_embedding_at_the_next_chunk() {
    let Some(model) = embedder() else { return };
    let lane = Arc::new(FunctionLane::new(model));
    let catalog = functions("many", 2_000);
    let following = {
        let (lane, catalog) = (lane.clone(), catalog.clone());
        std::thread::spawn(move || lane.follow(|| catalog.clone()))
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let asked = std::time::Instant::now();
    lane.stop();
    following.join().expect("follow");
    // One chunk of 64 texts at most is left to finish (seconds in a debug build); the whole
    // catalog would be minutes.
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        asked.elapsed()
    );
    // The lane kept no table of a catalog it did not finish, and embeds nothing more.
    assert!(
        lane.nearest("handle a record", 5)
            .is_none_or(|hits| hits.is_empty())
    );
    assert_eq!(lane.follow(|| catalog.clone()), 0);
}

#[test]
fn the_function_lane_filters_while_it_scans_so_a_filter_never_shortens_its_answer() {
    let Some(model) = embedder() else { return };
    let lane = FunctionLane::new(model);
    let catalog = functions("alpha", 12);
    lane.follow(|| catalog.clone());
    let odd = |id: &String| id.ends_with(['1', '3', '5', '7', '9']);
    let hits = lane
        .nearest_where("handle a record", 5, &odd)
        .expect("a table");
    let ids: Vec<&str> = hits.iter().map(|hit| hit.key.as_str()).collect();
    assert_eq!(ids.len(), 5, "{ids:?}");
    assert!(ids.iter().all(|id| odd(&id.to_string())), "{ids:?}");
    // The same order as the unfiltered ranking, with the others passed over.
    let all: Vec<String> = lane
        .nearest("handle a record", 12)
        .expect("a table")
        .into_iter()
        .map(|hit| hit.key)
        .filter(|id| odd(id))
        .take(5)
        .collect();
    assert_eq!(ids, all.iter().map(String::as_str).collect::<Vec<_>>());
}

/// The stored vectors of each content, by hash.
fn stored_vectors(
    directory: &Directory,
    model: &Embedder,
) -> std::collections::HashMap<iii_directory::doc::Hash, Vec<Quantized>> {
    let mut vectors = std::collections::HashMap::new();
    directory
        .index()
        .read()
        .expect("read")
        .each_vector(&vectors_model(model), |content| {
            vectors.insert(content.hash, content.passages);
        })
        .expect("each vector");
    vectors
}

#[test]
fn an_index_of_an_older_tokenizer_embeds_again_only_the_texts_now_cut_otherwise() {
    let Some(model) = embedder() else { return };
    let tree = tree();
    tree.write(
        "skills/masked-lm/SKILL.md",
        "---\nname: masked-lm\ndescription: Fill in the [MASK] token with a masked language model.\n---\n# Masked LM\n",
    );
    // An index an older build wrote: every content embedded (stand-ins here), and no record of
    // how the texts were cut into tokens.
    let stand_in = model.embed_query_quantized("a stand-in passage");
    {
        let directory = tree.open();
        let stored_now = directory
            .store_stand_in_vectors(&model, |_| vec![stand_in.clone()])
            .expect("store");
        assert_eq!(stored_now, 4);
        let reader = directory.index().read().expect("read");
        assert_eq!(reader.vectors_tokens().expect("tokens"), Some(1));
    }
    let index_path = tree.config().paths.index_path;
    {
        let db = redb::Database::open(&index_path).expect("open the index file");
        let txn = db.begin_write().expect("write");
        {
            let meta: redb::TableDefinition<'_, &str, &[u8]> = redb::TableDefinition::new("meta");
            let mut meta = txn.open_table(meta).expect("meta");
            assert!(meta.remove("vectors_tokens").expect("remove").is_some());
        }
        txn.commit().expect("commit");
    }
    // A newer build on that index: only the skill spelling out `[MASK]` is embedded again.
    let directory = tree.open();
    directory.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(directory.embed_pending().expect("embed"), 1);
    let reader = directory.index().read().expect("read");
    assert_eq!(reader.vectors_tokens().expect("tokens"), Some(1));
    drop(reader);
    let vectors = stored_vectors(&directory, &model);
    assert_eq!(vectors.len(), 4);
    let masked: Vec<_> = vectors
        .values()
        .filter(|passages| passages[0].cosine(&stand_in) < 0.999)
        .collect();
    assert_eq!(masked.len(), 1, "one content embedded again, the rest kept");
    let fresh = model
        .embed_query_quantized("masked-lm. Fill in the [MASK] token with a masked language model.");
    assert!(masked[0][0].cosine(&fresh) > 0.8, "its own text's vector");
    // Recorded: the next pass reads nothing again.
    assert_eq!(directory.embed_pending().expect("embed"), 0);
    assert_eq!(
        search(&directory, "fill the masked token")["mode"],
        "hybrid"
    );
}

#[test]
fn resources_are_not_embedded_and_their_vectors_from_before_are_dropped() {
    let Some(model) = embedder() else { return };
    let tree = Tree::new();
    let entry = "---\nname: pdf\ndescription: Read, merge and split PDF files.\n---\n# PDF\n\nTo fill a form, read references/forms.md.\n";
    // As an iii bundle (an `index.md` entry), the folder's `references/` page is a skill, and
    // is embedded.
    tree.write("skills/pdf/index.md", entry).write(
        "skills/pdf/references/forms.md",
        "---\ndescription: Fill the form fields of a PDF form.\n---\n# Forms\n\nType into each box of the form.\n",
    );
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model.clone()));
    assert_eq!(directory.embed_pending().expect("embed"), 2);
    assert_eq!(stored(&directory), 2);
    let paraphrase = "type into the boxes of a form";
    let ids = |directory: &Directory| result_ids(&search(directory, paraphrase));
    assert!(ids(&directory).contains(&"pdf/references/forms".to_string()));
    drop(directory);
    // The same entry as a `SKILL.md`: the page is now the Agent Skill's resource. Its stored
    // vector is dropped by the next pass, and search no longer answers it.
    std::fs::remove_file(tree.path("skills/pdf/index.md")).expect("remove");
    tree.write("skills/pdf/SKILL.md", entry);
    let directory = tree.open();
    directory.reconcile().expect("reconcile");
    directory.set_model_state(ModelState::Ready(model));
    assert_eq!(
        directory.embed_pending().expect("embed"),
        0,
        "same entry, same text"
    );
    assert_eq!(stored(&directory), 1);
    let status = directory.search_status().expect("status");
    assert_eq!(
        (status["embedded"].as_u64(), status["pending"].as_u64()),
        (Some(1), Some(0)),
        "{status}"
    );
    let answer = search(&directory, paraphrase);
    assert_eq!(answer["mode"], "hybrid");
    assert!(
        !ids(&directory).contains(&"pdf/references/forms".to_string()),
        "{answer}"
    );
    // A caller who narrows the search into the resource folder asks for it: having no vector,
    // it is found by its words.
    let inside = directory
        .search_skills(
            &json!({ "query": "fill the form fields", "prefix": "pdf/references/" }),
            None,
            None,
        )
        .expect("search");
    assert_eq!(result_ids(&inside), ["pdf/references/forms"], "{inside}");
}
