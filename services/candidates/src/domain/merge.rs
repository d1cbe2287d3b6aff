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

use super::explain::{Observer, TreeRule};
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
/// `max_allocation_candidates`. `obs` hears why each tree without a
/// candidate has none.
pub fn merge<O: Observer>(
    found: &Found,
    fleet: &Fleet,
    rules: &MergeRules,
    settings: &Settings,
    obs: &mut O,
) -> Vec<Candidate> {
    let groups = &found.groups;
    let n = groups.len();
    if n == 0 {
        return Vec::new();
    }
    // Anchors in order of first appearance; every group's candidates of one
    // anchor made one contiguous run (a stable sort keeps their order), so
    // no anchor needs lists of its own.
    let mut order: Vec<ProviderId> = Vec::new();
    let mut position: FxHashMap<ProviderId, usize> = FxHashMap::default();
    let total: usize = groups.iter().map(|g| g.candidates.len()).sum();
    let mut entries: Vec<(usize, usize, &GroupCandidate)> = Vec::with_capacity(total);
    for (gi, g) in groups.iter().enumerate() {
        for c in &g.candidates {
            let at = *position.entry(c.anchor).or_insert_with(|| {
                order.push(c.anchor);
                order.len() - 1
            });
            entries.push((at, gi, c));
        }
    }
    entries.sort_by_key(|(at, gi, _)| (*at, *gi));
    let cands: Vec<&GroupCandidate> = entries.iter().map(|(_, _, c)| *c).collect();
    // runs[a * n + g]: where anchor a's candidates for group g lie in `cands`.
    let mut runs: Vec<(usize, usize)> = vec![(0, 0); order.len() * n];
    for (i, (at, gi, _)) in entries.iter().enumerate() {
        let run = &mut runs[at * n + gi];
        if run.1 == run.0 {
            *run = (i, i + 1);
        } else {
            run.1 = i + 1;
        }
    }
    drop(entries);
    let granular: Vec<bool> = groups.iter().map(|g| g.use_same_provider).collect();
    let mut anchors: Vec<(ProviderId, &[(usize, usize)])> = Vec::with_capacity(order.len());
    for (anchor, r) in order.iter().zip(runs.chunks_exact(n)) {
        obs.tree_considered(*anchor);
        if let Some(group) = r.iter().position(|(start, end)| end <= start) {
            obs.tree_dropped(*anchor, TreeRule::GroupMissing { group });
        } else if let Some(short) = overall_capacity_short(&cands, r, &found.shared_classes, fleet) {
            obs.tree_dropped(*anchor, short);
        } else {
            anchors.push((*anchor, r));
        }
    }

    let mut out = Vec::new();
    let mut seen = Distinct::default();
    let cap = settings.max_candidates;
    // Trees with a candidate kept (only for an explanation).
    let mut kept: FxHashSet<ProviderId> = FxHashSet::default();
    // Keeps `combo` unless a duplicate; false once the cap is reached.
    let mut emit = |combo: Candidate, kept: &mut FxHashSet<ProviderId>| -> bool {
        let anchor = combo.anchor;
        if seen.push_new(&mut out, combo) && O::ACTIVE {
            kept.insert(anchor);
        }
        cap.is_none_or(|max| out.len() < max)
    };
    let mut capped = false;
    match settings.strategy {
        Strategy::DepthFirst => {
            // One working state, reset for each anchor in turn.
            let mut product = AnchorProduct::new(&cands, fleet, rules, &granular, O::ACTIVE);
            'anchors: for (anchor, r) in &anchors {
                product.start(*anchor, r);
                while let Some(c) = product.next_candidate() {
                    if !emit(c, &mut kept) {
                        capped = true;
                        break 'anchors;
                    }
                }
                if O::ACTIVE && !kept.contains(anchor) {
                    obs.tree_dropped(*anchor, product.first_broken.unwrap_or(TreeRule::Duplicate));
                }
            }
        }
        Strategy::BreadthFirst => {
            // One candidate from each anchor in turn.
            let mut generators: Vec<AnchorProduct> = anchors
                .iter()
                .map(|(anchor, r)| {
                    let mut p = AnchorProduct::new(&cands, fleet, rules, &granular, O::ACTIVE);
                    p.start(*anchor, r);
                    p
                })
                .collect();
            let mut active: Vec<&mut AnchorProduct> = generators.iter_mut().collect();
            'rounds: while !active.is_empty() {
                let mut i = 0;
                while i < active.len() {
                    match active[i].next_candidate() {
                        Some(c) => {
                            if !emit(c, &mut kept) {
                                capped = true;
                                break 'rounds;
                            }
                            i += 1;
                        }
                        None => {
                            let done = active.remove(i);
                            if O::ACTIVE && !kept.contains(&done.anchor) {
                                obs.tree_dropped(done.anchor, done.first_broken.unwrap_or(TreeRule::Duplicate));
                            }
                        }
                    }
                }
            }
        }
    }
    if O::ACTIVE && capped {
        // The first rule recorded wins: this names the trees the cap left
        // unfinished without a candidate.
        for (anchor, _) in &anchors {
            if !kept.contains(anchor) {
                obs.tree_dropped(*anchor, TreeRule::MaxCandidates);
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
    /// Appends `combo` to `out` unless an equal candidate is already there
    /// (true: appended).
    fn push_new(&mut self, out: &mut Vec<Candidate>, combo: Candidate) -> bool {
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
            return true;
        };
        let (sorted, other) = (&self.sorted, &mut self.other);
        let mut equal = |kept: &Candidate| {
            other.clear();
            other.extend_from_slice(&kept.parts);
            other.sort_unstable();
            other == sorted && kept.mappings == combo.mappings
        };
        let duplicate = out.get(first).is_some_and(&mut equal)
            || self.more.iter().any(|(h, i)| *h == hash && out.get(*i).is_some_and(&mut equal));
        if !duplicate {
            self.more.push((hash, out.len()));
            out.push(combo);
        }
        !duplicate
    }
}

/// The bug 2160721 pre-check: for each class several groups ask for, the
/// providers of this anchor's candidates together must have room for the
/// total, else no combination can fit and the (possibly huge) product is
/// skipped. It never removes an anchor that has a valid combination. Some:
/// the class short of room.
fn overall_capacity_short(
    cands: &[&GroupCandidate],
    runs: &[(usize, usize)],
    shared: &FxHashMap<ClassId, i64>,
    fleet: &Fleet,
) -> Option<TreeRule> {
    let mut providers: Vec<ProviderId> = Vec::new();
    for (class, wanted) in shared {
        providers.clear();
        for (start, end) in runs {
            providers.extend(
                cands[*start..*end]
                    .iter()
                    .flat_map(|c| c.parts.iter())
                    .filter(|p| p.class == *class)
                    .map(|p| p.provider),
            );
        }
        providers.sort_unstable();
        providers.dedup();
        let room: i64 =
            providers.iter().filter_map(|p| fleet.inventories.get(&(*p, *class))).map(|i| i.headroom()).sum();
        if room < *wanted {
            return Some(TreeRule::OverallCapacity { class: *class, wanted: *wanted, room });
        }
    }
    None
}

/// The product of one anchor's per-group candidates, built depth first with
/// pruning, yielding only valid combinations, in product order. Its working
/// state is a few short vectors, reused from one anchor to the next.
struct AnchorProduct<'a> {
    anchor: ProviderId,
    /// Every group candidate, by anchor and group (see `merge`).
    cands: &'a [&'a GroupCandidate],
    /// This anchor's run in `cands` for each group.
    runs: &'a [(usize, usize)],
    fleet: &'a Fleet,
    rules: &'a MergeRules<'a>,
    granular: &'a [bool],
    /// Next index (into `cands`) to try at each depth.
    cursor: Vec<usize>,
    depth: usize,
    /// Amount taken so far per (provider, class): a combination touches a
    /// handful, so a short list beats a map.
    taken: Vec<(ProviderId, ClassId, i64)>,
    /// Providers used by granular groups so far (isolate).
    granular_used: Vec<ProviderId>,
    chosen: Vec<&'a GroupCandidate>,
    done: bool,
    /// Whether to remember `first_broken` (for an explanation).
    track: bool,
    /// The first rule a combination of this anchor broke.
    first_broken: Option<TreeRule>,
}

impl<'a> AnchorProduct<'a> {
    fn new(
        cands: &'a [&'a GroupCandidate],
        fleet: &'a Fleet,
        rules: &'a MergeRules<'a>,
        granular: &'a [bool],
        track: bool,
    ) -> Self {
        let n = granular.len();
        AnchorProduct {
            anchor: 0,
            cands,
            runs: &[],
            fleet,
            rules,
            granular,
            cursor: Vec::with_capacity(n),
            depth: 0,
            taken: Vec::new(),
            granular_used: Vec::with_capacity(n),
            chosen: Vec::with_capacity(n),
            done: true,
            track,
            first_broken: None,
        }
    }

    /// Starts over with another anchor and its runs (one per group).
    fn start(&mut self, anchor: ProviderId, runs: &'a [(usize, usize)]) {
        self.anchor = anchor;
        self.runs = runs;
        self.cursor.clear();
        self.cursor.extend(runs.iter().map(|(start, _)| *start));
        self.depth = 0;
        self.taken.clear();
        self.granular_used.clear();
        self.done = runs.is_empty();
        self.first_broken = None;
    }

    fn broke(&mut self, rule: TreeRule) {
        if self.track && self.first_broken.is_none() {
            self.first_broken = Some(rule);
        }
    }

    /// Adds `c` at the current depth unless it breaks capacity or isolate.
    fn try_push(&mut self, c: &GroupCandidate) -> bool {
        let d = self.depth;
        if self.rules.isolate && self.granular[d] && c.providers.iter().any(|p| self.granular_used.contains(p)) {
            self.broke(TreeRule::Isolate { group: d });
            return false;
        }
        for part in &c.parts {
            let before =
                self.taken.iter().find(|(p, class, _)| *p == part.provider && *class == part.class).map_or(0, |t| t.2);
            match self.fleet.inventories.get(&(part.provider, part.class)) {
                Some(inv) if inv.fits_total(before.saturating_add(part.amount)) => {}
                _ => {
                    self.broke(TreeRule::Capacity { provider: part.provider, class: part.class });
                    return false;
                }
            }
        }
        for part in &c.parts {
            match self.taken.iter_mut().find(|(p, class, _)| *p == part.provider && *class == part.class) {
                Some(t) => t.2 = t.2.saturating_add(part.amount),
                None => self.taken.push((part.provider, part.class, part.amount)),
            }
        }
        if self.rules.isolate && self.granular[d] {
            self.granular_used.extend(c.providers.iter().copied());
        }
        true
    }

    /// Takes back the candidate at the current depth (what `try_push` added).
    fn pop(&mut self) {
        let d = self.depth;
        let c = self.cands[self.cursor[d]];
        for part in &c.parts {
            if let Some(i) = self.taken.iter().position(|(p, class, _)| *p == part.provider && *class == part.class) {
                self.taken[i].2 -= part.amount;
                if self.taken[i].2 == 0 {
                    self.taken.swap_remove(i);
                }
            }
        }
        if self.rules.isolate && self.granular[d] {
            let keep = self.granular_used.len().saturating_sub(c.providers.len());
            self.granular_used.truncate(keep);
        }
    }

    fn next_candidate(&mut self) -> Option<Candidate> {
        let n = self.runs.len();
        while !self.done {
            let d = self.depth;
            if self.cursor[d] >= self.runs[d].1 {
                if d == 0 {
                    self.done = true;
                    break;
                }
                self.cursor[d] = self.runs[d].0;
                self.depth -= 1;
                self.pop();
                self.cursor[self.depth] += 1;
                continue;
            }
            let c = self.cands[self.cursor[d]];
            if !self.try_push(c) {
                self.cursor[d] += 1;
                continue;
            }
            if d + 1 < n {
                self.depth += 1;
                continue;
            }
            self.chosen.clear();
            self.chosen.extend(self.cursor.iter().map(|i| self.cands[*i]));
            let valid = match self.broken_same_subtree(&self.chosen) {
                None => true,
                Some(index) => {
                    self.broke(TreeRule::SameSubtree { index });
                    false
                }
            };
            let out = valid.then(|| consolidate(self.anchor, &self.chosen));
            self.pop();
            self.cursor[d] += 1;
            if out.is_some() {
                return out;
            }
        }
        None
    }

    /// Each same_subtree: the providers of its groups all descend from one
    /// of them. Some: the index of the first that does not hold.
    fn broken_same_subtree(&self, chosen: &[&GroupCandidate]) -> Option<usize> {
        self.rules.same_subtrees.iter().position(|groups| {
            let mut providers: Vec<ProviderId> =
                groups.iter().flat_map(|g| chosen[*g].providers.iter().copied()).collect();
            providers.sort_unstable();
            providers.dedup();
            let holds = providers.len() <= 1
                || providers.iter().any(|top| providers.iter().all(|p| descends_from(*p, *top, self.rules.trees)));
            !holds
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
    let mut parts: Vec<Part> = Vec::with_capacity(chosen.iter().map(|c| c.parts.len()).sum());
    for c in chosen {
        for part in &c.parts {
            match parts.iter_mut().find(|p| p.provider == part.provider && p.class == part.class) {
                Some(existing) => existing.amount = existing.amount.saturating_add(part.amount),
                None => parts.push(*part),
            }
        }
    }
    Candidate { anchor, parts, mappings: chosen.iter().map(|c| c.providers.clone()).collect() }
}
