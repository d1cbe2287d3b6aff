//! A provider's inventories: one record per resource class with its
//! total, reserved amount, allocation constraints and overcommit ratio.
//!
//! Every change moves the provider's generation on by one, guarded by the
//! generation the change was computed from, so two writers never both win.

use std::collections::{BTreeSet, HashMap};

use keelson_db::DbError;
use keelson_db::{in_list, now, Dialect, Row, Tx, Value};

use super::{find_provider, write_retrying, ProviderRow, Store};
use crate::error::{Error, Result, CONCURRENT_UPDATE, INVENTORY_INUSE};

/// Placement's largest inventory value (a signed 32-bit column upstream).
pub const MAX_INT: i64 = 2_147_483_647;

/// Upstream's text when a provider generation moved under a write.
pub const PROVIDER_CONCURRENT_UPDATE: &str =
    "Another thread concurrently updated the resource provider data. Please retry your update";

/// One inventory record.
#[derive(Debug, Clone, PartialEq)]
pub struct InventoryRecord {
    pub resource_class: String,
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    pub allocation_ratio: f64,
    pub created_at: Option<chrono::NaiveDateTime>,
    pub updated_at: Option<chrono::NaiveDateTime>,
}

impl InventoryRecord {
    /// A record with Placement's defaults for everything but the total.
    pub fn new(resource_class: &str, total: i64) -> Self {
        InventoryRecord {
            resource_class: resource_class.to_string(),
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: MAX_INT,
            step_size: 1,
            allocation_ratio: 1.0,
            created_at: None,
            updated_at: None,
        }
    }

    /// What can be allocated, as Placement validates inventories: the
    /// overcommitted free amount truncated towards zero.
    pub fn capacity(&self) -> i64 {
        // `as` saturates a product past i64 (allocation_ratio goes to 3.4e38).
        #[allow(clippy::cast_possible_truncation)]
        let capacity = (self.total.saturating_sub(self.reserved) as f64 * self.allocation_ratio) as i64;
        capacity
    }

    pub fn last_modified(&self) -> Option<chrono::NaiveDateTime> {
        self.updated_at.or(self.created_at)
    }
}

/// Checks that an inventory leaves something to allocate. From REST 1.26
/// reserved may equal total (`allow_reserved_equal_total`); the message is
/// upstream's.
pub fn validate_capacity(
    provider_uuid: &str,
    inv: &InventoryRecord,
    allow_reserved_equal_total: bool,
) -> std::result::Result<(), String> {
    let capacity = inv.capacity();
    let (bad, which) = if allow_reserved_equal_total {
        (capacity < 0, "greater than total")
    } else {
        (capacity <= 0, "greater than or equal to total")
    };
    if bad {
        return Err(format!(
            "Invalid inventory for '{}' on resource provider '{provider_uuid}'. The reserved value is {which}.",
            inv.resource_class
        ));
    }
    Ok(())
}

const INVENTORY_COLUMNS: &str =
    "rc.name, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio, i.created_at, i.updated_at";

/// An `allocation_ratio` as read back. The column is single precision on
/// MariaDB, where the server (and so Placement) shows it with 6
/// significant digits: 1.1, not 1.100000023841858.
pub fn stored_ratio(dialect: Dialect, raw: f64) -> f64 {
    match dialect {
        Dialect::MySql => format!("{raw:.5e}").parse().unwrap_or(raw),
        _ => raw,
    }
}

fn record_from_row(dialect: Dialect, r: &Row) -> Result<InventoryRecord> {
    Ok(InventoryRecord {
        resource_class: r.string(0)?,
        total: r.i64(1)?,
        reserved: r.i64(2)?,
        min_unit: r.i64(3)?,
        max_unit: r.i64(4)?,
        step_size: r.i64(5)?,
        allocation_ratio: stored_ratio(dialect, r.f64(6)?),
        created_at: r.opt_time(7)?,
        updated_at: r.opt_time(8)?,
    })
}

/// A provider's inventory records, by resource class id.
pub async fn provider_inventories(tx: &mut Tx, provider_id: i64) -> Result<Vec<(i64, InventoryRecord)>> {
    let sql = format!(
        "SELECT i.resource_class_id, {INVENTORY_COLUMNS} FROM inventories i \
         JOIN resource_classes rc ON rc.id = i.resource_class_id \
         WHERE i.resource_provider_id = ? ORDER BY i.resource_class_id"
    );
    let rows = tx.fetch_all(&sql, &[provider_id.into()]).await?;
    rows.iter()
        .map(|r| {
            let rest = Row(r.0[1..].to_vec());
            Ok((r.i64(0)?, record_from_row(tx.dialect, &rest)?))
        })
        .collect()
}

/// Resource class ids by name, for the names that exist.
pub async fn resource_class_ids(tx: &mut Tx, names: &[&str]) -> Result<HashMap<String, i64>> {
    let wanted: BTreeSet<&str> = names.iter().copied().collect();
    let mut out = HashMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let params: Vec<Value> = wanted.iter().map(|n| (*n).into()).collect();
    let sql = format!("SELECT id, name FROM resource_classes WHERE name IN ({})", in_list(params.len()));
    for r in tx.fetch_all(&sql, &params).await? {
        let name = r.string(1)?;
        // MariaDB compares names case-insensitively; class names are exact.
        if wanted.contains(name.as_str()) {
            out.insert(name, r.i64(0)?);
        }
    }
    Ok(out)
}

/// Moves a provider's generation from `expected` to `expected + 1`;
/// `false` when another writer moved it first (nothing is changed then).
pub async fn increment_provider_generation(tx: &mut Tx, provider_id: i64, expected: i64) -> Result<bool> {
    let changed = tx
        .execute(
            "UPDATE resource_providers SET generation = ?, updated_at = ? WHERE id = ? AND generation = ?",
            &[(expected + 1).into(), now().into(), provider_id.into(), expected.into()],
        )
        .await?;
    Ok(changed == 1)
}

/// Why replacing a provider's inventories failed.
#[derive(Debug)]
pub enum ReplaceFailure {
    /// No resource class of this name.
    UnknownClass(String),
    /// Allocations use these classes (upstream's "A, B" list) that the
    /// new set drops.
    InUse(String),
    /// A record to update vanished (a concurrent delete).
    Missing(String),
    Db(Error),
}

impl From<DbError> for ReplaceFailure {
    fn from(e: DbError) -> Self {
        ReplaceFailure::Db(e.into())
    }
}

impl From<Error> for ReplaceFailure {
    fn from(e: Error) -> Self {
        ReplaceFailure::Db(e)
    }
}

/// Upstream's `InventoryInUse` text.
pub fn in_use_message(classes: &str, provider_uuid: &str) -> String {
    format!("Inventory for '{classes}' on resource provider '{provider_uuid}' in use.")
}

/// Classes (by id order, as upstream lists them) of `class_ids` that
/// allocations against the provider use, joined with ", ".
async fn classes_in_use(tx: &mut Tx, provider_id: i64, class_ids: &[i64]) -> Result<Option<String>> {
    if class_ids.is_empty() {
        return Ok(None);
    }
    let mut params: Vec<Value> = vec![provider_id.into()];
    params.extend(class_ids.iter().map(|id| Value::from(*id)));
    let sql = format!(
        "SELECT DISTINCT a.resource_class_id, rc.name FROM allocations a \
         JOIN resource_classes rc ON rc.id = a.resource_class_id \
         WHERE a.resource_provider_id = ? AND a.resource_class_id IN ({}) ORDER BY a.resource_class_id",
        in_list(class_ids.len())
    );
    let rows = tx.fetch_all(&sql, &params).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let names = rows.iter().map(|r| r.string(1)).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Some(names.join(", ")))
}

/// Replaces a provider's inventory records with `new` (adds, updates and
/// deletes as needed) without touching its generation, and answers the
/// records it replaced. Dropping a class that allocations use is refused;
/// shrinking one below its usage is allowed (upstream only logs it).
pub async fn replace_inventories(
    tx: &mut Tx,
    provider: &ProviderRow,
    new: &[InventoryRecord],
) -> std::result::Result<Vec<InventoryRecord>, ReplaceFailure> {
    let names: Vec<&str> = new.iter().map(|i| i.resource_class.as_str()).collect();
    let ids = resource_class_ids(tx, &names).await?;
    // The first unknown class in request order is the one reported.
    if let Some(unknown) = new.iter().find(|i| !ids.contains_key(&i.resource_class)) {
        return Err(ReplaceFailure::UnknownClass(unknown.resource_class.clone()));
    }
    let before = provider_inventories(tx, provider.id).await?;
    let existing: BTreeSet<i64> = before.iter().map(|(id, _)| *id).collect();
    let wanted: BTreeSet<i64> = new.iter().filter_map(|i| ids.get(&i.resource_class).copied()).collect();

    let to_delete: Vec<i64> = existing.difference(&wanted).copied().collect();
    if !to_delete.is_empty() {
        if let Some(classes) = classes_in_use(tx, provider.id, &to_delete).await? {
            return Err(ReplaceFailure::InUse(classes));
        }
        let mut params: Vec<Value> = vec![provider.id.into()];
        params.extend(to_delete.iter().map(|id| Value::from(*id)));
        let sql = format!(
            "DELETE FROM inventories WHERE resource_provider_id = ? AND resource_class_id IN ({})",
            in_list(to_delete.len())
        );
        tx.execute(&sql, &params).await?;
    }
    let ts = now();
    let updated: Vec<(i64, &InventoryRecord)> = new
        .iter()
        .filter_map(|inv| ids.get(&inv.resource_class).map(|&id| (id, inv)))
        .filter(|(id, _)| existing.contains(id))
        .collect();
    warn_over_capacity(tx, provider, &updated).await?;
    for inv in new {
        let Some(&rc_id) = ids.get(&inv.resource_class) else { continue };
        if existing.contains(&rc_id) {
            update_record(tx, provider, rc_id, inv, ts).await.map_err(|e| match e {
                UpdateFailure::Missing => ReplaceFailure::Missing(inv.resource_class.clone()),
                UpdateFailure::Db(e) => ReplaceFailure::Db(e),
            })?;
        } else {
            insert_record(tx, provider.id, rc_id, inv, ts).await?;
        }
    }
    Ok(before.into_iter().map(|(_, inv)| inv).collect())
}

/// Logs the records about to be updated below what allocations already
/// use (upstream lets such an update through with a warning): one
/// statement for all of them.
async fn warn_over_capacity(
    tx: &mut Tx,
    provider: &ProviderRow,
    updated: &[(i64, &InventoryRecord)],
) -> std::result::Result<(), DbError> {
    if updated.is_empty() {
        return Ok(());
    }
    let mut params: Vec<Value> = vec![provider.id.into()];
    params.extend(updated.iter().map(|(id, _)| Value::from(*id)));
    let sql = format!(
        "SELECT resource_class_id, {} FROM allocations WHERE resource_provider_id = ? AND resource_class_id IN ({}) \
         GROUP BY resource_class_id",
        super::sum_as_bigint(tx.dialect, "used"),
        in_list(updated.len())
    );
    for row in tx.fetch_all(&sql, &params).await? {
        let (rc_id, used) = (row.i64(0)?, row.opt_i64(1)?);
        let Some((_, inv)) = updated.iter().find(|(id, _)| *id == rc_id) else { continue };
        if used.is_some_and(|used| used > inv.capacity()) {
            tracing::warn!(
                target: "keelson::inventory",
                "Resource provider {} is now over-capacity for {}",
                provider.uuid,
                inv.resource_class
            );
        }
    }
    Ok(())
}

async fn insert_record(
    tx: &mut Tx,
    provider_id: i64,
    rc_id: i64,
    inv: &InventoryRecord,
    ts: chrono::NaiveDateTime,
) -> std::result::Result<(), DbError> {
    tx.execute(
        "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, \
         step_size, allocation_ratio, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            provider_id.into(),
            rc_id.into(),
            inv.total.into(),
            inv.reserved.into(),
            inv.min_unit.into(),
            inv.max_unit.into(),
            inv.step_size.into(),
            inv.allocation_ratio.into(),
            ts.into(),
        ],
    )
    .await?;
    Ok(())
}

enum UpdateFailure {
    Missing,
    Db(Error),
}

impl From<DbError> for UpdateFailure {
    fn from(e: DbError) -> Self {
        UpdateFailure::Db(e.into())
    }
}

impl From<Error> for UpdateFailure {
    fn from(e: Error) -> Self {
        UpdateFailure::Db(e)
    }
}

/// Updates one record in place (see [`warn_over_capacity`] for one that
/// leaves allocations beyond the new capacity).
async fn update_record(
    tx: &mut Tx,
    provider: &ProviderRow,
    rc_id: i64,
    inv: &InventoryRecord,
    ts: chrono::NaiveDateTime,
) -> std::result::Result<(), UpdateFailure> {
    let changed = tx
        .execute(
            "UPDATE inventories SET total = ?, reserved = ?, min_unit = ?, max_unit = ?, step_size = ?, \
             allocation_ratio = ?, updated_at = ? WHERE resource_provider_id = ? AND resource_class_id = ?",
            &[
                inv.total.into(),
                inv.reserved.into(),
                inv.min_unit.into(),
                inv.max_unit.into(),
                inv.step_size.into(),
                inv.allocation_ratio.into(),
                ts.into(),
                provider.id.into(),
                rc_id.into(),
            ],
        )
        .await?;
    if changed == 0 {
        return Err(UpdateFailure::Missing);
    }
    Ok(())
}

/// Stamps records written now with their modification time.
fn written(
    mut list: Vec<InventoryRecord>,
    existing: &[InventoryRecord],
    ts: chrono::NaiveDateTime,
) -> Vec<InventoryRecord> {
    for inv in &mut list {
        match existing.iter().find(|e| e.resource_class == inv.resource_class) {
            Some(old) => {
                inv.created_at = old.created_at;
                inv.updated_at = Some(ts);
            }
            None => {
                inv.created_at = Some(ts);
                inv.updated_at = None;
            }
        }
    }
    list
}

fn provider_not_found(uuid: &str) -> Error {
    Error::NotFound(format!("No resource provider with uuid {uuid} found"))
}

async fn existing_provider(tx: &mut Tx, uuid: &str) -> Result<ProviderRow> {
    find_provider(tx, uuid).await?.ok_or_else(|| provider_not_found(uuid))
}

fn no_such_class(name: &str) -> String {
    format!("No such resource class {name}.")
}

impl Store {
    /// GET /resource_providers/{uuid}/inventories.
    pub async fn get_inventories(&self, uuid: &str) -> Result<(ProviderRow, Vec<InventoryRecord>)> {
        let mut tx = self.db.begin_read().await?;
        let provider = find_provider(&mut tx, uuid).await?.ok_or_else(|| {
            Error::NotFound(format!(
                "No resource provider with uuid {uuid} found : No resource provider with uuid {uuid} found"
            ))
        })?;
        let list = provider_inventories(&mut tx, provider.id).await?.into_iter().map(|(_, i)| i).collect();
        tx.commit().await?;
        Ok((provider, list))
    }

    /// GET /resource_providers/{uuid}/inventories/{class}.
    pub async fn get_inventory(&self, uuid: &str, resource_class: &str) -> Result<(ProviderRow, InventoryRecord)> {
        let (provider, list) = self.get_inventories(uuid).await?;
        let inv = list
            .into_iter()
            .find(|i| i.resource_class == resource_class)
            .ok_or_else(|| Error::NotFound(format!("No inventory of class {resource_class} for {uuid}")))?;
        Ok((provider, inv))
    }

    /// POST /resource_providers/{uuid}/inventories: adds one class. The
    /// answer carries the provider's new generation.
    pub async fn create_inventory(
        &self,
        uuid: &str,
        inv: InventoryRecord,
        allow_reserved_equal_total: bool,
    ) -> Result<(i64, InventoryRecord)> {
        let write = || self.try_create_inventory(uuid, inv.clone(), allow_reserved_equal_total);
        write_retrying("inventory create", write).await
    }

    async fn try_create_inventory(
        &self,
        uuid: &str,
        inv: InventoryRecord,
        allow_reserved_equal_total: bool,
    ) -> Result<(i64, InventoryRecord)> {
        let mut tx = self.db.begin().await?;
        let provider = existing_provider(&mut tx, uuid).await?;
        let unable = |detail: String| {
            Error::BadRequest(format!("Unable to create inventory for resource provider {uuid}: {detail}"))
        };
        validate_capacity(uuid, &inv, allow_reserved_equal_total).map_err(unable)?;
        let ids = resource_class_ids(&mut tx, &[inv.resource_class.as_str()]).await?;
        let rc_id = *ids.get(&inv.resource_class).ok_or_else(|| unable(no_such_class(&inv.resource_class)))?;
        let exists = tx
            .fetch_optional(
                "SELECT id FROM inventories WHERE resource_provider_id = ? AND resource_class_id = ?",
                &[provider.id.into(), rc_id.into()],
            )
            .await?
            .is_some();
        let duplicate = || {
            Error::concurrent_update(
                "Update conflict: UNIQUE constraint failed: inventories.resource_provider_id, inventories.resource_class_id",
            )
        };
        if exists {
            return Err(duplicate());
        }
        let ts = now();
        match insert_record(&mut tx, provider.id, rc_id, &inv, ts).await {
            Ok(()) => {}
            Err(e) if e.is_unique_violation() => return Err(duplicate()),
            Err(e) => return Err(e.into()),
        }
        if !increment_provider_generation(&mut tx, provider.id, provider.generation).await? {
            return Err(Error::concurrent_update(format!("Update conflict: {PROVIDER_CONCURRENT_UPDATE}")));
        }
        tx.commit().await?;
        let inv = InventoryRecord { created_at: Some(ts), updated_at: None, ..inv };
        Ok((provider.generation + 1, inv))
    }

    /// PUT /resource_providers/{uuid}/inventories/{class}: changes one
    /// existing record, guarded by the caller's provider generation.
    pub async fn update_inventory(
        &self,
        uuid: &str,
        generation: i64,
        inv: InventoryRecord,
        allow_reserved_equal_total: bool,
    ) -> Result<(i64, InventoryRecord)> {
        let write = || self.try_update_inventory(uuid, generation, inv.clone(), allow_reserved_equal_total);
        write_retrying("inventory update", write).await
    }

    async fn try_update_inventory(
        &self,
        uuid: &str,
        generation: i64,
        inv: InventoryRecord,
        allow_reserved_equal_total: bool,
    ) -> Result<(i64, InventoryRecord)> {
        let mut tx = self.db.begin().await?;
        let provider = existing_provider(&mut tx, uuid).await?;
        if provider.generation != generation {
            return Err(Error::concurrent_update("resource provider generation conflict"));
        }
        validate_capacity(uuid, &inv, allow_reserved_equal_total)
            .map_err(|d| Error::BadRequest(format!("Unable to update inventory for resource provider {uuid}: {d}")))?;
        let ids = resource_class_ids(&mut tx, &[inv.resource_class.as_str()]).await?;
        let rc_id = *ids.get(&inv.resource_class).ok_or_else(|| Error::NotFound(no_such_class(&inv.resource_class)))?;
        let existing = provider_inventories(&mut tx, provider.id).await?;
        let old = existing.iter().find(|(id, _)| *id == rc_id).map(|(_, i)| i.clone());
        let missing = || {
            Error::BadRequest(format!(
                "No inventory record with resource class for resource provider {uuid}: No inventory of class {} found.",
                inv.resource_class
            ))
        };
        if old.is_none() {
            return Err(missing());
        }
        let ts = now();
        warn_over_capacity(&mut tx, &provider, &[(rc_id, &inv)]).await?;
        match update_record(&mut tx, &provider, rc_id, &inv, ts).await {
            Ok(()) => {}
            Err(UpdateFailure::Missing) => return Err(missing()),
            Err(UpdateFailure::Db(e)) => return Err(e),
        }
        if !increment_provider_generation(&mut tx, provider.id, provider.generation).await? {
            return Err(Error::concurrent_update(format!("update conflict: {PROVIDER_CONCURRENT_UPDATE}")));
        }
        tx.commit().await?;
        let inv = InventoryRecord { created_at: old.and_then(|o| o.created_at), updated_at: Some(ts), ..inv };
        Ok((provider.generation + 1, inv))
    }

    /// PUT /resource_providers/{uuid}/inventories: replaces the whole set,
    /// guarded by the caller's provider generation. Answers the new
    /// generation and the records in request order.
    pub async fn set_inventories(
        &self,
        uuid: &str,
        generation: i64,
        list: Vec<InventoryRecord>,
        allow_reserved_equal_total: bool,
    ) -> Result<(i64, Vec<InventoryRecord>)> {
        let write = || self.try_set_inventories(uuid, generation, list.clone(), allow_reserved_equal_total);
        write_retrying("inventories write", write).await
    }

    async fn try_set_inventories(
        &self,
        uuid: &str,
        generation: i64,
        list: Vec<InventoryRecord>,
        allow_reserved_equal_total: bool,
    ) -> Result<(i64, Vec<InventoryRecord>)> {
        let mut tx = self.db.begin().await?;
        let provider = existing_provider(&mut tx, uuid).await?;
        if provider.generation != generation {
            return Err(Error::concurrent_update("resource provider generation conflict"));
        }
        for inv in &list {
            validate_capacity(uuid, inv, allow_reserved_equal_total).map_err(|d| {
                Error::BadRequest(format!("Unable to update inventory for resource provider {uuid}: {d}"))
            })?;
        }
        let before = replace_inventories(&mut tx, &provider, &list).await.map_err(|f| match f {
            ReplaceFailure::UnknownClass(name) => Error::BadRequest(format!(
                "Unknown resource class in inventory for resource provider {uuid}: {}",
                no_such_class(&name)
            )),
            ReplaceFailure::InUse(classes) => {
                Error::Conflict(INVENTORY_INUSE, format!("update conflict: {}", in_use_message(&classes, uuid)))
            }
            ReplaceFailure::Missing(name) => Error::conflict(format!(
                "Race condition detected when setting inventory. No inventory record with resource class for \
                 resource provider {uuid}: No inventory of class {name} found."
            )),
            ReplaceFailure::Db(e) => e,
        })?;
        if !increment_provider_generation(&mut tx, provider.id, provider.generation).await? {
            return Err(Error::concurrent_update(format!("update conflict: {PROVIDER_CONCURRENT_UPDATE}")));
        }
        tx.commit().await?;
        Ok((provider.generation + 1, written(list, &before, now())))
    }

    /// DELETE /resource_providers/{uuid}/inventories/{class}.
    pub async fn delete_inventory(&self, uuid: &str, resource_class: &str) -> Result<()> {
        write_retrying("inventory delete", || self.try_delete_inventory(uuid, resource_class)).await
    }

    async fn try_delete_inventory(&self, uuid: &str, resource_class: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let provider = existing_provider(&mut tx, uuid).await?;
        let not_found = |detail: String| {
            Error::NotFound(format!("No inventory of class {resource_class} found for delete: {detail}"))
        };
        let ids = resource_class_ids(&mut tx, &[resource_class]).await?;
        let rc_id = *ids.get(resource_class).ok_or_else(|| not_found(no_such_class(resource_class)))?;
        // Upstream reports a class in use with the concurrent-update code.
        let conflict = |detail: String| {
            Error::Conflict(
                CONCURRENT_UPDATE,
                format!("Unable to delete inventory of class {resource_class}: {detail}"),
            )
        };
        if let Some(classes) = classes_in_use(&mut tx, provider.id, &[rc_id]).await? {
            return Err(conflict(in_use_message(&classes, uuid)));
        }
        let deleted = tx
            .execute(
                "DELETE FROM inventories WHERE resource_provider_id = ? AND resource_class_id = ?",
                &[provider.id.into(), rc_id.into()],
            )
            .await?;
        if deleted == 0 {
            return Err(not_found(format!("No inventory of class {resource_class} found for delete")));
        }
        if !increment_provider_generation(&mut tx, provider.id, provider.generation).await? {
            return Err(conflict(PROVIDER_CONCURRENT_UPDATE.to_string()));
        }
        tx.commit().await?;
        Ok(())
    }

    /// DELETE /resource_providers/{uuid}/inventories (from 1.5): removes
    /// every record; the generation moves on even when there were none.
    pub async fn delete_inventories(&self, uuid: &str, generation: Option<i64>) -> Result<()> {
        write_retrying("inventories delete", || self.try_delete_inventories(uuid, generation)).await
    }

    async fn try_delete_inventories(&self, uuid: &str, generation: Option<i64>) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let provider = existing_provider(&mut tx, uuid).await?;
        let stale = || {
            Error::concurrent_update(format!(
                "Unable to delete inventory for resource provider {uuid} because the inventory was updated by \
                 another process. Please retry your request."
            ))
        };
        if generation.is_some_and(|g| g != provider.generation) {
            return Err(stale());
        }
        replace_inventories(&mut tx, &provider, &[]).await.map_err(|f| match f {
            ReplaceFailure::InUse(classes) => Error::Conflict(INVENTORY_INUSE, in_use_message(&classes, uuid)),
            ReplaceFailure::UnknownClass(name) => Error::BadRequest(no_such_class(&name)),
            ReplaceFailure::Missing(_) => stale(),
            ReplaceFailure::Db(e) => e,
        })?;
        if !increment_provider_generation(&mut tx, provider.id, provider.generation).await? {
            return Err(stale());
        }
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::consumers::test_support::{allocate_raw, provider, store};

    fn inv(rc: &str, total: i64) -> InventoryRecord {
        InventoryRecord::new(rc, total)
    }

    #[test]
    fn mariadb_ratios_read_back_as_written() {
        assert_eq!(stored_ratio(Dialect::MySql, 1.100000023841858), 1.1);
        assert_eq!(stored_ratio(Dialect::MySql, 16.0), 16.0);
        assert_eq!(stored_ratio(Dialect::Sqlite, 1.100000023841858), 1.100000023841858);
    }

    #[test]
    fn capacity_rules() {
        let mut i = inv("DISK_GB", 10);
        i.reserved = 10;
        assert!(validate_capacity("u", &i, false).unwrap_err().ends_with("greater than or equal to total."));
        assert!(validate_capacity("u", &i, true).is_ok());
        i.reserved = 11;
        assert!(validate_capacity("u", &i, true).unwrap_err().ends_with("The reserved value is greater than total."));
        let mut r = inv("VCPU", 4);
        r.allocation_ratio = 0.1;
        // int(4 * 0.1) == 0
        assert!(validate_capacity("u", &r, false).is_err());
        r.allocation_ratio = 16.0;
        assert_eq!(r.capacity(), 64);
    }

    #[tokio::test]
    async fn create_update_delete_move_the_generation() {
        let store = store().await;
        let rp = provider(&store, "rp1").await;
        let (g, created) = store.create_inventory(&rp, inv("DISK_GB", 100), false).await.unwrap();
        assert_eq!(g, 1);
        assert!(created.created_at.is_some());
        let dup = store.create_inventory(&rp, inv("DISK_GB", 100), false).await.unwrap_err();
        assert!(matches!(dup, Error::Conflict(CONCURRENT_UPDATE, ref d) if d.starts_with("Update conflict")));

        let stale = store.update_inventory(&rp, 0, inv("DISK_GB", 50), false).await.unwrap_err();
        assert!(
            matches!(stale, Error::Conflict(CONCURRENT_UPDATE, ref d) if d == "resource provider generation conflict")
        );
        let (g, _) = store.update_inventory(&rp, 1, inv("DISK_GB", 50), false).await.unwrap();
        assert_eq!(g, 2);
        let missing = store.update_inventory(&rp, 2, inv("VCPU", 5), false).await.unwrap_err();
        assert!(matches!(missing, Error::BadRequest(ref d) if d.contains("No inventory of class VCPU found.")));

        let (g, list) = store.set_inventories(&rp, 2, vec![inv("VCPU", 8), inv("DISK_GB", 10)], false).await.unwrap();
        assert_eq!(g, 3);
        assert_eq!(list.iter().map(|i| i.resource_class.as_str()).collect::<Vec<_>>(), ["VCPU", "DISK_GB"]);
        let unknown = store.set_inventories(&rp, 3, vec![inv("HOUSE", 8)], false).await.unwrap_err();
        assert!(matches!(unknown, Error::BadRequest(ref d) if d.ends_with("No such resource class HOUSE.")));

        store.delete_inventory(&rp, "VCPU").await.unwrap();
        let again = store.delete_inventory(&rp, "VCPU").await.unwrap_err();
        assert!(matches!(again, Error::NotFound(ref d) if d.contains("found for delete")));
        store.delete_inventories(&rp, None).await.unwrap();
        let (p, list) = store.get_inventories(&rp).await.unwrap();
        assert_eq!((p.generation, list.len()), (5, 0));
    }

    #[tokio::test]
    async fn inventory_in_use_cannot_be_removed() {
        let store = store().await;
        let rp = provider(&store, "rp1").await;
        store.set_inventories(&rp, 0, vec![inv("VCPU", 8), inv("DISK_GB", 10)], false).await.unwrap();
        allocate_raw(&store, &rp, "c1", &[("VCPU", 2), ("DISK_GB", 1)]).await;

        let e = store.delete_inventories(&rp, None).await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(INVENTORY_INUSE, ref d) if *d == format!("Inventory for 'VCPU, DISK_GB' on resource provider '{rp}' in use."))
        );
        let e = store.set_inventories(&rp, 1, vec![inv("VCPU", 8)], false).await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(INVENTORY_INUSE, ref d) if d.starts_with("update conflict: Inventory for 'DISK_GB'"))
        );
        let e = store.delete_inventory(&rp, "VCPU").await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(CONCURRENT_UPDATE, ref d) if d.starts_with("Unable to delete inventory of class VCPU"))
        );
        // Shrinking below the usage is allowed.
        let (g, _) = store.set_inventories(&rp, 1, vec![inv("VCPU", 1), inv("DISK_GB", 1)], false).await.unwrap();
        assert_eq!(g, 2);
    }
}
