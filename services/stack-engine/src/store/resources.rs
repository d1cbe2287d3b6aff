//! `resource` and `resource_data`. A resource row is versioned by
//! `atomic_key` and locked by `engine_id`: every write that matters goes
//! through [`update_cas`] (or its lock-shaped wrappers), so two engines
//! never both act on one resource and a stale copy never overwrites a
//! newer one.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Kind, Row, Tx, Value};
use serde_json::Value as Json;

use super::codec::{self, Assignments};
use super::{Action, Status};

/// A `resource` row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceRow {
    pub id: i64,
    pub uuid: String,
    pub stack_id: String,
    pub root_stack_id: String,
    pub name: String,
    pub resource_type: String,
    pub physical_resource_id: Option<String>,
    pub rsrc_metadata: Option<Json>,
    /// The resolved properties last applied.
    pub properties_data: Option<Json>,
    /// Attribute values cached for downstream resources.
    pub attr_data: Option<Json>,
    /// The engine holding the lock, if any.
    pub engine_id: Option<String>,
    pub atomic_key: i64,
    /// Ids of the resources this one depends on.
    pub requires: Vec<i64>,
    pub replaces: Option<i64>,
    pub replaced_by: Option<i64>,
    pub current_template_id: Option<i64>,
    pub action: Action,
    pub status: Status,
    pub status_reason: String,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
}

impl ResourceRow {
    /// `ACTION_STATUS`, as Heat shows `resource_status`.
    pub fn state(&self) -> String {
        format!("{}_{}", self.action, self.status)
    }
}

const COLUMNS: &str = "id, uuid, stack_id, root_stack_id, name, resource_type, physical_resource_id, rsrc_metadata, \
     properties_data, attr_data, engine_id, atomic_key, requires, replaces, replaced_by, current_template_id, \
     action, status, status_reason, created_at, updated_at";

/// The number of columns [`from_row`] decodes.
pub(super) const COLUMN_COUNT: usize = 21;

/// [`COLUMNS`] qualified by a table alias, for joins.
pub(super) fn columns(alias: &str) -> String {
    COLUMNS.split(", ").map(|c| format!("{alias}.{}", c.trim())).collect::<Vec<_>>().join(", ")
}

pub(super) fn from_row(row: &Row) -> Result<ResourceRow, DbError> {
    Ok(ResourceRow {
        id: row.i64(0)?,
        uuid: row.string(1)?,
        stack_id: row.string(2)?,
        root_stack_id: row.string(3)?,
        name: row.string(4)?,
        resource_type: row.string(5)?,
        physical_resource_id: row.opt_string(6)?,
        rsrc_metadata: codec::read_opt_json(row, 7)?,
        properties_data: codec::read_opt_json(row, 8)?,
        attr_data: codec::read_opt_json(row, 9)?,
        engine_id: row.opt_string(10)?,
        atomic_key: row.opt_i64(11)?.unwrap_or_default(),
        requires: codec::read_ids(row, 12)?,
        replaces: row.opt_i64(13)?,
        replaced_by: row.opt_i64(14)?,
        current_template_id: row.opt_i64(15)?,
        action: codec::read_action(row, 16)?,
        status: codec::read_status(row, 17)?,
        status_reason: row.opt_string(18)?.unwrap_or_default(),
        created_at: row.opt_time(19)?,
        updated_at: row.opt_time(20)?,
    })
}

fn opt_int(v: Option<i64>) -> Value {
    v.map(Value::Int).unwrap_or(Value::Null(Kind::Int))
}

fn ids_value(ids: &[i64]) -> Value {
    Value::Text(Json::from(ids.to_vec()).to_string())
}

/// What a new resource row holds; the rest (id, uuid, lock, timestamps)
/// is generated.
#[derive(Debug, Clone, PartialEq)]
pub struct NewResource {
    pub stack_id: String,
    pub root_stack_id: String,
    pub name: String,
    pub resource_type: String,
    pub physical_resource_id: Option<String>,
    pub rsrc_metadata: Option<Json>,
    pub properties_data: Option<Json>,
    pub requires: Vec<i64>,
    pub replaces: Option<i64>,
    pub current_template_id: Option<i64>,
    pub action: Action,
    pub status: Status,
    pub status_reason: String,
}

impl Default for NewResource {
    /// An `INIT_COMPLETE` resource, as Heat stores one before acting on it.
    fn default() -> Self {
        NewResource {
            stack_id: String::new(),
            root_stack_id: String::new(),
            name: String::new(),
            resource_type: String::new(),
            physical_resource_id: None,
            rsrc_metadata: None,
            properties_data: None,
            requires: Vec::new(),
            replaces: None,
            current_template_id: None,
            action: Action::Init,
            status: Status::Complete,
            status_reason: String::new(),
        }
    }
}

/// Inserts a resource in the caller's transaction; answers the stored row.
pub async fn insert_tx(tx: &mut Tx, new: &NewResource) -> Result<ResourceRow, DbError> {
    let uuid = uuid::Uuid::new_v4().to_string();
    let now = db::now();
    let id = tx
        .insert(
            "INSERT INTO resource (uuid, stack_id, root_stack_id, name, resource_type, physical_resource_id, \
             rsrc_metadata, properties_data, attr_data, engine_id, atomic_key, requires, replaces, replaced_by, \
             current_template_id, action, status, status_reason, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                uuid.as_str().into(),
                new.stack_id.as_str().into(),
                new.root_stack_id.as_str().into(),
                new.name.as_str().into(),
                new.resource_type.as_str().into(),
                new.physical_resource_id.clone().into(),
                codec::opt_json(new.rsrc_metadata.as_ref()),
                codec::opt_json(new.properties_data.as_ref()),
                Value::Null(Kind::Text),
                Value::Null(Kind::Text),
                0i64.into(),
                ids_value(&new.requires),
                opt_int(new.replaces),
                Value::Null(Kind::Int),
                opt_int(new.current_template_id),
                new.action.as_str().into(),
                new.status.as_str().into(),
                new.status_reason.as_str().into(),
                now.into(),
                Value::Null(Kind::Time),
            ],
        )
        .await?;
    Ok(ResourceRow {
        id,
        uuid,
        stack_id: new.stack_id.clone(),
        root_stack_id: new.root_stack_id.clone(),
        name: new.name.clone(),
        resource_type: new.resource_type.clone(),
        physical_resource_id: new.physical_resource_id.clone(),
        rsrc_metadata: new.rsrc_metadata.clone(),
        properties_data: new.properties_data.clone(),
        attr_data: None,
        engine_id: None,
        atomic_key: 0,
        requires: new.requires.clone(),
        replaces: new.replaces,
        replaced_by: None,
        current_template_id: new.current_template_id,
        action: new.action,
        status: new.status,
        status_reason: new.status_reason.clone(),
        created_at: Some(now),
        updated_at: None,
    })
}

/// Inserts a resource in its own transaction.
pub async fn insert(db: &Db, new: &NewResource) -> Result<ResourceRow, DbError> {
    db::retrying("resource insert", || insert_once(db, new)).await
}

async fn insert_once(db: &Db, new: &NewResource) -> Result<ResourceRow, DbError> {
    let mut tx = db.begin().await?;
    let row = insert_tx(&mut tx, new).await?;
    tx.commit().await?;
    Ok(row)
}

/// Inserts many resources in one transaction (a new stack's rows);
/// answers them in the given order.
pub async fn insert_many(db: &Db, new: &[NewResource]) -> Result<Vec<ResourceRow>, DbError> {
    db::retrying("resource insert", || insert_many_once(db, new)).await
}

async fn insert_many_once(db: &Db, new: &[NewResource]) -> Result<Vec<ResourceRow>, DbError> {
    let mut tx = db.begin().await?;
    let mut out = Vec::with_capacity(new.len());
    for n in new {
        out.push(insert_tx(&mut tx, n).await?);
    }
    tx.commit().await?;
    Ok(out)
}

pub async fn get(db: &Db, id: i64) -> Result<Option<ResourceRow>, DbError> {
    let rows = db.fetch_all(&format!("SELECT {COLUMNS} FROM resource WHERE id = ?"), &[id.into()]).await?;
    rows.first().map(from_row).transpose()
}

/// [`get`] in the caller's transaction.
pub async fn get_tx(tx: &mut Tx, id: i64) -> Result<Option<ResourceRow>, DbError> {
    let rows = tx.fetch_all(&format!("SELECT {COLUMNS} FROM resource WHERE id = ?"), &[id.into()]).await?;
    rows.first().map(from_row).transpose()
}

/// The rows of the stack called by one of `names` (replaced ones
/// included), by id: what a check reads of the resources it needs when
/// its predecessors' inputs do not carry them, instead of the whole stack.
pub async fn list_named(db: &Db, stack_id: &str, names: &[String]) -> Result<Vec<ResourceRow>, DbError> {
    let mut out = Vec::new();
    for chunk in names.chunks(500) {
        let mut params: Vec<Value> = vec![stack_id.into()];
        params.extend(chunk.iter().map(Value::from));
        let sql = format!(
            "SELECT {COLUMNS} FROM resource WHERE stack_id = ? AND name IN ({}) ORDER BY id",
            db::in_list(chunk.len())
        );
        for r in &db.fetch_all(&sql, &params).await? {
            out.push(from_row(r)?);
        }
    }
    out.sort_by_key(|r| r.id);
    Ok(out)
}

/// A resource by its uuid.
pub async fn get_by_uuid(db: &Db, uuid: &str) -> Result<Option<ResourceRow>, DbError> {
    let rows = db.fetch_all(&format!("SELECT {COLUMNS} FROM resource WHERE uuid = ?"), &[uuid.into()]).await?;
    rows.first().map(from_row).transpose()
}

/// Every row of the stack, replaced ones included, by id.
pub async fn list(db: &Db, stack_id: &str) -> Result<Vec<ResourceRow>, DbError> {
    let rows = db
        .fetch_all(&format!("SELECT {COLUMNS} FROM resource WHERE stack_id = ? ORDER BY id"), &[stack_id.into()])
        .await?;
    rows.iter().map(from_row).collect()
}

/// Every row of every stack in the tree rooted at `root_stack_id`, by id.
pub async fn list_by_root(db: &Db, root_stack_id: &str) -> Result<Vec<ResourceRow>, DbError> {
    let rows = db
        .fetch_all(
            &format!("SELECT {COLUMNS} FROM resource WHERE root_stack_id = ? ORDER BY id"),
            &[root_stack_id.into()],
        )
        .await?;
    rows.iter().map(from_row).collect()
}

/// The rows with the given ids (any stack), by id.
pub async fn get_many(db: &Db, ids: &[i64]) -> Result<Vec<ResourceRow>, DbError> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let params: Vec<Value> = chunk.iter().map(|i| Value::Int(*i)).collect();
        let rows = db
            .fetch_all(
                &format!("SELECT {COLUMNS} FROM resource WHERE id IN ({}) ORDER BY id", db::in_list(chunk.len())),
                &params,
            )
            .await?;
        for r in &rows {
            out.push(from_row(r)?);
        }
    }
    out.sort_by_key(|r| r.id);
    Ok(out)
}

/// A change to a resource row. `None` leaves a column as it is;
/// `Some(None)` on a nullable column sets NULL. `updated_at` is set to now
/// unless given; `atomic_key` always advances by one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceChange {
    pub action: Option<Action>,
    pub status: Option<Status>,
    pub status_reason: Option<String>,
    pub resource_type: Option<String>,
    pub physical_resource_id: Option<Option<String>>,
    pub rsrc_metadata: Option<Option<Json>>,
    pub properties_data: Option<Option<Json>>,
    pub attr_data: Option<Option<Json>>,
    pub requires: Option<Vec<i64>>,
    pub replaces: Option<Option<i64>>,
    pub replaced_by: Option<Option<i64>>,
    pub current_template_id: Option<Option<i64>>,
    /// Sets or clears the lock holder.
    pub engine_id: Option<Option<String>>,
    pub updated_at: Option<NaiveDateTime>,
}

impl ResourceChange {
    /// A change of action, status and reason only.
    pub fn state(action: Action, status: Status, reason: impl Into<String>) -> Self {
        ResourceChange {
            action: Some(action),
            status: Some(status),
            status_reason: Some(reason.into()),
            ..Default::default()
        }
    }

    /// Applies the change to an in-memory copy of the row as the UPDATE
    /// applies it to the stored one (`atomic_key` advances, `updated_at`
    /// as given, else `now`), so a writer that holds the row's lock need
    /// not read it back.
    pub fn apply_to(&self, row: &mut ResourceRow, now: NaiveDateTime) {
        if let Some(v) = self.action {
            row.action = v;
        }
        if let Some(v) = self.status {
            row.status = v;
        }
        if let Some(v) = &self.status_reason {
            row.status_reason = v.clone();
        }
        if let Some(v) = &self.resource_type {
            row.resource_type = v.clone();
        }
        if let Some(v) = &self.physical_resource_id {
            row.physical_resource_id = v.clone();
        }
        if let Some(v) = &self.rsrc_metadata {
            row.rsrc_metadata = v.clone();
        }
        if let Some(v) = &self.properties_data {
            row.properties_data = v.clone();
        }
        if let Some(v) = &self.attr_data {
            row.attr_data = v.clone();
        }
        if let Some(v) = &self.requires {
            row.requires = v.clone();
        }
        if let Some(v) = self.replaces {
            row.replaces = v;
        }
        if let Some(v) = self.replaced_by {
            row.replaced_by = v;
        }
        if let Some(v) = self.current_template_id {
            row.current_template_id = v;
        }
        if let Some(v) = &self.engine_id {
            row.engine_id = v.clone();
        }
        row.updated_at = Some(self.updated_at.unwrap_or(now));
        row.atomic_key += 1;
    }

    fn assignments(self) -> Assignments {
        let mut set = Assignments::default();
        let opt_text = |v: Option<String>| -> Value { v.into() };
        if let Some(v) = self.action {
            set.set("action", v.into());
        }
        if let Some(v) = self.status {
            set.set("status", v.into());
        }
        if let Some(v) = self.status_reason {
            set.set("status_reason", v.into());
        }
        if let Some(v) = self.resource_type {
            set.set("resource_type", v.into());
        }
        if let Some(v) = self.physical_resource_id {
            set.set("physical_resource_id", opt_text(v));
        }
        if let Some(v) = self.rsrc_metadata {
            set.set("rsrc_metadata", codec::opt_json(v.as_ref()));
        }
        if let Some(v) = self.properties_data {
            set.set("properties_data", codec::opt_json(v.as_ref()));
        }
        if let Some(v) = self.attr_data {
            set.set("attr_data", codec::opt_json(v.as_ref()));
        }
        if let Some(v) = self.requires {
            set.set("requires", ids_value(&v));
        }
        if let Some(v) = self.replaces {
            set.set("replaces", opt_int(v));
        }
        if let Some(v) = self.replaced_by {
            set.set("replaced_by", opt_int(v));
        }
        if let Some(v) = self.current_template_id {
            set.set("current_template_id", opt_int(v));
        }
        if let Some(v) = self.engine_id {
            set.set("engine_id", opt_text(v));
        }
        set.set("updated_at", self.updated_at.unwrap_or_else(db::now).into());
        set.set_expr("atomic_key", "atomic_key + 1");
        set
    }
}

/// Runs `UPDATE resource SET <change> WHERE id = ? AND <guard>`.
async fn update_where(
    db: &Db,
    id: i64,
    change: ResourceChange,
    guard: &str,
    guard_params: Vec<Value>,
) -> Result<bool, DbError> {
    let set = change.assignments();
    let mut params = set.params.clone();
    params.push(id.into());
    params.extend(guard_params);
    let sql = format!("UPDATE resource SET {} WHERE id = ? AND {guard}", set.sql());
    Ok(super::write_one(db, "resource update", &sql, &params).await? > 0)
}

/// The lock/version CAS: applies `change` (and advances `atomic_key`) only
/// if the row is still held by `expected_engine` (None: unlocked) at
/// version `expected_atomic_key`. Answers whether it was applied.
pub async fn update_cas(
    db: &Db,
    id: i64,
    expected_engine: Option<&str>,
    expected_atomic_key: i64,
    change: ResourceChange,
) -> Result<bool, DbError> {
    match expected_engine {
        None => {
            update_where(db, id, change, "engine_id IS NULL AND atomic_key = ?", vec![expected_atomic_key.into()]).await
        }
        Some(engine) => {
            update_where(
                db,
                id,
                change,
                "engine_id = ? AND atomic_key = ?",
                vec![engine.into(), expected_atomic_key.into()],
            )
            .await
        }
    }
}

/// [`update_cas`] in the caller's transaction (the writes a check groups
/// with it commit or roll back together with the CAS).
pub async fn update_cas_tx(
    tx: &mut Tx,
    id: i64,
    expected_engine: Option<&str>,
    expected_atomic_key: i64,
    change: ResourceChange,
) -> Result<bool, DbError> {
    let set = change.assignments();
    let mut params = set.params.clone();
    params.push(id.into());
    let guard = match expected_engine {
        None => "engine_id IS NULL AND atomic_key = ?",
        Some(engine) => {
            params.push(engine.into());
            "engine_id = ? AND atomic_key = ?"
        }
    };
    params.push(expected_atomic_key.into());
    let sql = format!("UPDATE resource SET {} WHERE id = ? AND {guard}", set.sql());
    Ok(tx.execute(&sql, &params).await? > 0)
}

/// Removes a resource row and its data in the caller's transaction, only
/// if it is still held by `expected_engine` (None: unlocked) at version
/// `expected_atomic_key`: the delete is the CAS. Answers whether it was.
pub async fn delete_cas_tx(
    tx: &mut Tx,
    id: i64,
    expected_engine: Option<&str>,
    expected_atomic_key: i64,
) -> Result<bool, DbError> {
    let mut params: Vec<Value> = vec![id.into()];
    let guard = match expected_engine {
        None => "engine_id IS NULL AND atomic_key = ?",
        Some(engine) => {
            params.push(engine.into());
            "engine_id = ? AND atomic_key = ?"
        }
    };
    params.push(expected_atomic_key.into());
    let n = tx.execute(&format!("DELETE FROM resource WHERE id = ? AND {guard}"), &params).await?;
    if n > 0 {
        tx.execute("DELETE FROM resource_data WHERE resource_id = ?", &[id.into()]).await?;
    }
    Ok(n > 0)
}

/// Takes the lock for `engine_id` if the row is unlocked and still at
/// version `atomic_key`. The row's version is then `atomic_key + 1`.
pub async fn acquire_lock(db: &Db, id: i64, engine_id: &str, atomic_key: i64) -> Result<bool, DbError> {
    let change = ResourceChange { engine_id: Some(Some(engine_id.to_string())), ..Default::default() };
    update_cas(db, id, None, atomic_key, change).await
}

/// Applies `change` and clears the lock, only if `engine_id` holds it.
pub async fn release_lock(db: &Db, id: i64, engine_id: &str, change: ResourceChange) -> Result<bool, DbError> {
    let change = ResourceChange { engine_id: Some(None), ..change };
    update_where(db, id, change, "engine_id = ?", vec![engine_id.into()]).await
}

/// Clears the lock of an engine that is gone (no heartbeat), applying
/// `change` (typically FAILED with a reason), only if `dead_engine` still
/// holds it.
pub async fn steal_lock(db: &Db, id: i64, dead_engine: &str, change: ResourceChange) -> Result<bool, DbError> {
    release_lock(db, id, dead_engine, change).await
}

/// Creates the replacement of `old` (INIT COMPLETE, `replaces = old.id`,
/// of the type the new definition writes)
/// and marks `old.replaced_by`, in one transaction. The mark is a CAS on
/// `old`'s lock holder and version as read (its `atomic_key` then advances
/// by one); None when that CAS lost, and nothing is stored.
pub async fn make_replacement(
    db: &Db,
    old: &ResourceRow,
    resource_type: &str,
    template_id: i64,
    requires: &[i64],
) -> Result<Option<ResourceRow>, DbError> {
    db::retrying("resource replacement", || make_replacement_once(db, old, resource_type, template_id, requires)).await
}

async fn make_replacement_once(
    db: &Db,
    old: &ResourceRow,
    resource_type: &str,
    template_id: i64,
    requires: &[i64],
) -> Result<Option<ResourceRow>, DbError> {
    let mut tx = db.begin().await?;
    let new = insert_tx(
        &mut tx,
        &NewResource {
            stack_id: old.stack_id.clone(),
            root_stack_id: old.root_stack_id.clone(),
            name: old.name.clone(),
            resource_type: resource_type.to_string(),
            requires: requires.to_vec(),
            replaces: Some(old.id),
            current_template_id: Some(template_id),
            ..Default::default()
        },
    )
    .await?;
    let change = ResourceChange { replaced_by: Some(Some(new.id)), ..Default::default() };
    let set = change.assignments();
    let mut params = set.params.clone();
    params.push(old.id.into());
    params.push(old.atomic_key.into());
    let guard = match &old.engine_id {
        Some(engine) => {
            params.push(engine.as_str().into());
            "engine_id = ?"
        }
        None => "engine_id IS NULL",
    };
    let sql = format!("UPDATE resource SET {} WHERE id = ? AND atomic_key = ? AND {guard}", set.sql());
    if tx.execute(&sql, &params).await? == 0 {
        // Dropping the transaction rolls the insert back.
        return Ok(None);
    }
    tx.commit().await?;
    Ok(Some(new))
}

/// The engines holding a lock on a resource of the stack.
pub async fn lock_holders(db: &Db, stack_id: &str) -> Result<Vec<String>, DbError> {
    let rows = db
        .fetch_all(
            "SELECT DISTINCT engine_id FROM resource WHERE stack_id = ? AND engine_id IS NOT NULL ORDER BY engine_id",
            &[stack_id.into()],
        )
        .await?;
    rows.iter().map(|r| r.string(0)).collect()
}

/// The latest `updated_at` (or `created_at`) of the stack's resources:
/// when a traversal last made progress.
pub async fn last_activity(db: &Db, stack_id: &str) -> Result<Option<NaiveDateTime>, DbError> {
    let rows = db
        .fetch_all("SELECT MAX(updated_at), MAX(created_at) FROM resource WHERE stack_id = ?", &[stack_id.into()])
        .await?;
    let Some(r) = rows.first() else { return Ok(None) };
    Ok(r.opt_time(0)?.max(r.opt_time(1)?))
}

/// Removes a resource row and its data. Answers whether it existed.
pub async fn delete(db: &Db, id: i64) -> Result<bool, DbError> {
    db::retrying("resource delete", || delete_once(db, id)).await
}

async fn delete_once(db: &Db, id: i64) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    tx.execute("DELETE FROM resource_data WHERE resource_id = ?", &[id.into()]).await?;
    let n = tx.execute("DELETE FROM resource WHERE id = ?", &[id.into()]).await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Removes a resource row only if it is unlocked at version `atomic_key`
/// (a row another engine is working on stays).
pub async fn delete_cas(db: &Db, id: i64, atomic_key: i64) -> Result<bool, DbError> {
    db::retrying("resource delete", || delete_cas_once(db, id, atomic_key)).await
}

async fn delete_cas_once(db: &Db, id: i64, atomic_key: i64) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let n = tx
        .execute(
            "DELETE FROM resource WHERE id = ? AND engine_id IS NULL AND atomic_key = ?",
            &[id.into(), atomic_key.into()],
        )
        .await?;
    if n > 0 {
        tx.execute("DELETE FROM resource_data WHERE resource_id = ?", &[id.into()]).await?;
    }
    tx.commit().await?;
    Ok(n > 0)
}

/// One `resource_data` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceDataEntry {
    pub value: String,
    /// Hidden from API output (Heat encrypts these; we only flag them).
    pub redact: bool,
}

/// Every data entry of a resource, by key.
pub async fn data_get_all(db: &Db, resource_id: i64) -> Result<BTreeMap<String, ResourceDataEntry>, DbError> {
    let rows = db
        .fetch_all(
            "SELECT data_key, data_value, redact FROM resource_data WHERE resource_id = ?",
            &[resource_id.into()],
        )
        .await?;
    let mut out = BTreeMap::new();
    for r in &rows {
        out.insert(
            r.string(0)?,
            ResourceDataEntry { value: r.opt_string(1)?.unwrap_or_default(), redact: codec::read_bool(r, 2)? },
        );
    }
    Ok(out)
}

/// [`data_get_all`] in the caller's transaction.
pub async fn data_get_all_tx(tx: &mut Tx, resource_id: i64) -> Result<BTreeMap<String, ResourceDataEntry>, DbError> {
    let rows = tx
        .fetch_all(
            "SELECT data_key, data_value, redact FROM resource_data WHERE resource_id = ?",
            &[resource_id.into()],
        )
        .await?;
    let mut out = BTreeMap::new();
    for r in &rows {
        out.insert(
            r.string(0)?,
            ResourceDataEntry { value: r.opt_string(1)?.unwrap_or_default(), redact: codec::read_bool(r, 2)? },
        );
    }
    Ok(out)
}

/// Sets (inserts or overwrites) data entries of one resource, not
/// redacted, in one statement in the caller's transaction (an upsert on
/// the `(resource_id, data_key)` unique key).
pub async fn data_set_many_tx(tx: &mut Tx, resource_id: i64, entries: &[(String, String)]) -> Result<(), DbError> {
    if entries.is_empty() {
        return Ok(());
    }
    let now = db::now();
    let mut sql = String::from(
        "INSERT INTO resource_data (resource_id, data_key, data_value, redact, created_at, updated_at) VALUES ",
    );
    let mut params: Vec<Value> = Vec::with_capacity(entries.len() * 6);
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("(?, ?, ?, 0, ?, ?)");
        params.extend([resource_id.into(), key.as_str().into(), value.as_str().into(), now.into(), now.into()]);
    }
    sql.push_str(match tx.dialect {
        db::Dialect::MySql => {
            " ON DUPLICATE KEY UPDATE data_value = VALUES(data_value), redact = VALUES(redact), updated_at = VALUES(updated_at)"
        }
        db::Dialect::Sqlite | db::Dialect::Postgres => {
            " ON CONFLICT (resource_id, data_key) DO UPDATE SET data_value = excluded.data_value, \
             redact = excluded.redact, updated_at = excluded.updated_at"
        }
    });
    tx.execute(&sql, &params).await?;
    Ok(())
}

/// One data entry, if set.
pub async fn data_get(db: &Db, resource_id: i64, key: &str) -> Result<Option<ResourceDataEntry>, DbError> {
    Ok(data_get_all(db, resource_id).await?.remove(key))
}

/// Sets (inserts or overwrites) one data entry.
pub async fn data_set(db: &Db, resource_id: i64, key: &str, value: &str, redact: bool) -> Result<(), DbError> {
    db::retrying("resource data write", || data_set_once(db, resource_id, key, value, redact)).await
}

async fn data_set_once(db: &Db, resource_id: i64, key: &str, value: &str, redact: bool) -> Result<(), DbError> {
    // Update first, insert if absent; a concurrent insert of the same key
    // makes ours a unique violation, and the update then applies.
    for _ in 0..3 {
        let now = db::now();
        let mut tx = db.begin().await?;
        let n = tx
            .execute(
                "UPDATE resource_data SET data_value = ?, redact = ?, updated_at = ? WHERE resource_id = ? AND data_key = ?",
                &[value.into(), codec::bool_int(redact), now.into(), resource_id.into(), key.into()],
            )
            .await?;
        if n == 0 {
            let inserted = tx
                .execute(
                    "INSERT INTO resource_data (resource_id, data_key, data_value, redact, created_at, updated_at) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                    &[resource_id.into(), key.into(), value.into(), codec::bool_int(redact), now.into(), now.into()],
                )
                .await;
            match inserted {
                Ok(_) => {}
                Err(e) if e.is_unique_violation() => continue,
                Err(e) => return Err(e),
            }
        }
        tx.commit().await?;
        return Ok(());
    }
    Err(DbError::Schema(format!("resource_data {resource_id}/{key}: concurrent writers kept winning")))
}

/// Removes one data entry. Answers whether it existed.
pub async fn data_delete(db: &Db, resource_id: i64, key: &str) -> Result<bool, DbError> {
    let sql = "DELETE FROM resource_data WHERE resource_id = ? AND data_key = ?";
    Ok(super::write_one(db, "resource data delete", sql, &[resource_id.into(), key.into()]).await? > 0)
}

/// How many rows (replaced ones included, as upstream counts a tree) the
/// stacks `stack_ids` hold together.
pub async fn count_in_stacks(db: &Db, stack_ids: &[String]) -> Result<u64, DbError> {
    let mut total: u64 = 0;
    for chunk in stack_ids.chunks(500) {
        let params: Vec<Value> = chunk.iter().map(|id| id.as_str().into()).collect();
        let rows = db
            .fetch_all(
                &format!("SELECT COUNT(*) FROM resource WHERE stack_id IN ({})", db::in_list(chunk.len())),
                &params,
            )
            .await?;
        let n = rows.first().map(|r| r.i64(0)).transpose()?.unwrap_or_default();
        total = total.saturating_add(u64::try_from(n).unwrap_or_default());
    }
    Ok(total)
}
