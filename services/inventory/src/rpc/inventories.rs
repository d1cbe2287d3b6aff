//! `keelson.placement.v1.Inventories`.

use keelson_proto::placement::v1 as pb;
use tonic::{Request, Response, Status};

use super::timestamp;
use crate::store::inventories::InventoryRecord;
use crate::store::Store;

pub struct InventoriesRpc {
    pub store: Store,
}

/// A generation as the wire carries it (generations never go negative).
pub fn generation(g: i64) -> u32 {
    u32::try_from(g).unwrap_or(0)
}

pub fn to_pb(inv: InventoryRecord) -> pb::Inventory {
    let last_modified = timestamp(inv.last_modified());
    pb::Inventory {
        resource_class: inv.resource_class,
        total: inv.total,
        reserved: inv.reserved,
        min_unit: inv.min_unit,
        max_unit: inv.max_unit,
        step_size: inv.step_size,
        allocation_ratio: inv.allocation_ratio,
        last_modified,
    }
}

pub fn from_pb(inv: &pb::Inventory) -> InventoryRecord {
    InventoryRecord {
        resource_class: inv.resource_class.clone(),
        total: inv.total,
        reserved: inv.reserved,
        min_unit: inv.min_unit,
        max_unit: inv.max_unit,
        step_size: inv.step_size,
        allocation_ratio: inv.allocation_ratio,
        created_at: None,
        updated_at: None,
    }
}

fn one(generation_after: i64, inv: InventoryRecord) -> pb::InventoryResponse {
    pb::InventoryResponse { resource_provider_generation: generation(generation_after), inventory: Some(to_pb(inv)) }
}

fn list(generation_after: i64, list: Vec<InventoryRecord>) -> pb::ProviderInventories {
    let last_modified = timestamp(list.iter().filter_map(InventoryRecord::last_modified).max());
    pb::ProviderInventories {
        resource_provider_generation: generation(generation_after),
        inventories: list.into_iter().map(to_pb).collect(),
        last_modified,
    }
}

fn inventory_of(inv: &Option<pb::Inventory>) -> Result<InventoryRecord, Status> {
    inv.as_ref().map(from_pb).ok_or_else(|| Status::invalid_argument("inventory is required"))
}

#[tonic::async_trait]
impl pb::inventories_server::Inventories for InventoriesRpc {
    async fn get_inventories(
        &self,
        req: Request<pb::ProviderRef>,
    ) -> Result<Response<pb::ProviderInventories>, Status> {
        let (provider, invs) = self.store.get_inventories(&req.get_ref().uuid).await?;
        Ok(Response::new(list(provider.generation, invs)))
    }

    async fn set_inventories(
        &self,
        req: Request<pb::SetInventoriesRequest>,
    ) -> Result<Response<pb::ProviderInventories>, Status> {
        let r = req.get_ref();
        let invs = r.inventories.iter().map(from_pb).collect();
        let (g, invs) = self
            .store
            .set_inventories(&r.uuid, r.resource_provider_generation.into(), invs, r.allow_reserved_equal_total)
            .await?;
        Ok(Response::new(list(g, invs)))
    }

    async fn get_inventory(
        &self,
        req: Request<pb::GetInventoryRequest>,
    ) -> Result<Response<pb::InventoryResponse>, Status> {
        let r = req.get_ref();
        let (provider, inv) = self.store.get_inventory(&r.uuid, &r.resource_class).await?;
        Ok(Response::new(one(provider.generation, inv)))
    }

    async fn create_inventory(
        &self,
        req: Request<pb::WriteInventoryRequest>,
    ) -> Result<Response<pb::InventoryResponse>, Status> {
        let r = req.get_ref();
        let inv = inventory_of(&r.inventory)?;
        let (g, inv) = self.store.create_inventory(&r.uuid, inv, r.allow_reserved_equal_total).await?;
        Ok(Response::new(one(g, inv)))
    }

    async fn update_inventory(
        &self,
        req: Request<pb::WriteInventoryRequest>,
    ) -> Result<Response<pb::InventoryResponse>, Status> {
        let r = req.get_ref();
        let inv = inventory_of(&r.inventory)?;
        let (g, inv) = self
            .store
            .update_inventory(&r.uuid, r.resource_provider_generation.into(), inv, r.allow_reserved_equal_total)
            .await?;
        Ok(Response::new(one(g, inv)))
    }

    async fn delete_inventory(&self, req: Request<pb::DeleteInventoryRequest>) -> Result<Response<pb::Empty>, Status> {
        let r = req.get_ref();
        self.store.delete_inventory(&r.uuid, &r.resource_class).await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn delete_inventories(
        &self,
        req: Request<pb::DeleteInventoriesRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let r = req.get_ref();
        self.store.delete_inventories(&r.uuid, r.resource_provider_generation.map(i64::from)).await?;
        Ok(Response::new(pb::Empty {}))
    }
}
