//! `keelson engine`: one Heat stack engine process. With a controller
//! (`[controller] peers`) it registers there as service "stack-engine"
//! (instance = its engine id, address = its worker endpoint) with a lease
//! it heartbeats, asks the registry whether a lock holder is alive, and
//! leaves the watchdog to the controller primary's duty; without one the
//! database `service` table is the registry and it runs its own watchdog.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use keelson_controller::duties::BoxFuture;
use keelson_controller::{ClientError, ClientOptions, ControllerClient, CtrlError, Registration};
use keelson_db::Db;
use keelson_runtime::config::clamp_u32;
use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::shutdown::Shutdown;
use keelson_runtime::Config;
use keelson_stack_engine::convergence::{EngineRegistry, RegistryHandle};
use keelson_stack_engine::options::MAX_CONCURRENT_CHECKS;

use super::controller::{controller_addresses, ENGINE_SERVICE};
use super::services::{bind, on_signal};
use crate::options::{ENGINE_ADVERTISE, ENGINE_LISTEN};
use crate::settings;

/// Connects to the orchestration database and brings its schema up to
/// date (several engines may start at once: the sync tolerates that).
pub async fn open_orchestration_database(config: &Config) -> anyhow::Result<Db> {
    let url = settings::orchestration_database_url(config)?;
    // Room for the concurrent check_resource tasks, or they queue on the
    // pool rather than on the database; bounded so that a few engines stay
    // well within a default MariaDB's 151 connections.
    let mut pool = settings::pool_settings(config);
    let checks = clamp_u32(config.get(&MAX_CONCURRENT_CHECKS).max(1));
    pool.max_connections = pool.max_connections.max(checks.min(32) + 8);
    let db = Db::connect(&url, &pool).await.with_context(|| format!("connecting to {}", url.display))?;
    keelson_stack_engine::store::schema::sync(&db).await.context("orchestration schema")?;
    Ok(db)
}

/// The address other engines reach this one at: `[keelson]
/// engine_advertise`, else the listen address (a wildcard listen address
/// advertises the host name).
pub fn advertised_endpoint(config: &Config, bound: std::net::SocketAddr) -> String {
    if let Some(a) = config.get(&ENGINE_ADVERTISE) {
        return if a.contains("://") { a } else { format!("http://{a}") };
    }
    if bound.ip().is_unspecified() {
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "127.0.0.1".into());
        return format!("http://{host}:{}", bound.port());
    }
    format!("http://{bound}")
}

pub async fn run(config: Config) -> anyhow::Result<ExitCode> {
    let db = open_orchestration_database(&config).await?;
    let listener = bind(settings::listen(&config, &ENGINE_LISTEN, false)?, "engine").await?;
    let bound = listener.local_addr()?;
    let endpoint = advertised_endpoint(&config, bound);
    tracing::info!(target: "keelson", "stack engine gRPC on {bound} (advertised as {endpoint})");
    let mut engine_settings = keelson_stack_engine::settings_from_config(&config, endpoint);
    let tls = settings::mesh_tls(&config)?;
    engine_settings.engine.tls = tls.clone();
    match &engine_settings.inventory_endpoint {
        Some(url) => {
            tracing::info!(target: "keelson", "OS::Placement::* resources through the inventory service at {url}")
        }
        None => tracing::info!(target: "keelson", "no [keelson] inventory_endpoint: no OS::Placement::* resources"),
    }
    let shutdown = on_signal();
    let registration = register_with_controller(controller_addresses(&config)?, &mut engine_settings, shutdown.clone());
    let listener = GrpcListener { tcp: listener, tls };
    keelson_stack_engine::serve(db, engine_settings, listener, shutdown).await?;
    if let Some(r) = registration {
        let _ = r.await;
    }
    Ok(ExitCode::SUCCESS)
}

/// With controllers at `addrs`: gives the engine an id, makes the registry
/// its liveness source and its watchdog the controller's, and keeps its
/// registration alive until `shutdown` (then deregisters). None without.
pub fn register_with_controller(
    addrs: Vec<String>,
    engine: &mut keelson_stack_engine::Settings,
    shutdown: Shutdown,
) -> Option<tokio::task::JoinHandle<()>> {
    if addrs.is_empty() {
        return None;
    }
    let engine_id = engine.engine.engine_id.clone().unwrap_or_else(new_engine_id);
    engine.engine.engine_id = Some(engine_id.clone());
    let client =
        Arc::new(ControllerClient::with_tls(addrs.clone(), ClientOptions::default(), engine.engine.tls.clone()));
    engine.engine.controller_registry = Some(RegistryHandle(Arc::new(ControllerRegistry(client.clone()))));
    let interval = engine.engine.periodic_interval;
    // Three missed heartbeats and the registration is gone.
    let ttl = u32::try_from(interval.as_secs().saturating_mul(3).max(3)).unwrap_or(u32::MAX);
    let registration = Registration {
        service: ENGINE_SERVICE.into(),
        instance: engine_id,
        address: engine.engine.worker_endpoint.clone(),
        ttl_seconds: ttl,
    };
    tracing::info!(target: "keelson", "registering stack engine {} with the controller at {} (lease {ttl}s)", registration.instance, addrs.join(","));
    Some(tokio::spawn(keep_registered(client, registration, interval, shutdown)))
}

/// Registers, then heartbeats every `interval` (re-registering when the
/// registration is gone, e.g. after a controller restart or failover).
async fn keep_registered(
    client: Arc<ControllerClient>,
    registration: Registration,
    interval: Duration,
    shutdown: Shutdown,
) {
    let mut registered = false;
    let mut ticker = tokio::time::interval(
        interval.min(Duration::from_secs(u64::from(registration.ttl_seconds)) / 3).max(Duration::from_millis(200)),
    );
    let stop = shutdown.wait();
    tokio::pin!(stop);
    // Shutdown wins every race (`biased`, and it interrupts a call in
    // flight): otherwise a stop that comes while a call is failing (the
    // embedded controller stops first in all-in-one) meets an already-due
    // tick, which select! may pick at random, and each pick costs another
    // whole client retry deadline (5 s).
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            _ = ticker.tick() => {}
        }
        if registered {
            let beat = tokio::select! {
                biased;
                () = &mut stop => break,
                beat = client.heartbeat(&registration.service, &registration.instance) => beat,
            };
            match beat {
                Ok(_) => continue,
                Err(ClientError::Refused(CtrlError::NotFound(_))) => registered = false,
                Err(e) => {
                    tracing::warn!(target: "keelson", "controller heartbeat failed: {e}");
                    continue;
                }
            }
        }
        let outcome = tokio::select! {
            biased;
            () = &mut stop => break,
            outcome = client.register(registration.clone()) => outcome,
        };
        match outcome {
            Ok(_) => {
                registered = true;
                tracing::info!(target: "keelson", "stack engine {} registered with the controller", registration.instance);
            }
            Err(e) => tracing::warn!(target: "keelson", "controller registration failed (retrying): {e}"),
        }
    }
    if registered {
        // Best effort and brief: the lease expires by itself, and a stopping
        // process must not wait out the client's whole retry deadline for a
        // controller that is stopping too (all-in-one's embedded one).
        let deregistered =
            tokio::time::timeout(DEREGISTER_TIMEOUT, client.deregister(&registration.service, &registration.instance));
        if deregistered.await.is_err() {
            tracing::info!(target: "keelson", "controller unreachable at shutdown; the engine's lease expires by itself");
        }
    }
}

/// How long a stopping engine tries to deregister.
const DEREGISTER_TIMEOUT: Duration = Duration::from_millis(500);

fn new_engine_id() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "engine".into());
    format!("{host}-{}-{nanos:x}", std::process::id())
}

/// The controller's registry as the engine's liveness source.
struct ControllerRegistry(Arc<ControllerClient>);

impl EngineRegistry for ControllerRegistry {
    fn is_registered<'a>(&'a self, engine_id: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move { self.0.is_registered(ENGINE_SERVICE, engine_id).await.map_err(|e| e.to_string()) })
    }
}
