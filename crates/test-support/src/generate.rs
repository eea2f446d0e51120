//! Deterministic skill trees for tests and benchmarks: N skills spread over namespaces and
//! depths with varied frontmatter, plus local overrides, agents skills, system prompts and
//! agent profiles, laid out under the default folders of a base directory. Bodies are drawn
//! from a corpus of real markdown when one is given (so sizes and shapes are realistic), else
//! synthesized.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// What to generate.
#[derive(Clone, Debug)]
pub struct TreeSpec {
    /// Skills under `skills_folder` (local overrides and agents skills come on top, about 1%
    /// each).
    pub skills: usize,
    pub seed: u64,
    /// Folder of real markdown files to draw bodies from (e.g. `../shared/corpus`).
    pub corpus: Option<PathBuf>,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    pub skills: usize,
    pub local_skills: usize,
    pub agents_skills: usize,
    pub system_prompts: usize,
    pub agents: usize,
    pub bytes: u64,
}

/// A small deterministic generator (SplitMix64): the same seed gives the same tree everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "send", "email", "queue", "stream", "state", "cron", "http", "worker", "agent", "memory",
    "search", "index", "render", "fetch", "parse", "store", "table", "graph", "token", "model",
    "prompt", "review", "deploy", "build", "test", "trace", "log", "metric", "cache", "file",
    "image", "audio", "video", "chart", "report", "sheet",
];
const TYPES: &[&str] = &["how-to", "reference", "tutorial", "concept"];

/// Bodies to draw from: real markdown bodies (frontmatter removed) or synthesized ones.
pub struct Bodies {
    pool: Vec<String>,
}

impl Bodies {
    /// Loads every `.md` file under `corpus` (up to 256 KiB each), without its frontmatter.
    pub fn from_corpus(corpus: &Path) -> io::Result<Bodies> {
        let mut files = Vec::new();
        collect_markdown(corpus, &mut files)?;
        files.sort();
        let mut pool = Vec::new();
        for file in files {
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            if text.len() > iii_directory::doc::MAX_FILE_BYTES as usize - 1024 {
                continue;
            }
            let body = &text[iii_directory::doc::frontmatter::split(&text).body_offset..];
            if !body.trim().is_empty() {
                pool.push(body.to_string());
            }
        }
        if pool.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no markdown under {}", corpus.display()),
            ));
        }
        Ok(Bodies { pool })
    }

    /// Synthesized bodies with sizes spread like real skills (a few hundred bytes to ~40 KB).
    pub fn synthetic(seed: u64) -> Bodies {
        let mut rng = Rng::new(seed ^ 0x5EED);
        let pool = (0..256)
            .map(|i| {
                let paragraphs = 1 + rng.below(if i % 10 == 0 { 120 } else { 12 });
                let mut body = format!("# {} {}\n\n", rng.pick(WORDS), rng.pick(WORDS));
                for p in 0..paragraphs {
                    if p % 4 == 3 {
                        body.push_str("```sh\n# not a heading\niii trigger example::fn\n```\n\n");
                    }
                    let words = 20 + rng.below(60);
                    let line: Vec<&str> = (0..words).map(|_| *rng.pick(WORDS)).collect();
                    body.push_str(&line.join(" "));
                    body.push_str(".\n\n");
                }
                body
            })
            .collect();
        Bodies { pool }
    }

    pub fn pick(&self, rng: &mut Rng) -> &str {
        &self.pool[rng.below(self.pool.len())]
    }
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect_markdown(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// Frontmatter in the shapes real skills use: none, title only, description, type, name,
/// function id, disable-model-invocation, and now and then YAML that does not parse.
fn skill_frontmatter(rng: &mut Rng, title: &str, overview: bool) -> String {
    if overview {
        return format!(
            "---\ntitle: {title}\ntype: index\ndescription: Overview of {title} and when to use it.\n---\n"
        );
    }
    match rng.below(10) {
        0 | 1 => String::new(),
        2 => format!("---\ntitle: {title}\n---\n"),
        3 => format!(
            "---\nname: {title}\ndescription: Use this to {} {}.\n---\n",
            rng.pick(WORDS),
            rng.pick(WORDS)
        ),
        4 => format!("---\ntitle: {title}\ntype: {}\n---\n", rng.pick(TYPES)),
        5 => format!(
            "---\ntitle: {title}\nfunction_id: {}::{}\ntype: reference\n---\n",
            rng.pick(WORDS),
            rng.pick(WORDS)
        ),
        6 => format!("---\ntitle: {title}\ndisable-model-invocation: true\n---\n"),
        7 => "---\ntitle: [unclosed\n---\n".to_string(),
        _ => format!(
            "---\ntitle: \"{title}\"\ndescription: >\n  Folded description about {} and {}.\ntags: [a, b]\n---\n",
            rng.pick(WORDS),
            rng.pick(WORDS)
        ),
    }
}

/// Writes a tree under `base` in the default layout (`skills`, `skills/iii`, `.agents/skills`,
/// `agents`), creating folders as needed.
pub fn write_tree(base: &Path, spec: &TreeSpec) -> io::Result<TreeStats> {
    let bodies = match &spec.corpus {
        Some(corpus) => Bodies::from_corpus(corpus)?,
        None => Bodies::synthetic(spec.seed),
    };
    write_tree_with(base, spec, &bodies)
}

pub fn write_tree_with(base: &Path, spec: &TreeSpec, bodies: &Bodies) -> io::Result<TreeStats> {
    let mut tree = Writer {
        base,
        rng: Rng::new(spec.seed),
        bodies,
        stats: TreeStats::default(),
    };
    // One random stream through the parts, in this order: the same seed gives the same tree.
    let namespaces = (spec.skills / 40).max(1);
    tree.skills(spec.skills, namespaces)?;
    tree.local_overrides(spec.skills)?;
    tree.agents_skills(spec.skills)?;
    tree.system_prompts(spec.skills, namespaces)?;
    tree.agent_profiles(spec.skills, namespaces)?;
    Ok(tree.stats)
}

/// The name of namespace `i`.
fn ns_name(i: usize) -> String {
    format!(
        "{}-{}-{i}",
        WORDS[i % WORDS.len()],
        WORDS[(i / 7) % WORDS.len()]
    )
}

/// A tree being written: where, the random stream and the bodies it draws from, and what it
/// wrote so far.
struct Writer<'a> {
    base: &'a Path,
    rng: Rng,
    bodies: &'a Bodies,
    stats: TreeStats,
}

impl<'a> Writer<'a> {
    fn write(&mut self, path: PathBuf, text: &str) -> io::Result<()> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        self.stats.bytes += text.len() as u64;
        fs::write(path, text)
    }

    fn body(&mut self) -> &'a str {
        self.bodies.pick(&mut self.rng)
    }

    /// `skills` skills under `skills/`: the first of each namespace its `index.md` overview,
    /// the others up to two folders deeper.
    fn skills(&mut self, skills: usize, namespaces: usize) -> io::Result<()> {
        for i in 0..skills {
            let ns = ns_name(i % namespaces);
            let first_of_ns = i < namespaces;
            let (rel, overview) = if first_of_ns {
                (format!("{ns}/index.md"), true)
            } else {
                let depth = self.rng.below(3);
                let mut rel = ns.clone();
                for _ in 0..depth {
                    rel.push('/');
                    let word: &&str = self.rng.pick(WORDS);
                    rel.push_str(word);
                }
                (format!("{rel}/{}-{i}.md", self.rng.pick(WORDS)), false)
            };
            let title = format!("{} {}", self.rng.pick(WORDS), self.rng.pick(WORDS));
            let frontmatter = skill_frontmatter(&mut self.rng, &title, overview);
            let text = format!("{frontmatter}{}", self.body());
            self.write(self.base.join("skills").join(rel), &text)?;
            self.stats.skills += 1;
        }
        Ok(())
    }

    /// Local overrides: a few whole namespaces under the local root (`skills/iii`), each
    /// shadowing the namespace of the same name in `skills_folder`.
    fn local_overrides(&mut self, skills: usize) -> io::Result<()> {
        let local_namespaces = (skills / 2000).max(1);
        for i in 0..(skills / 100).max(1) {
            let ns = ns_name(i % local_namespaces);
            let name = if i < local_namespaces {
                "index.md".to_string()
            } else {
                format!("local-{i}.md")
            };
            let text = format!("---\ntitle: Local {ns}\n---\n{}", self.body());
            let path = self.base.join("skills/iii").join(&ns).join(name);
            self.write(path, &text)?;
            self.stats.local_skills += 1;
        }
        Ok(())
    }

    /// Agents skills: shallow `<dir>/SKILL.md` plus support files that are never listed.
    fn agents_skills(&mut self, skills: usize) -> io::Result<()> {
        for i in 0..(skills / 100).max(1) {
            let dir = self
                .base
                .join(".agents/skills")
                .join(format!("agent-skill-{i}"));
            let text = format!(
                "---\nname: agent-skill-{i}\ndescription: A system-installed skill.\n---\n{}",
                self.body()
            );
            self.write(dir.join("SKILL.md"), &text)?;
            self.write(
                dir.join("reference/notes.md"),
                "# Notes\n\nSupport payload.\n",
            )?;
            self.stats.agents_skills += 1;
        }
        Ok(())
    }

    /// System prompts, in the `system-prompts/` folder of the namespaces.
    fn system_prompts(&mut self, skills: usize, namespaces: usize) -> io::Result<()> {
        for i in 0..(skills / 500).max(1) {
            let ns = ns_name(i % namespaces);
            let text = format!(
                "---\nname: prompt-{i}\ndescription: Identity prompt {i}.\n---\n{}",
                self.body()
            );
            let path = self
                .base
                .join("skills")
                .join(&ns)
                .join("system-prompts")
                .join(format!("prompt-{i}.md"));
            self.write(path, &text)?;
            self.stats.system_prompts += 1;
        }
        Ok(())
    }

    /// Agent profiles under `agents/`: the first extends the bundled `iii`, every third the
    /// one before it; each lists a namespace and a skill that does not exist.
    fn agent_profiles(&mut self, skills: usize, namespaces: usize) -> io::Result<()> {
        for i in 0..(skills / 200).max(2) {
            let extends = match i {
                0 => "extends: iii\n".to_string(),
                i if i % 3 == 0 => format!("extends: agent-{}\n", i - 1),
                _ => String::new(),
            };
            let skills = format!(
                "skills:\n  - {}\n  - missing-skill-{i}\n",
                ns_name(i % namespaces)
            );
            let text = format!(
                "---\nname: Agent {i}\ndescription: Profile {i}.\nlogo: \"🤖\"\n{extends}{skills}---\nYou are agent {i}.\n"
            );
            let path = self.base.join("agents").join(format!("agent-{i}.md"));
            self.write(path, &text)?;
            self.stats.agents += 1;
        }
        Ok(())
    }
}
