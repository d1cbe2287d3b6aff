//! `keelson.candidates.v2.AllocationCandidates`: a thin translation between
//! the protobuf messages and [`crate::store::Store`].

use keelson_proto::candidates::v2 as pb;
use tonic::{Request, Response, Status};

use crate::domain::explain::{Explained, Rule, TreeRule};
use crate::domain::fleet::Misfit;
use crate::domain::request::{self, GroupPolicy, RequestGroup};
use crate::domain::{self, Outcome};
use crate::store::Store;

pub struct AllocationCandidatesRpc {
    pub store: Store,
}

/// The service on `store`, with the message sizes of the process's
/// [`keelson_runtime::grpc::WireLimits`] (answers for big fleets are large;
/// tonic's 4 MiB default is not).
pub fn server(store: Store) -> pb::allocation_candidates_server::AllocationCandidatesServer<AllocationCandidatesRpc> {
    let limits = keelson_runtime::grpc::WireLimits::current();
    pb::allocation_candidates_server::AllocationCandidatesServer::new(AllocationCandidatesRpc { store })
        .max_encoding_message_size(limits.response_message)
        .max_decoding_message_size(limits.request_message)
}

fn group_from_pb(g: pb::RequestGroup) -> RequestGroup {
    RequestGroup {
        suffix: g.suffix,
        resources: g.resources.into_iter().map(|r| (r.resource_class, r.amount)).collect(),
        required: g.required_traits.into_iter().map(|a| a.names).collect(),
        forbidden: g.forbidden_traits,
        member_of: g.member_of.into_iter().map(|a| a.names).collect(),
        forbidden_aggregates: g.forbidden_aggregates,
        in_tree: g.in_tree,
        use_same_provider: g.use_same_provider,
    }
}

pub fn request_from_pb(r: pb::GetAllocationCandidatesRequest) -> request::Request {
    let group_policy = match pb::GroupPolicy::try_from(r.group_policy) {
        Ok(pb::GroupPolicy::None) => Some(GroupPolicy::None),
        Ok(pb::GroupPolicy::Isolate) => Some(GroupPolicy::Isolate),
        _ => None,
    };
    request::Request {
        groups: r.groups.into_iter().map(group_from_pb).collect(),
        group_policy,
        root_required: r.root_required_traits,
        root_forbidden: r.root_forbidden_traits,
        same_subtrees: r.same_subtrees.into_iter().map(|s| s.suffixes).collect(),
        limit: (r.limit > 0).then_some(r.limit as usize),
        nested_aware: r.nested_aware,
        allow_resourceless_groups: r.allow_resourceless_groups,
        all_classes_in_summaries: r.all_resource_classes_in_summaries,
        traits_in_summaries: r.traits_in_summaries,
    }
}

/// Table positions by id: a vector over the ids' range when they are dense
/// enough (database ids mostly are), a hash map for the others. A large
/// answer looks up a provider hundreds of thousands of times.
struct IdIndex {
    min: i64,
    /// `u32::MAX`: not in the table yet.
    slots: Vec<u32>,
    others: rustc_hash::FxHashMap<i64, u32>,
}

impl IdIndex {
    /// For the ids `ids` (the ones expected; others still work).
    fn over(ids: impl Iterator<Item = i64>) -> Self {
        let (mut min, mut max, mut count) = (i64::MAX, i64::MIN, 0u64);
        for id in ids {
            min = min.min(id);
            max = max.max(id);
            count += 1;
        }
        let span = u64::try_from(max.saturating_sub(min)).ok().and_then(|s| s.checked_add(1));
        // At most a few empty slots per id.
        let dense = span.filter(|span| count > 0 && *span <= 4 * count + 1024);
        let slots = match dense.and_then(|span| usize::try_from(span).ok()) {
            Some(len) => vec![u32::MAX; len],
            None => Vec::new(),
        };
        IdIndex { min, slots, others: rustc_hash::FxHashMap::default() }
    }

    fn slot(&self, id: i64) -> Option<usize> {
        let at = usize::try_from(id.checked_sub(self.min)?).ok()?;
        (at < self.slots.len()).then_some(at)
    }

    fn get(&self, id: i64) -> Option<u32> {
        match self.slot(id) {
            Some(at) => Some(self.slots[at]).filter(|i| *i != u32::MAX),
            None => self.others.get(&id).copied(),
        }
    }

    fn insert(&mut self, id: i64, i: u32) {
        match self.slot(id) {
            Some(at) => self.slots[at] = i,
            None => {
                self.others.insert(id, i);
            }
        }
    }
}

/// Each distinct id once, in order of first use, with its index in the
/// answer's table of names.
struct Table<F> {
    names: Vec<String>,
    index: IdIndex,
    name: F,
}

impl<F: Fn(i64) -> String> Table<F> {
    fn new(ids: impl Iterator<Item = i64>, name: F) -> Self {
        Table { names: Vec::new(), index: IdIndex::over(ids), name }
    }

    fn index_of(&mut self, id: i64) -> u32 {
        if let Some(i) = self.index.get(id) {
            return i;
        }
        // A table never holds 2^32 names (an answer that large could not be
        // sent); saturate rather than wrap if it ever did (u32::MAX is then
        // never remembered, only named again).
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push((self.name)(id));
        self.index.insert(id, i);
        i
    }
}

/// A count in the packed columns. Each counts entries of the answer's
/// tables, which never reach 2^32 (see [`Table::index_of`]); saturates.
fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The answer as tables and packed columns (see the proto): providers,
/// classes and traits named once each.
pub fn outcome_to_pb(o: &Outcome) -> pb::GetAllocationCandidatesResponse {
    let mut providers = Table::new(o.trees.keys().copied(), |p: domain::fleet::ProviderId| o.uuid(p).to_string());
    let mut classes =
        Table::new(o.class_names.keys().copied(), |c: domain::fleet::ClassId| o.class_name(c).to_string());
    let mut traits = Table::new(o.trait_names.keys().copied(), |t: domain::fleet::TraitId| {
        o.trait_names.get(&t).cloned().unwrap_or_default()
    });
    let n = o.candidates.len();
    let mut ar = pb::AllocationRequests {
        allocation_counts: Vec::with_capacity(n),
        providers: Vec::with_capacity(3 * n),
        class_counts: Vec::with_capacity(3 * n),
        classes: Vec::with_capacity(4 * n),
        amounts: Vec::with_capacity(4 * n),
        mapping_counts: Vec::with_capacity(o.suffixes.len() * n),
        mapping_providers: Vec::with_capacity(o.suffixes.len() * n),
    };
    // A candidate's providers in order of first use (its allocations are
    // grouped by provider in that order, as upstream shows them).
    let mut order: Vec<domain::fleet::ProviderId> = Vec::new();
    for c in &o.candidates {
        order.clear();
        for part in &c.parts {
            if !order.contains(&part.provider) {
                order.push(part.provider);
            }
        }
        ar.allocation_counts.push(count_u32(order.len()));
        for p in &order {
            ar.providers.push(providers.index_of(*p));
            let mut count = 0u32;
            for part in c.parts.iter().filter(|part| part.provider == *p) {
                ar.classes.push(classes.index_of(part.class));
                ar.amounts.push(part.amount);
                count += 1;
            }
            ar.class_counts.push(count);
        }
        // Exactly one entry per suffix, so that readers stay aligned.
        for i in 0..o.suffixes.len() {
            let m = c.mappings.get(i).map(Vec::as_slice).unwrap_or(&[]);
            ar.mapping_counts.push(count_u32(m.len()));
            ar.mapping_providers.extend(m.iter().map(|p| providers.index_of(*p)));
        }
    }
    let mut ps = pb::ProviderSummaries::default();
    for s in &o.summaries {
        ps.providers.push(providers.index_of(s.provider));
        ps.parents.push(s.parent.map(|p| providers.index_of(p) + 1).unwrap_or(0));
        ps.roots.push(providers.index_of(s.root));
        ps.resource_counts.push(count_u32(s.resources.len()));
        for (class, capacity, used) in &s.resources {
            ps.resource_classes.push(classes.index_of(*class));
            ps.capacities.push(*capacity);
            ps.used.push(*used);
        }
        ps.trait_counts.push(count_u32(s.traits.len()));
        ps.traits.extend(s.traits.iter().map(|t| traits.index_of(*t)));
    }
    pb::GetAllocationCandidatesResponse {
        provider_uuids: providers.names,
        resource_classes: classes.names,
        // The suffixes only mean something when candidates map them.
        group_suffixes: if n == 0 { Vec::new() } else { o.suffixes.clone() },
        trait_names: traits.names,
        allocation_requests: Some(ar),
        provider_summaries: Some(ps),
    }
}

/// A provider's rule with its names.
fn rule_to_pb(e: &Explained, rule: &Rule) -> pb::ExplainRule {
    let mut out = pb::ExplainRule { rule: rule.kind().to_string(), ..Default::default() };
    match rule {
        Rule::NoInventory { class } => out.resource_class = e.class_name(*class).to_string(),
        Rule::Inventory { class, amount, misfit } => {
            out.resource_class = e.class_name(*class).to_string();
            out.amount = *amount;
            out.value = match misfit {
                Misfit::StepSize(v) | Misfit::MinUnit(v) | Misfit::MaxUnit(v) => *v,
                Misfit::Capacity { free } => *free,
            };
        }
        Rule::RequiredTraits { any_of } => out.traits = any_of.iter().map(|t| e.trait_name(*t).to_string()).collect(),
        Rule::ForbiddenTrait { name } | Rule::RootRequired { name } | Rule::RootForbidden { name } => {
            out.traits = vec![e.trait_name(*name).to_string()]
        }
        Rule::InTree
        | Rule::InTreeUnknown
        | Rule::MemberOfUnknown
        | Rule::MemberOf
        | Rule::ForbiddenAggregate
        | Rule::IncompleteTree
        | Rule::ResourcelessWithoutFilter => {}
    }
    out
}

/// A tree's rule with its names.
fn tree_rule_to_pb(e: &Explained, rule: &TreeRule) -> pb::ExplainRule {
    let suffix = |g: usize| e.explanation.groups.get(g).map(|g| g.suffix.clone()).unwrap_or_default();
    let mut out = pb::ExplainRule { rule: rule.kind().to_string(), ..Default::default() };
    match rule {
        TreeRule::GroupMissing { group } | TreeRule::Isolate { group } => out.group = suffix(*group),
        TreeRule::OverallCapacity { class, wanted, room } => {
            out.resource_class = e.class_name(*class).to_string();
            out.amount = *wanted;
            out.value = *room;
        }
        TreeRule::Capacity { provider, class } => {
            out.resource_class = e.class_name(*class).to_string();
            out.provider = e.uuid(*provider).to_string();
        }
        TreeRule::SameSubtree { index } => out.index = count_u32(*index),
        TreeRule::Duplicate | TreeRule::MaxCandidates | TreeRule::OneProviderPerTree | TreeRule::Limit => {}
    }
    out
}

/// An explanation with uuids and names.
pub fn explained_to_pb(e: &Explained) -> pb::ExplainResponse {
    let x = &e.explanation;
    let uuids = |ids: &[domain::fleet::ProviderId]| ids.iter().map(|p| e.uuid(*p).to_string()).collect();
    pb::ExplainResponse {
        groups: x
            .groups
            .iter()
            .map(|g| pb::GroupExplanation {
                suffix: g.suffix.clone(),
                searched: g.searched,
                providers: count_u32(g.providers),
                survivors: uuids(&g.survivors),
                excluded: g
                    .excluded
                    .iter()
                    .map(|(p, rule)| pb::Exclusion {
                        provider: e.uuid(*p).to_string(),
                        rule: Some(rule_to_pb(e, rule)),
                    })
                    .collect(),
                tallies: g
                    .tallies()
                    .iter()
                    .map(|t| pb::RuleTally {
                        rule: Some(rule_to_pb(e, &t.rule)),
                        providers: count_u32(t.providers),
                        largest_free: t.largest_free,
                    })
                    .collect(),
            })
            .collect(),
        trees: x
            .trees
            .iter()
            .map(|(root, dropped)| pb::TreeOutcome {
                root: e.uuid(*root).to_string(),
                dropped: dropped.as_ref().map(|r| tree_rule_to_pb(e, r)),
            })
            .collect(),
        allocation_requests: count_u32(x.candidates),
        providers_in_answer: uuids(&x.providers_in_answer),
    }
}

#[tonic::async_trait]
impl pb::allocation_candidates_server::AllocationCandidates for AllocationCandidatesRpc {
    async fn explain(
        &self,
        req: Request<pb::GetAllocationCandidatesRequest>,
    ) -> Result<Response<pb::ExplainResponse>, Status> {
        let request = request_from_pb(req.into_inner());
        let explained = self.store.explain(&request).await?;
        Ok(Response::new(explained_to_pb(&explained)))
    }

    async fn get_allocation_candidates(
        &self,
        req: Request<pb::GetAllocationCandidatesRequest>,
    ) -> Result<Response<pb::GetAllocationCandidatesResponse>, Status> {
        let request = request_from_pb(req.into_inner());
        let outcome = self.store.allocation_candidates(&request).await?;
        let answer = outcome_to_pb(&outcome);
        // A large outcome is tens of thousands of small allocations: free
        // them on a blocking thread while the answer is sent, not before.
        if outcome.candidates.len() > 1000 {
            tokio::task::spawn_blocking(move || drop(outcome));
        }
        Ok(Response::new(answer))
    }
}

/// Reads a gRPC answer back into names, as a client does (the tests check
/// that the columns say exactly what the domain answered).
#[cfg(test)]
pub fn pb_to_named(r: &pb::GetAllocationCandidatesResponse) -> crate::domain::NamedOutcome {
    use crate::domain::{NamedOutcome, NamedRequest, ProviderSummary};
    let name = |table: &[String], i: u32| table[i as usize].clone();
    let mut out = NamedOutcome::default();
    let ar = r.allocation_requests.clone().unwrap_or_default();
    let (mut p, mut c, mut m) = (0usize, 0usize, 0usize);
    let mut mp = 0usize;
    for count in &ar.allocation_counts {
        let mut allocations = Vec::new();
        for _ in 0..*count {
            let provider = name(&r.provider_uuids, ar.providers[p]);
            let mut resources = Vec::new();
            for _ in 0..ar.class_counts[p] {
                resources.push((name(&r.resource_classes, ar.classes[c]), ar.amounts[c]));
                c += 1;
            }
            p += 1;
            allocations.push((provider, resources));
        }
        let mut mappings = Vec::new();
        for suffix in &r.group_suffixes {
            let mut providers = Vec::new();
            for _ in 0..ar.mapping_counts[m] {
                providers.push(name(&r.provider_uuids, ar.mapping_providers[mp]));
                mp += 1;
            }
            m += 1;
            mappings.push((suffix.clone(), providers));
        }
        out.allocation_requests.push(NamedRequest { allocations, mappings });
    }
    let ps = r.provider_summaries.clone().unwrap_or_default();
    let (mut res, mut tr) = (0usize, 0usize);
    for (i, provider) in ps.providers.iter().enumerate() {
        let mut resources = Vec::new();
        for _ in 0..ps.resource_counts[i] {
            resources.push((name(&r.resource_classes, ps.resource_classes[res]), ps.capacities[res], ps.used[res]));
            res += 1;
        }
        let mut traits = Vec::new();
        for _ in 0..ps.trait_counts.get(i).copied().unwrap_or(0) {
            traits.push(name(&r.trait_names, ps.traits[tr]));
            tr += 1;
        }
        out.provider_summaries.push(ProviderSummary {
            uuid: name(&r.provider_uuids, *provider),
            parent_uuid: (ps.parents[i] > 0).then(|| name(&r.provider_uuids, ps.parents[i] - 1)),
            root_uuid: name(&r.provider_uuids, ps.roots[i]),
            resources,
            traits,
        });
    }
    out
}
