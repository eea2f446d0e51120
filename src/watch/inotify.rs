//! A thin, safe face on Linux's inotify: one non-blocking queue whose events are read only
//! when asked. The reads of the directory drain it themselves (see `fresh.rs`), which is what
//! makes them as fresh as a rescan: the kernel queues an event before the system call that
//! made the change returns, so a change completed before a read began is in the queue when
//! the read looks.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// A watch descriptor: which watched folder an event is about.
pub type Wd = i32;

/// What every folder is watched for: changes of its entries (created, removed, renamed in
/// or out, written, touched) and of itself (removed, renamed). Opens and reads are left
/// out, so walking a tree (ours or anyone's) adds nothing to the queue.
pub const FOLDER_MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

/// One event as the kernel reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The watch it came through; -1 for a queue overflow.
    pub wd: Wd,
    pub mask: u32,
    /// The entry's name inside the watched folder, for events about an entry.
    pub name: Option<Vec<u8>>,
}

impl Event {
    pub fn is(&self, flag: u32) -> bool {
        self.mask & flag != 0
    }

    pub fn name(&self) -> Option<&OsStr> {
        self.name.as_deref().map(OsStr::from_bytes)
    }
}

/// An inotify instance, with a second descriptor that wakes a waiting thread when the owner
/// wants it to stop.
pub struct Inotify {
    fd: OwnedFd,
    wake: OwnedFd,
}

/// The kernel's event header (`struct inotify_event` without its name).
const HEADER: usize = size_of::<libc::inotify_event>();

impl Inotify {
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: plain system calls; each returned descriptor is checked and owned once.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let wake = libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC);
            if wake < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Inotify {
                fd,
                wake: OwnedFd::from_raw_fd(wake),
            })
        }
    }

    /// Watches one folder (not what is under it). Watching a folder already watched returns
    /// its descriptor again, which is how a folder renamed inside the tree gets its new path.
    pub fn add(&self, path: &Path) -> io::Result<Wd> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))?;
        // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), FOLDER_MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Stops watching one folder; the kernel answers with an `IN_IGNORED` for it.
    pub fn remove(&self, wd: Wd) {
        // SAFETY: a plain system call; a descriptor already gone is an error we ignore.
        unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
    }

    /// Whether any event is queued now (no waiting, nothing read).
    pub fn has_queued(&self) -> bool {
        let mut bytes: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer we pass.
        let ok = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::FIONREAD, &mut bytes) };
        ok == 0 && bytes > 0
    }

    /// Appends every event queued now to `out`, without waiting.
    pub fn read_queued(&self, out: &mut Vec<Event>) -> io::Result<()> {
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            // SAFETY: the kernel writes at most `buffer.len()` bytes into the buffer.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if n == 0 {
                return Ok(());
            }
            parse(&buffer[..n as usize], out);
        }
    }

    /// Waits until an event is queued, the owner calls [`Inotify::wake`], or `timeout` passes.
    /// Returns whether it was woken.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut fds = [
            libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if ready > 0 && fds[1].revents != 0 {
            let mut count = 0u64;
            // SAFETY: an eventfd read writes 8 bytes into `count`.
            unsafe { libc::read(self.wake.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
            return true;
        }
        false
    }

    /// Wakes a thread in [`Inotify::wait`].
    pub fn wake(&self) {
        let one = 1u64;
        // SAFETY: an eventfd write reads 8 bytes from `one`.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// Splits a buffer the kernel filled into events. The kernel only ever hands whole events.
fn parse(bytes: &[u8], out: &mut Vec<Event>) {
    let mut at = 0;
    while at + HEADER <= bytes.len() {
        // SAFETY: the header lies within the buffer (checked above); it may be unaligned.
        let header: libc::inotify_event =
            unsafe { std::ptr::read_unaligned(bytes[at..].as_ptr().cast()) };
        let name_start = at + HEADER;
        let name_end = (name_start + header.len as usize).min(bytes.len());
        let raw = &bytes[name_start..name_end];
        // The name is padded with NULs to an alignment.
        let name = raw.split(|b| *b == 0).next().unwrap_or_default();
        out.push(Event {
            wd: header.wd,
            mask: header.mask,
            name: (!name.is_empty()).then(|| name.to_vec()),
        });
        at = name_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_queued_before_the_call_that_made_them_returns() {
        let dir = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let wd = inotify.add(dir.path()).unwrap();
        assert!(!inotify.has_queued());
        std::fs::write(dir.path().join("a.md"), "x").unwrap();
        // No waiting: the event is there as soon as the write returned.
        assert!(inotify.has_queued());
        let mut events = Vec::new();
        inotify.read_queued(&mut events).unwrap();
        assert!(
            events.iter().any(|e| e.wd == wd
                && e.is(libc::IN_CREATE)
                && e.name() == Some(OsStr::new("a.md"))),
            "{events:?}"
        );
        events.clear();
        inotify.read_queued(&mut events).unwrap();
        assert!(events.is_empty(), "{events:?}");
        // Opening and reading a folder or a file adds nothing.
        let _ = std::fs::read_dir(dir.path()).unwrap().count();
        let _ = std::fs::read(dir.path().join("a.md")).unwrap();
        assert!(!inotify.has_queued());
    }

    #[test]
    fn the_same_folder_keeps_its_descriptor_and_wake_ends_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let inotify = Inotify::new().unwrap();
        let a = inotify.add(dir.path()).unwrap();
        assert_eq!(inotify.add(dir.path()).unwrap(), a);
        let started = std::time::Instant::now();
        assert!(!inotify.wait(Duration::from_millis(20)));
        inotify.wake();
        assert!(inotify.wait(Duration::from_secs(5)));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
