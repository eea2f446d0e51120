//! Sentence embeddings (`iii_directory::embed`): the tokenizer's ids and the vectors equal a
//! reference computed once from the same model files by an independent implementation (the
//! Hugging Face tokenizer and a float64 forward pass), committed as
//! `tests/fixtures/embeddings_minilm.json`; the quantized vectors and the table's exact scan,
//! and mean pooling, as properties over seeded random vectors; the model's download against a
//! loopback file server (checked sizes and hashes, nothing landed on a mismatch, resume); the
//! f16 rounding of the weights and every kernel of the linear layers against the naive product.
//! The tests that need the model (`III_DIRECTORY_SEARCH_MODEL`) skip without it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use iii_directory::embed::fetch::{
    FetchError, Landed, PinnedFile, REVISION, Source, discard_if_damaged, fetch, is_complete,
    model_folder, sha256_file,
};
use iii_directory::embed::{
    DIMENSIONS, EmbedError, Embedder, MAX_TOKENS, PREFILTER_FROM, PassageTable, QUANTIZED_BYTES,
    Quantized, VectorTable, join_bytes, mean_pool, split_bytes,
};
use iii_embed_kernel::{Kernel, Linear, PANEL, f16_bits, f16_to_f32};
use serde_json::Value;
use test_support::common::{crate_dir, model_dir};
use test_support::loopback::files::FileServer;

/// The model, loaded once for the whole binary (loading reads 90 MB).
fn embedder() -> Option<&'static Embedder> {
    static MODEL: OnceLock<Option<Embedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            // Shared by every test thread: never turned away as a burst of queries.
            model_dir().map(|dir| {
                Embedder::load(&dir)
                    .expect("load the model")
                    .without_query_bound()
            })
        })
        .as_ref()
}

fn fixture() -> Value {
    let path = crate_dir().join("tests/fixtures/embeddings_minilm.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read fixture")).expect("fixture")
}

fn floats(value: &Value) -> Vec<f32> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_f64().expect("number") as f32)
        .collect()
}

#[test]
fn vectors_equal_the_reference() {
    let Some(default) = embedder() else { return };
    let fixture = fixture();
    let max_tokens = fixture["max_tokens"].as_u64().expect("max_tokens") as usize;
    let texts: Vec<&str> = fixture["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|case| case["text"].as_str().expect("text"))
        .collect();
    let model = Embedder::load(&model_dir().expect("model")).expect("load");
    let model = model.with_max_tokens(max_tokens);
    let batch = model.embed_batch(&texts);
    // The encoder computes with f16-rounded weights (`embed::linear`): each vector keeps its
    // direction to 1e-5 in cosine and each value to 3e-4 (the reference is float64 with the
    // file's f32 weights).
    let (mut worst, mut least_cosine) = (0.0f32, 1.0f32);
    for (case, batched) in fixture["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .zip(&batch)
    {
        let text = case["text"].as_str().expect("text");
        let ids: Vec<u32> = case["ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|v| v.as_u64().expect("id") as u32)
            .collect();
        assert_eq!(model.tokenize(text), ids, "ids of {text:?}");
        let want = floats(&case["vector"]);
        let got = model.embed_query(text);
        assert_eq!(got.len(), DIMENSIONS);
        assert_eq!(&got, batched, "a batch embeds {text:?} as a query does");
        for (g, w) in got.iter().zip(&want) {
            worst = worst.max((g - w).abs());
        }
        least_cosine = least_cosine.min(got.iter().zip(&want).map(|(g, w)| g * w).sum());
        // The default length keeps the same leading ids.
        let short = default.tokenize(text);
        assert!(short.len() <= MAX_TOKENS);
        if ids.len() <= MAX_TOKENS {
            assert_eq!(short, ids);
        } else {
            assert_eq!(short[..MAX_TOKENS - 1], ids[..MAX_TOKENS - 1]);
            assert_eq!(short.last(), ids.last());
        }
    }
    eprintln!(
        "largest difference from the reference: {worst:e}; least cosine to it: {least_cosine}"
    );
    assert!(worst <= 3e-4, "largest difference {worst:e}");
    assert!(least_cosine >= 0.99999, "least cosine {least_cosine}");
}

/// Special tokens typed in a text are single tokens, as in the reference tokenizer (ids
/// recorded from Hugging Face `tokenizers` 0.20.3 with the model's `tokenizer.json`).
#[test]
fn special_tokens_spelled_out_in_a_text_tokenize_as_the_reference_does() {
    let Some(model) = embedder() else { return };
    let cases: [(&str, &[u32]); 6] = [
        ("fill the [MASK] token", &[101, 6039, 1996, 103, 19204, 102]),
        ("foo[MASK]bar", &[101, 29379, 103, 3347, 102]),
        ("[mask] lower", &[101, 1031, 7308, 1033, 2896, 102]),
        (
            "a [SEP] b [CLS] c [PAD] d [UNK] e",
            &[101, 1037, 102, 1038, 101, 1039, 0, 1040, 100, 1041, 102],
        ),
        ("[[MASK]]", &[101, 1031, 103, 1033, 102]),
        ("x [MASK]\u{301} y", &[101, 1060, 103, 1061, 102]),
    ];
    for (text, ids) in cases {
        assert_eq!(model.tokenize(text), ids, "ids of {text:?}");
    }
}

#[test]
fn similar_texts_score_higher_than_unrelated_ones() {
    let Some(model) = embedder() else { return };
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let query = model.embed_query("turn this scanned paperwork into searchable words");
    let ocr = model.embed_query("document::ocr: extract text from scanned images and PDFs");
    let git = model.embed_query("github::pulls::list: list the pull requests of a repository");
    assert!(cos(&query, &ocr) > cos(&query, &git) + 0.1);
    let norm = cos(&query, &query);
    assert!((norm - 1.0).abs() < 1e-5);
}

/// A small deterministic generator for the property tests (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A random unit vector, its values spread like an embedding's (sums of uniforms).
    fn unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIMENSIONS)
            .map(|_| (0..4).map(|_| self.signed()).sum())
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect()
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn quantization_keeps_direction_and_round_trips_its_bytes() {
    let mut rng = Rng(7);
    for case in 0..500 {
        let mut v = rng.unit();
        // Some vectors at other lengths and with a dominant value: the scale absorbs both.
        if case % 5 == 0 {
            v[case % DIMENSIONS] = 3.0;
        }
        if case % 7 == 0 {
            v.iter_mut().for_each(|x| *x *= 1e-6);
        }
        let q = Quantized::from_vector(&v);
        assert!(q.values.iter().all(|&x| x >= -127));
        assert!(q.values.iter().map(|x| x.unsigned_abs()).max() == Some(127));
        let back = q.dequantize();
        let norm_v = dot(&v, &v).sqrt();
        assert!(
            (dot(&back, &back) - 1.0).abs() < 1e-5,
            "dequantized is unit length"
        );
        // One value far above the rest leaves the rest fewer steps: direction kept less well.
        let floor = if case % 5 == 0 { 0.99 } else { 0.9995 };
        assert!(dot(&back, &v) / norm_v > floor, "case {case}");
        let bytes = q.to_bytes();
        assert_eq!(bytes.len(), QUANTIZED_BYTES);
        assert_eq!(Quantized::from_bytes(&bytes), Some(q.clone()));
        assert!((q.cosine(&q) - 1.0).abs() < 1e-5);
    }
    assert_eq!(QUANTIZED_BYTES, 388);
    assert_eq!(Quantized::from_bytes(&[0u8; 387]), None);
    let mut bad = Quantized::from_vector(&rng.unit()).to_bytes();
    bad[..4].copy_from_slice(&f32::NAN.to_le_bytes());
    assert_eq!(Quantized::from_bytes(&bad), None);
    let zero = Quantized::from_vector(&[0.0; DIMENSIONS]);
    assert_eq!(zero.scale, 0.0);
    assert_eq!(zero.cosine(&Quantized::from_vector(&rng.unit())), 0.0);
}

#[test]
fn quantized_cosines_stay_close_to_the_exact_ones() {
    let mut rng = Rng(11);
    let mut worst = 0.0f32;
    for _ in 0..2_000 {
        let a = rng.unit();
        // Pairs from unrelated to nearly identical.
        let t = rng.signed().abs();
        let b: Vec<f32> = a
            .iter()
            .zip(rng.unit())
            .map(|(x, y)| t * x + (1.0 - t) * y)
            .collect();
        let exact = dot(&a, &b) / dot(&b, &b).sqrt();
        let got = Quantized::from_vector(&a).cosine(&Quantized::from_vector(&b));
        worst = worst.max((got - exact).abs());
    }
    assert!(worst < 5e-3, "largest cosine error {worst}");
}

#[test]
fn top_k_is_the_exact_ranking() {
    let mut rng = Rng(3);
    let mut table = VectorTable::new();
    let mut plain = Vec::new();
    for i in 0..1_000u32 {
        let v = rng.unit();
        let q = Quantized::from_vector(&v);
        table.push(i, &q);
        plain.push(q);
    }
    // Duplicates tie; they must come in table order.
    table.push(1_000, &plain[17]);
    plain.push(plain[17].clone());
    assert_eq!(table.len(), 1_001);
    assert_eq!(table.vector_bytes(), 1_001 * 388);
    for round in 0..20 {
        let query = if round == 0 {
            plain[17].clone()
        } else {
            Quantized::from_vector(&rng.unit())
        };
        let scores = table.scores(&query);
        let mut order: Vec<usize> = (0..plain.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        for k in [0, 1, 5, 12, 1_001, 5_000] {
            let hits = table.top_k(&query, k);
            let got: Vec<usize> = hits.iter().map(|h| h.index).collect();
            assert_eq!(got, order[..k.min(order.len())]);
            for hit in &hits {
                assert_eq!(*hit.key as usize, hit.index);
                assert_eq!(hit.score, query.cosine(&plain[hit.index]));
            }
        }
        let even = table.top_k_where(&query, 10, |key| key % 2 == 0);
        let want: Vec<usize> = order
            .iter()
            .copied()
            .filter(|i| i % 2 == 0)
            .take(10)
            .collect();
        assert_eq!(even.iter().map(|h| h.index).collect::<Vec<_>>(), want);
    }
    let hits = table.top_k(&plain[17], 2);
    assert_eq!((hits[0].index, hits[1].index), (17, 1_000));
    assert!(VectorTable::<u32>::new().top_k(&plain[0], 3).is_empty());
}

#[test]
fn hubness_is_the_mean_cosine_of_each_vectors_nearest_others() {
    let mut rng = Rng(11);
    let topics: Vec<Vec<f32>> = (0..4).map(|_| rng.unit()).collect();
    let mut table = VectorTable::new();
    let mut plain = Vec::new();
    // 60 vectors around four topics, then 20 scattered ones: the clustered are the hubs.
    for i in 0..80u32 {
        let v = if i < 60 {
            clustered(&mut rng, &topics, 0.05)
        } else {
            rng.unit()
        };
        let q = Quantized::from_vector(&v);
        table.push(i, &q);
        plain.push(q);
    }
    let hubness = table.hubness(10);
    assert_eq!(hubness.len(), 80);
    for (i, &measured) in hubness.iter().enumerate() {
        let mut others: Vec<f32> = (0..plain.len())
            .filter(|&j| j != i)
            .map(|j| plain[i].cosine(&plain[j]))
            .collect();
        others.sort_by(|a, b| b.total_cmp(a));
        let want = others[..10].iter().sum::<f32>() / 10.0;
        assert!(
            (measured - want).abs() < 1e-5,
            "{i}: {measured} against {want}"
        );
    }
    let least_clustered = hubness[..60].iter().copied().fold(f32::MAX, f32::min);
    let most_scattered = hubness[60..].iter().copied().fold(f32::MIN, f32::max);
    assert!(least_clustered > most_scattered + 0.3);
    // Fewer others than asked for: the mean of all of them; a lone vector has none.
    assert!(
        (table.hubness(1_000)[0] - {
            let all: Vec<f32> = (1..80).map(|j| plain[0].cosine(&plain[j])).collect();
            all.iter().sum::<f32>() / all.len() as f32
        })
        .abs()
            < 1e-5
    );
    let mut lone = VectorTable::new();
    lone.push(0u32, &plain[0]);
    assert_eq!(lone.hubness(10), [0.0]);
}

/// Stored vectors around a few topics, as real skills' are: each a topic's direction plus its
/// own noise.
fn clustered(rng: &mut Rng, topics: &[Vec<f32>], noise: f32) -> Vec<f32> {
    let topic = &topics[(rng.next() % topics.len() as u64) as usize];
    let mut v: Vec<f32> = topic.iter().map(|x| x + noise * rng.signed()).collect();
    let norm = dot(&v, &v).sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Each key's best cosine over its passages, best first (ties by key).
fn exact_nearest(passages: &[(u32, Vec<Quantized>)], query: &Quantized) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = passages
        .iter()
        .map(|(key, vectors)| {
            let score = vectors
                .iter()
                .map(|v| query.cosine(v))
                .fold(f32::MIN, f32::max);
            (*key, score)
        })
        .collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    best
}

#[test]
fn a_key_with_several_passages_comes_once_scored_by_its_nearest() {
    let mut rng = Rng(11);
    // Under the prefilter's size every passage is scored: the answer is the exact one.
    let mut table = PassageTable::with_capacity(400);
    let mut passages = Vec::new();
    for key in 0..400u32 {
        let count = 1 + usize::from(key % 3 != 0);
        let vectors: Vec<Quantized> = (0..count)
            .map(|_| Quantized::from_vector(&rng.unit()))
            .collect();
        table.push(key, &vectors);
        passages.push((key, vectors));
    }
    assert_eq!((table.len(), table.vectors()), (400, 400 + 266));
    for _ in 0..20 {
        let query = Quantized::from_vector(&rng.unit());
        let want = exact_nearest(&passages, &query);
        for (k, odd_only) in [(1, false), (10, false), (40, true), (400, false)] {
            let keep = |key: &u32| !odd_only || key % 2 == 1;
            let got: Vec<(u32, f32)> = table
                .nearest(&query, k, keep)
                .into_iter()
                .map(|(key, score)| (*key, score))
                .collect();
            let expected: Vec<(u32, f32)> = want
                .iter()
                .copied()
                .filter(|(key, _)| keep(key))
                .take(k)
                .collect();
            assert_eq!(got, expected, "k {k}");
        }
    }
    // Keys kept by `retain` answer as they did.
    let odd = table.retain(|key| key % 2 == 1);
    assert_eq!(odd.len(), 200);
    let query = Quantized::from_vector(&rng.unit());
    assert_eq!(
        odd.nearest(&query, 10, |_| true),
        table.nearest(&query, 10, |key| key % 2 == 1)
    );
}

#[test]
fn the_sign_prefilter_finds_the_passages_near_a_query() {
    let mut rng = Rng(17);
    let topics: Vec<Vec<f32>> = (0..64).map(|_| rng.unit()).collect();
    let keys = PREFILTER_FROM as u32 + 2_000;
    let mut table = PassageTable::with_capacity(keys as usize);
    let mut passages = Vec::new();
    for key in 0..keys {
        let vectors = vec![
            Quantized::from_vector(&clustered(&mut rng, &topics, 0.08)),
            Quantized::from_vector(&clustered(&mut rng, &topics, 0.08)),
        ];
        table.push(key, &vectors);
        passages.push((key, vectors));
    }
    let (mut found, mut wanted) = (0, 0);
    for _ in 0..30 {
        // A query near one stored continuation: its key must come first, at its exact cosine.
        let (key, vectors) = &passages[(rng.next() % u64::from(keys)) as usize];
        let mut near = vectors[1].dequantize();
        near.iter_mut().for_each(|x| *x += 0.02 * rng.signed());
        let query = Quantized::from_vector(&near);
        let got = table.nearest(&query, 40, |_| true);
        let exact = exact_nearest(&passages, &query);
        assert_eq!(got[0].0, key);
        assert_eq!(got[0].1, exact[0].1);
        // Every score is a passage's exact cosine, best first, each key once.
        assert!(got.windows(2).all(|w| w[0].1 >= w[1].1));
        let distinct: std::collections::HashSet<u32> = got.iter().map(|(k, _)| **k).collect();
        assert_eq!(distinct.len(), got.len());
        // The exact top 10 over the passages a similarity floor would admit.
        let floor = iii_directory::retrieval::fusion::SKILL_FLOORS.similarity;
        for (k, score) in exact.iter().take(10).filter(|(_, s)| *s >= floor) {
            wanted += 1;
            found += usize::from(got.iter().any(|(g, s)| **g == *k && s == score));
        }
    }
    assert!(found * 100 >= wanted * 95, "found {found} of {wanted}");
}

#[test]
fn passages_are_kept_as_one_value_and_read_back_whole() {
    let mut rng = Rng(13);
    let passages: Vec<Quantized> = (0..2)
        .map(|_| Quantized::from_vector(&rng.unit()))
        .collect();
    let bytes = join_bytes(&passages);
    assert_eq!(bytes.len(), 2 * QUANTIZED_BYTES);
    assert_eq!(split_bytes(&bytes), Some(passages.clone()));
    assert_eq!(
        split_bytes(&join_bytes(&passages[..1])),
        Some(passages[..1].to_vec()),
        "a single vector's stored form is read as one passage"
    );
    assert_eq!(split_bytes(&[]), None);
    assert_eq!(split_bytes(&bytes[..QUANTIZED_BYTES + 1]), None);
    // One vector that is not one refuses the whole value: it is embedded again.
    let mut bad = bytes.clone();
    bad[QUANTIZED_BYTES..QUANTIZED_BYTES + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    assert_eq!(split_bytes(&bad), None);
}

#[test]
fn pooling_is_a_unit_mean_independent_of_row_order_and_scale() {
    let mut rng = Rng(5);
    for rows in [1usize, 2, 7, 40] {
        let states: Vec<f32> = (0..rows * DIMENSIONS).map(|_| rng.signed()).collect();
        let pooled = mean_pool(&states, DIMENSIONS);
        assert!((dot(&pooled, &pooled) - 1.0).abs() < 1e-5);
        // The direction of the plain mean.
        let mut mean = vec![0.0f32; DIMENSIONS];
        for row in states.chunks(DIMENSIONS) {
            mean.iter_mut()
                .zip(row)
                .for_each(|(m, v)| *m += v / rows as f32);
        }
        assert!(dot(&pooled, &mean) / dot(&mean, &mean).sqrt() > 0.99999);
        // Rows reversed, values scaled: the same vector.
        let mut reversed: Vec<f32> = Vec::new();
        for row in states.chunks(DIMENSIONS).rev() {
            reversed.extend(row.iter().map(|v| v * 3.5));
        }
        let again = mean_pool(&reversed, DIMENSIONS);
        for (a, b) in pooled.iter().zip(&again) {
            assert!((a - b).abs() < 1e-5);
        }
    }
    assert!(
        mean_pool(&[0.0; DIMENSIONS], DIMENSIONS)
            .iter()
            .all(|&v| v == 0.0)
    );
}

#[test]
fn a_query_finds_its_paraphrase_in_a_table() {
    let Some(model) = embedder() else { return };
    let docs = [
        "document::ocr: extract text from scanned images and PDFs",
        "github::pulls::list: list the pull requests of a repository",
        "tailscale::peers::list: list the devices connected to your tailnet",
        "events::publish: publish an event to a topic",
        "database::query: run a SQL query",
    ];
    let vectors = model.embed_batch(&docs);
    let mut table = VectorTable::with_capacity(docs.len());
    for (doc, v) in docs.iter().zip(&vectors) {
        table.push(*doc, &Quantized::from_vector(v));
    }
    let cases = [
        ("turn this scanned paperwork into searchable words", 0),
        (
            "give me a bird's-eye view of devices joined to my private mesh",
            2,
        ),
        ("publish an event", 3),
    ];
    for (query, want) in cases {
        let hits = table.top_k(&model.embed_query_quantized(query), 1);
        assert_eq!(hits[0].key, &docs[want], "{query}");
    }
}

// The model's download, against a loopback file server: small made-up files for the checks,
// the real files when the model is present.

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Serves `files` under `/rev/` and describes them as a source, hashing each.
fn serve(server: &FileServer, scratch: &Path, files: &[(&str, Vec<u8>)]) -> Source {
    let mut pinned = Vec::new();
    for (name, content) in files {
        server.file(&format!("/rev/{name}"), content.clone());
        let path = scratch.join(name);
        std::fs::write(&path, content).expect("write");
        pinned.push(PinnedFile {
            name: (*name).to_owned(),
            size: content.len() as u64,
            sha256: sha256_file(&path).expect("hash"),
        });
    }
    Source {
        folder: "model-test".to_owned(),
        base_url: format!("{}/rev", server.url()),
        files: pinned,
    }
}

fn fake_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("config.json", b"{\"hidden_size\": 384}".to_vec()),
        ("tokenizer.json", b"{\"model\": {}}".to_vec()),
        (
            "model.safetensors",
            (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect(),
        ),
    ]
}

#[test]
fn sha256_of_a_known_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("abc");
    std::fs::write(&path, "abc").expect("write");
    assert_eq!(
        sha256_file(&path).expect("hash"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    // The pinned source names the three files at one revision.
    let pinned = Source::pinned();
    assert!(pinned.base_url.ends_with(REVISION));
    let names: Vec<&str> = pinned.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["config.json", "tokenizer.json", "model.safetensors"]
    );
}

/// The made-up model files served by a loopback server, and an empty cache folder to fetch
/// them into.
struct FakeModel {
    server: FileServer,
    _scratch: tempfile::TempDir,
    cache: tempfile::TempDir,
    files: Vec<(&'static str, Vec<u8>)>,
    source: Source,
}

impl FakeModel {
    fn serve() -> FakeModel {
        let (server, scratch) = (FileServer::start(), tempfile::tempdir().expect("dir"));
        let files = fake_files();
        let source = serve(&server, scratch.path(), &files);
        FakeModel {
            server,
            _scratch: scratch,
            cache: tempfile::tempdir().expect("dir"),
            files,
            source,
        }
    }

    /// Fetches `source` (this model's, or a changed copy) into the cache folder.
    fn fetch(&self, source: &Source) -> Result<PathBuf, FetchError> {
        block_on(fetch(&reqwest::Client::new(), source, self.cache.path()))
    }

    /// The folder an attempt under way keeps its files in.
    fn staging(&self) -> PathBuf {
        self.cache.path().join(".model-test.partial")
    }

    /// Where an attempt keeps the weights while they arrive.
    fn part(&self) -> PathBuf {
        self.staging().join("model.safetensors.part")
    }
}

#[test]
fn a_fetch_lands_every_checked_file_once() {
    let model = FakeModel::serve();
    let folder = model.fetch(&model.source).expect("fetch");
    assert_eq!(folder, model_folder(model.cache.path(), &model.source));
    for (name, content) in &model.files {
        assert_eq!(&std::fs::read(folder.join(name)).expect("landed"), content);
    }
    assert!(is_complete(&folder, &model.source));
    // Nothing of the attempt is left beside it, and a second fetch asks the server nothing.
    let left: Vec<String> = std::fs::read_dir(model.cache.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter().all(|name| !name.ends_with(".partial")),
        "{left:?}"
    );
    let asked = model.server.requests().len();
    assert_eq!(asked, 3);
    model.fetch(&model.source).expect("fetch again");
    assert_eq!(model.server.requests().len(), asked);
}

#[test]
fn a_wrong_hash_or_size_lands_nothing() {
    let model = FakeModel::serve();
    let mut source = model.source.clone();
    let good = source.files[2].sha256.clone();
    source.files[2].sha256 = "0".repeat(64);
    let error = model.fetch(&source).expect_err("wrong hash");
    assert!(
        matches!(error, FetchError::Hash { ref name, carried: false, .. } if name == "model.safetensors"),
        "{error}"
    );
    assert!(
        !error.is_transient(),
        "the same bytes would come again: {error}"
    );
    let folder = model_folder(model.cache.path(), &source);
    assert!(!folder.exists());
    assert!(!model.staging().join("model.safetensors").exists());
    assert!(!model.part().exists());

    // A file announced longer than pinned is refused before a byte is written.
    source.files[2].sha256 = good.clone();
    source.files[2].size -= 10;
    let error = model.fetch(&source).expect_err("too long");
    assert!(
        matches!(error, FetchError::Announced { announced, expected, .. } if announced == expected + 10),
        "{error}"
    );
    assert!(!folder.exists());
    assert!(!model.part().exists());

    // Right again: only the refused file is asked for; the two checked ones are kept.
    source.files[2].size += 10;
    let before = model.server.requests().len();
    model.fetch(&source).expect("fetch");
    let after: Vec<String> = model.server.requests()[before..]
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(after, ["/rev/model.safetensors"]);
    assert!(is_complete(&folder, &source));
}

#[test]
fn an_interrupted_fetch_resumes_where_it_stopped() {
    let model = FakeModel::serve();
    model.server.cut_next("/rev/model.safetensors", 20_000);
    assert!(model.fetch(&model.source).is_err());
    let folder = model_folder(model.cache.path(), &model.source);
    assert!(!folder.exists());
    assert_eq!(
        std::fs::metadata(model.part()).expect("part kept").len(),
        20_000
    );
    model.fetch(&model.source).expect("resume");
    let last = model.server.requests().last().cloned().expect("request");
    assert_eq!(
        last,
        (
            "/rev/model.safetensors".to_owned(),
            Some("bytes=20000-".to_owned())
        )
    );
    assert_eq!(
        std::fs::read(folder.join("model.safetensors")).expect("landed"),
        model.files[2].1
    );
}

/// A `.part` an earlier attempt left that does not hash right once completed (written by
/// another mirror's answer, or not synced before a crash) is dropped, and the failure is one
/// worth another attempt, which fetches the file whole; a file that arrived whole with another
/// hash is not (`a_wrong_hash_or_size_lands_nothing`).
#[test]
fn a_resumed_file_that_fails_its_hash_comes_whole_next_time() {
    let model = FakeModel::serve();
    std::fs::create_dir_all(model.staging()).expect("staging");
    std::fs::write(model.part(), vec![0xa5u8; 20_000]).expect("a stale part");
    let error = model.fetch(&model.source).expect_err("a stale part");
    assert!(
        matches!(error, FetchError::Hash { carried: true, .. }),
        "{error}"
    );
    assert!(error.is_transient(), "{error}");
    assert!(!model.part().exists(), "the stale part is dropped");
    let folder = model.fetch(&model.source).expect("fetched whole");
    let last = model.server.requests().last().cloned().expect("request");
    assert_eq!(last, ("/rev/model.safetensors".to_owned(), None));
    assert_eq!(
        std::fs::read(folder.join("model.safetensors")).expect("landed"),
        model.files[2].1
    );
}

#[test]
fn an_answer_of_another_length_is_never_kept_to_resume() {
    let model = FakeModel::serve();
    // A proxy's error page, served as 200.
    model.server.file(
        "/rev/model.safetensors",
        b"<html>try again later</html>".to_vec(),
    );
    let error = model.fetch(&model.source).expect_err("short");
    assert!(
        matches!(error, FetchError::Announced { announced: 28, .. }),
        "{error}"
    );
    // A page standing in for the file may go away: tried again, asking for the whole file.
    assert!(error.is_transient(), "{error}");
    assert!(!model.part().exists(), "nothing of it is kept");
    // The next attempt asks for the whole file again, not for a range after the page.
    model
        .server
        .file("/rev/model.safetensors", model.files[2].1.clone());
    model.fetch(&model.source).expect("fetch");
    let last = model.server.requests().last().cloned().expect("request");
    assert_eq!(last, ("/rev/model.safetensors".to_owned(), None));
}

#[test]
fn a_resumed_answer_from_another_offset_is_discarded() {
    let model = FakeModel::serve();
    model.server.cut_next("/rev/model.safetensors", 20_000);
    assert!(model.fetch(&model.source).is_err());
    model.server.range_from_start_next("/rev/model.safetensors");
    let error = model.fetch(&model.source).expect_err("misplaced");
    assert!(
        matches!(
            error,
            FetchError::Resume {
                expected: 20_000,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        !model.part().exists(),
        "the part it would have extended is dropped"
    );
    let folder = model.fetch(&model.source).expect("fetch");
    assert_eq!(
        std::fs::read(folder.join("model.safetensors")).expect("landed"),
        model.files[2].1
    );
}

/// A `.part` longer than the file now served under the URL (it changed there): the server
/// refuses the range (416), the part goes, and the next attempt asks for the whole file, which
/// is then refused for its length; the right file served again lands.
#[test]
fn a_range_the_server_refuses_drops_the_part() {
    let model = FakeModel::serve();
    model.server.cut_next("/rev/model.safetensors", 20_000);
    assert!(model.fetch(&model.source).is_err());
    model.server.file(
        "/rev/model.safetensors",
        model.files[2].1[..10_000].to_vec(),
    );
    let error = model.fetch(&model.source).expect_err("refused range");
    assert!(
        matches!(error, FetchError::Resume { expected: 20_000, ref found, .. } if found == "bytes */10000"),
        "{error}"
    );
    assert!(error.is_transient(), "{error}");
    assert!(!model.part().exists(), "the part is dropped");
    let error = model.fetch(&model.source).expect_err("a shorter file");
    assert!(
        matches!(
            error,
            FetchError::Announced {
                announced: 10_000,
                ..
            }
        ),
        "{error}"
    );
    let last = model.server.requests().last().cloned().expect("request");
    assert_eq!(last, ("/rev/model.safetensors".to_owned(), None));
    model
        .server
        .file("/rev/model.safetensors", model.files[2].1.clone());
    let folder = model.fetch(&model.source).expect("fetch");
    assert_eq!(
        std::fs::read(folder.join("model.safetensors")).expect("landed"),
        model.files[2].1
    );
}

#[test]
fn a_fetch_waits_for_another_process_fetching_the_same_model() {
    use std::os::fd::AsRawFd;
    let model = FakeModel::serve();
    // "Another process": an flock held on the same lock file (flock locks belong to the open
    // file, so this one excludes the fetch's own as another process's would).
    let held =
        std::fs::File::create(model.cache.path().join(".model-test.lock")).expect("lock file");
    // SAFETY: flock(2) on a descriptor this test owns and keeps open.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    let fetching = std::thread::scope(|scope| {
        let fetching = scope.spawn(|| model.fetch(&model.source));
        std::thread::sleep(std::time::Duration::from_millis(1_200));
        assert!(!fetching.is_finished(), "it waits instead of failing");
        assert!(
            model.server.requests().is_empty(),
            "and asks the server nothing meanwhile"
        );
        drop(held);
        fetching.join().expect("thread")
    });
    let folder = fetching.expect("fetched once let go");
    assert!(is_complete(&folder, &model.source));
}

/// A landed copy is checked under the fetch's lock: intact, damaged (removed whole, nothing
/// left aside), or gone by the time the lock is held (another process removed it).
#[test]
fn a_landed_copy_is_checked_and_removed_only_when_damaged_under_the_lock() {
    use std::os::fd::AsRawFd;
    let model = FakeModel::serve();
    let cache = model.cache.path();
    let folder = model.fetch(&model.source).expect("fetch");
    assert_eq!(
        discard_if_damaged(cache, &model.source).expect("check"),
        Landed::Intact
    );
    assert!(is_complete(&folder, &model.source));

    // The weights damaged in place, their size kept.
    let weights = folder.join("model.safetensors");
    let size = std::fs::metadata(&weights).expect("size").len() as usize;
    std::fs::write(&weights, vec![0u8; size]).expect("damage");
    assert_eq!(
        discard_if_damaged(cache, &model.source).expect("check"),
        Landed::Removed(vec!["model.safetensors".to_string()])
    );
    assert!(!folder.exists());
    let left: Vec<String> = std::fs::read_dir(cache)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // Landed again while "another process" holds the lock, and removes it before letting go:
    // the check waits for it, then finds nothing to check.
    let folder = model.fetch(&model.source).expect("fetch again");
    let held = std::fs::File::create(cache.join(".model-test.lock")).expect("lock file");
    // SAFETY: flock(2) on a descriptor this test owns and keeps open.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    let checked = std::thread::scope(|scope| {
        let checking = scope.spawn(|| discard_if_damaged(cache, &model.source));
        std::thread::sleep(std::time::Duration::from_millis(800));
        assert!(!checking.is_finished(), "it waits for the lock");
        std::fs::remove_dir_all(&folder).expect("the other process removes it");
        drop(held);
        checking.join().expect("thread")
    });
    assert_eq!(checked.expect("check"), Landed::Gone);
}

#[test]
fn the_real_files_fetch_and_load() {
    let Some(dir) = model_dir() else { return };
    let (server, cache) = (FileServer::start(), tempfile::tempdir().expect("dir"));
    let mut source = Source::pinned();
    for file in &source.files {
        server.file(
            &format!("/rev/{}", file.name),
            std::fs::read(dir.join(&file.name)).expect("read model"),
        );
    }
    source.base_url = format!("{}/rev", server.url());
    let folder = block_on(fetch(&reqwest::Client::new(), &source, cache.path())).expect("fetch");
    let model = Embedder::load(&folder).expect("load the fetched model");
    assert_eq!(model.embed_query("publish an event").len(), DIMENSIONS);
}

/// A copy of the model folder whose `config.json` is `edit`ed and in whose
/// `model.safetensors` the first value of a tensor is replaced (`(name, value)`; without one
/// the weights are linked, not copied).
fn altered_model(
    dir: &Path,
    edit: impl FnOnce(&mut Value),
    replace: Option<(&str, f32)>,
) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("dir");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).expect("config"))
            .expect("config json");
    edit(&mut config);
    std::fs::write(copy.path().join("config.json"), config.to_string()).expect("write");
    std::os::unix::fs::symlink(
        dir.join("tokenizer.json"),
        copy.path().join("tokenizer.json"),
    )
    .expect("link");
    let weights = copy.path().join("model.safetensors");
    match replace {
        Some((name, value)) => {
            let mut bytes = std::fs::read(dir.join("model.safetensors")).expect("read");
            set_first_value(&mut bytes, name, value);
            std::fs::write(&weights, bytes).expect("write");
        }
        None => std::os::unix::fs::symlink(dir.join("model.safetensors"), &weights).expect("link"),
    }
    copy
}

/// Writes `value` over the first value of the tensor `name` in a safetensors file's bytes.
fn set_first_value(bytes: &mut [u8], name: &str, value: f32) {
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("length")) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).expect("header");
    let start = header[name]["data_offsets"][0].as_u64().expect("offset") as usize;
    let at = 8 + header_len + start;
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn a_damaged_or_hostile_model_folder_is_refused_at_load() {
    let Some(dir) = model_dir() else { return };
    // Sizes that would have been reserved before the weights were looked at (the process
    // aborted), too few positions for `[CLS]` and `[SEP]`, and an epsilon that flattens every
    // embedding into one.
    let configs: [(&str, Value); 6] = [
        ("intermediate_size", Value::from(1_000_000_000_000u64)),
        ("num_hidden_layers", Value::from(1_000_000_000_000_000u64)),
        ("vocab_size", Value::from(100_000_000_000_000_000u64)),
        ("max_position_embeddings", Value::from(1)),
        ("layer_norm_eps", Value::from(-1.0)),
        ("layer_norm_eps", Value::from(1e300)),
    ];
    for (field, value) in configs {
        let copy = altered_model(&dir, |c| c[field] = value.clone(), None);
        let error = Embedder::load(copy.path()).err();
        assert!(
            matches!(error, Some(EmbedError::Unsupported(_))),
            "{field} = {value}: {error:?}"
        );
    }
    // One value that is not a number, in a bias (the linear weights were checked already).
    for (name, value) in [
        ("encoder.layer.0.output.dense.bias", f32::NAN),
        ("embeddings.position_embeddings.weight", f32::INFINITY),
        ("embeddings.LayerNorm.weight", f32::NAN),
    ] {
        let copy = altered_model(&dir, |_| {}, Some((name, value)));
        let error = Embedder::load(copy.path()).err();
        assert!(
            matches!(&error, Some(EmbedError::NotFinite(tensor)) if tensor == name),
            "{name}: {error:?}"
        );
    }
    // The folder itself, linked, still loads.
    let copy = altered_model(&dir, |_| {}, None);
    assert!(Embedder::load(copy.path()).is_ok());
}

// The encoder's linear layers (`iii_embed_kernel`): f16 rounding, and each kernel's product.

fn lcg_unit(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
}

#[test]
fn f16_rounding_matches_known_values_and_round_trips() {
    assert_eq!(f16_bits(0.0), 0);
    assert_eq!(f16_bits(-0.0), 0x8000);
    assert_eq!(f16_bits(1.0), 0x3c00);
    assert_eq!(f16_bits(-2.0), 0xc000);
    assert_eq!(f16_bits(65504.0), 0x7bff);
    assert_eq!(f16_bits(65520.0), 0x7c00);
    assert_eq!(f16_bits(1e-8), 0);
    // The smallest subnormal, and a tie between 0 and it that rounds to even (0).
    assert_eq!(f16_bits(2f32.powi(-24)), 1);
    assert_eq!(f16_bits(2f32.powi(-25)), 0);
    // 1 + 2^-11 is halfway between 1 and the next f16: ties to even, 1.
    assert_eq!(f16_bits(1.0 + 2f32.powi(-11)), 0x3c00);
    assert_eq!(f16_bits(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
    assert!(f16_to_f32(f16_bits(f32::NAN)).is_nan());
    for bits in 0..=u16::MAX {
        let v = f16_to_f32(bits);
        if !v.is_nan() {
            assert_eq!(f16_bits(v), bits, "{bits:#x} → {v}");
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn f16_rounding_agrees_with_the_hardware() {
    use std::arch::x86_64::*;
    if !std::arch::is_x86_feature_detected!("f16c") {
        return;
    }
    let mut seed = 11;
    for i in 0..200_000 {
        let scale = 2f32.powi((i % 60) - 30);
        let v = lcg_unit(&mut seed) * scale;
        // SAFETY: the CPU has F16C (checked above).
        let hw = unsafe {
            _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set1_ps(v)))
        } as u16;
        assert_eq!(f16_bits(v), hw, "{v:e}");
    }
}

/// The product of every kernel this CPU has equals the naive one over the same f16-rounded
/// weights, for token counts across the tile boundaries and a width that is not a whole
/// number of panels.
#[test]
fn kernels_compute_the_product_of_the_rounded_weights() {
    let mut seed = 5;
    // Three panels, the last partly used: a pair and a single for AVX-512.
    let (out, inp) = (40, 24);
    let w: Vec<f32> = (0..out * inp).map(|_| lcg_unit(&mut seed)).collect();
    let rounded: Vec<f32> = w.iter().map(|&v| f16_to_f32(f16_bits(v))).collect();
    for kernel in Kernel::available() {
        let linear = Linear::new(&w, out, inp, kernel).expect("fits f16");
        for n in [1, 2, 5, 6, 7, 11, 12, 13, 20, 25] {
            let x: Vec<f32> = (0..n * inp).map(|_| lcg_unit(&mut seed)).collect();
            let start: Vec<f32> = (0..n * out).map(|_| lcg_unit(&mut seed)).collect();
            let mut dst = start.clone();
            linear.add_product(&x, &mut dst);
            for t in 0..n {
                for o in 0..out {
                    let want = start[t * out + o]
                        + (0..inp)
                            .map(|k| x[t * inp + k] * rounded[o * inp + k])
                            .sum::<f32>();
                    let got = dst[t * out + o];
                    assert!((got - want).abs() < 1e-5, "{kernel:?} n={n} [{t}][{o}]");
                }
            }
            // Any split of the panels gives the same sums, each output from its own panel.
            let panels = linear.panels();
            assert_eq!(panels, 0..3);
            for middle in 0..=panels.end {
                let mut halves = Vec::new();
                for part in [0..middle, middle..panels.end] {
                    let mut sums = vec![0.0; n * linear.outputs_of(&part).len()];
                    linear.add_product_of(part, &x, &mut sums);
                    halves.push(sums);
                }
                let (a, b) = (&halves[0], &halves[1]);
                let width_a = (middle * PANEL).min(out);
                let joined: Vec<f32> = (0..n)
                    .flat_map(|t| {
                        let b_row = &b[t * (out - width_a)..(t + 1) * (out - width_a)];
                        a[t * width_a..(t + 1) * width_a].iter().chain(b_row)
                    })
                    .copied()
                    .collect();
                let mut whole = vec![0.0; n * out];
                linear.add_product(&x, &mut whole);
                assert_eq!(joined, whole, "{kernel:?} n={n} split at panel {middle}");
            }
        }
    }
}

#[test]
fn a_weight_beyond_f16_is_refused() {
    assert!(Linear::new(&[1.0, 7e4], 1, 2, Kernel::Portable).is_none());
}
