//! Opens that may meet a damaged file, isolated: redb panics on some (a truncated file, a page
//! the clean-close stamp kept from the integrity check), and the open catches the panic
//! without the panic hook's message and backtrace on stderr: the caller says what it does about
//! the file (rebuild it, or refuse it), and a raw panic in front of that looked like a crash.

thread_local! {
    /// Set while [`isolated`] runs on this thread.
    static ISOLATED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `open`, catching a panic without a word on stderr; other threads' panics, and this
/// thread's outside `open`, are reported as before.
pub fn isolated<T>(open: impl FnOnce() -> T + std::panic::UnwindSafe) -> std::thread::Result<T> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let reported = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !ISOLATED.with(std::cell::Cell::get) {
                reported(info);
            }
        }));
    });
    ISOLATED.with(|on| on.set(true));
    let result = std::panic::catch_unwind(open);
    ISOLATED.with(|on| on.set(false));
    result
}
