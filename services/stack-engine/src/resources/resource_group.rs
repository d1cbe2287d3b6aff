//! OS::Heat::ResourceGroup (upstream `resource_group.py`): `count` copies
//! of `resource_def` named "0", "1", … in a nested stack, `index_var`
//! replaced by each member's index. Names listed by `removal_policies` are
//! removed and never reused; scaling down removes the highest indexes.
//! `batch_create` and `rolling_update` walk the nested stack to its target
//! in batches (one nested update per batch, `pause_time` between).
//!
//! After every action the members' references and attributes are kept in
//! the resource's data, so the group's attributes (`refs`, `refs_map`,
//! `attributes`, `resource.<n>[.<attr>]`, any member attribute as a list)
//! resolve without reading the nested stack.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::host::{HostSlot, NestedStackSpec, PluginHost};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::template_resource::{create_child, nested_reference, stored_members, update_child};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState};
use crate::error::EngineError;

/// resource_data keys.
const REMOVED_KEY: &str = "removed_rsrc_list";

pub struct ResourceGroup {
    type_name: &'static str,
    members: Members,
    schema: ResourceSchema,
    update_policy: Vec<PropertySchema>,
    host: Arc<HostSlot>,
}

/// Upstream's `stack_action_timeout` default: the action timeout of a
/// stack without `timeout_mins`, which a group's pauses must fit in.
const DEFAULT_ACTION_TIMEOUT_SECS: f64 = 3600.0;

/// Upstream `update_policy_schema` of the groups: `batch_create` and
/// `rolling_update`, their sizes Integers, `pause_time` a Number, none
/// below its minimum.
fn update_policy_schema() -> Vec<PropertySchema> {
    let max_batch_size = |what| {
        PropertySchema::new("max_batch_size", T::Integer, what)
            .default_value(1)
            .constraint(Constraint::range(Some(1), None))
    };
    let pause_time = |what| {
        PropertySchema::new("pause_time", T::Number, what).default_value(0).constraint(Constraint::range(Some(0), None))
    };
    vec![
        PropertySchema::new("batch_create", T::Map, "Map value for batch create.").map_of(vec![
            max_batch_size("The maximum number of resources to create at once."),
            pause_time("The number of seconds to wait between batches."),
        ]),
        PropertySchema::new("rolling_update", T::Map, "Map value for rolling update.").map_of(vec![
            PropertySchema::new(
                "min_in_service",
                T::Integer,
                "The minimum number of resources in service while rolling updates are being executed.",
            )
            .default_value(0)
            .constraint(Constraint::range(Some(0), None)),
            max_batch_size("The maximum number of resources to replace at once."),
            pause_time("The number of seconds to wait between batches of updates."),
        ]),
    ]
}

/// Where a group's members come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Members {
    /// OS::Heat::ResourceGroup: `count` copies of `resource_def` named
    /// "0", "1", … (removal policies skip names).
    Counted,
    /// OS::Heat::SoftwareDeploymentGroup (upstream `sd.SoftwareDeploymentGroup`)
    /// and StructuredDeploymentGroup: one deployment of the given type per
    /// entry of `servers`, named by its key, deploying the group's config
    /// to the entry's server.
    PerServer(&'static str),
}

impl ResourceGroup {
    pub const SOFTWARE_DEPLOYMENT_GROUP: &'static str = "OS::Heat::SoftwareDeploymentGroup";
    pub const STRUCTURED_DEPLOYMENT_GROUP: &'static str = "OS::Heat::StructuredDeploymentGroup";
    pub const SOFTWARE_DEPLOYMENTS: &'static str = "OS::Heat::SoftwareDeployments";

    /// OS::Heat::SoftwareDeploymentGroup: the deployment's properties but
    /// `server`, and `servers` (name to server id).
    pub fn software_deployment_group(host: Arc<HostSlot>) -> Self {
        Self::deployment_group(host, false)
    }

    /// OS::Heat::StructuredDeploymentGroup: as SoftwareDeploymentGroup,
    /// with StructuredDeployment members.
    pub fn structured_deployment_group(host: Arc<HostSlot>) -> Self {
        Self::deployment_group(host, true)
    }

    /// OS::Heat::SoftwareDeployments (upstream `SoftwareDeployments`):
    /// SoftwareDeploymentGroup's old name, deprecated since 2014.2 and
    /// hidden since 7.0.0. Stacks may still use it; an update that changes
    /// it to its substitute keeps the group and its members.
    pub fn software_deployments(host: Arc<HostSlot>) -> Self {
        let mut group = Self::deployment_group(host, false);
        group.type_name = Self::SOFTWARE_DEPLOYMENTS;
        group.schema.support_status = SupportStatus {
            message: Some("Please use OS::Heat::SoftwareDeploymentGroup instead."),
            previous: Some(Box::new(SupportStatus::deprecated("2014.2"))),
            substitute: Some(Self::SOFTWARE_DEPLOYMENT_GROUP),
            ..SupportStatus::hidden("7.0.0")
        };
        group
    }

    fn deployment_group(host: Arc<HostSlot>, structured: bool) -> Self {
        let deployment = if structured {
            super::SoftwareDeployment::structured(host.clone())
        } else {
            super::SoftwareDeployment::new(host.clone())
        };
        let mut properties = vec![PropertySchema::new(
            "servers",
            T::Map,
            "A map of names and server IDs to apply configuration to. The name is arbitrary and is used as the Heat resource name for the corresponding deployment.",
        )
        .required()
        .update_allowed()];
        properties.extend(deployment.schema().properties.iter().filter(|p| p.name != "server").cloned());
        let per_server = |name: &'static str, what: &'static str| AttributeSchema::new(name, what, Some("map"));
        ResourceGroup {
            type_name: if structured { Self::STRUCTURED_DEPLOYMENT_GROUP } else { Self::SOFTWARE_DEPLOYMENT_GROUP },
            members: Members::PerServer(deployment.type_name()),
            update_policy: update_policy_schema(),
            schema: ResourceSchema {
                properties,
                attributes: vec![
                    per_server(
                        "deploy_stdouts",
                        "A map of server names and the stdout captured from the configuration execution on each.",
                    ),
                    per_server(
                        "deploy_stderrs",
                        "A map of server names and the stderr captured from the configuration execution on each.",
                    ),
                    per_server(
                        "deploy_status_codes",
                        "A map of server names and the status code returned by the configuration execution on each.",
                    ),
                    super::show_attribute(),
                ],
                support_status: SupportStatus::supported("5.0.0"),
                description:
                    "Associates a group of servers with some configuration: one software deployment per server.",
            },
            host,
        }
    }

    pub fn new(host: Arc<HostSlot>) -> Self {
        let resource_list = PropertySchema::new(
            "resource_list",
            T::List,
            "List of resources to be removed when doing an update which requires removal of specific resources.",
        )
        .default_value(json!([]));
        ResourceGroup {
            type_name: Self::TYPE,
            members: Members::Counted,
            update_policy: update_policy_schema(),
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("count", T::Integer, "The number of resources to create.")
                        .default_value(1)
                        .constraint(Constraint::range(Some(0), None))
                        .update_allowed(),
                    PropertySchema::new(
                        "index_var",
                        T::String,
                        "A variable that this resource will use to replace with the current index of a given resource in the group.",
                    )
                    .default_value("%index%")
                    .constraint(Constraint::length(Some(3), None)),
                    PropertySchema::new(
                        "resource_def",
                        T::Map,
                        "Resource definition for the resources in the group. The value of this property is the definition of a resource just as if it had been declared in the template itself.",
                    )
                    .required()
                    .update_allowed()
                    .map_of(vec![
                        PropertySchema::new("type", T::String, "The type of the resources in the group.").required(),
                        PropertySchema::new("properties", T::Map, "Property values for the resources in the group."),
                        PropertySchema::new("metadata", T::Map, "Supplied metadata for the resources in the group."),
                    ]),
                    PropertySchema::new("removal_policies", T::List, "Policies for removal of resources on update.")
                        .default_value(json!([]))
                        .update_allowed()
                        .list_of(
                            PropertySchema::new(
                                "*",
                                T::Map,
                                "Policy to be processed when doing an update which requires removal of specific resources.",
                            )
                            .map_of(vec![resource_list]),
                        ),
                    PropertySchema::new(
                        "removal_policies_mode",
                        T::String,
                        "How to handle changes to removal_policies on update. The default \"append\" mode appends to the internal list, \"update\" replaces it on update.",
                    )
                    .default_value("append")
                    .constraint(Constraint::allowed_values(["append", "update"]))
                    .update_allowed(),
                ],
                attributes: vec![
                    AttributeSchema::new(
                        "refs",
                        "A list of resource IDs for the resources in the group.",
                        Some("list"),
                    ),
                    AttributeSchema::new(
                        "refs_map",
                        "A map of resource names to IDs for the resources in the group.",
                        Some("map"),
                    ),
                    AttributeSchema::new(
                        "attributes",
                        "A map of resource names to the specified attribute of each individual resource. Requires heat_template_version: 2014-10-16.",
                        Some("map"),
                    ),
                    AttributeSchema::new("removed_rsrc_list", "A list of removed resource names.", Some("list")),
                    super::show_attribute(),
                ],
                support_status: SupportStatus::supported("2014.1"),
                description: "Creates one or more identically configured nested resources.",
            },
            host,
        }
    }
}

/// Member names of a group of `count` with `removed` names excluded: the
/// lowest unused indexes (upstream `_resource_names`).
fn member_names(count: i64, removed: &BTreeSet<String>) -> Vec<String> {
    let mut names = Vec::new();
    let mut i: u64 = 0;
    while (names.len() as i64) < count {
        let name = i.to_string();
        if !removed.contains(&name) {
            names.push(name);
        }
        i += 1;
    }
    names
}

/// `value` with every occurrence of `var` in its strings replaced by
/// `index` (upstream `_handle_repl_val`).
fn substitute(value: &Value, var: &str, index: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace(var, index)),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, var, index)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), substitute(v, var, index))).collect()),
        other => other.clone(),
    }
}

/// One member's definition in the nested template.
fn member_definition(members: Members, properties: &Properties, name: &str) -> Value {
    match members {
        Members::Counted => counted_member_definition(properties, name),
        Members::PerServer(member_type) => deployment_definition(member_type, properties, name),
    }
}

/// A deployment group's member: the group's deployment properties (those
/// given) and the entry's server.
fn deployment_definition(member_type: &str, properties: &Properties, name: &str) -> Value {
    let passed =
        ["config", "input_values", "actions", "signal_transport", "name", "input_key", "input_values_validate"];
    let mut props: Map<String, Value> = passed
        .into_iter()
        .filter_map(|k| properties.get(k).filter(|v| !v.is_null()).map(|v| (k.to_string(), v.clone())))
        .collect();
    let server = properties.get("servers").and_then(|s| s.get(name)).cloned().unwrap_or(Value::Null);
    props.insert("server".into(), server);
    json!({"type": member_type, "properties": props})
}

/// The names of a SoftwareDeploymentGroup's members: its servers' keys.
fn server_names(properties: &Properties) -> Vec<String> {
    properties.get("servers").and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// A ResourceGroup member: `resource_def` with `index_var` replaced.
fn counted_member_definition(properties: &Properties, name: &str) -> Value {
    let def = properties.get("resource_def").cloned().unwrap_or(Value::Null);
    let var = properties.get("index_var").and_then(Value::as_str).unwrap_or("%index%");
    let mut out = Map::new();
    out.insert("type".into(), def.get("type").cloned().unwrap_or(Value::Null));
    if let Some(p) = def.get("properties").filter(|p| !p.is_null()) {
        out.insert("properties".into(), substitute(p, var, name));
    }
    if let Some(m) = def.get("metadata").filter(|m| !m.is_null()) {
        out.insert("metadata".into(), substitute(m, var, name));
    }
    Value::Object(out)
}

/// The nested template holding `names`, each defined by `props` (or, for
/// names in `old_names`, by `old` when given: a rolling update's members
/// not yet in the batch).
fn group_template(
    members: Members,
    names: &[String],
    props: &Properties,
    keep_old: Option<(&Properties, &BTreeSet<String>)>,
) -> Value {
    let mut resources = Map::new();
    for name in names {
        let defn = match keep_old {
            Some((old, pending)) if pending.contains(name) => member_definition(members, old, name),
            _ => member_definition(members, props, name),
        };
        resources.insert(name.clone(), defn);
    }
    json!({"heat_template_version": "2015-04-30", "resources": resources})
}

fn removed_of(state: &ResourceState) -> BTreeSet<String> {
    state
        .data
        .get(REMOVED_KEY)
        .and_then(|t| serde_json::from_str::<Vec<String>>(t).ok())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// Names (or references) the removal policies list.
fn policy_targets(props: &Properties) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Array(policies)) = props.get("removal_policies") {
        for p in policies {
            if let Some(Value::Array(list)) = p.get("resource_list") {
                for item in list {
                    out.push(match item {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                }
            }
        }
    }
    out
}

fn index_key(name: &str) -> (u64, String) {
    (name.parse::<u64>().unwrap_or(u64::MAX), name.to_string())
}

/// The update policy of the group (`batch_create` / `rolling_update`),
/// from [`ActionContext::update_policy`].
#[derive(Debug, Clone, Copy)]
struct Batching {
    max_batch_size: usize,
    min_in_service: usize,
    /// Seconds between batches: finite, not negative (validated).
    pause_secs: f64,
}

/// The policy under `key`, validated by the policy schema (a refusal is
/// the resource's failure, with upstream's text).
fn batching(ctx: &ActionContext, schema: &[PropertySchema], key: &str) -> Result<Option<Batching>, ResourceFailure> {
    let Some(given) = ctx.update_policy.as_ref() else {
        return Ok(None);
    };
    let policy = super::validate_update_policy(schema, &ctx.resource_name, given).map_err(ResourceFailure::from)?;
    let Some(policy) = policy.get(key).and_then(Value::as_object) else {
        return Ok(None);
    };
    // Validated Integers fit i64; usize is at least as wide here.
    let size =
        |k: &str, d: i64| usize::try_from(policy.get(k).and_then(Value::as_i64).unwrap_or(d)).unwrap_or(usize::MAX);
    Ok(Some(Batching {
        max_batch_size: size("max_batch_size", 1).max(1),
        min_in_service: size("min_in_service", 0),
        pause_secs: policy.get("pause_time").and_then(Value::as_f64).unwrap_or(0.0),
    }))
}

/// Upstream `_update_timeout`: the pauses between `batches` batches must
/// end before the stack's action timeout does.
pub(crate) fn check_pauses_fit(
    pause_secs: f64,
    batches: usize,
    timeout_mins: Option<i64>,
) -> Result<(), ResourceFailure> {
    let timeout_secs = match timeout_mins {
        Some(mins) if mins > 0 => mins as f64 * 60.0,
        _ => DEFAULT_ACTION_TIMEOUT_SECS,
    };
    let total = pause_secs * batches.saturating_sub(1) as f64;
    if total >= timeout_secs {
        return Err(ResourceFailure::error(
            "ValueError",
            "The current update policy will result in stack update timeout.",
        ));
    }
    Ok(())
}

/// The validated `count` (an Integer, at least 0; 1 by default).
fn count_of(properties: &Properties) -> i64 {
    properties.get("count").and_then(Value::as_i64).unwrap_or(1)
}

impl ResourceGroup {
    /// The resource limit, asked before `count` member names and
    /// definitions are built (a count resolved only now, from another
    /// resource, was not counted when the stack was validated).
    async fn check_size(&self, ctx: &ActionContext, count: i64) -> Result<(), ResourceFailure> {
        let host = self.host.get();
        let members = u64::try_from(count).unwrap_or_default();
        host.check_nested_size(&ctx.stack_id, ctx.state.physical_id.as_deref(), members).await
    }

    async fn spec(
        &self,
        host: &dyn PluginHost,
        ctx: &ActionContext,
        template: Value,
    ) -> Result<NestedStackSpec, ResourceFailure> {
        super::template_resource::group_spec(host, &ctx.stack_id, ctx.state.physical_id.as_deref(), template).await
    }

    /// Walks the nested stack to `names` (all on `props`), in batches when
    /// a policy asks for it.
    async fn converge(
        &self,
        ctx: &mut ActionContext,
        old: Option<&Properties>,
        policy: Option<Batching>,
        names: Vec<String>,
    ) -> Result<(), ResourceFailure> {
        let host = self.host.get();
        let props = ctx.properties.clone();
        let steps: Vec<Value> = match (policy, old) {
            // batch_create: grow by max_batch_size.
            (Some(b), None) => {
                let mut steps = Vec::new();
                let mut upto = 0;
                while upto < names.len() {
                    upto = (upto + b.max_batch_size).min(names.len());
                    steps.push(group_template(self.members, &names[..upto], &props, None));
                }
                steps
            }
            // rolling_update: members whose definition changes move to it
            // a batch at a time (batch size limited so min_in_service stay).
            (Some(b), Some(old_props))
                if names.iter().any(|n| {
                    member_definition(self.members, old_props, n) != member_definition(self.members, &props, n)
                }) =>
            {
                let existing: Vec<String> = stored_members(&ctx.state)
                    .iter()
                    .filter_map(|m| m.get("name").and_then(Value::as_str).map(str::to_string))
                    .filter(|n| names.contains(n))
                    .collect();
                let in_service_room = existing.len().saturating_sub(b.min_in_service).max(1);
                let size = b.max_batch_size.min(in_service_room).max(1);
                let mut pending: BTreeSet<String> = existing.iter().cloned().collect();
                let mut order = existing.clone();
                order.sort_by_key(|n| std::cmp::Reverse(index_key(n)));
                let mut steps = Vec::new();
                for chunk in order.chunks(size) {
                    for n in chunk {
                        pending.remove(n);
                    }
                    steps.push(group_template(self.members, &names, &props, Some((old_props, &pending))));
                }
                if steps.is_empty() {
                    steps.push(group_template(self.members, &names, &props, None));
                }
                steps
            }
            _ => vec![group_template(self.members, &names, &props, None)],
        };
        if let Some(b) = policy {
            check_pauses_fit(b.pause_secs, steps.len(), ctx.timeout_mins)?;
        }
        let pause = policy.map(|b| b.pause_secs).unwrap_or_default();
        let count = steps.len();
        for (i, template) in steps.into_iter().enumerate() {
            let spec = self.spec(host.as_ref(), ctx, template).await?;
            let result = if ctx.state.physical_id.is_none() {
                create_child(host.as_ref(), ctx, spec).await
            } else {
                update_child(host.as_ref(), ctx, spec).await
            };
            result?;
            if i + 1 < count && pause > 0.0 {
                ctx.sleep(pause).await?;
            }
        }
        Ok(())
    }
}

impl Plugin for ResourceGroup {
    const TYPE: &'static str = "OS::Heat::ResourceGroup";

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn takes_update_policy(&self) -> bool {
        true
    }

    fn update_policy_schema(&self) -> &[PropertySchema] {
        &self.update_policy
    }

    fn nested_resource_count(&self, properties: &Properties) -> Option<u64> {
        Some(match self.members {
            Members::Counted => u64::try_from(count_of(properties)).unwrap_or_default(),
            Members::PerServer(_) => u64::try_from(server_names(properties).len()).unwrap_or(u64::MAX),
        })
    }

    fn child_stack_host(&self) -> Option<&HostSlot> {
        Some(&self.host)
    }

    /// The members a create would make (upstream validates them only
    /// when there are any: `count: 0` disables a group whatever its
    /// definition holds).
    fn nested_stack_spec(
        &self,
        properties: &Properties,
        files: &Map<String, Value>,
        environment: &Value,
    ) -> Option<NestedStackSpec> {
        let names = match self.members {
            Members::Counted => member_names(count_of(properties), &BTreeSet::new()),
            Members::PerServer(_) => server_names(properties),
        };
        Some(NestedStackSpec {
            template: group_template(self.members, &names, properties, None),
            files: files.clone(),
            environment: environment.clone(),
            timeout_mins: None,
            adopt: None,
        })
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        if matches!(self.members, Members::PerServer(_)) {
            let names = server_names(&ctx.properties);
            return self.converge(ctx, None, None, names).await;
        }
        let count = count_of(&ctx.properties);
        self.check_size(ctx, count).await?;
        let names = member_names(count, &BTreeSet::new());
        ctx.state.data.insert(REMOVED_KEY.into(), "[]".into());
        let policy = batching(ctx, &self.update_policy, "batch_create")?;
        self.converge(ctx, None, policy, names).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        if matches!(self.members, Members::PerServer(_)) {
            let names = server_names(&ctx.properties);
            let policy = batching(ctx, &self.update_policy, "rolling_update")?;
            return self.converge(ctx, Some(old), policy, names).await;
        }
        let mut removed = if ctx.properties.get("removal_policies_mode").and_then(Value::as_str) == Some("update") {
            BTreeSet::new()
        } else {
            removed_of(&ctx.state)
        };
        // A policy entry names a member or gives its reference.
        let members = stored_members(&ctx.state);
        for target in policy_targets(&ctx.properties) {
            let by_ref = members.iter().find(|m| m.get("ref").and_then(Value::as_str) == Some(target.as_str()));
            let name = match by_ref.and_then(|m| m.get("name")).and_then(Value::as_str) {
                Some(n) => n.to_string(),
                None => target,
            };
            removed.insert(name);
        }
        let removed_list: Vec<&String> = removed.iter().collect();
        ctx.state.data.insert(REMOVED_KEY.into(), json!(removed_list).to_string());
        let count = count_of(&ctx.properties);
        self.check_size(ctx, count).await?;
        let names = member_names(count, &removed);
        let policy = batching(ctx, &self.update_policy, "rolling_update")?;
        self.converge(ctx, Some(old), policy, names).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let per_member = match (self.members, name) {
            (Members::PerServer(_), "deploy_stdouts") => Some("deploy_stdout"),
            (Members::PerServer(_), "deploy_stderrs") => Some("deploy_stderr"),
            (Members::PerServer(_), "deploy_status_codes") => Some("deploy_status_code"),
            _ => None,
        };
        if let Some(attr) = per_member {
            let by_name = stored_members(state)
                .iter()
                .map(|m| {
                    let name = m.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                    (name, m.get("attrs").and_then(|a| a.get(attr)).cloned().unwrap_or(Value::Null))
                })
                .collect();
            return Ok(Value::Object(by_name));
        }
        Ok(group_attribute(state, name).unwrap_or(Value::Null))
    }

    fn accepts_any_attribute(&self) -> bool {
        true
    }

    fn reference_id(&self, state: &ResourceState) -> Value {
        nested_reference(state)
    }
}

/// `refs` (the members' references in order) and `refs_map` (name to
/// reference) of members kept as `{name, ref, attrs}`; None for other
/// names.
pub(crate) fn member_refs(members: &[Value], name: &str) -> Option<Value> {
    let reference = |m: &Value| m.get("ref").cloned().unwrap_or(Value::Null);
    match name {
        "refs" => Some(Value::Array(members.iter().map(reference).collect())),
        "refs_map" => Some(Value::Object(
            members
                .iter()
                .map(|m| (m.get("name").and_then(Value::as_str).unwrap_or_default().to_string(), reference(m)))
                .collect(),
        )),
        _ => None,
    }
}

/// The group's own attributes from its stored members.
pub(crate) fn group_attribute(state: &ResourceState, name: &str) -> Option<Value> {
    let members = stored_members(state);
    if let Some(refs) = member_refs(&members, name) {
        return Some(refs);
    }
    Some(match name {
        "removed_rsrc_list" => json!(removed_of(state).into_iter().collect::<Vec<_>>()),
        // {attribute: {member: value}}: `get_attr: [g, attributes, a]`
        // navigates to the member map of `a`.
        "attributes" => {
            let mut by_attr: Map<String, Value> = Map::new();
            for m in &members {
                let member = m.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                if let Some(Value::Object(attrs)) = m.get("attrs") {
                    for (a, v) in attrs {
                        if let Value::Object(map) =
                            by_attr.entry(a.clone()).or_insert_with(|| Value::Object(Map::new()))
                        {
                            map.insert(member.clone(), v.clone());
                        }
                    }
                }
            }
            Value::Object(by_attr)
        }
        super::MEMBERS_FACT => Value::Array(members),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_must_end_within_the_stacks_timeout() {
        let refused =
            Err(ResourceFailure::error("ValueError", "The current update policy will result in stack update timeout."));
        assert_eq!(check_pauses_fit(1e20, 2, None), refused);
        assert_eq!(check_pauses_fit(1e20, 1, None), Ok(()));
        assert_eq!(check_pauses_fit(1799.0, 3, None), Ok(()));
        assert_eq!(check_pauses_fit(1800.0, 3, None), refused);
        assert_eq!(check_pauses_fit(60.0, 3, Some(1)), refused);
        assert_eq!(check_pauses_fit(60.0, 3, Some(i64::MAX)), Ok(()));
    }

    #[test]
    fn names_skip_removed_and_keep_lowest_indexes() {
        assert_eq!(member_names(3, &BTreeSet::new()), vec!["0", "1", "2"]);
        let removed: BTreeSet<String> = ["1".to_string()].into_iter().collect();
        assert_eq!(member_names(3, &removed), vec!["0", "2", "3"]);
        assert!(member_names(0, &removed).is_empty());
    }

    #[test]
    fn a_deployment_group_deploys_its_config_to_each_server() {
        let props: Properties =
            json!({"servers": {"b": "srv-b", "a": "srv-a"}, "config": "cfg", "input_values": {"foo": 1}, "name": null})
                .as_object()
                .cloned()
                .unwrap_or_default();
        // In the order the map gives them, as upstream iterates its dict.
        assert_eq!(server_names(&props), vec!["b".to_string(), "a".to_string()]);
        assert_eq!(
            member_definition(Members::PerServer("OS::Heat::SoftwareDeployment"), &props, "b"),
            json!({"type": "OS::Heat::SoftwareDeployment", "properties": {"config": "cfg", "input_values": {"foo": 1}, "server": "srv-b"}})
        );
    }

    #[test]
    fn a_structured_group_passes_its_substitution_settings_to_each_member() {
        let group = ResourceGroup::structured_deployment_group(Arc::new(HostSlot::default()));
        assert_eq!(group.type_name, "OS::Heat::StructuredDeploymentGroup");
        assert!(group.schema.properties.iter().any(|p| p.name == "input_key"));
        assert!(!group.schema.properties.iter().any(|p| p.name == "server"));
        let props: Properties = json!({"servers": {"a": "srv-a"}, "config": "cfg", "input_key": "get_input", "input_values_validate": "STRICT"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            member_definition(group.members, &props, "a"),
            json!({"type": "OS::Heat::StructuredDeployment", "properties": {"config": "cfg", "input_key": "get_input", "input_values_validate": "STRICT", "server": "srv-a"}})
        );
    }

    #[test]
    fn index_var_is_replaced_in_nested_strings() {
        let mut props = Properties::new();
        props.insert(
            "resource_def".into(),
            json!({"type": "OS::Heat::TestResource", "properties": {"value": "v-%index%", "list": ["%index%", 1]}}),
        );
        props.insert("index_var".into(), json!("%index%"));
        let defn = member_definition(Members::Counted, &props, "7");
        assert_eq!(defn["properties"], json!({"value": "v-7", "list": ["7", 1]}));
        assert_eq!(defn["type"], json!("OS::Heat::TestResource"));
        assert!(defn.get("metadata").is_none());
    }

    #[test]
    fn rolling_template_keeps_pending_members_on_the_old_definition() {
        let def = |v: &str| {
            let mut p = Properties::new();
            p.insert("resource_def".into(), json!({"type": "T", "properties": {"value": v}}));
            p
        };
        let names: Vec<String> = vec!["0".into(), "1".into()];
        let pending: BTreeSet<String> = ["1".to_string()].into_iter().collect();
        let t = group_template(Members::Counted, &names, &def("new"), Some((&def("old"), &pending)));
        assert_eq!(t["resources"]["0"]["properties"]["value"], json!("new"));
        assert_eq!(t["resources"]["1"]["properties"]["value"], json!("old"));
    }

    #[test]
    fn attributes_come_from_the_stored_members() {
        let mut state = ResourceState::default();
        state.data.insert(
            super::super::template_resource::MEMBERS_KEY.into(),
            json!([{"name": "0", "ref": "a", "attrs": {"output": "x"}}, {"name": "1", "ref": "b", "attrs": {"output": "y"}}])
                .to_string(),
        );
        state.data.insert(REMOVED_KEY.into(), json!(["2"]).to_string());
        assert_eq!(group_attribute(&state, "refs"), Some(json!(["a", "b"])));
        assert_eq!(group_attribute(&state, "refs_map"), Some(json!({"0": "a", "1": "b"})));
        assert_eq!(group_attribute(&state, "attributes"), Some(json!({"output": {"0": "x", "1": "y"}})));
        assert_eq!(group_attribute(&state, "removed_rsrc_list"), Some(json!(["2"])));
        assert_eq!(group_attribute(&state, "other"), None);
    }
}
