//! OS::Keystone::Service: a service of Keystone's catalog, as Heat
//! 27.0.1's `KeystoneService`. Every property updates in place.

use std::sync::Arc;

use keelson_openstack::identity_admin::{Entity, IdentityAdmin};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::{entity_name, failure, fields, remember, KeystoneType};

pub struct Service {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

fn prop(props: &Properties, name: &str) -> Value {
    props.get(name).cloned().unwrap_or(Value::Null)
}

/// The fields of `POST /v3/services`.
fn create_fields(props: &Properties, name: &str) -> Map<String, Value> {
    fields([
        ("name", json!(name)),
        ("description", prop(props, "description")),
        ("type", prop(props, "type")),
        ("enabled", prop(props, "enabled")),
    ])
}

/// The fields of `PATCH /v3/services/{id}`: those that changed.
fn update_fields(new: &Properties, diff: &[String], name: &str) -> Map<String, Value> {
    let in_diff = |k: &str| diff.iter().any(|d| d == k);
    let changed_value = |k: &str| if in_diff(k) { prop(new, k) } else { Value::Null };
    fields([
        ("name", if in_diff("name") { json!(name) } else { Value::Null }),
        ("description", changed_value("description")),
        ("type", changed_value("type")),
        ("enabled", changed_value("enabled")),
    ])
}

impl Service {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "Name of keystone service.").update_allowed(),
                PropertySchema::new("description", T::String, "Description of keystone service.").update_allowed(),
                PropertySchema::new("type", T::String, "Type of keystone Service.").update_allowed().required(),
                PropertySchema::new("enabled", T::Boolean, "This service is enabled or disabled.")
                    .default_value(true)
                    .update_allowed(),
            ],
            attributes: vec![],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("5.0.0")
            },
            description: "Heat Template Resource for Keystone Service.\n\nA resource that allows to create new service and manage it by Keystone.",
        };
        Service { host, schema }
    }
}

impl KeystoneType for Service {
    const TYPE: &'static str = "OS::Keystone::Service";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = entity_name(ctx);
        let body = create_fields(&ctx.properties, &name);
        let service = api.create(Entity::Service, body).await.map_err(failure)?;
        remember(&mut ctx.state, &service);
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
        let service = api.update(Entity::Service, id, body).await.map_err(failure)?;
        remember(&mut ctx.state, &service);
        Ok(())
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, _ctx: &mut ActionContext, id: &str) -> ActionResult {
        api.delete(Entity::Service, id).await.map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::Service");
    }

    #[test]
    fn bodies() {
        let rt: Arc<dyn ResourceType> = Arc::new(Service::new(Arc::new(HostSlot::default())));
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        let old = rt.validate_properties("s", &json!({"type": "compute"})).unwrap();
        assert_eq!(strip(create_fields(&old, "st-s-x")), json!({"name": "st-s-x", "type": "compute", "enabled": true}));
        let new = rt.validate_properties("s", &json!({"type": "volumev3"})).unwrap();
        let diff = changed_properties(&old, &new);
        assert_eq!(strip(update_fields(&new, &diff, "st-s-x")), json!({"type": "volumev3"}));
        assert_eq!(rt.update_decision(&old, &new), UpdateDecision::InPlace);
    }
}
