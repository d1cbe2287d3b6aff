//! Traits (the os-traits standard set, seeded, and custom `CUSTOM_*`
//! ones) and the traits of each provider.

use std::collections::{HashMap, HashSet};

use keelson_db::{in_list, now, Row, Tx, Value};

use super::{bump_generation, get_provider, write_retrying, ProviderRow, Store};
use crate::error::{Error, Result};

/// Custom traits carry this prefix; the others are standard.
pub const CUSTOM_PREFIX: &str = "CUSTOM_";

#[derive(Debug, Clone)]
pub struct TraitRow {
    pub id: i64,
    pub name: String,
    pub created_at: Option<chrono::NaiveDateTime>,
    pub updated_at: Option<chrono::NaiveDateTime>,
}

impl TraitRow {
    const COLUMNS: &'static str = "t.id, t.name, t.created_at, t.updated_at";

    fn from_row(r: &Row) -> Result<Self> {
        Ok(TraitRow { id: r.i64(0)?, name: r.string(1)?, created_at: r.opt_time(2)?, updated_at: r.opt_time(3)? })
    }

    pub fn last_modified(&self) -> Option<chrono::NaiveDateTime> {
        self.updated_at.or(self.created_at)
    }
}

/// How `GET /traits` narrows the list.
#[derive(Debug, Clone, Default)]
pub struct TraitFilter {
    pub name_prefix: Option<String>,
    /// Only these names (`Some(vec![])` matches nothing).
    pub names: Option<Vec<String>>,
    /// Some(true): only traits a provider has; Some(false): only unused ones.
    pub associated: Option<bool>,
}

/// A provider's traits and generation after a read or a write.
#[derive(Debug, Clone)]
pub struct ProviderTraits {
    pub traits: Vec<TraitRow>,
    pub generation: i64,
}

fn trait_not_found(name: &str) -> Error {
    Error::NotFound(format!("No such trait(s): {name}."))
}

async fn find_trait(tx: &mut Tx, name: &str) -> Result<Option<TraitRow>> {
    let sql = format!("SELECT {} FROM traits t WHERE t.name = ?", TraitRow::COLUMNS);
    let rows = tx.fetch_all(&sql, &[name.into()]).await?;
    // MariaDB's collation folds case: keep the exact name only.
    for r in &rows {
        let t = TraitRow::from_row(r)?;
        if t.name == name {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// The traits of `names` by name (exact names only), and the names no
/// trait has, once each in request order.
pub async fn named_traits(tx: &mut Tx, names: &[String]) -> Result<(HashMap<String, TraitRow>, Vec<String>)> {
    let mut found = HashMap::new();
    if names.is_empty() {
        return Ok((found, Vec::new()));
    }
    let unique: Vec<&String> = names.iter().collect::<HashSet<_>>().into_iter().collect();
    let sql = format!("SELECT {} FROM traits t WHERE t.name IN ({})", TraitRow::COLUMNS, in_list(unique.len()));
    let params: Vec<Value> = unique.iter().map(|n| Value::from(n.as_str())).collect();
    for r in tx.fetch_all(&sql, &params).await? {
        let t = TraitRow::from_row(&r)?;
        // MariaDB compares names case-insensitively; keep exact matches only.
        if unique.iter().any(|n| **n == t.name) {
            found.insert(t.name.clone(), t);
        }
    }
    let mut missing: Vec<String> = Vec::new();
    for n in names {
        if !found.contains_key(n) && !missing.contains(n) {
            missing.push(n.clone());
        }
    }
    Ok((found, missing))
}

/// The traits a provider has, by name.
pub async fn provider_traits(tx: &mut Tx, provider_id: i64) -> Result<Vec<TraitRow>> {
    let sql = format!(
        "SELECT {} FROM traits t JOIN resource_provider_traits rpt ON rpt.trait_id = t.id \
         WHERE rpt.resource_provider_id = ? ORDER BY t.id",
        TraitRow::COLUMNS
    );
    tx.fetch_all(&sql, &[provider_id.into()]).await?.iter().map(TraitRow::from_row).collect()
}

/// Makes `wanted` (trait ids) the provider's traits. Answers whether
/// anything changed; the caller bumps the generation then.
async fn replace_provider_traits(tx: &mut Tx, provider: &ProviderRow, wanted: &[i64]) -> Result<bool> {
    let existing: Vec<i64> = provider_traits(tx, provider.id).await?.iter().map(|t| t.id).collect();
    let to_delete: Vec<i64> = existing.iter().filter(|id| !wanted.contains(id)).copied().collect();
    let mut to_add: Vec<i64> = wanted.iter().filter(|id| !existing.contains(id)).copied().collect();
    to_add.sort_unstable();
    to_add.dedup();
    if to_delete.is_empty() && to_add.is_empty() {
        return Ok(false);
    }
    if !to_delete.is_empty() {
        let mut params: Vec<Value> = vec![provider.id.into()];
        params.extend(to_delete.iter().map(|id| Value::Int(*id)));
        tx.execute(
            &format!(
                "DELETE FROM resource_provider_traits WHERE resource_provider_id = ? AND trait_id IN ({})",
                in_list(to_delete.len())
            ),
            &params,
        )
        .await?;
    }
    let ts = now();
    let rows: Vec<Value> = to_add.iter().flat_map(|id| [Value::Int(*id), provider.id.into(), ts.into()]).collect();
    tx.insert_rows("INSERT INTO resource_provider_traits (trait_id, resource_provider_id, created_at)", 3, &rows)
        .await?;
    Ok(true)
}

impl Store {
    pub async fn list_traits(&self, filter: &TraitFilter) -> Result<Vec<TraitRow>> {
        let mut clauses: Vec<String> = Vec::new();
        let mut params: Vec<Value> = Vec::new();
        if let Some(names) = &filter.names {
            if names.is_empty() {
                return Ok(Vec::new());
            }
            clauses.push(format!("t.name IN ({})", in_list(names.len())));
            params.extend(names.iter().map(|n| Value::from(n.as_str())));
        }
        if let Some(prefix) = &filter.name_prefix {
            // LIKE would treat `_` and `%` as wildcards; compare the prefix.
            // The length is ours, not the caller's: inline it, because
            // PostgreSQL has no SUBSTR taking the 64-bit parameter we bind.
            clauses.push(format!("SUBSTR(t.name, 1, {}) = ?", prefix.chars().count()));
            params.push(prefix.as_str().into());
        }
        match filter.associated {
            Some(true) => clauses.push("t.id IN (SELECT rpt.trait_id FROM resource_provider_traits rpt)".into()),
            Some(false) => clauses.push("t.id NOT IN (SELECT rpt.trait_id FROM resource_provider_traits rpt)".into()),
            None => {}
        }
        let mut sql = format!("SELECT {} FROM traits t", TraitRow::COLUMNS);
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        // Upstream answers in the order its query reads: by name through
        // the name index when names are filtered, in table order otherwise.
        let by_name = filter.names.is_some() || filter.name_prefix.is_some();
        sql.push_str(if by_name { " ORDER BY t.name" } else { " ORDER BY t.id" });
        let rows = self.db.fetch_all(&sql, &params).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let t = TraitRow::from_row(r)?;
            // Exact comparisons where the collation folds case.
            if filter.names.as_ref().is_some_and(|names| !names.contains(&t.name)) {
                continue;
            }
            if filter.name_prefix.as_ref().is_some_and(|p| !t.name.starts_with(p.as_str())) {
                continue;
            }
            out.push(t);
        }
        Ok(out)
    }

    pub async fn get_trait(&self, name: &str) -> Result<TraitRow> {
        let mut tx = self.db.begin_read().await?;
        let t = find_trait(&mut tx, name).await?.ok_or_else(|| trait_not_found(name))?;
        tx.commit().await?;
        Ok(t)
    }

    /// Creates a trait unless it exists: (trait, created).
    pub async fn ensure_trait(&self, name: &str) -> Result<(TraitRow, bool)> {
        write_retrying("trait create", || self.try_ensure_trait(name)).await
    }

    async fn try_ensure_trait(&self, name: &str) -> Result<(TraitRow, bool)> {
        let mut tx = self.db.begin().await?;
        if let Some(t) = find_trait(&mut tx, name).await? {
            return Ok((t, false));
        }
        let ts = now();
        match tx.insert("INSERT INTO traits (name, created_at) VALUES (?, ?)", &[name.into(), ts.into()]).await {
            Ok(id) => {
                tx.commit().await?;
                Ok((TraitRow { id, name: name.to_string(), created_at: Some(ts), updated_at: None }, true))
            }
            // Created concurrently: it exists, which is all that was asked.
            Err(e) if e.is_unique_violation() => {
                drop(tx);
                Ok((self.get_trait(name).await?, false))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a custom trait no provider has.
    pub async fn delete_trait(&self, name: &str) -> Result<()> {
        write_retrying("trait delete", || self.try_delete_trait(name)).await
    }

    async fn try_delete_trait(&self, name: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let t = find_trait(&mut tx, name).await?.ok_or_else(|| trait_not_found(name))?;
        if !name.starts_with(CUSTOM_PREFIX) {
            return Err(Error::BadRequest(format!("Cannot delete standard trait {name}.")));
        }
        let used = tx
            .fetch_optional("SELECT COUNT(*) FROM resource_provider_traits WHERE trait_id = ?", &[t.id.into()])
            .await?;
        if used.map(|r| r.i64(0)).transpose()?.unwrap_or(0) > 0 {
            return Err(Error::conflict(format!("The trait {name} is in use by a resource provider.")));
        }
        tx.execute("DELETE FROM traits WHERE id = ?", &[t.id.into()]).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn get_provider_traits(&self, uuid: &str) -> Result<ProviderTraits> {
        let mut tx = self.db.begin_read().await?;
        let rp = get_provider(&mut tx, uuid).await?;
        let traits = provider_traits(&mut tx, rp.id).await?;
        tx.commit().await?;
        Ok(ProviderTraits { traits, generation: rp.generation })
    }

    /// Replaces a provider's traits if its generation is still `generation`.
    /// The generation moves only when the set changes.
    pub async fn set_provider_traits(&self, uuid: &str, generation: i64, names: &[String]) -> Result<ProviderTraits> {
        write_retrying("provider traits write", || self.try_set_provider_traits(uuid, generation, names)).await
    }

    async fn try_set_provider_traits(&self, uuid: &str, generation: i64, names: &[String]) -> Result<ProviderTraits> {
        let mut tx = self.db.begin().await?;
        let rp = get_provider(&mut tx, uuid).await?;
        if rp.generation != generation {
            return Err(Error::concurrent_update(
                "Resource provider's generation already changed. Please update the generation and try again.",
            ));
        }
        let (named, missing) = named_traits(&mut tx, names).await?;
        if !missing.is_empty() {
            return Err(Error::BadRequest(format!("No such trait {}", missing.join(", "))));
        }
        let wanted: Vec<i64> = names.iter().filter_map(|n| named.get(n).map(|t| t.id)).collect();
        let new_generation = if replace_provider_traits(&mut tx, &rp, &wanted).await? {
            bump_generation(&mut tx, &rp, generation).await.map_err(concurrent_provider_update)?
        } else {
            generation
        };
        tx.commit().await?;
        // The provider's traits are now the ones named (no second read);
        // upstream answers with its by-name lookup of them.
        let mut traits: Vec<TraitRow> = named.into_values().collect();
        traits.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ProviderTraits { traits, generation: new_generation })
    }

    /// Removes every trait of a provider (no generation given by the caller).
    pub async fn delete_provider_traits(&self, uuid: &str) -> Result<()> {
        write_retrying("provider traits delete", || self.try_delete_provider_traits(uuid)).await
    }

    async fn try_delete_provider_traits(&self, uuid: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let rp = get_provider(&mut tx, uuid).await?;
        if replace_provider_traits(&mut tx, &rp, &[]).await? {
            bump_generation(&mut tx, &rp, rp.generation).await.map_err(concurrent_provider_update)?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Upstream's text for a generation lost to a concurrent writer.
pub fn concurrent_provider_update(e: Error) -> Error {
    match e {
        Error::Conflict(code, _) if code == crate::error::CONCURRENT_UPDATE => Error::concurrent_update(
            "Another thread concurrently updated the resource provider data. Please retry your update",
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CONCURRENT_UPDATE;
    use crate::store::consumers::test_support::store;

    #[tokio::test]
    async fn provider_traits_move_the_generation_only_on_change() {
        let store = store().await;
        let rp = store.create_resource_provider(None, "rp", None).await.unwrap();
        let uuid = rp.row.uuid.as_str();
        assert!(store.ensure_trait("CUSTOM_A").await.unwrap().1);
        assert!(!store.ensure_trait("CUSTOM_A").await.unwrap().1);
        let t = store.set_provider_traits(uuid, 0, &["CUSTOM_A".into(), "HW_CPU_X86_AVX".into()]).await.unwrap();
        assert_eq!(t.generation, 1);
        let same = store.set_provider_traits(uuid, 1, &["HW_CPU_X86_AVX".into(), "CUSTOM_A".into()]).await.unwrap();
        assert_eq!(same.generation, 1);
        let stale = store.set_provider_traits(uuid, 0, &[]).await.unwrap_err();
        assert!(matches!(stale, Error::Conflict(CONCURRENT_UPDATE, _)));
        let unknown = store.set_provider_traits(uuid, 1, &["CUSTOM_B".into()]).await.unwrap_err();
        assert!(matches!(unknown, Error::BadRequest(ref d) if d == "No such trait CUSTOM_B"));

        let in_use = store.delete_trait("CUSTOM_A").await.unwrap_err();
        assert!(
            matches!(in_use, Error::Conflict(_, ref d) if d == "The trait CUSTOM_A is in use by a resource provider.")
        );
        let standard = store.delete_trait("HW_CPU_X86_AVX").await.unwrap_err();
        assert!(matches!(standard, Error::BadRequest(_)));

        let used = store.list_traits(&TraitFilter { associated: Some(true), ..Default::default() }).await.unwrap();
        // Table order: the seeded standard trait first.
        assert_eq!(used.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["HW_CPU_X86_AVX", "CUSTOM_A"]);
        let custom = store
            .list_traits(&TraitFilter { name_prefix: Some("CUSTOM_".into()), ..Default::default() })
            .await
            .unwrap();
        assert_eq!(custom.len(), 1);

        store.delete_provider_traits(uuid).await.unwrap();
        assert_eq!(store.get_provider_traits(uuid).await.unwrap().generation, 2);
        store.delete_trait("CUSTOM_A").await.unwrap();
        assert!(matches!(store.get_trait("CUSTOM_A").await.unwrap_err(), Error::NotFound(_)));
    }

    #[tokio::test]
    async fn aggregates_check_the_generation_only_when_given() {
        let store = store().await;
        let rp = store.create_resource_provider(None, "rp", None).await.unwrap();
        let uuid = rp.row.uuid.as_str();
        let agg = "a0000000-0000-0000-0000-000000000000".to_string();
        let a = store.set_provider_aggregates(uuid, None, std::slice::from_ref(&agg)).await.unwrap();
        assert_eq!((a.aggregates.len(), a.generation), (1, 0));
        let a = store.set_provider_aggregates(uuid, Some(0), &[]).await.unwrap();
        assert_eq!((a.aggregates.len(), a.generation), (0, 1));
        let stale = store.set_provider_aggregates(uuid, Some(0), &[agg]).await.unwrap_err();
        assert!(matches!(stale, Error::Conflict(CONCURRENT_UPDATE, _)));
    }
}
