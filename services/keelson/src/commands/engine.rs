//! `keelson engine`: one Heat stack engine process.

use std::process::ExitCode;

use anyhow::Context as _;
use keelson_common::{Config, Db};

use super::services::{bind, on_signal};
use crate::settings;

/// Connects to the orchestration database and brings its schema up to
/// date (several engines may start at once: the sync tolerates that).
pub async fn open_orchestration_database(config: &Config) -> anyhow::Result<Db> {
    let url = settings::orchestration_database_url(config)?;
    let db = Db::connect(&url, &settings::pool_settings(config))
        .await
        .with_context(|| format!("connecting to {}", url.display))?;
    keelson_stack_engine::store::schema::sync(&db).await.context("orchestration schema")?;
    Ok(db)
}

/// The address other engines reach this one at: `[keelson]
/// engine_advertise`, else the listen address (a wildcard listen address
/// advertises the host name).
pub fn advertised_endpoint(config: &Config, bound: std::net::SocketAddr) -> String {
    if let Some(a) = config.get_str("keelson", "engine_advertise").filter(|a| !a.is_empty()) {
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
    let listener = bind(settings::listen(&config, "engine_listen", false)?, "engine").await?;
    let bound = listener.local_addr()?;
    let endpoint = advertised_endpoint(&config, bound);
    tracing::info!(target: "keelson", "stack engine gRPC on {bound} (advertised as {endpoint})");
    let engine_settings = keelson_stack_engine::settings_from_config(&config, endpoint);
    keelson_stack_engine::serve(db, engine_settings, listener, on_signal()).await?;
    Ok(ExitCode::SUCCESS)
}
