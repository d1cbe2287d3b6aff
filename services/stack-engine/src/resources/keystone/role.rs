//! OS::Keystone::Role: a Keystone role, global or (with `domain`) a
//! domain-specific one, as Heat 27.0.1's `KeystoneRole`. A new name is a
//! rename; a new domain replaces the role.

use std::sync::Arc;

use keelson_openstack::identity_admin::{Entity, IdentityAdmin};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::{domain_id, entity_name, failure, fields, remember, str_prop, KeystoneType};

pub struct Role {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// The fields of `POST /v3/roles` (no domain: a global role).
fn create_fields(name: &str, domain_id: Option<&str>) -> Map<String, Value> {
    fields([("name", json!(name)), ("domain_id", json!(domain_id))])
}

impl Role {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "Name of keystone role.").update_allowed(),
                PropertySchema::new("domain", T::String, "Name or id of keystone domain.")
                    .constraint(Constraint::custom("keystone.domain")),
            ],
            attributes: vec![],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("2015.1")
            },
            description: "Heat Template Resource for Keystone Role.\n\nRoles dictate the level of authorization the end user can obtain. Roles can\nbe granted at either the domain or project level. Role can be assigned to\nthe individual user or at the group level. Role name is unique within the\nowning domain.",
        };
        Role { host, schema }
    }
}

impl KeystoneType for Role {
    const TYPE: &'static str = "OS::Keystone::Role";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let domain = match str_prop(&ctx.properties, "domain") {
            Some(d) => Some(domain_id(api, d).await?),
            None => None,
        };
        let name = entity_name(ctx);
        let role = api.create(Entity::Role, create_fields(&name, domain.as_deref())).await.map_err(failure)?;
        remember(&mut ctx.state, &role);
        Ok(())
    }

    /// Only `name` updates in place: a rename (a cleared name is the
    /// physical name again).
    async fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        _old: &Properties,
        id: &str,
    ) -> ActionResult {
        let name = entity_name(ctx);
        let role = api.update(Entity::Role, id, fields([("name", json!(name))])).await.map_err(failure)?;
        remember(&mut ctx.state, &role);
        Ok(())
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, _ctx: &mut ActionContext, id: &str) -> ActionResult {
        api.delete(Entity::Role, id).await.map_err(failure)
    }

    /// Only a rename is sent.
    fn update_target(&self, ctx: &ActionContext, old: &Properties) -> Option<String> {
        let renamed = changed_properties(old, &ctx.properties).iter().any(|k| k == "name");
        ctx.state.physical_id.clone().filter(|_| renamed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    fn plugin() -> Arc<dyn ResourceType> {
        Arc::new(Role::new(Arc::new(HostSlot::default())))
    }

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::Role");
    }

    #[test]
    fn create_body_names_the_domain_only_when_given() {
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        assert_eq!(strip(create_fields("r", None)), json!({"name": "r"}));
        assert_eq!(strip(create_fields("r", Some("d1"))), json!({"name": "r", "domain_id": "d1"}));
    }

    #[test]
    fn a_new_domain_replaces_a_new_name_renames() {
        let rt = plugin();
        let props = |v: Value| rt.validate_properties("r", &v).unwrap();
        let base = props(json!({"name": "a"}));
        assert_eq!(rt.update_decision(&base, &props(json!({"name": "b"}))), UpdateDecision::InPlace);
        assert_eq!(rt.update_decision(&base, &props(json!({"name": "a", "domain": "d"}))), UpdateDecision::Replace);
    }

    #[tokio::test]
    async fn nothing_to_delete_without_a_role() {
        let (mut ctx, _tx) = crate::resources::context::test_context(Properties::new());
        assert_eq!(plugin().delete(&mut ctx).await, Ok(()));
    }
}
