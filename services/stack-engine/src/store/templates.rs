//! `raw_template`: a stack's template, files and merged environment, one
//! row per stored definition (an update stores a new one).

use chrono::NaiveDateTime;
use keelson_db::{self as db, Db, DbError, Row, Tx};
use serde_json::Value as Json;

use super::codec;

/// A `raw_template` row.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTemplateRow {
    pub id: i64,
    /// The template document.
    pub template: Json,
    /// `{name: content}` of the files passed with the template.
    pub files: serde_json::Map<String, Json>,
    /// The merged environment.
    pub environment: Json,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
}

const COLUMNS: &str = "id, template, files, environment, created_at, updated_at";

fn from_row(row: &Row) -> Result<RawTemplateRow, DbError> {
    Ok(RawTemplateRow {
        id: row.i64(0)?,
        template: codec::read_opt_json(row, 1)?.unwrap_or(Json::Null),
        files: codec::read_object(row, 2)?,
        environment: codec::read_opt_json(row, 3)?.unwrap_or_else(|| Json::Object(Default::default())),
        created_at: row.opt_time(4)?,
        updated_at: row.opt_time(5)?,
    })
}

/// Stores a definition; answers its id.
pub async fn insert(
    tx: &mut Tx,
    template: &Json,
    files: &serde_json::Map<String, Json>,
    environment: &Json,
) -> Result<i64, DbError> {
    let now = db::now();
    tx.insert(
        "INSERT INTO raw_template (template, files, environment, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        &[
            codec::json(template),
            Json::Object(files.clone()).to_string().into(),
            codec::json(environment),
            now.into(),
            now.into(),
        ],
    )
    .await
}

/// Stores a definition in its own transaction; answers its id.
pub async fn store(
    db: &Db,
    template: &Json,
    files: &serde_json::Map<String, Json>,
    environment: &Json,
) -> Result<i64, DbError> {
    db::retrying("template insert", || async {
        let mut tx = db.begin().await?;
        let id = insert(&mut tx, template, files, environment).await?;
        tx.commit().await?;
        Ok(id)
    })
    .await
}

pub async fn get(db: &Db, id: i64) -> Result<Option<RawTemplateRow>, DbError> {
    let rows = db.fetch_all(&format!("SELECT {COLUMNS} FROM raw_template WHERE id = ?"), &[id.into()]).await?;
    rows.first().map(from_row).transpose()
}

/// Answers whether a row was deleted.
pub async fn delete(db: &Db, id: i64) -> Result<bool, DbError> {
    Ok(super::write_one(db, "template removal", "DELETE FROM raw_template WHERE id = ?", &[id.into()]).await? > 0)
}
