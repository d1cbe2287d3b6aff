//! `sync_point` and `sync_point_input`: where a traversal's branches join.
//! Each node of a traversal's graph (and the stack itself) has a sync
//! point that fires once all of its predecessors have reported; the
//! predecessors' inputs travel to the successor with it.

use chrono::NaiveDateTime;
use keelson_common::db::{self, Db, DbError, Dialect, Row, Tx, Value};
use serde_json::Value as Json;

use super::codec;
use crate::EngineError;

/// A `sync_point` row.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncPointRow {
    pub entity_id: String,
    pub traversal_id: String,
    pub is_update: bool,
    pub stack_id: String,
    pub required: i64,
    pub satisfied: i64,
    pub extra_data: Option<Json>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
}

fn from_row(row: &Row) -> Result<SyncPointRow, DbError> {
    Ok(SyncPointRow {
        entity_id: row.string(0)?,
        traversal_id: row.string(1)?,
        is_update: codec::read_bool(row, 2)?,
        stack_id: row.string(3)?,
        required: row.i64(4)?,
        satisfied: row.i64(5)?,
        extra_data: codec::read_opt_json(row, 6)?,
        created_at: row.opt_time(7)?,
        updated_at: row.opt_time(8)?,
    })
}

/// What one predecessor's report did to a sync point.
#[derive(Debug, Clone, PartialEq)]
pub enum MergeOutcome {
    /// Other predecessors have still to report (or this report was a
    /// re-delivery already counted).
    Waiting,
    /// This report completed the sync point: every predecessor's input,
    /// by predecessor. Exactly one caller gets it and fires the successor.
    Ready(serde_json::Map<String, Json>),
    /// The sync point is gone: its traversal was superseded.
    Gone,
}

impl MergeOutcome {
    /// Heat's error for a report on a sync point that is gone
    /// (`EntityNotFound`: "The Sync Point (<entity>) could not be found."),
    /// for callers that surface [`MergeOutcome::Gone`] as an error.
    pub fn gone_error(entity_id: &str) -> EngineError {
        EngineError::entity_not_found("Sync Point", entity_id)
    }
}

/// Rows per multi-row INSERT: far below every backend's parameter limit.
const ROWS_PER_INSERT: usize = 200;

/// Creates the sync points of a traversal, one per `(entity_id,
/// is_update, required)`, in one transaction.
pub async fn create_all(db: &Db, stack_id: &str, traversal: &str, nodes: &[(String, bool, i64)]) -> Result<(), DbError> {
    db::retrying("sync point creation", || async {
        let mut tx = db.begin().await?;
        create_all_tx(&mut tx, stack_id, traversal, nodes).await?;
        tx.commit().await
    })
    .await
}

/// [`create_all`] in the caller's transaction.
pub async fn create_all_tx(tx: &mut Tx, stack_id: &str, traversal: &str, nodes: &[(String, bool, i64)]) -> Result<(), DbError> {
    let now = db::now();
    for chunk in nodes.chunks(ROWS_PER_INSERT) {
        let mut sql = String::from(
            "INSERT INTO sync_point (entity_id, traversal_id, is_update, stack_id, required, satisfied, created_at, updated_at) VALUES ",
        );
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 7);
        for (i, (entity, is_update, required)) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str("(?, ?, ?, ?, ?, 0, ?, ?)");
            params.extend([
                entity.as_str().into(),
                traversal.into(),
                codec::bool_int(*is_update),
                stack_id.into(),
                (*required).into(),
                now.into(),
                now.into(),
            ]);
        }
        tx.execute(&sql, &params).await?;
    }
    Ok(())
}

/// One sync point, if it exists.
pub async fn get(db: &Db, entity_id: &str, traversal: &str, is_update: bool) -> Result<Option<SyncPointRow>, DbError> {
    let rows = db
        .fetch_all(
            "SELECT entity_id, traversal_id, is_update, stack_id, required, satisfied, extra_data, created_at, updated_at \
             FROM sync_point WHERE entity_id = ? AND traversal_id = ? AND is_update = ?",
            &[entity_id.into(), traversal.into(), codec::bool_int(is_update)],
        )
        .await?;
    rows.first().map(from_row).transpose()
}

/// Records `predecessor`'s report on a sync point, in one transaction:
/// its input row is inserted unless already there (a re-delivered report
/// counts once), `satisfied` advances only if the insert added a row, and
/// the transaction that makes `satisfied == required` answers every input.
/// The row lock of that UPDATE serialises concurrent predecessors on
/// MariaDB/PostgreSQL; SQLite serialises writers. A deadlock retries the
/// whole transaction.
pub async fn merge(
    db: &Db,
    entity_id: &str,
    traversal: &str,
    is_update: bool,
    predecessor: &str,
    input: &Json,
) -> Result<MergeOutcome, EngineError> {
    match db::retrying("sync point merge", || merge_once(db, entity_id, traversal, is_update, predecessor, input)).await? {
        MergeOutcome::Gone => {
            tracing::debug!(entity_id, traversal, "sync point gone: traversal superseded");
            Ok(MergeOutcome::Gone)
        }
        outcome => Ok(outcome),
    }
}

async fn merge_once(
    db: &Db,
    entity_id: &str,
    traversal: &str,
    is_update: bool,
    predecessor: &str,
    input: &Json,
) -> Result<MergeOutcome, DbError> {
    let key: [Value; 3] = [entity_id.into(), traversal.into(), codec::bool_int(is_update)];
    let mut tx = db.begin().await?;
    let insert = match tx.dialect {
        Dialect::MySql => {
            "INSERT IGNORE INTO sync_point_input (entity_id, traversal_id, is_update, predecessor, input_data) VALUES (?, ?, ?, ?, ?)"
        }
        Dialect::Sqlite | Dialect::Postgres => {
            "INSERT INTO sync_point_input (entity_id, traversal_id, is_update, predecessor, input_data) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT DO NOTHING"
        }
    };
    let mut params = key.to_vec();
    params.push(predecessor.into());
    params.push(codec::json(input));
    let added = tx.execute(insert, &params).await?;
    if added == 0 {
        // A re-delivery: already counted. Gone if the point is.
        let exists = tx
            .fetch_optional("SELECT 1 FROM sync_point WHERE entity_id = ? AND traversal_id = ? AND is_update = ?", &key)
            .await?
            .is_some();
        tx.commit().await?;
        return Ok(if exists { MergeOutcome::Waiting } else { MergeOutcome::Gone });
    }
    let mut params = vec![Value::from(db::now())];
    params.extend(key.iter().cloned());
    let bumped = tx
        .execute(
            "UPDATE sync_point SET satisfied = satisfied + 1, updated_at = ? \
             WHERE entity_id = ? AND traversal_id = ? AND is_update = ?",
            &params,
        )
        .await?;
    if bumped == 0 {
        // Dropping the transaction rolls our input row back.
        return Ok(MergeOutcome::Gone);
    }
    // This transaction holds the row lock now, so it reads the latest
    // count (a locking read where the dialect has one).
    let lock = if tx.dialect == Dialect::Sqlite { "" } else { " FOR UPDATE" };
    let Some(row) = tx
        .fetch_optional(
            &format!(
                "SELECT satisfied, required FROM sync_point WHERE entity_id = ? AND traversal_id = ? AND is_update = ?{lock}"
            ),
            &key,
        )
        .await?
    else {
        return Ok(MergeOutcome::Gone);
    };
    let (satisfied, required) = (row.i64(0)?, row.i64(1)?);
    if satisfied != required {
        tx.commit().await?;
        return Ok(MergeOutcome::Waiting);
    }
    let rows = tx
        .fetch_all(
            "SELECT predecessor, input_data FROM sync_point_input WHERE entity_id = ? AND traversal_id = ? AND is_update = ?",
            &key,
        )
        .await?;
    let mut inputs = serde_json::Map::new();
    for r in &rows {
        inputs.insert(r.string(0)?, codec::read_opt_json(r, 1)?.unwrap_or(Json::Null));
    }
    tx.commit().await?;
    Ok(MergeOutcome::Ready(inputs))
}

/// Removes the sync points (and inputs) of one traversal of the stack.
pub async fn delete_for_traversal(db: &Db, stack_id: &str, traversal: &str) -> Result<u64, DbError> {
    db::retrying("sync point removal", || async {
        let mut tx = db.begin().await?;
        tx.execute(
            "DELETE FROM sync_point_input WHERE traversal_id = ? AND entity_id IN \
             (SELECT entity_id FROM sync_point WHERE stack_id = ? AND traversal_id = ?)",
            &[traversal.into(), stack_id.into(), traversal.into()],
        )
        .await?;
        let n = tx
            .execute("DELETE FROM sync_point WHERE stack_id = ? AND traversal_id = ?", &[stack_id.into(), traversal.into()])
            .await?;
        tx.commit().await?;
        Ok(n)
    })
    .await
}

/// Removes the sync points (and inputs) of every traversal of the stack
/// but `keep_traversal`: what a new traversal does to the ones it
/// supersedes.
pub async fn delete_for_stack_except(db: &Db, stack_id: &str, keep_traversal: &str) -> Result<u64, DbError> {
    db::retrying("sync point removal", || async {
        let mut tx = db.begin().await?;
        tx.execute(
            "DELETE FROM sync_point_input WHERE traversal_id <> ? AND traversal_id IN \
             (SELECT traversal_id FROM sync_point WHERE stack_id = ? AND traversal_id <> ?)",
            &[keep_traversal.into(), stack_id.into(), keep_traversal.into()],
        )
        .await?;
        let n = tx
            .execute(
                "DELETE FROM sync_point WHERE stack_id = ? AND traversal_id <> ?",
                &[stack_id.into(), keep_traversal.into()],
            )
            .await?;
        tx.commit().await?;
        Ok(n)
    })
    .await
}
