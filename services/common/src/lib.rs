//! What every keelson service shares: database access and Placement's
//! schema, and (from keelson-runtime, re-exported while the services move
//! over) configuration, typed API errors, request context and logging.

pub mod amqp;
pub mod db;

pub use db::{Db, DbError, Dialect};
pub use keelson_runtime::{config, context, error, grpc, shutdown, telemetry, tls};
pub use keelson_runtime::{ApiError, Config, RequestContext};
