//! Property and attribute schemas of resource types, and their JSON form as
//! `GET /resource_types/{type}` shows it (upstream `properties.Schema`,
//! `constraints.*`, `attributes.Schema`, `support.SupportStatus`).

use serde_json::{json, Map, Value};

/// A property's data type; serialised in lower case as upstream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyType {
    String,
    Integer,
    Number,
    Boolean,
    Map,
    List,
    Any,
}

impl PropertyType {
    pub fn as_str(self) -> &'static str {
        match self {
            PropertyType::String => "string",
            PropertyType::Integer => "integer",
            PropertyType::Number => "number",
            PropertyType::Boolean => "boolean",
            PropertyType::Map => "map",
            PropertyType::List => "list",
            PropertyType::Any => "any",
        }
    }
}

/// What a constraint checks.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintKind {
    /// Numeric bounds (inclusive); numbers kept as JSON so `1` stays `1`.
    Range {
        min: Option<Value>,
        max: Option<Value>,
    },
    /// Bounds on the length of a string, list or map.
    Length {
        min: Option<u64>,
        max: Option<u64>,
    },
    AllowedValues(Vec<Value>),
    /// Must match the whole value (Python `re.match` + end check).
    AllowedPattern(&'static str),
    /// A named custom constraint (`test_constr`, `nova.flavor`, ...).
    Custom(&'static str),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub kind: ConstraintKind,
    /// When set, replaces the generated error message (upstream behaviour).
    pub description: Option<&'static str>,
}

impl Constraint {
    pub fn range(min: Option<i64>, max: Option<i64>) -> Self {
        Constraint {
            kind: ConstraintKind::Range { min: min.map(Value::from), max: max.map(Value::from) },
            description: None,
        }
    }
    pub fn length(min: Option<u64>, max: Option<u64>) -> Self {
        Constraint { kind: ConstraintKind::Length { min, max }, description: None }
    }
    pub fn allowed_values<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<Value>,
    {
        Constraint {
            kind: ConstraintKind::AllowedValues(values.into_iter().map(Into::into).collect()),
            description: None,
        }
    }
    pub fn allowed_pattern(pattern: &'static str) -> Self {
        Constraint { kind: ConstraintKind::AllowedPattern(pattern), description: None }
    }
    pub fn custom(name: &'static str) -> Self {
        Constraint { kind: ConstraintKind::Custom(name), description: None }
    }
    pub fn with_description(mut self, description: &'static str) -> Self {
        self.description = Some(description);
        self
    }

    /// `dict(constraint)`: `{"range": {...}}`, `{"allowed_values": [...]}`...
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(d) = self.description {
            out.insert("description".into(), json!(d));
        }
        let (key, body) = match &self.kind {
            ConstraintKind::Range { min, max } => ("range", bounds_json(min.clone(), max.clone())),
            ConstraintKind::Length { min, max } => ("length", bounds_json(min.map(Value::from), max.map(Value::from))),
            ConstraintKind::AllowedValues(v) => ("allowed_values", Value::Array(v.clone())),
            ConstraintKind::AllowedPattern(p) => ("allowed_pattern", json!(p)),
            ConstraintKind::Custom(n) => ("custom_constraint", json!(n)),
        };
        out.insert(key.into(), body);
        Value::Object(out)
    }
}

fn bounds_json(min: Option<Value>, max: Option<Value>) -> Value {
    let mut m = Map::new();
    if let Some(v) = min {
        m.insert("min".into(), v);
    }
    if let Some(v) = max {
        m.insert("max".into(), v);
    }
    Value::Object(m)
}

/// The schema of a list's items or of a map's keys.
#[derive(Debug, Clone, PartialEq)]
pub enum NestedSchema {
    /// Every item of a list follows this schema (shown under `"*"`).
    ListItems(Box<PropertySchema>),
    /// Known keys of a map, in declaration order.
    MapKeys(Vec<PropertySchema>),
}

/// Support status of a type or a property.
#[derive(Debug, Clone, PartialEq)]
pub struct SupportStatus {
    /// SUPPORTED, DEPRECATED, UNSUPPORTED, HIDDEN or UNKNOWN.
    pub status: &'static str,
    pub version: Option<&'static str>,
    pub message: Option<&'static str>,
    pub previous: Option<Box<SupportStatus>>,
    /// The type that replaces this one (upstream `substitute_class`): an
    /// update that changes a resource of this type to it keeps the
    /// resource, updating it in place. Not part of the API view.
    pub substitute: Option<&'static str>,
}

/// The statuses `support_status=` may filter on.
pub const SUPPORT_STATUSES: [&str; 5] = ["UNKNOWN", "SUPPORTED", "DEPRECATED", "UNSUPPORTED", "HIDDEN"];

impl SupportStatus {
    pub fn supported(version: &'static str) -> Self {
        SupportStatus { status: "SUPPORTED", version: Some(version), message: None, previous: None, substitute: None }
    }
    pub fn hidden(version: &'static str) -> Self {
        SupportStatus { status: "HIDDEN", version: Some(version), message: None, previous: None, substitute: None }
    }
    /// A DEPRECATED status from `version` on: what a hidden type was before.
    pub fn deprecated(version: &'static str) -> Self {
        SupportStatus { status: "DEPRECATED", ..Self::supported(version) }
    }
    pub fn is_hidden(&self) -> bool {
        self.status == "HIDDEN"
    }
    /// Upstream `is_substituted`: whether `plugin_identity` (the plugin a
    /// resource's new definition runs as) is this type's named substitute.
    pub fn is_substituted_by(&self, plugin_identity: &str) -> bool {
        self.substitute == Some(plugin_identity)
    }
    /// `SupportStatus.to_dict()`.
    pub fn to_json(&self) -> Value {
        json!({
            "status": self.status,
            "message": self.message,
            "version": self.version,
            "previous_status": self.previous.as_ref().map(|p| p.to_json()),
        })
    }
}

impl Default for SupportStatus {
    fn default() -> Self {
        SupportStatus { status: "SUPPORTED", version: None, message: None, previous: None, substitute: None }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PropertySchema {
    pub name: &'static str,
    pub kind: PropertyType,
    pub description: &'static str,
    pub required: bool,
    pub default: Option<Value>,
    pub update_allowed: bool,
    pub immutable: bool,
    pub constraints: Vec<Constraint>,
    pub schema: Option<NestedSchema>,
    /// Hidden properties are accepted but not shown (e.g. RandomString's
    /// deprecated `sequence`).
    pub hidden: bool,
}

impl PropertySchema {
    /// An optional, not updatable property without default or constraints.
    pub fn new(name: &'static str, kind: PropertyType, description: &'static str) -> Self {
        PropertySchema {
            name,
            kind,
            description,
            required: false,
            default: None,
            update_allowed: false,
            immutable: false,
            constraints: Vec::new(),
            schema: None,
            hidden: false,
        }
    }
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub fn default_value(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }
    pub fn update_allowed(mut self) -> Self {
        self.update_allowed = true;
        self
    }
    pub fn immutable(mut self) -> Self {
        self.immutable = true;
        self
    }
    pub fn constraint(mut self, c: Constraint) -> Self {
        self.constraints.push(c);
        self
    }
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }
    /// A list whose items follow `item` (its name is ignored; shown as `*`).
    pub fn list_of(mut self, item: PropertySchema) -> Self {
        self.schema = Some(NestedSchema::ListItems(Box::new(item)));
        self
    }
    /// A map with these known keys.
    pub fn map_of(mut self, keys: Vec<PropertySchema>) -> Self {
        self.schema = Some(NestedSchema::MapKeys(keys));
        self
    }

    /// `dict(properties.Schema)`: keys in upstream order, optional ones
    /// only when set.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), json!(self.kind.as_str()));
        if !self.description.is_empty() {
            out.insert("description".into(), json!(self.description));
        }
        if let Some(d) = &self.default {
            out.insert("default".into(), d.clone());
        }
        match &self.schema {
            Some(NestedSchema::ListItems(item)) => {
                out.insert("schema".into(), json!({ "*": item.to_json() }));
            }
            Some(NestedSchema::MapKeys(keys)) => {
                let m: Map<String, Value> = keys.iter().map(|k| (k.name.to_string(), k.to_json())).collect();
                out.insert("schema".into(), Value::Object(m));
            }
            None => {}
        }
        out.insert("required".into(), json!(self.required));
        if !self.constraints.is_empty() {
            out.insert("constraints".into(), Value::Array(self.constraints.iter().map(Constraint::to_json).collect()));
        }
        out.insert("update_allowed".into(), json!(self.update_allowed));
        out.insert("immutable".into(), json!(self.immutable));
        Value::Object(out)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AttributeSchema {
    pub name: &'static str,
    pub description: &'static str,
    /// `string`, `map`, `list`, `integer`, `boolean`, `number`; None = untyped.
    pub kind: Option<&'static str>,
    /// Hidden attributes resolve but are not shown (e.g. a server's
    /// deprecated `first_address`).
    pub hidden: bool,
}

impl AttributeSchema {
    pub fn new(name: &'static str, description: &'static str, kind: Option<&'static str>) -> Self {
        AttributeSchema { name, description, kind, hidden: false }
    }
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("description".into(), json!(self.description));
        if let Some(k) = self.kind {
            out.insert("type".into(), json!(k));
        }
        Value::Object(out)
    }
}

/// The base attribute every resource has; resolved by the engine.
pub fn show_attribute() -> AttributeSchema {
    AttributeSchema::new("show", "Detailed information about resource.", Some("map"))
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceSchema {
    /// In upstream declaration order (error order depends on it).
    pub properties: Vec<PropertySchema>,
    /// The type's own attributes, without the base `show`.
    pub attributes: Vec<AttributeSchema>,
    pub support_status: SupportStatus,
    /// The class docstring shown with `with_description=true`.
    pub description: &'static str,
}

impl ResourceSchema {
    pub fn property(&self, name: &str) -> Option<&PropertySchema> {
        self.properties.iter().find(|p| p.name == name)
    }
    pub fn attribute(&self, name: &str) -> Option<&AttributeSchema> {
        self.attributes.iter().find(|a| a.name == name)
    }
    /// Whether `name` resolves on this type (its own attributes or `show`).
    pub fn has_attribute(&self, name: &str) -> bool {
        name == "show" || self.attribute(name).is_some()
    }
}
