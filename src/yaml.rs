//! The one YAML loader of the crate, bounded for hostile input: frontmatter blocks and the
//! configuration seed both go through it, each with its own [`Limits`]. It turns the first
//! document into a small value tree and refuses documents that are too big or too deep once
//! aliases are expanded.
//!
//! Why not `yaml_rust2::YamlLoader`: it copies the aliased node for every alias, so a few hundred
//! bytes of nested aliases ("billion laughs") become gigabytes. And why not `Parser::load` with an
//! event receiver: `load` recurses once per nesting level, so a 256 KiB block of `[[[[…` would
//! overflow the stack before a receiver could object, and a receiver cannot stop it anyway. So this
//! module pulls events one at a time with `Parser::next_token` and builds the tree on an explicit
//! stack, checking the budgets as it goes. Aliases share the anchored node (`Rc`) instead of
//! copying it, but are charged its full size, so the budget bounds what a consumer walking the tree
//! would see.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// What one kind of document may cost.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most nodes the document may expand to (aliases counted at the size of what they name).
    pub max_nodes: usize,
    /// Deepest nesting of sequences and mappings.
    pub max_depth: usize,
    /// Whether aliases (`*name`) are allowed at all.
    pub aliases: bool,
}

/// The handle `!!` expands to: tags under it are the YAML core schema's (`!!str`, `!!null`, …).
const CORE_SCHEMA_TAG_HANDLE: &str = "tag:yaml.org,2002:";

/// What yaml-rust2's scanner says when flow collections nest beyond its own limit (255).
const SCANNER_NESTING_LIMIT: &str = "recursion limit exceeded";

/// A node of the tree. Shared so that an alias costs a pointer, not a copy.
pub type Node = Rc<Value>;

/// A YAML value, with scalars resolved as the YAML 1.2 core schema resolves them, except that
/// numbers keep their source text (frontmatter keeps `3.10` as written).
#[derive(Debug, PartialEq)]
pub enum Value {
    /// `~`, `null` (any of its three spellings), an empty plain scalar, or a `!!null` scalar.
    Null,
    /// A plain `true`/`false` (any of its three spellings) or a `!!bool` one, with its text.
    Bool(bool, String),
    /// A plain scalar that reads as an integer or a float (`42`, `-1`, `0x1F`, `1.5e3`, `.inf`).
    Number(String),
    /// Every other scalar: quoted and block scalars, and plain text, as written.
    Text(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// The text of a non-null scalar.
    pub fn scalar_text(&self) -> Option<&str> {
        match self {
            Value::Bool(_, text) | Value::Number(text) | Value::Text(text) => Some(text),
            Value::Null | Value::Seq(_) | Value::Map(_) => None,
        }
    }
}

/// Why a document could not be loaded.
#[derive(Debug, PartialEq, Eq)]
pub enum LoadError {
    /// It is not YAML: what the parser said.
    Syntax(String),
    /// The text holds more than one document (`count` of them).
    Documents(usize),
    /// It expands to more than this many nodes.
    TooComplex(usize),
    /// It nests deeper than this many levels (or deeper than the parser allows).
    TooDeep(usize),
    /// An alias where [`Limits::aliases`] forbids them.
    Alias,
    /// An alias inside the node it names (`&a [*a]`), which has no finite value.
    SelfAlias,
}

impl LoadError {
    /// Whether the document was refused for what it would cost rather than for its syntax.
    pub fn is_limit(&self) -> bool {
        !matches!(self, LoadError::Syntax(_) | LoadError::Documents(_))
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Syntax(why) => f.write_str(why),
            LoadError::Documents(count) => write!(f, "YAML holds {count} documents, not one"),
            LoadError::TooComplex(max) => write!(f, "YAML is too complex (more than {max} nodes)"),
            LoadError::TooDeep(max) => {
                write!(f, "YAML is nested too deeply (more than {max} levels)")
            }
            LoadError::Alias => f.write_str("YAML aliases (*name) are not supported here"),
            LoadError::SelfAlias => f.write_str("YAML has an alias inside the node it refers to"),
        }
    }
}

/// yaml-rust2's message for a tab after a mapping key's `:`.
const TAB_AFTER_COLON: &str = "':' must be followed by a valid YAML whitespace";

/// Loads the document in `yaml`. `Ok(None)` when the text holds no document at all (only
/// comments, say). A second document is an error: the text is meant to be one mapping, and
/// silently dropping the rest would hide a mistake.
///
/// YAML 1.2 separates a key's `:` from its value with spaces or tabs; the scanner takes only
/// spaces (`name:\tpdf` is an error to it). A text it refuses for that alone is read again with
/// those tabs as spaces, so a file written with tabs keeps its frontmatter.
pub fn load(yaml: &str, limits: &Limits) -> Result<Option<Node>, LoadError> {
    load_at(yaml, limits, 1)
}

/// [`load`] of a text that starts at line `first_line` of its file (a frontmatter block starts
/// at line 2, below its fence): a syntax error names the file's line, where an editor finds it.
pub fn load_at(yaml: &str, limits: &Limits, first_line: usize) -> Result<Option<Node>, LoadError> {
    match load_as_written(yaml, limits, first_line) {
        Err(LoadError::Syntax(why)) if why.contains(TAB_AFTER_COLON) => {
            let spaced = tabs_after_keys_as_spaces(yaml);
            load_as_written(&spaced, limits, first_line).map_err(|_| LoadError::Syntax(why))
        }
        loaded => loaded,
    }
}

/// `yaml` with the tabs that follow a plain key's `:` on each line as spaces: the line's first
/// `:` after a key that holds no quote, bracket or `#`.
fn tabs_after_keys_as_spaces(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    for line in yaml.split_inclusive('\n') {
        let Some(colon) = line.find(':') else {
            out.push_str(line);
            continue;
        };
        let key = line[..colon].trim_start_matches([' ', '-']);
        let plain = !key.trim().is_empty() && !key.contains(['"', '\'', '[', '{', '#', '\t']);
        let rest = &line[colon + 1..];
        if !plain || !rest.starts_with('\t') {
            out.push_str(line);
            continue;
        }
        out.push_str(&line[..=colon]);
        let value = rest.trim_start_matches('\t');
        out.push_str(&" ".repeat(rest.len() - value.len()));
        out.push_str(value);
    }
    out
}

fn load_as_written(
    yaml: &str,
    limits: &Limits,
    first_line: usize,
) -> Result<Option<Node>, LoadError> {
    let mut parser = Parser::new_from_str(yaml);
    let mut builder = Builder::new(*limits);
    loop {
        let (event, _mark) = parser.next_token().map_err(|error| {
            // The scanner's own nesting guard is a budget like ours, not a syntax mistake.
            if error.info() == SCANNER_NESTING_LIMIT {
                LoadError::TooDeep(limits.max_depth)
            } else {
                // The scanner counts lines from 1 and columns from 0.
                let at = error.marker();
                LoadError::Syntax(format!(
                    "{} at line {} column {}",
                    error.info(),
                    at.line() + first_line - 1,
                    at.col() + 1
                ))
            }
        })?;
        if builder.accept(event)? == Step::Finished {
            return match builder.documents {
                0 | 1 => Ok(builder.root),
                count => Err(LoadError::Documents(count)),
            };
        }
    }
}

/// A finished node with what the budgets need to know about it.
#[derive(Clone)]
struct Built {
    node: Node,
    /// Nodes it expands to.
    size: usize,
    /// Containers on its deepest path (0 for a scalar).
    height: usize,
}

/// A sequence or mapping whose end event has not arrived yet.
struct Frame {
    anchor: usize,
    size: usize,
    height: usize,
    body: FrameBody,
}

enum FrameBody {
    Seq(Vec<Node>),
    /// Entries so far, and a key still waiting for its value.
    Map(Vec<(Node, Node)>, Option<Node>),
}

#[derive(PartialEq)]
enum Step {
    More,
    Finished,
}

struct Builder {
    limits: Limits,
    stack: Vec<Frame>,
    /// Finished anchored nodes by the parser's anchor id (ids start at 1; 0 means no anchor).
    anchors: HashMap<usize, Built>,
    nodes: usize,
    documents: usize,
    root: Option<Node>,
}

impl Builder {
    fn new(limits: Limits) -> Builder {
        Builder {
            limits,
            stack: Vec::new(),
            anchors: HashMap::new(),
            nodes: 0,
            documents: 0,
            root: None,
        }
    }

    fn accept(&mut self, event: Event) -> Result<Step, LoadError> {
        // After the first document only documents are counted: nothing more is built.
        if self.documents > 1 && !matches!(event, Event::StreamEnd | Event::DocumentStart) {
            return Ok(Step::More);
        }
        match event {
            Event::StreamEnd => return Ok(Step::Finished),
            Event::DocumentStart => self.documents += 1,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::Scalar(text, style, anchor, tag) => {
                self.charge(1)?;
                let node = Rc::new(scalar_value(text, style, tag.as_ref()));
                self.finish(
                    Built {
                        node,
                        size: 1,
                        height: 0,
                    },
                    anchor,
                )?;
            }
            Event::Alias(anchor) => {
                if !self.limits.aliases {
                    return Err(LoadError::Alias);
                }
                // The parser only emits aliases to anchors it has seen, so a miss here means the
                // alias sits inside the very node it names.
                let built = self
                    .anchors
                    .get(&anchor)
                    .cloned()
                    .ok_or(LoadError::SelfAlias)?;
                self.charge(built.size)?;
                self.finish(built, 0)?;
            }
            Event::SequenceStart(anchor, _) => self.open(anchor, FrameBody::Seq(Vec::new()))?,
            Event::MappingStart(anchor, _) => {
                self.open(anchor, FrameBody::Map(Vec::new(), None))?;
            }
            Event::SequenceEnd | Event::MappingEnd => self.close()?,
        }
        Ok(Step::More)
    }

    fn charge(&mut self, nodes: usize) -> Result<(), LoadError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > self.limits.max_nodes {
            return Err(LoadError::TooComplex(self.limits.max_nodes));
        }
        Ok(())
    }

    fn open(&mut self, anchor: usize, body: FrameBody) -> Result<(), LoadError> {
        self.charge(1)?;
        if self.stack.len() >= self.limits.max_depth {
            return Err(LoadError::TooDeep(self.limits.max_depth));
        }
        self.stack.push(Frame {
            anchor,
            size: 1,
            height: 1,
            body,
        });
        Ok(())
    }

    fn close(&mut self) -> Result<(), LoadError> {
        let frame = self.stack.pop().ok_or_else(|| {
            LoadError::Syntax("YAML closes a collection it never opened".to_owned())
        })?;
        let value = match frame.body {
            FrameBody::Seq(items) => Value::Seq(items),
            FrameBody::Map(entries, _) => Value::Map(entries),
        };
        self.finish(
            Built {
                node: Rc::new(value),
                size: frame.size,
                height: frame.height,
            },
            frame.anchor,
        )
    }

    /// Records a finished node under its anchor and hands it to the collection it belongs to.
    fn finish(&mut self, built: Built, anchor: usize) -> Result<(), LoadError> {
        if anchor != 0 {
            self.anchors.insert(anchor, built.clone());
        }
        let depth = self.stack.len();
        let Some(parent) = self.stack.last_mut() else {
            self.root = Some(built.node);
            return Ok(());
        };
        // An alias can graft a deep node under a deep collection; check the combined depth here
        // rather than only when collections open.
        if depth + built.height > self.limits.max_depth {
            return Err(LoadError::TooDeep(self.limits.max_depth));
        }
        parent.size = parent.size.saturating_add(built.size);
        parent.height = parent.height.max(built.height + 1);
        match &mut parent.body {
            FrameBody::Seq(items) => items.push(built.node),
            FrameBody::Map(entries, pending) => match pending.take() {
                None => *pending = Some(built.node),
                Some(key) => entries.push((key, built.node)),
            },
        }
        Ok(())
    }
}

/// Resolves a scalar the way the YAML 1.2 core schema does: quoted and block scalars are text,
/// plain ones may be null, boolean or a number, and a core-schema tag decides when there is one.
fn scalar_value(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Value {
    if let Some(tag) = tag {
        if tag.handle != CORE_SCHEMA_TAG_HANDLE {
            return Value::Text(text);
        }
        return match tag.suffix.as_str() {
            "null" => Value::Null,
            "bool" => match plain_bool(&text) {
                Some(flag) => Value::Bool(flag, text),
                None => Value::Text(text),
            },
            "int" | "float" if is_number(&text) => Value::Number(text),
            _ => Value::Text(text),
        };
    }
    if style != TScalarStyle::Plain {
        return Value::Text(text);
    }
    if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
        return Value::Null;
    }
    if let Some(flag) = plain_bool(&text) {
        return Value::Bool(flag, text);
    }
    if is_number(&text) {
        return Value::Number(text);
    }
    Value::Text(text)
}

fn plain_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// The core schema's integers (`42`, `-1`, `0o17`, `0x1F`) and floats (`1.5`, `-2e3`, `.inf`,
/// `.nan` in their three spellings).
fn is_number(text: &str) -> bool {
    if let Some(hex) = text.strip_prefix("0x") {
        return !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    if let Some(octal) = text.strip_prefix("0o") {
        return !octal.is_empty() && octal.bytes().all(|b| (b'0'..=b'7').contains(&b));
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    // Digits with at most one dot, at least one digit, then an optional exponent.
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
    let dots = mantissa.bytes().filter(|b| *b == b'.').count();
    let mantissa_ok = digits > 0 && dots <= 1 && digits + dots == mantissa.len();
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tab_after_a_keys_colon_separates_as_a_space_does() {
        let limits = LIMITS;
        let tabbed = load(
            "name:\tpdf\ndescription:\t\tRead PDFs.\nlist:\n  - a:\tb\n",
            &limits,
        )
        .expect("read")
        .expect("a document");
        let spaced = load(
            "name: pdf\ndescription:  Read PDFs.\nlist:\n  - a: b\n",
            &limits,
        )
        .expect("read")
        .expect("a document");
        assert_eq!(tabbed, spaced);
        // Other mistakes are still mistakes, reported as they were.
        let err = load("name:\tpdf\nbad: [\n", &limits).expect_err("unclosed");
        assert!(err.to_string().contains(TAB_AFTER_COLON), "{err}");
        // A tab inside a quoted key or a value is left as it is.
        assert_eq!(
            tabs_after_keys_as_spaces("\"a:\tb\": x\nk: v:\tw\n"),
            "\"a:\tb\": x\nk: v:\tw\n"
        );
    }

    const LIMITS: Limits = Limits {
        max_nodes: 10_000,
        max_depth: 64,
        aliases: true,
    };

    fn root(yaml: &str) -> Node {
        match load(yaml, &LIMITS) {
            Ok(Some(node)) => node,
            other => panic!("expected a document for {yaml:?}, got {other:?}"),
        }
    }

    fn text(value: &str) -> Value {
        Value::Text(value.to_owned())
    }

    fn number(value: &str) -> Value {
        Value::Number(value.to_owned())
    }

    #[test]
    fn scalars_resolve_to_null_bool_number_or_text() {
        assert_eq!(*root("~"), Value::Null);
        assert_eq!(*root("null"), Value::Null);
        assert_eq!(*root("NULL"), Value::Null);
        assert_eq!(*root("!!null whatever"), Value::Null);
        assert_eq!(*root("True"), Value::Bool(true, "True".to_owned()));
        assert_eq!(*root("FALSE"), Value::Bool(false, "FALSE".to_owned()));
        assert_eq!(*root("!!bool true"), Value::Bool(true, "true".to_owned()));
        assert_eq!(*root("'true'"), text("true"));
        assert_eq!(*root("\"null\""), text("null"));
        assert_eq!(*root("!!str null"), text("null"));
        assert_eq!(*root("!custom null"), text("null"));
        assert_eq!(*root("yes"), text("yes"));
        assert_eq!(*root("|\n  block\n"), text("block\n"));
        for n in [
            "0x1F", "0o17", "1.50", "42", "-1", "+3", "1e3", "-2.5E-4", ".inf", "-.Inf", ".nan",
        ] {
            assert_eq!(*root(n), number(n), "{n}");
        }
        for t in ["1.2.3", "0x", "1e", "e3", "1-2", ".", "1_000", "v1", "'42'"] {
            assert!(matches!(*root(t), Value::Text(_)), "{t}");
        }
        assert_eq!(*root("!!int 7"), number("7"));
        assert_eq!(*root("!!int nope"), text("nope"));
    }

    #[test]
    fn collections_keep_order_and_aliases_share_nodes() {
        let node = root("a: &x [1, 2]\nb: *x\n");
        let Value::Map(entries) = &*node else {
            panic!("expected a mapping, got {node:?}");
        };
        assert_eq!(entries.len(), 2);
        assert_eq!(*entries[0].0, text("a"));
        assert!(Rc::ptr_eq(&entries[0].1, &entries[1].1));
    }

    #[test]
    fn aliases_can_be_refused() {
        let no_aliases = Limits {
            aliases: false,
            ..LIMITS
        };
        assert_eq!(
            load("a: &x [1]\nb: *x\n", &no_aliases),
            Err(LoadError::Alias)
        );
        assert!(load("a: &x [1]\n", &no_aliases).is_ok());
    }

    #[test]
    fn comments_only_hold_no_document() {
        assert_eq!(load("# just a comment\n", &LIMITS), Ok(None));
        assert_eq!(load("", &LIMITS), Ok(None));
    }

    #[test]
    fn more_documents_are_refused_and_counted() {
        assert_eq!(
            load("a: 1\n--- \nb: 2\n", &LIMITS),
            Err(LoadError::Documents(2))
        );
        assert_eq!(
            load("a: 1\n---\nb: [2]\n---\nc: 3\n", &LIMITS),
            Err(LoadError::Documents(3))
        );
        // An explicit end marker alone does not start another document.
        assert!(load("a: 1\n...\n", &LIMITS).is_ok());
    }

    #[test]
    fn an_alias_inside_its_own_anchor_is_refused() {
        assert_eq!(load("a: &x [1, *x]\n", &LIMITS), Err(LoadError::SelfAlias));
    }

    #[test]
    fn node_budget_counts_alias_expansions() {
        // 100 aliases of a 100-element list: 2 kB of text, 10 000+ nodes once expanded.
        let mut yaml = String::from("a: &a [");
        yaml.push_str(&vec!["x"; 99].join(", "));
        yaml.push_str("]\nb: [");
        yaml.push_str(&vec!["*a"; 100].join(", "));
        yaml.push_str("]\n");
        assert_eq!(load(&yaml, &LIMITS), Err(LoadError::TooComplex(10_000)));
    }

    #[test]
    fn exactly_the_budget_is_accepted() {
        // One mapping node plus key/value scalar pairs, up to the budget in total.
        let pairs = (LIMITS.max_nodes - 1) / 2;
        let yaml: String = (0..pairs).map(|i| format!("k{i}: v\n")).collect();
        assert!(load(&yaml, &LIMITS).is_ok());
        let one_more = format!("{yaml}extra: [1]\n");
        assert!(load(&one_more, &LIMITS).is_err());
    }

    #[test]
    fn depth_is_capped_for_plain_nesting() {
        let max = LIMITS.max_depth;
        let ok = format!("{}{}", "[".repeat(max), "]".repeat(max));
        assert!(load(&ok, &LIMITS).is_ok());
        let deep = format!("{}{}", "[".repeat(max + 1), "]".repeat(max + 1));
        assert_eq!(load(&deep, &LIMITS), Err(LoadError::TooDeep(max)));
        // Deeper than the scanner's own limit is refused the same way.
        let deeper = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert_eq!(load(&deeper, &LIMITS), Err(LoadError::TooDeep(max)));
    }

    #[test]
    fn depth_is_capped_through_aliases() {
        let half = LIMITS.max_depth / 2 + 1;
        let yaml = format!(
            "- &d {}{}\n- {}*d{}\n",
            "[".repeat(half),
            "]".repeat(half),
            "[".repeat(half),
            "]".repeat(half)
        );
        assert_eq!(
            load(&yaml, &LIMITS),
            Err(LoadError::TooDeep(LIMITS.max_depth))
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert!(!LoadError::Syntax("x".into()).is_limit());
        assert!(!LoadError::Documents(2).is_limit());
        assert!(LoadError::TooDeep(3).is_limit());
        assert_eq!(
            LoadError::TooComplex(10).to_string(),
            "YAML is too complex (more than 10 nodes)"
        );
    }
}
