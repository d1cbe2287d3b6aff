//! OS::Placement::ResourceProvider: one Placement resource provider with
//! its inventories, traits and aggregates.
//!
//! Physical id (and `get_resource`) = the provider's uuid. Everything but
//! `uuid` changes in place: a new name or parent is an update of the
//! provider (re-parenting as Placement 1.37 allows it: replacing the
//! provider would collide with the old one's name and uuid, which stay
//! taken until the cleanup phase deletes it), and inventories, traits and
//! aggregates are each replaced as a whole under the provider generation,
//! only when they changed. Delete is refused by Placement while the
//! provider has allocations or children; its error is the resource's.

use std::future::Future;
use std::sync::Arc;

use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::super::schema::{
    AttributeSchema, Constraint, ConstraintKind, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus,
};
use super::super::{
    validate_properties, ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState,
};
use super::{
    call, failure, generation_value, pattern_mismatch, property_error, retrying, str_list, str_prop, valid_name,
    validate_nested, with_generation, PlacementClient, NAME_PATTERN, UUID_PATTERN,
};
use crate::error::EngineError;

/// Placement's largest inventory value (its JSON schema's maximum).
const MAX_INT: i64 = 2_147_483_647;

pub struct ResourceProvider {
    client: Arc<PlacementClient>,
    schema: ResourceSchema,
    /// The fields of one inventory record, with Placement's defaults.
    inventory: ResourceSchema,
}

impl ResourceProvider {
    pub fn new(client: Arc<PlacementClient>) -> Self {
        let count = |name: &'static str, description: &'static str, min: i64| {
            PropertySchema::new(name, T::Integer, description).constraint(Constraint::range(Some(min), Some(MAX_INT)))
        };
        let inventory = ResourceSchema {
            properties: vec![
                count("total", "The actual amount of the resource that the provider can accommodate.", 1).required(),
                count("reserved", "The amount of the resource that is not available for allocations.", 0)
                    .default_value(0),
                count("min_unit", "The smallest amount of the resource a single allocation may take.", 1)
                    .default_value(1),
                count("max_unit", "The largest amount of the resource a single allocation may take.", 1)
                    .default_value(MAX_INT),
                count("step_size", "The unit an allocation's amount must be a multiple of.", 1).default_value(1),
                PropertySchema::new("allocation_ratio", T::Number, "The overcommit ratio of the resource.")
                    .default_value(1.0)
                    .constraint(Constraint {
                        kind: ConstraintKind::Range { min: Some(json!(0)), max: Some(json!(3.40282e38)) },
                        description: None,
                    }),
            ],
            attributes: Vec::new(),
            support_status: SupportStatus::default(),
            description: "",
        };
        let properties = vec![
            PropertySchema::new(
                "name",
                T::String,
                "Name of the resource provider; unique in Placement. Defaults to the resource's physical name.",
            )
            .constraint(Constraint::length(Some(1), Some(200)))
            .update_allowed(),
            PropertySchema::new("uuid", T::String, "UUID of the resource provider; generated when not given.")
                .constraint(Constraint::allowed_pattern(UUID_PATTERN)),
            PropertySchema::new(
                "parent_provider",
                T::String,
                "UUID of the parent resource provider (e.g. {get_resource: parent}); none for a root provider.",
            )
            // No pattern: before the parent exists its get_resource
            // validates as the resource's name; Placement checks the uuid.
            .update_allowed(),
            PropertySchema::new(
                "inventories",
                T::Map,
                "Inventories by resource class: {CLASS: {total, reserved, min_unit, max_unit, step_size, allocation_ratio}}. Custom classes are created when missing.",
            )
            .default_value(json!({}))
            .update_allowed(),
            PropertySchema::new("traits", T::List, "Traits of the provider. Custom traits are created when missing.")
                .default_value(json!([]))
                .list_of(
                    PropertySchema::new("*", T::String, "")
                        .constraint(Constraint::allowed_pattern("[A-Z0-9_]+")),
                )
                .update_allowed(),
            PropertySchema::new("aggregates", T::List, "UUIDs of the aggregates the provider is a member of.")
                .default_value(json!([]))
                .list_of(PropertySchema::new("*", T::String, "").constraint(Constraint::allowed_pattern(UUID_PATTERN)))
                .update_allowed(),
        ];
        ResourceProvider {
            client,
            schema: ResourceSchema {
                properties,
                attributes: vec![
                    AttributeSchema::new("uuid", "The UUID of the resource provider.", Some("string")),
                    AttributeSchema::new(
                        "generation",
                        "The provider generation after the resource's last create or update.",
                        Some("integer"),
                    ),
                ],
                support_status: SupportStatus::default(),
                description: "A Placement resource provider with its inventories, traits and aggregates.\n\nChanges to the name, parent, inventories, traits and aggregates are\napplied in place (under the provider generation); deleting the resource\ndeletes the provider, which Placement refuses while it has allocations\nor child providers.",
            },
            inventory,
        }
    }

    /// The inventories property with every record checked and completed
    /// with Placement's defaults (so an update compares like with like).
    fn normalize_inventories(&self, resource_name: &str, given: &Value) -> Result<Value, EngineError> {
        let Some(by_class) = given.as_object() else { return Ok(given.clone()) };
        let mut out = Map::new();
        for (class, record) in by_class {
            let path = format!(".inventories.{class}");
            if !valid_name(class) {
                return Err(property_error(resource_name, ".inventories", &pattern_mismatch(class, NAME_PATTERN)));
            }
            // Unresolved yet (a get_param/get_attr not known at validation).
            if record.is_null() {
                out.insert(class.clone(), Value::Null);
                continue;
            }
            if !record.is_object() {
                return Err(property_error(resource_name, &path, &format!("\"{record}\" is not a map")));
            }
            let record = validate_nested(&self.inventory, resource_name, record, None, &path)?;
            out.insert(class.clone(), Value::Object(record));
        }
        Ok(Value::Object(out))
    }

    /// The inventory records of the properties, in the template's order.
    fn inventories(props: &Properties) -> Vec<pb::Inventory> {
        let Some(by_class) = props.get("inventories").and_then(Value::as_object) else { return Vec::new() };
        by_class
            .iter()
            .map(|(class, r)| {
                let int = |name: &str, default: i64| r.get(name).and_then(Value::as_i64).unwrap_or(default);
                pb::Inventory {
                    resource_class: class.clone(),
                    total: int("total", 0),
                    reserved: int("reserved", 0),
                    min_unit: int("min_unit", 1),
                    max_unit: int("max_unit", MAX_INT),
                    step_size: int("step_size", 1),
                    allocation_ratio: r.get("allocation_ratio").and_then(Value::as_f64).unwrap_or(1.0),
                    last_modified: None,
                }
            })
            .collect()
    }

    /// Creates the custom resource classes and traits the properties name
    /// (standard ones exist; Placement rejects unknown ones itself).
    async fn ensure_custom(&self, ctx: &ActionContext, classes: bool, traits: bool) -> Result<(), ResourceFailure> {
        let props = &ctx.properties;
        if classes {
            for inv in Self::inventories(props) {
                if inv.resource_class.starts_with("CUSTOM_") {
                    call(ctx, || self.client.ensure_resource_class(&inv.resource_class)).await?;
                }
            }
        }
        if traits {
            for t in str_list(props, "traits").iter().filter(|t| t.starts_with("CUSTOM_")) {
                call(ctx, || self.client.ensure_trait(t)).await?;
            }
        }
        Ok(())
    }

    /// Writes the parts named by `parts` (inventories, traits, aggregates)
    /// starting from `generation`; answers the generation after the last.
    async fn write_parts(
        &self,
        ctx: &ActionContext,
        uuid: &str,
        mut generation: Option<u32>,
        parts: Parts,
    ) -> Result<Option<u32>, ResourceFailure> {
        let props = &ctx.properties;
        let client = &self.client;
        if parts.inventories {
            let inventories = Self::inventories(props);
            let g = with_generation(ctx, client, uuid, generation, |g| {
                client.set_inventories(uuid, g, inventories.clone())
            })
            .await?;
            generation = Some(g);
        }
        if parts.traits {
            let traits = str_list(props, "traits");
            let g =
                with_generation(ctx, client, uuid, generation, |g| client.set_traits(uuid, g, traits.clone())).await?;
            generation = Some(g);
        }
        if parts.aggregates {
            let aggregates = str_list(props, "aggregates");
            let g =
                with_generation(ctx, client, uuid, generation, |g| client.set_aggregates(uuid, g, aggregates.clone()))
                    .await?;
            generation = Some(g);
        }
        Ok(generation)
    }

    async fn do_create(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let props = ctx.properties.clone();
        let uuid = str_prop(&props, "uuid").map(str::to_string).unwrap_or_else(|| Uuid::new_v4().to_string());
        let name = str_prop(&props, "name").map(str::to_string).unwrap_or_else(|| ctx.physical_name());
        let parent = str_prop(&props, "parent_provider").unwrap_or("");
        let parts = Parts {
            inventories: !Self::inventories(&props).is_empty(),
            traits: !str_list(&props, "traits").is_empty(),
            aggregates: !str_list(&props, "aggregates").is_empty(),
        };
        // Before the provider exists: a class or trait Placement refuses
        // to create then leaves nothing behind.
        self.ensure_custom(ctx, parts.inventories, parts.traits).await?;
        let rp = call(ctx, || self.client.create_provider(&uuid, &name, parent)).await?;
        // Recorded before the rest, so a failure below still leaves an id
        // the delete (or the replacing update's cleanup) can remove.
        ctx.state.physical_id = Some(rp.uuid.clone());
        ctx.state.data.insert("generation".into(), rp.generation.to_string());
        let generation = self.write_parts(ctx, &rp.uuid, Some(rp.generation), parts).await?;
        if let Some(g) = generation {
            ctx.state.data.insert("generation".into(), g.to_string());
        }
        Ok(())
    }

    async fn do_update(&self, ctx: &mut ActionContext, old: &Properties) -> Result<(), ResourceFailure> {
        let Some(uuid) = ctx.state.physical_id.clone() else {
            return Err(ResourceFailure::error("NotFound", "The resource provider was never created."));
        };
        let props = ctx.properties.clone();
        let changed = |name: &str| props.get(name) != old.get(name);
        let mut generation = None;
        if changed("name") || changed("parent_provider") {
            let current = call(ctx, || self.client.get_provider(&uuid)).await?;
            // No name given: the provider keeps the one it was created with.
            let name = str_prop(&props, "name").map(str::to_string).unwrap_or(current.name);
            let parent = changed("parent_provider").then(|| str_prop(&props, "parent_provider").unwrap_or(""));
            let rp = call(ctx, || self.client.update_provider(&uuid, &name, parent)).await?;
            generation = Some(rp.generation);
        }
        let parts =
            Parts { inventories: changed("inventories"), traits: changed("traits"), aggregates: changed("aggregates") };
        self.ensure_custom(ctx, parts.inventories, parts.traits).await?;
        if let Some(g) = self.write_parts(ctx, &uuid, generation, parts).await? {
            ctx.state.data.insert("generation".into(), g.to_string());
        }
        Ok(())
    }

    async fn do_delete(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let Some(uuid) = ctx.state.physical_id.clone() else { return Ok(()) };
        match retrying(ctx, || self.client.delete_provider(&uuid)).await? {
            Ok(()) => Ok(()),
            // Already gone: what a delete wants.
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(failure(e)),
        }
    }

    async fn do_check(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let Some(uuid) = ctx.state.physical_id.clone() else {
            return Err(ResourceFailure::error("NotFound", "The resource provider was never created."));
        };
        let rp = call(ctx, || self.client.get_provider(&uuid)).await?;
        ctx.state.data.insert("generation".into(), rp.generation.to_string());
        Ok(())
    }
}

/// Which of a provider's generation-checked sets to write.
#[derive(Debug, Clone, Copy)]
struct Parts {
    inventories: bool,
    traits: bool,
    aggregates: bool,
}

impl Plugin for ResourceProvider {
    const TYPE: &'static str = "OS::Placement::ResourceProvider";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let mut props = validate_properties(&self.schema, resource_name, given)?;
        if let Some(inventories) = props.get("inventories") {
            let normalized = self.normalize_inventories(resource_name, inventories)?;
            props.insert("inventories".into(), normalized);
        }
        Ok(props)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.do_create(ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        self.do_update(ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        self.do_delete(ctx).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        match name {
            "uuid" => Ok(state.physical_id.clone().map(Value::String).unwrap_or(Value::Null)),
            "generation" => Ok(generation_value(&state.data)),
            _ => Err(EngineError::InvalidTemplateAttribute(name.to_string())),
        }
    }

    /// CHECK: the provider still exists (and its generation is refreshed).
    fn check(&self, ctx: &mut ActionContext) -> Option<impl Future<Output = ActionResult> + Send> {
        Some(self.do_check(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::UpdateDecision;
    use tonic::transport::Endpoint;

    fn plugin() -> ResourceProvider {
        // Never dialled: these tests stop before any call.
        let channel = Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        ResourceProvider::new(Arc::new(PlacementClient::new(channel)))
    }

    #[tokio::test]
    async fn inventories_are_completed_with_placement_defaults() {
        let rt = plugin();
        let props = rt
            .validate_properties(
                "rp",
                &json!({"inventories": {"VCPU": {"total": "16", "allocation_ratio": 4}, "CUSTOM_FPGA": {"total": 2, "reserved": 1}}}),
            )
            .unwrap();
        assert_eq!(
            props["inventories"]["VCPU"],
            json!({"total": 16, "reserved": 0, "min_unit": 1, "max_unit": MAX_INT, "step_size": 1, "allocation_ratio": 4})
        );
        assert_eq!(props["traits"], json!([]));
        assert_eq!(props["aggregates"], json!([]));
        assert_eq!(props["name"], Value::Null);
        let invs = ResourceProvider::inventories(&props);
        // In the template's order.
        assert_eq!(invs.iter().map(|i| i.resource_class.as_str()).collect::<Vec<_>>(), ["VCPU", "CUSTOM_FPGA"]);
        assert_eq!((invs[1].total, invs[1].reserved, invs[0].allocation_ratio), (2, 1, 4.0));
    }

    #[tokio::test]
    async fn property_errors_use_heats_wording_and_path() {
        let rt = plugin();
        let err = |given: Value| rt.validate_properties("rp", &given).unwrap_err().message();
        assert_eq!(
            err(json!({"inventories": {"VCPU": {"total": "many"}}})),
            "Property error: resources.rp.properties.inventories.VCPU.total: Value 'many' is not an integer"
        );
        assert_eq!(
            err(json!({"inventories": {"VCPU": {"reserved": 1}}})),
            "Property error: resources.rp.properties.inventories.VCPU: Property total not assigned"
        );
        assert_eq!(
            err(json!({"inventories": {"VCPU": {"total": 0}}})),
            "Property error: resources.rp.properties.inventories.VCPU.total: 0 is out of range (min: 1, max: 2147483647)"
        );
        assert_eq!(
            err(json!({"inventories": {"VCPU": {"total": 1, "colour": "red"}}})),
            "Property error: resources.rp.properties.inventories.VCPU: Unknown Property colour"
        );
        assert_eq!(
            err(json!({"inventories": {"vcpu": {"total": 1}}})),
            "Property error: resources.rp.properties.inventories: \"vcpu\" does not match pattern \"^[A-Z0-9_]+$\""
        );
        assert_eq!(
            err(json!({"aggregates": ["not-a-uuid"]})),
            "Property error: resources.rp.properties.aggregates[0]: \"not-a-uuid\" does not match pattern \"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\""
        );
        assert_eq!(err(json!({"flavour": 1})), "Property error: resources.rp.properties: Unknown Property flavour");
    }

    #[tokio::test]
    async fn unresolved_values_pass_validation() {
        // {get_resource: parent} and a get_param in a record are Null
        // before the stack resolves them.
        let rt = plugin();
        let props = rt
            .validate_properties(
                "rp",
                &json!({"parent_provider": null, "inventories": {"VCPU": null, "DISK_GB": {"total": null}}}),
            )
            .unwrap();
        assert_eq!(props["parent_provider"], json!(""));
        assert_eq!(props["inventories"]["VCPU"], Value::Null);
    }

    #[tokio::test]
    async fn everything_but_the_uuid_updates_in_place() {
        let rt = plugin();
        let props = |v: Value| rt.validate_properties("rp", &v).unwrap();
        let base = props(json!({"name": "n1", "inventories": {"VCPU": {"total": 8}}, "traits": ["CUSTOM_A"]}));
        assert_eq!(rt.update_decision(&base, &base.clone()), UpdateDecision::Unchanged);
        for changed in [
            json!({"name": "n2", "inventories": {"VCPU": {"total": 8}}, "traits": ["CUSTOM_A"]}),
            json!({"name": "n1", "inventories": {"VCPU": {"total": 16}}, "traits": ["CUSTOM_A"]}),
            json!({"name": "n1", "inventories": {"VCPU": {"total": 8}}, "traits": []}),
            json!({"name": "n1", "inventories": {"VCPU": {"total": 8}}, "traits": ["CUSTOM_A"],
                   "aggregates": ["8d8a0e31-3a0b-4a47-9b4e-5b8f6f0f2a11"]}),
            json!({"name": "n1", "inventories": {"VCPU": {"total": 8}}, "traits": ["CUSTOM_A"],
                   "parent_provider": "8d8a0e31-3a0b-4a47-9b4e-5b8f6f0f2a11"}),
        ] {
            assert_eq!(rt.update_decision(&base, &props(changed.clone())), UpdateDecision::InPlace, "{changed}");
        }
        // Spelling a default out is no change.
        let explicit = props(
            json!({"name": "n1", "inventories": {"VCPU": {"total": 8, "reserved": 0, "step_size": 1}}, "traits": ["CUSTOM_A"]}),
        );
        assert_eq!(rt.update_decision(&base, &explicit), UpdateDecision::Unchanged);
        let moved = props(
            json!({"name": "n1", "uuid": "8d8a0e31-3a0b-4a47-9b4e-5b8f6f0f2a11", "inventories": {"VCPU": {"total": 8}}, "traits": ["CUSTOM_A"]}),
        );
        assert_eq!(rt.update_decision(&base, &moved), UpdateDecision::Replace);
    }

    #[tokio::test]
    async fn attributes_come_from_the_state() {
        let rt = plugin();
        let mut state = ResourceState { physical_id: Some("u-1".into()), ..Default::default() };
        state.data.insert("generation".into(), "7".into());
        assert_eq!(rt.attribute(&state, "uuid").await.unwrap(), json!("u-1"));
        assert_eq!(rt.attribute(&state, "generation").await.unwrap(), json!(7));
        assert_eq!(rt.reference_id(&state), json!("u-1"));
        let e = crate::resources::resolve_attribute(&rt, "rp", &state, "nope").await.unwrap_err();
        assert_eq!(e.message(), "The Referenced Attribute (rp nope) is incorrect.");
    }

    #[tokio::test]
    async fn delete_without_a_provider_is_a_no_op() {
        let rt = plugin();
        let (mut ctx, _tx) = crate::resources::context::test_context(Properties::new());
        assert_eq!(rt.delete(&mut ctx).await, Ok(()));
    }
}
