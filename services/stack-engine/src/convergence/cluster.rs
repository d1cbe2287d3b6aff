//! The production dispatch policy: check_resource spread round robin over
//! the live engines of the `service` table (self included, run locally),
//! the live list cached briefly, a chain's next link kept local, an
//! unreachable engine skipped for a while. How a message reaches another
//! engine is a [`WorkerTransport`] (gRPC in `rpc::worker`), injected by
//! whoever builds the engine.
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
use keelson_db::Db;

use super::dispatch::{CheckResourceMsg, Dispatcher};
use super::{Engine, EngineSettings};
use crate::store;

/// Why a call to another engine did not arrive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The engine could not be reached (connect, timeout, bad endpoint).
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The engine answered with an error.
    #[error("refused: {0}")]
    Refused(String),
}

/// The calls one engine makes to another's `EngineWorker` endpoint.
pub trait WorkerTransport: Send + Sync + 'static {
    /// Casts check_resource to the engine at `endpoint` (it answers once
    /// queued).
    fn check_resource<'a>(
        &'a self,
        endpoint: &'a str,
        msg: &'a CheckResourceMsg,
        sender_engine_id: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>>;

    /// Asks the engine at `endpoint` to stop the running actions of a stack.
    fn cancel_check_resource<'a>(
        &'a self,
        endpoint: &'a str,
        stack_id: &'a str,
    ) -> BoxFuture<'a, Result<(), TransportError>>;

    /// The liveness probe: whether the engine at `endpoint` is `engine_id`
    /// and listening.
    fn listening<'a>(&'a self, endpoint: &'a str, engine_id: &'a str) -> BoxFuture<'a, Result<bool, TransportError>>;
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

/// How long an unreachable engine is skipped.
const DEAD_FOR: Duration = Duration::from_secs(30);

/// The longest the live-engine list is reused for dispatch. Reading the
/// `service` table on every check_resource cast was a database round
/// trip per resource; engines register and heartbeat only every
/// `periodic_interval` anyway, and an engine that died since the last
/// read is skipped as unreachable on the first cast that fails.
const LIVE_ENGINES_TTL: Duration = Duration::from_secs(1);

/// Round-robin over the live engines of the service registry, self
/// included (run locally, no transport); an unreachable engine is skipped
/// for a while and the next one tried.
pub struct ClusterDispatcher {
    db: Db,
    transport: Arc<dyn WorkerTransport>,
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
    pub fn new(db: Db, settings: &EngineSettings, transport: Arc<dyn WorkerTransport>) -> ClusterDispatcher {
        ClusterDispatcher {
            db,
            transport,
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
                match self.transport.check_resource(&target.worker_endpoint, &msg, from.engine_id()).await {
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
    /// round trip and a wake-up there on every link of the chain, and
    /// spreads nothing (a chain runs one link at a time). Wide fan-outs
    /// still go round-robin through [`Dispatcher::dispatch`].
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
                if let Err(e) = self.transport.cancel_check_resource(&target.worker_endpoint, stack_id).await {
                    tracing::info!(engine = target.engine_id, error = %e, "cancel not delivered");
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
            let call = self.transport.listening(&target.worker_endpoint, engine_id);
            matches!(tokio::time::timeout(self.life_check, call).await, Ok(Ok(true)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keelson_db::{DatabaseUrl, PoolSettings};

    /// Answers a fixed registry verdict.
    struct Fixed(Result<bool, String>);

    impl EngineRegistry for Fixed {
        fn is_registered<'a>(&'a self, _engine_id: &'a str) -> BoxFuture<'a, Result<bool, String>> {
            Box::pin(async move { self.0.clone() })
        }
    }

    /// Reaches no engine.
    struct Nowhere;

    impl WorkerTransport for Nowhere {
        fn check_resource<'a>(
            &'a self,
            endpoint: &'a str,
            _msg: &'a CheckResourceMsg,
            _sender_engine_id: &'a str,
        ) -> BoxFuture<'a, Result<(), TransportError>> {
            Box::pin(async move { Err(TransportError::Unreachable(endpoint.to_string())) })
        }

        fn cancel_check_resource<'a>(
            &'a self,
            endpoint: &'a str,
            _stack_id: &'a str,
        ) -> BoxFuture<'a, Result<(), TransportError>> {
            Box::pin(async move { Err(TransportError::Unreachable(endpoint.to_string())) })
        }

        fn listening<'a>(
            &'a self,
            endpoint: &'a str,
            _engine_id: &'a str,
        ) -> BoxFuture<'a, Result<bool, TransportError>> {
            Box::pin(async move { Err(TransportError::Unreachable(endpoint.to_string())) })
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
            let dispatcher = Arc::new(ClusterDispatcher::new(db.clone(), &settings, Arc::new(Nowhere)));
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
