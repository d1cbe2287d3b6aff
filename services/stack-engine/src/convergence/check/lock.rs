//! The row lock of a check: taken by the first write's CAS on the row as
//! read, a dead engine's lock stolen (the resource FAILED), a live
//! holder left alone; and the writes made while holding it.

use std::sync::Arc;

use keelson_db as db;
use serde_json::Value;

use super::super::events;
use super::super::Engine;
use super::Outcome;
use crate::error::EngineError;
use crate::store::{self, Action, ResourceChange, ResourceRow, StackRow, Status};

/// The event of a resource state change.
pub(super) struct EventSpec<'a> {
    pub(super) action: Action,
    pub(super) status: Status,
    pub(super) reason: &'a str,
    pub(super) properties: Option<Value>,
}

impl<'a> EventSpec<'a> {
    pub(super) fn new(action: Action, status: Status, reason: &'a str, properties: Option<Value>) -> Self {
        EventSpec { action, status, reason, properties }
    }
}

/// Whether a lock may be taken.
enum Lockable {
    /// Unlocked as read: the first write takes it.
    Free(ResourceRow),
    /// A live engine (maybe this one) holds it.
    Held(ResourceRow),
    /// A dead engine held it; it was just stolen (the row changed).
    Stolen,
}

impl Engine {
    /// Takes the row's lock for this check, as far as a read can: a free
    /// row comes back (its first write takes the lock); a held one ends
    /// the check (the holder retriggers; an older traversal's nested
    /// update is preempted), a stolen one is read again.
    pub(super) async fn take_lock(
        self: &Arc<Self>,
        stack: &StackRow,
        row: ResourceRow,
    ) -> Result<Result<ResourceRow, Outcome>, EngineError> {
        match self.lockable(row).await? {
            Lockable::Free(row) => Ok(Ok(row)),
            Lockable::Held(row) => {
                self.preempt_nested_update(stack, &row).await;
                Ok(Err(Outcome::Locked))
            }
            Lockable::Stolen => Ok(Err(Outcome::Raced)),
        }
    }

    /// Whether the row's lock may be taken: a lock of a dead engine is
    /// stolen (the resource marked FAILED "Worker went down during
    /// resource ACTION"), and the row must then be read again.
    async fn lockable(self: &Arc<Self>, row: ResourceRow) -> Result<Lockable, EngineError> {
        let Some(holder) = row.engine_id.clone() else {
            return Ok(Lockable::Free(row));
        };
        if holder == self.engine_id || self.dispatcher.is_alive(self, &holder).await {
            return Ok(Lockable::Held(row));
        }
        let act = if row.action == Action::Init { Action::Create } else { row.action };
        let reason = format!("Worker went down during resource {act}");
        if store::resources::steal_lock(
            &self.db,
            row.id,
            &holder,
            ResourceChange::state(act, Status::Failed, reason.clone()),
        )
        .await?
        {
            if let Some(stolen) = store::resources::get(&self.db, row.id).await? {
                self.resource_event(&stolen, act, Status::Failed, &reason, None).await;
            }
        }
        Ok(Lockable::Stolen)
    }

    /// One write of `row` under the lock CAS, with the data entries and
    /// the event it goes with, in one transaction (retried on deadlock).
    /// A row unlocked as read is locked by the write itself (`hold`) or
    /// written and left unlocked; a row this check holds keeps its lock
    /// only with `hold`. The row is brought up to date in memory. Answers
    /// false when a row unlocked as read is no longer at that version
    /// (the check reads it again); losing a lock this check held is an
    /// error (a live engine stole it).
    pub(super) async fn write_row(
        &self,
        row: &mut ResourceRow,
        change: ResourceChange,
        hold: bool,
        data: &[(String, String)],
        event: Option<EventSpec<'_>>,
    ) -> Result<bool, EngineError> {
        let now = db::now();
        let change =
            ResourceChange { engine_id: Some(hold.then(|| self.engine_id.clone())), updated_at: Some(now), ..change };
        let mut after = row.clone();
        change.apply_to(&mut after, now);
        let event = event.map(|e| events::resource_event_of(&after, e.action, e.status, e.reason, e.properties));
        let expected = row.engine_id.clone();
        let applied = db::retrying("resource write", || async {
            let mut tx = self.db.begin().await?;
            if !store::resources::update_cas_tx(&mut tx, row.id, expected.as_deref(), row.atomic_key, change.clone())
                .await?
            {
                // Dropping the transaction rolls it back.
                return Ok(false);
            }
            store::resources::data_set_many_tx(&mut tx, row.id, data).await?;
            if let Some(e) = &event {
                store::events::insert_tx(&mut tx, e).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await?;
        if !applied {
            if expected.is_some() {
                return Err(EngineError::internal(format!("lost the lock of resource {}", row.id)));
            }
            return Ok(false);
        }
        *row = after;
        if event.is_some() {
            self.events_written(&row.stack_id, 1).await;
        }
        Ok(true)
    }

    /// ACTION_IN_PROGRESS "state changed" and its event, taking the lock
    /// of a row unlocked as read. False: the row changed since the read.
    pub(super) async fn begin(
        &self,
        row: &mut ResourceRow,
        act: Action,
        properties: Option<Value>,
    ) -> Result<bool, EngineError> {
        let reason = "state changed";
        // A resource being created starts with its template metadata (set
        // on the row by the caller).
        let creating = act == Action::Create || act == Action::Adopt;
        let change = ResourceChange {
            rsrc_metadata: (creating && row.rsrc_metadata.is_some()).then(|| row.rsrc_metadata.clone()),
            ..ResourceChange::state(act, Status::InProgress, reason)
        };
        self.write_row(row, change, true, &[], Some(EventSpec::new(act, Status::InProgress, reason, properties))).await
    }

    /// Upstream `handle_preempt` of a nested-stack resource: a resource an
    /// older traversal still holds, waiting for its nested stack, would
    /// keep this traversal waiting as long; the nested stack's update is
    /// cancelled (without rollback) so that the older action ends and this
    /// traversal can take the resource over.
    async fn preempt_nested_update(&self, stack: &StackRow, row: &ResourceRow) {
        // Held for this very template: nothing older to preempt.
        if row.current_template_id == Some(stack.raw_template_id) {
            return;
        }
        let Some(child_id) = row.physical_resource_id.as_deref().filter(|id| !id.is_empty()) else {
            return;
        };
        let runs_nested = matches!(self.plugin_of_row(stack, row).await, Some((_, p)) if p.runs_nested_stack());
        if !runs_nested {
            return;
        }
        let Some(this) = self.this.upgrade() else { return };
        match this.cancel_update(child_id, false).await {
            Ok(()) => tracing::info!(
                stack_id = stack.id,
                resource = row.name,
                child_id,
                "preempted the nested stack's update"
            ),
            // Not in progress (any more): nothing to preempt.
            Err(e) => tracing::debug!(error = %e, child_id, "nested stack not preempted"),
        }
    }
}
