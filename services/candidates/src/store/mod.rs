//! Reads what one request needs from the shared Placement schema (never
//! writes), in one read transaction and a handful of queries, then runs the
//! algorithm on it. Every answer is computed from the database as it is;
//! the only thing kept across requests is each provider's trait set at its
//! generation ([`traits`]), which is the database's as long as the
//! generation is.

mod traits;

use std::collections::BTreeSet;
use std::sync::Arc;

use traits::{load_traits, ProviderTraits, TraitCache};

use rustc_hash::{FxHashMap, FxHashSet};

use keelson_db::Db;
use keelson_db::{in_list, Dialect, RowRef, Tx, Value};

use crate::domain::explain::{self, Explained};
use crate::domain::fleet::{Catalog, ClassId, Fleet, Inventory, ProviderId, TraitId, TreeProvider, Trees};
use crate::domain::request::Request;
use crate::domain::{self, Outcome, Settings, Summary};
use crate::domain::{scope, window};
use crate::error::{Error, Result};

/// The trait marking providers that share their inventory with the trees
/// of their aggregates.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// Above this many ids a query reads the whole table and filters in
/// memory, rather than binding a huge `IN (…)` list.
const MAX_IN_LIST: usize = 500;

/// Ids bound per statement where a read goes by id lists in chunks. Below
/// 1,000: MariaDB turns an `IN` list of that many constants
/// (`in_predicate_conversion_threshold`) into a join with a table of
/// values, which read 1,000 providers' usage four times slower than 999.
const IN_CHUNK: usize = 999;

/// Above this many trees a narrowed read costs more than reading every
/// inventory of the requested classes (each tree is an index range of its
/// own; the whole read is one scan), so the fleet is read whole.
const MAX_NARROWED: usize = 5000;

/// The candidates service's handle on the database.
#[derive(Clone, Debug)]
pub struct Store {
    pub db: Db,
    pub settings: Settings,
    /// Shared by the clones of one store (the service's handlers).
    trait_cache: Arc<TraitCache>,
    /// How many windowed reads answered short of the whole fleet (what a
    /// test of windows checks happened).
    #[cfg(test)]
    pub(crate) windows: Arc<std::sync::atomic::AtomicUsize>,
}

impl Store {
    pub fn new(db: Db, settings: Settings) -> Self {
        Store {
            db,
            settings,
            trait_cache: Arc::default(),
            #[cfg(test)]
            windows: Arc::default(),
        }
    }

    /// How many providers' trait sets the store keeps.
    #[cfg(test)]
    pub(crate) fn trait_cache_len(&self) -> usize {
        self.trait_cache.len()
    }

    /// `GET /allocation_candidates`.
    pub async fn allocation_candidates(&self, req: &Request) -> Result<Outcome> {
        self.answer(req, Reach::Narrowed).await
    }

    /// The answer, from the trees the request's filters leave or (for the
    /// tests that show it makes no difference) from the whole fleet.
    pub(crate) async fn answer(&self, req: &Request, reach: Reach) -> Result<Outcome> {
        req.validate()?;
        let mut phases = Phases::start();
        let mut tx = self.db.begin_read().await?;
        // Whether the answer may be a window's, known from the request
        // before the catalog (which then reads the ids' bounds) and again
        // with what the catalog says of the fleet.
        let windowable = reach == Reach::Narrowed
            && window::cap(req, &self.settings.stopping_at_limit(req, false), false, false).is_some();
        let (catalog, basics) = load_catalog(&mut tx, req, windowable).await?;
        phases.mark("catalog");
        let has_trees = basics.has_trees;
        let settings = self.settings.stopping_at_limit(req, has_trees);
        // A `required` trait narrows the trees after one read of its rows;
        // on a fleet of at most MAX_NARROWED ids that is one cheap pass,
        // where windows would take two when the trait leaves fewer trees
        // than the cut.
        let narrows_by_traits = req.groups.iter().any(|g| !g.required.is_empty())
            && basics.ids.is_some_and(|(first, last)| last.saturating_sub(first) < MAX_NARROWED as i64);
        let cap = window::cap(req, &settings, has_trees, !basics.sharing.is_empty())
            .filter(|_| windowable && !narrows_by_traits && basics.sharing.len() <= MAX_IN_LIST);

        if req.same_subtrees.is_empty() {
            // The search and the product are CPU work, possibly long on
            // wide trees: keep them off the async workers. Without
            // same_subtree they need no trees: the candidates are generated
            // and cut to `limit` first, then only the kept candidates'
            // trees are read, and only the summarised providers' traits (a
            // large fleet's providers carry dozens of traits each: most of
            // a request's rows were traits of providers no summary shows).
            // With a cut, the fleet is read a window of roots at a time,
            // each window the next ids, until the windows hold the cut
            // ([`window`]).
            let catalog = Arc::new(catalog);
            let request = Arc::new(req.clone());
            let mut span = cap.map_or(0, |cap| window::first_span(cap, has_trees));
            let mut next = cap
                .zip(basics.ids)
                .and_then(|(_, (first, last))| window::upto(first, span, last))
                .map(|upto| Window { after: None, upto: Some(upto), also: Vec::new() });
            let mut read: Option<Fleet> = None;
            let (candidates, fleet) = loop {
                let bounds = next.as_ref().map(|w| (w.after, w.upto));
                let (part, windowed) = load_fleet(&mut tx, req, &catalog, basics.clone(), reach, next.take()).await?;
                let fleet = match read.take() {
                    Some(mut fleet) if windowed => {
                        fleet.absorb(part);
                        fleet
                    }
                    _ => part,
                };
                phases.mark("fleet");
                let (catalog, request, settings) = (catalog.clone(), request.clone(), settings.clone());
                let (generated, fleet, generating) = tokio::task::spawn_blocking(move || {
                    let started = std::time::Instant::now();
                    let generated = domain::generate(&request, &settings, &catalog, &fleet, &Trees::default());
                    (generated, fleet, started.elapsed())
                })
                .await
                .map_err(|e| Error::Internal(format!("candidate generation failed: {e}")))?;
                phases.note("algorithm", generating);
                phases.mark("wait_algorithm");
                let mut candidates = generated?.unwrap_or_default();
                let (Some((_, Some(last))), Some(cap), Some((first, end)), true) = (bounds, cap, basics.ids, windowed)
                else {
                    // The whole fleet, or its last part added.
                    break (candidates, fleet);
                };
                // A sharing provider's own tree may lie past the window:
                // only the window's anchors are the whole fleet's.
                candidates.retain(|c| c.anchor <= last);
                if candidates.len() >= cap {
                    #[cfg(test)]
                    self.windows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    break (candidates, fleet);
                }
                span = window::next_span(span, candidates.len(), cap);
                next = Some(Window { after: Some(last), upto: window::upto(first, span, end), also: Vec::new() });
                read = Some(fleet);
            };
            if candidates.is_empty() {
                return Ok(Outcome::default());
            }
            let finished = domain::finish_observed(req, &settings, has_trees, candidates, |p| fleet.root(p), &mut ());
            let trees = load_trees(&mut tx, &finished.kept_roots).await?;
            phases.mark("trees");
            return self.outcome(req, tx, phases, finished, fleet, trees).await;
        }

        let (fleet, _) = load_fleet(&mut tx, req, &catalog, basics, reach, None).await?;
        phases.mark("fleet");
        let request = req.clone();
        let (finished, fleet, trees) = {
            let roots: Vec<ProviderId> = roots_in_play(&fleet).into_iter().collect();
            let trees = Arc::new(load_trees(&mut tx, &roots).await?);
            phases.mark("trees");
            let in_play = trees.clone();
            let (finished, fleet, generating) = tokio::task::spawn_blocking(move || {
                let started = std::time::Instant::now();
                let root = |p: ProviderId| in_play.get(&p).map(|t| t.root).unwrap_or(p);
                let finished = domain::generate(&request, &settings, &catalog, &fleet, &in_play)
                    .map(|c| c.map(|c| domain::finish_observed(&request, &settings, has_trees, c, root, &mut ())));
                (finished, fleet, started.elapsed())
            })
            .await
            .map_err(|e| Error::Internal(format!("candidate generation failed: {e}")))?;
            phases.note("algorithm", generating);
            phases.mark("wait_algorithm");
            let Some(finished) = finished? else { return Ok(Outcome::default()) };
            // The algorithm's handle is gone: this is the only one left.
            let trees = Arc::try_unwrap(trees).unwrap_or_else(|shared| (*shared).clone());
            (finished, fleet, trees)
        };
        self.outcome(req, tx, phases, finished, fleet, trees).await
    }

    /// The answer from the kept candidates and their trees: the summaries
    /// (with the summarised providers' traits read now).
    async fn outcome(
        &self,
        req: &Request,
        mut tx: Tx,
        mut phases: Phases,
        finished: domain::Finished,
        fleet: Fleet,
        trees: Trees,
    ) -> Result<Outcome> {
        let answer = finished.with_trees(&trees);
        if answer.candidates.is_empty() {
            return Ok(Outcome::default());
        }
        let traits = if req.traits_in_summaries {
            Some(load_traits(&mut tx, &self.trait_cache, &answer.summary_providers, &trees).await?)
        } else {
            None
        };
        phases.mark("traits");
        // The answer is read: no need to wait for the transaction's end.
        tx.end_read();
        let (summaries, trait_names) = summaries(&fleet, &trees, &answer.summary_providers, traits);
        phases.mark("summaries");
        phases.log(answer.candidates.len());

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
        let (catalog, basics) = load_catalog(&mut tx, req, false).await?;
        let (fleet, _) = load_fleet(&mut tx, req, &catalog, basics, Reach::Whole, None).await?;
        let roots: Vec<ProviderId> = roots_in_play(&fleet).into_iter().collect();
        let trees = load_trees(&mut tx, &roots).await?;
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

/// Where one request's time went, logged at debug level (target
/// `keelson_candidates::phases`): what a benchmark reads to say which part
/// to work on. Each mark closes the phase since the previous one.
struct Phases {
    last: std::time::Instant,
    spent: Vec<(&'static str, std::time::Duration)>,
}

impl Phases {
    fn start() -> Self {
        Phases { last: std::time::Instant::now(), spent: Vec::with_capacity(8) }
    }

    fn mark(&mut self, phase: &'static str) {
        let now = std::time::Instant::now();
        self.spent.push((phase, now - self.last));
        self.last = now;
    }

    /// A phase that ran beside the others (not closed by a mark).
    fn note(&mut self, phase: &'static str, spent: std::time::Duration) {
        self.spent.push((phase, spent));
    }

    fn log(&self, candidates: usize) {
        if tracing::enabled!(target: "keelson_candidates::phases", tracing::Level::DEBUG) {
            let phases: Vec<String> =
                self.spent.iter().map(|(name, d)| format!("{name}={:.2}ms", d.as_secs_f64() * 1e3)).collect();
            tracing::debug!(target: "keelson_candidates::phases", candidates, "{}", phases.join(" "));
        }
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
#[derive(Clone, Default)]
struct Basics {
    /// Whether any provider has a parent.
    has_trees: bool,
    /// Every provider with `MISC_SHARES_VIA_AGGREGATE`.
    sharing: FxHashSet<ProviderId>,
    /// Every class, when the summaries show them all.
    all_class_names: Option<FxHashMap<ClassId, String>>,
    /// The least and the greatest provider id, when asked for (the
    /// bounds of a windowed read).
    ids: Option<(ProviderId, ProviderId)>,
}

/// Resolves the request's names and `in_tree` providers (MariaDB compares
/// them without case, so only exact matches count) and reads whether trees
/// exist, the sharing providers and, when the summaries show every class,
/// every class: one statement whose first column says what each row is,
/// since each round trip to the database costs more than these small
/// reads.
async fn load_catalog(tx: &mut Tx, req: &Request, bounds: bool) -> Result<(Catalog, Basics)> {
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
    const IN_TREE: i64 = 5;
    const FIRST_ID: i64 = 6;
    const LAST_ID: i64 = 7;
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
    let trees: BTreeSet<&str> = req.groups.iter().filter_map(|g| g.in_tree.as_deref()).collect();
    if !trees.is_empty() {
        sql.push_str(&format!(
            " UNION ALL SELECT {IN_TREE}, COALESCE(root_provider_id, id), uuid FROM resource_providers WHERE uuid IN ({})",
            in_list(trees.len())
        ));
        params.extend(texts(trees.iter().copied()));
    }
    if bounds {
        // Both ends of the primary key: an index dive each.
        sql.push_str(&format!(
            " UNION ALL SELECT {FIRST_ID}, MIN(id), NULL FROM resource_providers \
             UNION ALL SELECT {LAST_ID}, MAX(id), NULL FROM resource_providers"
        ));
    }
    let (mut first_id, mut last_id) = (None, None);
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
            IN_TREE => {
                let uuid = r.string(2)?;
                if trees.contains(uuid.as_str()) {
                    cat.in_tree_roots.insert(uuid, r.i64(1)?);
                }
            }
            FIRST_ID => first_id = r.opt_i64(1)?,
            LAST_ID => last_id = r.opt_i64(1)?,
            _ => basics.has_trees = r.i64(1)? != 0,
        }
        Ok(())
    })
    .await?;
    basics.ids = first_id.zip(last_id);
    if req.all_classes_in_summaries {
        basics.all_class_names = Some(all_classes);
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

/// Whether [`load_fleet`] may read only the trees a request's filters
/// leave (the real request), or must read every provider with a requested
/// class (an explanation accounts for each of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    Narrowed,
    Whole,
}

/// Loads the providers, inventories, traits and aggregates the request can
/// touch (only the request's traits and aggregates; the request's classes,
/// or every class when the summaries show them all, so that the summaries
/// need no second read). First the small filter tables, then, when the
/// request's filters leave only some trees ([`scope::anchors`]), the
/// inventories and usage of those trees alone. With a window, only the
/// trees whose root is in it are read, and in a first window the sharing
/// providers' ([`Window`]), unless `member_of` or `in_tree` narrow the
/// trees to a few first (reading those whole costs less than windows):
/// whether the window applied is returned with the fleet.
async fn load_fleet(
    tx: &mut Tx,
    req: &Request,
    cat: &Catalog,
    basics: Basics,
    reach: Reach,
    window: Option<Window>,
) -> Result<(Fleet, bool)> {
    let mut fleet = Fleet { has_trees: basics.has_trees, sharing: basics.sharing, ..Fleet::default() };
    let narrowing = reach == Reach::Narrowed && scope::can_narrow(req);
    // The roots of the providers the filter tables name (with trees, and
    // only for a narrowing).
    let mut filter_roots: FxHashMap<ProviderId, ProviderId> = FxHashMap::default();
    let with_roots = narrowing && fleet.has_trees;

    let agg_ids: BTreeSet<i64> = cat.aggregates.values().copied().collect();
    if !agg_ids.is_empty() {
        let sql = if with_roots {
            format!(
                "SELECT rpa.resource_provider_id, rpa.aggregate_id, rp.root_provider_id FROM resource_provider_aggregates rpa \
                 JOIN resource_providers rp ON rp.id = rpa.resource_provider_id WHERE rpa.aggregate_id IN ({})",
                in_list(agg_ids.len())
            )
        } else {
            format!(
                "SELECT resource_provider_id, aggregate_id FROM resource_provider_aggregates WHERE aggregate_id IN ({})",
                in_list(agg_ids.len())
            )
        };
        tx.for_each_row(&sql, &ids(agg_ids.iter().copied()), |r| -> Result<()> {
            let provider = r.i64(0)?;
            fleet.aggregates.entry(provider).or_default().insert(r.i64(1)?);
            if with_roots {
                filter_roots.insert(provider, r.opt_i64(2)?.unwrap_or(provider));
            }
            Ok(())
        })
        .await?;
    }

    // The sharing providers' anchors, then the trees `member_of` and
    // `in_tree` leave (which need no traits): the traits and the roots are
    // read for those trees only (with the sharing providers' trees, which
    // may serve them), since a trait the whole fleet has (Nova's
    // OWNER_NOVA) is a row per provider.
    let mut sharing: Vec<ProviderId> = Vec::new();
    let mut before_traits: Option<Vec<ProviderId>> = None;
    let sharing_first = narrowing || window.is_some();
    let mut window = window;
    if sharing_first {
        sharing = fleet.sharing.iter().copied().collect();
        sharing.sort_unstable();
        let known = if fleet.has_trees { FxHashMap::default() } else { identity(&sharing) };
        let (anchors, sharing_roots) = load_sharing_anchors(tx, &sharing, &known, fleet.has_trees).await?;
        fleet.sharing_anchors = anchors;
        filter_roots.extend(sharing_roots.iter().map(|(p, r)| (*p, *r)));
        if let Some(Window { after: None, upto: Some(upto), also }) = &mut window {
            also.extend(sharing_roots.values().copied().filter(|r| r > upto));
            also.sort_unstable();
            also.dedup();
        }
    }
    if narrowing {
        let tables = scope::FilterTables { fleet: &fleet, root_of: &filter_roots };
        if let Some(scope) = scope::anchors(req, cat, &tables, scope::Tables::WithoutTraits) {
            let mut roots: Vec<ProviderId> = scope.into_iter().collect();
            roots.extend(sharing.iter().map(|s| tables.root_of.get(s).copied().unwrap_or(*s)));
            roots.sort_unstable();
            roots.dedup();
            if roots.len() <= MAX_NARROWED {
                before_traits = Some(roots);
                window = None;
            }
        }
    }

    let mut trait_ids: BTreeSet<i64> = BTreeSet::new();
    for g in &req.groups {
        trait_ids.extend(g.required.iter().flatten().chain(&g.forbidden).filter_map(|t| cat.traits.get(t)));
    }
    trait_ids.extend(req.root_required.iter().chain(&req.root_forbidden).filter_map(|t| cat.traits.get(t)));
    if !trait_ids.is_empty() {
        let col = if fleet.has_trees { "rp.root_provider_id" } else { "rpt.resource_provider_id" };
        let join = fleet.has_trees && (with_roots || before_traits.is_some() || window.is_some());
        for (trees, tree_params) in tree_filters(col, before_traits.as_deref(), window.as_ref()) {
            let mut params = ids(trait_ids.iter().copied());
            params.extend(tree_params);
            let sql = if join {
                format!(
                    "SELECT rpt.resource_provider_id, rpt.trait_id, rp.root_provider_id FROM resource_provider_traits rpt \
                     JOIN resource_providers rp ON rp.id = rpt.resource_provider_id WHERE rpt.trait_id IN ({}){trees}",
                    in_list(trait_ids.len())
                )
            } else {
                format!(
                    "SELECT rpt.resource_provider_id, rpt.trait_id FROM resource_provider_traits rpt \
                     WHERE rpt.trait_id IN ({}){trees}",
                    in_list(trait_ids.len())
                )
            };
            tx.for_each_row(&sql, &params, |r| -> Result<()> {
                let provider = r.i64(0)?;
                fleet.traits.insert((provider, r.i64(1)?));
                if join {
                    filter_roots.insert(provider, r.opt_i64(2)?.unwrap_or(provider));
                }
                Ok(())
            })
            .await?;
        }
    }
    if !req.root_required.is_empty() || !req.root_forbidden.is_empty() {
        const ROOTS: &str = "SELECT id FROM resource_providers WHERE parent_provider_id IS NULL";
        let mut roots: Vec<ProviderId> = Vec::new();
        for (filter, params) in tree_filters("id", before_traits.as_deref(), window.as_ref()) {
            for r in tx.fetch_all(&format!("{ROOTS}{filter}"), &params).await? {
                roots.push(r.i64(0)?);
            }
        }
        fleet.roots = Some(roots);
    }

    // The trees left to read: the scope, and the trees of the sharing
    // providers (which may serve any of them).
    let mut trees: Option<Vec<ProviderId>> = None;
    if narrowing {
        let tables = scope::FilterTables { fleet: &fleet, root_of: &filter_roots };
        if let Some(mut scope) = scope::anchors(req, cat, &tables, scope::Tables::All) {
            scope.extend(sharing.iter().map(|s| tables.root_of.get(s).copied().unwrap_or(*s)));
            let mut roots: Vec<ProviderId> = scope.into_iter().collect();
            roots.sort_unstable();
            if roots.len() <= MAX_NARROWED {
                trees = Some(roots);
            }
        }
    }

    let requested: BTreeSet<ClassId> = cat.classes.values().copied().collect();
    let all_classes = req.all_classes_in_summaries;
    fleet.class_names = match basics.all_class_names {
        Some(names) => names,
        None => cat.classes.iter().map(|(n, id)| (*id, n.clone())).collect(),
    };
    if all_classes || !requested.is_empty() {
        load_inventories(tx, &mut fleet, &requested, all_classes, trees.as_deref(), window.as_ref()).await?;
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

    if !sharing_first {
        // Anchors only matter for sharing providers that can serve
        // something.
        let mut sharing: Vec<ProviderId> =
            fleet.sharing.iter().copied().filter(|p| resourceless || fleet.root_of.contains_key(p)).collect();
        sharing.sort_unstable();
        let (anchors, _) = load_sharing_anchors(tx, &sharing, &fleet.root_of, fleet.has_trees).await?;
        fleet.sharing_anchors = anchors;
    }
    Ok((fleet, window.is_some()))
}

/// The trees a windowed read covers: those whose root id is past `after`
/// and at most `upto` (unbounded where None), and the trees of the roots
/// `also` (the first window's sharing providers past it, which may serve
/// any tree).
struct Window {
    after: Option<ProviderId>,
    upto: Option<ProviderId>,
    also: Vec<ProviderId>,
}

impl Window {
    /// The condition on the root column `col` (appended to a WHERE), with
    /// its parameters pushed to `params`: one index range, and the sharing
    /// providers' roots as points of the same index.
    fn clause(&self, col: &str, params: &mut Vec<Value>) -> String {
        let mut range = Vec::new();
        if let Some(after) = self.after {
            range.push(format!("{col} > ?"));
            params.push(Value::Int(after));
        }
        if let Some(upto) = self.upto {
            range.push(format!("{col} <= ?"));
            params.push(Value::Int(upto));
        }
        let range = if range.is_empty() { "1 = 1".to_string() } else { range.join(" AND ") };
        if self.also.is_empty() {
            return format!(" AND {range}");
        }
        params.extend(ids(self.also.iter().copied()));
        format!(" AND ({range} OR {col} IN ({}))", in_list(self.also.len()))
    }
}

/// Conditions on the root column `col` (each appended to a WHERE, with its
/// parameters), one statement each: the `scope`'s roots in lists of at most
/// [`IN_CHUNK`] (or no condition without a scope), each also held to the
/// `window`.
fn tree_filters(col: &str, scope: Option<&[ProviderId]>, window: Option<&Window>) -> Vec<(String, Vec<Value>)> {
    let chunks: Vec<Option<&[ProviderId]>> = match scope {
        None => vec![None],
        Some(roots) => roots.chunks(IN_CHUNK).map(Some).collect(),
    };
    chunks
        .into_iter()
        .map(|chunk| {
            let (mut filter, mut params) = match chunk {
                None => (String::new(), Vec::new()),
                Some(roots) => (format!(" AND {col} IN ({})", in_list(roots.len())), ids(roots.iter().copied())),
            };
            if let Some(w) = window {
                filter.push_str(&w.clause(col, &mut params));
            }
            (filter, params)
        })
        .collect()
}

/// Conditions on `col` (each appended to a WHERE, with its parameters) that
/// together select the ascending `ids`, and possibly other rows, which the
/// caller skips: the longest run from the first id that holds at least
/// half of the ids it spans as one range (one index range scan, where a
/// list is a descent per id), the rest in lists of at most [`IN_CHUNK`]
/// (a sharing provider's tree far from the others, say).
fn id_filters(col: &str, ids_sorted: &[ProviderId]) -> Vec<(String, Vec<Value>)> {
    let Some(first) = ids_sorted.first().copied() else { return Vec::new() };
    let spans = |k: usize| usize::try_from(ids_sorted[k].saturating_sub(first)).unwrap_or(usize::MAX);
    let dense = (1..ids_sorted.len()).rev().find(|k| spans(*k) / 2 <= *k);
    let mut filters = Vec::new();
    let rest = match dense {
        Some(k) => {
            filters.push((format!(" AND {col} BETWEEN ? AND ?"), ids([first, ids_sorted[k]])));
            &ids_sorted[k + 1..]
        }
        None => ids_sorted,
    };
    for chunk in rest.chunks(IN_CHUNK) {
        filters.push((format!(" AND {col} IN ({})", in_list(chunk.len())), ids(chunk.iter().copied())));
    }
    filters
}

/// Each provider as its own root.
fn identity(providers: &[ProviderId]) -> FxHashMap<ProviderId, ProviderId> {
    providers.iter().map(|p| (*p, *p)).collect()
}

/// The inventories of the requested classes (or every class) with their
/// usage: of every provider, or of the providers of the `trees` given.
async fn load_inventories(
    tx: &mut Tx,
    fleet: &mut Fleet,
    requested: &BTreeSet<ClassId>,
    all_classes: bool,
    trees: Option<&[ProviderId]>,
    window: Option<&Window>,
) -> Result<()> {
    let (class_filter, class_params) = if all_classes {
        ("1 = 1".to_string(), Vec::new())
    } else {
        (format!("i.resource_class_id IN ({})", in_list(requested.len())), ids(requested.iter().copied()))
    };
    let mysql = tx.dialect == Dialect::MySql;
    // Without trees every provider is its own root: no join at all (on
    // MariaDB the join was half of this read's time). With trees, MariaDB
    // would otherwise walk the providers and find each one's inventories
    // through the unique index (two index descents per row, twice the time
    // of the whole read); inventories in table order, each provider by its
    // primary key, is the plan that fits. Narrowed to some trees or to a
    // window, the providers come first: their roots' index, then each
    // provider's inventories by the unique index.
    let join = if mysql { "STRAIGHT_JOIN" } else { "JOIN" };
    let (root, from) = match (fleet.has_trees, trees.is_some() || window.is_some()) {
        (false, _) => ("i.resource_provider_id", "inventories i".to_string()),
        (true, false) => (
            "rp.root_provider_id",
            format!("inventories i {join} resource_providers rp ON rp.id = i.resource_provider_id"),
        ),
        (true, true) => (
            "rp.root_provider_id",
            format!("resource_providers rp {join} inventories i ON i.resource_provider_id = rp.id"),
        ),
    };
    for (tree_filter, tree_params) in tree_filters(root, trees, window) {
        let mut params = class_params.clone();
        params.extend(tree_params);
        let sql = format!(
            "SELECT i.resource_provider_id, {root}, i.resource_class_id, \
                    i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio \
             FROM {from} WHERE {class_filter}{tree_filter}"
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
    }
    for providers in fleet.providers_by_class.values_mut() {
        providers.sort_unstable();
        providers.dedup();
    }

    // MySQL sums integers as DECIMAL, which arrives as text: ask for an
    // integer (the sum of integers is one), read like any other.
    let sum = if mysql { "CAST(SUM(used) AS SIGNED)" } else { "SUM(used)" };
    let class_filter = class_filter.replace("i.resource_class_id", "resource_class_id");
    // Narrowed or windowed: the usage of the providers just found (their
    // index range each), else of every provider.
    let some_trees = trees.is_some() || window.is_some();
    let mut providers: Vec<ProviderId> = Vec::new();
    if some_trees {
        providers = fleet.inventories.keys().map(|(p, _)| *p).collect();
        providers.sort_unstable();
        providers.dedup();
        if providers.is_empty() {
            return Ok(());
        }
    }
    let filters =
        if some_trees { id_filters("resource_provider_id", &providers) } else { vec![(String::new(), vec![])] };
    for (provider_filter, provider_params) in filters {
        let mut params = class_params.clone();
        params.extend(provider_params);
        let sql = format!(
            "SELECT resource_provider_id, resource_class_id, {sum} FROM allocations \
             WHERE {class_filter}{provider_filter} GROUP BY resource_provider_id, resource_class_id"
        );
        tx.for_each_row(&sql, &params, |r| -> Result<()> {
            if let Some(inv) = fleet.inventories.get_mut(&(r.i64(0)?, r.i64(1)?)) {
                inv.used = r.opt_i64(2)?.unwrap_or(0);
            }
            Ok(())
        })
        .await?;
    }
    Ok(())
}

/// For each of the `sharing` providers: the roots of every tree that shares
/// one of its aggregates (its own included), ascending; and the roots of
/// the sharing providers themselves. Roots come from `known`, else are read
/// (without trees every provider is its own root). Joining the providers in
/// SQL (and DISTINCT) cost the database several times these reads.
async fn load_sharing_anchors(
    tx: &mut Tx,
    sharing: &[ProviderId],
    known: &FxHashMap<ProviderId, ProviderId>,
    has_trees: bool,
) -> Result<(FxHashMap<ProviderId, Vec<ProviderId>>, FxHashMap<ProviderId, ProviderId>)> {
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
        .chain(sharing.iter().copied())
        .filter(|m| !known.contains_key(m))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut read_roots: FxHashMap<ProviderId, ProviderId> = FxHashMap::default();
    if has_trees {
        for chunk in unknown.chunks(MAX_IN_LIST) {
            let sql =
                format!("SELECT id, root_provider_id FROM resource_providers WHERE id IN ({})", in_list(chunk.len()));
            tx.for_each_row(&sql, &ids(chunk.iter().copied()), |r| -> Result<()> {
                let id = r.i64(0)?;
                read_roots.insert(id, r.opt_i64(1)?.unwrap_or(id));
                Ok(())
            })
            .await?;
        }
    } else {
        read_roots = identity(&unknown);
    }
    let root = |p: &ProviderId| known.get(p).or_else(|| read_roots.get(p)).copied();
    let mut anchors: FxHashMap<ProviderId, Vec<ProviderId>> = FxHashMap::default();
    for (sharing, member) in &members {
        if let Some(root) = root(member) {
            anchors.entry(*sharing).or_default().push(root);
        }
    }
    for list in anchors.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    let sharing_roots = sharing.iter().filter_map(|s| root(s).map(|r| (*s, r))).collect();
    Ok((anchors, sharing_roots))
}

/// Every provider of the given trees (`roots` ascending): by root, in
/// chunks, or the whole table filtered here when the trees are most of a
/// large fleet.
async fn load_trees(tx: &mut Tx, roots: &[ProviderId]) -> Result<Trees> {
    let mut trees = Trees::default();
    if roots.is_empty() {
        return Ok(trees);
    }
    // At least one provider per root.
    trees.reserve(roots.len());
    let mut keep = |r: &RowRef| -> Result<()> {
        let id = r.i64(0)?;
        let root = r.opt_i64(3)?.unwrap_or(id);
        if roots.binary_search(&root).is_ok() {
            trees.insert(
                id,
                TreeProvider { uuid: r.string(1)?, parent: r.opt_i64(2)?, root, generation: r.opt_i64(4)? },
            );
        }
        Ok(())
    };
    const COLUMNS: &str = "SELECT id, uuid, parent_provider_id, root_provider_id, generation FROM resource_providers";
    if roots.len() > MAX_NARROWED {
        tx.for_each_row(COLUMNS, &[], &mut keep).await?;
    } else {
        for (filter, params) in id_filters("root_provider_id", roots) {
            tx.for_each_row(&format!("{COLUMNS} WHERE 1 = 1{filter}"), &params, &mut keep).await?;
        }
    }
    Ok(trees)
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
    let mut summaries = Vec::with_capacity(providers.len());
    for (at, p) in providers.iter().enumerate() {
        let Some(t) = trees.get(p) else { continue };
        summaries.push(Summary {
            provider: *p,
            parent: t.parent,
            root: t.root,
            resources: resources[starts[at]..starts[at + 1]]
                .iter()
                .map(|(_, _, class, capacity, used)| (*class, *capacity, *used))
                .collect(),
            traits: traits.get(p).map(|t| t.to_vec()).unwrap_or_default(),
        });
    }
    (summaries, trait_names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(filters: &[(String, Vec<Value>)]) -> Vec<(String, usize)> {
        filters.iter().map(|(sql, params)| (sql.clone(), params.len())).collect()
    }

    #[test]
    fn dense_ids_are_one_range_and_stragglers_a_list() {
        assert!(id_filters("c", &[]).is_empty());
        assert_eq!(shown(&id_filters("c", &[7])), [(" AND c IN (?)".to_string(), 1)]);
        let window: Vec<i64> = (1..=1250).filter(|i| i % 3 != 0).collect();
        assert_eq!(shown(&id_filters("c", &window)), [(" AND c BETWEEN ? AND ?".to_string(), 2)]);
        let with_sharing: Vec<i64> = (1..=100).chain([90_000, 90_001]).collect();
        assert_eq!(
            shown(&id_filters("c", &with_sharing)),
            [(" AND c BETWEEN ? AND ?".to_string(), 2), (" AND c IN (?, ?)".to_string(), 2)]
        );
        let sparse: Vec<i64> = (0..1200).map(|i| i * 10).collect();
        let lists = shown(&id_filters("c", &sparse));
        assert_eq!(lists.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [999, 201]);
    }
}
