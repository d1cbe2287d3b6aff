//! Stack snapshots (`heat/engine/service.py` `stack_snapshot`,
//! `show_snapshot`, `delete_snapshot`, `stack_list_snapshots`,
//! `stack_restore`): a snapshot row is stored IN_PROGRESS with the stack's
//! abandon document (no resources) and the engine's SNAPSHOT walk fills in
//! the resources' data and the outcome; a restore is an update to the
//! snapshot's template, environment and files whose stack action is
//! RESTORE. A snapshot is its project's: another project's is "not found".

use serde_json::{json, Map, Value};

use super::engine_port::{DefinitionInput, StackSettings};
use super::records::{StackRow, Status};
use super::stacks::{request_limit, StackRef};
use super::views::isotime;
use super::{Caller, Orchestration, Reply};
use crate::error::EngineError;
use crate::store::snapshots::{self, SnapshotRow};

/// The snapshot's own actions and statuses (upstream `Snapshot.ACTIONS`,
/// `STATUSES`), as its row stores them.
const CREATE: &str = "CREATE";
const DELETE: &str = "DELETE";
const IN_PROGRESS: &str = "IN_PROGRESS";
const COMPLETE: &str = "COMPLETE";

impl Orchestration {
    /// `POST .../snapshots` (200): the new snapshot, IN_PROGRESS; the
    /// stack goes SNAPSHOT_IN_PROGRESS.
    pub async fn stack_snapshot(&self, caller: &Caller, stack: &StackRef, body: &Value) -> Reply {
        let current = self.find_stack(caller, stack, false).await?;
        if current.status == Status::InProgress {
            return Err(EngineError::action_in_progress(&current.name, current.action));
        }
        // Admins are not limited, as for stacks.
        let limit = self.settings.max_snapshots_per_stack;
        if !caller.is_admin && limit >= 0 {
            let count = snapshots::count_by_stack(&self.db, &current.id, &caller.project_id).await?;
            if count >= limit {
                return Err(request_limit(&format!(
                    "You have reached the maximum snapshots per stack, {limit}. Please delete some snapshots."
                )));
            }
        }
        let data = self.abandon_document(&current, false).await?;
        let name = body.get("name").and_then(Value::as_str).map(str::to_string);
        let row = snapshots::insert(
            &self.db,
            &SnapshotRow {
                id: uuid::Uuid::new_v4().to_string(),
                name,
                stack_id: current.id.clone(),
                tenant: caller.project_id.clone(),
                data: Some(data),
                action: Some(CREATE.to_string()),
                status: Some(IN_PROGRESS.to_string()),
                status_reason: None,
                created_at: None,
            },
        )
        .await?;
        if let Err(e) = self.engine_snapshot(caller, &current, &row.id).await {
            // The walk never started: no snapshot to keep.
            snapshots::delete(&self.db, &row.id).await?;
            return Err(e);
        }
        Ok(snapshot_view(&row))
    }

    /// `GET .../snapshots/{id}`.
    pub async fn show_snapshot(&self, caller: &Caller, stack: &StackRef, snapshot_id: &str) -> Reply {
        let current = self.find_stack(caller, stack, false).await?;
        let row = self.snapshot_of(caller, &current, snapshot_id).await?;
        Ok(json!({ "snapshot": snapshot_view(&row) }))
    }

    /// `GET .../snapshots`: the stack's snapshots in the caller's project,
    /// oldest first.
    pub async fn list_snapshots(&self, caller: &Caller, stack: &StackRef) -> Reply {
        let current = self.find_stack(caller, stack, false).await?;
        let rows = snapshots::list_by_stack(&self.db, &current.id, &caller.project_id).await?;
        Ok(json!({ "snapshots": rows.iter().map(snapshot_view).collect::<Vec<_>>() }))
    }

    /// `DELETE .../snapshots/{id}` (204). A snapshot still being taken
    /// cannot be deleted. What its resources' types keep outside the row
    /// (a server's image) goes first; a failure there is no error of the
    /// request (upstream deletes in the background): the snapshot stays,
    /// DELETE_FAILED.
    pub async fn delete_snapshot(&self, caller: &Caller, stack: &StackRef, snapshot_id: &str) -> Reply {
        let current = self.find_stack(caller, stack, false).await?;
        let row = self.snapshot_of(caller, &current, snapshot_id).await?;
        if row.action.as_deref().is_none_or(|a| a == CREATE) && row.status.as_deref() == Some(IN_PROGRESS) {
            return Err(EngineError::not_supported("Deleting in-progress snapshot is not supported."));
        }
        snapshots::set_state(&self.db, &row.id, DELETE, IN_PROGRESS, "Snapshot delete started").await?;
        if let Err(e) = self.engine_delete_snapshot(caller, &current, &row).await {
            tracing::warn!(error = %e, snapshot_id, "snapshot delete failed");
        }
        Ok(Value::Null)
    }

    /// `POST .../snapshots/{id}/restore` (202): converges the stack to the
    /// snapshot's template, environment and files; the stack goes
    /// RESTORE_IN_PROGRESS.
    pub async fn restore_snapshot(&self, caller: &Caller, stack: &StackRef, snapshot_id: &str) -> Reply {
        let current = self.find_stack(caller, stack, false).await?;
        let loaded = self.load_definition(&current).await?;
        self.authorize_types(caller, &loaded)?;
        let row = self.snapshot_of(caller, &current, snapshot_id).await?;
        if row.status.as_deref() != Some(COMPLETE) {
            return Err(EngineError::not_supported("Restoring incomplete snapshot is not supported."));
        }
        let data = row.data.unwrap_or(Value::Null);
        let section = |key: &str| data.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
        let mut environment = section("environment");
        let parameters = match environment.remove("parameters") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        let mut template = data.get("template").cloned().unwrap_or_else(|| json!({}));
        self.set_restore_properties(&mut template, data.get("resources"));
        let input = DefinitionInput {
            template,
            files: section("files"),
            environment,
            environment_files: Vec::new(),
            parameters,
            stack_name: current.name.clone(),
            stack_id: current.id.clone(),
            tenant: current.tenant.clone(),
        };
        let prepared = self.prepare_definition(caller, input).await?;
        // The stack keeps its own settings (upstream builds the restored
        // stack with the current timeout and rollback).
        let settings = StackSettings {
            timeout_mins: current.timeout_mins,
            disable_rollback: current.disable_rollback,
            tags: current.tags.clone(),
        };
        self.engine_restore(caller, &current, prepared, settings).await?;
        Ok(Value::Null)
    }

    /// Upstream `restore_data`: each resource's type may set properties
    /// of its definition from its snapshot data (a server's image).
    fn set_restore_properties(&self, template: &mut Value, snapshot_resources: Option<&Value>) {
        let Some(key) = ["resources", "Resources"].into_iter().find(|k| template.get(*k).is_some()) else { return };
        let Some(resources) = template.get_mut(key).and_then(Value::as_object_mut) else { return };
        for (name, resource) in resources.iter_mut() {
            let Some(resource) = resource.as_object_mut() else { continue };
            let type_name = ["type", "Type"].iter().find_map(|k| resource.get(*k)).and_then(Value::as_str);
            let Some(plugin) = type_name.and_then(|t| self.registry.get(t)) else { continue };
            let Some(Value::Object(data)) =
                snapshot_resources.and_then(|r| r.get(name)).and_then(|r| r.get("resource_data"))
            else {
                continue;
            };
            let restored = plugin.restore_properties(data);
            if restored.is_empty() {
                continue;
            }
            let key = if resource.contains_key("Properties") { "Properties" } else { "properties" };
            if let Value::Object(props) = resource.entry(key).or_insert_with(|| json!({})) {
                props.extend(restored);
            }
        }
    }

    /// Upstream `snapshot_get_by_stack`: the caller's project's snapshot,
    /// which must be `stack`'s.
    async fn snapshot_of(
        &self,
        caller: &Caller,
        stack: &StackRow,
        snapshot_id: &str,
    ) -> Result<SnapshotRow, EngineError> {
        let row = snapshots::get(&self.db, snapshot_id)
            .await?
            .filter(|s| s.tenant == caller.project_id)
            .ok_or_else(|| EngineError::NotFound(format!("Snapshot with id {snapshot_id} not found")))?;
        if row.stack_id != stack.id {
            return Err(EngineError::SnapshotNotFound { snapshot: snapshot_id.to_string(), stack: stack.name.clone() });
        }
        Ok(row)
    }
}

/// Upstream `format_snapshot`.
fn snapshot_view(row: &SnapshotRow) -> Value {
    json!({
        "id": row.id,
        "name": row.name,
        "action": row.action,
        "status": row.status,
        "status_reason": row.status_reason,
        "data": row.data,
        "creation_time": isotime(row.created_at),
    })
}
