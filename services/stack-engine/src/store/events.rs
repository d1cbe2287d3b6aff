//! `event`: the stack's and its resources' state changes, as Heat lists
//! them (newest first by default, uuid markers, purged past a cap).

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Row, Tx, Value};
use serde_json::Value as Json;

use super::codec;

/// An `event` row.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub id: i64,
    pub uuid: String,
    pub stack_id: String,
    pub resource_name: String,
    pub physical_resource_id: Option<String>,
    pub resource_action: String,
    pub resource_status: String,
    pub resource_status_reason: String,
    pub resource_type: String,
    pub resource_properties: Option<Json>,
    pub created_at: Option<NaiveDateTime>,
}

const COLUMNS: &str = "id, uuid, stack_id, resource_name, physical_resource_id, resource_action, resource_status, \
     resource_status_reason, resource_type, resource_properties, created_at";

fn from_row(row: &Row) -> Result<EventRow, DbError> {
    Ok(EventRow {
        id: row.i64(0)?,
        uuid: row.string(1)?,
        stack_id: row.string(2)?,
        resource_name: row.opt_string(3)?.unwrap_or_default(),
        physical_resource_id: row.opt_string(4)?,
        resource_action: row.opt_string(5)?.unwrap_or_default(),
        resource_status: row.opt_string(6)?.unwrap_or_default(),
        resource_status_reason: row.opt_string(7)?.unwrap_or_default(),
        resource_type: row.opt_string(8)?.unwrap_or_default(),
        resource_properties: codec::read_opt_json(row, 9)?,
        created_at: row.opt_time(10)?,
    })
}

/// What a new event records. Stack-level events use the stack name as
/// `resource_name`, `OS::Heat::Stack` as type and the stack id as
/// physical id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewEvent {
    pub stack_id: String,
    pub resource_name: String,
    pub physical_resource_id: Option<String>,
    pub resource_action: String,
    pub resource_status: String,
    pub resource_status_reason: String,
    pub resource_type: String,
    pub resource_properties: Option<Json>,
}

/// The resource type of stack-level events.
pub const STACK_EVENT_TYPE: &str = "OS::Heat::Stack";

const INSERT: &str =
    "INSERT INTO event (uuid, stack_id, resource_name, physical_resource_id, resource_action, resource_status, \
     resource_status_reason, resource_type, resource_properties, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

fn insert_params(event: &NewEvent, uuid: &str) -> [Value; 10] {
    [
        uuid.into(),
        event.stack_id.as_str().into(),
        event.resource_name.as_str().into(),
        event.physical_resource_id.clone().into(),
        event.resource_action.as_str().into(),
        event.resource_status.as_str().into(),
        event.resource_status_reason.as_str().into(),
        event.resource_type.as_str().into(),
        codec::opt_json(event.resource_properties.as_ref()),
        db::now().into(),
    ]
}

/// Stores an event (uuid generated, `created_at` now); answers its uuid.
pub async fn insert(db: &Db, event: &NewEvent) -> Result<String, DbError> {
    let uuid = uuid::Uuid::new_v4().to_string();
    super::write_one(db, "event insert", INSERT, &insert_params(event, &uuid)).await?;
    Ok(uuid)
}

/// [`insert`] in the caller's transaction: the event commits with the
/// state change it records.
pub async fn insert_tx(tx: &mut Tx, event: &NewEvent) -> Result<String, DbError> {
    let uuid = uuid::Uuid::new_v4().to_string();
    tx.execute(INSERT, &insert_params(event, &uuid)).await?;
    Ok(uuid)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortDir {
    Asc,
    Desc,
}

impl SortDir {
    /// Parses Heat's `sort_dir` values.
    pub fn parse(s: &str) -> Option<SortDir> {
        match s {
            "asc" => Some(SortDir::Asc),
            "desc" => Some(SortDir::Desc),
            _ => None,
        }
    }
}

/// The columns events may be sorted by: Heat accepts any column of its
/// event table (oslo.db checks only that the column exists).
pub const SORT_KEYS: &[&str] = &[
    "created_at",
    "resource_type",
    "resource_name",
    "resource_action",
    "resource_status",
    "resource_status_reason",
    "physical_resource_id",
    "stack_id",
    "uuid",
    "id",
];

/// An event listing, as Heat's `event_get_all_by_stack`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventQuery {
    /// The stack and, for nested_depth listings, its nested stacks.
    pub stack_ids: Vec<String>,
    /// Only this resource's events.
    pub resource_name: Option<String>,
    /// Filters: each multi-valued (any of the values matches).
    pub resource_status: Vec<String>,
    pub resource_action: Vec<String>,
    pub resource_names: Vec<String>,
    pub resource_type: Vec<String>,
    /// Default: descending when no sort key is given, ascending otherwise.
    pub sort_dir: Option<SortDir>,
    /// Default `created_at`; `id` is always appended as the tie-breaker.
    pub sort_keys: Vec<String>,
    /// The uuid of the last event of the previous page.
    pub marker: Option<String>,
    pub limit: Option<i64>,
}

fn push_in(clauses: &mut Vec<String>, params: &mut Vec<Value>, column: &str, values: &[String]) {
    if values.is_empty() {
        return;
    }
    clauses.push(format!("{column} IN ({})", db::in_list(values.len())));
    params.extend(values.iter().map(Value::from));
}

/// Lists events by `query`. An unknown sort key is refused (Heat answers
/// 400 `Invalid`); an unknown marker is ignored, as Heat does.
pub async fn list(db: &Db, query: &EventQuery) -> Result<Vec<EventRow>, crate::error::EngineError> {
    if query.stack_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut keys: Vec<&str> = Vec::new();
    for k in &query.sort_keys {
        match SORT_KEYS.iter().find(|s| **s == k.as_str()) {
            Some(s) => keys.push(s),
            None => return Err(crate::error::EngineError::Invalid(format!("Sort key supplied is invalid: {k}"))),
        }
    }
    let dir = match (keys.is_empty(), query.sort_dir) {
        (_, Some(d)) => d,
        (true, None) => SortDir::Desc,
        (false, None) => SortDir::Asc,
    };
    if keys.is_empty() {
        keys.push("created_at");
    }
    if !keys.contains(&"id") {
        keys.push("id");
    }

    let mut clauses = Vec::new();
    let mut params: Vec<Value> = Vec::new();
    push_in(&mut clauses, &mut params, "stack_id", &query.stack_ids);
    if let Some(name) = &query.resource_name {
        clauses.push("resource_name = ?".to_string());
        params.push(name.into());
    }
    push_in(&mut clauses, &mut params, "resource_status", &query.resource_status);
    push_in(&mut clauses, &mut params, "resource_action", &query.resource_action);
    push_in(&mut clauses, &mut params, "resource_name", &query.resource_names);
    push_in(&mut clauses, &mut params, "resource_type", &query.resource_type);

    if let Some(marker) = &query.marker {
        let found = db.fetch_all(&format!("SELECT {COLUMNS} FROM event WHERE uuid = ?"), &[marker.into()]).await?;
        if let Some(m) = found.first().map(from_row).transpose()? {
            let (clause, values) = after_marker(&keys, dir, &m);
            clauses.push(clause);
            params.extend(values);
        }
    }

    let order = match dir {
        SortDir::Asc => "ASC",
        SortDir::Desc => "DESC",
    };
    let order_by: Vec<String> = keys.iter().map(|k| format!("{k} {order}")).collect();
    let mut sql =
        format!("SELECT {COLUMNS} FROM event WHERE {} ORDER BY {}", clauses.join(" AND "), order_by.join(", "));
    if let Some(limit) = query.limit {
        sql.push_str(&format!(" LIMIT {}", limit.max(0)));
    }
    let rows = db.fetch_all(&sql, &params).await?;
    Ok(rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?)
}

fn key_value(event: &EventRow, key: &str) -> Value {
    match key {
        "id" => Value::Int(event.id),
        "created_at" => event.created_at.map(Value::Time).unwrap_or(Value::Null(keelson_db::Kind::Time)),
        "resource_type" => event.resource_type.as_str().into(),
        "resource_name" => event.resource_name.as_str().into(),
        "resource_action" => event.resource_action.as_str().into(),
        "resource_status_reason" => event.resource_status_reason.as_str().into(),
        "physical_resource_id" => event.physical_resource_id.clone().into(),
        "stack_id" => event.stack_id.as_str().into(),
        "uuid" => event.uuid.as_str().into(),
        _ => event.resource_status.as_str().into(),
    }
}

/// The rows strictly after `marker` in the (keys, dir) order, as
/// oslo.db's `paginate_query`: (k1 > m1) OR (k1 = m1 AND k2 > m2) OR ...
fn after_marker(keys: &[&str], dir: SortDir, marker: &EventRow) -> (String, Vec<Value>) {
    let cmp = match dir {
        SortDir::Asc => ">",
        SortDir::Desc => "<",
    };
    let mut ors = Vec::new();
    let mut params = Vec::new();
    for i in 0..keys.len() {
        let mut ands = Vec::new();
        for k in &keys[..i] {
            ands.push(format!("{k} = ?"));
            params.push(key_value(marker, k));
        }
        ands.push(format!("{} {cmp} ?", keys[i]));
        params.push(key_value(marker, keys[i]));
        ors.push(format!("({})", ands.join(" AND ")));
    }
    (format!("({})", ors.join(" OR ")), params)
}

/// One event of a stack by uuid.
pub async fn get(db: &Db, stack_id: &str, uuid: &str) -> Result<Option<EventRow>, DbError> {
    let rows = db
        .fetch_all(
            &format!("SELECT {COLUMNS} FROM event WHERE stack_id = ? AND uuid = ?"),
            &[stack_id.into(), uuid.into()],
        )
        .await?;
    rows.first().map(from_row).transpose()
}

/// Caps a stack's events (call after an insert): when it has more than
/// `keep`, its `batch` oldest go, as Heat's `max_events_per_stack` /
/// `event_purge_batch_size`. Answers how many were deleted.
pub async fn purge_oldest(db: &Db, stack_id: &str, keep: i64, batch: i64) -> Result<u64, DbError> {
    let count = db
        .fetch_all("SELECT COUNT(*) FROM event WHERE stack_id = ?", &[stack_id.into()])
        .await?
        .first()
        .map(|r| r.i64(0))
        .transpose()?
        .unwrap_or(0);
    if keep <= 0 || count <= keep {
        return Ok(0);
    }
    let oldest = db
        .fetch_all(
            &format!("SELECT id FROM event WHERE stack_id = ? ORDER BY id LIMIT {}", batch.max(1)),
            &[stack_id.into()],
        )
        .await?;
    let ids: Vec<Value> = oldest.iter().map(|r| r.i64(0).map(Value::Int)).collect::<Result<_, _>>()?;
    if ids.is_empty() {
        return Ok(0);
    }
    super::write_one(db, "event purge", &format!("DELETE FROM event WHERE id IN ({})", db::in_list(ids.len())), &ids)
        .await
}

/// Removes every event of the stack.
pub async fn delete_for_stack(db: &Db, stack_id: &str) -> Result<u64, DbError> {
    super::write_one(db, "event removal", "DELETE FROM event WHERE stack_id = ?", &[stack_id.into()]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_clause_is_lexicographic() {
        let marker = EventRow {
            id: 7,
            uuid: "u".into(),
            stack_id: "s".into(),
            resource_name: "r".into(),
            physical_resource_id: None,
            resource_action: "CREATE".into(),
            resource_status: "COMPLETE".into(),
            resource_status_reason: String::new(),
            resource_type: "T".into(),
            resource_properties: None,
            created_at: None,
        };
        let (sql, params) = after_marker(&["resource_name", "id"], SortDir::Desc, &marker);
        assert_eq!(sql, "((resource_name < ?) OR (resource_name = ? AND id < ?))");
        assert_eq!(params, vec![Value::from("r"), Value::from("r"), Value::Int(7)]);
        let (sql, _) = after_marker(&["id"], SortDir::Asc, &marker);
        assert_eq!(sql, "((id > ?))");
    }
}
