//! What the API needs of a [`StackDefinition`] beyond what the engine
//! uses: its description, reverse dependencies, immutable parameter
//! changes, previewed properties and the attribute check of
//! create/validate (live resolution is the definition's [`LiveContext`]).
//! Read-only: it never changes a row.

use std::collections::BTreeMap;

use keelson_db::Db;
use keelson_hot::{ResolveContext, ResourceDefn, TemplateError};
use serde_json::{Map, Value};

use super::records::StackRow;
use crate::definition::LiveContext;
pub use crate::definition::StackDefinition;
use crate::error::EngineError;
use crate::resources::Registry;

/// The stored definition of `stack`. A deleted stack whose template was
/// purged shows as the empty template.
pub async fn load(db: &Db, stack: &StackRow, region: &str) -> Result<StackDefinition, EngineError> {
    match StackDefinition::load(db, stack, stack.raw_template_id, region).await {
        Ok(def) => Ok(def),
        Err(e) if e.is_not_found() => StackDefinition::parse(
            &crate::definition::empty_template(),
            &Map::new(),
            &Value::Object(Map::new()),
            &crate::definition::pseudo_params(stack, region),
        ),
        Err(e) => Err(e),
    }
}

pub fn description(def: &StackDefinition) -> String {
    def.template.description().unwrap_or_default().to_string()
}

/// The plugin type of a resource; the written type when it maps to
/// something the engine cannot run.
pub fn plugin_type(def: &StackDefinition, defn: &ResourceDefn) -> String {
    def.effective_type(defn).unwrap_or_else(|_| defn.type_name.clone())
}

/// Names of the resources that require `name` in this definition.
pub fn required_by(def: &StackDefinition, registry: &Registry, name: &str) -> Vec<String> {
    def.resources
        .iter()
        .filter(|r| r.name != name && def.requires(registry, &r.name).contains(name))
        .map(|r| r.name.clone())
        .collect()
}

/// Immutable parameters whose value `new` changes (`ImmutableParameterModified`).
pub fn immutable_params_modified(old: &StackDefinition, new: &StackDefinition) -> Vec<String> {
    old.template
        .param_schemata()
        .iter()
        .filter(|schema| schema.immutable && old.params.get(&schema.name) != new.params.get(&schema.name))
        .map(|schema| schema.name.clone())
        .collect()
}

/// A resource's properties resolved in `ctx` with its plugin's defaults
/// applied (as a preview shows them).
pub fn resolved_properties(
    def: &StackDefinition,
    registry: &Registry,
    ctx: &LiveContext,
    defn: &ResourceDefn,
) -> Map<String, Value> {
    let given = defn.properties.resolve(ctx).unwrap_or_else(|_| Value::Object(Map::new()));
    let plain = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    match def.plugin_for(registry, &defn.name, &defn.type_name).ok() {
        Some(plugin) => plugin.validate_properties(&defn.name, &given).unwrap_or_else(|_| plain(given)),
        None => plain(given),
    }
}

/// Placeholders that refuse attributes a resource's type does not have
/// (what create and validate check in outputs).
pub struct AttributeCheck {
    inner: LiveContext,
    /// Per resource: its type's attribute names; None = any name resolves.
    known: BTreeMap<String, Option<Vec<String>>>,
}

impl AttributeCheck {
    pub fn new(def: &StackDefinition, registry: &Registry) -> AttributeCheck {
        let known = def
            .resources
            .iter()
            .map(|defn| {
                let names = def.plugin_for(registry, &defn.name, &defn.type_name).ok().and_then(|plugin| {
                    (!plugin.accepts_any_attribute()).then(|| {
                        let mut names: Vec<String> =
                            plugin.schema().attributes.iter().map(|a| a.name.to_string()).collect();
                        // Every type has Heat's base attribute `show`, listed or not.
                        if !names.iter().any(|n| n == "show") {
                            names.push("show".to_string());
                        }
                        if plugin.runs_nested_stack() {
                            names.push(crate::resources::MEMBERS_FACT.to_string());
                        }
                        names
                    })
                });
                (defn.name.clone(), names)
            })
            .collect();
        AttributeCheck { inner: LiveContext::placeholders(def), known }
    }
}

impl ResolveContext for AttributeCheck {
    fn param(&self, name: &str) -> Option<Value> {
        self.inner.param(name)
    }

    fn get_resource(&self, name: &str) -> Result<Value, TemplateError> {
        self.inner.get_resource(name)
    }

    fn get_attr(&self, resource: &str, attribute: &str, path: &[Value]) -> Result<Value, TemplateError> {
        if let Some(Some(names)) = self.known.get(resource) {
            // `resource.<name>[.<attr>]` reaches into a nested stack's
            // resources (template resources, groups).
            let nested =
                attribute.starts_with("resource.") && names.iter().any(|n| n == crate::resources::MEMBERS_FACT);
            if !nested && !names.iter().any(|n| n == attribute) {
                return Err(TemplateError::validation_failed(format!(
                    "The Referenced Attribute ({resource} {attribute}) is incorrect."
                )));
            }
        }
        self.inner.get_attr(resource, attribute, path)
    }

    fn get_attr_all(&self, resource: &str) -> Result<Value, TemplateError> {
        self.inner.get_attr_all(resource)
    }

    fn get_file(&self, name: &str) -> Option<String> {
        self.inner.get_file(name)
    }
}
