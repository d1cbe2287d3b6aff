//! Running a node's action: the plugin's create/update/delete (or an
//! adopt) under the lock its IN_PROGRESS write takes, and the node's
//! completion or failure written from what it produced.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::Engine;
use super::lock::EventSpec;
use super::report::{node_data, LastWrite};
use super::Outcome;
use crate::definition::{resource_facts, LiveContext, ResourceFacts};
use crate::error::EngineError;
use crate::resources::{ActionContext, Properties, ResourceFailure, ResourceState, ResourceType};
use crate::store::resources::ResourceDataEntry;
use crate::store::{self, Action, ResourceChange, ResourceRow, StackRow, Status};

/// The plugin action a node runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Act {
    Create,
    Update,
    Delete,
    /// Stack ADOPT of a resource that runs a nested stack: its plugin
    /// creates the child, which adopts the nested resources.
    AdoptNested,
}

impl Act {
    /// The action the resource's row and events show.
    pub(super) fn action(self) -> Action {
        match self {
            Act::Create => Action::Create,
            Act::Update => Action::Update,
            Act::Delete => Action::Delete,
            Act::AdoptNested => Action::Adopt,
        }
    }
}

fn failure_reason(name: &str, failure: &ResourceFailure, act: Act) -> String {
    match failure.exception() {
        // A nested stack's failure already names its resource path:
        // upstream joins the paths (`resources.parent.resources.child`).
        Some((type_name, message)) if message.starts_with("resources.") => {
            format!("{type_name}: resources.{name}.{message}")
        }
        Some((type_name, message)) => format!("{type_name}: resources.{name}: {message}"),
        None => format!("{} aborted (user triggered cancel)", act.action()),
    }
}

/// The resource's `update_policy`, resolved, for the plugins that act on
/// it (groups batch by it).
pub(super) fn update_policy_of(
    plugin: &dyn ResourceType,
    defn: &keelson_hot::ResourceDefn,
    ctx: &LiveContext,
) -> Result<Option<Value>, EngineError> {
    match &defn.update_policy {
        Some(policy) if plugin.takes_update_policy() => Ok(Some(policy.resolve(ctx)?).filter(|p| !p.is_null())),
        _ => Ok(None),
    }
}

/// What a plugin sees of a row, from the data read with it.
pub(super) fn state_from(row: &ResourceRow, data: &BTreeMap<String, ResourceDataEntry>) -> ResourceState {
    ResourceState {
        physical_id: row.physical_resource_id.clone(),
        data: data.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect(),
        properties: match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        },
        metadata: row.rsrc_metadata.clone().unwrap_or(Value::Null),
    }
}

/// The data entries an action set that are not stored as they are now
/// (entries are written unredacted, as the action left them).
fn data_changes(
    before: &BTreeMap<String, ResourceDataEntry>,
    after: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    after
        .iter()
        .filter(|(k, v)| before.get(*k).is_none_or(|e| e.value != **v || e.redact))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One plugin action, as the decision made it: the row (unlocked as
/// read; the action's IN_PROGRESS write takes the lock), the plugin, its
/// inputs, and what completion writes.
pub(super) struct ActionPlan {
    pub(super) act: Act,
    pub(super) row: ResourceRow,
    pub(super) plugin: Arc<dyn ResourceType>,
    pub(super) props: Properties,
    /// The resolved `update_policy` (for the plugins that take one).
    pub(super) update_policy: Option<Value>,
    /// The ids of the update nodes this one requires (stored on the row).
    pub(super) requires: Vec<i64>,
    /// The properties an update starts from.
    pub(super) old_props: Option<Properties>,
    /// The type written on completion (None: the stored one stays).
    pub(super) written_type: Option<String>,
}

/// What a completed action writes.
struct Completion {
    act: Action,
    /// What the action produced; completion adds the state, properties,
    /// attributes and template to it.
    change: ResourceChange,
    /// Data entries the action set or changed.
    data: Vec<(String, String)>,
    props_json: Value,
    facts: ResourceFacts,
    requires: Vec<i64>,
}

/// An update node that found nothing to do: the row moves to the new
/// template (lock released, no event) and reports its current facts.
pub(super) async fn unchanged(
    stack: &StackRow,
    data: &BTreeMap<String, ResourceDataEntry>,
    plan: ActionPlan,
) -> Outcome {
    let change = ResourceChange {
        resource_type: plan.written_type,
        current_template_id: Some(Some(stack.raw_template_id)),
        requires: Some(plan.requires),
        replaced_by: Some(None),
        ..Default::default()
    };
    let (last, after) = LastWrite::update(&plan.row, change, Vec::new(), None);
    let state = state_from(&after, data);
    let facts = resource_facts(plan.plugin.as_ref(), &after.name, &state).await;
    let data = node_data(&after, &facts);
    Outcome::Done(Box::new(after), data, Some(Box::new(last)))
}

/// ACTION_COMPLETE "state changed" with what the action produced
/// (`change` adds to it), the lock released, the event: the node's
/// last write, and its data for its successors.
fn complete(stack: &StackRow, row: &ResourceRow, done: Completion) -> Outcome {
    let Completion { act, change, data, props_json, facts, requires } = done;
    let change = ResourceChange {
        properties_data: Some(Some(props_json.clone())),
        attr_data: Some(Some(Value::Object(facts.attributes.clone()))),
        current_template_id: Some(Some(stack.raw_template_id)),
        requires: Some(requires),
        replaced_by: Some(None),
        ..ResourceChange {
            action: Some(act),
            status: Some(Status::Complete),
            status_reason: Some("state changed".to_string()),
            ..change
        }
    };
    let (last, after) = LastWrite::update(
        row,
        change,
        data,
        Some(EventSpec::new(act, Status::Complete, "state changed", Some(props_json))),
    );
    let node = node_data(&after, &facts);
    Outcome::Done(Box::new(after), node, Some(Box::new(last)))
}

impl Engine {
    /// Upstream `_prepare_update_replace`: the old resource's
    /// `prepare_for_replace` before its replacement exists (a key pair
    /// frees its name). A failure fails the update (the row UPDATE_FAILED);
    /// Some(outcome) then.
    pub(super) async fn prepare_replacement(
        &self,
        stack: &StackRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        plan: &mut ActionPlan,
        old_props: &Properties,
    ) -> Result<Option<Outcome>, EngineError> {
        let mut ctx = self.old_context(stack, data, &plan.row, old_props);
        let result = plan.plugin.prepare_for_replace(&mut ctx).await;
        // Kept whatever the outcome: a rollback's restore reads them (a
        // port's freed fixed IPs).
        self.keep_data(plan.row.id, data, &ctx).await?;
        let Err(failure) = result else { return Ok(None) };
        self.fail_update(&mut plan.row, &failure).await.map(Some)
    }

    /// Upstream `update_convergence` in a rollback: the old resource a
    /// rollback brings back in place of its replacement first undoes what
    /// it gave up for it (`restore_prev_rsrc`). A failure fails the update
    /// (Some(outcome)).
    pub(super) async fn restore_replaced(
        &self,
        stack: &StackRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        row: &mut ResourceRow,
        plugin: &dyn ResourceType,
        old_props: &Properties,
    ) -> Result<Option<Outcome>, EngineError> {
        let Some(replacement_id) = row.replaced_by else { return Ok(None) };
        if stack.action != Action::Rollback {
            return Ok(None);
        }
        let replacement = store::resources::get(&self.db, replacement_id).await?.and_then(|r| r.physical_resource_id);
        let mut ctx = self.old_context(stack, data, row, old_props);
        let result = plugin.restore_prev_rsrc(&mut ctx, replacement.as_deref()).await;
        self.keep_data(row.id, data, &ctx).await?;
        let Err(failure) = result else { return Ok(None) };
        self.fail_update(row, &failure).await.map(Some)
    }

    /// Stores the data entries a hook set on the row (upstream `data_set`
    /// writes at once).
    async fn keep_data(
        &self,
        resource_id: i64,
        before: &BTreeMap<String, ResourceDataEntry>,
        ctx: &ActionContext,
    ) -> Result<(), EngineError> {
        for (key, value) in &ctx.state.data {
            let stored = before.get(key);
            if stored.is_none_or(|e| e.value != *value) {
                let redact = stored.is_some_and(|e| e.redact);
                store::resources::data_set(&self.db, resource_id, key, value, redact).await?;
            }
        }
        Ok(())
    }

    /// Upstream `needs_replace_failed` of a FAILED row (CHECK_FAILED is
    /// always replaced); its failure fails the update (the outcome). Asked
    /// only of a row with stored properties to compare with (this engine
    /// stores none for a failed create: such a row is replaced).
    pub(super) async fn replaces_failed(
        &self,
        stack: &StackRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        row: &mut ResourceRow,
        plugin: &dyn ResourceType,
        old_props: &Properties,
    ) -> Result<Result<bool, Outcome>, EngineError> {
        if row.status != Status::Failed || row.action == Action::Check || row.properties_data.is_none() {
            return Ok(Ok(true));
        }
        let mut ctx = self.old_context(stack, data, row, old_props);
        match plugin.needs_replace_failed(&mut ctx).await {
            Ok(replace) => Ok(Ok(replace)),
            Err(failure) => self.fail_update(row, &failure).await.map(Err),
        }
    }

    /// The context a hook on the row as it stands acts in.
    fn old_context(
        &self,
        stack: &StackRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        row: &ResourceRow,
        old_props: &Properties,
    ) -> ActionContext {
        ActionContext {
            stack_id: stack.id.clone(),
            stack_name: stack.name.clone(),
            resource_name: row.name.clone(),
            resource_id: row.id,
            properties: old_props.clone(),
            state: state_from(row, data),
            cancel: self.cancel_receiver(&stack.id),
            adopt: None,
            update_policy: None,
            timeout_mins: stack.timeout_mins,
            action_retry_limit: self.settings.action_retry_limit,
        }
    }

    /// The row UPDATE_FAILED by a hook's `failure`.
    async fn fail_update(&self, row: &mut ResourceRow, failure: &ResourceFailure) -> Result<Outcome, EngineError> {
        let reason = failure_reason(&row.name, failure, Act::Update);
        let change = ResourceChange::state(Action::Update, Status::Failed, reason.clone());
        let event = EventSpec::new(Action::Update, Status::Failed, &reason, None);
        if !self.write_row(row, change, false, &[], Some(event)).await? {
            return Ok(Outcome::Raced);
        }
        Ok(Outcome::Failed(format!("Resource {} failed: {reason}", Action::Update)))
    }

    /// Runs create/update/delete of a row through its plugin, under the
    /// lock its IN_PROGRESS write takes, with its properties and its
    /// resolved update policy.
    pub(super) async fn run_action(
        &self,
        stack: &StackRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        plan: ActionPlan,
    ) -> Result<Outcome, EngineError> {
        let ActionPlan { act, mut row, plugin, props, update_policy, requires, old_props, written_type } = plan;
        let props_json = Value::Object(props.clone());
        if !self.begin(&mut row, act.action(), Some(props_json.clone())).await? {
            return Ok(Outcome::Raced);
        }
        let mut state = state_from(&row, data);
        let adopt = match act {
            Act::AdoptNested => {
                // The child is a new stack whatever id the adopt data gave.
                state.physical_id = None;
                self.take_nested_adopt_data(&row, &mut state).await?
            }
            _ => None,
        };
        let metadata_before = state.metadata.clone();
        let mut ctx = ActionContext {
            stack_id: stack.id.clone(),
            stack_name: stack.name.clone(),
            resource_name: row.name.clone(),
            resource_id: row.id,
            properties: props.clone(),
            state,
            cancel: self.cancel_receiver(&stack.id),
            adopt,
            update_policy,
            timeout_mins: stack.timeout_mins,
            action_retry_limit: self.settings.action_retry_limit,
        };
        let result = match act {
            Act::Create | Act::AdoptNested => plugin.create(&mut ctx).await,
            Act::Update => {
                let old = old_props.unwrap_or_default();
                plugin.update(&mut ctx, &old).await
            }
            Act::Delete => plugin.delete(&mut ctx).await,
        };
        let changed = data_changes(data, &ctx.state.data);
        let physical = Some(ctx.state.physical_id.clone());
        match result {
            Ok(()) => {
                ctx.state.properties = props.clone();
                let mut attr_row = row.clone();
                attr_row.physical_resource_id = ctx.state.physical_id.clone();
                let facts = resource_facts(plugin.as_ref(), &attr_row.name, &ctx.state).await;
                let change = ResourceChange {
                    resource_type: written_type,
                    physical_resource_id: physical,
                    // Only what the plugin changed (a server's transport
                    // settings): other metadata is written by signals and
                    // deployments under the row's CAS, never overwritten here.
                    rsrc_metadata: (ctx.state.metadata != metadata_before).then(|| Some(ctx.state.metadata.clone())),
                    ..Default::default()
                };
                let done = Completion { act: act.action(), change, data: changed, props_json, facts, requires };
                Ok(complete(stack, &row, done))
            }
            Err(failure) => {
                let reason = failure_reason(&row.name, &failure, act);
                let change = ResourceChange {
                    physical_resource_id: physical,
                    ..ResourceChange::state(act.action(), Status::Failed, reason.clone())
                };
                self.write_row(
                    &mut row,
                    change,
                    false,
                    &changed,
                    Some(EventSpec::new(act.action(), Status::Failed, &reason, None)),
                )
                .await?;
                match failure {
                    ResourceFailure::Cancelled => Ok(Outcome::Retrigger),
                    ResourceFailure::Error { .. } | ResourceFailure::NoActionRequired(_) => {
                        Ok(Outcome::Failed(format!("Resource {} failed: {reason}", act.action())))
                    }
                }
            }
        }
    }

    /// Adopts an existing physical resource (stack ADOPT): the row holds
    /// what the adopt data gave for it (physical id, data, metadata); no
    /// plugin action runs (upstream `Resource.adopt` / `handle_adopt`).
    pub(super) async fn run_adopt(
        &self,
        stack: &StackRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        plan: ActionPlan,
    ) -> Result<Outcome, EngineError> {
        let ActionPlan { mut row, plugin, props, requires, written_type, .. } = plan;
        let props_json = Value::Object(props.clone());
        if !self.begin(&mut row, Action::Adopt, Some(props_json.clone())).await? {
            return Ok(Outcome::Raced);
        }
        if row.physical_resource_id.as_deref().is_none_or(str::is_empty) {
            let reason = format!("Exception: resources.{}: Resource ID was not provided.", row.name);
            self.write_row(
                &mut row,
                ResourceChange::state(Action::Adopt, Status::Failed, reason.clone()),
                false,
                &[],
                Some(EventSpec::new(Action::Adopt, Status::Failed, &reason, None)),
            )
            .await?;
            return Ok(Outcome::Failed(format!("Resource ADOPT failed: {reason}")));
        }
        let mut state = state_from(&row, data);
        state.properties = props;
        let facts = resource_facts(plugin.as_ref(), &row.name, &state).await;
        let change = ResourceChange { resource_type: written_type, ..Default::default() };
        let done = Completion { act: Action::Adopt, change, data: Vec::new(), props_json, facts, requires };
        Ok(complete(stack, &row, done))
    }

    /// A failure found before the action (type, properties): FAILED and
    /// its event, no IN_PROGRESS.
    pub(super) async fn fail_before_action(
        &self,
        row: &mut ResourceRow,
        act: Act,
        reason: &str,
    ) -> Result<Outcome, EngineError> {
        if !self
            .write_row(
                row,
                ResourceChange::state(act.action(), Status::Failed, reason),
                false,
                &[],
                Some(EventSpec::new(act.action(), Status::Failed, reason, None)),
            )
            .await?
        {
            return Ok(Outcome::Raced);
        }
        Ok(Outcome::Failed(format!("Resource {} failed: {reason}", act.action())))
    }

    /// An update the environment restricts: an UPDATE_FAILED event only
    /// (the resource keeps its state), and the stack fails (upstream
    /// ResourceActionRestricted).
    pub(super) async fn restricted_failure(&self, mut row: ResourceRow, what: &str) -> Result<Outcome, EngineError> {
        let message = format!("{what} is restricted for resource.");
        if !self
            .write_row(
                &mut row,
                ResourceChange::default(),
                false,
                &[],
                Some(EventSpec::new(Action::Update, Status::Failed, &message, None)),
            )
            .await?
        {
            return Ok(Outcome::Raced);
        }
        Ok(Outcome::Failed(format!(
            "Resource UPDATE failed: ResourceActionRestricted: resources.{}: {message}",
            row.name
        )))
    }

    /// The adopt data of a nested-stack resource's children, which
    /// `prepare_adoption` kept in the row's data: taken out of the data
    /// (the child stack holds it from now on).
    async fn take_nested_adopt_data(
        &self,
        row: &ResourceRow,
        state: &mut ResourceState,
    ) -> Result<Option<Value>, EngineError> {
        let Some(text) = state.data.remove(super::super::operations::NESTED_ADOPT_KEY) else {
            return Ok(None);
        };
        store::resources::data_delete(&self.db, row.id, super::super::operations::NESTED_ADOPT_KEY).await?;
        Ok(serde_json::from_str(&text).ok())
    }
}
