//! The open-file limit the process starts with. The watcher, the index's two files, the walk's
//! open folders, the engine's connection and the runtime's own descriptors take a few dozen;
//! under a limit of a dozen or two the worker failed in ways that hid the cause: the index
//! called "a file that cannot be read", every folder "cannot be listed", or the engine's
//! connection thread gone while the process stayed up. So the soft limit is raised to the hard
//! one, as servers commonly do (it costs nothing until descriptors are used), and a hard limit
//! below what the process needs stops it at once, saying which limit to raise.

/// Descriptors below which the process does not start.
pub const NEEDED: u64 = 64;

/// Raises the soft limit on open files to the hard limit. Returns the message to stop with when
/// even the hard limit is below [`NEEDED`].
pub fn ensure() -> Result<(), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Ok(());
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                ..limit
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    too_low(limit.rlim_cur)
}

fn too_low(limit: u64) -> Result<(), String> {
    if limit >= NEEDED {
        return Ok(());
    }
    Err(format!(
        "this process may open only {limit} files at once, and iii-directory needs at least \
         {NEEDED}; raise the limit (`ulimit -n 1024` in the shell, `LimitNOFILE=` in a systemd \
         unit, `--ulimit nofile=1024` for docker) and start again"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_below_what_the_process_needs_says_which_limit_to_raise() {
        assert_eq!(too_low(NEEDED), Ok(()));
        let message = too_low(20).unwrap_err();
        assert!(
            message.contains("only 20 files") && message.contains("ulimit -n"),
            "{message}"
        );
    }
}
