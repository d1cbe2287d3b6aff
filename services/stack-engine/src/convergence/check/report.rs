//! Reporting a node: its last write (the lock released, or the row
//! removed) commits in one transaction with its reports to the
//! successors' sync points, under the row's CAS; the successors the
//! reports completed are dispatched, and the stack completes when its own
//! sync point does.

use std::sync::Arc;

use keelson_db as db;
use serde_json::{json, Map, Value};

use super::super::dispatch::CheckResourceMsg;
use super::super::events;
use super::super::graph::{node_label, Node};
use super::super::traversal::graph_key;
use super::super::Engine;
use super::lock::EventSpec;
use crate::definition::ResourceFacts;
use crate::error::EngineError;
use crate::store::sync_points::Report;
use crate::store::{self, MergeOutcome, NewEvent, ResourceChange, ResourceRow, StackRow};

/// The last write of a node, committed with its reports.
pub(super) struct LastWrite {
    id: i64,
    /// The CAS guard: the holder (None: unlocked) and version the row
    /// must still be at.
    engine: Option<String>,
    atomic_key: i64,
    pub(super) kind: LastKind,
    /// Data entries the action set or changed.
    pub(super) data: Vec<(String, String)>,
    event: Option<NewEvent>,
}

pub(super) enum LastKind {
    /// The change, the lock released (boxed: a change is large, a delete
    /// holds nothing).
    Update(Box<ResourceChange>),
    /// The row and its data removed (a cleanup node's delete).
    Delete,
}

/// What committing a node's last write with its reports did.
enum Committed {
    Applied(Vec<MergeOutcome>),
    /// The row was not at the expected holder and version.
    CasLost,
    /// The batched reports did not apply as a whole: go one by one.
    Unbatchable,
}

impl LastWrite {
    /// The last write of `row` (the lock released), to commit with the
    /// node's reports; answers it and the row as it will be.
    pub(super) fn update(
        row: &ResourceRow,
        change: ResourceChange,
        data: Vec<(String, String)>,
        event: Option<EventSpec<'_>>,
    ) -> (LastWrite, ResourceRow) {
        let now = db::now();
        let change = ResourceChange { engine_id: Some(None), updated_at: Some(now), ..change };
        let mut after = row.clone();
        change.apply_to(&mut after, now);
        let event = event.map(|e| events::resource_event_of(&after, e.action, e.status, e.reason, e.properties));
        let last = LastWrite {
            id: row.id,
            engine: row.engine_id.clone(),
            atomic_key: row.atomic_key,
            kind: LastKind::Update(Box::new(change)),
            data,
            event,
        };
        (last, after)
    }

    /// The removal of `row` (unlocked as read, or held by this check), to
    /// commit with the node's reports.
    pub(super) fn delete(row: &ResourceRow) -> LastWrite {
        LastWrite {
            id: row.id,
            engine: row.engine_id.clone(),
            atomic_key: row.atomic_key,
            kind: LastKind::Delete,
            data: Vec::new(),
            event: None,
        }
    }
}

impl Engine {
    /// Commits a node's last write together with its reports to each
    /// successor (and the stack's sync point for roots), then fires the
    /// successors this report completed. Answers false, having written
    /// nothing, when the node's only write found the row changed since
    /// the check read it.
    pub(super) async fn propagate(
        self: &Arc<Self>,
        stack: &StackRow,
        row: &ResourceRow,
        is_update: bool,
        data: Value,
        last: Option<LastWrite>,
    ) -> Result<bool, EngineError> {
        let graph = self.graph_of(stack).await?;
        let key: Node = graph_key(&graph, row, is_update);
        let label = node_label(key);
        let traversal = &stack.current_traversal;
        let mut successors = graph.successors(key);
        // Cleanup successors first, update successors last (upstream);
        // the order in which they are fired.
        successors.sort_by_key(|n| (n.1, n.0));
        let reports: Vec<Report> = if successors.is_empty() {
            vec![Report {
                entity_id: stack.id.clone(),
                is_update: true,
                input: Value::Null,
                expected_required: graph.roots().len() as i64,
            }]
        } else {
            successors
                .iter()
                .map(|n| Report {
                    entity_id: n.0.to_string(),
                    is_update: n.1,
                    input: if n.1 { data.clone() } else { json!({ "replacement": row.id }) },
                    expected_required: graph.predecessors(*n).len() as i64,
                })
                .collect()
        };
        let outcomes = match self.commit_reports(traversal, &label, &reports, last.as_ref()).await? {
            Some(outcomes) => outcomes,
            None => {
                let held = last.as_ref().and_then(|l| l.engine.clone()).is_some();
                if held {
                    return Err(EngineError::internal(format!("lost the lock of resource {}", row.id)));
                }
                return Ok(false);
            }
        };
        if last.as_ref().is_some_and(|l| l.event.is_some()) {
            self.events_written(&stack.id, 1).await;
        }
        let mut gone = false;
        let mut stack_ready = false;
        let mut ready = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                MergeOutcome::Ready(inputs) => match successors.get(i) {
                    Some(next) => ready.push(CheckResourceMsg {
                        stack_id: stack.id.clone(),
                        resource_id: next.0,
                        traversal_id: traversal.clone(),
                        is_update: next.1,
                        input: inputs,
                    }),
                    None => stack_ready = true,
                },
                MergeOutcome::Waiting => {}
                MergeOutcome::Gone => gone = true,
            }
        }
        if ready.len() == 1 {
            if let Some(msg) = ready.pop() {
                self.dispatcher.dispatch_continuation(self, msg).await;
            }
        } else {
            // A fan-out's successors go out at once, not one round trip
            // after the other.
            futures::future::join_all(ready.into_iter().map(|msg| self.dispatcher.dispatch(self, msg))).await;
        }
        if stack_ready {
            self.mark_complete(&stack.id, traversal).await?;
        }
        if gone {
            self.retrigger(&stack.id, row.id, is_update).await?;
        }
        Ok(true)
    }

    /// One transaction (retried on deadlock): the node's last write under
    /// its CAS, then the reports, batched when they can be. None: the CAS
    /// failed and nothing was written.
    async fn commit_reports(
        &self,
        traversal: &str,
        label: &str,
        reports: &[Report],
        last: Option<&LastWrite>,
    ) -> Result<Option<Vec<MergeOutcome>>, EngineError> {
        let mut one_by_one = false;
        loop {
            let committed = db::retrying("check completion", || async {
                let mut tx = self.db.begin().await?;
                if let Some(last) = last {
                    if !apply_last_tx(&mut tx, last).await? {
                        return Ok(Committed::CasLost);
                    }
                }
                let outcomes = if one_by_one {
                    let mut out = Vec::with_capacity(reports.len());
                    for r in reports {
                        out.push(store::sync_points::report_tx(&mut tx, traversal, label, r).await?);
                    }
                    out
                } else {
                    match store::sync_points::report_all_tx(&mut tx, traversal, label, reports).await? {
                        Some(out) => out,
                        // Dropping the transaction rolls the batch back.
                        None => return Ok(Committed::Unbatchable),
                    }
                };
                tx.commit().await?;
                Ok(Committed::Applied(outcomes))
            })
            .await?;
            match committed {
                Committed::Applied(outcomes) => return Ok(Some(outcomes)),
                Committed::CasLost => return Ok(None),
                Committed::Unbatchable => one_by_one = true,
            }
        }
    }

    /// The traversal moved on while this node worked: check the resource
    /// again in the latest traversal if that traversal already waits for
    /// it (its own attempt found the lock held and dropped out).
    pub(in crate::convergence) async fn retrigger(
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
        let graph = self.graph_of(&stack).await?;
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
        let ready = match store::sync_points::get(&self.db, &key.0.to_string(), &stack.current_traversal, key.1).await?
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

/// A node's last write in the caller's transaction; false when the CAS
/// failed (the caller drops the transaction).
async fn apply_last_tx(tx: &mut db::Tx, last: &LastWrite) -> Result<bool, db::DbError> {
    let applied = match &last.kind {
        LastKind::Update(change) => {
            let applied = store::resources::update_cas_tx(
                tx,
                last.id,
                last.engine.as_deref(),
                last.atomic_key,
                (**change).clone(),
            )
            .await?;
            if applied {
                store::resources::data_set_many_tx(tx, last.id, &last.data).await?;
            }
            applied
        }
        LastKind::Delete => {
            store::resources::delete_cas_tx(tx, last.id, last.engine.as_deref(), last.atomic_key).await?
        }
    };
    if applied {
        if let Some(e) = &last.event {
            store::events::insert_tx(tx, e).await?;
        }
    }
    Ok(applied)
}

/// What an update node sends to the nodes that need it.
pub(super) fn node_data(row: &ResourceRow, facts: &ResourceFacts) -> Value {
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
