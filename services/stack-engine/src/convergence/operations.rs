//! The engine operations the service layer calls. Each starts (or stops)
//! a traversal and returns at once: the REST call never waits for
//! resources.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::traversal::StackChanges;
use super::Engine;
use crate::definition::{empty_template, LiveContext, ResourceFacts, StackDefinition};
use crate::store::{self, action, status, ResourceChange, StackRow};
use crate::EngineError;

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

fn user_params(environment: &Value) -> Map<String, Value> {
    environment
        .get("parameters")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
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
        let mut tx = self.db.begin().await?;
        let template_id =
            store::templates::insert(&mut tx, &new.template, &new.files, &new.environment).await?;
        let row = StackRow {
            id: new.id.clone(),
            name: new.name.clone(),
            raw_template_id: template_id,
            tenant: new.tenant.clone(),
            username: new.username.clone(),
            user_id: new.user_id.clone(),
            timeout_mins: new.timeout_mins,
            disable_rollback: new.disable_rollback,
            tags: new.tags.clone(),
            params: user_params(&new.environment),
            action: action::INIT.to_string(),
            status: status::COMPLETE.to_string(),
            ..Default::default()
        };
        store::stacks::insert(&mut tx, &row).await?;
        tx.commit().await?;
        self.converge_stack(
            &row,
            template_id,
            action::CREATE,
            "",
            StackChanges::default(),
        )
        .await?;
        self.live_stack(&new.id).await
    }

    /// Starts an UPDATE traversal to the new definition; a traversal in
    /// progress is superseded (its workers retrigger into this one).
    pub async fn update_stack(
        self: &Arc<Self>,
        stack_id: &str,
        new: NewDefinition,
    ) -> Result<(), EngineError> {
        let template_id = self
            .store_template(&new.template, &new.files, &new.environment)
            .await?;
        for _ in 0..3 {
            let stack = self.live_stack(stack_id).await?;
            if matches!(stack.action.as_str(), action::SUSPEND | action::DELETE) {
                return Err(EngineError::not_supported(format!(
                    "Updating a stack when it is {}",
                    stack.state()
                )));
            }
            let changes = StackChanges {
                timeout_mins: Some(new.timeout_mins),
                disable_rollback: Some(new.disable_rollback),
                tags: Some(new.tags.clone()),
                params: Some(user_params(&new.environment)),
            };
            if self
                .converge_stack(
                    &stack,
                    template_id,
                    action::UPDATE,
                    &stack.current_traversal,
                    changes,
                )
                .await?
            {
                return Ok(());
            }
        }
        Err(EngineError::action_in_progress(stack_id, action::UPDATE))
    }

    /// Stops a traversal in progress (cancelling running actions), then
    /// converges to the empty template with DELETE.
    pub async fn delete_stack(self: &Arc<Self>, stack_id: &str) -> Result<(), EngineError> {
        let template_id = self
            .store_template(&empty_template(), &Map::new(), &serde_json::json!({}))
            .await?;
        for _ in 0..3 {
            let mut stack = self.live_stack(stack_id).await?;
            if stack.action == action::DELETE && stack.status == status::COMPLETE {
                return Err(EngineError::stack_not_found(stack_id));
            }
            if stack.status == status::IN_PROGRESS && !stack.current_traversal.is_empty() {
                match self.stop_traversal(&stack).await? {
                    Some(t) => stack.current_traversal = t,
                    None => continue,
                }
            }
            if self
                .converge_stack(
                    &stack,
                    template_id,
                    action::DELETE,
                    &stack.current_traversal,
                    StackChanges::default(),
                )
                .await?
            {
                return Ok(());
            }
        }
        Err(EngineError::action_in_progress(stack_id, action::DELETE))
    }

    pub async fn abandon_stack(self: &Arc<Self>, _stack_id: &str) -> Result<(), EngineError> {
        Err(EngineError::not_supported("Stack abandon is not supported"))
    }

    /// Suspend/resume/check: run over the live resources in one pass (the
    /// built-in types do nothing for them); states and events as upstream.
    pub async fn stack_action(
        self: &Arc<Self>,
        stack_id: &str,
        op: StackOperation,
    ) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        if stack.status == status::IN_PROGRESS {
            return Err(EngineError::action_in_progress(&stack.name, &stack.action));
        }
        let act = match op {
            StackOperation::Suspend => action::SUSPEND,
            StackOperation::Resume => action::RESUME,
            StackOperation::Check => action::CHECK,
        };
        let traversal = uuid::Uuid::new_v4().to_string();
        let started = format!("Stack {act} started");
        let change = store::StackStateChange {
            current_traversal: Some(traversal.clone()),
            ..store::StackStateChange::new(act, status::IN_PROGRESS, started.clone())
        };
        if !store::stacks::set_state(&self.db, stack_id, &stack.current_traversal, change).await? {
            return Err(EngineError::action_in_progress(&stack.name, &stack.action));
        }
        self.stack_event(&stack, act, status::IN_PROGRESS, &started)
            .await;
        let engine = self.clone();
        let stack_id = stack_id.to_string();
        tokio::spawn(async move {
            if let Err(e) = engine.run_stack_action(&stack_id, &traversal, act).await {
                tracing::warn!(error = %e, stack_id, "stack action failed");
            }
        });
        Ok(())
    }

    async fn run_stack_action(
        &self,
        stack_id: &str,
        traversal: &str,
        act: &str,
    ) -> Result<(), EngineError> {
        let rows = store::resources::list(&self.db, stack_id).await?;
        let mut unsupported = false;
        for row in rows.iter().filter(|r| r.action != action::INIT) {
            if act == action::CHECK {
                if let Some(p) = self.registry.get(&row.resource_type) {
                    let mut ctx = crate::resources::ActionContext {
                        stack_id: stack_id.to_string(),
                        stack_name: String::new(),
                        resource_name: row.name.clone(),
                        properties: Map::new(),
                        state: Default::default(),
                        cancel: self.cancel_receiver(stack_id),
                    };
                    if p.check(&mut ctx).is_none() {
                        unsupported = true;
                    }
                }
            }
            self.resource_event(row, act, status::IN_PROGRESS, "state changed", None)
                .await;
            store::resources::update_cas(
                &self.db,
                row.id,
                None,
                row.atomic_key,
                ResourceChange::state(act, status::COMPLETE, "state changed"),
            )
            .await?;
            self.resource_event(row, act, status::COMPLETE, "state changed", None)
                .await;
        }
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Ok(());
        };
        let mut reason = format!("Stack {act} completed successfully");
        if unsupported {
            reason.push_str(". 'CHECK' not fully supported (see resources)");
        }
        let change = store::StackStateChange::new(act, status::COMPLETE, reason.clone());
        if store::stacks::set_state(&self.db, stack_id, traversal, change).await? {
            self.stack_event(&stack, act, status::COMPLETE, &reason)
                .await;
        }
        Ok(())
    }

    /// cancel_update: with rollback, converge back to the previous
    /// template; without, stop the traversal where it is.
    pub async fn cancel_update(
        self: &Arc<Self>,
        stack_id: &str,
        rollback: bool,
    ) -> Result<(), EngineError> {
        let stack = self.live_stack(stack_id).await?;
        if !(stack.action == action::UPDATE && stack.status == status::IN_PROGRESS) {
            return Err(EngineError::not_supported(format!(
                "Cancelling update when stack is {}",
                stack.state()
            )));
        }
        let Some(traversal) = self.stop_traversal(&stack).await? else {
            return Ok(());
        };
        if rollback {
            if let Some(stack) = store::stacks::get(&self.db, stack_id).await? {
                debug_assert_eq!(stack.current_traversal, traversal);
                self.rollback(&stack).await?;
            }
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
        Err(EngineError::action_in_progress(stack_id, action::ROLLBACK))
    }

    pub async fn signal_resource(
        self: &Arc<Self>,
        _stack_id: &str,
        resource_name: &str,
        _details: Value,
    ) -> Result<(), EngineError> {
        Err(EngineError::bad_request(
            "ResourceActionNotSupported",
            format!("Signal resource during {resource_name} is not supported."),
        ))
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
        let Some(row) = rows
            .iter()
            .filter(|r| r.name == resource_name)
            .max_by_key(|r| (r.replaced_by.is_none(), r.id))
        else {
            return Err(EngineError::resource_not_found(resource_name, &stack.name));
        };
        let reason = if reason.is_empty() {
            "state changed by resource_mark_unhealthy api"
        } else {
            reason
        };
        let target = if mark {
            Some(status::FAILED)
        } else if row.action == action::CHECK && row.status == status::FAILED {
            Some(status::COMPLETE)
        } else {
            None
        };
        let Some(target) = target else { return Ok(()) };
        if !store::resources::update_cas(
            &self.db,
            row.id,
            row.engine_id.as_deref(),
            row.atomic_key,
            ResourceChange::state(action::CHECK, target, reason),
        )
        .await?
        {
            return Err(EngineError::action_in_progress(resource_name, &row.action));
        }
        self.resource_event(row, action::CHECK, target, reason, None)
            .await;
        Ok(())
    }

    /// Every output of the stack resolved against its live resources.
    pub async fn outputs(
        &self,
        stack: &StackRow,
    ) -> Result<Vec<(String, Option<String>, Result<Value, String>)>, EngineError> {
        let def = StackDefinition::load(
            &self.db,
            stack,
            stack.raw_template_id,
            &self.settings.region_name,
        )
        .await?;
        let rows = store::resources::list(&self.db, &stack.id).await?;
        let mut facts = std::collections::BTreeMap::new();
        for defn in &def.resources {
            let best = rows
                .iter()
                .filter(|r| r.name == defn.name && r.action != action::INIT)
                .max_by_key(|r| (r.replaced_by.is_none(), r.id));
            let Some(row) = best else { continue };
            let Some(plugin) = self.registry.get(&row.resource_type) else {
                continue;
            };
            let state = self.state_of_row(row).await?;
            let mut attributes = Map::new();
            for a in plugin
                .schema()
                .attributes
                .iter()
                .filter(|a| a.name != "show")
            {
                let v =
                    crate::resources::resolve_attribute(plugin.as_ref(), &row.name, &state, a.name)
                        .await
                        .unwrap_or(Value::Null);
                attributes.insert(a.name.to_string(), v);
            }
            facts.insert(
                defn.name.clone(),
                ResourceFacts {
                    reference_id: plugin.reference_id(&state),
                    attributes,
                },
            );
        }
        Ok(LiveContext::new(&def, facts).outputs(&def))
    }

    async fn state_of_row(
        &self,
        row: &store::ResourceRow,
    ) -> Result<crate::resources::ResourceState, EngineError> {
        let data = store::resources::data_get_all(&self.db, row.id).await?;
        Ok(crate::resources::ResourceState {
            physical_id: row.physical_resource_id.clone(),
            data: data.into_iter().map(|(k, v)| (k, v.value)).collect(),
            properties: match &row.properties_data {
                Some(Value::Object(p)) => p.clone(),
                _ => Map::new(),
            },
            metadata: row.rsrc_metadata.clone().unwrap_or(Value::Null),
        })
    }
}
