//! The engine operations the service layer calls. Each starts (or stops)
//! a traversal and returns at once: the REST call never waits for
//! resources.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::traversal::StackChanges;
use super::Engine;
use crate::definition::{empty_template, StackDefinition};
use crate::error::EngineError;
use crate::store::{self, Action, ResourceChange, StackRow, Status};

/// Resource data key holding, during a stack ADOPT, the adopt data of a
/// nested-stack resource's own resources.
pub(super) const NESTED_ADOPT_KEY: &str = "adopt_nested_resources";

/// A stack to create (already validated by the service layer).
#[derive(Debug, Clone, Default)]
pub struct NewStack {
    pub id: String,
    pub name: String,
    pub tenant: String,
    pub username: String,
    pub user_id: String,
    pub template: Value,
    pub files: Map<String, Value>,
    /// The merged environment, the user's parameters in `parameters`.
    pub environment: Value,
    pub timeout_mins: Option<i64>,
    pub disable_rollback: bool,
    pub tags: Option<Vec<String>>,
    /// An abandoned stack's document to adopt (its `resources` by name:
    /// `resource_id`, `resource_data`, `metadata`): the stack is ADOPTed,
    /// not created.
    pub adopt_stack_data: Option<Value>,
    /// A nested stack's parent stack, the resource that owns it, and its
    /// depth below the top-level stack.
    pub owner_id: Option<String>,
    pub parent_resource_name: Option<String>,
    pub nested_depth: i64,
    /// The user a root stack is created for (its token, roles): the trust
    /// and the stack-user project are made for them. None: no Keystone
    /// caller (noauth, nested stacks).
    pub trustor: Option<crate::identity::Trustor>,
    /// A nested stack's: its parent's stack-user project.
    pub stack_user_project_id: Option<String>,
}

/// A new definition for an existing stack (update).
#[derive(Debug, Clone, Default)]
pub struct NewDefinition {
    pub template: Value,
    pub files: Map<String, Value>,
    pub environment: Value,
    pub timeout_mins: Option<i64>,
    pub disable_rollback: bool,
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackOperation {
    Suspend,
    Resume,
    Check,
}

impl StackOperation {
    /// The stack action `action` names (CHECK, SUSPEND, RESUME), if any.
    pub fn of_action(action: Action) -> Option<StackOperation> {
        match action {
            Action::Suspend => Some(StackOperation::Suspend),
            Action::Resume => Some(StackOperation::Resume),
            Action::Check => Some(StackOperation::Check),
            _ => None,
        }
    }

    fn action(self) -> Action {
        match self {
            StackOperation::Suspend => Action::Suspend,
            StackOperation::Resume => Action::Resume,
            StackOperation::Check => Action::Check,
        }
    }
}

fn user_params(environment: &Value) -> Map<String, Value> {
    environment.get("parameters").and_then(Value::as_object).cloned().unwrap_or_default()
}

impl Engine {
    async fn live_stack(&self, stack_id: &str) -> Result<StackRow, EngineError> {
        match store::stacks::get(&self.db, stack_id).await? {
            Some(s) if s.deleted_at.is_none() => Ok(s),
            _ => Err(EngineError::stack_not_found(stack_id)),
        }
    }

    /// Stores the template and the stack, then starts the CREATE traversal.
    pub async fn create_stack(self: &Arc<Self>, new: NewStack) -> Result<StackRow, EngineError> {
        let mut row = StackRow {
            id: new.id.clone(),
            name: new.name.clone(),
            tenant: new.tenant.clone(),
            username: new.username.clone(),
            user_id: new.user_id.clone(),
            timeout_mins: new.timeout_mins,
            disable_rollback: new.disable_rollback,
            tags: new.tags.clone(),
            params: user_params(&new.environment),
            owner_id: new.owner_id.clone(),
            parent_resource_name: new.parent_resource_name.clone(),
            nested_depth: new.nested_depth,
            stack_user_project_id: new.stack_user_project_id.clone(),
            action: Action::Init,
            status: Status::Complete,
            ..Default::default()
        };
        let credentials = if new.owner_id.is_none() {
            self.prepare_credentials(&new.id, new.trustor.as_ref()).await?
        } else {
            Default::default()
        };
        if credentials.stack_user_project_id.is_some() {
            row.stack_user_project_id = credentials.stack_user_project_id.clone();
        }
        let stored = keelson_db::retrying("stack creation", || async {
            let mut tx = self.db.begin().await?;
            let template_id = store::templates::insert(&mut tx, &new.template, &new.files, &new.environment).await?;
            store::stacks::insert(&mut tx, &StackRow { raw_template_id: template_id, ..row.clone() }).await?;
            if let Some(creds) = &credentials.row {
                store::user_creds::insert_tx(&mut tx, creds).await?;
            }
            tx.commit().await?;
            Ok(template_id)
        })
        .await;
        let template_id = match stored {
            Ok(id) => id,
            Err(e) => {
                self.discard_credentials(credentials).await;
                return Err(e.into());
            }
        };
        row.raw_template_id = template_id;
        let stack_action = match &new.adopt_stack_data {
            Some(adopt) => {
                self.prepare_adoption(&row, template_id, &new, adopt).await?;
                Action::Adopt
            }
            None => Action::Create,
        };
        self.converge_stack(&row, template_id, stack_action, "", StackChanges::default()).await?;
        self.live_stack(&new.id).await
    }

    /// Stores, before the ADOPT traversal starts, one INIT row per resource
    /// of the definition holding what the adopt data gives for it: its
    /// physical id, resource data and metadata (what upstream's
    /// `handle_adopt` sets). The traversal picks these rows and adopts
    /// them; a resource the data lacks fails to adopt.
    async fn prepare_adoption(
        &self,
        stack: &StackRow,
        template_id: i64,
        new: &NewStack,
        adopt: &Value,
    ) -> Result<(), EngineError> {
        let def = StackDefinition::parse(
            &new.template,
            &new.files,
            &new.environment,
            &crate::definition::pseudo_params(stack, &self.settings.region_name),
        )?;
        let adopted = adopt.get("resources").and_then(Value::as_object);
        for defn in &def.resources {
            let Some(data) = adopted.and_then(|r| r.get(&defn.name)) else {
                continue;
            };
            let physical = match data.get("resource_id") {
                Some(Value::String(id)) => Some(id.clone()),
                Some(Value::Null) | None => None,
                Some(other) => Some(other.to_string()),
            };
            let metadata = data.get("metadata").filter(|m| !m.is_null()).cloned();
            let row = store::resources::insert(
                &self.db,
                &store::NewResource {
                    stack_id: stack.id.clone(),
                    root_stack_id: stack.id.clone(),
                    name: defn.name.clone(),
                    resource_type: defn.type_name.clone(),
                    physical_resource_id: physical,
                    rsrc_metadata: metadata,
                    current_template_id: Some(template_id),
                    ..Default::default()
                },
            )
            .await?;
            // A nested stack's resources (template resources, groups):
            // kept for the resource's ADOPT, which hands them to its child.
            if let Some(nested @ Value::Object(_)) = data.get("resources") {
                let text = json!({ "resources": nested }).to_string();
                store::resources::data_set(&self.db, row.id, NESTED_ADOPT_KEY, &text, false).await?;
            }
            if let Some(Value::Object(entries)) = data.get("resource_data") {
                for (key, value) in entries {
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    store::resources::data_set(&self.db, row.id, key, &text, false).await?;
                }
            }
        }
        Ok(())
    }

    /// Starts an UPDATE traversal to the new definition; a traversal in
    /// progress is superseded (its workers retrigger into this one).
    pub async fn update_stack(self: &Arc<Self>, stack_id: &str, new: NewDefinition) -> Result<(), EngineError> {
        self.converge_to(stack_id, new, Action::Update).await
    }

    /// Upstream convergence `stack_restore`: an update to a snapshot's
    /// definition whose stack action is RESTORE.
    pub async fn restore_stack(self: &Arc<Self>, stack_id: &str, new: NewDefinition) -> Result<(), EngineError> {
        self.converge_to(stack_id, new, Action::Restore).await
    }

    async fn converge_to(self: &Arc<Self>, stack_id: &str, new: NewDefinition, act: Action) -> Result<(), EngineError> {
        let template_id = self.store_template(&new.template, &new.files, &new.environment).await?;
        for _ in 0..3 {
            let stack = self.live_stack(stack_id).await?;
            if matches!(stack.action, Action::Suspend | Action::Delete) {
                return Err(EngineError::not_supported(format!("Updating a stack when it is {}", stack.state())));
            }
            let changes = StackChanges {
                timeout_mins: Some(new.timeout_mins),
                disable_rollback: Some(new.disable_rollback),
                tags: Some(new.tags.clone()),
                params: Some(user_params(&new.environment)),
            };
            if self.converge_stack(&stack, template_id, act, &stack.current_traversal, changes).await? {
                return Ok(());
            }
        }
        Err(EngineError::action_in_progress(stack_id, act))
    }

    /// Stops a traversal in progress (cancelling running actions), then
    /// converges to the empty template with DELETE.
    pub async fn delete_stack(self: &Arc<Self>, stack_id: &str) -> Result<(), EngineError> {
        let template_id = self.store_template(&empty_template(), &Map::new(), &serde_json::json!({})).await?;
        for _ in 0..3 {
            let mut stack = self.live_stack(stack_id).await?;
            if stack.action == Action::Delete && stack.status == Status::Complete {
                return Err(EngineError::stack_not_found(stack_id));
            }
            if !stack.current_traversal.is_empty() {
                let stopped = if stack.status == Status::InProgress {
                    self.stop_traversal(&stack).await?
                } else {
                    self.retire_traversal(&stack).await?
                };
                match stopped {
                    Some(t) => stack.current_traversal = t,
                    None => continue,
                }
            }
            // Delete also stops the actions running (upstream
            // stop_all_workers before the DELETE traversal): those of a
            // stopped traversal too, such as a preempted nested stack's,
            // which would otherwise hold their resources until they end.
            self.dispatcher.cancel_all(self, &stack.id).await;
            // Upstream deletes a stack's snapshots within its DELETE.
            for snapshot in store::snapshots::list_all_by_stack(&self.db, &stack.id).await? {
                if let Err(e) = self.delete_snapshot(&stack, &snapshot).await {
                    tracing::warn!(error = %e, stack_id, snapshot_id = snapshot.id, "snapshot not deleted");
                }
            }
            store::snapshots::delete_by_stack(&self.db, &stack.id).await?;
            if self
                .converge_stack(&stack, template_id, Action::Delete, &stack.current_traversal, StackChanges::default())
                .await?
            {
                return Ok(());
            }
        }
        Err(EngineError::action_in_progress(stack_id, Action::Delete))
    }

    /// Forgets the stack without touching its physical resources
    /// (upstream `Stack.delete(abandon=True)`): the traversal CAS ends
    /// whatever traversal runs (its later writes fail), running actions
    /// are cancelled, then every row of the stack is purged. Its nested
    /// stacks are abandoned with it (their resources are left alone too).
    pub fn abandon_stack<'a>(
        self: &'a Arc<Self>,
        stack_id: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(self.abandon_stack_tree(stack_id))
    }

    async fn abandon_stack_tree(self: &Arc<Self>, stack_id: &str) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        let reason = format!("Stack {} completed successfully", Action::Delete);
        let change = store::StackStateChange {
            current_traversal: Some(String::new()),
            ..store::StackStateChange::new(Action::Delete, Status::Complete, reason)
        };
        if !store::stacks::set_state(&self.db, stack_id, &stack.current_traversal, change).await? {
            return Err(EngineError::action_in_progress(&stack.name, stack.action));
        }
        self.dispatcher.cancel_all(self, stack_id).await;
        for child in store::stacks::children(&self.db, stack_id).await? {
            match self.abandon_stack(&child.id).await {
                // Gone meanwhile: nothing left to forget.
                Err(EngineError::EntityNotFound { .. }) => {}
                other => other?,
            }
        }
        store::stacks::delete_for_purge(&self.db, stack_id).await?;
        Ok(())
    }

    /// Suspend/resume/check: run over the live resources in dependency
    /// order (reverse for suspend, as upstream's `stack_task`); states and
    /// events as upstream. A stack already SUSPEND_COMPLETE (RESUME_COMPLETE)
    /// is left alone by a suspend (resume), as upstream's convergence
    /// `stack_suspend` / `stack_resume`.
    pub async fn stack_action(self: &Arc<Self>, stack_id: &str, op: StackOperation) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        if stack.status == Status::InProgress {
            return Err(EngineError::action_in_progress(&stack.name, stack.action));
        }
        let act = op.action();
        if act != Action::Check && stack.action == act && stack.status == Status::Complete {
            tracing::info!(stack_id, "stack {} is already {act} COMPLETE", stack.name);
            return Ok(());
        }
        self.start_stack_action(&stack, act, uuid::Uuid::new_v4().to_string()).await
    }

    /// Upstream convergence `stack_snapshot`: the SNAPSHOT walk over the
    /// live resources, its traversal the snapshot's id; its end rewrites
    /// the snapshot row (`Stack.update_snapshot`). The stack must not be
    /// IN_PROGRESS.
    pub async fn snapshot_stack(self: &Arc<Self>, stack_id: &str, snapshot_id: &str) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        if stack.status == Status::InProgress {
            return Err(EngineError::action_in_progress(&stack.name, stack.action));
        }
        self.start_stack_action(&stack, Action::Snapshot, snapshot_id.to_string()).await
    }

    async fn start_stack_action(
        self: &Arc<Self>,
        stack: &StackRow,
        act: Action,
        traversal: String,
    ) -> Result<(), EngineError> {
        let stack_id = stack.id.as_str();
        let started = format!("Stack {act} started");
        let change = store::StackStateChange {
            current_traversal: Some(traversal.clone()),
            ..store::StackStateChange::new(act, Status::InProgress, started.clone())
        };
        if !store::stacks::set_state(&self.db, stack_id, &stack.current_traversal, change).await? {
            return Err(EngineError::action_in_progress(&stack.name, stack.action));
        }
        self.stack_event(stack, act, Status::InProgress, &started).await;
        let engine = self.clone();
        let stack_id = stack_id.to_string();
        tokio::spawn(async move {
            if let Err(e) = engine.run_stack_action(&stack_id, &traversal, act).await {
                tracing::warn!(error = %e, stack_id, "stack action failed");
            }
        });
        Ok(())
    }

    async fn run_stack_action(&self, stack_id: &str, traversal: &str, act: Action) -> Result<(), EngineError> {
        let rows = store::resources::list(&self.db, stack_id).await?;
        let stack = self.live_stack(stack_id).await?;
        let mut snapshots = Map::new();
        let (unsupported, failure) = match act {
            Action::Check => self.check_resources(&stack, &rows).await?,
            Action::Snapshot => (false, self.snapshot_resources(&stack, &rows, &mut snapshots).await?),
            _ => (false, self.suspend_or_resume_resources(&stack, &rows, act).await?),
        };
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Ok(());
        };
        let (state, mut reason) = match failure {
            Some(f) => (Status::Failed, format!("Resource {act} failed: {f}")),
            None => (Status::Complete, format!("Stack {act} completed successfully")),
        };
        if unsupported {
            reason.push_str(". 'CHECK' not fully supported (see resources)");
        }
        let change = store::StackStateChange::new(act, state, reason.clone());
        if store::stacks::set_state(&self.db, stack_id, traversal, change).await? {
            self.stack_event(&stack, act, state, &reason).await;
            if act == Action::Snapshot {
                self.finish_snapshot(traversal, state, &reason, snapshots).await?;
            }
        }
        Ok(())
    }

    /// Upstream `Resource.snapshot` then `resource_snapshot_set`, per live
    /// resource in dependency order: SNAPSHOT_IN_PROGRESS, the type's
    /// snapshot, SNAPSHOT_COMPLETE, then the resource's abandon entry is
    /// its snapshot data (into `taken`). The first failure stops the walk
    /// and is answered.
    async fn snapshot_resources(
        &self,
        stack: &StackRow,
        rows: &[store::ResourceRow],
        taken: &mut Map<String, Value>,
    ) -> Result<Option<String>, EngineError> {
        for (row, _) in self.live_in_dependency_order(stack, rows).await? {
            // Never created: nothing to snapshot.
            if row.action == Action::Init {
                continue;
            }
            self.write_action_state(row, Action::Snapshot, Status::InProgress, "state changed").await?;
            let plugin = self.plugin_of_row(stack, row).await.map(|(_, p)| p);
            let mut ctx = self.action_context(stack, row).await?;
            let before = ctx.state.data.clone();
            let result = match &plugin {
                Some(p) => p.snapshot(&mut ctx).await,
                None => Ok(()),
            };
            // What the type kept (upstream `data_set` writes at once).
            for (key, value) in &ctx.state.data {
                if before.get(key) != Some(value) {
                    store::resources::data_set(&self.db, row.id, key, value, false).await?;
                }
            }
            if let Err(f) = result {
                let reason = action_failure_reason(&row.name, &f);
                self.write_action_state(row, Action::Snapshot, Status::Failed, &reason).await?;
                return Ok(Some(reason));
            }
            self.write_action_state(row, Action::Snapshot, Status::Complete, "state changed").await?;
            let Some(fresh) = store::resources::get(&self.db, row.id).await? else { continue };
            taken.insert(row.name.clone(), resource_abandon_entry(&self.db, &fresh).await?);
        }
        Ok(None)
    }

    /// Upstream `Snapshot.delete_snapshot`: each resource the snapshot
    /// holds lets go of what its type keeps outside the row (a server's
    /// image), given its snapshot data as its data; then the row goes. A
    /// failure leaves the row DELETE_FAILED with the resource's reason.
    pub async fn delete_snapshot(
        &self,
        stack: &StackRow,
        snapshot: &store::snapshots::SnapshotRow,
    ) -> Result<(), EngineError> {
        let resources = snapshot.data.as_ref().and_then(|d| d.get("resources")).and_then(Value::as_object);
        for (name, entry) in resources.into_iter().flatten() {
            let Some(plugin) = entry.get("type").and_then(Value::as_str).and_then(|t| self.registry.get(t)) else {
                continue;
            };
            let data = entry.get("resource_data").and_then(Value::as_object).into_iter().flatten();
            let mut ctx = crate::resources::ActionContext {
                stack_id: stack.id.clone(),
                stack_name: stack.name.clone(),
                resource_name: name.clone(),
                resource_id: 0,
                properties: Map::new(),
                state: crate::resources::ResourceState {
                    physical_id: entry.get("resource_id").and_then(Value::as_str).map(str::to_string),
                    data: data.filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect(),
                    ..Default::default()
                },
                cancel: self.cancel_receiver(&stack.id),
                adopt: None,
                update_policy: None,
                timeout_mins: stack.timeout_mins,
                action_retry_limit: self.settings.action_retry_limit,
            };
            if let Err(f) = plugin.delete_snapshot(&mut ctx).await {
                let reason = action_failure_reason(name, &f);
                store::snapshots::set_state(&self.db, &snapshot.id, "DELETE", Status::Failed.as_str(), &reason).await?;
                return Err(EngineError::internal(reason));
            }
        }
        store::snapshots::delete(&self.db, &snapshot.id).await?;
        Ok(())
    }

    /// Upstream `Stack.update_snapshot`: the snapshot's data becomes the
    /// stack's document as it ends (action SNAPSHOT, the snapshot's
    /// status) with the resources' snapshot data.
    async fn finish_snapshot(
        &self,
        snapshot_id: &str,
        state: Status,
        reason: &str,
        resources: Map<String, Value>,
    ) -> Result<(), EngineError> {
        let Some(row) = store::snapshots::get(&self.db, snapshot_id).await? else {
            // Deleted with its stack meanwhile.
            return Ok(());
        };
        let mut data = match row.data {
            Some(Value::Object(d)) => d,
            _ => Map::new(),
        };
        data.insert("action".into(), json!(Action::Snapshot.as_str()));
        data.insert("status".into(), json!(state.as_str()));
        data.insert("resources".into(), Value::Object(resources));
        store::snapshots::finish(&self.db, snapshot_id, &Value::Object(data), "CREATE", state.as_str(), reason).await?;
        Ok(())
    }

    /// The live resources (neither replaced nor deleted) in dependency
    /// order, each with the names of the live resources it needs first:
    /// the current definition's dependencies (never-created rows have no
    /// stored ones) and those it was last acted on with.
    async fn live_in_dependency_order<'r>(
        &self,
        stack: &StackRow,
        rows: &'r [store::ResourceRow],
    ) -> Result<Vec<(&'r store::ResourceRow, BTreeSet<String>)>, EngineError> {
        let mut live: Vec<&store::ResourceRow> = rows
            .iter()
            .filter(|r| r.replaced_by.is_none() && !(r.action == Action::Delete && r.status == Status::Complete))
            .collect();
        let def = self.definition(stack, stack.raw_template_id).await?;
        let name_of: BTreeMap<i64, &str> = rows.iter().map(|r| (r.id, r.name.as_str())).collect();
        // Computed once per resource: the walk below asks again on every
        // round, and a long chain has as many rounds as resources.
        let live_names: BTreeSet<&str> = live.iter().map(|r| r.name.as_str()).collect();
        let mut needs_of: BTreeMap<i64, BTreeSet<String>> = live
            .iter()
            .map(|r| {
                let mut names = def.requires(&self.registry, &r.name);
                names.extend(r.requires.iter().filter_map(|id| name_of.get(id)).map(|n| n.to_string()));
                names.retain(|n| n != &r.name && live_names.contains(n.as_str()));
                (r.id, names)
            })
            .collect();
        let mut done: BTreeSet<String> = BTreeSet::new();
        let mut ordered = Vec::with_capacity(live.len());
        while !live.is_empty() {
            let needs_met = |r: &&store::ResourceRow| {
                needs_of.get(&r.id).is_none_or(|needs| needs.iter().all(|n| done.contains(n)))
            };
            let (mut ready, pending): (Vec<_>, Vec<_>) = live.iter().copied().partition(needs_met);
            // A dependency cycle cannot be stored; guard anyway.
            if ready.is_empty() {
                ready = pending;
                live = Vec::new();
            } else {
                live = pending;
            }
            for row in ready {
                done.insert(row.name.clone());
                ordered.push((row, needs_of.remove(&row.id).unwrap_or_default()));
            }
        }
        Ok(ordered)
    }

    /// Upstream `Stack.suspend` / `Stack.resume`: each live resource's
    /// `Resource.suspend` / `resume` (its state checked first), after those
    /// that depend on it for a suspend, after those it depends on for a
    /// resume; the first failure stops the walk. Answers that failure.
    async fn suspend_or_resume_resources(
        &self,
        stack: &StackRow,
        rows: &[store::ResourceRow],
        act: Action,
    ) -> Result<Option<String>, EngineError> {
        let mut order = self.live_in_dependency_order(stack, rows).await?;
        if act == Action::Suspend {
            order.reverse();
        }
        for (row, _) in order {
            // Never created: nothing to suspend or resume.
            if row.action == Action::Init {
                continue;
            }
            let valid = match act {
                Action::Suspend => {
                    row.action != Action::Delete && (row.action == Action::Suspend || row.status == Status::Complete)
                }
                _ => {
                    (row.action == Action::Suspend && row.status == Status::Complete)
                        || (row.action == Action::Resume && row.status != Status::InProgress)
                }
            };
            if !valid {
                return Ok(Some(format!(
                    "Error: resources.{}: State ('{}', '{}') invalid for {}",
                    row.name,
                    row.action,
                    row.status,
                    act.to_string().to_lowercase()
                )));
            }
            self.write_action_state(row, act, Status::InProgress, "state changed").await?;
            let plugin = self.plugin_of_row(stack, row).await.map(|(_, p)| p);
            let mut ctx = self.action_context(stack, row).await?;
            let result = match (&plugin, act) {
                (Some(p), Action::Suspend) => p.suspend(&mut ctx).await,
                (Some(p), _) => p.resume(&mut ctx).await,
                // A type no longer registered has nothing to act on.
                (None, _) => Ok(()),
            };
            match result {
                Ok(()) => self.write_action_state(row, act, Status::Complete, "state changed").await?,
                Err(f) => {
                    let reason = action_failure_reason(&row.name, &f);
                    self.write_action_state(row, act, Status::Failed, &reason).await?;
                    return Ok(Some(reason));
                }
            }
        }
        Ok(None)
    }

    /// Upstream `Stack.check`: each live resource's check runs after those
    /// it depends on; a failed one stops those that depend on it (they
    /// keep their state). Answers whether some type has no check, and the
    /// first failure.
    async fn check_resources(
        &self,
        stack: &StackRow,
        rows: &[store::ResourceRow],
    ) -> Result<(bool, Option<String>), EngineError> {
        let mut stopped: BTreeSet<String> = BTreeSet::new();
        let (mut unsupported, mut failure) = (false, None);
        for (row, needs) in self.live_in_dependency_order(stack, rows).await? {
            if needs.iter().any(|n| stopped.contains(n)) {
                stopped.insert(row.name.clone());
                continue;
            }
            match self.check_one(stack, row).await? {
                CheckResult::Passed | CheckResult::Skipped => {}
                CheckResult::Unsupported => unsupported = true,
                CheckResult::Failed(reason) => {
                    stopped.insert(row.name.clone());
                    failure.get_or_insert(reason);
                }
            }
        }
        Ok((unsupported, failure))
    }

    /// What a plugin's stack-level action (check, suspend, resume) of
    /// `row` runs with.
    async fn action_context(
        &self,
        stack: &StackRow,
        row: &store::ResourceRow,
    ) -> Result<crate::resources::ActionContext, EngineError> {
        Ok(crate::resources::ActionContext {
            stack_id: stack.id.clone(),
            stack_name: stack.name.clone(),
            resource_name: row.name.clone(),
            resource_id: row.id,
            properties: match &row.properties_data {
                Some(Value::Object(p)) => p.clone(),
                _ => Map::new(),
            },
            state: crate::definition::resource_state(&self.db, row).await?,
            cancel: self.cancel_receiver(&stack.id),
            adopt: None,
            update_policy: None,
            timeout_mins: stack.timeout_mins,
            action_retry_limit: self.settings.action_retry_limit,
        })
    }

    async fn check_one(&self, stack: &StackRow, row: &store::ResourceRow) -> Result<CheckResult, EngineError> {
        let plugin = self.plugin_of_row(stack, row).await.map(|(_, p)| p);
        let type_name = row.resource_type.clone();
        let mut ctx = self.action_context(stack, row).await?;
        let Some(check) = plugin.as_ref().and_then(|p| p.check(&mut ctx)) else {
            if row.action == Action::Init {
                // Never created: nothing to check, nothing to record.
                return Ok(CheckResult::Skipped);
            }
            let reason = format!("{} not supported for {type_name}", Action::Check);
            self.write_action_state(row, Action::Check, Status::Complete, &reason).await?;
            return Ok(CheckResult::Unsupported);
        };
        if row.action == Action::Init {
            let reason = format!("Can not check {}, resource not created yet.", row.name);
            self.write_action_state(row, Action::Check, Status::Failed, &reason).await?;
            return Ok(CheckResult::Failed(format!(
                "Exception: resources.{}: Resource {} not created yet.",
                row.name, row.name
            )));
        }
        self.resource_event(row, Action::Check, Status::InProgress, "state changed", None).await;
        match check.await {
            Ok(()) => {
                self.write_action_state(row, Action::Check, Status::Complete, "state changed").await?;
                Ok(CheckResult::Passed)
            }
            Err(f) => {
                let reason = action_failure_reason(&row.name, &f);
                self.write_action_state(row, Action::Check, Status::Failed, &reason).await?;
                Ok(CheckResult::Failed(reason))
            }
        }
    }

    /// Writes `row`'s state and its event.
    async fn write_action_state(
        &self,
        row: &store::ResourceRow,
        act: Action,
        state: Status,
        reason: &str,
    ) -> Result<(), EngineError> {
        // Re-read: the action may have run long, and a signal may have
        // changed the row meanwhile (the CAS is on the fresh version).
        let atomic_key = store::resources::get(&self.db, row.id).await?.map(|r| r.atomic_key).unwrap_or(row.atomic_key);
        store::resources::update_cas(&self.db, row.id, None, atomic_key, ResourceChange::state(act, state, reason))
            .await?;
        self.resource_event(row, act, state, reason, None).await;
        Ok(())
    }

    /// cancel_update: with rollback (UPDATE_IN_PROGRESS only), converge
    /// back to the previous template; without (CREATE or UPDATE in
    /// progress), stop the traversal where it is: the stack fails "Stack
    /// ACTION cancelled" and the actions running finish normally but
    /// propagate no further (upstream stop_traversal).
    pub async fn cancel_update(self: &Arc<Self>, stack_id: &str, rollback: bool) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        let allowed: &[Action] = if rollback { &[Action::Update] } else { &[Action::Update, Action::Create] };
        if !(stack.status == Status::InProgress && allowed.contains(&stack.action)) {
            return Err(EngineError::not_supported(format!(
                "Cancelling update when stack is {} is not supported.",
                stack.state()
            )));
        }
        if rollback {
            // Upstream `Stack.rollback`: the ROLLBACK traversal supersedes
            // the running one, whose workers finish and retrigger into it.
            self.rollback(&stack).await?;
        } else {
            self.stop_traversal(&stack).await?;
        }
        Ok(())
    }

    /// Upstream `Stack.rollback`: converge to the previous template (the
    /// empty one when there is none), superseding the traversal running.
    pub async fn rollback_stack(self: &Arc<Self>, stack_id: &str) -> Result<(), EngineError> {
        for _ in 0..3 {
            let stack = self.live_stack(stack_id).await?;
            if self.rollback(&stack).await? {
                return Ok(());
            }
        }
        Err(EngineError::action_in_progress(stack_id, Action::Rollback))
    }

    /// Checks a signal now and handles it in the background
    /// (`signals.rs`).
    pub async fn signal_resource(
        self: &Arc<Self>,
        stack_id: &str,
        resource_name: &str,
        details: Value,
    ) -> Result<(), EngineError> {
        self.signal_async(stack_id, resource_name, details).await
    }

    /// Marks a resource CHECK_FAILED (or back to CHECK_COMPLETE).
    pub async fn mark_unhealthy(
        self: &Arc<Self>,
        stack_id: &str,
        resource_name: &str,
        mark: bool,
        reason: &str,
    ) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        let rows = store::resources::list(&self.db, stack_id).await?;
        let Some(row) = rows.iter().filter(|r| r.name == resource_name).max_by_key(|r| (r.replaced_by.is_none(), r.id))
        else {
            return Err(EngineError::resource_not_found(resource_name, &stack.name));
        };
        let reason = if reason.is_empty() { "state changed by resource_mark_unhealthy api" } else { reason };
        let target = if mark {
            Some(Status::Failed)
        } else if row.action == Action::Check && row.status == Status::Failed {
            Some(Status::Complete)
        } else {
            None
        };
        let Some(target) = target else { return Ok(()) };
        if !store::resources::update_cas(
            &self.db,
            row.id,
            row.engine_id.as_deref(),
            row.atomic_key,
            ResourceChange::state(Action::Check, target, reason),
        )
        .await?
        {
            return Err(EngineError::action_in_progress(resource_name, row.action));
        }
        self.resource_event(row, Action::Check, target, reason, None).await;
        Ok(())
    }
}

/// Upstream `Resource.prepare_abandon`: what an abandoned stack's document
/// and a snapshot hold of one resource.
pub(crate) async fn resource_abandon_entry(
    db: &keelson_db::Db,
    row: &store::ResourceRow,
) -> Result<Value, EngineError> {
    let data: BTreeMap<String, String> =
        store::resources::data_get_all(db, row.id).await?.into_iter().map(|(k, entry)| (k, entry.value)).collect();
    Ok(json!({
        "name": row.name,
        "resource_id": row.physical_resource_id,
        "type": row.resource_type,
        "action": row.action,
        "status": row.status,
        "metadata": row.rsrc_metadata.clone().filter(|m| !m.is_null()).unwrap_or_else(|| json!({})),
        "resource_data": data,
    }))
}

/// Upstream `str(ResourceFailure)`: the state reason of a resource whose
/// action failed.
fn action_failure_reason(resource_name: &str, f: &crate::resources::ResourceFailure) -> String {
    match f.exception() {
        Some((type_name, message)) => format!("{type_name}: resources.{resource_name}: {message}"),
        None => format!("Exception: resources.{resource_name}: cancelled"),
    }
}

/// How one resource's CHECK ended.
enum CheckResult {
    Passed,
    /// The type has no check: COMPLETE, "not supported".
    Unsupported,
    /// Never created and nothing to check: left as it is.
    Skipped,
    Failed(String),
}
