//! What the process sets up before any command runs: signals, the allocator's tuning, the SDK's
//! trace payloads, rayon's threads and logging.

use tracing_subscriber::prelude::*;

use super::error::CliError;
use super::output::Stderr;
use iii_directory::worker;

/// Large buffers (at least this) are mapped on their own and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) const MMAP_THRESHOLD_BYTES: libc::c_int = 1 << 20;
/// Arenas glibc's malloc may create (its default is 8 per core).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) const MALLOC_ARENAS: libc::c_int = 2;

/// Ctrl-C (SIGINT) stops every command, and the worker at any moment. A process started in the
/// background of a script inherits SIGINT ignored (a shell without job control does that), and
/// so `reindex` ran to its end and the worker missed a Ctrl-C until it listened for one itself
/// (`worker::serve`, which then stops gracefully). Put back to its default action before
/// anything else runs: the process ends at once, exit status 130 as a shell shows it, and an
/// interrupted `reindex` leaves the index as any killed writer does: its last commit, brought
/// up to date by the next command or worker that opens it (the rows and their completeness
/// are committed together).
pub(crate) fn let_ctrl_c_stop() {
    #[cfg(unix)]
    // SAFETY: no other thread exists yet; SIG_DFL installs no handler.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// The SDK's variable that keeps call payloads out of its trace spans.
pub(crate) const TRACE_PAYLOADS_OFF: &str = "III_DISABLE_TRACE_PAYLOADS";

/// With OpenTelemetry on (the SDK's default), the SDK copies every call's request and answer
/// into its trace spans unless `III_DISABLE_TRACE_PAYLOADS` says not to: a full copy of the
/// value, then its JSON text, held until the span is exported to the engine. This worker's
/// answers are whole lists of up to 16 MiB, so that doubled its memory per call: at 50,000
/// skills the benchmark's peak was 235 MiB with payloads in the spans and 147 MiB without
/// (issue 15). Left out unless the operator set the variable (`0` keeps them). Set before any
/// thread starts.
pub(crate) fn leave_payloads_out_of_traces() {
    if std::env::var_os(TRACE_PAYLOADS_OFF).is_none() {
        // SAFETY: no other thread exists yet, so nothing reads the environment meanwhile.
        unsafe { std::env::set_var(TRACE_PAYLOADS_OFF, "1") };
    }
}

/// glibc's malloc, tuned for a worker whose threads build and drop answers of up to 16 MiB of
/// JSON (the most the engine carries in one message, `worker/wire.rs`), and several times that
/// as the value the SDK sends. By default each thread gets an arena of its own that keeps
/// what it frees, and the threshold for mapping a large buffer on its own rises to the largest
/// one freed, after which such buffers stay in the arenas too: the worker's resident set
/// settled near its peak (issue 15: 371 MiB at 50,000 skills in the benchmark suite's `memory`
/// section). Two arenas, not one: a single arena peaked about 20 MiB lower, but under the load
/// test every thread then waited on its lock (`list` p50 44 ms instead of 1.5 ms). Measured
/// again with the skill cache (issue 15): one arena was 3 to 10 MiB lower at 50,000 skills,
/// and the wire load test's reads took 1.4 to 1.8 times as long. mimalloc,
/// tried instead, peaked higher (273 MiB against 211). `worker/trim.rs` gives the arenas'
/// free pages back around large answers. Set before any thread starts.
pub(crate) fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets malloc parameters; no other thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}

/// Starts rayon's pool (reading and parsing files, views, searches) before any command uses
/// it: rayon would panic at its first use when the process cannot start its threads (a small
/// address space, a thread limit), where this says so. Its one attempt is made here.
pub(crate) fn start_threads() -> Result<(), CliError> {
    match rayon::ThreadPoolBuilder::new().build_global() {
        Ok(()) => Ok(()),
        // Only a failure to start a thread has an I/O error as its source.
        Err(e) if std::error::Error::source(&e).is_some() => {
            let cause = std::io::Error::other(e);
            Err(iii_directory::Error::thread("the pool that reads files")(cause).into())
        }
        // Started already: the pool is there.
        Err(_) => Ok(()),
    }
}

/// Logs at `level`, or as `RUST_LOG` says when it is set and not empty. Either way the SDK's
/// retry notices (every 2 s without an engine) and its telemetry exporter's complaints stay
/// quiet, unless `RUST_LOG` names those targets itself: the worker says those things once.
pub(crate) fn init_logging(level: &str) {
    const QUIET: [&str; 3] = ["iii_sdk=error", "iii_helpers=off", "opentelemetry=off"];
    let asked = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty());
    let with_quiet = |base: &str| {
        QUIET
            .iter()
            .filter(|quiet| !base.contains(quiet.split('=').next().unwrap_or_default()))
            .fold(base.to_string(), |all, quiet| format!("{all},{quiet}"))
    };
    let filter = asked
        .and_then(
            |asked| match tracing_subscriber::EnvFilter::try_new(with_quiet(&asked)) {
                Ok(filter) => Some(filter),
                Err(e) => {
                    eprintln!(
                        "warning: RUST_LOG={asked:?} is not a log filter ({e}); logging at {level}"
                    );
                    None
                }
            },
        )
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(with_quiet(level)));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(Stderr::now().colour)
        .with_filter(filter);
    // Beside the output, with a filter of its own: the SDK's connection events, whatever the
    // log level, tell the worker each (re)connection (src/worker/connection.rs).
    tracing_subscriber::registry()
        .with(output)
        .with(worker::connection_layer())
        .init();
}
