//! What the fake records of the frames a worker sends, as tests read it: one type per frame
//! kind (registrations, bindings, acks, fires, calls, results) and one per connection.

use std::fmt;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::frames::{opt_str, str_field};

/// The wire error shape `{code, message, stacktrace?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub stacktrace: Option<String>,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code: code.into(),
            message: message.into(),
            stacktrace: None,
        }
    }

    pub(super) fn from_value(value: &Value) -> ErrorBody {
        ErrorBody {
            code: str_field(value, "code"),
            message: str_field(value, "message"),
            stacktrace: opt_str(value, "stacktrace"),
        }
    }

    pub(super) fn to_value(&self) -> Value {
        let mut body = json!({"code": self.code, "message": self.message});
        if let Some(stacktrace) = &self.stacktrace {
            body["stacktrace"] = json!(stacktrace);
        }
        body
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorBody {}

/// A `registerfunction` frame, as last received for its id.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredFunction {
    pub connection: u64,
    pub id: String,
    pub description: Option<String>,
    pub request_format: Option<Value>,
    pub response_format: Option<Value>,
    pub metadata: Option<Value>,
    /// The HTTP invocation config of an HTTP-invoked function.
    pub invocation: Option<Value>,
}

/// A `registertriggertype` frame, as last received for its id.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredTriggerType {
    pub connection: u64,
    pub id: String,
    pub description: String,
    pub trigger_request_format: Option<Value>,
    pub call_request_format: Option<Value>,
    pub namespace: Option<String>,
}

/// A `registertrigger` frame sent by the worker as a subscriber (a binding it made).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerTrigger {
    pub connection: u64,
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    pub config: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    pub trigger_namespace: Option<String>,
}

/// A `triggerregistrationresult` frame: the worker, as a provider, acking a binding.
#[derive(Debug, Clone, PartialEq)]
pub struct RegistrationResult {
    pub connection: u64,
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    pub error: Option<ErrorBody>,
}

/// An `unregistertrigger` frame sent by the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct UnregisteredTrigger {
    pub connection: u64,
    pub id: String,
    pub trigger_type: Option<String>,
}

/// A `reattach` frame. `matched` tells whether id and token are those the fake gave an
/// earlier connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Reattach {
    pub connection: u64,
    pub previous_worker_id: String,
    pub reattach_token: Option<String>,
    pub matched: bool,
}

/// An `invokefunction` with a null `invocation_id` (other than `engine::workers::register`).
#[derive(Debug, Clone, PartialEq)]
pub struct Fire {
    pub connection: u64,
    pub function_id: String,
    pub data: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    /// For example `{"type":"void"}`.
    pub action: Option<Value>,
}

/// An `invokefunction` with an `invocation_id`: a call out of the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub connection: u64,
    pub invocation_id: String,
    pub function_id: String,
    pub data: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    pub action: Option<Value>,
}

/// An `invocationresult` frame sent by the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationResult {
    pub connection: u64,
    pub invocation_id: String,
    pub function_id: String,
    pub result: Option<Value>,
    pub error: Option<ErrorBody>,
}

/// One WebSocket session on `/` (connections are numbered from 1).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionInfo {
    pub id: u64,
    pub path: String,
    /// The `worker_id` the fake sent in `workerregistered`.
    pub worker_id: String,
    /// The `reattach_token` the fake sent in `workerregistered`.
    pub reattach_token: String,
    pub open: bool,
    /// The `data` of this connection's `engine::workers::register` call, once it came.
    pub ready: Option<Value>,
    /// Frames received from the worker on this connection.
    pub frames: Vec<Value>,
    /// Frames the fake wrote to this connection.
    pub sent: Vec<Value>,
    /// When the fake accepted the TCP connection.
    pub accepted_at: Instant,
    /// When each of `frames` arrived (same order).
    pub received_at: Vec<Instant>,
}
