//! check_resource (upstream check_resource.py / resource.py
//! create_convergence, update_convergence, delete_convergence): one node of
//! a traversal, acted on under the resource's row lock, then propagated to
//! its successors through their sync points.
//!
//! A check talks to the database in few round trips, because on a chain
//! of resources every one of them is on the critical path:
//!
//! 1. one read: the stack (without its graph, which is cached per
//!    traversal), the resource row and the row's data, joined;
//! 2. the first write takes the lock with the compare-and-swap on
//!    (`engine_id` NULL, `atomic_key` as read) and writes the
//!    ACTION_IN_PROGRESS state and its event in the same transaction; a
//!    check that finds the row changed since its read (another engine
//!    acted on it) reads again;
//! 3. the plugin acts;
//! 4. the last write (data, ACTION_COMPLETE, lock released, event, or the
//!    row's removal after a delete) commits in one transaction with the
//!    reports to the successors' sync points, still under the CAS on
//!    (`engine_id`, `atomic_key`): the node completes and reports
//!    atomically, and a check whose lock was stolen reports nothing.
//!
//! No write is read back: the writer knows what it wrote.
//!
//! The steps live apart: `lock` (taking, stealing and holding the row
//! lock), `decide` (what an update node does: pure, from the row, the
//! plugin and the old and new properties), `act` (running one
//! [`act::ActionPlan`] and writing its completion or failure), `report`
//! (the last write with the reports to the sync points, dispatching the
//! successors, retriggering).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::dispatch::CheckResourceMsg;
use super::traversal::graph_key;
use super::Engine;
use crate::definition::{resource_facts, LiveContext, ResourceFacts, StackDefinition};
use crate::error::EngineError;
use crate::resources::ResourceType;
use crate::store::resources::ResourceDataEntry;
use crate::store::{self, Action, ResourceChange, ResourceRow, StackRow, Status};

mod act;
mod decide;
mod lock;
mod report;

use crate::resources::TypeChange;
use act::{update_policy_of, Act, ActionPlan};
use decide::{decide_update, Step, UpdateInputs};
use lock::EventSpec;
use report::{LastKind, LastWrite};

/// Times a check reads the row again after finding it changed between
/// its read and its first write (or after stealing a dead engine's lock).
const LOCK_ATTEMPTS: usize = 3;

/// How many times a check that ended on a write conflict runs again.
const CONFLICT_RERUNS: u32 = 5;

/// How a node's work ended.
enum Outcome {
    /// Done: report to successors with this data; the node's last write
    /// (if any) commits together with the reports.
    /// (Boxed: the other outcomes are small.)
    Done(Box<ResourceRow>, Value, Option<Box<LastWrite>>),
    /// A replacement row took over; it is checked in the same traversal.
    Replaced(i64),
    /// Another live engine holds the lock: it will retrigger.
    Locked,
    /// The action failed; the stack fails with this reason.
    Failed(String),
    /// Cancelled or superseded: continue in the latest traversal.
    Retrigger,
    /// The row changed between this check's read and its first write, or
    /// a dead engine's lock was just stolen: read it again.
    Raced,
}

/// What a check read before acting.
type Seen = store::CheckSnapshot;

/// What an update node acts with (see [`Engine::update_inputs`]).
struct UpdateNodeInputs {
    /// The plugin identity its definition maps to (compared with the
    /// stored row's to tell a retyped resource).
    type_name: String,
    plugin: Arc<dyn ResourceType>,
    props: crate::resources::Properties,
    update_policy: Option<Value>,
    requires: Vec<i64>,
}

fn timed_out(stack: &StackRow) -> bool {
    let (Some(mins), Some(started)) = (stack.timeout_mins, stack.updated_at.or(stack.created_at)) else {
        return false;
    };
    let elapsed = keelson_db::now() - started;
    // A tenant's timeout_mins may be any integer.
    mins > 0 && elapsed.num_seconds() > mins.saturating_mul(60)
}

impl Engine {
    /// The worker entry point: never fails; errors are logged (the
    /// watchdog re-triggers a traversal that stopped on them).
    pub async fn check_resource(self: &Arc<Self>, msg: CheckResourceMsg) {
        let mut conflicts = 0;
        loop {
            let Err(e) = self.check_resource_inner(&msg).await else { return };
            // A lock left behind by this engine would look alive forever;
            // freeing it lets the check run again, here or from the
            // watchdog's re-trigger.
            let _ =
                store::resources::release_lock(&self.db, msg.resource_id, &self.engine_id, ResourceChange::default())
                    .await;
            // Writes that lost to other engines' (on Galera, through other
            // nodes) are not an engine going down: the check runs again
            // (its writes are conditional, so a second run is safe) before
            // the watchdog, which counts each stop as a dead engine and
            // fails the stack at the third, would have to.
            if matches!(e, EngineError::WriteConflict(_)) && conflicts < CONFLICT_RERUNS {
                conflicts += 1;
                tracing::debug!(error = %e, stack_id = msg.stack_id, resource_id = msg.resource_id, conflicts, "check_resource runs again after a write conflict");
                tokio::time::sleep(keelson_db::retry_pause(conflicts)).await;
                continue;
            }
            tracing::warn!(error = %e, stack_id = msg.stack_id, resource_id = msg.resource_id, "check_resource failed");
            return;
        }
    }

    async fn check_resource_inner(self: &Arc<Self>, msg: &CheckResourceMsg) -> Result<(), EngineError> {
        self.cancels.scope_check(&msg.stack_id, self.check_attempts(msg)).await
    }

    async fn check_attempts(self: &Arc<Self>, msg: &CheckResourceMsg) -> Result<(), EngineError> {
        for _ in 0..LOCK_ATTEMPTS {
            // The stack, the row and the row's data, in one statement (the
            // row is not read for a stale traversal).
            let seen: Option<Seen> =
                store::check_snapshot(&self.db, &msg.stack_id, &msg.traversal_id, msg.resource_id).await?;
            let Some(seen) = seen else {
                return Ok(());
            };
            let stack = &seen.stack;
            if stack.current_traversal != msg.traversal_id || stack.deleted_at.is_some() {
                return Ok(());
            }
            if timed_out(stack) {
                self.mark_failed(&stack.id, &msg.traversal_id, "Timed out").await?;
                return Ok(());
            }
            let Some(row) = seen.row.clone() else {
                return Ok(());
            };
            let row_id = row.id;
            let outcome = if msg.is_update {
                self.check_update(stack, row, &seen.data, msg).await?
            } else {
                self.check_cleanup(stack, row, &seen.data).await?
            };
            match outcome {
                Outcome::Raced => continue,
                Outcome::Done(row, data, last) => {
                    if self.propagate(stack, &row, msg.is_update, data, last.map(|l| *l)).await? {
                        return Ok(());
                    }
                    // The row changed before the node's only write: the
                    // check starts over from a fresh read.
                    continue;
                }
                Outcome::Replaced(new_id) => {
                    let next = CheckResourceMsg { resource_id: new_id, ..msg.clone() };
                    self.dispatcher.dispatch(self, next).await;
                    return Ok(());
                }
                Outcome::Locked => return Ok(()),
                Outcome::Failed(reason) => {
                    if !self.mark_failed(&stack.id, &msg.traversal_id, &reason).await? {
                        self.retrigger(&stack.id, row_id, msg.is_update).await?;
                    }
                    return Ok(());
                }
                Outcome::Retrigger => return self.retrigger(&stack.id, row_id, msg.is_update).await,
            }
        }
        // The row kept changing under us: whoever changed it holds or held
        // its lock and retriggers, as when a check finds it locked.
        Ok(())
    }

    /// Facts of the resources `name` requires: from the predecessors'
    /// inputs, else from their stored rows (retriggers carry no input),
    /// reading only the rows of the missing names.
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
                let attributes = v.get("attrs").and_then(Value::as_object).cloned().unwrap_or_default();
                facts.insert(
                    n.to_string(),
                    ResourceFacts { reference_id: v.get("reference_id").cloned().unwrap_or(Value::Null), attributes },
                );
            }
        }
        let missing: Vec<String> =
            def.requires(&self.registry, name).into_iter().filter(|r| !facts.contains_key(r)).collect();
        if missing.is_empty() {
            return Ok(facts);
        }
        let rows = store::resources::list_named(&self.db, &stack.id, &missing).await?;
        for req in missing {
            let best = rows
                .iter()
                .filter(|r| r.name == req && r.action != Action::Init && r.action != Action::Delete)
                .max_by_key(|r| (r.current_template_id == Some(stack.raw_template_id), r.replaced_by.is_none(), r.id));
            let Some(row) = best else { continue };
            let Some((_, plugin)) = self.plugin_of_row(stack, row).await else {
                continue;
            };
            let state = crate::definition::resource_state(&self.db, row).await?;
            let mut f = resource_facts(plugin.as_ref(), &row.name, &state).await;
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
        data: &BTreeMap<String, ResourceDataEntry>,
        msg: &CheckResourceMsg,
    ) -> Result<Outcome, EngineError> {
        let mut row = match self.take_lock(stack, row).await? {
            Ok(row) => row,
            Err(outcome) => return Ok(outcome),
        };
        let def = self.definitions.get(&self.db, stack, stack.raw_template_id, &self.settings.region_name).await?;
        let Some(defn) = def.resource(&row.name) else {
            let (last, after) = LastWrite::update(&row, ResourceChange::default(), Vec::new(), None);
            return Ok(Outcome::Done(Box::new(after), Value::Null, Some(Box::new(last))));
        };
        let inputs = match self.update_inputs(stack, &def, defn, &mut row, &msg.input).await? {
            Ok(inputs) => inputs,
            Err(outcome) => return Ok(outcome),
        };
        let type_change = if row.action == Action::Init {
            TypeChange::Same
        } else {
            let old = self.plugin_of_row(stack, &row).await;
            TypeChange::between(old.as_ref().map(|(identity, p)| (identity.as_str(), p.as_ref())), &inputs.type_name)
        };
        // A substitute takes the resource over: its hooks apply from here.
        let retyped = type_change == TypeChange::Retyped;
        let restricted = def.restricted_actions(&row.name);
        let old_props = match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let replace_failed = if retyped {
            true
        } else {
            match self.replaces_failed(stack, data, &mut row, inputs.plugin.as_ref(), &old_props).await? {
                Ok(replace) => replace,
                Err(outcome) => return Ok(outcome),
            }
        };
        if !retyped {
            if let Some(failed) =
                self.restore_replaced(stack, data, &mut row, inputs.plugin.as_ref(), &old_props).await?
            {
                return Ok(failed);
            }
        }
        let step = decide_update(&UpdateInputs {
            row: &row,
            stack_action: stack.action,
            plugin: inputs.plugin.as_ref(),
            type_change,
            replace_failed,
            restricted: &restricted,
            old_props: &old_props,
            new_props: &inputs.props,
        });
        let plan = ActionPlan {
            act: Act::Create,
            row,
            plugin: inputs.plugin,
            props: inputs.props,
            update_policy: inputs.update_policy,
            requires: inputs.requires,
            old_props: None,
            written_type: Some(defn.type_name.clone()),
        };
        match step {
            Step::Create => self.run_action(stack, data, plan).await,
            Step::AdoptNested => self.run_action(stack, data, ActionPlan { act: Act::AdoptNested, ..plan }).await,
            Step::Adopt => self.run_adopt(stack, data, plan).await,
            Step::Unchanged => Ok(act::unchanged(stack, data, plan).await),
            Step::InPlace => {
                self.run_action(stack, data, ActionPlan { act: Act::Update, old_props: Some(old_props), ..plan }).await
            }
            Step::Replace { announce } => {
                let mut plan = plan;
                // The old type's hook: a retyped resource has none of this plugin's.
                if !retyped {
                    if let Some(failed) = self.prepare_replacement(stack, data, &mut plan, &old_props).await? {
                        return Ok(failed);
                    }
                }
                self.replace(stack, plan.row, &defn.type_name, &plan.requires, announce).await
            }
            Step::Restricted(what) => self.restricted_failure(plan.row, what).await,
        }
    }

    /// What an update node acts with: the plugin of its definition, its
    /// properties and update policy resolved against the facts of the
    /// resources it requires. A row being created gets the template's
    /// metadata. A bad type or bad properties fail the resource before any
    /// action (the `Err` outcome).
    async fn update_inputs(
        &self,
        stack: &StackRow,
        def: &StackDefinition,
        defn: &keelson_hot::ResourceDefn,
        row: &mut ResourceRow,
        input: &Map<String, Value>,
    ) -> Result<Result<UpdateNodeInputs, Outcome>, EngineError> {
        let graph = self.graph_of(stack).await?;
        let key = graph_key(&graph, row, true);
        let requires: Vec<i64> = graph.predecessors(key).into_iter().filter(|n| n.1).map(|n| n.0).collect();
        let (type_name, plugin) = match def.plugin_and_identity(&self.registry, &defn.name, &defn.type_name) {
            Ok(p) => p,
            Err(EngineError::BadRequest(message)) => {
                return Ok(Err(self.fail_before_action(row, Act::Create, &message).await?));
            }
            Err(e) => return Ok(Err(self.fail_before_action(row, Act::Create, &e.to_string()).await?)),
        };
        let facts = self.gather_facts(stack, def, &row.name, input).await?;
        let mut ctx = LiveContext::new(def, facts);
        if def.nested && def.uses_resource_facade {
            ctx = ctx.with_facade(self.resource_facade(stack).await?);
        }
        let resolved = defn.properties.resolve(&ctx).map_err(EngineError::from).and_then(|given| {
            let policy = update_policy_of(plugin.as_ref(), defn, &ctx)?;
            Ok((plugin.validate_properties(&row.name, &given)?, policy))
        });
        let (props, update_policy) = match resolved {
            Ok(resolved) => resolved,
            Err(e) => {
                let act = if row.action == Action::Init { Act::Create } else { Act::Update };
                let reason = format!("{}: resources.{}: {}", e.heat_type(), row.name, e.message());
                return Ok(Err(self.fail_before_action(row, act, &reason).await?));
            }
        };
        // The template's metadata is the new resource's stored metadata
        // (upstream `metadata_get` of an INIT resource), written as the
        // action begins: a nested stack's `resource_facade` reads it while
        // its parent creates it.
        if row.action == Action::Init && row.rsrc_metadata.as_ref().is_none_or(Value::is_null) {
            if let Some(m) = &defn.metadata {
                row.rsrc_metadata = m.resolve(&ctx).ok().filter(|m| !m.is_null());
            }
        }
        Ok(Ok(UpdateNodeInputs { type_name, plugin, props, update_policy, requires }))
    }

    /// Replaces the row with a new one of `type_name`; an intact row first
    /// shows UPDATE_COMPLETE "requires replacement" (`announce`).
    async fn replace(
        &self,
        stack: &StackRow,
        mut row: ResourceRow,
        type_name: &str,
        requires: &[i64],
        announce: bool,
    ) -> Result<Outcome, EngineError> {
        if announce {
            if !self.begin(&mut row, Action::Update, None).await? {
                return Ok(Outcome::Raced);
            }
            let reason = format!("The Resource {} requires replacement.", row.name);
            self.write_row(
                &mut row,
                ResourceChange::state(Action::Update, Status::Complete, reason.clone()),
                false,
                &[],
                Some(EventSpec::new(Action::Update, Status::Complete, &reason, None)),
            )
            .await?;
        }
        // The replacement's mark on the old row is itself the CAS on the
        // row as read (or as this check left it).
        match store::resources::make_replacement(&self.db, &row, type_name, stack.raw_template_id, requires).await? {
            Some(new) => Ok(Outcome::Replaced(new.id)),
            None if announce => Ok(Outcome::Locked),
            None => Ok(Outcome::Raced),
        }
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
        for template_id in row.current_template_id.into_iter().chain([stack.raw_template_id]) {
            if let Ok(def) = self.definitions.get(&self.db, stack, template_id, region).await {
                return def.plugin_and_identity(&self.registry, &row.name, &row.resource_type).ok();
            }
        }
        let plugin = self.registry.get(&row.resource_type)?;
        Some((row.resource_type.clone(), plugin))
    }

    /// What `resource_facade` answers in nested stack `stack`: its parent
    /// resource's stored metadata and its definition's deletion and update
    /// policies (upstream `ResourceFacade`).
    pub(in crate::convergence) async fn resource_facade(
        &self,
        stack: &StackRow,
    ) -> Result<Map<String, Value>, EngineError> {
        let mut facade = Map::new();
        let (Some(owner_id), Some(resource_name)) = (&stack.owner_id, &stack.parent_resource_name) else {
            return Ok(facade);
        };
        let Some(parent) = store::stacks::get(&self.db, owner_id).await? else {
            return Ok(facade);
        };
        let rows = store::resources::list(&self.db, owner_id).await?;
        let live = rows.iter().filter(|r| &r.name == resource_name && r.replaced_by.is_none()).max_by_key(|r| r.id);
        let metadata = live.and_then(|r| r.rsrc_metadata.clone()).filter(|m| !m.is_null()).unwrap_or_else(|| json!({}));
        facade.insert("metadata".into(), metadata);
        let def = self.definition(&parent, parent.raw_template_id).await?;
        if let Some(defn) = def.resource(resource_name) {
            facade.insert("deletion_policy".into(), Value::String(defn.deletion_policy.clone()));
            let unknown = LiveContext::placeholders(&def);
            let policy =
                defn.update_policy.as_ref().and_then(|p| p.resolve(&unknown).ok()).unwrap_or_else(|| json!({}));
            facade.insert("update_policy".into(), policy);
        }
        Ok(facade)
    }

    /// Cleanup node: a row not of the current template is deleted (INIT
    /// rows just removed); current rows pass.
    async fn check_cleanup(
        self: &Arc<Self>,
        stack: &StackRow,
        row: ResourceRow,
        data: &BTreeMap<String, ResourceDataEntry>,
    ) -> Result<Outcome, EngineError> {
        if row.current_template_id == Some(stack.raw_template_id) && row.replaced_by.is_none() {
            return Ok(Outcome::Done(Box::new(row), Value::Null, None));
        }
        let row = match self.take_lock(stack, row).await? {
            Ok(row) => row,
            Err(outcome) => return Ok(outcome),
        };
        if row.action == Action::Init {
            let last = LastWrite::delete(&row);
            return Ok(Outcome::Done(Box::new(row), Value::Null, Some(Box::new(last))));
        }
        let Some((_, plugin)) = self.plugin_of_row(stack, &row).await else {
            let last = LastWrite::delete(&row);
            return Ok(Outcome::Done(Box::new(row), Value::Null, Some(Box::new(last))));
        };
        let props = match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let plan = ActionPlan {
            act: Act::Delete,
            requires: row.requires.clone(),
            row,
            plugin,
            props,
            update_policy: None,
            old_props: None,
            written_type: None,
        };
        match self.run_action(stack, data, plan).await? {
            Outcome::Done(done, _, Some(mut last)) => {
                // DELETE_COMPLETE is recorded (the event) and the row goes
                // with its data, in the transaction that reports it.
                last.kind = LastKind::Delete;
                last.data.clear();
                Ok(Outcome::Done(done, Value::Null, Some(last)))
            }
            other => Ok(other),
        }
    }
}
