//! The `EngineWorker` gRPC service (check_resource casts, cancel,
//! liveness, one watchdog pass) and its pooled client, [`GrpcWorkers`]:
//! the tonic [`WorkerTransport`] the convergence core's dispatch policy
//! (`convergence::ClusterDispatcher`) sends through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keelson_proto::orchestration::v1::engine_worker_client::EngineWorkerClient;
use keelson_proto::orchestration::v1::engine_worker_server::{EngineWorker, EngineWorkerServer};
use keelson_proto::orchestration::v1::{
    CancelCheckResourceReply, CancelCheckResourceRequest, CheckResourceReply, CheckResourceRequest, ListeningReply,
    ListeningRequest, RunWatchdogReply, RunWatchdogRequest,
};
use keelson_runtime::grpc;
use keelson_runtime::tls::MeshTls;
use serde_json::{Map, Value};
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};

use crate::convergence::{CheckResourceMsg, Engine, TransportError, WorkerTransport};

/// The server side: queues work on the local engine and answers at once.
pub struct WorkerService {
    engine: Arc<Engine>,
}

impl WorkerService {
    pub fn new(engine: Arc<Engine>) -> WorkerService {
        WorkerService { engine }
    }

    /// The server, with the message sizes of the process's
    /// [`keelson_runtime::grpc::WireLimits`].
    pub fn into_server(self) -> EngineWorkerServer<WorkerService> {
        let limits = keelson_runtime::grpc::WireLimits::current();
        EngineWorkerServer::new(self)
            .max_decoding_message_size(limits.request_message)
            .max_encoding_message_size(limits.response_message)
    }
}

pub fn request_of(msg: &CheckResourceMsg, sender: &str) -> CheckResourceRequest {
    CheckResourceRequest {
        stack_id: msg.stack_id.clone(),
        resource_id: msg.resource_id,
        traversal_id: msg.traversal_id.clone(),
        is_update: msg.is_update,
        input_data_json: Value::Object(msg.input.clone()).to_string(),
        sender_engine_id: sender.to_string(),
        traceparent: String::new(),
    }
}

pub fn msg_of(req: CheckResourceRequest) -> Result<CheckResourceMsg, Status> {
    let input: Map<String, Value> = if req.input_data_json.is_empty() {
        Map::new()
    } else {
        serde_json::from_str(&req.input_data_json)
            .map_err(|e| Status::invalid_argument(format!("input_data_json: {e}")))?
    };
    Ok(CheckResourceMsg {
        stack_id: req.stack_id,
        resource_id: req.resource_id,
        traversal_id: req.traversal_id,
        is_update: req.is_update,
        input,
    })
}

#[tonic::async_trait]
impl EngineWorker for WorkerService {
    async fn check_resource(
        &self,
        request: Request<CheckResourceRequest>,
    ) -> Result<Response<CheckResourceReply>, Status> {
        let msg = msg_of(request.into_inner())?;
        self.engine.spawn_check(msg);
        Ok(Response::new(CheckResourceReply {}))
    }

    async fn cancel_check_resource(
        &self,
        request: Request<CancelCheckResourceRequest>,
    ) -> Result<Response<CancelCheckResourceReply>, Status> {
        self.engine.cancel_check_resource(&request.into_inner().stack_id);
        Ok(Response::new(CancelCheckResourceReply {}))
    }

    async fn listening(&self, request: Request<ListeningRequest>) -> Result<Response<ListeningReply>, Status> {
        let listening = self.engine.is_listening(&request.into_inner().engine_id);
        Ok(Response::new(ListeningReply { listening }))
    }

    async fn run_watchdog(&self, _request: Request<RunWatchdogRequest>) -> Result<Response<RunWatchdogReply>, Status> {
        let report =
            self.engine.run_watchdog_pass().await.map_err(|e| Status::internal(format!("watchdog pass: {e}")))?;
        if report.locks_reclaimed > 0 || !report.retriggered.is_empty() {
            tracing::info!(
                locks = report.locks_reclaimed,
                stacks = ?report.retriggered,
                "watchdog pass (asked by the controller): locks reclaimed, traversals re-triggered"
            );
        }
        Ok(Response::new(RunWatchdogReply {
            locks_reclaimed: report.locks_reclaimed,
            // A count for the log line of the controller: saturates.
            traversals_retriggered: u32::try_from(report.retriggered.len()).unwrap_or(u32::MAX),
        }))
    }
}

/// One lazily connected channel per endpoint.
#[derive(Default)]
pub struct WorkerClients {
    channels: Mutex<HashMap<String, Channel>>,
    timeout: Duration,
    tls: Option<Arc<MeshTls>>,
}

impl WorkerClients {
    pub fn new(timeout: Duration, tls: Option<Arc<MeshTls>>) -> WorkerClients {
        WorkerClients { channels: Mutex::new(HashMap::new()), timeout, tls }
    }

    pub fn client(&self, endpoint: &str) -> Result<EngineWorkerClient<Channel>, Status> {
        let mut map = self.channels.lock().map_err(|_| Status::internal("client pool poisoned"))?;
        let limits = grpc::WireLimits::current();
        let sized = |c: Channel| {
            EngineWorkerClient::new(c)
                .max_encoding_message_size(limits.request_message)
                .max_decoding_message_size(limits.response_message)
        };
        if let Some(c) = map.get(endpoint) {
            return Ok(sized(c.clone()));
        }
        let channel = grpc::endpoint(endpoint, self.tls.as_deref())
            .map_err(|e| Status::invalid_argument(format!("endpoint {endpoint}: {e}")))?
            .connect_timeout(self.timeout)
            .timeout(self.timeout)
            .connect_lazy();
        map.insert(endpoint.to_string(), channel.clone());
        Ok(sized(channel))
    }
}

/// The gRPC [`WorkerTransport`]: one pooled client per endpoint.
pub struct GrpcWorkers {
    clients: WorkerClients,
}

impl GrpcWorkers {
    /// Clients whose connects and calls time out after `timeout`.
    pub fn new(timeout: Duration, tls: Option<Arc<MeshTls>>) -> GrpcWorkers {
        GrpcWorkers { clients: WorkerClients::new(timeout, tls) }
    }
}

fn transport_error(status: Status) -> TransportError {
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::InvalidArgument | Code::Cancelled => {
            TransportError::Unreachable(status.to_string())
        }
        _ => TransportError::Refused(status.to_string()),
    }
}

impl WorkerTransport for GrpcWorkers {
    fn check_resource<'a>(
        &'a self,
        endpoint: &'a str,
        msg: &'a CheckResourceMsg,
        sender_engine_id: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move {
            let mut client = self.clients.client(endpoint).map_err(transport_error)?;
            let request = keelson_runtime::context::traced(request_of(msg, sender_engine_id));
            client.check_resource(request).await.map_err(transport_error)?;
            Ok(())
        })
    }

    fn cancel_check_resource<'a>(
        &'a self,
        endpoint: &'a str,
        stack_id: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>> {
        Box::pin(async move {
            let mut client = self.clients.client(endpoint).map_err(transport_error)?;
            let req = CancelCheckResourceRequest { stack_id: stack_id.to_string() };
            client.cancel_check_resource(req).await.map_err(transport_error)?;
            Ok(())
        })
    }

    fn listening<'a>(&'a self, endpoint: &'a str, engine_id: &'a str) -> BoxFuture<'a, Result<bool, TransportError>> {
        Box::pin(async move {
            let mut client = self.clients.client(endpoint).map_err(transport_error)?;
            let reply = client
                .listening(ListeningRequest { engine_id: engine_id.to_string() })
                .await
                .map_err(transport_error)?;
            Ok(reply.get_ref().listening)
        })
    }
}
