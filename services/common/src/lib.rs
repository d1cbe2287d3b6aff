//! What every keelson service shares: an AMQP publisher, and (from
//! keelson-runtime, keelson-db and keelson-placement-schema, re-exported
//! while the services move over) configuration, typed API errors, request
//! context, logging, the database layer and Placement's schema.

pub mod amqp;

/// The database layer and Placement's schema, under their old path.
pub mod db {
    pub use keelson_db::*;
    pub use keelson_placement_schema::{online_migrations, schema, seed};
}

pub use keelson_db::{Db, DbError, Dialect};
pub use keelson_runtime::{config, context, error, grpc, shutdown, telemetry, tls};
pub use keelson_runtime::{ApiError, Config, RequestContext};
