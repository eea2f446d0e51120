//! Every function, sent oversized and wrongly typed payloads, through the worker's own
//! dispatch (`iii_directory::worker::local`: the screen, the library, the answer measure and
//! the error bound the worker uses on the bus). Whatever the payload, the call returns (no
//! panic, no hang), an answer fits one engine message, and an error stays short: well under
//! the 64 KiB the worker's last guard would cut it to, so no error here owes its size to that
//! guard. That the connection stays up is proven on the wire (`tests/worker/errors.rs`).
//!
//! The input picks the function (first byte), the payload's shape (second byte), the size a
//! string is grown to (third byte) and the text it is grown from (the rest).

#![no_main]

use std::sync::{Arc, OnceLock};

use iii_directory::config::Config;
use iii_directory::worker::local::Local;
use iii_directory::worker::surface;
use iii_directory::{Directory, MAX_ERROR_BYTES};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

/// An error this long means something echoed what it should not have.
const MAX_EXPECTED_ERROR_BYTES: usize = 8 << 10;
/// The engine's frame, less the envelope the SDK adds.
const MAX_ANSWER_BYTES: usize = (16 << 20) - (16 << 10);

struct State {
    local: Local,
    functions: Vec<(&'static str, Vec<String>)>,
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| {
        let root = std::env::temp_dir().join(format!(
            "iii-directory-fuzz-requests-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let skill = root.join("skills/mailer/guide.md");
        std::fs::create_dir_all(skill.parent().expect("parent")).expect("mkdir");
        std::fs::write(&skill, "# Guide\n\nSend mail.\n").expect("write");
        std::fs::create_dir_all(root.join("agents")).expect("mkdir agents");
        let directory = Directory::open(Config::for_root(&root)).expect("open the index");
        directory.reconcile().expect("reconcile");
        let functions = surface::functions()
            .into_iter()
            .map(|f| {
                let keys = f.request["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                (f.id, keys)
            })
            .collect();
        State {
            local: Local::new(Arc::new(directory)),
            functions,
        }
    })
}

/// `text` repeated to about `len` bytes (at least once).
fn grown(text: &str, len: usize) -> String {
    let unit = if text.is_empty() { "\u{80}" } else { text };
    unit.repeat(len / unit.len() + 1)
}

fuzz_target!(|bytes: &[u8]| {
    let [which, shape, size, rest @ ..] = bytes else {
        return;
    };
    let state = state();
    let (function, keys) = &state.functions[*which as usize % state.functions.len()];
    let text = String::from_utf8_lossy(rest).into_owned();
    let len = match size % 5 {
        0 => text.len(),
        1 => 300,
        2 => 5_000,
        3 => 70_000,
        _ => 2_500_000,
    };
    let long = grown(&text, len);
    let wrong = |n: usize| -> Value {
        match n % 7 {
            0 => json!(long),
            1 => json!(rest.len() as i64 - 128),
            2 => json!(rest.first().is_some_and(|b| b % 2 == 0)),
            3 => json!([long]),
            4 => json!({ "x": long }),
            5 => Value::Null,
            _ => json!(1.5e300),
        }
    };
    let request = match shape % 6 {
        // The input itself, when it is JSON (anything a caller could send).
        0 => match serde_json::from_slice::<Value>(rest) {
            Ok(value) => value,
            Err(_) => return,
        },
        // Every field the function reads, oversized.
        1 => Value::Object(keys.iter().map(|k| (k.clone(), json!(long))).collect()),
        // Every field wrongly typed (or oversized, or absent), picked per field.
        2 => Value::Object(
            keys.iter()
                .enumerate()
                .map(|(n, k)| (k.clone(), wrong(n + *shape as usize / 6)))
                .collect(),
        ),
        // One field oversized, the others plausible.
        3 => {
            let mut fields = Map::new();
            for (n, k) in keys.iter().enumerate() {
                let value = if n == *size as usize % keys.len().max(1) {
                    json!(long)
                } else {
                    json!("mailer/guide")
                };
                fields.insert(k.clone(), value);
            }
            Value::Object(fields)
        }
        // Not an object.
        4 => match size % 3 {
            0 => json!([long, text]),
            1 => json!(long),
            _ => json!(rest.len()),
        },
        // Deeply nested, but within the SDK's own parser's reach.
        _ => {
            let mut nested = json!(long);
            for _ in 0..(*size as usize % 100) {
                nested = json!([nested]);
            }
            let key = keys.first().cloned().unwrap_or_else(|| "id".into());
            json!({ key: nested })
        }
    };
    match state.local.call(function, &request) {
        Ok(answer) => assert!(
            answer.len() <= MAX_ANSWER_BYTES,
            "{function}: {} bytes",
            answer.len()
        ),
        Err(refused) => {
            let message = refused.message;
            assert!(message.len() <= MAX_ERROR_BYTES);
            assert!(
                message.len() <= MAX_EXPECTED_ERROR_BYTES,
                "{function}: an error of {} bytes: {}…",
                message.len(),
                message.chars().take(300).collect::<String>()
            );
            // As JSON on the wire (a control character costs 6 bytes), still far inside the frame.
            let wire = serde_json::to_string(&message).expect("json");
            assert!(wire.len() <= 6 * MAX_EXPECTED_ERROR_BYTES);
        }
    }
});
