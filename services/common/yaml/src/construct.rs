//! Nodes to values, as PyYAML's SafeConstructor with Heat's overrides
//! builds them, then as `json.dumps` writes them: keys become their JSON
//! text, Python-equal keys (`1`, `1.0`, `true`) are one key, the last value
//! wins and the first key's place and spelling stay.

use std::collections::{HashMap, HashSet};

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use crate::compose::{Kind, Node, RECURSIVE_TAG, TAG_PREFIX};
use crate::resolve::{construct_bool, construct_float, construct_int, NumberError};
use crate::{Limits, Mark, YamlError};

struct Builder<'l> {
    limits: &'l Limits,
    items: usize,
    bytes: usize,
    /// Values JSON cannot hold, kept as markers: Heat fails on them only
    /// if they survive (a later duplicate key or merge may drop them).
    deferred: Vec<(YamlError, Unwritable)>,
}

/// Where Heat's JSON round trip (json.dumps, then json.loads) fails on a
/// value, which decides whether a later key with the same JSON text hides it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unwritable {
    /// json.dumps fails (bytes, a cycle) while both keys are still in the dict.
    Encoding,
    /// json.dumps writes it (NaN, a huge integer) and the JSON read keeps
    /// only the last of the two keys.
    Reading,
}

/// The start of a deferred value's marker string (U+FFFF is refused in
/// the text, so only an escape could spell it).
const DEFERRED: &str = "\u{0}\u{FFFF}keelson-unrepresentable:";

/// A mapping key's string object, as PyYAML's merge compares them.
#[derive(Hash, PartialEq, Eq)]
enum KeyObject<'n> {
    Node(*const Node),
    Shared(&'n str),
}

impl<'n> KeyObject<'n> {
    fn of(node: &'n Node) -> Self {
        match &node.kind {
            Kind::Scalar(text)
                if text.is_empty() || (text.chars().count() == 1 && text.chars().all(|c| c < '\u{100}')) =>
            {
                KeyObject::Shared(text)
            }
            _ => KeyObject::Node(node as *const Node),
        }
    }
}

/// The first deferred marker left in a value that `wanted` accepts.
fn find_deferred(value: &Value, wanted: &dyn Fn(usize) -> bool) -> Option<usize> {
    match value {
        Value::String(s) => s.strip_prefix(DEFERRED).and_then(|n| n.parse().ok()).filter(|&i| wanted(i)),
        Value::Array(items) => items.iter().find_map(|v| find_deferred(v, wanted)),
        Value::Object(m) => m.values().find_map(|v| find_deferred(v, wanted)),
        _ => None,
    }
}

fn first_deferred(value: &Value) -> Option<usize> {
    find_deferred(value, &|_| true)
}

/// A mapping key as Python holds it.
enum Key {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
}

/// Python's equality of keys, as a hashable value (`None`: equal to
/// nothing, NaN).
#[derive(Hash, PartialEq, Eq)]
enum KeyIdentity {
    Null,
    Int(i128),
    Float(u64),
    Str(String),
}

impl Key {
    fn identity(&self) -> Option<KeyIdentity> {
        match self {
            Key::Null => Some(KeyIdentity::Null),
            Key::Bool(b) => Some(KeyIdentity::Int(i128::from(*b))),
            Key::Int(i) => Some(KeyIdentity::Int(*i)),
            Key::Float(f) if f.is_nan() => None,
            // 2^127 and beyond cannot equal any i128 key.
            Key::Float(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => float_as_int(*f).map(KeyIdentity::Int),
            Key::Float(f) => Some(KeyIdentity::Float(f.to_bits())),
            Key::Str(s) => Some(KeyIdentity::Str(s.clone())),
        }
    }

    /// The key's text in `json.dumps`.
    fn json_text(&self) -> String {
        match self {
            Key::Null => "null".into(),
            Key::Bool(true) => "true".into(),
            Key::Bool(false) => "false".into(),
            Key::Int(i) => i.to_string(),
            Key::Float(f) => python_float_repr(*f),
            Key::Str(s) => s.clone(),
        }
    }

    fn json_value(&self, mark: Mark) -> Result<Value, YamlError> {
        Ok(match self {
            Key::Null => Value::Null,
            Key::Bool(b) => Value::Bool(*b),
            Key::Int(i) => int_value(*i, mark)?,
            Key::Float(f) => float_value(*f, mark)?,
            Key::Str(s) => Value::String(s.clone()),
        })
    }
}

/// An integral float's value (exact: |f| < 2^127).
fn float_as_int(f: f64) -> Option<i128> {
    let text = format!("{f:.0}");
    text.parse::<i128>().ok()
}

fn int_value(i: i128, mark: Mark) -> Result<Value, YamlError> {
    if let Ok(v) = i64::try_from(i) {
        Ok(Value::Number(v.into()))
    } else if let Ok(v) = u64::try_from(i) {
        Ok(Value::Number(v.into()))
    } else {
        Err(too_large(&i.to_string(), mark))
    }
}

fn too_large(text: &str, mark: Mark) -> YamlError {
    YamlError::Unrepresentable {
        problem: format!("the integer {text} is beyond the 64-bit integers JSON values hold here"),
        mark,
    }
}

fn float_value(f: f64, mark: Mark) -> Result<Value, YamlError> {
    Number::from_f64(f).map(Value::Number).ok_or_else(|| YamlError::Unrepresentable {
        problem: format!("the float {} has no JSON form", python_float_repr(f)),
        mark,
    })
}

fn construct_error(problem: impl Into<String>, node: &Node) -> YamlError {
    YamlError::Construct { problem: problem.into(), mark: node.mark }
}

fn number_error(e: NumberError, node: &Node) -> YamlError {
    match e {
        NumberError::Invalid(problem) => construct_error(problem, node),
        NumberError::TooLarge(text) => too_large(&text, node.mark),
    }
}

fn scalar_text(node: &Node) -> Result<&str, YamlError> {
    match &node.kind {
        Kind::Scalar(s) => Ok(s),
        _ => Err(construct_error(format!("expected a scalar node, but found {}", node.kind_name()), node)),
    }
}

/// A float as `json.dumps` writes it (`repr`, but `NaN`/`Infinity`).
pub(crate) use keelson_pyfmt::json_float as python_float_repr;

impl Builder<'_> {
    fn charge(&mut self, items: usize, bytes: usize, node: &Node) -> Result<(), YamlError> {
        self.items = self.items.saturating_add(items);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.items > self.limits.max_items || self.bytes > self.limits.max_bytes {
            return Err(YamlError::Limit {
                problem: format!(
                    "the document expands (through its aliases) beyond {} items or {} bytes",
                    self.limits.max_items, self.limits.max_bytes
                ),
                mark: node.mark,
            });
        }
        Ok(())
    }

    /// An unrepresentable value becomes a marker; other errors stay errors.
    fn defer(&mut self, result: Result<Value, YamlError>, how: Unwritable) -> Result<Value, YamlError> {
        match result {
            Err(e @ YamlError::Unrepresentable { .. }) => {
                self.deferred.push((e, how));
                Ok(Value::String(format!("{DEFERRED}{}", self.deferred.len() - 1)))
            }
            other => other,
        }
    }

    fn check_depth(&self, depth: usize, node: &Node) -> Result<(), YamlError> {
        if depth > self.limits.max_depth {
            return Err(YamlError::Limit {
                problem: format!("the document nests deeper than {} collections", self.limits.max_depth),
                mark: node.mark,
            });
        }
        Ok(())
    }

    fn value(&mut self, node: &Node, depth: usize) -> Result<Value, YamlError> {
        if node.tag == RECURSIVE_TAG {
            return self.defer(
                Err(YamlError::Unrepresentable {
                    problem: "found an alias to a node that contains it: JSON cannot hold a recursive value".into(),
                    mark: node.mark,
                }),
                Unwritable::Encoding,
            );
        }
        let Some(name) = node.tag.strip_prefix(TAG_PREFIX) else {
            return Err(unknown_tag(node));
        };
        match name {
            "null" => scalar_text(node).map(|_| Value::Null),
            "bool" => {
                let text = scalar_text(node)?;
                construct_bool(text).map(Value::Bool).ok_or_else(|| construct_error(format!("'{text}'"), node))
            }
            "int" => {
                let result = construct_int(scalar_text(node)?)
                    .map_err(|e| number_error(e, node))
                    .and_then(|i| int_value(i, node.mark));
                self.defer(result, Unwritable::Reading)
            }
            "float" => {
                let f = construct_float(scalar_text(node)?).map_err(|e| number_error(e, node))?;
                self.defer(float_value(f, node.mark), Unwritable::Reading)
            }
            "str" | "timestamp" => {
                let text = scalar_text(node)?;
                self.charge(0, text.len(), node)?;
                Ok(Value::String(text.to_string()))
            }
            "binary" => match self.binary(node) {
                Ok(text) => {
                    self.charge(0, text.len(), node)?;
                    Ok(Value::String(text))
                }
                Err(e) => self.defer(Err(e), Unwritable::Encoding),
            },
            "seq" => {
                let Kind::Sequence(items) = &node.kind else {
                    return Err(construct_error(
                        format!("expected a sequence node, but found {}", node.kind_name()),
                        node,
                    ));
                };
                self.check_depth(depth + 1, node)?;
                self.charge(items.len(), 0, node)?;
                items.iter().map(|item| self.value(item, depth + 1)).collect::<Result<_, _>>().map(Value::Array)
            }
            "map" => {
                self.check_depth(depth + 1, node)?;
                let mut out = Map::new();
                for (key, value) in self.entries(node, depth)? {
                    let text = key.json_text();
                    // Python-distinct keys with one JSON text (`null` and
                    // "null") are both in Heat's dict, so json.dumps meets
                    // the earlier value too: its encoding failure stands.
                    let deferred = &self.deferred;
                    let encoding = |i: usize| deferred.get(i).is_some_and(|d| d.1 == Unwritable::Encoding);
                    let earlier_failure = out.get(&text).and_then(|v| find_deferred(v, &encoding));
                    match earlier_failure {
                        Some(i) if first_deferred(&value).is_none() => {
                            out.insert(text, Value::String(format!("{DEFERRED}{i}")))
                        }
                        _ => out.insert(text, value),
                    };
                }
                Ok(Value::Object(out))
            }
            "set" => {
                self.check_depth(depth + 1, node)?;
                let mut out = Vec::new();
                for (key, _) in self.entries(node, depth)? {
                    out.push(key.json_value(node.mark)?);
                }
                Ok(Value::Array(out))
            }
            "omap" | "pairs" => self.pairs(node, depth),
            _ => Err(unknown_tag(node)),
        }
    }

    /// A mapping's entries after merging, one per Python-distinct key.
    fn entries(&mut self, node: &Node, depth: usize) -> Result<Vec<(Key, Value)>, YamlError> {
        let Kind::Mapping(_) = &node.kind else {
            return Err(construct_error(format!("expected a mapping node, but found {}", node.kind_name()), node));
        };
        let mut pairs = Vec::new();
        self.flatten(node, 0, &mut pairs)?;
        let mut out: Vec<(Key, Value)> = Vec::with_capacity(pairs.len());
        let mut index: HashMap<KeyIdentity, usize> = HashMap::new();
        for (key_node, value_node) in pairs {
            let key = self.key(key_node)?;
            let value = self.value(value_node, depth + 1)?;
            match key.identity() {
                Some(identity) => match index.get(&identity) {
                    Some(&at) => out[at].1 = value,
                    None => {
                        index.insert(identity, out.len());
                        out.push((key, value));
                    }
                },
                None => out.push((key, value)),
            }
        }
        Ok(out)
    }

    /// PyYAML's flatten_mapping (6.0.2 on): the pairs merged in through
    /// `<<` first, source after source, then the mapping's own (later pairs
    /// win). A merged pair is skipped when its key is the very key string
    /// already merged: the same node, or, as CPython shares them, the same
    /// empty or one-character (below U+0100) text.
    fn flatten<'n>(
        &mut self,
        node: &'n Node,
        depth: usize,
        out: &mut Vec<(&'n Node, &'n Node)>,
    ) -> Result<(), YamlError> {
        self.check_depth(depth, node)?;
        let Kind::Mapping(pairs) = &node.kind else { return Ok(()) };
        let mut own = Vec::new();
        let mut merged = Vec::new();
        let mut seen: HashSet<KeyObject<'n>> = HashSet::new();
        for (key, value) in pairs {
            if key.tag != format!("{TAG_PREFIX}merge") {
                own.push((&**key, &**value));
                continue;
            }
            let sources: Vec<&'n Node> = match &value.kind {
                Kind::Mapping(_) => vec![&**value],
                Kind::Sequence(items) => items.iter().map(|item| &**item).collect(),
                Kind::Scalar(_) => {
                    return Err(construct_error(
                        "expected a mapping or list of mappings for merging, but found scalar",
                        value,
                    ))
                }
            };
            for source in sources {
                if !matches!(source.kind, Kind::Mapping(_)) {
                    return Err(construct_error(
                        format!("expected a mapping for merging, but found {}", source.kind_name()),
                        source,
                    ));
                }
                let mut one = Vec::new();
                self.flatten(source, depth + 1, &mut one)?;
                for pair in one {
                    if seen.insert(KeyObject::of(pair.0)) {
                        merged.push(pair);
                    }
                }
            }
        }
        self.charge(own.len(), 0, node)?;
        out.extend(merged);
        out.extend(own);
        Ok(())
    }

    fn key(&mut self, node: &Node) -> Result<Key, YamlError> {
        if !matches!(node.kind, Kind::Scalar(_)) {
            return Err(construct_error("while constructing a mapping, found unhashable key", node));
        }
        let name = node.tag.strip_prefix(TAG_PREFIX).unwrap_or("");
        let text = scalar_text(node)?;
        Ok(match name {
            "null" => Key::Null,
            "bool" => Key::Bool(construct_bool(text).ok_or_else(|| construct_error(format!("'{text}'"), node))?),
            "int" => Key::Int(construct_int(text).map_err(|e| number_error(e, node))?),
            "float" => Key::Float(construct_float(text).map_err(|e| number_error(e, node))?),
            // A mapping's `=` key is the string (PyYAML's flatten_mapping).
            "str" | "timestamp" | "value" => {
                self.charge(0, text.len(), node)?;
                Key::Str(text.to_string())
            }
            "binary" => {
                return Err(YamlError::Unrepresentable {
                    problem: "a !!binary mapping key has no JSON form".into(),
                    mark: node.mark,
                })
            }
            _ => return Err(unknown_tag(node)),
        })
    }

    /// `!!binary`: base64, then (as Heat's JSON encoder does) UTF-8 text.
    fn binary(&self, node: &Node) -> Result<String, YamlError> {
        let text = scalar_text(node)?;
        if !text.is_ascii() {
            return Err(construct_error("failed to convert base64 data into ascii", node));
        }
        let cleaned: String =
            text.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')).collect();
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
                .with_decode_allow_trailing_bits(true),
        );
        let bytes = engine
            .decode(cleaned.as_bytes())
            .map_err(|e| construct_error(format!("failed to decode base64 data: {e}"), node))?;
        String::from_utf8(bytes).map_err(|_| YamlError::Unrepresentable {
            problem: "!!binary data that is not UTF-8 text has no JSON form".into(),
            mark: node.mark,
        })
    }

    /// `!!omap` and `!!pairs`: a list of one-entry mappings, as [key, value]
    /// lists (Python's tuples in JSON).
    fn pairs(&mut self, node: &Node, depth: usize) -> Result<Value, YamlError> {
        let Kind::Sequence(items) = &node.kind else {
            return Err(construct_error(format!("expected a sequence, but found {}", node.kind_name()), node));
        };
        self.check_depth(depth + 2, node)?;
        self.charge(items.len() * 3, 0, node)?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let Kind::Mapping(entry) = &item.kind else {
                return Err(construct_error(
                    format!("expected a mapping of length 1, but found {}", item.kind_name()),
                    item,
                ));
            };
            let [(key, value)] = entry.as_slice() else {
                return Err(construct_error(
                    format!("expected a single mapping item, but found {} items", entry.len()),
                    item,
                ));
            };
            out.push(Value::Array(vec![self.value(key, depth + 2)?, self.value(value, depth + 2)?]));
        }
        Ok(Value::Array(out))
    }
}

fn unknown_tag(node: &Node) -> YamlError {
    construct_error(format!("could not determine a constructor for the tag '{}'", node.tag), node)
}

pub(crate) fn construct(root: &Node, limits: &Limits) -> Result<Value, YamlError> {
    let mut builder = Builder { limits, items: 0, bytes: 0, deferred: Vec::new() };
    let value = builder.value(root, 0)?;
    if builder.deferred.is_empty() {
        return Ok(value);
    }
    match first_deferred(&value).and_then(|i| builder.deferred.get(i)) {
        Some((e, _)) => Err(e.clone()),
        None => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_is_pythons() {
        for (f, text) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.6, "123456789012345.6"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
            (f64::INFINITY, "Infinity"),
            (2.5e-300, "2.5e-300"),
        ] {
            assert_eq!(python_float_repr(f), text);
        }
    }
}
