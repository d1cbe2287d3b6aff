//! Engine options, with Heat's option names where Heat has them.

use std::time::Duration;

use keelson_runtime::config::{clamp_u32, clamp_usize};

use crate::options::{self, default_seconds};

#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Fixed engine id (tests); None → a new uuid per process.
    pub engine_id: Option<String>,
    /// This engine's EngineWorker address (http://host:port).
    pub worker_endpoint: String,
    pub host: String,
    /// Heat `engine_life_check_timeout`: the Listening probe's timeout.
    pub engine_life_check_timeout: Duration,
    /// Heat `periodic_interval` / report interval: heartbeat + watchdog.
    pub periodic_interval: Duration,
    /// Heat `max_events_per_stack`.
    pub max_events_per_stack: i64,
    /// Ours: an IN_PROGRESS stack with no live lock holder and no change
    /// for this long is re-triggered by the watchdog.
    pub stall_timeout: Duration,
    /// Heat `action_retry_limit`.
    pub action_retry_limit: u32,
    /// Heat `client_retry_limit`.
    pub client_retry_limit: u32,
    /// Concurrent check_resource tasks per engine.
    pub max_concurrent_checks: usize,
    /// Ours: servers building at once per engine (None: no bound).
    pub max_concurrent_server_builds: Option<usize>,
    /// Heat `max_nested_stack_depth`.
    pub max_nested_stack_depth: i64,
    /// Heat `max_resources_per_stack`: resources in a root stack's whole
    /// tree (negative: no limit), checked again as nested stacks are made.
    pub max_resources_per_stack: i64,
    /// The region pseudo parameter.
    pub region_name: String,
    /// Heat `convergence_engine`: always on here.
    pub convergence_engine_enabled: bool,
    /// The controller's service registry, when one is configured: lock
    /// holders are asked about there first, and the watchdog runs only
    /// when the controller primary asks (`EngineWorker.RunWatchdog`).
    pub controller_registry: Option<super::cluster::RegistryHandle>,
    /// The mesh's mutual TLS identity for calls to other engines (None:
    /// plaintext).
    pub tls: Option<std::sync::Arc<keelson_runtime::tls::MeshTls>>,
    /// Where instances signal and poll, and how URLs are pre-signed.
    pub signals: super::signals::SignalSettings,
    /// Heat's notifications to a message broker (None: off).
    pub notifications: Option<crate::notifications::NotificationSettings>,
    /// Keystone (`[clients_keystone] auth_uri` and Heat's identity
    /// options): trusts and stack users. None: noauth, no Keystone.
    pub identity: Option<crate::identity::IdentitySettings>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            engine_id: None,
            worker_endpoint: String::new(),
            host: "localhost".to_string(),
            engine_life_check_timeout: default_seconds(&options::ENGINE_LIFE_CHECK_TIMEOUT),
            periodic_interval: default_seconds(&options::PERIODIC_INTERVAL),
            max_events_per_stack: options::MAX_EVENTS_PER_STACK.default_value(),
            stall_timeout: default_seconds(&options::STALL_TIMEOUT),
            action_retry_limit: clamp_u32(options::ACTION_RETRY_LIMIT.default_value()),
            client_retry_limit: clamp_u32(options::CLIENT_RETRY_LIMIT.default_value()),
            max_concurrent_checks: clamp_usize(options::MAX_CONCURRENT_CHECKS.default_value()),
            max_concurrent_server_builds: options::server_build_bound(
                options::MAX_CONCURRENT_SERVER_BUILDS.default_value(),
            ),
            max_nested_stack_depth: options::MAX_NESTED_STACK_DEPTH.default_value(),
            max_resources_per_stack: options::MAX_RESOURCES_PER_STACK.default_value(),
            region_name: "RegionOne".to_string(),
            convergence_engine_enabled: true,
            controller_registry: None,
            tls: None,
            signals: super::signals::SignalSettings::with_defaults("http://127.0.0.1:8004"),
            notifications: None,
            identity: None,
        }
    }
}
