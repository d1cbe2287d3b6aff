//! Template resources (upstream `template_resource.py` over
//! `stack_resource.py`): a resource whose type is a template file (a key of
//! `files`, written as the type or mapped to by `resource_registry`) runs
//! as a nested stack. Its properties are the nested template's parameters,
//! its attributes the nested outputs; create, update and delete act on
//! the child stack through the [`PluginHost`] and wait for it.
//!
//! The nested outputs are read once the child completes and kept in the
//! resource's data, so resolving an attribute is a lookup, as it is for
//! every other type.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use keelson_hot::{Environment, ParamType, Template};
use serde_json::{Map, Value};

use super::host::{HostSlot, NestedOutcome, NestedParent, NestedStackSpec, PluginHost};
use super::schema::{AttributeSchema, PropertySchema, PropertyType, ResourceSchema, SupportStatus};
use super::{ActionContext, Plugin, Properties, ResourceFailure, ResourceState, SpecResult};
use crate::error::EngineError;
use crate::store::Action;

/// resource_data keys.
pub(crate) const OUTPUTS_KEY: &str = "nested_outputs";
pub(crate) const REFERENCE_KEY: &str = "nested_reference";
pub(crate) const MEMBERS_KEY: &str = "nested_members";
/// The child's ARN, kept apart from [`REFERENCE_KEY`], which a child's
/// `OS::stack_id` output replaces.
pub(crate) const ARN_KEY: &str = "nested_arn";

/// Names for schemas built from user templates: the schema types hold
/// `&'static str`, so each distinct name is kept once for the process.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| Mutex::new(HashSet::new()));
    let Ok(mut set) = names.lock() else {
        return Box::leak(name.to_string().into_boxed_str());
    };
    if let Some(existing) = set.get(name) {
        return existing;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

fn property_type(param: ParamType) -> PropertyType {
    match param {
        ParamType::String => PropertyType::String,
        ParamType::Number => PropertyType::Number,
        ParamType::CommaDelimitedList => PropertyType::List,
        ParamType::Json => PropertyType::Map,
        ParamType::Boolean => PropertyType::Boolean,
    }
}

/// One template file acting as a resource type, for one stack definition.
pub struct TemplateResource {
    type_name: &'static str,
    template: Value,
    files: Map<String, Value>,
    /// The child's environment without its parameters.
    child_environment: Value,
    schema: ResourceSchema,
    host: Arc<HostSlot>,
    /// The file it runs (upstream's `template_url`).
    template_name: String,
}

impl TemplateResource {
    /// The type `type_name` of resource `resource_name`, running the
    /// template `template_name` of `files` that the registry's mapping of
    /// `mapped_type` names (the last step of its chain; `type_name` itself
    /// when unmapped); `parent_env` is the parent stack's environment.
    pub fn build(
        type_name: &str,
        mapped_type: &str,
        resource_name: &str,
        template_name: &str,
        files: &Map<String, Value>,
        parent_env: &Environment,
        host: Arc<HostSlot>,
    ) -> Result<TemplateResource, EngineError> {
        let text = files.get(template_name).and_then(Value::as_str).ok_or_else(|| {
            EngineError::validation(format!("Could not fetch remote template \"{template_name}\": Invalid URL scheme"))
        })?;
        let template = keelson_hot::parse_document(text).map_err(EngineError::from)?;
        let parsed = Template::parse(&template).map_err(|e| {
            EngineError::validation(format!(
                "Failed to parse template of {resource_name} ({template_name}): {}",
                e.message
            ))
        })?;
        let properties = parsed
            .param_schemata()
            .iter()
            .map(|p| {
                let mut schema = PropertySchema::new(intern(&p.name), property_type(p.param_type), "").update_allowed();
                // A parameter_defaults entry the child inherits is a default
                // too (upstream builds the schema with param_defaults).
                if p.default.is_none() && !parent_env.parameter_defaults.contains_key(&p.name) {
                    schema = schema.required();
                }
                schema
            })
            .collect();
        let mut attributes: Vec<AttributeSchema> =
            outputs_of(&template).into_iter().map(|name| AttributeSchema::new(intern(&name), "", None)).collect();
        if !attributes.iter().any(|a| a.name == "OS::stack_id") {
            attributes.push(AttributeSchema::new("OS::stack_id", "", None));
        }
        attributes.push(super::show_attribute());
        Ok(TemplateResource {
            type_name: intern(type_name),
            template,
            files: files.clone(),
            child_environment: child_environment(parent_env, resource_name, mapped_type, template_name),
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::supported("2014.1"),
                description: "",
            },
            host,
            template_name: template_name.to_string(),
        })
    }

    fn spec(&self, properties: &Properties, timeout_mins: Option<i64>) -> NestedStackSpec {
        let mut environment = self.child_environment.clone();
        let parameters: Map<String, Value> =
            properties.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Value::Object(env) = &mut environment {
            env.insert("parameters".into(), Value::Object(parameters));
        }
        NestedStackSpec {
            template: self.template.clone(),
            files: self.files.clone(),
            environment,
            timeout_mins,
            adopt: None,
        }
    }
}

/// The output names of a template document.
fn outputs_of(template: &Value) -> Vec<String> {
    template
        .get("outputs")
        .or_else(|| template.get("Outputs"))
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// Upstream `get_child_environment`: the parent's environment (registry,
/// parameter_defaults, event sinks) for the child, with the registry's
/// per-resource section of this resource as the child's `resources`, and
/// without the mapping that led here (no infinite recursion): that of
/// `mapped_type`, the last step of the registry's chain.
pub(crate) fn child_environment(
    parent: &Environment,
    resource_name: &str,
    mapped_type: &str,
    template_name: &str,
) -> Value {
    let mut env = parent.to_value();
    let Value::Object(map) = &mut env else {
        return env;
    };
    map.remove("parameters");
    if let Some(Value::Object(registry)) = map.get_mut("resource_registry") {
        let own = registry
            .get("resources")
            .and_then(|r| r.get(resource_name))
            .and_then(Value::as_object)
            .map(|section| {
                section
                    .iter()
                    .filter(|(_, v)| v.is_object())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Map<String, Value>>()
            })
            .unwrap_or_default();
        registry.insert("resources".into(), Value::Object(own));
        if registry.get(mapped_type).and_then(Value::as_str) == Some(template_name) {
            registry.remove(mapped_type);
        }
    }
    env
}

/// A failed child as its parent resource's failure: the child's reason
/// without its "Resource CREATE failed: " lead, split into the exception
/// name and the message (which names the failed resource's path).
pub(crate) fn nested_failure(outcome: &NestedOutcome) -> ResourceFailure {
    let reason = outcome.status_reason.as_str();
    let inner = reason
        .strip_prefix("Resource ")
        .and_then(|r| r.split_once(" failed: "))
        .map(|(_, rest)| rest)
        .unwrap_or(reason);
    match inner.split_once(": ") {
        Some((type_name, message)) if !type_name.contains(' ') => ResourceFailure::error(type_name, message),
        _ => ResourceFailure::error("Error", format!("{} {}: {}", outcome.action, outcome.status, inner)),
    }
}

/// Waits for the child and keeps its outputs and reference in `state`.
pub(crate) async fn settle(
    host: &dyn PluginHost,
    ctx: &mut ActionContext,
    child_id: &str,
) -> Result<(), ResourceFailure> {
    let outcome = host.wait_nested(child_id, ctx.cancel.clone()).await?;
    remember_members(host, &mut ctx.state, child_id).await;
    if !outcome.is_complete() {
        return Err(nested_failure(&outcome));
    }
    remember_outputs(host, &mut ctx.state, child_id).await;
    Ok(())
}

/// Keeps the child's live resources (name, reference, attributes) in the
/// data, ordered by name as numbers first (group members "0", "1", …).
pub(crate) async fn remember_members(host: &dyn PluginHost, state: &mut ResourceState, child_id: &str) {
    let Ok(mut members) = host.nested_resources(child_id, &[]).await else { return };
    members.sort_by_key(|m| (m.name.parse::<u64>().unwrap_or(u64::MAX), m.name.clone()));
    let list: Vec<Value> = members
        .into_iter()
        .map(|m| serde_json::json!({"name": m.name, "ref": m.reference, "attrs": m.attributes}))
        .collect();
    state.data.insert(MEMBERS_KEY.into(), Value::Array(list).to_string());
}

/// The members kept by [`remember_members`].
pub(crate) fn stored_members(state: &ResourceState) -> Vec<Value> {
    state.data.get(MEMBERS_KEY).and_then(|t| serde_json::from_str::<Vec<Value>>(t).ok()).unwrap_or_default()
}

pub(crate) async fn remember_outputs(host: &dyn PluginHost, state: &mut ResourceState, child_id: &str) {
    if let Ok(outputs) = host.nested_outputs(child_id).await {
        if let Some(reference) = outputs.get("OS::stack_id") {
            let text = match reference {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            state.data.insert(REFERENCE_KEY.into(), text);
        }
        state.data.insert(OUTPUTS_KEY.into(), Value::Object(outputs).to_string());
    }
}

pub(crate) fn stored_outputs(state: &ResourceState) -> Map<String, Value> {
    state
        .data
        .get(OUTPUTS_KEY)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// The files and environment the nested stack `child_id` of a resource of
/// stack `stack_id` inherits: the parent stack's current ones (during an
/// update, the new ones). Files the child already has and the parent no
/// longer gives are kept: members not yet moved to a new definition still
/// run their old file.
pub(crate) async fn documents_for(
    host: &dyn PluginHost,
    stack_id: &str,
    child_id: Option<&str>,
) -> Result<(Map<String, Value>, Value), ResourceFailure> {
    let (mut files, environment) = host.parent_documents(stack_id).await.map_err(ResourceFailure::from)?;
    if let Some(child) = child_id {
        if let Ok((old_files, _)) = host.parent_documents(child).await {
            for (name, text) in old_files {
                files.entry(name).or_insert(text);
            }
        }
    }
    Ok((files, environment))
}

/// The spec of a group's nested stack running `template`, with the
/// documents [`documents_for`] gives; `child_id` is None before it exists.
pub(crate) async fn group_spec(
    host: &dyn PluginHost,
    stack_id: &str,
    child_id: Option<&str>,
    template: Value,
) -> Result<NestedStackSpec, ResourceFailure> {
    let (files, environment) = documents_for(host, stack_id, child_id).await?;
    Ok(NestedStackSpec { template, files, environment, timeout_mins: None, adopt: None })
}

/// Creates the child stack for `ctx` and waits for it.
pub(crate) async fn create_child(
    host: &dyn PluginHost,
    ctx: &mut ActionContext,
    spec: NestedStackSpec,
) -> Result<(), ResourceFailure> {
    let parent = NestedParent { stack_id: ctx.stack_id.clone(), resource_name: ctx.resource_name.clone() };
    let spec = NestedStackSpec { adopt: ctx.adopt.take(), ..spec };
    let child = host.create_nested(&parent, spec).await?;
    // Recorded now, not only when the action ends: while the child runs,
    // the resource links to it (`nested`), as upstream's resource_id_set.
    // Best effort: the action's last write records it anyway.
    let _ = host.set_physical_id(&ctx.stack_id, &ctx.resource_name, &child.id).await;
    ctx.state.physical_id = Some(child.id.clone());
    ctx.state.data.insert(ARN_KEY.into(), child.arn.clone());
    ctx.state.data.insert(REFERENCE_KEY.into(), child.arn);
    settle(host, ctx, &child.id).await
}

/// Updates the child stack of `ctx` (creates it when there is none) and
/// waits for it.
pub(crate) async fn update_child(
    host: &dyn PluginHost,
    ctx: &mut ActionContext,
    spec: NestedStackSpec,
) -> Result<(), ResourceFailure> {
    let Some(child_id) = ctx.state.physical_id.clone() else {
        return create_child(host, ctx, spec).await;
    };
    host.update_nested(&child_id, spec).await?;
    settle(host, ctx, &child_id).await
}

/// Deletes the child stack of `ctx` and waits until it is gone.
pub(crate) async fn delete_child(host: &dyn PluginHost, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
    let Some(child_id) = ctx.state.physical_id.clone() else {
        return Ok(());
    };
    host.delete_nested(&child_id).await?;
    let outcome = host.wait_nested(&child_id, ctx.cancel.clone()).await?;
    if outcome.action == Action::Delete && !outcome.is_complete() {
        return Err(nested_failure(&outcome));
    }
    Ok(())
}

/// Checks, suspends or resumes (`action`) the child stack of `ctx` and
/// waits for it (none yet: the resource was never created).
pub(crate) async fn child_stack_action(
    host: &dyn PluginHost,
    ctx: &mut ActionContext,
    action: Action,
) -> Result<(), ResourceFailure> {
    let Some(child_id) = ctx.state.physical_id.clone() else {
        let verb = action.to_string().to_lowercase();
        return Err(ResourceFailure::error("Error", format!("Cannot {verb} {}, stack not created", ctx.resource_name)));
    };
    host.nested_stack_action(&child_id, action, ctx.cancel.clone()).await
}

/// `get_resource` of a nested-stack resource: the child's `OS::stack_id`
/// output when it has one, else its ARN.
pub(crate) fn nested_reference(state: &ResourceState) -> Value {
    match state.data.get(REFERENCE_KEY) {
        Some(r) => Value::String(r.clone()),
        None => state.physical_id.clone().map(Value::String).unwrap_or(Value::Null),
    }
}

impl Plugin for TemplateResource {
    /// Never registered under this name: each instance answers the type
    /// name its template was filed under.
    const TYPE: &'static str = "OS::Heat::TemplateResource";

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// A nested stack, so always updated, whatever changed: a changed
    /// file or environment reaches the child too.
    fn child_stack_host(&self) -> Option<&HostSlot> {
        Some(&self.host)
    }

    async fn child_stack_spec(&self, _host: &dyn PluginHost, ctx: &ActionContext) -> SpecResult {
        Ok(Some(self.spec(&ctx.properties, None)))
    }

    fn metadata_refresh(&self) -> super::MetadataRefresh {
        super::MetadataRefresh::Replace
    }

    fn nested_stack_spec(
        &self,
        properties: &Properties,
        _files: &Map<String, Value>,
        _env: &Value,
    ) -> Option<NestedStackSpec> {
        Some(self.spec(properties, None))
    }

    fn nested_stack_label(&self) -> String {
        self.template_name.clone()
    }

    /// The outputs are the attributes, but a reference to an output the
    /// new file no longer has is not an error (upstream lets a stack whose
    /// nested template dropped an output update; the value is null).
    fn accepts_any_attribute(&self) -> bool {
        true
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name == super::MEMBERS_FACT {
            return Ok(Value::Array(stored_members(state)));
        }
        if name == "OS::stack_id" {
            let outputs = stored_outputs(state);
            return Ok(outputs
                .get(name)
                .cloned()
                .unwrap_or_else(|| state.physical_id.clone().map(Value::String).unwrap_or(Value::Null)));
        }
        Ok(stored_outputs(state).get(name).cloned().unwrap_or(Value::Null))
    }

    fn reference_id(&self, state: &ResourceState) -> Value {
        nested_reference(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Status;
    use serde_json::json;

    fn outcome(reason: &str) -> NestedOutcome {
        NestedOutcome { action: Action::Create, status: Status::Failed, status_reason: reason.into() }
    }

    #[test]
    fn a_failed_child_keeps_its_exception_and_path() {
        let f =
            nested_failure(&outcome("Resource CREATE failed: ValueError: resources.oops: Test Resource failed oops"));
        assert_eq!(f, ResourceFailure::error("ValueError", "resources.oops: Test Resource failed oops"));
        let f = nested_failure(&outcome("Timed out"));
        assert_eq!(f, ResourceFailure::error("Error", "CREATE FAILED: Timed out"));
    }

    #[test]
    fn the_child_environment_drops_the_mapping_that_led_to_it() {
        let parent = Environment::from_value(&json!({
            "parameters": {"p": 1},
            "parameter_defaults": {"d": 2},
            "resource_registry": {
                "My::Type": "nested.yaml",
                "Other::Type": "OS::Heat::None",
                "resources": {"r": {"inner": {"hooks": "pre-create"}}}
            }
        }))
        .unwrap();
        let env = child_environment(&parent, "r", "My::Type", "nested.yaml");
        assert!(env.get("parameters").is_none());
        assert_eq!(env["parameter_defaults"], json!({"d": 2}));
        assert!(env["resource_registry"].get("My::Type").is_none());
        assert_eq!(env["resource_registry"]["Other::Type"], json!("OS::Heat::None"));
        assert_eq!(env["resource_registry"]["resources"], json!({"inner": {"hooks": "pre-create"}}));
    }

    #[test]
    fn properties_are_the_nested_parameters() {
        let mut files = Map::new();
        files.insert(
            "nested.yaml".into(),
            json!("heat_template_version: 2015-04-30\nparameters:\n  length:\n    type: number\n  salt:\n    type: string\n    default: x\noutputs:\n  value:\n    value: 1\n"),
        );
        let env = Environment::from_value(&json!({})).unwrap();
        let t = TemplateResource::build(
            "nested.yaml",
            "nested.yaml",
            "r",
            "nested.yaml",
            &files,
            &env,
            Arc::new(HostSlot::default()),
        )
        .unwrap();
        let length = t.schema().property("length").unwrap();
        assert!(length.required && length.update_allowed);
        assert!(!t.schema().property("salt").unwrap().required);
        assert!(t.schema().has_attribute("value") && t.schema().has_attribute("OS::stack_id"));
        let missing = TemplateResource::build(
            "gone.yaml",
            "gone.yaml",
            "r",
            "gone.yaml",
            &files,
            &env,
            Arc::new(HostSlot::default()),
        );
        assert!(missing.is_err());
    }
}
