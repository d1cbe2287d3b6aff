//! The convergence engine (spec §3): `converge_stack` builds a traversal
//! graph of update and cleanup nodes with one sync point per node, leaves
//! are dispatched at once, `check_resource` acts on one resource under its
//! row lock and propagates to its successors through the sync points; the
//! stack completes when every root has reported to the stack's own sync
//! point.
//!
//! Modules: `settings` (options), `graph` (the traversal graph and its
//! stored form), `dispatch` (where check_resource messages go: the
//! [`Dispatcher`] trait and the test queue), `cluster` (the production
//! dispatch policy over a [`WorkerTransport`]), `events`
//! (event rows with upstream texts), `traversal` (converge_stack,
//! mark_complete/failed, rollback, purge, stop_traversal), `cancel` (the
//! per-stack cancel signal of running actions), `check`
//! (check_resource, propagate, retrigger, lock stealing), `operations`
//! (the public API the service layer calls), `watchdog` (heartbeat and
//! re-triggering of stalled or orphaned traversals).

mod cancel;
mod check;
mod cluster;
mod credentials;
mod dispatch;
mod events;
mod graph;
mod host;
mod operations;
mod settings;
mod signals;
pub mod software;
mod traversal;
mod watchdog;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keelson_db::Db;
use tokio::sync::{watch, Semaphore};

use crate::definition::DefinitionCache;
use crate::error::EngineError;
use crate::resources::Registry;

pub use cluster::{ClusterDispatcher, EngineRegistry, RegistryHandle, TransportError, WorkerTransport};
pub use dispatch::{CheckResourceMsg, Dispatcher, QueueDispatcher};
pub use graph::{Node, TraversalGraph};
pub(crate) use operations::resource_abandon_entry;
pub use operations::{NewDefinition, NewStack, StackOperation};
pub use settings::EngineSettings;
pub use signals::{quote as url_quote, PresignedKind, ResourceArn, SignalSettings};
pub use watchdog::{WatchdogReport, WATCHDOG_RETRIGGER_LIMIT};

/// One engine process: acts on resources for any stack, keeps the cancel
/// channels of its running check_resource tasks.
pub struct Engine {
    db: Db,
    registry: Arc<Registry>,
    engine_id: String,
    settings: EngineSettings,
    dispatcher: Arc<dyn Dispatcher>,
    definitions: DefinitionCache,
    graphs: Mutex<HashMap<String, Arc<TraversalGraph>>>,
    /// Per stack: the cancel signal every running action of it watches.
    cancels: cancel::Cancellations,
    permits: Arc<Semaphore>,
    /// Servers building at once (`max_concurrent_server_builds`; None: no
    /// bound).
    server_builds: Option<Arc<Semaphore>>,
    /// Plugins waiting for a nested stack to settle, by stack id.
    stack_waiters: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// This engine, for plugin calls that need its `Arc` operations.
    this: std::sync::Weak<Engine>,
    /// The key of pre-signed signal URLs, read once.
    signals_key: signals::KeyCell,
    /// Heat's notifications (a no-op when they are off).
    notifier: crate::notifications::Notifier,
    /// Keystone: trusts and stack users (None: noauth).
    identity: Option<Arc<crate::identity::Identity>>,
}

impl Engine {
    /// Starts the production engine: cluster dispatch over the service
    /// registry through `transport`, service row registered, heartbeat +
    /// watchdog running.
    pub async fn start(
        db: Db,
        registry: Arc<Registry>,
        settings: EngineSettings,
        transport: Arc<dyn WorkerTransport>,
    ) -> Result<Arc<Engine>, EngineError> {
        let dispatcher: Arc<dyn Dispatcher> = Arc::new(ClusterDispatcher::new(db.clone(), &settings, transport));
        let engine = Engine::new(db, registry, settings, dispatcher).await?;
        watchdog::spawn_background(&engine);
        Ok(engine)
    }

    /// An engine with the given dispatcher and no background loop (tests
    /// step the queue and call [`Engine::run_watchdog_once`]).
    pub async fn new(
        db: Db,
        registry: Arc<Registry>,
        settings: EngineSettings,
        dispatcher: Arc<dyn Dispatcher>,
    ) -> Result<Arc<Engine>, EngineError> {
        let engine_id = settings.engine_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        crate::store::services::register(
            &db,
            &engine_id,
            &settings.host,
            &settings.host,
            &settings.worker_endpoint,
            settings.periodic_interval.as_secs() as i64,
        )
        .await?;
        let permits = Arc::new(Semaphore::new(settings.max_concurrent_checks.max(1)));
        let server_builds = settings.max_concurrent_server_builds.map(|n| Arc::new(Semaphore::new(n)));
        let identity = match &settings.identity {
            Some(s) => Some(Arc::new(
                crate::identity::Identity::new(s.clone()).map_err(|e| EngineError::internal(e.to_string()))?,
            )),
            None => None,
        };
        let notifier = match &settings.notifications {
            Some(n) => crate::notifications::Notifier::start(n.clone()),
            None => crate::notifications::Notifier::default(),
        };
        let engine = Arc::new_cyclic(|this| Engine {
            db,
            registry,
            engine_id,
            settings,
            dispatcher,
            definitions: DefinitionCache::default(),
            graphs: Mutex::new(HashMap::new()),
            cancels: cancel::Cancellations::default(),
            permits,
            server_builds,
            stack_waiters: Mutex::new(HashMap::new()),
            this: this.clone(),
            signals_key: signals::KeyCell::default(),
            notifier,
            identity,
        });
        let host: std::sync::Weak<dyn crate::resources::PluginHost> = Arc::downgrade(&engine) as _;
        engine.registry.host().bind(host);
        Ok(engine)
    }

    pub fn engine_id(&self) -> &str {
        &self.engine_id
    }

    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The parsed definition of one of the stack's stored templates
    /// (cached per template id: templates are immutable).
    pub async fn definition(
        &self,
        stack: &crate::store::StackRow,
        template_id: i64,
    ) -> Result<Arc<crate::definition::StackDefinition>, EngineError> {
        self.definitions.get(&self.db, stack, template_id, &self.settings.region_name).await
    }

    /// The liveness probe answer (`EngineWorker.Listening`).
    pub fn is_listening(&self, engine_id: &str) -> bool {
        engine_id.is_empty() || engine_id == self.engine_id
    }

    /// Whether engine `engine_id` answers the liveness probe in time.
    pub async fn probe_engine(self: &Arc<Self>, engine_id: &str) -> bool {
        self.dispatcher.is_alive(self, engine_id).await
    }

    /// Runs check_resource on this engine in the background, bounded by
    /// the engine's concurrency limit.
    /// Its span is a child of the current one (the call that dispatched
    /// it), so a traversal's checks stay in the request's trace.
    pub fn spawn_check(self: &Arc<Self>, msg: CheckResourceMsg) {
        let engine = self.clone();
        let span = tracing::info_span!("check_resource", stack_id = %msg.stack_id, resource_id = msg.resource_id);
        let check = async move {
            let Ok(permit) = engine.permits.clone().acquire_owned().await else {
                return;
            };
            host::CHECK_SLOT.scope(std::cell::RefCell::new(Some(permit)), engine.check_resource(msg)).await;
        };
        tokio::spawn(tracing::Instrument::instrument(keelson_runtime::context::inherit(check), span));
    }

    /// Whether a check started now would run at once (a concurrency slot
    /// is free).
    pub fn has_idle_capacity(&self) -> bool {
        self.permits.available_permits() > 0
    }

    /// Signals every running action of the stack on this engine to stop.
    pub fn cancel_check_resource(&self, stack_id: &str) {
        self.cancels.cancel(stack_id);
    }

    fn cancel_receiver(&self, stack_id: &str) -> watch::Receiver<bool> {
        self.cancels.receiver(stack_id)
    }
}
