//! What every keelson process runs on, whatever its job: oslo-style
//! configuration, typed API errors that survive the gRPC hop, the request
//! context every call carries, gRPC serving and dialing, the mesh's mutual
//! TLS, shutdown, telemetry, and the clock stored timestamps are read from.
//!
//! Nothing here touches a database, so the edge (the gateway) and the
//! controller link no SQL driver.

pub mod clock;
pub mod config;
pub mod context;
pub mod error;
pub mod grpc;
pub mod options;
pub mod shutdown;
pub mod telemetry;
pub mod tls;

pub use config::Config;
pub use context::RequestContext;
pub use error::ApiError;
