//! Usages: what is allocated, summed per resource class, for one provider
//! or for a project (optionally one user), optionally by consumer type.

use std::collections::BTreeMap;

use keelson_db::Value;

use super::{find_provider, sum_as_bigint, ProviderRow, Store};
use crate::error::{Error, Result};

/// The group name of consumers without a type.
pub const UNKNOWN_CONSUMER_TYPE: &str = "unknown";
/// The group name that sums every consumer.
pub const ALL_CONSUMER_TYPES: &str = "all";

/// One group of a project's usages.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageGroup {
    /// The consumer type ("all"/"unknown" as asked), or `None` when not
    /// split by type.
    pub consumer_type: Option<String>,
    pub consumer_count: i64,
    pub usages: BTreeMap<String, i64>,
}

/// What `GET /usages` asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageQuery {
    pub project_id: String,
    pub user_id: Option<String>,
    /// Split by consumer type (REST 1.38).
    pub by_consumer_type: bool,
    /// With `by_consumer_type`: only this type, or "all"/"unknown".
    pub consumer_type: Option<String>,
}

impl Store {
    /// GET /resource_providers/{uuid}/usages: every class the provider has
    /// inventory of, with what is allocated of it (0 when nothing).
    pub async fn get_provider_usages(&self, uuid: &str) -> Result<(ProviderRow, BTreeMap<String, i64>)> {
        let mut tx = self.db.begin_read().await?;
        let provider = find_provider(&mut tx, uuid).await?.ok_or_else(|| {
            Error::NotFound(format!(
                "No resource provider with uuid {uuid} found: No resource provider with uuid {uuid} found"
            ))
        })?;
        let sql = format!(
            "SELECT rc.name, (SELECT COALESCE({}, 0) FROM allocations a \
               WHERE a.resource_provider_id = i.resource_provider_id AND a.resource_class_id = i.resource_class_id) \
             FROM inventories i JOIN resource_classes rc ON rc.id = i.resource_class_id \
             WHERE i.resource_provider_id = ?",
            sum_as_bigint(tx.dialect, "a.used")
        );
        let rows = tx.fetch_all(&sql, &[provider.id.into()]).await?;
        tx.commit().await?;
        let usages = rows.iter().map(|r| Ok((r.string(0)?, r.opt_i64(1)?.unwrap_or(0)))).collect::<Result<_>>()?;
        Ok((provider, usages))
    }

    /// GET /usages: a project's (or project user's) usages, in one group,
    /// or (by type) one group per consumer type.
    pub async fn get_usages(&self, q: &UsageQuery) -> Result<Vec<UsageGroup>> {
        let mut tx = self.db.begin_read().await?;
        let dialect = tx.dialect;
        // Resolve the external ids exactly first (MariaDB's collation folds
        // case), then let the database aggregate by integer ids: a
        // project's usage is one grouped query, not a row per consumer.
        let project = exact_id(&mut tx, "projects", &q.project_id).await?;
        let user = match &q.user_id {
            Some(u) => Some(exact_id(&mut tx, "users", u).await?),
            None => None,
        };
        let mut rows_by_type: Vec<(Option<String>, String, i64)> = Vec::new();
        let mut counts_by_type: Vec<(Option<String>, i64)> = Vec::new();
        let ids = match (project, user) {
            (Some(p), None) => Some((p, None)),
            (Some(p), Some(Some(u))) => Some((p, Some(u))),
            _ => None,
        };
        if let Some((project_id, user_id)) = ids {
            let mut filter = String::from("c.project_id = ?");
            let mut params: Vec<Value> = vec![project_id.into()];
            if let Some(u) = user_id {
                filter.push_str(" AND c.user_id = ?");
                params.push(u.into());
            }
            let consumers = "FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id \
                 LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id";
            let sql = format!(
                "SELECT ct.name, rc.name, {} {consumers} JOIN resource_classes rc ON rc.id = a.resource_class_id \
                 WHERE {filter} GROUP BY ct.name, rc.name",
                sum_as_bigint(dialect, "a.used"),
            );
            for r in tx.fetch_all(&sql, &params).await? {
                rows_by_type.push((r.opt_string(0)?, r.string(1)?, r.opt_i64(2)?.unwrap_or(0)));
            }
            // Counts are shown only by consumer type (1.38): the second
            // pass over the project's allocations is asked only then.
            if q.by_consumer_type {
                let sql = format!("SELECT ct.name, COUNT(DISTINCT c.id) {consumers} WHERE {filter} GROUP BY ct.name");
                for r in tx.fetch_all(&sql, &params).await? {
                    counts_by_type.push((r.opt_string(0)?, r.i64(1)?));
                }
            }
        }
        tx.commit().await?;

        let key_of = |ty: &Option<String>| -> Option<Option<String>> {
            if !q.by_consumer_type {
                return Some(None);
            }
            match q.consumer_type.as_deref() {
                Some(ALL_CONSUMER_TYPES) => Some(Some(ALL_CONSUMER_TYPES.to_string())),
                Some(UNKNOWN_CONSUMER_TYPE) if ty.is_none() => Some(Some(UNKNOWN_CONSUMER_TYPE.to_string())),
                Some(UNKNOWN_CONSUMER_TYPE) => None,
                Some(wanted) if ty.as_deref() != Some(wanted) => None,
                _ => Some(Some(ty.clone().unwrap_or_else(|| UNKNOWN_CONSUMER_TYPE.to_string()))),
            }
        };
        let mut groups: BTreeMap<Option<String>, UsageGroup> = BTreeMap::new();
        for (ty, class, used) in &rows_by_type {
            let Some(key) = key_of(ty) else { continue };
            let group =
                groups.entry(key.clone()).or_insert_with(|| UsageGroup { consumer_type: key, ..Default::default() });
            *group.usages.entry(class.clone()).or_insert(0) += used;
        }
        // A consumer has one type, so per-type counts add up per group.
        for (ty, count) in &counts_by_type {
            if let Some(group) = key_of(ty).and_then(|key| groups.get_mut(&key)) {
                group.consumer_count += count;
            }
        }
        let mut out: Vec<UsageGroup> = groups.into_values().collect();
        if out.is_empty() && !q.by_consumer_type {
            out.push(UsageGroup::default());
        }
        Ok(out)
    }
}

/// The id of the row of `table` whose `external_id` is exactly `value`.
async fn exact_id(tx: &mut keelson_db::Tx, table: &str, value: &str) -> Result<Option<i64>> {
    let rows =
        tx.fetch_all(&format!("SELECT id, external_id FROM {table} WHERE external_id = ?"), &[value.into()]).await?;
    for r in &rows {
        if r.string(1)? == value {
            return Ok(Some(r.i64(0)?));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::allocations::{ConsumerWrite, GenerationCheck, ProviderAmounts, WriteOp};
    use crate::store::consumers::test_support::{provider, store};
    use crate::store::inventories::InventoryRecord;

    fn write(consumer: &str, rp: &str, res: &[(&str, i64)], user: &str, ty: Option<&str>) -> ConsumerWrite {
        ConsumerWrite {
            uuid: consumer.into(),
            allocations: vec![ProviderAmounts {
                provider_uuid: rp.into(),
                resources: res.iter().map(|(rc, n)| (rc.to_string(), *n)).collect(),
            }],
            project_id: Some("proj".into()),
            user_id: Some(user.into()),
            generation: GenerationCheck::Ignored,
            consumer_type: ty.map(str::to_string),
        }
    }

    #[tokio::test]
    async fn usages_by_provider_project_and_type() {
        let store = store().await;
        let rp = provider(&store, "rp").await;
        store
            .set_inventories(
                &rp,
                0,
                vec![InventoryRecord::new("VCPU", 16), InventoryRecord::new("DISK_GB", 100)],
                false,
            )
            .await
            .unwrap();
        let (_, empty) = store.get_provider_usages(&rp).await.unwrap();
        assert_eq!(empty.get("VCPU"), Some(&0));
        store
            .set_allocations(
                WriteOp::Many,
                &[
                    write("c1", &rp, &[("VCPU", 2), ("DISK_GB", 10)], "alice", Some("INSTANCE")),
                    write("c2", &rp, &[("VCPU", 1)], "bob", None),
                    write("c3", &rp, &[("VCPU", 4)], "bob", Some("MIGRATION")),
                ],
            )
            .await
            .unwrap();
        let (_, u) = store.get_provider_usages(&rp).await.unwrap();
        assert_eq!((u["VCPU"], u["DISK_GB"]), (7, 10));

        let q = UsageQuery { project_id: "proj".into(), ..Default::default() };
        let all = store.get_usages(&q).await.unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].usages["VCPU"], 7);
        let bob = store.get_usages(&UsageQuery { user_id: Some("bob".into()), ..q.clone() }).await.unwrap();
        assert_eq!(bob[0].usages.get("DISK_GB"), None);
        assert_eq!(bob[0].usages["VCPU"], 5);

        let by_type = store.get_usages(&UsageQuery { by_consumer_type: true, ..q.clone() }).await.unwrap();
        let names: Vec<_> = by_type.iter().map(|g| g.consumer_type.clone().unwrap()).collect();
        assert_eq!(names, ["INSTANCE", "MIGRATION", "unknown"]);
        let all = store
            .get_usages(&UsageQuery { by_consumer_type: true, consumer_type: Some("all".into()), ..q.clone() })
            .await
            .unwrap();
        assert_eq!((all[0].consumer_count, all[0].usages["VCPU"]), (3, 7));
        let unknown = store
            .get_usages(&UsageQuery { by_consumer_type: true, consumer_type: Some("unknown".into()), ..q.clone() })
            .await
            .unwrap();
        assert_eq!((unknown[0].consumer_count, unknown[0].usages["VCPU"]), (1, 1));
        let none = store
            .get_usages(&UsageQuery { by_consumer_type: true, consumer_type: Some("ALL".into()), ..q.clone() })
            .await
            .unwrap();
        assert!(none.is_empty());
        assert!(store.get_usages(&UsageQuery { project_id: "other".into(), ..Default::default() }).await.unwrap()[0]
            .usages
            .is_empty());
    }
}
