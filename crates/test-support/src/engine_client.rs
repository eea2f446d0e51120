//! An iii SDK client of a real engine, for the tests run against one (`worker::real_engine`,
//! `worker::real_engine_only`): the test's own worker on that engine, and its calls.

use iii_sdk::protocol::TriggerRequest;
use iii_sdk::runtime::WorkerMetadata;
use iii_sdk::{IIIClient, InitOptions};
use serde_json::Value;

/// Connects to the engine at `url` as a worker named `name`, telemetry off.
pub fn client(url: &str, name: String) -> IIIClient {
    let mut options = InitOptions {
        metadata: Some(WorkerMetadata {
            name,
            ..Default::default()
        }),
        otel: Some(Default::default()),
        ..Default::default()
    };
    if let Some(otel) = options.otel.as_mut() {
        otel.enabled = Some(false);
    }
    iii_sdk::register_worker(url, options)
}

/// Invokes `function_id` with `payload` and waits for its answer (10 s at most).
pub async fn try_call(
    iii: &IIIClient,
    function_id: &str,
    payload: Value,
) -> Result<Value, iii_sdk::Error> {
    iii.trigger(TriggerRequest {
        function_id: function_id.into(),
        payload,
        action: None,
        timeout_ms: Some(10_000),
    })
    .await
}
