//! A bounded YAML loader for frontmatter blocks: it turns the first YAML document into a small
//! value tree and refuses documents that are too big or too deep once aliases are expanded.
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
use std::rc::Rc;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// Most nodes one frontmatter document may expand to (aliases counted at the size of what they
/// point to). Real frontmatter has a few dozen; this leaves room for long `skills` lists.
pub const MAX_NODES: usize = 10_000;

/// Deepest nesting of sequences and mappings allowed. Frontmatter is flat in practice; the cap
/// keeps recursive walks and drops of the tree shallow.
pub const MAX_DEPTH: usize = 64;

/// What yaml-rust2's scanner says when flow collections nest beyond its own limit.
const SCANNER_NESTING_LIMIT: &str = "recursion limit exceeded";

/// The handle `!!` expands to: tags under it are the YAML core schema's (`!!str`, `!!null`, …).
const CORE_SCHEMA_TAG_HANDLE: &str = "tag:yaml.org,2002:";

/// A node of the tree. Shared so that an alias costs a pointer, not a copy.
pub type Node = Rc<Value>;

/// A YAML value, with scalars resolved just enough for frontmatter: null, boolean or text.
#[derive(Debug, PartialEq)]
pub enum Value {
    /// `~`, `null` (any of its three spellings), an empty plain scalar, or a `!!null` scalar.
    Null,
    /// A plain `true`/`false` (any of its three spellings) or a `!!bool` one; the text is kept
    /// because string fields keep a boolean as written.
    Bool(bool, String),
    /// Every other scalar: strings as written, numbers as their source text.
    Text(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// The text of a non-null scalar.
    pub fn scalar_text(&self) -> Option<&str> {
        match self {
            Value::Bool(_, text) | Value::Text(text) => Some(text),
            Value::Null | Value::Seq(_) | Value::Map(_) => None,
        }
    }
}

/// Why a block could not be loaded.
#[derive(Debug, PartialEq, Eq)]
pub enum LoadError {
    /// It is not (one document of) YAML: what the parser said.
    Syntax(String),
    /// It is over a budget, or refers to itself: refused whatever else it says.
    Limit(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Syntax(why) | LoadError::Limit(why) => f.write_str(why),
        }
    }
}

/// Loads the document in `yaml`. `Ok(None)` when the text holds no document at all (only
/// comments, say). A second document in the same block is an error: the block is meant to be one
/// mapping, and silently dropping the rest would hide a mistake.
pub fn load(yaml: &str) -> Result<Option<Node>, LoadError> {
    let mut parser = Parser::new_from_str(yaml);
    let mut builder = Builder::default();
    loop {
        let (event, _mark) = parser.next_token().map_err(|error| {
            // The scanner's own nesting guard is a budget like ours, not a syntax mistake.
            if error.info() == SCANNER_NESTING_LIMIT {
                LoadError::Limit(error.to_string())
            } else {
                LoadError::Syntax(error.to_string())
            }
        })?;
        if builder.accept(event)? == Step::Finished {
            return Ok(builder.root);
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

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    /// Finished anchored nodes by the parser's anchor id (ids start at 1; 0 means no anchor).
    anchors: HashMap<usize, Built>,
    nodes: usize,
    documents: usize,
    root: Option<Node>,
}

impl Builder {
    fn accept(&mut self, event: Event) -> Result<Step, LoadError> {
        match event {
            Event::StreamEnd => return Ok(Step::Finished),
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(LoadError::Syntax(
                        "frontmatter YAML holds more than one document".to_owned(),
                    ));
                }
            }
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
                // The parser only emits aliases to anchors it has seen, so a miss here means the
                // alias sits inside the very node it names (`&a [*a]`), which has no finite value.
                let built = self.anchors.get(&anchor).cloned().ok_or_else(|| {
                    LoadError::Limit(
                        "frontmatter YAML has an alias inside the node it refers to".to_owned(),
                    )
                })?;
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
        if self.nodes > MAX_NODES {
            return Err(LoadError::Limit(format!(
                "frontmatter YAML is too complex (more than {MAX_NODES} nodes)"
            )));
        }
        Ok(())
    }

    fn open(&mut self, anchor: usize, body: FrameBody) -> Result<(), LoadError> {
        self.charge(1)?;
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep());
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
            LoadError::Syntax("frontmatter YAML closes a collection it never opened".to_owned())
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
        if depth + built.height > MAX_DEPTH {
            return Err(too_deep());
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

fn too_deep() -> LoadError {
    LoadError::Limit(format!(
        "frontmatter YAML is nested too deeply (more than {MAX_DEPTH} levels)"
    ))
}

/// Resolves a scalar the way the YAML 1.2 core schema does, as far as frontmatter cares: quoted
/// and block scalars are text, plain ones may be null or boolean, and a core-schema tag decides
/// when there is one. Numbers stay text because every numeric field here is kept as written.
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
            _ => Value::Text(text),
        };
    }
    if style != TScalarStyle::Plain {
        return Value::Text(text);
    }
    if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
        return Value::Null;
    }
    match plain_bool(&text) {
        Some(flag) => Value::Bool(flag, text),
        None => Value::Text(text),
    }
}

fn plain_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(yaml: &str) -> Node {
        match load(yaml) {
            Ok(Some(node)) => node,
            other => panic!("expected a document for {yaml:?}, got {other:?}"),
        }
    }

    fn text(value: &str) -> Value {
        Value::Text(value.to_owned())
    }

    #[test]
    fn scalars_resolve_to_null_bool_or_text() {
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
        assert_eq!(*root("0x1F"), text("0x1F"));
        assert_eq!(*root("1.50"), text("1.50"));
        assert_eq!(*root("|\n  block\n"), text("block\n"));
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
    fn comments_only_hold_no_document() {
        assert_eq!(load("# just a comment\n"), Ok(None));
        assert_eq!(load(""), Ok(None));
    }

    #[test]
    fn a_second_document_is_refused() {
        let err = load("a: 1\n--- \nb: 2\n")
            .expect_err("two documents")
            .to_string();
        assert!(err.contains("more than one document"), "{err}");
        // An explicit end marker alone does not start another document.
        assert!(load("a: 1\n...\n").is_ok());
    }

    #[test]
    fn an_alias_inside_its_own_anchor_is_refused() {
        let err = load("a: &x [1, *x]\n")
            .expect_err("self-reference")
            .to_string();
        assert!(err.contains("alias"), "{err}");
    }

    #[test]
    fn node_budget_counts_alias_expansions() {
        // 100 aliases of a 100-element list: 2 kB of text, 10 000+ nodes once expanded.
        let mut yaml = String::from("a: &a [");
        yaml.push_str(&vec!["x"; 99].join(", "));
        yaml.push_str("]\nb: [");
        yaml.push_str(&vec!["*a"; 100].join(", "));
        yaml.push_str("]\n");
        let err = load(&yaml).expect_err("over budget");
        assert_eq!(
            err,
            LoadError::Limit(format!(
                "frontmatter YAML is too complex (more than {MAX_NODES} nodes)"
            ))
        );
    }

    #[test]
    fn exactly_the_budget_is_accepted() {
        // One mapping node plus key/value scalar pairs, up to MAX_NODES in total.
        let pairs = (MAX_NODES - 1) / 2;
        let yaml: String = (0..pairs).map(|i| format!("k{i}: v\n")).collect();
        assert!(load(&yaml).is_ok());
        let one_more = format!("{yaml}extra: [1]\n");
        assert!(load(&one_more).is_err());
    }

    #[test]
    fn depth_is_capped_for_plain_nesting() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(load(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(load(&deep), Err(too_deep()));
    }

    #[test]
    fn depth_is_capped_through_aliases() {
        let half = MAX_DEPTH / 2 + 1;
        let yaml = format!(
            "- &d {}{}\n- {}*d{}\n",
            "[".repeat(half),
            "]".repeat(half),
            "[".repeat(half),
            "]".repeat(half)
        );
        assert_eq!(load(&yaml), Err(too_deep()));
    }
}
