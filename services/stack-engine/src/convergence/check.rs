//! check_resource (upstream check_resource.py / resource.py
//! create_convergence, update_convergence, delete_convergence): one node of
//! a traversal, acted on under the resource's row lock, then propagated to
//! its successors through their sync points.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use serde_json::{json, Map, Value};

use super::dispatch::CheckResourceMsg;
use super::graph::{node_label, Node};
use super::traversal::graph_key;
use super::Engine;
use crate::definition::{LiveContext, ResourceFacts, StackDefinition};
use crate::resources::{
    ActionContext, Properties, ResourceFailure, ResourceState, ResourceType, UpdateDecision,
};
use crate::store::{self, action, status, MergeOutcome, ResourceChange, ResourceRow, StackRow};
use crate::EngineError;

/// Sync-point merges of one report in flight at once (fan-out).
const PROPAGATE_CONCURRENCY: usize = 16;

/// How a node's work ended.
enum Outcome {
    /// Done: report to successors with this data.
    Done(Box<ResourceRow>, Value),
    /// A replacement row took over; it is checked in the same traversal.
    Replaced(i64),
    /// Another live engine holds the lock: it will retrigger.
    Locked,
    /// The action failed; the stack fails with this reason.
    Failed(String),
    /// Cancelled or superseded: continue in the latest traversal.
    Retrigger,
}

/// The plugin action a node runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Create,
    Update,
    Delete,
}

impl Act {
    fn name(self) -> &'static str {
        match self {
            Act::Create => action::CREATE,
            Act::Update => action::UPDATE,
            Act::Delete => action::DELETE,
        }
    }
}

fn failure_reason(name: &str, failure: &ResourceFailure, act: Act) -> String {
    match failure {
        ResourceFailure::Error { type_name, message } => {
            format!("{type_name}: resources.{name}: {message}")
        }
        ResourceFailure::Cancelled => format!("{} aborted (user triggered cancel)", act.name()),
    }
}

impl Engine {
    /// The worker entry point: never fails; errors are logged (the
    /// watchdog re-triggers a traversal that stopped on them).
    pub async fn check_resource(self: &Arc<Self>, msg: CheckResourceMsg) {
        if let Err(e) = self.check_resource_inner(&msg).await {
            tracing::warn!(error = %e, stack_id = msg.stack_id, resource_id = msg.resource_id, "check_resource failed");
            // A lock left behind by this engine would look alive forever;
            // freeing it lets the watchdog re-trigger the stack.
            let _ = store::resources::release_lock(
                &self.db,
                msg.resource_id,
                &self.engine_id,
                ResourceChange::default(),
            )
            .await;
        }
    }

    async fn check_resource_inner(
        self: &Arc<Self>,
        msg: &CheckResourceMsg,
    ) -> Result<(), EngineError> {
        let Some(stack) = store::stacks::get(&self.db, &msg.stack_id).await? else {
            return Ok(());
        };
        if stack.current_traversal != msg.traversal_id || stack.deleted_at.is_some() {
            return Ok(());
        }
        if self.timed_out(&stack) {
            self.mark_failed(&stack.id, &msg.traversal_id, "Timed out")
                .await?;
            return Ok(());
        }
        let Some(row) = store::resources::get(&self.db, msg.resource_id).await? else {
            return Ok(());
        };
        let outcome = if msg.is_update {
            self.check_update(&stack, row.clone(), msg).await?
        } else {
            self.check_cleanup(&stack, row.clone()).await?
        };
        match outcome {
            Outcome::Done(row, data) => self.propagate(&stack, &row, msg.is_update, data).await,
            Outcome::Replaced(new_id) => {
                let next = CheckResourceMsg {
                    resource_id: new_id,
                    ..msg.clone()
                };
                self.dispatcher.dispatch(self, next).await;
                Ok(())
            }
            Outcome::Locked => Ok(()),
            Outcome::Failed(reason) => {
                if !self
                    .mark_failed(&stack.id, &msg.traversal_id, &reason)
                    .await?
                {
                    self.retrigger(&stack.id, row.id, msg.is_update).await?;
                }
                Ok(())
            }
            Outcome::Retrigger => self.retrigger(&stack.id, row.id, msg.is_update).await,
        }
    }

    fn timed_out(&self, stack: &StackRow) -> bool {
        let (Some(mins), Some(started)) =
            (stack.timeout_mins, stack.updated_at.or(stack.created_at))
        else {
            return false;
        };
        let elapsed = keelson_common::db::now() - started;
        mins > 0 && elapsed.num_seconds() > mins * 60
    }

    /// Takes the row's lock, stealing it from a dead engine. None: a live
    /// engine holds it. Some(row as locked by us, its atomic_key).
    async fn lock(self: &Arc<Self>, row: ResourceRow) -> Result<Option<ResourceRow>, EngineError> {
        let mut row = row;
        for _ in 0..3 {
            if let Some(holder) = row.engine_id.clone() {
                if holder == self.engine_id || self.dispatcher.is_alive(self, &holder).await {
                    return Ok(None);
                }
                let act = if row.action == action::INIT {
                    action::CREATE
                } else {
                    row.action.as_str()
                };
                let reason = format!("Worker went down during resource {act}");
                let act = act.to_string();
                if store::resources::steal_lock(
                    &self.db,
                    row.id,
                    &holder,
                    ResourceChange::state(&act, status::FAILED, reason.clone()),
                )
                .await?
                {
                    if let Some(stolen) = store::resources::get(&self.db, row.id).await? {
                        self.resource_event(&stolen, &act, status::FAILED, &reason, None)
                            .await;
                    }
                }
            } else if store::resources::acquire_lock(
                &self.db,
                row.id,
                &self.engine_id,
                row.atomic_key,
            )
            .await?
            {
                row.engine_id = Some(self.engine_id.clone());
                row.atomic_key += 1;
                return Ok(Some(row));
            }
            match store::resources::get(&self.db, row.id).await? {
                Some(r) => row = r,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Writes `change` on a row we hold, keeping the lock.
    async fn write_locked(
        &self,
        row: &mut ResourceRow,
        change: ResourceChange,
    ) -> Result<(), EngineError> {
        if !store::resources::update_cas(
            &self.db,
            row.id,
            Some(&self.engine_id),
            row.atomic_key,
            change,
        )
        .await?
        {
            return Err(EngineError::internal(format!(
                "lost the lock of resource {}",
                row.id
            )));
        }
        if let Some(r) = store::resources::get(&self.db, row.id).await? {
            *row = r;
        }
        Ok(())
    }

    /// ACTION_IN_PROGRESS "state changed" on a row we hold, and its event.
    async fn begin(
        &self,
        row: &mut ResourceRow,
        act: &str,
        properties: Option<Value>,
    ) -> Result<(), EngineError> {
        let reason = "state changed";
        self.write_locked(row, ResourceChange::state(act, status::IN_PROGRESS, reason))
            .await?;
        self.resource_event(row, act, status::IN_PROGRESS, reason, properties)
            .await;
        Ok(())
    }

    async fn state_of(&self, row: &ResourceRow) -> Result<ResourceState, EngineError> {
        crate::definition::resource_state(&self.db, row).await
    }

    async fn facts_of(
        &self,
        plugin: &dyn ResourceType,
        row: &ResourceRow,
        state: &ResourceState,
    ) -> ResourceFacts {
        crate::definition::resource_facts(plugin, &row.name, state).await
    }

    /// Facts of the resources `name` requires: from the predecessors'
    /// inputs, else from their stored rows (retriggers carry no input).
    async fn gather_facts(
        &self,
        stack: &StackRow,
        def: &StackDefinition,
        name: &str,
        input: &Map<String, Value>,
    ) -> Result<BTreeMap<String, ResourceFacts>, EngineError> {
        let mut facts = BTreeMap::new();
        for v in input.values() {
            if let Some(n) = v.get("name").and_then(Value::as_str) {
                let attributes = v
                    .get("attrs")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                facts.insert(
                    n.to_string(),
                    ResourceFacts {
                        reference_id: v.get("reference_id").cloned().unwrap_or(Value::Null),
                        attributes,
                    },
                );
            }
        }
        let missing: Vec<String> = def
            .requires(name)
            .into_iter()
            .filter(|r| !facts.contains_key(r))
            .collect();
        if missing.is_empty() {
            return Ok(facts);
        }
        let rows = store::resources::list(&self.db, &stack.id).await?;
        for req in missing {
            let best = rows
                .iter()
                .filter(|r| r.name == req && r.action != action::INIT && r.action != action::DELETE)
                .max_by_key(|r| {
                    (
                        r.current_template_id == Some(stack.raw_template_id),
                        r.replaced_by.is_none(),
                        r.id,
                    )
                });
            let Some(row) = best else { continue };
            let Some((_, plugin)) = self.plugin_of_row(stack, row).await else {
                continue;
            };
            let state = self.state_of(row).await?;
            let mut f = self.facts_of(plugin.as_ref(), row, &state).await;
            if let Some(Value::Object(cached)) = &row.attr_data {
                for (k, v) in cached {
                    f.attributes.insert(k.clone(), v.clone());
                }
            }
            facts.insert(req, f);
        }
        Ok(facts)
    }

    async fn check_update(
        self: &Arc<Self>,
        stack: &StackRow,
        row: ResourceRow,
        msg: &CheckResourceMsg,
    ) -> Result<Outcome, EngineError> {
        let Some(mut row) = self.lock(row).await? else {
            return Ok(Outcome::Locked);
        };
        let def = self
            .definitions
            .get(
                &self.db,
                stack,
                stack.raw_template_id,
                &self.settings.region_name,
            )
            .await?;
        let Some(defn) = def.resource(&row.name) else {
            self.unlock(&row, ResourceChange::default()).await?;
            return Ok(Outcome::Done(Box::new(row), Value::Null));
        };
        let graph = self.graph_of(stack);
        let key = graph_key(&graph, &row, true);
        let requires: Vec<i64> = graph
            .predecessors(key)
            .into_iter()
            .filter(|n| n.1)
            .map(|n| n.0)
            .collect();
        let type_name = match def.effective_type(defn) {
            Ok(t) => t,
            Err(e) => {
                return self
                    .fail_before_action(
                        &mut row,
                        Act::Create,
                        &format!("{}: {}", e.type_name, e.message),
                    )
                    .await
            }
        };
        let Some(plugin) = self.registry.get(&type_name) else {
            let reason = format!("The Resource Type ({type_name}) could not be found.");
            return self
                .fail_before_action(&mut row, Act::Create, &reason)
                .await;
        };
        let facts = self
            .gather_facts(stack, &def, &row.name, &msg.input)
            .await?;
        let ctx = LiveContext::new(&def, facts);
        let props = defn
            .properties
            .resolve(&ctx)
            .map_err(EngineError::from)
            .and_then(|given| plugin.validate_properties(&row.name, &given));
        let act = if row.action == action::INIT {
            Act::Create
        } else {
            Act::Update
        };
        let props = match props {
            Ok(p) => p,
            Err(e) => {
                let reason = format!("{}: resources.{}: {}", e.type_name, row.name, e.message);
                return self.fail_before_action(&mut row, act, &reason).await;
            }
        };
        let written = Some(defn.type_name.clone());
        if row.action == action::INIT {
            if stack.action == action::ADOPT {
                return self
                    .run_adopt(stack, row, plugin, props, requires, defn.type_name.clone())
                    .await;
            }
            return self
                .run_action(
                    stack,
                    row,
                    plugin,
                    Act::Create,
                    props,
                    requires,
                    None,
                    written,
                )
                .await;
        }
        // The environment's restricted_actions for this resource (upstream
        // resource.update_convergence / _check_restricted_actions).
        let restricted = def.restricted_actions(&row.name);
        // A resource whose plugin changes is replaced (upstream compares
        // the classes the old and new environments map the types to).
        let retyped = match self.plugin_of_row(stack, &row).await {
            Some((old_type, _)) => old_type != type_name,
            None => true,
        };
        if retyped && restricted.contains("replace") {
            return self.restricted_failure(&row, "replace").await;
        }
        // A failed, half-created, deleted or retyped resource is replaced
        // without UPDATE events (upstream needs_replace_failed).
        let broken = row.status == status::FAILED
            || row.status == status::IN_PROGRESS
            || row.action == action::DELETE
            || retyped;
        let old_props = match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let decision = if broken {
            UpdateDecision::Replace
        } else {
            plugin.update_decision(&old_props, &props)
        };
        match decision {
            UpdateDecision::InPlace if restricted.contains("update") => {
                return self.restricted_failure(&row, "update").await;
            }
            UpdateDecision::Replace if restricted.contains("replace") => {
                return self.restricted_failure(&row, "replace").await;
            }
            _ => {}
        }
        match decision {
            UpdateDecision::Unchanged => {
                let change = ResourceChange {
                    resource_type: written,
                    current_template_id: Some(Some(stack.raw_template_id)),
                    requires: Some(requires),
                    replaced_by: Some(None),
                    ..Default::default()
                };
                let row = self.unlock(&row, change).await?;
                let state = self.state_of(&row).await?;
                let facts = self.facts_of(plugin.as_ref(), &row, &state).await;
                Ok(Outcome::Done(
                    Box::new(row.clone()),
                    node_data(&row, &facts),
                ))
            }
            UpdateDecision::InPlace => {
                self.run_action(
                    stack,
                    row,
                    plugin,
                    Act::Update,
                    props,
                    requires,
                    Some(old_props),
                    written,
                )
                .await
            }
            UpdateDecision::Replace => {
                if !broken {
                    self.begin(&mut row, action::UPDATE, None).await?;
                    let reason = format!("The Resource {} requires replacement.", row.name);
                    row = self
                        .unlock(
                            &row,
                            ResourceChange::state(action::UPDATE, status::COMPLETE, reason.clone()),
                        )
                        .await?;
                    self.resource_event(&row, action::UPDATE, status::COMPLETE, &reason, None)
                        .await;
                } else {
                    row = self.unlock(&row, ResourceChange::default()).await?;
                }
                match store::resources::make_replacement(
                    &self.db,
                    &row,
                    &defn.type_name,
                    stack.raw_template_id,
                    &requires,
                )
                .await?
                {
                    Some(new) => Ok(Outcome::Replaced(new.id)),
                    None => Ok(Outcome::Locked),
                }
            }
        }
    }

    /// Releases our lock with `change`; answers the row after it.
    async fn unlock(
        &self,
        row: &ResourceRow,
        change: ResourceChange,
    ) -> Result<ResourceRow, EngineError> {
        store::resources::release_lock(&self.db, row.id, &self.engine_id, change).await?;
        Ok(store::resources::get(&self.db, row.id)
            .await?
            .unwrap_or_else(|| row.clone()))
    }

    /// The plugin a stored resource runs as: its written type mapped by
    /// the environment of the template it was last acted on with (upstream
    /// `Resource.load`), else by the stack's current one.
    pub(super) async fn plugin_of_row(
        &self,
        stack: &StackRow,
        row: &ResourceRow,
    ) -> Option<(String, Arc<dyn ResourceType>)> {
        let region = &self.settings.region_name;
        let mut type_name = row.resource_type.clone();
        for template_id in row
            .current_template_id
            .into_iter()
            .chain([stack.raw_template_id])
        {
            if let Ok(def) = self
                .definitions
                .get(&self.db, stack, template_id, region)
                .await
            {
                type_name = def.plugin_type_of(&row.name, &row.resource_type);
                break;
            }
        }
        let plugin = self.registry.get(&type_name)?;
        Some((type_name, plugin))
    }

    /// An update the environment restricts: an UPDATE_FAILED event only
    /// (the resource keeps its state), and the stack fails (upstream
    /// ResourceActionRestricted).
    async fn restricted_failure(
        &self,
        row: &ResourceRow,
        what: &str,
    ) -> Result<Outcome, EngineError> {
        let message = format!("{what} is restricted for resource.");
        let row = self.unlock(row, ResourceChange::default()).await?;
        self.resource_event(&row, action::UPDATE, status::FAILED, &message, None)
            .await;
        Ok(Outcome::Failed(format!(
            "Resource UPDATE failed: ResourceActionRestricted: resources.{}: {message}",
            row.name
        )))
    }

    /// Adopts an existing physical resource (stack ADOPT): the row holds
    /// what the adopt data gave for it (physical id, data, metadata); no
    /// plugin action runs (upstream `Resource.adopt` / `handle_adopt`).
    async fn run_adopt(
        &self,
        stack: &StackRow,
        mut row: ResourceRow,
        plugin: Arc<dyn ResourceType>,
        props: Properties,
        requires: Vec<i64>,
        written_type: String,
    ) -> Result<Outcome, EngineError> {
        let props_json = Value::Object(props.clone());
        self.begin(&mut row, action::ADOPT, Some(props_json.clone()))
            .await?;
        if row
            .physical_resource_id
            .as_deref()
            .is_none_or(str::is_empty)
        {
            let reason = format!(
                "Exception: resources.{}: Resource ID was not provided.",
                row.name
            );
            let row = self
                .unlock(
                    &row,
                    ResourceChange::state(action::ADOPT, status::FAILED, reason.clone()),
                )
                .await?;
            self.resource_event(&row, action::ADOPT, status::FAILED, &reason, None)
                .await;
            return Ok(Outcome::Failed(format!("Resource ADOPT failed: {reason}")));
        }
        let mut state = self.state_of(&row).await?;
        state.properties = props;
        let facts = self.facts_of(plugin.as_ref(), &row, &state).await;
        let change = ResourceChange {
            resource_type: Some(written_type),
            ..Default::default()
        };
        self.complete(
            stack,
            &row,
            action::ADOPT,
            change,
            props_json,
            facts,
            requires,
        )
        .await
    }

    /// ACTION_COMPLETE "state changed" with what the action produced
    /// (`change` adds to it), the lock released, the event; the node's
    /// data for its successors.
    #[allow(clippy::too_many_arguments)]
    async fn complete(
        &self,
        stack: &StackRow,
        row: &ResourceRow,
        act: &str,
        change: ResourceChange,
        props_json: Value,
        facts: ResourceFacts,
        requires: Vec<i64>,
    ) -> Result<Outcome, EngineError> {
        let change = ResourceChange {
            properties_data: Some(Some(props_json.clone())),
            attr_data: Some(Some(Value::Object(facts.attributes.clone()))),
            current_template_id: Some(Some(stack.raw_template_id)),
            requires: Some(requires),
            replaced_by: Some(None),
            ..ResourceChange {
                action: Some(act.to_string()),
                status: Some(status::COMPLETE.to_string()),
                status_reason: Some("state changed".to_string()),
                ..change
            }
        };
        let row = self.unlock(row, change).await?;
        self.resource_event(
            &row,
            act,
            status::COMPLETE,
            "state changed",
            Some(props_json),
        )
        .await;
        Ok(Outcome::Done(
            Box::new(row.clone()),
            node_data(&row, &facts),
        ))
    }

    async fn fail_before_action(
        &self,
        row: &mut ResourceRow,
        act: Act,
        reason: &str,
    ) -> Result<Outcome, EngineError> {
        let failed = self
            .unlock(
                row,
                ResourceChange::state(act.name(), status::FAILED, reason),
            )
            .await?;
        self.resource_event(&failed, act.name(), status::FAILED, reason, None)
            .await;
        Ok(Outcome::Failed(format!(
            "Resource {} failed: {reason}",
            act.name()
        )))
    }

    /// Runs create/update/delete of a locked row through its plugin.
    #[allow(clippy::too_many_arguments)]
    async fn run_action(
        &self,
        stack: &StackRow,
        mut row: ResourceRow,
        plugin: Arc<dyn ResourceType>,
        act: Act,
        props: Properties,
        requires: Vec<i64>,
        old_props: Option<Properties>,
        written_type: Option<String>,
    ) -> Result<Outcome, EngineError> {
        let props_json = Value::Object(props.clone());
        self.begin(&mut row, act.name(), Some(props_json.clone()))
            .await?;
        let state = self.state_of(&row).await?;
        let mut ctx = ActionContext {
            stack_id: stack.id.clone(),
            stack_name: stack.name.clone(),
            resource_name: row.name.clone(),
            properties: props.clone(),
            state,
            cancel: self.cancel_receiver(&stack.id),
        };
        let result = match act {
            Act::Create => plugin.create(&mut ctx).await,
            Act::Update => {
                let old = old_props.unwrap_or_default();
                plugin.update(&mut ctx, &old).await
            }
            Act::Delete => plugin.delete(&mut ctx).await,
        };
        for (k, v) in &ctx.state.data {
            store::resources::data_set(&self.db, row.id, k, v, false).await?;
        }
        let physical = Some(ctx.state.physical_id.clone());
        match result {
            Ok(()) => {
                ctx.state.properties = props.clone();
                let mut attr_row = row.clone();
                attr_row.physical_resource_id = ctx.state.physical_id.clone();
                let facts = self.facts_of(plugin.as_ref(), &attr_row, &ctx.state).await;
                let change = ResourceChange {
                    resource_type: written_type,
                    physical_resource_id: physical,
                    ..Default::default()
                };
                self.complete(stack, &row, act.name(), change, props_json, facts, requires)
                    .await
            }
            Err(failure) => {
                let reason = failure_reason(&row.name, &failure, act);
                let change = ResourceChange {
                    physical_resource_id: physical,
                    ..ResourceChange::state(act.name(), status::FAILED, reason.clone())
                };
                let row = self.unlock(&row, change).await?;
                self.resource_event(&row, act.name(), status::FAILED, &reason, None)
                    .await;
                match failure {
                    ResourceFailure::Cancelled => Ok(Outcome::Retrigger),
                    ResourceFailure::Error { .. } => Ok(Outcome::Failed(format!(
                        "Resource {} failed: {reason}",
                        act.name()
                    ))),
                }
            }
        }
    }

    /// Cleanup node: a row not of the current template is deleted (INIT
    /// rows just removed); current rows pass.
    async fn check_cleanup(
        self: &Arc<Self>,
        stack: &StackRow,
        row: ResourceRow,
    ) -> Result<Outcome, EngineError> {
        if row.current_template_id == Some(stack.raw_template_id) && row.replaced_by.is_none() {
            return Ok(Outcome::Done(Box::new(row), Value::Null));
        }
        let Some(row) = self.lock(row).await? else {
            return Ok(Outcome::Locked);
        };
        if row.action == action::INIT {
            store::resources::release_lock(
                &self.db,
                row.id,
                &self.engine_id,
                ResourceChange::default(),
            )
            .await?;
            store::resources::delete(&self.db, row.id).await?;
            return Ok(Outcome::Done(Box::new(row), Value::Null));
        }
        let Some((_, plugin)) = self.plugin_of_row(stack, &row).await else {
            store::resources::delete(&self.db, row.id).await?;
            return Ok(Outcome::Done(Box::new(row), Value::Null));
        };
        let props = match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        match self
            .run_action(
                stack,
                row.clone(),
                plugin,
                Act::Delete,
                props,
                row.requires.clone(),
                None,
                None,
            )
            .await?
        {
            Outcome::Done(done, _) => {
                store::resources::delete(&self.db, done.id).await?;
                Ok(Outcome::Done(done, Value::Null))
            }
            other => Ok(other),
        }
    }

    /// Reports a finished node to its successors (and the stack's sync
    /// point for roots); the one merge that completes a successor fires it.
    async fn propagate(
        self: &Arc<Self>,
        stack: &StackRow,
        row: &ResourceRow,
        is_update: bool,
        data: Value,
    ) -> Result<(), EngineError> {
        let graph = self.graph_of(stack);
        let key: Node = graph_key(&graph, row, is_update);
        let label = node_label(key);
        let traversal = &stack.current_traversal;
        let successors = graph.successors(key);
        if successors.is_empty() {
            return match store::sync_points::merge(
                &self.db,
                &stack.id,
                traversal,
                true,
                &label,
                &Value::Null,
            )
            .await?
            {
                MergeOutcome::Ready(_) => self.mark_complete(&stack.id, traversal).await,
                MergeOutcome::Waiting => Ok(()),
                MergeOutcome::Gone => self.retrigger(&stack.id, row.id, is_update).await,
            };
        }
        // Cleanup successors first, update successors last (upstream).
        // Each successor's sync point is its own row, so the merges (and
        // the dispatch of the ones this report completes) of one group run
        // concurrently: a fan-out of N does not wait N commits in series.
        let mut ordered = successors;
        ordered.sort_by_key(|n| (n.1, n.0));
        let (cleanups, updates): (Vec<Node>, Vec<Node>) = ordered.into_iter().partition(|n| !n.1);
        let mut gone = false;
        for group in [cleanups, updates] {
            let outcomes: Vec<Result<bool, EngineError>> = stream::iter(group)
                .map(|next| {
                    let input = if next.1 {
                        data.clone()
                    } else {
                        json!({ "replacement": row.id })
                    };
                    let label = &label;
                    async move {
                        match store::sync_points::merge(
                            &self.db,
                            &next.0.to_string(),
                            traversal,
                            next.1,
                            label,
                            &input,
                        )
                        .await?
                        {
                            MergeOutcome::Ready(inputs) => {
                                let msg = CheckResourceMsg {
                                    stack_id: stack.id.clone(),
                                    resource_id: next.0,
                                    traversal_id: traversal.clone(),
                                    is_update: next.1,
                                    input: inputs,
                                };
                                self.dispatcher.dispatch(self, msg).await;
                                Ok(false)
                            }
                            MergeOutcome::Waiting => Ok(false),
                            MergeOutcome::Gone => Ok(true),
                        }
                    }
                })
                .buffered(PROPAGATE_CONCURRENCY)
                .collect()
                .await;
            for o in outcomes {
                gone |= o?;
            }
            if gone {
                return self.retrigger(&stack.id, row.id, is_update).await;
            }
        }
        Ok(())
    }

    /// The traversal moved on while this node worked: check the resource
    /// again in the latest traversal if that traversal already waits for
    /// it (its own attempt found the lock held and dropped out).
    pub(super) async fn retrigger(
        self: &Arc<Self>,
        stack_id: &str,
        resource_id: i64,
        is_update: bool,
    ) -> Result<(), EngineError> {
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Ok(());
        };
        if stack.current_traversal.is_empty() || stack.deleted_at.is_some() {
            return Ok(());
        }
        let graph = self.graph_of(&stack);
        let row = store::resources::get(&self.db, resource_id).await?;
        let mut key = (resource_id, is_update);
        if !graph.contains(key) {
            key = (resource_id, !is_update);
        }
        if !graph.contains(key) {
            match row.and_then(|r| r.replaces) {
                Some(old) if graph.contains((old, true)) => key = (old, true),
                _ => return Ok(()),
            }
        }
        let ready = match store::sync_points::get(
            &self.db,
            &key.0.to_string(),
            &stack.current_traversal,
            key.1,
        )
        .await?
        {
            Some(sp) => sp.satisfied >= sp.required,
            None => false,
        };
        if ready {
            let msg = CheckResourceMsg {
                stack_id: stack.id.clone(),
                resource_id,
                traversal_id: stack.current_traversal.clone(),
                is_update: key.1,
                input: Map::new(),
            };
            self.dispatcher.dispatch(self, msg).await;
        }
        Ok(())
    }
}

/// What an update node sends to the nodes that need it.
fn node_data(row: &ResourceRow, facts: &ResourceFacts) -> Value {
    json!({
        "id": row.id,
        "name": row.name,
        "uuid": row.uuid,
        "reference_id": facts.reference_id,
        "attrs": facts.attributes,
        "action": row.action,
        "status": row.status,
    })
}
