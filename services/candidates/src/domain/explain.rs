//! Why an answer is what it is (`keelson placement explain`): the search,
//! merge and finish of [`super::run`] report each rule they apply to an
//! [`Observer`]; the real request passes `()`, whose methods are no-ops and
//! whose `ACTIVE` is false, so the bookkeeping only explanations need is
//! compiled out of it. [`explain`] passes a [`Collector`], which keeps the
//! first rule that excluded each provider from each group and why each tree
//! the merge considered left the answer. An explanation is therefore never
//! a second opinion: it is the real request, watched.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;

use super::fleet::{Catalog, ClassId, Fleet, Misfit, ProviderId, TraitId, Trees};
use super::request::Request;
use super::search::GroupCandidate;
use super::Settings;
use crate::error::Result;

/// Why a provider cannot serve one request group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// No inventory of a class the group asks for.
    NoInventory { class: ClassId },
    /// The inventory of the class refuses the amount.
    Inventory { class: ClassId, amount: i64, misfit: Misfit },
    /// Outside the tree `in_tree` names.
    InTree,
    /// `in_tree` names no provider.
    InTreeUnknown,
    /// A `member_of` set names no existing aggregate.
    MemberOfUnknown,
    /// Not in every `member_of` set (for the unsuffixed group: nor is the
    /// tree's root).
    MemberOf,
    /// In a forbidden aggregate (`member_of=!…`), or its tree's root is.
    ForbiddenAggregate,
    /// Has none of the traits of a required any-of set (one trait: a plain
    /// required trait). For the unsuffixed group: no provider of any
    /// combination in its tree had one.
    RequiredTraits { any_of: Vec<TraitId> },
    /// Has a forbidden trait (unsuffixed group: a provider it would be
    /// combined with has).
    ForbiddenTrait { name: TraitId },
    /// Its tree's root lacks a `root_required` trait.
    RootRequired { name: TraitId },
    /// Its tree's root has a trait `root_required` forbids.
    RootForbidden { name: TraitId },
    /// Unsuffixed group: its tree, with the sharing providers serving it,
    /// lacks one of the group's classes.
    IncompleteTree,
    /// A resourceless group with neither required traits nor `member_of`
    /// matches no provider (upstream's behaviour).
    ResourcelessWithoutFilter,
}

impl Rule {
    /// The rule's stable name (the API's `rule` field).
    pub fn kind(&self) -> &'static str {
        match self {
            Rule::NoInventory { .. } => "no_inventory",
            Rule::Inventory { misfit: Misfit::StepSize(_), .. } => "step_size",
            Rule::Inventory { misfit: Misfit::MinUnit(_), .. } => "min_unit",
            Rule::Inventory { misfit: Misfit::MaxUnit(_), .. } => "max_unit",
            Rule::Inventory { misfit: Misfit::Capacity { .. }, .. } => "capacity",
            Rule::InTree => "in_tree",
            Rule::InTreeUnknown => "in_tree_unknown",
            Rule::MemberOfUnknown => "member_of_unknown",
            Rule::MemberOf => "member_of",
            Rule::ForbiddenAggregate => "forbidden_aggregate",
            Rule::RequiredTraits { .. } => "required_traits",
            Rule::ForbiddenTrait { .. } => "forbidden_trait",
            Rule::RootRequired { .. } => "root_required",
            Rule::RootForbidden { .. } => "root_forbidden",
            Rule::IncompleteTree => "incomplete_tree",
            Rule::ResourcelessWithoutFilter => "resourceless_without_filter",
        }
    }

    /// The rule without what differs from provider to provider (the
    /// inventory's own value), so that providers can be counted per rule.
    pub fn tally_key(&self) -> Rule {
        match self {
            Rule::Inventory { class, amount, misfit } => Rule::Inventory {
                class: *class,
                amount: *amount,
                misfit: match misfit {
                    Misfit::StepSize(_) => Misfit::StepSize(0),
                    Misfit::MinUnit(_) => Misfit::MinUnit(0),
                    Misfit::MaxUnit(_) => Misfit::MaxUnit(0),
                    Misfit::Capacity { .. } => Misfit::Capacity { free: 0 },
                },
            },
            other => other.clone(),
        }
    }
}

/// Why a tree (an anchor: the root of a tree, which sharing providers may
/// serve) the per-group search found is not in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TreeRule {
    /// No candidate of this group (index in request order) here.
    GroupMissing { group: usize },
    /// A class several groups ask for: the providers here have `room` in
    /// all, less than the `wanted` total.
    OverallCapacity { class: ClassId, wanted: i64, room: i64 },
    /// Every combination broke a rule; the first one broken: two granular
    /// groups (the second named here) on one provider under
    /// `group_policy=isolate`,
    Isolate { group: usize },
    /// … the groups together exceed a provider's inventory of a class,
    Capacity { provider: ProviderId, class: ClassId },
    /// … a `same_subtree` (index in request order) did not hold.
    SameSubtree { index: usize },
    /// Every combination here duplicated one of an earlier tree.
    Duplicate,
    /// Generation stopped at `max_allocation_candidates` before reaching
    /// this tree.
    MaxCandidates,
    /// Before 1.29, a candidate may use only one provider of a tree.
    OneProviderPerTree,
    /// `limit` cut the answer before this tree's candidates.
    Limit,
}

impl TreeRule {
    /// The rule's stable name (the API's `rule` field).
    pub fn kind(&self) -> &'static str {
        match self {
            TreeRule::GroupMissing { .. } => "group_missing",
            TreeRule::OverallCapacity { .. } => "overall_capacity",
            TreeRule::Isolate { .. } => "group_policy_isolate",
            TreeRule::Capacity { .. } => "combined_capacity",
            TreeRule::SameSubtree { .. } => "same_subtree",
            TreeRule::Duplicate => "duplicate",
            TreeRule::MaxCandidates => "max_allocation_candidates",
            TreeRule::OneProviderPerTree => "one_provider_per_tree",
            TreeRule::Limit => "limit",
        }
    }
}

/// What the algorithm tells about the rules it applies. Every method has a
/// no-op default; the algorithm builds what it passes only when `ACTIVE`.
pub trait Observer {
    /// False: the algorithm skips every step only an explanation needs.
    const ACTIVE: bool = false;

    /// `rule` excluded `provider` from group `group` (request order).
    #[inline]
    fn excluded(&mut self, _group: usize, _provider: ProviderId, _rule: Rule) {}

    /// The search of `group` ended here: every loaded provider not yet
    /// excluded from it (nor among its candidates) is excluded by `rule`.
    #[inline]
    fn rest_excluded(&mut self, _group: usize, _rule: Rule) {}

    /// The search of `group` found these candidates (none: the answer is
    /// empty and later groups are not searched).
    #[inline]
    fn group_searched(&mut self, _group: usize, _candidates: &[GroupCandidate]) {}

    /// The merge considered the tree anchored at `anchor`.
    #[inline]
    fn tree_considered(&mut self, _anchor: ProviderId) {}

    /// `rule` kept the tree anchored at `anchor` out of the answer.
    #[inline]
    fn tree_dropped(&mut self, _anchor: ProviderId, _rule: TreeRule) {}
}

/// The real request: observes nothing, costs nothing.
impl Observer for () {}

/// Keeps the first rule per (group, provider) and per tree.
#[derive(Debug, Default)]
pub struct Collector {
    universe: BTreeSet<ProviderId>,
    excluded: Vec<FxHashMap<ProviderId, Rule>>,
    searched: Vec<Option<BTreeSet<ProviderId>>>,
    trees: Vec<ProviderId>,
    dropped: FxHashMap<ProviderId, TreeRule>,
}

impl Collector {
    fn new(groups: usize, fleet: &Fleet) -> Self {
        Collector {
            universe: fleet.loaded_providers().collect(),
            excluded: vec![FxHashMap::default(); groups],
            searched: vec![None; groups],
            ..Default::default()
        }
    }
}

impl Observer for Collector {
    const ACTIVE: bool = true;

    fn excluded(&mut self, group: usize, provider: ProviderId, rule: Rule) {
        if let Some(rules) = self.excluded.get_mut(group) {
            rules.entry(provider).or_insert(rule);
        }
    }

    fn rest_excluded(&mut self, group: usize, rule: Rule) {
        if let Some(rules) = self.excluded.get_mut(group) {
            for p in &self.universe {
                rules.entry(*p).or_insert_with(|| rule.clone());
            }
        }
    }

    fn group_searched(&mut self, group: usize, candidates: &[GroupCandidate]) {
        if let Some(slot) = self.searched.get_mut(group) {
            *slot = Some(candidates.iter().flat_map(|c| c.providers.iter().copied()).collect());
        }
    }

    fn tree_considered(&mut self, anchor: ProviderId) {
        self.trees.push(anchor);
    }

    fn tree_dropped(&mut self, anchor: ProviderId, rule: TreeRule) {
        self.dropped.entry(anchor).or_insert(rule);
    }
}

/// One group's part of an explanation.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupExplanation {
    pub suffix: String,
    /// False: an earlier group found nothing, so the search ended before
    /// this one (as the real request's does).
    pub searched: bool,
    /// How many providers were loaded (those with a requested class).
    pub providers: usize,
    /// The providers of the group's candidates, ascending.
    pub survivors: Vec<ProviderId>,
    /// Every other loaded provider with the first rule that excluded it,
    /// ascending (empty when not searched).
    pub excluded: Vec<(ProviderId, Rule)>,
}

/// How many providers one rule excluded.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// The rule without per-provider values ([`Rule::tally_key`]).
    pub rule: Rule,
    pub providers: usize,
    /// For `capacity`: the most any of them has free.
    pub largest_free: Option<i64>,
}

impl GroupExplanation {
    /// Providers per rule, the rule excluding most first.
    pub fn tallies(&self) -> Vec<Tally> {
        let mut by_rule: BTreeMap<Rule, Tally> = BTreeMap::new();
        for (_, rule) in &self.excluded {
            let key = rule.tally_key();
            let tally = by_rule.entry(key.clone()).or_insert(Tally { rule: key, providers: 0, largest_free: None });
            tally.providers += 1;
            if let Rule::Inventory { misfit: Misfit::Capacity { free }, .. } = rule {
                tally.largest_free = Some(tally.largest_free.map_or(*free, |f| f.max(*free)));
            }
        }
        let mut tallies: Vec<Tally> = by_rule.into_values().collect();
        // Stable: equal counts stay in rule order.
        tallies.sort_by_key(|t| std::cmp::Reverse(t.providers));
        tallies
    }
}

/// Why the answer to a request is what it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Explanation {
    /// Per request group, in request order.
    pub groups: Vec<GroupExplanation>,
    /// Every tree the merge considered, in its order, with why it is not in
    /// the answer (None: it is).
    pub trees: Vec<(ProviderId, Option<TreeRule>)>,
    /// How many allocation requests the answer has.
    pub candidates: usize,
    /// Every provider the answer's allocation requests use, ascending.
    pub providers_in_answer: Vec<ProviderId>,
}

/// Runs the request as [`super::run`] does, watched, and says why its
/// answer is what it is. Errors are the request's own (a 400 for an
/// unknown class or trait, where the real request gives one).
pub fn explain(
    req: &Request,
    settings: &Settings,
    catalog: &Catalog,
    fleet: &Fleet,
    trees: &Trees,
) -> Result<Explanation> {
    let mut seen = Collector::new(req.groups.len(), fleet);
    let answer = super::run_observed(req, settings, catalog, fleet, trees, &mut seen)?;
    let candidates = answer.as_ref().map(|a| a.candidates.as_slice()).unwrap_or_default();
    let kept: BTreeSet<ProviderId> = candidates.iter().map(|c| c.anchor).collect();
    let providers_in_answer: BTreeSet<ProviderId> = candidates
        .iter()
        .flat_map(|c| c.parts.iter().map(|p| p.provider).chain(c.mappings.iter().flatten().copied()))
        .collect();
    let groups = req
        .groups
        .iter()
        .zip(seen.searched.iter().zip(&seen.excluded))
        .map(|(g, (searched, rules))| {
            let survivors: Vec<ProviderId> = searched.iter().flatten().copied().collect();
            let mut excluded: Vec<(ProviderId, Rule)> = match searched {
                Some(found) => rules.iter().filter(|(p, _)| !found.contains(p)).map(|(p, r)| (*p, r.clone())).collect(),
                None => Vec::new(),
            };
            excluded.sort_unstable();
            GroupExplanation {
                suffix: g.suffix.clone(),
                searched: searched.is_some(),
                providers: seen.universe.len(),
                survivors,
                excluded,
            }
        })
        .collect();
    let mut listed: BTreeSet<ProviderId> = BTreeSet::new();
    let trees = seen
        .trees
        .iter()
        .filter(|a| listed.insert(**a))
        .map(|a| (*a, if kept.contains(a) { None } else { seen.dropped.get(a).copied() }))
        .collect();
    Ok(Explanation {
        groups,
        trees,
        candidates: candidates.len(),
        providers_in_answer: providers_in_answer.into_iter().collect(),
    })
}

/// An explanation with the names of the ids it holds (what the rpc layer
/// sends).
#[derive(Debug, Clone, Default)]
pub struct Explained {
    pub explanation: Explanation,
    /// Every loaded provider's tree, with uuids.
    pub trees: Trees,
    pub class_names: FxHashMap<ClassId, String>,
    pub trait_names: FxHashMap<TraitId, String>,
}

impl Explained {
    /// A provider's uuid ("" for one not loaded, which cannot happen: every
    /// provider an explanation names was loaded with its tree).
    pub fn uuid(&self, p: ProviderId) -> &str {
        self.trees.get(&p).map(|t| t.uuid.as_str()).unwrap_or("")
    }

    pub fn class_name(&self, c: ClassId) -> &str {
        self.class_names.get(&c).map(String::as_str).unwrap_or("")
    }

    pub fn trait_name(&self, t: TraitId) -> &str {
        self.trait_names.get(&t).map(String::as_str).unwrap_or("")
    }
}
