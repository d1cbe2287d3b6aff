//! `keelson.placement.v1.ResourceClasses`.

use keelson_proto::placement::v1 as pb;
use tonic::{Request, Response, Status};

use super::timestamp;
use crate::store::resource_classes::ResourceClassRow;
use crate::store::Store;

pub struct ResourceClassesRpc {
    pub store: Store,
}

fn to_pb(rc: ResourceClassRow) -> pb::ResourceClass {
    let last_modified = timestamp(rc.last_modified());
    pb::ResourceClass { name: rc.name, last_modified }
}

#[tonic::async_trait]
impl pb::resource_classes_server::ResourceClasses for ResourceClassesRpc {
    async fn list_resource_classes(
        &self,
        _req: Request<pb::ListResourceClassesRequest>,
    ) -> Result<Response<pb::ListResourceClassesResponse>, Status> {
        let rcs = self.store.list_resource_classes().await?;
        Ok(Response::new(pb::ListResourceClassesResponse { resource_classes: rcs.into_iter().map(to_pb).collect() }))
    }

    async fn get_resource_class(
        &self,
        req: Request<pb::GetResourceClassRequest>,
    ) -> Result<Response<pb::ResourceClass>, Status> {
        let rc = self.store.get_resource_class(&req.get_ref().name).await?;
        Ok(Response::new(to_pb(rc)))
    }

    async fn create_resource_class(
        &self,
        req: Request<pb::CreateResourceClassRequest>,
    ) -> Result<Response<pb::ResourceClass>, Status> {
        let rc = self.store.create_resource_class(&req.get_ref().name).await?;
        Ok(Response::new(to_pb(rc)))
    }

    async fn ensure_resource_class(
        &self,
        req: Request<pb::EnsureResourceClassRequest>,
    ) -> Result<Response<pb::EnsureResourceClassResponse>, Status> {
        let (rc, created) = self.store.ensure_resource_class(&req.get_ref().name).await?;
        Ok(Response::new(pb::EnsureResourceClassResponse { resource_class: Some(to_pb(rc)), created }))
    }

    async fn rename_resource_class(
        &self,
        req: Request<pb::RenameResourceClassRequest>,
    ) -> Result<Response<pb::ResourceClass>, Status> {
        let r = req.get_ref();
        let rc = self.store.rename_resource_class(&r.name, &r.new_name).await?;
        Ok(Response::new(to_pb(rc)))
    }

    async fn delete_resource_class(
        &self,
        req: Request<pb::DeleteResourceClassRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        self.store.delete_resource_class(&req.get_ref().name).await?;
        Ok(Response::new(pb::Empty {}))
    }
}
