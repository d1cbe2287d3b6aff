//! Turning a schema document into a tree of checks, once.
//!
//! Compiling up front means regexes are built once per process rather than
//! per request, and malformed schemas are reported when they are loaded
//! instead of when a client happens to exercise them. Subschemas live in an
//! arena indexed by [`NodeId`] so that `$ref` cycles need no reference
//! counting.
//!
//! The dialect is what `jsonschema.validate` uses for a schema without
//! `$schema` (draft 2020-12), which is how Placement validates. Two draft-4
//! spellings are also understood because older schemas use them: a boolean
//! `exclusiveMinimum`/`exclusiveMaximum` modifying `minimum`/`maximum`, and an
//! array-valued `items` (validated position by position).

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::error::CompileError;
use crate::format::Format;
use crate::number::PyNum;
use crate::pyregex::python_regex;
use crate::types::JsonType;

/// Index of a compiled (sub)schema in [`Compiled::nodes`].
pub(crate) type NodeId = usize;

/// One compiled (sub)schema.
#[derive(Debug)]
pub(crate) struct Node {
    /// The subschema as written; errors report it and `str()` prints it.
    pub(crate) schema: Value,
    /// The subschema's `type`, used by best-match relevance.
    pub(crate) types: Option<Vec<JsonType>>,
    pub(crate) body: Body,
}

#[derive(Debug)]
pub(crate) enum Body {
    /// `true` (or an object whose keywords never fail).
    AlwaysValid,
    /// `false`.
    AlwaysInvalid,
    /// Keywords in the order they appear in the schema object, which is the
    /// order Python evaluates them (and so decides ties between errors).
    Keywords(Vec<Keyword>),
}

/// A keyword and the check compiled from its value.
#[derive(Debug)]
pub(crate) struct Keyword {
    pub(crate) name: &'static str,
    /// The keyword's value as written, for messages that quote it.
    pub(crate) value: Value,
    pub(crate) check: Check,
}

/// Compiled `additionalProperties`.
#[derive(Debug)]
pub(crate) enum Additional {
    Forbidden,
    Schema(NodeId),
}

/// Compiled `items`.
#[derive(Debug)]
pub(crate) enum Items {
    /// 2020-12: every element after the `prefixItems` ones.
    Rest { prefix: usize, rest: Option<NodeId>, forbidden: bool },
    /// Draft 4 array form: element *i* against subschema *i*.
    Positional(Vec<NodeId>),
}

#[derive(Debug)]
pub(crate) enum Check {
    Type {
        types: Vec<JsonType>,
        names: Vec<String>,
    },
    Enum(Vec<Value>),
    Const(Value),
    Properties(Vec<(String, NodeId)>),
    PatternProperties(Vec<(Regex, String, NodeId)>),
    AdditionalProperties {
        rule: Additional,
        known: Vec<String>,
        patterns: Vec<Regex>,
        /// Source of the sibling `patternProperties` keys, when that keyword
        /// is present: it switches the message wording.
        pattern_sources: Option<Vec<String>>,
    },
    Required(Vec<String>),
    MinProperties(PyNum),
    MaxProperties(PyNum),
    PropertyNames(NodeId),
    DependentRequired(Vec<(String, Vec<String>)>),
    DependentSchemas(Vec<(String, NodeId)>),
    Items(Items),
    PrefixItems(Vec<NodeId>),
    Contains {
        node: NodeId,
        min: Value,
        max: Option<Value>,
    },
    MinItems(PyNum),
    MaxItems(PyNum),
    UniqueItems,
    Pattern {
        regex: Regex,
        source: String,
    },
    MinLength(PyNum),
    MaxLength(PyNum),
    Format(Format),
    Minimum {
        limit: PyNum,
        exclusive: bool,
    },
    Maximum {
        limit: PyNum,
        exclusive: bool,
    },
    ExclusiveMinimum(PyNum),
    ExclusiveMaximum(PyNum),
    MultipleOf(PyNum),
    AllOf(Vec<NodeId>),
    AnyOf(Vec<NodeId>),
    OneOf(Vec<NodeId>),
    Not(NodeId),
    If {
        condition: NodeId,
        then: Option<NodeId>,
        otherwise: Option<NodeId>,
    },
    Ref(NodeId),
}

/// A compiled schema document: the arena and its root.
#[derive(Debug)]
pub(crate) struct Compiled {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: NodeId,
}

/// Keywords that are understood but have no check of their own: annotations,
/// containers reached only through `$ref`, and siblings read by another
/// keyword (`minContains` by `contains`, `then`/`else` by `if`).
const PASSIVE: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$comment",
    "$vocabulary",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "minContains",
    "maxContains",
    "then",
    "else",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// Keywords that change what is valid but are not implemented; compiling a
/// schema that uses them fails instead of silently under-validating.
const UNSUPPORTED: &[&str] = &["unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"];

/// Compile `schema` (the whole document; `$ref`s resolve against it).
pub(crate) fn compile(schema: &Value) -> Result<Compiled, CompileError> {
    let mut compiler = Compiler { document: schema, nodes: Vec::new(), refs: HashMap::new() };
    let root = compiler.node(schema, "#")?;
    Ok(Compiled { nodes: compiler.nodes, root })
}

struct Compiler<'d> {
    document: &'d Value,
    nodes: Vec<Node>,
    /// `$ref` pointer -> node, so each target is compiled once and cycles end.
    refs: HashMap<String, NodeId>,
}

fn invalid(keyword: &str, location: &str, reason: &str) -> CompileError {
    CompileError::InvalidKeyword {
        keyword: keyword.to_owned(),
        location: location.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Escape a key for a JSON pointer fragment.
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl<'d> Compiler<'d> {
    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn node(&mut self, schema: &Value, location: &str) -> Result<NodeId, CompileError> {
        let id = self.push(Node { schema: schema.clone(), types: None, body: Body::AlwaysValid });
        self.fill(id, schema, location)?;
        Ok(id)
    }

    /// Compile `schema` into the already allocated slot `id`.
    fn fill(&mut self, id: NodeId, schema: &Value, location: &str) -> Result<(), CompileError> {
        let map = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                self.nodes[id].body = Body::AlwaysInvalid;
                return Ok(());
            }
            Value::Object(map) => map,
            _ => return Err(CompileError::NotASchema { location: location.to_owned() }),
        };
        let mut keywords = Vec::new();
        for (name, value) in map {
            let here = format!("{location}/{}", pointer_escape(name));
            if let Some(keyword) = self.keyword(name, value, map, &here)? {
                if let Check::Type { types, .. } = &keyword.check {
                    self.nodes[id].types = Some(types.clone());
                }
                keywords.push(keyword);
            }
        }
        self.nodes[id].body = Body::Keywords(keywords);
        Ok(())
    }

    fn child(&mut self, schema: &Value, location: String) -> Result<NodeId, CompileError> {
        self.node(schema, &location)
    }

    fn children(&mut self, name: &str, value: &Value, location: &str) -> Result<Vec<NodeId>, CompileError> {
        let items = match value {
            Value::Array(items) if !items.is_empty() => items,
            _ => return Err(invalid(name, location, "expected a non-empty array of schemas")),
        };
        items.iter().enumerate().map(|(i, s)| self.child(s, format!("{location}/{i}"))).collect()
    }

    fn schema_map(&mut self, name: &str, value: &Value, location: &str) -> Result<Vec<(String, NodeId)>, CompileError> {
        let map = value.as_object().ok_or_else(|| invalid(name, location, "expected an object of schemas"))?;
        map.iter().map(|(k, s)| Ok((k.clone(), self.child(s, format!("{location}/{}", pointer_escape(k)))?))).collect()
    }

    fn keyword(
        &mut self,
        name: &str,
        value: &Value,
        parent: &Map<String, Value>,
        location: &str,
    ) -> Result<Option<Keyword>, CompileError> {
        if UNSUPPORTED.contains(&name) {
            return Err(CompileError::UnsupportedKeyword { keyword: name.to_owned(), location: location.to_owned() });
        }
        if PASSIVE.contains(&name) {
            return Ok(None);
        }
        let (static_name, check): (&'static str, Check) = match name {
            "type" => ("type", type_check(value, location)?),
            "enum" => match value {
                Value::Array(choices) => ("enum", Check::Enum(choices.clone())),
                _ => return Err(invalid(name, location, "expected an array")),
            },
            "const" => ("const", Check::Const(value.clone())),
            "properties" => ("properties", Check::Properties(self.schema_map(name, value, location)?)),
            "patternProperties" => {
                let entries = self.schema_map(name, value, location)?;
                let mut compiled = Vec::with_capacity(entries.len());
                for (source, node) in entries {
                    compiled.push((python_regex(&source, location)?, source, node));
                }
                ("patternProperties", Check::PatternProperties(compiled))
            }
            "additionalProperties" => {
                let rule = match value {
                    Value::Bool(true) => return Ok(None),
                    Value::Bool(false) => Additional::Forbidden,
                    Value::Object(_) => Additional::Schema(self.child(value, location.to_owned())?),
                    _ => return Err(invalid(name, location, "expected a schema")),
                };
                let known = parent
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                let pattern_sources: Option<Vec<String>> = parent
                    .get("patternProperties")
                    .map(|p| p.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default());
                let patterns = pattern_sources
                    .iter()
                    .flatten()
                    .map(|p| python_regex(p, location))
                    .collect::<Result<Vec<_>, _>>()?;
                ("additionalProperties", Check::AdditionalProperties { rule, known, patterns, pattern_sources })
            }
            "required" => ("required", Check::Required(string_list(name, value, location)?)),
            "minProperties" => ("minProperties", Check::MinProperties(non_negative(name, value, location)?)),
            "maxProperties" => ("maxProperties", Check::MaxProperties(non_negative(name, value, location)?)),
            "propertyNames" => ("propertyNames", Check::PropertyNames(self.child(value, location.to_owned())?)),
            "dependentRequired" => {
                let map = value.as_object().ok_or_else(|| invalid(name, location, "expected an object"))?;
                let mut deps = Vec::with_capacity(map.len());
                for (property, needed) in map {
                    deps.push((property.clone(), string_list(name, needed, location)?));
                }
                ("dependentRequired", Check::DependentRequired(deps))
            }
            "dependentSchemas" => {
                ("dependentSchemas", Check::DependentSchemas(self.schema_map(name, value, location)?))
            }
            "items" => {
                let items = match value {
                    Value::Array(schemas) => Items::Positional(
                        schemas
                            .iter()
                            .enumerate()
                            .map(|(i, s)| self.child(s, format!("{location}/{i}")))
                            .collect::<Result<_, _>>()?,
                    ),
                    Value::Bool(_) | Value::Object(_) => {
                        let prefix = parent.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len);
                        let forbidden = value == &Value::Bool(false);
                        let rest = if forbidden { None } else { Some(self.child(value, location.to_owned())?) };
                        Items::Rest { prefix, rest, forbidden }
                    }
                    _ => return Err(invalid(name, location, "expected a schema or an array of schemas")),
                };
                ("items", Check::Items(items))
            }
            "prefixItems" => ("prefixItems", Check::PrefixItems(self.children(name, value, location)?)),
            "contains" => {
                let node = self.child(value, location.to_owned())?;
                let min = parent.get("minContains").cloned().unwrap_or(Value::from(1));
                let max = parent.get("maxContains").cloned();
                ("contains", Check::Contains { node, min, max })
            }
            "minItems" => ("minItems", Check::MinItems(non_negative(name, value, location)?)),
            "maxItems" => ("maxItems", Check::MaxItems(non_negative(name, value, location)?)),
            "uniqueItems" => match value {
                Value::Bool(true) => ("uniqueItems", Check::UniqueItems),
                Value::Bool(false) => return Ok(None),
                _ => return Err(invalid(name, location, "expected a boolean")),
            },
            "pattern" => {
                let source = value.as_str().ok_or_else(|| invalid(name, location, "expected a string"))?;
                ("pattern", Check::Pattern { regex: python_regex(source, location)?, source: source.to_owned() })
            }
            "minLength" => ("minLength", Check::MinLength(non_negative(name, value, location)?)),
            "maxLength" => ("maxLength", Check::MaxLength(non_negative(name, value, location)?)),
            "format" => {
                let format = value.as_str().ok_or_else(|| invalid(name, location, "expected a string"))?;
                match Format::from_name(format) {
                    Some(f) => ("format", Check::Format(f)),
                    None => return Ok(None),
                }
            }
            "minimum" => {
                let exclusive = parent.get("exclusiveMinimum") == Some(&Value::Bool(true));
                ("minimum", Check::Minimum { limit: number(name, value, location)?, exclusive })
            }
            "maximum" => {
                let exclusive = parent.get("exclusiveMaximum") == Some(&Value::Bool(true));
                ("maximum", Check::Maximum { limit: number(name, value, location)?, exclusive })
            }
            "exclusiveMinimum" => match value {
                Value::Bool(_) => return Ok(None),
                _ => ("exclusiveMinimum", Check::ExclusiveMinimum(number(name, value, location)?)),
            },
            "exclusiveMaximum" => match value {
                Value::Bool(_) => return Ok(None),
                _ => ("exclusiveMaximum", Check::ExclusiveMaximum(number(name, value, location)?)),
            },
            "multipleOf" => {
                let divisor = number(name, value, location)?;
                if divisor.py_cmp(PyNum::Int(0)) != Some(std::cmp::Ordering::Greater) {
                    return Err(invalid(name, location, "expected a number greater than 0"));
                }
                ("multipleOf", Check::MultipleOf(divisor))
            }
            "allOf" => ("allOf", Check::AllOf(self.children(name, value, location)?)),
            "anyOf" => ("anyOf", Check::AnyOf(self.children(name, value, location)?)),
            "oneOf" => ("oneOf", Check::OneOf(self.children(name, value, location)?)),
            "not" => ("not", Check::Not(self.child(value, location.to_owned())?)),
            "if" => {
                let condition = self.child(value, location.to_owned())?;
                let parent_location = location.rsplit_once('/').map_or("#", |(p, _)| p);
                let then = match parent.get("then") {
                    Some(s) => Some(self.child(s, format!("{parent_location}/then"))?),
                    None => None,
                };
                let otherwise = match parent.get("else") {
                    Some(s) => Some(self.child(s, format!("{parent_location}/else"))?),
                    None => None,
                };
                ("if", Check::If { condition, then, otherwise })
            }
            "$ref" => {
                let reference = value.as_str().ok_or_else(|| invalid(name, location, "expected a string"))?;
                ("$ref", Check::Ref(self.reference(reference, location)?))
            }
            // Anything else is an unknown keyword: ignored, as in Python.
            _ => return Ok(None),
        };
        Ok(Some(Keyword { name: static_name, value: value.clone(), check }))
    }

    /// Resolve a same-document `$ref` (`#` or `#/json/pointer`).
    fn reference(&mut self, reference: &str, location: &str) -> Result<NodeId, CompileError> {
        if let Some(&id) = self.refs.get(reference) {
            return Ok(id);
        }
        let unresolvable =
            || CompileError::UnresolvableRef { reference: reference.to_owned(), location: location.to_owned() };
        let pointer = reference.strip_prefix('#').ok_or_else(unresolvable)?;
        let pointer = percent_decode(pointer).ok_or_else(unresolvable)?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(unresolvable());
        }
        let document = self.document;
        let target = document.pointer(&pointer).ok_or_else(unresolvable)?;
        // Allocate first so a cycle back to this reference finds the slot.
        let id = self.push(Node { schema: target.clone(), types: None, body: Body::AlwaysValid });
        self.refs.insert(reference.to_owned(), id);
        self.fill(id, target, reference)?;
        Ok(id)
    }
}

fn type_check(value: &Value, location: &str) -> Result<Check, CompileError> {
    let names: Vec<String> = match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| invalid("type", location, "expected type names")))
            .collect::<Result<_, _>>()?,
        _ => return Err(invalid("type", location, "expected a type name or a list of them")),
    };
    let types = names
        .iter()
        .map(|n| {
            JsonType::from_name(n)
                .ok_or_else(|| CompileError::UnknownType { name: n.clone(), location: location.to_owned() })
        })
        .collect::<Result<_, _>>()?;
    Ok(Check::Type { types, names })
}

fn string_list(name: &str, value: &Value, location: &str) -> Result<Vec<String>, CompileError> {
    value
        .as_array()
        .ok_or_else(|| invalid(name, location, "expected an array of strings"))?
        .iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| invalid(name, location, "expected an array of strings")))
        .collect()
}

fn number(name: &str, value: &Value, location: &str) -> Result<PyNum, CompileError> {
    PyNum::from_value(value).ok_or_else(|| invalid(name, location, "expected a number"))
}

fn non_negative(name: &str, value: &Value, location: &str) -> Result<PyNum, CompileError> {
    let reject = || invalid(name, location, "expected a non-negative integer");
    let n = PyNum::from_value(value).ok_or_else(reject)?;
    if n.is_integral() && n.py_cmp(PyNum::Int(0)) != Some(std::cmp::Ordering::Less) {
        Ok(n)
    } else {
        Err(reject())
    }
}

/// Decode `%XX` escapes in a URI fragment.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_resolve_and_may_recurse() {
        let schema = serde_json::json!({
            "definitions": {"node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/node"}}}},
            "$ref": "#/definitions/node"
        });
        assert!(compile(&schema).is_ok());
        let bad = serde_json::json!({"$ref": "#/definitions/missing"});
        assert!(matches!(compile(&bad), Err(CompileError::UnresolvableRef { .. })));
        let remote = serde_json::json!({"$ref": "http://example.com/schema"});
        assert!(matches!(compile(&remote), Err(CompileError::UnresolvableRef { .. })));
    }

    #[test]
    fn malformed_keywords_are_rejected() {
        assert!(matches!(compile(&serde_json::json!({"type": "float"})), Err(CompileError::UnknownType { .. })));
        assert!(matches!(compile(&serde_json::json!({"minLength": -1})), Err(CompileError::InvalidKeyword { .. })));
        assert!(matches!(compile(&serde_json::json!({"pattern": "("})), Err(CompileError::InvalidRegex { .. })));
        assert!(matches!(
            compile(&serde_json::json!({"unevaluatedProperties": false})),
            Err(CompileError::UnsupportedKeyword { .. })
        ));
        assert!(matches!(compile(&serde_json::json!(3)), Err(CompileError::NotASchema { .. })));
    }
}
