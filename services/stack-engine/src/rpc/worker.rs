//! The `EngineWorker` gRPC service (check_resource casts, cancel,
//! liveness, one watchdog pass), its pooled client, and the production
//! [`ClusterDispatcher`] that spreads check_resource over the live engines.
//!
//! Liveness of a lock holder: with a controller configured
//! ([`RegistryHandle`]), an engine registered there is alive; one that is
//! not (its lease expired, or the controller restarted and it has not
//! re-registered yet) or an unreachable controller falls back to the
//! `Listening` probe, so a live engine's lock is never taken because of
//! the registry alone. Without a controller, the `service` table and the
//! probe decide (Heat's way).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use keelson_common::db::Db;
use keelson_common::grpc;
use keelson_common::tls::MeshTls;
use keelson_proto::orchestration::v1::engine_worker_client::EngineWorkerClient;
use keelson_proto::orchestration::v1::engine_worker_server::{EngineWorker, EngineWorkerServer};
use keelson_proto::orchestration::v1::{
    CancelCheckResourceReply, CancelCheckResourceRequest, CheckResourceReply, CheckResourceRequest, ListeningReply,
    ListeningRequest, RunWatchdogReply, RunWatchdogRequest,
};
use serde_json::{Map, Value};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::convergence::{CheckResourceMsg, Dispatcher, Engine, EngineSettings};
use crate::store;

/// The server side: queues work on the local engine and answers at once.
pub struct WorkerService {
    engine: Arc<Engine>,
}

impl WorkerService {
    pub fn new(engine: Arc<Engine>) -> WorkerService {
        WorkerService { engine }
    }

    /// The server, with the message sizes of the process's
    /// [`keelson_common::grpc::WireLimits`].
    pub fn into_server(self) -> EngineWorkerServer<WorkerService> {
        let limits = keelson_common::grpc::WireLimits::current();
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

/// The controller's service registry, as the engine asks it whether a
/// lock holder is alive (implemented over the controller client by the
/// binary).
pub trait EngineRegistry: Send + Sync + 'static {
    /// Whether `engine_id` holds a live registration; Err when the
    /// registry cannot be asked.
    fn is_registered<'a>(&'a self, engine_id: &'a str) -> BoxFuture<'a, Result<bool, String>>;
}

/// A shareable [`EngineRegistry`] (an [`EngineSettings`] field).
#[derive(Clone)]
pub struct RegistryHandle(pub Arc<dyn EngineRegistry>);

impl std::fmt::Debug for RegistryHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RegistryHandle")
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

/// How long an unreachable engine is skipped.
const DEAD_FOR: Duration = Duration::from_secs(30);

/// The longest the live-engine list is reused for dispatch. Reading the
/// `service` table on every check_resource cast was a database round
/// trip per resource; engines register and heartbeat only every
/// `periodic_interval` anyway, and an engine that died since the last
/// read is skipped as unreachable on the first cast that fails.
const LIVE_ENGINES_TTL: Duration = Duration::from_secs(1);

/// Round-robin over the live engines of the service registry, self
/// included (run locally, no gRPC); an unreachable engine is skipped for a
/// while and the next one tried.
pub struct ClusterDispatcher {
    db: Db,
    clients: WorkerClients,
    next: AtomicUsize,
    unreachable: Mutex<HashMap<String, Instant>>,
    max_age: Duration,
    life_check: Duration,
    registry: Option<RegistryHandle>,
    /// The other live engines as last read, and when.
    live_cache: Mutex<Option<(Instant, Arc<Vec<store::ServiceRow>>)>>,
    live_ttl: Duration,
}

impl ClusterDispatcher {
    pub fn new(db: Db, settings: &EngineSettings) -> ClusterDispatcher {
        ClusterDispatcher {
            db,
            clients: WorkerClients::new(settings.engine_life_check_timeout, settings.tls.clone()),
            next: AtomicUsize::new(0),
            unreachable: Mutex::new(HashMap::new()),
            max_age: settings.periodic_interval * 3,
            life_check: settings.engine_life_check_timeout,
            registry: settings.controller_registry.clone(),
            live_cache: Mutex::new(None),
            live_ttl: LIVE_ENGINES_TTL.min(settings.periodic_interval),
        }
    }

    fn skipped(&self, engine_id: &str) -> bool {
        self.unreachable.lock().map(|m| m.get(engine_id).is_some_and(|t| t.elapsed() < DEAD_FOR)).unwrap_or(false)
    }

    fn mark_unreachable(&self, engine_id: &str) {
        if let Ok(mut m) = self.unreachable.lock() {
            m.insert(engine_id.to_string(), Instant::now());
        }
    }

    /// The other live engines with a worker endpoint, fresh from the
    /// `service` table.
    async fn others(&self, from: &Engine) -> Vec<store::ServiceRow> {
        match store::services::live(&self.db, self.max_age).await {
            Ok(rows) => {
                rows.into_iter().filter(|s| s.engine_id != from.engine_id() && !s.worker_endpoint.is_empty()).collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, "service registry unreadable: dispatching locally");
                Vec::new()
            }
        }
    }

    /// [`Self::others`], reused for up to `live_ttl` (dispatch only).
    async fn others_cached(&self, from: &Engine) -> Arc<Vec<store::ServiceRow>> {
        if let Ok(cache) = self.live_cache.lock() {
            if let Some((at, rows)) = cache.as_ref() {
                if at.elapsed() < self.live_ttl {
                    return rows.clone();
                }
            }
        }
        let rows = Arc::new(self.others(from).await);
        if let Ok(mut cache) = self.live_cache.lock() {
            *cache = Some((Instant::now(), rows.clone()));
        }
        rows
    }
}

impl Dispatcher for ClusterDispatcher {
    fn dispatch<'a>(&'a self, from: &'a Arc<Engine>, msg: CheckResourceMsg) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let others = self.others_cached(from).await;
            let total = others.len() + 1;
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            for step in 0..total {
                let pick = (start + step) % total;
                if pick == 0 {
                    from.spawn_check(msg);
                    return;
                }
                let target = &others[pick - 1];
                if self.skipped(&target.engine_id) {
                    continue;
                }
                let sent = match self.clients.client(&target.worker_endpoint) {
                    Ok(mut c) => {
                        let req = keelson_common::context::traced(request_of(&msg, from.engine_id()));
                        c.check_resource(req).await.map(|_| ())
                    }
                    Err(e) => Err(e),
                };
                match sent {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::info!(engine = target.engine_id, error = %e, "engine unreachable: trying another");
                        self.mark_unreachable(&target.engine_id);
                    }
                }
            }
            from.spawn_check(msg);
        })
    }

    /// A chain's next link runs where the previous one ran while this
    /// engine has a free check slot: handing it to another engine costs a
    /// gRPC round trip and a wake-up there on every link of the chain,
    /// and spreads nothing (a chain runs one link at a time). Wide
    /// fan-outs still go round-robin through [`Dispatcher::dispatch`].
    fn dispatch_continuation<'a>(&'a self, from: &'a Arc<Engine>, msg: CheckResourceMsg) -> BoxFuture<'a, ()> {
        if from.has_idle_capacity() {
            from.spawn_check(msg);
            return Box::pin(async {});
        }
        self.dispatch(from, msg)
    }

    fn cancel_all<'a>(&'a self, from: &'a Arc<Engine>, stack_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            from.cancel_check_resource(stack_id);
            for target in self.others(from).await {
                if let Ok(mut c) = self.clients.client(&target.worker_endpoint) {
                    let req = CancelCheckResourceRequest { stack_id: stack_id.to_string() };
                    if let Err(e) = c.cancel_check_resource(req).await {
                        tracing::info!(engine = target.engine_id, error = %e, "cancel not delivered");
                    }
                }
            }
        })
    }

    fn is_alive<'a>(&'a self, from: &'a Arc<Engine>, engine_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if engine_id == from.engine_id() {
                return true;
            }
            if let Some(registry) = &self.registry {
                match registry.0.is_registered(engine_id).await {
                    Ok(true) => return true,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::info!(engine = engine_id, error = %e, "controller registry unreachable: probing")
                    }
                }
            }
            let services = store::services::list(&self.db).await.unwrap_or_default();
            let Some(target) = services.iter().find(|s| s.engine_id == engine_id && s.deleted_at.is_none()) else {
                return false;
            };
            if target.worker_endpoint.is_empty() {
                return false;
            }
            let Ok(mut c) = self.clients.client(&target.worker_endpoint) else {
                return false;
            };
            let call = c.listening(ListeningRequest { engine_id: engine_id.to_string() });
            matches!(tokio::time::timeout(self.life_check, call).await, Ok(Ok(r)) if r.get_ref().listening)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keelson_common::db::{DatabaseUrl, PoolSettings};

    /// Answers a fixed registry verdict.
    struct Fixed(Result<bool, String>);

    impl EngineRegistry for Fixed {
        fn is_registered<'a>(&'a self, _engine_id: &'a str) -> BoxFuture<'a, Result<bool, String>> {
            Box::pin(async move { self.0.clone() })
        }
    }

    /// A registered holder is alive without a probe; an unregistered one,
    /// or an unreachable registry, falls back to the service table and the
    /// Listening probe (here: no such engine, so dead).
    #[tokio::test]
    async fn a_lock_holder_is_alive_while_registered_with_the_controller() {
        let path = std::env::temp_dir().join(format!("keelson-worker-{}.db", uuid::Uuid::new_v4()));
        let url = DatabaseUrl::parse(&format!("sqlite:///{}", path.display())).unwrap();
        let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
        store::schema::sync(&db).await.unwrap();
        let registry = Arc::new(crate::resources::Registry::builtin());
        for (verdict, alive) in [(Ok(true), true), (Ok(false), false), (Err("down".to_string()), false)] {
            let settings = EngineSettings {
                engine_id: Some("self".into()),
                controller_registry: Some(RegistryHandle(Arc::new(Fixed(verdict.clone())))),
                ..EngineSettings::default()
            };
            let dispatcher = Arc::new(ClusterDispatcher::new(db.clone(), &settings));
            let engine = Engine::new(db.clone(), registry.clone(), settings, dispatcher.clone()).await.unwrap();
            assert_eq!(dispatcher.is_alive(&engine, "other").await, alive, "{verdict:?}");
            assert!(dispatcher.is_alive(&engine, "self").await);
        }
        db.close().await;
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
        }
    }
}
