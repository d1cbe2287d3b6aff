//! The resource type plugins: what each built-in type accepts (its
//! property schema), what it does on create/update/delete, what its
//! attributes resolve to, and the in-place-or-replace decision on update.
//!
//! A type implements [`Plugin`] (its schema, attributes and actions as
//! `async fn`s, defaults for the rest); the engine drives every plugin
//! through the object-safe [`ResourceType`] it implies. The registry
//! ([`Registry`]) finds a type by name and renders the resource-type API
//! views. Nothing here knows about transport or storage: a plugin sees an
//! [`ActionContext`] and writes what it produced into its
//! [`ResourceState`].
//!
//! What the engine keeps to (so plugins stay simple):
//! - validate with [`ResourceType::validate_properties`], not the free
//!   [`validate_properties`]: Value retypes `value`, None accepts anything,
//!   RandomString translates the deprecated `sequence`;
//! - before [`ResourceType::attribute`], set `state.properties` to the
//!   resource's current properties; resolve through [`resolve_attribute`]
//!   so an unknown name gets Heat's error naming the resource; `show` is
//!   the engine's;
//! - [`ResourceType::reference_id`] returns Null before the resource has a
//!   physical id: `get_resource` then gives the resource name, as upstream.

mod autoscaling_group;
mod aws_scaling_policy;
mod cfn_stack;
pub mod cinder;
mod client_errors;
mod config_formats;
pub mod constraints;
mod context;
mod delete_retries;
mod deployed_server;
pub mod glance;
pub mod host;
mod instance_group;
pub mod keystone;
mod launch_configuration;
pub mod neutron;
mod none;
pub mod nova;
pub mod placement;
mod plugin;
mod properties;
mod random_string;
mod registry;
mod resource_chain;
mod resource_group;
mod scaling;
mod scaling_policy;
mod schema;
mod software_config;
mod software_deployment;
mod stack_resource;
pub mod swift;
pub(crate) mod template_resource;
mod test_resource;
pub mod unimplemented;
mod value;
mod wait_condition;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::error::EngineError;

pub use autoscaling_group::{AutoScalingGroup, GroupFlavor};
pub use cfn_stack::CfnStack;
pub use context::{physical_resource_name, short_id, ActionContext, PHYSICAL_NAME_DATA};
pub use deployed_server::DeployedServer;
pub use host::{HostSlot, PluginHost};
pub use launch_configuration::LaunchConfiguration;
pub use none::NoneResource;
pub use plugin::{ActionResult, Plugin, SpecResult};
pub use properties::{validate_properties, validate_update_policy, Properties};
pub use random_string::RandomString;
pub use registry::Registry;
pub use resource_chain::ResourceChain;
pub use resource_group::ResourceGroup;
pub use scaling::NO_ACTION_REQUIRED;
pub use scaling_policy::ScalingPolicy;
pub use schema::{
    show_attribute, AttributeSchema, Constraint, ConstraintKind, NestedSchema, PropertySchema, PropertyType,
    ResourceSchema, SupportStatus, SUPPORT_STATUSES,
};
pub use software_config::SoftwareConfig;
pub use software_deployment::SoftwareDeployment;
pub use stack_resource::StackResource;
pub use template_resource::TemplateResource;
pub use test_resource::TestResource;
pub use value::ValueResource;
pub use wait_condition::{WaitCondition, WaitConditionHandle};

/// The fact under which a nested-stack resource's members (name,
/// reference, attributes) travel to the resources that use it, read by the
/// definition's attribute resolution for names no schema has.
pub const MEMBERS_FACT: &str = "__nested_members__";

/// What an update of a resource needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateDecision {
    /// Nothing changed: no action, no event.
    Unchanged,
    /// Update the existing resource.
    InPlace,
    /// Create a new resource and delete the old one in the cleanup phase.
    Replace,
}

/// How the plugin of an update node's definition relates to the one its
/// stored row ran as (upstream compares the classes the old and new
/// environments map the types to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeChange {
    /// The same plugin (a new row, or a type name mapped to the same one).
    Same,
    /// The old plugin names the new one as its substitute (upstream
    /// `check_is_substituted`): the new plugin takes the resource over
    /// and updates it in place.
    Substituted,
    /// Another plugin: the resource is replaced.
    Retyped,
}

impl TypeChange {
    /// From the plugin the stored row ran as (None: its type no longer
    /// loads) and the identity of the plugin its new definition runs as.
    pub fn between(old: Option<(&str, &dyn ResourceType)>, new_identity: &str) -> TypeChange {
        match old {
            Some((old_identity, _)) if old_identity == new_identity => TypeChange::Same,
            Some((_, old)) if old.schema().support_status.is_substituted_by(new_identity) => TypeChange::Substituted,
            _ => TypeChange::Retyped,
        }
    }
}

/// Why an action did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceFailure {
    /// The action failed: `type_name` is the Python exception class name
    /// upstream raises (e.g. `ValueError`), shown in the status reason.
    Error { type_name: String, message: String },
    /// Upstream's `NoActionRequired`: a signal with nothing to do (a
    /// scaling group in cooldown or at its bound); it ends quietly.
    NoActionRequired(String),
    /// The action was cancelled (stack update/delete pre-empted it).
    Cancelled,
}

impl ResourceFailure {
    pub fn error(type_name: impl Into<String>, message: impl Into<String>) -> Self {
        ResourceFailure::Error { type_name: type_name.into(), message: message.into() }
    }

    /// The exception name and message of a failure that is not a cancel.
    pub fn exception(&self) -> Option<(&str, &str)> {
        match self {
            ResourceFailure::Error { type_name, message } => Some((type_name, message)),
            ResourceFailure::NoActionRequired(message) => Some((scaling::NO_ACTION_REQUIRED, message)),
            ResourceFailure::Cancelled => None,
        }
    }
}

/// A template error inside an action: its Heat type is the exception name.
impl From<keelson_hot::TemplateError> for ResourceFailure {
    fn from(e: keelson_hot::TemplateError) -> Self {
        ResourceFailure::error(e.type_name(), e.message)
    }
}

/// An engine error inside an action: its Heat type is the exception name.
impl From<EngineError> for ResourceFailure {
    fn from(e: EngineError) -> Self {
        ResourceFailure::error(e.heat_type(), e.message())
    }
}

impl fmt::Display for ResourceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.exception() {
            Some((type_name, message)) => write!(f, "{type_name}: {message}"),
            None => f.write_str("Cancelled"),
        }
    }
}

impl std::error::Error for ResourceFailure {}

/// What a resource keeps between actions (the resource row and its
/// resource_data).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceState {
    /// `physical_resource_id` (upstream `resource_id`); None until set.
    pub physical_id: Option<String>,
    /// resource_data key/values (e.g. TestResource's `value`).
    pub data: BTreeMap<String, String>,
    /// The properties the resource was last created/updated with.
    pub properties: Properties,
    pub metadata: Value,
}

/// The Heat exception for an attribute a type does not have.
pub fn invalid_attribute(resource_name: &str, attribute: &str) -> EngineError {
    EngineError::InvalidTemplateAttribute(format!(
        "The Referenced Attribute ({resource_name} {attribute}) is incorrect."
    ))
}

/// Resolves attribute `name` of resource `resource_name`: checks that the
/// type has it (so the error names the resource), then asks the plugin.
/// `show` is not resolved here: the engine builds it from the resource.
pub async fn resolve_attribute(
    rt: &dyn ResourceType,
    resource_name: &str,
    state: &ResourceState,
    name: &str,
) -> Result<Value, EngineError> {
    if !rt.accepts_any_attribute() && !rt.schema().has_attribute(name) {
        return Err(invalid_attribute(resource_name, name));
    }
    rt.attribute(state, name).await.map_err(|e| {
        if matches!(e, EngineError::InvalidTemplateAttribute(_)) {
            invalid_attribute(resource_name, name)
        } else {
            e
        }
    })
}

/// The engine's face of a resource type: object safe, every action a
/// boxed future. Types do not implement it: they implement [`Plugin`],
/// whose blanket impl supplies this (and where the defaults live).
pub trait ResourceType: Send + Sync + 'static {
    /// e.g. `OS::Heat::TestResource`.
    fn type_name(&self) -> &'static str;

    fn schema(&self) -> &ResourceSchema;

    /// Validates and coerces the properties of a resource of this type
    /// (see [`validate_properties`]) and runs the type's own checks. The
    /// engine calls this, not the free function: some types adapt the
    /// schema (Value) or accept anything (None).
    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError>;

    /// Checks across properties (upstream `Resource.validate`).
    fn validate(&self, props: &Properties) -> Result<(), EngineError>;

    /// Upstream `_needs_update`: equal -> Unchanged; any changed property
    /// that is not update_allowed -> Replace; otherwise InPlace.
    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision;

    /// Upstream `signal_needs_metadata_updates`: whether a handled signal
    /// refreshes the metadata of the stack's other resources.
    fn signal_needs_metadata_updates(&self) -> bool;

    /// What upstream `metadata_update()` does to the resource's stored
    /// metadata when a signal to another resource refreshes it.
    fn metadata_refresh(&self) -> MetadataRefresh;

    /// Whether the resource runs a nested stack whose resources its
    /// `resource.<name>[.<attr>]` attributes reach (template resources,
    /// groups, OS::Heat::Stack).
    fn runs_nested_stack(&self) -> bool;

    /// The nested stack the resource would run with `properties`, where
    /// it can be told without running anything (validation and update
    /// previews descend into it); `parent_files` and `parent_environment`
    /// (without parameters) are the parent stack's documents. The name in
    /// the error path is `nested_stack_label`.
    fn nested_stack_spec(
        &self,
        properties: &Properties,
        parent_files: &Map<String, Value>,
        parent_environment: &Value,
    ) -> Option<host::NestedStackSpec>;

    /// How validation errors name the nested stack: upstream's
    /// `template_url` (the file of a template resource).
    fn nested_stack_label(&self) -> String;

    /// The fewest resources the nested stack of `properties` holds, told
    /// without building its template (a group's `count`), so the
    /// resource limit refuses a group of 10^5 before 10^5 member
    /// definitions exist. None when the plugin runs no nested stack.
    fn nested_resource_count(&self, properties: &Properties) -> Option<u64>;

    /// Upstream `update_policy_schema`: the keys of the `update_policy`
    /// the plugin reads, with their types and constraints.
    fn update_policy_schema(&self) -> &[PropertySchema];

    /// Whether the plugin reads the resource's `update_policy` (resolved
    /// into [`ActionContext::update_policy`]; left unresolved for the
    /// others, as upstream resolves it only where a plugin reads it).
    fn takes_update_policy(&self) -> bool;

    /// Creates the resource; sets `ctx.state.physical_id` / `data`.
    fn create<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Updates in place from `old` to `ctx.properties`.
    fn update<'a>(
        &'a self,
        ctx: &'a mut ActionContext,
        old: &'a Properties,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    fn delete<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Resolves one of the type's own attributes (not `show`). Use
    /// [`resolve_attribute`] to get the error naming the resource.
    fn attribute<'a>(&'a self, state: &'a ResourceState, name: &'a str) -> BoxFuture<'a, Result<Value, EngineError>>;

    /// True for types whose every attribute name resolves (OS::Heat::None).
    fn accepts_any_attribute(&self) -> bool;

    /// Attributes no schema names that the resource has now.
    fn extra_attributes<'a>(&'a self, state: &'a ResourceState) -> BoxFuture<'a, Map<String, Value>>;

    /// What `get_resource` returns.
    fn reference_id(&self, state: &ResourceState) -> Value;

    fn handles_signal(&self) -> bool;

    /// Upstream `handle_signal`: acts on a signal's `details` for a
    /// resource that exists (not INIT); answers the text of the event's
    /// "Signal: …" reason, or None for the generic one. Only called when
    /// [`ResourceType::handles_signal`] is true.
    fn handle_signal<'a>(
        &'a self,
        target: &'a SignalTarget,
        details: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ResourceFailure>>;

    /// Upstream `handle_check`; None when the type has none (CHECK then
    /// reports the resource as "not fully supported").
    fn check<'a>(&'a self, ctx: &'a mut ActionContext) -> Option<BoxFuture<'a, Result<(), ResourceFailure>>>;

    fn suspend<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    fn resume<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Upstream `handle_snapshot` (stack SNAPSHOT).
    fn snapshot<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Upstream `handle_delete_snapshot` (the snapshot's data in
    /// `ctx.state.data`).
    fn delete_snapshot<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Upstream `handle_restore`: property values a restore sets.
    fn restore_properties(&self, resource_data: &Map<String, Value>) -> Map<String, Value>;

    /// Upstream `prepare_for_replace`, on the old resource before its
    /// replacement is created; a failure fails the update.
    fn prepare_for_replace<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Upstream `restore_prev_rsrc(convergence=True)`, on the old resource
    /// when a rollback brings it back in place of the replacement whose
    /// physical id is `replacement`; a failure fails the rollback's update.
    fn restore_prev_rsrc<'a>(
        &'a self,
        ctx: &'a mut ActionContext,
        replacement: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Upstream `needs_replace_failed`: whether the next update replaces
    /// this FAILED resource.
    fn needs_replace_failed<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<bool, ResourceFailure>>;

    /// Upstream `add_dependencies`: the resources of the same stack
    /// `this` needs first although its template does not say so.
    fn implicit_requirements(
        &self,
        this: &StackMember<'_>,
        explicit: &BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String>;

    /// The service the type acts through (upstream `is_service_available`);
    /// None for a type the engine implements itself.
    fn required_service(&self) -> Option<RequiredService>;
}

/// How a resource's stored metadata follows its template's `metadata`
/// when a signal makes the stack refresh it (upstream `metadata_update`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataRefresh {
    /// Left as it is (upstream's default, a no-op).
    Keep,
    /// Replaced by the template's metadata resolved again (template
    /// resources, AWS::EC2::Instance).
    Replace,
    /// The template's metadata resolved again and merged over the stored
    /// one, keeping keys the resource added itself (OS::Nova::Server's
    /// deployments).
    MergeTemplate,
}

/// The OpenStack service a type acts through, as Heat names it: the
/// client (`default_client_name`), the catalog types that serve it (the
/// client plugin's `service_types`), and the extensions the type needs
/// (`required_service_extension`, Neutron's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequiredService {
    pub client: &'static str,
    pub service_types: &'static [&'static str],
    pub extensions: &'static [&'static str],
}

impl RequiredService {
    pub const NOVA: RequiredService = RequiredService { client: "nova", service_types: &["compute"], extensions: &[] };
    pub const GLANCE: RequiredService =
        RequiredService { client: "glance", service_types: &["image"], extensions: &[] };
    pub const CINDER: RequiredService =
        RequiredService { client: "cinder", service_types: &["volumev3", "block-storage"], extensions: &[] };
    pub const NEUTRON: RequiredService =
        RequiredService { client: "neutron", service_types: &["network"], extensions: &[] };
    pub const SWIFT: RequiredService =
        RequiredService { client: "swift", service_types: &["object-store"], extensions: &[] };
    pub const AODH: RequiredService = RequiredService { client: "aodh", service_types: &["alarming"], extensions: &[] };

    /// Neutron with `extension` enabled.
    pub const fn neutron_with(extension: &'static [&'static str]) -> RequiredService {
        RequiredService { extensions: extension, ..RequiredService::NEUTRON }
    }
}

/// A resource of a stack as implicit-dependency rules see it: its
/// properties resolved before anything exists (`get_resource` gives the
/// resource's name, so two references to one resource compare equal).
#[derive(Debug, Clone, Copy)]
pub struct StackMember<'a> {
    pub name: &'a str,
    /// The plugin type it runs as (upstream `has_interface`).
    pub type_name: &'a str,
    pub properties: &'a Properties,
}

impl StackMember<'_> {
    /// The first of `keys` that has a non-null value.
    pub fn property(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter().filter_map(|k| self.properties.get(*k)).find(|v| !v.is_null())
    }
}

/// The default update decision, shared by plugins that extend it.
pub fn default_update_decision(schema: &ResourceSchema, old: &Properties, new: &Properties) -> UpdateDecision {
    if old == new {
        return UpdateDecision::Unchanged;
    }
    let changed = changed_properties(old, new);
    let replaces = changed.iter().any(|name| !schema.property(name).is_some_and(|p| p.update_allowed));
    if replaces {
        UpdateDecision::Replace
    } else {
        UpdateDecision::InPlace
    }
}

/// Names of the properties whose values differ between `old` and `new`.
pub fn changed_properties(old: &Properties, new: &Properties) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (k, v) in new {
        if old.get(k) != Some(v) {
            names.push(k.clone());
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            names.push(k.clone());
        }
    }
    names
}

/// The resource a signal is for, as the engine read it when the signal
/// arrived.
#[derive(Debug, Clone, Default)]
pub struct SignalTarget {
    pub stack_id: String,
    /// The resource row's id (metadata writes are CAS'd on it).
    pub resource_id: i64,
    pub resource_name: String,
    pub state: ResourceState,
}
