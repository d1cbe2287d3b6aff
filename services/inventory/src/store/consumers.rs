//! Consumers (what holds allocations), with the projects, users and
//! consumer types they reference.
//!
//! A consumer exists while it holds allocations: it is created by its
//! first allocation write and deleted by the write (or delete) that leaves
//! it without any. Its generation moves on with every allocation write.

use keelson_db::{in_list, now, Tx, Value, IN_LIST_CHUNK};

use crate::error::Result;

/// A consumer row with its project's, user's and type's external names.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerRow {
    pub id: i64,
    pub uuid: String,
    pub project_id: i64,
    pub project: String,
    pub user_id: i64,
    pub user: String,
    pub generation: i64,
    pub consumer_type_id: Option<i64>,
    pub consumer_type: Option<String>,
}

/// Finds a consumer by uuid.
pub async fn find_consumer(tx: &mut Tx, uuid: &str) -> Result<Option<ConsumerRow>> {
    let row = tx
        .fetch_optional(
            "SELECT c.id, c.uuid, p.id, p.external_id, u.id, u.external_id, c.generation, c.consumer_type_id, ct.name \
             FROM consumers c \
             JOIN projects p ON p.id = c.project_id \
             JOIN users u ON u.id = c.user_id \
             LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id \
             WHERE c.uuid = ?",
            &[uuid.into()],
        )
        .await?;
    let Some(r) = row else { return Ok(None) };
    Ok(Some(ConsumerRow {
        id: r.i64(0)?,
        uuid: r.string(1)?,
        project_id: r.i64(2)?,
        project: r.string(3)?,
        user_id: r.i64(4)?,
        user: r.string(5)?,
        generation: r.i64(6)?,
        consumer_type_id: r.opt_i64(7)?,
        consumer_type: r.opt_string(8)?,
    }))
}

/// The id of the row of `table` whose `column` is exactly `value`, created
/// when missing. A concurrent creator makes the insert fail with a unique
/// violation, which the caller's transaction retry handles.
async fn ensure_named(tx: &mut Tx, table: &str, column: &str, value: &str) -> Result<i64> {
    let rows = tx.fetch_all(&format!("SELECT id, {column} FROM {table} WHERE {column} = ?"), &[value.into()]).await?;
    // MariaDB matches case-insensitively; external ids are exact.
    for r in &rows {
        if r.string(1)? == value {
            return Ok(r.i64(0)?);
        }
    }
    let id = tx
        .insert(&format!("INSERT INTO {table} ({column}, created_at) VALUES (?, ?)"), &[value.into(), now().into()])
        .await?;
    Ok(id)
}

/// The internal id of a project, created on first use.
pub async fn ensure_project(tx: &mut Tx, external_id: &str) -> Result<i64> {
    ensure_named(tx, "projects", "external_id", external_id).await
}

/// The internal id of a user, created on first use.
pub async fn ensure_user(tx: &mut Tx, external_id: &str) -> Result<i64> {
    ensure_named(tx, "users", "external_id", external_id).await
}

/// The id of a consumer type, created on first use.
pub async fn ensure_consumer_type(tx: &mut Tx, name: &str) -> Result<i64> {
    ensure_named(tx, "consumer_types", "name", name).await
}

/// Creates a consumer at generation 0.
pub async fn create_consumer(
    tx: &mut Tx,
    uuid: &str,
    project: (i64, &str),
    user: (i64, &str),
    consumer_type: Option<(i64, &str)>,
) -> Result<ConsumerRow> {
    let id = tx
        .insert(
            "INSERT INTO consumers (uuid, project_id, user_id, generation, consumer_type_id, created_at) VALUES (?, ?, ?, 0, ?, ?)",
            &[uuid.into(), project.0.into(), user.0.into(), consumer_type.map(|t| t.0).into(), now().into()],
        )
        .await?;
    Ok(ConsumerRow {
        id,
        uuid: uuid.to_string(),
        project_id: project.0,
        project: project.1.to_string(),
        user_id: user.0,
        user: user.1.to_string(),
        generation: 0,
        consumer_type_id: consumer_type.map(|t| t.0),
        consumer_type: consumer_type.map(|t| t.1.to_string()),
    })
}

/// Records a consumer's project, user and type without moving its
/// generation (the allocation write that follows moves it). Guarded by the
/// generation read, so a concurrent writer's change is not overwritten.
pub async fn update_consumer(tx: &mut Tx, c: &ConsumerRow) -> Result<()> {
    tx.execute(
        "UPDATE consumers SET project_id = ?, user_id = ?, consumer_type_id = ?, updated_at = ? WHERE id = ? AND generation = ?",
        &[c.project_id.into(), c.user_id.into(), c.consumer_type_id.into(), now().into(), c.id.into(), c.generation.into()],
    )
    .await?;
    Ok(())
}

/// Moves a consumer's generation from `expected` to `expected + 1`;
/// `false` when another writer moved it first.
pub async fn increment_consumer_generation(tx: &mut Tx, consumer_id: i64, expected: i64) -> Result<bool> {
    let changed = tx
        .execute(
            "UPDATE consumers SET generation = ?, updated_at = ? WHERE id = ? AND generation = ?",
            &[(expected + 1).into(), now().into(), consumer_id.into(), expected.into()],
        )
        .await?;
    Ok(changed == 1)
}

/// Deletes consumer rows by id. The caller moved each one's generation in
/// this transaction and removed every allocation it held: every allocation
/// write of a consumer moves its generation (a compare-and-swap on its
/// row), so no other writer can have given it one since, and no read of
/// the allocations table is needed (a `NOT EXISTS` over it took gap locks
/// on MariaDB that concurrent inserts of other consumers' allocations ran
/// into, and decided from a read that Galera's certification does not see).
pub async fn delete_consumers(tx: &mut Tx, ids: &[i64]) -> Result<()> {
    let params: Vec<Value> = ids.iter().map(|id| Value::from(*id)).collect();
    for chunk in params.chunks(IN_LIST_CHUNK) {
        tx.execute(&format!("DELETE FROM consumers WHERE id IN ({})", in_list(chunk.len())), chunk).await?;
    }
    Ok(())
}

/// Shared set-up for the store's unit tests: an in-memory database with
/// the standard classes, and providers and allocations written directly.
#[cfg(test)]
pub(crate) mod test_support {
    use keelson_db::Db;
    use keelson_db::{now, DatabaseUrl, PoolSettings};
    use keelson_placement_schema::{schema, seed};

    use crate::store::{Store, StoreSettings};

    pub async fn store() -> Store {
        let db = Db::connect(&DatabaseUrl::parse("sqlite://").unwrap(), &PoolSettings::default()).await.unwrap();
        schema::sync(&db).await.unwrap();
        seed::seed_standard(&db).await.unwrap();
        Store::new(db, StoreSettings::default())
    }

    /// Inserts a root provider named `name`; answers its uuid.
    pub async fn provider(store: &Store, name: &str) -> String {
        let uuid = uuid::Uuid::new_v4().to_string();
        let mut tx = store.db.begin().await.unwrap();
        let id = tx
            .insert(
                "INSERT INTO resource_providers (uuid, name, generation, created_at) VALUES (?, ?, 0, ?)",
                &[uuid.as_str().into(), name.into(), now().into()],
            )
            .await
            .unwrap();
        tx.execute("UPDATE resource_providers SET root_provider_id = ? WHERE id = ?", &[id.into(), id.into()])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        uuid
    }

    /// Writes allocation rows directly (no consumer, no checks).
    pub async fn allocate_raw(store: &Store, provider_uuid: &str, consumer: &str, amounts: &[(&str, i64)]) {
        let mut tx = store.db.begin().await.unwrap();
        let rp = tx
            .fetch_optional("SELECT id FROM resource_providers WHERE uuid = ?", &[provider_uuid.into()])
            .await
            .unwrap();
        let rp_id = rp.unwrap().i64(0).unwrap();
        for (rc, used) in amounts {
            let rc_id =
                tx.fetch_optional("SELECT id FROM resource_classes WHERE name = ?", &[(*rc).into()]).await.unwrap();
            tx.execute(
                "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at) VALUES (?, ?, ?, ?, ?)",
                &[rp_id.into(), consumer.into(), rc_id.unwrap().i64(0).unwrap().into(), (*used).into(), now().into()],
            )
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
    }
}
