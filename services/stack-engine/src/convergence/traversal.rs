//! Starting, finishing and stopping traversals (upstream stack.py:
//! converge_stack, _converge_create_or_update, mark_complete/failed,
//! rollback, purge_db; worker.py stop_traversal).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Map;

use super::dispatch::CheckResourceMsg;
use super::graph::{Node, TraversalGraph};
use super::Engine;
use crate::definition::{empty_template, StackDefinition};
use crate::error::EngineError;
use crate::store::{self, Action, NewResource, ResourceRow, StackRow, StackStateChange, Status};

/// Stack settings a converge may change along with the template.
#[derive(Debug, Clone, Default)]
pub(super) struct StackChanges {
    pub timeout_mins: Option<Option<i64>>,
    pub disable_rollback: Option<bool>,
    pub tags: Option<Option<Vec<String>>>,
    pub params: Option<Map<String, serde_json::Value>>,
}

/// Upstream `_get_best_existing_rsrc_db` scoring.
fn score(row: &ResourceRow, template_id: i64, prev_template_id: Option<i64>) -> i64 {
    let mut s = 0;
    if row.status == Status::Failed {
        s -= 30;
    }
    if row.action == Action::Delete {
        s -= 50;
    }
    if row.replaced_by.is_some() {
        s -= 1;
    }
    if prev_template_id.is_some() && row.current_template_id == prev_template_id {
        s += 5;
    }
    if row.current_template_id == Some(template_id) {
        s += 10;
    }
    s
}

impl Engine {
    /// Starts a traversal of `action` over template `template_id`, CAS on
    /// the stack's traversal being `expected`. Answers false when another
    /// writer moved the stack on first (this call then gives up).
    pub(super) async fn converge_stack(
        self: &Arc<Self>,
        stack: &StackRow,
        template_id: i64,
        stack_action: Action,
        expected: &str,
        changes: StackChanges,
    ) -> Result<bool, EngineError> {
        let traversal = uuid::Uuid::new_v4().to_string();
        let reason = format!("Stack {stack_action} started");
        let prev = if matches!(stack_action, Action::Create | Action::Adopt) {
            None
        } else if template_id != stack.raw_template_id {
            Some(Some(stack.raw_template_id))
        } else {
            None
        };
        let change = StackStateChange {
            current_traversal: Some(traversal.clone()),
            raw_template_id: Some(template_id),
            prev_raw_template_id: prev,
            timeout_mins: changes.timeout_mins,
            disable_rollback: changes.disable_rollback,
            tags: changes.tags,
            params: changes.params,
            ..StackStateChange::new(stack_action, Status::InProgress, reason.clone())
        };
        if !store::stacks::set_state(&self.db, &stack.id, expected, change).await? {
            return Ok(false);
        }
        let Some(stack) = store::stacks::get(&self.db, &stack.id).await? else {
            return Ok(false);
        };
        self.stack_event(&stack, stack_action, Status::InProgress, &reason).await;
        store::sync_points::delete_for_stack_except(&self.db, &stack.id, &traversal).await?;

        let definition = self.definitions.get(&self.db, &stack, template_id, &self.settings.region_name).await?;
        let graph = self.build_graph(&stack, &definition, template_id).await?;
        if !store::stacks::set_current_deps(&self.db, &stack.id, &traversal, &graph.to_json()).await? {
            return Ok(true);
        }
        let mut points: Vec<(String, bool, i64)> =
            graph.nodes().map(|n| (n.0.to_string(), n.1, graph.predecessors(n).len() as i64)).collect();
        points.push((stack.id.clone(), true, graph.roots().len() as i64));
        store::sync_points::create_all(&self.db, &stack.id, &traversal, &points).await?;
        self.remember_graph(&traversal, Arc::new(graph.clone()));

        let leaves = graph.leaves();
        if leaves.is_empty() {
            self.mark_complete(&stack.id, &traversal).await?;
            return Ok(true);
        }
        // Every leaf at once (no per-leaf sleep, no round trip after round
        // trip), in the graph's order.
        futures::future::join_all(leaves.into_iter().map(|(resource_id, is_update)| {
            let msg = CheckResourceMsg {
                stack_id: stack.id.clone(),
                resource_id,
                traversal_id: traversal.clone(),
                is_update,
                input: Map::new(),
            };
            self.dispatcher.dispatch(self, msg)
        }))
        .await;
        Ok(true)
    }

    /// Picks (or creates) the row of every resource of the definition and
    /// builds the update + cleanup graph over them and every other row.
    async fn build_graph(
        &self,
        stack: &StackRow,
        def: &StackDefinition,
        template_id: i64,
    ) -> Result<TraversalGraph, EngineError> {
        let rows: Vec<ResourceRow> = store::resources::list(&self.db, &stack.id)
            .await?
            .into_iter()
            .filter(|r| !(r.action == Action::Delete && r.status == Status::Complete))
            .collect();
        let mut by_name: HashMap<&str, Vec<&ResourceRow>> = HashMap::new();
        for r in &rows {
            by_name.entry(r.name.as_str()).or_default().push(r);
        }
        let mut chosen: BTreeMap<String, i64> = BTreeMap::new();
        let mut missing: Vec<NewResource> = Vec::new();
        for defn in &def.resources {
            let best = by_name
                .get(defn.name.as_str())
                .into_iter()
                .flatten()
                .max_by_key(|r| (score(r, template_id, stack.prev_raw_template_id), r.id));
            match best {
                Some(r) => {
                    chosen.insert(defn.name.clone(), r.id);
                }
                None => missing.push(NewResource {
                    stack_id: stack.id.clone(),
                    root_stack_id: stack.id.clone(),
                    name: defn.name.clone(),
                    resource_type: defn.type_name.clone(),
                    current_template_id: Some(template_id),
                    action: Action::Init,
                    status: Status::Complete,
                    ..Default::default()
                }),
            }
        }
        // A new stack's rows in one transaction, not one commit each.
        for created in store::resources::insert_many(&self.db, &missing).await? {
            chosen.insert(created.name, created.id);
        }
        let mut graph = TraversalGraph::default();
        for id in chosen.values() {
            graph.add_node((*id, true));
        }
        for defn in &def.resources {
            let Some(&id) = chosen.get(&defn.name) else {
                continue;
            };
            for req in def.requires(&self.registry, &defn.name) {
                if let Some(&req_id) = chosen.get(&req) {
                    graph.add_edge((req_id, true), (id, true));
                }
            }
        }
        // Cleanup nodes only for rows that existed before this traversal
        // (upstream: rows created now have nothing to clean up).
        let by_id: HashMap<i64, &ResourceRow> = rows.iter().map(|r| (r.id, r)).collect();
        for r in &rows {
            graph.add_node((r.id, false));
        }
        for r in &rows {
            for q in &r.requires {
                if by_id.contains_key(q) {
                    graph.add_edge((r.id, false), (*q, false));
                }
            }
            if let Some(old) = r.replaces {
                if by_id.contains_key(&old) {
                    graph.add_edge((r.id, false), (old, false));
                }
                // keelson's, not upstream's: a row brought back in place
                // of its replacement (a rollback) takes back what it gave
                // up for it (`restore_prev_rsrc`: a server's ports) from
                // the replacement while that still exists, so the
                // replacement is cleaned up after. Upstream runs both at
                // once and wins the race only through its slower cleanup.
                // No cycle: no update node waits for a cleanup node.
                graph.add_edge((old, true), (r.id, false));
            }
            graph.add_edge((r.id, true), (r.id, false));
        }
        Ok(graph)
    }

    pub(super) fn remember_graph(&self, traversal: &str, graph: Arc<TraversalGraph>) {
        if let Ok(mut map) = self.graphs.lock() {
            if map.len() > 128 {
                map.clear();
            }
            map.insert(traversal.to_string(), graph);
        }
    }

    /// The graph of the stack's current traversal: cached per traversal
    /// (a traversal's graph never changes), else parsed from the stack row
    /// when it was read with its `current_deps`, else read for that
    /// traversal. An empty graph (not cached) when the stack moved on.
    pub(super) async fn graph_of(&self, stack: &StackRow) -> Result<Arc<TraversalGraph>, EngineError> {
        if let Some(g) = self.graphs.lock().ok().and_then(|m| m.get(&stack.current_traversal).cloned()) {
            return Ok(g);
        }
        let parsed = match &stack.current_deps {
            Some(deps) => Some(TraversalGraph::from_json(deps)),
            None => store::stacks::current_deps(&self.db, &stack.id, &stack.current_traversal)
                .await?
                .map(|deps| TraversalGraph::from_json(&deps)),
        };
        let Some(g) = parsed else {
            return Ok(Arc::new(TraversalGraph::default()));
        };
        let g = Arc::new(g);
        self.remember_graph(&stack.current_traversal, g.clone());
        Ok(g)
    }

    /// Every root reported: ACTION_COMPLETE (DELETE_COMPLETE with the
    /// soft delete), its event and the traversal's sync points gone, in
    /// one transaction under the traversal CAS; then the replaced
    /// template.
    pub(super) async fn mark_complete(&self, stack_id: &str, traversal: &str) -> Result<(), EngineError> {
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Ok(());
        };
        if stack.current_traversal != traversal {
            return Ok(());
        }
        if stack.action == Action::Delete {
            // Heat's purge_db: the trust and the stack-user project go
            // with the root stack; a project that cannot be deleted fails
            // the DELETE.
            if let Err(reason) = self.delete_credentials(&stack).await {
                // What mark_failed does for a DELETE (which never rolls
                // back).
                let change = StackStateChange::new(Action::Delete, Status::Failed, reason.clone());
                if store::stacks::set_state(&self.db, stack_id, traversal, change).await? {
                    self.stack_settled(stack_id);
                    self.stack_event(&stack, Action::Delete, Status::Failed, &reason).await;
                    self.purge_traversal(stack_id, traversal).await?;
                }
                return Ok(());
            }
        }
        let reason = format!("Stack {} completed successfully", stack.action);
        let stale_template = stack.prev_raw_template_id.filter(|p| *p != stack.raw_template_id);
        let event = super::events::stack_event_of(&stack, stack.action, Status::Complete, &reason);
        let applied = keelson_db::retrying("stack completion", || async {
            let mut tx = self.db.begin().await?;
            let applied = if stack.action == Action::Delete {
                store::stacks::complete_delete_tx(&mut tx, stack_id, traversal, &reason).await?
            } else {
                let mut change = StackStateChange::new(stack.action, Status::Complete, reason.clone());
                if stack.prev_raw_template_id.is_some() {
                    change.prev_raw_template_id = Some(None);
                }
                store::stacks::set_state_tx(&mut tx, stack_id, traversal, change).await?
            };
            if !applied {
                return Ok(false);
            }
            store::events::insert_tx(&mut tx, &event).await?;
            store::sync_points::delete_for_traversal_tx(&mut tx, stack_id, traversal).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await?;
        if !applied {
            return Ok(());
        }
        self.stack_settled(stack_id);
        self.events_written(stack_id, 1).await;
        self.notifier.stack_state(&stack, stack.action, Status::Complete, &reason);
        if let Some(old) = stale_template {
            self.definitions.forget(old);
            if let Err(e) = store::templates::delete(&self.db, old).await {
                tracing::debug!(error = %e, "previous template kept");
            }
        }
        Ok(())
    }

    /// A resource failed (or the stack timed out): ACTION_FAILED with CAS,
    /// then rollback or purge. False when the traversal was stale.
    pub(super) async fn mark_failed(
        self: &Arc<Self>,
        stack_id: &str,
        traversal: &str,
        reason: &str,
    ) -> Result<bool, EngineError> {
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Ok(false);
        };
        if stack.current_traversal != traversal || traversal.is_empty() {
            return Ok(false);
        }
        let change = StackStateChange::new(stack.action, Status::Failed, reason);
        if !store::stacks::set_state(&self.db, stack_id, traversal, change).await? {
            return Ok(false);
        }
        self.stack_settled(stack_id);
        self.stack_event(&stack, stack.action, Status::Failed, reason).await;
        let rolls_back = !stack.disable_rollback
            && matches!(stack.action, Action::Create | Action::Update | Action::Adopt | Action::Restore);
        if rolls_back {
            // The stack as this traversal saw it: when two failures race,
            // both mark it FAILED, but only one rollback wins the CAS on
            // the traversal (a fresh read could show the other's ROLLBACK
            // and roll back to the empty template).
            self.rollback(&stack).await?;
        } else {
            self.purge_traversal(stack_id, traversal).await?;
        }
        Ok(true)
    }

    /// Converges to the previous template (the empty one after a create).
    pub(super) async fn rollback(self: &Arc<Self>, stack: &StackRow) -> Result<bool, EngineError> {
        let template_id = match (stack.action, stack.prev_raw_template_id) {
            (Action::Update | Action::Restore, Some(prev)) => prev,
            _ => self.store_template(&empty_template(), &Map::new(), &serde_json::json!({})).await?,
        };
        self.converge_stack(stack, template_id, Action::Rollback, &stack.current_traversal, StackChanges::default())
            .await
    }

    /// A failed traversal ends: current_traversal := '' so its workers
    /// stop propagating; its sync points go.
    async fn purge_traversal(&self, stack_id: &str, traversal: &str) -> Result<(), EngineError> {
        if let Some(stack) = store::stacks::get(&self.db, stack_id).await? {
            let change = StackStateChange {
                current_traversal: Some(String::new()),
                ..StackStateChange::new(stack.action, stack.status, stack.status_reason.clone())
            };
            store::stacks::set_state(&self.db, stack_id, traversal, change).await?;
        }
        store::sync_points::delete_for_traversal(&self.db, stack_id, traversal).await?;
        Ok(())
    }

    /// Upstream stop_traversal: a new traversal id (CAS), ACTION_FAILED
    /// "Stack ACTION cancelled", old sync points deleted. Running actions
    /// are not interrupted: they finish and propagate no further (delete
    /// cancels them itself). Answers the new traversal id (None: lost the
    /// race).
    pub(super) async fn stop_traversal(self: &Arc<Self>, stack: &StackRow) -> Result<Option<String>, EngineError> {
        let traversal = uuid::Uuid::new_v4().to_string();
        let reason = format!("Stack {} cancelled", stack.action);
        let change = StackStateChange {
            current_traversal: Some(traversal.clone()),
            ..StackStateChange::new(stack.action, Status::Failed, reason.clone())
        };
        if !store::stacks::set_state(&self.db, &stack.id, &stack.current_traversal, change).await? {
            return Ok(None);
        }
        self.stack_event(stack, stack.action, Status::Failed, &reason).await;
        store::sync_points::delete_for_stack_except(&self.db, &stack.id, &traversal).await?;
        Ok(Some(traversal))
    }

    /// A settled stack's traversal handed to a new id, its state and
    /// times as they were: the old traversal's checks stop at their next
    /// read. A failed create's other actions may still be running in it;
    /// a delete retires it before cancelling them (see `cancel`). Answers
    /// the new traversal id (None: lost the race).
    pub(super) async fn retire_traversal(&self, stack: &StackRow) -> Result<Option<String>, EngineError> {
        let traversal = uuid::Uuid::new_v4().to_string();
        let change = StackStateChange {
            current_traversal: Some(traversal.clone()),
            updated_at: stack.updated_at,
            ..StackStateChange::new(stack.action, stack.status, stack.status_reason.clone())
        };
        if !store::stacks::set_state(&self.db, &stack.id, &stack.current_traversal, change).await? {
            return Ok(None);
        }
        Ok(Some(traversal))
    }

    pub(super) async fn store_template(
        &self,
        template: &serde_json::Value,
        files: &Map<String, serde_json::Value>,
        environment: &serde_json::Value,
    ) -> Result<i64, EngineError> {
        Ok(store::templates::store(&self.db, template, files, environment).await?)
    }
}

/// The node a resource's progress is reported under: a replacement row
/// not in the graph impersonates the row it replaces (upstream).
pub(super) fn graph_key(graph: &TraversalGraph, row: &ResourceRow, is_update: bool) -> Node {
    let own = (row.id, is_update);
    if graph.contains(own) {
        return own;
    }
    match row.replaces {
        Some(old) if graph.contains((old, is_update)) => (old, is_update),
        _ => own,
    }
}
