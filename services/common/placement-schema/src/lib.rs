//! Placement's database: the schema exactly as upstream's Alembic
//! migrations leave it (`schema`: create, upgrade, stamp, check), its
//! online data migrations, and the standard resource classes and traits
//! every Placement database holds (`seed`).
//!
//! A crate of its own because only what owns Placement's tables needs it:
//! inventory, and the binary (`db` and `status` commands, the start-up
//! check, the controller's standard-traits sync). Candidates only reads
//! the tables, and the stack engine has a schema of its own on the same
//! database layer.

pub mod online_migrations;
pub mod schema;
pub mod seed;
