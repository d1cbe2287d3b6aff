//! Placement's handlers, one module per resource, each declaring its own
//! routes in upstream's declaration order.

pub mod aggregates;
pub mod allocation_candidates;
pub mod allocations;
pub mod inventories;
pub mod reshaper;
pub mod resource_classes;
pub mod resource_providers;
pub mod root;
pub mod traits;
pub mod usages;

use super::router::Route;

/// Every route, in upstream's `ROUTE_DECLARATIONS` order.
pub fn routes() -> Vec<Route> {
    let mut all = Vec::new();
    all.extend(root::routes());
    all.extend(resource_classes::routes());
    all.extend(resource_providers::routes());
    all.extend(inventories::routes());
    all.extend(usages::provider_routes());
    all.extend(aggregates::routes());
    all.extend(allocations::provider_routes());
    all.extend(allocations::routes());
    all.extend(allocation_candidates::routes());
    all.extend(traits::routes());
    all.extend(traits::provider_routes());
    all.extend(usages::routes());
    all.extend(reshaper::routes());
    all
}

/// Validates `data` against the named upstream schema; the error is
/// Python jsonschema's `str(exc)`.
pub fn validate(schema: &str, data: &serde_json::Value) -> Result<(), String> {
    let Some(validator) = keelson_jsonschema::placement_schema(schema) else {
        // A schema name is a compile-time constant of a handler; a typo is
        // a keelson defect, reported as such rather than accepting input.
        tracing::error!(target: "keelson::placement", "unknown request schema {schema}");
        return Err(format!("internal error: no schema named {schema}"));
    };
    validator.validate(data).map_err(|e| e.to_string())
}
