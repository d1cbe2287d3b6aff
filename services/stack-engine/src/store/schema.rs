//! The orchestration schema: tables named after Heat's (not
//! Heat-compatible), created idempotently on SQLite, MariaDB/MySQL and
//! PostgreSQL.

use std::time::Duration;

use keelson_db::ddl::{table_exists, Column, Style, Table, Type};
use keelson_db::{Db, DbError, Dialect};

/// The schema version [`sync`] records in `orchestration_schema`.
pub const VERSION: i64 = 5;

/// Run again by every engine at start-up, several at once.
const STYLE: Style = Style { if_not_exists: true, backend_names: false };

const fn c(name: &'static str, ty: Type) -> Column {
    Column { name, ty, nullable: false, default: None }
}

const fn n(name: &'static str, ty: Type) -> Column {
    Column { name, ty, nullable: true, default: None }
}

fn tables() -> Vec<Table> {
    use Type::{DateTimeMicros, Int, SerialKey, Str, Text};
    vec![
        Table {
            name: "orchestration_schema",
            columns: vec![c("version", Int)],
            primary_key: &["version"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "raw_template",
            columns: vec![
                c("id", SerialKey),
                c("template", Text),
                n("files", Text),
                n("environment", Text),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &[],
            primary_key_name: None,
            uniques: &[],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "stack",
            columns: vec![
                c("id", Str(36)),
                c("name", Str(255)),
                n("raw_template_id", Int),
                n("prev_raw_template_id", Int),
                n("tenant", Str(64)),
                n("username", Str(255)),
                n("user_id", Str(64)),
                n("owner_id", Str(36)),
                n("parent_resource_name", Str(255)),
                n("timeout_mins", Int),
                c("disable_rollback", Int),
                c("nested_depth", Int),
                n("stack_user_project_id", Str(64)),
                n("tags", Text),
                n("params", Text),
                Column { name: "current_traversal", ty: Str(36), nullable: false, default: Some("''") },
                n("current_deps", Text),
                n("action", Str(32)),
                n("status", Str(32)),
                n("status_reason", Text),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
                n("deleted_at", DateTimeMicros),
            ],
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("ix_stack_tenant_name", &["tenant", "name"]), ("ix_stack_owner_id", &["owner_id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "resource",
            columns: vec![
                c("id", SerialKey),
                c("uuid", Str(36)),
                c("stack_id", Str(36)),
                c("root_stack_id", Str(36)),
                c("name", Str(255)),
                c("resource_type", Str(255)),
                n("physical_resource_id", Str(255)),
                n("rsrc_metadata", Text),
                n("properties_data", Text),
                n("attr_data", Text),
                n("engine_id", Str(36)),
                Column { name: "atomic_key", ty: Int, nullable: false, default: Some("0") },
                n("requires", Text),
                n("replaces", Int),
                n("replaced_by", Int),
                n("current_template_id", Int),
                n("action", Str(32)),
                n("status", Str(32)),
                n("status_reason", Text),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &[],
            primary_key_name: None,
            uniques: &[("uq_resource_uuid", &["uuid"])],
            indexes: &[("ix_resource_stack_id", &["stack_id"]), ("ix_resource_engine_id", &["engine_id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "resource_data",
            columns: vec![
                c("id", SerialKey),
                c("resource_id", Int),
                c("data_key", Str(255)),
                n("data_value", Text),
                Column { name: "redact", ty: Int, nullable: false, default: Some("0") },
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &[],
            primary_key_name: None,
            uniques: &[("uq_resource_data_key", &["resource_id", "data_key"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "sync_point",
            columns: vec![
                c("entity_id", Str(36)),
                c("traversal_id", Str(36)),
                c("is_update", Int),
                c("stack_id", Str(36)),
                c("required", Int),
                Column { name: "satisfied", ty: Int, nullable: false, default: Some("0") },
                n("extra_data", Text),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &["entity_id", "traversal_id", "is_update"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("ix_sync_point_stack", &["stack_id", "traversal_id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "sync_point_input",
            columns: vec![
                c("entity_id", Str(36)),
                c("traversal_id", Str(36)),
                c("is_update", Int),
                c("predecessor", Str(64)),
                n("input_data", Text),
            ],
            primary_key: &["entity_id", "traversal_id", "is_update", "predecessor"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("ix_sync_point_input_traversal", &["traversal_id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "event",
            columns: vec![
                c("id", SerialKey),
                c("uuid", Str(36)),
                c("stack_id", Str(36)),
                n("resource_name", Str(255)),
                n("physical_resource_id", Str(255)),
                n("resource_action", Str(32)),
                n("resource_status", Str(32)),
                n("resource_status_reason", Text),
                n("resource_type", Str(255)),
                n("resource_properties", Text),
                n("created_at", DateTimeMicros),
            ],
            primary_key: &[],
            primary_key_name: None,
            uniques: &[("uq_event_uuid", &["uuid"])],
            indexes: &[("ix_event_stack_id", &["stack_id", "id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "service",
            columns: vec![
                c("id", Str(36)),
                c("engine_id", Str(36)),
                n("host", Str(255)),
                n("hostname", Str(255)),
                n("binary_name", Str(255)),
                n("topic", Str(255)),
                n("report_interval", Int),
                n("worker_endpoint", Str(255)),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
                n("deleted_at", DateTimeMicros),
            ],
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uq_service_engine_id", &["engine_id"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        // Version 2: software configs and deployments (Heat's columns;
        // `config` holds {config, inputs, outputs, options}), and the
        // engine's secret for pre-signed signal URLs.
        Table {
            name: "software_config",
            columns: vec![
                c("id", Str(36)),
                n("name", Str(255)),
                n("group", Str(255)),
                n("config", Text),
                c("tenant", Str(64)),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("ix_software_config_tenant", &["tenant"])],
            foreign_keys: vec![],
        },
        Table {
            name: "software_deployment",
            columns: vec![
                c("id", Str(36)),
                c("config_id", Str(36)),
                // Heat's is 36 wide; any server id the API accepts must fit.
                c("server_id", Str(255)),
                n("input_values", Text),
                n("output_values", Text),
                c("tenant", Str(64)),
                n("stack_user_project_id", Str(64)),
                n("action", Str(255)),
                n("status", Str(255)),
                n("status_reason", Text),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[
                ("ix_software_deployment_tenant", &["tenant"]),
                ("ix_software_deployment_server_id", &["server_id"]),
            ],
            foreign_keys: vec![],
        },
        Table {
            name: "signing_key",
            columns: vec![c("name", Str(64)), c("secret", Str(255)), n("created_at", DateTimeMicros)],
            primary_key: &["name"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[],
            foreign_keys: vec![],
        },
        // Version 3: the watchdog's re-trigger count per stuck stack, so
        // an operation that kills its engine is not re-run forever.
        Table {
            name: "watchdog_retrigger",
            columns: vec![
                c("stack_id", Str(36)),
                c("retriggers", Int),
                c("stuck_traversal", Str(36)),
                n("started_traversal", Str(36)),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &["stack_id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[],
            foreign_keys: vec![],
        },
        // Version 4: a root stack's stored credentials (Heat's
        // user_creds): its trust, encrypted.
        Table {
            name: "user_creds",
            columns: vec![
                c("stack_id", Str(36)),
                c("trust_id", Text),
                c("trustor_user_id", Str(64)),
                c("tenant_id", Str(64)),
                c("decrypt_method", Str(64)),
                n("created_at", DateTimeMicros),
            ],
            primary_key: &["stack_id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[],
            foreign_keys: vec![],
        },
        // Version 5: stack snapshots (Heat's snapshot table; `data` holds
        // the stack's abandon document with its resources' snapshot data).
        Table {
            name: "snapshot",
            columns: vec![
                c("id", Str(36)),
                n("name", Str(255)),
                c("stack_id", Str(36)),
                c("tenant", Str(64)),
                n("data", Text),
                n("action", Str(32)),
                n("status", Str(32)),
                n("status_reason", Text),
                n("created_at", DateTimeMicros),
                n("updated_at", DateTimeMicros),
            ],
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("ix_snapshot_stack_id", &["stack_id"])],
            foreign_keys: vec![],
        },
    ]
}

/// Every statement that creates the schema on `dialect`, all idempotent.
pub fn ddl(dialect: Dialect) -> Vec<String> {
    tables().iter().flat_map(|t| t.create(dialect, STYLE)).collect()
}

/// The version recorded by a previous [`sync`], if any.
pub async fn recorded_version(db: &Db) -> Result<Option<i64>, DbError> {
    if !table_exists(db, "orchestration_schema").await? {
        return Ok(None);
    }
    let rows = db.fetch_all("SELECT MAX(version) FROM orchestration_schema", &[]).await?;
    match rows.first() {
        Some(r) => r.opt_i64(0),
        None => Ok(None),
    }
}

/// Creates the tables that are absent and records [`VERSION`]. Several
/// processes may run it at once: a statement that loses a creation race
/// (PostgreSQL reports a duplicate catalog entry) is retried once, and
/// `IF NOT EXISTS` then makes it a no-op.
pub async fn sync(db: &Db) -> Result<(), DbError> {
    if recorded_version(db).await? == Some(VERSION) {
        return Ok(());
    }
    for stmt in ddl(db.dialect) {
        if let Err(first) = db.execute_raw(&stmt).await {
            tracing::debug!(error = %first, "schema statement lost a race; retrying");
            tokio::time::sleep(Duration::from_millis(50)).await;
            db.execute_raw(&stmt).await?;
        }
    }
    let mut tx = db.begin().await?;
    let present =
        tx.fetch_optional("SELECT version FROM orchestration_schema WHERE version = ?", &[VERSION.into()]).await?;
    if present.is_none() {
        match tx.execute("INSERT INTO orchestration_schema (version) VALUES (?)", &[VERSION.into()]).await {
            Ok(_) => tx.commit().await?,
            // A concurrent creator recorded it first.
            Err(e) if e.is_unique_violation() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte for byte what `sync` ran before this schema and
    /// Placement's schema shared one DDL generator: a change to the generator
    /// must not change them.
    #[test]
    fn ddl_matches_the_recorded_statements() {
        for (d, recorded) in [
            (Dialect::Sqlite, include_str!("../../tests/data/ddl/sqlite.sql")),
            (Dialect::MySql, include_str!("../../tests/data/ddl/mysql.sql")),
            (Dialect::Postgres, include_str!("../../tests/data/ddl/postgresql.sql")),
        ] {
            let mut statements = ddl(d).join(";\n\n");
            statements.push_str(";\n");
            assert_eq!(statements, recorded, "{d:?}");
        }
    }

    #[test]
    fn ddl_is_idempotent_and_portable() {
        for d in [Dialect::Sqlite, Dialect::MySql, Dialect::Postgres] {
            let stmts = ddl(d);
            assert!(stmts.iter().all(|s| s.contains("IF NOT EXISTS")), "{d:?}");
            let all = stmts.join("\n");
            assert!(all.contains("CREATE TABLE IF NOT EXISTS sync_point_input"));
            assert!(all.contains("PRIMARY KEY (entity_id, traversal_id, is_update, predecessor)"));
        }
        let mysql = ddl(Dialect::MySql).join("\n");
        assert!(mysql.contains("template LONGTEXT") && mysql.contains("DATETIME(6)"));
        assert!(
            mysql.contains("INDEX ix_stack_tenant_name (tenant, name)"),
            "inline: MySQL has no CREATE INDEX IF NOT EXISTS"
        );
        let pg = ddl(Dialect::Postgres).join("\n");
        assert!(pg.contains("id SERIAL PRIMARY KEY") && pg.contains("TIMESTAMP WITHOUT TIME ZONE"));
        let sqlite = ddl(Dialect::Sqlite).join("\n");
        assert!(sqlite.contains("id INTEGER PRIMARY KEY AUTOINCREMENT"));
        assert!(sqlite.contains("CREATE INDEX IF NOT EXISTS ix_event_stack_id ON event (stack_id, id)"));
    }
}
