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

use std::future::Future;
use std::pin::Pin;

use super::request::{HandlerResult, Req};
use crate::routes::{AllowStyle, RouteTable};

pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
pub type Handler = fn(Req) -> HandlerFuture;
pub type Route = crate::routes::Route<Handler>;

/// Declares a route to an `async fn(Req) -> HandlerResult`.
#[macro_export]
macro_rules! route {
    ($method:ident $pattern:literal => $handler:path) => {{
        let handler: $crate::placement::handlers::Handler = |req| Box::pin($handler(req));
        $crate::routes::Route::new(&[http::Method::$method], $pattern, handler)
    }};
}

/// Placement's route table: every route, in upstream's
/// `ROUTE_DECLARATIONS` order; a known path with another method is 405
/// with `Allow` listing every method declared for it.
pub fn table() -> RouteTable<Handler> {
    let mut table = RouteTable::new(AllowStyle::EveryMatchingRoute, &[]);
    table
        .add(root::routes())
        .add(resource_classes::routes())
        .add(resource_providers::routes())
        .add(inventories::routes())
        .add(usages::provider_routes())
        .add(aggregates::routes())
        .add(allocations::provider_routes())
        .add(allocations::routes())
        .add(allocation_candidates::routes())
        .add(traits::routes())
        .add(traits::provider_routes())
        .add(usages::routes())
        .add(reshaper::routes());
    table
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

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;
    use crate::routes::Match;

    fn template(method: Method, path: &str) -> &'static str {
        match table().find(&method, path) {
            Match::Found(found) => found.template,
            _ => panic!("{method} {path} is not routed"),
        }
    }

    fn allow(method: Method, path: &str) -> String {
        match table().find(&method, path) {
            Match::MethodNotAllowed { allow, .. } => allow.into_owned(),
            _ => panic!("{method} {path} is not a 405"),
        }
    }

    #[test]
    fn routes_in_declaration_order() {
        assert_eq!(template(Method::GET, "/"), "/");
        assert_eq!(template(Method::GET, ""), "/");
        assert_eq!(template(Method::PUT, "/resource_providers/u1"), "/resource_providers/{uuid}");
        assert_eq!(
            template(Method::DELETE, "/resource_providers/u1/inventories/VCPU"),
            "/resource_providers/{uuid}/inventories/{resource_class}"
        );
        assert_eq!(template(Method::GET, "/resource_providers/u1/usages"), "/resource_providers/{uuid}/usages");
        assert_eq!(template(Method::POST, "/reshaper"), "/reshaper");
        assert_eq!(template(Method::GET, "/keelson/v1/placement/explain"), "/keelson/v1/placement/explain");
        for (method, path) in [(Method::GET, "/nothing"), (Method::GET, "/resource_providers/"), (Method::GET, "*")] {
            assert!(matches!(table().find(&method, path), Match::NotFound), "{method} {path}");
        }
    }

    #[test]
    fn allow_lists_every_declared_method() {
        assert_eq!(allow(Method::POST, "/"), "GET");
        assert_eq!(allow(Method::PATCH, "/resource_providers/u1"), "GET, DELETE, PUT");
        assert_eq!(allow(Method::PATCH, "/resource_providers/u1/inventories"), "GET, POST, PUT, DELETE");
        assert_eq!(allow(Method::GET, "/allocations"), "POST");
        assert_eq!(allow(Method::OPTIONS, "/traits/CUSTOM_X"), "GET, PUT, DELETE");
        assert_eq!(allow(Method::HEAD, "/usages"), "GET");
    }
}
