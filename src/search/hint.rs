//! The pre-generate hint: a `<discovery_assist>` block appended to the system prompt of a
//! harness generation, pointing the model at `directory::search_functions`, but only when it
//! can help. Gates, in order (the first that fails skips, with its reason):
//!
//! 1. `search_unavailable`: the search is not a callable tool of this generation;
//! 2. `already_searched`: a search result came back since the latest user message;
//! 3. `narrow_surface`: the tools span fewer than `hint_min_workers` workers (0: never narrow);
//! 4. `already_operating`: a real function (not `engine::…`, not the search) answered since the
//!    latest user message;
//! 5. `task_guided`: the text since the latest user message names a callable function id;
//! 6. `hint_already_sent`: at most once per turn; a replay of the same or an earlier step of
//!    the turn gets it again, a later step does not, a new turn re-arms it.
//!
//! Pure apart from the per-session record of gate 6.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::catalog::{ENGINE_PREFIX, SEARCH_FUNCTION_ID};
use super::session::{Digest, Sessions, digest};
use crate::locks;

/// Why a generation got no hint (the annotation's `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    SearchUnavailable,
    AlreadySearched,
    NarrowSurface,
    AlreadyOperating,
    TaskGuided,
    HintAlreadySent,
}

impl Skip {
    pub fn reason(self) -> &'static str {
        match self {
            Skip::SearchUnavailable => "search_unavailable",
            Skip::AlreadySearched => "already_searched",
            Skip::NarrowSurface => "narrow_surface",
            Skip::AlreadyOperating => "already_operating",
            Skip::TaskGuided => "task_guided",
            Skip::HintAlreadySent => "hint_already_sent",
        }
    }
}

/// How the generation exposes functions to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expose {
    /// Through the harness's single `agent_trigger` tool (the default).
    AgentTrigger,
    /// As tools of their own (`native`, and any other value).
    Native,
}

impl Expose {
    fn parse(value: Option<&str>) -> Expose {
        match value {
            None | Some("agent_trigger") => Expose::AgentTrigger,
            Some(_) => Expose::Native,
        }
    }
}

/// The hint block for a generation.
pub fn render(expose: Expose, functions_generation: u64) -> String {
    let mut text = format!(
        "<discovery_assist functions_generation={functions_generation}>\n\
This task may need a capability you have not used yet. Before guessing, call {SEARCH_FUNCTION_ID} ONCE with one to six short capabilities in English, derived from the user's goal and from where the work stands now (keep proper names, URLs and ids exactly as written). Never invent a function id. Treat what comes back as candidates: choose the ones you need and fetch all their contracts in one engine::functions::info call with {{\"function_ids\": [...]}} before calling them. Calls the user or your instructions already gave you as verified need no search.\n"
    );
    match expose {
        Expose::AgentTrigger => text.push_str(
            "Make the search through agent_trigger with exactly this envelope:\n\
{\"function\": \"directory::search_functions\", \"description\": \"Find functions for the capabilities this task still lacks\", \"payload\": {\"capabilities\": [\"<capability>\", \"<another capability>\"]}}\n",
        ),
        Expose::Native => text.push_str(
            "Call the directory::search_functions tool directly; its one required field is `capabilities`, a list of one to six strings.\n",
        ),
    }
    text.push_str("</discovery_assist>");
    text
}

/// `directory::hint-preview`: the hint in both exposure modes, as a generation 0 would get it.
pub fn preview() -> Value {
    json!({
        "agent_trigger": render(Expose::AgentTrigger, 0),
        "native": render(Expose::Native, 0),
    })
}

/// The turn and step a session's hint last went out in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// The turn id's digest (a caller may send an id of any length).
    turn: Digest,
    step: u64,
}

/// The per-session record of gate 6.
#[derive(Debug, Default)]
pub struct Memory {
    sessions: Sessions<Option<Sent>>,
}

impl Memory {
    /// Whether a hint goes out for this (session, turn, step), recording a new turn. A missing
    /// session id remembers nothing, so every such generation may get the hint.
    fn once_per_turn(&mut self, session: &str, turn_id: &str, step: u64) -> bool {
        if session.is_empty() {
            return true;
        }
        let turn = digest(turn_id);
        let record = self.sessions.entry(session);
        match record {
            Some(sent) if sent.turn == turn => step <= sent.step,
            _ => {
                *record = Some(Sent { turn, step });
                true
            }
        }
    }
}

/// A transcript message, as far as the gates read it.
struct Message<'a>(&'a Value);

impl<'a> Message<'a> {
    fn role(&self) -> &'a str {
        self.0["role"].as_str().unwrap_or_default()
    }

    fn is_user(&self) -> bool {
        self.role() == "user"
    }

    /// The function id of a function result (`tool_result`/`tool_name` are older names).
    fn function_result(&self) -> Option<&'a str> {
        if !matches!(self.role(), "function_result" | "tool_result") {
            return None;
        }
        self.0["function_id"]
            .as_str()
            .or_else(|| self.0["tool_name"].as_str())
    }

    /// The message's text: a string content, or its `text` blocks.
    fn texts(&self) -> Vec<&'a str> {
        match &self.0["content"] {
            Value::String(text) => vec![text.as_str()],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"].as_str().is_none_or(|t| t == "text"))
                .filter_map(|b| b["text"].as_str())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The namespace a tool counts under for the surface width (the whole name when unqualified).
fn worker_of(name: &str) -> &str {
    name.split_once("::").map_or(name, |(ns, _)| ns)
}

/// A token of task text as an id: trimmed of anything but letters, digits, `:`, `_` and `-`.
fn as_function_id(token: &str) -> &str {
    token.trim_matches(|c: char| !(c.is_alphanumeric() || matches!(c, ':' | '_' | '-')))
}

/// A pre-generate request, read leniently (a missing field is empty: the hook must never fail
/// a generation).
struct Generation<'a> {
    session_id: &'a str,
    turn_id: String,
    step: u64,
    system_prompt: &'a str,
    messages: Vec<Message<'a>>,
    functions_generation: u64,
    tools: Vec<&'a str>,
    /// The same names, to look up: a task's tokens are each looked up once, so a request of
    /// many tokens and many tools costs their sum, not their product.
    tool_set: HashSet<&'a str>,
    expose: Expose,
}

impl<'a> Generation<'a> {
    fn read(request: &'a Value) -> Generation<'a> {
        let generate = &request["generate"];
        let tools: Vec<&str> = generate["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        let turn_id = match &request["turn_id"] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        Generation {
            session_id: request["session_id"].as_str().unwrap_or_default(),
            turn_id,
            step: request["step"].as_u64().unwrap_or(0),
            system_prompt: generate["system_prompt"].as_str().unwrap_or_default(),
            messages: generate["messages"]
                .as_array()
                .map(|m| m.iter().map(Message).collect())
                .unwrap_or_default(),
            functions_generation: generate["functions_generation"].as_u64().unwrap_or(0),
            tool_set: tools.iter().copied().collect(),
            tools,
            expose: Expose::parse(generate["expose"].as_str()),
        }
    }

    /// The messages of the current task: from the latest user message on (all, without one).
    fn current_task(&self) -> &[Message<'a>] {
        let start = self
            .messages
            .iter()
            .rposition(Message::is_user)
            .unwrap_or(0);
        &self.messages[start..]
    }

    fn results_in_task(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.current_task()
            .iter()
            .filter_map(Message::function_result)
    }

    fn width(&self) -> usize {
        let mut workers: Vec<&str> = self
            .tools
            .iter()
            .filter(|t| **t != SEARCH_FUNCTION_ID && !t.starts_with(ENGINE_PREFIX))
            .map(|t| worker_of(t))
            .collect();
        workers.sort_unstable();
        workers.dedup();
        workers.len()
    }

    /// Whether the task's own words (not function results) name a callable function.
    fn names_a_callable_function(&self) -> bool {
        self.current_task()
            .iter()
            .filter(|m| m.function_result().is_none())
            .flat_map(Message::texts)
            .flat_map(str::split_whitespace)
            .filter(|token| token.contains("::"))
            .any(|token| self.tool_set.contains(as_function_id(token)))
    }

    /// Gates 1 to 5.
    fn stateless_gate(&self, hint_min_workers: u64) -> Option<Skip> {
        if !self.tool_set.contains(SEARCH_FUNCTION_ID) {
            return Some(Skip::SearchUnavailable);
        }
        if self.results_in_task().any(|id| id == SEARCH_FUNCTION_ID) {
            return Some(Skip::AlreadySearched);
        }
        if hint_min_workers > 0 && (self.width() as u64) < hint_min_workers {
            return Some(Skip::NarrowSurface);
        }
        if self
            .results_in_task()
            .any(|id| id != SEARCH_FUNCTION_ID && !id.starts_with(ENGINE_PREFIX))
        {
            return Some(Skip::AlreadyOperating);
        }
        if self.names_a_callable_function() {
            return Some(Skip::TaskGuided);
        }
        None
    }
}

/// `directory::pre-generate`: the hook's answer for one generation.
/// Only gate 6 holds the sessions' lock: the other gates read the request alone, so one large
/// request does not hold up the others.
pub fn pre_generate(memory: &Mutex<Memory>, request: &Value, hint_min_workers: u64) -> Value {
    let generation = Generation::read(request);
    let skip = generation.stateless_gate(hint_min_workers).or_else(|| {
        let mut memory = locks::lock(memory);
        (!memory.once_per_turn(generation.session_id, &generation.turn_id, generation.step))
            .then_some(Skip::HintAlreadySent)
    });
    let mut data = json!({
        "outcome": if skip.is_some() { "skipped" } else { "hint_injected" },
        "allowed_functions": generation.tools.len(),
        "functions_generation": generation.functions_generation,
    });
    let mut answer = json!({ "decision": "continue" });
    match skip {
        Some(skip) => data["reason"] = json!(skip.reason()),
        None => {
            let hint = render(generation.expose, generation.functions_generation);
            let system_prompt = if generation.system_prompt.is_empty() {
                hint
            } else {
                format!("{}\n\n{hint}", generation.system_prompt)
            };
            answer["mutations"] = json!({ "system_prompt": system_prompt });
        }
    }
    answer["annotations"] = json!({
        "directory": {
            "type": "console.transcript",
            "version": 1,
            "summary": if skip.is_some() { "directory · skipped" } else { "directory · hint injected" },
            "data": data,
        }
    });
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEARCH: &str = SEARCH_FUNCTION_ID;

    fn tools(names: &[&str]) -> Vec<Value> {
        names
            .iter()
            .map(|n| json!({ "name": n, "description": "d", "parameters": { "type": "object" } }))
            .collect()
    }

    /// A generation with the search and two other workers on the surface.
    fn request(messages: Vec<Value>) -> Value {
        json!({
            "session_id": "s1", "turn_id": "t1", "step": 0, "depth": 0,
            "generate": {
                "system_prompt": "You are helpful.",
                "messages": messages,
                "functions_generation": 7,
                "tools": tools(&[SEARCH, "mailer::send", "storage::put", "engine::functions::info"]),
            },
        })
    }

    fn user(text: &str) -> Value {
        json!({ "role": "user", "content": [{ "type": "text", "text": text }], "timestamp": 1 })
    }

    fn assistant(text: &str) -> Value {
        json!({ "role": "assistant", "content": [{ "type": "text", "text": text }], "timestamp": 2 })
    }

    fn result(function_id: &str) -> Value {
        json!({
            "role": "function_result", "function_call_id": "c1", "function_id": function_id,
            "content": [{ "type": "text", "text": "mailer::send storage::put" }],
            "details": {}, "is_error": false, "timestamp": 3,
        })
    }

    /// What the hook did: the system prompt it injected, or why it skipped.
    enum Outcome {
        Injected(String),
        Skipped(String),
    }

    impl Outcome {
        fn prompt(self) -> Option<String> {
            match self {
                Outcome::Injected(prompt) => Some(prompt),
                Outcome::Skipped(_) => None,
            }
        }

        fn reason(self) -> Option<String> {
            match self {
                Outcome::Skipped(reason) => Some(reason),
                Outcome::Injected(_) => None,
            }
        }
    }

    fn outcome(memory: &Mutex<Memory>, request: &Value, min: u64) -> Outcome {
        let answer = pre_generate(memory, request, min);
        assert_eq!(answer["decision"], "continue");
        let annotation = &answer["annotations"]["directory"];
        assert_eq!(annotation["type"], "console.transcript");
        assert_eq!(annotation["version"], 1);
        let data = &annotation["data"];
        assert_eq!(
            data["allowed_functions"],
            request["generate"]["tools"].as_array().map_or(0, Vec::len)
        );
        assert_eq!(
            data["functions_generation"],
            request["generate"]["functions_generation"]
                .as_u64()
                .unwrap_or(0)
        );
        match data["outcome"].as_str() {
            Some("hint_injected") => {
                assert_eq!(annotation["summary"], "directory · hint injected");
                assert!(data.get("reason").is_none());
                Outcome::Injected(
                    answer["mutations"]["system_prompt"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            }
            Some("skipped") => {
                assert_eq!(annotation["summary"], "directory · skipped");
                assert!(answer.get("mutations").is_none());
                Outcome::Skipped(data["reason"].as_str().unwrap_or_default().to_string())
            }
            other => panic!("outcome {other:?}"),
        }
    }

    fn skipped(request: &Value, min: u64) -> Option<String> {
        outcome(&Mutex::default(), request, min).reason()
    }

    #[test]
    fn a_fresh_task_on_a_wide_surface_gets_the_hint_appended() {
        let prompt = outcome(
            &Mutex::default(),
            &request(vec![user("Email the Q1 report")]),
            2,
        )
        .prompt()
        .unwrap_or_default();
        assert!(
            prompt.starts_with("You are helpful.\n\n<discovery_assist functions_generation=7>\n")
        );
        assert!(prompt.ends_with("</discovery_assist>"));
        let mut alone = request(vec![user("hi")]);
        alone["generate"]["system_prompt"] = json!("");
        let prompt = outcome(&Mutex::default(), &alone, 2)
            .prompt()
            .unwrap_or_default();
        assert!(prompt.starts_with("<discovery_assist"));
    }

    #[test]
    fn search_unavailable_when_the_search_is_not_a_tool() {
        let mut r = request(vec![user("x")]);
        r["generate"]["tools"] = json!(tools(&["mailer::send", "storage::put"]));
        assert_eq!(skipped(&r, 2).as_deref(), Some("search_unavailable"));
        assert_eq!(
            skipped(&json!({}), 2).as_deref(),
            Some("search_unavailable")
        );
    }

    #[test]
    fn already_searched_in_the_current_task_only() {
        let searched = request(vec![user("x"), assistant("searching"), result(SEARCH)]);
        assert_eq!(skipped(&searched, 2).as_deref(), Some("already_searched"));
        // A search for the previous task does not count once a new user message came.
        let earlier = request(vec![user("x"), result(SEARCH), user("something else")]);
        assert_eq!(skipped(&earlier, 2), None);
    }

    #[test]
    fn narrow_surface_counts_workers_without_the_search_and_engine() {
        let mut r = request(vec![user("x")]);
        r["generate"]["tools"] = json!(tools(&[
            SEARCH,
            "mailer::send",
            "mailer::inbox::list",
            "engine::functions::list"
        ]));
        assert_eq!(skipped(&r, 2).as_deref(), Some("narrow_surface"));
        assert_eq!(skipped(&r, 1), None);
        // 0 means never narrow, even with the search alone.
        r["generate"]["tools"] = json!(tools(&[SEARCH]));
        assert_eq!(skipped(&r, 0), None);
        assert_eq!(
            skipped(&request(vec![user("x")]), 3).as_deref(),
            Some("narrow_surface")
        );
    }

    #[test]
    fn already_operating_on_real_function_results_of_the_current_task() {
        let operating = request(vec![user("x"), result("mailer::send")]);
        assert_eq!(skipped(&operating, 2).as_deref(), Some("already_operating"));
        // Engine discovery is not operating (and its result text naming ids is not the task's).
        let discovering = request(vec![user("x"), result("engine::functions::list")]);
        assert_eq!(skipped(&discovering, 2), None);
        // Work for the previous task does not count.
        let earlier = request(vec![user("x"), result("mailer::send"), user("now this")]);
        assert_eq!(skipped(&earlier, 2), None);
        // Older field names are understood.
        let legacy = request(vec![
            user("x"),
            json!({ "role": "tool_result", "tool_name": "storage::put", "content": [] }),
        ]);
        assert_eq!(skipped(&legacy, 2).as_deref(), Some("already_operating"));
    }

    #[test]
    fn task_guided_when_the_task_names_a_callable_function() {
        for text in [
            "please call mailer::send now",
            "use `mailer::send`.",
            "(storage::put)",
            "\"mailer::send\",",
        ] {
            assert_eq!(
                skipped(&request(vec![user(text)]), 2).as_deref(),
                Some("task_guided"),
                "{text}"
            );
        }
        // The assistant's plan in the current task counts too; a string content as well.
        let planned = request(vec![user("x"), assistant("I will call storage::put")]);
        assert_eq!(skipped(&planned, 2).as_deref(), Some("task_guided"));
        let plain = request(vec![
            json!({ "role": "user", "content": "run mailer::send" }),
        ]);
        assert_eq!(skipped(&plain, 2).as_deref(), Some("task_guided"));
        // A function off the surface, or a mention in an earlier task, still gets the hint.
        assert_eq!(
            skipped(&request(vec![user("call resend::emails::send")]), 2),
            None
        );
        let earlier = request(vec![user("call mailer::send"), user("and now a report")]);
        assert_eq!(skipped(&earlier, 2), None);
        assert_eq!(
            skipped(&request(vec![user("a::b::c mailer:send")]), 2),
            None
        );
    }

    #[test]
    fn gates_apply_in_the_contract_order() {
        // Searched and operating and guided: the first gate that fails is reported.
        let r = request(vec![
            user("use mailer::send"),
            result("mailer::send"),
            result(SEARCH),
        ]);
        assert_eq!(skipped(&r, 2).as_deref(), Some("already_searched"));
        let r = request(vec![user("use mailer::send"), result("mailer::send")]);
        assert_eq!(skipped(&r, 9).as_deref(), Some("narrow_surface"));
        assert_eq!(skipped(&r, 2).as_deref(), Some("already_operating"));
    }

    fn at(turn: &str, step: u64) -> Value {
        let mut r = request(vec![user("do the thing")]);
        r["turn_id"] = json!(turn);
        r["step"] = json!(step);
        r
    }

    #[test]
    fn once_per_turn_with_replays() {
        let memory = Mutex::default();
        assert!(outcome(&memory, &at("t1", 2), 2).prompt().is_some());
        // The same step again (a replay), or an earlier one, gets it again.
        assert!(outcome(&memory, &at("t1", 2), 2).prompt().is_some());
        assert!(outcome(&memory, &at("t1", 1), 2).prompt().is_some());
        // A later step of the same turn does not.
        assert_eq!(
            outcome(&memory, &at("t1", 3), 2).reason().as_deref(),
            Some("hint_already_sent")
        );
        // A new generation or exposure mid-turn does not re-arm it.
        let mut changed = at("t1", 4);
        changed["generate"]["functions_generation"] = json!(8);
        changed["generate"]["expose"] = json!("native");
        assert_eq!(
            outcome(&memory, &changed, 2).reason().as_deref(),
            Some("hint_already_sent")
        );
        // A new turn does, and re-anchors at its step.
        assert!(outcome(&memory, &at("t2", 5), 2).prompt().is_some());
        assert!(outcome(&memory, &at("t2", 6), 2).reason().is_some());
        // Other sessions are independent.
        let mut other = at("t1", 3);
        other["session_id"] = json!("s2");
        assert!(outcome(&memory, &other, 2).prompt().is_some());
    }

    #[test]
    fn a_skipped_generation_does_not_use_up_the_turn() {
        let memory = Mutex::default();
        let mut narrow = at("t1", 0);
        narrow["generate"]["tools"] = json!(tools(&[SEARCH]));
        assert!(outcome(&memory, &narrow, 2).reason().is_some());
        assert!(outcome(&memory, &at("t1", 1), 2).prompt().is_some());
    }

    #[test]
    fn the_hint_text_in_both_exposure_modes() {
        let agent = render(Expose::AgentTrigger, 3);
        let native = render(Expose::Native, 3);
        for text in [&agent, &native] {
            assert!(text.starts_with("<discovery_assist functions_generation=3>\n"));
            assert!(text.ends_with("</discovery_assist>"));
            assert!(text.contains("directory::search_functions ONCE"));
            assert!(text.contains("one to six"));
            assert!(text.contains("in English"));
            assert!(text.contains("Never invent a function id"));
            assert!(text.contains("candidates"));
            assert!(text.contains("one engine::functions::info call"));
            assert!(text.contains("function_ids"));
            assert!(text.contains("verified"));
        }
        let envelope_line = agent
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_default();
        let envelope: Value = serde_json::from_str(envelope_line).unwrap_or_default();
        assert_eq!(envelope["function"], SEARCH);
        assert!(
            envelope["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty())
        );
        assert!(envelope["payload"]["capabilities"].is_array());
        assert!(native.contains("`capabilities`"));
        assert!(!native.contains("agent_trigger"));
        let mut r = request(vec![user("x")]);
        r["generate"]["expose"] = json!("something-else");
        let prompt = outcome(&Mutex::default(), &r, 2)
            .prompt()
            .unwrap_or_default();
        assert!(prompt.ends_with(&render(Expose::Native, 7)));
    }

    #[test]
    fn preview_renders_both_modes_at_generation_zero() {
        let p = preview();
        assert_eq!(p["agent_trigger"], render(Expose::AgentTrigger, 0));
        assert_eq!(p["native"], render(Expose::Native, 0));
    }

    #[test]
    fn long_ids_are_remembered_by_their_digest() {
        let memory = Mutex::default();
        let long = |c: &str| c.repeat(1 << 20);
        let mut first = at(&long("t"), 2);
        first["session_id"] = json!(long("s"));
        assert!(outcome(&memory, &first, 2).prompt().is_some());
        let mut later = first.clone();
        later["step"] = json!(3);
        assert_eq!(
            outcome(&memory, &later, 2).reason().as_deref(),
            Some("hint_already_sent")
        );
        // The record holds digests: a megabyte id keeps no megabyte.
        let memory = memory.into_inner().unwrap();
        let sent = memory.sessions.get(&long("s")).cloned().flatten();
        assert_eq!(sent.map(|s| s.turn), Some(digest(&long("t"))));
    }

    #[test]
    fn many_tokens_against_many_tools_cost_their_sum() {
        // 200,000 tokens against 100,000 tools: 2·10^10 comparisons if each token were
        // compared with each tool (minutes), a few hundred thousand lookups here.
        let task = vec!["zz::q"; 200_000].join(" ");
        let mut names: Vec<String> = (0..100_000).map(|i| format!("w{i}::f")).collect();
        names.push(SEARCH.to_string());
        let mut r = request(vec![user(&task)]);
        r["generate"]["tools"] =
            json!(names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>());
        let started = std::time::Instant::now();
        assert_eq!(skipped(&r, 2), None);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
}
