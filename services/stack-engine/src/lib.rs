//! The stack engine: OpenStack Heat's convergence engine behind the
//! `keelson.orchestration.v1` gRPC API.
//!
//! - [`keelson_hot`] (its own crate): the template language.
//! - [`resources`]: the resource type plugins (OS::Heat::None,
//!   TestResource, RandomString, Value; with an inventory endpoint also
//!   OS::Placement::ResourceProvider and Allocation), their property
//!   schemas and the in-place-or-replace decision.
//! - [`store`]: the convergence data model (stack, raw_template, resource,
//!   resource_data, sync_point, event, service) and its conditional writes
//!   (traversal CAS, resource lock CAS, sync-point merge).
//! - [`convergence`]: converge_stack, check_resource, propagate, sync
//!   points, cancel, lock stealing: the work spread over engine workers.
//! - [`service`]: the engine operations the API calls (create, update,
//!   delete, list, show, events, outputs, validate, resource types).
//! - [`rpc`]: the thin gRPC layer (`Orchestration` for the gateway,
//!   `EngineWorker` between engines).
//! - [`error`]: errors carrying Heat's exception type names.
//! - [`amqp`]: the AMQP 0-9-1 publisher [`notifications`] go out through.

pub mod amqp;
pub mod caller;
pub mod convergence;
pub mod definition;
pub mod error;
pub mod identity;
pub mod notifications;
pub mod options;
pub mod resources;
pub mod rpc;
pub mod service;
pub mod state;
pub mod store;
pub mod template_fetch;

pub use error::EngineError;

use std::sync::Arc;

use keelson_db::Db;
use keelson_runtime::config::{clamp_u32, clamp_usize, Opt};
use keelson_runtime::grpc::GrpcListener;
use keelson_runtime::options::{ENFORCE_NEW_DEFAULTS, ENFORCE_SCOPE, MAX_JSON_BODY_SIZE, POLICY_FILE};
use keelson_runtime::shutdown::Shutdown;
use keelson_runtime::Config;

pub use convergence::EngineSettings;
pub use service::ServiceSettings;

use options::{
    ACTION_RETRY_LIMIT, CLIENTS_HEAT_URL, CLIENT_RETRY_LIMIT, CLIENT_TIMEOUT, DEFAULT_DEPLOYMENT_SIGNAL_TRANSPORT,
    DEFAULT_SOFTWARE_CONFIG_TRANSPORT, ENABLE_STACK_ABANDON, ENABLE_STACK_ADOPT, ENGINE_LIFE_CHECK_TIMEOUT,
    HEAT_METADATA_SERVER_URL, HEAT_WAITCONDITION_SERVER_URL, HIDDEN_STACK_TAGS, INVENTORY_ENDPOINT,
    MAX_CONCURRENT_CHECKS, MAX_CONCURRENT_SERVER_BUILDS, MAX_EVENTS_PER_STACK, MAX_NESTED_STACK_DEPTH,
    MAX_RESOURCES_PER_STACK, MAX_SNAPSHOTS_PER_STACK, MAX_STACKS_PER_TENANT, MAX_TEMPLATE_SIZE, ORCHESTRATION_LISTEN,
    PERIODIC_INTERVAL, PUBLIC_ENDPOINT, SIGNAL_SIGNING_KEY, SIGNAL_URL_LIFETIME, STALL_TIMEOUT,
};

/// The fully qualified names of the gRPC services an engine serves.
pub const SERVICE_NAMES: &[&str] = &["keelson.orchestration.v1.Orchestration", "keelson.orchestration.v1.EngineWorker"];

/// Everything an engine process is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub engine: EngineSettings,
    pub service: ServiceSettings,
    /// The inventory service (`[keelson] inventory_endpoint` when the
    /// configuration sets it): with it the engine offers the
    /// OS::Placement::* resource types; without it, only service-free ones.
    pub inventory_endpoint: Option<String>,
    /// `[oslo_policy]`: the resource-type rules (`resource_types:<type>`)
    /// are Heat's defaults under this policy file.
    pub policy: keelson_policy::OsloPolicyOptions,
    /// What one resolution of template functions may produce, from
    /// `[orchestration] max_json_body_size` and `max_template_size`.
    pub evaluation_limits: keelson_hot::EvaluationLimits,
    /// How long fetching a template from a URL may take, request and
    /// answer each (`[orchestration] client_timeout`).
    pub template_fetch_timeout: std::time::Duration,
}

/// The engine's settings from `[orchestration]` (Heat's option names) and
/// the address other engines reach this one at.
pub fn settings_from_config(config: &Config, worker_endpoint: String) -> Settings {
    let secs = |opt: &Opt<i64>| options::positive_seconds(config, opt);
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".into());
    let d = EngineSettings::default();
    let notifications = notifications::NotificationSettings::from_config(config, &host);
    let engine = EngineSettings {
        worker_endpoint,
        host,
        engine_life_check_timeout: secs(&ENGINE_LIFE_CHECK_TIMEOUT),
        periodic_interval: secs(&PERIODIC_INTERVAL),
        max_events_per_stack: config.get(&MAX_EVENTS_PER_STACK),
        stall_timeout: secs(&STALL_TIMEOUT),
        action_retry_limit: clamp_u32(config.get(&ACTION_RETRY_LIMIT)),
        client_retry_limit: clamp_u32(config.get(&CLIENT_RETRY_LIMIT)),
        max_concurrent_checks: clamp_usize(config.get(&MAX_CONCURRENT_CHECKS).max(1)),
        max_concurrent_server_builds: options::server_build_bound(config.get(&MAX_CONCURRENT_SERVER_BUILDS)),
        max_nested_stack_depth: config.get(&MAX_NESTED_STACK_DEPTH),
        max_resources_per_stack: config.get(&MAX_RESOURCES_PER_STACK),
        signals: signal_settings(config),
        notifications,
        identity: identity::IdentitySettings::from_config(config),
        ..d
    };
    let service = ServiceSettings {
        enable_stack_abandon: config.get(&ENABLE_STACK_ABANDON),
        enable_stack_adopt: config.get(&ENABLE_STACK_ADOPT),
        hidden_stack_tags: config.get(&HIDDEN_STACK_TAGS),
        max_stacks_per_tenant: config.get(&MAX_STACKS_PER_TENANT),
        max_snapshots_per_stack: config.get(&MAX_SNAPSHOTS_PER_STACK),
        max_resources_per_stack: config.get(&MAX_RESOURCES_PER_STACK),
        max_template_size: clamp_usize(config.get(&MAX_TEMPLATE_SIZE)),
        max_nested_stack_depth: config.get(&MAX_NESTED_STACK_DEPTH),
        revision: env!("CARGO_PKG_VERSION").to_string(),
        ..ServiceSettings::default()
    };
    // Only an explicit endpoint: the option's default names a local
    // inventory service that a stand-alone engine usually does not have.
    let inventory_endpoint = config.is_set(&INVENTORY_ENDPOINT).then(|| config.get(&INVENTORY_ENDPOINT)).flatten();
    let dirs: Vec<std::path::PathBuf> =
        config.files.iter().filter_map(|f| f.parent().map(|p| p.to_path_buf())).collect();
    let policy = keelson_policy::OsloPolicyOptions::resolve(
        config.get(&POLICY_FILE).as_deref(),
        &dirs,
        config.get(&ENFORCE_NEW_DEFAULTS),
        Some(config.get(&ENFORCE_SCOPE)),
    );
    let body_size = clamp_usize(config.get(&MAX_JSON_BODY_SIZE));
    let evaluation_limits = keelson_hot::EvaluationLimits::from_heat_limits(body_size, service.max_template_size);
    let template_fetch_timeout = secs(&CLIENT_TIMEOUT);
    Settings { engine, service, inventory_endpoint, policy, evaluation_limits, template_fetch_timeout }
}

/// `[orchestration] public_endpoint` (else `http://` + `[keelson]
/// orchestration_listen`, a wildcard address read as loopback) and the
/// signal options; `all-in-one` replaces the default with the address it
/// bound.
fn signal_settings(config: &Config) -> convergence::SignalSettings {
    let text = |opt: &Opt<Option<String>>| config.get(opt).filter(|v| !v.trim().is_empty());
    let listen = config.get(&ORCHESTRATION_LISTEN).replace("0.0.0.0", "127.0.0.1");
    let public = text(&PUBLIC_ENDPOINT).unwrap_or_else(|| format!("http://{listen}"));
    let mut s = convergence::SignalSettings::with_defaults(public.trim_end_matches('/'));
    s.heat_url = text(&CLIENTS_HEAT_URL);
    s.waitcondition_server_url = text(&HEAT_WAITCONDITION_SERVER_URL);
    s.metadata_server_url = text(&HEAT_METADATA_SERVER_URL);
    s.url_lifetime = match config.get(&SIGNAL_URL_LIFETIME) {
        n if n <= 0 => None,
        n => Some(std::time::Duration::from_secs(n.unsigned_abs())),
    };
    s.signing_key = text(&SIGNAL_SIGNING_KEY);
    s.default_deployment_signal_transport = config.get(&DEFAULT_DEPLOYMENT_SIGNAL_TRANSPORT);
    s.default_software_config_transport = config.get(&DEFAULT_SOFTWARE_CONFIG_TRANSPORT);
    s.cfn_url = match text(&options::HEAT_API_CFN_PUBLIC) {
        Some(url) => format!("{}/v1", url.trim_end_matches('/').trim_end_matches("/v1")),
        None => format!("http://{}/v1", options::cfn_listen(config).replace("0.0.0.0", "127.0.0.1")),
    };
    s
}

/// Why an engine stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("policy: {0}")]
    Policy(#[from] keelson_policy::PolicyError),
}

/// Starts the production engine with its peers reached over
/// `EngineWorker` gRPC.
pub async fn start_engine(
    db: Db,
    registry: Arc<resources::Registry>,
    settings: EngineSettings,
) -> Result<Arc<convergence::Engine>, EngineError> {
    let transport = Arc::new(rpc::worker::GrpcWorkers::new(settings.engine_life_check_timeout, settings.tls.clone()));
    convergence::Engine::start(db, registry, settings, transport).await
}

/// Runs one engine on `db` (schema already synced): registers it, starts
/// its heartbeat and watchdog, and serves `Orchestration` and
/// `EngineWorker` on `listener` until `shutdown`.
pub async fn serve(
    db: Db,
    settings: Settings,
    listener: impl Into<GrpcListener>,
    shutdown: Shutdown,
) -> Result<(), ServeError> {
    settings.evaluation_limits.install();
    let mut registry = match &settings.inventory_endpoint {
        Some(url) => {
            // Lazy: the engine may start before the inventory service; a
            // call made meanwhile fails as unavailable and is retried.
            let channel = keelson_runtime::grpc::endpoint(url, settings.engine.tls.as_deref())?
                .connect_timeout(std::time::Duration::from_secs(5))
                .tcp_nodelay(true)
                .connect_lazy();
            resources::Registry::with_placement(resources::placement::PlacementClient::new(channel))
        }
        None => resources::Registry::builtin(),
    };
    let type_policy = settings.policy.heat_enforcer(keelson_policy::HeatEnforcer::ResourceTypes)?;
    for w in type_policy.warnings() {
        tracing::warn!(target: "keelson::policy", "{w}");
    }
    registry.set_type_policy(type_policy);
    registry.set_template_fetcher(template_fetch::TemplateFetcher::new(
        settings.template_fetch_timeout,
        settings.service.max_template_size,
    ));
    if settings.engine.identity.is_some() {
        registry.add_openstack_types();
    }
    let registry = Arc::new(registry);
    let engine = start_engine(db.clone(), registry.clone(), settings.engine).await?;
    let api = Arc::new(service::Orchestration::new(engine.clone(), db, registry, settings.service));
    let worker = rpc::worker::WorkerService::new(engine.clone());
    let api = rpc::api::OrchestrationApi::new(api);
    keelson_runtime::grpc::serve(
        listener,
        SERVICE_NAMES,
        |router| router.add_service(api.into_server()).add_service(worker.into_server()),
        shutdown,
    )
    .await?;
    Ok(())
}
