//! OS::Keystone::Endpoint: an endpoint of Keystone's catalog, as Heat
//! 27.0.1's `KeystoneEndpoint`. `service` and `region` take a name or an
//! id (a service name must be unique); every property updates in place.
//! The region travels as Keystone's legacy `region` field, as Heat's
//! client sends it.

use std::sync::Arc;

use keelson_openstack::identity_admin::{Entity, IdentityAdmin};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::{entity_name, failure, fields, kind_name, not_found, remember, str_prop, KeystoneType, ResourceFailure};

pub struct Endpoint {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

fn prop(props: &Properties, name: &str) -> Value {
    props.get(name).cloned().unwrap_or(Value::Null)
}

/// The ids `service` and `region` name (Heat's `get_service_id` and
/// `get_region_id`).
async fn service_id(api: &IdentityAdmin<'_>, value: &str) -> Result<String, ResourceFailure> {
    match api.get(Entity::Service, value).await {
        Ok(found) => {
            if let Some(id) = found.get("id").and_then(Value::as_str) {
                return Ok(id.to_string());
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(failure(e)),
    }
    let named = api.list(Entity::Service, &[("name", value)]).await.map_err(failure)?;
    match named.as_slice() {
        [one] => one
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| not_found(kind_name(Entity::Service), value)),
        [] => Err(not_found(kind_name(Entity::Service), value)),
        _ => Err(ResourceFailure::error(
            "KeystoneServiceNameConflict",
            format!("Keystone has more than one service with same name {value}. Please use service id instead of name"),
        )),
    }
}

async fn region_id(api: &IdentityAdmin<'_>, value: &str) -> Result<String, ResourceFailure> {
    match api.get(Entity::Region, value).await {
        Ok(found) => {
            found.get("id").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| not_found("KeystoneRegion", value))
        }
        Err(e) if e.is_not_found() => Err(not_found(kind_name(Entity::Region), value)),
        Err(e) => Err(failure(e)),
    }
}

/// The fields of `POST /v3/endpoints`.
fn create_fields(props: &Properties, name: &str, service_id: &str, region_id: Option<&str>) -> Map<String, Value> {
    fields([
        ("service_id", json!(service_id)),
        ("interface", prop(props, "interface")),
        ("url", prop(props, "url")),
        ("region", json!(region_id)),
        ("enabled", prop(props, "enabled")),
        ("name", json!(name)),
    ])
}

/// The fields of `PATCH /v3/endpoints/{id}`: those that changed (service
/// and region resolved by the caller).
fn update_fields(
    new: &Properties,
    diff: &[String],
    name: &str,
    service_id: Option<&str>,
    region_id: Option<&str>,
) -> Map<String, Value> {
    let in_diff = |k: &str| diff.iter().any(|d| d == k);
    let changed_value = |k: &str| if in_diff(k) { prop(new, k) } else { Value::Null };
    fields([
        ("service_id", json!(service_id)),
        ("interface", changed_value("interface")),
        ("url", changed_value("url")),
        ("region", json!(region_id)),
        ("enabled", changed_value("enabled")),
        ("name", if in_diff("name") { json!(name) } else { Value::Null }),
    ])
}

impl Endpoint {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "Name of keystone endpoint.").update_allowed(),
                PropertySchema::new("region", T::String, "Name or Id of keystone region.")
                    .update_allowed()
                    .constraint(Constraint::custom("keystone.region")),
                PropertySchema::new("service", T::String, "Name or Id of keystone service.")
                    .update_allowed()
                    .required()
                    .constraint(Constraint::custom("keystone.service")),
                PropertySchema::new("interface", T::String, "Interface type of keystone service endpoint.")
                    .update_allowed()
                    .required()
                    .constraint(Constraint::allowed_values(["public", "internal", "admin"])),
                PropertySchema::new("url", T::String, "URL of keystone service endpoint.").update_allowed().required(),
                PropertySchema::new("enabled", T::Boolean, "This endpoint is enabled or disabled.")
                    .default_value(true)
                    .update_allowed(),
            ],
            attributes: vec![],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("5.0.0")
            },
            description: "Heat Template Resource for Keystone Service Endpoint.\n\nKeystone endpoint is just the URL that can be used for accessing a service\nwithin OpenStack. Endpoint can be accessed by admin, by services or public,\ni.e. everyone can use this endpoint.",
        };
        Endpoint { host, schema }
    }
}

impl KeystoneType for Endpoint {
    const TYPE: &'static str = "OS::Keystone::Endpoint";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let service = service_id(api, str_prop(&ctx.properties, "service").unwrap_or_default()).await?;
        let region = match str_prop(&ctx.properties, "region") {
            Some(r) => Some(region_id(api, r).await?),
            None => None,
        };
        let name = entity_name(ctx);
        let body = create_fields(&ctx.properties, &name, &service, region.as_deref());
        let endpoint = api.create(Entity::Endpoint, body).await.map_err(failure)?;
        remember(&mut ctx.state, &endpoint);
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
        let in_diff = |k: &str| diff.iter().any(|d| d == k);
        let service = match str_prop(&ctx.properties, "service") {
            Some(s) if in_diff("service") => Some(service_id(api, s).await?),
            _ => None,
        };
        let region = match str_prop(&ctx.properties, "region") {
            Some(r) if in_diff("region") => Some(region_id(api, r).await?),
            _ => None,
        };
        let name = entity_name(ctx);
        let body = update_fields(&ctx.properties, &diff, &name, service.as_deref(), region.as_deref());
        let endpoint = api.update(Entity::Endpoint, id, body).await.map_err(failure)?;
        remember(&mut ctx.state, &endpoint);
        Ok(())
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, _ctx: &mut ActionContext, id: &str) -> ActionResult {
        api.delete(Entity::Endpoint, id).await.map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    fn plugin() -> Arc<dyn ResourceType> {
        Arc::new(Endpoint::new(Arc::new(HostSlot::default())))
    }

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::Endpoint");
    }

    #[test]
    fn bodies() {
        let rt = plugin();
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        let old =
            rt.validate_properties("e", &json!({"service": "nova", "interface": "public", "url": "http://x"})).unwrap();
        assert_eq!(
            strip(create_fields(&old, "st-e-x", "s1", Some("RegionOne"))),
            json!({"service_id": "s1", "interface": "public", "url": "http://x", "region": "RegionOne",
                   "enabled": true, "name": "st-e-x"})
        );
        let new = rt
            .validate_properties("e", &json!({"service": "nova", "interface": "internal", "url": "http://x"}))
            .unwrap();
        let diff = changed_properties(&old, &new);
        assert_eq!(strip(update_fields(&new, &diff, "st-e-x", None, None)), json!({"interface": "internal"}));
        assert_eq!(rt.update_decision(&old, &new), UpdateDecision::InPlace);
    }

    #[test]
    fn interface_is_one_of_three() {
        let e = plugin()
            .validate_properties("e", &json!({"service": "nova", "interface": "private", "url": "http://x"}))
            .unwrap_err();
        assert!(e.message().contains("\"private\" is not an allowed value"), "{}", e.message());
    }
}
