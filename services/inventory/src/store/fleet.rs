//! The fleet as the console shows it: whole provider trees with every
//! provider's inventories, usages, traits and aggregates, filtered and
//! paged.
//!
//! One read transaction of a fixed number of statements whatever the page
//! holds (the filters' names resolved, the page, its counts, then the
//! page's inventories, usages, traits and aggregates each in one
//! statement, and the filter choices), so a page of a thousand providers
//! costs no more round trips than a page of one.

use std::collections::{BTreeMap, HashMap};

use keelson_db::{in_list, Tx, Value};

use super::inventories::InventoryRecord;
use super::{sum_as_bigint, Store};
use crate::error::{Error, Result};

/// Providers on a page when the request does not say.
pub const DEFAULT_PAGE: u32 = 1000;
/// The most providers one page holds.
pub const MAX_PAGE: u32 = 5000;
/// The most filter choices of each kind an answer lists.
pub const MAX_CHOICES: u32 = 1000;
/// The longest search text (a uuid is 36; a name at most 200).
pub const MAX_SEARCH: usize = 255;

/// What selects the listed trees: every filter given must hold for one
/// provider of the tree.
#[derive(Debug, Clone, Default)]
pub struct FleetFilter {
    pub required_trait: Option<String>,
    /// An aggregate uuid.
    pub member_of: Option<String>,
    pub resource_class: Option<String>,
    /// Part of the provider's name (any case) or of its uuid.
    pub search: Option<String>,
}

/// One page of the fleet.
#[derive(Debug, Clone, Default)]
pub struct FleetPage {
    pub providers: Vec<FleetProvider>,
    /// The uuid to ask the next page after; `None` on the last page.
    pub next_marker: Option<String>,
    /// Providers of the selected trees, over all pages.
    pub total: u64,
    /// Of those, the providers that pass the filters.
    pub matched: u64,
    pub choices: FleetChoices,
}

/// What the filters can name.
#[derive(Debug, Clone, Default)]
pub struct FleetChoices {
    pub resource_classes: Vec<String>,
    pub traits: Vec<String>,
    pub aggregates: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct FleetProvider {
    pub id: i64,
    pub uuid: String,
    pub name: String,
    pub generation: i64,
    pub parent_uuid: Option<String>,
    pub root_uuid: String,
    pub inventories: Vec<InventoryRecord>,
    pub usages: BTreeMap<String, i64>,
    pub traits: Vec<String>,
    pub aggregates: Vec<String>,
    pub matched: bool,
}

/// The filters as one SQL condition on the provider alias `a`, with its
/// parameters; `None` when no filter is given. Names were resolved to ids
/// beforehand (exact matches: MariaDB's collation would fold case).
struct Condition {
    sql: String,
    params: Vec<Value>,
}

/// A filter's name resolved: its id, or known to match nothing.
enum Resolved {
    Any,
    Id(i64),
    Nothing,
}

async fn resolve(tx: &mut Tx, sql: &str, name: Option<&str>) -> Result<Resolved> {
    let Some(name) = name.filter(|n| !n.is_empty()) else { return Ok(Resolved::Any) };
    for r in tx.fetch_all(sql, &[name.into()]).await? {
        if r.string(1)? == name {
            return Ok(Resolved::Id(r.i64(0)?));
        }
    }
    Ok(Resolved::Nothing)
}

/// `text` as a LIKE pattern for "contains", with `!` as the escape
/// character (a backslash would mean different things to MariaDB and
/// PostgreSQL string literals).
fn contains_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.to_lowercase().chars() {
        if matches!(c, '!' | '%' | '_') {
            out.push('!');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// The filters' condition, or `Err(())` when a named trait, aggregate or
/// class does not exist (nothing can match).
async fn condition(tx: &mut Tx, filter: &FleetFilter) -> Result<std::result::Result<Option<Condition>, ()>> {
    let mut clauses: Vec<String> = Vec::new();
    let mut params: Vec<Value> = Vec::new();
    let lookups = [
        (
            "SELECT id, name FROM traits WHERE name = ?",
            filter.required_trait.as_deref(),
            "a.id IN (SELECT f.resource_provider_id FROM resource_provider_traits f WHERE f.trait_id = ?)",
        ),
        (
            "SELECT id, uuid FROM placement_aggregates WHERE uuid = ?",
            filter.member_of.as_deref(),
            "a.id IN (SELECT f.resource_provider_id FROM resource_provider_aggregates f WHERE f.aggregate_id = ?)",
        ),
        (
            "SELECT id, name FROM resource_classes WHERE name = ?",
            filter.resource_class.as_deref(),
            "a.id IN (SELECT f.resource_provider_id FROM inventories f WHERE f.resource_class_id = ?)",
        ),
    ];
    for (lookup, name, clause) in lookups {
        match resolve(tx, lookup, name).await? {
            Resolved::Any => {}
            Resolved::Nothing => return Ok(Err(())),
            Resolved::Id(id) => {
                clauses.push(clause.to_string());
                params.push(Value::Int(id));
            }
        }
    }
    if let Some(search) = filter.search.as_deref().filter(|s| !s.is_empty()) {
        let pattern = contains_pattern(search);
        clauses.push("(LOWER(a.name) LIKE ? ESCAPE '!' OR LOWER(a.uuid) LIKE ? ESCAPE '!')".into());
        params.push(pattern.as_str().into());
        params.push(pattern.into());
    }
    if clauses.is_empty() {
        return Ok(Ok(None));
    }
    Ok(Ok(Some(Condition { sql: clauses.join(" AND "), params })))
}

/// The tree a provider belongs to (a provider written before roots were
/// recorded is its own root).
const TREE_OF_RP: &str = "COALESCE(rp.root_provider_id, rp.id)";

impl Store {
    /// One page of the fleet: at most `limit` providers (clamped to
    /// 1..=[`MAX_PAGE`], 0 meaning [`DEFAULT_PAGE`]) after `marker`, of
    /// the trees `filter` selects.
    pub async fn list_fleet(&self, filter: &FleetFilter, limit: u32, marker: Option<&str>) -> Result<FleetPage> {
        if filter.search.as_deref().is_some_and(|s| s.chars().count() > MAX_SEARCH) {
            return Err(Error::BadRequest(format!("search is longer than {MAX_SEARCH} characters")));
        }
        let limit = if limit == 0 { DEFAULT_PAGE } else { limit.min(MAX_PAGE) };
        let mut tx = self.db.begin_read().await?;
        let page = fleet_in(&mut tx, filter, limit, marker).await;
        tx.end_read();
        page
    }
}

async fn fleet_in(tx: &mut Tx, filter: &FleetFilter, limit: u32, marker: Option<&str>) -> Result<FleetPage> {
    let choices = choices(tx).await?;
    let condition = match condition(tx, filter).await? {
        Ok(c) => c,
        Err(()) => return Ok(FleetPage { choices, ..FleetPage::default() }),
    };
    // The selected trees, and whether each provider passes: both
    // conditions take the filters' parameters, `matched` (in the SELECT)
    // first.
    let (trees, matched, mut params) = match &condition {
        None => (String::from("1 = 1"), String::from("1"), Vec::new()),
        Some(c) => (
            format!(
                "{TREE_OF_RP} IN (SELECT COALESCE(a.root_provider_id, a.id) FROM resource_providers a WHERE {})",
                c.sql
            ),
            format!(
                "CASE WHEN EXISTS (SELECT 1 FROM resource_providers a WHERE a.id = rp.id AND {}) THEN 1 ELSE 0 END",
                c.sql
            ),
            c.params.iter().chain(c.params.iter()).cloned().collect::<Vec<Value>>(),
        ),
    };
    let counts = tx
        .fetch_all(
            &format!(
                "SELECT COUNT(*), {} FROM resource_providers rp WHERE {trees}",
                sum_as_bigint(tx.dialect, &matched)
            ),
            &params,
        )
        .await?;
    let (total, matched_count) = match counts.first() {
        Some(r) => (r.opt_i64(0)?.unwrap_or(0), r.opt_i64(1)?.unwrap_or(0)),
        None => (0, 0),
    };

    let mut after = String::new();
    if let Some(marker) = marker.filter(|m| !m.is_empty()) {
        let found = tx
            .fetch_optional(
                &format!("SELECT {TREE_OF_RP}, rp.id FROM resource_providers rp WHERE rp.uuid = ?"),
                &[marker.into()],
            )
            .await?
            .ok_or_else(|| {
                Error::BadRequest(format!("No resource provider with uuid {marker} found for the marker"))
            })?;
        let (tree, id) = (found.i64(0)?, found.i64(1)?);
        after = format!(" AND ({TREE_OF_RP} > ? OR ({TREE_OF_RP} = ? AND rp.id > ?))");
        params.extend([Value::Int(tree), Value::Int(tree), Value::Int(id)]);
    }
    // One more than asked: whether there is a next page.
    let sql = format!(
        "SELECT rp.id, rp.uuid, rp.name, rp.generation, parent.uuid, root.uuid, {matched} \
         FROM resource_providers rp \
         LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id \
         LEFT JOIN resource_providers root ON root.id = rp.root_provider_id \
         WHERE {trees}{after} ORDER BY {TREE_OF_RP}, rp.id LIMIT {}",
        u64::from(limit) + 1
    );
    let mut providers = Vec::new();
    for r in tx.fetch_all(&sql, &params).await? {
        let uuid = r.string(1)?;
        providers.push(FleetProvider {
            id: r.i64(0)?,
            root_uuid: r.opt_string(5)?.unwrap_or_else(|| uuid.clone()),
            uuid,
            name: r.opt_string(2)?.unwrap_or_default(),
            generation: r.opt_i64(3)?.unwrap_or(0),
            parent_uuid: r.opt_string(4)?,
            matched: r.i64(6)? != 0,
            ..FleetProvider::default()
        });
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let next_marker = if providers.len() > limit {
        providers.truncate(limit);
        providers.last().map(|p| p.uuid.clone())
    } else {
        None
    };
    details(tx, &mut providers).await?;
    Ok(FleetPage {
        providers,
        next_marker,
        total: u64::try_from(total).unwrap_or(0),
        matched: u64::try_from(matched_count).unwrap_or(0),
        choices,
    })
}

/// Fills in the page's inventories, usages, traits and aggregates: one
/// statement each over the page's ids (a page is smaller than one `IN`
/// chunk).
async fn details(tx: &mut Tx, providers: &mut [FleetProvider]) -> Result<()> {
    if providers.is_empty() {
        return Ok(());
    }
    let index: HashMap<i64, usize> = providers.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
    let ids: Vec<Value> = providers.iter().map(|p| Value::Int(p.id)).collect();
    let list = in_list(ids.len());
    let slot = |id: i64| index.get(&id).copied();

    let sql = format!(
        "SELECT inv.resource_provider_id, rc.name, inv.total, inv.reserved, inv.min_unit, inv.max_unit, \
         inv.step_size, inv.allocation_ratio FROM inventories inv \
         JOIN resource_classes rc ON rc.id = inv.resource_class_id \
         WHERE inv.resource_provider_id IN ({list}) ORDER BY inv.resource_provider_id, rc.id"
    );
    for r in tx.fetch_all(&sql, &ids).await? {
        if let Some(i) = slot(r.i64(0)?) {
            providers[i].inventories.push(InventoryRecord {
                resource_class: r.string(1)?,
                total: r.i64(2)?,
                reserved: r.i64(3)?,
                min_unit: r.i64(4)?,
                max_unit: r.i64(5)?,
                step_size: r.i64(6)?,
                allocation_ratio: r.f64(7)?,
                created_at: None,
                updated_at: None,
            });
        }
    }
    let sql = format!(
        "SELECT a.resource_provider_id, rc.name, {} FROM allocations a \
         JOIN resource_classes rc ON rc.id = a.resource_class_id \
         WHERE a.resource_provider_id IN ({list}) GROUP BY a.resource_provider_id, rc.name",
        sum_as_bigint(tx.dialect, "a.used")
    );
    for r in tx.fetch_all(&sql, &ids).await? {
        if let Some(i) = slot(r.i64(0)?) {
            providers[i].usages.insert(r.string(1)?, r.opt_i64(2)?.unwrap_or(0));
        }
    }
    let sql = format!(
        "SELECT rpt.resource_provider_id, t.name FROM resource_provider_traits rpt \
         JOIN traits t ON t.id = rpt.trait_id WHERE rpt.resource_provider_id IN ({list}) ORDER BY t.name"
    );
    for r in tx.fetch_all(&sql, &ids).await? {
        if let Some(i) = slot(r.i64(0)?) {
            providers[i].traits.push(r.string(1)?);
        }
    }
    let sql = format!(
        "SELECT rpa.resource_provider_id, pa.uuid FROM resource_provider_aggregates rpa \
         JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id WHERE rpa.resource_provider_id IN ({list}) \
         ORDER BY pa.uuid"
    );
    for r in tx.fetch_all(&sql, &ids).await? {
        if let Some(i) = slot(r.i64(0)?) {
            providers[i].aggregates.push(r.string(1)?);
        }
    }
    Ok(())
}

/// The classes with inventory, the traits of providers and the aggregates
/// with members, by name, at most [`MAX_CHOICES`] each.
async fn choices(tx: &mut Tx) -> Result<FleetChoices> {
    let names = |rows: Vec<keelson_db::Row>| -> Result<Vec<String>> {
        rows.iter().map(|r| r.string(0).map_err(Error::from)).collect()
    };
    let classes = tx
        .fetch_all(
            &format!(
                "SELECT rc.name FROM resource_classes rc WHERE rc.id IN (SELECT inv.resource_class_id FROM inventories inv) \
                 ORDER BY rc.name LIMIT {MAX_CHOICES}"
            ),
            &[],
        )
        .await?;
    let traits = tx
        .fetch_all(
            &format!(
                "SELECT t.name FROM traits t WHERE t.id IN (SELECT rpt.trait_id FROM resource_provider_traits rpt) \
                 ORDER BY t.name LIMIT {MAX_CHOICES}"
            ),
            &[],
        )
        .await?;
    let aggregates = tx
        .fetch_all(
            &format!(
                "SELECT pa.uuid FROM placement_aggregates pa \
                 WHERE pa.id IN (SELECT rpa.aggregate_id FROM resource_provider_aggregates rpa) \
                 ORDER BY pa.uuid LIMIT {MAX_CHOICES}"
            ),
            &[],
        )
        .await?;
    Ok(FleetChoices { resource_classes: names(classes)?, traits: names(traits)?, aggregates: names(aggregates)? })
}

#[cfg(test)]
mod tests {
    use keelson_db::now;

    use super::*;
    use crate::store::consumers::test_support::store;

    async fn create(store: &Store, name: &str, parent: Option<&str>) -> String {
        store.create_resource_provider(None, name, parent).await.unwrap().row.uuid
    }

    /// Writes inventory and allocation rows directly (those APIs are not
    /// under test).
    async fn inventory(store: &Store, uuid: &str, class: &str, total: i64, used: i64) {
        let mut tx = store.db.begin().await.unwrap();
        let rp = crate::store::get_provider(&mut tx, uuid).await.unwrap();
        let rc = crate::store::resource_class_id(&mut tx, class).await.unwrap().unwrap();
        tx.execute(
            "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, \
             step_size, allocation_ratio, created_at) VALUES (?, ?, ?, 1, 1, ?, 1, 2.0, ?)",
            &[rp.id.into(), rc.into(), total.into(), total.into(), now().into()],
        )
        .await
        .unwrap();
        for (consumer, part) in [("c1", used / 2), ("c2", used - used / 2)] {
            tx.execute(
                "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at) \
                 VALUES (?, ?, ?, ?, ?)",
                &[rp.id.into(), consumer.into(), rc.into(), part.into(), now().into()],
            )
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
    }

    fn names(page: &FleetPage) -> Vec<(String, bool)> {
        page.providers.iter().map(|p| (p.name.clone(), p.matched)).collect()
    }

    fn filter(f: impl FnOnce(&mut FleetFilter)) -> FleetFilter {
        let mut out = FleetFilter::default();
        f(&mut out);
        out
    }

    /// cn1 (VCPU 16, 6 used) with child pf1 (SRIOV_NET_VF, trait
    /// HW_NIC_SRIOV), cn2 (VCPU 8) in an aggregate, and "odd%name".
    async fn fleet() -> (Store, HashMap<&'static str, String>) {
        let store = store().await;
        let mut rp = HashMap::new();
        rp.insert("cn1", create(&store, "cn1", None).await);
        rp.insert("pf1", create(&store, "pf1", Some(&rp["cn1"])).await);
        rp.insert("cn2", create(&store, "cn2", None).await);
        rp.insert("odd", create(&store, "Odd%Name", None).await);
        inventory(&store, &rp["cn1"], "VCPU", 16, 6).await;
        inventory(&store, &rp["pf1"], "SRIOV_NET_VF", 8, 3).await;
        inventory(&store, &rp["cn2"], "VCPU", 8, 0).await;
        store.set_provider_traits(&rp["pf1"], 0, &["HW_NIC_SRIOV".to_string()]).await.unwrap();
        store
            .set_provider_aggregates(&rp["cn2"], None, &["8e1f1fa4-5b1b-4a8a-8a34-3d1e6fa3c2aa".to_string()])
            .await
            .unwrap();
        (store, rp)
    }

    #[tokio::test]
    async fn whole_fleet_with_details() {
        let (store, rp) = fleet().await;
        let page = store.list_fleet(&FleetFilter::default(), 0, None).await.unwrap();
        let all = [("cn1", true), ("pf1", true), ("cn2", true), ("Odd%Name", true)];
        assert_eq!(names(&page), all.map(|(n, m)| (n.to_string(), m)));
        assert_eq!((page.total, page.matched, page.next_marker.as_deref()), (4, 4, None));
        let cn1 = &page.providers[0];
        assert_eq!(
            cn1.inventories,
            vec![InventoryRecord {
                reserved: 1,
                max_unit: 16,
                allocation_ratio: 2.0,
                ..InventoryRecord::new("VCPU", 16)
            }]
        );
        assert_eq!(cn1.usages, BTreeMap::from([("VCPU".to_string(), 6)]));
        let pf1 = &page.providers[1];
        assert_eq!(
            (pf1.parent_uuid.as_deref(), pf1.root_uuid.as_str()),
            (Some(rp["cn1"].as_str()), rp["cn1"].as_str())
        );
        assert_eq!(pf1.traits, vec!["HW_NIC_SRIOV"]);
        assert_eq!(page.providers[2].aggregates, vec!["8e1f1fa4-5b1b-4a8a-8a34-3d1e6fa3c2aa"]);
        assert_eq!(page.choices.resource_classes, vec!["SRIOV_NET_VF", "VCPU"]);
        assert_eq!(page.choices.traits, vec!["HW_NIC_SRIOV"]);
        assert_eq!(page.choices.aggregates, vec!["8e1f1fa4-5b1b-4a8a-8a34-3d1e6fa3c2aa"]);
    }

    #[tokio::test]
    async fn filters_select_whole_trees() {
        let (store, rp) = fleet().await;
        let list = |f: FleetFilter| {
            let store = store.clone();
            async move { store.list_fleet(&f, 0, None).await.unwrap() }
        };
        let page = list(filter(|f| f.required_trait = Some("HW_NIC_SRIOV".into()))).await;
        assert_eq!(names(&page), vec![("cn1".to_string(), false), ("pf1".to_string(), true)]);
        assert_eq!((page.total, page.matched), (2, 1));
        let page = list(filter(|f| f.resource_class = Some("VCPU".into()))).await;
        assert_eq!(
            names(&page),
            vec![("cn1".to_string(), true), ("pf1".to_string(), false), ("cn2".to_string(), true)]
        );
        let page = list(filter(|f| f.member_of = Some("8e1f1fa4-5b1b-4a8a-8a34-3d1e6fa3c2aa".into()))).await;
        assert_eq!(names(&page), vec![("cn2".to_string(), true)]);
        // Every filter holds for one provider.
        let page = list(filter(|f| {
            f.resource_class = Some("VCPU".into());
            f.required_trait = Some("HW_NIC_SRIOV".into());
        }))
        .await;
        assert!(page.providers.is_empty());
        // Names any case; `%` is a character, not a wildcard.
        let page = list(filter(|f| f.search = Some("odd%n".into()))).await;
        assert_eq!(names(&page), vec![("Odd%Name".to_string(), true)]);
        assert!(list(filter(|f| f.search = Some("cn%".into()))).await.providers.is_empty());
        let page = list(filter(|f| f.search = Some(rp["cn2"][..13].to_uppercase()))).await;
        assert_eq!(names(&page), vec![("cn2".to_string(), true)]);
        // Names that do not exist match nothing, and are no error.
        for f in [
            filter(|f| f.required_trait = Some("CUSTOM_NOPE".into())),
            filter(|f| f.required_trait = Some("hw_nic_sriov".into())),
            filter(|f| f.member_of = Some("nope".into())),
            filter(|f| f.resource_class = Some("CUSTOM_NOPE".into())),
        ] {
            let page = list(f).await;
            assert!(page.providers.is_empty());
            assert_eq!(page.choices.traits, vec!["HW_NIC_SRIOV"]);
        }
    }

    #[tokio::test]
    async fn pages_follow_markers() {
        let (store, _) = fleet().await;
        let mut seen = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = store.list_fleet(&FleetFilter::default(), 3, marker.as_deref()).await.unwrap();
            assert!(page.providers.len() <= 3);
            assert_eq!(page.total, 4);
            seen.extend(names(&page).into_iter().map(|(n, _)| n));
            match page.next_marker {
                Some(m) => marker = Some(m),
                None => break,
            }
        }
        assert_eq!(seen, vec!["cn1", "pf1", "cn2", "Odd%Name"]);
        let err = store.list_fleet(&FleetFilter::default(), 1, Some("nope")).await.unwrap_err();
        assert!(matches!(err, Error::BadRequest(_)), "{err:?}");
        let long = filter(|f| f.search = Some("x".repeat(MAX_SEARCH + 1)));
        assert!(matches!(store.list_fleet(&long, 1, None).await, Err(Error::BadRequest(_))));
    }
}
