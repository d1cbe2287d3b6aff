//! The stack engines the gateway talks to. Any engine can serve any
//! request (they share one database), so a call goes to the next engine in
//! turn and moves on to another when the engine cannot be reached: the API
//! stays up while an engine restarts or dies.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use keelson_proto::orchestration::v1::orchestration_client::OrchestrationClient;
use tonic::transport::Channel;

use crate::placement::Intercepted;

/// The engine's client, carrying the request context on every call.
pub type EngineClient = OrchestrationClient<Intercepted<Channel>>;

#[derive(Clone)]
pub struct Engines {
    clients: Arc<[EngineClient]>,
    next: Arc<AtomicUsize>,
}

impl Engines {
    /// One lazily connected client per engine channel, with the message
    /// sizes of the process's [`keelson_runtime::grpc::WireLimits`] (stack
    /// lists and templates exceed tonic's 4 MiB default).
    pub fn new(channels: Vec<Channel>) -> Engines {
        let propagate: fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> =
            keelson_runtime::context::propagate;
        let limits = keelson_runtime::grpc::WireLimits::current();
        let clients: Vec<EngineClient> = channels
            .into_iter()
            .map(|ch| {
                EngineClient::new(tonic::service::interceptor::InterceptedService::new(ch, propagate))
                    .max_decoding_message_size(limits.response_message)
                    .max_encoding_message_size(limits.request_message)
            })
            .collect();
        Engines { clients: clients.into(), next: Arc::new(AtomicUsize::new(0)) }
    }

    /// Calls `rpc` on one engine after the other, starting with the next
    /// in turn, until one answers (with a result or an engine error). Only
    /// a failure to reach the engine moves on; the last such failure is
    /// returned when no engine answers. A request that reached an engine
    /// which then died may thus run twice: every Orchestration operation
    /// tolerates that (a repeated create answers 409 StackExists).
    pub async fn call<Req, Resp, F, Fut>(&self, request: Req, rpc: F) -> Result<tonic::Response<Resp>, tonic::Status>
    where
        Req: Clone,
        F: Fn(EngineClient, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let n = self.clients.len();
        if n == 0 {
            return Err(tonic::Status::unavailable("no stack engine is configured"));
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last = None;
        for i in 0..n {
            let client = self.clients[(start + i) % n].clone();
            match rpc(client, request.clone()).await {
                Err(status) if unreachable(&status) => last = Some(status),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| tonic::Status::unavailable("no stack engine answered")))
    }
}

/// The engine could not be reached (as opposed to an engine's answer,
/// which always carries keelson's error detail).
fn unreachable(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::Unavailable && status.details().is_empty()
}
