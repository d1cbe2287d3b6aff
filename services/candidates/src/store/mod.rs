//! Reads what one request needs from the shared Placement schema (never
//! writes), in one read transaction and a handful of queries, then runs the
//! algorithm on it. Nothing is cached across requests: every answer is
//! computed from the database as it is.

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};

use keelson_common::db::{in_list, RowRef, Tx, Value};
use keelson_common::Db;

use crate::domain::fleet::{Catalog, ClassId, Fleet, Inventory, ProviderId, TraitId, TreeProvider, Trees};
use crate::domain::request::Request;
use crate::domain::{self, Outcome, Settings, Summary};
use crate::error::{Error, Result};

/// The trait marking providers that share their inventory with the trees
/// of their aggregates.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// Above this many ids a query reads the whole table and filters in
/// memory, rather than binding a huge `IN (…)` list.
const MAX_IN_LIST: usize = 500;

/// The candidates service's handle on the database.
#[derive(Clone, Debug)]
pub struct Store {
    pub db: Db,
    pub settings: Settings,
}

impl Store {
    pub fn new(db: Db, settings: Settings) -> Self {
        Store { db, settings }
    }

    /// `GET /allocation_candidates`.
    pub async fn allocation_candidates(&self, req: &Request) -> Result<Outcome> {
        req.validate()?;
        let mut tx = self.db.begin_read().await?;
        let catalog = load_catalog(&mut tx, req).await?;
        let fleet = load_fleet(&mut tx, req, &catalog).await?;
        let trees = load_trees(&mut tx, &roots_in_play(&fleet)).await?;

        // The search and the product are CPU work, possibly long on wide
        // trees: keep them off the async workers.
        let settings = self.settings.clone();
        let request = req.clone();
        let (answer, fleet, trees) = tokio::task::spawn_blocking(move || {
            let answer = domain::run(&request, &settings, &catalog, &fleet, &trees);
            (answer, fleet, trees)
        })
        .await
        .map_err(|e| Error::Internal(format!("candidate generation failed: {e}")))?;
        let Some(answer) = answer? else {
            tx.commit().await?;
            return Ok(Outcome::default());
        };
        let (summaries, trait_names) = load_summaries(&mut tx, req, &fleet, &trees, &answer.summary_providers).await?;
        tx.commit().await?;

        Ok(Outcome {
            suffixes: req.groups.iter().map(|g| g.suffix.clone()).collect(),
            candidates: answer.candidates,
            summaries,
            trees,
            class_names: fleet.class_names,
            trait_names,
        })
    }
}

/// Every tree a candidate can involve: those of providers with a requested
/// class, of resourceless-group providers, and of sharing anchors.
fn roots_in_play(fleet: &Fleet) -> BTreeSet<ProviderId> {
    let mut roots: BTreeSet<ProviderId> = fleet.root_of.values().copied().collect();
    roots.extend(fleet.sharing_anchors.values().flatten().copied());
    roots
}

fn ids(values: impl IntoIterator<Item = i64>) -> Vec<Value> {
    values.into_iter().map(Value::Int).collect()
}

fn texts<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<Value> {
    values.into_iter().map(|s| Value::Text(s.to_string())).collect()
}

/// Resolves the request's names; MariaDB compares names without case, so
/// only exact matches count.
async fn load_catalog(tx: &mut Tx, req: &Request) -> Result<Catalog> {
    let mut cat = Catalog::default();
    let classes: BTreeSet<&str> = req.requested_classes();
    if !classes.is_empty() {
        let sql = format!("SELECT id, name FROM resource_classes WHERE name IN ({})", in_list(classes.len()));
        for r in tx.fetch_all(&sql, &texts(classes.iter().copied())).await? {
            let name = r.string(1)?;
            if classes.contains(name.as_str()) {
                cat.classes.insert(name, r.i64(0)?);
            }
        }
    }
    let mut traits: BTreeSet<&str> = BTreeSet::from([SHARING_TRAIT]);
    for g in &req.groups {
        traits.extend(g.required.iter().flatten().map(String::as_str));
        traits.extend(g.forbidden.iter().map(String::as_str));
    }
    traits.extend(req.root_required.iter().chain(&req.root_forbidden).map(String::as_str));
    let sql = format!("SELECT id, name FROM traits WHERE name IN ({})", in_list(traits.len()));
    for r in tx.fetch_all(&sql, &texts(traits.iter().copied())).await? {
        let name = r.string(1)?;
        if traits.contains(name.as_str()) {
            cat.traits.insert(name, r.i64(0)?);
        }
    }
    let aggs: BTreeSet<&str> =
        req.groups.iter().flat_map(|g| g.member_of.iter().flatten().chain(&g.forbidden_aggregates)).map(String::as_str).collect();
    if !aggs.is_empty() {
        let sql = format!("SELECT id, uuid FROM placement_aggregates WHERE uuid IN ({})", in_list(aggs.len()));
        for r in tx.fetch_all(&sql, &texts(aggs.iter().copied())).await? {
            let uuid = r.string(1)?;
            if aggs.contains(uuid.as_str()) {
                cat.aggregates.insert(uuid, r.i64(0)?);
            }
        }
    }
    let trees: BTreeSet<&str> = req.groups.iter().filter_map(|g| g.in_tree.as_deref()).collect();
    if !trees.is_empty() {
        let sql = format!("SELECT id, uuid, root_provider_id FROM resource_providers WHERE uuid IN ({})", in_list(trees.len()));
        for r in tx.fetch_all(&sql, &texts(trees.iter().copied())).await? {
            let uuid = r.string(1)?;
            if trees.contains(uuid.as_str()) {
                let id = r.i64(0)?;
                cat.in_tree_roots.insert(uuid, r.opt_i64(2)?.unwrap_or(id));
            }
        }
    }
    Ok(cat)
}

fn inventory_from(r: &RowRef, first: usize) -> Result<Inventory> {
    Ok(Inventory {
        total: r.i64(first)?,
        reserved: r.i64(first + 1)?,
        min_unit: r.i64(first + 2)?,
        max_unit: r.i64(first + 3)?,
        step_size: r.i64(first + 4)?,
        allocation_ratio: r.f64(first + 5)?,
        used: 0,
    })
}

/// Loads the providers, inventories, traits and aggregates the request can
/// touch (only the request's traits and aggregates; the request's classes,
/// or every class when the summaries show them all, so that the summaries
/// need no second read).
async fn load_fleet(tx: &mut Tx, req: &Request, cat: &Catalog) -> Result<Fleet> {
    let mut fleet = Fleet {
        has_trees: !tx.fetch_all("SELECT id FROM resource_providers WHERE parent_provider_id IS NOT NULL LIMIT 1", &[]).await?.is_empty(),
        ..Fleet::default()
    };
    if let Some(sharing) = cat.traits.get(SHARING_TRAIT) {
        for r in tx.fetch_all("SELECT resource_provider_id FROM resource_provider_traits WHERE trait_id = ?", &[(*sharing).into()]).await? {
            fleet.sharing.insert(r.i64(0)?);
        }
    }

    let requested: BTreeSet<ClassId> = cat.classes.values().copied().collect();
    let all_classes = req.all_classes_in_summaries;
    if all_classes {
        for r in tx.fetch_all("SELECT id, name FROM resource_classes", &[]).await? {
            fleet.class_names.insert(r.i64(0)?, r.string(1)?);
        }
    } else {
        fleet.class_names = cat.classes.iter().map(|(n, id)| (*id, n.clone())).collect();
    }
    if all_classes || !requested.is_empty() {
        // Inventories and usage in two plain reads: joining a grouped
        // subquery costs more than the join in memory.
        let (filter, params) = if all_classes {
            ("1 = 1".to_string(), Vec::new())
        } else {
            (format!("i.resource_class_id IN ({})", in_list(requested.len())), ids(requested.iter().copied()))
        };
        let sql = format!(
            "SELECT i.resource_provider_id, rp.root_provider_id, i.resource_class_id, \
                    i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio \
             FROM inventories i JOIN resource_providers rp ON rp.id = i.resource_provider_id WHERE {filter}"
        );
        tx.for_each_row(&sql, &params, |r| -> Result<()> {
            let (provider, class) = (r.i64(0)?, r.i64(2)?);
            fleet.inventories.insert((provider, class), inventory_from(r, 3)?);
            if requested.contains(&class) {
                fleet.root_of.insert(provider, r.opt_i64(1)?.unwrap_or(provider));
                fleet.providers_by_class.entry(class).or_default().push(provider);
            }
            Ok(())
        })
        .await?;
        let sql = format!(
            "SELECT resource_provider_id, resource_class_id, SUM(used) FROM allocations \
             WHERE {} GROUP BY resource_provider_id, resource_class_id",
            filter.replace("i.resource_class_id", "resource_class_id")
        );
        tx.for_each_row(&sql, &params, |r| -> Result<()> {
            if let Some(inv) = fleet.inventories.get_mut(&(r.i64(0)?, r.i64(1)?)) {
                inv.used = r.opt_i64(2)?.unwrap_or(0);
            }
            Ok(())
        })
        .await?;
        for providers in fleet.providers_by_class.values_mut() {
            providers.sort_unstable();
        }
    }

    let mut trait_ids: BTreeSet<i64> = BTreeSet::new();
    for g in &req.groups {
        trait_ids.extend(g.required.iter().flatten().chain(&g.forbidden).filter_map(|t| cat.traits.get(t)));
    }
    trait_ids.extend(req.root_required.iter().chain(&req.root_forbidden).filter_map(|t| cat.traits.get(t)));
    if !trait_ids.is_empty() {
        let sql =
            format!("SELECT resource_provider_id, trait_id FROM resource_provider_traits WHERE trait_id IN ({})", in_list(trait_ids.len()));
        tx.for_each_row(&sql, &ids(trait_ids.iter().copied()), |r| -> Result<()> {
            fleet.traits.entry(r.i64(0)?).or_default().insert(r.i64(1)?);
            Ok(())
        })
        .await?;
    }

    let agg_ids: BTreeSet<i64> = cat.aggregates.values().copied().collect();
    if !agg_ids.is_empty() {
        let sql = format!(
            "SELECT resource_provider_id, aggregate_id FROM resource_provider_aggregates WHERE aggregate_id IN ({})",
            in_list(agg_ids.len())
        );
        tx.for_each_row(&sql, &ids(agg_ids.iter().copied()), |r| -> Result<()> {
            fleet.aggregates.entry(r.i64(0)?).or_default().insert(r.i64(1)?);
            Ok(())
        })
        .await?;
    }

    let resourceless = req.groups.iter().any(|g| g.resources.is_empty());
    if resourceless {
        let mut all = Vec::new();
        tx.for_each_row("SELECT id, root_provider_id FROM resource_providers", &[], |r| -> Result<()> {
            let id = r.i64(0)?;
            fleet.root_of.insert(id, r.opt_i64(1)?.unwrap_or(id));
            all.push(id);
            Ok(())
        })
        .await?;
        all.sort_unstable();
        fleet.all_providers = Some(all);
    }
    if !req.root_required.is_empty() || !req.root_forbidden.is_empty() {
        let rows = tx.fetch_all("SELECT id FROM resource_providers WHERE parent_provider_id IS NULL", &[]).await?;
        fleet.roots = Some(rows.iter().map(|r| r.i64(0)).collect::<std::result::Result<_, _>>()?);
    }

    // Anchors only matter for sharing providers that can serve something.
    let mut sharing: Vec<ProviderId> = fleet.sharing.iter().copied().filter(|p| resourceless || fleet.root_of.contains_key(p)).collect();
    sharing.sort_unstable();
    for chunk in sharing.chunks(MAX_IN_LIST) {
        let sql = format!(
            "SELECT DISTINCT sa.resource_provider_id, COALESCE(rp.root_provider_id, rp.id) \
             FROM resource_provider_aggregates sa \
             JOIN resource_provider_aggregates oa ON oa.aggregate_id = sa.aggregate_id \
             JOIN resource_providers rp ON rp.id = oa.resource_provider_id \
             WHERE sa.resource_provider_id IN ({})",
            in_list(chunk.len())
        );
        tx.for_each_row(&sql, &ids(chunk.iter().copied()), |r| -> Result<()> {
            fleet.sharing_anchors.entry(r.i64(0)?).or_default().push(r.i64(1)?);
            Ok(())
        })
        .await?;
    }
    for anchors in fleet.sharing_anchors.values_mut() {
        anchors.sort_unstable();
        anchors.dedup();
    }
    Ok(fleet)
}

/// `col IN (…)` for the given ids, or no filter when there are too many
/// (the caller then filters rows itself).
fn id_filter(col: &str, set: &BTreeSet<ProviderId>) -> (String, Vec<Value>) {
    if set.len() > MAX_IN_LIST {
        ("1 = 1".to_string(), Vec::new())
    } else {
        (format!("{col} IN ({})", in_list(set.len())), ids(set.iter().copied()))
    }
}

/// Every provider of the given trees.
async fn load_trees(tx: &mut Tx, roots: &BTreeSet<ProviderId>) -> Result<Trees> {
    let mut trees = Trees::default();
    if roots.is_empty() {
        return Ok(trees);
    }
    let (filter, params) = id_filter("root_provider_id", roots);
    let sql = format!("SELECT id, uuid, parent_provider_id, root_provider_id FROM resource_providers WHERE {filter}");
    tx.for_each_row(&sql, &params, |r| -> Result<()> {
        let id = r.i64(0)?;
        let root = r.opt_i64(3)?.unwrap_or(id);
        if roots.contains(&root) {
            trees.insert(id, TreeProvider { uuid: r.string(1)?, parent: r.opt_i64(2)?, root });
        }
        Ok(())
    })
    .await?;
    Ok(trees)
}

/// Capacity, usage and traits of the providers the answer summarises
/// (capacity and usage are already loaded with the fleet).
async fn load_summaries(
    tx: &mut Tx,
    req: &Request,
    fleet: &Fleet,
    trees: &Trees,
    providers: &[ProviderId],
) -> Result<(Vec<Summary>, FxHashMap<TraitId, String>)> {
    let wanted: FxHashSet<ProviderId> = providers.iter().copied().collect();
    // Summaries list classes by name: rank the few class ids once.
    let mut by_name: Vec<(&str, ClassId)> = fleet.class_names.iter().map(|(id, name)| (name.as_str(), *id)).collect();
    by_name.sort_unstable();
    let rank: FxHashMap<ClassId, usize> = by_name.iter().enumerate().map(|(i, (_, id))| (*id, i)).collect();
    let mut resources: FxHashMap<ProviderId, Vec<(usize, ClassId, i64, i64)>> = FxHashMap::default();
    for ((provider, class), inv) in &fleet.inventories {
        if let (true, Some(r)) = (wanted.contains(provider), rank.get(class)) {
            resources.entry(*provider).or_default().push((*r, *class, inv.capacity(), inv.used));
        }
    }
    let mut traits: FxHashMap<ProviderId, Vec<TraitId>> = FxHashMap::default();
    let mut trait_names: FxHashMap<TraitId, String> = FxHashMap::default();
    if req.traits_in_summaries {
        // Trait ids first, their names once each: a fleet's providers share
        // a handful of traits.
        let roots: BTreeSet<ProviderId> = providers.iter().filter_map(|p| trees.get(p)).map(|t| t.root).collect();
        let sql = if roots.len() > MAX_IN_LIST {
            "SELECT resource_provider_id, trait_id FROM resource_provider_traits".to_string()
        } else {
            format!(
                "SELECT rpt.resource_provider_id, rpt.trait_id FROM resource_provider_traits rpt \
                 JOIN resource_providers rp ON rp.id = rpt.resource_provider_id \
                 WHERE rp.root_provider_id IN ({})",
                in_list(roots.len())
            )
        };
        let params = if roots.len() > MAX_IN_LIST { Vec::new() } else { ids(roots.iter().copied()) };
        let mut used: BTreeSet<TraitId> = BTreeSet::new();
        tx.for_each_row(&sql, &params, |r| -> Result<()> {
            let provider = r.i64(0)?;
            if wanted.contains(&provider) {
                let t = r.i64(1)?;
                used.insert(t);
                traits.entry(provider).or_default().push(t);
            }
            Ok(())
        })
        .await?;
        let used: Vec<TraitId> = used.into_iter().collect();
        for chunk in used.chunks(MAX_IN_LIST) {
            let sql = format!("SELECT id, name FROM traits WHERE id IN ({})", in_list(chunk.len()));
            for r in tx.fetch_all(&sql, &ids(chunk.iter().copied())).await? {
                trait_names.insert(r.i64(0)?, r.string(1)?);
            }
        }
    }
    let summaries = providers
        .iter()
        .filter_map(|p| trees.get(p).map(|t| (p, t)))
        .map(|(p, t)| {
            let mut res = resources.remove(p).unwrap_or_default();
            res.sort_unstable();
            // In trait id order, as upstream lists them.
            let mut tr = traits.remove(p).unwrap_or_default();
            tr.sort_unstable();
            Summary {
                provider: *p,
                parent: t.parent,
                root: t.root,
                resources: res.into_iter().map(|(_, class, capacity, used)| (class, capacity, used)).collect(),
                traits: tr,
            }
        })
        .collect();
    Ok((summaries, trait_names))
}
