//! Re-exports keelson-runtime, keelson-db and keelson-placement-schema
//! under their old paths while the services move over.

/// The database layer and Placement's schema, under their old path.
pub mod db {
    pub use keelson_db::*;
    pub use keelson_placement_schema::{online_migrations, schema, seed};
}

pub use keelson_db::{Db, DbError, Dialect};
pub use keelson_runtime::{config, context, error, grpc, shutdown, telemetry, tls};
pub use keelson_runtime::{ApiError, Config, RequestContext};
