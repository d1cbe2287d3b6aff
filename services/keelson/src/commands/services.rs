//! Each service as its own process (how the Helm chart runs them).

use std::process::ExitCode;

use anyhow::Context as _;
use keelson_db::Db;
use keelson_inventory::{Store, StoreSettings};
use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::shutdown::{self, Shutdown};
use keelson_runtime::tls::MeshTls;
use keelson_runtime::Config;
use keelson_stack_engine::options::{INVENTORY_ENDPOINT, ORCHESTRATION_LISTEN};
use tokio::net::TcpListener;

use super::controller_view::ControllerNodes;
use crate::options::{CANDIDATES_LISTEN, ENGINE_ENDPOINTS, INVENTORY_LISTEN, SYNC_ON_STARTUP};
use crate::settings;

/// Connects to the Placement database; creates or upgrades the schema
/// first when `sync` is set, else requires it to be current; inserts the
/// standard resource classes and traits when `seed` is set (with a
/// controller, its primary's singleton duty does that instead).
pub async fn open_database(config: &Config, sync: bool, seed: bool) -> anyhow::Result<Db> {
    let url = settings::database_url(config)?;
    let db = Db::connect(&url, &settings::pool_settings(config))
        .await
        .with_context(|| format!("connecting to {}", url.display))?;
    if sync {
        let outcome = keelson_placement_schema::schema::sync(&db).await?;
        tracing::info!(target: "keelson::db", "schema: {outcome:?}");
    } else {
        keelson_placement_schema::schema::check_current(&db).await?;
    }
    if seed {
        let seeded = keelson_placement_schema::seed::seed_standard(&db).await?;
        if seeded.resource_classes + seeded.traits > 0 {
            tracing::info!(target: "keelson::db", "inserted {} standard resource classes and {} standard traits", seeded.resource_classes, seeded.traits);
        }
    }
    Ok(db)
}

pub async fn bind(addr: std::net::SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr} for {what}"))
}

/// Runs until SIGINT/SIGTERM, then triggers the shared shutdown.
pub fn on_signal() -> Shutdown {
    let (trigger, shutdown) = shutdown::channel();
    tokio::spawn(async move {
        shutdown::signal().await;
        tracing::info!(target: "keelson", "shutting down");
        trigger.trigger();
    });
    shutdown
}

pub async fn inventory(config: Config) -> anyhow::Result<ExitCode> {
    let sync = config.get(&SYNC_ON_STARTUP);
    // With a controller, its primary syncs the standard traits and classes.
    let seed = super::controller::controller_addresses(&config)?.is_empty();
    let db = open_database(&config, sync, seed).await?;
    let listener = bind(settings::listen(&config, &INVENTORY_LISTEN, false)?, "inventory").await?;
    tracing::info!(target: "keelson", "inventory gRPC on {}", listener.local_addr()?);
    let listener = GrpcListener { tcp: listener, tls: settings::mesh_tls(&config)? };
    keelson_inventory::serve(Store::new(db, StoreSettings::from_config(&config)), listener, on_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

pub async fn candidates(config: Config) -> anyhow::Result<ExitCode> {
    // Read-only: the schema must be current (the inventory service or
    // `db sync` maintains it); the candidates service never writes.
    let url = settings::database_url(&config)?;
    let db = Db::connect(&url, &settings::pool_settings(&config))
        .await
        .with_context(|| format!("connecting to {}", url.display))?;
    keelson_placement_schema::schema::check_current(&db).await?;
    let listener = bind(settings::listen(&config, &CANDIDATES_LISTEN, false)?, "candidates").await?;
    tracing::info!(target: "keelson", "candidates gRPC on {}", listener.local_addr()?);
    let store = keelson_candidates::Store::new(db, keelson_candidates::settings_from_config(&config));
    let listener = GrpcListener { tcp: listener, tls: settings::mesh_tls(&config)? };
    keelson_candidates::serve(store, listener, on_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// One lazily connected channel per stack engine of `[keelson]
/// engine_endpoints`; the gateway fails over between them.
pub fn engine_channels(config: &Config, tls: Option<&MeshTls>) -> anyhow::Result<Vec<tonic::transport::Channel>> {
    let mut channels = Vec::new();
    for url in config.get(&ENGINE_ENDPOINTS) {
        channels.push(keelson_gateway::server::channel(&url, tls)?);
    }
    anyhow::ensure!(!channels.is_empty(), "[keelson] engine_endpoints is empty");
    Ok(channels)
}

/// Binds and serves heat-api-cfn when the gateway has it (Keystone mode).
pub async fn serve_cfn(
    config: &Config,
    app: Option<axum::Router>,
    limits: keelson_gateway::server::ConnectionLimits,
    shutdown: keelson_runtime::shutdown::Shutdown,
    all_in_one: bool,
) -> anyhow::Result<()> {
    let Some(app) = app else { return Ok(()) };
    let listener = bind(settings::cfn_listen(config, all_in_one)?, "heat-api-cfn").await?;
    tracing::info!(target: "keelson", "heat-api-cfn on http://{}", listener.local_addr()?);
    keelson_gateway::server::serve_cfn(listener, app, limits, shutdown.wait()).await?;
    Ok(())
}

pub async fn gateway(config: Config) -> anyhow::Result<ExitCode> {
    let tls = settings::mesh_tls(&config)?;
    // Empty: no endpoint, refused by the channel.
    let inventory =
        keelson_gateway::server::channel(&config.get(&INVENTORY_ENDPOINT).unwrap_or_default(), tls.as_deref())?;
    let metrics = keelson_gateway::layers::metrics::Metrics::default();
    let candidates = keelson_gateway::server::candidates_channel(&config, tls.as_deref())?;
    let engines = engine_channels(&config, tls.as_deref())?;
    // The console draws the controller when one is configured.
    let console = keelson_gateway::server::ConsoleSources {
        engines: engines.clone(),
        controller: ControllerNodes::view(super::controller::controller_addresses(&config)?, tls.clone()),
    };
    let placement =
        keelson_gateway::server::placement_app(&config, inventory, candidates, metrics.clone(), Some(console))?;
    let cfn = keelson_gateway::server::cfn_app(&config, engines.clone(), metrics.clone())?;
    let orchestration = keelson_gateway::server::orchestration_app(&config, engines, metrics)?;
    let p_listener = bind(settings::placement_listen(&config, false)?, "placement API").await?;
    let o_listener = bind(settings::listen(&config, &ORCHESTRATION_LISTEN, false)?, "orchestration API").await?;
    tracing::info!(target: "keelson", "Placement API on http://{}", p_listener.local_addr()?);
    tracing::info!(target: "keelson", "Orchestration API on http://{}", o_listener.local_addr()?);
    let shutdown = on_signal();
    let edge_limits = keelson_gateway::server::ConnectionLimits::from_config(&config);
    let p = keelson_gateway::server::serve_placement(p_listener, placement, edge_limits, shutdown.clone().wait());
    let c = serve_cfn(&config, cfn, edge_limits, shutdown.clone(), false);
    let o = keelson_gateway::server::serve_orchestration(o_listener, orchestration, edge_limits, shutdown.wait());
    let (p, o) = (async { p.await.map_err(anyhow::Error::from) }, async { o.await.map_err(anyhow::Error::from) });
    tokio::try_join!(p, o, c)?;
    Ok(ExitCode::SUCCESS)
}
