//! Updates as plan, then apply (issue 29): `directory::skills::bundles::plan-update
//! {namespace, version? | tag? | branch?}` and `::apply {plan_id, on_conflict?}`, and the
//! re-download of a locked namespace, which goes through the same two steps.
//!
//! A plan compares three sides of every file of a locked bundle: the base (what the lock
//! records: its sha256, and for a merge its bytes, fetched again at the locked commit or
//! version and cached by that pin), the disk, and the upstream candidate (fetched through the
//! download's own fetch). Per file it says whether upstream added, changed or removed it,
//! whether the local copy is clean, modified, missing, already the upstream bytes, or a local
//! file the lock does not know, and for a file changed on both sides whether the three-way
//! merge ([`merge`](super::merge)) is clean. Plans are kept in memory for [`PLAN_TTL`] (at most
//! [`MAX_PLANS`], the oldest dropped first); a plan's id names it on the bus.
//!
//! Apply lands a plan through the download's staged, all-or-nothing landing, the bundle's
//! record and the lock in the same commit, files removed upstream removed in it too. Under the
//! landing lock it first checks that the lock entry and every file the plan looked at are as
//! they were: otherwise the plan is stale, and the answer is `D336` carrying a fresh plan made
//! from the same upstream. What lands, by `on_conflict`:
//!
//! - every choice: a file nobody edited takes the upstream bytes (or goes, when upstream
//!   removed it); a missing file comes back; a file edited locally that upstream did not change
//!   stays as the user has it (`kept_local`), unless `take-upstream`;
//! - `merge` (the default): a file changed on both sides is merged three-way when the merge is
//!   clean (`merged`); otherwise the user's copy stays, the upstream text lands beside it as
//!   `<name>.upstream` (a name the index never serves: it does not end in `.md`, and the walk
//!   lists it with `SkipReason::UpstreamCopy`), and the file is a conflict;
//! - `keep-local`: a file changed on both sides keeps the user's copy, nothing beside it;
//! - `take-upstream`: every file takes the upstream bytes (a download's `force: true`); a file
//!   the bundle never installed is still refused (`D330`), as a download refuses it.
//!
//! A file edited locally and removed upstream stays (a conflict, named in `kept_local` like every
//! file kept as the user has it) unless `take-upstream`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::code::Code;
use crate::config::Paths;
use crate::directory::{Change, Directory};
use crate::error::{Error, Result, quoted};
use crate::events::Family;
use crate::locks;
use crate::registry::{Registry, Release};
use crate::request;
use crate::store::landing::{self, Changes};

use super::bundle::{Bundle, Dest, File, Written};
use super::guard::{self, OnEdited, namespace_folder, placed_rel};
use super::land::{Landed, LockPlaces, download_events, is_record, served_prompt, without_kept};
use super::lock::{self, Entry, LockedSource, Route};
use super::merge::merge;
use super::review::{self, Review};
use super::source::Source;
use super::status;
use super::{fetch, fetch_repo, url};

/// How long a plan stays valid.
pub const PLAN_TTL: Duration = Duration::from_secs(10 * 60);
/// The most plans kept at once; a new one drops the oldest.
pub const MAX_PLANS: usize = 32;
/// The most bytes of upstream bundles the plans kept hold together; a new plan drops the
/// oldest until it fits (alone, it is kept whatever its size: a download's own limit bounds
/// it). Without it, 32 plans of a 60 MiB bundle pinned 2 GiB for ten minutes.
const MAX_PLAN_BYTES: usize = 256 * 1024 * 1024;
/// The most bundles kept as bases (each a bundle's bytes at a pin).
const MAX_BASES: usize = 8;
/// The most bytes the bases kept hold together; a bundle larger than this is not kept.
const MAX_BASE_BYTES: usize = 64 * 1024 * 1024;
pub use crate::rules::skip::UPSTREAM_SUFFIX;

/// What apply does with a file changed on both sides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnConflict {
    KeepLocal,
    TakeUpstream,
    #[default]
    Merge,
}

impl OnConflict {
    pub const ALL: [OnConflict; 3] = [
        OnConflict::Merge,
        OnConflict::KeepLocal,
        OnConflict::TakeUpstream,
    ];
}

impl From<OnEdited> for OnConflict {
    fn from(on_edited: OnEdited) -> OnConflict {
        match on_edited {
            OnEdited::Keep => OnConflict::Merge,
            OnEdited::Overwrite => OnConflict::TakeUpstream,
        }
    }
}

/// What upstream did to a file since the locked version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Upstream {
    Added,
    Changed,
    Removed,
    Unchanged,
}

/// The local copy against the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Local {
    /// The locked bytes.
    Clean,
    /// Other bytes than the lock's (and than upstream's).
    Modified,
    /// Gone from disk.
    Missing,
    /// Already the upstream bytes.
    Same,
    /// Not in the lock, and not on disk.
    Absent,
    /// Not in the lock, but a file with other bytes is there.
    Present,
}

/// A file changed on both sides: what the three-way merge gives.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Merged {
    Clean(Vec<u8>),
    Conflict,
}

/// A placed path: its root and its path under it.
type Key = (Dest, String);

#[derive(Clone, Debug)]
struct Planned {
    key: Key,
    shown: String,
    route: Route,
    upstream: Upstream,
    local: Local,
    /// The upstream file's index in the plan's bundle.
    up: Option<usize>,
    /// For a file changed on both sides with `merge`.
    merged: Option<Merged>,
    /// The disk holds the upstream bytes already.
    current: bool,
    /// The sha256 of the `<name>.upstream` copy beside the file (an earlier conflict's), when
    /// there is one.
    copy: Option<String>,
    /// The copy holds other bytes than the conflict wrote there ([`status::copy_edited`]): the
    /// user's merge in progress, which no landing removes or writes over.
    copy_edited: bool,
}

impl Planned {
    fn both_changed(&self) -> bool {
        matches!(self.upstream, Upstream::Added | Upstream::Changed)
            && matches!(self.local, Local::Modified | Local::Present)
            || self.upstream == Upstream::Removed && self.local == Local::Modified
    }

    fn noteworthy(&self) -> bool {
        self.upstream != Upstream::Unchanged
            || self.local != Local::Clean
            || !self.current
            || self.copy.is_some()
    }

    /// The placed path of the file's `<name>.upstream` copy.
    fn copy_key(&self) -> Key {
        (self.key.0, format!("{}{UPSTREAM_SUFFIX}", self.key.1))
    }

    /// Whether landing `action` leaves the file's `.upstream` copy stale, so that the landing
    /// removes it: the file is no longer in conflict once it holds the bytes the lock will
    /// record, once the lock no longer records it, or once upstream moved past the copy's text
    /// (a merge or keep-local settled it). A conflict landing again writes a fresh copy.
    fn copy_stale_after(&self, action: &Action, bundle: &Bundle, dropped: Dropped) -> bool {
        let Some(copy) = &self.copy else {
            return false;
        };
        if self.copy_edited || matches!(action, Action::KeepBeside) {
            return false;
        }
        let locked = match self.up {
            Some(i) if !(self.upstream == Upstream::Removed && dropped == Dropped::Keep) => {
                lock::sha256_hex(&bundle.files[i].bytes)
            }
            _ => return true,
        };
        let landed_is_locked = match action {
            Action::Upstream => true,
            Action::Merged(bytes) => lock::sha256_hex(bytes) == locked,
            Action::Remove => return true,
            _ => self.current,
        };
        landed_is_locked || *copy != locked
    }
}

/// A bundle's locked pin's files (placed), each checked against its locked sha256.
type Base = BTreeMap<Key, Vec<u8>>;

/// One plan.
#[derive(Clone)]
pub struct Plan {
    pub id: String,
    namespace: String,
    folder: String,
    /// The lock's entry when the plan was made.
    entry: Entry,
    /// The upstream candidate as fetched (its files under `<namespace>/`).
    bundle: Bundle,
    /// Each file looked at, with the sha256 it had on disk (`None`: absent).
    seen: BTreeMap<Key, Option<String>>,
    files: Vec<Planned>,
    review: Review,
    /// Why a merge had no base, when it had none.
    base_problem: Option<String>,
    made: Instant,
    expires_at: String,
}

struct Store {
    plans: HashMap<String, Plan>,
    order: VecDeque<String>,
    /// Bundles as fetched, by pin ([`base_key`]): what a later plan's base is, once the lock
    /// names that pin.
    bases: HashMap<String, Arc<Bundle>>,
    base_order: VecDeque<String>,
}

fn store() -> &'static Mutex<Store> {
    static STORE: OnceLock<Mutex<Store>> = OnceLock::new();
    STORE.get_or_init(|| {
        Mutex::new(Store {
            plans: HashMap::new(),
            order: VecDeque::new(),
            bases: HashMap::new(),
            base_order: VecDeque::new(),
        })
    })
}

fn keep(plan: Plan) {
    let mut store = locks::lock(store());
    store.plans.retain(|_, p| p.made.elapsed() < PLAN_TTL);
    let live: Vec<String> = store
        .order
        .iter()
        .filter(|id| store.plans.contains_key(*id))
        .cloned()
        .collect();
    store.order = live.into();
    let Store { plans, order, .. } = &mut *store;
    let room = Room {
        count: MAX_PLANS,
        bytes: MAX_PLAN_BYTES,
    };
    room.make(
        order,
        plans,
        |p| bundle_bytes(&p.bundle),
        bundle_bytes(&plan.bundle),
    );
    store.order.push_back(plan.id.clone());
    store.plans.insert(plan.id.clone(), plan);
}

fn take_plan(id: &str) -> Result<Plan> {
    let store = locks::lock(store());
    match store.plans.get(id) {
        Some(plan) if plan.made.elapsed() < PLAN_TTL => Ok(plan.clone()),
        _ => Err(Error::coded(
            Code::BundlePlanUnknown,
            format!(
                "no update plan {} (a plan is kept {} minutes, in this process only, and only the {MAX_PLANS} newest holding at most {} MiB of bundles together); make a new one.",
                quoted(id),
                PLAN_TTL.as_secs() / 60,
                MAX_PLAN_BYTES / (1024 * 1024)
            ),
            &[crate::error::next(PLAN_UPDATE, "make a fresh plan")],
        )),
    }
}

fn forget(id: &str) {
    let mut store = locks::lock(store());
    store.plans.remove(id);
}

/// `directory::skills::bundles::plan-update`.
pub const PLAN_UPDATE: &str = "directory::skills::bundles::plan-update";
/// `directory::skills::bundles::apply`.
pub const APPLY: &str = "directory::skills::bundles::apply";

/// `{namespace, version? | tag? | branch?}`.
#[derive(Deserialize)]
struct PlanRequest {
    namespace: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    branch: Option<String>,
}

/// `{plan_id, on_conflict?}`.
#[derive(Deserialize)]
struct ApplyRequest {
    plan_id: String,
    #[serde(default)]
    on_conflict: Option<OnConflict>,
}

fn present(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// What a missing lock entry means for a plan.
const NOT_LOCKED_THEN: &str = "download it first, then plan its updates.";

/// Answers `plan-update`: fetches the upstream candidate and answers the plan.
pub async fn plan_update(
    directory: &Arc<Directory>,
    registry: &Registry,
    request: &Value,
) -> Result<Value> {
    let PlanRequest {
        namespace,
        version,
        tag,
        branch,
    } = request::parse(request)?;
    let namespace = namespace.trim().to_string();
    let (version, tag, branch) = (present(version), present(tag), present(branch));
    let paths = directory.config().paths.clone();
    let entry = lock::read(&paths.bundles_lock)?
        .bundles
        .remove(&namespace)
        .ok_or_else(|| lock::not_locked(&namespace, NOT_LOCKED_THEN))?;
    let source = match &entry.source {
        LockedSource::Registry {
            worker, tag: held, ..
        } => {
            if branch.is_some() {
                return Err(Error::Invalid(format!(
                    "bundle {} comes from the registry: give version or tag, not branch",
                    quoted(&namespace)
                )));
            }
            let release = match (version, tag) {
                (Some(_), Some(_)) => {
                    return Err(Error::Invalid("give version or tag, not both".to_string()));
                }
                (Some(v), None) => Release::Version(v),
                (None, Some(t)) => Release::Tag(t),
                (None, None) => held.clone().map_or_else(Release::latest, Release::Tag),
            };
            Source::Registry {
                worker: worker.clone(),
                release,
            }
        }
        LockedSource::Repo {
            repo,
            branch: held,
            folder,
            ..
        } => {
            if version.is_some() || tag.is_some() {
                return Err(Error::Invalid(format!(
                    "bundle {} comes from a repository: give branch, not version or tag",
                    quoted(&namespace)
                )));
            }
            Source::Repo {
                repo: repo.clone(),
                skill: folder.strip_prefix("skills/").unwrap_or(folder).to_string(),
                branch: branch.unwrap_or_else(|| held.clone()),
            }
        }
    };
    let bundle = fetch(&directory.settings(), registry, source, &|_| {}).await?;
    remember_base(registry, &bundle);
    let plan = make(directory, registry, entry, bundle).await?;
    let answer = plan.to_json();
    keep(plan);
    Ok(answer)
}

/// Answers `apply`.
pub async fn apply(
    directory: &Arc<Directory>,
    registry: &Registry,
    request: &Value,
) -> Result<Value> {
    let ApplyRequest {
        plan_id,
        on_conflict,
    } = request::parse(request)?;
    let plan = take_plan(plan_id.trim())?;
    let on_conflict = on_conflict.unwrap_or_default();
    let applied = land_plan(directory, registry, plan, (on_conflict, Dropped::Remove)).await?;
    Ok(applied.answer())
}

/// Lands a fetched bundle of a namespace the lock already holds: planned and applied at once
/// (a download's path for a locked namespace). `None` when the namespace is not locked.
pub async fn land_locked(
    directory: &Arc<Directory>,
    registry: &Registry,
    bundle: Bundle,
    on_conflict: OnConflict,
) -> Result<Option<Landed>> {
    let paths = directory.config().paths.clone();
    let namespace = bundle.source.namespace().to_string();
    let Some(entry) = lock::read(&paths.bundles_lock)?.bundles.remove(&namespace) else {
        return Ok(None);
    };
    if on_conflict != OnConflict::TakeUpstream {
        refuse_another_origin(&entry, &bundle.source)?;
    }
    // A download reviews the whole bundle, as a first landing does.
    let whole = review::review(&bundle, directory.settings().download_large_file_bytes);
    let mut plan = make(directory, registry, entry, bundle).await?;
    // A file changing under a download between its plan and its landing: planned again.
    for _ in 0..3 {
        match land_plan(directory, registry, plan, (on_conflict, Dropped::Keep)).await {
            Ok(mut applied) => {
                applied.landed.response["review"] = whole.to_json();
                return Ok(Some(applied.landed));
            }
            Err(Stale::Fresh(fresh)) => plan = *fresh,
            Err(Stale::Error(e)) => return Err(e),
        }
    }
    Err(Error::Invalid(format!(
        "the files of bundle {} kept changing while it landed; nothing was written",
        quoted(&namespace)
    )))
}

/// Why a landing of a plan did not happen.
enum Stale {
    /// The disk or the lock moved since the plan: a fresh plan, kept.
    Fresh(Box<Plan>),
    Error(Error),
}

impl From<Error> for Stale {
    fn from(e: Error) -> Stale {
        Stale::Error(e)
    }
}

impl From<Stale> for Error {
    fn from(stale: Stale) -> Error {
        match stale {
            Stale::Error(e) => e,
            Stale::Fresh(plan) => {
                let fresh = plan.to_json();
                Error::coded(
                    Code::BundlePlanStale,
                    format!(
                        "the files or the lock of bundle {} changed since the plan was made; nothing was written. A fresh plan: {fresh}",
                        quoted(&plan.namespace)
                    ),
                    &[],
                )
            }
        }
    }
}

/// Makes a plan of `bundle` against the lock's `entry` and the disk, with the base fetched
/// when a file changed on both sides needs it.
async fn make(
    directory: &Arc<Directory>,
    registry: &Registry,
    entry: Entry,
    bundle: Bundle,
) -> Result<Plan> {
    let paths = directory.config().paths.clone();
    let large = directory.settings().download_large_file_bytes;
    let scan = {
        let (paths, entry, bundle) = (paths.clone(), entry.clone(), bundle.clone());
        tokio::task::spawn_blocking(move || classify(&paths, &entry, &bundle, large))
            .await
            .map_err(Error::task("plan task"))?
    };
    let mut plan = scan;
    refuse_adopted_profiles(&plan)?;
    let needed: Vec<Key> = plan
        .files
        .iter()
        .filter(|f| f.both_changed() && f.upstream != Upstream::Removed)
        .filter(|f| f.local == Local::Modified)
        .map(|f| f.key.clone())
        .collect();
    if needed.is_empty() {
        merge_all(&paths, &mut plan, None);
        return Ok(plan);
    }
    match base(directory, registry, &plan.entry).await {
        Ok(bundle) => {
            let paths = paths.clone();
            plan = tokio::task::spawn_blocking(move || {
                let base = base_files(&paths, &plan.entry, &bundle, &needed);
                merge_all(&paths, &mut plan, Some(&base));
                plan
            })
            .await
            .map_err(Error::task("plan task"))?;
        }
        Err(e) => {
            plan.base_problem = Some(e.to_string());
            merge_all(&paths, &mut plan, None);
        }
    }
    Ok(plan)
}

/// Refuses a download into a locked namespace from another origin than the lock's (a
/// repository for a registry worker, another repository): the lock would silently point
/// elsewhere, and what the old bundle brought that the new one does not (an agent profile, a
/// prompt: a repository's bundle never has them) would stay on disk with no bundle owning it.
/// Another branch of the same repository is the same origin. `force` replaces the bundle.
fn refuse_another_origin(entry: &Entry, source: &Source) -> Result<()> {
    let same = match (&entry.source, source) {
        (LockedSource::Repo { repo: locked, .. }, Source::Repo { repo, .. }) => {
            url::same_repository(locked, repo)
        }
        (LockedSource::Registry { .. }, Source::Registry { .. }) => true,
        _ => false,
    };
    if same {
        return Ok(());
    }
    let locked = match &entry.source {
        LockedSource::Repo { repo, .. } => format!("the repository {repo}"),
        LockedSource::Registry { worker, .. } => format!("the registry's worker {worker}"),
    };
    let asked = match source {
        Source::Repo { repo, .. } => {
            format!("the repository {}", url::without_credentials(repo))
        }
        Source::Registry { worker, .. } => format!("the registry's worker {worker}"),
    };
    Err(Error::coded(
        Code::BundleConflict,
        format!(
            "namespace {} holds the bundle of {locked} (bundles lock), and this download is from {asked}; nothing was written. Download from the locked origin, or pass force: true (`download --force`) to replace the bundle: files of the old one that the new one does not bring then stay on disk, owned by no bundle.",
            quoted(&entry.namespace)
        ),
        &[],
    ))
}

/// Refuses an update whose new version adds an agent profile where the user (or another
/// namespace) has one of that id: a first download refuses it (`D330`), and so does every later
/// one. A file made by hand in the namespace's own folder may become the bundle's (kept, with
/// `.upstream` beside it); a profile in the shared `agents_folder` never is (SECURITY.md).
fn refuse_adopted_profiles(plan: &Plan) -> Result<()> {
    let Some(file) = plan.files.iter().find(|f| {
        f.key.0 == Dest::Agents
            && f.upstream == Upstream::Added
            && matches!(f.local, Local::Present | Local::Same)
    }) else {
        return Ok(());
    };
    Err(Error::coded(
        Code::BundleConflict,
        format!(
            "bundle file {:?} would replace the agent profile {:?} (agents_folder/{}), which this bundle did not install; the update was refused and nothing was written. Rename or move your profile to take the bundle's.",
            file.shown,
            file.key.1.strip_suffix(".md").unwrap_or(&file.key.1),
            file.key.1
        ),
        &[],
    ))
}

/// The two-sided part of a plan: upstream against the lock, the disk against the lock.
fn classify(paths: &Paths, entry: &Entry, bundle: &Bundle, large: u64) -> Plan {
    let namespace = entry.namespace.clone();
    let folder = namespace_folder(paths, &namespace);
    let locked: BTreeMap<Key, &lock::LockedFile> = entry
        .files
        .iter()
        .map(|f| ((f.route.dest(), f.path.clone()), f))
        .collect();
    let upstream: BTreeMap<Key, usize> = bundle
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| ((f.dest, placed_rel(&folder, &namespace, f.dest, &f.rel)), i))
        .collect();
    let mut keys: Vec<Key> = locked.keys().chain(upstream.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let prefix = format!("{folder}/");
    let mut seen = BTreeMap::new();
    let mut files = Vec::with_capacity(keys.len());
    let mut changed_upstream = Vec::new();
    for key in keys {
        let disk = lock::file_sha256(&key.0.bundle_root(paths).join(&key.1)).map(|(_, sha)| sha);
        let up = upstream.get(&key).copied();
        let up_sha = up.map(|i| lock::sha256_hex(&bundle.files[i].bytes));
        let base_sha = locked.get(&key).map(|f| f.sha256.clone());
        let change = match (&base_sha, &up_sha) {
            (None, _) => Upstream::Added,
            (Some(_), None) => Upstream::Removed,
            (Some(b), Some(u)) if b == u => Upstream::Unchanged,
            _ => Upstream::Changed,
        };
        let local = match (&base_sha, &disk) {
            (_, Some(d)) if up_sha.as_ref() == Some(d) => {
                if base_sha.as_ref() == Some(d) {
                    Local::Clean
                } else {
                    Local::Same
                }
            }
            (Some(b), Some(d)) if b == d => Local::Clean,
            // What the bundle last wrote there, by its record (a copy kept at an earlier
            // landing and put back as the bundle left it, or a file an earlier version had and
            // a download left in place): unedited, so it updates.
            (_, Some(_)) if guard::unedited(paths, &namespace, key.0, &key.1) => Local::Clean,
            (Some(_), Some(_)) => Local::Modified,
            (Some(_), None) => Local::Missing,
            (None, None) => Local::Absent,
            (None, Some(_)) => Local::Present,
        };
        if matches!(change, Upstream::Added | Upstream::Changed) {
            if let Some(i) = up {
                changed_upstream.push(bundle.files[i].clone());
            }
        }
        let route = match locked.get(&key) {
            Some(f) => f.route,
            None => lock::route_of(key.0, key.1.strip_prefix(&prefix).unwrap_or(&key.1)),
        };
        let shown = match key.0 {
            Dest::Agents => format!("agents/{}", key.1),
            _ => key.1.strip_prefix(&prefix).unwrap_or(&key.1).to_string(),
        };
        // A file upstream marks executable that lands without the bit (the repository made it
        // executable later, or an older landing dropped the bit) is landed again. A bit the
        // user added stays.
        let lacks_execute = up.is_some_and(|i| bundle.files[i].executable)
            && !is_executable(&key.0.bundle_root(paths).join(&key.1));
        let current = disk.is_some() && disk == up_sha && !lacks_execute;
        let copy_rel = format!("{}{UPSTREAM_SUFFIX}", key.1);
        let copy = lock::file_sha256(&key.0.bundle_root(paths).join(&copy_rel)).map(|(_, sha)| sha);
        let copy_edited = copy.as_ref().is_some_and(|copy| {
            status::copy_edited(copy, base_sha.as_deref(), || {
                guard::unedited(paths, &namespace, key.0, &copy_rel)
            })
        });
        if copy.is_some() {
            seen.insert((key.0, copy_rel), copy.clone());
        }
        seen.insert(key.clone(), disk);
        files.push(Planned {
            key,
            shown,
            route,
            upstream: change,
            local,
            up,
            merged: None,
            current,
            copy,
            copy_edited,
        });
    }
    // The review names what the update would add or change, not what stays.
    let mut reviewed = bundle.clone();
    reviewed.files = changed_upstream;
    let review = review::review(&reviewed, large);
    let expires_at = crate::time::Stamp::from_system(SystemTime::now() + PLAN_TTL).rfc3339();
    Plan {
        id: new_id(),
        namespace,
        folder,
        entry: entry.clone(),
        bundle: bundle.clone(),
        seen,
        files,
        review,
        base_problem: None,
        made: Instant::now(),
        expires_at,
    }
}

/// The three-way merge of every file changed on both sides (a conflict without a base).
fn merge_all(paths: &Paths, plan: &mut Plan, base: Option<&Base>) {
    for file in plan.files.iter_mut() {
        if !file.both_changed() {
            continue;
        }
        let Some(up) = file.up else {
            file.merged = Some(Merged::Conflict);
            continue;
        };
        let theirs = &plan.bundle.files[up].bytes;
        let mine = std::fs::read(file.key.0.bundle_root(paths).join(&file.key.1)).ok();
        let merged = match (base.and_then(|b| b.get(&file.key)), mine) {
            (Some(base), Some(mine)) if file.local == Local::Modified => {
                merge(base, &mine, theirs).map_or(Merged::Conflict, Merged::Clean)
            }
            _ => Merged::Conflict,
        };
        file.merged = Some(merged);
    }
}

fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let hash = blake3::hash(format!("{}-{n}-{nanos}", std::process::id()).as_bytes());
    format!("plan-{}", &hash.to_hex()[..16])
}

/// The cache key of a pin: a repository folder at a commit, or a registry worker at a
/// version and digest (of the registry it came from). `None` when the pin is incomplete.
fn base_key(registry: &Registry, source: &LockedSource) -> Option<String> {
    match source {
        LockedSource::Repo {
            repo,
            folder,
            commit,
            ..
        } => Some(format!("repo {repo} {folder} {}", commit.as_deref()?)),
        LockedSource::Registry {
            worker,
            version,
            digest,
            ..
        } => Some(format!(
            "registry {} {worker} {} {digest}",
            registry.endpoint().base_url,
            version.as_deref()?
        )),
    }
}

/// Keeps a fetched bundle as the base of the plans made once the lock names its pin (after an
/// apply or a download lands it), so that an update's base is not fetched a second time. Each
/// file is still checked against its locked sha256 when it serves as a base.
pub(crate) fn remember_base(registry: &Registry, bundle: &Bundle) {
    let Some(key) = base_key(
        registry,
        &LockedSource::of(&bundle.source, &bundle.resolved),
    ) else {
        return;
    };
    keep_base(key, Arc::new(bundle.clone()));
}

/// How much a kept set (plans, bases) may hold: entries, and bytes together.
struct Room {
    count: usize,
    bytes: usize,
}

impl Room {
    /// Drops the oldest entries (`order`, oldest first) until one more of `size` bytes fits;
    /// an entry alone is never dropped for its size.
    fn make<V>(
        &self,
        order: &mut VecDeque<String>,
        kept: &mut HashMap<String, V>,
        bytes: impl Fn(&V) -> usize,
        size: usize,
    ) {
        let mut held: usize = kept.values().map(&bytes).sum();
        while order.len() >= self.count || (held > 0 && held + size > self.bytes) {
            let Some(old) = order.pop_front() else {
                break;
            };
            if let Some(gone) = kept.remove(&old) {
                held -= bytes(&gone);
            }
        }
    }
}

fn bundle_bytes(bundle: &Bundle) -> usize {
    bundle.files.iter().map(|f| f.bytes.len()).sum()
}

fn keep_base(key: String, bundle: Arc<Bundle>) {
    let size = bundle_bytes(&bundle);
    if size > MAX_BASE_BYTES {
        return;
    }
    let mut store = locks::lock(store());
    if store.bases.contains_key(&key) {
        return;
    }
    let Store {
        bases, base_order, ..
    } = &mut *store;
    let room = Room {
        count: MAX_BASES,
        bytes: MAX_BASE_BYTES,
    };
    room.make(base_order, bases, |b| bundle_bytes(b), size);
    store.base_order.push_back(key.clone());
    store.bases.insert(key, bundle);
}

/// The bundle at `entry`'s locked pin: kept from an earlier fetch, or fetched again now.
async fn base(
    directory: &Arc<Directory>,
    registry: &Registry,
    entry: &Entry,
) -> Result<Arc<Bundle>> {
    let settings = directory.settings();
    let key = base_key(registry, &entry.source);
    if let Some(bundle) = key
        .as_ref()
        .and_then(|key| locks::lock(store()).bases.get(key).cloned())
    {
        return Ok(bundle);
    }
    let bundle = match &entry.source {
        LockedSource::Repo {
            repo,
            branch,
            folder,
            commit,
        } => {
            let Some(commit) = commit.clone() else {
                return Err(Error::Invalid("the lock names no commit".into()));
            };
            let source = Source::Repo {
                repo: repo.clone(),
                skill: folder.strip_prefix("skills/").unwrap_or(folder).to_string(),
                branch: branch.clone(),
            };
            fetch_repo(&settings, source, Some(commit), &|_| {}).await?
        }
        LockedSource::Registry {
            worker, version, ..
        } => {
            let Some(version) = version.clone() else {
                return Err(Error::Invalid("the lock names no version".into()));
            };
            let source = Source::Registry {
                worker: worker.clone(),
                release: Release::Version(version),
            };
            fetch(&settings, registry, source, &|_| {}).await?
        }
    };
    let bundle = Arc::new(bundle);
    if let Some(key) = key {
        keep_base(key, bundle.clone());
    }
    Ok(bundle)
}

/// The base bytes of the files in `needed`: each file of `bundle` (the locked pin) placed as
/// the lock places it, kept only when it has its locked sha256.
fn base_files(paths: &Paths, entry: &Entry, bundle: &Bundle, needed: &[Key]) -> Base {
    let folder = namespace_folder(paths, &entry.namespace);
    let locked: BTreeMap<&Key, &str> = needed
        .iter()
        .filter_map(|key| {
            let file = entry
                .files
                .iter()
                .find(|f| f.route.dest() == key.0 && f.path == key.1)?;
            Some((key, file.sha256.as_str()))
        })
        .collect();
    bundle
        .files
        .iter()
        .filter_map(|f| {
            let key = (
                f.dest,
                placed_rel(&folder, &entry.namespace, f.dest, &f.rel),
            );
            let sha = locked.get(&key)?;
            (lock::sha256_hex(&f.bytes) == *sha).then(|| (key, f.bytes.clone()))
        })
        .collect()
}

impl Plan {
    fn to_json(&self) -> Value {
        let count = |f: &dyn Fn(&Planned) -> bool| self.files.iter().filter(|p| f(p)).count();
        let files: Vec<Value> = self
            .files
            .iter()
            .filter(|f| f.noteworthy())
            .map(|f| {
                let mut row = json!({
                    "path": f.shown,
                    "route": f.route,
                    "upstream": f.upstream,
                    "local": f.local,
                    "conflict": f.both_changed(),
                });
                if let Some(merged) = &f.merged {
                    row["merge"] = json!(match merged {
                        Merged::Clean(_) => "clean",
                        Merged::Conflict => "conflict",
                    });
                }
                if f.copy.is_some() {
                    let removed_by: Vec<OnConflict> = OnConflict::ALL
                        .into_iter()
                        .filter(|c| {
                            f.copy_stale_after(&decide(f, *c), &self.bundle, Dropped::Remove)
                        })
                        .collect();
                    row["upstream_copy"] = json!({
                        "path": format!("{}{UPSTREAM_SUFFIX}", f.shown),
                        "removed_by": removed_by,
                        "edited": f.copy_edited,
                    });
                }
                row
            })
            .collect();
        let remaining = PLAN_TTL.saturating_sub(self.made.elapsed());
        let mut answer = json!({
            "plan_id": self.id,
            "namespace": self.namespace,
            "expires_at": self.expires_at,
            "expires_in_ms": remaining.as_millis() as u64,
            "from": self.entry.source,
            "to": LockedSource::of(&self.bundle.source, &self.bundle.resolved),
            "summary": {
                "added": count(&|p| p.upstream == Upstream::Added),
                "changed": count(&|p| p.upstream == Upstream::Changed),
                "removed": count(&|p| p.upstream == Upstream::Removed),
                "modified_locally": count(&|p| matches!(p.local, Local::Modified | Local::Present)),
                "conflicts": count(&|p| matches!(p.merged, Some(Merged::Conflict))),
                "merges": count(&|p| matches!(p.merged, Some(Merged::Clean(_)))),
                "upstream_copies_removed": count(&|p| {
                    p.copy_stale_after(&decide(p, OnConflict::Merge), &self.bundle, Dropped::Remove)
                }),
            },
            "files": files,
            "review": self.review.to_json(),
        });
        if let Some(problem) = &self.base_problem {
            answer["base_problem"] = json!(problem);
        }
        answer
    }
}

/// What one file's landing does.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    Nothing,
    /// The upstream bytes.
    Upstream,
    Merged(Vec<u8>),
    /// The local copy stays.
    Keep,
    /// The local copy stays; the upstream text lands beside it.
    KeepBeside,
    Remove,
}

fn decide(file: &Planned, on_conflict: OnConflict) -> Action {
    let take = on_conflict == OnConflict::TakeUpstream;
    match (file.upstream, file.local) {
        (Upstream::Removed, Local::Clean | Local::Same) => Action::Remove,
        (Upstream::Removed, Local::Modified) if take => Action::Remove,
        (Upstream::Removed, Local::Modified) => Action::Keep,
        (Upstream::Removed, _) => Action::Nothing,
        (Upstream::Unchanged, Local::Clean) if !file.current => Action::Upstream,
        (Upstream::Unchanged, Local::Clean | Local::Same) => Action::Nothing,
        (Upstream::Unchanged, Local::Modified | Local::Present) if !take => Action::Keep,
        // A file made here by hand was never the bundle's: taking upstream (a forced download)
        // never replaces it, it gets upstream's text beside it, as a plain download does.
        (_, Local::Present) if take => Action::KeepBeside,
        (_, Local::Modified | Local::Present) => match on_conflict {
            OnConflict::TakeUpstream => Action::Upstream,
            OnConflict::KeepLocal => Action::Keep,
            OnConflict::Merge => match &file.merged {
                Some(Merged::Clean(bytes)) => Action::Merged(bytes.clone()),
                _ => Action::KeepBeside,
            },
        },
        (_, Local::Same) => Action::Upstream,
        (_, Local::Clean | Local::Missing | Local::Absent) => Action::Upstream,
    }
}

/// What a landing does with the files upstream no longer has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dropped {
    /// Removed (apply).
    Remove,
    /// Kept where they are, out of the lock (a download: the contract keeps siblings).
    Keep,
}

/// A landed plan.
struct Applied {
    landed: Landed,
    plan_id: String,
    source: LockedSource,
    written: Vec<String>,
    removed: Vec<String>,
    merged: Vec<String>,
    conflicts: Vec<Value>,
    copies_removed: Vec<String>,
    /// Why no three-way merge was tried (the plan's `base_problem`), when a conflict needed one.
    base_problem: Option<String>,
}

impl Applied {
    fn answer(&self) -> Value {
        let r = &self.landed.response;
        let mut answer = json!({
            "plan_id": self.plan_id,
            "namespace": r["namespace"],
            "written": self.written,
            "removed": self.removed,
            "kept_local": r["kept_local"],
            "merged": self.merged,
            "conflicts": self.conflicts,
            "upstream_copies_removed": self.copies_removed,
            "source": self.source,
        });
        if let Some(problem) = &self.base_problem {
            answer["base_problem"] = json!(problem);
        }
        answer
    }
}

/// Lands `plan` (see the module doc); a stale plan is planned again and kept.
async fn land_plan(
    directory: &Arc<Directory>,
    registry: &Registry,
    plan: Plan,
    (on_conflict, dropped): (OnConflict, Dropped),
) -> std::result::Result<Applied, Stale> {
    let settings = directory.settings();
    review::allow(&plan.review, settings.download_allow_executables)?;
    let landing = directory.clone();
    let planned = plan.clone();
    let outcome =
        tokio::task::spawn_blocking(move || land_now(&landing, &planned, (on_conflict, dropped)))
            .await
            .map_err(Error::task("apply task"))??;
    match outcome {
        Some(applied) => {
            forget(&plan.id);
            Ok(applied)
        }
        None => {
            forget(&plan.id);
            let paths = directory.config().paths.clone();
            let entry = lock::read(&paths.bundles_lock)?
                .bundles
                .remove(&plan.namespace)
                .ok_or_else(|| lock::not_locked(&plan.namespace, NOT_LOCKED_THEN))?;
            let fresh = make(directory, registry, entry, plan.bundle).await?;
            keep(fresh.clone());
            Err(Stale::Fresh(Box::new(fresh)))
        }
    }
}

/// Under the directory's write lock and the landing lock: the staleness check, then the
/// landing. `None` when the plan is stale (nothing written).
fn land_now(
    directory: &Directory,
    plan: &Plan,
    (on_conflict, dropped): (OnConflict, Dropped),
) -> Result<Option<Applied>> {
    let folders = &directory.config().paths;
    let places = LockPlaces::of(folders);
    let targets = places.targets(folders);
    let namespace = plan.namespace.clone();
    let source = plan.bundle.source.clone();
    let served_prompt = |name: &str| served_prompt(directory, name);
    struct Decided {
        stale: bool,
        /// The upstream files not landed as upstream has them (kept or merged).
        kept: Vec<File>,
        /// Every file edited here that stays as it is or merged, as the answer names it
        /// (`kept_local`), upstream removed it or not.
        kept_local: Vec<String>,
        written: Vec<String>,
        removed: Vec<String>,
        merged: Vec<String>,
        conflicts: Vec<Value>,
        copies_removed: Vec<String>,
    }
    let result = directory.change(|| {
        let mut decided = Decided {
            stale: false,
            kept: Vec::new(),
            kept_local: Vec::new(),
            written: Vec::new(),
            removed: Vec::new(),
            merged: Vec::new(),
            conflicts: Vec::new(),
            copies_removed: Vec::new(),
        };
        let touched = landing::land_changes(targets, || {
            let now = lock::read(&folders.bundles_lock)?;
            let unchanged_lock = now
                .bundles
                .get(&namespace)
                .is_some_and(|e| e.source == plan.entry.source && e.files == plan.entry.files);
            let unchanged_disk = plan.seen.iter().all(|(key, sha)| {
                lock::file_sha256(&key.0.bundle_root(folders).join(&key.1)).map(|(_, s)| s) == *sha
            });
            if !unchanged_lock || !unchanged_disk {
                decided.stale = true;
                return Ok(Changes::default());
            }
            let mut files = Vec::new();
            let mut removed = Vec::new();
            // The files that stay as the user has them while the lock lists upstream's bytes.
            let mut kept_here = Vec::new();
            for file in &plan.files {
                let action = match decide(file, on_conflict) {
                    Action::Remove if dropped == Dropped::Keep => Action::Nothing,
                    action => action,
                };
                if file.copy_stale_after(&action, &plan.bundle, dropped) {
                    decided
                        .copies_removed
                        .push(format!("{}{UPSTREAM_SUFFIX}", file.shown));
                    removed.push(file.copy_key());
                }
                let upstream = file.up.map(|i| plan.bundle.files[i].clone());
                match (&action, upstream) {
                    (Action::Upstream, Some(up)) => {
                        if file.noteworthy() {
                            decided.written.push(file.shown.clone());
                        }
                        files.push(up);
                    }
                    (Action::Merged(bytes), Some(up)) => {
                        decided.merged.push(file.shown.clone());
                        decided.written.push(file.shown.clone());
                        decided.kept_local.push(file.shown.clone());
                        decided.kept.push(up.clone());
                        files.push(File {
                            bytes: bytes.clone(),
                            ..up
                        });
                    }
                    (Action::KeepBeside, Some(_)) if file.copy_edited => {
                        return Err(edited_copy_in_the_way(file));
                    }
                    (Action::KeepBeside, Some(up)) => {
                        let beside = format!("{}{UPSTREAM_SUFFIX}", up.rel);
                        decided.conflicts.push(json!({
                            "path": file.shown,
                            "upstream_copy": format!("{}{UPSTREAM_SUFFIX}", file.shown),
                        }));
                        decided.kept_local.push(file.shown.clone());
                        kept_here.push(File {
                            rel: file.key.1.clone(),
                            ..up.clone()
                        });
                        decided.kept.push(up.clone());
                        // Upstream's text to merge by hand, not to run.
                        files.push(File {
                            rel: beside,
                            executable: false,
                            ..up
                        });
                    }
                    (Action::Keep, up) => {
                        if file.both_changed() {
                            decided.conflicts.push(json!({ "path": file.shown }));
                        }
                        // Named even when upstream removed it: it is kept all the same.
                        decided.kept_local.push(file.shown.clone());
                        if let Some(up) = up {
                            kept_here.push(File {
                                rel: file.key.1.clone(),
                                ..up.clone()
                            });
                            decided.kept.push(up);
                        }
                    }
                    (Action::Remove, _) => {
                        decided.removed.push(file.shown.clone());
                        removed.push(file.key.clone());
                    }
                    // Unchanged and clean: it stays, and the record keeps it the bundle's own.
                    _ => {}
                }
            }
            let locked = plan.entry.locked_bytes();
            let mut checked = guard::check(
                folders,
                &namespace,
                files,
                &served_prompt,
                (
                    OnEdited::Overwrite,
                    guard::Beyond {
                        removed: &removed,
                        kept: &kept_here,
                        locked: &locked,
                    },
                ),
            )?;
            let merged: Vec<(Dest, String, Vec<u8>)> = plan
                .files
                .iter()
                .filter(|f| decided.merged.contains(&f.shown))
                .filter_map(|f| {
                    let up = &plan.bundle.files[f.up?];
                    Some((f.key.0, f.key.1.clone(), up.bytes.clone()))
                })
                .collect();
            guard::record_as_upstream(&mut checked, &merged)?;
            let locked_files: Vec<File> = plan
                .bundle
                .files
                .iter()
                .map(|f| File {
                    rel: placed_rel(&checked.folder, &namespace, f.dest, &f.rel),
                    ..f.clone()
                })
                .collect();
            let entry = lock::entry(
                &namespace,
                LockedSource::of(&plan.bundle.source, &plan.bundle.resolved),
                &checked.folder,
                locked_files.iter().filter(|f| !is_record(f)),
            );
            let mut files = checked.files;
            files.push(places.lock_file(folders, &namespace, entry)?);
            Ok(Changes { files, removed })
        })?;
        let touched: Vec<PathBuf> = touched
            .into_iter()
            .filter(|p| *p != folders.bundles_lock)
            .collect();
        if decided.stale {
            return Ok(Change {
                value: (decided, Vec::new(), Written::default()),
                touched,
                events: Vec::new(),
            });
        }
        let written = written_lists(plan, (&decided.kept, &decided.merged), &namespace);
        // One event per family the landing touched; a download (the contract's function) also
        // fires one for each family its answer names files of, as a first download does, even
        // when they came back with the same bytes. `apply` answers only what changed.
        let touched_families = family_of(&touched, folders);
        let events = download_events(&written, &namespace, &source, |family, names| {
            touched_families.contains(&family) || dropped == Dropped::Keep && !names.is_empty()
        });
        let paths = touched
            .iter()
            .filter(|p| p.file_name().is_none_or(|n| n != guard::RECORD_FILE))
            .cloned()
            .collect::<Vec<_>>();
        Ok(Change {
            value: (decided, paths, written),
            touched,
            events,
        })
    })?;
    let (decided, paths, merged_written) = result;
    if decided.stale {
        return Ok(None);
    }
    let kept_local = decided.kept_local.clone();
    // Said only where it explains something: a conflict on a file edited here, which a merge
    // could have settled (a file made by hand, or kept by keep-local, never merges).
    let base_problem = plan.base_problem.clone().filter(|_| {
        plan.files.iter().any(|f| {
            f.local == Local::Modified
                && decided
                    .conflicts
                    .iter()
                    .any(|c| c["path"] == f.shown.as_str())
        })
    });
    let mut response = json!({
        "namespace": namespace,
        "skills_written": merged_written.skills,
        "system_prompts_written": merged_written.system_prompts,
        "agents_written": merged_written.agents,
        "source": source.to_json(),
        "kept_local": kept_local,
        "review": plan.review.to_json(),
        "merged": decided.merged,
        "conflicts": decided.conflicts,
        "removed": decided.removed,
        "upstream_copies_removed": decided.copies_removed,
    });
    if let Some(problem) = &base_problem {
        response["base_problem"] = json!(problem);
    }
    Ok(Some(Applied {
        landed: Landed { response, paths },
        plan_id: plan.id.clone(),
        source: LockedSource::of(&plan.bundle.source, &plan.bundle.resolved),
        written: decided.written,
        removed: decided.removed,
        merged: decided.merged,
        conflicts: decided.conflicts,
        copies_removed: decided.copies_removed,
        base_problem,
    }))
}

/// The refusal of a landing that would write a conflict's upstream text over a `<name>.upstream`
/// copy the user edited since an earlier conflict wrote it (as far as the lock and the bundle's
/// record tell: bytes neither lists).
fn edited_copy_in_the_way(file: &Planned) -> Error {
    let shown = &file.shown;
    // Taking upstream replaces a file the bundle installed; a file made here by hand gets its
    // copy beside it whatever is asked, so only moving the copy helps there.
    let or_take = match file.local {
        Local::Present => "",
        _ => {
            " Or take upstream's file (on_conflict take-upstream, `download --force`), which leaves the copy as it is."
        }
    };
    Error::coded(
        Code::BundleConflict,
        format!(
            "{shown} conflicts with upstream again, and its copy {shown}{UPSTREAM_SUFFIX} holds bytes neither the bundles lock nor the bundle's record lists for it (edits made here since the last conflict wrote it, as far as they tell); nothing was written. Finish that merge by hand, move the copy aside or delete it, and update again; or apply an update plan with on_conflict keep-local, which keeps your file and writes no copy.{or_take}"
        ),
        &[],
    )
}

/// What an applied plan's answer names as written: the bundle's files but those kept as the
/// user has them (placed like the bundle's own), plus the merged ones.
fn written_lists(plan: &Plan, (kept, merged): (&[File], &[String]), namespace: &str) -> Written {
    let folder = &plan.folder;
    let kept: Vec<File> = kept
        .iter()
        .map(|f| File {
            rel: placed_rel(folder, namespace, f.dest, &f.rel),
            ..f.clone()
        })
        .collect();
    let mut written = without_kept(plan.bundle.written.clone(), &kept, folder);
    for name in merged {
        if !written.skills.contains(name) && !name.starts_with("agents/") {
            written.skills.push(name.clone());
        }
    }
    written
}

/// Whether the file at `path` has an execute bit (not following a link).
fn is_executable(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && landing::has_execute_bit(&m))
}

/// The families whose files a landing touched.
fn family_of(touched: &[PathBuf], paths: &Paths) -> Vec<Family> {
    let mut out = Vec::new();
    let mut add = |family| {
        if !out.contains(&family) {
            out.push(family);
        }
    };
    for path in touched {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".md") {
            continue;
        }
        if path.starts_with(&paths.agents_folder) && !path.starts_with(&paths.skills_folder) {
            add(Family::Agents);
        } else if path.components().any(|c| c.as_os_str() == "system-prompts") {
            add(Family::SystemPrompts);
        } else {
            add(Family::Skills);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_plans_and_bases_are_bounded_in_count_and_in_bytes() {
        let room = Room {
            count: 3,
            bytes: 100,
        };
        let mut order = VecDeque::new();
        let mut kept: HashMap<String, usize> = HashMap::new();
        let mut add = |name: &str, size: usize| {
            room.make(&mut order, &mut kept, |v| *v, size);
            order.push_back(name.to_string());
            kept.insert(name.to_string(), size);
            let mut names: Vec<String> = order.iter().cloned().collect();
            names.sort();
            names.join(",")
        };
        assert_eq!(add("a", 40), "a");
        assert_eq!(add("b", 40), "a,b");
        // 120 bytes would not fit: the oldest goes.
        assert_eq!(add("c", 40), "b,c");
        assert_eq!(add("d", 10), "b,c,d");
        // Four would be too many.
        assert_eq!(add("e", 10), "c,d,e");
        // One larger than the room alone is kept, alone.
        assert_eq!(add("f", 500), "f");
        assert_eq!(add("g", 1), "g");
    }

    fn planned(upstream: Upstream, local: Local, merged: Option<Merged>) -> Planned {
        Planned {
            key: (Dest::Skills, "ns/a.md".into()),
            shown: "a.md".into(),
            route: Route::Skills,
            upstream,
            local,
            up: Some(0),
            merged,
            current: false,
            copy: None,
            copy_edited: false,
        }
    }

    #[test]
    fn no_choice_but_take_upstream_drops_a_local_edit() {
        use Local::*;
        use Upstream::*;
        for upstream in [Added, Changed, Removed, Unchanged] {
            for local in [Clean, Modified, Missing, Same, Absent, Present] {
                // A file in the lock is never absent or present; one out of it is never
                // unchanged, changed or removed.
                let locked = upstream != Added;
                if locked == matches!(local, Absent | Present) {
                    continue;
                }
                for merged in [
                    None,
                    Some(Merged::Conflict),
                    Some(Merged::Clean(b"m".to_vec())),
                ] {
                    let file = planned(upstream, local, merged);
                    for choice in [OnConflict::Merge, OnConflict::KeepLocal] {
                        let action = decide(&file, choice);
                        if matches!(local, Modified | Present) {
                            assert!(
                                matches!(
                                    action,
                                    Action::Keep | Action::KeepBeside | Action::Merged(_)
                                ),
                                "{upstream:?} {local:?} {choice:?}: {action:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
