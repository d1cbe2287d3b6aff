//! OS::Placement::Allocation: one consumer's allocations against one or
//! more resource providers.
//!
//! Physical id (and `get_resource`) = the consumer uuid (`consumer`, or a
//! new one). Create and update replace the consumer's allocations with the
//! properties' (Placement's PUT /allocations/{consumer}); delete removes
//! them, and a consumer without allocations is already deleted.
//!
//! The resource never takes over a consumer it did not create: every
//! write carries a consumer generation, as Placement's
//! `consumer_generation` does since 1.28. Create says "a new consumer"
//! (null), so an existing consumer, anyone's, is refused with Placement's
//! `placement.concurrent_update`; update and delete carry the generation
//! the resource's own last write left (resource data
//! `consumer_generation`), so a consumer someone else changed since is
//! neither overwritten nor wiped: the resource fails with Placement's
//! code and text.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::super::schema::{
    AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus,
};
use super::super::{
    validate_properties, ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState,
};
use super::{
    call, failure, pattern_mismatch, property_error, retrying, str_prop, valid_name, validate_nested, PlacementClient,
    NAME_PATTERN, UUID_PATTERN,
};
use crate::error::EngineError;

/// Resource data: the consumer generation the resource's last write left.
const CONSUMER_GENERATION: &str = "consumer_generation";

pub struct Allocation {
    client: Arc<PlacementClient>,
    schema: ResourceSchema,
    /// One amount, checked as an integer of at least 1.
    amount: ResourceSchema,
}

impl Allocation {
    pub fn new(client: Arc<PlacementClient>) -> Self {
        let properties = vec![
            PropertySchema::new("consumer", T::String, "UUID of the consumer; a new one when not given.")
                .constraint(Constraint::allowed_pattern(UUID_PATTERN)),
            PropertySchema::new(
                "project_id",
                T::String,
                "Project of the consumer; Placement's incomplete-consumer project when not given.",
            )
            .update_allowed(),
            PropertySchema::new(
                "user_id",
                T::String,
                "User of the consumer; Placement's incomplete-consumer user when not given.",
            )
            .update_allowed(),
            PropertySchema::new("consumer_type", T::String, "Type of the consumer (e.g. INSTANCE, MIGRATION).")
                .constraint(Constraint::allowed_pattern("[A-Z0-9_]+"))
                .update_allowed(),
            PropertySchema::new("allocations", T::List, "The consumer's allocations, one entry per resource provider.")
                .required()
                .list_of(PropertySchema::new("*", T::Map, "").map_of(vec![
                    PropertySchema::new("resource_provider", T::String, "UUID of the resource provider.").required(),
                    PropertySchema::new("resources", T::Map, "Amounts by resource class: {CLASS: amount}.").required(),
                ]))
                .update_allowed(),
        ];
        Allocation {
            client,
            schema: ResourceSchema {
                properties,
                attributes: vec![AttributeSchema::new("consumer", "The UUID of the consumer.", Some("string"))],
                support_status: SupportStatus::default(),
                description: "A Placement consumer's allocations.\n\nCreating or updating the resource replaces the consumer's allocations\nwith the given ones; deleting it removes them.",
            },
            amount: ResourceSchema {
                properties: vec![PropertySchema::new("amount", T::Integer, "")
                    .required()
                    .constraint(Constraint::range(Some(1), None))],
                attributes: Vec::new(),
                support_status: SupportStatus::default(),
                description: "",
            },
        }
    }

    /// The allocations with every amount an integer, a provider at most
    /// once and class names Placement accepts.
    fn normalize_allocations(&self, resource_name: &str, given: &Value) -> Result<Value, EngineError> {
        let Some(entries) = given.as_array() else {
            return Ok(given.clone());
        };
        let mut providers = BTreeSet::new();
        let mut out = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let rp = entry.get("resource_provider").and_then(Value::as_str).unwrap_or("");
            // Empty: a reference not resolved yet.
            if !rp.is_empty() && !providers.insert(rp.to_string()) {
                return Err(property_error(
                    resource_name,
                    &format!(".allocations[{i}].resource_provider"),
                    &format!("Duplicate resource provider {rp}"),
                ));
            }
            let mut entry = entry.as_object().cloned().unwrap_or_default();
            if let Some(resources) = entry.get("resources").and_then(Value::as_object) {
                let mut amounts = Map::new();
                for (class, amount) in resources {
                    let path = format!(".allocations[{i}].resources");
                    if !valid_name(class) {
                        return Err(property_error(resource_name, &path, &pattern_mismatch(class, NAME_PATTERN)));
                    }
                    let checked = validate_nested(
                        &self.amount,
                        resource_name,
                        &json!({ "amount": amount }),
                        Some("amount"),
                        &format!("{path}.{class}"),
                    )?;
                    amounts.insert(class.clone(), checked.get("amount").cloned().unwrap_or(Value::Null));
                }
                entry.insert("resources".into(), Value::Object(amounts));
            }
            out.push(Value::Object(entry));
        }
        Ok(Value::Array(out))
    }

    /// The consumer's allocations as the inventory service takes them,
    /// checked against `generation` (None: the consumer must not exist).
    fn write(consumer: &str, props: &Properties, generation: Option<u32>) -> pb::ConsumerAllocationsWrite {
        let allocations = props
            .get("allocations")
            .and_then(Value::as_array)
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| pb::ProviderResources {
                        resource_provider_uuid: e
                            .get("resource_provider")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        resources: e
                            .get("resources")
                            .and_then(Value::as_object)
                            .map(|m| {
                                m.iter()
                                    .map(|(class, amount)| pb::ResourceAmount {
                                        resource_class: class.clone(),
                                        amount: amount.as_i64().unwrap_or(0),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        resource_provider_generation: 0,
                    })
                    .collect()
            })
            .unwrap_or_default();
        pb::ConsumerAllocationsWrite {
            consumer_uuid: consumer.to_string(),
            allocations,
            project_id: str_prop(props, "project_id").unwrap_or("").to_string(),
            user_id: str_prop(props, "user_id").unwrap_or("").to_string(),
            consumer_generation: generation,
            generation_check: pb::ConsumerGenerationCheck::ConsumerGenerationRequired.into(),
            consumer_type: str_prop(props, "consumer_type").map(str::to_string),
        }
    }

    /// The consumer generation this resource's last write left. A resource
    /// written before generations were recorded reads the current one
    /// (the stack created that consumer when it had no generation check).
    async fn recorded_generation(&self, ctx: &ActionContext, consumer: &str) -> Result<Option<u32>, ResourceFailure> {
        if let Some(g) = ctx.state.data.get(CONSUMER_GENERATION).and_then(|g| g.parse().ok()) {
            return Ok(Some(g));
        }
        Ok(call(ctx, || self.client.get_allocations(consumer)).await?.consumer_generation)
    }

    /// Writes the properties' allocations under `generation` and records
    /// the generation the write leaves (a write moves it on by one; a new
    /// consumer starts at 0).
    async fn replace(
        &self,
        ctx: &mut ActionContext,
        consumer: &str,
        generation: Option<u32>,
    ) -> Result<(), ResourceFailure> {
        let write = Self::write(consumer, &ctx.properties, generation);
        call(ctx, || self.client.replace_allocations(write.clone())).await?;
        let next = generation.map_or(1, |g| g.saturating_add(1));
        ctx.state.data.insert(CONSUMER_GENERATION.into(), next.to_string());
        Ok(())
    }

    async fn do_create(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let consumer =
            str_prop(&ctx.properties, "consumer").map(str::to_string).unwrap_or_else(|| Uuid::new_v4().to_string());
        // Recorded only once the consumer is the stack's: a refused create
        // leaves no id, so the stack's delete never touches that consumer.
        self.replace(ctx, &consumer, None).await?;
        ctx.state.physical_id = Some(consumer);
        Ok(())
    }

    async fn do_update(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let Some(consumer) = ctx.state.physical_id.clone() else {
            return Err(ResourceFailure::error("NotFound", "The allocations were never created."));
        };
        let generation = self.recorded_generation(ctx, &consumer).await?;
        self.replace(ctx, &consumer, generation).await
    }

    /// Removes the allocations under the recorded generation (an empty
    /// write deletes the consumer). A consumer already gone is deleted; one
    /// that someone else wrote since is left alone and the delete fails.
    async fn do_delete(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let Some(consumer) = ctx.state.physical_id.clone() else {
            return Ok(());
        };
        let generation = match self.recorded_generation(ctx, &consumer).await? {
            Some(g) => g,
            // No consumer any more: nothing to remove.
            None => return Ok(()),
        };
        let mut write = Self::write(&consumer, &ctx.properties, Some(generation));
        write.allocations.clear();
        match retrying(ctx, || self.client.replace_allocations(write.clone())).await? {
            Ok(()) => Ok(()),
            Err(e) if e.is_concurrent_update() => {
                // Removed behind the stack's back: already deleted.
                let current = call(ctx, || self.client.get_allocations(&consumer)).await?;
                if current.allocations.is_empty() {
                    Ok(())
                } else {
                    Err(failure(e))
                }
            }
            Err(e) => Err(failure(e)),
        }
    }

    /// CHECK: the consumer still has allocations.
    async fn do_check(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let Some(consumer) = ctx.state.physical_id.clone() else {
            return Err(ResourceFailure::error("NotFound", "The allocations were never created."));
        };
        let current = call(ctx, || self.client.get_allocations(&consumer)).await?;
        if current.allocations.is_empty() {
            return Err(ResourceFailure::error("NotFound", format!("Consumer {consumer} has no allocations.")));
        }
        Ok(())
    }
}

impl Plugin for Allocation {
    const TYPE: &'static str = "OS::Placement::Allocation";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let mut props = validate_properties(&self.schema, resource_name, given)?;
        if let Some(allocations) = props.get("allocations") {
            let normalized = self.normalize_allocations(resource_name, allocations)?;
            props.insert("allocations".into(), normalized);
        }
        Ok(props)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.do_create(ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, _old: &Properties) -> ActionResult {
        self.do_update(ctx).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        self.do_delete(ctx).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        match name {
            "consumer" => Ok(state.physical_id.clone().map(Value::String).unwrap_or(Value::Null)),
            _ => Err(EngineError::InvalidTemplateAttribute(name.to_string())),
        }
    }

    fn check(&self, ctx: &mut ActionContext) -> Option<impl Future<Output = ActionResult> + Send> {
        Some(self.do_check(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::UpdateDecision;
    use tonic::transport::Endpoint;

    const RP: &str = "8d8a0e31-3a0b-4a47-9b4e-5b8f6f0f2a11";
    const RP2: &str = "0b0e1d41-2c51-4c7c-a0de-2b1b6c1e9d02";

    /// A lazy channel (needs a runtime; never dialled by these tests).
    fn plugin() -> Allocation {
        let channel = Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        Allocation::new(Arc::new(PlacementClient::new(channel)))
    }

    #[tokio::test]
    async fn allocations_validate_and_convert() {
        let rt = plugin();
        let props = rt
            .validate_properties(
                "a",
                &json!({"project_id": "p", "user_id": "u",
                        "allocations": [{"resource_provider": RP, "resources": {"VCPU": "2", "MEMORY_MB": 512}}]}),
            )
            .unwrap();
        assert_eq!(props["allocations"][0]["resources"], json!({"MEMORY_MB": 512, "VCPU": 2}));
        let w = Allocation::write("c-1", &props, None);
        assert_eq!(w.generation_check, i32::from(pb::ConsumerGenerationCheck::ConsumerGenerationRequired));
        assert_eq!(w.consumer_generation, None);
        assert_eq!(Allocation::write("c-1", &props, Some(3)).consumer_generation, Some(3));
        assert_eq!(w.consumer_uuid, "c-1");
        assert_eq!((w.project_id.as_str(), w.user_id.as_str(), w.consumer_type.as_deref()), ("p", "u", None));
        assert_eq!(w.allocations.len(), 1);
        assert_eq!(w.allocations[0].resource_provider_uuid, RP);
        let amounts: Vec<(String, i64)> =
            w.allocations[0].resources.iter().map(|r| (r.resource_class.clone(), r.amount)).collect();
        assert_eq!(amounts, [("VCPU".to_string(), 2), ("MEMORY_MB".to_string(), 512)]);
    }

    #[tokio::test]
    async fn property_errors() {
        let rt = plugin();
        let err = |given: Value| rt.validate_properties("a", &given).unwrap_err().message();
        assert_eq!(err(json!({})), "Property error: resources.a.properties: Property allocations not assigned");
        assert_eq!(
            err(json!({"allocations": [{"resource_provider": RP, "resources": {"VCPU": 0}}]})),
            "Property error: resources.a.properties.allocations[0].resources.VCPU: 0 is out of range (min: 1, max: None)"
        );
        assert_eq!(
            err(json!({"allocations": [{"resource_provider": RP, "resources": {"VCPU": "two"}}]})),
            "Property error: resources.a.properties.allocations[0].resources.VCPU: Value 'two' is not an integer"
        );
        assert_eq!(
            err(json!({"allocations": [{"resources": {"VCPU": 1}}]})),
            "Property error: resources.a.properties.allocations[0]: Property resource_provider not assigned"
        );
        assert_eq!(
            err(json!({"allocations": [{"resource_provider": RP, "resources": {"VCPU": 1}},
                                       {"resource_provider": RP, "resources": {"DISK_GB": 1}}]})),
            format!("Property error: resources.a.properties.allocations[1].resource_provider: Duplicate resource provider {RP}")
        );
    }

    #[tokio::test]
    async fn allocations_update_in_place_and_a_new_consumer_replaces() {
        let rt = plugin();
        let props = |v: Value| rt.validate_properties("a", &v).unwrap();
        let base = props(json!({"allocations": [{"resource_provider": RP, "resources": {"VCPU": 1}}]}));
        let more = props(json!({"allocations": [{"resource_provider": RP, "resources": {"VCPU": 2}},
                                                {"resource_provider": RP2, "resources": {"DISK_GB": 10}}]}));
        assert_eq!(rt.update_decision(&base, &more), UpdateDecision::InPlace);
        let other =
            props(json!({"consumer": RP2, "allocations": [{"resource_provider": RP, "resources": {"VCPU": 1}}]}));
        assert_eq!(rt.update_decision(&base, &other), UpdateDecision::Replace);
    }
}
