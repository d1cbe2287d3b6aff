//! What every keelson service shares: oslo-style configuration, database
//! access and Placement's schema, typed API errors that survive the gRPC
//! hop, request-context propagation and logging.

pub mod amqp;
pub mod config;
pub mod context;
pub mod db;
pub mod error;
pub mod grpc;
pub mod options;
pub mod shutdown;
pub mod telemetry;
pub mod tls;

pub use config::Config;
pub use context::RequestContext;
pub use db::{Db, DbError, Dialect};
pub use error::ApiError;
