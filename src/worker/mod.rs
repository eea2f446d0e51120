//! The iii worker: a thin adapter that puts the library on the engine bus. It maps each
//! `directory::*` function id to a [`Directory`] call, registers the `on-change` trigger types
//! and fans change events out to their subscribers, and follows the configuration worker.
//!
//! Architecture invariant: no directory logic lives here; handlers never block the SDK's
//! connection thread (library work runs on the blocking pool).

mod configuration;
mod console;
mod engine;
mod subscriptions;
pub mod surface;

use std::sync::Arc;
use std::time::Duration;

use iii_sdk::runtime::{IIIConnectionState, WorkerMetadata};
use iii_sdk::{IIIClient, InitOptions, RegisterFunction, RegisterTriggerType};
use serde_json::{Value, json};

use crate::config::Config;
use crate::events::{ChangeEvent, Family};
use crate::watch::{WatchOptions, Watcher};
use crate::{Directory, OpenError, ReadFunction};
use engine::Installed;
use subscriptions::{Provider, Subscriptions};
use surface::Handler;

/// The worker's name on the bus (contract).
pub const WORKER_NAME: &str = "iii-directory";
/// How long to wait for the engine before saying so.
const CONNECT_NOTICE_AFTER: Duration = Duration::from_secs(2);
/// How long boot waits for the engine to ask for a stored configuration.
const STORED_CONFIG_WAIT: Duration = Duration::from_millis(1500);

/// What `serve` needs.
pub struct ServeOptions {
    pub url: String,
    pub config: Config,
    /// The `--config` seed as JSON, offered as the configuration entry's initial value.
    pub seed: Option<Value>,
}

/// Everything a handler needs, shared.
struct Shared {
    directory: Arc<Directory>,
    watcher: Watcher,
    installed: Installed,
}

/// Runs the worker until SIGTERM or Ctrl-C.
pub fn serve(options: ServeOptions) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("iii-directory")
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let iii = connect(&options.url);
    // A configuration stored in the engine decides the folders too, but only at boot: ask for
    // it briefly before opening the index, and go on with the seed if the engine is not there.
    let config = match runtime.block_on(configuration::stored(&iii, STORED_CONFIG_WAIT)) {
        Some(settings) => Config::from_settings(settings),
        None => options.config,
    };
    let index_path = config.paths.index_path.clone();
    let directory = Arc::new(Directory::open(config).map_err(|e| match e {
        OpenError::Busy(_) => format!(
            "another process (a running iii-directory worker?) owns the index at {}; stop it first",
            index_path.display()
        ),
        other => other.to_string(),
    })?);
    let report = directory.reconcile().map_err(|e| e.to_string())?;
    tracing::info!(
        files = report.files,
        read = report.read,
        skipped = report.skipped,
        duration_ms = report.duration_ms,
        "index reconciled at boot"
    );
    let watcher = Watcher::start(
        directory.clone(),
        WatchOptions::from_settings(&directory.settings()),
    );
    let shared = Arc::new(Shared {
        directory,
        watcher,
        installed: Installed::default(),
    });

    register(&iii, &shared, runtime.handle().clone());
    runtime.block_on(async {
        tokio::spawn(announce_connection(iii.clone(), options.url.clone()));
        let boot_iii = iii.clone();
        let boot_shared = shared.clone();
        tokio::spawn(async move {
            // The configuration worker lives in the engine: wait for it rather than time out.
            while boot_iii.get_connection_state() != IIIConnectionState::Connected {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            configuration::boot(
                &boot_iii,
                &boot_shared.directory,
                &boot_shared.installed,
                options.seed,
            )
            .await;
        });
        shutdown_signal().await;
    });
    tracing::info!("shutting down");
    iii.shutdown();
    drop(runtime);
    Ok(())
}

fn connect(url: &str) -> IIIClient {
    let metadata = WorkerMetadata {
        name: WORKER_NAME.into(),
        description: Some(
            "Skills, system prompts and agent profiles served from folders on disk".into(),
        ),
        ..WorkerMetadata::default()
    };
    iii_sdk::register_worker(
        url,
        InitOptions {
            metadata: Some(metadata),
            ..InitOptions::default()
        },
    )
}

/// Says once, clearly, when the engine is not there, and when it is.
async fn announce_connection(iii: IIIClient, url: String) {
    tokio::time::sleep(CONNECT_NOTICE_AFTER).await;
    let mut connected = iii.get_connection_state() == IIIConnectionState::Connected;
    if connected {
        tracing::info!(%url, "connected to the iii engine");
    } else {
        tracing::warn!(
            %url,
            "waiting for the iii engine (start it, or point --url / III_URL at it); reads from the index keep working meanwhile"
        );
    }
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = iii.get_connection_state() == IIIConnectionState::Connected;
        if now != connected {
            if now {
                tracing::info!(%url, "connected to the iii engine");
            } else {
                tracing::warn!(%url, "lost the iii engine; reconnecting");
            }
            connected = now;
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Registers the trigger types, the event fan-out and every function.
fn register(iii: &IIIClient, shared: &Arc<Shared>, runtime: tokio::runtime::Handle) {
    let subscriptions = Arc::new(Subscriptions::default());
    for (family, description, _) in surface::trigger_types() {
        let provider = Provider {
            family,
            subscriptions: subscriptions.clone(),
        };
        let trigger_type = RegisterTriggerType::new(family.trigger_type(), description, provider);
        match family {
            Family::Skills => {
                iii.register_trigger_type(
                    trigger_type.call_request_format::<surface::Payload<{ surface::SKILLS }>>(),
                );
            }
            Family::SystemPrompts => {
                iii.register_trigger_type(
                    trigger_type
                        .call_request_format::<surface::Payload<{ surface::SYSTEM_PROMPTS }>>(),
                );
            }
            Family::Agents => {
                iii.register_trigger_type(
                    trigger_type.call_request_format::<surface::Payload<{ surface::AGENTS }>>(),
                );
            }
        }
    }
    let fan_out_iii = iii.clone();
    shared
        .directory
        .subscribe(Arc::new(move |event: &ChangeEvent| {
            subscriptions.fan_out(&fan_out_iii, &runtime, event);
        }));
    for function in surface::functions() {
        let handler = function.handler;
        let shared = shared.clone();
        let iii_for_handler = iii.clone();
        let mut registration = RegisterFunction::new_async(move |input: Value| {
            let shared = shared.clone();
            let iii = iii_for_handler.clone();
            async move {
                handle(&iii, &shared, handler, input)
                    .await
                    .map_err(iii_sdk::Error::Handler)
            }
        })
        .description(function.description)
        .request_format(function.request)
        .response_format(function.response);
        if function.internal {
            registration = registration.metadata(json!({ "internal": true }));
        }
        iii.register_function(function.id, registration);
    }
    console::register(iii);
}

/// Answers one call. Library work runs on the blocking pool, never on the SDK's thread.
async fn handle(
    iii: &IIIClient,
    shared: &Arc<Shared>,
    handler: Handler,
    input: Value,
) -> Result<Value, String> {
    let settings = shared.directory.settings();
    let ttl = Duration::from_millis(settings.registry_cache_ttl_ms);
    let installed = match handler {
        Handler::Read(ReadFunction::SkillsIndex) => shared.installed.get(iii, ttl, true).await,
        Handler::Read(
            ReadFunction::SkillsList | ReadFunction::SkillsGet | ReadFunction::AgentsGet,
        )
        | Handler::Write(_) => shared.installed.get(iii, ttl, false).await,
        _ => None,
    };
    match handler {
        Handler::EngineFunctionInfo => return engine::function_info(iii, input).await,
        Handler::OnConfigChange => {
            configuration::refresh(iii, &shared.directory, &shared.installed).await;
            return Ok(json!({ "ok": true }));
        }
        _ => {}
    }
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let directory = &shared.directory;
        let installed = installed.as_deref();
        match handler {
            Handler::Read(function) => directory.read(function, &input, installed),
            Handler::Write(function) => directory.write(function, &input, installed),
            Handler::Status => directory.status(Some(&shared.watcher.status())),
            Handler::UiContent => console::content(&input).map_err(crate::Error::Invalid),
            Handler::EngineFunctionInfo | Handler::OnConfigChange => unreachable!("answered above"),
        }
        .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("handler failed: {e}"))?
}
