//! OS::Heat::AutoScalingGroup (upstream `autoscaling_group.py` over the
//! AWS group and InstanceGroup), and the machinery it shares with those
//! two (`instance_group.rs` declares their schemas and builds their
//! members): copies of a member definition in a nested stack, named by
//! fresh short ids, between the group's bounds. Create starts with the
//! desired capacity (else the minimum) members; an update first rolls a
//! changed definition out in the batches the rolling policy allows, then
//! resizes to the desired capacity; scaling policies' signals resize it
//! through [`AutoScalingGroup::adjust`].
//!
//! Members are ordered as upstream orders them (failed first, then by
//! creation time, then name): scaling down removes the oldest, and
//! `resource.<i>` is the i-th healthy member. The scaling groups'
//! metadata keeps upstream's `cooldown_end` and `scaling_in_progress`.
//!
//! A signal resizes the nested stack while the group's own row stays
//! untouched, so the attributes read the nested stack's live members
//! rather than what the last action kept.

use std::sync::Arc;

use keelson_runtime::config::clamp_usize;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::host::NestedStackSpec;
use super::host::{HostSlot, NestedMember, PeerResource, PluginHost};
use super::instance_group::map_members_to_instances;
use super::resource_group::{check_pauses_fit, member_refs};
use super::scaling::{self, AdjustmentType};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::template_resource::{create_child, group_spec, nested_failure};
use super::{
    short_id, ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState, UpdateDecision,
};
use crate::error::EngineError;

/// Which of upstream's group classes a group follows: they differ in
/// their property names, where the member definition comes from, and
/// whether they scale (cooldown, bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupFlavor {
    /// OS::Heat::AutoScalingGroup: members from the `resource` property.
    Heat,
    /// AWS::AutoScaling::AutoScalingGroup: members from a launch
    /// configuration, scaled by policies.
    Aws,
    /// OS::Heat::InstanceGroup: members from a launch configuration, a
    /// fixed `Size`, no scaling.
    Instance,
}

/// The property names a flavor keeps its sizes under.
struct SizeKeys {
    min: Option<&'static str>,
    max: Option<&'static str>,
    /// The desired size (upstream `get_size`).
    size: &'static str,
    cooldown: Option<&'static str>,
}

impl GroupFlavor {
    pub const HEAT_TYPE: &'static str = "OS::Heat::AutoScalingGroup";
    pub const AWS_TYPE: &'static str = "AWS::AutoScaling::AutoScalingGroup";
    pub const INSTANCE_TYPE: &'static str = "OS::Heat::InstanceGroup";

    /// The flavor of a group of type `type_name` (None: not a group).
    pub fn of_type(type_name: &str) -> Option<GroupFlavor> {
        match type_name {
            Self::HEAT_TYPE => Some(GroupFlavor::Heat),
            Self::AWS_TYPE => Some(GroupFlavor::Aws),
            Self::INSTANCE_TYPE => Some(GroupFlavor::Instance),
            _ => None,
        }
    }

    fn keys(self) -> SizeKeys {
        match self {
            GroupFlavor::Heat => SizeKeys {
                min: Some("min_size"),
                max: Some("max_size"),
                size: "desired_capacity",
                cooldown: Some("cooldown"),
            },
            GroupFlavor::Aws => SizeKeys {
                min: Some("MinSize"),
                max: Some("MaxSize"),
                size: "DesiredCapacity",
                cooldown: Some("Cooldown"),
            },
            GroupFlavor::Instance => SizeKeys { min: None, max: None, size: "Size", cooldown: None },
        }
    }

    /// Whether the group keeps upstream's cooldown bookkeeping (the
    /// CooldownMixin groups).
    fn scales(self) -> bool {
        self != GroupFlavor::Instance
    }

    /// `(lower, upper)` bounds of the group's size; an InstanceGroup has
    /// none.
    fn bounds(self, props: &Properties) -> (i64, i64) {
        let keys = self.keys();
        let bound = |key: Option<&str>, none: i64| key.map_or(none, |k| int(props, k).unwrap_or(0));
        (bound(keys.min, 0), bound(keys.max, i64::MAX))
    }

    /// Upstream "size" of a group: the desired capacity when set and not 0.
    fn desired(self, props: &Properties) -> Option<i64> {
        int(props, self.keys().size).filter(|d| *d != 0)
    }

    /// The members a new group starts with: the desired capacity, else
    /// the minimum (validated Integers; never below 0).
    fn initial_size(self, props: &Properties) -> usize {
        let keys = self.keys();
        let size = self.desired(props).or_else(|| keys.min.and_then(|k| int(props, k))).unwrap_or(0);
        usize::try_from(size).unwrap_or_default()
    }

    /// The size an update resizes to from `capacity` members: an
    /// InstanceGroup's `Size`, else the desired capacity (or the current
    /// size) within the bounds.
    fn updated_size(self, props: &Properties, capacity: i64) -> i64 {
        if self == GroupFlavor::Instance {
            return int(props, self.keys().size).unwrap_or(capacity);
        }
        let wanted = self.desired(props).unwrap_or(capacity);
        let (min, max) = self.bounds(props);
        scaling::new_capacity(capacity, wanted as f64, AdjustmentType::Exact, None, min, max)
    }

    fn cooldown(self, props: &Properties) -> Option<f64> {
        self.keys().cooldown.and_then(|k| props.get(k)).and_then(Value::as_f64)
    }

    /// The update_policy key of the rolling update (the AWS-style groups).
    fn rolling_policy_key(self) -> &'static str {
        match self {
            GroupFlavor::Aws => "AutoScalingRollingUpdate",
            _ => "RollingUpdate",
        }
    }
}

pub struct AutoScalingGroup {
    flavor: GroupFlavor,
    type_name: &'static str,
    schema: ResourceSchema,
    update_policy: Vec<PropertySchema>,
    host: Arc<HostSlot>,
}

/// What a scaling policy asks of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjustment {
    pub adjustment: f64,
    pub kind: AdjustmentType,
    /// The policy's `adjustment_type` as written (cooldown reasons show it).
    pub kind_text: String,
    pub min_step: Option<i64>,
    /// The policy's cooldown; the group's when None.
    pub cooldown: Option<f64>,
}

/// A rolling update's policy: batches, members kept up, the pause.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rolling {
    max_batch_size: usize,
    min_in_service: usize,
    pause_secs: f64,
}

/// The group a resize acts on: its nested stack, what cancels the wait
/// for it, and what a member is made of.
struct Scope<'a> {
    stack_id: &'a str,
    child_id: &'a str,
    cancel: watch::Receiver<bool>,
    /// The definition new (and replaced) members get.
    definition: Value,
}

fn int(props: &Properties, key: &str) -> Option<i64> {
    props.get(key).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(scaling::saturating_i64)))
}

/// The group a member definition is made for: its stack, name and
/// reference (upstream `FnGetRefId`: the nested stack once there is one).
pub(crate) struct GroupRef<'a> {
    pub stack_id: &'a str,
    pub name: &'a str,
    pub physical_id: Option<&'a str>,
}

impl GroupRef<'_> {
    pub fn reference(&self) -> &str {
        self.physical_id.unwrap_or(self.name)
    }
}

/// The definition each member of a `flavor` group with `props` runs.
async fn member_definition(
    host: &dyn PluginHost,
    flavor: GroupFlavor,
    group: &GroupRef<'_>,
    props: &Properties,
) -> Result<Value, ResourceFailure> {
    match flavor {
        GroupFlavor::Heat => Ok(props.get("resource").cloned().unwrap_or(Value::Null)),
        GroupFlavor::Aws | GroupFlavor::Instance => {
            super::instance_group::launch_config_member(host, flavor == GroupFlavor::Aws, group, props).await
        }
    }
}

fn new_member_name() -> String {
    short_id(&uuid::Uuid::new_v4())
}

fn now() -> chrono::NaiveDateTime {
    chrono::Utc::now().naive_utc()
}

/// `members` in upstream's order: failed first, then oldest first.
pub(crate) fn ordered(mut members: Vec<NestedMember>) -> Vec<NestedMember> {
    members.sort_by(|a, b| (!a.failed, a.created_at, &a.name).cmp(&(!b.failed, b.created_at, &b.name)));
    members
}

/// The healthy members as attributes see them: `{name, ref, attrs}`.
fn member_values(members: &[NestedMember]) -> Vec<Value> {
    members
        .iter()
        .filter(|m| !m.failed)
        .map(|m| json!({"name": m.name, "ref": m.reference, "attrs": m.attributes}))
        .collect()
}

/// The group's attribute `name` over its healthy members, in order.
/// `outputs` and `outputs_list` are keyed by member attribute, so that
/// `get_attr: [group, outputs_list, <attr>]` follows its path to the list.
fn group_attribute(members: &[Value], name: &str) -> Option<Value> {
    if let Some(refs) = member_refs(members, name) {
        return Some(refs);
    }
    let by_attribute = |shape: fn(Vec<(String, Value)>) -> Value| {
        let mut names: Vec<String> = Vec::new();
        for m in members {
            if let Some(Value::Object(attrs)) = m.get("attrs") {
                for a in attrs.keys() {
                    if !names.contains(a) {
                        names.push(a.clone());
                    }
                }
            }
        }
        let view: Map<String, Value> = names
            .into_iter()
            .map(|a| {
                let values = members
                    .iter()
                    .map(|m| {
                        let member = m.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                        (member, m.get("attrs").and_then(|v| v.get(&a)).cloned().unwrap_or(Value::Null))
                    })
                    .collect();
                (a, shape(values))
            })
            .collect();
        Value::Object(view)
    };
    Some(match name {
        "current_size" => json!(members.len()),
        "outputs" => by_attribute(|values| Value::Object(values.into_iter().collect())),
        "outputs_list" => by_attribute(|values| Value::Array(values.into_iter().map(|(_, v)| v).collect())),
        // `resource.<i>` counts members by position (upstream
        // `use_indices`): the members go on named by their index.
        super::MEMBERS_FACT => Value::Array(
            members
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let mut m = m.clone();
                    if let Value::Object(o) = &mut m {
                        o.insert("name".into(), json!(i.to_string()));
                    }
                    m
                })
                .collect(),
        ),
        _ => return None,
    })
}

impl AutoScalingGroup {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let size = |name: &'static str, description: &'static str| {
            PropertySchema::new(name, T::Integer, description)
                .required()
                .update_allowed()
                .constraint(Constraint::range(Some(0), None))
        };
        AutoScalingGroup {
            flavor: GroupFlavor::Heat,
            type_name: GroupFlavor::HEAT_TYPE,
            update_policy: Vec::new(),
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new(
                        "resource",
                        T::Map,
                        "The HOT definition of each member, as the resource would be written in a template.",
                    )
                    .required()
                    .update_allowed(),
                    size("max_size", "The largest number of members."),
                    size("min_size", "The smallest number of members."),
                    PropertySchema::new(
                        "cooldown",
                        T::Integer,
                        "Seconds after a scaling during which no other scaling starts.",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "desired_capacity",
                        T::Integer,
                        "The number of members to start with (and to resize to on update).",
                    )
                    .update_allowed(),
                    PropertySchema::new("rolling_updates", T::Map, "How a changed member definition is rolled out.")
                        .update_allowed()
                        .default_value(json!({"min_in_service": 0, "max_batch_size": 1, "pause_time": 0}))
                        .map_of(vec![
                            PropertySchema::new(
                                "min_in_service",
                                T::Integer,
                                "Members that stay in service during the roll-out.",
                            )
                            .default_value(0)
                            .constraint(Constraint::range(Some(0), None)),
                            PropertySchema::new("max_batch_size", T::Integer, "Members replaced at once.")
                                .default_value(1)
                                .constraint(Constraint::range(Some(1), None)),
                            PropertySchema::new("pause_time", T::Number, "Seconds to wait between batches.")
                                .default_value(0)
                                .constraint(Constraint::range(Some(0), None)),
                        ]),
                ],
                attributes: vec![
                    AttributeSchema::new(
                        "outputs",
                        "Each member's value of the attribute named next, by member name.",
                        Some("map"),
                    ),
                    AttributeSchema::new(
                        "outputs_list",
                        "Each member's value of the attribute named next, in member order.",
                        Some("list"),
                    ),
                    AttributeSchema::new("current_size", "The number of members.", Some("integer")),
                    AttributeSchema::new("refs", "The members' references, in member order.", Some("list")),
                    AttributeSchema::new("refs_map", "The members' references by member name.", Some("map")),
                    super::show_attribute(),
                ],
                support_status: SupportStatus::supported("2014.1"),
                description: "A group of identical resources, resized by scaling policies within its bounds.",
            },
            host,
        }
    }

    /// A group of `flavor` registered as `type_name` (the AWS-style groups
    /// of `instance_group.rs`).
    pub(crate) fn flavored(
        host: Arc<HostSlot>,
        flavor: GroupFlavor,
        type_name: &'static str,
        schema: ResourceSchema,
        update_policy: Vec<PropertySchema>,
    ) -> Self {
        AutoScalingGroup { flavor, type_name, schema, update_policy, host }
    }

    /// The members of nested stack `child_id` (failed ones included), in
    /// upstream's order.
    async fn members(host: &dyn PluginHost, child_id: Option<&str>) -> Result<Vec<NestedMember>, ResourceFailure> {
        let Some(child) = child_id else { return Ok(Vec::new()) };
        let members = host.nested_resources(child, &[]).await.map_err(ResourceFailure::from)?;
        Ok(ordered(members))
    }

    fn healthy_size(members: &[NestedMember]) -> i64 {
        members.iter().filter(|m| !m.failed).count() as i64
    }

    /// Each member (failed first, then oldest first) with the definition
    /// the nested stack runs it with (upstream `get_member_definitions`).
    async fn current_definitions(
        host: &dyn PluginHost,
        child_id: &str,
    ) -> Result<Vec<(String, Value)>, ResourceFailure> {
        let members = Self::members(host, Some(child_id)).await?;
        let template = host.nested_template(child_id).await.map_err(ResourceFailure::from)?;
        let definitions = template.get("resources").and_then(Value::as_object).cloned().unwrap_or_default();
        Ok(members.into_iter().filter_map(|m| definitions.get(&m.name).map(|d| (m.name, d.clone()))).collect())
    }

    /// Moves the nested stack to `members` and waits for it.
    async fn push(
        host: &dyn PluginHost,
        scope: &Scope<'_>,
        members: &[(String, Value)],
    ) -> Result<(), ResourceFailure> {
        let spec = member_stack_spec(host, scope.stack_id, Some(scope.child_id), members).await?;
        host.update_nested(scope.child_id, spec).await?;
        let outcome = host.wait_nested(scope.child_id, scope.cancel.clone()).await?;
        if !outcome.is_complete() {
            return Err(nested_failure(&outcome));
        }
        Ok(())
    }

    /// Upstream `resize`: `capacity` members, the oldest dropped first,
    /// new ones on the scope's definition.
    async fn resize(host: &dyn PluginHost, scope: &Scope<'_>, capacity: i64) -> Result<(), ResourceFailure> {
        let capacity = usize::try_from(capacity).unwrap_or_default();
        host.check_nested_size(scope.stack_id, Some(scope.child_id), u64::try_from(capacity).unwrap_or(u64::MAX))
            .await?;
        let old = Self::current_definitions(host, scope.child_id).await?;
        let members = scaling::member_definitions(&old, &scope.definition, capacity, 0, new_member_name);
        Self::push(host, scope, &members).await
    }

    /// The rolling update an update of `ctx` from `old` runs, if any: the
    /// OS::Heat group's `rolling_updates` when its member definition
    /// changed; the AWS-style groups' update_policy when their launch
    /// configuration changed (upstream `_try_rolling_update`).
    fn rolling_update(&self, ctx: &ActionContext, old: &Properties) -> Result<Option<Rolling>, ResourceFailure> {
        let (policy, pause_key, min_key, batch_key) = match self.flavor {
            GroupFlavor::Heat => {
                if old.get("resource") == ctx.properties.get("resource") {
                    return Ok(None);
                }
                let policy = ctx.properties.get("rolling_updates").cloned().unwrap_or(Value::Null);
                (policy, "pause_time", "min_in_service", "max_batch_size")
            }
            GroupFlavor::Aws | GroupFlavor::Instance => {
                let key = "LaunchConfigurationName";
                let Some(given) = ctx.update_policy.as_ref() else { return Ok(None) };
                if old.get(key) == ctx.properties.get(key) {
                    return Ok(None);
                }
                let policy = super::validate_update_policy(&self.update_policy, &ctx.resource_name, given)
                    .map_err(ResourceFailure::from)?;
                match policy.get(self.flavor.rolling_policy_key()) {
                    Some(p @ Value::Object(_)) => (p.clone(), "PauseTime", "MinInstancesInService", "MaxBatchSize"),
                    _ => return Ok(None),
                }
            }
        };
        let size = |k: &str, d: i64| clamp_usize(policy.get(k).and_then(Value::as_i64).unwrap_or(d));
        let pause_secs = match policy.get(pause_key) {
            // The AWS-style groups give an ISO 8601 duration.
            Some(Value::String(text)) => {
                let secs = scaling::parse_isoduration(text)
                    .ok_or_else(|| ResourceFailure::error("ValueError", scaling::ISO_DURATION_ERROR))?;
                if secs > 3600 {
                    return Err(ResourceFailure::error("ValueError", "Maximum PauseTime is 1 hour."));
                }
                secs as f64
            }
            other => other.and_then(Value::as_f64).unwrap_or(0.0).max(0.0),
        };
        Ok(Some(Rolling { max_batch_size: size(batch_key, 1).max(1), min_in_service: size(min_key, 0), pause_secs }))
    }

    /// Upstream `_replace`: the new definition rolled out in batches that
    /// keep `min_in_service` members up, `pause_secs` between batches.
    async fn roll_out(
        &self,
        host: &dyn PluginHost,
        scope: &Scope<'_>,
        ctx: &ActionContext,
        policy: Rolling,
    ) -> Result<(), ResourceFailure> {
        let capacity = Self::members(host, Some(scope.child_id)).await?.len();
        let target = self.flavor.desired(&ctx.properties).map(clamp_usize).unwrap_or(capacity).min(capacity);
        let batches = scaling::rolling_batches(target, capacity, policy.max_batch_size, policy.min_in_service);
        check_pauses_fit(policy.pause_secs, batches.len(), ctx.timeout_mins)?;
        for (i, (size, batch)) in batches.iter().enumerate() {
            let old = Self::current_definitions(host, scope.child_id).await?;
            let members = scaling::member_definitions(&old, &scope.definition, *size, *batch, new_member_name);
            Self::push(host, scope, &members).await?;
            if i + 1 < batches.len() && policy.pause_secs > 0.0 {
                ctx.sleep(policy.pause_secs).await?;
            }
        }
        Ok(())
    }

    /// Upstream `_finished_scaling` after an action of a scaling group:
    /// the cooldown starts and the group is no longer scaling (written
    /// with the action's row).
    async fn finish_action(&self, host: &dyn PluginHost, ctx: &mut ActionContext) {
        if !self.flavor.scales() {
            return;
        }
        let size = match Self::members(host, ctx.state.physical_id.as_deref()).await {
            Ok(members) => Self::healthy_size(&members),
            Err(_) => 0,
        };
        let reason = format!("{} : {size}", AdjustmentType::Exact.cfn_name());
        let cooldown = self.flavor.cooldown(&ctx.properties);
        ctx.state.metadata = scaling::finish_scaling(&ctx.state.metadata, cooldown, &reason, true, now());
    }

    /// The member definition of the group `ctx` acts on.
    async fn definition_for(&self, host: &dyn PluginHost, ctx: &ActionContext) -> Result<Value, ResourceFailure> {
        let group = GroupRef {
            stack_id: &ctx.stack_id,
            name: &ctx.resource_name,
            physical_id: ctx.state.physical_id.as_deref(),
        };
        member_definition(host, self.flavor, &group, &ctx.properties).await
    }

    async fn create_group(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let host = self.host.get();
        let size = self.flavor.initial_size(&ctx.properties);
        host.check_nested_size(&ctx.stack_id, None, u64::try_from(size).unwrap_or(u64::MAX)).await?;
        let definition = self.definition_for(host.as_ref(), ctx).await?;
        let members = scaling::member_definitions(&[], &definition, size, 0, new_member_name);
        let spec = member_stack_spec(host.as_ref(), &ctx.stack_id, None, &members).await?;
        create_child(host.as_ref(), ctx, spec).await?;
        self.finish_action(host.as_ref(), ctx).await;
        Ok(())
    }

    async fn update_group(&self, ctx: &mut ActionContext, old: &Properties) -> Result<(), ResourceFailure> {
        let Some(child_id) = ctx.state.physical_id.clone() else {
            return self.create_group(ctx).await;
        };
        let host = self.host.get();
        let definition = self.definition_for(host.as_ref(), ctx).await?;
        let scope = Scope { stack_id: &ctx.stack_id, child_id: &child_id, cancel: ctx.cancel.clone(), definition };
        if let Some(policy) = self.rolling_update(ctx, old)? {
            self.roll_out(host.as_ref(), &scope, ctx, policy).await?;
        }
        // Resized whether or not a scaling runs (as upstream).
        let capacity = Self::healthy_size(&Self::members(host.as_ref(), Some(&child_id)).await?);
        let capacity = self.flavor.updated_size(&ctx.properties, capacity);
        Self::resize(host.as_ref(), &scope, capacity).await?;
        self.finish_action(host.as_ref(), ctx).await;
        Ok(())
    }

    /// Upstream `adjust`, for a scaling policy's signal: the group `group`
    /// (as its stack stores it) resized by `adjustment` unless it is busy,
    /// in cooldown or already at its bound (then [`scaling::no_action_required`]).
    /// The cooldown and `scaling_in_progress` are written to the group's
    /// metadata under its row's compare-and-swap, so one scaling runs at a time.
    pub async fn adjust(
        &self,
        stack_id: &str,
        group: &PeerResource,
        adjustment: &Adjustment,
    ) -> Result<(), ResourceFailure> {
        let flavor = GroupFlavor::of_type(&group.resource_type).filter(|f| f.scales()).ok_or_else(|| {
            ResourceFailure::error(
                "AttributeError",
                format!("'{}' resource {} cannot be scaled", group.resource_type, group.name),
            )
        })?;
        if group.status != crate::store::Status::Complete {
            return Err(scaling::no_action_required(&group.name, "group is not COMPLETE"));
        }
        let Some(child_id) = group.physical_id.as_deref() else {
            return Err(scaling::no_action_required(&group.name, "group has no members stack"));
        };
        let host = self.host.get();
        let props = &group.properties;
        let capacity = Self::healthy_size(&Self::members(host.as_ref(), Some(child_id)).await?);
        let (min, max) = flavor.bounds(props);
        let target =
            scaling::new_capacity(capacity, adjustment.adjustment, adjustment.kind, adjustment.min_step, min, max);
        if target == capacity {
            return Err(scaling::no_action_required(&group.name, "no change in capacity"));
        }
        let cooldown = adjustment.cooldown.or_else(|| flavor.cooldown(props));
        // The groupname notifications carry is the group's reference.
        let group_ref = GroupRef { stack_id, name: &group.name, physical_id: group.physical_id.as_deref() };
        let groupname = group_ref.reference().to_string();
        let notice = |capacity: i64, message: String| {
            let mut m = serde_json::Map::new();
            m.insert("adjustment_type".into(), Value::String(adjustment.kind_text.clone()));
            m.insert("adjustment".into(), serde_json::json!(adjustment.adjustment));
            m.insert("capacity".into(), serde_json::json!(capacity));
            m.insert("groupname".into(), Value::String(groupname.clone()));
            m.insert("message".into(), Value::String(message));
            m
        };
        host.notify(
            stack_id,
            "autoscaling.start",
            false,
            notice(capacity, format!("Start resizing the group {groupname}")),
        )
        .await;
        let name = group.name.clone();
        host.merge_metadata(group.id, Box::new(move |md: &Value| scaling::begin_scaling(&name, md, cooldown, now())))
            .await?;
        let result = async {
            let definition = member_definition(host.as_ref(), flavor, &group_ref, props).await?;
            // Nobody cancels a signal's resize: the sender lives as long as the wait.
            let (_keep, cancel) = watch::channel(false);
            let scope = Scope { stack_id, child_id, cancel, definition };
            Self::resize(host.as_ref(), &scope, target).await
        }
        .await;
        match &result {
            Ok(()) => {
                host.notify(
                    stack_id,
                    "autoscaling.end",
                    false,
                    notice(target, format!("End resizing the group {groupname}")),
                )
                .await
            }
            Err(e) => host.notify(stack_id, "autoscaling.error", true, notice(capacity, e.to_string())).await,
        }
        let reason = format!("{} : {}", adjustment.kind_text, scaling::py_number(adjustment.adjustment));
        let size_changed = result.is_ok();
        let finish =
            Box::new(move |md: &Value| Ok(scaling::finish_scaling(md, cooldown, &reason, size_changed, now())));
        if let Err(e) = host.merge_metadata(group.id, finish).await {
            tracing::warn!(group = group.name, error = %e, "scaling finished but the group's metadata was not updated");
        }
        result
    }
}

impl Plugin for AutoScalingGroup {
    const TYPE: &'static str = GroupFlavor::HEAT_TYPE;

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// The AWS group checks its sizes before upstream's Properties
    /// validation refuses the properties it does not implement.
    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let props = super::validate_properties(&self.schema, resource_name, given)?;
        self.validate(&props)?;
        if self.flavor == GroupFlavor::Aws {
            super::launch_configuration::refuse_unimplemented(
                resource_name,
                &props,
                super::instance_group::AWS_NOT_IMPLEMENTED,
            )?;
        }
        Ok(props)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        match self.flavor {
            GroupFlavor::Heat => validate_sizes(props, "min_size", "max_size", "desired_capacity"),
            GroupFlavor::Aws => super::instance_group::validate_aws_group(props),
            GroupFlavor::Instance => Ok(()),
        }
    }

    fn child_stack_host(&self) -> Option<&HostSlot> {
        Some(&self.host)
    }

    fn nested_resource_count(&self, properties: &Properties) -> Option<u64> {
        Some(u64::try_from(self.flavor.initial_size(properties)).unwrap_or(u64::MAX))
    }

    fn update_policy_schema(&self) -> &[PropertySchema] {
        &self.update_policy
    }

    fn takes_update_policy(&self) -> bool {
        !self.update_policy.is_empty()
    }

    /// The nested stack is always updated (upstream
    /// `StackResource._needs_update`); its members decide for themselves.
    /// A property that does not allow updates still replaces the group.
    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        match super::default_update_decision(&self.schema, old, new) {
            UpdateDecision::Replace => UpdateDecision::Replace,
            _ => UpdateDecision::InPlace,
        }
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.create_group(ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        self.update_group(ctx, old).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let host = self.host.get();
        if self.flavor != GroupFlavor::Heat {
            return super::instance_group::instance_list(host.as_ref(), state, name).await;
        }
        let members = match &state.physical_id {
            Some(child) => ordered(host.nested_resources(child, &[]).await?),
            None => Vec::new(),
        };
        Ok(group_attribute(&member_values(&members), name).unwrap_or(Value::Null))
    }
}

/// Upstream's size checks of the scaling groups, under their property
/// names: the minimum not above the maximum, the desired capacity
/// between them.
pub(crate) fn validate_sizes(props: &Properties, min: &str, max: &str, desired: &str) -> Result<(), EngineError> {
    let (Some(min), Some(max)) = (int(props, min), int(props, max)) else {
        return Ok(());
    };
    if max < min {
        return Err(EngineError::validation("MinSize can not be greater than MaxSize"));
    }
    if min < 0 {
        return Err(EngineError::validation("The size of AutoScalingGroup can not be less than zero"));
    }
    if let Some(d) = props.get(desired).and_then(Value::as_i64) {
        if d < min || d > max {
            return Err(EngineError::validation("DesiredCapacity must be between MinSize and MaxSize"));
        }
    }
    Ok(())
}

/// The group's nested stack running `members`, its environment mapping
/// the members' type to instances ([`map_members_to_instances`]).
async fn member_stack_spec(
    host: &dyn PluginHost,
    stack_id: &str,
    child_id: Option<&str>,
    members: &[(String, Value)],
) -> Result<NestedStackSpec, ResourceFailure> {
    let mut spec = group_spec(host, stack_id, child_id, scaling::group_template(members)).await?;
    map_members_to_instances(&mut spec.environment);
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::host::{MetadataMerge, NestedOutcome, NestedParent, NestedStackRef, NestedStackSpec};
    use crate::store::{Action, Status};
    use chrono::NaiveDate;
    use futures::future::BoxFuture;
    use std::sync::Mutex;

    /// A nested stack held in memory: an update makes the template's
    /// resources the members (new ones created now), a metadata merge
    /// applies to one stored document.
    #[derive(Default)]
    struct FakeHost {
        members: Mutex<Vec<NestedMember>>,
        template: Mutex<Value>,
        metadata: Mutex<Value>,
        updates: Mutex<usize>,
        /// The stack's other resources, by reference.
        peers: Mutex<Vec<(String, PeerResource)>>,
    }

    impl FakeHost {
        fn with_members(names: &[&str]) -> Arc<FakeHost> {
            let host = FakeHost::default();
            let mut resources = Map::new();
            for (i, n) in names.iter().enumerate() {
                host.members.lock().unwrap().push(member(n, u32::try_from(i).unwrap(), false, n));
                resources.insert(n.to_string(), json!({"type": "OS::Heat::None"}));
            }
            *host.template.lock().unwrap() = json!({"resources": resources});
            Arc::new(host)
        }

        fn names(&self) -> Vec<String> {
            ordered(self.members.lock().unwrap().clone()).into_iter().map(|m| m.name).collect()
        }
    }

    impl crate::resources::host::IdentityHost for FakeHost {}

    impl PluginHost for FakeHost {
        fn create_nested<'a>(
            &'a self,
            _: &'a NestedParent,
            _: NestedStackSpec,
        ) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>> {
            Box::pin(async { Ok(NestedStackRef { id: "child".into(), arn: "arn".into() }) })
        }
        fn update_nested<'a>(
            &'a self,
            _: &'a str,
            spec: NestedStackSpec,
        ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
            Box::pin(async move {
                *self.updates.lock().unwrap() += 1;
                let wanted: Vec<String> = spec.template["resources"].as_object().unwrap().keys().cloned().collect();
                let mut members = self.members.lock().unwrap();
                members.retain(|m| wanted.contains(&m.name));
                for name in &wanted {
                    if !members.iter().any(|m| &m.name == name) {
                        members.push(member(name, 50, false, name));
                    }
                }
                *self.template.lock().unwrap() = spec.template;
                Ok(())
            })
        }
        fn delete_nested<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
            Box::pin(async { Ok(()) })
        }
        fn wait_nested<'a>(
            &'a self,
            _: &'a str,
            _: watch::Receiver<bool>,
        ) -> BoxFuture<'a, Result<NestedOutcome, ResourceFailure>> {
            Box::pin(async {
                Ok(NestedOutcome { action: Action::Update, status: Status::Complete, status_reason: String::new() })
            })
        }
        fn parent_documents<'a>(
            &'a self,
            _: &'a str,
        ) -> BoxFuture<'a, Result<(Map<String, Value>, Value), EngineError>> {
            Box::pin(async { Ok((Map::new(), json!({}))) })
        }
        fn nested_outputs<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Map<String, Value>, EngineError>> {
            Box::pin(async { Ok(Map::new()) })
        }
        fn nested_resources<'a>(
            &'a self,
            _: &'a str,
            _: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<NestedMember>, EngineError>> {
            Box::pin(async { Ok(self.members.lock().unwrap().clone()) })
        }
        fn nested_template<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Value, EngineError>> {
            Box::pin(async { Ok(self.template.lock().unwrap().clone()) })
        }
        fn resource_by_refid<'a>(
            &'a self,
            _: &'a str,
            refid: &'a str,
        ) -> BoxFuture<'a, Result<Option<PeerResource>, ResourceFailure>> {
            Box::pin(
                async move { Ok(self.peers.lock().unwrap().iter().find(|(r, _)| r == refid).map(|(_, p)| p.clone())) },
            )
        }
        fn merge_metadata<'a>(
            &'a self,
            _: i64,
            mut merge: MetadataMerge<'a>,
        ) -> BoxFuture<'a, Result<Value, ResourceFailure>> {
            Box::pin(async move {
                let merged = merge(&self.metadata.lock().unwrap().clone())?;
                *self.metadata.lock().unwrap() = merged.clone();
                Ok(merged)
            })
        }
    }

    fn group_on(host: &Arc<FakeHost>) -> AutoScalingGroup {
        let slot = Arc::new(HostSlot::default());
        let weak: std::sync::Weak<dyn PluginHost> = Arc::downgrade(host) as std::sync::Weak<dyn PluginHost>;
        slot.bind(weak);
        AutoScalingGroup::new(slot)
    }

    fn peer(cooldown: i64) -> PeerResource {
        let props = json!({"resource": {"type": "OS::Heat::None"}, "min_size": 1, "max_size": 3, "cooldown": cooldown});
        PeerResource {
            id: 7,
            name: "g".into(),
            resource_type: AutoScalingGroup::TYPE.into(),
            physical_id: Some("child".into()),
            status: Status::Complete,
            properties: props.as_object().unwrap().clone(),
            ..Default::default()
        }
    }

    fn change(by: f64) -> Adjustment {
        Adjustment {
            adjustment: by,
            kind: AdjustmentType::Change,
            kind_text: "change_in_capacity".into(),
            min_step: None,
            cooldown: None,
        }
    }

    #[tokio::test]
    async fn a_signal_resizes_within_bounds_and_starts_the_cooldown() {
        let host = FakeHost::with_members(&["a", "b", "c"]);
        let g = group_on(&host);
        // Already at max_size: nothing to do, nothing written.
        let e = g.adjust("sid", &peer(60), &change(1.0)).await.unwrap_err();
        assert!(matches!(&e, ResourceFailure::NoActionRequired(_)), "{e}");
        assert_eq!(*host.metadata.lock().unwrap(), Value::Null);
        // Scaling down drops the oldest member.
        g.adjust("sid", &peer(60), &change(-1.0)).await.unwrap();
        assert_eq!(host.names(), vec!["b", "c"]);
        let md = host.metadata.lock().unwrap().clone();
        assert_eq!(md["scaling_in_progress"], json!(false));
        assert_eq!(md["cooldown_end"].as_object().unwrap().values().next(), Some(&json!("change_in_capacity : -1")));
        // The cooldown holds the next one back.
        let e = g.adjust("sid", &peer(60), &change(-1.0)).await.unwrap_err();
        assert!(e.to_string().contains("due to cooldown, cooldown 60"), "{e}");
        assert_eq!(*host.updates.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn a_busy_group_is_not_scaled() {
        let host = FakeHost::with_members(&["a", "b"]);
        let g = group_on(&host);
        let mut busy = peer(0);
        busy.status = Status::InProgress;
        assert!(g.adjust("sid", &busy, &change(1.0)).await.is_err());
        *host.metadata.lock().unwrap() = json!({"scaling_in_progress": true});
        let e = g.adjust("sid", &peer(0), &change(1.0)).await.unwrap_err();
        assert!(e.to_string().contains("due to scaling activity"), "{e}");
        // Growing adds a new member named by a short id.
        *host.metadata.lock().unwrap() = json!({});
        g.adjust("sid", &peer(0), &change(1.0)).await.unwrap();
        let names = host.names();
        assert_eq!(names.len(), 3);
        assert_eq!(names[2].len(), 12);
    }

    fn member(name: &str, secs: u32, failed: bool, value: &str) -> NestedMember {
        let at = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap().and_hms_opt(10, 0, secs).unwrap();
        let mut attributes = Map::new();
        attributes.insert("value".into(), json!(value));
        NestedMember {
            name: name.into(),
            reference: json!(format!("ref-{name}")),
            attributes,
            created_at: Some(at),
            failed,
        }
    }

    #[test]
    fn members_are_ordered_failed_first_then_oldest() {
        let members = ordered(vec![
            member("b", 5, false, "x"),
            member("a", 5, false, "y"),
            member("z", 9, true, "f"),
            member("c", 1, false, "w"),
        ]);
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, vec!["z", "c", "a", "b"]);
        assert_eq!(AutoScalingGroup::healthy_size(&members), 3);
    }

    #[test]
    fn attributes_index_the_healthy_members_in_order() {
        let members = member_values(&ordered(vec![
            member("new", 9, false, "n"),
            member("old", 1, false, "o"),
            member("bad", 5, true, "f"),
        ]));
        assert_eq!(group_attribute(&members, "current_size"), Some(json!(2)));
        assert_eq!(group_attribute(&members, "refs"), Some(json!(["ref-old", "ref-new"])));
        assert_eq!(group_attribute(&members, "refs_map"), Some(json!({"old": "ref-old", "new": "ref-new"})));
        assert_eq!(group_attribute(&members, "outputs_list"), Some(json!({"value": ["o", "n"]})));
        assert_eq!(group_attribute(&members, "outputs"), Some(json!({"value": {"old": "o", "new": "n"}})));
        let fact = group_attribute(&members, super::super::MEMBERS_FACT).unwrap();
        assert_eq!(fact[1]["name"], json!("1"));
        assert_eq!(fact[1]["attrs"]["value"], json!("n"));
        assert_eq!(group_attribute(&members, "other"), None);
    }

    #[test]
    fn sizes_are_validated_against_each_other() {
        let g = AutoScalingGroup::new(Arc::new(HostSlot::default()));
        let props = |min: i64, max: i64, desired: Option<i64>| json!({"resource": {"type": "OS::Heat::None"}, "min_size": min, "max_size": max, "desired_capacity": desired});
        assert!(g.validate_properties("g", &props(1, 3, Some(2))).is_ok());
        let e = g.validate_properties("g", &props(3, 1, None)).unwrap_err();
        assert_eq!(e.message(), "MinSize can not be greater than MaxSize");
        let e = g.validate_properties("g", &props(1, 3, Some(5))).unwrap_err();
        assert_eq!(e.message(), "DesiredCapacity must be between MinSize and MaxSize");
        let p = g.validate_properties("g", &props(0, 0, None)).unwrap();
        assert_eq!(p["rolling_updates"], json!({"min_in_service": 0, "max_batch_size": 1, "pause_time": 0}));
    }

    fn aws_peer() -> PeerResource {
        let props = json!({"AvailabilityZones": ["nova"], "LaunchConfigurationName": "st-lc-abc", "MinSize": 1,
                           "MaxSize": 3, "Cooldown": 60, "VPCZoneIdentifier": ["subnet-1"],
                           "Tags": [{"Key": "env", "Value": "test"}]});
        PeerResource {
            id: 8,
            name: "asg".into(),
            resource_type: GroupFlavor::AWS_TYPE.into(),
            physical_id: Some("child".into()),
            status: Status::Complete,
            properties: props.as_object().unwrap().clone(),
            ..Default::default()
        }
    }

    fn launch_config() -> PeerResource {
        let props = json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "UserData": "hi", "KeyName": null});
        PeerResource {
            id: 9,
            name: "lc".into(),
            resource_type: "AWS::AutoScaling::LaunchConfiguration".into(),
            physical_id: Some("st-lc-abc".into()),
            metadata: json!({"foo": "bar"}),
            status: Status::Complete,
            properties: props.as_object().unwrap().clone(),
        }
    }

    #[tokio::test]
    async fn an_aws_group_grows_with_members_of_its_launch_configuration() {
        let host = FakeHost::with_members(&["a"]);
        host.peers.lock().unwrap().push(("st-lc-abc".into(), launch_config()));
        let g = group_on(&host);
        let by = |n: f64| Adjustment { kind_text: "ChangeInCapacity".into(), ..change(n) };
        g.adjust("sid", &aws_peer(), &by(1.0)).await.unwrap();
        let names = host.names();
        assert_eq!(names.len(), 2);
        let template = host.template.lock().unwrap().clone();
        let member = &template["resources"][&names[1]];
        assert_eq!(
            *member,
            json!({"type": "OS::Heat::ScaledResource", "metadata": {"foo": "bar"}, "properties": {
                "ImageId": "cirros", "InstanceType": "m1.tiny", "UserData": "hi", "SubnetId": "subnet-1",
                "Tags": [{"Key": "env", "Value": "test"},
                         {"Key": "metering.groupname", "Value": "child"},
                         {"Key": "metering.AutoScalingGroupName", "Value": "child"}]}})
        );
        // The group's Cooldown holds the next signal back.
        let md = host.metadata.lock().unwrap().clone();
        assert_eq!(md["cooldown_end"].as_object().unwrap().values().next(), Some(&json!("ChangeInCapacity : 1")));
        let e = g.adjust("sid", &aws_peer(), &by(1.0)).await.unwrap_err();
        assert!(e.to_string().contains("due to cooldown, cooldown 60"), "{e}");
    }

    #[tokio::test]
    async fn an_instance_group_is_not_scaled_and_a_missing_launch_configuration_fails() {
        let host = FakeHost::with_members(&["a"]);
        let g = group_on(&host);
        let mut instance = aws_peer();
        instance.resource_type = GroupFlavor::INSTANCE_TYPE.into();
        let e = g.adjust("sid", &instance, &change(1.0)).await.unwrap_err();
        assert!(matches!(e, ResourceFailure::Error { .. }), "{e}");
        let e = g.adjust("sid", &aws_peer(), &change(1.0)).await.unwrap_err();
        assert_eq!(
            e,
            ResourceFailure::error("ValueError", "LaunchConfigurationName (st-lc-abc) reference can not be found.")
        );
        // The failed resize still ends the scaling.
        assert_eq!(host.metadata.lock().unwrap()["scaling_in_progress"], json!(false));
    }

    #[test]
    fn flavors_read_their_own_sizes() {
        let props = |v: Value| v.as_object().unwrap().clone();
        let aws = props(json!({"MinSize": 2, "MaxSize": 5, "DesiredCapacity": 0, "Cooldown": 30}));
        assert_eq!(GroupFlavor::Aws.initial_size(&aws), 2);
        assert_eq!(GroupFlavor::Aws.bounds(&aws), (2, 5));
        assert_eq!(GroupFlavor::Aws.updated_size(&aws, 9), 5);
        assert_eq!(GroupFlavor::Aws.cooldown(&aws), Some(30.0));
        let sized = props(json!({"Size": 0}));
        // An InstanceGroup goes to its Size, even 0, without bounds.
        assert_eq!(GroupFlavor::Instance.initial_size(&sized), 0);
        assert_eq!(GroupFlavor::Instance.updated_size(&sized, 3), 0);
        assert_eq!(GroupFlavor::Instance.bounds(&sized), (0, i64::MAX));
        assert_eq!(GroupFlavor::Instance.cooldown(&sized), None);
        assert_eq!(GroupFlavor::of_type("OS::Heat::ResourceGroup"), None);
    }

    #[test]
    fn an_aws_rolling_update_reads_the_update_policy() {
        let g = AutoScalingGroup::aws(Arc::new(HostSlot::default()));
        let props = |lc: &str| json!({"LaunchConfigurationName": lc}).as_object().unwrap().clone();
        let (cancel_tx, cancel) = watch::channel(false);
        let mut ctx = ActionContext {
            stack_id: "s".into(),
            stack_name: "st".into(),
            resource_name: "asg".into(),
            resource_id: 1,
            properties: props("new"),
            state: ResourceState::default(),
            cancel,
            adopt: None,
            update_policy: None,
            timeout_mins: None,
            action_retry_limit: 0,
        };
        // No policy: no rolling update.
        assert_eq!(g.rolling_update(&ctx, &props("old")), Ok(None));
        ctx.update_policy = Some(json!({"AutoScalingRollingUpdate": {"MaxBatchSize": "2", "PauseTime": "PT1M5S"}}));
        assert_eq!(
            g.rolling_update(&ctx, &props("old")),
            Ok(Some(Rolling { max_batch_size: 2, min_in_service: 0, pause_secs: 65.0 }))
        );
        // The same launch configuration: nothing to roll out.
        assert_eq!(g.rolling_update(&ctx, &props("new")), Ok(None));
        ctx.update_policy = Some(json!({"AutoScalingRollingUpdate": {"PauseTime": "PT2H"}}));
        assert_eq!(
            g.rolling_update(&ctx, &props("old")),
            Err(ResourceFailure::error("ValueError", "Maximum PauseTime is 1 hour."))
        );
        ctx.update_policy = Some(json!({"AutoScalingRollingUpdate": {"PauseTime": "1 minute"}}));
        assert_eq!(
            g.rolling_update(&ctx, &props("old")),
            Err(ResourceFailure::error("ValueError", scaling::ISO_DURATION_ERROR))
        );
        drop(cancel_tx);
    }
}
