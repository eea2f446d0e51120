//! The wire's floor (issue 15): the least any worker on the same `iii-sdk` can do for the same
//! calls. The suite starts its own binary again as this worker (`BENCH_FLOOR_WORKER` names the
//! engine, `BENCH_FLOOR_ANSWER` a file holding a `skills::list` answer); it registers
//! `floor::list`, which answers with that list, parsed once at start and cloned per call (a
//! handler hands the SDK an owned value), and `floor::ping`, which answers `{}`: the cheapest
//! call a worker can be asked through the engine.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use iii_sdk::{InitOptions, RegisterFunction};
use serde_json::{Value, json};

use crate::measure::Reaped;

const ENGINE_VAR: &str = "BENCH_FLOOR_WORKER";
const ANSWER_VAR: &str = "BENCH_FLOOR_ANSWER";
pub const LIST: &str = "floor::list";
pub const PING: &str = "floor::ping";

/// Serves as the floor worker when this process was started as one; returns whether it was.
/// (It serves until killed.)
pub fn serve_if_asked() -> bool {
    let Ok(url) = std::env::var(ENGINE_VAR) else {
        return false;
    };
    let path = std::env::var(ANSWER_VAR).expect("BENCH_FLOOR_ANSWER names the stored answer");
    let text = std::fs::read_to_string(&path).expect("read the stored answer");
    let answer: Arc<Value> = Arc::new(serde_json::from_str(&text).expect("a JSON answer"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let iii = iii_sdk::register_worker(&url, InitOptions::default());
    iii.register_function(
        LIST,
        RegisterFunction::new_async(move |_: Value| {
            let answer = answer.clone();
            async move { Ok::<Value, iii_sdk::Error>((*answer).clone()) }
        }),
    );
    iii.register_function(
        PING,
        RegisterFunction::new_async(|_: Value| async { Ok::<Value, iii_sdk::Error>(json!({})) }),
    );
    runtime.block_on(std::future::pending::<()>());
    true
}

/// Starts the floor worker against `engine_url`, answering `floor::list` with the JSON in
/// `answer`; it stops when the returned value is dropped.
pub fn start(engine_url: &str, answer: &Path) -> Reaped {
    let child = Command::new(std::env::current_exe().expect("the suite's own binary"))
        .env(ENGINE_VAR, engine_url)
        .env(ANSWER_VAR, answer)
        .env("OTEL_ENABLED", "false")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the floor worker");
    Reaped(child)
}
