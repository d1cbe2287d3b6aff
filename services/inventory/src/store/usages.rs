//! Usages: what is allocated, summed per resource class, for one provider
//! or for a project (optionally one user), optionally by consumer type.

use std::collections::BTreeMap;

use keelson_common::db::Value;

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
            Error::NotFound(format!("No resource provider with uuid {uuid} found: No resource provider with uuid {uuid} found"))
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
        // Exact matches in Rust: MariaDB compares ids case-insensitively.
        let mut from = String::from(
            "FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id \
             JOIN projects p ON p.id = c.project_id \
             JOIN users u ON u.id = c.user_id \
             LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id \
             JOIN resource_classes rc ON rc.id = a.resource_class_id \
             WHERE p.external_id = ?",
        );
        let mut params: Vec<Value> = vec![q.project_id.as_str().into()];
        if let Some(user) = &q.user_id {
            from.push_str(" AND u.external_id = ?");
            params.push(user.as_str().into());
        }
        let sql = format!(
            "SELECT p.external_id, u.external_id, ct.name, rc.name, c.uuid, {} {from} \
             GROUP BY p.external_id, u.external_id, ct.name, rc.name, c.uuid",
            sum_as_bigint(dialect, "a.used")
        );
        let rows = tx.fetch_all(&sql, &params).await?;
        tx.commit().await?;

        // Groups by key; consumers per group counted once.
        let mut groups: BTreeMap<Option<String>, (UsageGroup, std::collections::BTreeSet<String>)> = BTreeMap::new();
        for r in &rows {
            if r.string(0)? != q.project_id || q.user_id.as_ref().is_some_and(|u| r.string(1).ok().as_ref() != Some(u)) {
                continue;
            }
            let ty = r.opt_string(2)?;
            let key = if !q.by_consumer_type {
                None
            } else {
                match q.consumer_type.as_deref() {
                    Some(ALL_CONSUMER_TYPES) => Some(ALL_CONSUMER_TYPES.to_string()),
                    Some(UNKNOWN_CONSUMER_TYPE) if ty.is_none() => Some(UNKNOWN_CONSUMER_TYPE.to_string()),
                    Some(UNKNOWN_CONSUMER_TYPE) => continue,
                    Some(wanted) if ty.as_deref() != Some(wanted) => continue,
                    _ => Some(ty.unwrap_or_else(|| UNKNOWN_CONSUMER_TYPE.to_string())),
                }
            };
            let (group, consumers) =
                groups.entry(key.clone()).or_insert_with(|| (UsageGroup { consumer_type: key, ..Default::default() }, Default::default()));
            *group.usages.entry(r.string(3)?).or_insert(0) += r.opt_i64(5)?.unwrap_or(0);
            consumers.insert(r.string(4)?);
        }
        let mut out: Vec<UsageGroup> = groups
            .into_values()
            .map(|(mut g, consumers)| {
                g.consumer_count = consumers.len() as i64;
                g
            })
            .collect();
        if out.is_empty() && !q.by_consumer_type {
            out.push(UsageGroup::default());
        }
        Ok(out)
    }
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
        store.set_inventories(&rp, 0, vec![InventoryRecord::new("VCPU", 16), InventoryRecord::new("DISK_GB", 100)], false).await.unwrap();
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
        let all = store.get_usages(&UsageQuery { by_consumer_type: true, consumer_type: Some("all".into()), ..q.clone() }).await.unwrap();
        assert_eq!((all[0].consumer_count, all[0].usages["VCPU"]), (3, 7));
        let unknown =
            store.get_usages(&UsageQuery { by_consumer_type: true, consumer_type: Some("unknown".into()), ..q.clone() }).await.unwrap();
        assert_eq!((unknown[0].consumer_count, unknown[0].usages["VCPU"]), (1, 1));
        let none = store.get_usages(&UsageQuery { by_consumer_type: true, consumer_type: Some("ALL".into()), ..q.clone() }).await.unwrap();
        assert!(none.is_empty());
        assert!(store.get_usages(&UsageQuery { project_id: "other".into(), ..Default::default() }).await.unwrap()[0].usages.is_empty());
    }
}
