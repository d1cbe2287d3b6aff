//! The search of each request group on its own (upstream's
//! `_get_by_one_request`): which providers, or which combinations of
//! providers of one tree plus sharing providers, can satisfy the group, and
//! under which anchor (the root of the tree a candidate belongs to).
//!
//! Names are resolved group by group in upstream's order, so that the same
//! request meets the same outcome: an unknown class or trait is a 400, but
//! only if no earlier step already proved the answer empty.

use rustc_hash::{FxHashMap, FxHashSet};

use super::explain::{Observer, Rule};
use super::fleet::{AggregateId, Catalog, ClassId, Fleet, ProviderId, TraitId};
use super::request::{Request, RequestGroup};
use crate::error::{Error, Result};

/// An amount of one class from one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Part {
    pub provider: ProviderId,
    pub class: ClassId,
    pub amount: i64,
}

/// One way to satisfy one group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupCandidate {
    /// The root of the tree this candidate serves (for a sharing provider,
    /// the root of a tree it shares an aggregate with).
    pub anchor: ProviderId,
    pub parts: Vec<Part>,
    /// The providers satisfying the group, ascending (for a resourceless
    /// group, the provider matching its traits and aggregates).
    pub providers: Vec<ProviderId>,
}

/// Every candidate of one group, in generation order.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupCandidates {
    pub suffix: String,
    pub use_same_provider: bool,
    pub candidates: Vec<GroupCandidate>,
}

/// What the per-group search found for the whole request.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub groups: Vec<GroupCandidates>,
    /// Classes more than one group asks for, with the total asked.
    pub shared_classes: FxHashMap<ClassId, i64>,
}

/// Why a search ends with nothing before trying everything.
type Step<T> = Result<Option<T>>;

/// Searches every group in order; `Ok(None)` is an empty answer. `obs`
/// hears every rule that excludes a provider from a group.
pub fn search<O: Observer>(req: &Request, cat: &Catalog, fleet: &Fleet, obs: &mut O) -> Step<Found> {
    let filter = anchor_filter(req, cat, fleet)?;
    if filter.allowed.as_ref().is_some_and(|a| a.is_empty()) {
        if O::ACTIVE {
            // No root qualifies: every group loses every provider to its root.
            for gi in 0..req.groups.len() {
                for p in fleet.loaded_providers() {
                    if let Some(rule) = filter.root_rule(fleet.root(p), fleet) {
                        obs.excluded(gi, p, rule);
                    }
                }
                obs.group_searched(gi, &[]);
            }
        }
        return Ok(None);
    }
    let anchors = &filter;
    let mut seen: FxHashMap<ClassId, usize> = FxHashMap::default();
    let mut totals: FxHashMap<ClassId, i64> = FxHashMap::default();
    let mut groups = Vec::with_capacity(req.groups.len());
    for (gi, group) in req.groups.iter().enumerate() {
        let tree_search = !group.use_same_provider && (!fleet.sharing.is_empty() || fleet.has_trees);
        let Some(resolved) = resolve(gi, group, tree_search, cat, fleet, obs)? else {
            obs.group_searched(gi, &[]);
            return Ok(None);
        };
        for (class, amount) in &resolved.resources {
            *seen.entry(*class).or_default() += 1;
            // Amounts are any i64 a request names: added without wrapping.
            let total = totals.entry(*class).or_default();
            *total = total.saturating_add(*amount);
        }
        let candidates = if tree_search {
            search_trees(gi, &resolved, fleet, anchors, obs)
        } else {
            search_single_providers(gi, &resolved, fleet, anchors, obs)
        };
        obs.group_searched(gi, candidates.as_deref().unwrap_or_default());
        let Some(candidates) = candidates.filter(|c| !c.is_empty()) else { return Ok(None) };
        groups.push(GroupCandidates {
            suffix: group.suffix.clone(),
            use_same_provider: group.use_same_provider,
            candidates,
        });
    }
    let shared_classes = totals.into_iter().filter(|(class, _)| seen.get(class).copied().unwrap_or(0) > 1).collect();
    Ok(Some(Found { groups, shared_classes }))
}

/// The roots allowed to anchor a candidate (`root_required`).
#[derive(Default)]
pub(crate) struct AnchorFilter {
    /// None: no filter. Empty: the answer is empty.
    pub(crate) allowed: Option<FxHashSet<ProviderId>>,
    required: Vec<TraitId>,
    forbidden: Vec<TraitId>,
}

impl AnchorFilter {
    fn allows(&self, root: ProviderId) -> bool {
        self.allowed.as_ref().is_none_or(|a| a.contains(&root))
    }

    /// The `root_required` rule `root` breaks, if any.
    fn root_rule(&self, root: ProviderId, fleet: &Fleet) -> Option<Rule> {
        if let Some(t) = self.required.iter().find(|t| !fleet.has_trait(root, **t)) {
            return Some(Rule::RootRequired { name: *t });
        }
        self.forbidden.iter().find(|t| fleet.has_trait(root, **t)).map(|t| Rule::RootForbidden { name: *t })
    }
}

pub(crate) fn anchor_filter(req: &Request, cat: &Catalog, fleet: &Fleet) -> Result<AnchorFilter> {
    if req.root_required.is_empty() && req.root_forbidden.is_empty() {
        return Ok(AnchorFilter::default());
    }
    let mut filter = AnchorFilter {
        allowed: None,
        required: trait_ids(&req.root_required, cat)?,
        forbidden: trait_ids(&req.root_forbidden, cat)?,
    };
    let roots: FxHashSet<ProviderId> =
        fleet.roots.iter().flatten().copied().filter(|r| filter.root_rule(*r, fleet).is_none()).collect();
    filter.allowed = Some(roots);
    Ok(filter)
}

pub(crate) fn trait_ids(names: &[String], cat: &Catalog) -> Result<Vec<TraitId>> {
    names.iter().map(|n| cat.traits.get(n).copied().ok_or_else(|| Error::unknown_trait(n))).collect()
}

/// A group with its names resolved and its per-class providers found.
struct Resolved<'a> {
    group: &'a RequestGroup,
    resources: Vec<(ClassId, i64)>,
    required: Vec<Vec<TraitId>>,
    forbidden: Vec<TraitId>,
    /// Providers directly in every `member_of` set (None: no member_of).
    in_aggregates: Option<FxHashSet<ProviderId>>,
    /// Providers directly in a forbidden aggregate (None: none asked).
    in_forbidden_aggregates: Option<FxHashSet<ProviderId>>,
    /// Per class (same order as `resources`): providers where the amount
    /// fits, ascending, restricted to the `in_tree` tree.
    with_resource: Vec<Vec<ProviderId>>,
}

/// The providers a group's `member_of` admits on their own.
pub(crate) enum Members {
    /// No `member_of`.
    Any,
    /// An any-of set names no known aggregate: nothing qualifies.
    UnknownAggregate,
    /// The providers directly in (an aggregate of) every any-of set.
    Only(FxHashSet<ProviderId>),
}

/// `member_of`: the providers in every any-of set of aggregates (the
/// fleet holds the memberships of the request's aggregates).
pub(crate) fn aggregate_members(group: &RequestGroup, cat: &Catalog, fleet: &Fleet) -> Members {
    if group.member_of.is_empty() {
        return Members::Any;
    }
    let mut sets: Vec<Vec<AggregateId>> = Vec::with_capacity(group.member_of.len());
    for any in &group.member_of {
        let ids: Vec<AggregateId> = any.iter().filter_map(|u| cat.aggregates.get(u).copied()).collect();
        if ids.is_empty() {
            return Members::UnknownAggregate;
        }
        sets.push(ids);
    }
    Members::Only(
        fleet
            .aggregates
            .iter()
            .filter(|(_, aggs)| sets.iter().all(|any| any.iter().any(|a| aggs.contains(a))))
            .map(|(p, _)| *p)
            .collect(),
    )
}

/// Upstream's `RequestGroupSearchContext`: classes (400 if unknown),
/// aggregates (empty if none exist), traits (400 if unknown), `in_tree`
/// (empty if unknown), then the providers with room for each class (empty
/// if a class has none).
fn resolve<'a, O: Observer>(
    gi: usize,
    group: &'a RequestGroup,
    tree_search: bool,
    cat: &Catalog,
    fleet: &Fleet,
    obs: &mut O,
) -> Step<Resolved<'a>> {
    let mut resources = Vec::with_capacity(group.resources.len());
    for (name, amount) in &group.resources {
        let class = cat.classes.get(name).copied().ok_or_else(|| Error::unknown_class(name))?;
        resources.push((class, *amount));
    }
    let in_aggregates = match aggregate_members(group, cat, fleet) {
        Members::Any => None,
        Members::UnknownAggregate => {
            obs.rest_excluded(gi, Rule::MemberOfUnknown);
            return Ok(None);
        }
        Members::Only(members) if members.is_empty() => {
            obs.rest_excluded(gi, Rule::MemberOf);
            return Ok(None);
        }
        Members::Only(members) => Some(members),
    };
    let mut required = Vec::with_capacity(group.required.len());
    for any in &group.required {
        required.push(trait_ids(any, cat)?);
    }
    let forbidden = trait_ids(&group.forbidden, cat)?;
    let tree_root = match &group.in_tree {
        None => None,
        Some(uuid) => match cat.in_tree_roots.get(uuid) {
            Some(root) => Some(*root),
            None => {
                obs.rest_excluded(gi, Rule::InTreeUnknown);
                return Ok(None);
            }
        },
    };
    // In a tree search a provider serves the group by serving any one of
    // its classes, so a class's rule excludes it only if it serves none:
    // those rules are held until every class is seen.
    let hold = O::ACTIVE && tree_search;
    let mut held: FxHashMap<ProviderId, Rule> = FxHashMap::default();
    let mut note = |obs: &mut O, p: ProviderId, rule: Rule| {
        if hold {
            held.entry(p).or_insert(rule);
        } else {
            obs.excluded(gi, p, rule);
        }
    };
    let mut with_resource = Vec::with_capacity(resources.len());
    for (class, amount) in &resources {
        let with_class = fleet.providers_by_class.get(class).map(Vec::as_slice).unwrap_or_default();
        if O::ACTIVE {
            for p in fleet.loaded_providers() {
                if with_class.binary_search(&p).is_err() {
                    note(obs, p, Rule::NoInventory { class: *class });
                }
            }
        }
        let mut providers: Vec<ProviderId> = Vec::with_capacity(with_class.len());
        for p in with_class {
            match fleet.inventories.get(&(*p, *class)).map(|inv| inv.misfit(*amount)) {
                None => note(obs, *p, Rule::NoInventory { class: *class }),
                Some(Some(misfit)) => note(obs, *p, Rule::Inventory { class: *class, amount: *amount, misfit }),
                Some(None) if tree_root.is_some_and(|root| fleet.root(*p) != root) => note(obs, *p, Rule::InTree),
                Some(None) => providers.push(*p),
            }
        }
        if providers.is_empty() {
            // No tree can have this class: every provider is out.
            for (p, rule) in held.drain() {
                obs.excluded(gi, p, rule);
            }
            return Ok(None);
        }
        with_resource.push(providers);
    }
    for (p, rule) in held {
        if !with_resource.iter().any(|list: &Vec<ProviderId>| list.binary_search(&p).is_ok()) {
            obs.excluded(gi, p, rule);
        }
    }
    let forbidden_aggs: Vec<AggregateId> =
        group.forbidden_aggregates.iter().filter_map(|u| cat.aggregates.get(u).copied()).collect();
    let in_forbidden_aggregates = (!forbidden_aggs.is_empty()).then(|| {
        fleet
            .aggregates
            .iter()
            .filter(|(_, aggs)| forbidden_aggs.iter().any(|a| aggs.contains(a)))
            .map(|(p, _)| *p)
            .collect::<FxHashSet<_>>()
    });
    Ok(Some(Resolved { group, resources, required, forbidden, in_aggregates, in_forbidden_aggregates, with_resource }))
}

/// The unsuffixed group when trees or sharing providers exist: each class
/// from any provider of one tree or from a sharing provider in an aggregate
/// with it; traits judged on the union of the providers used (upstream's
/// `get_trees_matching_all` and `_alloc_candidates_multiple_providers`).
fn search_trees<O: Observer>(
    gi: usize,
    r: &Resolved,
    fleet: &Fleet,
    anchors: &AnchorFilter,
    obs: &mut O,
) -> Option<Vec<GroupCandidate>> {
    // Per class: the amount and the (provider, anchor) pairs that may
    // serve it, ascending and distinct (sorted vectors: a fleet's worth of
    // pairs in ordered sets cost more than the rest of the search).
    type Servers = Vec<(ProviderId, ProviderId)>;
    let mut per_class: Vec<(ClassId, i64, Servers)> = Vec::with_capacity(r.resources.len());
    let mut common: Option<Vec<ProviderId>> = None;
    let mut here: Vec<ProviderId> = Vec::new();
    for ((class, amount), providers) in r.resources.iter().zip(&r.with_resource) {
        let mut pairs: Servers = providers.iter().map(|p| (*p, fleet.root(*p))).collect();
        // in_tree keeps sharing providers of other trees out.
        if r.group.in_tree.is_none() {
            for p in providers {
                let shared = fleet.sharing.contains(p) && r.in_aggregates.as_ref().is_none_or(|m| m.contains(p));
                if shared {
                    for anchor in fleet.sharing_anchors.get(p).into_iter().flatten() {
                        pairs.push((*p, *anchor));
                    }
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        if anchors.allowed.is_some() {
            pairs.retain(|(p, anchor)| {
                let allowed = anchors.allows(*anchor);
                if O::ACTIVE && !allowed {
                    if let Some(rule) = anchors.root_rule(*anchor, fleet) {
                        obs.excluded(gi, *p, rule);
                    }
                }
                allowed
            });
        }
        // An aggregate on a root covers its whole tree.
        if let Some(members) = &r.in_aggregates {
            pairs.retain(|(p, anchor)| {
                let member = members.contains(p) || members.contains(anchor);
                if !member {
                    obs.excluded(gi, *p, Rule::MemberOf);
                }
                member
            });
        }
        if let Some(bad) = &r.in_forbidden_aggregates {
            pairs.retain(|(p, anchor)| {
                let allowed = !bad.contains(p) && !bad.contains(anchor);
                if !allowed {
                    obs.excluded(gi, *p, Rule::ForbiddenAggregate);
                }
                allowed
            });
        }
        here.clear();
        here.extend(pairs.iter().map(|(_, anchor)| *anchor));
        here.sort_unstable();
        here.dedup();
        let both = match common.take() {
            None => here.clone(),
            Some(mut before) => {
                before.retain(|a| here.binary_search(a).is_ok());
                before
            }
        };
        if both.is_empty() {
            obs.rest_excluded(gi, Rule::IncompleteTree);
            return None;
        }
        common = Some(both);
        per_class.push((*class, *amount, pairs));
    }
    let common = common.unwrap_or_default();
    // Upstream builds each tree's product with the classes in id order.
    per_class.sort_by_key(|(class, _, _)| *class);
    // (anchor, class index, provider) for every pair under a common anchor,
    // sorted: each anchor's lists, each list's providers ascending.
    let mut servers: Vec<(ProviderId, usize, ProviderId)> =
        Vec::with_capacity(per_class.iter().map(|(_, _, p)| p.len()).sum());
    for (i, (_, _, pairs)) in per_class.iter().enumerate() {
        servers.extend(
            pairs.iter().filter(|(_, anchor)| common.binary_search(anchor).is_ok()).map(|(p, anchor)| (*anchor, i, *p)),
        );
    }
    servers.sort_unstable();
    let n = per_class.len();
    let mut out = Vec::new();
    let mut lists: Vec<&[(ProviderId, usize, ProviderId)]> = Vec::with_capacity(n);
    for group in servers.chunk_by(|a, b| a.0 == b.0) {
        let anchor = group[0].0;
        lists.clear();
        lists.extend(group.chunk_by(|a, b| a.1 == b.1));
        // A class without a server under this anchor: no candidate here.
        if lists.len() != n {
            continue;
        }
        for_each_product(&lists, |choice| {
            if let Some(broken) = traits_broken(choice, &r.required, &r.forbidden, fleet) {
                if O::ACTIVE {
                    let rule = broken.rule(&r.required);
                    for p in choice {
                        obs.excluded(gi, *p, rule.clone());
                    }
                }
                return;
            }
            let parts = per_class
                .iter()
                .zip(choice)
                .map(|((class, amount, _), p)| Part { provider: *p, class: *class, amount: *amount })
                .collect();
            let mut providers = choice.to_vec();
            providers.sort_unstable();
            providers.dedup();
            out.push(GroupCandidate { anchor, parts, providers });
        });
    }
    // What is left was only under trees lacking a class.
    obs.rest_excluded(gi, Rule::IncompleteTree);
    Some(out)
}

/// Calls `f` with every combination of one provider per list (each list a
/// run of (anchor, class index, provider)), the last list varying fastest
/// (`itertools.product` order).
fn for_each_product(lists: &[&[(ProviderId, usize, ProviderId)]], mut f: impl FnMut(&[ProviderId])) {
    if lists.is_empty() || lists.iter().any(|l| l.is_empty()) {
        return;
    }
    let mut idx = vec![0usize; lists.len()];
    let mut choice: Vec<ProviderId> = lists.iter().map(|l| l[0].2).collect();
    loop {
        f(&choice);
        let mut level = lists.len();
        loop {
            if level == 0 {
                return;
            }
            level -= 1;
            idx[level] += 1;
            if idx[level] < lists[level].len() {
                choice[level] = lists[level][idx[level]].2;
                break;
            }
            idx[level] = 0;
            choice[level] = lists[level][0].2;
        }
    }
}

/// A trait rule some providers break (kept small: named as a [`Rule`] only
/// for an explanation).
#[derive(Clone, Copy)]
enum TraitBreak {
    /// The any-of set at this index of the group's required sets.
    Required(usize),
    Forbidden(TraitId),
}

impl TraitBreak {
    fn rule(self, required: &[Vec<TraitId>]) -> Rule {
        match self {
            TraitBreak::Required(i) => Rule::RequiredTraits { any_of: required.get(i).cloned().unwrap_or_default() },
            TraitBreak::Forbidden(t) => Rule::ForbiddenTrait { name: t },
        }
    }
}

/// The providers of one candidate together: none may have a forbidden trait
/// and each any-of set must be matched by at least one of them.
fn traits_broken(
    providers: &[ProviderId],
    required: &[Vec<TraitId>],
    forbidden: &[TraitId],
    fleet: &Fleet,
) -> Option<TraitBreak> {
    if let Some(t) = forbidden.iter().find(|t| providers.iter().any(|p| fleet.has_trait(*p, **t))) {
        return Some(TraitBreak::Forbidden(*t));
    }
    required
        .iter()
        .position(|any| !any.iter().any(|t| providers.iter().any(|p| fleet.has_trait(*p, *t))))
        .map(TraitBreak::Required)
}

/// Why a provider on its own does not match a group's traits and
/// aggregates.
#[derive(Clone, Copy)]
enum OwnBreak {
    Traits(TraitBreak),
    MemberOf,
    ForbiddenAggregate,
}

/// A provider on its own: has every requested class, the traits and the
/// aggregates itself (upstream's `get_provider_ids_matching` and
/// `_alloc_candidates_single_provider`). A sharing provider also serves
/// every tree it shares an aggregate with.
fn search_single_providers<O: Observer>(
    gi: usize,
    r: &Resolved,
    fleet: &Fleet,
    anchors: &AnchorFilter,
    obs: &mut O,
) -> Option<Vec<GroupCandidate>> {
    let own_break = |p: &ProviderId| -> Option<OwnBreak> {
        if let Some(i) = r.required.iter().position(|any| !any.iter().any(|t| fleet.has_trait(*p, *t))) {
            return Some(OwnBreak::Traits(TraitBreak::Required(i)));
        }
        if r.in_aggregates.as_ref().is_some_and(|m| !m.contains(p)) {
            return Some(OwnBreak::MemberOf);
        }
        if r.in_forbidden_aggregates.as_ref().is_some_and(|bad| bad.contains(p)) {
            return Some(OwnBreak::ForbiddenAggregate);
        }
        r.forbidden.iter().find(|t| fleet.has_trait(*p, **t)).map(|t| OwnBreak::Traits(TraitBreak::Forbidden(*t)))
    };
    let mut matches_own = |p: &ProviderId| match own_break(p) {
        None => true,
        Some(broken) => {
            if O::ACTIVE {
                let rule = match broken {
                    OwnBreak::Traits(t) => t.rule(&r.required),
                    OwnBreak::MemberOf => Rule::MemberOf,
                    OwnBreak::ForbiddenAggregate => Rule::ForbiddenAggregate,
                };
                obs.excluded(gi, *p, rule);
            }
            false
        }
    };
    let providers: Vec<ProviderId> = match r.with_resource.split_first() {
        Some((first, rest)) => {
            let others: Vec<FxHashSet<ProviderId>> = rest.iter().map(|l| l.iter().copied().collect()).collect();
            // A provider missing from another class's list was excluded
            // by that class's rule in `resolve`.
            first.iter().copied().filter(|p| others.iter().all(|o| o.contains(p))).filter(|p| matches_own(p)).collect()
        }
        // A resourceless group (same_subtree): any provider matching its
        // traits and aggregates, anywhere (upstream ignores in_tree here).
        // Upstream starts from the providers its required traits or
        // member_of select, so a group with neither (only forbidden traits
        // or aggregates, or only in_tree) matches no provider at all.
        None if r.required.is_empty() && r.in_aggregates.is_none() => {
            obs.rest_excluded(gi, Rule::ResourcelessWithoutFilter);
            Vec::new()
        }
        None => fleet.all_providers.iter().flatten().copied().filter(|p| matches_own(p)).collect(),
    };
    let mut out = Vec::with_capacity(providers.len());
    for p in providers {
        let parts: Vec<Part> =
            r.resources.iter().map(|(class, amount)| Part { provider: p, class: *class, amount: *amount }).collect();
        let root = fleet.root(p);
        let before = out.len();
        if anchors.allows(root) {
            out.push(GroupCandidate { anchor: root, parts: parts.clone(), providers: vec![p] });
        }
        if fleet.sharing.contains(&p) {
            for anchor in fleet.sharing_anchors.get(&p).into_iter().flatten() {
                if *anchor != root && anchors.allows(*anchor) {
                    out.push(GroupCandidate { anchor: *anchor, parts: parts.clone(), providers: vec![p] });
                }
            }
        }
        if O::ACTIVE && out.len() == before {
            if let Some(rule) = anchors.root_rule(root, fleet) {
                obs.excluded(gi, p, rule);
            }
        }
    }
    Some(out)
}
