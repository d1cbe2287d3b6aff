//! Folding the per-group candidates into whole answers (upstream's
//! `_merge_candidates`): per anchor, the product of the groups' candidate
//! lists in group order, filtered by group_policy, same_subtree and
//! capacity, consolidated, with duplicates collapsed.
//!
//! Partial combinations that already exceed a capacity or break
//! `isolate` are pruned as the product is built: a complete combination
//! starting with them would be rejected anyway, so the result and its order
//! are those of the plain product, only reached without enumerating
//! exponentially many dead ends (upstream bug 2126751).
//!
//! Consolidation adds amounts into a fresh total per candidate. Upstream
//! adds them into objects shared between candidates when a class is
//! requested by several groups and group_policy is not `none`, which
//! inflates other candidates' amounts; here every candidate's amounts add
//! up to exactly what its groups asked.


use rustc_hash::{FxHashMap, FxHashSet};

use super::fleet::{ClassId, Fleet, ProviderId, Trees};
use super::search::{Found, GroupCandidate, Part};
use super::{Settings, Strategy};

/// One answer: every group satisfied under one anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub anchor: ProviderId,
    /// One entry per (provider, class), in order of first use.
    pub parts: Vec<Part>,
    /// Per group (request order): the providers that satisfied it.
    pub mappings: Vec<Vec<ProviderId>>,
}

/// Request-wide rules the merge applies.
pub struct MergeRules<'a> {
    pub isolate: bool,
    /// Each entry: the indices of the groups named by one same_subtree.
    pub same_subtrees: Vec<Vec<usize>>,
    pub trees: &'a Trees,
}

/// Every candidate, in generation order, duplicates collapsed, cut at
/// `max_allocation_candidates`.
pub fn merge(found: &Found, fleet: &Fleet, rules: &MergeRules, settings: &Settings) -> Vec<Candidate> {
    let groups = &found.groups;
    let n = groups.len();
    if n == 0 {
        return Vec::new();
    }
    // Anchors in order of first appearance, each with one list per group.
    let mut order: Vec<ProviderId> = Vec::new();
    let mut lists: FxHashMap<ProviderId, Vec<Vec<&GroupCandidate>>> = FxHashMap::default();
    for (gi, g) in groups.iter().enumerate() {
        for c in &g.candidates {
            let entry = lists.entry(c.anchor).or_insert_with(|| {
                order.push(c.anchor);
                vec![Vec::new(); n]
            });
            entry[gi].push(c);
        }
    }
    let granular: Vec<bool> = groups.iter().map(|g| g.use_same_provider).collect();
    let mut generators: Vec<AnchorProduct> = order
        .iter()
        .filter_map(|anchor| lists.remove(anchor).map(|l| (*anchor, l)))
        .filter(|(_, l)| l.iter().all(|c| !c.is_empty()))
        .filter(|(_, l)| enough_overall_capacity(l, &found.shared_classes, fleet))
        .map(|(anchor, l)| AnchorProduct::new(anchor, l, fleet, rules, &granular))
        .collect();

    let mut out = Vec::new();
    let mut seen = Distinct::default();
    let cap = settings.max_candidates;
    let mut emit = |combo: Candidate| -> bool {
        seen.push_new(&mut out, combo);
        cap.is_none_or(|max| out.len() < max)
    };
    match settings.strategy {
        Strategy::DepthFirst => {
            'anchors: for g in &mut generators {
                while let Some(c) = g.next_candidate() {
                    if !emit(c) {
                        break 'anchors;
                    }
                }
            }
        }
        Strategy::BreadthFirst => {
            // One candidate from each anchor in turn.
            let mut active: Vec<&mut AnchorProduct> = generators.iter_mut().collect();
            'rounds: while !active.is_empty() {
                let mut i = 0;
                while i < active.len() {
                    match active[i].next_candidate() {
                        Some(c) => {
                            if !emit(c) {
                                break 'rounds;
                            }
                            i += 1;
                        }
                        None => {
                            active.remove(i);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Keeps candidates distinct by (parts in any order, mappings): each is
/// found by a hash and confirmed against the candidate kept, so no copy of
/// every candidate is made just to recognise duplicates (those copies were
/// a fifth of the merge's work on big answers).
#[derive(Default)]
struct Distinct {
    /// The first kept candidate with each hash.
    first: FxHashMap<u64, usize>,
    /// Further kept candidates whose hash an earlier one already had
    /// (distinct candidates with equal 64-bit hashes: practically never).
    more: Vec<(u64, usize)>,
    sorted: Vec<Part>,
    other: Vec<Part>,
}

impl Distinct {
    /// Appends `combo` to `out` unless an equal candidate is already there.
    fn push_new(&mut self, out: &mut Vec<Candidate>, combo: Candidate) {
        use std::hash::{Hash as _, Hasher as _};
        self.sorted.clear();
        self.sorted.extend_from_slice(&combo.parts);
        self.sorted.sort_unstable();
        let mut hasher = rustc_hash::FxHasher::default();
        self.sorted.hash(&mut hasher);
        combo.mappings.hash(&mut hasher);
        let hash = hasher.finish();
        let Some(&first) = self.first.get(&hash) else {
            self.first.insert(hash, out.len());
            out.push(combo);
            return;
        };
        let (sorted, other) = (&self.sorted, &mut self.other);
        let mut equal = |kept: &Candidate| {
            other.clear();
            other.extend_from_slice(&kept.parts);
            other.sort_unstable();
            other == sorted && kept.mappings == combo.mappings
        };
        let duplicate = out.get(first).is_some_and(&mut equal) || self.more.iter().any(|(h, i)| *h == hash && out.get(*i).is_some_and(&mut equal));
        if !duplicate {
            self.more.push((hash, out.len()));
            out.push(combo);
        }
    }
}

/// The bug 2160721 pre-check: for each class several groups ask for, the
/// providers of this anchor's candidates together must have room for the
/// total, else no combination can fit and the (possibly huge) product is
/// skipped. It never removes an anchor that has a valid combination.
fn enough_overall_capacity(lists: &[Vec<&GroupCandidate>], shared: &FxHashMap<ClassId, i64>, fleet: &Fleet) -> bool {
    for (class, wanted) in shared {
        let providers: FxHashSet<ProviderId> =
            lists.iter().flatten().flat_map(|c| c.parts.iter()).filter(|p| p.class == *class).map(|p| p.provider).collect();
        let room: i64 = providers.iter().filter_map(|p| fleet.inventories.get(&(*p, *class))).map(|i| i.headroom()).sum();
        if room < *wanted {
            return false;
        }
    }
    true
}

/// The product of one anchor's per-group lists, built depth first with
/// pruning, yielding only valid combinations, in product order.
struct AnchorProduct<'a> {
    anchor: ProviderId,
    lists: Vec<Vec<&'a GroupCandidate>>,
    fleet: &'a Fleet,
    rules: &'a MergeRules<'a>,
    granular: &'a [bool],
    /// Next index to try at each depth.
    cursor: Vec<usize>,
    depth: usize,
    /// Amount taken so far per (provider, class), with an undo log.
    taken: FxHashMap<(ProviderId, ClassId), i64>,
    undo: Vec<Vec<(ProviderId, ClassId)>>,
    /// Providers used by granular groups so far (isolate).
    granular_used: Vec<ProviderId>,
    done: bool,
}

impl<'a> AnchorProduct<'a> {
    fn new(
        anchor: ProviderId,
        lists: Vec<Vec<&'a GroupCandidate>>,
        fleet: &'a Fleet,
        rules: &'a MergeRules<'a>,
        granular: &'a [bool],
    ) -> Self {
        let n = lists.len();
        AnchorProduct {
            anchor,
            lists,
            fleet,
            rules,
            granular,
            cursor: vec![0; n],
            depth: 0,
            taken: FxHashMap::default(),
            undo: Vec::with_capacity(n),
            granular_used: Vec::with_capacity(n),
            done: n == 0,
        }
    }

    /// Adds `c` at the current depth unless it breaks capacity or isolate.
    fn try_push(&mut self, c: &GroupCandidate) -> bool {
        let d = self.depth;
        if self.rules.isolate && self.granular[d] && c.providers.iter().any(|p| self.granular_used.contains(p)) {
            return false;
        }
        for part in &c.parts {
            let total = self.taken.get(&(part.provider, part.class)).copied().unwrap_or(0) + part.amount;
            match self.fleet.inventories.get(&(part.provider, part.class)) {
                Some(inv) if inv.fits_total(total) => {}
                _ => return false,
            }
        }
        let mut log = Vec::with_capacity(c.parts.len());
        for part in &c.parts {
            *self.taken.entry((part.provider, part.class)).or_insert(0) += part.amount;
            log.push((part.provider, part.class));
        }
        self.undo.push(log);
        if self.rules.isolate && self.granular[d] {
            self.granular_used.extend(c.providers.iter().copied());
        }
        true
    }

    fn pop(&mut self) {
        let d = self.depth;
        let c = self.lists[d][self.cursor[d]];
        if let Some(log) = self.undo.pop() {
            for (key, part) in log.iter().zip(&c.parts) {
                if let Some(v) = self.taken.get_mut(key) {
                    *v -= part.amount;
                    if *v == 0 {
                        self.taken.remove(key);
                    }
                }
            }
        }
        if self.rules.isolate && self.granular[d] {
            let keep = self.granular_used.len().saturating_sub(c.providers.len());
            self.granular_used.truncate(keep);
        }
    }

    fn next_candidate(&mut self) -> Option<Candidate> {
        let n = self.lists.len();
        while !self.done {
            let d = self.depth;
            if self.cursor[d] >= self.lists[d].len() {
                if d == 0 {
                    self.done = true;
                    break;
                }
                self.cursor[d] = 0;
                self.depth -= 1;
                self.pop();
                self.cursor[self.depth] += 1;
                continue;
            }
            let c = self.lists[d][self.cursor[d]];
            if !self.try_push(c) {
                self.cursor[d] += 1;
                continue;
            }
            if d + 1 < n {
                self.depth += 1;
                continue;
            }
            let chosen: Vec<&GroupCandidate> = (0..n).map(|i| self.lists[i][self.cursor[i]]).collect();
            let valid = self.same_subtrees_hold(&chosen);
            let out = valid.then(|| consolidate(self.anchor, &chosen));
            self.pop();
            self.cursor[d] += 1;
            if out.is_some() {
                return out;
            }
        }
        None
    }

    /// Each same_subtree: the providers of its groups all descend from one
    /// of them.
    fn same_subtrees_hold(&self, chosen: &[&GroupCandidate]) -> bool {
        self.rules.same_subtrees.iter().all(|groups| {
            let mut providers: Vec<ProviderId> = groups.iter().flat_map(|g| chosen[*g].providers.iter().copied()).collect();
            providers.sort_unstable();
            providers.dedup();
            providers.len() <= 1 || providers.iter().any(|top| providers.iter().all(|p| descends_from(*p, *top, self.rules.trees)))
        })
    }
}

/// Whether `p` is `top` or below it.
fn descends_from(p: ProviderId, top: ProviderId, trees: &Trees) -> bool {
    let mut cur = Some(p);
    // A tree cannot be deeper than the providers it holds.
    let mut steps = trees.len() + 1;
    while let Some(id) = cur {
        if id == top {
            return true;
        }
        if steps == 0 {
            return false;
        }
        steps -= 1;
        cur = trees.get(&id).and_then(|t| t.parent);
    }
    false
}

/// One allocation request from one candidate per group: amounts of the
/// same (provider, class) added, mappings per group.
fn consolidate(anchor: ProviderId, chosen: &[&GroupCandidate]) -> Candidate {
    let mut parts: Vec<Part> = Vec::new();
    for c in chosen {
        for part in &c.parts {
            match parts.iter_mut().find(|p| p.provider == part.provider && p.class == part.class) {
                Some(existing) => existing.amount += part.amount,
                None => parts.push(*part),
            }
        }
    }
    Candidate { anchor, parts, mappings: chosen.iter().map(|c| c.providers.clone()).collect() }
}
