//! `stack`: one row per stack (nested ones included), soft-deleted.
//! [`set_state`] is the traversal CAS every convergence state change goes
//! through: a write made for a superseded traversal changes nothing.

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Kind, Row, Tx, Value};
use serde_json::Value as Json;

use super::codec::{self, Assignments};
use super::{Action, Status};

/// A `stack` row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackRow {
    pub id: String,
    pub name: String,
    pub raw_template_id: i64,
    /// The definition being replaced during an update (rollback target).
    pub prev_raw_template_id: Option<i64>,
    pub tenant: String,
    pub username: String,
    pub user_id: String,
    /// The parent stack of a nested stack.
    pub owner_id: Option<String>,
    pub parent_resource_name: Option<String>,
    pub timeout_mins: Option<i64>,
    pub disable_rollback: bool,
    pub nested_depth: i64,
    pub stack_user_project_id: Option<String>,
    pub tags: Option<Vec<String>>,
    /// The user parameters as given (PATCH merges into them).
    pub params: serde_json::Map<String, Json>,
    /// The traversal allowed to write; '' before the first one.
    pub current_traversal: String,
    /// `{"edges": [[[rid, is_update], [rid, is_update]|null], ...]}`.
    pub current_deps: Option<Json>,
    pub action: Action,
    pub status: Status,
    pub status_reason: String,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub deleted_at: Option<NaiveDateTime>,
}

impl StackRow {
    /// `ACTION_STATUS`, as Heat shows `stack_status`.
    pub fn state(&self) -> String {
        format!("{}_{}", self.action, self.status)
    }
}

const COLUMNS: &str = "id, name, raw_template_id, prev_raw_template_id, tenant, username, user_id, owner_id, \
     parent_resource_name, timeout_mins, disable_rollback, nested_depth, stack_user_project_id, tags, params, \
     current_traversal, current_deps, action, status, status_reason, created_at, updated_at, deleted_at";

/// The number of columns [`from_row`] decodes.
pub(super) const COLUMN_COUNT: usize = 23;

/// [`COLUMNS_WITHOUT_DEPS`] qualified by a table alias, for joins.
pub(super) fn columns_without_deps(alias: &str) -> String {
    COLUMNS_WITHOUT_DEPS
        .split(", ")
        .map(|c| if c == "NULL" { c.to_string() } else { format!("{alias}.{c}") })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn from_row(row: &Row) -> Result<StackRow, DbError> {
    Ok(StackRow {
        id: row.string(0)?,
        name: row.string(1)?,
        raw_template_id: row.opt_i64(2)?.unwrap_or_default(),
        prev_raw_template_id: row.opt_i64(3)?,
        tenant: row.opt_string(4)?.unwrap_or_default(),
        username: row.opt_string(5)?.unwrap_or_default(),
        user_id: row.opt_string(6)?.unwrap_or_default(),
        owner_id: row.opt_string(7)?,
        parent_resource_name: row.opt_string(8)?,
        timeout_mins: row.opt_i64(9)?,
        disable_rollback: codec::read_bool(row, 10)?,
        nested_depth: row.opt_i64(11)?.unwrap_or_default(),
        stack_user_project_id: row.opt_string(12)?,
        tags: codec::read_opt_strings(row, 13)?,
        params: codec::read_object(row, 14)?,
        current_traversal: row.opt_string(15)?.unwrap_or_default(),
        current_deps: codec::read_opt_json(row, 16)?,
        action: codec::read_action(row, 17)?,
        status: codec::read_status(row, 18)?,
        status_reason: row.opt_string(19)?.unwrap_or_default(),
        created_at: row.opt_time(20)?,
        updated_at: row.opt_time(21)?,
        deleted_at: row.opt_time(22)?,
    })
}

fn opt_int(v: Option<i64>) -> Value {
    v.map(Value::Int).unwrap_or(Value::Null(Kind::Int))
}

fn opt_time(v: Option<NaiveDateTime>) -> Value {
    v.map(Value::Time).unwrap_or(Value::Null(Kind::Time))
}

fn tags_value(tags: Option<&Vec<String>>) -> Value {
    match tags {
        Some(t) => Value::Text(Json::from(t.clone()).to_string()),
        None => Value::Null(Kind::Text),
    }
}

/// Stores a new stack; `created_at` defaults to now.
pub async fn insert(tx: &mut Tx, stack: &StackRow) -> Result<(), DbError> {
    let created_at = stack.created_at.unwrap_or_else(db::now);
    tx.execute(
        &format!("INSERT INTO stack ({COLUMNS}) VALUES ({})", db::in_list(23)),
        &[
            stack.id.as_str().into(),
            stack.name.as_str().into(),
            stack.raw_template_id.into(),
            opt_int(stack.prev_raw_template_id),
            stack.tenant.as_str().into(),
            stack.username.as_str().into(),
            stack.user_id.as_str().into(),
            stack.owner_id.clone().into(),
            stack.parent_resource_name.clone().into(),
            opt_int(stack.timeout_mins),
            codec::bool_int(stack.disable_rollback),
            stack.nested_depth.into(),
            stack.stack_user_project_id.clone().into(),
            tags_value(stack.tags.as_ref()),
            Json::Object(stack.params.clone()).to_string().into(),
            stack.current_traversal.as_str().into(),
            codec::opt_json(stack.current_deps.as_ref()),
            stack.action.as_str().into(),
            stack.status.as_str().into(),
            stack.status_reason.as_str().into(),
            created_at.into(),
            opt_time(stack.updated_at),
            opt_time(stack.deleted_at),
        ],
    )
    .await?;
    Ok(())
}

/// A stack by id, soft-deleted ones included.
pub async fn get(db: &Db, id: &str) -> Result<Option<StackRow>, DbError> {
    let rows = db.fetch_all(&format!("SELECT {COLUMNS} FROM stack WHERE id = ?"), &[id.into()]).await?;
    rows.first().map(from_row).transpose()
}

/// The columns of [`COLUMNS`] with `current_deps` read as NULL: the graph
/// is O(resources) of JSON, and a check that already has its traversal's
/// graph in memory need not read and parse it again.
const COLUMNS_WITHOUT_DEPS: &str =
    "id, name, raw_template_id, prev_raw_template_id, tenant, username, user_id, owner_id, \
     parent_resource_name, timeout_mins, disable_rollback, nested_depth, stack_user_project_id, tags, params, \
     current_traversal, NULL, action, status, status_reason, created_at, updated_at, deleted_at";

/// A stack by id in the caller's transaction, without `current_deps`
/// (None in the answer; see [`current_deps`]).
pub async fn get_without_deps_tx(tx: &mut Tx, id: &str) -> Result<Option<StackRow>, DbError> {
    let rows = tx.fetch_all(&format!("SELECT {COLUMNS_WITHOUT_DEPS} FROM stack WHERE id = ?"), &[id.into()]).await?;
    rows.first().map(from_row).transpose()
}

/// The dependency graph recorded for `traversal`, while it is still the
/// stack's current one (None otherwise).
pub async fn current_deps(db: &Db, id: &str, traversal: &str) -> Result<Option<Json>, DbError> {
    let rows = db
        .fetch_all(
            "SELECT current_deps FROM stack WHERE id = ? AND current_traversal = ?",
            &[id.into(), traversal.into()],
        )
        .await?;
    match rows.first() {
        Some(r) => codec::read_opt_json(r, 0),
        None => Ok(None),
    }
}

/// The live (not deleted) stack called `name` in `tenant`.
/// As Heat's `stack_get_by_name`, a stack's stack-user project finds it too
/// (its stack users look their stack up by name).
pub async fn get_by_name(db: &Db, tenant: &str, name: &str) -> Result<Option<StackRow>, DbError> {
    let rows = db
        .fetch_all(
            &format!(
                "SELECT {COLUMNS} FROM stack WHERE (tenant = ? OR stack_user_project_id = ?) AND name = ? \
                 AND deleted_at IS NULL ORDER BY created_at"
            ),
            &[tenant.into(), tenant.into(), name.into()],
        )
        .await?;
    rows.first().map(from_row).transpose()
}

/// The live nested stacks whose parent is `owner_id`.
pub async fn children(db: &Db, owner_id: &str) -> Result<Vec<StackRow>, DbError> {
    let rows = db
        .fetch_all(
            &format!("SELECT {COLUMNS} FROM stack WHERE owner_id = ? AND deleted_at IS NULL ORDER BY created_at, id"),
            &[owner_id.into()],
        )
        .await?;
    rows.iter().map(from_row).collect()
}

/// The stacks of `tenant` (None: every tenant), by creation; soft-deleted
/// ones only with `show_deleted`, nested ones only with `show_nested`.
/// The API filters, sorts and pages these rows itself.
pub async fn list_for_tenant(
    db: &Db,
    tenant: Option<&str>,
    show_deleted: bool,
    show_nested: bool,
) -> Result<Vec<StackRow>, DbError> {
    let mut clauses = vec!["1 = 1"];
    let mut params = Vec::new();
    if let Some(t) = tenant {
        clauses.push("tenant = ?");
        params.push(Value::from(t));
    }
    if !show_deleted {
        clauses.push("deleted_at IS NULL");
    }
    if !show_nested {
        clauses.push("owner_id IS NULL");
    }
    let sql = format!("SELECT {COLUMNS} FROM stack WHERE {} ORDER BY created_at, id", clauses.join(" AND "));
    let rows = db.fetch_all(&sql, &params).await?;
    rows.iter().map(from_row).collect()
}

/// The live stacks with a traversal IN_PROGRESS (any tenant): what a
/// watchdog inspects for stalled work.
pub async fn in_progress(db: &Db) -> Result<Vec<StackRow>, DbError> {
    let rows = db
        .fetch_all(
            &format!(
                "SELECT {COLUMNS} FROM stack WHERE status = ? AND deleted_at IS NULL AND current_traversal <> '' \
                 ORDER BY updated_at, id"
            ),
            &[super::Status::InProgress.into()],
        )
        .await?;
    rows.iter().map(from_row).collect()
}

/// How many live stacks `tenant` has (Heat's `max_stacks_per_tenant`).
pub async fn count_live(db: &Db, tenant: &str) -> Result<i64, DbError> {
    let rows =
        db.fetch_all("SELECT COUNT(*) FROM stack WHERE tenant = ? AND deleted_at IS NULL", &[tenant.into()]).await?;
    rows.first().map(|r| r.i64(0)).transpose().map(Option::unwrap_or_default)
}

/// A state change made under the traversal CAS. `None` leaves a column
/// as it is; `Some(None)` on a nullable column sets NULL.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackStateChange {
    pub action: Action,
    pub status: Status,
    pub status_reason: String,
    /// Starts a new traversal (the old one's writes then fail).
    pub current_traversal: Option<String>,
    pub raw_template_id: Option<i64>,
    pub prev_raw_template_id: Option<Option<i64>>,
    pub params: Option<serde_json::Map<String, Json>>,
    pub timeout_mins: Option<Option<i64>>,
    pub disable_rollback: Option<bool>,
    pub tags: Option<Option<Vec<String>>>,
    pub current_deps: Option<Option<Json>>,
    /// Defaults to now.
    pub updated_at: Option<NaiveDateTime>,
}

impl StackStateChange {
    pub fn new(action: Action, status: Status, status_reason: impl Into<String>) -> Self {
        StackStateChange { action, status, status_reason: status_reason.into(), ..Default::default() }
    }
}

/// THE traversal CAS: applies `change` only while the stack is live and
/// `current_traversal` is still `expected_traversal`. Answers whether it
/// was applied (false: deleted, or a newer traversal took over).
pub async fn set_state(db: &Db, id: &str, expected_traversal: &str, change: StackStateChange) -> Result<bool, DbError> {
    let (sql, params) = set_state_sql(id, expected_traversal, change);
    Ok(super::write_one(db, "stack state", &sql, &params).await? > 0)
}

/// [`set_state`] in the caller's transaction (the traversal CAS all the
/// same: the transaction's other writes are meant to commit only with it).
pub async fn set_state_tx(
    tx: &mut Tx,
    id: &str,
    expected_traversal: &str,
    change: StackStateChange,
) -> Result<bool, DbError> {
    let (sql, params) = set_state_sql(id, expected_traversal, change);
    Ok(tx.execute(&sql, &params).await? > 0)
}

fn set_state_sql(id: &str, expected_traversal: &str, change: StackStateChange) -> (String, Vec<Value>) {
    let mut set = Assignments::default();
    set.set("action", change.action.into());
    set.set("status", change.status.into());
    set.set("status_reason", change.status_reason.into());
    if let Some(t) = change.current_traversal {
        set.set("current_traversal", t.into());
    }
    if let Some(t) = change.raw_template_id {
        set.set("raw_template_id", t.into());
    }
    if let Some(t) = change.prev_raw_template_id {
        set.set("prev_raw_template_id", opt_int(t));
    }
    if let Some(p) = change.params {
        set.set("params", Json::Object(p).to_string().into());
    }
    if let Some(t) = change.timeout_mins {
        set.set("timeout_mins", opt_int(t));
    }
    if let Some(d) = change.disable_rollback {
        set.set("disable_rollback", codec::bool_int(d));
    }
    if let Some(t) = change.tags {
        set.set("tags", tags_value(t.as_ref()));
    }
    if let Some(d) = change.current_deps {
        set.set("current_deps", codec::opt_json(d.as_ref()));
    }
    set.set("updated_at", change.updated_at.unwrap_or_else(db::now).into());
    let mut params = set.params.clone();
    params.push(id.into());
    params.push(expected_traversal.into());
    let sql = format!("UPDATE stack SET {} WHERE id = ? AND deleted_at IS NULL AND current_traversal = ?", set.sql());
    (sql, params)
}

/// Records the dependency graph of `traversal` (only while it is current).
pub async fn set_current_deps(db: &Db, id: &str, traversal: &str, deps: &Json) -> Result<bool, DbError> {
    let n = super::write_one(
        db,
        "stack dependencies",
        "UPDATE stack SET current_deps = ? WHERE id = ? AND deleted_at IS NULL AND current_traversal = ?",
        &[codec::json(deps), id.into(), traversal.into()],
    )
    .await?;
    Ok(n > 0)
}

/// Marks the stack deleted (only while `traversal` is current).
pub async fn soft_delete(db: &Db, id: &str, traversal: &str) -> Result<bool, DbError> {
    let now = db::now();
    let n = super::write_one(
        db,
        "stack delete",
        "UPDATE stack SET deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL AND current_traversal = ?",
        &[now.into(), now.into(), id.into(), traversal.into()],
    )
    .await?;
    Ok(n > 0)
}

/// DELETE_COMPLETE with `reason` and the soft delete in one statement
/// (only while `traversal` is current), so nobody finds a DELETE_COMPLETE
/// stack by name.
pub async fn complete_delete(db: &Db, id: &str, traversal: &str, reason: &str) -> Result<bool, DbError> {
    let (sql, params) = complete_delete_sql(id, traversal, reason);
    Ok(super::write_one(db, "stack delete", sql, &params).await? > 0)
}

/// [`complete_delete`] in the caller's transaction.
pub async fn complete_delete_tx(tx: &mut Tx, id: &str, traversal: &str, reason: &str) -> Result<bool, DbError> {
    let (sql, params) = complete_delete_sql(id, traversal, reason);
    Ok(tx.execute(sql, &params).await? > 0)
}

fn complete_delete_sql(id: &str, traversal: &str, reason: &str) -> (&'static str, Vec<Value>) {
    let now = db::now();
    (
        "UPDATE stack SET action = ?, status = ?, status_reason = ?, updated_at = ?, deleted_at = ? \
         WHERE id = ? AND deleted_at IS NULL AND current_traversal = ?",
        vec![
            super::Action::Delete.into(),
            super::Status::Complete.into(),
            reason.into(),
            now.into(),
            now.into(),
            id.into(),
            traversal.into(),
        ],
    )
}

/// Purges the stacks soft-deleted more than `age_seconds` ago (of
/// `tenant` only when given); answers how many went.
pub async fn purge_deleted(db: &Db, age_seconds: i64, tenant: Option<&str>) -> Result<u64, DbError> {
    let age = chrono::TimeDelta::try_seconds(age_seconds).unwrap_or(chrono::TimeDelta::MAX);
    let cutoff = db::now().checked_sub_signed(age).unwrap_or(NaiveDateTime::MIN);
    let rows = match tenant {
        Some(t) => {
            db.fetch_all("SELECT id, deleted_at FROM stack WHERE deleted_at IS NOT NULL AND tenant = ?", &[t.into()])
                .await?
        }
        None => db.fetch_all("SELECT id, deleted_at FROM stack WHERE deleted_at IS NOT NULL", &[]).await?,
    };
    let mut purged = 0;
    for row in rows {
        if row.opt_time(1)?.is_some_and(|at| at < cutoff) && delete_for_purge(db, &row.string(0)?).await? {
            purged += 1;
        }
    }
    Ok(purged)
}

/// Removes a stack row for good, with its resources and their data, its
/// events, its snapshots, its sync points and its templates (Heat's
/// `purge_deleted`).
/// Answers whether the stack row existed.
pub async fn delete_for_purge(db: &Db, id: &str) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let Some(row) =
        tx.fetch_optional("SELECT raw_template_id, prev_raw_template_id FROM stack WHERE id = ?", &[id.into()]).await?
    else {
        return Ok(false);
    };
    let mut template_ids: Vec<i64> = [row.opt_i64(0)?, row.opt_i64(1)?].into_iter().flatten().collect();
    for r in tx.fetch_all("SELECT DISTINCT current_template_id FROM resource WHERE stack_id = ?", &[id.into()]).await? {
        if let Some(t) = r.opt_i64(0)? {
            template_ids.push(t);
        }
    }
    template_ids.sort_unstable();
    template_ids.dedup();
    tx.execute(
        "DELETE FROM resource_data WHERE resource_id IN (SELECT id FROM resource WHERE stack_id = ?)",
        &[id.into()],
    )
    .await?;
    tx.execute("DELETE FROM resource WHERE stack_id = ?", &[id.into()]).await?;
    tx.execute("DELETE FROM event WHERE stack_id = ?", &[id.into()]).await?;
    tx.execute("DELETE FROM snapshot WHERE stack_id = ?", &[id.into()]).await?;
    tx.execute(
        "DELETE FROM sync_point_input WHERE traversal_id IN (SELECT traversal_id FROM sync_point WHERE stack_id = ?)",
        &[id.into()],
    )
    .await?;
    tx.execute("DELETE FROM sync_point WHERE stack_id = ?", &[id.into()]).await?;
    tx.execute("DELETE FROM stack WHERE id = ?", &[id.into()]).await?;
    for t in template_ids {
        // A template still referenced by another stack (none today, but
        // cheap to respect) stays.
        tx.execute(
            "DELETE FROM raw_template WHERE id = ? AND NOT EXISTS \
             (SELECT 1 FROM stack WHERE raw_template_id = ? OR prev_raw_template_id = ?)",
            &[t.into(), t.into(), t.into()],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}
