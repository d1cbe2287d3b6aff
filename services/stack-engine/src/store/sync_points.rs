//! `sync_point` and `sync_point_input`: where a traversal's branches join.
//! Each node of a traversal's graph (and the stack itself) has a sync
//! point that fires once all of its predecessors have reported; the
//! predecessors' inputs travel to the successor with it.

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Dialect, Row, Tx, Value};
use serde_json::Value as Json;

use super::codec;
use crate::error::EngineError;

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
pub async fn create_all(
    db: &Db,
    stack_id: &str,
    traversal: &str,
    nodes: &[(String, bool, i64)],
) -> Result<(), DbError> {
    db::retrying("sync point creation", || async {
        let mut tx = db.begin().await?;
        create_all_tx(&mut tx, stack_id, traversal, nodes).await?;
        tx.commit().await
    })
    .await
}

/// [`create_all`] in the caller's transaction.
pub async fn create_all_tx(
    tx: &mut Tx,
    stack_id: &str,
    traversal: &str,
    nodes: &[(String, bool, i64)],
) -> Result<(), DbError> {
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

/// One successor a predecessor reports to: its sync point's key, the
/// input the predecessor hands it, and how many predecessors the reporter
/// believes it has (from the traversal graph; only an ordering hint, the
/// stored `required` decides).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub entity_id: String,
    pub is_update: bool,
    pub input: Json,
    pub expected_required: i64,
}

/// Records `predecessor`'s report on a sync point, in its own
/// transaction (see [`report_tx`]). A deadlock retries the whole
/// transaction.
pub async fn merge(
    db: &Db,
    entity_id: &str,
    traversal: &str,
    is_update: bool,
    predecessor: &str,
    input: &Json,
) -> Result<MergeOutcome, EngineError> {
    let report = Report { entity_id: entity_id.to_string(), is_update, input: input.clone(), expected_required: 2 };
    let outcome = db::retrying("sync point merge", || async {
        let mut tx = db.begin().await?;
        let outcome = report_tx(&mut tx, traversal, predecessor, &report).await?;
        tx.commit().await?;
        Ok(outcome)
    })
    .await?;
    if outcome == MergeOutcome::Gone {
        tracing::debug!(entity_id, traversal, "sync point gone: traversal superseded");
    }
    Ok(outcome)
}

/// A shared locking read: it sees the latest committed rows whatever the
/// transaction's snapshot (MariaDB's repeatable read would otherwise show
/// the rows as of the transaction's first plain read), and shared locks
/// do not wait on each other (a re-delivered report holding a shared lock
/// on an input row never deadlocks the report that completes the point).
/// SQLite serialises writers and needs none.
fn lock_suffix(tx: &Tx) -> &'static str {
    match tx.dialect {
        Dialect::MySql => " LOCK IN SHARE MODE",
        Dialect::Postgres => " FOR SHARE",
        Dialect::Sqlite => "",
    }
}

fn insert_ignore(dialect: Dialect, rows: usize) -> String {
    let values = vec!["(?, ?, ?, ?, ?)"; rows.max(1)].join(", ");
    match dialect {
        Dialect::MySql => {
            format!("INSERT IGNORE INTO sync_point_input (entity_id, traversal_id, is_update, predecessor, input_data) VALUES {values}")
        }
        Dialect::Sqlite | Dialect::Postgres => format!(
            "INSERT INTO sync_point_input (entity_id, traversal_id, is_update, predecessor, input_data) VALUES {values} \
             ON CONFLICT DO NOTHING"
        ),
    }
}

/// Records `predecessor`'s report on one sync point in the caller's
/// transaction. A point with a single predecessor (by the reporter's
/// `expected_required` and the stored `required`) is completed by one
/// UPDATE from `satisfied` 0. Otherwise:
///
/// 1. its input row is inserted unless already there: a re-delivered
///    report counts once (the primary key decides, and concurrent
///    duplicates wait on each other's row);
/// 2. `satisfied` advances by one with a conditional UPDATE that also says
///    whether this report is the last one (`satisfied = required - 1`) or
///    not (`satisfied < required - 1`), tried in the order the reporter's
///    `expected_required` makes likelier; the row lock that UPDATE takes
///    serialises the predecessors of one successor, and only the
///    transaction that makes `satisfied == required` answers
///    [`MergeOutcome::Ready`] with every input (read under that lock);
/// 3. neither UPDATE matching means the point is gone (its traversal was
///    superseded): the input row is removed again.
///
/// The lock is taken after the input insert and held only by the UPDATE
/// and the commit that follows, so reports on a wide fan-in queue for the
/// shortest time.
pub async fn report_tx(
    tx: &mut Tx,
    traversal: &str,
    predecessor: &str,
    report: &Report,
) -> Result<MergeOutcome, DbError> {
    let key: [Value; 3] = [report.entity_id.as_str().into(), traversal.into(), codec::bool_int(report.is_update)];
    let bump = |condition: &str| {
        format!(
            "UPDATE sync_point SET satisfied = satisfied + 1, updated_at = ? \
             WHERE entity_id = ? AND traversal_id = ? AND is_update = ? AND {condition}"
        )
    };
    let mut bump_params = vec![Value::from(db::now())];
    bump_params.extend(key.iter().cloned());
    if report.expected_required <= 1 && tx.execute(&bump("satisfied = 0 AND required = 1"), &bump_params).await? == 1 {
        // This predecessor is the point's only one and the first to report
        // (a re-delivery finds `satisfied` at 1 and takes the general way
        // below): its input is all the inputs there are and nobody reads
        // it back, so it is not stored. The chain and fan-out case: one
        // statement.
        let mut inputs = serde_json::Map::new();
        inputs.insert(predecessor.to_string(), report.input.clone());
        return Ok(MergeOutcome::Ready(inputs));
    }
    let mut params = key.to_vec();
    params.push(predecessor.into());
    params.push(codec::json(&report.input));
    let added = tx.execute(&insert_ignore(tx.dialect, 1), &params).await?;
    let lock = lock_suffix(tx);
    let exists_sql =
        format!("SELECT 1 FROM sync_point WHERE entity_id = ? AND traversal_id = ? AND is_update = ?{lock}");
    if added == 0 {
        // A re-delivery: already counted. Gone if the point is.
        let exists = tx.fetch_optional(&exists_sql, &key).await?.is_some();
        return Ok(if exists { MergeOutcome::Waiting } else { MergeOutcome::Gone });
    }
    let params = bump_params;
    let last = bump("satisfied = required - 1");
    let not_last = bump("satisfied < required - 1");
    let order = if report.expected_required <= 1 {
        [(&last, true), (&not_last, false)]
    } else {
        [(&not_last, false), (&last, true)]
    };
    for (sql, completes) in order {
        if tx.execute(sql, &params).await? == 0 {
            continue;
        }
        if !completes {
            return Ok(MergeOutcome::Waiting);
        }
        let rows = tx
            .fetch_all(
                &format!(
                    "SELECT predecessor, input_data FROM sync_point_input \
                     WHERE entity_id = ? AND traversal_id = ? AND is_update = ?{lock}"
                ),
                &key,
            )
            .await?;
        let mut inputs = serde_json::Map::new();
        for r in &rows {
            inputs.insert(r.string(0)?, codec::read_opt_json(r, 1)?.unwrap_or(Json::Null));
        }
        return Ok(MergeOutcome::Ready(inputs));
    }
    if tx.fetch_optional(&exists_sql, &key).await?.is_some() {
        // More reports than predecessors (cannot happen with one graph per
        // traversal): counted, fires nothing.
        return Ok(MergeOutcome::Waiting);
    }
    let mut params = key.to_vec();
    params.push(predecessor.into());
    tx.execute(
        "DELETE FROM sync_point_input WHERE entity_id = ? AND traversal_id = ? AND is_update = ? AND predecessor = ?",
        &params,
    )
    .await?;
    Ok(MergeOutcome::Gone)
}

/// Rows per statement of [`report_all_tx`]'s batches.
const REPORTS_PER_STATEMENT: usize = 200;

/// Records `predecessor`'s reports on several sync points in the caller's
/// transaction, answering one outcome per report in order. A fan-out's
/// successors that each wait for this predecessor alone (the common wide
/// case) take one UPDATE per batch, completing them all. `None` when
/// the batch did not apply as a whole (a re-delivery, a point gone, a
/// successor with other predecessors): the caller rolls the transaction
/// back and reports one by one with [`report_tx`], which tells each case
/// apart.
pub async fn report_all_tx(
    tx: &mut Tx,
    traversal: &str,
    predecessor: &str,
    reports: &[Report],
) -> Result<Option<Vec<MergeOutcome>>, DbError> {
    let batchable =
        reports.len() > 1 && reports.iter().all(|r| r.expected_required == 1 && r.is_update == reports[0].is_update);
    if !batchable {
        let mut out = Vec::with_capacity(reports.len());
        for r in reports {
            out.push(report_tx(tx, traversal, predecessor, r).await?);
        }
        return Ok(Some(out));
    }
    let is_update = codec::bool_int(reports[0].is_update);
    let mut inputs: std::collections::HashMap<String, serde_json::Map<String, Json>> = std::collections::HashMap::new();
    for chunk in reports.chunks(REPORTS_PER_STATEMENT) {
        let ids: Vec<Value> = chunk.iter().map(|r| Value::from(r.entity_id.as_str())).collect();
        let mut params = vec![Value::from(db::now()), traversal.into(), is_update.clone()];
        params.extend(ids);
        let bumped = tx
            .execute(
                &format!(
                    "UPDATE sync_point SET satisfied = satisfied + 1, updated_at = ? \
                     WHERE traversal_id = ? AND is_update = ? AND entity_id IN ({}) AND satisfied = 0 AND required = 1",
                    db::in_list(chunk.len())
                ),
                &params,
            )
            .await?;
        if bumped != chunk.len() as u64 {
            return Ok(None);
        }
        // Each point waited for this predecessor alone and heard from it
        // first: its input is all the point's inputs (not stored, as in
        // report_tx's single-predecessor case).
        for r in chunk {
            inputs.entry(r.entity_id.clone()).or_default().insert(predecessor.to_string(), r.input.clone());
        }
    }
    Ok(Some(reports.iter().map(|r| MergeOutcome::Ready(inputs.remove(&r.entity_id).unwrap_or_default())).collect()))
}

/// Removes the sync points (and inputs) of one traversal of the stack.
pub async fn delete_for_traversal(db: &Db, stack_id: &str, traversal: &str) -> Result<u64, DbError> {
    db::retrying("sync point removal", || async {
        let mut tx = db.begin().await?;
        let n = delete_for_traversal_tx(&mut tx, stack_id, traversal).await?;
        tx.commit().await?;
        Ok(n)
    })
    .await
}

/// [`delete_for_traversal`] in the caller's transaction.
pub async fn delete_for_traversal_tx(tx: &mut Tx, stack_id: &str, traversal: &str) -> Result<u64, DbError> {
    tx.execute(
        "DELETE FROM sync_point_input WHERE traversal_id = ? AND entity_id IN \
         (SELECT entity_id FROM sync_point WHERE stack_id = ? AND traversal_id = ?)",
        &[traversal.into(), stack_id.into(), traversal.into()],
    )
    .await?;
    tx.execute("DELETE FROM sync_point WHERE stack_id = ? AND traversal_id = ?", &[stack_id.into(), traversal.into()])
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
