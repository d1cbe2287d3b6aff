//! Placement's online data migrations (`placement-manage db
//! online_data_migrations`): data that older releases left incomplete and
//! that the schema revisions after the initial one refuse to upgrade past.
//! Each migration handles at most `limit` rows per call and answers
//! `(found, done)` as upstream's do; both are the rows changed, so a
//! non-zero answer means "call again".

use keelson_db::{now, Db, DbError, Tx};

/// One migration's answer for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchOutcome {
    /// Rows that needed the migration (up to the limit).
    pub found: u64,
    /// Rows migrated.
    pub done: u64,
}

/// Upstream's migrations, in the order `placement-manage` runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnlineMigration {
    SetRootProviderIds,
    CreateIncompleteConsumers,
}

impl OnlineMigration {
    pub const ALL: [OnlineMigration; 2] =
        [OnlineMigration::SetRootProviderIds, OnlineMigration::CreateIncompleteConsumers];

    /// The name placement-manage prints (its Python function's name).
    pub fn name(self) -> &'static str {
        match self {
            OnlineMigration::SetRootProviderIds => "set_root_provider_ids",
            OnlineMigration::CreateIncompleteConsumers => "create_incomplete_consumers",
        }
    }
}

/// The project and user recorded for consumers that had none
/// (`[placement] incomplete_consumer_project_id` / `_user_id`).
#[derive(Debug, Clone)]
pub struct IncompleteConsumerOwner {
    pub project: String,
    pub user: String,
}

/// Runs one batch of `migration` over at most `limit` rows, in one
/// transaction.
pub async fn run_batch(
    db: &Db,
    migration: OnlineMigration,
    limit: u64,
    owner: &IncompleteConsumerOwner,
) -> Result<BatchOutcome, DbError> {
    let mut tx = db.begin().await?;
    let changed = match migration {
        OnlineMigration::SetRootProviderIds => set_root_provider_ids(&mut tx, limit).await?,
        OnlineMigration::CreateIncompleteConsumers => create_incomplete_consumers(&mut tx, limit, owner).await?,
    };
    tx.commit().await?;
    Ok(BatchOutcome { found: changed, done: changed })
}

/// Providers written before root provider ids existed become their own
/// root, as upstream does (such providers predate nesting).
async fn set_root_provider_ids(tx: &mut Tx, limit: u64) -> Result<u64, DbError> {
    // The doubly nested select lets MySQL limit a subquery of the table
    // being updated; the limit is a number, formatted in.
    tx.execute(
        &format!(
            "UPDATE resource_providers SET root_provider_id = id WHERE id IN \
             (SELECT pending.id FROM (SELECT id FROM resource_providers WHERE root_provider_id IS NULL LIMIT {limit}) AS pending)"
        ),
        &[],
    )
    .await
}

/// Allocations written before consumers had records get one, owned by the
/// incomplete-consumer project and user (created when missing, on every
/// run, as upstream does).
async fn create_incomplete_consumers(tx: &mut Tx, limit: u64, owner: &IncompleteConsumerOwner) -> Result<u64, DbError> {
    let project = ensure_external_id(tx, "projects", &owner.project).await?;
    let user = ensure_external_id(tx, "users", &owner.user).await?;
    tx.execute(
        &format!(
            "INSERT INTO consumers (uuid, project_id, user_id, generation, created_at) \
             SELECT allocations.consumer_id, ?, ?, 0, ? FROM allocations \
             LEFT OUTER JOIN consumers ON allocations.consumer_id = consumers.uuid \
             WHERE consumers.id IS NULL GROUP BY allocations.consumer_id LIMIT {limit}"
        ),
        &[project.into(), user.into(), now().into()],
    )
    .await
}

async fn ensure_external_id(tx: &mut Tx, table: &str, external_id: &str) -> Result<i64, DbError> {
    let rows = tx
        .fetch_all(&format!("SELECT id, external_id FROM {table} WHERE external_id = ?"), &[external_id.into()])
        .await?;
    // MariaDB compares case-insensitively; external ids are exact.
    for row in &rows {
        if row.string(1)? == external_id {
            return row.i64(0);
        }
    }
    tx.insert(
        &format!("INSERT INTO {table} (external_id, created_at) VALUES (?, ?)"),
        &[external_id.into(), now().into()],
    )
    .await
}

/// How many providers still lack a root provider id.
pub async fn count_missing_root_provider_ids(db: &Db) -> Result<i64, DbError> {
    count(db, "SELECT COUNT(*) FROM resource_providers WHERE root_provider_id IS NULL").await
}

/// How many distinct consumers of allocations have no consumer record.
pub async fn count_incomplete_consumers(db: &Db) -> Result<i64, DbError> {
    count(
        db,
        "SELECT COUNT(DISTINCT allocations.consumer_id) FROM allocations \
         LEFT OUTER JOIN consumers ON allocations.consumer_id = consumers.uuid WHERE consumers.id IS NULL",
    )
    .await
}

async fn count(db: &Db, sql: &str) -> Result<i64, DbError> {
    let rows = db.fetch_all(sql, &[]).await?;
    rows.first().map(|r| r.i64(0)).transpose().map(|n| n.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;
    use keelson_db::{DatabaseUrl, PoolSettings};

    const OWNER_ID: &str = "00000000-0000-0000-0000-000000000000";

    fn owner() -> IncompleteConsumerOwner {
        IncompleteConsumerOwner { project: OWNER_ID.into(), user: OWNER_ID.into() }
    }

    #[tokio::test]
    async fn batches_migrate_old_rows_on_sqlite() {
        let db = Db::connect(&DatabaseUrl::parse("sqlite://").unwrap(), &PoolSettings::default()).await.unwrap();
        schema::sync(&db).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        for i in 1..=3 {
            tx.execute(
                "INSERT INTO resource_providers (id, uuid, name, generation) VALUES (?, ?, ?, 0)",
                &[i.into(), format!("rp-{i}").into(), format!("rp{i}").into()],
            )
            .await
            .unwrap();
        }
        for (rp, consumer, rc) in [(1, "c1", 0), (1, "c1", 1), (2, "c2", 0)] {
            tx.execute(
                "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) VALUES (?, ?, ?, 1)",
                &[i64::from(rp).into(), consumer.into(), i64::from(rc).into()],
            )
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
        assert_eq!(count_missing_root_provider_ids(&db).await.unwrap(), 3);
        assert_eq!(count_incomplete_consumers(&db).await.unwrap(), 2);

        let root = OnlineMigration::SetRootProviderIds;
        let consumers = OnlineMigration::CreateIncompleteConsumers;
        assert_eq!(run_batch(&db, root, 2, &owner()).await.unwrap(), BatchOutcome { found: 2, done: 2 });
        assert_eq!(run_batch(&db, root, 2, &owner()).await.unwrap(), BatchOutcome { found: 1, done: 1 });
        assert_eq!(run_batch(&db, root, 2, &owner()).await.unwrap(), BatchOutcome::default());
        assert_eq!(run_batch(&db, consumers, 1, &owner()).await.unwrap(), BatchOutcome { found: 1, done: 1 });
        assert_eq!(run_batch(&db, consumers, 5, &owner()).await.unwrap(), BatchOutcome { found: 1, done: 1 });
        assert_eq!(run_batch(&db, consumers, 5, &owner()).await.unwrap(), BatchOutcome::default());
        assert_eq!(count_missing_root_provider_ids(&db).await.unwrap(), 0);
        assert_eq!(count_incomplete_consumers(&db).await.unwrap(), 0);
        let roots =
            db.fetch_all("SELECT COUNT(*) FROM resource_providers WHERE root_provider_id = id", &[]).await.unwrap();
        assert_eq!(roots[0].i64(0).unwrap(), 3);
        let projects = db.fetch_all("SELECT external_id FROM projects", &[]).await.unwrap();
        assert_eq!(projects.len(), 1);
        assert_eq!(projects[0].string(0).unwrap(), OWNER_ID);
    }
}
