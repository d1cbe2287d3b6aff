//! The convergence data model: the orchestration schema (stack,
//! raw_template, resource, resource_data, sync_point, event, service,
//! watchdog_retrigger, user_creds, snapshot) and
//! the conditional writes convergence is built on:
//!
//! - the traversal CAS on `stack.current_traversal` ([`stacks::set_state`]),
//! - the resource lock/version CAS on `resource.engine_id`/`atomic_key`
//!   ([`resources::update_cas`], [`resources::acquire_lock`], ...),
//! - the sync-point merge ([`sync_points::merge`]).
//!
//! Every function takes a [`Db`](keelson_db::Db) (or an open
//! [`Tx`](keelson_db::Tx) where the caller groups writes) and speaks
//! SQL portable over SQLite, MariaDB/MySQL and PostgreSQL. Every write
//! that runs its own transaction retries it when it loses a deadlock or a
//! serialization race ([`keelson_db::retrying`]): concurrent checks
//! on MariaDB deadlock now and then, and giving up there would leave the
//! traversal to the watchdog.

mod codec;
pub mod events;
pub mod resources;
pub mod retriggers;
pub mod schema;
pub mod services;
pub mod snapshots;
pub mod software;
pub mod stacks;

pub mod sync_points;
pub mod templates;
pub mod user_creds;

pub use crate::state::{Action, Status, UnknownState};
pub use events::{EventQuery, EventRow, NewEvent, SortDir};
pub use resources::{NewResource, ResourceChange, ResourceRow};
pub use services::ServiceRow;
pub use stacks::{StackRow, StackStateChange};
pub use sync_points::{MergeOutcome, SyncPointRow};
pub use templates::RawTemplateRow;

use keelson_db::{self as db, Db, DbError, Value};

/// What check_resource reads before it acts: the stack (without its
/// `current_deps`), and, while `traversal` is the stack's current one, the
/// resource row and its data entries.
pub struct CheckSnapshot {
    pub stack: StackRow,
    pub row: Option<ResourceRow>,
    pub data: std::collections::BTreeMap<String, resources::ResourceDataEntry>,
}

/// Reads a [`CheckSnapshot`] in one statement (stack, row and data
/// joined: one row per data entry), so a check starts after one round
/// trip instead of three reads. None: no such stack.
pub async fn check_snapshot(
    db: &Db,
    stack_id: &str,
    traversal: &str,
    resource_id: i64,
) -> Result<Option<CheckSnapshot>, DbError> {
    let sql = format!(
        "SELECT {}, {}, d.data_key, d.data_value, d.redact FROM stack s \
         LEFT JOIN resource r ON r.id = ? AND s.current_traversal = ? \
         LEFT JOIN resource_data d ON d.resource_id = r.id \
         WHERE s.id = ?",
        stacks::columns_without_deps("s"),
        resources::columns("r"),
    );
    let rows = db.fetch_all(&sql, &[resource_id.into(), traversal.into(), stack_id.into()]).await?;
    let Some(first) = rows.first() else { return Ok(None) };
    let (s_end, r_end) = (stacks::COLUMN_COUNT, stacks::COLUMN_COUNT + resources::COLUMN_COUNT);
    let part =
        |row: &db::Row, from: usize, to: usize| db::Row(row.0.get(from..to).map(<[Value]>::to_vec).unwrap_or_default());
    let stack = stacks::from_row(&part(first, 0, s_end))?;
    let row = if first.is_null(s_end) { None } else { Some(resources::from_row(&part(first, s_end, r_end))?) };
    let mut data = std::collections::BTreeMap::new();
    for r in &rows {
        if r.is_null(r_end) {
            continue;
        }
        data.insert(
            r.string(r_end)?,
            resources::ResourceDataEntry {
                value: r.opt_string(r_end + 1)?.unwrap_or_default(),
                redact: codec::read_bool(r, r_end + 2)?,
            },
        );
    }
    Ok(Some(CheckSnapshot { stack, row, data }))
}

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
