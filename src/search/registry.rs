//! Registry search: the `installable` part of a search answer. The same capabilities go to the
//! public workers registry (each capability, then its informative terms, up to six list
//! queries, all at once); verified authors' workers that are not installed are asked for their
//! API reference, and their functions are ranked like the catalog's. Up to two workers and six
//! functions come back, each worker with the `compose::add` call that installs it.
//!
//! Fail-open and bounded: a registry that errors, answers nonsense or never answers costs at
//! most one wait per phase (list, then info) and yields an empty section, never an error.
//!
//! The HTTP client is not here: [`WorkerSource`] is what this module needs from one (the shared
//! registry client, `crate::registry::Registry`, implements it).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;
use serde_json::{Value, json};

use super::catalog::{Catalog, Tool, is_excluded};
use super::query::Capability;
use super::rank::{coverage_prune, ranked_hits, round_robin};
use super::response::{Candidate, Install, Installable};
use crate::registry::{FunctionContract, Registry, RegistryError, Release, Worker};

/// List queries per search (contract: 6).
pub const MAX_QUERIES: usize = 6;
/// Registry workers whose API reference is fetched per search (contract: 6).
pub const MAX_CANDIDATES: usize = 6;
/// Workers in the `installable` section (contract: 2).
pub const MAX_WORKERS: usize = 2;
/// Functions in the `installable` section (contract: 6).
pub const MAX_FUNCTIONS: usize = 6;
/// How long each phase (the list queries, then the info requests) may take before search goes
/// on without the answers that have not come. Registry answers are cached by the client, so a
/// warm search pays nothing; a cold or dead registry costs at most twice this.
pub const DEFAULT_PHASE_WAIT: Duration = Duration::from_millis(1500);

/// Where registry search finds workers that are not installed, and their functions: what it
/// needs from a registry client (`directory::registry::workers::*`).
#[async_trait]
pub trait WorkerSource: Send + Sync {
    /// The first page of `list {search}`: workers matching the free text, best first.
    async fn find_workers(&self, search: &str) -> Result<Vec<Worker>, RegistryError>;
    /// The functions of `info {name, tag: "latest"}`: the worker's API reference.
    async fn worker_functions(&self, name: &str) -> Result<Vec<FunctionContract>, RegistryError>;
}

/// The shared registry client serves search from its cache: the first page of a `list` by
/// search text, and the functions of the worker's latest release.
#[async_trait]
impl WorkerSource for Registry {
    async fn find_workers(&self, search: &str) -> Result<Vec<Worker>, RegistryError> {
        let page = self.list_workers(Some(search), None).await?;
        Ok(page.workers.clone())
    }

    async fn worker_functions(&self, name: &str) -> Result<Vec<FunctionContract>, RegistryError> {
        let info = self.worker_info(name, &Release::latest()).await?;
        Ok(info.api_reference.functions.clone())
    }
}

/// The list queries: each capability's text, then the capabilities' terms round-robin
/// (deduplicated), until [`MAX_QUERIES`]. The registry's fuzzy match misses long sentences that
/// a single word (`email`) finds.
pub fn registry_queries(capabilities: &[Capability]) -> Vec<String> {
    let mut queries: Vec<String> = Vec::new();
    for capability in capabilities.iter().take(MAX_QUERIES) {
        if !queries.contains(&capability.text) {
            queries.push(capability.text.clone());
        }
    }
    let longest = capabilities
        .iter()
        .map(|c| c.terms.len())
        .max()
        .unwrap_or(0);
    for round in 0..longest {
        for capability in capabilities {
            if queries.len() == MAX_QUERIES {
                return queries;
            }
            if let Some(term) = capability.terms.get(round)
                && !queries.contains(term)
            {
                queries.push(term.clone());
            }
        }
    }
    queries
}

/// A registry worker that may be offered.
#[derive(Clone, Debug, PartialEq)]
struct Offer {
    name: String,
    version: String,
    description: String,
}

/// The `installable` section for these capabilities. Never fails: every error, malformed answer
/// or late answer just leaves something out.
pub async fn installable(
    registry: &dyn WorkerSource,
    phase_wait: Duration,
    catalog: &Catalog,
    capabilities: &[Capability],
) -> Vec<Installable> {
    let queries = registry_queries(capabilities);
    if queries.is_empty() {
        return Vec::new();
    }
    let lists = join_all(queries.iter().map(|query| async move {
        match tokio::time::timeout(phase_wait, registry.find_workers(query)).await {
            Ok(Ok(workers)) => Some(workers),
            Ok(Err(e)) => {
                tracing::debug!(query, "registry search: list failed, skipped: {e}");
                None
            }
            Err(_) => {
                tracing::debug!(query, "registry search: list too slow, skipped");
                None
            }
        }
    }))
    .await;
    let installed = catalog.namespaces();
    let per_query: Vec<Vec<Offer>> = lists
        .into_iter()
        .flatten()
        .map(|workers| offers(workers, &installed))
        .collect();
    let offered = round_robin_offers(&per_query, MAX_CANDIDATES);
    if offered.is_empty() {
        return Vec::new();
    }
    let infos = join_all(offered.iter().map(|offer| async move {
        match tokio::time::timeout(phase_wait, registry.worker_functions(&offer.name)).await {
            Ok(Ok(info)) => Some(info),
            Ok(Err(e)) => {
                tracing::debug!(worker = %offer.name, "registry search: info failed, skipped: {e}");
                None
            }
            Err(_) => {
                tracing::debug!(worker = %offer.name, "registry search: info too slow, skipped");
                None
            }
        }
    }))
    .await;
    let mut owners: HashMap<String, usize> = HashMap::new();
    let mut pooled: Vec<Tool> = Vec::new();
    for (index, info) in infos.iter().enumerate() {
        let Some(functions) = info else { continue };
        for contract in contracts(functions, catalog) {
            if !owners.contains_key(&contract.name) {
                owners.insert(contract.name.clone(), index);
                pooled.push(contract);
            }
        }
    }
    assemble(&rank_contracts(&pooled, capabilities), &owners, &offered)
}

/// Verified authors' workers, minus those already installed, in the registry's order.
fn offers(workers: Vec<Worker>, installed: &HashSet<&str>) -> Vec<Offer> {
    workers
        .into_iter()
        .filter(|w| w.author.as_ref().is_some_and(|a| a.verified))
        .filter(|w| !w.name.is_empty() && !installed.contains(w.name.as_str()))
        .map(|w| Offer {
            name: w.name,
            version: w.version.unwrap_or_default(),
            description: w.description.unwrap_or_default(),
        })
        .collect()
}

/// Round-robin across the per-query lists (each query gets a worker before any gets a second),
/// deduplicated by name, at most `budget`.
fn round_robin_offers(lists: &[Vec<Offer>], budget: usize) -> Vec<Offer> {
    let mut taken: Vec<Offer> = Vec::new();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..longest {
        for list in lists {
            if taken.len() == budget {
                return taken;
            }
            if let Some(offer) = list.get(round)
                && !taken.iter().any(|t| t.name == offer.name)
            {
                taken.push(offer.clone());
            }
        }
    }
    taken
}

/// What installing the worker would add: its functions that are not internal, not excluded and
/// not already installed under the same id.
fn contracts(functions: &[FunctionContract], catalog: &Catalog) -> Vec<Tool> {
    functions
        .iter()
        .filter(|f| {
            !f.is_internal()
                && !f.name.is_empty()
                && !is_excluded(&f.name)
                && !catalog.contains(&f.name)
        })
        .map(|f| Tool {
            name: f.name.clone(),
            description: f.description.clone().unwrap_or_default(),
            parameters: Some(f.request_schema.clone())
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({ "type": "object" })),
            // Offers are grouped under the registry worker that owns them, not by this.
            worker: None,
            engine_namespace: None,
        })
        .collect()
}

/// The pooled contracts ranked per capability (same BM25 and coverage prune as the catalog, no
/// namespace floor), merged round-robin up to [`MAX_FUNCTIONS`]: each as a candidate.
fn rank_contracts(pooled: &[Tool], capabilities: &[Capability]) -> Vec<Candidate> {
    let catalog = Catalog::build(pooled);
    let rankings: Vec<Vec<&str>> = capabilities
        .iter()
        .map(|c| {
            coverage_prune(ranked_hits(catalog.index(), &c.terms))
                .into_iter()
                .map(|h| catalog.tools()[h.doc].name.as_str())
                .collect()
        })
        .collect();
    round_robin(&rankings, MAX_FUNCTIONS)
        .into_iter()
        .filter_map(|id| catalog.get(id))
        .map(|tool| Candidate {
            function_id: tool.name.clone(),
            description: tool.description.clone(),
            engine_namespace: None,
        })
        .collect()
}

/// Groups ranked functions under the registry worker that published them (not their id's
/// prefix, which may differ), at most [`MAX_WORKERS`] workers.
fn assemble(
    ranked: &[Candidate],
    owners: &HashMap<String, usize>,
    offered: &[Offer],
) -> Vec<Installable> {
    let mut section: Vec<Installable> = Vec::new();
    for candidate in ranked {
        let Some(offer) = owners.get(&candidate.function_id).map(|&i| &offered[i]) else {
            continue;
        };
        match section.iter().position(|w| w.name == offer.name) {
            Some(i) => section[i].functions.push(candidate.clone()),
            None if section.len() < MAX_WORKERS => section.push(Installable {
                name: offer.name.clone(),
                version: offer.version.clone(),
                description: offer.description.clone(),
                functions: vec![candidate.clone()],
                install: Install::worker(&offer.name),
            }),
            None => {}
        }
    }
    section
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Instant;

    use super::*;
    use crate::registry::Author;
    use crate::search::query::prepare;

    fn capabilities(list: &[&str]) -> Vec<Capability> {
        prepare(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn worker(name: &str, verified: bool) -> Worker {
        Worker {
            name: name.into(),
            version: Some("1.2.3".into()),
            description: Some(format!("{name}: email delivery")),
            author: Some(Author {
                verified,
                ..Author::default()
            }),
            ..Worker::default()
        }
    }

    fn function(name: &str, description: &str) -> FunctionContract {
        FunctionContract {
            name: name.into(),
            description: Some(description.into()),
            ..FunctionContract::default()
        }
    }

    /// A registry in memory: `list` matches the search text (or any of its words) against
    /// names and descriptions, in insertion order; every call is recorded.
    #[derive(Default)]
    struct InMemory {
        workers: Vec<(Worker, Vec<FunctionContract>)>,
        calls: Mutex<Vec<String>>,
        slow_lists: Vec<String>,
    }

    impl InMemory {
        fn with(mut self, w: Worker, functions: Vec<FunctionContract>) -> InMemory {
            self.workers.push((w, functions));
            self
        }

        fn calls(&self) -> Vec<String> {
            self.calls.lock().map(|c| c.clone()).unwrap_or_default()
        }
    }

    #[async_trait]
    impl WorkerSource for InMemory {
        async fn find_workers(&self, search: &str) -> Result<Vec<Worker>, RegistryError> {
            if let Ok(mut calls) = self.calls.lock() {
                calls.push(format!("list {search}"));
            }
            if self.slow_lists.iter().any(|s| s == search) {
                std::future::pending::<()>().await;
            }
            let search = search.to_lowercase();
            Ok(self
                .workers
                .iter()
                .filter(|(w, _)| {
                    let text = format!("{} {}", w.name, w.description.clone().unwrap_or_default())
                        .to_lowercase();
                    text.contains(&search) || search.split(' ').any(|word| text.contains(word))
                })
                .map(|(w, _)| w.clone())
                .collect())
        }

        async fn worker_functions(
            &self,
            name: &str,
        ) -> Result<Vec<FunctionContract>, RegistryError> {
            if let Ok(mut calls) = self.calls.lock() {
                calls.push(format!("info {name}"));
            }
            self.workers
                .iter()
                .find(|(w, _)| w.name == name)
                .map(|(_, info)| info.clone())
                .ok_or(RegistryError::NotFound)
        }
    }

    /// A registry that never answers.
    struct Silent;

    #[async_trait]
    impl WorkerSource for Silent {
        async fn find_workers(&self, _: &str) -> Result<Vec<Worker>, RegistryError> {
            std::future::pending().await
        }
        async fn worker_functions(&self, _: &str) -> Result<Vec<FunctionContract>, RegistryError> {
            std::future::pending().await
        }
    }

    /// A registry that is down.
    struct Down;

    #[async_trait]
    impl WorkerSource for Down {
        async fn find_workers(&self, _: &str) -> Result<Vec<Worker>, RegistryError> {
            Err(RegistryError::Unreachable)
        }
        async fn worker_functions(&self, _: &str) -> Result<Vec<FunctionContract>, RegistryError> {
            Err(RegistryError::Unreachable)
        }
    }

    fn installed(names: &[&str]) -> Catalog {
        let tools: Vec<Tool> = names
            .iter()
            .map(|n| Tool {
                name: n.to_string(),
                description: String::new(),
                parameters: json!({}),
                worker: None,
                engine_namespace: None,
            })
            .collect();
        Catalog::build(&tools)
    }

    const WAIT: Duration = Duration::from_millis(200);

    #[test]
    fn queries_are_each_capability_then_its_terms_round_robin() {
        assert_eq!(
            registry_queries(&capabilities(&["send an email message"])),
            ["send an email message", "send", "email", "message"]
        );
        assert_eq!(
            registry_queries(&capabilities(&["the of and"])),
            ["the of and"]
        );
        assert_eq!(
            registry_queries(&capabilities(&["send an email", "resize images quickly"])),
            [
                "send an email",
                "resize images quickly",
                "send",
                "resize",
                "email",
                "image"
            ]
        );
        let six = capabilities(&["a b", "c d", "e f", "g h", "i j", "k l"]);
        assert_eq!(registry_queries(&six).len(), MAX_QUERIES);
        assert!(registry_queries(&[]).is_empty());
        // A term equal to an earlier query is not asked twice.
        assert_eq!(
            registry_queries(&capabilities(&["email", "send email"])),
            ["email", "send email", "send"]
        );
    }

    fn mail_registry() -> InMemory {
        InMemory::default()
            .with(
                worker("resend", true),
                vec![
                    function("resend::emails::send", "Send an email. Any size."),
                    function("resend::emails::batch", "Send many emails at once."),
                    FunctionContract {
                        metadata: json!({ "internal": true }),
                        ..function("resend::emails::send_internal", "Send an email internally.")
                    },
                    function("engine::email::send", "Send an email from the engine."),
                ],
            )
            .with(
                worker("sketchy-mail", false),
                vec![function("sketchy::send_email", "Send an email cheaply.")],
            )
            .with(
                worker("mailer", true),
                vec![function("mailer::send", "Send an email over SMTP.")],
            )
            .with(
                worker("postmark", true),
                vec![function(
                    "postmark::email::send",
                    "Send an email with Postmark.",
                )],
            )
    }

    #[tokio::test]
    async fn verified_not_installed_workers_up_to_two_with_their_install_call() {
        let registry = mail_registry();
        let catalog = installed(&["mailer::inbox::list"]);
        let section =
            installable(&registry, WAIT, &catalog, &capabilities(&["send an email"])).await;
        let names: Vec<&str> = section.iter().map(|w| w.name.as_str()).collect();
        // `sketchy-mail` is unverified, `mailer` is installed, and only two workers come back.
        assert_eq!(names, ["resend", "postmark"]);
        let resend = &section[0];
        assert_eq!(resend.version, "1.2.3");
        assert_eq!(resend.description, "resend: email delivery");
        assert_eq!(
            resend.functions,
            [
                Candidate {
                    function_id: "resend::emails::send".into(),
                    description: "Send an email.".into(),
                    engine_namespace: None,
                },
                Candidate {
                    function_id: "resend::emails::batch".into(),
                    description: "Send many emails at once.".into(),
                    engine_namespace: None,
                },
            ]
        );
        assert_eq!(
            serde_json::to_value(&resend.install).unwrap_or_default(),
            json!({ "function": "compose::add", "payload": { "worker": "resend" } })
        );
        let calls = registry.calls();
        assert!(
            calls.contains(&"list send an email".to_string()),
            "{calls:?}"
        );
        assert!(calls.contains(&"list email".to_string()), "{calls:?}");
        assert!(
            !calls.contains(&"info sketchy-mail".to_string()),
            "{calls:?}"
        );
        assert!(!calls.contains(&"info mailer".to_string()), "{calls:?}");
    }

    #[tokio::test]
    async fn installed_namespaces_and_already_installed_ids_are_not_offered() {
        let registry = InMemory::default()
            .with(
                worker("iii-email", true),
                vec![
                    function("email::send", "Send an email."),
                    function("email::batch_send", "Send an email to many recipients."),
                ],
            )
            .with(
                worker("resend", true),
                vec![function("resend::emails::send", "Send an email.")],
            );
        // `email::send` is installed (its worker's name differs from its prefix); `resend` is
        // an installed namespace, so the worker is not offered at all.
        let catalog = installed(&["email::send", "resend::domains::verify"]);
        let section =
            installable(&registry, WAIT, &catalog, &capabilities(&["send an email"])).await;
        let ids: Vec<&str> = section
            .iter()
            .flat_map(|w| w.functions.iter().map(|f| f.function_id.as_str()))
            .collect();
        assert_eq!(ids, ["email::batch_send"]);
        assert_eq!(section[0].name, "iii-email");
        assert!(!registry.calls().contains(&"info resend".to_string()));
    }

    #[tokio::test]
    async fn at_most_six_functions() {
        let many: Vec<FunctionContract> = (0..10)
            .map(|i| function(&format!("bulk::send_email_{i}"), "Send an email in bulk."))
            .collect();
        let registry = InMemory::default().with(worker("bulk", true), many);
        let section = installable(
            &registry,
            WAIT,
            &installed(&[]),
            &capabilities(&["send an email"]),
        )
        .await;
        assert_eq!(section.len(), 1);
        assert_eq!(section[0].functions.len(), MAX_FUNCTIONS);
    }

    #[tokio::test]
    async fn a_registry_that_never_answers_costs_one_bounded_wait_per_phase() {
        let started = Instant::now();
        let section = installable(
            &Silent,
            WAIT,
            &installed(&[]),
            &capabilities(&["send an email", "store a file"]),
        )
        .await;
        assert!(section.is_empty());
        assert!(
            started.elapsed() < WAIT * 2 + Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_registry_that_errors_yields_nothing() {
        let section = installable(
            &Down,
            WAIT,
            &installed(&[]),
            &capabilities(&["send an email"]),
        )
        .await;
        assert!(section.is_empty());
    }

    #[tokio::test]
    async fn a_slow_query_is_skipped_and_the_others_still_count() {
        let mut registry = mail_registry();
        registry.slow_lists = vec!["send an email".into(), "send".into()];
        let started = Instant::now();
        let section = installable(
            &registry,
            WAIT,
            &installed(&[]),
            &capabilities(&["send an email"]),
        )
        .await;
        assert!(started.elapsed() < WAIT * 2 + Duration::from_millis(300));
        assert!(!section.is_empty(), "the `email` query answered");
    }

    #[tokio::test]
    async fn no_capability_left_means_no_registry_request() {
        let registry = mail_registry();
        let section = installable(&registry, WAIT, &installed(&[]), &[]).await;
        assert!(section.is_empty());
        assert!(registry.calls().is_empty());
    }
}
