//! The built-in resource types by name, and the resource-type API views
//! (`GET /resource_types`, `/resource_types/{t}`, `/resource_types/{t}/template`).

use std::collections::BTreeMap;
use std::sync::Arc;

use keelson_policy::{ContextValues, Credentials, Denied, Enforcer, HeatEnforcer, PolicyFile, Target};
use serde_json::{json, Map, Value};

use super::schema::{show_attribute, ConstraintKind, PropertySchema, PropertyType, SUPPORT_STATUSES};
use super::{HostSlot, NoneResource, RandomString, ResourceType, TestResource, ValueResource};
use crate::caller::Caller;
use crate::error::EngineError;
use crate::template_fetch::TemplateFetcher;

/// `heat.common.exception.Forbidden(action=...)`'s text.
fn forbidden_text(action: &str) -> String {
    format!("You are not authorized to use {action}.")
}

/// Upstream's registry order (plugin module load order) as `GET
/// /resource_types` lists it; types not in it follow, sorted by name.
const UPSTREAM_ORDER: &[&str] = &[
    "AWS::AutoScaling::AutoScalingGroup",
    "AWS::AutoScaling::LaunchConfiguration",
    "AWS::AutoScaling::ScalingPolicy",
    "AWS::CloudFormation::Stack",
    "AWS::CloudFormation::WaitCondition",
    "AWS::CloudFormation::WaitConditionHandle",
    "AWS::EC2::Instance",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::SecurityGroup",
    "AWS::IAM::User",
    "AWS::IAM::AccessKey",
    "AWS::ElasticLoadBalancing::LoadBalancer",
    "OS::Cinder::Volume",
    "OS::Cinder::VolumeAttachment",
    "OS::Cinder::VolumeType",
    "OS::Glance::WebImage",
    "OS::Heat::AccessPolicy",
    "OS::Heat::AutoScalingGroup",
    "OS::Heat::CloudConfig",
    "OS::Heat::Delay",
    "OS::Heat::DeployedServer",
    "OS::Heat::InstanceGroup",
    "OS::Heat::MultipartMime",
    "OS::Heat::None",
    "OS::Heat::RandomString",
    "OS::Heat::Stack",
    "OS::Heat::ResourceChain",
    "OS::Heat::ResourceGroup",
    "OS::Heat::ScalingPolicy",
    "OS::Heat::SoftwareComponent",
    "OS::Heat::SoftwareConfig",
    "OS::Heat::SoftwareDeployment",
    "OS::Heat::SoftwareDeploymentGroup",
    "OS::Heat::StructuredConfig",
    "OS::Heat::StructuredDeployment",
    "OS::Heat::StructuredDeploymentGroup",
    "OS::Heat::SwiftSignal",
    "OS::Heat::SwiftSignalHandle",
    "OS::Heat::TestResource",
    "OS::Heat::Value",
    "OS::Heat::WaitCondition",
    "OS::Heat::WaitConditionHandle",
    "OS::Heat::UpdateWaitConditionHandle",
    "OS::Keystone::Domain",
    "OS::Keystone::Endpoint",
    "OS::Keystone::Group",
    "OS::Keystone::Project",
    "OS::Keystone::Role",
    "OS::Keystone::UserRoleAssignment",
    "OS::Keystone::GroupRoleAssignment",
    "OS::Keystone::Service",
    "OS::Keystone::User",
    "OS::Neutron::FloatingIP",
    "OS::Neutron::FloatingIPAssociation",
    "OS::Neutron::Net",
    "OS::Neutron::Port",
    "OS::Neutron::QoSPolicy",
    "OS::Neutron::QoSBandwidthLimitRule",
    "OS::Neutron::QoSDscpMarkingRule",
    "OS::Neutron::QoSMinimumBandwidthRule",
    "OS::Neutron::QoSMinimumPacketRateRule",
    "OS::Neutron::Router",
    "OS::Neutron::RouterInterface",
    "OS::Neutron::SecurityGroup",
    "OS::Neutron::SecurityGroupRule",
    "OS::Neutron::Subnet",
];

/// Every resource type this engine implements, by type name.
pub struct Registry {
    types: BTreeMap<&'static str, Arc<dyn ResourceType>>,
    /// The engine the plugins that need one (nested stacks) call.
    host: Arc<HostSlot>,
    /// Fetches the templates a URL names (AWS::CloudFormation::Stack's,
    /// a request's `template_url`).
    template_fetcher: Arc<TemplateFetcher>,
    /// Heat's `resource_types:<type>` rules (its `ResourceEnforcer`).
    /// None only if the embedded defaults were unreadable (the policy
    /// crate's tests rule that out): then every type is refused.
    type_policy: Option<Enforcer>,
}

/// Heat's resource-type rules with their defaults only.
fn default_type_policy() -> Option<Enforcer> {
    Enforcer::heat(HeatEnforcer::ResourceTypes, true, true, PolicyFile::empty()).ok()
}

/// The credentials a caller's request context gives oslo.policy in the
/// engine: the user, project and roles the gateway authenticated (with
/// Heat's `is_admin` as the gateway decided it).
pub fn caller_credentials(caller: &Caller) -> Credentials {
    let some = |v: &str| (!v.is_empty()).then(|| v.to_string());
    let mut creds = Credentials::from_context(&ContextValues {
        user_id: some(&caller.user_id),
        project_id: some(&caller.project_id),
        roles: caller.roles.clone(),
        ..ContextValues::default()
    });
    creds.insert("is_admin", caller.is_admin);
    creds
}

impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Registry {
    /// The service-free built-in types.
    pub fn builtin() -> Registry {
        let mut registry = Registry {
            types: BTreeMap::new(),
            host: Arc::new(HostSlot::default()),
            template_fetcher: Arc::new(TemplateFetcher::default()),
            type_policy: default_type_policy(),
        };
        registry.register(Arc::new(NoneResource::new()));
        for retired in NoneResource::retired() {
            registry.register(Arc::new(retired));
        }
        registry.register(Arc::new(TestResource::new()));
        registry.register(Arc::new(RandomString::new()));
        registry.register(Arc::new(ValueResource::new()));
        registry.register(Arc::new(super::ResourceGroup::new(registry.host.clone())));
        registry.register(Arc::new(super::StackResource::new(registry.host.clone())));
        registry.register(Arc::new(super::CfnStack::new(registry.host.clone(), registry.template_fetcher.clone())));
        registry.register(Arc::new(super::ResourceChain::new(registry.host.clone())));
        let host = registry.host().clone();
        registry.register(Arc::new(super::WaitConditionHandle::heat(host.clone())));
        registry.register(Arc::new(super::WaitConditionHandle::update_handle(host.clone())));
        registry.register(Arc::new(super::WaitCondition::new(host.clone())));
        registry.register(Arc::new(super::WaitConditionHandle::aws(host.clone())));
        registry.register(Arc::new(super::WaitCondition::aws(host.clone())));
        registry.register(Arc::new(super::SoftwareConfig::new(host.clone())));
        registry.register(Arc::new(super::SoftwareConfig::structured(host.clone())));
        registry.register(Arc::new(super::SoftwareConfig::cloud_config(host.clone())));
        registry.register(Arc::new(super::SoftwareConfig::multipart_mime(host.clone())));
        registry.register(Arc::new(super::SoftwareDeployment::new(host.clone())));
        registry.register(Arc::new(super::SoftwareDeployment::structured(host.clone())));
        registry.register(Arc::new(super::ResourceGroup::software_deployment_group(host.clone())));
        registry.register(Arc::new(super::ResourceGroup::software_deployments(host.clone())));
        registry.register(Arc::new(super::ResourceGroup::structured_deployment_group(host.clone())));
        registry.register(Arc::new(super::DeployedServer::new(host.clone())));
        let scaling_group = Arc::new(super::AutoScalingGroup::new(host.clone()));
        registry.register(scaling_group.clone());
        registry.register(Arc::new(super::ScalingPolicy::new(host.clone(), scaling_group.clone())));
        registry.register(Arc::new(super::LaunchConfiguration::new()));
        registry.register(Arc::new(super::AutoScalingGroup::instance_group(host.clone())));
        registry.register(Arc::new(super::AutoScalingGroup::aws(host.clone())));
        registry.register(Arc::new(super::ScalingPolicy::aws(host, scaling_group)));
        registry
    }

    /// The engine slot plugins of this registry call; the engine binds
    /// itself when it starts.
    pub fn host(&self) -> &Arc<HostSlot> {
        &self.host
    }

    /// The fetcher of templates named by URL.
    pub fn template_fetcher(&self) -> &Arc<TemplateFetcher> {
        &self.template_fetcher
    }

    /// Replaces the fetcher (the engine's configured bounds) for every
    /// type that fetches.
    pub fn set_template_fetcher(&mut self, fetcher: TemplateFetcher) {
        self.template_fetcher = Arc::new(fetcher);
        self.register(Arc::new(super::CfnStack::new(self.host.clone(), self.template_fetcher.clone())));
    }

    /// The built-in types plus OS::Placement::ResourceProvider and
    /// OS::Placement::Allocation, whose actions call the inventory service
    /// through `client` (only engines that know an inventory endpoint
    /// offer them).
    pub fn with_placement(client: super::placement::PlacementClient) -> Registry {
        let mut registry = Self::builtin();
        let client = Arc::new(client);
        registry.register(Arc::new(super::placement::ResourceProvider::new(client.clone())));
        registry.register(Arc::new(super::placement::Allocation::new(client)));
        registry
    }

    /// Adds the types that act on OpenStack services through the stack's
    /// trust (OS::Keystone::*, OS::Nova::*, OS::Neutron::*): only engines
    /// that know a Keystone offer them.
    pub fn add_openstack_types(&mut self) {
        super::nova::register(self);
        super::neutron::register(self);
        super::glance::register(self);
        super::cinder::register(self);
        super::swift::register(self);
        self.register(Arc::new(NoneResource::combination_alarm()));
        let host = self.host.clone();
        self.register(Arc::new(super::keystone::Project::new(host.clone())));
        self.register(Arc::new(super::keystone::Role::new(host.clone())));
        self.register(Arc::new(super::keystone::Domain::new(host.clone())));
        self.register(Arc::new(super::keystone::User::new(host.clone())));
        self.register(Arc::new(super::keystone::Group::new(host.clone())));
        self.register(Arc::new(super::keystone::RoleAssignment::user(host.clone())));
        self.register(Arc::new(super::keystone::RoleAssignment::group(host.clone())));
        self.register(Arc::new(super::keystone::Service::new(host.clone())));
        self.register(Arc::new(super::keystone::Endpoint::new(host)));
    }

    /// Replaces the resource-type rules (the operator's policy file).
    pub fn set_type_policy(&mut self, enforcer: Enforcer) {
        self.type_policy = Some(enforcer);
    }

    /// Heat's `ResourceEnforcer.enforce`: the rule `resource_types:<type>`
    /// when one is registered (none: allowed), then the wildcard rule of
    /// its namespace (`resource_types:OS::Keystone::*`). Refused: 403
    /// `Forbidden`, naming the rule, or the type for a wildcard.
    pub fn authorize_type(&self, caller: &Caller, type_name: &str) -> Result<(), EngineError> {
        let Some(policy) = &self.type_policy else {
            return Err(EngineError::forbidden(forbidden_text(type_name)));
        };
        let creds = caller_credentials(caller);
        let check = |rule: &str| match policy.authorize(rule, &Target::new(), &creds) {
            Ok(()) | Err(Denied::NotRegistered { .. }) => Ok(()),
            Err(_) => Err(()),
        };
        let rule = format!("resource_types:{type_name}");
        check(&rule).map_err(|()| EngineError::forbidden(forbidden_text(&rule)))?;
        let mut namespace: Vec<&str> = type_name.split("::").collect();
        namespace.pop();
        namespace.push("*");
        check(&format!("resource_types:{}", namespace.join("::")))
            .map_err(|()| EngineError::forbidden(forbidden_text(type_name)))
    }

    /// Heat's `enforce_stack` over every type `types` names, in order.
    pub fn authorize_types<'a>(
        &self,
        caller: &Caller,
        types: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), EngineError> {
        types.into_iter().try_for_each(|t| self.authorize_type(caller, t))
    }

    /// Adds (or replaces) a type under its `type_name()`.
    pub fn register(&mut self, rt: Arc<dyn ResourceType>) {
        self.types.insert(rt.type_name(), rt);
    }

    pub fn get(&self, type_name: &str) -> Option<Arc<dyn ResourceType>> {
        self.types.get(type_name).cloned()
    }

    /// Each type that acts through an OpenStack service, with that service.
    pub fn service_types(&self) -> impl Iterator<Item = (&'static str, super::RequiredService)> + '_ {
        self.types.iter().filter_map(|(name, rt)| rt.required_service().map(|required| (*name, required)))
    }

    /// Type names in upstream's listing order.
    pub fn type_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.types.keys().copied().collect();
        names.sort_by_key(|n| (UPSTREAM_ORDER.iter().position(|u| u == n).unwrap_or(usize::MAX), *n));
        names
    }

    /// `GET /resource_types`: `name` (a regular expression matched at the
    /// start of the type name), `support_status`, `version`,
    /// `with_description`. A repeated key counts with its last value.
    /// Types the caller may not use are left out, as upstream does, and
    /// so are the `unavailable` ones (their service is not in the caller's
    /// catalog).
    pub fn list_view(
        &self,
        caller: &Caller,
        query: &[(String, Vec<String>)],
        unavailable: &[&str],
    ) -> Result<Value, EngineError> {
        let param = |key: &str| query.iter().rev().find(|(k, _)| k == key).and_then(|(_, v)| v.last().cloned());
        let with_description = match param("with_description") {
            Some(v) => extract_bool("with_description", &v)?,
            None => false,
        };
        let support_status = param("support_status");
        if let Some(s) = &support_status {
            if !SUPPORT_STATUSES.contains(&s.as_str()) {
                let statuses: Vec<String> = SUPPORT_STATUSES.iter().map(|s| format!("'{s}'")).collect();
                return Err(EngineError::Invalid(format!(
                    "Data supplied was not valid: Invalid support status and should be one of ({})",
                    statuses.join(", ")
                )));
            }
        }
        let name_filter = match param("name") {
            // Upstream `re.match`; a pattern that does not compile matches nothing.
            Some(pattern) => match regex::Regex::new(&format!("^(?:{pattern})")) {
                Ok(re) => Some(re),
                Err(_) => return Ok(json!({ "resource_types": [] })),
            },
            None => None,
        };
        let version = param("version");
        let mut listed = Vec::new();
        for name in self.type_names() {
            let Some(rt) = self.types.get(name) else {
                continue;
            };
            let status = &rt.schema().support_status;
            if status.is_hidden()
                || name_filter.as_ref().is_some_and(|re| !re.is_match(name))
                || version.as_deref().is_some_and(|v| status.version != Some(v))
                || support_status.as_deref().is_some_and(|s| status.status != s)
                || self.authorize_type(caller, name).is_err()
                || unavailable.contains(&name)
            {
                continue;
            }
            listed.push(if with_description {
                json!({"resource_type": name, "description": rt.schema().description})
            } else {
                json!(name)
            });
        }
        Ok(json!({ "resource_types": listed }))
    }

    fn visible(&self, type_name: &str) -> Result<&Arc<dyn ResourceType>, EngineError> {
        let rt = self.types.get(type_name).ok_or_else(|| EngineError::entity_not_found("Resource Type", type_name))?;
        if rt.schema().support_status.is_hidden() {
            return Err(EngineError::not_supported(format!("{type_name} is not supported.")));
        }
        Ok(rt)
    }

    /// `GET /resource_types/{type}` (the type's rule first, as upstream).
    pub fn schema_view(&self, caller: &Caller, type_name: &str, with_description: bool) -> Result<Value, EngineError> {
        self.authorize_type(caller, type_name)?;
        let rt = self.visible(type_name)?;
        let schema = rt.schema();
        let properties: Map<String, Value> =
            schema.properties.iter().filter(|p| !p.hidden).map(|p| (p.name.to_string(), p.to_json())).collect();
        let attributes: Map<String, Value> = schema
            .attributes
            .iter()
            .filter(|a| !a.hidden)
            .cloned()
            .chain(std::iter::once(show_attribute()))
            .map(|a| (a.name.to_string(), a.to_json()))
            .collect();
        let mut out = Map::new();
        out.insert("resource_type".into(), json!(type_name));
        out.insert("properties".into(), Value::Object(properties));
        out.insert("attributes".into(), Value::Object(attributes));
        out.insert("support_status".into(), schema.support_status.to_json());
        if with_description {
            out.insert("description".into(), json!(schema.description));
        }
        Ok(Value::Object(out))
    }

    /// `GET /resource_types/{type}/template?template_type=hot|cfn`: a
    /// provider template mirroring the type (parameters from properties,
    /// outputs from attributes). Like upstream, a type with an `any`
    /// property cannot be rendered: 500 `KeyError`.
    pub fn template_view(&self, caller: &Caller, type_name: &str, template_type: &str) -> Result<Value, EngineError> {
        self.authorize_type(caller, type_name)?;
        let rt = self.visible(type_name)?;
        let hot = template_type == "hot";
        let schema = rt.schema();
        let resource_name = class_name(type_name);
        let mut params = Map::new();
        let mut props = Map::new();
        for p in schema.properties.iter().filter(|p| !p.hidden) {
            params.insert(p.name.to_string(), if hot { hot_parameter(p)? } else { cfn_parameter(p)? });
            let prop = if hot {
                json!({"get_param": p.name})
            } else if p.kind == PropertyType::List {
                json!({"Fn::Split": [",", {"Ref": p.name}]})
            } else {
                json!({"Ref": p.name})
            };
            props.insert(p.name.to_string(), prop);
        }
        let mut outputs = Map::new();
        for a in schema.attributes.iter().filter(|a| !a.hidden).cloned().chain(std::iter::once(show_attribute())) {
            let output = if hot {
                json!({"value": {"get_attr": [resource_name, a.name]}, "description": a.description})
            } else {
                json!({"Value": {"Fn::GetAtt": [resource_name, a.name]}, "Description": a.description})
            };
            outputs.insert(a.name.to_string(), output);
        }
        let stack_id = if hot {
            json!({"value": {"get_resource": resource_name}})
        } else {
            json!({"Value": {"Ref": resource_name}})
        };
        outputs.insert("OS::stack_id".into(), stack_id);
        let description = format!("Initial template of {resource_name}");
        Ok(if hot {
            json!({
                "heat_template_version": "2016-10-14",
                "description": description,
                "parameters": params,
                "outputs": outputs,
                "resources": {resource_name: {"type": type_name, "properties": props}},
            })
        } else {
            json!({
                "HeatTemplateFormatVersion": "2012-12-12",
                "Description": description,
                "Parameters": params,
                "Resources": {resource_name: {"Type": type_name, "Properties": props}},
                "Outputs": outputs,
            })
        })
    }
}

/// The upstream plugin class name used as the resource name in generated
/// templates.
fn class_name(type_name: &str) -> &str {
    match type_name {
        "OS::Heat::None" => "NoneResource",
        other => other.rsplit("::").next().unwrap_or(other),
    }
}

/// `param_type_map[schema.type]`: `Any` has no parameter type upstream.
fn missing_param_type(kind: PropertyType) -> EngineError {
    let upstream = match kind {
        PropertyType::Any => "Any",
        _ => "Unknown",
    };
    EngineError::KeyError(format!("'{upstream}'"))
}

fn cfn_parameter(p: &PropertySchema) -> Result<Value, EngineError> {
    let kind = match p.kind {
        PropertyType::Integer | PropertyType::Number => "Number",
        PropertyType::String => "String",
        PropertyType::Boolean => "Boolean",
        PropertyType::Map => "Json",
        PropertyType::List => "CommaDelimitedList",
        PropertyType::Any => return Err(missing_param_type(p.kind)),
    };
    let mut out = Map::new();
    out.insert("Type".into(), json!(kind));
    if !p.description.is_empty() {
        out.insert("Description".into(), json!(p.description));
    }
    if let Some(d) = &p.default {
        out.insert("Default".into(), d.clone());
    }
    for c in &p.constraints {
        match &c.kind {
            ConstraintKind::Length { min, max } => {
                if let Some(v) = min {
                    out.insert("MinLength".into(), json!(v));
                }
                if let Some(v) = max {
                    out.insert("MaxLength".into(), json!(v));
                }
            }
            ConstraintKind::Range { min, max } => {
                if let Some(v) = min {
                    out.insert("MinValue".into(), v.clone());
                }
                if let Some(v) = max {
                    out.insert("MaxValue".into(), v.clone());
                }
            }
            ConstraintKind::AllowedValues(v) => {
                out.insert("AllowedValues".into(), Value::Array(v.clone()));
            }
            ConstraintKind::AllowedPattern(pattern) => {
                out.insert("AllowedPattern".into(), json!(pattern));
            }
            ConstraintKind::Custom(_) => {}
        }
    }
    if p.kind == PropertyType::Boolean {
        out.insert("AllowedValues".into(), json!(["True", "true", "False", "false"]));
    }
    Ok(Value::Object(out))
}

fn hot_parameter(p: &PropertySchema) -> Result<Value, EngineError> {
    let kind = match p.kind {
        PropertyType::Integer | PropertyType::Number => "number",
        PropertyType::String => "string",
        PropertyType::Boolean => "boolean",
        PropertyType::Map => "json",
        PropertyType::List => "comma_delimited_list",
        PropertyType::Any => return Err(missing_param_type(p.kind)),
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    if !p.description.is_empty() {
        out.insert("description".into(), json!(p.description));
    }
    if let Some(d) = &p.default {
        out.insert("default".into(), d.clone());
    }
    if !p.constraints.is_empty() {
        let constraints: Vec<Value> = p
            .constraints
            .iter()
            .map(|c| match &c.kind {
                ConstraintKind::Length { min, max } => {
                    json!({"length": bounds(min.map(Value::from), max.map(Value::from))})
                }
                ConstraintKind::Range { min, max } => {
                    json!({"range": bounds(min.clone(), max.clone())})
                }
                ConstraintKind::AllowedValues(v) => json!({"allowed_values": v}),
                ConstraintKind::AllowedPattern(pattern) => json!({"allowed_pattern": pattern}),
                // Upstream renders a custom constraint as an empty mapping.
                ConstraintKind::Custom(_) => json!({}),
            })
            .collect();
        out.insert("constraints".into(), Value::Array(constraints));
    }
    Ok(Value::Object(out))
}

fn bounds(min: Option<Value>, max: Option<Value>) -> Value {
    let mut m = Map::new();
    if let Some(v) = min {
        m.insert("min".into(), v);
    }
    if let Some(v) = max {
        m.insert("max".into(), v);
    }
    Value::Object(m)
}

/// `param_utils.extract_bool`, with the 400 heat-api gives.
fn extract_bool(name: &str, value: &str) -> Result<bool, EngineError> {
    match value.to_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(EngineError::BadRequest(format!(
            "Unrecognized value \"{value}\" for \"{name}\", acceptable values are: true, false."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::caller::test_admin as admin;

    /// The four types' schemas as the real Heat 27 returned them
    /// (api-captures/resource_type_schemas.json).
    const CAPTURED: &str = include_str!("testdata/resource_type_schemas.json");

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, Vec<String>)> {
        pairs.iter().map(|(k, v)| (k.to_string(), vec![v.to_string()])).collect()
    }

    #[test]
    fn schema_views_equal_the_captures() {
        let captured: Value = serde_json::from_str(CAPTURED).unwrap();
        let registry = Registry::builtin();
        for name in ["OS::Heat::None", "OS::Heat::RandomString", "OS::Heat::TestResource", "OS::Heat::Value"] {
            assert_eq!(registry.schema_view(&admin(), name, false).unwrap(), captured[name], "{name}");
        }
    }

    #[test]
    fn schema_view_with_description_and_unknown() {
        let registry = Registry::builtin();
        let v = registry.schema_view(&admin(), "OS::Heat::Value", true).unwrap();
        assert!(v["description"].as_str().unwrap().starts_with("A resource which exposes its value property"));
        let e = registry.schema_view(&admin(), "OS::Nova::Server", false).unwrap_err();
        assert_eq!((e.heat_type(), e.http_status()), ("EntityNotFound", 404));
        assert_eq!(e.message(), "The Resource Type (OS::Nova::Server) could not be found.");
    }

    #[test]
    fn list_view_filters() {
        let registry = Registry::builtin();
        assert_eq!(
            registry.list_view(&admin(), &[], &[]).unwrap(),
            json!({"resource_types": [
                "AWS::AutoScaling::AutoScalingGroup", "AWS::AutoScaling::LaunchConfiguration", "AWS::AutoScaling::ScalingPolicy",
                "AWS::CloudFormation::Stack", "AWS::CloudFormation::WaitCondition", "AWS::CloudFormation::WaitConditionHandle",
                "OS::Heat::AutoScalingGroup", "OS::Heat::CloudConfig", "OS::Heat::DeployedServer", "OS::Heat::InstanceGroup", "OS::Heat::MultipartMime",
                "OS::Heat::None", "OS::Heat::RandomString", "OS::Heat::Stack", "OS::Heat::ResourceChain", "OS::Heat::ResourceGroup",
                "OS::Heat::ScalingPolicy", "OS::Heat::SoftwareConfig", "OS::Heat::SoftwareDeployment", "OS::Heat::SoftwareDeploymentGroup",
                "OS::Heat::StructuredConfig", "OS::Heat::StructuredDeployment", "OS::Heat::StructuredDeploymentGroup",
                "OS::Heat::TestResource", "OS::Heat::Value",
                "OS::Heat::WaitCondition", "OS::Heat::WaitConditionHandle", "OS::Heat::UpdateWaitConditionHandle"
            ]})
        );
        assert_eq!(
            registry.list_view(&admin(), &q(&[("name", "OS::Heat::R.*")]), &[]).unwrap(),
            json!({"resource_types": ["OS::Heat::RandomString", "OS::Heat::ResourceChain", "OS::Heat::ResourceGroup"]})
        );
        // re.match: anchored at the start, not a substring search
        assert_eq!(registry.list_view(&admin(), &q(&[("name", "Value")]), &[]).unwrap(), json!({"resource_types": []}));
        assert_eq!(registry.list_view(&admin(), &q(&[("name", "(")]), &[]).unwrap(), json!({"resource_types": []}));
        assert_eq!(
            registry.list_view(&admin(), &q(&[("version", "5.0.0")]), &[]).unwrap(),
            json!({"resource_types": [
                "OS::Heat::None", "OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup", "OS::Heat::TestResource"
            ]})
        );
        assert_eq!(
            registry.list_view(&admin(), &q(&[("support_status", "DEPRECATED")]), &[]).unwrap(),
            json!({"resource_types": []})
        );
        let e = registry.list_view(&admin(), &q(&[("support_status", "BOGUS")]), &[]).unwrap_err();
        assert_eq!(e.heat_type(), "Invalid");
        assert_eq!(
            e.message(),
            "Data supplied was not valid: Invalid support status and should be one of ('UNKNOWN', 'SUPPORTED', 'DEPRECATED', 'UNSUPPORTED', 'HIDDEN')"
        );
        let described =
            registry.list_view(&admin(), &q(&[("with_description", "True"), ("name", "OS::Heat::None")]), &[]).unwrap();
        assert_eq!(described["resource_types"][0]["resource_type"], json!("OS::Heat::None"));
        assert!(described["resource_types"][0]["description"].as_str().unwrap().starts_with("Enables easily"));
        let e = registry.list_view(&admin(), &q(&[("with_description", "maybe")]), &[]).unwrap_err();
        assert_eq!(
            e.message(),
            "Unrecognized value \"maybe\" for \"with_description\", acceptable values are: true, false."
        );
    }

    /// Heat's hidden OS::Heat::SoftwareDeployments: stacks may use it, but
    /// no listing shows it (not even `support_status=HIDDEN`) and its schema
    /// and template answer NotSupported.
    #[test]
    fn a_hidden_type_is_usable_but_not_shown() {
        let registry = Registry::builtin();
        let name = "OS::Heat::SoftwareDeployments";
        let hidden = registry.get(name).unwrap();
        let status = &hidden.schema().support_status;
        assert_eq!(
            status.to_json(),
            json!({"status": "HIDDEN", "message": "Please use OS::Heat::SoftwareDeploymentGroup instead.",
                   "version": "7.0.0", "previous_status": {"status": "DEPRECATED", "message": null,
                   "version": "2014.2", "previous_status": null}})
        );
        assert!(status.is_substituted_by("OS::Heat::SoftwareDeploymentGroup"));
        for query in [q(&[]), q(&[("support_status", "HIDDEN")]), q(&[("name", "OS::Heat::SoftwareDeployments")])] {
            let listed = registry.list_view(&admin(), &query, &[]).unwrap();
            assert!(!listed["resource_types"].as_array().unwrap().contains(&json!(name)), "{listed}");
        }
        let refusals = [
            registry.schema_view(&admin(), name, false).unwrap_err(),
            registry.template_view(&admin(), name, "hot").unwrap_err(),
        ];
        for e in refusals {
            assert_eq!((e.heat_type(), e.http_status()), ("NotSupported", 400));
            assert_eq!(e.message(), "OS::Heat::SoftwareDeployments is not supported.");
        }
    }

    #[test]
    fn template_views() {
        let registry = Registry::builtin();
        let hot = registry.template_view(&admin(), "OS::Heat::RandomString", "hot").unwrap();
        assert_eq!(hot["heat_template_version"], json!("2016-10-14"));
        assert_eq!(hot["description"], json!("Initial template of RandomString"));
        assert_eq!(hot["parameters"]["length"]["type"], json!("number"));
        assert_eq!(hot["parameters"]["length"]["default"], json!(32));
        assert_eq!(hot["parameters"]["length"]["constraints"], json!([{"range": {"min": 1, "max": 512}}]));
        assert!(hot["parameters"].get("sequence").is_none());
        assert_eq!(hot["resources"]["RandomString"]["properties"]["salt"], json!({"get_param": "salt"}));
        assert_eq!(hot["outputs"]["value"]["value"], json!({"get_attr": ["RandomString", "value"]}));
        assert_eq!(hot["outputs"]["OS::stack_id"], json!({"value": {"get_resource": "RandomString"}}));
        let cfn = registry.template_view(&admin(), "OS::Heat::TestResource", "cfn").unwrap();
        assert_eq!(cfn["HeatTemplateFormatVersion"], json!("2012-12-12"));
        assert_eq!(cfn["Parameters"]["fail"]["AllowedValues"], json!(["True", "true", "False", "false"]));
        assert_eq!(cfn["Parameters"]["action_wait_secs"]["Type"], json!("Json"));
        assert_eq!(cfn["Resources"]["TestResource"]["Properties"]["value"], json!({"Ref": "value"}));
        assert_eq!(cfn["Outputs"]["show"]["Value"], json!({"Fn::GetAtt": ["TestResource", "show"]}));
        let none = registry.template_view(&admin(), "OS::Heat::None", "hot").unwrap();
        assert_eq!(none["parameters"], json!({}));
        assert!(none["resources"].get("NoneResource").is_some());
        // As captured from the real Heat: 500 KeyError for an `any` property.
        let e = registry.template_view(&admin(), "OS::Heat::Value", "hot").unwrap_err();
        assert_eq!((e.heat_type(), e.http_status()), ("KeyError", 500));
    }
}
