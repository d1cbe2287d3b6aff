//! Database URLs in the SQLAlchemy form that deployment tools write into
//! `[placement_database] connection`, translated to what sqlx understands.

use super::{DbError, Dialect};

/// A parsed database URL.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseUrl {
    pub dialect: Dialect,
    /// The URL handed to sqlx.
    pub sqlx_url: String,
    /// The URL as the operator wrote it (for messages; password masked).
    pub display: String,
}

impl DatabaseUrl {
    /// Parses `sqlite:///relative.db`, `sqlite:////abs.db`, `sqlite://`
    /// (in memory), `mysql[+driver]://…` and `postgresql[+driver]://…`
    /// (also `postgres://`).
    pub fn parse(url: &str) -> Result<DatabaseUrl, DbError> {
        let url = url.trim();
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| DbError::Url(format!("{url:?} is not a database URL (expected scheme://...)")))?;
        let base = scheme.split('+').next().unwrap_or(scheme).to_ascii_lowercase();
        let display = mask_password(url);
        match base.as_str() {
            "sqlite" => {
                // SQLAlchemy: three slashes and a relative path, four for an
                // absolute one; nothing after "//" means an in-memory database.
                let path = rest.strip_prefix('/').unwrap_or(rest);
                let (path, _query) = path.split_once('?').unwrap_or((path, ""));
                let sqlx_url = if path.is_empty() || path == ":memory:" {
                    "sqlite::memory:".to_string()
                } else {
                    format!("sqlite://{path}?mode=rwc")
                };
                Ok(DatabaseUrl { dialect: Dialect::Sqlite, sqlx_url, display })
            }
            "mysql" | "mariadb" => {
                let rest = keep_query_params(rest, &["charset", "ssl-mode", "ssl-ca", "socket"]);
                Ok(DatabaseUrl { dialect: Dialect::MySql, sqlx_url: format!("mysql://{rest}"), display })
            }
            "postgresql" | "postgres" => {
                let rest =
                    keep_query_params(rest, &["sslmode", "sslrootcert", "application_name", "options", "host", "port"]);
                Ok(DatabaseUrl { dialect: Dialect::Postgres, sqlx_url: format!("postgres://{rest}"), display })
            }
            other => Err(DbError::Url(format!("unsupported database type {other:?} in {display}"))),
        }
    }
}

/// Drops query parameters that PyMySQL/psycopg2 understand but sqlx
/// rejects, keeping the ones both understand.
fn keep_query_params(rest: &str, keep: &[&str]) -> String {
    let Some((base, query)) = rest.split_once('?') else { return rest.to_string() };
    let kept: Vec<&str> = query.split('&').filter(|kv| keep.iter().any(|k| kv.split('=').next() == Some(*k))).collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

fn mask_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let Some((creds, host)) = rest.split_once('@') else { return url.to_string() };
    match creds.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlalchemy_forms() {
        let u = DatabaseUrl::parse("sqlite:///keelson-data/placement.db").unwrap();
        assert_eq!(u.dialect, Dialect::Sqlite);
        assert_eq!(u.sqlx_url, "sqlite://keelson-data/placement.db?mode=rwc");
        let u = DatabaseUrl::parse("sqlite:////tmp/x/placement.db").unwrap();
        assert_eq!(u.sqlx_url, "sqlite:///tmp/x/placement.db?mode=rwc");
        assert_eq!(DatabaseUrl::parse("sqlite://").unwrap().sqlx_url, "sqlite::memory:");
        let u = DatabaseUrl::parse("mysql+pymysql://root:pw@127.0.0.1/placement?charset=utf8&plugin=x").unwrap();
        assert_eq!(u.dialect, Dialect::MySql);
        assert_eq!(u.sqlx_url, "mysql://root:pw@127.0.0.1/placement?charset=utf8");
        assert_eq!(u.display, "mysql+pymysql://root:***@127.0.0.1/placement?charset=utf8&plugin=x");
        let u = DatabaseUrl::parse("postgresql+psycopg2://postgres@127.0.0.1:5432/p").unwrap();
        assert_eq!(u.dialect, Dialect::Postgres);
        assert_eq!(u.sqlx_url, "postgres://postgres@127.0.0.1:5432/p");
        assert!(DatabaseUrl::parse("oracle://x/y").is_err());
        assert!(DatabaseUrl::parse("nonsense").is_err());
    }
}
