//! SQL for Placement's objects. Each write runs in one transaction and
//! applies completely or not at all.

pub mod aggregates;
pub mod allocations;
pub mod consumers;
pub mod fleet;
pub mod inventories;
pub mod providers;
pub mod reshaper;
pub mod resource_classes;
pub mod traits;
pub mod usages;

use keelson_db::Db;
use keelson_db::{now, Cells, Tx};
use keelson_runtime::config::clamp_u32;
use keelson_runtime::Config;

use crate::error::{Error, Result};
use crate::options;

/// Options from `[placement]` that change how writes behave.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    /// `allocation_conflict_retry_count`: server-side retries of an
    /// allocation write that lost a provider-generation race.
    pub allocation_conflict_retry_count: u32,
    /// Project and user recorded for consumers created without them.
    pub incomplete_consumer_project_id: String,
    pub incomplete_consumer_user_id: String,
}

/// The options' defaults.
impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings::from_config(&Config::default())
    }
}

impl StoreSettings {
    /// From the `[placement]` options.
    pub fn from_config(config: &Config) -> Self {
        StoreSettings {
            allocation_conflict_retry_count: clamp_u32(config.get(&options::ALLOCATION_CONFLICT_RETRY_COUNT)),
            incomplete_consumer_project_id: config.get(&options::INCOMPLETE_CONSUMER_PROJECT_ID),
            incomplete_consumer_user_id: config.get(&options::INCOMPLETE_CONSUMER_USER_ID),
        }
    }
}

/// The inventory service's handle on its database.
#[derive(Clone, Debug)]
pub struct Store {
    pub db: Db,
    pub settings: StoreSettings,
}

impl Store {
    pub fn new(db: Db, settings: StoreSettings) -> Self {
        Store { db, settings }
    }
}

/// Upstream's update-conflict text for a provider write that lost to
/// another writer (its generation, or every attempt to write conflicts).
pub(crate) const WRITE_CONFLICT: &str =
    "Update conflict: Another thread concurrently updated the resource provider data. Please retry your update";

/// Runs `transaction` (one whole write transaction, begun and committed
/// inside) again while the database refuses it as a write conflict
/// (deadlock, serialization failure, Galera certification, SQLite busy) or
/// has no connection free; a write that lost every attempt to other
/// writers answers 409 `placement.concurrent_update`, not 500.
pub(crate) async fn write_retrying<T, F, Fut>(what: &'static str, transaction: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    keelson_db::retrying_transaction(what, transaction).await.map_err(|e| match e {
        Error::Db(db) if db.is_write_conflict() => {
            tracing::warn!(target: "keelson::inventory", "Gave up a {what} after {} attempts: {db}", keelson_db::TRANSACTION_ATTEMPTS);
            Error::concurrent_update(WRITE_CONFLICT)
        }
        other => other,
    })
}

/// A resource provider row.
#[derive(Debug, Clone)]
pub struct ProviderRow {
    pub id: i64,
    pub uuid: String,
    pub name: Option<String>,
    pub generation: i64,
    pub parent_id: Option<i64>,
    pub root_id: Option<i64>,
    pub created_at: Option<chrono::NaiveDateTime>,
    pub updated_at: Option<chrono::NaiveDateTime>,
}

impl ProviderRow {
    /// Columns in the order [`ProviderRow::from_row`] reads them.
    pub const COLUMNS: &'static str =
        "rp.id, rp.uuid, rp.name, rp.generation, rp.parent_provider_id, rp.root_provider_id, rp.created_at, rp.updated_at";

    pub fn from_row(r: &impl Cells) -> Result<Self> {
        Ok(ProviderRow {
            id: r.i64(0)?,
            uuid: r.string(1)?,
            name: r.opt_string(2)?,
            generation: r.opt_i64(3)?.unwrap_or(0),
            parent_id: r.opt_i64(4)?,
            root_id: r.opt_i64(5)?,
            created_at: r.opt_time(6)?,
            updated_at: r.opt_time(7)?,
        })
    }

    /// When the provider last changed (what `Last-Modified` reports).
    pub fn last_modified(&self) -> Option<chrono::NaiveDateTime> {
        self.updated_at.or(self.created_at)
    }
}

/// Finds a provider by uuid.
pub async fn find_provider(tx: &mut Tx, uuid: &str) -> Result<Option<ProviderRow>> {
    let sql = format!("SELECT {} FROM resource_providers rp WHERE rp.uuid = ?", ProviderRow::COLUMNS);
    match tx.fetch_optional(&sql, &[uuid.into()]).await? {
        Some(r) => Ok(Some(ProviderRow::from_row(&r)?)),
        None => Ok(None),
    }
}

/// Finds a provider by uuid, or 404 with upstream's text.
pub async fn get_provider(tx: &mut Tx, uuid: &str) -> Result<ProviderRow> {
    find_provider(tx, uuid)
        .await?
        .ok_or_else(|| Error::NotFound(format!("No resource provider with uuid {uuid} found")))
}

/// Moves a provider's generation from `expected` to `expected + 1`; a
/// concurrent writer that got there first makes this fail with
/// `placement.concurrent_update` and nothing is written.
pub async fn bump_generation(tx: &mut Tx, provider: &ProviderRow, expected: i64) -> Result<i64> {
    let changed = tx
        .execute(
            "UPDATE resource_providers SET generation = ?, updated_at = ? WHERE id = ? AND generation = ?",
            &[(expected + 1).into(), now().into(), provider.id.into(), expected.into()],
        )
        .await?;
    if changed == 0 {
        return Err(Error::concurrent_update(format!(
            "resource provider generation conflict: {} generation {expected} is stale",
            provider.uuid
        )));
    }
    Ok(expected + 1)
}

/// The id of a resource class by name.
pub async fn resource_class_id(tx: &mut Tx, name: &str) -> Result<Option<i64>> {
    Ok(tx
        .fetch_optional("SELECT id FROM resource_classes WHERE name = ?", &[name.into()])
        .await?
        .map(|r| r.i64(0))
        .transpose()?)
}

/// `SUM(expr)` as an integer on every backend: PostgreSQL sums integers
/// as NUMERIC, which the database layer does not decode.
pub fn sum_as_bigint(dialect: keelson_db::Dialect, expr: &str) -> String {
    match dialect {
        keelson_db::Dialect::Postgres => format!("CAST(SUM({expr}) AS BIGINT)"),
        _ => format!("SUM({expr})"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use keelson_db::DbError;

    /// MariaDB's answer to a transaction that lost a deadlock or, on
    /// Galera, certification at COMMIT (1213, SQLSTATE 40001).
    #[derive(Debug)]
    struct Deadlock;

    impl std::fmt::Display for Deadlock {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(sqlx::error::DatabaseError::message(self))
        }
    }

    impl std::error::Error for Deadlock {}

    impl sqlx::error::DatabaseError for Deadlock {
        fn message(&self) -> &str {
            "Deadlock found when trying to get lock; try restarting transaction"
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some("40001".into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    /// A deadlock as sqlx reports MariaDB's.
    pub(crate) fn deadlock() -> DbError {
        DbError::Sqlx(sqlx::Error::Database(Box::new(Deadlock)))
    }

    /// Every write transaction outside the allocation writes (their own
    /// loop) runs again after a deadlock, and one that loses every attempt
    /// is the 409 a client retries, never a 500; other failures are not
    /// retried.
    #[tokio::test]
    async fn writes_run_again_after_deadlocks_and_give_up_as_a_concurrent_update() {
        let mut runs = 0;
        let outcome = write_retrying("test write", || {
            runs += 1;
            let run = runs;
            async move {
                if run < 3 {
                    Err(Error::Db(deadlock()))
                } else {
                    Ok(run)
                }
            }
        })
        .await;
        assert_eq!(outcome.unwrap(), 3);

        let mut runs = 0;
        let outcome: Result<()> = write_retrying("test write", || {
            runs += 1;
            async { Err(Error::Db(deadlock())) }
        })
        .await;
        assert!(matches!(outcome, Err(Error::Conflict(crate::error::CONCURRENT_UPDATE, ref d)) if d == WRITE_CONFLICT));
        assert_eq!(runs, keelson_db::TRANSACTION_ATTEMPTS);

        let mut runs = 0;
        let outcome: Result<()> = write_retrying("test write", || {
            runs += 1;
            async { Err(Error::NotFound("gone".into())) }
        })
        .await;
        assert!(matches!(outcome, Err(Error::NotFound(_))));
        assert_eq!(runs, 1);
    }
}
