//! OS::Keystone::Group: a Keystone group with its role assignments
//! (`roles`), as Heat 27.0.1's `KeystoneGroup`. Every property updates in
//! place; Keystone drops the group's grants with the group.

use std::sync::Arc;

use keelson_openstack::identity_admin::{Actor, Entity, IdentityAdmin};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::role_assignments::{self, roles_property, validate_roles};
use super::{domain_id, entity_name, failure, fields, remember, str_prop, KeystoneType};
use crate::error::EngineError;

pub struct Group {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// The fields of `POST /v3/groups`.
fn create_fields(props: &Properties, name: &str, domain_id: &str) -> Map<String, Value> {
    fields([
        ("name", json!(name)),
        ("domain_id", json!(domain_id)),
        ("description", props.get("description").cloned().unwrap_or(Value::Null)),
    ])
}

/// The fields of `PATCH /v3/groups/{id}`: name and description when they
/// changed, the domain always.
fn update_fields(new: &Properties, diff: &[String], name: &str, domain_id: &str) -> Map<String, Value> {
    let in_diff = |k: &str| diff.iter().any(|d| d == k);
    fields([
        ("name", if in_diff("name") { json!(name) } else { Value::Null }),
        (
            "description",
            if in_diff("description") { new.get("description").cloned().unwrap_or(Value::Null) } else { Value::Null },
        ),
        ("domain_id", json!(domain_id)),
    ])
}

/// The domain an update sends: the new one when it changed to a value,
/// else the old one (Heat's `prop_diff.get(domain) or properties[domain]`).
pub(super) fn update_domain<'a>(old: &'a Properties, new: &'a Properties, diff: &[String]) -> &'a str {
    let changed_to = diff.iter().any(|d| d == "domain").then(|| str_prop(new, "domain")).flatten();
    changed_to.or_else(|| str_prop(old, "domain")).unwrap_or("default")
}

impl Group {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "Name of keystone group.").update_allowed(),
                PropertySchema::new("domain", T::String, "Name or id of keystone domain.")
                    .default_value("default")
                    .update_allowed()
                    .constraint(Constraint::custom("keystone.domain")),
                PropertySchema::new("description", T::String, "Description of keystone group.")
                    .default_value("")
                    .update_allowed(),
                roles_property(),
            ],
            attributes: vec![],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("2015.1")
            },
            description: "Heat Template Resource for Keystone Group.\n\nGroups are a container representing a collection of users. A group itself\nmust be owned by a specific domain, and hence all group names are not\nglobally unique, but only unique to their domain.",
        };
        Group { host, schema }
    }
}

impl KeystoneType for Group {
    const TYPE: &'static str = "OS::Keystone::Group";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        validate_roles(props)
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let domain = domain_id(api, str_prop(&ctx.properties, "domain").unwrap_or("default")).await?;
        let name = entity_name(ctx);
        let group = api.create(Entity::Group, create_fields(&ctx.properties, &name, &domain)).await.map_err(failure)?;
        remember(&mut ctx.state, &group);
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        role_assignments::grant(api, Actor::Group(&id), &role_assignments::items(&ctx.properties)).await
    }

    async fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
        id: &str,
    ) -> ActionResult {
        let diff = changed_properties(old, &ctx.properties);
        let domain = domain_id(api, update_domain(old, &ctx.properties, &diff)).await?;
        let name = entity_name(ctx);
        let body = update_fields(&ctx.properties, &diff, &name, &domain);
        let group = api.update(Entity::Group, id, body).await.map_err(failure)?;
        remember(&mut ctx.state, &group);
        role_assignments::update(api, Actor::Group(id), old, &ctx.properties).await
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, _ctx: &mut ActionContext, id: &str) -> ActionResult {
        api.delete(Entity::Group, id).await.map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    fn plugin() -> Arc<dyn ResourceType> {
        Arc::new(Group::new(Arc::new(HostSlot::default())))
    }

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::Group");
    }

    #[test]
    fn bodies_and_updates() {
        let rt = plugin();
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        let old = rt.validate_properties("g", &json!({"domain": "d0"})).unwrap();
        assert_eq!(
            strip(create_fields(&old, "st-g-x", "d0id")),
            json!({"name": "st-g-x", "domain_id": "d0id", "description": ""})
        );
        let new = rt.validate_properties("g", &json!({"domain": "d0", "description": "x"})).unwrap();
        let diff = changed_properties(&old, &new);
        assert_eq!(update_domain(&old, &new, &diff), "d0");
        assert_eq!(
            strip(update_fields(&new, &diff, "st-g-x", "d0id")),
            json!({"description": "x", "domain_id": "d0id"})
        );
        assert_eq!(rt.update_decision(&old, &new), UpdateDecision::InPlace);
        let moved = rt.validate_properties("g", &json!({"domain": "d1"})).unwrap();
        assert_eq!(update_domain(&old, &moved, &changed_properties(&old, &moved)), "d1");
    }

    #[test]
    fn roles_are_validated() {
        let e = plugin().validate_properties("g", &json!({"roles": [{"role": "r"}]})).unwrap_err();
        assert!(e.message().contains("Either project or domain must be specified for role r"));
    }
}
