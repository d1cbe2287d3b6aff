//! `keelson.placement.v1.Usages`.

use keelson_proto::placement::v1 as pb;
use tonic::{Request, Response, Status};

use super::inventories::generation;
use crate::store::usages::UsageQuery;
use crate::store::Store;

pub struct UsagesRpc {
    pub store: Store,
}

#[tonic::async_trait]
impl pb::usages_server::Usages for UsagesRpc {
    async fn get_provider_usages(&self, req: Request<pb::ProviderRef>) -> Result<Response<pb::ProviderUsages>, Status> {
        let (provider, usages) = self.store.get_provider_usages(&req.get_ref().uuid).await?;
        Ok(Response::new(pb::ProviderUsages {
            resource_provider_generation: generation(provider.generation),
            usages: usages.into_iter().collect(),
            // Usages are "now": upstream never dates them.
            last_modified: None,
        }))
    }

    async fn get_usages(&self, req: Request<pb::GetUsagesRequest>) -> Result<Response<pb::GetUsagesResponse>, Status> {
        let r = req.get_ref();
        let q = UsageQuery {
            project_id: r.project_id.clone(),
            user_id: r.user_id.clone(),
            by_consumer_type: r.by_consumer_type,
            consumer_type: r.consumer_type.clone(),
        };
        let groups = self.store.get_usages(&q).await?;
        Ok(Response::new(pb::GetUsagesResponse {
            usages: groups
                .into_iter()
                .map(|g| pb::ConsumerTypeUsages {
                    consumer_type: g.consumer_type.unwrap_or_default(),
                    consumer_count: g.consumer_count,
                    usages: g.usages.into_iter().collect(),
                })
                .collect(),
        }))
    }
}
