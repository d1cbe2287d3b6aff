//! The inventory service: Placement's objects behind the
//! `keelson.placement.v1` gRPC API.
//!
//! - [`store`]: the SQL, one module per object family, on the shared
//!   Placement schema (SQLite, MariaDB/MySQL, PostgreSQL). Generations are
//!   optimistic: `UPDATE … WHERE generation = :g`; no row locks.
//! - [`rpc`]: the thin gRPC layer, one module per service of the .proto.
//! - [`error`]: typed errors carrying Placement's codes and texts.
//! - [`audit`]: the database's consistency as `keelson placement audit`
//!   reports and repairs it (read directly, not through the API).
//!
//! The service keeps no state between requests, so any number of
//! instances can serve one database.

pub mod audit;
pub mod error;
pub mod options;
pub mod rpc;
pub mod store;

pub use store::{Store, StoreSettings};

use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::shutdown::Shutdown;

/// The fully qualified names of the services this crate serves.
pub const SERVICE_NAMES: &[&str] = &[
    "keelson.placement.v1.ResourceClasses",
    "keelson.placement.v1.Traits",
    "keelson.placement.v1.ResourceProviders",
    "keelson.placement.v1.Inventories",
    "keelson.placement.v1.Allocations",
    "keelson.placement.v1.Usages",
];

/// Serves the inventory gRPC API on `listener` until `shutdown`.
pub async fn serve(
    store: Store,
    listener: impl Into<GrpcListener>,
    shutdown: Shutdown,
) -> Result<(), tonic::transport::Error> {
    let services = rpc::Services::new(store);
    keelson_runtime::grpc::serve(listener, SERVICE_NAMES, |router| services.add_to(router), shutdown).await
}
