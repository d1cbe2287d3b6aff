//! The one place where the API operations meet the template language
//! (through [`super::model`]), the plugin registry and the convergence
//! engine. Everything else in `service` speaks in the small types below.

use serde_json::{json, Map, Value};

use super::identity::StackIdentity;
use super::model::{self, AttributeCheck, StackDefinition};
use super::records::{self, Action, ResourceRow, StackRow, Status};
use super::resources::StackResources;
use super::views::{self, ResourcePreview};
use super::{Caller, Orchestration};
use crate::definition::LiveContext;
use crate::error::{EngineError, HeatErrorCode};
use crate::resources::{TypeChange, UpdateDecision};

/// What a create, update, preview or validate request defines.
#[derive(Debug, Clone)]
pub struct DefinitionInput {
    pub template: Value,
    pub files: Map<String, Value>,
    /// The request's environment sections (without the body's parameters).
    pub environment: Map<String, Value>,
    pub environment_files: Vec<String>,
    /// The body's `parameters`.
    pub parameters: Map<String, Value>,
    pub stack_name: String,
    pub stack_id: String,
    pub tenant: String,
}

/// The stack-level settings a create or update applies.
#[derive(Debug, Clone)]
pub struct StackSettings {
    pub timeout_mins: Option<i64>,
    pub disable_rollback: bool,
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackAction {
    Suspend,
    Resume,
    Check,
    CancelUpdate { rollback: bool },
}

/// One output, resolved against the live stack.
pub struct ResolvedOutput {
    pub key: String,
    pub description: Option<String>,
    /// The value, or the resolution error's text (`output_error`).
    pub value: Result<Value, String>,
}

/// A stack definition (stored, or built from a request and validated)
/// with what the views read from it.
pub struct StackModel {
    /// Shared with the engine's definition cache for stored stacks.
    pub def: std::sync::Arc<StackDefinition>,
}

/// A definition built from a request and fully validated.
pub type PreparedStack = StackModel;

impl StackModel {
    pub fn description(&self) -> String {
        model::description(&self.def)
    }

    /// `parameters.map(str)`, pseudo parameters included.
    pub fn parameters_display(&self) -> Map<String, Value> {
        self.def.params.display()
    }

    /// (key, description) of every output, in template order.
    pub fn output_list(&self) -> Vec<(String, Option<String>)> {
        self.def.outputs.iter().map(|o| (o.name.clone(), o.description.clone())).collect()
    }

    pub fn has_resource(&self, name: &str) -> bool {
        self.def.resource(name).is_some()
    }

    pub fn resource_description(&self, name: &str) -> String {
        self.def.resource(name).and_then(|r| r.description.clone()).unwrap_or_default()
    }

    /// The plugin a stored resource of this stack runs as (its written
    /// type mapped by the environment).
    pub fn plugin_of(
        &self,
        registry: &crate::resources::Registry,
        row: &ResourceRow,
    ) -> Option<std::sync::Arc<dyn crate::resources::ResourceType>> {
        self.def.plugin_for(registry, &row.name, &row.resource_type).ok()
    }

    pub fn immutable_parameters_modified(&self, new: &StackModel) -> Vec<String> {
        model::immutable_params_modified(&self.def, &new.def)
    }

    /// The documents to store: template, files, merged environment.
    fn documents(&self) -> (Value, Map<String, Value>, Value) {
        (self.def.template.to_value().clone(), self.def.files.clone(), self.def.environment.to_value())
    }
}

impl Orchestration {
    /// The documents a request defines: environment files in order, then
    /// the request's environment, then the body's parameters on top.
    fn environment_of(&self, input: &DefinitionInput) -> Result<Value, EngineError> {
        let mut env = keelson_hot::Environment::default();
        for name in &input.environment_files {
            let Some(text) = input.files.get(name).and_then(Value::as_str) else {
                return Err(super::params::bad_request(format!("Environment file {name} is not in files")));
            };
            let doc = keelson_hot::parse_document(text)
                .map_err(|e| super::params::bad_request(format!("Environment not in valid format: {}", e.message)))?;
            env.merge(&environment_from(&doc)?);
        }
        env.merge(&environment_from(&Value::Object(input.environment.clone()))?);
        for (k, v) in &input.parameters {
            env.parameters.insert(k.clone(), v.clone());
        }
        Ok(env.to_value())
    }

    fn pseudo_params(&self, input: &DefinitionInput) -> keelson_hot::PseudoParams {
        keelson_hot::PseudoParams {
            stack_id: input.stack_id.clone(),
            stack_name: input.stack_name.clone(),
            project_id: input.tenant.clone(),
            region: self.settings.region_name.clone(),
        }
    }

    /// Parses and fully validates a request's stack (template, environment,
    /// parameters, resource types, properties, references) before anything
    /// is stored. As Heat's `enforce_stack` comes before the stack is
    /// validated, a type the caller may not use is 403 first.
    pub(super) async fn prepare_definition(
        &self,
        caller: &Caller,
        input: DefinitionInput,
    ) -> Result<PreparedStack, EngineError> {
        let environment = self.environment_of(&input)?;
        let mut def = StackDefinition::parse(&input.template, &input.files, &environment, &self.pseudo_params(&input))?;
        let types = def.resource_types(&self.registry);
        self.registry.authorize_types(caller, types.iter().map(String::as_str))?;
        self.note_unavailable_types(caller, &mut def, &types).await;
        self.validate_resources(&def, &[])?;
        Ok(StackModel { def: std::sync::Arc::new(def) })
    }

    /// Heat checks the service of a resource's type before anything else
    /// about it. For Heat's types keelson does not implement, the caller's
    /// catalog decides what validation answers: Heat's
    /// ResourceTypeUnavailable when the service is missing, else (or
    /// without Keystone or a token to ask) that keelson does not implement
    /// the type.
    async fn note_unavailable_types(
        &self,
        caller: &Caller,
        def: &mut StackDefinition,
        types: &std::collections::BTreeSet<String>,
    ) {
        let pending = crate::resources::unimplemented::needing_service(&self.registry, types);
        if pending.is_empty() {
            return;
        }
        let Some(session) = self.caller_session(caller) else { return };
        def.set_unavailable_types(crate::resources::constraints::unavailable_reasons(&session, &pending).await);
    }

    /// Heat's strict validation of a stack about to be created, updated or
    /// previewed: the values its service constraints check (`nova.flavor`,
    /// `neutron.network`, ...), asked as the caller (their token: Heat's
    /// request context). Nothing to ask without Keystone or a token; the
    /// service-free constraints of parameters are checked all the same.
    pub(super) async fn check_service_constraints(
        &self,
        caller: &Caller,
        prepared: &PreparedStack,
    ) -> Result<(), EngineError> {
        // Gathering refuses what a service-free parameter constraint refuses.
        let checks = prepared.def.service_constraint_checks(&self.registry)?;
        let required = prepared.def.required_services(&self.registry);
        if checks.is_empty() && required.is_empty() {
            return Ok(());
        }
        let Some(session) = self.caller_session(caller) else { return Ok(()) };
        crate::resources::constraints::check_stack(&session, &required, &checks).await
    }

    /// The caller's own session with the services (their token: Heat's
    /// request context); None without Keystone or a token.
    pub(super) fn caller_session(&self, caller: &Caller) -> Option<keelson_openstack::Session> {
        let identity = self.engine.identity()?;
        if caller.auth_token.is_empty() {
            return None;
        }
        Some(
            keelson_openstack::Session::new(
                identity.http().clone(),
                &identity.settings().auth_uri,
                keelson_openstack::AuthMethod::Existing { token: caller.auth_token.clone() },
            )
            .with_endpoint_choice(identity.settings().endpoints.clone()),
        )
    }

    /// Every resource's type exists and its properties pass its schema
    /// (references to other resources are unknown yet: null).
    fn validate_resources(&self, def: &StackDefinition, ignorable: &[HeatErrorCode]) -> Result<(), EngineError> {
        // Heat names resources by their Python class in a cycle's message.
        let class_name = |name: &str| -> String {
            let type_name = def.resource(name).map(|r| model::plugin_type(def, r)).unwrap_or_default();
            python_class_name(&type_name)
        };
        def.template.check_references_with(&def.params, &class_name)?;
        // Before the validation descends: it would build every member of
        // a group the limit refuses anyway.
        super::limits::check_tree_size(
            def,
            &self.registry,
            self.settings.max_resources_per_stack,
            self.settings.max_nested_stack_depth,
        )?;
        def.validate_passing_over(&self.registry, ignorable)?;
        self.validate_update_policies(def)?;
        let checking = AttributeCheck::new(def, &self.registry);
        for output in &def.outputs {
            match output.value.resolve(&checking) {
                Err(e) if e.kind == keelson_hot::TemplateErrorKind::StackValidationFailed => {
                    return Err(EngineError::validation(format!(
                        "outputs.{}.value.get_attr: : {}",
                        output.name, e.message
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Upstream `Resource.validate` checks the `update_policy` of a plugin
    /// that reads one against its schema (numbers are numbers, none below
    /// its minimum); the nested stacks' groups are checked when they run.
    fn validate_update_policies(&self, def: &StackDefinition) -> Result<(), EngineError> {
        let unknown = crate::definition::LiveContext::placeholders(def);
        for defn in &def.resources {
            let Some(policy) = &defn.update_policy else { continue };
            let plugin = def.plugin_for(&self.registry, &defn.name, &defn.type_name)?;
            let schema = plugin.update_policy_schema();
            if schema.is_empty() {
                continue;
            }
            crate::resources::validate_update_policy(schema, &defn.name, &policy.resolve(&unknown)?)?;
        }
        Ok(())
    }

    /// `POST /validate`'s answer.
    pub(super) async fn validate_definition(
        &self,
        caller: &Caller,
        input: DefinitionInput,
        ignorable: &[HeatErrorCode],
    ) -> Result<Value, EngineError> {
        let environment = self.environment_of(&input)?;
        let template = keelson_hot::Template::parse(&input.template)?;
        let env = keelson_hot::Environment::from_value(&environment)?;
        let view = template.validate_view(&env, &Map::new())?;
        // Validation needs no parameter values (upstream validates them
        // only when a stack is created).
        let mut def = StackDefinition::parse_allow_missing(
            &input.template,
            &input.files,
            &environment,
            &self.pseudo_params(&input),
        )?;
        let types = def.resource_types(&self.registry);
        self.note_unavailable_types(caller, &mut def, &types).await;
        self.validate_resources(&def, ignorable)?;
        Ok(view)
    }

    /// The stored definition of a stack: the engine's parse of it
    /// (cached per template, which never changes) when the regions agree,
    /// so a status poll does not parse the whole template again.
    pub(super) async fn load_definition(&self, stack: &StackRow) -> Result<StackModel, EngineError> {
        if self.settings.region_name == self.engine.settings().region_name {
            match self.engine.definition(stack, stack.raw_template_id).await {
                Ok(def) => return Ok(StackModel { def }),
                // A purged template shows as the empty one (model::load).
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(StackModel { def: std::sync::Arc::new(model::load(&self.db, stack, &self.settings.region_name).await?) })
    }

    pub(super) async fn engine_create(
        &self,
        caller: &Caller,
        stack_id: &str,
        name: &str,
        prepared: PreparedStack,
        settings: StackSettings,
        adopt_stack_data: Option<Value>,
    ) -> Result<String, EngineError> {
        let (template, files, environment) = prepared.documents();
        let created = self
            .engine
            .create_stack(crate::convergence::NewStack {
                id: stack_id.to_string(),
                name: name.to_string(),
                tenant: caller.project_id.clone(),
                username: caller.user_name.clone(),
                user_id: caller.user_id.clone(),
                template,
                files,
                environment,
                timeout_mins: settings.timeout_mins,
                disable_rollback: settings.disable_rollback,
                tags: settings.tags,
                adopt_stack_data,
                trustor: Some(crate::identity::Trustor {
                    token: caller.auth_token.clone(),
                    user_id: caller.user_id.clone(),
                    project_id: caller.project_id.clone(),
                    roles: caller.roles.clone(),
                }),
                ..Default::default()
            })
            .await?;
        Ok(created.id)
    }

    pub(super) async fn engine_update(
        &self,
        _caller: &Caller,
        current: &StackRow,
        prepared: PreparedStack,
        settings: StackSettings,
    ) -> Result<(), EngineError> {
        let (template, files, environment) = prepared.documents();
        self.engine
            .update_stack(
                &current.id,
                crate::convergence::NewDefinition {
                    template,
                    files,
                    environment,
                    timeout_mins: settings.timeout_mins,
                    disable_rollback: settings.disable_rollback,
                    tags: settings.tags,
                },
            )
            .await
    }

    /// Upstream convergence `stack_restore`: the update to the snapshot's
    /// definition, its stack action RESTORE.
    pub(super) async fn engine_restore(
        &self,
        _caller: &Caller,
        current: &StackRow,
        prepared: PreparedStack,
        settings: StackSettings,
    ) -> Result<(), EngineError> {
        let (template, files, environment) = prepared.documents();
        self.engine
            .restore_stack(
                &current.id,
                crate::convergence::NewDefinition {
                    template,
                    files,
                    environment,
                    timeout_mins: settings.timeout_mins,
                    disable_rollback: settings.disable_rollback,
                    tags: settings.tags,
                },
            )
            .await
    }

    /// Deletes a snapshot and what its resources keep of it.
    pub(super) async fn engine_delete_snapshot(
        &self,
        _caller: &Caller,
        current: &StackRow,
        snapshot: &crate::store::snapshots::SnapshotRow,
    ) -> Result<(), EngineError> {
        self.engine.delete_snapshot(current, snapshot).await
    }

    /// Starts the stack's SNAPSHOT walk for the stored snapshot row.
    pub(super) async fn engine_snapshot(
        &self,
        _caller: &Caller,
        current: &StackRow,
        snapshot_id: &str,
    ) -> Result<(), EngineError> {
        self.engine.snapshot_stack(&current.id, snapshot_id).await
    }

    pub(super) async fn engine_delete(&self, _caller: &Caller, current: &StackRow) -> Result<(), EngineError> {
        self.engine.delete_stack(&current.id).await
    }

    /// Forgets the stack without deleting its physical resources.
    pub(super) async fn engine_abandon(&self, _caller: &Caller, current: &StackRow) -> Result<(), EngineError> {
        self.engine.abandon_stack(&current.id).await
    }

    pub(super) async fn engine_action(
        &self,
        _caller: &Caller,
        current: &StackRow,
        action: StackAction,
    ) -> Result<(), EngineError> {
        use crate::convergence::StackOperation;
        match action {
            StackAction::Suspend => self.engine.stack_action(&current.id, StackOperation::Suspend).await,
            StackAction::Resume => self.engine.stack_action(&current.id, StackOperation::Resume).await,
            StackAction::Check => self.engine.stack_action(&current.id, StackOperation::Check).await,
            StackAction::CancelUpdate { rollback } => self.engine.cancel_update(&current.id, rollback).await,
        }
    }

    pub(super) async fn engine_signal(
        &self,
        _caller: &Caller,
        stack: &StackRow,
        row: &ResourceRow,
        details: Value,
    ) -> Result<(), EngineError> {
        self.engine.signal_resource(&stack.id, &row.name, details).await
    }

    pub(super) async fn engine_mark_unhealthy(
        &self,
        _caller: &Caller,
        stack: &StackRow,
        row: &ResourceRow,
        mark: bool,
        reason: String,
    ) -> Result<(), EngineError> {
        self.engine.mark_unhealthy(&stack.id, &row.name, mark, &reason).await
    }

    /// Every output (or only `only`) resolved against the live resources.
    pub(super) async fn resolve_outputs(
        &self,
        stack: &StackRow,
        model: &StackModel,
        only: Option<&str>,
    ) -> Result<Vec<ResolvedOutput>, EngineError> {
        // Only the resources the outputs refer to are read; none at all
        // when no output refers to one (every status poll of a stack
        // without such outputs would otherwise read the whole stack).
        let referenced: std::collections::BTreeSet<String> = model
            .def
            .outputs
            .iter()
            .filter(|o| only.is_none_or(|k| k == o.name))
            .flat_map(|o| o.value.referenced_resources())
            .collect();
        let rows =
            if referenced.is_empty() { Vec::new() } else { super::records::resources(&self.db, &stack.id).await? };
        let live = LiveContext::load(
            &self.db,
            &self.registry,
            &model.def,
            views::best_rows(&rows).into_values(),
            Some(&referenced),
        )
        .await?;
        Ok(live
            .outputs(&model.def)
            .into_iter()
            .filter(|(key, _, _)| only.is_none_or(|k| k == key))
            .map(|(key, description, value)| ResolvedOutput { key, description, value })
            .collect())
    }

    /// A resource's attributes for show / `with_detail`: every attribute of
    /// its type but `show`, plus `with_attr`; what cannot resolve is null.
    pub(super) async fn resource_attributes(
        &self,
        stack: &StackModel,
        row: &ResourceRow,
        with_attr: &[String],
    ) -> Result<Map<String, Value>, EngineError> {
        let Some(plugin) = stack.plugin_of(&self.registry, row) else {
            return Ok(Map::new());
        };
        let state = crate::definition::resource_state(&self.db, row).await?;
        let mut names: Vec<String> =
            plugin.schema().attributes.iter().map(|a| a.name.to_string()).filter(|n| n != "show").collect();
        for extra in with_attr {
            if !names.contains(extra) {
                names.push(extra.clone());
            }
        }
        let mut attributes = Map::new();
        for name in names {
            let value = crate::resources::resolve_attribute(plugin.as_ref(), &row.name, &state, &name)
                .await
                .unwrap_or(Value::Null);
            attributes.insert(name, value);
        }
        Ok(attributes)
    }

    /// Resource previews of a definition that is not created yet
    /// (`format_stack_resource(with_props=True)`).
    pub(super) fn preview_resources(&self, stack: &StackModel, identity: &StackIdentity) -> Vec<Value> {
        let unknown = LiveContext::placeholders(&stack.def);
        stack.def.resources.iter().map(|defn| self.preview_of(&stack.def, &unknown, identity, defn)).collect()
    }

    fn preview_of(
        &self,
        def: &StackDefinition,
        live: &LiveContext,
        identity: &StackIdentity,
        defn: &keelson_hot::ResourceDefn,
    ) -> Value {
        let attributes = self
            .registry
            .get(&model::plugin_type(def, defn))
            .map(|t| {
                t.schema()
                    .attributes
                    .iter()
                    .filter(|a| a.name != "show")
                    .map(|a| (a.name.to_string(), Value::Null))
                    .collect()
            })
            .unwrap_or_default();
        views::resource_preview(ResourcePreview {
            stack: identity,
            name: &defn.name,
            type_name: &defn.type_name,
            physical_resource_id: None,
            action: Action::Init.as_str(),
            status: Status::Complete.as_str(),
            status_reason: "",
            created_at: None,
            updated_at: None,
            required_by: model::required_by(def, &self.registry, &defn.name),
            description: defn.description.clone().unwrap_or_default(),
            metadata: json!({}),
            attributes,
            properties: Some(model::resolved_properties(def, &self.registry, live, defn)),
        })
    }

    /// Outputs of a stack preview: what resolves without resources.
    pub(super) fn preview_outputs(&self, stack: &StackModel) -> Vec<Value> {
        let unknown = LiveContext::placeholders(&stack.def);
        unknown
            .outputs(&stack.def)
            .into_iter()
            .map(|(key, description, value)| {
                views::output(&key, description.as_deref(), Some(Ok(value.unwrap_or(Value::Null))))
            })
            .collect()
    }

    /// `resource_changes` of an update preview: each resource of the new
    /// definition is added, replaced, updated or unchanged; live ones it
    /// drops are deleted. With `show_nested`, the changes inside nested
    /// stacks are listed too, each with its `parent_resource`.
    pub(super) async fn resource_changes(
        &self,
        current: &StackRow,
        new: &PreparedStack,
        show_nested: bool,
    ) -> Result<Value, EngineError> {
        let mut changes: Map<String, Value> = Map::new();
        for key in ["added", "deleted", "replaced", "updated", "unchanged"] {
            changes.insert(key.to_string(), json!([]));
        }
        self.collect_changes(current, &new.def, None, show_nested, &mut changes).await?;
        Ok(Value::Object(changes))
    }

    fn collect_changes<'a>(
        &'a self,
        current: &'a StackRow,
        new_def: &'a StackDefinition,
        parent: Option<&'a str>,
        show_nested: bool,
        changes: &'a mut Map<String, Value>,
    ) -> futures::future::BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            let resources = StackResources::load(self, current).await?;
            let current_model = self.load_definition(current).await?;
            let children = if show_nested { records::child_stacks(&self.db, &current.id).await? } else { Vec::new() };
            let child_of = |row: &ResourceRow| {
                let id = row.physical_resource_id.as_deref()?;
                children.iter().find(|c| c.id == id)
            };
            let identity = views::identity_of(current);
            let live_rows = resources.live();
            let live_values = LiveContext::load(
                &self.db,
                &self.registry,
                new_def,
                views::best_rows(&resources.rows).into_values(),
                None,
            )
            .await?;
            for defn in &new_def.resources {
                let preview = self.preview_of(new_def, &live_values, &identity, defn);
                let Some((row, required_by)) = live_rows.iter().find(|(r, _)| r.name == defn.name) else {
                    push_change(changes, "added", preview, parent);
                    continue;
                };
                let new = new_def.plugin_and_identity(&self.registry, &defn.name, &defn.type_name).ok();
                let properties = model::resolved_properties(new_def, &self.registry, &live_values, defn);
                let old = current_model.def.plugin_and_identity(&self.registry, &row.name, &row.resource_type).ok();
                let type_change = match &new {
                    Some((new_identity, _)) => {
                        TypeChange::between(old.as_ref().map(|(i, p)| (i.as_str(), p.as_ref())), new_identity)
                    }
                    // No plugin to run: replaced either way.
                    None => TypeChange::Retyped,
                };
                let plugin = new.map(|(_, p)| p);
                let decision = match &plugin {
                    // Another plugin: replaced (upstream compares classes);
                    // its named substitute takes it over in place.
                    _ if type_change == TypeChange::Retyped => UpdateDecision::Replace,
                    // A failed or never created resource is replaced, as upstream.
                    _ if row.status == Status::Failed || row.action == Action::Init => UpdateDecision::Replace,
                    Some(plugin) => {
                        let old = match &row.properties_data {
                            Some(Value::Object(p)) => p.clone(),
                            _ => Map::new(),
                        };
                        match plugin.update_decision(&old, &properties) {
                            // Its type changed: the substitute updates it.
                            UpdateDecision::Unchanged if type_change == TypeChange::Substituted => {
                                UpdateDecision::InPlace
                            }
                            decision => decision,
                        }
                    }
                    None => UpdateDecision::Replace,
                };
                match decision {
                    UpdateDecision::Replace => {
                        push_change(changes, "replaced", preview, parent);
                        if let Some(child) = child_of(row) {
                            self.collect_deleted(child, &row.name, changes).await?;
                        }
                    }
                    UpdateDecision::Unchanged => push_change(changes, "unchanged", preview, parent),
                    UpdateDecision::InPlace => {
                        let attributes = self.resource_attributes(&current_model, row, &[]).await?;
                        let doc = self.existing_preview(
                            &identity,
                            row,
                            required_by.clone(),
                            defn.description.clone().unwrap_or_default(),
                            attributes,
                        );
                        push_change(changes, "updated", doc, parent);
                        let nested = child_of(row).zip(
                            plugin.as_ref().and_then(|p| self.nested_definition(new_def, p.as_ref(), &properties)),
                        );
                        if let Some((child, child_def)) = nested {
                            let child_def = child_def?;
                            self.collect_changes(child, &child_def, Some(&row.name), show_nested, changes).await?;
                        }
                    }
                }
            }
            for (row, required_by) in &live_rows {
                if new_def.resource(&row.name).is_none() {
                    push_change(
                        changes,
                        "deleted",
                        self.existing_preview(&identity, row, required_by.clone(), String::new(), Map::new()),
                        parent,
                    );
                    if let Some(child) = child_of(row) {
                        self.collect_deleted(child, &row.name, changes).await?;
                    }
                }
            }
            Ok(())
        })
    }

    /// The definition the nested stack of a resource of `def` moves to
    /// with `properties` (parameters without values are null until then).
    fn nested_definition(
        &self,
        def: &StackDefinition,
        plugin: &dyn crate::resources::ResourceType,
        properties: &Map<String, Value>,
    ) -> Option<Result<StackDefinition, EngineError>> {
        let mut environment = def.environment.to_value();
        if let Value::Object(env) = &mut environment {
            env.remove("parameters");
        }
        let spec = plugin.nested_stack_spec(properties, &def.files, &environment)?;
        let pseudo = keelson_hot::PseudoParams { region: self.settings.region_name.clone(), ..Default::default() };
        Some(
            StackDefinition::parse_allow_missing(&spec.template, &spec.files, &spec.environment, &pseudo)
                .map(|d| d.into_nested(true)),
        )
    }

    /// Every live resource of nested stack `stack` (and of its own nested
    /// stacks) as deleted, under `parent`.
    fn collect_deleted<'a>(
        &'a self,
        stack: &'a StackRow,
        parent: &'a str,
        changes: &'a mut Map<String, Value>,
    ) -> futures::future::BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            let resources = StackResources::load(self, stack).await?;
            let children = records::child_stacks(&self.db, &stack.id).await?;
            let identity = views::identity_of(stack);
            for (row, required_by) in resources.live() {
                push_change(
                    changes,
                    "deleted",
                    self.existing_preview(&identity, row, required_by.clone(), String::new(), Map::new()),
                    Some(parent),
                );
                let child = row.physical_resource_id.as_deref().and_then(|id| children.iter().find(|c| c.id == id));
                if let Some(child) = child {
                    self.collect_deleted(child, &row.name, changes).await?;
                }
            }
            Ok(())
        })
    }

    fn existing_preview(
        &self,
        identity: &StackIdentity,
        row: &ResourceRow,
        required_by: Vec<String>,
        description: String,
        attributes: Map<String, Value>,
    ) -> Value {
        views::resource_preview(ResourcePreview {
            stack: identity,
            name: &row.name,
            type_name: &row.resource_type,
            physical_resource_id: row.physical_resource_id.as_deref(),
            action: row.action.as_str(),
            status: row.status.as_str(),
            status_reason: &row.status_reason,
            created_at: row.created_at,
            updated_at: row.updated_at,
            required_by,
            description,
            metadata: views::metadata_of(row),
            attributes,
            properties: None,
        })
    }
}

/// A request's environment document; malformed ones answer heat-api's
/// "Environment not in valid format" 400.
fn environment_from(doc: &Value) -> Result<keelson_hot::Environment, EngineError> {
    keelson_hot::Environment::from_value(doc).map_err(|e| {
        if e.kind == keelson_hot::TemplateErrorKind::BadRequest {
            super::params::bad_request(format!("Environment not in valid format: {}", e.message))
        } else {
            EngineError::from(e)
        }
    })
}

/// The Python class upstream implements a type with, as Heat's
/// dependency-cycle message names resources (`NoneResource "a"`).
fn python_class_name(type_name: &str) -> String {
    match type_name {
        "OS::Heat::None" => "NoneResource".to_string(),
        "OS::Heat::Value" => "Value".to_string(),
        other => other.rsplit("::").next().unwrap_or(other).to_string(),
    }
}

/// Adds a resource preview to one section of `resource_changes`; a nested
/// stack's resources name the resource that runs it.
fn push_change(changes: &mut Map<String, Value>, section: &str, mut doc: Value, parent: Option<&str>) {
    if let (Some(parent), Value::Object(d)) = (parent, &mut doc) {
        d.insert("parent_resource".into(), json!(parent));
    }
    if let Some(Value::Array(list)) = changes.get_mut(section) {
        list.push(doc);
    }
}
