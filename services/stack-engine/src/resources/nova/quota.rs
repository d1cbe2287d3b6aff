//! OS::Nova::Quota: a project's Nova quotas (admin, by Nova's default
//! policy).
//!
//! Physical id = the physical name. `project` (a name or id, resolved
//! through Keystone) replaces; every quota changes in place: create and
//! update write the quotas the properties set (`PUT
//! /os-quota-sets/{project}`), delete resets the project to the defaults.
//! Like Heat's novaclient, from microversion 2.57 only the quotas Nova
//! still takes are sendable: a template setting another fails as Heat's
//! does (`TypeError`); between 2.36 and 2.56 Nova itself refuses the
//! network ones.

use std::sync::Arc;

use keelson_openstack::compute::{Compute, QUOTAS_FROM_2_57, QUOTA_STRICT};
use keelson_openstack::Session;
use serde_json::{Map, Value};

use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, SupportStatus,
};
use super::{
    create_in_stack, delete_in_stack, failure, keystone_id, ok_if_gone, str_prop, update_in_stack, Entity, NovaActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

/// The quota properties in Heat's order, with their descriptions.
const QUOTAS: [(&str, &str); 14] = [
    ("cores", "Quota for the number of cores. Setting the value to -1 removes the limit."),
    ("fixed_ips", "Quota for the number of fixed IPs. Setting the value to -1 removes the limit."),
    ("floating_ips", "Quota for the number of floating IPs. Setting the value to -1 removes the limit."),
    ("instances", "Quota for the number of instances. Setting the value to -1 removes the limit."),
    ("injected_files", "Quota for the number of injected files. Setting the value to -1 removes the limit."),
    (
        "injected_file_content_bytes",
        "Quota for the number of injected file content bytes. Setting the value to -1 removes the limit.",
    ),
    (
        "injected_file_path_bytes",
        "Quota for the number of injected file path bytes. Setting the value to -1 removes the limit.",
    ),
    ("key_pairs", "Quota for the number of key pairs. Setting the value to -1 removes the limit."),
    ("metadata_items", "Quota for the number of metadata items. Setting the value to -1 removes the limit."),
    ("ram", "Quota for the amount of ram (in megabytes). Setting the value to -1 removes the limit."),
    ("security_groups", "Quota for the number of security groups. Setting the value to -1 removes the limit."),
    (
        "security_group_rules",
        "Quota for the number of security group rules. Setting the value to -1 removes the limit.",
    ),
    ("server_groups", "Quota for the number of server groups. Setting the value to -1 removes the limit."),
    (
        "server_group_members",
        "Quota for the number of server group members. Setting the value to -1 removes the limit.",
    ),
];

/// Resource data: the project id the quotas were written for.
const PROJECT_DATA: &str = "project_id";

pub struct Quota {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl Quota {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let mut properties =
            vec![PropertySchema::new("project", T::String, "Name or id of the project to set the quota for.")
                .required()
                .constraint(Constraint::custom("keystone.project"))];
        properties.extend(QUOTAS.iter().map(|(name, description)| {
            PropertySchema::new(name, T::Integer, description)
                .constraint(Constraint::range(Some(-1), None))
                .update_allowed()
        }));
        Quota {
            host,
            schema: ResourceSchema {
                properties,
                attributes: Vec::new(),
                support_status: SupportStatus::supported("8.0.0"),
                description: "A resource for creating nova quotas.\n\nNova Quota is used to manage operational limits for projects. Currently,\nthis resource can manage Nova's quotas for:\n\n    - cores\n    - fixed_ips\n    - floating_ips\n    - instances\n    - injected_files\n    - injected_file_content_bytes\n    - injected_file_path_bytes\n    - key_pairs\n    - metadata_items\n    - ram\n    - security_groups\n    - security_group_rules\n    - server_groups\n    - server_group_members\n\nNote that default nova security policy usage of this resource\nis limited to being used by administrators only. Administrators should be\ncareful to create only one Nova Quota resource per project, otherwise\nit will be hard for them to manage the quota properly.",
            },
        }
    }

    /// The quotas the properties set, in Heat's order, checked against
    /// what the microversion's quota update takes.
    fn quota_set(compute: &Compute<'_>, props: &Properties) -> Result<Map<String, Value>, ResourceFailure> {
        let mut set = Map::new();
        for (name, _) in QUOTAS {
            let Some(value) = props.get(name).filter(|v| !v.is_null()) else { continue };
            if compute.supports(QUOTA_STRICT) && !QUOTAS_FROM_2_57.contains(&name) {
                return Err(ResourceFailure::error(
                    "TypeError",
                    format!("QuotaSetManager.update() got an unexpected keyword argument '{name}'"),
                ));
            }
            set.insert(name.to_string(), value.clone());
        }
        Ok(set)
    }

    async fn write_with(
        &self,
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
    ) -> Result<(), ResourceFailure> {
        let project =
            keystone_id(session, Entity::Project, str_prop(&ctx.properties, "project").unwrap_or_default()).await?;
        let set = Self::quota_set(compute, &ctx.properties)?;
        compute.update_quotas(&project, &set).await.map_err(failure)?;
        ctx.state.data.insert(PROJECT_DATA.into(), project);
        Ok(())
    }
}

impl NovaActions for Quota {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, session: &Session, compute: &Compute<'_>, ctx: &mut ActionContext) -> ActionResult {
        self.write_with(session, compute, ctx).await?;
        ctx.state.physical_id = Some(ctx.physical_name());
        Ok(())
    }

    async fn update_with(
        &self,
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
        _old: &Properties,
    ) -> ActionResult {
        self.write_with(session, compute, ctx).await
    }

    async fn delete_with(
        &self,
        _: &Session,
        compute: &Compute<'_>,
        _: &mut ActionContext,
        project: &str,
    ) -> ActionResult {
        ok_if_gone(compute.delete_quotas(project).await)
    }

    /// The project whose quotas were written: nothing was when the create
    /// failed before its PUT.
    fn deletable_id(&self, ctx: &ActionContext) -> Option<String> {
        ctx.state.data.get(PROJECT_DATA).cloned()
    }
}

impl Plugin for Quota {
    const TYPE: &'static str = "OS::Nova::Quota";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NOVA)
    }

    /// Heat's: at least one quota besides the project.
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        if QUOTAS.iter().any(|(name, _)| props.get(*name).is_some_and(|v| !v.is_null())) {
            return Ok(());
        }
        let mut names: Vec<&str> = QUOTAS.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        Err(EngineError::Remote {
            heat_type: "PropertyUnspecifiedError".into(),
            http_status: 400,
            message: format!("At least one of the following properties must be specified: {}.", names.join(", ")),
        })
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        update_in_stack(self, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::context::test_context;
    use super::super::super::UpdateDecision;
    use super::super::testing;
    use super::*;

    fn quota() -> Quota {
        Quota::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&quota(), "q", &v).unwrap()
    }

    #[tokio::test]
    async fn writes_the_set_quotas_for_the_resolved_project() {
        let (nova, session) = testing::nova("2.96").await;
        nova.answer("GET /v3/projects?name=demo", 200, json!({"projects": [{"id": "p-demo", "name": "demo"}]}));
        nova.answer("PUT /compute/v2.1/os-quota-sets/p-demo", 200, json!({"quota_set": {"cores": 4}}));
        let (mut ctx, _tx) = test_context(props(json!({"project": "demo", "cores": 4, "ram": -1})));
        let compute = super::super::compute(&session).await.unwrap();
        quota().write_with(&session, &compute, &mut ctx).await.unwrap();
        let put = nova.calls().pop().unwrap();
        assert_eq!(
            put,
            ("PUT".into(), "/compute/v2.1/os-quota-sets/p-demo".into(), json!({"quota_set": {"cores": 4, "ram": -1}}))
        );
        assert_eq!(ctx.state.data.get(PROJECT_DATA).map(String::as_str), Some("p-demo"));
        // The stand-in answers the delete 404: done.
        assert_eq!(ok_if_gone(compute.delete_quotas("p-demo").await), Ok(()));
        nova.answer("DELETE /compute/v2.1/os-quota-sets/p-demo", 202, Value::Null);
        compute.delete_quotas("p-demo").await.unwrap();
        assert_eq!(nova.calls().pop().unwrap().0, "DELETE");
    }

    #[tokio::test]
    async fn quotas_nova_no_longer_takes_fail_as_heats() {
        let (_nova, session) = testing::nova("2.96").await;
        let compute = super::super::compute(&session).await.unwrap();
        let e = Quota::quota_set(&compute, &props(json!({"project": "p", "cores": 1, "fixed_ips": 2}))).unwrap_err();
        assert_eq!(
            e,
            ResourceFailure::error(
                "TypeError",
                "QuotaSetManager.update() got an unexpected keyword argument 'fixed_ips'"
            )
        );
        let (_old, session) = testing::nova("2.56").await;
        let compute = super::super::compute(&session).await.unwrap();
        let set = Quota::quota_set(&compute, &props(json!({"project": "p", "fixed_ips": 2}))).unwrap();
        assert_eq!(Value::Object(set), json!({"fixed_ips": 2}));
    }

    #[test]
    fn validation_and_update_rules() {
        let e = Plugin::validate_properties(&quota(), "q", &json!({"project": "p"})).unwrap_err();
        assert_eq!(e.heat_type(), "PropertyUnspecifiedError");
        assert_eq!(
            e.message(),
            "At least one of the following properties must be specified: cores, fixed_ips, floating_ips, injected_file_content_bytes, injected_file_path_bytes, injected_files, instances, key_pairs, metadata_items, ram, security_group_rules, security_groups, server_group_members, server_groups."
        );
        assert!(Plugin::validate_properties(&quota(), "q", &json!({"project": "p", "cores": -2})).is_err());
        let old = props(json!({"project": "p", "cores": 1}));
        assert_eq!(
            Plugin::update_decision(&quota(), &old, &props(json!({"project": "p", "cores": 2}))),
            UpdateDecision::InPlace
        );
        assert_eq!(
            Plugin::update_decision(&quota(), &old, &props(json!({"project": "q", "cores": 1}))),
            UpdateDecision::Replace
        );
    }
}
