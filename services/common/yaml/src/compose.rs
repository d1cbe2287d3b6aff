//! Events to a node graph, as PyYAML's composer builds it: tags resolved,
//! an alias is the anchored node itself (shared, not copied), one document.

use std::collections::HashMap;
use std::rc::Rc;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Span};

use crate::resolve::{resolve_plain, Implicit};
use crate::{Limits, Mark, YamlError};

pub(crate) const TAG_PREFIX: &str = "tag:yaml.org,2002:";
/// An alias to a node that contains it (no tag can be spelled so).
pub(crate) const RECURSIVE_TAG: &str = " recursive alias";

#[derive(Debug)]
pub(crate) enum Kind {
    Scalar(String),
    Sequence(Vec<Rc<Node>>),
    Mapping(Vec<(Rc<Node>, Rc<Node>)>),
}

#[derive(Debug)]
pub(crate) struct Node {
    /// The resolved tag, in full (`tag:yaml.org,2002:int`, `!local`).
    pub tag: String,
    pub kind: Kind,
    pub mark: Mark,
}

impl Node {
    pub(crate) fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Scalar(_) => "scalar",
            Kind::Sequence(_) => "sequence",
            Kind::Mapping(_) => "mapping",
        }
    }
}

pub(crate) fn mark(m: &Marker) -> Mark {
    Mark { line: m.line(), column: m.col() + 1 }
}

/// PyYAML's reader refuses these characters anywhere in the stream.
fn check_printable(text: &str) -> Result<(), YamlError> {
    let (mut line, mut column) = (1, 1);
    for c in text.chars() {
        let printable = matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
            || c >= '\u{10000}';
        if !printable {
            return Err(YamlError::Syntax {
                problem: format!("unacceptable character #x{:04x}: special characters are not allowed", u32::from(c)),
                mark: Mark { line, column },
            });
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    Ok(())
}

/// The name of the anchor an anchored node's event starts with (its span
/// starts at the node's properties: an optional tag, then `&name`).
fn anchor_name(text: &str, char_offsets: &[usize], start: &Marker) -> String {
    let Some(&byte) = char_offsets.get(start.index()) else { return String::new() };
    let mut rest = &text[byte..];
    if rest.starts_with('!') {
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    let Some(after) = rest.strip_prefix('&') else { return String::new() };
    let end = after.find(|c: char| c.is_whitespace() || ",[]{}".contains(c)).unwrap_or(after.len());
    after[..end].to_string()
}

struct Composer<'a> {
    text: &'a str,
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    /// Anchor id to node; `None` while the anchored node is being composed.
    anchors: HashMap<usize, Option<Rc<Node>>>,
    anchor_names: HashMap<String, Mark>,
    char_offsets: Vec<usize>,
    max_depth: usize,
    /// Whether each open collection is a flow collection.
    flow: Vec<bool>,
}

impl<'a> Composer<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next_event() {
            Some(Ok(ev)) => Ok(ev),
            Some(Err(e)) => Err(YamlError::Syntax { problem: e.info().to_string(), mark: mark(e.marker()) }),
            None => Err(YamlError::Syntax { problem: "unexpected end of stream".into(), mark: Mark::default() }),
        }
    }

    fn register_anchor(&mut self, id: usize, span: &Span) -> Result<(), YamlError> {
        if id == 0 {
            return Ok(());
        }
        self.offsets();
        let name = anchor_name(self.text, &self.char_offsets, &span.start);
        let here = mark(&span.start);
        if let Some(first) = self.anchor_names.insert(name.clone(), here) {
            return Err(YamlError::Compose {
                problem: format!("found duplicate anchor '{name}'; first occurrence {first}; second occurrence"),
                mark: here,
            });
        }
        self.anchors.insert(id, None);
        Ok(())
    }

    fn offsets(&mut self) -> &[usize] {
        if self.char_offsets.is_empty() {
            self.char_offsets = self.text.char_indices().map(|(b, _)| b).collect();
        }
        &self.char_offsets
    }

    /// The text from a character index on.
    fn text_at(&mut self, index: usize) -> &'a str {
        let text = self.text;
        match self.offsets().get(index) {
            Some(&byte) => &text[byte..],
            None => "",
        }
    }

    /// A node's text after its properties (anchor, tag), and whether a tag
    /// is directly followed by a flow collection's end (libyaml wants white
    /// space there).
    fn after_properties(&mut self, span: &Span) -> (&'a str, bool) {
        let mut rest = self.text_at(span.start.index());
        let mut tag_glued = false;
        for _ in 0..2 {
            if rest.starts_with('&') || rest.starts_with('!') {
                let is_tag = rest.starts_with('!') && !rest.starts_with("!<");
                let end = rest.find(|c: char| c.is_whitespace() || ",[]{}".contains(c)).unwrap_or(rest.len());
                tag_glued |= is_tag && rest[end..].starts_with(['[', ']', '{', '}']);
                rest = rest[end..].trim_start_matches([' ', '\t']);
            }
        }
        (rest, tag_glued)
    }

    /// What libyaml (Heat's first loader) refuses inside flow collections,
    /// though the YAML grammar allows it: `key:` right before a flow
    /// indicator, and a tag right before `]` or `}`.
    fn check_flow_token(&mut self, span: &Span, plain: bool) -> Result<(), YamlError> {
        if !self.flow.last().copied().unwrap_or(false) {
            return Ok(());
        }
        let here = mark(&span.start);
        if self.after_properties(span).1 {
            return Err(YamlError::Syntax {
                problem: "while scanning a tag, did not find expected whitespace or line break".into(),
                mark: here,
            });
        }
        if plain {
            let after = self.text_at(span.end.index());
            let mut chars = after.chars();
            if chars.next() == Some(':') && chars.next().is_some_and(|c| ",?[]{}".contains(c)) {
                return Err(YamlError::Syntax {
                    problem: "while scanning a plain scalar, found unexpected ':'".into(),
                    mark: mark(&span.end),
                });
            }
        }
        Ok(())
    }

    fn finish_anchor(&mut self, id: usize, node: &Rc<Node>) {
        if id != 0 {
            self.anchors.insert(id, Some(Rc::clone(node)));
        }
    }

    fn node(&mut self, event: Event<'a>, span: Span, depth: usize) -> Result<Rc<Node>, YamlError> {
        let here = mark(&span.start);
        let is_sequence = matches!(event, Event::SequenceStart(..));
        match event {
            Event::Alias(id) => match self.anchors.get(&id) {
                Some(Some(node)) => Ok(Rc::clone(node)),
                // Refused when constructed, and only if it survives (a later
                // duplicate key may drop it).
                Some(None) => {
                    Ok(Rc::new(Node { tag: RECURSIVE_TAG.to_string(), kind: Kind::Scalar(String::new()), mark: here }))
                }
                None => Err(YamlError::Compose { problem: "found undefined alias".into(), mark: here }),
            },
            Event::Scalar(value, style, anchor, tag) => {
                self.check_flow_token(&span, style == ScalarStyle::Plain && !value.is_empty())?;
                self.register_anchor(anchor, &span)?;
                let tag = match tag.map(|t| format!("{}{}", t.handle, t.suffix)) {
                    Some(t) if t != "!" => t,
                    // The non-specific tag resolves as a plain scalar would (PyYAML).
                    Some(_) => implicit_tag(&value),
                    None if style == ScalarStyle::Plain => implicit_tag(&value),
                    None => format!("{TAG_PREFIX}str"),
                };
                let node = Rc::new(Node { tag, kind: Kind::Scalar(value.into_owned()), mark: here });
                self.finish_anchor(anchor, &node);
                Ok(node)
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                if depth >= self.max_depth {
                    return Err(YamlError::Limit {
                        problem: format!("the document nests deeper than {} collections", self.max_depth),
                        mark: here,
                    });
                }
                self.check_flow_token(&span, false)?;
                self.register_anchor(anchor, &span)?;
                // Inside a flow collection all is flow (`[a: 1]` holds a flow pair).
                let is_flow = self.flow.last().copied().unwrap_or(false)
                    || self.after_properties(&span).0.starts_with(['[', '{']);
                let tag = match tag.map(|t| format!("{}{}", t.handle, t.suffix)) {
                    Some(t) if t != "!" => t,
                    _ if is_sequence => format!("{TAG_PREFIX}seq"),
                    _ => format!("{TAG_PREFIX}map"),
                };
                self.flow.push(is_flow);
                let kind = if is_sequence { self.sequence(depth)? } else { self.mapping(depth)? };
                self.flow.pop();
                let node = Rc::new(Node { tag, kind, mark: here });
                self.finish_anchor(anchor, &node);
                Ok(node)
            }
            other => Err(YamlError::Syntax { problem: format!("unexpected event {other:?}"), mark: here }),
        }
    }

    fn sequence(&mut self, depth: usize) -> Result<Kind, YamlError> {
        let mut items = Vec::new();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::SequenceEnd) {
                return Ok(Kind::Sequence(items));
            }
            items.push(self.node(event, span, depth + 1)?);
        }
    }

    fn mapping(&mut self, depth: usize) -> Result<Kind, YamlError> {
        let mut pairs = Vec::new();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                return Ok(Kind::Mapping(pairs));
            }
            let key = self.node(event, span, depth + 1)?;
            let (event, span) = self.next()?;
            let value = self.node(event, span, depth + 1)?;
            pairs.push((key, value));
        }
    }
}

fn implicit_tag(value: &str) -> String {
    let name = match resolve_plain(value) {
        Implicit::Null => "null",
        Implicit::Bool => "bool",
        Implicit::Int => "int",
        Implicit::Float => "float",
        Implicit::Merge => "merge",
        Implicit::Value => "value",
        Implicit::Str => "str",
    };
    format!("{TAG_PREFIX}{name}")
}

/// The root node of the stream's only document; `None` for no document.
pub(crate) fn compose(text: &str, limits: &Limits) -> Result<Option<Rc<Node>>, YamlError> {
    check_printable(text)?;
    let mut composer = Composer {
        text,
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        anchor_names: HashMap::new(),
        char_offsets: Vec::new(),
        max_depth: limits.max_depth,
        flow: Vec::new(),
    };
    let mut root = None;
    loop {
        let (event, span) = composer.next()?;
        match event {
            Event::StreamStart | Event::Nothing => {}
            Event::StreamEnd => return Ok(root),
            Event::DocumentStart(_) if root.is_some() => {
                return Err(YamlError::Compose {
                    problem: "expected a single document in the stream, but found another document".into(),
                    mark: mark(&span.start),
                })
            }
            Event::DocumentStart(_) => {
                let (event, span) = composer.next()?;
                root = Some(composer.node(event, span, 0)?);
                let (end, span) = composer.next()?;
                if !matches!(end, Event::DocumentEnd) {
                    return Err(YamlError::Syntax {
                        problem: format!("expected the end of the document, found {end:?}"),
                        mark: mark(&span.start),
                    });
                }
            }
            other => {
                return Err(YamlError::Syntax {
                    problem: format!("unexpected event {other:?}"),
                    mark: mark(&span.start),
                })
            }
        }
    }
}
