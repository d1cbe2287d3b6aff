//! The in-memory definition of a stack: its parsed template, merged
//! environment, parameter values and resource definitions, the dependency
//! graph between resources, validation against the plugin registry, and a
//! [`LiveContext`] resolving properties/outputs against live resources.
//!
//! Definitions are immutable once built; [`DefinitionCache`] keeps one per
//! raw_template id so a 1000-resource traversal parses the template once
//! (a bounded number, of bounded size).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use keelson_db::Db;
use keelson_hot::{
    Environment, OutputDefn, ParamValues, PseudoParams, RegistryTarget, Resolution, ResolveContext, ResourceDefn,
    Template, TemplateError,
};
use serde_json::{Map, Value};

use crate::error::{EngineError, HeatErrorCode};
use crate::resources::{self, Properties, Registry, ResourceState, ResourceType, StackMember};
use crate::store::{self, ResourceRow, StackRow};

/// The template every DELETE (and the rollback of a create) converges to.
pub fn empty_template() -> Value {
    serde_json::json!({"heat_template_version": "2013-05-23"})
}

/// What a resource runs once the registry's mappings are followed.
enum Runs {
    /// A plugin type (registered or not).
    Type(String),
    /// A template file, named by the mapping of `mapped_type` (the written
    /// type when the resource names the file itself).
    Template { file: String, mapped_type: String },
}

/// A parsed, immutable stack definition.
#[derive(Debug)]
pub struct StackDefinition {
    pub template: Template,
    pub environment: Environment,
    pub params: ParamValues,
    pub files: Map<String, Value>,
    pub resources: Vec<ResourceDefn>,
    pub outputs: Vec<OutputDefn>,
    /// A nested stack's definition: `resource_facade` reads its parent
    /// resource.
    pub nested: bool,
    /// Whether the template calls `resource_facade` at all (the parent
    /// resource is read only then).
    pub uses_resource_facade: bool,
    /// Template resources' plugins, built on first use.
    template_plugins: TemplatePlugins,
    /// What each resource's type adds to the template's dependencies
    /// (upstream `add_dependencies`), found on first use.
    implicit_requires: OnceLock<BTreeMap<String, BTreeSet<String>>>,
    /// Heat's types keelson does not implement whose service the
    /// validating caller lacks, with Heat's reason; nested stacks'
    /// definitions inherit them.
    unavailable_types: BTreeMap<String, String>,
}

/// Plugins built for this definition's template resources, by resource
/// name and written type.
#[derive(Default)]
struct TemplatePlugins(Mutex<HashMap<String, Arc<dyn ResourceType>>>);

impl TemplatePlugins {
    fn get(&self, key: &str) -> Option<Arc<dyn ResourceType>> {
        self.0.lock().ok().and_then(|m| m.get(key).cloned())
    }

    fn insert(&self, key: String, plugin: Arc<dyn ResourceType>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, plugin);
        }
    }
}

impl std::fmt::Debug for TemplatePlugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TemplatePlugins")
    }
}

impl StackDefinition {
    /// Parses documents whose environment already holds the user's
    /// parameters; parameter values are checked against their schemata.
    pub fn parse(
        template: &Value,
        files: &Map<String, Value>,
        environment: &Value,
        pseudo: &PseudoParams,
    ) -> Result<StackDefinition, EngineError> {
        Self::parse_with(template, files, environment, pseudo, false)
    }

    /// As [`StackDefinition::parse`], parameters without a value being
    /// null (see `Template::validate_parameters_allow_missing`).
    pub fn parse_allow_missing(
        template: &Value,
        files: &Map<String, Value>,
        environment: &Value,
        pseudo: &PseudoParams,
    ) -> Result<StackDefinition, EngineError> {
        Self::parse_with(template, files, environment, pseudo, true)
    }

    fn parse_with(
        template: &Value,
        files: &Map<String, Value>,
        environment: &Value,
        pseudo: &PseudoParams,
        allow_missing: bool,
    ) -> Result<StackDefinition, EngineError> {
        let parsed = Template::parse(template)?;
        let environment = Environment::from_value(environment)?;
        let params = if allow_missing {
            parsed.validate_parameters_allow_missing(&environment, &Map::new(), pseudo)?
        } else {
            parsed.validate_parameters(&environment, &Map::new(), pseudo)?
        };
        let resources = parsed.resources(&params)?;
        let outputs = parsed.outputs(&params)?;
        let text = template.to_string();
        Ok(StackDefinition {
            template: parsed,
            environment,
            params,
            files: files.clone(),
            resources,
            outputs,
            nested: false,
            uses_resource_facade: text.contains("\"resource_facade\"") || text.contains("\"Fn::ResourceFacade\""),
            template_plugins: TemplatePlugins::default(),
            implicit_requires: OnceLock::new(),
            unavailable_types: BTreeMap::new(),
        })
    }

    /// This definition as a nested stack's (see [`StackDefinition::nested`]).
    pub fn into_nested(mut self, nested: bool) -> StackDefinition {
        self.nested = nested;
        self
    }

    /// The stored definition `template_id` of `stack`.
    pub async fn load(
        db: &Db,
        stack: &StackRow,
        template_id: i64,
        region: &str,
    ) -> Result<StackDefinition, EngineError> {
        let raw = store::templates::get(db, template_id)
            .await?
            .ok_or_else(|| EngineError::entity_not_found("RawTemplate", &template_id.to_string()))?;
        Self::from_raw(&raw, stack, region)
    }

    /// The definition stored as `raw` for `stack`.
    fn from_raw(raw: &store::RawTemplateRow, stack: &StackRow, region: &str) -> Result<StackDefinition, EngineError> {
        Ok(StackDefinition::parse(&raw.template, &raw.files, &raw.environment, &pseudo_params(stack, region))?
            .into_nested(stack.owner_id.is_some()))
    }

    pub fn resource(&self, name: &str) -> Option<&ResourceDefn> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// The plugin type a resource runs as (environment type mappings
    /// followed); a resource running a template file keeps its written type.
    pub fn effective_type(&self, defn: &ResourceDefn) -> Result<String, EngineError> {
        Ok(match self.runs(&defn.name, &defn.type_name)? {
            Runs::Type(t) => t,
            Runs::Template { .. } => defn.type_name.clone(),
        })
    }

    /// What resource `name` written as `written_type` runs under this
    /// definition's environment, its registry mappings followed to the end
    /// of their chain (upstream resolves a mapped type again, so
    /// `OS::Heat::ScaledResource -> AWS::EC2::Instance -> provider.yaml`
    /// runs the provider).
    fn runs(&self, name: &str, written_type: &str) -> Result<Runs, EngineError> {
        Ok(match self.environment.resolve_type_for(name, written_type)? {
            Some(Resolution { target: RegistryTarget::Type(t), .. }) => Runs::Type(t),
            Some(Resolution { target: RegistryTarget::TemplateFile(file), mapped_type }) => {
                Runs::Template { file, mapped_type }
            }
            None if keelson_hot::is_template_reference(written_type) => {
                Runs::Template { file: written_type.to_string(), mapped_type: written_type.to_string() }
            }
            None => Runs::Type(written_type.to_string()),
        })
    }

    /// The plugin resource `name` (written as `written_type`) runs as and
    /// what decides whether it keeps that plugin across an update: the
    /// plugin type, or the template file a template resource runs (two
    /// type names mapped to one file are one plugin, as upstream compares
    /// classes), both at the end of the registry's mapping chain.
    pub fn plugin_and_identity(
        &self,
        registry: &Registry,
        name: &str,
        written_type: &str,
    ) -> Result<(String, Arc<dyn ResourceType>), EngineError> {
        let identity = match self.runs(name, written_type)? {
            Runs::Type(t) => t,
            Runs::Template { file, .. } => format!("template:{file}"),
        };
        Ok((identity, self.plugin_for(registry, name, written_type)?))
    }

    /// The plugin resource `name` (written as `written_type`) runs as: a
    /// registered type, or a template resource built from its file (once
    /// per definition).
    pub fn plugin_for(
        &self,
        registry: &Registry,
        name: &str,
        written_type: &str,
    ) -> Result<Arc<dyn ResourceType>, EngineError> {
        let (file, mapped_type) = match self.runs(name, written_type)? {
            Runs::Template { file, mapped_type } => (file, mapped_type),
            Runs::Type(type_name) => {
                return registry.get(&type_name).ok_or_else(|| self.missing_type(written_type, &type_name));
            }
        };
        let key = format!("{name}\u{0}{written_type}");
        if let Some(plugin) = self.template_plugins.get(&key) {
            return Ok(plugin);
        }
        let plugin: Arc<dyn ResourceType> = Arc::new(resources::TemplateResource::build(
            written_type,
            &mapped_type,
            name,
            &file,
            &self.files,
            &self.environment,
            registry.host().clone(),
        )?);
        self.template_plugins.insert(key, plugin.clone());
        Ok(plugin)
    }

    /// Why a resource written as `written_type` has no plugin
    /// (`type_name`, as the environment maps it): one of Heat's types whose
    /// service the caller lacks is Heat's ResourceTypeUnavailable (Heat
    /// checks it first); another of Heat's types is not implemented here;
    /// any other type is unknown.
    fn missing_type(&self, written_type: &str, type_name: &str) -> EngineError {
        match (resources::unimplemented::lookup(type_name), self.unavailable_types.get(type_name)) {
            (Some(Some(required)), Some(reason)) => resources::constraints::unavailable(written_type, required, reason),
            (Some(_), _) => resources::unimplemented::not_implemented(type_name),
            (None, _) => EngineError::BadRequest(format!("The Resource Type ({type_name}) could not be found.")),
        }
    }

    /// Records which of Heat's types keelson does not implement (see
    /// [`resources::unimplemented::needing_service`]) the validating
    /// caller's catalog cannot serve, with Heat's reason for each.
    pub fn set_unavailable_types(&mut self, unavailable: BTreeMap<String, String>) {
        self.unavailable_types = unavailable;
    }

    /// The actions the environment restricts for resource `name`.
    pub fn restricted_actions(&self, name: &str) -> BTreeSet<String> {
        self.environment.restricted_actions(name)
    }

    /// Names of the resources `name` needs first (only those defined
    /// here): those its template names and those its type adds (upstream
    /// `add_dependencies`). Every create, update, delete and check order
    /// is built from this.
    pub fn requires(&self, registry: &Registry, name: &str) -> BTreeSet<String> {
        let mut names = self.explicit_requires(name);
        if let Some(implicit) = self.implicit_requires(registry).get(name) {
            names.extend(implicit.iter().cloned());
        }
        names
    }

    /// The resources the template makes `name` need (references and
    /// `depends_on`).
    fn explicit_requires(&self, name: &str) -> BTreeSet<String> {
        let Some(defn) = self.resource(name) else {
            return BTreeSet::new();
        };
        defn.requires().into_iter().filter(|r| r != name && self.resource(r).is_some()).collect()
    }

    /// Each resource's implicit requirements, asked of its type once per
    /// definition. Properties are resolved before anything exists; a
    /// resource whose properties do not validate adds and offers nothing
    /// (upstream ignores such errors here; validation reports them).
    fn implicit_requires(&self, registry: &Registry) -> &BTreeMap<String, BTreeSet<String>> {
        self.implicit_requires.get_or_init(|| {
            let unknown = LiveContext::placeholders(self);
            let resolved: Vec<(&str, Arc<dyn ResourceType>, Properties)> = self
                .resources
                .iter()
                .filter_map(|defn| {
                    let plugin = self.plugin_for(registry, &defn.name, &defn.type_name).ok()?;
                    let given = defn.properties.resolve(&unknown).ok()?;
                    let properties = plugin.validate_properties(&defn.name, &given).ok()?;
                    Some((defn.name.as_str(), plugin, properties))
                })
                .collect();
            let members: Vec<StackMember<'_>> = resolved
                .iter()
                .map(|(name, plugin, properties)| StackMember { name, type_name: plugin.type_name(), properties })
                .collect();
            let mut implicit = BTreeMap::new();
            for ((_, plugin, _), this) in resolved.iter().zip(&members) {
                let explicit = self.explicit_requires(this.name);
                let added: BTreeSet<String> = plugin
                    .implicit_requirements(this, &explicit, &members)
                    .into_iter()
                    .filter(|n| n != this.name && !explicit.contains(n))
                    .collect();
                if !added.is_empty() {
                    implicit.insert(this.name.to_string(), added);
                }
            }
            implicit
        })
    }

    /// Full API validation: references, cycles, types, properties (with
    /// get_resource/get_attr unknown).
    pub fn validate(&self, registry: &Registry) -> Result<(), EngineError> {
        self.validate_passing_over(registry, &[])
    }

    /// [`Self::validate`], passing over each resource whose error has one
    /// of the `ignorable` codes (`POST /validate?ignore_errors=`): as Heat's
    /// `Stack.validate`, the resources after it are still checked.
    pub fn validate_passing_over(&self, registry: &Registry, ignorable: &[HeatErrorCode]) -> Result<(), EngineError> {
        self.validate_at_depth(registry, 0, ignorable)
    }

    fn validate_at_depth(
        &self,
        registry: &Registry,
        depth: usize,
        ignorable: &[HeatErrorCode],
    ) -> Result<(), EngineError> {
        self.template.check_references(&self.params)?;
        self.check_cycles(registry)?;
        let unknown = LiveContext::placeholders(self);
        for defn in &self.resources {
            let checked = (|| {
                let plugin = self.plugin_for(registry, &defn.name, &defn.type_name)?;
                if let Some(facade) = self.facade_of(registry, &defn.name, &defn.type_name)? {
                    check_against_facade(&defn.type_name, facade.schema(), plugin.schema())?;
                }
                let given = defn.properties.resolve(&unknown)?;
                let properties = plugin.validate_properties(&defn.name, &given)?;
                // Deeper than this the creation itself refuses (the engine's
                // max_nested_stack_depth); validation stops descending.
                if depth < MAX_VALIDATION_DEPTH {
                    self.validate_nested(registry, &defn.name, plugin.as_ref(), &properties, depth)?;
                }
                Ok(())
            })();
            crate::error::ignoring(checked, ignorable)?;
        }
        Ok(())
    }

    /// The values of this stack's parameters, then resources, that custom
    /// constraints check against a service, in template order (run once
    /// the stack validated, see [`resources::constraints::run_checks`]);
    /// a parameter a service-free custom constraint refuses is an error.
    /// Values that depend on another resource are unknown here and, as
    /// Heat's validation of resources not yet created, not checked.
    pub fn service_constraint_checks(
        &self,
        registry: &Registry,
    ) -> Result<Vec<resources::constraints::PendingCheck>, EngineError> {
        let unknown = LiveContext::placeholders(self);
        let mut checks = resources::constraints::parameter_checks(self.template.param_schemata(), &self.params)?;
        for defn in &self.resources {
            let Ok(plugin) = self.plugin_for(registry, &defn.name, &defn.type_name) else { continue };
            let Ok(given) = defn.properties.resolve(&unknown) else { continue };
            let Ok(properties) = plugin.validate_properties(&defn.name, &given) else { continue };
            // A property a deprecated one was translated to (`network_id`
            // to `network`) holds what the template wrote under the old key.
            let written = given.as_object();
            let from_resources = |key: &str| {
                defn.properties.key_references_resources(key)
                    || written.is_some_and(|w| {
                        !w.contains_key(key)
                            && w.iter().any(|(old, value)| {
                                defn.properties.key_references_resources(old) && properties.get(key) == Some(value)
                            })
                    })
            };
            checks.extend(resources::constraints::pending_checks(
                &defn.name,
                &plugin.schema().properties,
                &properties,
                &from_resources,
            ));
        }
        Ok(checks)
    }

    /// The service each resource's type acts through, by the type as the
    /// template writes it, each type once, in template order (checked in
    /// the validating caller's catalog before the constraints, see
    /// [`resources::constraints::check_stack`]).
    pub fn required_services(&self, registry: &Registry) -> Vec<(String, resources::RequiredService)> {
        let mut out: Vec<(String, resources::RequiredService)> = Vec::new();
        for defn in &self.resources {
            let Ok(plugin) = self.plugin_for(registry, &defn.name, &defn.type_name) else { continue };
            if let Some(required) = plugin.required_service() {
                if !out.iter().any(|(t, _)| *t == defn.type_name) {
                    out.push((defn.type_name.clone(), required));
                }
            }
        }
        out
    }

    /// Upstream `StackResource.validate_nested_stack`: the nested stack a
    /// resource would run is validated too, its errors under the path
    /// `resources.<name><<template>>`.
    fn validate_nested(
        &self,
        registry: &Registry,
        name: &str,
        plugin: &dyn ResourceType,
        properties: &resources::Properties,
        depth: usize,
    ) -> Result<(), EngineError> {
        let Some(nested) = self.nested_definition(name, plugin, properties) else {
            return Ok(());
        };
        let nested = nested.and_then(|d| d.validate_at_depth(registry, depth + 1, &[]));
        nested.map_err(|e| nested_validation_error(e, &format!("resources.{name}<{}>", plugin.nested_stack_label())))
    }

    /// The nested stack a resource would run with `properties`, where its
    /// plugin can tell it without running anything.
    fn nested_definition(
        &self,
        name: &str,
        plugin: &dyn ResourceType,
        properties: &resources::Properties,
    ) -> Option<Result<StackDefinition, EngineError>> {
        let mut environment = self.environment.to_value();
        if let Value::Object(env) = &mut environment {
            env.remove("parameters");
        }
        let spec = plugin.nested_stack_spec(properties, &self.files, &environment)?;
        let param = |n: &str| self.params.get(n).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let pseudo = PseudoParams {
            stack_id: String::new(),
            stack_name: format!("{}-{name}", param("OS::stack_name")),
            project_id: param("OS::project_id"),
            region: param("OS::region"),
        };
        Some(StackDefinition::parse_allow_missing(&spec.template, &spec.files, &spec.environment, &pseudo).map(
            |mut d| {
                d.unavailable_types = self.unavailable_types.clone();
                d.into_nested(true)
            },
        ))
    }

    /// Every resource type the stack would instantiate, its nested
    /// stacks' included (as deep as validation descends): each resource's
    /// written type and the type of the plugin it maps to, so that an
    /// environment alias or a group's member definition cannot hide a type
    /// from its `resource_types:<type>` rule (Heat's `all_resource_types`,
    /// which its policy checks, sees the top level's written types only).
    pub fn resource_types(&self, registry: &Registry) -> BTreeSet<String> {
        let mut types = BTreeSet::new();
        self.collect_resource_types(registry, 0, &mut types);
        types
    }

    fn collect_resource_types(&self, registry: &Registry, depth: usize, types: &mut BTreeSet<String>) {
        let unknown = LiveContext::placeholders(self);
        for defn in &self.resources {
            types.insert(defn.type_name.clone());
            let Ok(plugin) = self.plugin_for(registry, &defn.name, &defn.type_name) else {
                continue;
            };
            types.insert(plugin.type_name().to_string());
            if depth >= MAX_VALIDATION_DEPTH {
                continue;
            }
            let Ok(given) = defn.properties.resolve(&unknown) else {
                continue;
            };
            let Ok(properties) = plugin.validate_properties(&defn.name, &given) else {
                continue;
            };
            if let Some(Ok(nested)) = self.nested_definition(&defn.name, plugin.as_ref(), &properties) {
                nested.collect_resource_types(registry, depth + 1, types);
            }
        }
    }

    /// The type a template resource stands in for (upstream looks the
    /// type up again, ignoring the mapping that led to the template): the
    /// type mappings' chain when the resource's own section chose the
    /// template, else the built-in type of that name. None for other
    /// resources.
    fn facade_of(
        &self,
        registry: &Registry,
        name: &str,
        written_type: &str,
    ) -> Result<Option<Arc<dyn ResourceType>>, EngineError> {
        let Runs::Template { file, .. } = self.runs(name, written_type)? else {
            return Ok(None);
        };
        let next = if self.environment.resolve_type_only_for(name, written_type).is_some() {
            self.environment.resolve_type_skipping_own_for(name, written_type)?
        } else {
            None
        };
        match next {
            Some(Resolution { target: RegistryTarget::TemplateFile(facade_file), mapped_type })
                if facade_file != file =>
            {
                let facade = resources::TemplateResource::build(
                    written_type,
                    &mapped_type,
                    name,
                    &facade_file,
                    &self.files,
                    &self.environment,
                    registry.host().clone(),
                )?;
                Ok(Some(Arc::new(facade)))
            }
            Some(Resolution { target: RegistryTarget::TemplateFile(_), .. }) => Ok(None),
            Some(Resolution { target: RegistryTarget::Type(t), .. }) => Ok(registry.get(&t)),
            None => Ok(registry.get(written_type)),
        }
    }

    /// Heat's CircularDependencyException text.
    fn check_cycles(&self, registry: &Registry) -> Result<(), EngineError> {
        let mut state: HashMap<&str, u8> = HashMap::new();
        fn visit<'a>(
            def: &'a StackDefinition,
            registry: &Registry,
            name: &'a str,
            state: &mut HashMap<&'a str, u8>,
        ) -> Result<(), String> {
            match state.get(name) {
                Some(1) => return Err(name.to_string()),
                Some(_) => return Ok(()),
                None => {}
            }
            state.insert(name, 1);
            // The written references unfiltered: a resource naming itself
            // is a cycle.
            let written = def.resource(name).map(ResourceDefn::requires).unwrap_or_default();
            let implicit = def.implicit_requires(registry).get(name).into_iter().flatten().cloned();
            for req in written.into_iter().chain(implicit) {
                if let Some(r) = def.resource(&req) {
                    visit(def, registry, &r.name, state)?;
                }
            }
            state.insert(name, 2);
            Ok(())
        }
        for r in &self.resources {
            visit(self, registry, &r.name, &mut state)
                .map_err(|name| EngineError::CircularDependency(format!("Circular Dependency Found: {name}")))?;
        }
        Ok(())
    }
}

/// The pseudo parameters of a stored stack.
pub fn pseudo_params(stack: &StackRow, region: &str) -> PseudoParams {
    PseudoParams {
        stack_id: stack.id.clone(),
        stack_name: stack.name.clone(),
        project_id: stack.tenant.clone(),
        region: region.to_string(),
    }
}

/// Parsed definitions by raw_template id (templates are immutable),
/// bounded by count and by the size of the documents they were parsed
/// from (a parsed definition takes a few times its documents' size), the
/// least recently used evicted first: one stack's templates cannot hold
/// the engine's memory.
#[derive(Default)]
pub struct DefinitionCache {
    entries: Mutex<CacheEntries>,
}

#[derive(Default)]
struct CacheEntries {
    by_template: HashMap<i64, CachedDefinition>,
    /// The sum of the entries' `weight`.
    weight: usize,
    /// Use counter: each hit or insert takes the next value.
    clock: u64,
}

struct CachedDefinition {
    definition: Arc<StackDefinition>,
    /// The JSON size of the template, files and environment it was parsed from.
    weight: usize,
    last_used: u64,
}

/// At most this many definitions are cached...
pub const DEFINITION_CACHE_ENTRIES: usize = 64;
/// ...and their documents together at most this many bytes (a template
/// of `max_template_size`'s default 512 KiB with a 1 MiB body of files
/// and environment fits about 40 times).
pub const DEFINITION_CACHE_BYTES: usize = 64 * 1024 * 1024;

impl CacheEntries {
    fn get(&mut self, template_id: i64) -> Option<Arc<StackDefinition>> {
        self.clock += 1;
        let now = self.clock;
        self.by_template.get_mut(&template_id).map(|e| {
            e.last_used = now;
            e.definition.clone()
        })
    }

    fn insert(&mut self, template_id: i64, definition: Arc<StackDefinition>, weight: usize) {
        if weight > DEFINITION_CACHE_BYTES {
            return;
        }
        if let Some(old) = self.by_template.remove(&template_id) {
            self.weight -= old.weight;
        }
        while !self.by_template.is_empty()
            && (self.by_template.len() >= DEFINITION_CACHE_ENTRIES || self.weight + weight > DEFINITION_CACHE_BYTES)
        {
            let Some(oldest) = self.by_template.iter().min_by_key(|(_, e)| e.last_used).map(|(id, _)| *id) else {
                break;
            };
            if let Some(evicted) = self.by_template.remove(&oldest) {
                self.weight -= evicted.weight;
            }
        }
        self.clock += 1;
        self.weight += weight;
        self.by_template.insert(template_id, CachedDefinition { definition, weight, last_used: self.clock });
    }

    fn remove(&mut self, template_id: i64) {
        if let Some(old) = self.by_template.remove(&template_id) {
            self.weight -= old.weight;
        }
    }
}

/// The bytes of `v` written as JSON, counted without writing them.
fn json_len(v: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, v) {
        Ok(()) => counter.0,
        // Writing to a counter cannot fail; count the worst case.
        Err(_) => usize::MAX,
    }
}

impl DefinitionCache {
    pub async fn get(
        &self,
        db: &Db,
        stack: &StackRow,
        template_id: i64,
        region: &str,
    ) -> Result<Arc<StackDefinition>, EngineError> {
        if let Some(found) = self.entries.lock().ok().and_then(|mut m| m.get(template_id)) {
            return Ok(found);
        }
        let raw = store::templates::get(db, template_id)
            .await?
            .ok_or_else(|| EngineError::entity_not_found("RawTemplate", &template_id.to_string()))?;
        let weight = json_len(&raw.template)
            .saturating_add(json_len(&Value::Object(raw.files.clone())))
            .saturating_add(json_len(&raw.environment));
        let loaded = Arc::new(StackDefinition::from_raw(&raw, stack, region)?);
        if let Ok(mut map) = self.entries.lock() {
            map.insert(template_id, loaded.clone(), weight);
        }
        Ok(loaded)
    }

    pub fn forget(&self, template_id: i64) {
        if let Ok(mut map) = self.entries.lock() {
            map.remove(template_id);
        }
    }

    /// How many definitions are cached and the size of their documents.
    pub fn usage(&self) -> (usize, usize) {
        self.entries.lock().map(|m| (m.by_template.len(), m.weight)).unwrap_or_default()
    }
}

/// What one resource offers to the resources and outputs that use it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceFacts {
    pub reference_id: Value,
    pub attributes: Map<String, Value>,
}

/// The attribute every type has: the object as its service shows it.
const SHOW: &str = "show";

/// What a plugin sees of a stored resource.
pub async fn resource_state(db: &Db, row: &ResourceRow) -> Result<ResourceState, EngineError> {
    let data = store::resources::data_get_all(db, row.id).await?;
    Ok(ResourceState {
        physical_id: row.physical_resource_id.clone(),
        data: data.into_iter().map(|(k, v)| (k, v.value)).collect(),
        properties: match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        },
        metadata: row.rsrc_metadata.clone().unwrap_or(Value::Null),
    })
}

/// What a resource offers to the resources and outputs that use it: its
/// reference id and every attribute of its type (what cannot resolve is
/// null). `show`, the service's own view of the object, is passed on where
/// the type has one to give (the types backed by a service); a nested
/// stack's resource gives none, as upstream's.
pub async fn resource_facts(plugin: &dyn ResourceType, resource_name: &str, state: &ResourceState) -> ResourceFacts {
    let mut attributes = Map::new();
    for a in plugin.schema().attributes.iter().filter(|a| a.name != SHOW) {
        let v = resources::resolve_attribute(plugin, resource_name, state, a.name).await.unwrap_or(Value::Null);
        attributes.insert(a.name.to_string(), v);
    }
    if !plugin.runs_nested_stack() {
        if let Ok(shown @ Value::Object(_)) = resources::resolve_attribute(plugin, resource_name, state, SHOW).await {
            attributes.insert(SHOW.to_string(), shown);
        }
    }
    // A software deployment's config outputs.
    for (k, v) in plugin.extra_attributes(state).await {
        attributes.entry(k).or_insert(v);
    }
    // Nested-stack resources also pass their members on, for the
    // attributes whose names are in no schema (`resource.<n>.<attr>`, a
    // group member's attribute).
    if plugin.runs_nested_stack() {
        if let Ok(members @ Value::Array(_)) = plugin.attribute(state, resources::MEMBERS_FACT).await {
            attributes.insert(resources::MEMBERS_FACT.to_string(), members);
        }
    }
    ResourceFacts { reference_id: plugin.reference_id(state), attributes }
}

/// A resolution context over known resource facts; unknown resources
/// resolve to null (as upstream does for not-yet-created resources).
pub struct LiveContext {
    params: ParamValues,
    files: Map<String, Value>,
    facts: BTreeMap<String, ResourceFacts>,
    /// What `resource_facade` answers (`metadata`, `deletion_policy`,
    /// `update_policy` of the parent resource); None outside nested stacks.
    facade: Option<Map<String, Value>>,
}

impl LiveContext {
    pub fn new(def: &StackDefinition, facts: BTreeMap<String, ResourceFacts>) -> LiveContext {
        LiveContext {
            params: def.params.clone(),
            files: def.files.clone(),
            facts,
            // Unknown until read (`with_facade`), as other live values.
            facade: def.nested.then(Map::new),
        }
    }

    pub fn placeholders(def: &StackDefinition) -> LiveContext {
        LiveContext::new(def, BTreeMap::new())
    }

    /// The parent resource's facade, read by the caller.
    pub fn with_facade(mut self, facade: Map<String, Value>) -> LiveContext {
        self.facade = Some(facade);
        self
    }

    /// A context over stored resources: `rows` (one per resource name),
    /// read through each row's plugin (its written type mapped by `def`'s
    /// environment) up front, as plugins answer asynchronously and
    /// resolution is synchronous. Rows not created yet are left unknown;
    /// `only` limits the reads to the resources a caller refers to.
    pub async fn load<'a>(
        db: &Db,
        registry: &Registry,
        def: &StackDefinition,
        rows: impl IntoIterator<Item = &'a ResourceRow>,
        only: Option<&BTreeSet<String>>,
    ) -> Result<LiveContext, EngineError> {
        let mut facts = BTreeMap::new();
        for row in rows {
            if row.action == store::Action::Init || only.is_some_and(|names| !names.contains(&row.name)) {
                continue;
            }
            let Ok(plugin) = def.plugin_for(registry, &row.name, &row.resource_type) else {
                continue;
            };
            let state = resource_state(db, row).await?;
            facts.insert(row.name.clone(), resource_facts(plugin.as_ref(), &row.name, &state).await);
        }
        Ok(LiveContext::new(def, facts))
    }

    /// Each output of `def` resolved: its value or its error text.
    pub fn outputs(&self, def: &StackDefinition) -> Vec<(String, Option<String>, Result<Value, String>)> {
        def.outputs
            .iter()
            .map(|o| (o.name.clone(), o.description.clone(), o.value.resolve(self).map_err(|e| e.message)))
            .collect()
    }
}

/// Walks `value` along `path` (map keys, list indexes); Null when a step
/// does not exist.
fn follow_path(mut value: Value, path: &[Value]) -> Value {
    for step in path {
        value = match (&value, step) {
            (Value::Object(m), Value::String(k)) => m.get(k).cloned().unwrap_or(Value::Null),
            (Value::Array(items), Value::Number(n)) => n
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| items.get(i))
                .cloned()
                .unwrap_or(Value::Null),
            (Value::Array(items), Value::String(s)) => {
                s.parse::<usize>().ok().and_then(|i| items.get(i)).cloned().unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
    }
    value
}

/// A group's attribute that no schema names: `resource.<n>` (member n's
/// reference), `resource.<n>.<attr>` (its attribute), or any member
/// attribute name (the list of every member's value), `path` applied as
/// upstream does (per member for the list).
fn member_attribute(members: &[Value], attribute: &str, path: &[Value]) -> Value {
    let attr_of = |m: &Value, name: &str| m.get("attrs").and_then(|a| a.get(name)).cloned().unwrap_or(Value::Null);
    if let Some(rest) = attribute.strip_prefix("resource.") {
        // Upstream `get_nested_attrs`: the member, then its attribute
        // (from the key or the path's first step), then the rest of the
        // path; the member's reference when no attribute is named.
        let (index, attr, rest_path) = match rest.split_once('.') {
            Some((i, a)) => (i, Some(a.to_string()), path),
            None => match path.split_first() {
                Some((Value::String(a), tail)) => (rest, Some(a.clone()), tail),
                _ => (rest, None, path),
            },
        };
        let Some(member) = members.iter().find(|m| m.get("name").and_then(Value::as_str) == Some(index)) else {
            return Value::Null;
        };
        return match attr {
            Some(a) => follow_path(attr_of(member, &a), rest_path),
            None => member.get("ref").cloned().unwrap_or(Value::Null),
        };
    }
    Value::Array(members.iter().map(|m| follow_path(attr_of(m, attribute), path)).collect())
}

impl ResolveContext for LiveContext {
    fn param(&self, name: &str) -> Option<Value> {
        self.params.get(name).cloned()
    }

    fn resource_facade(&self, key: &str) -> Result<Value, TemplateError> {
        match &self.facade {
            Some(facade) => Ok(facade.get(key).cloned().unwrap_or(Value::Null)),
            None => Err(TemplateError::validation_failed(
                "resource_facade is only valid in nested stacks (provider templates)",
            )),
        }
    }

    fn get_resource(&self, name: &str) -> Result<Value, TemplateError> {
        Ok(match self.facts.get(name) {
            Some(f) if !f.reference_id.is_null() => f.reference_id.clone(),
            _ => Value::String(name.to_string()),
        })
    }

    fn get_attr(&self, resource: &str, attribute: &str, path: &[Value]) -> Result<Value, TemplateError> {
        let facts = self.facts.get(resource);
        let mut value = match facts.and_then(|f| f.attributes.get(attribute)) {
            Some(v) => v.clone(),
            None => match facts.and_then(|f| f.attributes.get(resources::MEMBERS_FACT)) {
                Some(Value::Array(members)) => return Ok(member_attribute(members, attribute, path)),
                _ => Value::Null,
            },
        };
        for step in path {
            value = match (&value, step) {
                (Value::Object(m), Value::String(k)) => m.get(k).cloned().unwrap_or(Value::Null),
                (Value::Array(items), Value::Number(n)) => n
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| items.get(i))
                    .cloned()
                    .unwrap_or(Value::Null),
                (Value::Array(items), Value::String(s)) => {
                    s.parse::<usize>().ok().and_then(|i| items.get(i)).cloned().unwrap_or(Value::Null)
                }
                _ => Value::Null,
            };
        }
        Ok(value)
    }

    fn get_attr_all(&self, resource: &str) -> Result<Value, TemplateError> {
        Ok(Value::Object(self.facts.get(resource).map(|f| f.attributes.clone()).unwrap_or_default()))
    }

    fn get_file(&self, name: &str) -> Option<String> {
        self.files.get(name).and_then(Value::as_str).map(str::to_string)
    }
}

/// How deep validation descends into nested stacks.
const MAX_VALIDATION_DEPTH: usize = 5;

/// A nested stack's validation error seen from its parent: upstream's
/// `StackValidationFailed(error, path=[resources, name<template>])`, the
/// inner error's kind kept, its path appended to the outer one. Upstream
/// validates a nested stack's property values only as its resources'
/// checks read them, so a property error there names the resource only
/// (`resources.r: : Value 'x' is not an integer`).
fn nested_validation_error(e: EngineError, outer: &str) -> EngineError {
    let text = e.message();
    let property_error = text.strip_prefix("Property error: ").and_then(|rest| {
        let (path, message) = rest.split_once(": ")?;
        let resource = path.strip_prefix("resources.")?.split_once(".properties")?.0;
        Some(format!("resources.{resource}: : {message}"))
    });
    let inner = property_error.unwrap_or(text);
    let message = match inner.split_once(": ") {
        Some((kind, rest))
            if rest.starts_with("resources.") && !kind.contains(' ') && !kind.starts_with("resources.") =>
        {
            format!("{kind}: {outer}.{rest}")
        }
        _ if inner.starts_with("resources.") => format!("{outer}.{inner}"),
        _ => format!("{outer}: {inner}"),
    };
    e.with_message(&message)
}

/// Upstream `StackResource._validate_against_facade`: a provider
/// template must take every property the facade requires (with a matching
/// type), require none the facade lacks, and offer every attribute of it.
fn check_against_facade(
    type_name: &str,
    facade: &resources::ResourceSchema,
    provider: &resources::ResourceSchema,
) -> Result<(), EngineError> {
    use resources::PropertyType;
    // A template parameter is a Number where the facade's property is an
    // Integer (upstream `allowed_param_prop_type`).
    let as_parameter = |t: PropertyType| {
        if t == PropertyType::Integer {
            PropertyType::Number
        } else {
            t
        }
    };
    for fs in &facade.properties {
        match provider.property(fs.name) {
            None if fs.required => {
                return Err(EngineError::validation(format!(
                    "Required property {} for facade {type_name} missing in provider",
                    fs.name
                )))
            }
            Some(ps) if as_parameter(fs.kind) != ps.kind => {
                return Err(EngineError::validation(format!(
                    "Property {} type mismatch between facade {type_name} ({}) and provider ({})",
                    fs.name,
                    fs.kind.as_str(),
                    ps.kind.as_str()
                )))
            }
            _ => {}
        }
    }
    for ps in &provider.properties {
        if ps.required && facade.property(ps.name).is_none() {
            return Err(EngineError::validation(format!(
                "Provider requires property {} unknown in facade {type_name}",
                ps.name
            )));
        }
    }
    let facade_attributes = facade.attributes.iter().map(|a| a.name).chain(std::iter::once(SHOW));
    for attr in facade_attributes {
        if !provider.attributes.iter().any(|a| a.name == attr) {
            return Err(EngineError::validation(format!(
                "Attribute {attr} for facade {type_name} missing in provider"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pseudo() -> PseudoParams {
        PseudoParams {
            stack_id: "sid".into(),
            stack_name: "st".into(),
            project_id: "p".into(),
            region: "RegionOne".into(),
        }
    }

    #[test]
    fn parses_requires_and_validates() {
        let t = json!({"heat_template_version": "2015-04-30", "resources": {
            "a": {"type": "OS::Heat::TestResource", "properties": {"value": "x"}},
            "b": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_attr": ["a", "output"]}}}}});
        let d = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
        assert_eq!(d.requires(&Registry::builtin(), "b").into_iter().collect::<Vec<_>>(), vec!["a".to_string()]);
        d.validate(&Registry::builtin()).unwrap();
    }

    #[test]
    fn validation_descends_into_nested_stacks_that_would_exist() {
        let provider = "heat_template_version: 2013-05-23\nresources:\n  random:\n    type: OS::Heat::RandomString\n    properties:\n      length: BAD\n";
        let files: Map<String, Value> = [("provider.yaml".to_string(), json!(provider))].into_iter().collect();
        let env = json!({"resource_registry": {"My::RS": "provider.yaml"}});
        let group = |count: i64| {
            json!({"heat_template_version": "2013-05-23", "resources": {"g": {"type": "OS::Heat::ResourceGroup",
                "properties": {"count": count, "resource_def": {"type": "My::RS"}}}}})
        };
        // No member: nothing of the member's template is validated.
        let empty = StackDefinition::parse(&group(0), &files, &env, &pseudo()).unwrap();
        empty.validate(&Registry::builtin()).unwrap();
        let two = StackDefinition::parse(&group(2), &files, &env, &pseudo()).unwrap();
        let e = two.validate(&Registry::builtin()).unwrap_err();
        assert_eq!(e.heat_type(), "StackValidationFailed");
        assert_eq!(
            e.message(),
            "resources.g<nested_stack>.resources.0<provider.yaml>.resources.random: : Value 'BAD' is not an integer"
        );
    }

    #[test]
    fn a_provider_must_match_the_facade_it_stands_for() {
        let facade = "heat_template_version: 2015-04-30\nparameters:\n  one: {type: string}\n  two: {type: string}\noutputs:\n  here: {value: noop}\n";
        let concrete = "heat_template_version: 2015-04-30\nparameters:\n  one: {type: string}\n  two: {type: string}\n";
        let files: Map<String, Value> =
            [("facade.yaml".to_string(), json!(facade)), ("concrete.yaml".to_string(), json!(concrete))]
                .into_iter()
                .collect();
        let env = json!({"resource_registry": {"OS::Thingy": "facade.yaml", "resources": {"it": {"OS::Thingy": "concrete.yaml"}}}});
        let t = json!({"heat_template_version": "2015-10-15", "resources": {"it": {"type": "OS::Thingy", "properties": {"one": "a", "two": "b"}}}});
        let d = StackDefinition::parse(&t, &files, &env, &pseudo()).unwrap();
        let e = d.validate(&Registry::builtin()).unwrap_err();
        assert_eq!(e.message(), "Attribute here for facade OS::Thingy missing in provider");
    }

    #[test]
    fn validation_alone_needs_no_parameter_values() {
        let t = json!({"heat_template_version": "2016-10-14", "parameters": {"n": {"type": "number"}},
            "resources": {"g": {"type": "OS::Heat::ResourceGroup", "properties": {"count": {"get_param": "n"},
                "resource_def": {"type": "OS::Heat::RandomString"}}}}});
        let e = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap_err();
        assert_eq!(e.message(), "The Parameter (n) was not provided.");
        let d = StackDefinition::parse_allow_missing(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
        d.validate(&Registry::builtin()).unwrap();
    }

    #[test]
    fn unknown_type_is_reported() {
        let t = json!({"heat_template_version": "2015-04-30", "resources": {"a": {"type": "OS::No::Such"}}});
        let d = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
        let e = d.validate(&Registry::builtin()).unwrap_err();
        assert_eq!(e.message(), "The Resource Type (OS::No::Such) could not be found.");
    }

    #[test]
    fn the_definition_cache_is_bounded_by_count_and_bytes_least_recently_used_first() {
        let def = Arc::new(StackDefinition::parse(&empty_template(), &Map::new(), &json!({}), &pseudo()).unwrap());
        let mut cache = CacheEntries::default();
        for id in 0..(DEFINITION_CACHE_ENTRIES as i64 + 10) {
            cache.insert(id, def.clone(), 10);
            if id == 60 {
                // Used again: outlives the ones inserted after it.
                assert!(cache.get(0).is_some());
            }
        }
        assert_eq!(cache.by_template.len(), DEFINITION_CACHE_ENTRIES);
        assert_eq!(cache.weight, 10 * DEFINITION_CACHE_ENTRIES);
        assert!(cache.get(0).is_some(), "recently used entry kept");
        assert!(cache.get(1).is_none(), "least recently used evicted");
        // Three entries of 40% each: the third evicts until it fits.
        let big = DEFINITION_CACHE_BYTES * 2 / 5;
        for id in 100..103 {
            cache.insert(id, def.clone(), big);
        }
        assert!(cache.weight <= DEFINITION_CACHE_BYTES);
        assert!(cache.get(100).is_none() && cache.get(101).is_some() && cache.get(102).is_some());
        // An entry larger than the whole cache is not kept.
        cache.insert(200, def.clone(), DEFINITION_CACHE_BYTES + 1);
        assert!(cache.get(200).is_none());
        cache.remove(101);
        assert_eq!(cache.weight, big + cache.by_template.values().filter(|e| e.weight == 10).count() * 10);
        assert_eq!(json_len(&json!({"a": [1, "x"]})), json!({"a": [1, "x"]}).to_string().len());
    }

    fn openstack_registry() -> Registry {
        let mut registry = Registry::builtin();
        registry.add_openstack_types();
        registry
    }

    /// The order a traversal creates in: a resource once all it requires
    /// are done, ties by name.
    fn creation_order(def: &StackDefinition, registry: &Registry) -> Vec<String> {
        let mut done: Vec<String> = Vec::new();
        let mut names: Vec<&str> = def.resources.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        while done.len() < names.len() {
            let next = names
                .iter()
                .find(|n| !done.iter().any(|d| d == *n) && def.requires(registry, n).iter().all(|r| done.contains(r)))
                .expect("no cycle");
            done.push(next.to_string());
        }
        done
    }

    /// The order a delete runs in: a resource once nothing left requires
    /// it, ties by name.
    fn deletion_order(def: &StackDefinition, registry: &Registry) -> Vec<String> {
        let mut done: Vec<String> = Vec::new();
        let mut names: Vec<&str> = def.resources.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        while done.len() < names.len() {
            let left: Vec<&str> = names.iter().copied().filter(|n| !done.iter().any(|d| d == n)).collect();
            let next = left
                .iter()
                .find(|n| left.iter().all(|other| !def.requires(registry, other).contains(**n)))
                .expect("no cycle");
            done.push(next.to_string());
        }
        done
    }

    /// A port and a subnet of one network that the template does not
    /// link: only the port's implicit dependency orders them.
    fn port_beside_its_subnet() -> StackDefinition {
        let t = json!({"heat_template_version": "2018-08-31", "resources": {
            "net": {"type": "OS::Neutron::Net"},
            "a_port": {"type": "OS::Neutron::Port", "properties": {"network": {"get_resource": "net"}}},
            "z_subnet": {"type": "OS::Neutron::Subnet",
                "properties": {"network": {"get_resource": "net"}, "cidr": "10.0.0.0/24"}}}});
        StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap()
    }

    #[test]
    fn implicit_dependencies_order_create_and_delete() {
        let registry = openstack_registry();
        let def = port_beside_its_subnet();
        assert_eq!(def.requires(&registry, "a_port").into_iter().collect::<Vec<_>>(), vec!["net", "z_subnet"]);
        assert_eq!(creation_order(&def, &registry), vec!["net", "z_subnet", "a_port"]);
        assert_eq!(deletion_order(&def, &registry), vec!["a_port", "z_subnet", "net"]);
        def.validate(&registry).unwrap();
        // Without the type's rule the port would come first.
        let unknown_types = Registry::builtin();
        let def = port_beside_its_subnet();
        assert_eq!(creation_order(&def, &unknown_types), vec!["net", "a_port", "z_subnet"]);
    }

    #[test]
    fn a_floating_ip_waits_for_the_routing_to_its_port() {
        let registry = openstack_registry();
        let t = json!({"heat_template_version": "2018-08-31", "resources": {
            "net": {"type": "OS::Neutron::Net"},
            "sub": {"type": "OS::Neutron::Subnet", "properties": {"network_id": {"get_resource": "net"}, "cidr": "10.0.0.0/24"}},
            "router": {"type": "OS::Neutron::Router", "properties": {"external_gateway_info": {"network": "public"}}},
            "iface": {"type": "OS::Neutron::RouterInterface",
                "properties": {"router_id": {"get_resource": "router"}, "subnet_id": {"get_resource": "sub"}}},
            "port": {"type": "OS::Neutron::Port", "properties": {"network": {"get_resource": "net"},
                "fixed_ips": [{"subnet_id": {"get_resource": "sub"}}]}},
            "fip": {"type": "OS::Neutron::FloatingIP",
                "properties": {"floating_network_id": "public", "port_id": {"get_resource": "port"}}},
            "assoc_fip": {"type": "OS::Neutron::FloatingIP", "properties": {"floating_network": "public"}},
            "assoc": {"type": "OS::Neutron::FloatingIPAssociation", "properties": {
                "floatingip_id": {"get_resource": "assoc_fip"}, "port_id": {"get_resource": "port"}}}}});
        let def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
        let requires = |name: &str| def.requires(&registry, name).into_iter().collect::<Vec<_>>();
        assert_eq!(requires("fip"), vec!["iface", "port", "router"]);
        assert_eq!(requires("assoc_fip"), vec!["router"]);
        assert_eq!(requires("assoc"), vec!["assoc_fip", "iface", "port"]);
        assert_eq!(requires("port"), vec!["net", "sub"]);
        let order = creation_order(&def, &registry);
        assert_eq!(order, vec!["net", "router", "assoc_fip", "sub", "iface", "port", "assoc", "fip"]);
        def.validate(&registry).unwrap();
    }

    #[test]
    fn an_implicit_dependency_can_close_a_cycle() {
        let t = json!({"heat_template_version": "2018-08-31", "resources": {
            "port": {"type": "OS::Neutron::Port", "properties": {"network": "n"}},
            "sub": {"type": "OS::Neutron::Subnet", "properties": {"network": "n", "cidr": "10.0.0.0/24"},
                "depends_on": ["port"]}}});
        let def = StackDefinition::parse(&t, &Map::new(), &json!({}), &pseudo()).unwrap();
        let e = def.validate(&openstack_registry()).unwrap_err();
        assert_eq!(e.heat_type(), "CircularDependencyException");
    }

    #[test]
    fn empty_template_parses() {
        let d = StackDefinition::parse(&empty_template(), &Map::new(), &json!({}), &pseudo()).unwrap();
        assert!(d.resources.is_empty());
    }

    #[test]
    fn nested_members_answer_resource_paths_and_member_lists() {
        let members = vec![
            json!({"name": "0", "ref": "a", "attrs": {"value": "x", "m": {"k": 1}}}),
            json!({"name": "1", "ref": "b", "attrs": {"value": "y", "m": {"k": 2}}}),
        ];
        assert_eq!(member_attribute(&members, "resource.0", &[]), json!("a"));
        assert_eq!(member_attribute(&members, "resource.1.value", &[]), json!("y"));
        assert_eq!(member_attribute(&members, "resource.1", &[json!("m"), json!("k")]), json!(2));
        assert_eq!(member_attribute(&members, "resource.9", &[]), Value::Null);
        assert_eq!(member_attribute(&members, "value", &[]), json!(["x", "y"]));
        assert_eq!(member_attribute(&members, "m", &[json!("k")]), json!([1, 2]));
    }
}
