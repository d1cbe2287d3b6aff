//! Stack operations: create, preview, list, lookup, show, template,
//! environment, files, update (PUT/PATCH) and its preview, delete,
//! abandon/export, actions, outputs (`heat/engine/service.py`); snapshots
//! are `snapshots.rs`.

use std::cmp::Ordering;

use serde_json::{json, Map, Value};

use super::engine_port::{DefinitionInput, StackAction, StackSettings};
use super::identity::{is_uuid_like, parse_arn, quote_plus, StackIdentity};
use super::instantiation::{validate_stack_name, Instantiation, Purpose};
use super::params::{bad_request, extract_tags, QueryParams};
use super::records::{self, Action, StackRow, Status};
use super::views::{self, StackDetails};
use super::{Caller, Orchestration, Reply};
use crate::error::EngineError;

/// A stack as a request path names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackRef {
    pub name: String,
    pub id: String,
}

impl StackRef {
    pub fn new(name: &str, id: &str) -> Self {
        StackRef { name: name.to_string(), id: id.to_string() }
    }

    fn display_name(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

/// The stack filters `GET /stacks` accepts (heat-api's list, then
/// `translate_filters` onto columns).
const STACK_FILTER_KEYS: &[&str] = &[
    "id",
    "status",
    "name",
    "action",
    "tenant",
    "username",
    "owner_id",
    "stack_name",
    "stack_action",
    "stack_status",
    "stack_status_reason",
    "disable_rollback",
    "timeout_mins",
    "stack_owner",
    "parent",
    "stack_user_project_id",
];

impl Orchestration {
    /// The stack `stack` names, in the caller's project. `show_deleted`
    /// lets a soft-deleted stack be found by id (show does, delete does not).
    pub(super) async fn find_stack(
        &self,
        caller: &Caller,
        stack: &StackRef,
        show_deleted: bool,
    ) -> Result<StackRow, EngineError> {
        let not_found = || EngineError::stack_not_found(stack.display_name());
        let found = if !stack.id.is_empty() {
            records::stack_by_id(&self.db, caller.id_scope(), &stack.id).await?
        } else if !stack.name.is_empty() {
            records::stack_by_name(&self.db, &caller.project_id, &stack.name).await?
        } else {
            None
        };
        let Some(found) = found else { return Err(not_found()) };
        if !stack.name.is_empty() && found.name != stack.name {
            return Err(not_found());
        }
        if found.deleted_at.is_some() && !show_deleted {
            return Err(not_found());
        }
        Ok(found)
    }

    /// `POST /stacks`: validates everything, stores the stack and starts
    /// its CREATE traversal; answers the new stack's identity at once.
    pub async fn create_stack(&self, caller: &Caller, body: &Value) -> Result<StackIdentity, EngineError> {
        let request = self.read_instantiation(body, Purpose::Create).await?;
        let name = request.stack_name.clone().unwrap_or_default();
        if records::stack_by_name(&self.db, &caller.project_id, &name).await?.is_some() {
            return Err(EngineError::stack_exists(&name));
        }
        if !caller.is_admin && self.settings.max_stacks_per_tenant >= 0 {
            let count = records::count_stacks(&self.db, &caller.project_id).await?;
            if count >= self.settings.max_stacks_per_tenant {
                return Err(request_limit(&format!(
                    "You have reached the maximum stacks per tenant, {}. Please delete some stacks.",
                    self.settings.max_stacks_per_tenant
                )));
            }
        }
        let template = request.template.clone().ok_or_else(|| bad_request("No template specified"))?;
        self.check_resource_count(&template)?;
        validate_stack_name(&name)?;
        let stack_id = uuid::Uuid::new_v4().to_string();
        // Adopting: the abandoned stack's parameters, overridden by the
        // request's (upstream create_stack).
        let mut parameters = Map::new();
        if let Some(Value::Object(adopted)) =
            request.adopt_stack_data.as_ref().and_then(|d| d.get("environment")).and_then(|e| e.get("parameters"))
        {
            let in_environment = request.environment.get("parameters").and_then(Value::as_object);
            parameters.extend(
                adopted
                    .iter()
                    .filter(|(k, _)| !in_environment.is_some_and(|p| p.contains_key(*k)))
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        parameters.extend(request.parameters.clone());
        let input = DefinitionInput {
            template,
            files: request.files.clone(),
            environment: request.environment.clone(),
            environment_files: request.environment_files.clone(),
            parameters,
            stack_name: name.clone(),
            stack_id: stack_id.clone(),
            tenant: caller.project_id.clone(),
        };
        let prepared = self.prepare_definition(caller, input).await?;
        self.check_service_constraints(caller, &prepared).await?;
        let settings = StackSettings {
            timeout_mins: request.timeout_mins,
            disable_rollback: request.disable_rollback.unwrap_or(true),
            tags: request.tags.clone().flatten(),
        };
        let id =
            self.engine_create(caller, &stack_id, &name, prepared, settings, request.adopt_stack_data.clone()).await?;
        Ok(StackIdentity::new(&caller.project_id, &name, &id))
    }

    /// `POST /stacks/preview`: the stack as it would be created, with the
    /// resources it would have; nothing is stored.
    pub async fn preview_stack(&self, caller: &Caller, body: &Value) -> Reply {
        let request = self.read_instantiation(body, Purpose::Create).await?;
        let name = request.stack_name.clone().unwrap_or_default();
        let template = request.template.clone().ok_or_else(|| bad_request("No template specified"))?;
        self.check_resource_count(&template)?;
        validate_stack_name(&name)?;
        // Upstream previews a stack whose id is None.
        let input = DefinitionInput {
            template,
            files: request.files.clone(),
            environment: request.environment.clone(),
            environment_files: request.environment_files.clone(),
            parameters: request.parameters.clone(),
            stack_name: name.clone(),
            stack_id: "None".to_string(),
            tenant: caller.project_id.clone(),
        };
        let prepared = self.prepare_definition(caller, input).await?;
        self.check_service_constraints(caller, &prepared).await?;
        let identity = StackIdentity::new(&caller.project_id, &name, "None");
        let record = StackRow {
            id: "None".into(),
            name: name.clone(),
            raw_template_id: 0,
            tenant: caller.project_id.clone(),
            username: caller.user_name.clone(),
            user_id: caller.user_id.clone(),
            owner_id: None,
            parent_resource_name: None,
            timeout_mins: request.timeout_mins,
            disable_rollback: request.disable_rollback.unwrap_or(true),
            nested_depth: 0,
            stack_user_project_id: None,
            tags: request.tags.clone().flatten(),
            params: request.parameters.clone(),
            // A preview has no state of its own (the view drops it).
            action: Action::default(),
            status: Status::default(),
            status_reason: String::new(),
            created_at: Some(keelson_db::now()),
            ..Default::default()
        };
        let outputs = self.preview_outputs(&prepared);
        let mut doc = views::stack_full(
            &record,
            StackDetails {
                description: prepared.description(),
                parameters: prepared.parameters_display(),
                outputs: Some(outputs),
            },
        );
        let resources = self.preview_resources(&prepared, &identity);
        if let Value::Object(map) = &mut doc {
            // A preview has no state of its own.
            map.remove("stack_status");
            map.remove("stack_status_reason");
            map.insert("resources".into(), Value::Array(resources));
        }
        Ok(json!({ "stack": doc }))
    }

    /// Heat's `enforce_stack`: every type the stack would instantiate
    /// passes its `resource_types:<type>` rule for the caller.
    pub(super) fn authorize_types(
        &self,
        caller: &Caller,
        prepared: &super::engine_port::PreparedStack,
    ) -> Result<(), EngineError> {
        let types = prepared.def.resource_types(&self.registry);
        self.registry.authorize_types(caller, types.iter().map(String::as_str))
    }

    fn check_resource_count(&self, template: &Value) -> Result<(), EngineError> {
        if self.settings.max_resources_per_stack < 0 {
            return Ok(());
        }
        let count = crate::resources::host::template_resource_count(template);
        if i64::try_from(count).unwrap_or(i64::MAX) > self.settings.max_resources_per_stack {
            return Err(super::limits::resource_limit_exceeded());
        }
        Ok(())
    }

    /// `GET /stacks` (summaries) and `GET /stacks/detail`.
    pub async fn list_stacks(&self, caller: &Caller, query: &QueryParams, detail: bool) -> Reply {
        if detail {
            let stacks = records::stacks(&self.db, Some(&caller.project_id), false, false).await?;
            let mut stacks = self.without_hidden(stacks);
            sort_stacks(&mut stacks, &[], None)?;
            return Ok(json!({"stacks": stacks.iter().map(|s| views::stack_summary(s, false)).collect::<Vec<_>>()}));
        }
        let global = query.bool_or("global_tenant", false)?;
        if global && !caller.is_admin {
            return Err(EngineError::forbidden("You are not authorized to complete this action."));
        }
        let show_deleted = query.bool_or("show_deleted", false)?;
        let show_nested = query.bool_or("show_nested", false)?;
        let show_hidden = query.bool_or("show_hidden", false)?;
        let limit = query.int("limit")?;
        let with_count = match query.single("with_count") {
            Some(v) if !v.is_empty() => super::params::extract_bool("with_count", &Value::String(v))?,
            _ => false,
        };
        let tag_param = |key: &str| -> Result<Option<Vec<String>>, EngineError> {
            query.single(key).map(|v| extract_tags(&v)).transpose()
        };
        let tags = tag_param("tags")?;
        let tags_any = tag_param("tags_any")?;
        let not_tags = tag_param("not_tags")?;
        let not_tags_any = tag_param("not_tags_any")?;
        let filters = StackFilters::from_query(query);

        let tenant = if global { None } else { Some(caller.project_id.as_str()) };
        let mut stacks = records::stacks(&self.db, tenant, show_deleted, show_nested).await?;
        stacks.retain(|s| {
            let has = |t: &String| s.tags.as_ref().is_some_and(|list| list.contains(t));
            filters.matches(s)
                && tags.as_ref().is_none_or(|want| want.iter().all(has))
                && tags_any.as_ref().is_none_or(|want| want.iter().any(has))
                && not_tags.as_ref().is_none_or(|want| !want.iter().all(has))
                && not_tags_any.as_ref().is_none_or(|want| !want.iter().any(has))
        });
        if !show_hidden {
            stacks = self.without_hidden(stacks);
        }
        let count = stacks.len();
        let sort_keys = query.all("sort_keys");
        sort_stacks(&mut stacks, &sort_keys, query.single("sort_dir").as_deref())?;
        let page = paginate(
            stacks,
            query.single("marker").as_deref(),
            limit,
            |s| &s.id,
            |a, b| {
                compare_stacks(
                    a,
                    b,
                    &stack_sort_columns(&sort_keys),
                    sort_direction(&sort_keys, query.single("sort_dir").as_deref()),
                )
            },
        );
        let items: Vec<Value> = page.iter().map(|s| views::stack_summary(s, caller.is_admin)).collect();
        let mut doc = Map::new();
        let next = match (limit, page.last()) {
            (Some(limit), Some(last)) if limit > 0 && usize::try_from(limit).is_ok_and(|l| l == page.len()) => {
                Some(last.id.clone())
            }
            _ => None,
        };
        doc.insert("stacks".into(), Value::Array(items));
        if let Some(marker) = next {
            let href = format!("/v1/{}/stacks?{}", caller.path_tenant(), next_query(query, &marker));
            doc.insert("links".into(), json!([{"rel": "next", "href": href}]));
        }
        if with_count {
            doc.insert("count".into(), json!(count));
        }
        Ok(Value::Object(doc))
    }

    fn without_hidden(&self, stacks: Vec<StackRow>) -> Vec<StackRow> {
        let hidden = &self.settings.hidden_stack_tags;
        if hidden.is_empty() {
            return stacks;
        }
        stacks
            .into_iter()
            .filter(|s| !s.tags.as_ref().is_some_and(|tags| tags.iter().any(|t| hidden.contains(t))))
            .collect()
    }

    /// Resolves a name, id or ARN to the canonical identity (the REST 302).
    /// By id a soft-deleted stack is still found; by name it is not.
    pub async fn lookup_stack(
        &self,
        caller: &Caller,
        name_or_id: &str,
        show_deleted: bool,
    ) -> Result<StackIdentity, EngineError> {
        if let Some(identity) = parse_arn(name_or_id) {
            return Ok(identity);
        }
        let mut found = None;
        if is_uuid_like(name_or_id) {
            found = records::stack_by_id(&self.db, caller.id_scope(), name_or_id).await?;
        }
        if found.is_none() {
            found = records::stack_by_name(&self.db, &caller.project_id, name_or_id).await?;
        }
        if found.is_none() && show_deleted {
            found = records::stacks(&self.db, Some(&caller.project_id), true, true)
                .await?
                .into_iter()
                .filter(|s| s.name == name_or_id)
                .max_by(|a, b| a.created_at.cmp(&b.created_at));
        }
        match found {
            Some(s) => Ok(views::identity_of(&s)),
            None => Err(EngineError::stack_not_found(name_or_id)),
        }
    }

    /// `GET /stacks/{name}/{id}` (`resolve_outputs`, default true).
    pub async fn show_stack(&self, caller: &Caller, stack: &StackRef, query: &QueryParams) -> Reply {
        let resolve_outputs = query.bool_or("resolve_outputs", true)?;
        let record = self.find_stack(caller, stack, true).await?;
        let loaded = self.load_definition(&record).await?;
        let outputs = if resolve_outputs && !(record.action == Action::Delete && record.status == Status::Complete) {
            let resolved = self.resolve_outputs(&record, &loaded, None).await?;
            Some(resolved.into_iter().map(|o| views::output(&o.key, o.description.as_deref(), Some(o.value))).collect())
        } else {
            None
        };
        let doc = views::stack_full(
            &record,
            StackDetails { description: loaded.description(), parameters: loaded.parameters_display(), outputs },
        );
        Ok(json!({ "stack": doc }))
    }

    /// `GET .../template`: the stored template document.
    pub async fn get_template(&self, caller: &Caller, stack: &StackRef) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        Ok(self.raw_template_of(&record).await?.template)
    }

    /// `GET .../environment`: the stored (merged) environment.
    pub async fn get_environment(&self, caller: &Caller, stack: &StackRef) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        let env = self.raw_template_of(&record).await?.environment;
        Ok(environment_view(env))
    }

    /// `GET .../files`.
    pub async fn get_files(&self, caller: &Caller, stack: &StackRef) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        Ok(Value::Object(self.raw_template_of(&record).await?.files))
    }

    pub(super) async fn raw_template_of(&self, stack: &StackRow) -> Result<records::RawTemplateRow, EngineError> {
        Ok(records::raw_template(&self.db, stack.raw_template_id).await?)
    }

    /// Builds the definition an update moves to: PUT replaces, PATCH
    /// (`existing`) reuses the template and merges parameters.
    async fn updated_definition(
        &self,
        caller: &Caller,
        current: &StackRow,
        request: &Instantiation,
        patch: bool,
    ) -> Result<super::engine_port::PreparedStack, EngineError> {
        if current.action == Action::Suspend {
            return Err(EngineError::not_supported("Updating a stack when it is suspended is not supported."));
        }
        if current.action == Action::Delete {
            return Err(EngineError::not_supported("Updating a stack when it is deleting is not supported."));
        }
        let stored = self.raw_template_of(current).await?;
        let (template, files, environment, parameters) = if patch {
            let template = request.template.clone().unwrap_or_else(|| stored.template.clone());
            let mut files = stored.files.clone();
            files.extend(request.files.clone());
            // The stored environment's parameters, minus the cleared ones,
            // then the request's on top.
            let mut environment = match &stored.environment {
                Value::Object(env) => env.clone(),
                _ => Map::new(),
            };
            let mut parameters: Map<String, Value> = environment
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| !request.clear_parameters.contains(k))
                .collect();
            if let Some(Value::Object(req_params)) = request.environment.get("parameters") {
                parameters.extend(req_params.clone());
            }
            for (section, value) in &request.environment {
                if section != "parameters" {
                    merge_section(&mut environment, section, value);
                }
            }
            parameters.extend(request.parameters.clone());
            // PATCH silently drops parameters the template does not declare.
            let declared = declared_parameters(&template);
            parameters.retain(|k, _| declared.contains(k));
            environment.remove("parameters");
            (template, files, environment, parameters)
        } else {
            let template = request.template.clone().ok_or_else(|| bad_request("No template specified"))?;
            (template, request.files.clone(), request.environment.clone(), request.parameters.clone())
        };
        self.check_resource_count(&template)?;
        let input = DefinitionInput {
            template,
            files,
            environment,
            environment_files: request.environment_files.clone(),
            parameters,
            stack_name: current.name.clone(),
            stack_id: current.id.clone(),
            tenant: current.tenant.clone(),
        };
        let prepared = self.prepare_definition(caller, input).await?;
        let loaded = self.load_definition(current).await?;
        let modified = loaded.immutable_parameters_modified(&prepared);
        if !modified.is_empty() {
            return Err(EngineError::ImmutableParameterModified(format!(
                "The following parameters are immutable and may not be updated: {}",
                modified.join(", ")
            )));
        }
        Ok(prepared)
    }

    fn update_settings(current: &StackRow, request: &Instantiation, patch: bool) -> StackSettings {
        StackSettings {
            timeout_mins: request.timeout_mins.or(current.timeout_mins),
            disable_rollback: request.disable_rollback.unwrap_or(current.disable_rollback),
            tags: match &request.tags {
                Some(t) => t.clone(),
                // PUT without tags clears them; PATCH keeps them.
                None if patch => current.tags.clone(),
                None => None,
            },
        }
    }

    /// `PUT|PATCH /stacks/{name}/{id}` (202): starts the UPDATE traversal.
    pub async fn update_stack(&self, caller: &Caller, stack: &StackRef, body: &Value, patch: bool) -> Reply {
        let request = self.read_instantiation(body, Purpose::Update { patch }).await?;
        let current = self.find_stack(caller, stack, false).await?;
        let prepared = self.updated_definition(caller, &current, &request, patch).await?;
        self.check_service_constraints(caller, &prepared).await?;
        let settings = Self::update_settings(&current, &request, patch);
        self.engine_update(caller, &current, prepared, settings).await?;
        Ok(Value::Null)
    }

    /// `PUT|PATCH .../preview`: what an update would do, per resource.
    pub async fn preview_update(
        &self,
        caller: &Caller,
        stack: &StackRef,
        body: &Value,
        patch: bool,
        query: &QueryParams,
    ) -> Reply {
        let show_nested = query.bool_or("show_nested", false)?;
        let request = self.read_instantiation(body, Purpose::Update { patch }).await?;
        let current = self.find_stack(caller, stack, false).await?;
        let prepared = self.updated_definition(caller, &current, &request, patch).await?;
        self.check_service_constraints(caller, &prepared).await?;
        let changes = self.resource_changes(&current, &prepared, show_nested).await?;
        Ok(json!({ "resource_changes": changes }))
    }

    /// `DELETE /stacks/{name}/{id}` (204): starts the DELETE traversal.
    pub async fn delete_stack(&self, caller: &Caller, stack: &StackRef) -> Reply {
        let current = self.find_stack(caller, stack, false).await?;
        if current.action == Action::Delete && current.status == Status::Complete {
            return Err(EngineError::stack_not_found(stack.display_name()));
        }
        // Upstream checks the loaded stack's types; a stack whose stored
        // definition no longer loads (its types were checked when it was
        // created or updated) stays deletable.
        if let Ok(loaded) = self.load_definition(&current).await {
            self.authorize_types(caller, &loaded)?;
        }
        self.engine_delete(caller, &current).await?;
        Ok(Value::Null)
    }

    /// `GET .../export`: the abandon document, stack kept.
    pub async fn export_stack(&self, caller: &Caller, stack: &StackRef) -> Reply {
        self.check_abandon_enabled()?;
        let current = self.find_stack(caller, stack, false).await?;
        self.abandon_document(&current, true).await
    }

    /// `DELETE .../abandon`: the abandon document; the stack is forgotten
    /// and its resources are left alone.
    pub async fn abandon_stack(&self, caller: &Caller, stack: &StackRef) -> Reply {
        self.check_abandon_enabled()?;
        let current = self.find_stack(caller, stack, false).await?;
        let doc = self.abandon_document(&current, true).await?;
        self.engine_abandon(caller, &current).await?;
        Ok(doc)
    }

    fn check_abandon_enabled(&self) -> Result<(), EngineError> {
        if self.settings.enable_stack_abandon {
            Ok(())
        } else {
            Err(EngineError::not_supported("Stack Abandon is not supported."))
        }
    }

    /// Upstream `Stack.prepare_abandon`: a resource that runs a nested
    /// stack is represented by that stack's own document. Without
    /// resources (`no_resources`), `resources` is empty (what a snapshot
    /// starts from).
    pub(super) fn abandon_document<'a>(
        &'a self,
        stack: &'a StackRow,
        with_resources: bool,
    ) -> futures::future::BoxFuture<'a, Reply> {
        Box::pin(self.abandon_document_of(stack, with_resources))
    }

    async fn abandon_document_of(&self, stack: &StackRow, with_resources: bool) -> Reply {
        let stored = self.raw_template_of(stack).await?;
        let mut resources = Map::new();
        if with_resources {
            let rows = records::resources(&self.db, &stack.id).await?;
            let children = records::child_stacks(&self.db, &stack.id).await?;
            for (name, row) in views::best_rows(&rows) {
                let child = row.physical_resource_id.as_deref().and_then(|id| children.iter().find(|c| c.id == id));
                let entry = match child {
                    Some(child) => self.abandon_document(child, true).await?,
                    None => crate::convergence::resource_abandon_entry(&self.db, row).await?,
                };
                resources.insert(name, entry);
            }
        }
        let environment = environment_view(stored.environment.clone());
        Ok(json!({
            "name": stack.name,
            "id": stack.id,
            "action": stack.action,
            "environment": environment,
            "files": stored.files,
            "status": stack.status,
            "template": stored.template,
            "resources": resources,
            "project_id": stack.tenant,
            "stack_user_project_id": stack.stack_user_project_id,
            "tags": stack.tags,
        }))
    }

    /// `POST .../actions`: exactly one of suspend, resume, check,
    /// cancel_update, cancel_without_rollback.
    pub async fn stack_action(&self, caller: &Caller, stack: &StackRef, body: &Value) -> Reply {
        let Some(body) = body.as_object() else {
            return Err(bad_request("No action specified"));
        };
        let mut keys = body.keys();
        let action = match (keys.next(), keys.next()) {
            (None, _) => return Err(bad_request("No action specified")),
            (Some(_), Some(_)) => return Err(bad_request("Multiple actions specified")),
            (Some(k), None) => k.clone(),
        };
        let action = match action.as_str() {
            "suspend" => StackAction::Suspend,
            "resume" => StackAction::Resume,
            "check" => StackAction::Check,
            "cancel_update" => StackAction::CancelUpdate { rollback: true },
            "cancel_without_rollback" => StackAction::CancelUpdate { rollback: false },
            other => return Err(bad_request(format!("Invalid action {other} specified"))),
        };
        let current = self.find_stack(caller, stack, false).await?;
        if let StackAction::CancelUpdate { rollback } = action {
            let allowed: &[Action] = if rollback { &[Action::Update] } else { &[Action::Update, Action::Create] };
            if !(current.status == Status::InProgress && allowed.contains(&current.action)) {
                return Err(EngineError::not_supported(format!(
                    "Cancelling update when stack is {} is not supported.",
                    current.state()
                )));
            }
        }
        self.engine_action(caller, &current, action).await?;
        Ok(Value::Null)
    }

    /// `GET .../outputs`: keys and descriptions, no values.
    pub async fn list_outputs(&self, caller: &Caller, stack: &StackRef) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        let loaded = self.load_definition(&record).await?;
        let outputs: Vec<Value> = loaded
            .output_list()
            .into_iter()
            .map(|(key, description)| views::output(&key, description.as_deref(), None))
            .collect();
        Ok(json!({ "outputs": outputs }))
    }

    /// `GET .../outputs/{key}`.
    pub async fn show_output(&self, caller: &Caller, stack: &StackRef, key: &str) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        let loaded = self.load_definition(&record).await?;
        if !loaded.output_list().iter().any(|(k, _)| k == key) {
            return Err(EngineError::NotFound(format!("Specified output key {key} not found.")));
        }
        let resolved = self.resolve_outputs(&record, &loaded, Some(key)).await?;
        let Some(output) = resolved.into_iter().find(|o| o.key == key) else {
            return Err(EngineError::NotFound(format!("Specified output key {key} not found.")));
        };
        Ok(json!({ "output": views::output(&output.key, output.description.as_deref(), Some(output.value)) }))
    }
}

pub(super) fn request_limit(message: &str) -> EngineError {
    EngineError::RequestLimitExceeded(format!("Request limit exceeded: {message}"))
}

/// The environment document as `GET .../environment` shows it (every
/// section present).
fn environment_view(env: Value) -> Value {
    let mut doc = match env {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let defaults = [
        ("resource_registry", json!({"resources": {}})),
        ("parameters", json!({})),
        ("parameter_defaults", json!({})),
        ("event_sinks", json!([])),
        ("encrypted_param_names", json!([])),
    ];
    for (key, default) in defaults {
        doc.entry(key.to_string()).or_insert(default);
    }
    Value::Object(doc)
}

/// Merges one environment section of a PATCH over the stored one.
fn merge_section(environment: &mut Map<String, Value>, section: &str, value: &Value) {
    match (environment.get_mut(section), value) {
        (Some(Value::Object(current)), Value::Object(new)) => {
            for (k, v) in new {
                current.insert(k.clone(), v.clone());
            }
        }
        _ => {
            environment.insert(section.to_string(), value.clone());
        }
    }
}

/// The parameter names a template declares (HOT `parameters`, CFN `Parameters`).
fn declared_parameters(template: &Value) -> Vec<String> {
    template
        .get("parameters")
        .or_else(|| template.get("Parameters"))
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// `GET /stacks` filters after `translate_filters`: column → accepted values.
#[derive(Debug, Default)]
struct StackFilters {
    columns: Vec<(&'static str, Vec<String>)>,
}

impl StackFilters {
    fn from_query(query: &QueryParams) -> Self {
        let column_of = |key: &str| -> &'static str {
            match key {
                "stack_name" | "name" => "name",
                "stack_action" | "action" => "action",
                "stack_status" | "status" => "status",
                "stack_status_reason" => "status_reason",
                "disable_rollback" => "disable_rollback",
                "timeout_mins" => "timeout_mins",
                "stack_owner" | "username" => "username",
                "parent" | "owner_id" => "owner_id",
                "stack_user_project_id" => "stack_user_project_id",
                "tenant" => "tenant",
                _ => "id",
            }
        };
        let mut columns: Vec<(&'static str, Vec<String>)> = Vec::new();
        for key in STACK_FILTER_KEYS {
            let values = query.all(key);
            if values.is_empty() || values.iter().all(String::is_empty) {
                continue;
            }
            let column = column_of(key);
            match columns.iter_mut().find(|(c, _)| *c == column) {
                Some((_, existing)) => existing.extend(values),
                None => columns.push((column, values)),
            }
        }
        // A status may carry its action ("CREATE_FAILED").
        if let Some(pos) = columns.iter().position(|(c, _)| *c == "status") {
            let mut statuses = Vec::new();
            let mut actions = Vec::new();
            for value in &columns[pos].1 {
                for s in [Status::Complete, Status::Failed, Status::InProgress].map(Status::as_str) {
                    if let Some(index) = value.rfind(s) {
                        statuses.push(value[index..].to_string());
                        // The action is what precedes "_STATUS" (if anything).
                        if let Some(action) =
                            value.get(..index.saturating_sub(1)).filter(|a| index > 1 && !a.is_empty())
                        {
                            actions.push(action.to_string());
                        }
                        break;
                    }
                }
            }
            columns[pos].1 = statuses;
            if !actions.is_empty() {
                match columns.iter_mut().find(|(c, _)| *c == "action") {
                    Some((_, existing)) => existing.extend(actions),
                    None => columns.push(("action", actions)),
                }
            }
        }
        StackFilters { columns }
    }

    fn matches(&self, s: &StackRow) -> bool {
        self.columns.iter().all(|(column, values)| {
            let actual: Option<String> = match *column {
                "name" => Some(s.name.clone()),
                "action" => Some(s.action.to_string()),
                "status" => Some(s.status.to_string()),
                "status_reason" => Some(s.status_reason.clone()),
                "disable_rollback" => Some(if s.disable_rollback { "true" } else { "false" }.to_string()),
                "timeout_mins" => s.timeout_mins.map(|t| t.to_string()),
                "username" => Some(s.username.clone()),
                "owner_id" => s.owner_id.clone(),
                "stack_user_project_id" => s.stack_user_project_id.clone(),
                "tenant" => Some(s.tenant.clone()),
                _ => Some(s.id.clone()),
            };
            actual.is_some_and(|a| {
                values.iter().any(|v| {
                    if *column == "disable_rollback" {
                        matches!(v.to_lowercase().as_str(), "true" | "1") == (a == "true")
                    } else {
                        *v == a
                    }
                })
            })
        })
    }
}

/// The stack columns `sort_keys` may name; others are ignored (as upstream).
fn stack_sort_columns(sort_keys: &[String]) -> Vec<&'static str> {
    let mut columns: Vec<&'static str> = sort_keys
        .iter()
        .filter_map(|k| match k.as_str() {
            "stack_name" => Some("name"),
            "stack_status" => Some("status"),
            "creation_time" => Some("created_at"),
            "updated_time" => Some("updated_at"),
            _ => None,
        })
        .collect();
    if columns.is_empty() {
        columns.push("created_at");
    }
    columns.push("id");
    columns
}

/// oslo.db's rule: no valid sort key and no direction → newest first;
/// otherwise the given direction, ascending by default.
fn sort_direction(sort_keys: &[String], sort_dir: Option<&str>) -> bool {
    let any_valid = sort_keys
        .iter()
        .any(|k| matches!(k.as_str(), "stack_name" | "stack_status" | "creation_time" | "updated_time"));
    match sort_dir {
        Some(dir) => dir != "desc",
        None => any_valid,
    }
}

fn check_sort_dir(sort_dir: Option<&str>) -> Result<(), EngineError> {
    match sort_dir {
        None | Some("asc") | Some("desc") => Ok(()),
        Some(other) => Err(bad_request(format!("Unknown sort direction, must be 'desc' or 'asc' ({other})"))),
    }
}

fn compare_stacks(a: &StackRow, b: &StackRow, columns: &[&str], ascending: bool) -> Ordering {
    for column in columns {
        let ord = match *column {
            "name" => a.name.cmp(&b.name),
            // By name, as upstream's SQL sorts the column.
            "status" => a.status.as_str().cmp(b.status.as_str()),
            "created_at" => a.created_at.cmp(&b.created_at),
            "updated_at" => a.updated_at.cmp(&b.updated_at),
            _ => a.id.cmp(&b.id),
        };
        if ord != Ordering::Equal {
            return if ascending { ord } else { ord.reverse() };
        }
    }
    Ordering::Equal
}

fn sort_stacks(stacks: &mut [StackRow], sort_keys: &[String], sort_dir: Option<&str>) -> Result<(), EngineError> {
    check_sort_dir(sort_dir)?;
    let columns = stack_sort_columns(sort_keys);
    let ascending = sort_direction(sort_keys, sort_dir);
    stacks.sort_by(|a, b| compare_stacks(a, b, &columns, ascending));
    Ok(())
}

/// Applies `marker` (the items strictly after it in the list's order; an
/// unknown marker is ignored, as upstream) and `limit` to a sorted list.
fn paginate<T: Clone>(
    items: Vec<T>,
    marker: Option<&str>,
    limit: Option<i64>,
    id_of: impl Fn(&T) -> &str,
    cmp: impl Fn(&T, &T) -> Ordering,
) -> Vec<T> {
    let mut items = items;
    if let Some(marker) = marker {
        if let Some(m) = items.iter().find(|i| id_of(i) == marker).cloned() {
            items.retain(|i| cmp(i, &m) == Ordering::Greater);
        }
    }
    if let Some(limit) = limit {
        items.truncate(keelson_runtime::config::clamp_usize(limit));
    }
    items
}

/// The request's query with `marker` replaced (webob MultiDict semantics:
/// the new marker goes last).
fn next_query(query: &QueryParams, marker: &str) -> String {
    let mut pairs: Vec<(String, String)> = query.pairs().into_iter().filter(|(k, _)| k != "marker").collect();
    pairs.push(("marker".to_string(), marker.to_string()));
    pairs.iter().map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v))).collect::<Vec<_>>().join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_filter_splits_action() {
        let f = StackFilters::from_query(&QueryParams::from_pairs(&[("status", "CREATE_FAILED")]));
        assert_eq!(f.columns, vec![("status", vec!["FAILED".to_string()]), ("action", vec!["CREATE".to_string()])]);
    }

    #[test]
    fn next_link_replaces_marker_last() {
        let q = QueryParams::from_pairs(&[("show_deleted", "true"), ("marker", "x"), ("limit", "3")]);
        assert_eq!(next_query(&q, "abc"), "show_deleted=true&limit=3&marker=abc");
    }

    #[test]
    fn default_sort_is_newest_first() {
        assert!(!sort_direction(&[], None));
        assert!(sort_direction(&["stack_name".to_string()], None));
        assert!(!sort_direction(&["stack_name".to_string()], Some("desc")));
    }

    #[test]
    fn pagination_skips_through_marker() {
        let items = vec!["a", "b", "c", "d"];
        let page = paginate(items, Some("b"), Some(1), |s| s, |a, b| a.cmp(b));
        assert_eq!(page, vec!["c"]);
    }
}
