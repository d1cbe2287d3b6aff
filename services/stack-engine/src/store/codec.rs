//! Column encodings shared by the store modules: JSON documents are TEXT,
//! booleans are INT 0/1.

use keelson_db::{DbError, Kind, Row, Value};
use serde_json::Value as Json;

/// A JSON document as a TEXT parameter.
pub(crate) fn json(v: &Json) -> Value {
    Value::Text(v.to_string())
}

/// An optional JSON document (NULL when absent).
pub(crate) fn opt_json(v: Option<&Json>) -> Value {
    match v {
        Some(v) => json(v),
        None => Value::Null(Kind::Text),
    }
}

pub(crate) fn bool_int(b: bool) -> Value {
    Value::Int(i64::from(b))
}

/// Decodes a JSON TEXT column; NULL gives `None`.
pub(crate) fn read_opt_json(row: &Row, i: usize) -> Result<Option<Json>, DbError> {
    match row.opt_string(i)? {
        None => Ok(None),
        Some(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| DbError::Decode { column: i, reason: format!("invalid JSON: {e}") }),
    }
}

/// Decodes a JSON TEXT column that must hold an object (NULL = empty).
pub(crate) fn read_object(row: &Row, i: usize) -> Result<serde_json::Map<String, Json>, DbError> {
    match read_opt_json(row, i)? {
        None | Some(Json::Null) => Ok(serde_json::Map::new()),
        Some(Json::Object(m)) => Ok(m),
        Some(other) => Err(DbError::Decode { column: i, reason: format!("expected a JSON object, got {other}") }),
    }
}

pub(crate) fn read_bool(row: &Row, i: usize) -> Result<bool, DbError> {
    Ok(row.opt_i64(i)?.unwrap_or(0) != 0)
}

/// Decodes a JSON list of strings (NULL gives `None`).
pub(crate) fn read_opt_strings(row: &Row, i: usize) -> Result<Option<Vec<String>>, DbError> {
    match read_opt_json(row, i)? {
        None | Some(Json::Null) => Ok(None),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| DbError::Decode { column: i, reason: format!("expected a list of strings: {e}") }),
    }
}

/// Decodes a JSON list of integers (NULL gives an empty list).
pub(crate) fn read_ids(row: &Row, i: usize) -> Result<Vec<i64>, DbError> {
    match read_opt_json(row, i)? {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v)
            .map_err(|e| DbError::Decode { column: i, reason: format!("expected a list of ids: {e}") }),
    }
}

/// Builds an `UPDATE table SET ...` from assignments collected by the
/// callers' change structs.
#[derive(Default)]
pub(crate) struct Assignments {
    pub(crate) columns: Vec<String>,
    pub(crate) params: Vec<Value>,
}

impl Assignments {
    pub(crate) fn set(&mut self, column: &str, value: Value) {
        self.columns.push(format!("{column} = ?"));
        self.params.push(value);
    }

    /// A raw SQL expression without parameters (e.g. `atomic_key + 1`).
    pub(crate) fn set_expr(&mut self, column: &str, expr: &str) {
        self.columns.push(format!("{column} = {expr}"));
    }

    pub(crate) fn sql(&self) -> String {
        self.columns.join(", ")
    }
}

/// Decodes an `action` column; NULL or an unknown name is a decode error.
pub(crate) fn read_action(row: &Row, i: usize) -> Result<super::Action, DbError> {
    read_state(row, i)
}

/// Decodes a `status` column; NULL or an unknown name is a decode error.
pub(crate) fn read_status(row: &Row, i: usize) -> Result<super::Status, DbError> {
    read_state(row, i)
}

fn read_state<T: std::str::FromStr<Err = super::UnknownState>>(row: &Row, i: usize) -> Result<T, DbError> {
    let text = row.opt_string(i)?.unwrap_or_default();
    text.parse().map_err(|e: super::UnknownState| DbError::Decode { column: i, reason: e.to_string() })
}
