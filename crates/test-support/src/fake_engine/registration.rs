//! Registrations: `registerfunction` and `registertriggertype` are live state owned by the
//! connection that sent them (a disconnect removes them, see `connection`);
//! `unregisterfunction` removes an entry; `unregistertriggertype` is only recorded, as engine
//! 0.23 ignores that frame.

use serde_json::Value;

use super::frames::{opt_str, opt_value, str_field};
use super::records::{RegisteredFunction, RegisteredTriggerType};
use super::state::State;

/// `registerfunction`: the function, as last registered, and how many times it was.
pub(super) fn on_register_function(st: &mut State, conn: u64, frame: &Value) {
    let function = RegisteredFunction {
        connection: conn,
        id: str_field(frame, "id"),
        description: opt_str(frame, "description"),
        request_format: opt_value(frame, "request_format"),
        response_format: opt_value(frame, "response_format"),
        metadata: opt_value(frame, "metadata"),
        invocation: opt_value(frame, "invocation"),
    };
    *st.registration_counts
        .entry(function.id.clone())
        .or_default() += 1;
    st.functions.insert(function.id.clone(), function);
}

pub(super) fn on_unregister_function(st: &mut State, frame: &Value) {
    let id = str_field(frame, "id");
    st.functions.remove(&id);
    st.unregistered_functions.push(id);
}

/// `registertriggertype`: the connection provides the type from now on, and gets the bindings
/// parked for it.
pub(super) fn on_register_trigger_type(st: &mut State, conn: u64, frame: &Value) {
    let trigger_type = RegisteredTriggerType {
        connection: conn,
        id: str_field(frame, "id"),
        description: str_field(frame, "description"),
        trigger_request_format: opt_value(frame, "trigger_request_format"),
        call_request_format: opt_value(frame, "call_request_format"),
        namespace: opt_str(frame, "namespace"),
    };
    let type_id = trigger_type.id.clone();
    st.trigger_types.insert(type_id.clone(), trigger_type);
    st.deliver_parked(&type_id, conn);
}

pub(super) fn on_unregister_trigger_type(st: &mut State, frame: &Value) {
    st.unregistered_trigger_types.push(str_field(frame, "id"));
}
