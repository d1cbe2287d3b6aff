//! One database layer for SQLite, MariaDB/MySQL and PostgreSQL.
//!
//! Services write their SQL once, with `?` placeholders, and get rows of
//! dynamically typed [`Value`]s back. This keeps every store written once
//! (not three times, and not behind sqlx's generic `Database` bounds) while
//! each backend still uses its native sqlx driver, so the column types that
//! sqlx's `Any` driver cannot decode (MySQL `DATETIME` and `DECIMAL`,
//! PostgreSQL `TIMESTAMP`) are handled here in one place.
//!
//! [`ddl`] is the one generator of `CREATE` statements the schemas on this
//! layer (Placement's, the stack engine's) are written with.

pub mod ddl;
mod url;

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::{Column as _, Row as _, TypeInfo as _, ValueRef as _};

/// The schema's clock lives in keelson-runtime, so that the gateway reads
/// it without linking a SQL driver.
pub use keelson_runtime::clock::now;
pub use url::DatabaseUrl;

/// Which SQL dialect a database speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    MySql,
    Postgres,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::MySql => "mysql",
            Dialect::Postgres => "postgresql",
        }
    }
}

/// Why a database operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid database URL: {0}")]
    Url(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error("cannot decode column {column}: {reason}")]
    Decode { column: usize, reason: String },
    #[error("database schema: {0}")]
    Schema(String),
    /// The server no longer holds the transaction this connection began
    /// (see [`Db::begin`]): it was rolled back under the connection.
    #[error("the transaction was rolled back by the server (a Galera brute-force abort whose error was not reported)")]
    TransactionLost,
}

impl DbError {
    fn database_code(&self) -> Option<String> {
        match self {
            DbError::Sqlx(sqlx::Error::Database(e)) => e.code().map(|c| c.into_owned()),
            _ => None,
        }
    }

    /// A unique constraint refused the write (a concurrent insert won).
    pub fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlx(sqlx::Error::Database(e)) => {
                e.kind() == sqlx::error::ErrorKind::UniqueViolation
                    // MySQL 1062 arrives as SQLSTATE 23000.
                    || e.code().is_some_and(|c| c == "23000" || c == "23505" || c == "2067" || c == "1555")
            }
            _ => false,
        }
    }

    /// A deadlock or serialization failure (on Galera also a certification
    /// failure at COMMIT): another transaction's write to the same rows won,
    /// and this one was rolled back.
    pub fn is_write_conflict(&self) -> bool {
        // MySQL deadlock (SQLSTATE 40001), PostgreSQL serialization failure
        // and deadlock, SQLite busy / locked / busy snapshot / busy recovery;
        // MySQL's refusal of a write outside a read-write transaction (25006)
        // where keelson writes only inside one: its transaction is gone.
        matches!(self, DbError::TransactionLost)
            || matches!(self.database_code().as_deref(), Some("40001" | "40P01" | "5" | "6" | "517" | "261" | "25006"))
    }

    /// A write conflict, or no connection free in time: the whole
    /// transaction may be run again.
    pub fn is_retryable(&self) -> bool {
        self.is_write_conflict() || matches!(self, DbError::Sqlx(sqlx::Error::PoolTimedOut))
    }
}

/// How many times [`retrying`] runs a transaction in all.
pub const TRANSACTION_ATTEMPTS: u32 = 8;

/// An error a transaction can end with, which may be the database's: what
/// [`retrying`] looks into to decide whether to run it again. A service's
/// own error enum implements it for its database variant.
pub trait TransactionError: std::fmt::Display {
    fn database_error(&self) -> Option<&DbError>;
}

impl TransactionError for DbError {
    fn database_error(&self) -> Option<&DbError> {
        Some(self)
    }
}

/// Runs `transaction` again while it fails with a retryable error
/// (deadlock, serialization failure, SQLite busy), at most
/// [`TRANSACTION_ATTEMPTS`] times, sleeping a few jittered milliseconds
/// between tries so the two losers of a deadlock do not collide again.
///
/// `transaction` must be one whole transaction (or one autocommitted
/// statement): a retryable failure then means the database rolled all of
/// it back, so running it again cannot apply anything twice.
pub async fn retrying<T, F, Fut>(what: &'static str, transaction: F) -> Result<T, DbError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    retrying_transaction(what, transaction).await
}

/// [`retrying`] for a transaction that ends with a service's own error,
/// which may carry the database's.
pub async fn retrying_transaction<T, E, F, Fut>(what: &'static str, mut transaction: F) -> Result<T, E>
where
    E: TransactionError,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match transaction().await {
            Err(e) if e.database_error().is_some_and(DbError::is_retryable) && attempt < TRANSACTION_ATTEMPTS => {
                tracing::debug!(error = %e, what, attempt, "transaction retried");
                tokio::time::sleep(retry_pause(attempt)).await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// The pause before running a transaction again after it lost a race:
/// anywhere from 0 to 2 ms at the first retry, the ceiling doubling per
/// attempt up to 128 ms ("full jitter": the writers that collided spread
/// out instead of colliding again in lockstep). The jitter comes from the
/// clock's sub-microsecond digits (no random generator needed for this).
/// The one backoff of every database retry in the mesh.
pub fn retry_pause(attempt: u32) -> Duration {
    let ceiling_us = 1000u64 << attempt.clamp(1, 7);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    Duration::from_micros(u64::from(nanos) % ceiling_us)
}

/// A dynamically typed SQL value, as bound or as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A NULL of the given kind (PostgreSQL needs typed NULL parameters).
    Null(Kind),
    Int(i64),
    Float(f64),
    Text(String),
    Time(NaiveDateTime),
}

/// The kind of a [`Value`], for typed NULLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Text,
    Time,
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v.into())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}
impl From<NaiveDateTime> for Value {
    fn from(v: NaiveDateTime) -> Self {
        Value::Time(v)
    }
}
impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Self {
        v.map(Value::Int).unwrap_or(Value::Null(Kind::Int))
    }
}
impl From<Option<String>> for Value {
    fn from(v: Option<String>) -> Self {
        v.map(Value::Text).unwrap_or(Value::Null(Kind::Text))
    }
}
impl From<Option<&str>> for Value {
    fn from(v: Option<&str>) -> Self {
        v.map(|s| Value::Text(s.to_string())).unwrap_or(Value::Null(Kind::Text))
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value, DbError> {
        self.0.get(i).ok_or_else(|| DbError::Decode { column: i, reason: "no such column".into() })
    }

    pub fn is_null(&self, i: usize) -> bool {
        matches!(self.0.get(i), Some(Value::Null(_)) | None)
    }

    pub fn i64(&self, i: usize) -> Result<i64, DbError> {
        match self.at(i)? {
            Value::Int(v) => Ok(*v),
            Value::Float(f) => {
                // A REAL read as an integer truncates as SQL's CAST does;
                // `as` saturates past i64 and maps NaN to 0.
                #[allow(clippy::cast_possible_truncation)]
                let v = *f as i64;
                Ok(v)
            }
            Value::Text(t) => {
                t.parse().map_err(|_| DbError::Decode { column: i, reason: format!("{t:?} is not an integer") })
            }
            other => Err(DbError::Decode { column: i, reason: format!("{other:?} is not an integer") }),
        }
    }

    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>, DbError> {
        if self.is_null(i) {
            Ok(None)
        } else {
            self.i64(i).map(Some)
        }
    }

    pub fn f64(&self, i: usize) -> Result<f64, DbError> {
        match self.at(i)? {
            Value::Float(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            Value::Text(t) => {
                t.parse().map_err(|_| DbError::Decode { column: i, reason: format!("{t:?} is not a number") })
            }
            other => Err(DbError::Decode { column: i, reason: format!("{other:?} is not a number") }),
        }
    }

    pub fn string(&self, i: usize) -> Result<String, DbError> {
        match self.at(i)? {
            Value::Text(t) => Ok(t.clone()),
            Value::Int(v) => Ok(v.to_string()),
            other => Err(DbError::Decode { column: i, reason: format!("{other:?} is not text") }),
        }
    }

    pub fn opt_string(&self, i: usize) -> Result<Option<String>, DbError> {
        if self.is_null(i) {
            Ok(None)
        } else {
            self.string(i).map(Some)
        }
    }

    /// A timestamp column; SQLite stores them as text.
    pub fn opt_time(&self, i: usize) -> Result<Option<NaiveDateTime>, DbError> {
        match self.at(i)? {
            Value::Null(_) => Ok(None),
            Value::Time(t) => Ok(Some(*t)),
            Value::Text(t) => parse_sql_time(t)
                .map(Some)
                .ok_or_else(|| DbError::Decode { column: i, reason: format!("{t:?} is not a timestamp") }),
            other => Err(DbError::Decode { column: i, reason: format!("{other:?} is not a timestamp") }),
        }
    }
}

/// One row of a result set as it is read ([`Tx::for_each_row`]): columns
/// are decoded on access, with the same rules as [`Row`], and nothing is
/// copied for the columns not asked for.
pub struct RowRef<'r> {
    row: RawRow<'r>,
    kinds: &'r [ColumnKind],
}

enum RawRow<'r> {
    Sqlite(&'r sqlx::sqlite::SqliteRow),
    MySql(&'r sqlx::mysql::MySqlRow),
    Postgres(&'r sqlx::postgres::PgRow),
}

impl RowRef<'_> {
    fn value(&self, i: usize) -> Result<Value, DbError> {
        match self.row {
            RawRow::Sqlite(r) => {
                if i >= r.len() {
                    return Err(DbError::Decode { column: i, reason: "no such column".into() });
                }
                sqlite_value(r, i)
            }
            RawRow::MySql(r) => {
                if i >= r.len() {
                    return Err(DbError::Decode { column: i, reason: "no such column".into() });
                }
                mysql_value(r, i, self.kinds.get(i).copied().unwrap_or(ColumnKind::Text))
            }
            RawRow::Postgres(r) => {
                if i >= r.len() {
                    return Err(DbError::Decode { column: i, reason: "no such column".into() });
                }
                postgres_value(r, i, self.kinds.get(i).copied().unwrap_or(ColumnKind::Text))
            }
        }
    }

    /// The column through a one-value [`Row`], so that every conversion
    /// rule is [`Row`]'s (only integers and floats are read this way in
    /// bulk, and they cost no allocation).
    fn one(&self, i: usize) -> Result<Row, DbError> {
        Ok(Row(vec![self.value(i)?]))
    }

    pub fn is_null(&self, i: usize) -> bool {
        matches!(self.value(i), Ok(Value::Null(_)) | Err(_))
    }

    /// The raw binary-protocol bytes of a MySQL column of `kind` (`None`:
    /// not MySQL, another kind, or NULL: take the general path).
    fn mysql_bytes(&self, i: usize, kind: ColumnKind) -> Option<Result<&[u8], DbError>> {
        let RawRow::MySql(r) = self.row else { return None };
        if self.kinds.get(i) != Some(&kind) {
            return None;
        }
        let raw = match r.try_get_raw(i) {
            Ok(raw) => raw,
            Err(e) => return Some(Err(e.into())),
        };
        if raw.is_null() {
            return None;
        }
        Some(<&[u8] as sqlx::Decode<'_, sqlx::MySql>>::decode(raw).map_err(|e| decode_err(i, e)))
    }

    /// MySQL's signed integer columns straight from the wire value: the
    /// bulk of every large read, worth a path of its own. The binary
    /// protocol sends a signed integer as 1, 2, 4 or 8 little-endian bytes
    /// (by column type); sqlx's own decoding of the same bytes cost more
    /// than the rest of the cell's access.
    fn mysql_int(&self, i: usize) -> Option<Result<i64, DbError>> {
        let bytes = match self.mysql_bytes(i, ColumnKind::Int)? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        Some(match *bytes {
            [a] => Ok(i64::from(a as i8)),
            [a, b] => Ok(i64::from(i16::from_le_bytes([a, b]))),
            [a, b, c, d] => Ok(i64::from(i32::from_le_bytes([a, b, c, d]))),
            [a, b, c, d, e, f, g, h] => Ok(i64::from_le_bytes([a, b, c, d, e, f, g, h])),
            _ => Err(DbError::Decode { column: i, reason: format!("unexpected {}-byte integer", bytes.len()) }),
        })
    }

    /// MySQL's FLOAT and DOUBLE columns straight from the wire value (4 or 8
    /// little-endian bytes), converted as [`mysql_value`] converts them.
    fn mysql_float(&self, i: usize) -> Option<Result<f64, DbError>> {
        let kind = match self.kinds.get(i) {
            Some(k @ (ColumnKind::Float32 | ColumnKind::Float64)) => *k,
            _ => return None,
        };
        let bytes = match self.mysql_bytes(i, kind)? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        Some(match (kind, bytes) {
            (ColumnKind::Float32, &[a, b, c, d]) => Ok(f64::from(f32::from_le_bytes([a, b, c, d]))),
            (ColumnKind::Float64, &[a, b, c, d, e, f, g, h]) => Ok(f64::from_le_bytes([a, b, c, d, e, f, g, h])),
            _ => Err(DbError::Decode { column: i, reason: format!("unexpected {}-byte float", bytes.len()) }),
        })
    }

    pub fn i64(&self, i: usize) -> Result<i64, DbError> {
        if let Some(v) = self.mysql_int(i) {
            return v;
        }
        match self.value(i)? {
            Value::Int(v) => Ok(v),
            other => Row(vec![other]).i64(0).map_err(|e| at_column(e, i)),
        }
    }

    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>, DbError> {
        if let Some(v) = self.mysql_int(i) {
            return v.map(Some);
        }
        match self.value(i)? {
            Value::Int(v) => Ok(Some(v)),
            Value::Null(_) => Ok(None),
            other => Row(vec![other]).i64(0).map(Some).map_err(|e| at_column(e, i)),
        }
    }

    pub fn f64(&self, i: usize) -> Result<f64, DbError> {
        if let Some(v) = self.mysql_float(i) {
            return v;
        }
        match self.value(i)? {
            Value::Float(v) => Ok(v),
            other => Row(vec![other]).f64(0).map_err(|e| at_column(e, i)),
        }
    }

    pub fn string(&self, i: usize) -> Result<String, DbError> {
        match self.value(i)? {
            Value::Text(t) => Ok(t),
            other => Row(vec![other]).string(0).map_err(|e| at_column(e, i)),
        }
    }

    pub fn opt_string(&self, i: usize) -> Result<Option<String>, DbError> {
        match self.value(i)? {
            Value::Text(t) => Ok(Some(t)),
            Value::Null(_) => Ok(None),
            other => Row(vec![other]).opt_string(0).map_err(|e| at_column(e, i)),
        }
    }

    /// A timestamp column; SQLite stores them as text.
    pub fn opt_time(&self, i: usize) -> Result<Option<NaiveDateTime>, DbError> {
        self.one(i)?.opt_time(0).map_err(|e| at_column(e, i))
    }

    /// The whole row as [`Value`]s.
    pub fn to_row(&self) -> Result<Row, DbError> {
        let len = match self.row {
            RawRow::Sqlite(r) => r.len(),
            RawRow::MySql(r) => r.len(),
            RawRow::Postgres(r) => r.len(),
        };
        (0..len).map(|i| self.value(i)).collect::<Result<_, _>>().map(Row)
    }
}

/// What a store reads of a row, whether collected ([`Row`]) or read as it
/// arrives ([`RowRef`]): one decoding of a table's columns serves both.
pub trait Cells {
    fn i64(&self, i: usize) -> Result<i64, DbError>;
    fn opt_i64(&self, i: usize) -> Result<Option<i64>, DbError>;
    fn string(&self, i: usize) -> Result<String, DbError>;
    fn opt_string(&self, i: usize) -> Result<Option<String>, DbError>;
    fn opt_time(&self, i: usize) -> Result<Option<NaiveDateTime>, DbError>;
}

macro_rules! cells {
    ($ty:ty) => {
        impl Cells for $ty {
            fn i64(&self, i: usize) -> Result<i64, DbError> {
                <$ty>::i64(self, i)
            }
            fn opt_i64(&self, i: usize) -> Result<Option<i64>, DbError> {
                <$ty>::opt_i64(self, i)
            }
            fn string(&self, i: usize) -> Result<String, DbError> {
                <$ty>::string(self, i)
            }
            fn opt_string(&self, i: usize) -> Result<Option<String>, DbError> {
                <$ty>::opt_string(self, i)
            }
            fn opt_time(&self, i: usize) -> Result<Option<NaiveDateTime>, DbError> {
                <$ty>::opt_time(self, i)
            }
        }
    };
}
cells!(Row);
cells!(RowRef<'_>);

/// A decoding error of a one-value row, placed at the real column.
fn at_column(e: DbError, column: usize) -> DbError {
    match e {
        DbError::Decode { reason, .. } => DbError::Decode { column, reason },
        other => other,
    }
}

/// Parses the text forms SQLite holds: ours and SQLAlchemy's.
pub fn parse_sql_time(t: &str) -> Option<NaiveDateTime> {
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
}

#[derive(Clone)]
enum Pool {
    Sqlite(sqlx::SqlitePool),
    MySql(sqlx::MySqlPool),
    Postgres(sqlx::PgPool),
}

/// Pool sizing and timeouts (from `[placement_database]`).
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// MySQL `sql_mode` for every session (`mysql_sql_mode`).
    pub mysql_sql_mode: Option<String>,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(30),
            mysql_sql_mode: Some("TRADITIONAL".into()),
        }
    }
}

/// A connection pool to one database.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    pub dialect: Dialect,
    /// SQLite allows one writer; writers queue here instead of failing
    /// with SQLITE_BUSY when a read transaction upgrades.
    sqlite_writer: Option<Arc<tokio::sync::Mutex<()>>>,
    pub url: DatabaseUrl,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("url", &self.url.display).finish()
    }
}

macro_rules! bind_all {
    ($query:expr, $params:expr) => {{
        let mut q = $query;
        for p in $params {
            q = match p {
                Value::Null(Kind::Int) => q.bind(None::<i64>),
                Value::Null(Kind::Float) => q.bind(None::<f64>),
                Value::Null(Kind::Text) => q.bind(None::<String>),
                Value::Null(Kind::Time) => q.bind(None::<NaiveDateTime>),
                // Always 64-bit: PostgreSQL fixes a prepared statement's
                // parameter types at its first execution, so a statement
                // must bind the same type every time (int4 columns compare
                // and assign from int8 without losing index use).
                Value::Int(v) => q.bind(*v),
                Value::Float(v) => q.bind(*v),
                Value::Text(v) => q.bind(v.clone()),
                Value::Time(v) => q.bind(*v),
            };
        }
        q
    }};
}

/// Streams the rows of a statement run on `$exec` to `$f`, each as a
/// [`RowRef`] (`$raw` its variant); column kinds are the result set's,
/// decided at its first row (SQLite's values carry their own types).
macro_rules! each_row {
    ($sql:expr, $params:expr, $exec:expr, $raw:path, $kind:expr, $f:expr) => {{
        use tokio_stream::StreamExt as _;
        let mut kinds: Vec<ColumnKind> = Vec::new();
        let mut rows = bind_all!(sqlx::query($sql), $params).fetch($exec);
        while let Some(row) = rows.next().await {
            let row = row.map_err(DbError::from)?;
            if kinds.is_empty() {
                kinds = column_kinds(std::slice::from_ref(&row), $kind);
            }
            $f(&RowRef { row: $raw(&row), kinds: &kinds })?;
        }
    }};
}

impl Db {
    pub async fn connect(url: &DatabaseUrl, settings: &PoolSettings) -> Result<Db, DbError> {
        let pool = match url.dialect {
            Dialect::Sqlite => {
                use std::str::FromStr;
                let opts = sqlx::sqlite::SqliteConnectOptions::from_str(&url.sqlx_url)?
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
                    .busy_timeout(Duration::from_secs(30))
                    .foreign_keys(false);
                let in_memory = url.sqlx_url.contains(":memory:");
                let pool = sqlx::pool::PoolOptions::<sqlx::Sqlite>::new()
                    // An in-memory database lives in one connection.
                    .max_connections(if in_memory { 1 } else { settings.max_connections.max(2) })
                    .acquire_timeout(settings.acquire_timeout)
                    .connect_with(opts)
                    .await?;
                Pool::Sqlite(pool)
            }
            Dialect::MySql => {
                let sql_mode = settings.mysql_sql_mode.clone();
                let pool = sqlx::pool::PoolOptions::<sqlx::MySql>::new()
                    .max_connections(settings.max_connections)
                    .acquire_timeout(settings.acquire_timeout)
                    .after_connect(move |conn, _meta| {
                        let sql_mode = sql_mode.clone();
                        Box::pin(async move {
                            use sqlx::Executor as _;
                            if let Some(mode) = sql_mode.filter(|m| !m.is_empty()) {
                                let mode = mode.replace('\'', "");
                                conn.execute(format!("SET SESSION sql_mode = '{mode}'").as_str()).await?;
                            }
                            conn.execute("SET SESSION time_zone = '+00:00'").await?;
                            Ok(())
                        })
                    })
                    .connect(&url.sqlx_url)
                    .await?;
                Pool::MySql(pool)
            }
            Dialect::Postgres => {
                let pool = sqlx::pool::PoolOptions::<sqlx::Postgres>::new()
                    .max_connections(settings.max_connections)
                    .acquire_timeout(settings.acquire_timeout)
                    .connect(&url.sqlx_url)
                    .await?;
                Pool::Postgres(pool)
            }
        };
        let sqlite_writer = matches!(url.dialect, Dialect::Sqlite).then(|| Arc::new(tokio::sync::Mutex::new(())));
        Ok(Db { pool, dialect: url.dialect, sqlite_writer, url: url.clone() })
    }

    /// Opens a transaction that may write.
    pub async fn begin(&self) -> Result<Tx, DbError> {
        let guard = match &self.sqlite_writer {
            Some(lock) => Some(lock.clone().lock_owned().await),
            None => None,
        };
        let inner = match &self.pool {
            // IMMEDIATE takes SQLite's write lock at once, waiting up to the
            // busy timeout for writers of other processes; a deferred
            // transaction that reads first and writes later fails at once
            // with SQLITE_BUSY when another process wrote in between.
            Pool::Sqlite(p) => TxInner::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            // See MYSQL_BEGIN_WRITE.
            Pool::MySql(p) => TxInner::MySql(p.begin_with(MYSQL_BEGIN_WRITE).await?),
            Pool::Postgres(p) => TxInner::Postgres(p.begin().await?),
        };
        Ok(Tx { inner, dialect: self.dialect, writes: true, _writer: guard })
    }

    /// Opens a transaction that only reads, on one consistent snapshot:
    /// InnoDB's default (repeatable read) and SQLite's give one; PostgreSQL's
    /// default (read committed) would let each statement see later commits,
    /// so a multi-statement read asks for repeatable read there (read-only,
    /// it can never fail to serialize). On SQLite it does not queue behind
    /// writers.
    pub async fn begin_read(&self) -> Result<Tx, DbError> {
        let inner = match &self.pool {
            Pool::Sqlite(p) => TxInner::Sqlite(p.begin().await?),
            Pool::MySql(p) => TxInner::MySql(p.begin().await?),
            Pool::Postgres(p) => {
                TxInner::Postgres(p.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?)
            }
        };
        Ok(Tx { inner, dialect: self.dialect, writes: false, _writer: None })
    }

    /// Runs a statement outside any transaction (DDL, session settings).
    pub async fn execute_raw(&self, sql: &str) -> Result<u64, DbError> {
        use sqlx::Executor as _;
        Ok(match &self.pool {
            Pool::Sqlite(p) => p.execute(sql).await?.rows_affected(),
            Pool::MySql(p) => {
                // The connection may come from a write transaction, which
                // left its session read-only (MYSQL_BEGIN_WRITE).
                let mut conn = p.acquire().await?;
                conn.execute(MYSQL_SESSION_READ_WRITE).await?;
                conn.execute(sql).await?.rows_affected()
            }
            Pool::Postgres(p) => p.execute(sql).await?.rows_affected(),
        })
    }

    /// A read of one statement, outside any transaction: a statement reads
    /// one consistent snapshot by itself, and a transaction around it
    /// would cost two more round trips (BEGIN, COMMIT).
    pub async fn fetch_all(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let mut rows = Vec::new();
        self.for_each_row(sql, params, |r| -> Result<(), DbError> {
            rows.push(r.to_row()?);
            Ok(())
        })
        .await?;
        Ok(rows)
    }

    /// [`Tx::for_each_row`] for a read of one statement, outside any
    /// transaction (see [`Db::fetch_all`]).
    pub async fn for_each_row<E: From<DbError>>(
        &self,
        sql: &str,
        params: &[Value],
        mut f: impl FnMut(&RowRef<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let sql = placeholders(self.dialect, sql);
        match &self.pool {
            Pool::Sqlite(p) => each_row!(&sql, params, p, RawRow::Sqlite, sqlite_kind, f),
            Pool::MySql(p) => each_row!(&sql, params, p, RawRow::MySql, mysql_kind, f),
            Pool::Postgres(p) => each_row!(&sql, params, p, RawRow::Postgres, postgres_kind, f),
        }
        Ok(())
    }

    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(p) => p.close().await,
            Pool::MySql(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

enum TxInner {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    MySql(sqlx::Transaction<'static, sqlx::MySql>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

/// An open transaction; dropping it without [`Tx::commit`] rolls back.
pub struct Tx {
    inner: TxInner,
    pub dialect: Dialect,
    /// Opened by [`Db::begin`]: on MySQL, COMMIT first checks that the
    /// server still holds the transaction.
    writes: bool,
    _writer: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// How a MySQL write transaction begins: the session's default access mode
/// read-only, and this transaction read-write. On Galera a transaction can
/// be rolled back under its connection by a conflicting write of another
/// node (a brute-force abort), and the server reports that to the next
/// statement; but a command that gets no answer can swallow the report
/// (seen in tests/bench/galera.py: an allocation INSERT committed alone, as
/// its own autocommitted statement, after the consumer row inserted before
/// it in the same transaction was rolled back). With this default a write
/// after such a rollback runs outside any read-write transaction and is
/// refused (1792, SQLSTATE 25006, a write conflict to retry) instead of
/// committing alone; [`Tx::commit`] checks `@@in_transaction` for the same
/// reason. Statements that must write outside a transaction (DDL) go through
/// [`Db::execute_raw`] and [`Tx::execute_raw`], which make the session
/// read-write first.
const MYSQL_BEGIN_WRITE: &str = "SET SESSION TRANSACTION READ ONLY; START TRANSACTION READ WRITE";
const MYSQL_SESSION_READ_WRITE: &str = "SET SESSION TRANSACTION READ WRITE";

/// Rewrites `?` placeholders to `$1, $2, …` for PostgreSQL.
pub fn placeholders(dialect: Dialect, sql: &str) -> std::borrow::Cow<'_, str> {
    if dialect != Dialect::Postgres || !sql.contains('?') {
        return std::borrow::Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    let mut in_quote = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                in_quote = !in_quote;
                out.push(c);
            }
            '?' if !in_quote => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The most items one `IN (…)` list binds. Every backend bounds the
/// parameters of a statement (SQLite 32,766, MariaDB and PostgreSQL
/// 65,535), and a request may name more consumers or providers than that:
/// longer lists are sent in chunks of this size, with room left for the
/// statement's other parameters.
pub const IN_LIST_CHUNK: usize = 10_000;

/// `(?, ?), (?, ?)` for a multi-row `VALUES` of `rows` rows of `columns`
/// values each (at least one row).
pub fn values_rows(rows: usize, columns: usize) -> String {
    let row = format!("({})", in_list(columns));
    vec![row.as_str(); rows.max(1)].join(", ")
}

/// `?, ?, ?` for an `IN (…)` list of `n` items (never empty: `n` ≥ 1).
pub fn in_list(n: usize) -> String {
    vec!["?"; n.max(1)].join(", ")
}

impl Tx {
    pub async fn fetch_all(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let sql = placeholders(self.dialect, sql);
        match &mut self.inner {
            TxInner::Sqlite(tx) => {
                let rows = bind_all!(sqlx::query(&sql), params).fetch_all(&mut **tx).await?;
                rows.iter().map(decode_sqlite).collect()
            }
            TxInner::MySql(tx) => {
                let rows = bind_all!(sqlx::query(&sql), params).fetch_all(&mut **tx).await?;
                let kinds = column_kinds(&rows, mysql_kind);
                rows.iter().map(|r| decode_mysql(r, &kinds)).collect()
            }
            TxInner::Postgres(tx) => {
                let rows = bind_all!(sqlx::query(&sql), params).fetch_all(&mut **tx).await?;
                let kinds = column_kinds(&rows, postgres_kind);
                rows.iter().map(|r| decode_postgres(r, &kinds)).collect()
            }
        }
    }

    /// Reads a result set row by row, handing each to `f` as it arrives:
    /// for large reads, nothing is collected and no row is copied into
    /// [`Value`]s first (that was most of a large read's decoding work).
    pub async fn for_each_row<E: From<DbError>>(
        &mut self,
        sql: &str,
        params: &[Value],
        mut f: impl FnMut(&RowRef<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let sql = placeholders(self.dialect, sql);
        match &mut self.inner {
            TxInner::Sqlite(tx) => each_row!(&sql, params, &mut **tx, RawRow::Sqlite, sqlite_kind, f),
            TxInner::MySql(tx) => each_row!(&sql, params, &mut **tx, RawRow::MySql, mysql_kind, f),
            TxInner::Postgres(tx) => each_row!(&sql, params, &mut **tx, RawRow::Postgres, postgres_kind, f),
        }
        Ok(())
    }

    pub async fn fetch_optional(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, DbError> {
        Ok(self.fetch_all(sql, params).await?.into_iter().next())
    }

    /// Runs a statement; answers the number of rows it changed.
    pub async fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        let sql = placeholders(self.dialect, sql);
        Ok(match &mut self.inner {
            TxInner::Sqlite(tx) => bind_all!(sqlx::query(&sql), params).execute(&mut **tx).await?.rows_affected(),
            TxInner::MySql(tx) => bind_all!(sqlx::query(&sql), params).execute(&mut **tx).await?.rows_affected(),
            TxInner::Postgres(tx) => bind_all!(sqlx::query(&sql), params).execute(&mut **tx).await?.rows_affected(),
        })
    }

    /// Inserts rows of `columns` values each (`values`, row after row) with
    /// as few statements as the backends' parameter bounds allow:
    /// `insert_head` is the statement up to `VALUES` (`INSERT INTO t (a, b)`).
    /// Rows are inserted in the order given. Answers the rows inserted.
    pub async fn insert_rows(&mut self, insert_head: &str, columns: usize, values: &[Value]) -> Result<u64, DbError> {
        let columns = columns.max(1);
        let mut inserted = 0;
        for chunk in values.chunks((IN_LIST_CHUNK / columns).max(1) * columns) {
            let sql = format!("{insert_head} VALUES {}", values_rows(chunk.len() / columns, columns));
            inserted += self.execute(&sql, chunk).await?;
        }
        Ok(inserted)
    }

    /// Runs an INSERT into a table whose key column is `id`; answers the new id.
    pub async fn insert(&mut self, sql: &str, params: &[Value]) -> Result<i64, DbError> {
        match &mut self.inner {
            TxInner::Sqlite(tx) => {
                let sql = placeholders(Dialect::Sqlite, sql);
                Ok(bind_all!(sqlx::query(&sql), params).execute(&mut **tx).await?.last_insert_rowid())
            }
            TxInner::MySql(tx) => {
                let sql = placeholders(Dialect::MySql, sql);
                let id = bind_all!(sqlx::query(&sql), params).execute(&mut **tx).await?.last_insert_id();
                i64::try_from(id).map_err(|_| DbError::Decode { column: 0, reason: "insert id out of range".into() })
            }
            TxInner::Postgres(tx) => {
                let sql = format!("{} RETURNING id", placeholders(Dialect::Postgres, sql));
                let row = bind_all!(sqlx::query(&sql), params).fetch_one(&mut **tx).await?;
                let rows = [row];
                decode_postgres(&rows[0], &column_kinds(&rows, postgres_kind))?.i64(0)
            }
        }
    }

    /// Runs a statement without parameters (DDL, session settings).
    pub async fn execute_raw(&mut self, sql: &str) -> Result<u64, DbError> {
        use sqlx::Executor as _;
        Ok(match &mut self.inner {
            TxInner::Sqlite(tx) => (&mut **tx).execute(sql).await?.rows_affected(),
            TxInner::MySql(tx) => {
                // DDL commits the transaction and runs on its own, in the
                // session's default access mode (MYSQL_BEGIN_WRITE); what
                // follows is no longer one transaction, so COMMIT has none
                // to check.
                self.writes = false;
                (&mut **tx).execute(MYSQL_SESSION_READ_WRITE).await?;
                (&mut **tx).execute(sql).await?.rows_affected()
            }
            TxInner::Postgres(tx) => (&mut **tx).execute(sql).await?.rows_affected(),
        })
    }

    /// Ends a transaction that only read, without a round trip: the
    /// rollback (for a transaction that wrote nothing, the same as a
    /// commit) is queued on the connection and completes when the pool
    /// takes the connection back (it pings it then anyway), off the
    /// caller's path. Every read already ran inside the transaction, so
    /// nothing read depends on how it ends.
    pub fn end_read(self) {
        drop(self);
    }

    pub async fn commit(mut self) -> Result<(), DbError> {
        if self.writes && self.dialect == Dialect::MySql {
            // See MYSQL_BEGIN_WRITE: a transaction rolled back under the
            // connection must not be reported as committed.
            let open = self.fetch_all("SELECT @@in_transaction", &[]).await?;
            if open.first().map(|r| r.i64(0)).transpose()? != Some(1) {
                return Err(DbError::TransactionLost);
            }
        }
        match self.inner {
            TxInner::Sqlite(tx) => tx.commit().await?,
            TxInner::MySql(tx) => tx.commit().await?,
            TxInner::Postgres(tx) => tx.commit().await?,
        }
        Ok(())
    }
}

fn decode_err(column: usize, e: impl std::fmt::Display) -> DbError {
    DbError::Decode { column, reason: e.to_string() }
}

/// How a column's values become [`Value`]s, decided once per result set
/// from the column's declared type (not per cell: that showed up as a fifth
/// of a large read's CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Int,
    UnsignedInt,
    Int2,
    Int4,
    Bool,
    Float32,
    Float64,
    /// MySQL sums arrive as DECIMAL, sent as text by the binary protocol.
    Decimal,
    Time,
    TimeTz,
    Bytes,
    Text,
    /// PostgreSQL NUMERIC: refused (sums are cast to BIGINT).
    Numeric,
}

/// Whether `haystack` contains `needle`, ignoring ASCII case.
fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    haystack.as_bytes().windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

fn sqlite_kind(ty: &str) -> ColumnKind {
    if contains_ignore_case(ty, "INT") || ty.eq_ignore_ascii_case("BOOLEAN") {
        ColumnKind::Int
    } else if ty.eq_ignore_ascii_case("REAL")
        || contains_ignore_case(ty, "FLOAT")
        || contains_ignore_case(ty, "DOUBLE")
        || ty.eq_ignore_ascii_case("NUMERIC")
    {
        ColumnKind::Float64
    } else if ty.eq_ignore_ascii_case("BLOB") {
        ColumnKind::Bytes
    } else {
        ColumnKind::Text
    }
}

fn mysql_kind(ty: &str) -> ColumnKind {
    if contains_ignore_case(ty, "INT") || ty.eq_ignore_ascii_case("BOOLEAN") {
        if contains_ignore_case(ty, "UNSIGNED") {
            ColumnKind::UnsignedInt
        } else {
            ColumnKind::Int
        }
    } else if ty.eq_ignore_ascii_case("FLOAT") {
        ColumnKind::Float32
    } else if ty.eq_ignore_ascii_case("DOUBLE") {
        ColumnKind::Float64
    } else if ty.eq_ignore_ascii_case("DECIMAL") {
        ColumnKind::Decimal
    } else if ty.eq_ignore_ascii_case("DATETIME") || ty.eq_ignore_ascii_case("TIMESTAMP") {
        ColumnKind::Time
    } else if contains_ignore_case(ty, "BINARY") || contains_ignore_case(ty, "BLOB") {
        ColumnKind::Bytes
    } else {
        ColumnKind::Text
    }
}

fn postgres_kind(ty: &str) -> ColumnKind {
    match ty.to_ascii_uppercase().as_str() {
        "INT2" => ColumnKind::Int2,
        "INT4" => ColumnKind::Int4,
        "INT8" => ColumnKind::Int,
        "BOOL" => ColumnKind::Bool,
        "FLOAT4" => ColumnKind::Float32,
        "FLOAT8" => ColumnKind::Float64,
        "TIMESTAMP" => ColumnKind::Time,
        "TIMESTAMPTZ" => ColumnKind::TimeTz,
        "NUMERIC" => ColumnKind::Numeric,
        _ => ColumnKind::Text,
    }
}

/// The kinds of a result set's columns, from its first row.
fn column_kinds<R: sqlx::Row>(rows: &[R], kind: fn(&str) -> ColumnKind) -> Vec<ColumnKind> {
    rows.first().map(|r| r.columns().iter().map(|c| kind(c.type_info().name())).collect()).unwrap_or_default()
}

fn decode_sqlite(row: &sqlx::sqlite::SqliteRow) -> Result<Row, DbError> {
    let mut out = Vec::with_capacity(row.len());
    for i in 0..row.len() {
        out.push(sqlite_value(row, i)?);
    }
    Ok(Row(out))
}

fn sqlite_value(row: &sqlx::sqlite::SqliteRow, i: usize) -> Result<Value, DbError> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Value::Null(Kind::Text));
    }
    // SQLite is dynamically typed: each value carries its own type.
    Ok(match sqlite_kind(raw.type_info().name()) {
        ColumnKind::Int => Value::Int(row.try_get_unchecked::<i64, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Float64 => Value::Float(row.try_get_unchecked::<f64, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Bytes => {
            let bytes = row.try_get_unchecked::<Vec<u8>, _>(i).map_err(|e| decode_err(i, e))?;
            Value::Text(String::from_utf8_lossy(&bytes).into_owned())
        }
        _ => Value::Text(row.try_get_unchecked::<String, _>(i).map_err(|e| decode_err(i, e))?),
    })
}

fn decode_mysql(row: &sqlx::mysql::MySqlRow, kinds: &[ColumnKind]) -> Result<Row, DbError> {
    let mut out = Vec::with_capacity(row.len());
    for i in 0..row.len() {
        out.push(mysql_value(row, i, kinds.get(i).copied().unwrap_or(ColumnKind::Text))?);
    }
    Ok(Row(out))
}

fn mysql_value(row: &sqlx::mysql::MySqlRow, i: usize, kind: ColumnKind) -> Result<Value, DbError> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Value::Null(Kind::Text));
    }
    Ok(match kind {
        ColumnKind::UnsignedInt => {
            let n = row.try_get_unchecked::<u64, _>(i).map_err(|e| decode_err(i, e))?;
            Value::Int(i64::try_from(n).map_err(|e| decode_err(i, e))?)
        }
        ColumnKind::Int => Value::Int(row.try_get_unchecked::<i64, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Float32 => Value::Float(row.try_get_unchecked::<f32, _>(i).map_err(|e| decode_err(i, e))? as f64),
        ColumnKind::Float64 => Value::Float(row.try_get_unchecked::<f64, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Decimal => {
            let s = row.try_get_unchecked::<&str, _>(i).map_err(|e| decode_err(i, e))?;
            match s.parse::<i64>() {
                Ok(n) => Value::Int(n),
                Err(_) => Value::Float(s.parse().map_err(|e| decode_err(i, e))?),
            }
        }
        ColumnKind::Time => Value::Time(row.try_get_unchecked::<NaiveDateTime, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Bytes => {
            let bytes = row.try_get_unchecked::<&[u8], _>(i).map_err(|e| decode_err(i, e))?;
            Value::Text(String::from_utf8_lossy(bytes).into_owned())
        }
        _ => Value::Text(row.try_get_unchecked::<String, _>(i).map_err(|e| decode_err(i, e))?),
    })
}

fn decode_postgres(row: &sqlx::postgres::PgRow, kinds: &[ColumnKind]) -> Result<Row, DbError> {
    let mut out = Vec::with_capacity(row.len());
    for i in 0..row.len() {
        out.push(postgres_value(row, i, kinds.get(i).copied().unwrap_or(ColumnKind::Text))?);
    }
    Ok(Row(out))
}

fn postgres_value(row: &sqlx::postgres::PgRow, i: usize, kind: ColumnKind) -> Result<Value, DbError> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Value::Null(Kind::Text));
    }
    Ok(match kind {
        ColumnKind::Int2 => Value::Int(row.try_get::<i16, _>(i).map_err(|e| decode_err(i, e))?.into()),
        ColumnKind::Int4 => Value::Int(row.try_get::<i32, _>(i).map_err(|e| decode_err(i, e))?.into()),
        ColumnKind::Int => Value::Int(row.try_get::<i64, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Bool => Value::Int(row.try_get::<bool, _>(i).map_err(|e| decode_err(i, e))? as i64),
        ColumnKind::Float32 => Value::Float(row.try_get::<f32, _>(i).map_err(|e| decode_err(i, e))?.into()),
        ColumnKind::Float64 => Value::Float(row.try_get::<f64, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::Time => Value::Time(row.try_get::<NaiveDateTime, _>(i).map_err(|e| decode_err(i, e))?),
        ColumnKind::TimeTz => {
            Value::Time(row.try_get::<chrono::DateTime<chrono::Utc>, _>(i).map_err(|e| decode_err(i, e))?.naive_utc())
        }
        ColumnKind::Numeric => {
            return Err(decode_err(i, "NUMERIC columns are not supported; cast sums to BIGINT"));
        }
        _ => Value::Text(row.try_get_unchecked::<String, _>(i).map_err(|e| decode_err(i, e))?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_for_postgres() {
        assert_eq!(
            placeholders(Dialect::Postgres, "a = ? AND b IN (?, ?) AND c = '?'"),
            "a = $1 AND b IN ($2, $3) AND c = '?'"
        );
        assert_eq!(placeholders(Dialect::MySql, "a = ?"), "a = ?");
    }

    #[test]
    fn retry_pauses_stay_under_a_doubling_ceiling() {
        for attempt in 0..20u32 {
            let ceiling = Duration::from_millis(1 << attempt.clamp(1, 7));
            assert!(retry_pause(attempt) < ceiling, "attempt {attempt}");
        }
    }

    #[tokio::test]
    async fn retrying_reruns_only_retryable_failures_and_gives_up() {
        let mut runs = 0;
        let outcome = retrying("test", || {
            runs += 1;
            let attempt = runs;
            async move {
                if attempt < 3 {
                    Err(DbError::Sqlx(sqlx::Error::PoolTimedOut))
                } else {
                    Ok(attempt)
                }
            }
        })
        .await;
        assert_eq!(outcome.unwrap(), 3);

        let mut runs = 0;
        let outcome: Result<(), _> = retrying("test", || {
            runs += 1;
            async { Err(DbError::Schema("not retryable".into())) }
        })
        .await;
        assert!(matches!(outcome, Err(DbError::Schema(_))));
        assert_eq!(runs, 1);

        let mut runs = 0;
        let outcome: Result<(), _> = retrying("test", || {
            runs += 1;
            async { Err(DbError::Sqlx(sqlx::Error::PoolTimedOut)) }
        })
        .await;
        assert!(outcome.is_err());
        assert_eq!(runs, TRANSACTION_ATTEMPTS);
    }

    #[tokio::test]
    async fn rows_are_inserted_in_chunks_in_order() {
        assert_eq!(values_rows(2, 3), "(?, ?, ?), (?, ?, ?)");
        let db = Db::connect(&DatabaseUrl::parse("sqlite://").unwrap(), &PoolSettings::default()).await.unwrap();
        db.execute_raw("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, a INTEGER, b TEXT)").await.unwrap();
        let mut tx = db.begin().await.unwrap();
        // More rows than one statement may bind.
        let n = IN_LIST_CHUNK + 7;
        let values: Vec<Value> = (0..n).flat_map(|i| [Value::Int(i as i64), Value::Text(format!("r{i}"))]).collect();
        assert_eq!(tx.insert_rows("INSERT INTO t (a, b)", 2, &values).await.unwrap(), n as u64);
        let rows = tx.fetch_all("SELECT a, b FROM t ORDER BY id", &[]).await.unwrap();
        assert_eq!(rows.len(), n);
        assert!(rows.iter().enumerate().all(|(i, r)| r.i64(0).unwrap() == i as i64));
        tx.commit().await.unwrap();
    }

    #[tokio::test]
    async fn sqlite_round_trip() {
        let db = Db::connect(&DatabaseUrl::parse("sqlite://").unwrap(), &PoolSettings::default()).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        tx.execute_raw("CREATE TABLE t (id INTEGER PRIMARY KEY, name VARCHAR(10), ratio FLOAT, at DATETIME)")
            .await
            .unwrap();
        let t = now();
        let id = tx
            .insert("INSERT INTO t (name, ratio, at) VALUES (?, ?, ?)", &["x".into(), 1.5.into(), t.into()])
            .await
            .unwrap();
        assert_eq!(id, 1);
        let rows = tx.fetch_all("SELECT id, name, ratio, at, NULL FROM t WHERE id = ?", &[id.into()]).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(rows[0].i64(0).unwrap(), 1);
        assert_eq!(rows[0].string(1).unwrap(), "x");
        assert_eq!(rows[0].f64(2).unwrap(), 1.5);
        assert_eq!(rows[0].opt_time(3).unwrap(), Some(t));
        assert!(rows[0].is_null(4));
    }
}
