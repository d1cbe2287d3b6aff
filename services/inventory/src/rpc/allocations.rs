//! `keelson.placement.v1.Allocations` (allocations and the reshaper).

use keelson_proto::placement::v1 as pb;
use tonic::{Request, Response, Status};

use super::inventories::{from_pb as inventory_from_pb, generation};
use super::timestamp;
use crate::store::allocations::{ConsumerWrite, GenerationCheck, ProviderAmounts, WriteOp};
use crate::store::reshaper::ReshapeInventories;
use crate::store::Store;

pub struct AllocationsRpc {
    pub store: Store,
}

fn amounts(resources: Vec<(String, i64)>) -> Vec<pb::ResourceAmount> {
    resources.into_iter().map(|(resource_class, amount)| pb::ResourceAmount { resource_class, amount }).collect()
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn consumer_write(w: &pb::ConsumerAllocationsWrite) -> ConsumerWrite {
    let generation = match w.generation_check() {
        pb::ConsumerGenerationCheck::ConsumerGenerationIgnored => GenerationCheck::Ignored,
        pb::ConsumerGenerationCheck::ConsumerGenerationRequired => {
            GenerationCheck::Expect(w.consumer_generation.map(i64::from))
        }
    };
    ConsumerWrite {
        uuid: w.consumer_uuid.clone(),
        allocations: w
            .allocations
            .iter()
            .map(|a| ProviderAmounts {
                provider_uuid: a.resource_provider_uuid.clone(),
                resources: a.resources.iter().map(|r| (r.resource_class.clone(), r.amount)).collect(),
            })
            .collect(),
        project_id: non_empty(&w.project_id),
        user_id: non_empty(&w.user_id),
        generation,
        consumer_type: w.consumer_type.clone(),
    }
}

#[tonic::async_trait]
impl pb::allocations_server::Allocations for AllocationsRpc {
    async fn get_consumer_allocations(
        &self,
        req: Request<pb::GetConsumerAllocationsRequest>,
    ) -> Result<Response<pb::ConsumerAllocations>, Status> {
        let uuid = req.get_ref().consumer_uuid.clone();
        let view = self.store.get_consumer_allocations(&uuid).await?;
        let consumer = view.consumer;
        Ok(Response::new(pb::ConsumerAllocations {
            consumer_uuid: uuid,
            allocations: view
                .allocations
                .into_iter()
                .map(|h| pb::ProviderResources {
                    resource_provider_uuid: h.uuid,
                    resources: amounts(h.resources),
                    resource_provider_generation: generation(h.generation),
                })
                .collect(),
            project_id: consumer.as_ref().map(|c| c.project.clone()).unwrap_or_default(),
            user_id: consumer.as_ref().map(|c| c.user.clone()).unwrap_or_default(),
            consumer_generation: consumer.as_ref().map(|c| generation(c.generation)),
            consumer_type: consumer.and_then(|c| c.consumer_type).unwrap_or_default(),
            last_modified: timestamp(view.last_modified),
        }))
    }

    async fn get_provider_allocations(
        &self,
        req: Request<pb::ProviderRef>,
    ) -> Result<Response<pb::ProviderAllocations>, Status> {
        let view = self.store.get_provider_allocations(&req.get_ref().uuid).await?;
        Ok(Response::new(pb::ProviderAllocations {
            resource_provider_generation: generation(view.provider_generation),
            allocations: view
                .consumers
                .into_iter()
                .map(|h| pb::ConsumerResources {
                    consumer_uuid: h.uuid,
                    resources: amounts(h.resources),
                    consumer_generation: generation(h.generation),
                })
                .collect(),
            last_modified: timestamp(view.last_modified),
        }))
    }

    async fn replace_consumer_allocations(
        &self,
        req: Request<pb::ReplaceConsumerAllocationsRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let w = req
            .get_ref()
            .consumer
            .as_ref()
            .map(consumer_write)
            .ok_or_else(|| Status::invalid_argument("consumer is required"))?;
        let uuid = w.uuid.clone();
        self.store.set_allocations(WriteOp::Consumer(&uuid), std::slice::from_ref(&w)).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn set_allocations(&self, req: Request<pb::SetAllocationsRequest>) -> Result<Response<pb::Empty>, Status> {
        let writes: Vec<ConsumerWrite> = req.get_ref().consumers.iter().map(consumer_write).collect();
        self.store.set_allocations(WriteOp::Many, &writes).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn delete_consumer_allocations(
        &self,
        req: Request<pb::DeleteConsumerAllocationsRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        self.store.delete_consumer_allocations(&req.get_ref().consumer_uuid).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn reshape(&self, req: Request<pb::ReshapeRequest>) -> Result<Response<pb::Empty>, Status> {
        let r = req.get_ref();
        let inventories: Vec<ReshapeInventories> = r
            .inventories
            .iter()
            .map(|i| ReshapeInventories {
                provider_uuid: i.resource_provider_uuid.clone(),
                generation: i.resource_provider_generation.into(),
                inventories: i.inventories.iter().map(inventory_from_pb).collect(),
            })
            .collect();
        let writes: Vec<ConsumerWrite> = r.allocations.iter().map(consumer_write).collect();
        self.store.reshape(&inventories, &writes).await?;
        Ok(Response::new(pb::Empty {}))
    }
}
