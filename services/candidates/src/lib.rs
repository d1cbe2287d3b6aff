//! The allocation-candidates service: upstream Placement's algorithm
//! (`GET /allocation_candidates`) over the shared Placement schema, behind
//! the `keelson.candidates.v2` gRPC API.
//!
//! - [`domain`]: the request model and its rules, and the algorithm, free
//!   of I/O;
//! - [`store`]: read-only SQL loading what one request needs, then the
//!   algorithm on it;
//! - [`rpc`]: the thin gRPC layer;
//! - [`error`]: errors with Placement's texts.
//!
//! The service keeps nothing between requests, so any number of instances
//! can serve one database and no answer is ever stale.

pub mod domain;
pub mod error;
pub mod options;
pub mod rpc;
pub mod store;

#[cfg(test)]
mod tests;

pub use domain::Settings;
pub use store::Store;

use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::shutdown::Shutdown;

/// The fully qualified names of the services this crate serves.
pub const SERVICE_NAMES: &[&str] = &["keelson.candidates.v2.AllocationCandidates"];

/// Reads the four algorithm options from configuration.
pub fn settings_from_config(config: &keelson_runtime::Config) -> Settings {
    Settings::from_options(
        &config.get(&options::GENERATION_STRATEGY),
        config.get(&options::OPTIMIZE_FOR_WIDE_PROVIDER_TREES),
        config.get(&options::MAX_ALLOCATION_CANDIDATES),
        config.get(&options::RANDOMIZE_ALLOCATION_CANDIDATES),
    )
}

/// Serves the candidates gRPC API on `listener` until `shutdown`.
pub async fn serve(
    store: Store,
    listener: impl Into<GrpcListener>,
    shutdown: Shutdown,
) -> Result<(), tonic::transport::Error> {
    let service = rpc::server(store);
    keelson_runtime::grpc::serve(listener, SERVICE_NAMES, |router| router.add_service(service), shutdown).await
}
