//! Every service in one process, talking gRPC over loopback exactly as
//! the separate processes do. The process is its own (single-node)
//! primary: it syncs the standard traits and classes before it serves
//! (so the first request finds them), and its embedded controller runs
//! the singleton duties (the sync again each term, the engine's
//! watchdog); the engine registers with it.

use std::process::ExitCode;

use keelson_gateway::options::AUTH_STRATEGY;
use keelson_inventory::{Store, StoreSettings};
use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::Config;
use keelson_stack_engine::options::{HEAT_API_CFN_PUBLIC, ORCHESTRATION_LISTEN, PUBLIC_ENDPOINT};

use super::controller_view::ControllerNodes;
use super::services::{bind, on_signal, open_database};
use crate::options::{CANDIDATES_LISTEN, ENGINE_LISTEN, INVENTORY_LISTEN};
use crate::settings;

pub async fn run(config: Config) -> anyhow::Result<ExitCode> {
    let db = open_database(&config, true, true).await?;
    tracing::info!(target: "keelson", "database {}", db.url.display);

    let inv_listener = bind(settings::listen(&config, &INVENTORY_LISTEN, true)?, "inventory").await?;
    let cand_listener = bind(settings::listen(&config, &CANDIDATES_LISTEN, true)?, "candidates").await?;
    let p_listener = bind(settings::placement_listen(&config, true)?, "placement API").await?;
    let o_listener = bind(settings::listen(&config, &ORCHESTRATION_LISTEN, true)?, "orchestration API").await?;
    let ctl_listener = bind(super::controller::listen(&config, true)?, "controller RPC").await?;
    let engine_listener = bind(settings::listen(&config, &ENGINE_LISTEN, true)?, "stack engine").await?;
    let orchestration_db = super::engine::open_orchestration_database(&config).await?;
    let engine_addr = engine_listener.local_addr()?;
    let inv_addr = inv_listener.local_addr()?;
    let cand_addr = cand_listener.local_addr()?;

    tracing::info!(target: "keelson", "inventory gRPC on {inv_addr}");
    tracing::info!(target: "keelson", "candidates gRPC on {cand_addr}");
    tracing::info!(target: "keelson", "stack engine gRPC on {engine_addr} (database {})", orchestration_db.url.display);
    tracing::info!(target: "keelson", "Placement API on http://{} (auth: {})", p_listener.local_addr()?, config.get(&AUTH_STRATEGY));
    tracing::info!(target: "keelson", "Orchestration API on http://{}", o_listener.local_addr()?);
    tracing::info!(target: "keelson", "controller RPC on {} (single node)", ctl_listener.local_addr()?);

    let shutdown = on_signal();
    // Plaintext on loopback unless the configuration gives certificates.
    let tls = settings::mesh_tls(&config)?;
    let inventory = keelson_gateway::server::channel(&format!("http://{inv_addr}"), tls.as_deref())?;
    let metrics = keelson_gateway::layers::metrics::Metrics::default();
    let candidates = keelson_gateway::server::channel(&format!("http://{cand_addr}"), tls.as_deref())?;
    let engine_channel = keelson_gateway::server::channel(&format!("http://{engine_addr}"), tls.as_deref())?;
    let console = keelson_gateway::server::ConsoleSources {
        engines: vec![engine_channel.clone()],
        controller: ControllerNodes::view(vec![ctl_listener.local_addr()?.to_string()], tls.clone()),
    };
    let placement =
        keelson_gateway::server::placement_app(&config, inventory, candidates, metrics.clone(), Some(console))?;
    let cfn = keelson_gateway::server::cfn_app(&config, vec![engine_channel.clone()], metrics.clone())?;
    let cfn_listener = match &cfn {
        Some(_) => Some(bind(settings::cfn_listen(&config, true)?, "heat-api-cfn").await?),
        None => None,
    };
    let orchestration = keelson_gateway::server::orchestration_app(&config, vec![engine_channel], metrics)?;
    let mut engine_settings = keelson_stack_engine::settings_from_config(&config, format!("http://{engine_addr}"));
    engine_settings.engine.tls = tls.clone();
    // The engine's OS::Placement::* resources use this process's inventory.
    engine_settings.inventory_endpoint = Some(format!("http://{inv_addr}"));
    // Instances signal the Orchestration API this process serves.
    if !config.is_set(&PUBLIC_ENDPOINT) {
        engine_settings.engine.signals.orchestration_url = format!("http://{}", o_listener.local_addr()?);
    }
    // Pre-signed EC2 URLs name the heat-api-cfn this process serves.
    if let (Some(l), false) = (&cfn_listener, config.is_set(&HEAT_API_CFN_PUBLIC)) {
        engine_settings.engine.signals.cfn_url = format!("http://{}/v1", l.local_addr()?);
        tracing::info!(target: "keelson", "heat-api-cfn on http://{}", l.local_addr()?);
    }
    let ctl_addr = ctl_listener.local_addr()?;
    let registration =
        super::engine::register_with_controller(vec![ctl_addr.to_string()], &mut engine_settings, shutdown.clone());
    let (synced_tx, _synced) = tokio::sync::watch::channel(false);

    let store = Store::new(db.clone(), StoreSettings::from_config(&config));
    let cand_store = keelson_candidates::Store::new(db.clone(), keelson_candidates::settings_from_config(&config));
    let (inv_listener, cand_listener, engine_listener) = (
        GrpcListener { tcp: inv_listener, tls: tls.clone() },
        GrpcListener { tcp: cand_listener, tls: tls.clone() },
        GrpcListener { tcp: engine_listener, tls },
    );
    let inv =
        async { keelson_inventory::serve(store, inv_listener, shutdown.clone()).await.map_err(anyhow::Error::from) };
    let cand = async {
        keelson_candidates::serve(cand_store, cand_listener, shutdown.clone()).await.map_err(anyhow::Error::from)
    };
    let edge_limits = keelson_gateway::server::ConnectionLimits::from_config(&config);
    let p = async {
        keelson_gateway::server::serve_placement(p_listener, placement, edge_limits, shutdown.clone().wait())
            .await
            .map_err(anyhow::Error::from)
    };
    let o = async {
        keelson_gateway::server::serve_orchestration(o_listener, orchestration, edge_limits, shutdown.clone().wait())
            .await
            .map_err(anyhow::Error::from)
    };
    let cfn = async {
        match (cfn, cfn_listener) {
            (Some(app), Some(listener)) => {
                keelson_gateway::server::serve_cfn(listener, app, edge_limits, shutdown.clone().wait())
                    .await
                    .map_err(anyhow::Error::from)
            }
            _ => Ok(()),
        }
    };
    let ctl = super::controller::embedded(&config, ctl_listener, db.clone(), synced_tx, shutdown.clone());
    let engine = async {
        keelson_stack_engine::serve(orchestration_db.clone(), engine_settings, engine_listener, shutdown.clone())
            .await
            .map_err(anyhow::Error::from)
    };
    tokio::try_join!(inv, cand, p, o, cfn, ctl, engine)?;
    if let Some(r) = registration {
        let _ = r.await;
    }
    db.close().await;
    orchestration_db.close().await;
    tracing::info!(target: "keelson", "stopped");
    Ok(ExitCode::SUCCESS)
}
