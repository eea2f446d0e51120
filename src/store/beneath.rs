//! Resolving write paths beneath a root's folder descriptor without following links.
//!
//! Every write of the store (temporary file, fsync, rename or link into place, folder fsync,
//! delete, empty-folder cleanup, a download's landing) goes through a [`Dir`]: a folder
//! descriptor reached from the root's descriptor one component at a time, never through a
//! symbolic link and never through `..`. A link swapped into the path while a write runs makes
//! the write fail with [`Refusal::Link`]; it can never make it land outside the root.
//!
//! Where the kernel has `openat2` (Linux 5.6 and later), a folder is resolved in one call with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; elsewhere (`ENOSYS`, or a sandbox refusing the call),
//! and to create missing folders (`mkdirat`), each component is opened with
//! `openat(O_NOFOLLOW | O_DIRECTORY)` relative to the one before: the same guarantee.
//!
//! The root itself is the configured path and is opened as configured (a root that is a link
//! is followed, on purpose: the configuration is trusted, a file tree written by others is not).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Why a path could not be resolved beneath its root.
#[derive(Debug)]
pub enum Refusal {
    /// A symbolic link sits on the way, at this path relative to the root.
    Link(PathBuf),
    /// The path is not a plain relative path (absolute, `.`, `..` or empty).
    NotBeneath(PathBuf),
    Io(io::Error),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Link(at) => write!(f, "{} is a symbolic link", at.display()),
            Refusal::NotBeneath(p) => write!(f, "{} is not a plain relative path", p.display()),
            Refusal::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for Refusal {
    fn from(e: io::Error) -> Refusal {
        Refusal::Io(e)
    }
}

impl From<Refusal> for io::Error {
    fn from(refusal: Refusal) -> io::Error {
        match refusal {
            Refusal::Io(e) => e,
            Refusal::NotBeneath(_) => {
                io::Error::new(io::ErrorKind::InvalidInput, refusal.to_string())
            }
            Refusal::Link(_) => io::Error::other(format!("{refusal}; links are not followed")),
        }
    }
}

/// An open folder reached without following links.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

/// The kind of an entry, as `lstat` sees it (links are not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    Other,
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// A return value of -1 as the last OS error.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Retries a call interrupted by a signal.
fn retry(mut call: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
    loop {
        match check(call()) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Set once `openat2` is found missing or refused, so later writes skip straight to the walk.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// The components of a plain relative path, or `None` for anything else.
fn plain(rel: &Path) -> Option<Vec<&OsStr>> {
    let mut parts = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            _ => return None,
        }
    }
    Some(parts)
}

impl Dir {
    /// Opens a root as configured, creating it (and its parents) first when `create` is set.
    pub fn root(path: &Path, create: bool) -> io::Result<Dir> {
        if create {
            std::fs::create_dir_all(path)?;
        }
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(path)?;
        Ok(Dir { fd: file.into() })
    }

    fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// A second descriptor of the same folder.
    fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
        })
    }

    /// The folder at `rel` beneath this one, creating missing folders when `create` is set.
    /// An empty `rel` is this folder.
    pub fn open_dir(&self, rel: &Path, create: bool) -> Result<Dir, Refusal> {
        self.open_dir_by(rel, create, !NO_OPENAT2.load(Ordering::Relaxed))
    }

    fn open_dir_by(&self, rel: &Path, create: bool, openat2: bool) -> Result<Dir, Refusal> {
        let parts = plain(rel).ok_or_else(|| Refusal::NotBeneath(rel.to_path_buf()))?;
        if parts.is_empty() {
            return Ok(self.try_clone()?);
        }
        if openat2 {
            match self.openat2_dir(rel) {
                Ok(dir) => return Ok(dir),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                // Anything else (a missing folder, a link on the way): the walk says which
                // component, and creates what is missing.
                Err(_) => {}
            }
        }
        self.walk(&parts, create)
    }

    /// The folder at `rel` beneath this one, component by component, creating the missing ones
    /// and recording (in `made`, as paths relative to this folder, outermost first) each folder
    /// it made, for a rollback.
    pub fn create_dirs(&self, rel: &Path, made: &mut Vec<PathBuf>) -> Result<Dir, Refusal> {
        let parts = plain(rel).ok_or_else(|| Refusal::NotBeneath(rel.to_path_buf()))?;
        let mut at = PathBuf::new();
        let mut current = self.try_clone()?;
        for part in parts {
            at.push(part);
            let next = match current.open_child_dir(part) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    match current.mkdir(part) {
                        Ok(()) => made.push(at.clone()),
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(Refusal::Io(e)),
                    }
                    current.open_child_dir(part)
                }
                other => other,
            };
            current = match next {
                Ok(dir) => dir,
                Err(e) => return Err(current.explain(part, &at, e)),
            };
        }
        Ok(current)
    }

    /// One `openat2` beneath this folder that follows no link at all.
    fn openat2_dir(&self, rel: &Path) -> io::Result<Dir> {
        let path = c_name(rel.as_os_str())?;
        // SAFETY: `open_how` is plain data; all-zero is a valid value that is then filled in.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = DIR_FLAGS as u64;
        how.resolve =
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        let fd = loop {
            // SAFETY: the folder descriptor is open for the call; `path` is a NUL-terminated
            // string and `how` a valid `open_how` of the size passed, both alive for the call.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    self.fd.as_raw_fd(),
                    path.as_ptr(),
                    &how as *const libc::open_how,
                    size_of::<libc::open_how>(),
                )
            };
            if ret >= 0 {
                break ret as libc::c_int;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        Ok(Dir {
            // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Component by component: `openat(O_NOFOLLOW | O_DIRECTORY)`, `mkdirat` where missing.
    fn walk(&self, parts: &[&OsStr], create: bool) -> Result<Dir, Refusal> {
        let mut at = PathBuf::new();
        let mut current: Option<Dir> = None;
        for part in parts {
            at.push(part);
            let parent = current.as_ref().unwrap_or(self);
            let next = match parent.open_child_dir(part) {
                Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                    match parent.mkdir(part) {
                        Ok(()) => {}
                        // Made meanwhile by another writer: open what is there.
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(Refusal::Io(e)),
                    }
                    parent.open_child_dir(part)
                }
                other => other,
            };
            match next {
                Ok(dir) => current = Some(dir),
                Err(e) => return Err(parent.explain(part, &at, e)),
            }
        }
        match current {
            Some(dir) => Ok(dir),
            None => Ok(self.try_clone()?),
        }
    }

    /// A failed open of `name` in this folder: a link there is a [`Refusal::Link`]. So is a
    /// folder there now that was not one at the open: a link swapped in and out again while
    /// the write ran (a file where a folder must be stays the system's error).
    fn explain(&self, name: &OsStr, at: &Path, e: io::Error) -> Refusal {
        let errno = e.raw_os_error().unwrap_or(0);
        let swapped = match self.kind(name).ok().flatten() {
            Some(Kind::Link) => [libc::ELOOP, libc::ENOTDIR, libc::EXDEV].contains(&errno),
            Some(Kind::Dir) => [libc::ELOOP, libc::ENOTDIR].contains(&errno),
            _ => false,
        };
        match swapped {
            true => Refusal::Link(at.to_path_buf()),
            false => Refusal::Io(e),
        }
    }

    fn open_child_dir(&self, name: &OsStr) -> io::Result<Dir> {
        let name = c_name(name)?;
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated and alive.
        let fd = retry(|| unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), DIR_FLAGS) })?;
        Ok(Dir {
            // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Creates the folder `name` in this folder.
    pub fn mkdir(&self, name: &OsStr) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated and alive.
        retry(|| unsafe { libc::mkdirat(self.fd.as_raw_fd(), name.as_ptr(), 0o777) }).map(drop)
    }

    /// What `name` in this folder is, without following a link; `None` when nothing is there.
    pub fn kind(&self, name: &OsStr) -> io::Result<Option<Kind>> {
        Ok(self.stat(name)?.map(|st| match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Link,
            _ => Kind::Other,
        }))
    }

    /// The permission bits of the regular file `name` in this folder (not through a link);
    /// `None` when no regular file is there.
    pub fn file_mode(&self, name: &OsStr) -> io::Result<Option<u32>> {
        Ok(self
            .stat(name)?
            .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
            .map(|st| st.st_mode & 0o7777))
    }

    /// `fstatat` of `name` in this folder, without following a link; `None` when nothing is
    /// there.
    fn stat(&self, name: &OsStr) -> io::Result<Option<libc::stat>> {
        let name = c_name(name)?;
        // SAFETY: `stat` is plain data, filled in by the kernel below.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated; `st` is writable.
        let ret = retry(|| unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        });
        match ret {
            Ok(_) => Ok(Some(st)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates `name` in this folder for writing; fails if anything (a link too) is there.
    pub fn create_new(&self, name: &OsStr) -> io::Result<File> {
        let name = c_name(name)?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated and alive.
        let fd = retry(|| unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                flags,
                0o666 as libc::c_uint,
            )
        })?;
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Opens the regular file `name` in this folder for reading, never through a link and
    /// never blocking on a FIFO (`O_NONBLOCK`, then anything but a regular file is refused).
    pub fn open_file(&self, name: &OsStr) -> io::Result<File> {
        let name = c_name(name)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated and alive.
        let fd = retry(|| unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags) })?;
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(file)
    }

    /// Renames `from` in this folder to `to` in `dest`, replacing what `to` names (a link is
    /// replaced, not followed).
    pub fn rename(&self, from: &OsStr, dest: &Dir, to: &OsStr) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // SAFETY: both folder descriptors are open; both names are NUL-terminated and alive.
        retry(|| unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                from.as_ptr(),
                dest.fd.as_raw_fd(),
                to.as_ptr(),
            )
        })
        .map(drop)
    }

    /// Renames `from` in this folder to `to` in `dest`, failing with `AlreadyExists` if `to`
    /// exists (`renameat2(RENAME_NOREPLACE)`); `Unsupported` where the kernel or file system
    /// cannot.
    pub fn rename_noreplace(&self, from: &OsStr, dest: &Dir, to: &OsStr) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // SAFETY: both folder descriptors are open; both names are NUL-terminated and alive.
        let ret = retry(|| unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                self.fd.as_raw_fd(),
                from.as_ptr(),
                dest.fd.as_raw_fd(),
                to.as_ptr(),
                libc::RENAME_NOREPLACE,
            ) as libc::c_int
        });
        match ret {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) => {
                Err(io::Error::new(io::ErrorKind::Unsupported, e))
            }
            other => other.map(drop),
        }
    }

    /// Hard-links `from` in this folder as `to` in `dest` (fails if `to` exists).
    pub fn link(&self, from: &OsStr, dest: &Dir, to: &OsStr) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // SAFETY: both folder descriptors are open; both names are NUL-terminated and alive.
        retry(|| unsafe {
            libc::linkat(
                self.fd.as_raw_fd(),
                from.as_ptr(),
                dest.fd.as_raw_fd(),
                to.as_ptr(),
                0,
            )
        })
        .map(drop)
    }

    /// Removes the file (or link) `name` in this folder.
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated and alive.
        retry(|| unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) }).map(drop)
    }

    /// Removes the empty folder `name` in this folder.
    pub fn rmdir(&self, name: &OsStr) -> io::Result<()> {
        let name = c_name(name)?;
        // SAFETY: the folder descriptor is open; `name` is NUL-terminated and alive.
        retry(|| unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })
            .map(drop)
    }

    /// Makes the entries of this folder durable.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: the folder descriptor is open for the call.
        retry(|| unsafe { libc::fsync(self.fd().as_raw_fd()) }).map(drop)
    }

    /// The folder's device and inode.
    pub fn id(&self) -> io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let file = File::from(self.fd.try_clone()?);
        let meta = file.metadata()?;
        Ok((meta.dev(), meta.ino()))
    }
}

use std::os::unix::fs::OpenOptionsExt;

/// Splits a path relative to a root into its folder part and file name, refusing anything but
/// a plain relative path to a name.
pub fn split(rel: &Path) -> Result<(&Path, &OsStr), Refusal> {
    match (plain(rel), rel.file_name(), rel.parent()) {
        (Some(parts), Some(name), Some(parent)) if !parts.is_empty() => Ok((parent, name)),
        _ => Err(Refusal::NotBeneath(rel.to_path_buf())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        Fixture {
            _dir: dir,
            root,
            outside,
        }
    }

    /// Both resolutions: `openat2` where the kernel has it, then the component walk alone (as
    /// on kernels without it).
    fn both(check: impl Fn(&dyn Fn(&Dir, &str, bool) -> Result<Dir, Refusal>)) {
        check(&|dir, rel, create| dir.open_dir_by(Path::new(rel), create, true));
        check(&|dir, rel, create| dir.open_dir_by(Path::new(rel), create, false));
    }

    fn is_link(r: Result<Dir, Refusal>, at: &str) {
        match r {
            Err(Refusal::Link(p)) => assert_eq!(p, Path::new(at)),
            other => panic!("expected a link refusal at {at}, got {other:?}"),
        }
    }

    #[test]
    fn plain_folders_resolve_and_missing_ones_are_made() {
        both(|open| {
            let f = fixture();
            let root = Dir::root(&f.root, false).unwrap();
            let dir = open(&root, "a/b", false).unwrap();
            dir.create_new(OsStr::new("x")).unwrap();
            assert!(f.root.join("a/b/x").is_file());
            assert!(matches!(
                open(&root, "a/missing/deep", false),
                Err(Refusal::Io(e)) if e.kind() == io::ErrorKind::NotFound
            ));
            let made = open(&root, "a/missing/deep", true).unwrap();
            made.create_new(OsStr::new("y")).unwrap();
            assert!(f.root.join("a/missing/deep/y").is_file());
            assert!(open(&root, "", false).is_ok());
        });
    }

    #[test]
    fn a_link_at_any_component_is_refused() {
        both(|open| {
            let f = fixture();
            // A link to outside as the first, a middle and the last folder of the path.
            symlink(&f.outside, f.root.join("first")).unwrap();
            symlink(&f.outside, f.root.join("a/middle")).unwrap();
            symlink(&f.outside, f.root.join("a/b/last")).unwrap();
            // A link that stays inside is not followed either.
            symlink(f.root.join("a"), f.root.join("inner")).unwrap();
            // Relative links: climbing out, and pointing at the folder itself.
            symlink("../../outside", f.root.join("a/up")).unwrap();
            symlink(".", f.root.join("a/here")).unwrap();
            let root = Dir::root(&f.root, false).unwrap();
            for create in [false, true] {
                is_link(open(&root, "first/x", create), "first");
                is_link(open(&root, "first", create), "first");
                is_link(open(&root, "a/middle/b", create), "a/middle");
                is_link(open(&root, "a/b/last", create), "a/b/last");
                is_link(open(&root, "inner/b", create), "inner");
                is_link(open(&root, "a/up", create), "a/up");
                is_link(open(&root, "a/here/b", create), "a/here");
            }
            assert_eq!(
                fs::read_dir(&f.outside).unwrap().count(),
                0,
                "nothing made outside"
            );
        });
    }

    #[test]
    fn an_absolute_link_to_a_file_is_not_a_folder() {
        both(|open| {
            let f = fixture();
            fs::write(f.outside.join("file"), "x").unwrap();
            symlink(f.outside.join("file"), f.root.join("a/f")).unwrap();
            let root = Dir::root(&f.root, false).unwrap();
            is_link(open(&root, "a/f", true), "a/f");
            // A file on the way is an error, not a link.
            fs::write(f.root.join("a/plain"), "x").unwrap();
            assert!(matches!(
                open(&root, "a/plain/x", true),
                Err(Refusal::Io(_))
            ));
        });
    }

    #[test]
    fn dot_dot_absolute_and_empty_paths_are_refused() {
        let f = fixture();
        let root = Dir::root(&f.root, false).unwrap();
        for rel in ["..", "a/../..", "a/..", "/etc", "./a", "a/./b"] {
            // `Path` drops interior `.` components; those that remain are refused.
            let r = root.open_dir(Path::new(rel), true);
            if rel == "a/./b" {
                assert!(r.is_ok(), "{rel}");
            } else {
                assert!(matches!(r, Err(Refusal::NotBeneath(_))), "{rel}: {r:?}");
            }
        }
        for rel in ["", "/x", "../x", "a/.."] {
            assert!(split(Path::new(rel)).is_err(), "{rel}");
        }
        let (dir, name) = split(Path::new("a/b/x.md")).unwrap();
        assert_eq!((dir, name), (Path::new("a/b"), OsStr::new("x.md")));
        assert!(!f.outside.join("x").exists());
    }

    #[test]
    fn file_operations_never_follow_links() {
        let f = fixture();
        let root = Dir::root(&f.root, false).unwrap();
        let a = root.open_dir(Path::new("a"), false).unwrap();
        symlink(f.outside.join("target"), f.root.join("a/link")).unwrap();
        // Creating through a dangling link fails; nothing appears outside.
        assert!(a.create_new(OsStr::new("link")).is_err());
        assert!(!f.outside.join("target").exists());
        // Opening for reading refuses a link and a FIFO (and does not block on it).
        fs::write(f.outside.join("target"), "secret").unwrap();
        assert!(a.open_file(OsStr::new("link")).is_err());
        let fifo = CString::new(f.root.join("a/pipe").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path alive for the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(a.open_file(OsStr::new("pipe")).is_err());
        assert_eq!(a.kind(OsStr::new("pipe")).unwrap(), Some(Kind::Other));
        assert_eq!(a.kind(OsStr::new("link")).unwrap(), Some(Kind::Link));
        assert_eq!(a.kind(OsStr::new("none")).unwrap(), None);
        // Renaming over a link replaces the link.
        a.create_new(OsStr::new("new")).unwrap();
        a.rename(OsStr::new("new"), &a, OsStr::new("link")).unwrap();
        assert_eq!(a.kind(OsStr::new("link")).unwrap(), Some(Kind::File));
        assert_eq!(
            fs::read_to_string(f.outside.join("target")).unwrap(),
            "secret"
        );
        // No-replace rename and link refuse an existing name.
        a.create_new(OsStr::new("other")).unwrap();
        match a.rename_noreplace(OsStr::new("other"), &a, OsStr::new("link")) {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::AlreadyExists),
            Ok(()) => panic!("replaced"),
        }
        let e = a
            .link(OsStr::new("other"), &a, OsStr::new("link"))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        a.unlink(OsStr::new("other")).unwrap();
        a.mkdir(OsStr::new("sub")).unwrap();
        a.rmdir(OsStr::new("sub")).unwrap();
        a.sync().unwrap();
    }
}
