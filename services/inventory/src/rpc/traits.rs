//! `keelson.placement.v1.Traits`.

use keelson_proto::placement::v1 as pb;
use tonic::{Request, Response, Status};

use super::timestamp;
use crate::store::traits::{TraitFilter, TraitRow};
use crate::store::Store;

pub struct TraitsRpc {
    pub store: Store,
}

fn to_pb(t: TraitRow) -> pb::Trait {
    let last_modified = timestamp(t.last_modified());
    pb::Trait { name: t.name, last_modified }
}

#[tonic::async_trait]
impl pb::traits_server::Traits for TraitsRpc {
    async fn list_traits(
        &self,
        req: Request<pb::ListTraitsRequest>,
    ) -> Result<Response<pb::ListTraitsResponse>, Status> {
        let r = req.get_ref();
        let filter = TraitFilter {
            name_prefix: r.name_prefix.clone(),
            names: r.filter_by_names.then(|| r.names.clone()),
            associated: r.associated,
        };
        let traits = self.store.list_traits(&filter).await?;
        Ok(Response::new(pb::ListTraitsResponse { traits: traits.into_iter().map(to_pb).collect() }))
    }

    async fn get_trait(&self, req: Request<pb::GetTraitRequest>) -> Result<Response<pb::Trait>, Status> {
        let t = self.store.get_trait(&req.get_ref().name).await?;
        Ok(Response::new(to_pb(t)))
    }

    async fn ensure_trait(
        &self,
        req: Request<pb::EnsureTraitRequest>,
    ) -> Result<Response<pb::EnsureTraitResponse>, Status> {
        let (t, created) = self.store.ensure_trait(&req.get_ref().name).await?;
        Ok(Response::new(pb::EnsureTraitResponse { r#trait: Some(to_pb(t)), created }))
    }

    async fn delete_trait(&self, req: Request<pb::DeleteTraitRequest>) -> Result<Response<pb::Empty>, Status> {
        self.store.delete_trait(&req.get_ref().name).await?;
        Ok(Response::new(pb::Empty {}))
    }
}
