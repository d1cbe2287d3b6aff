//! OS::Keystone::Domain: a Keystone domain, as Heat 27.0.1's
//! `KeystoneDomain`. Every property updates in place. Delete is Keystone's
//! plain delete, as Heat's: Keystone refuses an enabled domain (disable it
//! with a stack update first).

use std::sync::Arc;

use keelson_openstack::identity_admin::{Entity, IdentityAdmin};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::{entity_name, failure, fields, remember, KeystoneType};

pub struct Domain {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// The fields of `POST /v3/domains` (no description: none sent).
fn create_fields(props: &Properties, name: &str) -> Map<String, Value> {
    fields([
        ("name", json!(name)),
        ("description", props.get("description").cloned().unwrap_or(Value::Null)),
        ("enabled", props.get("enabled").cloned().unwrap_or(Value::Null)),
    ])
}

/// The fields of `PATCH /v3/domains/{id}`: those that changed (a cleared
/// name is the physical name again).
fn update_fields(new: &Properties, diff: &[String], name: &str) -> Map<String, Value> {
    let in_diff = |k: &str| diff.iter().any(|d| d == k);
    let changed_value = |k: &str| if in_diff(k) { new.get(k).cloned().unwrap_or(Value::Null) } else { Value::Null };
    fields([
        ("name", if in_diff("name") { json!(name) } else { Value::Null }),
        ("description", changed_value("description")),
        ("enabled", changed_value("enabled")),
    ])
}

impl Domain {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "The name of the domain.").update_allowed(),
                PropertySchema::new("description", T::String, "Description of keystone domain.").update_allowed(),
                PropertySchema::new("enabled", T::Boolean, "This domain is enabled or disabled.")
                    .default_value(true)
                    .update_allowed(),
            ],
            attributes: vec![],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("8.0.0")
            },
            description: "Heat Template Resource for Keystone Domain.\n\nThis plug-in helps to create, update and delete a keystone domain. Also\nit can be used for enable or disable a given keystone domain.",
        };
        Domain { host, schema }
    }
}

impl KeystoneType for Domain {
    const TYPE: &'static str = "OS::Keystone::Domain";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = entity_name(ctx);
        let body = create_fields(&ctx.properties, &name);
        let domain = api.create(Entity::Domain, body).await.map_err(failure)?;
        remember(&mut ctx.state, &domain);
        Ok(())
    }

    async fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
        id: &str,
    ) -> ActionResult {
        let diff = changed_properties(old, &ctx.properties);
        let name = entity_name(ctx);
        let body = update_fields(&ctx.properties, &diff, &name);
        let domain = api.update(Entity::Domain, id, body).await.map_err(failure)?;
        remember(&mut ctx.state, &domain);
        Ok(())
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, _ctx: &mut ActionContext, id: &str) -> ActionResult {
        api.delete(Entity::Domain, id).await.map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    fn plugin() -> Arc<dyn ResourceType> {
        Arc::new(Domain::new(Arc::new(HostSlot::default())))
    }

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::Domain");
    }

    #[test]
    fn bodies() {
        let rt = plugin();
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        let props = rt.validate_properties("d", &json!({})).unwrap();
        assert_eq!(strip(create_fields(&props, "st-d-x")), json!({"name": "st-d-x", "enabled": true}));
        let new = rt.validate_properties("d", &json!({"enabled": false})).unwrap();
        let diff = changed_properties(&props, &new);
        assert_eq!(strip(update_fields(&new, &diff, "st-d-x")), json!({"enabled": false}));
        assert_eq!(rt.update_decision(&props, &new), UpdateDecision::InPlace);
    }
}
