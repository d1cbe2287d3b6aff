//! `software_config`, `software_deployment` (Heat's tables of the same
//! names) and `signing_key` (the engine's secret for pre-signed signal
//! URLs). Software configs are immutable once written; a deployment's
//! status and outputs are overwritten by whoever reports last (the agent's
//! signal or the API's PUT), as upstream.

use chrono::NaiveDateTime;
use keelson_db::ddl::ident;
use keelson_db::{self as db, Db, DbError, Kind, Row, Value};
use serde_json::Value as Json;

use super::codec;
use super::resources::{self, ResourceRow};

/// A `software_config` row; `config` is the document
/// `{config, inputs, outputs, options}`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SoftwareConfigRow {
    pub id: String,
    pub name: Option<String>,
    pub group: Option<String>,
    pub config: Json,
    pub tenant: String,
    pub created_at: Option<NaiveDateTime>,
}

/// A `software_deployment` row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SoftwareDeploymentRow {
    pub id: String,
    pub config_id: String,
    pub server_id: String,
    pub input_values: Json,
    pub output_values: Json,
    pub tenant: String,
    pub stack_user_project_id: Option<String>,
    pub action: Option<String>,
    pub status: Option<String>,
    pub status_reason: Option<String>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
}

fn config_columns(db: &Db) -> String {
    format!("id, name, {}, config, tenant, created_at", ident(db.dialect, "group"))
}

fn config_from_row(row: &Row) -> Result<SoftwareConfigRow, DbError> {
    Ok(SoftwareConfigRow {
        id: row.string(0)?,
        name: row.opt_string(1)?,
        group: row.opt_string(2)?,
        config: codec::read_opt_json(row, 3)?.unwrap_or(Json::Null),
        tenant: row.opt_string(4)?.unwrap_or_default(),
        created_at: row.opt_time(5)?,
    })
}

/// Stores a new config; its `created_at` is set here.
pub async fn create_config(db: &Db, new: &SoftwareConfigRow) -> Result<SoftwareConfigRow, DbError> {
    let now = db::now();
    let sql = format!(
        "INSERT INTO software_config (id, name, {}, config, tenant, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ident(db.dialect, "group")
    );
    let params: Vec<Value> = vec![
        new.id.as_str().into(),
        new.name.clone().into(),
        new.group.clone().into(),
        codec::json(&new.config),
        new.tenant.as_str().into(),
        now.into(),
        Value::Null(Kind::Time),
    ];
    super::write_one(db, "software_config insert", &sql, &params).await?;
    Ok(SoftwareConfigRow { created_at: Some(now), ..new.clone() })
}

pub async fn get_config(db: &Db, id: &str) -> Result<Option<SoftwareConfigRow>, DbError> {
    let sql = format!("SELECT {} FROM software_config WHERE id = ?", config_columns(db));
    db.fetch_all(&sql, &[id.into()]).await?.first().map(config_from_row).transpose()
}

/// Configs of `tenant` (every tenant's when None), oldest first, after
/// `marker` (an id), at most `limit`.
pub async fn list_configs(
    db: &Db,
    tenant: Option<&str>,
    marker: Option<&SoftwareConfigRow>,
    limit: Option<i64>,
) -> Result<Vec<SoftwareConfigRow>, DbError> {
    let mut sql = format!("SELECT {} FROM software_config WHERE 1 = 1", config_columns(db));
    let mut params: Vec<Value> = Vec::new();
    if let Some(t) = tenant {
        sql.push_str(" AND tenant = ?");
        params.push(t.into());
    }
    if let Some(m) = marker {
        // (created_at, id) after the marker's.
        sql.push_str(" AND (created_at > ? OR (created_at = ? AND id > ?))");
        let at = m.created_at.unwrap_or_default();
        params.extend([at.into(), at.into(), m.id.as_str().into()]);
    }
    sql.push_str(" ORDER BY created_at, id");
    if let Some(l) = limit {
        sql.push_str(&format!(" LIMIT {}", l.max(0)));
    }
    db.fetch_all(&sql, &params).await?.iter().map(config_from_row).collect()
}

pub async fn delete_config(db: &Db, id: &str) -> Result<bool, DbError> {
    Ok(super::write_one(db, "software_config delete", "DELETE FROM software_config WHERE id = ?", &[id.into()]).await?
        > 0)
}

const DEPLOYMENT_COLUMNS: &str =
    "id, config_id, server_id, input_values, output_values, tenant, stack_user_project_id, \
     action, status, status_reason, created_at, updated_at";

fn deployment_from_row(row: &Row) -> Result<SoftwareDeploymentRow, DbError> {
    Ok(SoftwareDeploymentRow {
        id: row.string(0)?,
        config_id: row.string(1)?,
        server_id: row.string(2)?,
        input_values: codec::read_opt_json(row, 3)?.unwrap_or(Json::Object(Default::default())),
        output_values: codec::read_opt_json(row, 4)?.unwrap_or(Json::Object(Default::default())),
        tenant: row.opt_string(5)?.unwrap_or_default(),
        stack_user_project_id: row.opt_string(6)?,
        action: row.opt_string(7)?,
        status: row.opt_string(8)?,
        status_reason: row.opt_string(9)?,
        created_at: row.opt_time(10)?,
        updated_at: row.opt_time(11)?,
    })
}

pub async fn create_deployment(db: &Db, new: &SoftwareDeploymentRow) -> Result<SoftwareDeploymentRow, DbError> {
    let now = db::now();
    let sql =
        format!("INSERT INTO software_deployment ({DEPLOYMENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    let params: Vec<Value> = vec![
        new.id.as_str().into(),
        new.config_id.as_str().into(),
        new.server_id.as_str().into(),
        codec::json(&new.input_values),
        codec::json(&new.output_values),
        new.tenant.as_str().into(),
        new.stack_user_project_id.clone().into(),
        new.action.clone().into(),
        new.status.clone().into(),
        new.status_reason.clone().into(),
        now.into(),
        Value::Null(Kind::Time),
    ];
    super::write_one(db, "software_deployment insert", &sql, &params).await?;
    Ok(SoftwareDeploymentRow { created_at: Some(now), ..new.clone() })
}

pub async fn get_deployment(db: &Db, id: &str) -> Result<Option<SoftwareDeploymentRow>, DbError> {
    let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM software_deployment WHERE id = ?");
    db.fetch_all(&sql, &[id.into()]).await?.first().map(deployment_from_row).transpose()
}

/// Deployments of `tenant` (all when None), of `server_id` when given,
/// oldest first.
pub async fn list_deployments(
    db: &Db,
    tenant: Option<&str>,
    server_id: Option<&str>,
) -> Result<Vec<SoftwareDeploymentRow>, DbError> {
    let mut sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM software_deployment WHERE 1 = 1");
    let mut params: Vec<Value> = Vec::new();
    if let Some(t) = tenant {
        sql.push_str(" AND tenant = ?");
        params.push(t.into());
    }
    if let Some(s) = server_id {
        sql.push_str(" AND server_id = ?");
        params.push(s.into());
    }
    sql.push_str(" ORDER BY created_at, id");
    db.fetch_all(&sql, &params).await?.iter().map(deployment_from_row).collect()
}

/// The columns of a deployment an update may change (None: unchanged).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentChange {
    pub config_id: Option<String>,
    pub input_values: Option<Json>,
    pub output_values: Option<Json>,
    pub action: Option<String>,
    pub status: Option<String>,
    pub status_reason: Option<String>,
}

/// Applies `change`; false when the row is gone.
pub async fn update_deployment(db: &Db, id: &str, change: &DeploymentChange) -> Result<bool, DbError> {
    let mut sets: Vec<&str> = Vec::new();
    let mut params: Vec<Value> = Vec::new();
    if let Some(v) = &change.config_id {
        sets.push("config_id = ?");
        params.push(v.as_str().into());
    }
    if let Some(v) = &change.input_values {
        sets.push("input_values = ?");
        params.push(codec::json(v));
    }
    if let Some(v) = &change.output_values {
        sets.push("output_values = ?");
        params.push(codec::json(v));
    }
    if let Some(v) = &change.action {
        sets.push("action = ?");
        params.push(v.as_str().into());
    }
    if let Some(v) = &change.status {
        sets.push("status = ?");
        params.push(v.as_str().into());
    }
    if let Some(v) = &change.status_reason {
        sets.push("status_reason = ?");
        params.push(v.as_str().into());
    }
    sets.push("updated_at = ?");
    params.push(db::now().into());
    params.push(id.into());
    let sql = format!("UPDATE software_deployment SET {} WHERE id = ?", sets.join(", "));
    Ok(super::write_one(db, "software_deployment update", &sql, &params).await? > 0)
}

pub async fn delete_deployment(db: &Db, id: &str) -> Result<bool, DbError> {
    Ok(super::write_one(db, "software_deployment delete", "DELETE FROM software_deployment WHERE id = ?", &[id.into()])
        .await?
        > 0)
}

/// The live resource whose physical id is `physical_id` (a server's
/// deployments go into its metadata); the newest when several match.
pub async fn resource_by_physical_id(db: &Db, physical_id: &str) -> Result<Option<ResourceRow>, DbError> {
    let sql = format!(
        "SELECT {} FROM resource r WHERE r.physical_resource_id = ? AND r.replaced_by IS NULL ORDER BY r.id DESC",
        resources::columns("r")
    );
    db.fetch_all(&sql, &[physical_id.into()]).await?.first().map(resources::from_row).transpose()
}

/// Upstream `resource_id_set` during an action: records the physical id
/// of the row of `name` that `engine_id` holds locked, leaving its
/// `atomic_key` alone (the lock holder's own CAS still applies); a signal
/// arriving before the action ends can then find what it is for.
pub async fn set_locked_physical_id(
    db: &Db,
    stack_id: &str,
    name: &str,
    engine_id: &str,
    physical_id: &str,
) -> Result<bool, DbError> {
    let n = super::write_one(
        db,
        "resource physical id",
        "UPDATE resource SET physical_resource_id = ? WHERE stack_id = ? AND name = ? AND engine_id = ?",
        &[physical_id.into(), stack_id.into(), name.into(), engine_id.into()],
    )
    .await?;
    Ok(n > 0)
}

/// The secret named `name`, created with `generate` on first use. Two
/// engines racing to create it both end up with the stored one.
pub async fn signing_key(db: &Db, name: &str, generate: impl Fn() -> String) -> Result<String, DbError> {
    let read = |db: &Db| {
        let db = db.clone();
        let name = name.to_string();
        async move {
            let rows = db.fetch_all("SELECT secret FROM signing_key WHERE name = ?", &[name.as_str().into()]).await?;
            rows.first().map(|r| r.string(0)).transpose()
        }
    };
    if let Some(k) = read(db).await? {
        return Ok(k);
    }
    let secret = generate();
    let inserted = db::retrying("signing_key insert", || async {
        let mut tx = db.begin().await?;
        match tx
            .execute(
                "INSERT INTO signing_key (name, secret, created_at) VALUES (?, ?, ?)",
                &[name.into(), secret.as_str().into(), db::now().into()],
            )
            .await
        {
            Ok(_) => {
                tx.commit().await?;
                Ok(true)
            }
            // Another engine stored one first: use theirs.
            Err(e) if e.is_unique_violation() => Ok(false),
            Err(e) => Err(e),
        }
    })
    .await?;
    if inserted {
        return Ok(secret);
    }
    read(db).await?.ok_or_else(|| DbError::Decode { column: 0, reason: "signing key vanished".into() })
}
