//! `keelson controller`: one HA controller node; and the single-node
//! controller that `all-in-one` embeds.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context as _;
use keelson_common::shutdown::Shutdown;
use keelson_common::Config;
use keelson_controller::ControllerSettings;
use tokio::net::TcpListener;

use super::services::{bind, on_signal};
use crate::settings;

/// Where the controller's RPC listens: `[controller] listen`; in
/// all-in-one, when unset, 127.0.0.1:7001, or a free port in harness mode
/// (PLACEMENT_PORT set), like the other listeners.
pub fn listen(config: &Config, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    let value = if config.is_set("controller", "listen") || !all_in_one {
        config.get_str("controller", "listen").unwrap_or_else(|| "127.0.0.1:7001".into())
    } else if settings::harness_mode() {
        "127.0.0.1:0".into()
    } else {
        "127.0.0.1:7001".into()
    };
    value
        .to_socket_addrs()
        .with_context(|| format!("invalid address {value:?} for [controller] listen"))?
        .next()
        .with_context(|| format!("address {value:?} for [controller] listen resolves to nothing"))
}

pub async fn run(config: Config) -> anyhow::Result<ExitCode> {
    let listener = bind(listen(&config, false)?, "controller RPC").await?;
    let settings = ControllerSettings::from_config(&config, listener.local_addr()?)?;
    tracing::info!(target: "keelson", "controller {} RPC on {}", settings.name, listener.local_addr()?);
    keelson_controller::run(settings, listener, on_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// The all-in-one controller: always single-node (PRIMARY, term 1), its
/// state under the data directory; in harness mode, where several
/// instances share a working directory, in memory.
pub async fn embedded(config: &Config, listener: TcpListener, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut settings = ControllerSettings::from_config(config, listener.local_addr()?)?;
    settings.etcd_endpoints.clear();
    if settings::harness_mode() {
        settings.data_dir = None;
    }
    keelson_controller::run(settings, listener, shutdown).await?;
    Ok(())
}
