//! The engine as plugins see it ([`PluginHost`]): nested stacks created,
//! updated and deleted through the same operations the API uses, and
//! waited for without holding a concurrency slot.
//!
//! A waiting parent is woken in-process when the child's traversal
//! settles on this engine, and polls the child's row otherwise (the child
//! may run on other engines).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::{watch, Notify};

use super::operations::{NewDefinition, NewStack};
use super::Engine;
use crate::definition::{resource_facts, resource_state, LiveContext, ResourceFacts, StackDefinition};
use crate::error::EngineError;
use crate::resources::host::{
    template_resource_count, NestedMember, NestedOutcome, NestedParent, NestedStackRef, NestedStackSpec, PluginHost,
};
use crate::resources::host::{
    DeploymentSpec, DeploymentState, MetadataMerge, NewSoftwareConfig, PeerResource, SignalUrls,
};
use crate::resources::{short_id, ResourceFailure};
use crate::store::{self, Action, ResourceRow, StackRow, Status};

tokio::task_local! {
    /// The concurrency slot of the check_resource running on this task:
    /// given back while its plugin waits for a nested stack, whose own
    /// resources need slots (a parent holding one while its children
    /// queue for them could deadlock a full engine).
    pub(super) static CHECK_SLOT: std::cell::RefCell<Option<tokio::sync::OwnedSemaphorePermit>>;
}

fn release_check_slot() {
    let _ = CHECK_SLOT.try_with(|slot| slot.borrow_mut().take());
}

fn failure(e: EngineError) -> ResourceFailure {
    ResourceFailure::from(e)
}

/// Polling bounds while waiting for a child on another engine.
const POLL_FIRST: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_secs(1);

impl Engine {
    /// This engine as the `Arc` its operations take.
    pub(super) fn arc(&self) -> Result<Arc<Engine>, EngineError> {
        self.this.upgrade().ok_or_else(|| EngineError::internal("the engine is shutting down"))
    }

    /// Wakes the plugins waiting on stack `stack_id` (its traversal
    /// settled on this engine).
    pub(super) fn stack_settled(&self, stack_id: &str) {
        if let Ok(map) = self.stack_waiters.lock() {
            if let Some(n) = map.get(stack_id) {
                n.notify_waiters();
            }
        }
    }

    fn waiter(&self, stack_id: &str) -> Arc<Notify> {
        match self.stack_waiters.lock() {
            Ok(mut map) => map.entry(stack_id.to_string()).or_default().clone(),
            Err(_) => Arc::new(Notify::new()),
        }
    }

    fn forget_waiter(&self, stack_id: &str, notify: &Arc<Notify>) {
        if let Ok(mut map) = self.stack_waiters.lock() {
            // Two references: the map's and the caller's (no other waiter).
            if map.get(stack_id).is_some_and(|n| Arc::ptr_eq(n, notify) && Arc::strong_count(n) <= 2) {
                map.remove(stack_id);
            }
        }
    }

    async fn create_nested_stack(
        &self,
        parent: &NestedParent,
        spec: NestedStackSpec,
    ) -> Result<NestedStackRef, EngineError> {
        let owner = self.live_parent(&parent.stack_id).await?;
        let depth = owner.nested_depth + 1;
        if depth > self.settings.max_nested_stack_depth {
            return Err(EngineError::RecursionDepthExceeded(format!(
                "Recursion depth exceeds {}.",
                self.settings.max_nested_stack_depth
            )));
        }
        let resources = u64::try_from(template_resource_count(&spec.template)).unwrap_or(u64::MAX);
        self.check_tree_size(&owner.id, None, resources).await?;
        let id = uuid::Uuid::new_v4().to_string();
        let name = format!("{}-{}-{}", owner.name, parent.resource_name, short_id(&uuid::Uuid::new_v4()));
        let child = StackRow { id: id.clone(), name: name.clone(), tenant: owner.tenant.clone(), ..Default::default() };
        let mut def = StackDefinition::parse(
            &spec.template,
            &spec.files,
            &spec.environment,
            &crate::definition::pseudo_params(&child, &self.settings.region_name),
        )?
        .into_nested(true);
        let types = def.resource_types(&self.registry);
        // Heat's types keelson does not implement: their service, asked
        // first, decides what validation answers (as for a top stack).
        let pending = crate::resources::unimplemented::needing_service(&self.registry, &types);
        if !pending.is_empty() {
            if let Some(session) = self.stack_session(&owner.id).await? {
                def.set_unavailable_types(crate::resources::constraints::unavailable_reasons(&session, &pending).await);
            }
        }
        def.validate(&self.registry)?;
        // Heat validates a nested stack strictly as it creates it, with the
        // stack's stored context: its service constraints through the trust.
        let checks = def.service_constraint_checks(&self.registry)?;
        let required = def.required_services(&self.registry);
        if !checks.is_empty() || !required.is_empty() {
            if let Some(session) = self.stack_session(&owner.id).await? {
                crate::resources::constraints::check_stack(&session, &required, &checks).await?;
            }
        }
        // Heat creates nested stacks with the stack's stored context: the
        // types they instantiate are authorized for the user through the
        // trust (its roles as Keystone gives them now), however long ago
        // the user's own token expired.
        if let Some(caller) = self.stored_caller(&owner).await? {
            self.registry.authorize_types(&caller, types.iter().map(String::as_str))?;
        }
        let new = NewStack {
            id: id.clone(),
            name: name.clone(),
            tenant: owner.tenant.clone(),
            username: owner.username.clone(),
            user_id: owner.user_id.clone(),
            template: spec.template,
            files: spec.files,
            environment: spec.environment,
            timeout_mins: spec.timeout_mins.or(owner.timeout_mins),
            // The parent decides about rollback (upstream nested stacks
            // never roll back on their own).
            disable_rollback: true,
            tags: None,
            adopt_stack_data: spec.adopt,
            owner_id: Some(owner.id.clone()),
            parent_resource_name: Some(parent.resource_name.clone()),
            nested_depth: depth,
            trustor: None,
            // Heat: nested stacks share their parent's stack-user project.
            stack_user_project_id: owner.stack_user_project_id.clone(),
        };
        self.arc()?.create_stack(new).await?;
        Ok(NestedStackRef { arn: format!("arn:openstack:heat::{}:stacks/{}/{}", owner.tenant, name, id), id })
    }

    /// Upstream `_validate_nested_resources`: the root's whole tree, with
    /// `resources` more (less child `child_id`'s live ones, which they
    /// replace), must stay within `max_resources_per_stack`.
    async fn check_tree_size(&self, stack_id: &str, child_id: Option<&str>, resources: u64) -> Result<(), EngineError> {
        let Ok(limit) = u64::try_from(self.settings.max_resources_per_stack) else {
            return Ok(());
        };
        let mut root = self.live_parent(stack_id).await?;
        // Owners are at most max_nested_stack_depth levels up.
        for _ in 0..=self.settings.max_nested_stack_depth.max(0) {
            let Some(owner) = root.owner_id.clone() else { break };
            match store::stacks::get(&self.db, &owner).await? {
                Some(s) => root = s,
                None => break,
            }
        }
        let mut level = vec![root.id.clone()];
        let mut tree = Vec::new();
        for _ in 0..=self.settings.max_nested_stack_depth.max(0) {
            if level.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for id in &level {
                next.extend(store::stacks::children(&self.db, id).await?.into_iter().map(|c| c.id));
            }
            tree.append(&mut level);
            level = next;
        }
        let in_tree = store::resources::count_in_stacks(&self.db, &tree).await?;
        let replaced = match child_id {
            Some(id) => u64::try_from(self.live_rows(id).await?.len()).unwrap_or(u64::MAX),
            None => 0,
        };
        if in_tree.saturating_add(resources).saturating_sub(replaced) > limit {
            return Err(crate::resources::host::resource_limit_exceeded());
        }
        Ok(())
    }

    async fn live_parent(&self, stack_id: &str) -> Result<StackRow, EngineError> {
        match store::stacks::get(&self.db, stack_id).await? {
            Some(s) if s.deleted_at.is_none() => Ok(s),
            _ => Err(EngineError::stack_not_found(stack_id)),
        }
    }

    /// The outcome of stack `id` once settled; None while in progress.
    async fn settled_state(&self, id: &str) -> Result<Option<NestedOutcome>, EngineError> {
        let Some(row) = store::stacks::get(&self.db, id).await? else {
            return Ok(Some(NestedOutcome {
                action: Action::Delete,
                status: Status::Complete,
                status_reason: String::new(),
            }));
        };
        if row.deleted_at.is_some() {
            return Ok(Some(NestedOutcome {
                action: Action::Delete,
                status: Status::Complete,
                status_reason: row.status_reason,
            }));
        }
        if row.status == Status::InProgress {
            return Ok(None);
        }
        Ok(Some(NestedOutcome { action: row.action, status: row.status, status_reason: row.status_reason }))
    }

    async fn wait_for_stack(
        &self,
        id: &str,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<NestedOutcome, ResourceFailure> {
        release_check_slot();
        let notify = self.waiter(id);
        let mut pause = POLL_FIRST;
        let result = loop {
            // Registered before the read: a settle between the read and
            // the wait still wakes us.
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.settled_state(id).await {
                Ok(Some(outcome)) => break Ok(outcome),
                Ok(None) => {}
                Err(e) => break Err(failure(e)),
            }
            if *cancel.borrow_and_update() {
                break Err(ResourceFailure::Cancelled);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(pause) => pause = (pause * 2).min(POLL_MAX),
                changed = cancel.changed() => {
                    if changed.is_ok() && *cancel.borrow() {
                        break Err(ResourceFailure::Cancelled);
                    }
                    if changed.is_err() {
                        // Nobody can cancel any more: keep waiting on the stack.
                        cancel = watch::channel(false).1;
                    }
                }
            }
        };
        self.forget_waiter(id, &notify);
        result
    }

    /// The live row per resource name of stack `id`.
    pub(super) async fn live_rows(&self, id: &str) -> Result<Vec<ResourceRow>, EngineError> {
        let rows = store::resources::list(&self.db, id).await?;
        let mut by_name: BTreeMap<String, ResourceRow> = BTreeMap::new();
        for row in rows {
            let better = by_name
                .get(&row.name)
                .is_none_or(|have| (row.replaced_by.is_none(), row.id) > (have.replaced_by.is_none(), have.id));
            if better {
                by_name.insert(row.name.clone(), row);
            }
        }
        Ok(by_name.into_values().collect())
    }

    async fn stack_outputs(&self, id: &str) -> Result<Map<String, Value>, EngineError> {
        let stack = self.live_parent(id).await?;
        let def = self.definition(&stack, stack.raw_template_id).await?;
        // Only what the outputs name is read (a group's members are not
        // asked for their attributes again to resolve no output).
        if def.outputs.is_empty() {
            return Ok(Map::new());
        }
        let rows = self.live_rows(id).await?;
        let ctx = LiveContext::load(&self.db, &self.registry, &def, rows.iter(), None).await?;
        Ok(ctx.outputs(&def).into_iter().filter_map(|(name, _, value)| value.ok().map(|v| (name, v))).collect())
    }

    async fn stack_members(&self, id: &str, attributes: &[String]) -> Result<Vec<NestedMember>, EngineError> {
        let stack = self.live_parent(id).await?;
        let def = self.definition(&stack, stack.raw_template_id).await?;
        let mut members = Vec::new();
        for row in self.live_rows(id).await? {
            if row.action == Action::Init || (row.action == Action::Delete && row.status == Status::Complete) {
                continue;
            }
            let Ok(plugin) = def.plugin_for(&self.registry, &row.name, &row.resource_type) else {
                continue;
            };
            let state = resource_state(&self.db, &row).await?;
            // What the member reported when its last action completed (as
            // Heat reads a resource's cached attributes): asking every
            // member's service again after a group of servers is built
            // is a call per attribute per member.
            let facts = match &row.attr_data {
                Some(Value::Object(cached)) if row.status == Status::Complete => {
                    ResourceFacts { reference_id: plugin.reference_id(&state), attributes: cached.clone() }
                }
                _ => resource_facts(plugin.as_ref(), &row.name, &state).await,
            };
            let values = if attributes.is_empty() {
                facts.attributes
            } else {
                attributes
                    .iter()
                    .map(|n| (n.clone(), facts.attributes.get(n).cloned().unwrap_or(Value::Null)))
                    .collect()
            };
            members.push(NestedMember {
                name: row.name.clone(),
                reference: facts.reference_id,
                attributes: values,
                created_at: row.created_at,
                failed: row.status == Status::Failed,
            });
        }
        Ok(members)
    }
}

impl PluginHost for Engine {
    fn create_nested<'a>(
        &'a self,
        parent: &'a NestedParent,
        spec: NestedStackSpec,
    ) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>> {
        Box::pin(async move { self.create_nested_stack(parent, spec).await.map_err(failure) })
    }

    fn check_nested_size<'a>(
        &'a self,
        stack_id: &'a str,
        child_id: Option<&'a str>,
        resources: u64,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move { self.check_tree_size(stack_id, child_id, resources).await.map_err(failure) })
    }

    fn update_nested<'a>(
        &'a self,
        child_id: &'a str,
        spec: NestedStackSpec,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move {
            let resources = u64::try_from(template_resource_count(&spec.template)).unwrap_or(u64::MAX);
            self.check_tree_size(child_id, Some(child_id), resources).await.map_err(failure)?;
            // A nested stack keeps the timeout it was created with (its
            // parent's) unless the update names one.
            let timeout_mins = match spec.timeout_mins {
                Some(t) => Some(t),
                None => self.live_parent(child_id).await.map_err(failure)?.timeout_mins,
            };
            let new = NewDefinition {
                template: spec.template,
                files: spec.files,
                environment: spec.environment,
                timeout_mins,
                disable_rollback: true,
                tags: None,
            };
            match self.arc() {
                Ok(engine) => engine.update_stack(child_id, new).await.map_err(failure),
                Err(e) => Err(failure(e)),
            }
        })
    }

    fn delete_nested<'a>(&'a self, child_id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move {
            let engine = self.arc().map_err(failure)?;
            match engine.delete_stack(child_id).await {
                Ok(()) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(e) => Err(failure(e)),
            }
        })
    }

    fn wait_nested<'a>(
        &'a self,
        child_id: &'a str,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<NestedOutcome, ResourceFailure>> {
        Box::pin(self.wait_for_stack(child_id, cancel))
    }

    fn nested_outputs<'a>(&'a self, child_id: &'a str) -> BoxFuture<'a, Result<Map<String, Value>, EngineError>> {
        Box::pin(self.stack_outputs(child_id))
    }

    fn notify<'a>(
        &'a self,
        stack_id: &'a str,
        event_type: &'a str,
        error: bool,
        extra: Map<String, Value>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.notifier.is_enabled() {
                return;
            }
            let Ok(Some(stack)) = store::stacks::get(&self.db, stack_id).await else { return };
            let mut body = crate::notifications::stack_body(&stack, stack.action, stack.status, &stack.status_reason);
            if let Value::Object(b) = &mut body {
                b.extend(extra);
            }
            let priority =
                if error { crate::notifications::Priority::Error } else { crate::notifications::Priority::Info };
            self.notifier.notify(event_type, priority, body);
        })
    }

    fn nested_stack_action<'a>(
        &'a self,
        child_id: &'a str,
        action: Action,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move {
            let engine = self.arc().map_err(failure)?;
            let op = super::StackOperation::of_action(action)
                .ok_or_else(|| failure(EngineError::internal(format!("no nested stack {action}"))))?;
            engine.stack_action(child_id, op).await.map_err(failure)?;
            let outcome = self.wait_for_stack(child_id, cancel).await?;
            if outcome.is_complete() {
                Ok(())
            } else {
                Err(crate::resources::template_resource::nested_failure(&outcome))
            }
        })
    }

    fn parent_documents<'a>(
        &'a self,
        stack_id: &'a str,
    ) -> BoxFuture<'a, Result<(Map<String, Value>, Value), EngineError>> {
        Box::pin(async move {
            let stack = self.live_parent(stack_id).await?;
            let def = self.definition(&stack, stack.raw_template_id).await?;
            let mut env = def.environment.to_value();
            if let Value::Object(m) = &mut env {
                m.remove("parameters");
            }
            Ok((def.files.clone(), env))
        })
    }

    fn nested_resources<'a>(
        &'a self,
        child_id: &'a str,
        attributes: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<NestedMember>, EngineError>> {
        Box::pin(self.stack_members(child_id, attributes))
    }

    fn nested_template<'a>(&'a self, child_id: &'a str) -> BoxFuture<'a, Result<Value, EngineError>> {
        Box::pin(async move {
            let stack = self.live_parent(child_id).await?;
            let def = self.definition(&stack, stack.raw_template_id).await?;
            Ok(def.template.to_value().clone())
        })
    }

    // ---- signals and software deployments (convergence/signals.rs,
    // convergence/software.rs).

    fn resource_by_refid<'a>(
        &'a self,
        stack_id: &'a str,
        refid: &'a str,
    ) -> BoxFuture<'a, Result<Option<PeerResource>, ResourceFailure>> {
        Box::pin(async move { self.peer_by_refid(stack_id, refid).await.map_err(failure) })
    }

    fn resource_metadata(&self, resource_id: i64) -> BoxFuture<'_, Result<Value, ResourceFailure>> {
        Box::pin(async move { self.metadata_of(resource_id).await.map_err(failure) })
    }

    fn merge_metadata<'a>(
        &'a self,
        resource_id: i64,
        merge: MetadataMerge<'a>,
    ) -> BoxFuture<'a, Result<Value, ResourceFailure>> {
        Box::pin(self.merge_metadata_of(resource_id, merge))
    }

    fn signal_urls<'a>(
        &'a self,
        stack_id: &'a str,
        resource_name: &'a str,
    ) -> BoxFuture<'a, Result<SignalUrls, ResourceFailure>> {
        Box::pin(async move { self.signal_urls_of(stack_id, resource_name).await.map_err(failure) })
    }

    fn release_check_slot(&self) {
        release_check_slot();
    }

    fn server_build_slot(&self) -> BoxFuture<'_, Option<tokio::sync::OwnedSemaphorePermit>> {
        Box::pin(async move {
            match &self.server_builds {
                Some(slots) => slots.clone().acquire_owned().await.ok(),
                None => None,
            }
        })
    }

    fn set_physical_id<'a>(
        &'a self,
        stack_id: &'a str,
        resource_name: &'a str,
        physical_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move {
            store::software::set_locked_physical_id(&self.db, stack_id, resource_name, &self.engine_id, physical_id)
                .await
                .map(|_| ())
                .map_err(|e| failure(e.into()))
        })
    }

    fn create_software_config<'a>(
        &'a self,
        stack_id: &'a str,
        new: NewSoftwareConfig,
    ) -> BoxFuture<'a, Result<String, ResourceFailure>> {
        Box::pin(async move { self.create_config_for(stack_id, new).await.map_err(failure) })
    }

    fn software_config<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Value>, EngineError>> {
        Box::pin(self.config_doc(id))
    }

    fn delete_software_config<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move { self.delete_config_row(id).await.map_err(failure) })
    }

    fn write_deployment<'a>(
        &'a self,
        stack_id: &'a str,
        spec: DeploymentSpec,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move { self.write_deployment_row(stack_id, spec).await.map_err(failure) })
    }

    fn deployment<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<DeploymentState>, EngineError>> {
        Box::pin(self.deployment_state_of(id))
    }

    fn delete_deployment<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move { self.delete_deployment_row(id).await.map_err(failure) })
    }

    fn signal_deployment<'a>(
        &'a self,
        id: &'a str,
        details: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ResourceFailure>> {
        Box::pin(async move { self.signal_deployment_row(id, details).await.map_err(failure) })
    }
}
