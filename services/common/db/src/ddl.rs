//! The one DDL generator: a table model (columns, primary key, unique
//! constraints, foreign keys, indexes) rendered as each dialect needs it.
//!
//! Two schemas are written with it, and want different things of the same
//! tables: Placement's must be upstream's statement for statement (keelson
//! and the Python service share databases), the stack engine's must be
//! safe to run again and from several processes at once. [`Style`] holds
//! those few knobs; everything else is rendered one way.

use crate::{Db, DbError, Dialect};

/// A column's type, as each dialect spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// An auto-increment integer whose key the table declares
    /// ([`Table::primary_key`]), as SQLAlchemy creates one: on SQLite a
    /// plain `INTEGER` key (a rowid alias, whose ids may be reused).
    Serial,
    /// An auto-increment integer that is the table's whole primary key,
    /// declared on the column (the table's `primary_key` is then empty):
    /// on SQLite `AUTOINCREMENT`, so an id is never handed out twice. Never
    /// null, and no default.
    SerialKey,
    Int,
    /// SQLAlchemy's `Float`: `DOUBLE PRECISION` on PostgreSQL.
    Float,
    /// `VARCHAR(n)`.
    Str(u32),
    /// Documents that may exceed 64 KiB (`LONGTEXT` on MySQL).
    Text,
    /// A timestamp without time zone, whole seconds on MySQL (`DATETIME`).
    DateTime,
    /// A timestamp without time zone, to the microsecond on MySQL too
    /// (`DATETIME(6)`).
    DateTimeMicros,
}

/// One column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: Type,
    pub nullable: bool,
    /// The default as SQL text (`0`, `''`).
    pub default: Option<&'static str>,
}

/// A foreign key from one column to the referenced table's `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    /// A name given in the schema, written on every dialect; `None`: the
    /// backend names it (written out only under [`Style::backend_names`]).
    pub name: Option<&'static str>,
    pub column: &'static str,
    pub references: &'static str,
}

/// `(name, columns)` of a unique constraint or an index.
pub type Named = (&'static str, &'static [&'static str]);

/// One table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: &'static str,
    pub columns: Vec<Column>,
    /// The key's columns; empty when a [`Type::SerialKey`] column is the key.
    pub primary_key: &'static [&'static str],
    /// A name given to the primary key in the schema; not written on MySQL,
    /// where every primary key is named `PRIMARY`.
    pub primary_key_name: Option<&'static str>,
    pub uniques: &'static [Named],
    pub indexes: &'static [Named],
    pub foreign_keys: Vec<ForeignKey>,
}

/// How a schema wants its statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    /// `IF NOT EXISTS` on every statement, so that they can run again and
    /// concurrently. MySQL has no `CREATE INDEX IF NOT EXISTS`, so there
    /// the indexes are declared inside `CREATE TABLE` instead.
    pub if_not_exists: bool,
    /// Spell out the names the backends give unnamed constraints
    /// (PostgreSQL `<table>_pkey` and `<table>_<column>_fkey`, MySQL
    /// `<table>_ibfk_<n>`), so the statements read as the schema reads back
    /// after Alembic created it; SQLite's stay unnamed.
    pub backend_names: bool,
}

/// A name as the dialect needs it written: Heat's `group` column is a
/// reserved word everywhere.
pub fn ident(d: Dialect, name: &str) -> String {
    if name.eq_ignore_ascii_case("group") {
        match d {
            Dialect::MySql => format!("`{name}`"),
            _ => format!("\"{name}\""),
        }
    } else {
        name.to_string()
    }
}

fn idents(d: Dialect, names: &[&str]) -> String {
    names.iter().map(|n| ident(d, n)).collect::<Vec<_>>().join(", ")
}

fn type_sql(d: Dialect, ty: Type) -> String {
    match (d, ty) {
        (Dialect::Sqlite, Type::SerialKey) => "INTEGER PRIMARY KEY AUTOINCREMENT".into(),
        (Dialect::MySql, Type::SerialKey) => "INT NOT NULL AUTO_INCREMENT PRIMARY KEY".into(),
        (Dialect::Postgres, Type::SerialKey) => "SERIAL PRIMARY KEY".into(),
        (Dialect::Postgres, Type::Serial) => "SERIAL".into(),
        (_, Type::Serial) | (_, Type::Int) => "INTEGER".into(),
        (Dialect::Postgres, Type::Float) => "DOUBLE PRECISION".into(),
        (_, Type::Float) => "FLOAT".into(),
        (_, Type::Str(n)) => format!("VARCHAR({n})"),
        (Dialect::MySql, Type::Text) => "LONGTEXT".into(),
        (_, Type::Text) => "TEXT".into(),
        (Dialect::Postgres, Type::DateTime | Type::DateTimeMicros) => "TIMESTAMP WITHOUT TIME ZONE".into(),
        (Dialect::MySql, Type::DateTimeMicros) => "DATETIME(6)".into(),
        (_, Type::DateTime | Type::DateTimeMicros) => "DATETIME".into(),
    }
}

fn column_sql(d: Dialect, c: &Column) -> String {
    let mut s = format!("{} {}", ident(d, c.name), type_sql(d, c.ty));
    if c.ty == Type::SerialKey {
        // The type is the whole definition.
        return s;
    }
    if !c.nullable {
        s.push_str(" NOT NULL");
    }
    if (d, c.ty) == (Dialect::MySql, Type::Serial) {
        s.push_str(" AUTO_INCREMENT");
    }
    if let Some(default) = c.default {
        s.push_str(&format!(" DEFAULT {default}"));
    }
    s
}

/// `CONSTRAINT <name> ` when there is a name to write.
fn constraint(name: Option<String>) -> String {
    name.map(|n| format!("CONSTRAINT {n} ")).unwrap_or_default()
}

impl Table {
    fn primary_key_constraint(&self, d: Dialect, style: Style) -> Option<String> {
        match (d, self.primary_key_name) {
            (Dialect::MySql, _) => None,
            (_, Some(name)) => Some(name.to_string()),
            (Dialect::Postgres, None) if style.backend_names => Some(format!("{}_pkey", self.name)),
            _ => None,
        }
    }

    /// `position` counts from 1 in declaration order, as MySQL numbers them.
    fn foreign_key_constraint(&self, d: Dialect, style: Style, fk: &ForeignKey, position: usize) -> Option<String> {
        if let Some(name) = fk.name {
            return Some(name.to_string());
        }
        if !style.backend_names {
            return None;
        }
        match d {
            Dialect::MySql => Some(format!("{}_ibfk_{position}", self.name)),
            Dialect::Postgres => Some(format!("{}_{}_fkey", self.name, fk.column)),
            Dialect::Sqlite => None,
        }
    }

    /// The `CREATE TABLE` statement.
    pub fn create_table(&self, d: Dialect, style: Style) -> String {
        let mut parts: Vec<String> = self.columns.iter().map(|c| column_sql(d, c)).collect();
        if !self.primary_key.is_empty() {
            let name = self.primary_key_constraint(d, style);
            parts.push(format!("{}PRIMARY KEY ({})", constraint(name), idents(d, self.primary_key)));
        }
        for (name, columns) in self.uniques {
            parts.push(format!("CONSTRAINT {name} UNIQUE ({})", idents(d, columns)));
        }
        for (i, fk) in self.foreign_keys.iter().enumerate() {
            let name = self.foreign_key_constraint(d, style, fk, i + 1);
            parts.push(format!(
                "{}FOREIGN KEY ({}) REFERENCES {} (id)",
                constraint(name),
                ident(d, fk.column),
                fk.references
            ));
        }
        if indexes_inline(d, style) {
            for (name, columns) in self.indexes {
                parts.push(format!("INDEX {name} ({})", idents(d, columns)));
            }
        }
        let suffix = if d == Dialect::MySql { " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4" } else { "" };
        format!("CREATE TABLE {}{} (\n  {}\n){suffix}", if_not_exists(style), self.name, parts.join(",\n  "))
    }

    /// The `CREATE INDEX` statements (none where [`Style::if_not_exists`]
    /// puts MySQL's indexes inside `CREATE TABLE`).
    pub fn create_indexes(&self, d: Dialect, style: Style) -> Vec<String> {
        if indexes_inline(d, style) {
            return Vec::new();
        }
        self.indexes
            .iter()
            .map(|(name, columns)| {
                format!("CREATE INDEX {}{name} ON {} ({})", if_not_exists(style), self.name, idents(d, columns))
            })
            .collect()
    }

    /// The table, then its indexes.
    pub fn create(&self, d: Dialect, style: Style) -> Vec<String> {
        let mut out = vec![self.create_table(d, style)];
        out.extend(self.create_indexes(d, style));
        out
    }
}

fn indexes_inline(d: Dialect, style: Style) -> bool {
    style.if_not_exists && d == Dialect::MySql
}

fn if_not_exists(style: Style) -> &'static str {
    if style.if_not_exists {
        "IF NOT EXISTS "
    } else {
        ""
    }
}

/// Whether the current database (schema, on PostgreSQL) holds a table of
/// this name: the one catalog query both schemas' sync steps ask.
pub async fn table_exists(db: &Db, name: &str) -> Result<bool, DbError> {
    let sql = match db.dialect {
        Dialect::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
        Dialect::MySql => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
        }
        Dialect::Postgres => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
        }
    };
    Ok(!db.fetch_all(sql, &[name.into()]).await?.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Dialect; 3] = [Dialect::Sqlite, Dialect::MySql, Dialect::Postgres];

    fn column(name: &'static str, ty: Type, nullable: bool) -> Column {
        Column { name, ty, nullable, default: None }
    }

    fn parent() -> Table {
        Table {
            name: "parent",
            columns: vec![column("id", Type::Serial, false), column("group", Type::Str(8), true)],
            primary_key: &["id"],
            primary_key_name: None,
            uniques: &[("uq_parent_group", &["group"])],
            indexes: &[("ix_parent_group", &["group"])],
            foreign_keys: vec![
                ForeignKey { name: None, column: "id", references: "other" },
                ForeignKey { name: Some("named_fk"), column: "group", references: "other" },
            ],
        }
    }

    #[test]
    fn serial_key_is_the_whole_column_definition() {
        let t = Table {
            name: "t",
            columns: vec![Column { name: "id", ty: Type::SerialKey, nullable: false, default: Some("1") }],
            primary_key: &[],
            primary_key_name: None,
            uniques: &[],
            indexes: &[],
            foreign_keys: vec![],
        };
        let sql: Vec<String> = ALL.iter().map(|d| t.create_table(*d, Style::default())).collect();
        assert_eq!(sql[0], "CREATE TABLE t (\n  id INTEGER PRIMARY KEY AUTOINCREMENT\n)");
        assert_eq!(
            sql[1],
            "CREATE TABLE t (\n  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        );
        assert_eq!(sql[2], "CREATE TABLE t (\n  id SERIAL PRIMARY KEY\n)");
    }

    #[test]
    fn backend_names_are_written_only_when_asked() {
        let t = parent();
        let plain = Style::default();
        let named = Style { backend_names: true, ..plain };
        assert!(t.create_table(Dialect::Postgres, plain).contains("\n  PRIMARY KEY (id)"));
        let pg = t.create_table(Dialect::Postgres, named);
        assert!(pg.contains("CONSTRAINT parent_pkey PRIMARY KEY (id)"), "{pg}");
        assert!(pg.contains("CONSTRAINT parent_id_fkey FOREIGN KEY (id) REFERENCES other (id)"), "{pg}");
        let mysql = t.create_table(Dialect::MySql, named);
        assert!(mysql.contains("\n  PRIMARY KEY (id)"), "{mysql}");
        assert!(mysql.contains("CONSTRAINT parent_ibfk_1 FOREIGN KEY (id)"), "{mysql}");
        let sqlite = t.create_table(Dialect::Sqlite, named);
        assert!(sqlite.contains("\n  FOREIGN KEY (id) REFERENCES other (id)"), "{sqlite}");
        for d in ALL {
            for style in [plain, named] {
                let sql = t.create_table(d, style);
                assert!(sql.contains("CONSTRAINT named_fk FOREIGN KEY ("), "{d:?}: {sql}");
            }
        }
    }

    #[test]
    fn a_named_primary_key_is_named_except_on_mysql() {
        let t = Table { primary_key_name: Some("t_pkc"), ..parent() };
        for d in [Dialect::Sqlite, Dialect::Postgres] {
            assert!(t.create_table(d, Style::default()).contains("CONSTRAINT t_pkc PRIMARY KEY (id)"), "{d:?}");
        }
        assert!(!t.create_table(Dialect::MySql, Style::default()).contains("t_pkc"));
    }

    #[test]
    fn if_not_exists_puts_mysql_indexes_inline() {
        let t = parent();
        let style = Style { if_not_exists: true, backend_names: false };
        let mysql = t.create(Dialect::MySql, style);
        assert_eq!(mysql.len(), 1);
        assert!(mysql[0].starts_with("CREATE TABLE IF NOT EXISTS parent ("));
        assert!(mysql[0].contains("INDEX ix_parent_group (`group`)"), "{}", mysql[0]);
        let pg = t.create(Dialect::Postgres, style);
        assert_eq!(pg[1], "CREATE INDEX IF NOT EXISTS ix_parent_group ON parent (\"group\")");
        assert_eq!(t.create(Dialect::MySql, Style::default())[1], "CREATE INDEX ix_parent_group ON parent (`group`)");
    }

    #[test]
    fn reserved_names_are_quoted_per_dialect() {
        assert_eq!(ident(Dialect::MySql, "group"), "`group`");
        assert_eq!(ident(Dialect::Postgres, "group"), "\"group\"");
        assert_eq!(ident(Dialect::Sqlite, "name"), "name");
        let sqlite = parent().create_table(Dialect::Sqlite, Style::default());
        assert!(sqlite.contains("\"group\" VARCHAR(8),") && sqlite.contains("UNIQUE (\"group\")"), "{sqlite}");
    }
}
