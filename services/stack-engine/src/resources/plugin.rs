//! What a resource type writes: [`Plugin`]. Its properties (the schema),
//! its attributes and its actions, as plain `async fn`s; every hook has a
//! default here, so a type overrides only what it does differently.
//!
//! The defaults also carry what every nested-stack type (upstream
//! `StackResource`) shares: a type that names its [`Plugin::child_stack_host`]
//! runs a nested stack, is always updated in place, and deletes, checks,
//! suspends and resumes its child with itself; one whose child is a single
//! template built from its properties ([`Plugin::child_stack_spec`]) also
//! creates and updates it so.
//!
//! One blanket impl turns every `Plugin` into the object-safe
//! [`ResourceType`] the registry holds: it supplies the type name, boxes
//! each action's future once and forwards the rest.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::host::{HostSlot, NestedStackSpec, PluginHost};
use super::template_resource::{child_stack_action, create_child, delete_child, update_child};
use super::{
    default_update_decision, validate_properties, ActionContext, MetadataRefresh, Properties, PropertySchema,
    RequiredService, ResourceFailure, ResourceSchema, ResourceState, ResourceType, SignalTarget, StackMember,
    UpdateDecision,
};
use crate::error::EngineError;
use crate::store::Action;

/// The result of an action.
pub type ActionResult = Result<(), ResourceFailure>;

/// The child stack a nested-stack type's create or update runs; None
/// where the type builds its children itself.
pub type SpecResult = Result<Option<NestedStackSpec>, ResourceFailure>;

/// One resource type. Implementations are stateless: everything a
/// resource remembers lives in [`ResourceState`]. See [`ResourceType`] for
/// what the engine expects of each hook.
pub trait Plugin: Send + Sync + 'static {
    /// e.g. `OS::Heat::TestResource`.
    const TYPE: &'static str;

    /// The name the registry files this plugin under; a type registered
    /// under two names (structured or not) answers per instance.
    fn type_name(&self) -> &'static str {
        Self::TYPE
    }

    fn schema(&self) -> &ResourceSchema;

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let props = validate_properties(self.schema(), resource_name, given)?;
        self.validate(&props)?;
        Ok(props)
    }

    fn validate(&self, _props: &Properties) -> Result<(), EngineError> {
        Ok(())
    }

    /// A nested stack is always updated (upstream
    /// `StackResource._needs_update`): its resources decide for themselves.
    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        if self.child_stack_host().is_some() {
            return UpdateDecision::InPlace;
        }
        default_update_decision(self.schema(), old, new)
    }

    /// The host the child stack lives in, for a type that runs a nested
    /// stack; None (the default) for every other type.
    fn child_stack_host(&self) -> Option<&HostSlot> {
        None
    }

    /// The child stack a create or update of `ctx` runs, for a nested-stack
    /// type whose child is one template built from its properties (what
    /// [`Plugin::nested_stack_spec`] can only preview). None for the rest:
    /// groups build and roll out their children themselves.
    fn child_stack_spec(
        &self,
        _host: &dyn PluginHost,
        _ctx: &ActionContext,
    ) -> impl Future<Output = SpecResult> + Send {
        async { Ok(None) }
    }

    fn nested_stack_spec(
        &self,
        _properties: &Properties,
        _parent_files: &Map<String, Value>,
        _parent_environment: &Value,
    ) -> Option<NestedStackSpec> {
        None
    }

    fn nested_stack_label(&self) -> String {
        "nested_stack".to_string()
    }

    fn nested_resource_count(&self, _properties: &Properties) -> Option<u64> {
        None
    }

    fn update_policy_schema(&self) -> &[PropertySchema] {
        &[]
    }

    fn takes_update_policy(&self) -> bool {
        false
    }

    /// Creates the resource: the child of [`Plugin::child_stack_spec`];
    /// every other type writes its own.
    fn create(&self, ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        async move {
            match child_of(self, ctx).await? {
                Some((host, spec)) => create_child(host.as_ref(), ctx, spec).await,
                None => Ok(()),
            }
        }
    }

    /// Updates in place from `old` to `ctx.properties`: the child of
    /// [`Plugin::child_stack_spec`]. Otherwise by default there is nothing
    /// to do: the engine keeps the new properties, which is all a type
    /// whose changes all replace, or that reads its properties later (a
    /// scaling policy, a value), needs.
    fn update(&self, ctx: &mut ActionContext, _old: &Properties) -> impl Future<Output = ActionResult> + Send {
        async move {
            match child_of(self, ctx).await? {
                Some((host, spec)) => update_child(host.as_ref(), ctx, spec).await,
                None => Ok(()),
            }
        }
    }

    /// Deletes the child stack of a nested-stack type; otherwise by
    /// default there is nothing outside the engine to delete.
    fn delete(&self, ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        async move {
            match self.child_stack_host() {
                Some(slot) => delete_child(slot.get().as_ref(), ctx).await,
                None => Ok(()),
            }
        }
    }

    fn attribute(&self, state: &ResourceState, name: &str) -> impl Future<Output = Result<Value, EngineError>> + Send;

    fn accepts_any_attribute(&self) -> bool {
        false
    }

    /// The attributes no schema names that the resource has now (a
    /// software deployment's config outputs), passed on with the schema's.
    fn extra_attributes(&self, _state: &ResourceState) -> impl Future<Output = Map<String, Value>> + Send {
        async { Map::new() }
    }

    fn reference_id(&self, state: &ResourceState) -> Value {
        state.physical_id.clone().map(Value::String).unwrap_or(Value::Null)
    }

    fn handles_signal(&self) -> bool {
        false
    }

    /// Upstream `signal_needs_metadata_updates`: whether a handled signal
    /// refreshes the metadata of the stack's other resources.
    fn signal_needs_metadata_updates(&self) -> bool {
        true
    }

    /// What upstream `metadata_update()` does to the resource's stored
    /// metadata when a signal refreshes it; by default nothing.
    fn metadata_refresh(&self) -> MetadataRefresh {
        MetadataRefresh::Keep
    }

    fn handle_signal(
        &self,
        _target: &SignalTarget,
        _details: &Value,
    ) -> impl Future<Output = Result<Option<String>, ResourceFailure>> + Send {
        async { Err(ResourceFailure::error("ResourceActionNotSupported", "signal is not supported for resource.")) }
    }

    /// None when the type has no check (CHECK then reports the resource
    /// as "not fully supported"); a nested-stack type checks its child.
    fn check(&self, ctx: &mut ActionContext) -> Option<impl Future<Output = ActionResult> + Send> {
        let slot = self.child_stack_host()?;
        Some(async move { child_stack_action(slot.get().as_ref(), ctx, Action::Check).await })
    }

    /// A nested-stack type suspends its child; by default nothing.
    fn suspend(&self, ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        on_child(self.child_stack_host(), ctx, Action::Suspend)
    }

    /// A nested-stack type resumes its child; by default nothing.
    fn resume(&self, ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        on_child(self.child_stack_host(), ctx, Action::Resume)
    }

    /// Upstream `handle_snapshot`, in a stack SNAPSHOT: what the type keeps
    /// of its object goes into the resource's data (a snapshot holds it).
    /// Most types keep nothing.
    fn snapshot(&self, _ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        async { Ok(()) }
    }

    /// Upstream `handle_delete_snapshot`: a snapshot is deleted (alone or
    /// with its stack); `ctx.state.data` is the resource's data the
    /// snapshot holds. Most types kept nothing to delete.
    fn delete_snapshot(&self, _ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        async { Ok(()) }
    }

    /// Upstream `handle_restore`: the property values a restore sets on
    /// the resource's definition, from its snapshot data's
    /// `resource_data`. Most types set none.
    fn restore_properties(&self, _resource_data: &Map<String, Value>) -> Map<String, Value> {
        Map::new()
    }

    /// Whether a FAILED resource is replaced by the next update (upstream
    /// `needs_replace_failed`); by default it is.
    fn needs_replace_failed(
        &self,
        _ctx: &mut ActionContext,
    ) -> impl Future<Output = Result<bool, ResourceFailure>> + Send {
        async { Ok(true) }
    }

    /// Runs on the old resource before its replacement is created
    /// (upstream `prepare_for_replace`: a key pair frees its name). By
    /// default nothing.
    fn prepare_for_replace(&self, _ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send {
        async { Ok(()) }
    }

    /// Runs on the old resource when a rollback brings it back in place of
    /// its replacement (physical id `replacement`): undoes what
    /// `prepare_for_replace` gave up (upstream `restore_prev_rsrc`: a port
    /// takes back its fixed IPs). By default nothing.
    fn restore_prev_rsrc(
        &self,
        _ctx: &mut ActionContext,
        _replacement: Option<&str>,
    ) -> impl Future<Output = ActionResult> + Send {
        async { Ok(()) }
    }

    /// The resources of `stack` that `this` needs first although the
    /// template does not say so (upstream `add_dependencies`); `explicit`
    /// are those it names. By default none.
    fn implicit_requirements(
        &self,
        _this: &StackMember<'_>,
        _explicit: &BTreeSet<String>,
        _stack: &[StackMember<'_>],
    ) -> Vec<String> {
        Vec::new()
    }

    /// The service the type acts through, checked in the caller's catalog
    /// before a stack is created, updated or previewed; by default none
    /// (the engine's own types).
    fn required_service(&self) -> Option<RequiredService> {
        None
    }
}

/// The host and the child spec of `plugin`'s create or update, when its
/// child stack is one template ([`Plugin::child_stack_spec`]).
async fn child_of<P: Plugin + ?Sized>(
    plugin: &P,
    ctx: &ActionContext,
) -> Result<Option<(Arc<dyn PluginHost>, NestedStackSpec)>, ResourceFailure> {
    let Some(slot) = plugin.child_stack_host() else {
        return Ok(None);
    };
    let host = slot.get();
    let spec = plugin.child_stack_spec(host.as_ref(), ctx).await?;
    Ok(spec.map(|spec| (host, spec)))
}

/// Suspends or resumes (`action`) the child stack in `slot`, of a
/// nested-stack type; nothing for the rest.
async fn on_child(slot: Option<&HostSlot>, ctx: &mut ActionContext, action: Action) -> ActionResult {
    match slot {
        Some(slot) => child_stack_action(slot.get().as_ref(), ctx, action).await,
        None => Ok(()),
    }
}

impl<P: Plugin> ResourceType for P {
    fn type_name(&self) -> &'static str {
        Plugin::type_name(self)
    }

    fn schema(&self) -> &ResourceSchema {
        Plugin::schema(self)
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        Plugin::validate_properties(self, resource_name, given)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        Plugin::validate(self, props)
    }

    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        Plugin::update_decision(self, old, new)
    }

    fn runs_nested_stack(&self) -> bool {
        Plugin::child_stack_host(self).is_some()
    }

    fn signal_needs_metadata_updates(&self) -> bool {
        Plugin::signal_needs_metadata_updates(self)
    }

    fn metadata_refresh(&self) -> MetadataRefresh {
        Plugin::metadata_refresh(self)
    }

    fn nested_stack_spec(
        &self,
        properties: &Properties,
        parent_files: &Map<String, Value>,
        parent_environment: &Value,
    ) -> Option<NestedStackSpec> {
        Plugin::nested_stack_spec(self, properties, parent_files, parent_environment)
    }

    fn nested_stack_label(&self) -> String {
        Plugin::nested_stack_label(self)
    }

    fn nested_resource_count(&self, properties: &Properties) -> Option<u64> {
        Plugin::nested_resource_count(self, properties)
    }

    fn update_policy_schema(&self) -> &[PropertySchema] {
        Plugin::update_policy_schema(self)
    }

    fn takes_update_policy(&self) -> bool {
        Plugin::takes_update_policy(self)
    }

    fn create<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::create(self, ctx))
    }

    fn update<'a>(&'a self, ctx: &'a mut ActionContext, old: &'a Properties) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::update(self, ctx, old))
    }

    fn delete<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::delete(self, ctx))
    }

    fn attribute<'a>(&'a self, state: &'a ResourceState, name: &'a str) -> BoxFuture<'a, Result<Value, EngineError>> {
        Box::pin(Plugin::attribute(self, state, name))
    }

    fn accepts_any_attribute(&self) -> bool {
        Plugin::accepts_any_attribute(self)
    }

    fn extra_attributes<'a>(&'a self, state: &'a ResourceState) -> BoxFuture<'a, Map<String, Value>> {
        Box::pin(Plugin::extra_attributes(self, state))
    }

    fn reference_id(&self, state: &ResourceState) -> Value {
        Plugin::reference_id(self, state)
    }

    fn handles_signal(&self) -> bool {
        Plugin::handles_signal(self)
    }

    fn handle_signal<'a>(
        &'a self,
        target: &'a SignalTarget,
        details: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ResourceFailure>> {
        Box::pin(Plugin::handle_signal(self, target, details))
    }

    fn check<'a>(&'a self, ctx: &'a mut ActionContext) -> Option<BoxFuture<'a, ActionResult>> {
        Plugin::check(self, ctx).map(|f| Box::pin(f) as BoxFuture<'a, ActionResult>)
    }

    fn suspend<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::suspend(self, ctx))
    }

    fn resume<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::resume(self, ctx))
    }

    fn snapshot<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::snapshot(self, ctx))
    }

    fn delete_snapshot<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::delete_snapshot(self, ctx))
    }

    fn restore_properties(&self, resource_data: &Map<String, Value>) -> Map<String, Value> {
        Plugin::restore_properties(self, resource_data)
    }

    fn prepare_for_replace<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::prepare_for_replace(self, ctx))
    }

    fn restore_prev_rsrc<'a>(
        &'a self,
        ctx: &'a mut ActionContext,
        replacement: Option<&'a str>,
    ) -> BoxFuture<'a, ActionResult> {
        Box::pin(Plugin::restore_prev_rsrc(self, ctx, replacement))
    }

    fn needs_replace_failed<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<bool, ResourceFailure>> {
        Box::pin(Plugin::needs_replace_failed(self, ctx))
    }

    fn implicit_requirements(
        &self,
        this: &StackMember<'_>,
        explicit: &BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String> {
        Plugin::implicit_requirements(self, this, explicit, stack)
    }

    fn required_service(&self) -> Option<RequiredService> {
        Plugin::required_service(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::context::test_context;
    use super::super::{RandomString, StackResource};
    use super::*;

    #[tokio::test]
    async fn a_type_naming_a_child_stack_host_acts_on_its_child() {
        let nested = StackResource::new(Arc::new(HostSlot::default()));
        let (mut ctx, _cancel) = test_context(Properties::new());
        assert!(ResourceType::runs_nested_stack(&nested));
        assert_eq!(Plugin::update_decision(&nested, &ctx.properties, &ctx.properties), UpdateDecision::InPlace);
        // No child yet: nothing to delete, nothing to check or suspend.
        assert_eq!(Plugin::delete(&nested, &mut ctx).await, Ok(()));
        let check = Plugin::check(&nested, &mut ctx).expect("a nested stack has a check");
        assert_eq!(check.await, Err(ResourceFailure::error("Error", "Cannot check r, stack not created")));
        let suspended = Plugin::suspend(&nested, &mut ctx).await;
        assert_eq!(suspended, Err(ResourceFailure::error("Error", "Cannot suspend r, stack not created")));
    }

    #[tokio::test]
    async fn other_types_keep_the_plain_defaults() {
        let plain = RandomString::new();
        let (mut ctx, _cancel) = test_context(Properties::new());
        assert!(!ResourceType::runs_nested_stack(&plain));
        assert_eq!(Plugin::update_decision(&plain, &ctx.properties, &ctx.properties), UpdateDecision::Unchanged);
        assert!(Plugin::check(&plain, &mut ctx).is_none());
        assert_eq!(Plugin::suspend(&plain, &mut ctx).await, Ok(()));
        assert_eq!(Plugin::delete(&plain, &mut ctx).await, Ok(()));
    }
}
