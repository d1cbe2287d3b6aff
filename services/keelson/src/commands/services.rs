//! Each service as its own process (how the Helm chart runs them).

use std::process::ExitCode;

use anyhow::Context as _;
use keelson_db::Db;
use keelson_inventory::{Store, StoreSettings};
use keelson_runtime::config::clamp_u32;
use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::shutdown::{self, Shutdown};
use keelson_runtime::tls::MeshTls;
use keelson_runtime::Config;
use tokio::net::TcpListener;

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

pub fn store_settings(config: &Config) -> StoreSettings {
    let d = StoreSettings::default();
    StoreSettings {
        allocation_conflict_retry_count: config
            .get_int("placement", "allocation_conflict_retry_count")
            .map(clamp_u32)
            .unwrap_or(d.allocation_conflict_retry_count),
        incomplete_consumer_project_id: config
            .get_str("placement", "incomplete_consumer_project_id")
            .unwrap_or(d.incomplete_consumer_project_id),
        incomplete_consumer_user_id: config
            .get_str("placement", "incomplete_consumer_user_id")
            .unwrap_or(d.incomplete_consumer_user_id),
    }
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
    let sync = config.get_bool("placement_database", "sync_on_startup");
    // With a controller, its primary syncs the standard traits and classes.
    let seed = super::controller::controller_addresses(&config)?.is_empty();
    let db = open_database(&config, sync, seed).await?;
    let listener = bind(settings::listen(&config, "inventory_listen", false)?, "inventory").await?;
    tracing::info!(target: "keelson", "inventory gRPC on {}", listener.local_addr()?);
    let listener = GrpcListener { tcp: listener, tls: settings::mesh_tls(&config)? };
    keelson_inventory::serve(Store::new(db, store_settings(&config)), listener, on_signal()).await?;
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
    let listener = bind(settings::listen(&config, "candidates_listen", false)?, "candidates").await?;
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
    for url in config.get_list("keelson", "engine_endpoints").into_iter().filter(|u| !u.is_empty()) {
        channels.push(keelson_gateway::server::channel(&url, tls)?);
    }
    anyhow::ensure!(!channels.is_empty(), "[keelson] engine_endpoints is empty");
    Ok(channels)
}

pub async fn gateway(config: Config) -> anyhow::Result<ExitCode> {
    let tls = settings::mesh_tls(&config)?;
    let inventory = keelson_gateway::server::channel(
        &config.get_str("keelson", "inventory_endpoint").unwrap_or_default(),
        tls.as_deref(),
    )?;
    let metrics = keelson_gateway::layers::metrics::Metrics::default();
    let candidates = keelson_gateway::server::candidates_channel(&config, tls.as_deref())?;
    let placement = keelson_gateway::server::placement_app(&config, inventory, candidates, metrics.clone())?;
    let orchestration =
        keelson_gateway::server::orchestration_app(&config, engine_channels(&config, tls.as_deref())?, metrics)?;
    let p_listener = bind(settings::placement_listen(&config, false)?, "placement API").await?;
    let o_listener = bind(settings::listen(&config, "orchestration_listen", false)?, "orchestration API").await?;
    tracing::info!(target: "keelson", "Placement API on http://{}", p_listener.local_addr()?);
    tracing::info!(target: "keelson", "Orchestration API on http://{}", o_listener.local_addr()?);
    let shutdown = on_signal();
    let edge_limits = keelson_gateway::server::ConnectionLimits::from_config(&config);
    let p = keelson_gateway::server::serve_placement(p_listener, placement, edge_limits, shutdown.clone().wait());
    let o = keelson_gateway::server::serve_orchestration(o_listener, orchestration, edge_limits, shutdown.wait());
    tokio::try_join!(p, o)?;
    Ok(ExitCode::SUCCESS)
}
