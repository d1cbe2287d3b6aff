//! Event rows with upstream's texts; the per-stack event count is kept
//! under `max_events_per_stack`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::Engine;
use crate::store::{self, NewEvent, ResourceRow, StackRow};

/// How many oldest events one purge removes beyond the limit (upstream
/// purges in batches too).
const PURGE_BATCH: i64 = 200;

/// Inserts between two event counts (upstream: 2 / event_purge_batch_size).
const PURGE_CHECK_EVERY: u64 = (PURGE_BATCH / 2) as u64;

static EVENTS_WRITTEN: AtomicU64 = AtomicU64::new(0);

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
        // Counting a stack's events on every insert is O(events) per
        // event; upstream (db api event_create) counts and purges on
        // average once per batch/2 inserts, and so does this engine.
        let nth = EVENTS_WRITTEN.fetch_add(1, Ordering::Relaxed);
        if keep > 0 && nth % PURGE_CHECK_EVERY == 0 {
            if let Err(e) =
                store::events::purge_oldest(&self.db, &stack_id, keep, PURGE_BATCH).await
            {
                tracing::warn!(error = %e, stack_id, "event purge failed");
            }
        }
    }
}
