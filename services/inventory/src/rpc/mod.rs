//! The gRPC layer: a thin translation between `keelson.placement.v1`
//! messages and [`crate::store`] calls, one module per service.

pub mod allocations;
pub mod inventories;
pub mod resource_classes;
pub mod resource_providers;
pub mod traits;
pub mod usages;

use keelson_proto::placement::v1 as pb;

use crate::store::Store;

/// A protobuf timestamp from a naive UTC time.
pub fn timestamp(t: Option<chrono::NaiveDateTime>) -> Option<prost_types::Timestamp> {
    t.map(|t| prost_types::Timestamp { seconds: t.and_utc().timestamp(), nanos: 0 })
}

/// Every service of the inventory API, ready to add to a tonic server.
pub struct Services {
    pub resource_classes: pb::resource_classes_server::ResourceClassesServer<resource_classes::ResourceClassesRpc>,
    pub resource_providers:
        pb::resource_providers_server::ResourceProvidersServer<resource_providers::ResourceProvidersRpc>,
    pub traits: pb::traits_server::TraitsServer<traits::TraitsRpc>,
    pub inventories: pb::inventories_server::InventoriesServer<inventories::InventoriesRpc>,
    pub allocations: pb::allocations_server::AllocationsServer<allocations::AllocationsRpc>,
    pub usages: pb::usages_server::UsagesServer<usages::UsagesRpc>,
}

impl Services {
    /// The services on `store`, with the message sizes of the process's
    /// [`keelson_runtime::grpc::WireLimits`].
    pub fn new(store: Store) -> Self {
        let limits = keelson_runtime::grpc::WireLimits::current();
        let (req, resp) = (limits.request_message, limits.response_message);
        Services {
            resource_classes: pb::resource_classes_server::ResourceClassesServer::new(
                resource_classes::ResourceClassesRpc { store: store.clone() },
            )
            .max_decoding_message_size(req)
            .max_encoding_message_size(resp),
            resource_providers: pb::resource_providers_server::ResourceProvidersServer::new(
                resource_providers::ResourceProvidersRpc { store: store.clone() },
            )
            .max_decoding_message_size(req)
            .max_encoding_message_size(resp),
            traits: pb::traits_server::TraitsServer::new(traits::TraitsRpc { store: store.clone() })
                .max_decoding_message_size(req)
                .max_encoding_message_size(resp),
            inventories: pb::inventories_server::InventoriesServer::new(inventories::InventoriesRpc {
                store: store.clone(),
            })
            .max_decoding_message_size(req)
            .max_encoding_message_size(resp),
            allocations: pb::allocations_server::AllocationsServer::new(allocations::AllocationsRpc {
                store: store.clone(),
            })
            .max_decoding_message_size(req)
            .max_encoding_message_size(resp),
            usages: pb::usages_server::UsagesServer::new(usages::UsagesRpc { store: store.clone() })
                .max_decoding_message_size(req)
                .max_encoding_message_size(resp),
        }
    }

    /// Adds every service to a tonic router.
    pub fn add_to(self, router: keelson_runtime::grpc::ServiceRouter) -> keelson_runtime::grpc::ServiceRouter {
        router
            .add_service(self.resource_classes)
            .add_service(self.resource_providers)
            .add_service(self.traits)
            .add_service(self.inventories)
            .add_service(self.allocations)
            .add_service(self.usages)
    }
}
