//! Seeding the standard resource classes and traits
//! (`keelson_placement_standard`) that every Placement database holds.
//!
//! Inserted at start-up, insert-only and idempotent: rows that exist are
//! left alone, so keelson and the Python service can share a database and
//! several instances can start at once.

use keelson_db::{now, Db, DbError, Dialect};
use keelson_placement_standard::{standard_resource_classes, standard_traits};

/// How many rows a seeding pass inserted.
#[derive(Debug, Default, PartialEq)]
pub struct Seeded {
    pub resource_classes: usize,
    pub traits: usize,
}

/// Inserts the missing standard classes and traits.
pub async fn seed_standard(db: &Db) -> Result<Seeded, DbError> {
    let mut out = Seeded::default();
    for attempt in 0..3 {
        match seed_once(db).await {
            Ok(s) => {
                out = s;
                break;
            }
            // Another process seeded concurrently: look again.
            Err(e) if (e.is_unique_violation() || e.is_retryable()) && attempt < 2 => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

async fn seed_once(db: &Db) -> Result<Seeded, DbError> {
    let mut tx = db.begin().await?;
    let existing: std::collections::HashSet<String> = tx
        .fetch_all("SELECT name FROM resource_classes", &[])
        .await?
        .iter()
        .map(|r| r.string(0))
        .collect::<Result<_, _>>()?;
    let missing: Vec<&(i64, String)> =
        standard_resource_classes().iter().filter(|(_, n)| !existing.contains(n)).collect();
    if !missing.is_empty() && db.dialect == Dialect::MySql {
        // An explicit 0 would otherwise mean "next auto-increment value".
        tx.execute_raw("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')").await?;
    }
    let ts = now();
    for (id, name) in &missing {
        tx.execute(
            "INSERT INTO resource_classes (id, name, created_at) VALUES (?, ?, ?)",
            &[(*id).into(), name.into(), ts.into()],
        )
        .await?;
    }
    let existing_traits: std::collections::HashSet<String> =
        tx.fetch_all("SELECT name FROM traits", &[]).await?.iter().map(|r| r.string(0)).collect::<Result<_, _>>()?;
    let missing_traits: Vec<&String> = standard_traits().iter().filter(|t| !existing_traits.contains(*t)).collect();
    // Multi-row inserts: 377 round trips would dominate start-up time.
    for chunk in missing_traits.chunks(100) {
        let values = vec!["(?, ?)"; chunk.len()].join(", ");
        let mut params = Vec::with_capacity(chunk.len() * 2);
        for name in chunk {
            params.push((*name).into());
            params.push(ts.into());
        }
        tx.execute(&format!("INSERT INTO traits (name, created_at) VALUES {values}"), &params).await?;
    }
    tx.commit().await?;
    Ok(Seeded { resource_classes: missing.len(), traits: missing_traits.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;
    use keelson_db::{DatabaseUrl, PoolSettings};

    #[tokio::test]
    async fn seeding_is_idempotent() {
        let db = Db::connect(&DatabaseUrl::parse("sqlite://").unwrap(), &PoolSettings::default()).await.unwrap();
        schema::sync(&db).await.unwrap();
        let first = seed_standard(&db).await.unwrap();
        assert_eq!(first, Seeded { resource_classes: 21, traits: 377 });
        assert_eq!(seed_standard(&db).await.unwrap(), Seeded::default());
        let rows = db.fetch_all("SELECT id FROM resource_classes WHERE name = 'VCPU'", &[]).await.unwrap();
        assert_eq!(rows[0].i64(0).unwrap(), 0);
    }
}
