//! Configuration as each subcommand sees it: the oslo-style files, the
//! environment variables the Placement tooling uses, and the embedded
//! defaults of `all-in-one`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use keelson_db::{DatabaseUrl, PoolSettings};
use keelson_gateway::options::{AUTH_STRATEGY, ORCHESTRATION_AUTH_STRATEGY};
use keelson_runtime::config::{clamp_u32, Opt};
use keelson_runtime::Config;

use crate::cli::CommonArgs;
use crate::options::{
    MAX_OVERFLOW, MAX_POOL_SIZE, MYSQL_SQL_MODE, ORCHESTRATION_CONNECTION, PLACEMENT_CONNECTION, PLACEMENT_LISTEN,
    POOL_TIMEOUT,
};

/// Embedded defaults: where all-in-one keeps its data.
pub const DATA_DIR: &str = "keelson-data";

/// Loads the configuration files (`--config-file …` then
/// `PLACEMENT_CONFIG_FILE`).
pub fn load(common: &CommonArgs) -> anyhow::Result<Config> {
    let mut files: Vec<PathBuf> = common.config_files.clone();
    if let Ok(f) = std::env::var("PLACEMENT_CONFIG_FILE") {
        if !f.is_empty() {
            files.push(PathBuf::from(f));
        }
    }
    Ok(Config::load(&files, &crate::options::registry())?)
}

/// All-in-one's embedded defaults for whatever the files leave unset.
pub fn apply_all_in_one_defaults(config: &mut Config) -> anyhow::Result<()> {
    if !config.is_set(&PLACEMENT_CONNECTION) {
        std::fs::create_dir_all(DATA_DIR).with_context(|| format!("creating ./{DATA_DIR}"))?;
        let url = format!("sqlite:///{DATA_DIR}/placement.db");
        config.set(PLACEMENT_CONNECTION.group, PLACEMENT_CONNECTION.name, &url);
    }
    if !config.is_set(&ORCHESTRATION_CONNECTION) {
        std::fs::create_dir_all(DATA_DIR).with_context(|| format!("creating ./{DATA_DIR}"))?;
        // Several harness-started instances may share a working directory:
        // each keeps its own orchestration database.
        let file = match std::env::var("PLACEMENT_PORT") {
            Ok(port) if !port.is_empty() => format!("orchestration-{port}.db"),
            _ => "orchestration.db".to_string(),
        };
        let url = format!("sqlite:///{DATA_DIR}/{file}");
        config.set(ORCHESTRATION_CONNECTION.group, ORCHESTRATION_CONNECTION.name, &url);
    }
    if !config.is_set(&AUTH_STRATEGY) {
        config.set(AUTH_STRATEGY.group, AUTH_STRATEGY.name, "noauth2");
    }
    if !config.is_set(&ORCHESTRATION_AUTH_STRATEGY) {
        config.set(ORCHESTRATION_AUTH_STRATEGY.group, ORCHESTRATION_AUTH_STRATEGY.name, "noauth");
    }
    Ok(())
}

/// Where harness-mode listeners that the configuration does not name
/// bind: a free port on a loopback address other than the harness's own
/// 127.0.0.1. The harness picks a free 127.0.0.1 port for each instance
/// before starting it; were the internal listeners of another instance on
/// 127.0.0.1:0 too, the kernel could hand one of them that port in between
/// and the instance would find its REST port taken.
pub const HARNESS_INTERNAL_LISTEN: &str = "127.0.0.2:0";

/// Whether the process was started by Placement tooling that picks the
/// REST port (the conformance harness runs several instances at once).
pub fn harness_mode() -> bool {
    std::env::var("PLACEMENT_PORT").is_ok_and(|p| !p.is_empty())
}

/// Where the Placement API listens: `PLACEMENT_BIND`/`PLACEMENT_PORT`
/// when set, else `[keelson] placement_listen` (all-in-one: loopback).
pub fn placement_listen(config: &Config, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    if harness_mode() || std::env::var("PLACEMENT_BIND").is_ok() {
        let bind = std::env::var("PLACEMENT_BIND").unwrap_or_else(|_| "127.0.0.1".into());
        let port = std::env::var("PLACEMENT_PORT").unwrap_or_else(|_| "8778".into());
        return parse_addr(&format!("{bind}:{port}"), "PLACEMENT_BIND/PLACEMENT_PORT");
    }
    listen(config, &PLACEMENT_LISTEN, all_in_one)
}

/// A listen address option; all-in-one binds loopback by default, and in
/// harness mode every listener the configuration does not name takes a
/// free port so that several instances can run side by side.
pub fn listen(config: &Config, option: &Opt<String>, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    let what = format!("[{}] {}", option.group, option.name);
    if config.is_set(option) {
        return parse_addr(&config.get(option), &what);
    }
    if all_in_one && harness_mode() && option.name != PLACEMENT_LISTEN.name {
        return parse_addr(HARNESS_INTERNAL_LISTEN, option.name);
    }
    let default = config.get(option);
    let addr = if all_in_one { default.replace("0.0.0.0", "127.0.0.1") } else { default };
    parse_addr(&addr, &what)
}

/// heat-api-cfn's listener: `[keelson] cfn_listen`, else Heat's
/// `[heat_api_cfn] bind_host`/`bind_port`, with `listen`'s all-in-one and
/// harness rules when none is set.
pub fn cfn_listen(config: &Config, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    use keelson_stack_engine::options::{CFN_LISTEN, HEAT_API_CFN_BIND_HOST, HEAT_API_CFN_BIND_PORT};
    let what = "[keelson] cfn_listen";
    let set =
        config.is_set(&CFN_LISTEN) || config.is_set(&HEAT_API_CFN_BIND_HOST) || config.is_set(&HEAT_API_CFN_BIND_PORT);
    let addr = keelson_stack_engine::options::cfn_listen(config);
    if set {
        return parse_addr(&addr, what);
    }
    if all_in_one && harness_mode() {
        return parse_addr(HARNESS_INTERNAL_LISTEN, what);
    }
    let addr = if all_in_one { addr.replace("0.0.0.0", "127.0.0.1") } else { addr };
    parse_addr(&addr, what)
}

fn parse_addr(v: &str, what: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    v.to_socket_addrs()
        .with_context(|| format!("invalid address {v:?} for {what}"))?
        .next()
        .with_context(|| format!("address {v:?} for {what} resolves to nothing"))
}

/// The mesh's mutual TLS identity (`[keelson] tls_*_file`); None:
/// plaintext.
pub fn mesh_tls(config: &Config) -> anyhow::Result<Option<std::sync::Arc<keelson_runtime::tls::MeshTls>>> {
    Ok(keelson_runtime::tls::MeshTls::from_config(config)?)
}

/// The Placement database URL from `[placement_database] connection`.
pub fn database_url(config: &Config) -> anyhow::Result<DatabaseUrl> {
    let Some(url) = config.get(&PLACEMENT_CONNECTION) else {
        bail!("[placement_database] connection is not set");
    };
    DatabaseUrl::parse(&url)
        .with_context(|| format!("[placement_database] connection in {}", config.source_of(&PLACEMENT_CONNECTION)))
}

/// The stack engine's database URL from `[database] connection` (Heat's
/// option; its own database, apart from Placement's).
pub fn orchestration_database_url(config: &Config) -> anyhow::Result<DatabaseUrl> {
    let Some(url) = config.get(&ORCHESTRATION_CONNECTION) else {
        bail!("[database] connection (the orchestration database) is not set");
    };
    DatabaseUrl::parse(&url)
        .with_context(|| format!("[database] connection in {}", config.source_of(&ORCHESTRATION_CONNECTION)))
}

/// Pool settings from `[placement_database]`.
pub fn pool_settings(config: &Config) -> PoolSettings {
    let mut s = PoolSettings::default();
    if let Some(n) = config.get(&MAX_POOL_SIZE).filter(|n| *n > 0) {
        // Unset: no overflow.
        let overflow = config.get(&MAX_OVERFLOW).unwrap_or(0).max(0);
        s.max_connections = clamp_u32(n.saturating_add(overflow));
    }
    if let Some(t) = config.get(&POOL_TIMEOUT).filter(|t| *t > 0) {
        s.acquire_timeout = std::time::Duration::from_secs(t as u64);
    }
    s.mysql_sql_mode = config.get(&MYSQL_SQL_MODE);
    s
}
