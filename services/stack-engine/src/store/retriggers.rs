//! `watchdog_retrigger`: how often the watchdog has re-run a stack's
//! stuck operation, kept in the database so that the count survives the
//! engine that dies running it. One row per stack while it is
//! IN_PROGRESS; the row names the traversal the watchdog found stuck and,
//! once known, the one it started instead.

use keelson_db::{self as db, Db, DbError};

/// A stack's re-trigger record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetriggerRow {
    pub stack_id: String,
    /// Re-triggers so far of this operation.
    pub retriggers: i64,
    /// The traversal found stuck at the last re-trigger.
    pub stuck_traversal: String,
    /// The traversal that re-trigger started (None until recorded: the
    /// engine may die before it records it).
    pub started_traversal: Option<String>,
}

impl RetriggerRow {
    /// Whether the stack's current traversal `traversal` is the watchdog's
    /// own last re-trigger (or the attempt of it, if it never started):
    /// the operation it re-ran got stuck again.
    pub fn covers(&self, traversal: &str) -> bool {
        self.stuck_traversal == traversal || self.started_traversal.as_deref().is_none_or(|t| t == traversal)
    }
}

pub async fn get(db: &Db, stack_id: &str) -> Result<Option<RetriggerRow>, DbError> {
    let rows = db
        .fetch_all(
            "SELECT stack_id, retriggers, stuck_traversal, started_traversal FROM watchdog_retrigger WHERE stack_id = ?",
            &[stack_id.into()],
        )
        .await?;
    rows.first()
        .map(|r| {
            Ok(RetriggerRow {
                stack_id: r.string(0)?,
                retriggers: r.i64(1)?,
                stuck_traversal: r.string(2)?,
                started_traversal: r.opt_string(3)?,
            })
        })
        .transpose()
}

/// Records, before the watchdog re-runs `stuck_traversal`'s operation,
/// that this is re-trigger number `retriggers` (so a crash during it is
/// counted).
pub async fn record_attempt(db: &Db, stack_id: &str, stuck_traversal: &str, retriggers: i64) -> Result<(), DbError> {
    db::retrying("watchdog re-trigger", || async {
        let mut tx = db.begin().await?;
        tx.execute("DELETE FROM watchdog_retrigger WHERE stack_id = ?", &[stack_id.into()]).await?;
        tx.execute(
            "INSERT INTO watchdog_retrigger (stack_id, retriggers, stuck_traversal, started_traversal, updated_at) VALUES (?, ?, ?, NULL, ?)",
            &[stack_id.into(), retriggers.into(), stuck_traversal.into(), db::now().into()],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    })
    .await
}

/// The traversal the last re-trigger started.
pub async fn record_started(db: &Db, stack_id: &str, traversal: &str) -> Result<(), DbError> {
    let sql = "UPDATE watchdog_retrigger SET started_traversal = ?, updated_at = ? WHERE stack_id = ?";
    super::write_one(db, "watchdog re-trigger", sql, &[traversal.into(), db::now().into(), stack_id.into()]).await?;
    Ok(())
}

pub async fn forget(db: &Db, stack_id: &str) -> Result<(), DbError> {
    super::write_one(
        db,
        "watchdog re-trigger",
        "DELETE FROM watchdog_retrigger WHERE stack_id = ?",
        &[stack_id.into()],
    )
    .await?;
    Ok(())
}

/// Drops the records of stacks no longer IN_PROGRESS (their operation
/// ended, one way or the other): a later operation starts counting anew.
pub async fn forget_settled(db: &Db) -> Result<u64, DbError> {
    let sql = "DELETE FROM watchdog_retrigger WHERE stack_id NOT IN \
               (SELECT id FROM stack WHERE status = 'IN_PROGRESS' AND deleted_at IS NULL)";
    super::write_one(db, "watchdog re-trigger", sql, &[]).await
}
