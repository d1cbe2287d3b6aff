//! The API's reads: the store's rows, scoped to the caller's tenant. The
//! filters, tags, sort and pagination of `GET /stacks` are applied to the
//! tenant's rows in `stacks` (a tenant's stacks are few, bounded by
//! `max_stacks_per_tenant`); events are filtered and paged in SQL by the
//! store.

use keelson_db::{Db, DbError};
use serde_json::Value as Json;

use crate::error::EngineError;
use crate::store;
pub use crate::store::{Action, EventQuery, EventRow, RawTemplateRow, ResourceRow, ServiceRow, StackRow, Status};

/// A stack by id in `tenant` (or whose stack-user project `tenant` is,
/// as Heat's `_get_stack` allows its stack users), in any project when
/// `tenant` is None (an admin's lookup), soft-deleted ones included.
pub async fn stack_by_id(db: &Db, tenant: Option<&str>, id: &str) -> Result<Option<StackRow>, DbError> {
    Ok(store::stacks::get(db, id).await?.filter(|s| match tenant {
        Some(t) => s.tenant == t || s.stack_user_project_id.as_deref() == Some(t),
        None => true,
    }))
}

/// The live (not soft-deleted) stack called `name` in `tenant`.
pub async fn stack_by_name(db: &Db, tenant: &str, name: &str) -> Result<Option<StackRow>, DbError> {
    store::stacks::get_by_name(db, tenant, name).await
}

/// The live nested stacks of `owner_id` (one level).
pub async fn child_stacks(db: &Db, owner_id: &str) -> Result<Vec<StackRow>, DbError> {
    store::stacks::children(db, owner_id).await
}

/// The stacks of `tenant` (None = every tenant) before the API's filters.
pub async fn stacks(
    db: &Db,
    tenant: Option<&str>,
    show_deleted: bool,
    show_nested: bool,
) -> Result<Vec<StackRow>, DbError> {
    store::stacks::list_for_tenant(db, tenant, show_deleted, show_nested).await
}

/// How many live stacks `tenant` has (`max_stacks_per_tenant`).
pub async fn count_stacks(db: &Db, tenant: &str) -> Result<i64, DbError> {
    store::stacks::count_live(db, tenant).await
}

/// The stored definition of a stack (an empty one if it is gone).
pub async fn raw_template(db: &Db, id: i64) -> Result<RawTemplateRow, DbError> {
    Ok(store::templates::get(db, id).await?.unwrap_or(RawTemplateRow {
        id,
        template: Json::Object(Default::default()),
        files: Default::default(),
        environment: Json::Object(Default::default()),
        created_at: None,
        updated_at: None,
    }))
}

/// Every resource row of a stack (replaced and replacement rows included), by id.
pub async fn resources(db: &Db, stack_id: &str) -> Result<Vec<ResourceRow>, DbError> {
    store::resources::list(db, stack_id).await
}

/// resource_data of one resource as the plugin sees it.
pub async fn resource_data(db: &Db, resource_id: i64) -> Result<std::collections::BTreeMap<String, String>, DbError> {
    Ok(store::resources::data_get_all(db, resource_id).await?.into_iter().map(|(k, entry)| (k, entry.value)).collect())
}

pub async fn events(db: &Db, query: &EventQuery) -> Result<Vec<EventRow>, EngineError> {
    store::events::list(db, query).await
}

pub async fn services(db: &Db) -> Result<Vec<ServiceRow>, DbError> {
    store::services::list(db).await
}
