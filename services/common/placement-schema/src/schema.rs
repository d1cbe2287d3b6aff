//! Placement's schema, exactly as upstream's Alembic migrations leave it at
//! their head revision, on SQLite, MariaDB/MySQL and PostgreSQL.
//!
//! keelson and the Python Placement service share databases (blue/green
//! upgrades, rollback without conversion), so the tables, columns, indexes,
//! unique constraints, the five foreign keys and `alembic_version` are
//! those of `placement-manage db sync`: a test compares both.

use keelson_db::ddl::{table_exists, Column, ForeignKey, Style, Table, Type};
use keelson_db::{Db, DbError, Dialect};

/// Upstream's Alembic revisions, oldest first. `db sync` upgrades along
/// this chain; `alembic_version` holds the last one applied.
pub const REVISIONS: &[&str] = &["b4ed3a175331", "611cd6dffd7b", "b5c396305c25", "422ece571366", "a082b8bb98d0"];

/// The head revision keelson's schema corresponds to.
pub const HEAD: &str = "a082b8bb98d0";

/// Created once by `db sync`, so no `IF NOT EXISTS`; the constraint names
/// the backends give are spelled out, as the schema reads back after Alembic.
const STYLE: Style = Style { if_not_exists: false, backend_names: true };

const fn col(name: &'static str, ty: Type, nullable: bool) -> Column {
    Column { name, ty, nullable, default: None }
}

fn timestamps(mut rest: Vec<Column>) -> Vec<Column> {
    let mut cols = vec![col("created_at", Type::DateTime, true), col("updated_at", Type::DateTime, true)];
    cols.append(&mut rest);
    cols
}

/// Alembic's own table; its key has a name on every backend but MySQL.
fn alembic_version() -> Table {
    Table {
        name: "alembic_version",
        columns: vec![col("version_num", Type::Str(32), false)],
        primary_key: &["version_num"],
        primary_key_name: Some("alembic_version_pkc"),
        uniques: &[],
        indexes: &[],
        foreign_keys: vec![],
    }
}

/// The tables in creation order (referenced tables first).
fn tables() -> Vec<Table> {
    vec![
        Table {
            name: "resource_providers",
            columns: timestamps(vec![
                col("id", Type::Serial, false),
                col("uuid", Type::Str(36), false),
                col("name", Type::Str(200), true),
                col("generation", Type::Int, true),
                col("root_provider_id", Type::Int, true),
                col("parent_provider_id", Type::Int, true),
            ]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_resource_providers0uuid", &["uuid"]), ("uniq_resource_providers0name", &["name"])],
            indexes: &[
                ("resource_providers_parent_provider_id_idx", &["parent_provider_id"]),
                ("resource_providers_root_provider_id_idx", &["root_provider_id"]),
            ],
            foreign_keys: vec![
                ForeignKey { name: None, column: "parent_provider_id", references: "resource_providers" },
                ForeignKey { name: None, column: "root_provider_id", references: "resource_providers" },
            ],
        },
        Table {
            name: "inventories",
            columns: timestamps(vec![
                col("id", Type::Serial, false),
                col("resource_provider_id", Type::Int, false),
                col("resource_class_id", Type::Int, false),
                col("total", Type::Int, false),
                col("reserved", Type::Int, false),
                col("min_unit", Type::Int, false),
                col("max_unit", Type::Int, false),
                col("step_size", Type::Int, false),
                col("allocation_ratio", Type::Float, false),
            ]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[(
                "uniq_inventories0resource_provider_resource_class",
                &["resource_provider_id", "resource_class_id"],
            )],
            indexes: &[("inventories_resource_class_id_idx", &["resource_class_id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "allocations",
            columns: timestamps(vec![
                col("id", Type::Serial, false),
                col("resource_provider_id", Type::Int, false),
                col("consumer_id", Type::Str(36), false),
                col("resource_class_id", Type::Int, false),
                col("used", Type::Int, false),
            ]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[
                (
                    "allocations_resource_provider_class_used_idx",
                    &["resource_provider_id", "resource_class_id", "used"],
                ),
                ("allocations_resource_class_id_idx", &["resource_class_id"]),
                ("allocations_consumer_id_idx", &["consumer_id"]),
            ],
            foreign_keys: vec![],
        },
        Table {
            name: "placement_aggregates",
            columns: timestamps(vec![col("id", Type::Serial, false), col("uuid", Type::Str(36), true)]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_placement_aggregates0uuid", &["uuid"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "resource_provider_aggregates",
            columns: timestamps(vec![
                col("resource_provider_id", Type::Int, false),
                col("aggregate_id", Type::Int, false),
            ]),
            primary_key: &["resource_provider_id", "aggregate_id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("resource_provider_aggregates_aggregate_id_idx", &["aggregate_id"])],
            foreign_keys: vec![],
        },
        Table {
            name: "traits",
            columns: timestamps(vec![col("id", Type::Serial, false), col("name", Type::Str(255), false)]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_traits0name", &["name"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "resource_provider_traits",
            columns: timestamps(vec![col("trait_id", Type::Int, false), col("resource_provider_id", Type::Int, false)]),
            primary_key: &["trait_id", "resource_provider_id"],
            primary_key_name: None,
            uniques: &[],
            indexes: &[("resource_provider_traits_resource_provider_trait_idx", &["resource_provider_id", "trait_id"])],
            foreign_keys: vec![
                ForeignKey { name: None, column: "resource_provider_id", references: "resource_providers" },
                ForeignKey { name: None, column: "trait_id", references: "traits" },
            ],
        },
        Table {
            name: "resource_classes",
            columns: timestamps(vec![col("id", Type::Serial, false), col("name", Type::Str(255), false)]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_resource_classes0name", &["name"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "projects",
            columns: timestamps(vec![col("id", Type::Serial, false), col("external_id", Type::Str(255), false)]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_projects0external_id", &["external_id"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "users",
            columns: timestamps(vec![col("id", Type::Serial, false), col("external_id", Type::Str(255), false)]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_users0external_id", &["external_id"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "consumer_types",
            columns: timestamps(vec![col("id", Type::Serial, false), col("name", Type::Str(255), false)]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_consumer_types0name", &["name"])],
            indexes: &[],
            foreign_keys: vec![],
        },
        Table {
            name: "consumers",
            columns: timestamps(vec![
                col("id", Type::Serial, false),
                col("uuid", Type::Str(36), false),
                col("project_id", Type::Int, false),
                col("user_id", Type::Int, false),
                Column { name: "generation", ty: Type::Int, nullable: false, default: Some("0") },
                col("consumer_type_id", Type::Int, true),
            ]),
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uniq_consumers0uuid", &["uuid"])],
            indexes: &[
                ("consumers_project_id_user_id_uuid_idx", &["project_id", "user_id", "uuid"]),
                ("consumers_project_id_uuid_idx", &["project_id", "uuid"]),
                ("consumers_consumer_type_id_idx", &["consumer_type_id"]),
            ],
            foreign_keys: vec![ForeignKey {
                // Upstream's migration names it, so SQLite has the name too.
                name: Some("consumers_consumer_type_id_fkey"),
                column: "consumer_type_id",
                references: "consumer_types",
            }],
        },
    ]
}

/// Every statement that creates the schema at [`HEAD`] on `dialect`.
pub fn ddl(dialect: Dialect) -> Vec<String> {
    let mut out = alembic_version().create(dialect, STYLE);
    let mut all = tables();
    // consumer_types must exist before consumers references it; the list
    // above already orders it so, but SQLite and PostgreSQL also need the
    // referenced table of a foreign key to exist.
    all.sort_by_key(|t| match t.name {
        "consumer_types" => 0,
        "resource_providers" | "traits" => 1,
        _ => 2,
    });
    for t in &all {
        out.extend(t.create(dialect, STYLE));
    }
    out
}

/// The revision recorded in `alembic_version`, or `None` for a database
/// without Placement's tables.
pub async fn current_revision(db: &Db) -> Result<Option<String>, DbError> {
    if !table_exists(db, "alembic_version").await? {
        return Ok(None);
    }
    let rows = db.fetch_all("SELECT version_num FROM alembic_version", &[]).await?;
    match rows.first() {
        Some(r) => Ok(Some(r.string(0)?)),
        None => Ok(None),
    }
}

/// What `db sync` did.
#[derive(Debug, PartialEq)]
pub enum SyncOutcome {
    Created,
    Upgraded { from: String },
    AlreadyCurrent,
}

/// Creates the schema on an empty database, or upgrades one created by an
/// older Placement along upstream's revision chain.
pub async fn sync(db: &Db) -> Result<SyncOutcome, DbError> {
    match current_revision(db).await? {
        None => {
            if table_exists(db, "resource_providers").await? {
                return Err(DbError::Schema(
                    "the database has Placement tables but no alembic_version; stamp it with `keelson db stamp <revision>` first".into(),
                ));
            }
            create(db).await?;
            Ok(SyncOutcome::Created)
        }
        Some(rev) if rev == HEAD => Ok(SyncOutcome::AlreadyCurrent),
        Some(rev) => {
            let Some(pos) = REVISIONS.iter().position(|r| *r == rev) else {
                return Err(DbError::Schema(format!(
                    "unknown schema revision {rev}; is this database newer than keelson?"
                )));
            };
            for next in &REVISIONS[pos + 1..] {
                upgrade_to(db, next).await?;
            }
            Ok(SyncOutcome::Upgraded { from: rev })
        }
    }
}

async fn create(db: &Db) -> Result<(), DbError> {
    // MySQL commits DDL implicitly; creating in one transaction still
    // gives SQLite and PostgreSQL an all-or-nothing schema.
    let mut tx = db.begin().await?;
    for stmt in ddl(db.dialect) {
        tx.execute_raw(&stmt).await?;
    }
    tx.execute("INSERT INTO alembic_version (version_num) VALUES (?)", &[HEAD.into()]).await?;
    tx.commit().await
}

async fn upgrade_to(db: &Db, revision: &str) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    match revision {
        "611cd6dffd7b" => {
            let n = tx.fetch_all("SELECT COUNT(*) FROM resource_providers WHERE root_provider_id IS NULL", &[]).await?;
            if n.first().map(|r| r.i64(0)).transpose()?.unwrap_or(0) > 0 {
                return Err(DbError::Schema(
                    "at least one resource provider has no root provider id; run `keelson db online_data_migrations` first".into(),
                ));
            }
        }
        "b5c396305c25" => {
            let n = tx
                .fetch_all(
                    "SELECT COUNT(*) FROM allocations LEFT OUTER JOIN consumers ON allocations.consumer_id = consumers.uuid WHERE consumers.id IS NULL",
                    &[],
                )
                .await?;
            if n.first().map(|r| r.i64(0)).transpose()?.unwrap_or(0) > 0 {
                return Err(DbError::Schema(
                    "at least one allocation has no consumer record; run `keelson db online_data_migrations` first"
                        .into(),
                ));
            }
        }
        "422ece571366" => {
            let t = tables();
            if let Some(ct) = t.iter().find(|t| t.name == "consumer_types") {
                tx.execute_raw(&ct.create_table(tx.dialect, STYLE)).await?;
            }
            let fk = match tx.dialect {
                Dialect::Sqlite => String::new(),
                _ => " CONSTRAINT consumers_consumer_type_id_fkey REFERENCES consumer_types (id)".to_string(),
            };
            let add = match tx.dialect {
                Dialect::Sqlite => {
                    "ALTER TABLE consumers ADD COLUMN consumer_type_id INTEGER REFERENCES consumer_types (id)"
                        .to_string()
                }
                _ => format!("ALTER TABLE consumers ADD COLUMN consumer_type_id INTEGER NULL{fk}"),
            };
            tx.execute_raw(&add).await?;
            tx.execute_raw("CREATE INDEX consumers_consumer_type_id_idx ON consumers (consumer_type_id)").await?;
        }
        "a082b8bb98d0" => {
            for (index, table) in [
                ("inventories_resource_provider_id_idx", "inventories"),
                ("inventories_resource_provider_resource_class_idx", "inventories"),
                ("ix_placement_aggregates_uuid", "placement_aggregates"),
                ("resource_providers_name_idx", "resource_providers"),
                ("resource_providers_uuid_idx", "resource_providers"),
            ] {
                let stmt = match tx.dialect {
                    Dialect::MySql => format!("DROP INDEX {index} ON {table}"),
                    _ => format!("DROP INDEX IF EXISTS {index}"),
                };
                tx.execute_raw(&stmt).await?;
            }
        }
        other => return Err(DbError::Schema(format!("no upgrade step to {other}"))),
    }
    tx.execute("UPDATE alembic_version SET version_num = ?", &[revision.into()]).await?;
    tx.commit().await
}

/// Records `revision` without running any migration (`db stamp`).
pub async fn stamp(db: &Db, revision: &str) -> Result<(), DbError> {
    let revision = if revision == "head" { HEAD } else { revision };
    if !REVISIONS.contains(&revision) {
        return Err(DbError::Schema(format!("unknown revision {revision}")));
    }
    if !table_exists(db, "alembic_version").await? {
        let pk = if db.dialect == Dialect::MySql {
            "PRIMARY KEY (version_num)"
        } else {
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)"
        };
        db.execute_raw(&format!("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, {pk})")).await?;
    }
    let mut tx = db.begin().await?;
    tx.execute("DELETE FROM alembic_version", &[]).await?;
    tx.execute("INSERT INTO alembic_version (version_num) VALUES (?)", &[revision.into()]).await?;
    tx.commit().await
}

/// Whether the schema is at [`HEAD`] with every table present (what
/// `status upgrade check` and service start-up require).
pub async fn check_current(db: &Db) -> Result<(), DbError> {
    match current_revision(db).await? {
        Some(rev) if rev == HEAD => {}
        Some(rev) => {
            return Err(DbError::Schema(format!("schema revision {rev} is behind {HEAD}; run `keelson db sync`")))
        }
        None => return Err(DbError::Schema("the database has no Placement schema; run `keelson db sync`".into())),
    }
    for t in tables() {
        if !table_exists(db, t.name).await? {
            return Err(DbError::Schema(format!("table {} is missing", t.name)));
        }
    }
    Ok(())
}

/// Names of the tables of the schema (for tests and checks).
pub fn table_names() -> Vec<&'static str> {
    tables().iter().map(|t| t.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keelson_db::{DatabaseUrl, PoolSettings};

    #[test]
    fn ddl_has_every_table() {
        for d in [Dialect::Sqlite, Dialect::MySql, Dialect::Postgres] {
            let all = ddl(d).join("\n");
            for t in table_names() {
                assert!(all.contains(&format!("CREATE TABLE {t} (")), "{t} on {d:?}");
            }
            assert_eq!(table_names().len(), 12);
        }
    }

    /// Byte for byte what `db sync` ran before this schema and
    /// the stack engine's schema shared one DDL generator: a change to the generator
    /// must not change them.
    #[test]
    fn ddl_matches_the_recorded_statements() {
        for (d, recorded) in [
            (Dialect::Sqlite, include_str!("../tests/data/ddl/sqlite.sql")),
            (Dialect::MySql, include_str!("../tests/data/ddl/mysql.sql")),
            (Dialect::Postgres, include_str!("../tests/data/ddl/postgresql.sql")),
        ] {
            let mut statements = ddl(d).join(";\n\n");
            statements.push_str(";\n");
            assert_eq!(statements, recorded, "{d:?}");
        }
    }

    #[tokio::test]
    async fn sync_is_idempotent_on_sqlite() {
        let db = Db::connect(&DatabaseUrl::parse("sqlite://").unwrap(), &PoolSettings::default()).await.unwrap();
        assert_eq!(sync(&db).await.unwrap(), SyncOutcome::Created);
        assert_eq!(sync(&db).await.unwrap(), SyncOutcome::AlreadyCurrent);
        assert_eq!(current_revision(&db).await.unwrap().as_deref(), Some(HEAD));
        check_current(&db).await.unwrap();
    }
}
