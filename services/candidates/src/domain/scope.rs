//! Which trees can still hold a candidate, told from the small filter tables
//! alone (the request's traits and aggregates, the roots, the sharing
//! providers and the trees they share with), so that the store reads
//! inventories and usage only for those trees.
//!
//! The answer is a superset of the anchors the search can reach: each group
//! is narrowed by the rules of [`super::search`] (the same functions),
//! weakened to what these tables tell without inventories:
//! - a candidate of a group is anchored at the root of a provider it uses,
//!   or at a tree that a sharing provider it uses shares an aggregate with;
//! - `member_of`: a provider it uses is in the aggregates (or, in a tree
//!   search, the anchor itself is, which is the root of itself);
//! - each `required` any-of set: a provider it uses has one of the traits
//!   (in a tree search, one of the providers used together);
//! - `in_tree`: its providers are in that tree (and a sharing provider of
//!   that tree anchors the trees it shares with, in a single-provider
//!   search);
//! - `root_required`: the anchor passes [`search::anchor_filter`].
//!
//! Forbidden traits and aggregates exclude providers, not trees, so they
//! narrow nothing. Every group of a candidate has the same anchor, so the
//! request's scope is the intersection over its groups.
//!
//! The algorithm then runs unchanged on the narrowed fleet: every tree in
//! the scope is loaded whole, with every sharing provider's tree, and a
//! group's candidates only shrink with fewer providers loaded (capacity,
//! traits and aggregates are judged per provider or per provider set
//! used), so a tree outside the scope, which some group cannot anchor even
//! on the whole fleet, cannot anchor a candidate on the narrowed one.

use rustc_hash::{FxHashMap, FxHashSet};

use super::fleet::{Catalog, Fleet, ProviderId, TraitId};
use super::request::{Request, RequestGroup};
use super::search::{self, Members};

/// What the store read before the inventories.
pub struct FilterTables<'a> {
    /// The request's traits and aggregates (`traits`, `aggregates`), the
    /// roots (`roots`, for `root_required`), the sharing providers and
    /// their anchors (`sharing`, `sharing_anchors`).
    pub fleet: &'a Fleet,
    /// The root of every provider those tables name (absent: the provider
    /// is a root).
    pub root_of: &'a FxHashMap<ProviderId, ProviderId>,
}

impl FilterTables<'_> {
    fn root(&self, p: ProviderId) -> ProviderId {
        self.root_of.get(&p).copied().unwrap_or(p)
    }

    /// The trees a group using one of `providers` can be anchored at.
    fn anchors_of(&self, providers: impl Iterator<Item = ProviderId>) -> FxHashSet<ProviderId> {
        let mut anchors = FxHashSet::default();
        for p in providers {
            anchors.insert(self.root(p));
            if self.fleet.sharing.contains(&p) {
                anchors.extend(self.fleet.sharing_anchors.get(&p).into_iter().flatten().copied());
            }
        }
        anchors
    }
}

/// Which filter tables [`anchors`] may judge by.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// Aggregates, `in_tree` and the sharing providers only (the traits
    /// and the roots are not read yet): `member_of` and `in_tree` narrow.
    WithoutTraits,
    /// Every filter table, read at least for the trees a
    /// [`Tables::WithoutTraits`] scope left: every filter narrows.
    All,
}

/// Whether the request has a filter that can narrow the trees (only then
/// is a scope worth its reads).
pub fn can_narrow(req: &Request) -> bool {
    req.groups.iter().any(|g| !g.member_of.is_empty() || !g.required.is_empty() || g.in_tree.is_some())
}

/// The trees that can still anchor a candidate; `None`: any tree (nothing
/// narrows, or the request is one the search must see whole: a name that
/// does not resolve is a 400 which a search over fewer providers might end
/// before reaching, and a resourceless group matches providers anywhere).
///
/// Judged on [`Tables::All`] read for a [`Tables::WithoutTraits`] scope's
/// trees only, the answer is the same as on the whole tables: a provider
/// with a required trait outside those trees (and not sharing) only adds
/// anchors outside them, which `member_of` and `in_tree` remove again.
pub fn anchors(req: &Request, cat: &Catalog, tables: &FilterTables, read: Tables) -> Option<FxHashSet<ProviderId>> {
    if !names_resolve(req, cat) || req.groups.iter().any(|g| g.resources.is_empty()) {
        return None;
    }
    let mut scope: Option<FxHashSet<ProviderId>> = None;
    for g in &req.groups {
        if let Some(anchors) = group_anchors(g, cat, tables, read) {
            narrow(&mut scope, anchors);
        }
    }
    let mut scope = scope?;
    if read == Tables::WithoutTraits {
        return Some(scope);
    }
    let roots = search::anchor_filter(req, cat, tables.fleet).ok()?;
    if let Some(allowed) = roots.allowed {
        scope.retain(|a| allowed.contains(a));
    }
    Some(scope)
}

fn narrow(scope: &mut Option<FxHashSet<ProviderId>>, anchors: FxHashSet<ProviderId>) {
    *scope = Some(match scope.take() {
        None => anchors,
        Some(mut before) => {
            before.retain(|a| anchors.contains(a));
            before
        }
    });
}

/// Every class and trait the request names is known.
fn names_resolve(req: &Request, cat: &Catalog) -> bool {
    let trait_known = |t: &String| cat.traits.contains_key(t);
    req.groups.iter().all(|g| {
        g.resources.iter().all(|(c, _)| cat.classes.contains_key(c))
            && g.required.iter().flatten().all(trait_known)
            && g.forbidden.iter().all(trait_known)
    }) && req.root_required.iter().chain(&req.root_forbidden).all(trait_known)
}

/// The anchors one group can reach (`None`: it does not narrow).
fn group_anchors(
    g: &RequestGroup,
    cat: &Catalog,
    tables: &FilterTables,
    read: Tables,
) -> Option<FxHashSet<ProviderId>> {
    let mut scope: Option<FxHashSet<ProviderId>> = None;
    match search::aggregate_members(g, cat, tables.fleet) {
        Members::Any => {}
        Members::UnknownAggregate => narrow(&mut scope, FxHashSet::default()),
        Members::Only(members) => narrow(&mut scope, tables.anchors_of(members.into_iter())),
    }
    for any in g.required.iter().filter(|_| read == Tables::All) {
        let Ok(ids) = search::trait_ids(any, cat) else { return Some(FxHashSet::default()) };
        let with: FxHashSet<ProviderId> = providers_with_any(tables.fleet, &ids);
        narrow(&mut scope, tables.anchors_of(with.into_iter()));
    }
    if let Some(uuid) = &g.in_tree {
        let mut anchors = FxHashSet::default();
        if let Some(root) = cat.in_tree_roots.get(uuid) {
            anchors.insert(*root);
            if g.use_same_provider {
                let sharing_here = tables.fleet.sharing.iter().copied().filter(|s| tables.root(*s) == *root);
                anchors.extend(tables.anchors_of(sharing_here));
            }
        }
        narrow(&mut scope, anchors);
    }
    scope
}

fn providers_with_any(fleet: &Fleet, traits: &[TraitId]) -> FxHashSet<ProviderId> {
    fleet.traits.iter().filter(|(_, t)| traits.contains(t)).map(|(p, _)| *p).collect()
}
