//! `service`: the engine registry. Each engine process registers a row
//! and refreshes `updated_at` by heartbeat; a row not refreshed within
//! `max_age` belongs to a dead engine (its resource locks may be stolen).

use std::time::Duration;

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Row};

/// A `service` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceRow {
    pub id: String,
    pub engine_id: String,
    pub host: String,
    pub hostname: String,
    pub binary_name: String,
    pub topic: String,
    pub report_interval: i64,
    /// The engine's EngineWorker gRPC address (http://host:port).
    pub worker_endpoint: String,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub deleted_at: Option<NaiveDateTime>,
}

const COLUMNS: &str =
    "id, engine_id, host, hostname, binary_name, topic, report_interval, worker_endpoint, created_at, updated_at, deleted_at";

/// Heat's values for the engine service.
pub const BINARY: &str = "heat-engine";
pub const TOPIC: &str = "engine";

fn from_row(row: &Row) -> Result<ServiceRow, DbError> {
    Ok(ServiceRow {
        id: row.string(0)?,
        engine_id: row.string(1)?,
        host: row.opt_string(2)?.unwrap_or_default(),
        hostname: row.opt_string(3)?.unwrap_or_default(),
        binary_name: row.opt_string(4)?.unwrap_or_default(),
        topic: row.opt_string(5)?.unwrap_or_default(),
        report_interval: row.opt_i64(6)?.unwrap_or_default(),
        worker_endpoint: row.opt_string(7)?.unwrap_or_default(),
        created_at: row.opt_time(8)?,
        updated_at: row.opt_time(9)?,
        deleted_at: row.opt_time(10)?,
    })
}

/// Registers an engine (or refreshes its row if `engine_id` is known);
/// answers the stored row.
pub async fn register(
    db: &Db,
    engine_id: &str,
    host: &str,
    hostname: &str,
    worker_endpoint: &str,
    report_interval: i64,
) -> Result<ServiceRow, DbError> {
    let now = db::now();
    let mut tx = db.begin().await?;
    let updated = tx
        .execute(
            "UPDATE service SET host = ?, hostname = ?, worker_endpoint = ?, report_interval = ?, updated_at = ?, \
             deleted_at = NULL WHERE engine_id = ?",
            &[
                host.into(),
                hostname.into(),
                worker_endpoint.into(),
                report_interval.into(),
                now.into(),
                engine_id.into(),
            ],
        )
        .await?;
    if updated == 0 {
        tx.execute(
            &format!("INSERT INTO service ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            &[
                uuid::Uuid::new_v4().to_string().into(),
                engine_id.into(),
                host.into(),
                hostname.into(),
                BINARY.into(),
                TOPIC.into(),
                report_interval.into(),
                worker_endpoint.into(),
                now.into(),
                now.into(),
                db::Value::Null(db::Kind::Time),
            ],
        )
        .await?;
    }
    let row =
        tx.fetch_optional(&format!("SELECT {COLUMNS} FROM service WHERE engine_id = ?"), &[engine_id.into()]).await?;
    tx.commit().await?;
    row.as_ref()
        .map(from_row)
        .transpose()?
        .ok_or_else(|| DbError::Schema(format!("service row of engine {engine_id} vanished")))
}

/// Refreshes the engine's `updated_at`; false if it is not registered.
pub async fn heartbeat(db: &Db, engine_id: &str) -> Result<bool, DbError> {
    let sql = "UPDATE service SET updated_at = ? WHERE engine_id = ? AND deleted_at IS NULL";
    Ok(super::write_one(db, "engine heartbeat", sql, &[db::now().into(), engine_id.into()]).await? > 0)
}

fn cutoff(max_age: Duration) -> NaiveDateTime {
    let age = chrono::Duration::from_std(max_age).unwrap_or(chrono::Duration::MAX);
    db::now().checked_sub_signed(age).unwrap_or(NaiveDateTime::MIN)
}

/// The engines that reported within `max_age`.
pub async fn live(db: &Db, max_age: Duration) -> Result<Vec<ServiceRow>, DbError> {
    let rows = db
        .fetch_all(
            &format!(
                "SELECT {COLUMNS} FROM service WHERE deleted_at IS NULL AND updated_at >= ? ORDER BY created_at, id"
            ),
            &[cutoff(max_age).into()],
        )
        .await?;
    rows.iter().map(from_row).collect()
}

/// Every registered engine, dead ones included.
pub async fn list(db: &Db) -> Result<Vec<ServiceRow>, DbError> {
    let rows = db.fetch_all(&format!("SELECT {COLUMNS} FROM service ORDER BY created_at, id"), &[]).await?;
    rows.iter().map(from_row).collect()
}

/// Removes the rows of engines silent for longer than `max_age`; answers
/// how many.
pub async fn cleanup_stale(db: &Db, max_age: Duration) -> Result<u64, DbError> {
    super::write_one(db, "engine cleanup", "DELETE FROM service WHERE updated_at < ?", &[cutoff(max_age).into()]).await
}

/// Removes an engine's row (clean shutdown).
pub async fn deregister(db: &Db, engine_id: &str) -> Result<bool, DbError> {
    let sql = "DELETE FROM service WHERE engine_id = ?";
    Ok(super::write_one(db, "engine deregistration", sql, &[engine_id.into()]).await? > 0)
}
