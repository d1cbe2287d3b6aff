//! OS::Heat::None (upstream `none_resource.py`): stubs out any other type
//! via `resource_registry`. Accepts any properties, every attribute is
//! null, and an update never does anything. Heat also runs the types of
//! retired projects and removed APIs as this placeholder, hidden, so that
//! old stacks still load and delete: [`NoneResource::retired`].

use serde_json::Value;
use uuid::Uuid;

use super::schema::{ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, RequiredService, ResourceState, UpdateDecision};
use crate::error::EngineError;

pub struct NoneResource {
    type_name: &'static str,
    schema: ResourceSchema,
    /// Heat checks a placeholder's service only where its class names a
    /// client (OS::Aodh::CombinationAlarm).
    required_service: Option<RequiredService>,
}

impl Default for NoneResource {
    fn default() -> Self {
        Self::new()
    }
}

impl NoneResource {
    pub fn new() -> Self {
        NoneResource {
            type_name: Self::TYPE,
            required_service: None,
            schema: ResourceSchema {
                properties: Vec::new(),
                attributes: Vec::new(),
                support_status: SupportStatus::supported("5.0.0"),
                description: "Enables easily disabling certain resources via the resource_registry.\n\nIt does nothing, but can effectively stub out any other resource because it\nwill accept any properties and return any attribute (as None). Note this\nresource always does nothing on update (e.g it is not replaced even if a\nchange to the stubbed resource properties would cause replacement).",
            },
        }
    }
}

/// A support status as upstream's `SupportStatus(status, version,
/// message, previous_status)` states it.
fn status(
    status: &'static str,
    version: &'static str,
    message: Option<&'static str>,
    previous: Option<SupportStatus>,
) -> SupportStatus {
    SupportStatus { status, version: Some(version), message, previous: previous.map(Box::new), substitute: None }
}

fn supported(version: &'static str) -> Option<SupportStatus> {
    Some(SupportStatus::supported(version))
}

/// A retired project's status in Heat 27.0.1: hidden since `hidden`,
/// deprecated since `deprecated` ("marked inactive"), supported before.
fn project_retired(
    hidden: &'static str,
    retired: Option<&'static str>,
    deprecated: &'static str,
    inactive: &'static str,
    before: SupportStatus,
) -> SupportStatus {
    status("HIDDEN", hidden, retired, Some(status("DEPRECATED", deprecated, Some(inactive), Some(before))))
}

const SAHARA_RETIRED: &str = "Sahara project was retired";
const SAHARA_INACTIVE: &str = "Sahara project was marked inactive";
const SENLIN_RETIRED: &str = "Senlin project was retired";
const LBAAS_V1_HIDDEN: &str = "Use LBaaS V2 instead.";
const LBAAS_V1_DEPRECATED: &str = "Neutron LBaaS v1 is deprecated in the Liberty release and is planned to be removed in a future release. Going forward, the LBaaS V2 should be used.";
const LBAAS_V2_HIDDEN: &str = "Use octavia instead.";
const MAGNUM_BAY: &str = "Please use OS::Magnum::Cluster instead.";

impl NoneResource {
    /// The retired types Heat 27.0.1 runs as hidden placeholders (its
    /// `NoneResource` subclasses), each with Heat's support status.
    pub fn retired() -> Vec<NoneResource> {
        let sahara = |before: &'static str| {
            project_retired("23.0.0", Some(SAHARA_RETIRED), "22.0.0", SAHARA_INACTIVE, SupportStatus::supported(before))
        };
        let senlin = || {
            project_retired(
                "23.0.0",
                Some(SENLIN_RETIRED),
                "22.0.0",
                "Senlin project was marked inactive",
                SupportStatus::supported("6.0.0"),
            )
        };
        let monasca = |before: SupportStatus| {
            project_retired(
                "25.0.0",
                Some("Monasca project was retired"),
                "22.0.0",
                "Monasca project was marked inactive",
                before,
            )
        };
        let lbaas_v1 = |before: Option<SupportStatus>| {
            status(
                "HIDDEN",
                "9.0.0",
                Some(LBAAS_V1_HIDDEN),
                Some(status("DEPRECATED", "7.0.0", Some(LBAAS_V1_DEPRECATED), before)),
            )
        };
        let lbaas_v2 = |before: &'static str| status("HIDDEN", "21.0.0", Some(LBAAS_V2_HIDDEN), supported(before));
        let designate = |message: &'static str| {
            status("HIDDEN", "10.0.0", Some(message), Some(status("DEPRECATED", "8.0.0", None, supported("5.0.0"))))
        };
        let types = [
            (
                "OS::Designate::Domain",
                designate("This resource has been removed, use OS::Designate::Zone instead."),
            ),
            (
                "OS::Designate::Record",
                designate("This resource has been removed, use OS::Designate::RecordSet instead."),
            ),
            (
                "OS::Glance::Image",
                status(
                    "HIDDEN",
                    "22.0.0",
                    None,
                    Some(status(
                        "DEPRECATED",
                        "8.0.0",
                        Some("Creating a Glance Image based on an existing URL location requires the Glance v1 API, which is deprecated."),
                        supported("2014.2"),
                    )),
                ),
            ),
            (
                "OS::Heat::HARestarter",
                status(
                    "HIDDEN",
                    "10.0.0",
                    Some("The HARestarter resource type has been removed. Existing stacks containing HARestarter resources can still be used, but the HARestarter resource will be a placeholder that does nothing."),
                    Some(status(
                        "DEPRECATED",
                        "2015.1",
                        Some("The HARestarter resource type is deprecated and will be removed in a future release of Heat, once it has support for auto-healing any type of resource. Note that HARestarter does *not* actually restart servers - it deletes and then recreates them. It also does the same to all dependent resources, and may therefore exhibit unexpected and undesirable behaviour. Instead, use the mark-unhealthy API to mark a resource as needing replacement, and then a stack update to perform the replacement while respecting  the dependencies and not deleting them unnecessarily."),
                        None,
                    )),
                ),
            ),
            (
                "OS::Magnum::Bay",
                status("HIDDEN", "11.0.0", Some(MAGNUM_BAY), Some(status("DEPRECATED", "9.0.0", Some(MAGNUM_BAY), supported("6.0.0")))),
            ),
            (
                "OS::Monasca::AlarmDefinition",
                monasca(status("SUPPORTED", "7.0.0", None, Some(status("UNSUPPORTED", "5.0.0", None, None)))),
            ),
            ("OS::Monasca::Notification", monasca(status("SUPPORTED", "7.0.0", None, supported("5.0.0")))),
            ("OS::Neutron::HealthMonitor", lbaas_v1(None)),
            ("OS::Neutron::Pool", lbaas_v1(None)),
            ("OS::Neutron::PoolMember", lbaas_v1(supported("2014.1"))),
            ("OS::Neutron::LoadBalancer", lbaas_v1(supported("2014.1"))),
            ("OS::Neutron::LBaaS::HealthMonitor", lbaas_v2("6.0.0")),
            ("OS::Neutron::LBaaS::L7Policy", lbaas_v2("7.0.0")),
            ("OS::Neutron::LBaaS::L7Rule", lbaas_v2("7.0.0")),
            ("OS::Neutron::LBaaS::Listener", lbaas_v2("6.0.0")),
            ("OS::Neutron::LBaaS::LoadBalancer", lbaas_v2("6.0.0")),
            ("OS::Neutron::LBaaS::Pool", lbaas_v2("6.0.0")),
            ("OS::Neutron::LBaaS::PoolMember", lbaas_v2("6.0.0")),
            ("OS::Sahara::Cluster", sahara("5.0.0")),
            // Heat gives this one no message where it hides it.
            (
                "OS::Sahara::ClusterTemplate",
                project_retired("23.0.0", None, "22.0.0", SAHARA_INACTIVE, SupportStatus::supported("2014.2")),
            ),
            ("OS::Sahara::DataSource", sahara("5.0.0")),
            ("OS::Sahara::ImageRegistry", sahara("5.0.0")),
            ("OS::Sahara::Job", sahara("8.0.0")),
            ("OS::Sahara::JobBinary", sahara("5.0.0")),
            ("OS::Sahara::NodeGroupTemplate", sahara("2014.2")),
            ("OS::Senlin::Cluster", senlin()),
            ("OS::Senlin::Node", senlin()),
            ("OS::Senlin::Policy", senlin()),
            ("OS::Senlin::Profile", senlin()),
            ("OS::Senlin::Receiver", senlin()),
            // Heat 27.0.1 hides Vitrage with Senlin's message.
            (
                "OS::Vitrage::Template",
                project_retired(
                    "27.0.0",
                    Some(SENLIN_RETIRED),
                    "26.0.0",
                    "Vitrage project was marked inactive",
                    SupportStatus::supported("16.0.0"),
                ),
            ),
        ];
        types.into_iter().map(|(type_name, support_status)| Self::placeholder(type_name, support_status)).collect()
    }

    /// OS::Aodh::CombinationAlarm: removed from Aodh, a hidden placeholder
    /// in Heat that still names the Aodh client, so it needs Aodh.
    pub fn combination_alarm() -> NoneResource {
        let mut alarm = Self::placeholder(
            "OS::Aodh::CombinationAlarm",
            status(
                "HIDDEN",
                "9.0.0",
                Some("OS::Aodh::CombinationAlarm is deprecated and has been removed from Aodh, use OS::Aodh::CompositeAlarm instead."),
                Some(status("DEPRECATED", "7.0.0", None, supported("2014.1"))),
            ),
        );
        alarm.required_service = Some(RequiredService::AODH);
        alarm
    }

    fn placeholder(type_name: &'static str, support_status: SupportStatus) -> NoneResource {
        let mut none = Self::new();
        none.type_name = type_name;
        none.schema.support_status = support_status;
        none.schema.description = "A retired type Heat keeps as a hidden placeholder that does nothing.";
        none
    }
}

impl Plugin for NoneResource {
    const TYPE: &'static str = "OS::Heat::None";

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        self.required_service
    }

    /// Upstream freezes a None resource with empty properties, whatever the
    /// template says: nothing is validated or kept.
    fn validate_properties(&self, _resource_name: &str, _given: &Value) -> Result<Properties, EngineError> {
        Ok(Properties::new())
    }

    fn update_decision(&self, _old: &Properties, _new: &Properties) -> UpdateDecision {
        UpdateDecision::Unchanged
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        ctx.state.physical_id = Some(Uuid::new_v4().to_string());
        // Marks the row as a placeholder: deleting it never touches a
        // real resource.
        ctx.state.data.insert("is_placeholder".into(), "True".into());
        Ok(())
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }

    fn accepts_any_attribute(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::context::test_context;
    use serde_json::json;

    #[tokio::test]
    async fn accepts_anything_and_does_nothing() {
        let rt = NoneResource::new();
        let props = rt.validate_properties("r", &json!({"anything": [1, 2], "flavor": "m1"})).unwrap();
        assert!(props.is_empty());
        assert_eq!(
            rt.update_decision(&Properties::new(), &json!({"x": 1}).as_object().unwrap().clone()),
            UpdateDecision::Unchanged
        );
        let (mut ctx, _tx) = test_context(props.clone());
        rt.create(&mut ctx).await.unwrap();
        let id = ctx.state.physical_id.clone().unwrap();
        assert_eq!(Uuid::parse_str(&id).unwrap().get_version_num(), 4);
        assert_eq!(rt.reference_id(&ctx.state), json!(id));
        assert_eq!(crate::resources::resolve_attribute(&rt, "r", &ctx.state, "whatever").await.unwrap(), Value::Null);
        rt.update(&mut ctx, &props).await.unwrap();
        rt.delete(&mut ctx).await.unwrap();
        assert!(rt.check(&mut ctx).is_none());
    }

    /// Heat's retired types: each is OS::Heat::None under its own name,
    /// hidden with Heat's status, usable in stacks but shown nowhere.
    #[tokio::test]
    async fn retired_types_are_hidden_placeholders() {
        use crate::caller::test_admin as admin;
        use crate::resources::Registry;

        let mut registry = Registry::builtin();
        registry.add_openstack_types();
        let retired: Vec<&str> = NoneResource::retired().iter().map(|t| Plugin::type_name(t)).collect();
        assert_eq!(retired.len(), 31);
        for name in retired.iter().copied().chain(["OS::Aodh::CombinationAlarm"]) {
            let rt = registry.get(name).unwrap_or_else(|| panic!("{name} is not registered"));
            assert!(rt.schema().support_status.is_hidden(), "{name}");
            for e in [
                registry.schema_view(&admin(), name, false).unwrap_err(),
                registry.template_view(&admin(), name, "hot").unwrap_err(),
            ] {
                assert_eq!((e.heat_type(), e.http_status()), ("NotSupported", 400));
                assert_eq!(e.message(), format!("{name} is not supported."));
            }
        }
        let listed = registry.list_view(&admin(), &[("support_status".into(), vec!["HIDDEN".into()])], &[]).unwrap();
        assert_eq!(listed, json!({"resource_types": []}));
        let listed = registry.list_view(&admin(), &[], &[]).unwrap().to_string();
        assert!(!listed.contains("Sahara") && !listed.contains("LBaaS") && !listed.contains("CombinationAlarm"));

        let status = |name: &str| registry.get(name).unwrap().schema().support_status.to_json();
        assert_eq!(
            status("OS::Sahara::Cluster"),
            json!({"status": "HIDDEN", "version": "23.0.0", "message": "Sahara project was retired",
                   "previous_status": {"status": "DEPRECATED", "version": "22.0.0",
                       "message": "Sahara project was marked inactive",
                       "previous_status": {"status": "SUPPORTED", "version": "5.0.0", "message": null, "previous_status": null}}})
        );
        assert_eq!(
            status("OS::Monasca::AlarmDefinition")["previous_status"]["previous_status"]["previous_status"],
            json!({"status": "UNSUPPORTED", "version": "5.0.0", "message": null, "previous_status": null})
        );
        assert_eq!(status("OS::Neutron::LBaaS::L7Rule")["previous_status"]["version"], json!("7.0.0"));
        assert_eq!(status("OS::Neutron::Pool")["previous_status"]["previous_status"], Value::Null);
        assert_eq!(status("OS::Sahara::ClusterTemplate")["message"], Value::Null);
        assert_eq!(registry.get("OS::Aodh::CombinationAlarm").unwrap().required_service(), Some(RequiredService::AODH));
        assert_eq!(registry.get("OS::Senlin::Node").unwrap().required_service(), None);

        // What OS::Heat::None does, under the retired name.
        let senlin =
            NoneResource::retired().into_iter().find(|t| Plugin::type_name(t) == "OS::Senlin::Cluster").unwrap();
        let props = senlin.validate_properties("r", &json!({"profile": "p", "desired_capacity": 2})).unwrap();
        assert!(props.is_empty());
        let (mut ctx, _tx) = test_context(props);
        senlin.create(&mut ctx).await.unwrap();
        assert_eq!(ctx.state.data.get("is_placeholder").map(String::as_str), Some("True"));
        assert_eq!(crate::resources::resolve_attribute(&senlin, "r", &ctx.state, "status").await.unwrap(), Value::Null);
        senlin.delete(&mut ctx).await.unwrap();
    }
}
