//! Event rows with upstream's texts; the per-stack event count is kept
//! under `max_events_per_stack`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::Engine;
use crate::store::{self, Action, NewEvent, ResourceRow, StackRow, Status};

/// How many oldest events one purge removes beyond the limit (upstream
/// purges in batches too).
const PURGE_BATCH: i64 = 200;

/// Inserts between two event counts (upstream: 2 / event_purge_batch_size).
const PURGE_CHECK_EVERY: u64 = (PURGE_BATCH / 2) as u64;

static EVENTS_WRITTEN: AtomicU64 = AtomicU64::new(0);

/// The action of a handled signal's event (upstream's `SIGNAL`: an event
/// action, not a resource action).
pub(super) const SIGNAL_EVENT: &str = "SIGNAL";

/// The event of a stack state change.
pub(super) fn stack_event_of(stack: &StackRow, action: Action, status: Status, reason: &str) -> NewEvent {
    NewEvent {
        stack_id: stack.id.clone(),
        resource_name: stack.name.clone(),
        physical_resource_id: Some(stack.id.clone()),
        resource_action: action.as_str().to_string(),
        resource_status: status.as_str().to_string(),
        resource_status_reason: reason.to_string(),
        resource_type: "OS::Heat::Stack".to_string(),
        resource_properties: None,
    }
}

/// The event of a resource state change, as the row is after it;
/// `action` is a resource action or `SIGNAL`.
pub(super) fn resource_event_of(
    row: &ResourceRow,
    action: impl AsRef<str>,
    status: Status,
    reason: &str,
    properties: Option<Value>,
) -> NewEvent {
    NewEvent {
        stack_id: row.stack_id.clone(),
        resource_name: row.name.clone(),
        physical_resource_id: row.physical_resource_id.clone(),
        resource_action: action.as_ref().to_string(),
        resource_status: status.as_str().to_string(),
        resource_status_reason: reason.to_string(),
        resource_type: row.resource_type.clone(),
        resource_properties: properties.or_else(|| row.properties_data.clone()),
    }
}

impl Engine {
    pub(super) async fn stack_event(&self, stack: &StackRow, action: Action, status: Status, reason: &str) {
        self.write_event(stack_event_of(stack, action, status, reason)).await;
        self.notifier.stack_state(stack, action, status, reason);
    }

    pub(super) async fn resource_event(
        &self,
        row: &ResourceRow,
        action: impl AsRef<str>,
        status: Status,
        reason: &str,
        properties: Option<Value>,
    ) {
        self.write_event(resource_event_of(row, action, status, reason, properties)).await;
    }

    /// Events are a record, not a control path: a failed write is logged.
    async fn write_event(&self, event: NewEvent) {
        let stack_id = event.stack_id.clone();
        if let Err(e) = store::events::insert(&self.db, &event).await {
            tracing::warn!(error = %e, stack_id, "event not stored");
            return;
        }
        self.events_written(&stack_id, 1).await;
    }

    /// Called after `n` events of the stack were stored (also by the
    /// writers that store events in their own transactions): keeps the
    /// stack under `max_events_per_stack`. Counting a stack's events on
    /// every insert is O(events) per event; upstream (db api
    /// event_create) counts and purges on average once per batch/2
    /// inserts, and so does this engine.
    pub(super) async fn events_written(&self, stack_id: &str, n: u64) {
        let keep = self.settings.max_events_per_stack;
        let first = EVENTS_WRITTEN.fetch_add(n, Ordering::Relaxed);
        let crossed = (first..first + n).any(|i| i % PURGE_CHECK_EVERY == 0);
        if keep > 0 && crossed {
            if let Err(e) = store::events::purge_oldest(&self.db, stack_id, keep, PURGE_BATCH).await {
                tracing::warn!(error = %e, stack_id, "event purge failed");
            }
        }
    }
}
