//! Event rows with upstream's texts; the per-stack event count is kept
//! under `max_events_per_stack`.

use serde_json::Value;

use super::Engine;
use crate::store::{self, NewEvent, ResourceRow, StackRow};

/// How many oldest events one purge removes beyond the limit (upstream
/// purges in batches too).
const PURGE_BATCH: i64 = 200;

impl Engine {
    pub(super) async fn stack_event(
        &self,
        stack: &StackRow,
        action: &str,
        status: &str,
        reason: &str,
    ) {
        self.write_event(NewEvent {
            stack_id: stack.id.clone(),
            resource_name: stack.name.clone(),
            physical_resource_id: Some(stack.id.clone()),
            resource_action: action.to_string(),
            resource_status: status.to_string(),
            resource_status_reason: reason.to_string(),
            resource_type: "OS::Heat::Stack".to_string(),
            resource_properties: None,
        })
        .await;
    }

    pub(super) async fn resource_event(
        &self,
        row: &ResourceRow,
        action: &str,
        status: &str,
        reason: &str,
        properties: Option<Value>,
    ) {
        self.write_event(NewEvent {
            stack_id: row.stack_id.clone(),
            resource_name: row.name.clone(),
            physical_resource_id: row.physical_resource_id.clone(),
            resource_action: action.to_string(),
            resource_status: status.to_string(),
            resource_status_reason: reason.to_string(),
            resource_type: row.resource_type.clone(),
            resource_properties: properties.or_else(|| row.properties_data.clone()),
        })
        .await;
    }

    /// Events are a record, not a control path: a failed write is logged.
    async fn write_event(&self, event: NewEvent) {
        let stack_id = event.stack_id.clone();
        if let Err(e) = store::events::insert(&self.db, &event).await {
            tracing::warn!(error = %e, stack_id, "event not stored");
            return;
        }
        let keep = self.settings.max_events_per_stack;
        if keep > 0 {
            if let Err(e) =
                store::events::purge_oldest(&self.db, &stack_id, keep, PURGE_BATCH).await
            {
                tracing::warn!(error = %e, stack_id, "event purge failed");
            }
        }
    }
}
