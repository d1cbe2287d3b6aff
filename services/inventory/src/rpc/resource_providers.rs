//! `keelson.placement.v1.ResourceProviders`.

use keelson_proto::placement::v1 as pb;
use tonic::{Request, Response, Status};

use super::timestamp;
use crate::store::fleet::FleetFilter;
use crate::store::providers::{Provider, ProviderFilter};
use crate::store::Store;

pub struct ResourceProvidersRpc {
    pub store: Store,
}

/// Generations are never negative; a corrupt value reads as 0.
fn generation(g: i64) -> u32 {
    u32::try_from(g).unwrap_or(0)
}

fn to_pb(rp: Provider) -> pb::ResourceProvider {
    let last_modified = timestamp(rp.row.last_modified());
    pb::ResourceProvider {
        uuid: rp.row.uuid,
        name: rp.row.name.unwrap_or_default(),
        generation: generation(rp.row.generation),
        parent_provider_uuid: rp.parent_uuid.unwrap_or_default(),
        root_provider_uuid: rp.root_uuid,
        last_modified,
    }
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn filter_from(r: &pb::ListResourceProvidersRequest) -> ProviderFilter {
    ProviderFilter {
        uuid: r.uuid.clone(),
        name: r.name.clone(),
        member_of: r.member_of.iter().map(|a| a.names.clone()).collect(),
        forbidden_aggregates: r.forbidden_aggregates.clone(),
        resources: r.resources.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        in_tree: r.in_tree.clone(),
        required_traits: r.required_traits.iter().map(|a| a.names.clone()).collect(),
        forbidden_traits: r.forbidden_traits.clone(),
    }
}

fn traits_to_pb(t: crate::store::traits::ProviderTraits) -> pb::ProviderTraits {
    let last_modified = timestamp(t.traits.iter().filter_map(|t| t.last_modified()).max());
    pb::ProviderTraits {
        traits: t.traits.into_iter().map(|t| t.name).collect(),
        resource_provider_generation: generation(t.generation),
        last_modified,
    }
}

fn fleet_to_pb(page: crate::store::fleet::FleetPage) -> pb::ListFleetResponse {
    pb::ListFleetResponse {
        providers: page
            .providers
            .into_iter()
            .map(|p| pb::FleetProvider {
                uuid: p.uuid,
                name: p.name,
                generation: generation(p.generation),
                parent_provider_uuid: p.parent_uuid.unwrap_or_default(),
                root_provider_uuid: p.root_uuid,
                inventories: p
                    .inventories
                    .into_iter()
                    .map(|i| pb::FleetInventory {
                        capacity: i.capacity(),
                        resource_class: i.resource_class,
                        total: i.total,
                        reserved: i.reserved,
                        min_unit: i.min_unit,
                        max_unit: i.max_unit,
                        step_size: i.step_size,
                        allocation_ratio: i.allocation_ratio,
                    })
                    .collect(),
                usages: p.usages.into_iter().collect(),
                traits: p.traits,
                aggregates: p.aggregates,
                matched: p.matched,
            })
            .collect(),
        next_marker: page.next_marker.unwrap_or_default(),
        total: page.total,
        matched: page.matched,
        resource_classes: page.choices.resource_classes,
        traits: page.choices.traits,
        aggregates: page.choices.aggregates,
    }
}

fn aggregates_to_pb(a: crate::store::aggregates::ProviderAggregates) -> pb::ProviderAggregates {
    pb::ProviderAggregates {
        aggregates: a.aggregates,
        resource_provider_generation: generation(a.generation),
        last_modified: None,
    }
}

#[tonic::async_trait]
impl pb::resource_providers_server::ResourceProviders for ResourceProvidersRpc {
    async fn list_resource_providers(
        &self,
        req: Request<pb::ListResourceProvidersRequest>,
    ) -> Result<Response<pb::ListResourceProvidersResponse>, Status> {
        let filter = filter_from(req.get_ref());
        let rps = self.store.list_resource_providers(&filter).await?;
        Ok(Response::new(pb::ListResourceProvidersResponse {
            resource_providers: rps.into_iter().map(to_pb).collect(),
        }))
    }

    async fn get_resource_provider(
        &self,
        req: Request<pb::GetResourceProviderRequest>,
    ) -> Result<Response<pb::ResourceProvider>, Status> {
        let rp = self.store.get_resource_provider(&req.get_ref().uuid).await?;
        Ok(Response::new(to_pb(rp)))
    }

    async fn create_resource_provider(
        &self,
        req: Request<pb::CreateResourceProviderRequest>,
    ) -> Result<Response<pb::ResourceProvider>, Status> {
        let r = req.get_ref();
        let rp = self
            .store
            .create_resource_provider(non_empty(&r.uuid), &r.name, non_empty(&r.parent_provider_uuid))
            .await?;
        Ok(Response::new(to_pb(rp)))
    }

    async fn update_resource_provider(
        &self,
        req: Request<pb::UpdateResourceProviderRequest>,
    ) -> Result<Response<pb::ResourceProvider>, Status> {
        let r = req.get_ref();
        // Present but empty: un-parent.
        let parent = r.parent_provider_uuid.as_deref().map(non_empty);
        let rp = self.store.update_resource_provider(&r.uuid, &r.name, parent, r.allow_reparent).await?;
        Ok(Response::new(to_pb(rp)))
    }

    async fn delete_resource_provider(
        &self,
        req: Request<pb::DeleteResourceProviderRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        self.store.delete_resource_provider(&req.get_ref().uuid).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn get_provider_traits(&self, req: Request<pb::ProviderRef>) -> Result<Response<pb::ProviderTraits>, Status> {
        let t = self.store.get_provider_traits(&req.get_ref().uuid).await?;
        Ok(Response::new(traits_to_pb(t)))
    }

    async fn set_provider_traits(
        &self,
        req: Request<pb::SetProviderTraitsRequest>,
    ) -> Result<Response<pb::ProviderTraits>, Status> {
        let r = req.get_ref();
        let t = self.store.set_provider_traits(&r.uuid, r.resource_provider_generation.into(), &r.traits).await?;
        Ok(Response::new(traits_to_pb(t)))
    }

    async fn delete_provider_traits(&self, req: Request<pb::ProviderRef>) -> Result<Response<pb::Empty>, Status> {
        self.store.delete_provider_traits(&req.get_ref().uuid).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn get_provider_aggregates(
        &self,
        req: Request<pb::ProviderRef>,
    ) -> Result<Response<pb::ProviderAggregates>, Status> {
        let a = self.store.get_provider_aggregates(&req.get_ref().uuid).await?;
        Ok(Response::new(aggregates_to_pb(a)))
    }

    async fn set_provider_aggregates(
        &self,
        req: Request<pb::SetProviderAggregatesRequest>,
    ) -> Result<Response<pb::ProviderAggregates>, Status> {
        let r = req.get_ref();
        let a = self
            .store
            .set_provider_aggregates(&r.uuid, r.resource_provider_generation.map(i64::from), &r.aggregates)
            .await?;
        Ok(Response::new(aggregates_to_pb(a)))
    }

    async fn list_fleet(&self, req: Request<pb::ListFleetRequest>) -> Result<Response<pb::ListFleetResponse>, Status> {
        let r = req.get_ref();
        let given = |s: &str| non_empty(s).map(str::to_owned);
        let filter = FleetFilter {
            required_trait: given(&r.required_trait),
            member_of: given(&r.member_of),
            resource_class: given(&r.resource_class),
            search: given(&r.search),
        };
        let page = self.store.list_fleet(&filter, r.limit, non_empty(&r.marker)).await?;
        Ok(Response::new(fleet_to_pb(page)))
    }
}
