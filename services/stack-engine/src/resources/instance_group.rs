//! OS::Heat::InstanceGroup (upstream `openstack/heat/instance_group.py`)
//! and AWS::AutoScaling::AutoScalingGroup (`aws/autoscaling/
//! autoscaling_group.py`): their schemas, their validation, and their
//! members, built from an AWS::AutoScaling::LaunchConfiguration as
//! upstream's `_get_conf_properties` builds them. Everything else (sizes,
//! rolling updates, scaling, cooldown) is the shared group machinery of
//! `autoscaling_group.rs`.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::autoscaling_group::{ordered, validate_sizes, AutoScalingGroup, GroupFlavor, GroupRef};
use super::host::{HostSlot, PluginHost};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{Properties, ResourceFailure, ResourceState};
use crate::error::EngineError;

/// The type members are written as, as upstream writes them; the nested
/// environment maps it to [`INSTANCE_TYPE`] ([`map_members_to_instances`]).
pub const MEMBER_TYPE: &str = "OS::Heat::ScaledResource";
/// What a member runs as unless the environment maps it further.
pub const INSTANCE_TYPE: &str = "AWS::EC2::Instance";

/// Upstream `InstanceGroup.child_params`, which both autoscaling groups
/// inherit: the child environment maps [`MEMBER_TYPE`] to
/// [`INSTANCE_TYPE`], over any mapping of it the parent's has. The
/// registry resolves that as a chain, so members run the provider
/// template a user mapped AWS::EC2::Instance to. As upstream, that
/// provider is no facade of anything: no plugin is named
/// OS::Heat::ScaledResource, so no interface is checked (the functional
/// tests' providers offer `PublicIp` alone).
pub(crate) fn map_members_to_instances(environment: &mut Value) {
    if !environment.is_object() {
        *environment = json!({});
    }
    let registry = &mut environment["resource_registry"];
    if !registry.is_object() {
        *registry = json!({});
    }
    registry[MEMBER_TYPE] = Value::String(INSTANCE_TYPE.to_string());
}

const INSTANCE_LIST: &str = "InstanceList";
/// The member attribute InstanceList gathers.
const PUBLIC_IP: &str = "PublicIp";

fn tags_schema(key_description: &'static str, value_description: &'static str) -> PropertySchema {
    PropertySchema::new("Tags", T::List, "Tags to attach to this group.").list_of(
        PropertySchema::new("*", T::Map, "").map_of(vec![
            PropertySchema::new("Key", T::String, key_description).required(),
            PropertySchema::new("Value", T::String, value_description).required(),
        ]),
    )
}

/// Upstream `rolling_update_schema` under `key` (`RollingUpdate` or
/// `AutoScalingRollingUpdate`).
fn rolling_update_schema(key: &'static str) -> Vec<PropertySchema> {
    vec![PropertySchema::new(key, T::Map, "").map_of(vec![
        PropertySchema::new("MinInstancesInService", T::Integer, "").default_value(0),
        PropertySchema::new("MaxBatchSize", T::Integer, "").default_value(1),
        PropertySchema::new("PauseTime", T::String, "").default_value("PT0S"),
    ])]
}

fn instance_list_attribute() -> AttributeSchema {
    AttributeSchema::new(
        INSTANCE_LIST,
        "A comma-delimited list of server ip addresses. (Heat extension).",
        Some("string"),
    )
}

fn availability_zones() -> PropertySchema {
    PropertySchema::new("AvailabilityZones", T::List, "Not Implemented.").required()
}

impl AutoScalingGroup {
    /// OS::Heat::InstanceGroup: `Size` members of a launch configuration.
    pub fn instance_group(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                availability_zones(),
                PropertySchema::new(
                    "LaunchConfigurationName",
                    T::String,
                    "The reference to a LaunchConfiguration resource.",
                )
                .required()
                .update_allowed(),
                PropertySchema::new("Size", T::Integer, "Desired number of instances.").required().update_allowed(),
                PropertySchema::new(
                    "LoadBalancerNames",
                    T::List,
                    "List of LoadBalancer resources. Currently only the AWS::ElasticLoadBalancing::LoadBalancer resource type is supported.",
                ),
                tags_schema("Tag key.", "Tag value."),
            ],
            attributes: vec![instance_list_attribute(), super::show_attribute()],
            support_status: SupportStatus::default(),
            description: "A group of identical instances, made from an AWS::AutoScaling::LaunchConfiguration.",
        };
        Self::flavored(
            host,
            GroupFlavor::Instance,
            GroupFlavor::INSTANCE_TYPE,
            schema,
            rolling_update_schema("RollingUpdate"),
        )
    }

    /// AWS::AutoScaling::AutoScalingGroup: the instance group resized by
    /// AWS::AutoScaling::ScalingPolicy signals between MinSize and MaxSize.
    pub fn aws(host: Arc<HostSlot>) -> Self {
        let size = |name: &'static str, description: &'static str| {
            PropertySchema::new(name, T::Integer, description).required().update_allowed()
        };
        let schema = ResourceSchema {
            properties: vec![
                availability_zones(),
                PropertySchema::new(
                    "LaunchConfigurationName",
                    T::String,
                    "The reference to a LaunchConfiguration resource.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "InstanceId",
                    T::String,
                    "The ID of an existing instance to use to create the Auto Scaling group. If specify this property, will create the group use an existing instance instead of a launch configuration.",
                )
                .constraint(Constraint::custom("nova.server")),
                size("MaxSize", "Maximum number of instances in the group."),
                size("MinSize", "Minimum number of instances in the group."),
                PropertySchema::new("Cooldown", T::Integer, "Cooldown period, in seconds.").update_allowed(),
                PropertySchema::new("DesiredCapacity", T::Integer, "Desired initial number of instances.")
                    .update_allowed(),
                PropertySchema::new("HealthCheckGracePeriod", T::Integer, "Not Implemented.").hidden(),
                PropertySchema::new("HealthCheckType", T::String, "Not Implemented.")
                    .constraint(Constraint::allowed_values(["EC2", "ELB"]))
                    .hidden(),
                PropertySchema::new("LoadBalancerNames", T::List, "List of LoadBalancer resources."),
                PropertySchema::new(
                    "VPCZoneIdentifier",
                    T::List,
                    "Use only with Neutron, to list the internal subnet to which the instance will be attached; needed only if multiple exist; list length must be exactly 1.",
                )
                .list_of(PropertySchema::new(
                    "*",
                    T::String,
                    "UUID of the internal subnet to which the instance will be attached.",
                )),
                tags_schema("", ""),
            ],
            attributes: vec![instance_list_attribute(), super::show_attribute()],
            support_status: SupportStatus::supported("2014.1"),
            description: "No description available",
        };
        Self::flavored(
            host,
            GroupFlavor::Aws,
            GroupFlavor::AWS_TYPE,
            schema,
            rolling_update_schema("AutoScalingRollingUpdate"),
        )
    }
}

/// The AWS group's `implemented=False` properties: not shown, refused
/// when given.
pub(crate) const AWS_NOT_IMPLEMENTED: &[&str] = &["HealthCheckGracePeriod", "HealthCheckType"];

/// Upstream `AutoScalingGroup.validate` of the AWS group.
pub(crate) fn validate_aws_group(props: &Properties) -> Result<(), EngineError> {
    validate_sizes(props, "MinSize", "MaxSize", "DesiredCapacity")?;
    if let Some(Value::Array(zones)) = props.get("VPCZoneIdentifier") {
        if !zones.is_empty() && zones.len() != 1 {
            return Err(EngineError::NotSupported(
                "Anything other than one VPCZoneIdentifier is not supported.".into(),
            ));
        }
    }
    let given = |k: &str| props.get(k).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    if given("InstanceId") == given("LaunchConfigurationName") {
        return Err(EngineError::validation("Either 'InstanceId' or 'LaunchConfigurationName' must be provided."));
    }
    Ok(())
}

/// Upstream `_tags`: the group's tags, with the `metering.groupname` tag
/// Ceilometer reads unless the user gave a `metering.` tag; the AWS group
/// adds `metering.AutoScalingGroupName` in any case.
fn member_tags(group: &GroupRef<'_>, props: &Properties, aws: bool) -> Value {
    let mut tags = match props.get("Tags") {
        Some(Value::Array(tags)) => tags.clone(),
        _ => Vec::new(),
    };
    let metered = tags.iter().any(|t| t.get("Key").and_then(Value::as_str).is_some_and(|k| k.starts_with("metering.")));
    if !metered {
        tags.push(json!({"Key": "metering.groupname", "Value": group.reference()}));
    }
    if aws {
        tags.push(json!({"Key": "metering.AutoScalingGroupName", "Value": group.reference()}));
    }
    Value::Array(tags)
}

/// Upstream `_get_resource_definition`: a member runs the launch
/// configuration's given properties with the group's tags (and, in the
/// AWS group, its subnet), and the configuration's metadata.
pub(crate) async fn launch_config_member(
    host: &dyn PluginHost,
    aws: bool,
    group: &GroupRef<'_>,
    props: &Properties,
) -> Result<Value, ResourceFailure> {
    // Building members from an existing server asks Nova for it.
    let instance_unsupported = || ResourceFailure::error("NotSupported", "InstanceId is not supported.");
    if props.get("InstanceId").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
        return Err(instance_unsupported());
    }
    let refid = props.get("LaunchConfigurationName").and_then(Value::as_str).unwrap_or_default();
    let conf = host.resource_by_refid(group.stack_id, refid).await?.ok_or_else(|| {
        ResourceFailure::error("ValueError", format!("LaunchConfigurationName ({refid}) reference can not be found."))
    })?;
    let mut member: Map<String, Value> = conf.properties.into_iter().filter(|(_, v)| !v.is_null()).collect();
    if member.contains_key("InstanceId") {
        return Err(instance_unsupported());
    }
    member.insert("Tags".into(), member_tags(group, props, aws));
    if aws {
        if let Some(subnet) = props.get("VPCZoneIdentifier").and_then(|v| v.get(0)) {
            member.insert("SubnetId".into(), subnet.clone());
        }
    }
    let mut definition = json!({"type": MEMBER_TYPE, "properties": member});
    if conf.metadata.as_object().is_some_and(|m| !m.is_empty()) {
        definition["metadata"] = conf.metadata;
    }
    Ok(definition)
}

/// `InstanceList`: the healthy members' `PublicIp`s, comma-separated
/// (`0.0.0.0` for a member without one); None without members.
pub(crate) async fn instance_list(
    host: &dyn PluginHost,
    state: &ResourceState,
    name: &str,
) -> Result<Value, EngineError> {
    let Some(child) = state.physical_id.as_deref().filter(|_| name == INSTANCE_LIST) else {
        return Ok(Value::Null);
    };
    let members = ordered(host.nested_resources(child, &[PUBLIC_IP.to_string()]).await?);
    let ips: Vec<String> = members
        .iter()
        .filter(|m| !m.failed)
        .map(|m| match m.attributes.get(PUBLIC_IP) {
            Some(Value::String(ip)) if !ip.is_empty() => ip.clone(),
            Some(Value::Null) | None => "0.0.0.0".to_string(),
            Some(Value::String(_)) => "0.0.0.0".to_string(),
            Some(other) => other.to_string(),
        })
        .collect();
    Ok(if ips.is_empty() { Value::Null } else { Value::String(ips.join(",")) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Plugin;

    fn aws() -> AutoScalingGroup {
        AutoScalingGroup::aws(Arc::new(HostSlot::default()))
    }

    #[test]
    fn the_aws_group_is_validated_as_upstream() {
        let g = aws();
        let props = |extra: Value| {
            let mut p =
                json!({"AvailabilityZones": ["nova"], "LaunchConfigurationName": "lc", "MinSize": 1, "MaxSize": 3});
            p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            p
        };
        assert!(g.validate_properties("g", &props(json!({}))).is_ok());
        let message = |extra: Value| g.validate_properties("g", &props(extra)).unwrap_err().message();
        assert_eq!(message(json!({"MinSize": 4})), "MinSize can not be greater than MaxSize");
        assert_eq!(message(json!({"MinSize": -1})), "The size of AutoScalingGroup can not be less than zero");
        assert_eq!(message(json!({"DesiredCapacity": 4})), "DesiredCapacity must be between MinSize and MaxSize");
        let e = g.validate_properties("g", &props(json!({"VPCZoneIdentifier": ["a", "b"]}))).unwrap_err();
        assert_eq!(
            (e.heat_type(), e.message().as_str()),
            ("NotSupported", "Anything other than one VPCZoneIdentifier is not supported.")
        );
        let either = "Either 'InstanceId' or 'LaunchConfigurationName' must be provided.";
        assert_eq!(message(json!({"InstanceId": "server"})), either);
        assert_eq!(message(json!({"LaunchConfigurationName": null})), either);
        assert_eq!(
            message(json!({"HealthCheckType": "EC2"})),
            "Property error: resources.g.properties: Property HealthCheckType not implemented yet"
        );
        // Sizes come as strings from CloudFormation templates.
        let p = g.validate_properties("g", &props(json!({"MaxSize": "20"}))).unwrap();
        assert_eq!(p["MaxSize"], json!(20));
    }

    #[test]
    fn schemas_follow_upstream() {
        let ig = AutoScalingGroup::instance_group(Arc::new(HostSlot::default()));
        let s = ig.schema();
        let names: Vec<&str> = s.properties.iter().map(|p| p.name).collect();
        assert_eq!(names, ["AvailabilityZones", "LaunchConfigurationName", "Size", "LoadBalancerNames", "Tags"]);
        let updatable: Vec<&str> = s.properties.iter().filter(|p| p.update_allowed).map(|p| p.name).collect();
        assert_eq!(updatable, ["LaunchConfigurationName", "Size"]);
        assert!(s.has_attribute("InstanceList"));
        assert_eq!(ig.type_name(), "OS::Heat::InstanceGroup");
        let policy: Vec<Value> = ig.update_policy_schema().iter().map(PropertySchema::to_json).collect();
        assert_eq!(policy[0]["schema"]["PauseTime"]["default"], json!("PT0S"));
        assert_eq!(policy[0]["schema"]["MaxBatchSize"]["default"], json!(1));
        assert_eq!(ig.update_policy_schema()[0].name, "RollingUpdate");

        let g = aws();
        let updatable: Vec<&str> = g.schema().properties.iter().filter(|p| p.update_allowed).map(|p| p.name).collect();
        assert_eq!(updatable, ["LaunchConfigurationName", "MaxSize", "MinSize", "Cooldown", "DesiredCapacity"]);
        assert_eq!(g.update_policy_schema()[0].name, "AutoScalingRollingUpdate");
        assert_eq!(g.type_name(), "AWS::AutoScaling::AutoScalingGroup");
        let check = g.schema().property("HealthCheckType").unwrap().to_json();
        assert_eq!(check["constraints"][0]["allowed_values"], json!(["EC2", "ELB"]));
    }

    #[test]
    fn members_are_tagged_for_metering() {
        let group = GroupRef { stack_id: "s", name: "g", physical_id: None };
        let none = Properties::new();
        assert_eq!(member_tags(&group, &none, false), json!([{"Key": "metering.groupname", "Value": "g"}]));
        let created = GroupRef { physical_id: Some("child"), ..group };
        let own = json!({"Tags": [{"Key": "metering.mine", "Value": "1"}]}).as_object().unwrap().clone();
        // A metering tag of the user's own replaces the group name; the
        // AWS group's tag is always added.
        assert_eq!(
            member_tags(&created, &own, true),
            json!([{"Key": "metering.mine", "Value": "1"}, {"Key": "metering.AutoScalingGroupName", "Value": "child"}])
        );
    }

    #[test]
    fn members_map_to_instances_over_the_parents_mapping() {
        let mut env = json!({"resource_registry": {"AWS::EC2::Instance": "provider.yaml", MEMBER_TYPE: "x.yaml"}});
        map_members_to_instances(&mut env);
        assert_eq!(
            env["resource_registry"],
            json!({"AWS::EC2::Instance": "provider.yaml", MEMBER_TYPE: INSTANCE_TYPE})
        );
        // The chain then ends at the user's provider for every member.
        let resolved = keelson_hot::Environment::from_value(&env).unwrap().resolve_type_for("0", MEMBER_TYPE).unwrap();
        assert_eq!(resolved.map(|r| r.target), Some(keelson_hot::RegistryTarget::TemplateFile("provider.yaml".into())));
        let mut env = Value::Null;
        map_members_to_instances(&mut env);
        assert_eq!(env, json!({"resource_registry": {MEMBER_TYPE: INSTANCE_TYPE}}));
    }
}
