//! Usages: what is allocated, summed per resource class, for one provider
//! or for a project (optionally one user), optionally by consumer type.

use std::collections::{BTreeMap, HashMap};

use keelson_db::{Dialect, Value};

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
        // Two statements rather than a subquery per inventory row, which
        // MariaDB plans by lagging table statistics (see check_capacity).
        let classes = tx
            .fetch_all(
                "SELECT i.resource_class_id, rc.name FROM inventories i \
                 JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE i.resource_provider_id = ?",
                &[provider.id.into()],
            )
            .await?;
        let sql = format!(
            "SELECT resource_class_id, {} FROM allocations WHERE resource_provider_id = ? GROUP BY resource_class_id",
            sum_as_bigint(tx.dialect, "used")
        );
        let mut used: HashMap<i64, i64> = HashMap::new();
        for r in tx.fetch_all(&sql, &[provider.id.into()]).await? {
            used.insert(r.i64(0)?, r.opt_i64(1)?.unwrap_or(0));
        }
        tx.commit().await?;
        let usages = classes
            .iter()
            .map(|r| Ok((r.string(1)?, used.get(&r.i64(0)?).copied().unwrap_or(0))))
            .collect::<Result<_>>()?;
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
            if q.by_consumer_type {
                let (sql, params) = by_type_statement(dialect, &filter, params);
                for r in tx.fetch_all(&sql, &params).await? {
                    // (type id, type name, class id, class name, used, consumers);
                    // the grand total (no type) is not needed: a consumer
                    // has one type, so "all" adds the per-type figures.
                    if r.is_null(0) {
                        continue;
                    }
                    let ty = r.opt_string(1)?;
                    if r.is_null(2) {
                        counts_by_type.push((ty, r.i64(5)?));
                    } else if let Some(class) = r.opt_string(3)? {
                        rows_by_type.push((ty, class, r.opt_i64(4)?.unwrap_or(0)));
                    }
                }
            } else {
                let sql = format!(
                    "SELECT rc.name, s.used FROM (SELECT a.resource_class_id AS class_id, {} AS used {USAGE_JOIN} \
                     WHERE {filter} GROUP BY a.resource_class_id) s JOIN resource_classes rc ON rc.id = s.class_id",
                    sum_as_bigint(dialect, "a.used"),
                );
                for r in tx.fetch_all(&sql, &params).await? {
                    rows_by_type.push((None, r.string(0)?, r.opt_i64(1)?.unwrap_or(0)));
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

/// A project's consumers and their allocations, walked from the consumers
/// (`consumers_project_id_uuid_idx` or `consumers_project_id_user_id_uuid_idx`)
/// to their allocations (`allocations_consumer_id_idx`).
const USAGE_JOIN: &str = "FROM consumers c JOIN allocations a ON a.consumer_id = c.uuid";

/// One pass over a project's allocations giving both the sums per
/// (consumer type, class) and the distinct consumers per type: rows of
/// (type id, type name, class id, class name, used, consumers), where a
/// row without a class is its type's subtotal and one without a type the
/// grand total. Grouping is by integer ids and the names are joined to the
/// few grouped rows after. A consumer without a type groups as type 0
/// (ids start at 1), so that only a subtotal has a NULL in a grouped column.
fn by_type_statement(dialect: Dialect, filter: &str, params: Vec<Value>) -> (String, Vec<Value>) {
    let select = format!(
        "SELECT COALESCE(c.consumer_type_id, 0) AS type_id, {{class}} AS class_id, {} AS used, \
         COUNT(DISTINCT c.id) AS consumers {USAGE_JOIN} WHERE {filter}",
        sum_as_bigint(dialect, "a.used")
    );
    let by_class = select.replace("{class}", "a.resource_class_id");
    let (grouped, params) = match dialect {
        Dialect::MySql => {
            (format!("{by_class} GROUP BY COALESCE(c.consumer_type_id, 0), a.resource_class_id WITH ROLLUP"), params)
        }
        Dialect::Postgres => {
            (format!("{by_class} GROUP BY ROLLUP (COALESCE(c.consumer_type_id, 0), a.resource_class_id)"), params)
        }
        // SQLite has no ROLLUP: the subtotals come from a second grouping.
        Dialect::Sqlite => {
            let by_type = select.replace("{class}", "NULL");
            let sql = format!(
                "{by_class} GROUP BY COALESCE(c.consumer_type_id, 0), a.resource_class_id \
                 UNION ALL {by_type} GROUP BY COALESCE(c.consumer_type_id, 0)"
            );
            (sql, params.iter().cloned().chain(params.iter().cloned()).collect())
        }
    };
    let sql = format!(
        "SELECT s.type_id, ct.name, s.class_id, rc.name, s.used, s.consumers FROM ({grouped}) s \
         LEFT JOIN consumer_types ct ON ct.id = s.type_id LEFT JOIN resource_classes rc ON rc.id = s.class_id"
    );
    (sql, params)
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
        // c1 holds two classes and still counts once.
        let counts: Vec<_> = by_type.iter().map(|g| g.consumer_count).collect();
        assert_eq!(counts, [1, 1, 1]);
        assert_eq!((by_type[0].usages["VCPU"], by_type[0].usages["DISK_GB"]), (2, 10));
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
