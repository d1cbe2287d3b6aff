//! The OpenStack Placement API (microversions 1.0-1.39) on port 8778.
//!
//! Layout follows upstream's split: `handlers/` (one module per resource,
//! each declaring its routes), `schemas` (the request JSON schemas, applied
//! per microversion), `policy` (authorization), `error` (the error body)
//! and `microversion`. Handlers validate and authorize, call the inventory
//! service over gRPC, and shape the answer for the request's microversion.

pub mod app;
pub mod error;
pub mod handlers;
pub mod json_text;
pub mod listener;
pub mod microversion;
pub mod params;
pub mod policy;
pub mod request;

use std::sync::Arc;

use crate::redial::RedialRefused;
use keelson_proto::placement::v1 as pb;

pub use microversion::Microversion;
pub use request::{PlacementError, Req};

/// A tonic client channel that carries the request context (request id,
/// traceparent) of the request being handled, and redials a service whose
/// port refuses it (the stack engines' clients fail over instead, over
/// plain channels).
pub type Intercepted<S = RedialRefused> = tonic::service::interceptor::InterceptedService<
    S,
    fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status>,
>;

/// The inventory service's gRPC clients (one HTTP/2 channel, shared).
#[derive(Clone)]
pub struct Clients {
    pub classes: pb::resource_classes_client::ResourceClassesClient<Intercepted>,
    pub traits: pb::traits_client::TraitsClient<Intercepted>,
    pub providers: pb::resource_providers_client::ResourceProvidersClient<Intercepted>,
    pub inventories: pb::inventories_client::InventoriesClient<Intercepted>,
    pub allocations: pb::allocations_client::AllocationsClient<Intercepted>,
    pub usages: pb::usages_client::UsagesClient<Intercepted>,
    /// The candidates service (its own channel).
    pub candidates:
        keelson_proto::candidates::v2::allocation_candidates_client::AllocationCandidatesClient<Intercepted>,
}

impl Clients {
    /// Clients with the message sizes of the process's
    /// [`keelson_runtime::grpc::WireLimits`]: every body the REST edge
    /// accepts crosses, and so do the answers of big fleets.
    pub fn new(channel: RedialRefused, candidates: RedialRefused) -> Self {
        let f: fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> =
            keelson_runtime::context::propagate;
        let svc = || tonic::service::interceptor::InterceptedService::new(channel.clone(), f);
        let limits = keelson_runtime::grpc::WireLimits::current();
        let (req, resp) = (limits.request_message, limits.response_message);
        Clients {
            classes: pb::resource_classes_client::ResourceClassesClient::new(svc())
                .max_encoding_message_size(req)
                .max_decoding_message_size(resp),
            traits: pb::traits_client::TraitsClient::new(svc())
                .max_encoding_message_size(req)
                .max_decoding_message_size(resp),
            providers: pb::resource_providers_client::ResourceProvidersClient::new(svc())
                .max_encoding_message_size(req)
                .max_decoding_message_size(resp),
            inventories: pb::inventories_client::InventoriesClient::new(svc())
                .max_encoding_message_size(req)
                .max_decoding_message_size(resp),
            allocations: pb::allocations_client::AllocationsClient::new(svc())
                .max_encoding_message_size(req)
                .max_decoding_message_size(resp),
            usages: pb::usages_client::UsagesClient::new(svc())
                .max_encoding_message_size(req)
                .max_decoding_message_size(resp),
            candidates: keelson_proto::candidates::v2::allocation_candidates_client::AllocationCandidatesClient::new(
                tonic::service::interceptor::InterceptedService::new(candidates, f),
            )
            .max_encoding_message_size(req)
            .max_decoding_message_size(resp),
        }
    }
}

/// Everything a Placement request handler may use.
pub struct PlacementState {
    pub clients: Clients,
    pub policy: policy::Policy,
    pub standard_classes_seen: handlers::resource_classes::StandardClassesSeen,
}

pub type State = Arc<PlacementState>;
