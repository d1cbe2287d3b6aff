//! `keelson.candidates.v1.AllocationCandidates`: a thin translation between
//! the protobuf messages and [`crate::store::Store`].

use keelson_proto::candidates::v1 as pb;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::domain::request::{self, GroupPolicy, RequestGroup};
use crate::domain::Outcome;
use crate::store::Store;

pub struct AllocationCandidatesRpc {
    pub store: Store,
}

pub fn server(store: Store) -> pb::allocation_candidates_server::AllocationCandidatesServer<AllocationCandidatesRpc> {
    pb::allocation_candidates_server::AllocationCandidatesServer::new(AllocationCandidatesRpc { store })
        // Answers for big fleets are large; the defaults (4 MiB) are not.
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(64 * 1024 * 1024)
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

/// Each distinct name once, in order of first use, with its index.
#[derive(Default)]
struct Table {
    names: Vec<String>,
    index: rustc_hash::FxHashMap<String, u32>,
}

impl Table {
    fn index_of(&mut self, name: String) -> u32 {
        if let Some(i) = self.index.get(&name) {
            return *i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }
}

pub fn outcome_to_pb(o: Outcome) -> pb::GetAllocationCandidatesResponse {
    let mut providers = Table::default();
    let mut classes = Table::default();
    let group_suffixes: Vec<String> =
        o.allocation_requests.first().map(|a| a.mappings.iter().map(|(suffix, _)| suffix.clone()).collect()).unwrap_or_default();
    let allocation_requests = o
        .allocation_requests
        .into_iter()
        .map(|a| pb::AllocationRequest {
            allocations: a
                .allocations
                .into_iter()
                .map(|(provider_uuid, resources)| pb::ProviderAllocation {
                    provider: providers.index_of(provider_uuid),
                    resources: resources
                        .into_iter()
                        .map(|(class, amount)| pb::ClassAmount { resource_class: classes.index_of(class), amount })
                        .collect(),
                })
                .collect(),
            mappings: a
                .mappings
                .into_iter()
                .map(|(_, uuids)| pb::GroupProviders { providers: uuids.into_iter().map(|u| providers.index_of(u)).collect() })
                .collect(),
        })
        .collect();
    pb::GetAllocationCandidatesResponse {
        allocation_requests,
        provider_summaries: o
            .provider_summaries
            .into_iter()
            .map(|s| pb::ProviderSummary {
                uuid: s.uuid,
                parent_provider_uuid: s.parent_uuid,
                root_provider_uuid: s.root_uuid,
                resources: s
                    .resources
                    .into_iter()
                    .map(|(resource_class, capacity, used)| pb::ResourceUsage { resource_class, capacity, used })
                    .collect(),
                traits: s.traits,
            })
            .collect(),
        provider_uuids: providers.names,
        resource_classes: classes.names,
        group_suffixes,
    }
}

#[tonic::async_trait]
impl pb::allocation_candidates_server::AllocationCandidates for AllocationCandidatesRpc {
    async fn get_allocation_candidates(
        &self,
        req: Request<pb::GetAllocationCandidatesRequest>,
    ) -> Result<Response<pb::GetAllocationCandidatesResponse>, Status> {
        let ctx = keelson_common::RequestContext::from_metadata(req.metadata());
        let span =
            tracing::debug_span!("rpc", method = "GetAllocationCandidates", request_id = %ctx.request_id, trace_id = %ctx.trace_id());
        let request = request_from_pb(req.into_inner());
        let outcome = self.store.allocation_candidates(&request).instrument(span).await?;
        Ok(Response::new(outcome_to_pb(outcome)))
    }
}
