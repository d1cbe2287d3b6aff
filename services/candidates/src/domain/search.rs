//! The search of each request group on its own (upstream's
//! `_get_by_one_request`): which providers, or which combinations of
//! providers of one tree plus sharing providers, can satisfy the group, and
//! under which anchor (the root of the tree a candidate belongs to).
//!
//! Names are resolved group by group in upstream's order, so that the same
//! request meets the same outcome: an unknown class or trait is a 400, but
//! only if no earlier step already proved the answer empty.

use rustc_hash::{FxHashMap, FxHashSet};

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

/// Searches every group in order; `Ok(None)` is an empty answer.
pub fn search(req: &Request, cat: &Catalog, fleet: &Fleet) -> Step<Found> {
    let Some(anchors) = anchor_filter(req, cat, fleet)? else { return Ok(None) };
    let mut seen: FxHashMap<ClassId, usize> = FxHashMap::default();
    let mut totals: FxHashMap<ClassId, i64> = FxHashMap::default();
    let mut groups = Vec::with_capacity(req.groups.len());
    for group in &req.groups {
        let Some(resolved) = resolve(group, cat, fleet)? else { return Ok(None) };
        for (class, amount) in &resolved.resources {
            *seen.entry(*class).or_default() += 1;
            // Amounts are any i64 a request names: added without wrapping.
            let total = totals.entry(*class).or_default();
            *total = total.saturating_add(*amount);
        }
        let tree_search = !group.use_same_provider && (!fleet.sharing.is_empty() || fleet.has_trees);
        let candidates = if tree_search {
            search_trees(&resolved, fleet, anchors.as_ref())
        } else {
            search_single_providers(&resolved, fleet, anchors.as_ref())
        };
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

/// The roots allowed to anchor a candidate (`root_required`); `None` inside
/// means no filter. An empty set of roots makes the answer empty.
fn anchor_filter(req: &Request, cat: &Catalog, fleet: &Fleet) -> Step<Option<FxHashSet<ProviderId>>> {
    if req.root_required.is_empty() && req.root_forbidden.is_empty() {
        return Ok(Some(None));
    }
    let required = trait_ids(&req.root_required, cat)?;
    let forbidden = trait_ids(&req.root_forbidden, cat)?;
    let roots: FxHashSet<ProviderId> = fleet
        .roots
        .iter()
        .flatten()
        .copied()
        .filter(|r| {
            required.iter().all(|t| fleet.has_trait(*r, *t)) && !forbidden.iter().any(|t| fleet.has_trait(*r, *t))
        })
        .collect();
    Ok(if roots.is_empty() { None } else { Some(Some(roots)) })
}

fn trait_ids(names: &[String], cat: &Catalog) -> Result<Vec<TraitId>> {
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

/// Upstream's `RequestGroupSearchContext`: classes (400 if unknown),
/// aggregates (empty if none exist), traits (400 if unknown), `in_tree`
/// (empty if unknown), then the providers with room for each class (empty
/// if a class has none).
fn resolve<'a>(group: &'a RequestGroup, cat: &Catalog, fleet: &Fleet) -> Step<Resolved<'a>> {
    let mut resources = Vec::with_capacity(group.resources.len());
    for (name, amount) in &group.resources {
        let class = cat.classes.get(name).copied().ok_or_else(|| Error::unknown_class(name))?;
        resources.push((class, *amount));
    }
    let in_aggregates = if group.member_of.is_empty() {
        None
    } else {
        let mut sets: Vec<Vec<AggregateId>> = Vec::with_capacity(group.member_of.len());
        for any in &group.member_of {
            let ids: Vec<AggregateId> = any.iter().filter_map(|u| cat.aggregates.get(u).copied()).collect();
            if ids.is_empty() {
                return Ok(None);
            }
            sets.push(ids);
        }
        let members: FxHashSet<ProviderId> = fleet
            .aggregates
            .iter()
            .filter(|(_, aggs)| sets.iter().all(|any| any.iter().any(|a| aggs.contains(a))))
            .map(|(p, _)| *p)
            .collect();
        if members.is_empty() {
            return Ok(None);
        }
        Some(members)
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
            None => return Ok(None),
        },
    };
    let mut with_resource = Vec::with_capacity(resources.len());
    for (class, amount) in &resources {
        let providers: Vec<ProviderId> = fleet
            .providers_by_class
            .get(class)
            .into_iter()
            .flatten()
            .copied()
            .filter(|p| fleet.inventories.get(&(*p, *class)).is_some_and(|inv| inv.fits(*amount)))
            .filter(|p| tree_root.is_none_or(|root| fleet.root(*p) == root))
            .collect();
        if providers.is_empty() {
            return Ok(None);
        }
        with_resource.push(providers);
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

fn anchor_allowed(anchors: Option<&FxHashSet<ProviderId>>, root: ProviderId) -> bool {
    anchors.is_none_or(|a| a.contains(&root))
}

/// The unsuffixed group when trees or sharing providers exist: each class
/// from any provider of one tree or from a sharing provider in an aggregate
/// with it; traits judged on the union of the providers used (upstream's
/// `get_trees_matching_all` and `_alloc_candidates_multiple_providers`).
fn search_trees(r: &Resolved, fleet: &Fleet, anchors: Option<&FxHashSet<ProviderId>>) -> Option<Vec<GroupCandidate>> {
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
        if let Some(allowed) = anchors {
            pairs.retain(|(_, anchor)| allowed.contains(anchor));
        }
        // An aggregate on a root covers its whole tree.
        if let Some(members) = &r.in_aggregates {
            pairs.retain(|(p, anchor)| members.contains(p) || members.contains(anchor));
        }
        if let Some(bad) = &r.in_forbidden_aggregates {
            pairs.retain(|(p, anchor)| !bad.contains(p) && !bad.contains(anchor));
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
            if !traits_satisfied(choice, &r.required, &r.forbidden, fleet) {
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

/// The providers of one candidate together: none has a forbidden trait and
/// each any-of set is matched by at least one of them.
fn traits_satisfied(providers: &[ProviderId], required: &[Vec<TraitId>], forbidden: &[TraitId], fleet: &Fleet) -> bool {
    if providers.iter().any(|p| forbidden.iter().any(|t| fleet.has_trait(*p, *t))) {
        return false;
    }
    required.iter().all(|any| any.iter().any(|t| providers.iter().any(|p| fleet.has_trait(*p, *t))))
}

/// A provider on its own: has every requested class, the traits and the
/// aggregates itself (upstream's `get_provider_ids_matching` and
/// `_alloc_candidates_single_provider`). A sharing provider also serves
/// every tree it shares an aggregate with.
fn search_single_providers(
    r: &Resolved,
    fleet: &Fleet,
    anchors: Option<&FxHashSet<ProviderId>>,
) -> Option<Vec<GroupCandidate>> {
    let matches_own = |p: &ProviderId| {
        r.required.iter().all(|any| any.iter().any(|t| fleet.has_trait(*p, *t)))
            && r.in_aggregates.as_ref().is_none_or(|m| m.contains(p))
            && r.in_forbidden_aggregates.as_ref().is_none_or(|bad| !bad.contains(p))
            && !r.forbidden.iter().any(|t| fleet.has_trait(*p, *t))
    };
    let providers: Vec<ProviderId> = match r.with_resource.split_first() {
        Some((first, rest)) => {
            let others: Vec<FxHashSet<ProviderId>> = rest.iter().map(|l| l.iter().copied().collect()).collect();
            first.iter().copied().filter(|p| others.iter().all(|o| o.contains(p))).filter(matches_own).collect()
        }
        // A resourceless group (same_subtree): any provider matching its
        // traits and aggregates, anywhere (upstream ignores in_tree here).
        // Upstream starts from the providers its required traits or
        // member_of select, so a group with neither (only forbidden traits
        // or aggregates, or only in_tree) matches no provider at all.
        None if r.required.is_empty() && r.in_aggregates.is_none() => Vec::new(),
        None => fleet.all_providers.iter().flatten().copied().filter(matches_own).collect(),
    };
    let mut out = Vec::with_capacity(providers.len());
    for p in providers {
        let parts: Vec<Part> =
            r.resources.iter().map(|(class, amount)| Part { provider: p, class: *class, amount: *amount }).collect();
        let root = fleet.root(p);
        if anchor_allowed(anchors, root) {
            out.push(GroupCandidate { anchor: root, parts: parts.clone(), providers: vec![p] });
        }
        if fleet.sharing.contains(&p) {
            for anchor in fleet.sharing_anchors.get(&p).into_iter().flatten() {
                if *anchor != root && anchor_allowed(anchors, *anchor) {
                    out.push(GroupCandidate { anchor: *anchor, parts: parts.clone(), providers: vec![p] });
                }
            }
        }
    }
    Some(out)
}
