//! Upstream Placement's allocation-candidates algorithm, free of I/O.
//!
//! The store loads what a request needs into a [`fleet::Fleet`]; then
//! [`run`]:
//! 1. [`search::search`]: every request group on its own, in order (an
//!    empty group ends the search with an empty answer);
//! 2. [`merge::merge`]: per anchor, the product of the groups' candidates,
//!    filtered by group_policy, same_subtree and capacity, consolidated,
//!    duplicates collapsed, cut at `max_allocation_candidates`;
//! 3. [`finish`]: the pre-1.29 rule, then `limit` (after generation), and
//!    which providers the summaries show.
//!
//! Each step reports the rules it applies to an [`explain::Observer`]: `()`
//! for the real request, a collector for [`explain::explain`].

pub mod explain;
pub mod fleet;
pub mod merge;
pub mod request;
pub mod scope;
pub mod search;
pub mod window;

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};

use rand::seq::SliceRandom as _;

use explain::{Observer, TreeRule};
use fleet::{Catalog, ClassId, Fleet, ProviderId, TraitId, Trees};
use merge::{Candidate, MergeRules};
use request::{GroupPolicy, Request};

use crate::error::Result;

/// In which order anchors (trees) are visited while generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// All of one anchor's candidates before the next anchor's.
    DepthFirst,
    /// One candidate from each anchor in turn, so that a
    /// `max_allocation_candidates` cut spreads over the trees.
    BreadthFirst,
}

/// The four options of the algorithm.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `[placement] allocation_candidates_generation_strategy`.
    pub strategy: Strategy,
    /// `[workarounds] optimize_for_wide_provider_trees`. Upstream prunes
    /// the product only when this is set; keelson always prunes, since the
    /// pruned product yields the same candidates in the same order, so the
    /// option cannot change an answer (it is accepted for compatibility).
    pub optimize_for_wide_provider_trees: bool,
    /// `[placement] max_allocation_candidates` (None: -1, no cap): stops
    /// generation once this many distinct candidates exist.
    pub max_candidates: Option<usize>,
    /// `[placement] randomize_allocation_candidates`: a random sample under
    /// `limit`, a shuffled order without.
    pub randomize: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            strategy: Strategy::DepthFirst,
            optimize_for_wide_provider_trees: false,
            max_candidates: None,
            randomize: false,
        }
    }
}

impl Settings {
    /// From the option values as configured (an unknown strategy name was
    /// refused by configuration validation; depth-first is the default).
    pub fn from_options(
        strategy: &str,
        optimize_for_wide_provider_trees: bool,
        max_allocation_candidates: i64,
        randomize: bool,
    ) -> Self {
        Settings {
            strategy: if strategy == "breadth-first" { Strategy::BreadthFirst } else { Strategy::DepthFirst },
            optimize_for_wide_provider_trees,
            max_candidates: usize::try_from(max_allocation_candidates).ok(),
            randomize,
        }
    }
}

impl Settings {
    /// These settings with generation stopped at `limit` where that cannot
    /// change the answer: candidates are kept in generation order (no
    /// randomisation) and only cut after it (no pre-1.29 rule, which drops
    /// candidates of nested trees after generation), so the first `limit`
    /// generated are the ones `limit` keeps. A fleet of 10,000 computes
    /// then builds 1,000 candidates, not 10,000.
    pub fn stopping_at_limit(&self, req: &Request, has_trees: bool) -> Settings {
        let mut s = self.clone();
        if let Some(limit) = req.limit {
            if !self.randomize && (req.nested_aware || !has_trees) {
                s.max_candidates = Some(s.max_candidates.map_or(limit, |max| max.min(limit)));
            }
        }
        s
    }
}

/// The whole algorithm on the loaded data: search, merge, finish.
/// `Ok(None)` is an empty answer.
pub fn run(
    req: &Request,
    settings: &Settings,
    catalog: &Catalog,
    fleet: &Fleet,
    trees: &Trees,
) -> Result<Option<Answer>> {
    run_observed(req, settings, catalog, fleet, trees, &mut ())
}

/// [`run`], reporting to `obs`.
pub fn run_observed<O: Observer>(
    req: &Request,
    settings: &Settings,
    catalog: &Catalog,
    fleet: &Fleet,
    trees: &Trees,
    obs: &mut O,
) -> Result<Option<Answer>> {
    let Some(candidates) = generate_observed(req, settings, catalog, fleet, trees, obs)? else { return Ok(None) };
    let root = |p: ProviderId| trees.get(&p).map(|t| t.root).unwrap_or(p);
    let answer = finish_observed(req, settings, fleet.has_trees, candidates, root, obs).with_trees(trees);
    Ok((!answer.candidates.is_empty()).then_some(answer))
}

/// Search and merge: every candidate, before [`finish`] (`Ok(None)`: an
/// empty answer). Only same_subtree reads `trees`, so a request without it
/// can generate before the trees are loaded.
pub fn generate(
    req: &Request,
    settings: &Settings,
    catalog: &Catalog,
    fleet: &Fleet,
    trees: &Trees,
) -> Result<Option<Vec<Candidate>>> {
    generate_observed(req, settings, catalog, fleet, trees, &mut ())
}

/// [`generate`], reporting to `obs`.
pub fn generate_observed<O: Observer>(
    req: &Request,
    settings: &Settings,
    catalog: &Catalog,
    fleet: &Fleet,
    trees: &Trees,
    obs: &mut O,
) -> Result<Option<Vec<Candidate>>> {
    let Some(found) = search::search(req, catalog, fleet, obs)? else { return Ok(None) };
    let index: FxHashMap<&str, usize> = req.groups.iter().enumerate().map(|(i, g)| (g.suffix.as_str(), i)).collect();
    let rules = MergeRules {
        isolate: req.group_policy == Some(GroupPolicy::Isolate),
        same_subtrees: req
            .same_subtrees
            .iter()
            .map(|s| s.iter().filter_map(|x| index.get(x.as_str()).copied()).collect())
            .collect(),
        trees,
    };
    let candidates = merge::merge(&found, fleet, &rules, settings, obs);
    Ok((!candidates.is_empty()).then_some(candidates))
}

/// The candidates kept and the providers their summaries describe.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub candidates: Vec<Candidate>,
    /// Ascending ids.
    pub summary_providers: Vec<ProviderId>,
}

/// Applies the pre-1.29 rule (no two providers of one tree in a candidate,
/// summaries limited to the providers used), then `limit` and
/// randomisation, and picks the providers to summarise: every provider of
/// every tree a kept candidate allocates from.
pub fn finish(
    req: &Request,
    settings: &Settings,
    has_trees: bool,
    candidates: Vec<Candidate>,
    trees: &Trees,
) -> Answer {
    let root = |p: ProviderId| trees.get(&p).map(|t| t.root).unwrap_or(p);
    finish_observed(req, settings, has_trees, candidates, root, &mut ()).with_trees(trees)
}

/// The candidates kept, before the trees are read: which trees the
/// summaries describe is known, their providers not yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub candidates: Vec<Candidate>,
    /// The roots of every provider a kept candidate allocates from,
    /// ascending.
    pub kept_roots: Vec<ProviderId>,
    /// Before 1.29 on nested trees: the summaries show only these providers.
    pub only: Option<FxHashSet<ProviderId>>,
}

impl Finished {
    /// The answer, with the providers to summarise taken from `trees`
    /// (which hold every provider of the kept roots' trees).
    pub fn with_trees(self, trees: &Trees) -> Answer {
        let mut summary_providers: Vec<ProviderId> = trees
            .iter()
            .filter(|(id, t)| {
                self.kept_roots.binary_search(&t.root).is_ok() && self.only.as_ref().is_none_or(|o| o.contains(id))
            })
            .map(|(id, _)| *id)
            .collect();
        summary_providers.sort_unstable();
        Answer { candidates: self.candidates, summary_providers }
    }
}

/// [`finish`], with the root of each provider a candidate allocates from
/// told by `root`, reporting to `obs` the trees whose every candidate it
/// drops.
pub fn finish_observed<O: Observer>(
    req: &Request,
    settings: &Settings,
    has_trees: bool,
    mut candidates: Vec<Candidate>,
    root: impl Fn(ProviderId) -> ProviderId,
    obs: &mut O,
) -> Finished {
    let anchors = |candidates: &[Candidate]| -> FxHashSet<ProviderId> { candidates.iter().map(|c| c.anchor).collect() };
    let mut before = if O::ACTIVE { anchors(&candidates) } else { FxHashSet::default() };
    let only_used = !req.nested_aware && has_trees;
    let mut used: FxHashSet<ProviderId> = FxHashSet::default();
    if only_used {
        candidates.retain(|c| {
            let providers: BTreeSet<ProviderId> = c.parts.iter().map(|p| p.provider).collect();
            let roots: BTreeSet<ProviderId> = providers.iter().map(|p| root(*p)).collect();
            providers.len() == roots.len()
        });
        used = candidates.iter().flat_map(|c| c.parts.iter().map(|p| p.provider)).collect();
        if O::ACTIVE {
            let after = anchors(&candidates);
            for gone in before.difference(&after) {
                obs.tree_dropped(*gone, TreeRule::OneProviderPerTree);
            }
            before = after;
        }
    }
    let mut rng = rand::thread_rng();
    match req.limit {
        Some(limit) if limit < candidates.len() => {
            if settings.randomize {
                candidates = candidates.choose_multiple(&mut rng, limit).cloned().collect();
            } else {
                candidates.truncate(limit);
            }
        }
        _ if settings.randomize => candidates.shuffle(&mut rng),
        _ => {}
    }
    if O::ACTIVE {
        let after = anchors(&candidates);
        for gone in before.difference(&after) {
            obs.tree_dropped(*gone, TreeRule::Limit);
        }
    }
    let mut kept_roots: Vec<ProviderId> =
        candidates.iter().flat_map(|c| c.parts.iter().map(|p| root(p.provider))).collect();
    kept_roots.sort_unstable();
    kept_roots.dedup();
    Finished { candidates, kept_roots, only: only_used.then_some(used) }
}

/// What the summaries say about one provider, by id.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub provider: ProviderId,
    pub parent: Option<ProviderId>,
    pub root: ProviderId,
    /// (class, capacity, used), in class name order.
    pub resources: Vec<(ClassId, i64, i64)>,
    /// Ascending ids (upstream's order: older traits first).
    pub traits: Vec<TraitId>,
}

/// The whole answer, with ids: big answers repeat the same few providers and
/// classes thousands of times, so the rpc layer names each once (building
/// strings per candidate was a tenth of a large request's work).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The request's group suffixes, in request order (what each
    /// candidate's mappings are aligned with).
    pub suffixes: Vec<String>,
    pub candidates: Vec<Candidate>,
    pub summaries: Vec<Summary>,
    /// Every provider the candidates and summaries name, with its uuid.
    pub trees: Trees,
    pub class_names: FxHashMap<ClassId, String>,
    pub trait_names: FxHashMap<TraitId, String>,
}

impl Outcome {
    /// A provider's uuid ("" for one not loaded, which cannot happen: every
    /// provider of a candidate or summary belongs to a tree in play).
    pub fn uuid(&self, p: ProviderId) -> &str {
        self.trees.get(&p).map(|t| t.uuid.as_str()).unwrap_or("")
    }

    pub fn class_name(&self, c: ClassId) -> &str {
        self.class_names.get(&c).map(String::as_str).unwrap_or("")
    }

    /// The answer with every id replaced by its name.
    pub fn named(&self) -> NamedOutcome {
        let suffixes: Vec<&str> = self.suffixes.iter().map(String::as_str).collect();
        NamedOutcome {
            allocation_requests: self
                .candidates
                .iter()
                .map(|c| name_candidate(c, &suffixes, &self.trees, &self.class_names))
                .collect(),
            provider_summaries: self
                .summaries
                .iter()
                .map(|s| ProviderSummary {
                    uuid: self.uuid(s.provider).to_string(),
                    parent_uuid: s.parent.map(|p| self.uuid(p).to_string()),
                    root_uuid: self.uuid(s.root).to_string(),
                    resources: s
                        .resources
                        .iter()
                        .map(|(c, capacity, used)| (self.class_name(*c).to_string(), *capacity, *used))
                        .collect(),
                    traits: s.traits.iter().filter_map(|t| self.trait_names.get(t).cloned()).collect(),
                })
                .collect(),
        }
    }
}

/// An allocation request as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedRequest {
    /// Per provider uuid (first use order): class name → amount.
    pub allocations: Vec<(String, Vec<(String, i64)>)>,
    /// Per group suffix (request order): provider uuids.
    pub mappings: Vec<(String, Vec<String>)>,
}

/// What the summaries say about one provider, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSummary {
    pub uuid: String,
    pub parent_uuid: Option<String>,
    pub root_uuid: String,
    /// (class, capacity, used), by class name.
    pub resources: Vec<(String, i64, i64)>,
    /// In trait id order (upstream's order: older traits first).
    pub traits: Vec<String>,
}

/// The whole answer, by name (what the API shows; the tests read it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamedOutcome {
    pub allocation_requests: Vec<NamedRequest>,
    pub provider_summaries: Vec<ProviderSummary>,
}

/// Names a candidate's providers and classes.
pub fn name_candidate(
    c: &Candidate,
    suffixes: &[&str],
    trees: &Trees,
    class_names: &FxHashMap<ClassId, String>,
) -> NamedRequest {
    let uuid = |p: ProviderId| trees.get(&p).map(|t| t.uuid.clone()).unwrap_or_default();
    let mut allocations: Vec<(ProviderId, Vec<(String, i64)>)> = Vec::new();
    for part in &c.parts {
        let class = class_names.get(&part.class).cloned().unwrap_or_default();
        match allocations.iter_mut().find(|(p, _)| *p == part.provider) {
            Some((_, resources)) => resources.push((class, part.amount)),
            None => allocations.push((part.provider, vec![(class, part.amount)])),
        }
    }
    NamedRequest {
        allocations: allocations.into_iter().map(|(p, r)| (uuid(p), r)).collect(),
        mappings: suffixes
            .iter()
            .zip(&c.mappings)
            .map(|(s, providers)| (s.to_string(), providers.iter().map(|p| uuid(*p)).collect()))
            .collect(),
    }
}
