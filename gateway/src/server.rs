//! Starting the gateway's listeners from configuration.

use std::future::Future;
use std::sync::Arc;

use keelson_runtime::options::MAX_JSON_BODY_SIZE;
use keelson_runtime::tls::MeshTls;
use keelson_runtime::Config;
use tokio::net::TcpListener;
use tonic::transport::Channel;

use crate::console::{Console, ConsoleState, ControllerHistory, ControllerView, Login};
use crate::keystone::{KeystoneSettings, TokenValidator};
use crate::layers::auth::Authenticator;
use crate::layers::cors::CorsSettings;
use crate::layers::metrics::Metrics;
use crate::layers::request_log::LogState;
pub use crate::listener::ConnectionLimits;
use crate::listener::{Refusal, Refusals};
use crate::options::{AUTH_STRATEGY, CANDIDATES_ENDPOINT, ORCHESTRATION_AUTH_STRATEGY, REDIAL_TIMEOUT};
use crate::orchestration::engines::Engines;
use crate::placement::{self, Clients, PlacementState};
use crate::redial::RedialRefused;

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("policy: {0}")]
    Policy(#[from] keelson_policy::PolicyError),
    #[error("keystone: {0}")]
    Keystone(#[from] crate::keystone::AuthError),
    #[error("invalid service endpoint {0}: {1}")]
    Endpoint(String, String),
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}

/// A lazily connected channel to a service (mutual TLS with `tls`): the
/// gateway starts even when the service is not up yet, and reconnects
/// when it restarts.
pub fn channel(url: &str, tls: Option<&MeshTls>) -> Result<Channel, GatewayError> {
    let ep =
        keelson_runtime::grpc::endpoint(url, tls).map_err(|e| GatewayError::Endpoint(url.into(), e.to_string()))?;
    Ok(ep.connect_timeout(std::time::Duration::from_secs(5)).tcp_nodelay(true).connect_lazy())
}

/// The channel to the candidates service at `[keelson] candidates_endpoint`.
pub fn candidates_channel(config: &Config, tls: Option<&MeshTls>) -> Result<Channel, GatewayError> {
    channel(&config.get(&CANDIDATES_ENDPOINT), tls)
}

/// How long a call to a service whose port refuses it is held and
/// redialed (`[keelson] redial_timeout`, seconds; see [`crate::redial`]).
fn redial_window(config: &Config) -> std::time::Duration {
    let seconds = config.get(&REDIAL_TIMEOUT);
    std::time::Duration::try_from_secs_f64(seconds).unwrap_or(std::time::Duration::ZERO)
}

fn authenticator(config: &Config, strategy: &str) -> Result<Authenticator, GatewayError> {
    Ok(match strategy {
        "noauth2" | "noauth" => Authenticator::NoAuth2,
        _ => Authenticator::Keystone(Arc::new(TokenValidator::new(KeystoneSettings::from_config(config)?)?)),
    })
}

fn with_metrics(app: axum::Router, metrics: Metrics) -> axum::Router {
    let render = move || {
        let m = metrics.clone();
        async move { m.render() }
    };
    axum::Router::new().route("/metrics", axum::routing::get(render)).merge(app)
}

/// What the operator console draws beyond the Placement application's own
/// clients: the stack engines (the channels the Orchestration API uses)
/// and, when a controller is configured, a view of it.
pub struct ConsoleSources {
    pub engines: Vec<Channel>,
    pub controller: Option<Arc<dyn ControllerView>>,
}

/// The Placement application for `config`, talking to the inventory
/// service over `inventory` and to the candidates service over
/// `candidates` (see [`candidates_channel`]); with `console`, it serves
/// the operator console too.
pub fn placement_app(
    config: &Config,
    inventory: Channel,
    candidates: Channel,
    metrics: Metrics,
    console: Option<ConsoleSources>,
) -> Result<axum::Router, GatewayError> {
    let window = redial_window(config);
    let state = Arc::new(PlacementState {
        clients: Clients::new(RedialRefused::new(inventory, window), RedialRefused::new(candidates, window)),
        policy: placement::policy::Policy::from_config(config)?,
        standard_classes_seen: Default::default(),
    });
    let auth = authenticator(config, &config.get(&AUTH_STRATEGY))?;
    let console = console.map(|sources| {
        Arc::new(Console::new(ConsoleState {
            placement: state.clone(),
            engines: Engines::new(sources.engines),
            controller: sources.controller.map(ControllerHistory::start),
            metrics: metrics.clone(),
            login: match &auth {
                Authenticator::NoAuth2 => Login::NoAuth2,
                Authenticator::Keystone(validator) => Login::Keystone(validator.clone()),
            },
        }))
    });
    let app = placement::app::app(
        state,
        auth,
        CorsSettings::from_config(config),
        LogState { api: "placement", metrics: metrics.clone() },
        console,
    );
    Ok(with_metrics(app, metrics))
}

/// Serves the Placement application on a bound listener under `limits`
/// until `shutdown` resolves; the listener's own refusals carry
/// Placement's JSON error body.
pub async fn serve_placement(
    listener: TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::listener::serve(listener, app, limits, Arc::new(crate::placement::listener::PlacementRefusals), shutdown)
        .await
}

/// Serves the Orchestration application on a bound listener under
/// `limits` until `shutdown` resolves; the listener's own refusals carry
/// heat-api's fault body.
pub async fn serve_orchestration(
    listener: TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::listener::serve(listener, app, limits, Arc::new(OrchestrationRefusals), shutdown).await
}

/// heat-api's words for the listener's refusals: the fault body of the
/// webob exception for the status.
struct OrchestrationRefusals;

impl Refusals for OrchestrationRefusals {
    fn render(&self, refusal: &Refusal, _request_id: &str) -> axum::response::Response {
        let error_type = match refusal {
            Refusal::HeadTimeout => "HTTPRequestTimeout",
            Refusal::UriTooLong => "HTTPRequestURITooLong",
            Refusal::HeadersTooLarge => "HTTPRequestHeaderFieldsTooLarge",
            Refusal::BadContentLength | Refusal::Malformed(_) => "HTTPBadRequest",
        };
        crate::orchestration::fault::Fault::new(refusal.status(), error_type, refusal.message()).into_response()
    }
}

/// The Orchestration API's authentication strategy: its own option, else
/// Placement's (noauth2 there is Heat's noauth here).
fn orchestration_strategy(config: &Config) -> String {
    if config.is_set(&ORCHESTRATION_AUTH_STRATEGY) {
        config.get(&ORCHESTRATION_AUTH_STRATEGY)
    } else if config.get(&AUTH_STRATEGY) == "noauth2" {
        "noauth".to_string()
    } else {
        "keystone".to_string()
    }
}

/// The heat-api-cfn application (Keystone mode only: its requests are
/// authenticated by Keystone's `ec2tokens`), talking to the stack engines
/// over `engines`; None under noauth.
pub fn cfn_app(config: &Config, engines: Vec<Channel>, metrics: Metrics) -> Result<Option<axum::Router>, GatewayError> {
    if orchestration_strategy(config) == "noauth" {
        return Ok(None);
    }
    let keystone = KeystoneSettings::from_config(config)?;
    let http = keystone.http_client()?;
    let service = keelson_openstack::Session::new(http, &keystone.identity_v3, keystone.service_auth());
    let ec2 = crate::cfn::ec2::Ec2Auth::new(service);
    let max_json_body_size = usize::try_from(config.get(&MAX_JSON_BODY_SIZE))
        .unwrap_or_else(|_| keelson_runtime::config::clamp_usize(MAX_JSON_BODY_SIZE.default_value()));
    let settings = crate::cfn::CfnSettings { ec2: Arc::new(ec2), max_json_body_size };
    let app = crate::cfn::app(engines, settings, LogState { api: "cloudformation", metrics: metrics.clone() });
    Ok(Some(with_metrics(app, metrics)))
}

/// Serves heat-api-cfn on a bound listener; the listener's own refusals
/// carry CloudFormation's XML error body.
pub async fn serve_cfn(
    listener: TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::listener::serve(listener, app, limits, Arc::new(CfnRefusals), shutdown).await
}

struct CfnRefusals;

impl Refusals for CfnRefusals {
    fn render(&self, refusal: &Refusal, _request_id: &str) -> axum::response::Response {
        let fault = crate::cfn::fault::CfnFault::invalid_parameter_value(Some(refusal.message().to_string()));
        let mut resp = fault.into_response();
        *resp.status_mut() = http::StatusCode::from_u16(refusal.status()).unwrap_or(http::StatusCode::BAD_REQUEST);
        resp
    }
}

/// The Orchestration application for `config`, talking to the stack
/// engines over `engines` (one channel each; see
/// [`crate::orchestration::engines`]).
pub fn orchestration_app(
    config: &Config,
    engines: Vec<Channel>,
    metrics: Metrics,
) -> Result<axum::Router, GatewayError> {
    use crate::orchestration::{OrchestrationAuth, Settings};
    // One gateway serves both APIs: unless the Orchestration API names its
    // own strategy, it follows Placement's (noauth2 there means Heat's
    // noauth here), so a noauth2 gateway needs no Keystone settings.
    let strategy = orchestration_strategy(config);
    let auth = match strategy.as_str() {
        "noauth" => OrchestrationAuth::NoAuth,
        _ => OrchestrationAuth::keystone(
            TokenValidator::new(KeystoneSettings::from_config(config)?)?,
            crate::orchestration::OrchestrationPolicy::from_config(config)?,
        ),
    };
    // A negative size reads as the default.
    let max_json_body_size = usize::try_from(config.get(&MAX_JSON_BODY_SIZE))
        .unwrap_or_else(|_| keelson_runtime::config::clamp_usize(MAX_JSON_BODY_SIZE.default_value()));
    let settings = Settings { auth, max_json_body_size, cors: CorsSettings::from_config(config) };
    let app = crate::orchestration::app(engines, settings, LogState { api: "orchestration", metrics: metrics.clone() });
    Ok(with_metrics(app, metrics))
}
