//! Reads what one request needs from the shared Placement schema (never
//! writes), in one read transaction and a handful of queries, then runs the
//! algorithm on it. Nothing is cached across requests: every answer is
//! computed from the database as it is.

use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use keelson_db::Db;
use keelson_db::{in_list, Dialect, RowRef, Tx, Value};

use crate::domain::explain::{self, Explained};
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
        let (catalog, basics) = load_catalog(&mut tx, req).await?;
        let fleet = load_fleet(&mut tx, req, &catalog, basics).await?;
        let roots = roots_in_play(&fleet);
        let settings = self.settings.clone();
        let request = req.clone();

        // The search and the product are CPU work, possibly long on wide
        // trees: keep them off the async workers. Without same_subtree they
        // need no trees, so they run while this task reads the trees and
        // the traits the summaries may show (those of every provider in
        // play: the summarised ones are among them): the database and the
        // algorithm work at the same time.
        let (candidates, fleet, trees, traits) = if req.same_subtrees.is_empty() {
            let algorithm = tokio::task::spawn_blocking(move || {
                let candidates = domain::generate(&request, &settings, &catalog, &fleet, &Trees::default());
                (candidates, fleet)
            });
            let trees = load_trees(&mut tx, &roots).await;
            let traits = match (&trees, req.traits_in_summaries) {
                (Ok(trees), true) => Some(load_traits(&mut tx, trees).await),
                _ => None,
            };
            let (candidates, fleet) =
                algorithm.await.map_err(|e| Error::Internal(format!("candidate generation failed: {e}")))?;
            // The algorithm's own error (a 400) comes first.
            let candidates = candidates?;
            (candidates, fleet, trees?, traits.transpose()?)
        } else {
            let trees = Arc::new(load_trees(&mut tx, &roots).await?);
            let in_play = trees.clone();
            let algorithm = tokio::task::spawn_blocking(move || {
                let candidates = domain::generate(&request, &settings, &catalog, &fleet, &in_play);
                (candidates, fleet)
            });
            let traits = if req.traits_in_summaries { Some(load_traits(&mut tx, &trees).await) } else { None };
            let (candidates, fleet) =
                algorithm.await.map_err(|e| Error::Internal(format!("candidate generation failed: {e}")))?;
            let candidates = candidates?;
            // The algorithm's handle is gone: this is the only one left.
            let trees = Arc::try_unwrap(trees).unwrap_or_else(|shared| (*shared).clone());
            (candidates, fleet, trees, traits.transpose()?)
        };
        // The answer is read: no need to wait for the transaction's end.
        tx.end_read();
        let Some(candidates) = candidates else { return Ok(Outcome::default()) };
        let answer = domain::finish(req, &self.settings, fleet.has_trees, candidates, &trees);
        if answer.candidates.is_empty() {
            return Ok(Outcome::default());
        }
        let (summaries, trait_names) = summaries(&fleet, &trees, &answer.summary_providers, traits);

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

impl Store {
    /// Why `GET /allocation_candidates` answers `req` as it does: the same
    /// load and the same algorithm, watched ([`domain::explain`]). Only the
    /// trees are always loaded (the answer names every loaded provider).
    pub async fn explain(&self, req: &Request) -> Result<Explained> {
        req.validate()?;
        let mut tx = self.db.begin_read().await?;
        let (catalog, basics) = load_catalog(&mut tx, req).await?;
        let fleet = load_fleet(&mut tx, req, &catalog, basics).await?;
        let trees = load_trees(&mut tx, &roots_in_play(&fleet)).await?;
        tx.end_read();
        let settings = self.settings.clone();
        let request = req.clone();
        let (explanation, catalog, fleet, trees) = tokio::task::spawn_blocking(move || {
            let explanation = explain::explain(&request, &settings, &catalog, &fleet, &trees);
            (explanation, catalog, fleet, trees)
        })
        .await
        .map_err(|e| Error::Internal(format!("explanation failed: {e}")))?;
        Ok(Explained {
            explanation: explanation?,
            trees,
            class_names: fleet.class_names,
            trait_names: catalog.traits.into_iter().map(|(name, id)| (id, name)).collect(),
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

/// What the first read learns besides the catalog.
#[derive(Default)]
struct Basics {
    /// Whether any provider has a parent.
    has_trees: bool,
    /// Every provider with `MISC_SHARES_VIA_AGGREGATE`.
    sharing: FxHashSet<ProviderId>,
    /// Every class, when the summaries show them all.
    all_class_names: Option<FxHashMap<ClassId, String>>,
}

/// Resolves the request's names (MariaDB compares names without case, so
/// only exact matches count) and reads whether trees exist, the sharing
/// providers and, when the summaries show every class, every class: one
/// statement whose first column says what each row is, since each round
/// trip to the database costs more than these small reads.
async fn load_catalog(tx: &mut Tx, req: &Request) -> Result<(Catalog, Basics)> {
    let mut cat = Catalog::default();
    let mut basics = Basics::default();
    let classes: BTreeSet<&str> = req.requested_classes();
    let mut traits: BTreeSet<&str> = BTreeSet::from([SHARING_TRAIT]);
    for g in &req.groups {
        traits.extend(g.required.iter().flatten().map(String::as_str));
        traits.extend(g.forbidden.iter().map(String::as_str));
    }
    traits.extend(req.root_required.iter().chain(&req.root_forbidden).map(String::as_str));
    let aggs: BTreeSet<&str> = req
        .groups
        .iter()
        .flat_map(|g| g.member_of.iter().flatten().chain(&g.forbidden_aggregates))
        .map(String::as_str)
        .collect();

    const TRAIT: i64 = 0;
    const CLASS: i64 = 1;
    const AGGREGATE: i64 = 2;
    const SHARING: i64 = 3;
    const HAS_TREES: i64 = 4;
    let mut sql = format!("SELECT {TRAIT}, id, name FROM traits WHERE name IN ({})", in_list(traits.len()));
    let mut params = texts(traits.iter().copied());
    if req.all_classes_in_summaries {
        sql.push_str(&format!(" UNION ALL SELECT {CLASS}, id, name FROM resource_classes"));
    } else if !classes.is_empty() {
        sql.push_str(&format!(
            " UNION ALL SELECT {CLASS}, id, name FROM resource_classes WHERE name IN ({})",
            in_list(classes.len())
        ));
        params.extend(texts(classes.iter().copied()));
    }
    if !aggs.is_empty() {
        sql.push_str(&format!(
            " UNION ALL SELECT {AGGREGATE}, id, uuid FROM placement_aggregates WHERE uuid IN ({})",
            in_list(aggs.len())
        ));
        params.extend(texts(aggs.iter().copied()));
    }
    sql.push_str(&format!(
        " UNION ALL SELECT {SHARING}, rpt.resource_provider_id, t.name FROM resource_provider_traits rpt \
         JOIN traits t ON t.id = rpt.trait_id WHERE t.name = ?"
    ));
    params.extend(texts([SHARING_TRAIT]));
    sql.push_str(&format!(
        " UNION ALL SELECT {HAS_TREES}, CASE WHEN EXISTS (SELECT 1 FROM resource_providers WHERE parent_provider_id IS NOT NULL) \
         THEN 1 ELSE 0 END, NULL"
    ));
    let mut all_classes: FxHashMap<ClassId, String> = FxHashMap::default();
    tx.for_each_row(&sql, &params, |r| -> Result<()> {
        match r.i64(0)? {
            TRAIT => {
                let name = r.string(2)?;
                if traits.contains(name.as_str()) {
                    cat.traits.insert(name, r.i64(1)?);
                }
            }
            CLASS => {
                let (id, name) = (r.i64(1)?, r.string(2)?);
                if classes.contains(name.as_str()) {
                    cat.classes.insert(name.clone(), id);
                }
                all_classes.insert(id, name);
            }
            AGGREGATE => {
                let uuid = r.string(2)?;
                if aggs.contains(uuid.as_str()) {
                    cat.aggregates.insert(uuid, r.i64(1)?);
                }
            }
            SHARING => {
                if r.string(2)? == SHARING_TRAIT {
                    basics.sharing.insert(r.i64(1)?);
                }
            }
            _ => basics.has_trees = r.i64(1)? != 0,
        }
        Ok(())
    })
    .await?;
    if req.all_classes_in_summaries {
        basics.all_class_names = Some(all_classes);
    }

    let trees: BTreeSet<&str> = req.groups.iter().filter_map(|g| g.in_tree.as_deref()).collect();
    if !trees.is_empty() {
        let sql = format!(
            "SELECT id, uuid, root_provider_id FROM resource_providers WHERE uuid IN ({})",
            in_list(trees.len())
        );
        for r in tx.fetch_all(&sql, &texts(trees.iter().copied())).await? {
            let uuid = r.string(1)?;
            if trees.contains(uuid.as_str()) {
                let id = r.i64(0)?;
                cat.in_tree_roots.insert(uuid, r.opt_i64(2)?.unwrap_or(id));
            }
        }
    }
    Ok((cat, basics))
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
async fn load_fleet(tx: &mut Tx, req: &Request, cat: &Catalog, basics: Basics) -> Result<Fleet> {
    let mut fleet = Fleet { has_trees: basics.has_trees, sharing: basics.sharing, ..Fleet::default() };

    let requested: BTreeSet<ClassId> = cat.classes.values().copied().collect();
    let all_classes = req.all_classes_in_summaries;
    fleet.class_names = match basics.all_class_names {
        Some(names) => names,
        None => cat.classes.iter().map(|(n, id)| (*id, n.clone())).collect(),
    };
    if all_classes || !requested.is_empty() {
        // Inventories and usage in two plain reads: joining a grouped
        // subquery costs more than the join in memory.
        let (filter, params) = if all_classes {
            ("1 = 1".to_string(), Vec::new())
        } else {
            (format!("i.resource_class_id IN ({})", in_list(requested.len())), ids(requested.iter().copied()))
        };
        // Without trees every provider is its own root: no join at all
        // (on MariaDB the join was half of this read's time). With trees,
        // MariaDB would otherwise walk the providers and find each one's
        // inventories through the unique index (two index descents per row,
        // twice the time of the whole read); inventories in table order,
        // each provider by its primary key, is the plan that fits.
        let join = if tx.dialect == Dialect::MySql { "STRAIGHT_JOIN" } else { "JOIN" };
        let (root, from) = if fleet.has_trees {
            (
                "rp.root_provider_id",
                format!("inventories i {join} resource_providers rp ON rp.id = i.resource_provider_id"),
            )
        } else {
            ("i.resource_provider_id", "inventories i".to_string())
        };
        let sql = format!(
            "SELECT i.resource_provider_id, {root}, i.resource_class_id, \
                    i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio \
             FROM {from} WHERE {filter}"
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
        // MySQL sums integers as DECIMAL, which arrives as text: ask for an
        // integer (the sum of integers is one), read like any other.
        let sum = if tx.dialect == Dialect::MySql { "CAST(SUM(used) AS SIGNED)" } else { "SUM(used)" };
        let sql = format!(
            "SELECT resource_provider_id, resource_class_id, {sum} FROM allocations \
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
        let sql = format!(
            "SELECT resource_provider_id, trait_id FROM resource_provider_traits WHERE trait_id IN ({})",
            in_list(trait_ids.len())
        );
        tx.for_each_row(&sql, &ids(trait_ids.iter().copied()), |r| -> Result<()> {
            fleet.traits.insert((r.i64(0)?, r.i64(1)?));
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
    let mut sharing: Vec<ProviderId> =
        fleet.sharing.iter().copied().filter(|p| resourceless || fleet.root_of.contains_key(p)).collect();
    sharing.sort_unstable();
    // The providers sharing an aggregate with each sharing provider, then
    // their roots: most are known already (a provider with a requested
    // class), the others are read. Joining the providers in SQL (and
    // DISTINCT) cost the database several times this read.
    let mut members: Vec<(ProviderId, ProviderId)> = Vec::new();
    for chunk in sharing.chunks(MAX_IN_LIST) {
        let sql = format!(
            "SELECT sa.resource_provider_id, oa.resource_provider_id \
             FROM resource_provider_aggregates sa \
             JOIN resource_provider_aggregates oa ON oa.aggregate_id = sa.aggregate_id \
             WHERE sa.resource_provider_id IN ({})",
            in_list(chunk.len())
        );
        tx.for_each_row(&sql, &ids(chunk.iter().copied()), |r| -> Result<()> {
            members.push((r.i64(0)?, r.i64(1)?));
            Ok(())
        })
        .await?;
    }
    let unknown: Vec<ProviderId> = members
        .iter()
        .map(|(_, m)| *m)
        .filter(|m| !fleet.root_of.contains_key(m))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut member_roots: FxHashMap<ProviderId, ProviderId> = FxHashMap::default();
    for chunk in unknown.chunks(MAX_IN_LIST) {
        let sql = format!("SELECT id, root_provider_id FROM resource_providers WHERE id IN ({})", in_list(chunk.len()));
        tx.for_each_row(&sql, &ids(chunk.iter().copied()), |r| -> Result<()> {
            let id = r.i64(0)?;
            member_roots.insert(id, r.opt_i64(1)?.unwrap_or(id));
            Ok(())
        })
        .await?;
    }
    for (sharing, member) in members {
        if let Some(root) = fleet.root_of.get(&member).or_else(|| member_roots.get(&member)) {
            fleet.sharing_anchors.entry(sharing).or_default().push(*root);
        }
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
    // At least one provider per root.
    trees.reserve(roots.len());
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

/// The summarised providers' traits, and the names of those traits.
type ProviderTraits = (Vec<(ProviderId, TraitId)>, FxHashMap<TraitId, String>);

/// Every provider in play's traits as sorted (provider, trait) pairs, then
/// the names of the traits those providers have (a fleet's providers share
/// a handful of traits: each name once). Two statements, not one: MariaDB
/// builds a temporary table for a `UNION ALL` before it sends a row, where
/// a plain read streams while this side decodes.
async fn load_traits(tx: &mut Tx, trees: &Trees) -> Result<ProviderTraits> {
    let roots: BTreeSet<ProviderId> = trees.values().map(|t| t.root).collect();
    // Nothing in play (an empty `IN ()` is not SQL).
    if roots.is_empty() {
        return Ok(Default::default());
    }
    let (sql, params) = if roots.len() > MAX_IN_LIST {
        ("SELECT resource_provider_id, trait_id FROM resource_provider_traits".to_string(), Vec::new())
    } else {
        (
            format!(
                "SELECT rpt.resource_provider_id, rpt.trait_id FROM resource_provider_traits rpt \
                 JOIN resource_providers rp ON rp.id = rpt.resource_provider_id WHERE rp.root_provider_id IN ({})",
                in_list(roots.len())
            ),
            ids(roots.iter().copied()),
        )
    };
    let mut traits: Vec<(ProviderId, TraitId)> = Vec::new();
    tx.for_each_row(&sql, &params, |r| -> Result<()> {
        let provider = r.i64(0)?;
        if trees.contains_key(&provider) {
            traits.push((provider, r.i64(1)?));
        }
        Ok(())
    })
    .await?;
    // In trait id order per provider, as upstream lists them.
    traits.sort_unstable();

    let mut trait_names: FxHashMap<TraitId, String> = FxHashMap::default();
    let used: BTreeSet<TraitId> = traits.iter().map(|(_, t)| *t).collect();
    if used.is_empty() {
        return Ok((traits, trait_names));
    }
    let (filter, params) = id_filter("id", &used);
    tx.for_each_row(&format!("SELECT id, name FROM traits WHERE {filter}"), &params, |r| -> Result<()> {
        let id = r.i64(0)?;
        if used.contains(&id) {
            trait_names.insert(id, r.string(1)?);
        }
        Ok(())
    })
    .await?;
    Ok((traits, trait_names))
}

/// Capacity, usage and traits of the providers the answer summarises
/// (ascending ids): capacity and usage loaded with the fleet, traits (when
/// the summaries show them) by [`load_traits`].
fn summaries(
    fleet: &Fleet,
    trees: &Trees,
    providers: &[ProviderId],
    traits: Option<ProviderTraits>,
) -> (Vec<Summary>, FxHashMap<TraitId, String>) {
    // Summaries list classes by name: rank the few class ids once.
    let mut by_name: Vec<(&str, ClassId)> = fleet.class_names.iter().map(|(id, name)| (name.as_str(), *id)).collect();
    by_name.sort_unstable();
    let rank: FxHashMap<ClassId, usize> = by_name.iter().enumerate().map(|(i, (_, id))| (*id, i)).collect();
    // Each summarised provider's inventories as one run, in class name
    // order: a counting sort by the provider's place in `providers` (then
    // each short run sorted), since a sort of every inventory of a large
    // fleet cost more than the rest of the summaries.
    let mut placed: Vec<(usize, usize, ClassId, i64, i64)> = Vec::with_capacity(fleet.inventories.len());
    for ((provider, class), inv) in &fleet.inventories {
        if let (Ok(at), Some(r)) = (providers.binary_search(provider), rank.get(class)) {
            placed.push((at, *r, *class, inv.capacity(), inv.used));
        }
    }
    let mut starts = vec![0usize; providers.len() + 1];
    for (at, ..) in &placed {
        starts[at + 1] += 1;
    }
    for i in 0..providers.len() {
        starts[i + 1] += starts[i];
    }
    let mut resources: Vec<(usize, usize, ClassId, i64, i64)> = vec![(0, 0, 0, 0, 0); placed.len()];
    let mut next = starts.clone();
    for entry in placed {
        resources[next[entry.0]] = entry;
        next[entry.0] += 1;
    }
    for w in starts.windows(2) {
        resources[w[0]..w[1]].sort_unstable();
    }
    let (traits, trait_names) = traits.unwrap_or_default();
    let mut trait_at = 0;
    let mut summaries = Vec::with_capacity(providers.len());
    // `providers` is ascending, like the sorted traits: walk them together.
    for (at, p) in providers.iter().enumerate() {
        let trait_start = trait_at;
        while trait_at < traits.len() && traits[trait_at].0 <= *p {
            trait_at += 1;
        }
        let Some(t) = trees.get(p) else { continue };
        summaries.push(Summary {
            provider: *p,
            parent: t.parent,
            root: t.root,
            resources: resources[starts[at]..starts[at + 1]]
                .iter()
                .map(|(_, _, class, capacity, used)| (*class, *capacity, *used))
                .collect(),
            traits: traits[trait_start..trait_at].iter().filter(|t| t.0 == *p).map(|(_, t)| *t).collect(),
        });
    }
    (summaries, trait_names)
}
