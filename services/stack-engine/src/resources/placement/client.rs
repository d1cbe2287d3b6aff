//! The few inventory-service calls the OS::Placement::* plugins make, over
//! the generated tonic clients of `keelson.placement.v1`.
//!
//! Every call carries the current request context (request id,
//! traceparent) as the gateway's calls do; the behaviours Placement ties to
//! microversions travel as request fields, and the plugins always ask for
//! the newest ones (1.26's `reserved == total`, 1.37's re-parenting).
//! Failures come back as [`PlacementError`]: Placement's code, HTTP status
//! and text, decoded from the `keelson.common.v1.ErrorDetail` of the gRPC
//! status, never degraded to a generic error.

use keelson_proto::placement::v1 as pb;
use keelson_runtime::ApiError;
use tonic::transport::Channel;

/// A tonic channel whose calls carry the request context.
type Intercepted = tonic::service::interceptor::InterceptedService<
    Channel,
    fn(tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status>,
>;

/// Placement's code for a lost generation race.
pub const CONCURRENT_UPDATE: &str = "placement.concurrent_update";

/// A failed inventory call: Placement's code (may be empty: upstream's
/// undefined code), the HTTP status the REST API would answer and its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{http_status} {code}: {detail}")]
pub struct PlacementError {
    pub http_status: u16,
    pub code: String,
    pub detail: String,
}

impl PlacementError {
    pub fn is_not_found(&self) -> bool {
        self.http_status == 404
    }

    pub fn is_concurrent_update(&self) -> bool {
        self.code == CONCURRENT_UPDATE
    }

    /// Unavailable or timed out: the inventory service may answer a retry.
    pub fn is_transient(&self) -> bool {
        matches!(self.http_status, 503 | 504)
    }

    /// The exception name shown in the resource's status reason: Placement's
    /// own code when it has one (`placement.resource_provider.inuse`), else
    /// the class keystoneauth raises for the HTTP status, as Heat's other
    /// client plugins show it.
    pub fn type_name(&self) -> String {
        if !self.code.is_empty() {
            return self.code.clone();
        }
        match self.http_status {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            503 => "ServiceUnavailable",
            504 => "GatewayTimeout",
            _ => "InternalServerError",
        }
        .to_string()
    }
}

impl From<tonic::Status> for PlacementError {
    fn from(status: tonic::Status) -> Self {
        let e = ApiError::from_status(&status, "");
        PlacementError { http_status: e.http_status, code: e.code, detail: e.detail }
    }
}

pub type Result<T> = std::result::Result<T, PlacementError>;

/// The inventory service's clients on one shared HTTP/2 channel (cheap to
/// clone: tonic clients are handles on the channel).
#[derive(Clone)]
pub struct PlacementClient {
    classes: pb::resource_classes_client::ResourceClassesClient<Intercepted>,
    traits: pb::traits_client::TraitsClient<Intercepted>,
    providers: pb::resource_providers_client::ResourceProvidersClient<Intercepted>,
    inventories: pb::inventories_client::InventoriesClient<Intercepted>,
    allocations: pb::allocations_client::AllocationsClient<Intercepted>,
}

impl PlacementClient {
    /// Clients on `channel` (lazy: nothing is dialled until the first call,
    /// so an engine starts while the inventory service is still coming up).
    pub fn new(channel: Channel) -> Self {
        let f: fn(tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status> =
            keelson_runtime::context::propagate;
        let svc = || tonic::service::interceptor::InterceptedService::new(channel.clone(), f);
        PlacementClient {
            classes: pb::resource_classes_client::ResourceClassesClient::new(svc()),
            traits: pb::traits_client::TraitsClient::new(svc()),
            providers: pb::resource_providers_client::ResourceProvidersClient::new(svc()),
            inventories: pb::inventories_client::InventoriesClient::new(svc()),
            allocations: pb::allocations_client::AllocationsClient::new(svc()),
        }
    }

    pub async fn get_provider(&self, uuid: &str) -> Result<pb::ResourceProvider> {
        let req = pb::GetResourceProviderRequest { uuid: uuid.to_string() };
        Ok(self.providers.clone().get_resource_provider(req).await?.into_inner())
    }

    pub async fn create_provider(&self, uuid: &str, name: &str, parent: &str) -> Result<pb::ResourceProvider> {
        let req = pb::CreateResourceProviderRequest {
            uuid: uuid.to_string(),
            name: name.to_string(),
            parent_provider_uuid: parent.to_string(),
        };
        Ok(self.providers.clone().create_resource_provider(req).await?.into_inner())
    }

    /// Renames and/or re-parents (`parent` None: unchanged; Some(""):
    /// un-parented).
    pub async fn update_provider(&self, uuid: &str, name: &str, parent: Option<&str>) -> Result<pb::ResourceProvider> {
        let req = pb::UpdateResourceProviderRequest {
            uuid: uuid.to_string(),
            name: name.to_string(),
            parent_provider_uuid: parent.map(str::to_string),
            allow_reparent: true,
        };
        Ok(self.providers.clone().update_resource_provider(req).await?.into_inner())
    }

    pub async fn delete_provider(&self, uuid: &str) -> Result<()> {
        let req = pb::DeleteResourceProviderRequest { uuid: uuid.to_string() };
        self.providers.clone().delete_resource_provider(req).await?;
        Ok(())
    }

    /// Replaces the provider's inventories; answers the new generation.
    pub async fn set_inventories(&self, uuid: &str, generation: u32, inventories: Vec<pb::Inventory>) -> Result<u32> {
        let req = pb::SetInventoriesRequest {
            uuid: uuid.to_string(),
            resource_provider_generation: generation,
            inventories,
            allow_reserved_equal_total: true,
        };
        Ok(self.inventories.clone().set_inventories(req).await?.into_inner().resource_provider_generation)
    }

    /// Replaces the provider's traits; answers the new generation.
    pub async fn set_traits(&self, uuid: &str, generation: u32, traits: Vec<String>) -> Result<u32> {
        let req =
            pb::SetProviderTraitsRequest { uuid: uuid.to_string(), resource_provider_generation: generation, traits };
        Ok(self.providers.clone().set_provider_traits(req).await?.into_inner().resource_provider_generation)
    }

    /// Replaces the provider's aggregates (generation checked); answers the
    /// new generation.
    pub async fn set_aggregates(&self, uuid: &str, generation: u32, aggregates: Vec<String>) -> Result<u32> {
        let req = pb::SetProviderAggregatesRequest {
            uuid: uuid.to_string(),
            resource_provider_generation: Some(generation),
            aggregates,
        };
        Ok(self.providers.clone().set_provider_aggregates(req).await?.into_inner().resource_provider_generation)
    }

    pub async fn ensure_trait(&self, name: &str) -> Result<()> {
        self.traits.clone().ensure_trait(pb::EnsureTraitRequest { name: name.to_string() }).await?;
        Ok(())
    }

    pub async fn ensure_resource_class(&self, name: &str) -> Result<()> {
        self.classes.clone().ensure_resource_class(pb::EnsureResourceClassRequest { name: name.to_string() }).await?;
        Ok(())
    }

    /// Replaces one consumer's allocations (an empty set removes them).
    pub async fn replace_allocations(&self, consumer: pb::ConsumerAllocationsWrite) -> Result<()> {
        let req = pb::ReplaceConsumerAllocationsRequest { consumer: Some(consumer) };
        self.allocations.clone().replace_consumer_allocations(req).await?;
        Ok(())
    }

    pub async fn get_allocations(&self, consumer: &str) -> Result<pb::ConsumerAllocations> {
        let req = pb::GetConsumerAllocationsRequest { consumer_uuid: consumer.to_string() };
        Ok(self.allocations.clone().get_consumer_allocations(req).await?.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_code_survives_and_names_the_failure() {
        let status = ApiError::new(
            409,
            "placement.resource_provider.inuse",
            "Unable to delete resource provider x: Resource provider has allocations.",
        )
        .to_status();
        let e = PlacementError::from(status);
        assert_eq!(e.http_status, 409);
        assert_eq!(e.type_name(), "placement.resource_provider.inuse");
        assert!(!e.is_concurrent_update());
        let e = PlacementError::from(ApiError::new(404, "", "No resource provider with uuid x found").to_status());
        assert!(e.is_not_found());
        assert_eq!(e.type_name(), "NotFound");
        let e = PlacementError::from(ApiError::new(409, CONCURRENT_UPDATE, "generation conflict").to_status());
        assert!(e.is_concurrent_update());
        // A transport failure (no detail): retryable, named by its status.
        let e = PlacementError::from(tonic::Status::unavailable("connection refused"));
        assert!(e.is_transient());
        assert_eq!(e.type_name(), "ServiceUnavailable");
    }
}
