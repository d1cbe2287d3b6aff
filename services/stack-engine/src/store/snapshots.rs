//! `snapshot` (Heat's table of the same name): a stack's snapshots. A
//! row is written IN_PROGRESS when the snapshot starts and rewritten once
//! when the SNAPSHOT walk ends; its `data` is the stack's abandon document
//! with each resource's snapshot data under `resources`. Rows belong to
//! their stack and go with it.

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Kind, Row, Value};
use serde_json::Value as Json;

use super::codec;

/// A `snapshot` row. `action` is the snapshot's own (CREATE, DELETE),
/// not a stack action.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SnapshotRow {
    pub id: String,
    pub name: Option<String>,
    pub stack_id: String,
    pub tenant: String,
    pub data: Option<Json>,
    pub action: Option<String>,
    pub status: Option<String>,
    pub status_reason: Option<String>,
    pub created_at: Option<NaiveDateTime>,
}

const COLUMNS: &str = "id, name, stack_id, tenant, data, action, status, status_reason, created_at";

fn from_row(row: &Row) -> Result<SnapshotRow, DbError> {
    Ok(SnapshotRow {
        id: row.string(0)?,
        name: row.opt_string(1)?,
        stack_id: row.string(2)?,
        tenant: row.string(3)?,
        data: codec::read_opt_json(row, 4)?,
        action: row.opt_string(5)?,
        status: row.opt_string(6)?,
        status_reason: row.opt_string(7)?,
        created_at: row.opt_time(8)?,
    })
}

/// Stores a new snapshot; its `created_at` is set here.
pub async fn insert(db: &Db, new: &SnapshotRow) -> Result<SnapshotRow, DbError> {
    let now = db::now();
    let sql = format!("INSERT INTO snapshot ({COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    let params: Vec<Value> = vec![
        new.id.as_str().into(),
        new.name.clone().into(),
        new.stack_id.as_str().into(),
        new.tenant.as_str().into(),
        codec::opt_json(new.data.as_ref()),
        new.action.clone().into(),
        new.status.clone().into(),
        new.status_reason.clone().into(),
        now.into(),
        Value::Null(Kind::Time),
    ];
    super::write_one(db, "snapshot insert", &sql, &params).await?;
    Ok(SnapshotRow { created_at: Some(now), ..new.clone() })
}

pub async fn get(db: &Db, id: &str) -> Result<Option<SnapshotRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM snapshot WHERE id = ?");
    db.fetch_all(&sql, &[id.into()]).await?.first().map(from_row).transpose()
}

/// The snapshots of `stack_id` that `tenant` owns, oldest first.
pub async fn list_by_stack(db: &Db, stack_id: &str, tenant: &str) -> Result<Vec<SnapshotRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM snapshot WHERE stack_id = ? AND tenant = ? ORDER BY created_at, id");
    db.fetch_all(&sql, &[stack_id.into(), tenant.into()]).await?.iter().map(from_row).collect()
}

/// Every snapshot of `stack_id`, whoever owns it (its stack's delete).
pub async fn list_all_by_stack(db: &Db, stack_id: &str) -> Result<Vec<SnapshotRow>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM snapshot WHERE stack_id = ? ORDER BY created_at, id");
    db.fetch_all(&sql, &[stack_id.into()]).await?.iter().map(from_row).collect()
}

/// How many snapshots of `stack_id` `tenant` owns.
pub async fn count_by_stack(db: &Db, stack_id: &str, tenant: &str) -> Result<i64, DbError> {
    let rows = db
        .fetch_all("SELECT COUNT(*) FROM snapshot WHERE stack_id = ? AND tenant = ?", &[stack_id.into(), tenant.into()])
        .await?;
    Ok(rows.first().map(|r| r.opt_i64(0)).transpose()?.flatten().unwrap_or(0))
}

/// Rewrites a snapshot's outcome: its data, action, status and reason.
/// Answers whether the row was still there.
pub async fn finish(db: &Db, id: &str, data: &Json, action: &str, status: &str, reason: &str) -> Result<bool, DbError> {
    let sql = "UPDATE snapshot SET data = ?, action = ?, status = ?, status_reason = ?, updated_at = ? WHERE id = ?";
    let params: Vec<Value> =
        vec![codec::json(data), action.into(), status.into(), reason.into(), db::now().into(), id.into()];
    Ok(super::write_one(db, "snapshot update", sql, &params).await? > 0)
}

/// A snapshot's action, status and reason (its data kept).
pub async fn set_state(db: &Db, id: &str, action: &str, status: &str, reason: &str) -> Result<bool, DbError> {
    let sql = "UPDATE snapshot SET action = ?, status = ?, status_reason = ?, updated_at = ? WHERE id = ?";
    let params: Vec<Value> = vec![action.into(), status.into(), reason.into(), db::now().into(), id.into()];
    Ok(super::write_one(db, "snapshot state", sql, &params).await? > 0)
}

/// Answers whether the row existed.
pub async fn delete(db: &Db, id: &str) -> Result<bool, DbError> {
    Ok(super::write_one(db, "snapshot delete", "DELETE FROM snapshot WHERE id = ?", &[id.into()]).await? > 0)
}

/// Every snapshot of a stack (its delete).
pub async fn delete_by_stack(db: &Db, stack_id: &str) -> Result<u64, DbError> {
    super::write_one(db, "snapshot delete by stack", "DELETE FROM snapshot WHERE stack_id = ?", &[stack_id.into()])
        .await
}
