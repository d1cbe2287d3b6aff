//! `keelson controller`: one HA controller node; and the single-node
//! controller that `all-in-one` embeds. Both run the singleton duties
//! while they are the serving primary: the standard traits and classes
//! sync (once per term, when `[placement_database] connection` is set)
//! and, every `[orchestration] periodic_interval`, one watchdog pass on
//! one live stack engine (`EngineWorker.RunWatchdog`).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use keelson_controller::duties::{BoxFuture, Duties, DutyError};
use keelson_controller::options::{LISTEN, PEERS};
use keelson_controller::{Controller, ControllerSettings, DutiesFactory, Request, Response};
use keelson_db::{DatabaseUrl, Db, PoolSettings};
use keelson_proto::orchestration::v1::engine_worker_client::EngineWorkerClient;
use keelson_proto::orchestration::v1::RunWatchdogRequest;
use keelson_runtime::shutdown::Shutdown;
use keelson_runtime::tls::MeshTls;
use keelson_runtime::Config;
use keelson_stack_engine::options::{positive_seconds, ENGINE_LIFE_CHECK_TIMEOUT, PERIODIC_INTERVAL};
use tokio::net::TcpListener;
use tokio::sync::{watch, Mutex};

use super::services::{bind, on_signal};
use crate::options::{ENGINE_ENDPOINTS, PLACEMENT_CONNECTION};
use crate::settings;

/// The registry's service name of the stack engines.
pub const ENGINE_SERVICE: &str = "stack-engine";

/// Where the controller's RPC listens: `[controller] listen`; in
/// all-in-one, when unset, 127.0.0.1:7001, or in harness mode (PLACEMENT_PORT
/// set) a free port on `HARNESS_INTERNAL_LISTEN`, like the other listeners.
pub fn listen(config: &Config, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    let value = if config.is_set(&LISTEN) || !all_in_one {
        config.get(&LISTEN)
    } else if settings::harness_mode() {
        settings::HARNESS_INTERNAL_LISTEN.into()
    } else {
        LISTEN.default_value()
    };
    value
        .to_socket_addrs()
        .with_context(|| format!("invalid address {value:?} for [controller] listen"))?
        .next()
        .with_context(|| format!("address {value:?} for [controller] listen resolves to nothing"))
}

/// The configured controllers' addresses (`[controller] peers`); empty:
/// no controller (the services keep today's standalone behaviour).
pub fn controller_addresses(config: &Config) -> anyhow::Result<Vec<String>> {
    let peers = keelson_controller::settings::parse_peers(&config.get(&PEERS))?;
    Ok(peers.iter().map(|p| p.address()).collect())
}

/// `[orchestration] periodic_interval`: the watchdog duty's period.
pub fn duty_interval(config: &Config) -> Duration {
    positive_seconds(config, &PERIODIC_INTERVAL)
}

pub async fn run(config: Config) -> anyhow::Result<ExitCode> {
    let listener = bind(listen(&config, false)?, "controller RPC").await?;
    let settings = ControllerSettings::from_config(&config, listener.local_addr()?)?;
    tracing::info!(target: "keelson", "controller {} RPC on {}", settings.name, listener.local_addr()?);
    let placement = if config.is_set(&PLACEMENT_CONNECTION) {
        PlacementDb::Lazy(settings::database_url(&config)?, settings::pool_settings(&config))
    } else {
        PlacementDb::None
    };
    let duties = MeshDuties::factory(&config, placement, None);
    keelson_controller::run_with_duties(settings, listener, Some((duties, duty_interval(&config))), on_signal())
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// The all-in-one controller: always single-node (PRIMARY, term 1), its
/// state under the data directory; in harness mode, where several
/// instances share a working directory, in memory. `synced` turns true
/// after its first standard traits and classes sync.
pub async fn embedded(
    config: &Config,
    listener: TcpListener,
    placement: Db,
    synced: watch::Sender<bool>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut settings = ControllerSettings::from_config(config, listener.local_addr()?)?;
    settings.etcd_endpoints.clear();
    if settings::harness_mode() {
        settings.data_dir = None;
    }
    let duties = MeshDuties::factory(config, PlacementDb::Ready(placement), Some(synced));
    keelson_controller::run_with_duties(settings, listener, Some((duties, duty_interval(config))), shutdown).await?;
    Ok(())
}

pub enum PlacementDb {
    /// No `[placement_database] connection`: no sync.
    None,
    /// Connected at the first sync.
    Lazy(DatabaseUrl, PoolSettings),
    Ready(Db),
}

/// The duties' actions over the mesh's clients.
struct MeshDuties {
    ctl: Arc<Controller>,
    placement: Mutex<PlacementDb>,
    /// `[keelson] engine_endpoints` when set: asked when no engine is
    /// registered.
    fallback_engines: Vec<String>,
    next: AtomicUsize,
    timeout: Duration,
    synced: Option<watch::Sender<bool>>,
    /// The controller's own TLS identity, for its calls to engines.
    tls: Option<Arc<MeshTls>>,
}

impl MeshDuties {
    fn factory(config: &Config, placement: PlacementDb, synced: Option<watch::Sender<bool>>) -> DutiesFactory {
        let fallback_engines =
            if config.is_set(&ENGINE_ENDPOINTS) { config.get(&ENGINE_ENDPOINTS) } else { Vec::new() };
        let timeout = positive_seconds(config, &ENGINE_LIFE_CHECK_TIMEOUT);
        Box::new(move |ctl: &Arc<Controller>| {
            Arc::new(MeshDuties {
                ctl: ctl.clone(),
                placement: Mutex::new(placement),
                fallback_engines,
                next: AtomicUsize::new(0),
                // A pass may take a while on a large database.
                timeout: timeout.max(Duration::from_secs(30)),
                synced,
                tls: ctl.settings().tls.clone(),
            }) as Arc<dyn Duties>
        })
    }

    /// The live engines' worker endpoints: the registry's, else the
    /// configured ones.
    async fn engines(&self) -> Vec<String> {
        match self.ctl.handle(Request::List { service: ENGINE_SERVICE.into() }).await {
            Ok(Response::List(regs)) if !regs.is_empty() => return regs.into_iter().map(|r| r.address).collect(),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: "keelson::controller::duties", "registry unreadable: {e}"),
        }
        self.fallback_engines.clone()
    }

    async fn run_watchdog(&self, endpoint: &str) -> Result<(u32, u32), DutyError> {
        let channel = keelson_runtime::grpc::endpoint(endpoint, self.tls.as_deref())?
            .connect_timeout(Duration::from_secs(2))
            .timeout(self.timeout)
            .connect_lazy();
        let reply = EngineWorkerClient::new(channel).run_watchdog(RunWatchdogRequest {}).await?.into_inner();
        Ok((reply.locks_reclaimed, reply.traversals_retriggered))
    }
}

impl Duties for MeshDuties {
    fn sync_standard(&self) -> BoxFuture<'_, Result<String, DutyError>> {
        Box::pin(async move {
            let mut placement = self.placement.lock().await;
            if let PlacementDb::Lazy(url, pool) = &*placement {
                let db = Db::connect(url, pool).await?;
                *placement = PlacementDb::Ready(db);
            }
            let summary = match &*placement {
                PlacementDb::Ready(db) => {
                    let seeded = keelson_placement_schema::seed::seed_standard(db).await?;
                    format!(
                        "inserted {} standard resource classes and {} standard traits",
                        seeded.resource_classes, seeded.traits
                    )
                }
                _ => "skipped (no [placement_database] connection)".to_string(),
            };
            if let Some(synced) = &self.synced {
                synced.send_replace(true);
            }
            Ok(summary)
        })
    }

    fn periodic(&self) -> BoxFuture<'_, Result<String, DutyError>> {
        Box::pin(async move {
            let engines = self.engines().await;
            if engines.is_empty() {
                return Ok(String::new());
            }
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            let mut last = String::new();
            for i in 0..engines.len() {
                let endpoint = &engines[(start + i) % engines.len()];
                match self.run_watchdog(endpoint).await {
                    Ok((0, 0)) => return Ok(String::new()),
                    Ok((locks, stacks)) => {
                        return Ok(format!(
                            "engine {endpoint}: {locks} locks reclaimed, {stacks} traversals re-triggered"
                        ))
                    }
                    Err(e) => last = format!("{endpoint}: {e}"),
                }
            }
            Err(format!("no stack engine ran the watchdog (last: {last})").into())
        })
    }
}
