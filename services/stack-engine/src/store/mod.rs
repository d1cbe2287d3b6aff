//! The convergence data model: the orchestration schema (stack,
//! raw_template, resource, resource_data, sync_point, event, service) and
//! the conditional writes convergence is built on:
//!
//! - the traversal CAS on `stack.current_traversal` ([`stacks::set_state`]),
//! - the resource lock/version CAS on `resource.engine_id`/`atomic_key`
//!   ([`resources::update_cas`], [`resources::acquire_lock`], ...),
//! - the sync-point merge ([`sync_points::merge`]).
//!
//! Every function takes a [`Db`](keelson_common::db::Db) (or an open
//! [`Tx`](keelson_common::db::Tx) where the caller groups writes) and speaks
//! SQL portable over SQLite, MariaDB/MySQL and PostgreSQL. Every write
//! that runs its own transaction retries it when it loses a deadlock or a
//! serialization race ([`keelson_common::db::retrying`]): concurrent checks
//! on MariaDB deadlock now and then, and giving up there would leave the
//! traversal to the watchdog.

mod codec;
pub mod events;
pub mod resources;
pub mod schema;
pub mod services;
pub mod stacks;
pub mod sync_points;
pub mod templates;

pub use events::{EventQuery, EventRow, NewEvent, SortDir};
pub use resources::{NewResource, ResourceChange, ResourceRow};
pub use services::ServiceRow;
pub use stacks::{StackRow, StackStateChange};
pub use sync_points::{MergeOutcome, SyncPointRow};
pub use templates::RawTemplateRow;

use keelson_common::db::{self, Db, DbError, Value};

/// Runs one write statement in its own transaction, retried on deadlock;
/// answers the rows it changed.
async fn write_one(db: &Db, what: &'static str, sql: &str, params: &[Value]) -> Result<u64, DbError> {
    db::retrying(what, || async {
        let mut tx = db.begin().await?;
        let n = tx.execute(sql, params).await?;
        tx.commit().await?;
        Ok(n)
    })
    .await
}

/// Heat's resource and stack actions (`action` columns).
pub mod action {
    pub const INIT: &str = "INIT";
    pub const CREATE: &str = "CREATE";
    pub const DELETE: &str = "DELETE";
    pub const UPDATE: &str = "UPDATE";
    pub const ROLLBACK: &str = "ROLLBACK";
    pub const SUSPEND: &str = "SUSPEND";
    pub const RESUME: &str = "RESUME";
    pub const ADOPT: &str = "ADOPT";
    pub const SNAPSHOT: &str = "SNAPSHOT";
    pub const CHECK: &str = "CHECK";
    pub const ALL: &[&str] = &[INIT, CREATE, DELETE, UPDATE, ROLLBACK, SUSPEND, RESUME, ADOPT, SNAPSHOT, CHECK];
}

/// Heat's resource and stack statuses (`status` columns).
pub mod status {
    pub const IN_PROGRESS: &str = "IN_PROGRESS";
    pub const FAILED: &str = "FAILED";
    pub const COMPLETE: &str = "COMPLETE";
    pub const ALL: &[&str] = &[IN_PROGRESS, FAILED, COMPLETE];
}
