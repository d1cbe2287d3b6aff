//! Serving a service's gRPC API and dialing another's. Every server also
//! answers gRPC health checking and server reflection (so `grpcurl list`
//! works) and stops gracefully on shutdown; with the mesh's TLS identity
//! ([`MeshTls`]) servers require client certificates and clients present
//! theirs.

use std::sync::{Arc, RwLock};

use tokio::net::TcpListener;
use tonic::transport::server::Router;
use tonic::transport::Endpoint;

use crate::config::clamp_usize;
use crate::context::ServerContextLayer;
use crate::options::MAX_JSON_BODY_SIZE;
use crate::shutdown::Shutdown;
use crate::tls::MeshTls;
use crate::Config;

/// The largest Placement request body the REST edge accepts (upstream has
/// no option: its WSGI containers' usual bound).
pub const PLACEMENT_MAX_BODY_SIZE: usize = 16 * 1024 * 1024;

/// The sizes every gRPC hop (every server and every client, both
/// directions) allows, derived from the REST edge's body limits, so that
/// whatever the edge accepts crosses every hop, and every error it causes
/// comes back as the error it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLimits {
    /// A request message (client encoding, server decoding): twice the
    /// largest REST body plus 1 MiB. Twice, because a protobuf message can
    /// be larger than the JSON it was translated from (a map of short keys
    /// and small numbers costs more tag and length bytes than quotes and
    /// colons); 1 MiB for the envelope (ids, request context, behaviours).
    pub request_message: usize,
    /// An answer (server encoding, client decoding): 16 times the request
    /// bound. Answers are lists the services build from the database
    /// (providers, allocations, candidates, stacks), not bounded by any one
    /// request, so this is only a ceiling on what the gateway holds to
    /// render one response.
    pub response_message: usize,
    /// The longest error text carried across a hop: the largest REST body
    /// plus 64 KiB (an error names at most what the request said, with
    /// upstream's sentence around it). Longer texts are cut, with a note
    /// saying how much was left out (a last resort no request within the
    /// body limits reaches).
    pub error_detail: usize,
    /// HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE on both ends: an error travels
    /// in the trailers (`grpc-status-details-bin`, base64: 4/3 of the
    /// encoded detail, plus the `grpc-message` summary) and must fit.
    pub header_list: u32,
}

/// `grpc-message` carries a summary of an error for tools that do not
/// read keelson's detail (grpcurl); the full text is in the detail. In
/// bytes of text, before percent-encoding (at most three times as many).
pub const STATUS_MESSAGE_SUMMARY: usize = 1024;

impl WireLimits {
    /// The limits for REST bodies of at most `rest_body` bytes.
    pub fn for_rest_body(rest_body: usize) -> WireLimits {
        const MIB: usize = 1024 * 1024;
        let request_message = rest_body.saturating_mul(2).saturating_add(MIB);
        let error_detail = rest_body.saturating_add(64 * 1024);
        // base64 of the detail message (text + a few bytes of framing),
        // the percent-encoded summary, and 64 KiB for the other headers.
        let header_list = (error_detail + 64)
            .div_ceil(3)
            .saturating_mul(4)
            .saturating_add(3 * STATUS_MESSAGE_SUMMARY)
            .saturating_add(64 * 1024);
        WireLimits {
            request_message,
            response_message: request_message.saturating_mul(16),
            error_detail,
            header_list: u32::try_from(header_list).unwrap_or(u32::MAX),
        }
    }

    /// The limits for the configured REST edge: the larger of Placement's
    /// body bound and `[orchestration] max_json_body_size`.
    pub fn from_config(config: &Config) -> WireLimits {
        // A negative size reads as the default.
        let orchestration = usize::try_from(config.get(&MAX_JSON_BODY_SIZE))
            .unwrap_or_else(|_| clamp_usize(MAX_JSON_BODY_SIZE.default_value()));
        WireLimits::for_rest_body(PLACEMENT_MAX_BODY_SIZE.max(orchestration))
    }

    /// Makes `self` the process's limits: every server [`serve`] starts
    /// and every [`endpoint`] dialled afterwards, and the error texts
    /// [`crate::ApiError::to_status`] encodes. A process has one
    /// configuration, read once at start.
    pub fn install(self) {
        if let Ok(mut current) = INSTALLED.write() {
            *current = Some(self);
        }
    }

    /// The process's limits ([`WireLimits::install`]; before that, the
    /// ones of the default configuration).
    pub fn current() -> WireLimits {
        INSTALLED
            .read()
            .ok()
            .and_then(|l| *l)
            .unwrap_or_else(|| WireLimits::for_rest_body(PLACEMENT_MAX_BODY_SIZE.max(1_048_576)))
    }
}

static INSTALLED: RwLock<Option<WireLimits>> = RwLock::new(None);

/// Where a gRPC server listens: a bound socket, and the TLS identity when
/// the mesh runs mutual TLS.
pub struct GrpcListener {
    pub tcp: TcpListener,
    pub tls: Option<Arc<MeshTls>>,
}

impl From<TcpListener> for GrpcListener {
    /// Plaintext.
    fn from(tcp: TcpListener) -> Self {
        GrpcListener { tcp, tls: None }
    }
}

/// An endpoint for a service at `url`, plaintext or, with `tls`, mutual
/// TLS. With TLS an `http://` URL is dialled as `https://`: once
/// certificates are configured no internal call goes out in the clear.
/// The header list bound is the process's [`WireLimits`], so that an
/// error's trailers always fit.
pub fn endpoint(url: &str, tls: Option<&MeshTls>) -> Result<Endpoint, tonic::transport::Error> {
    let header_list = WireLimits::current().header_list;
    let Some(tls) = tls else {
        return Ok(Endpoint::from_shared(url.to_string())?.http2_max_header_list_size(header_list));
    };
    let url = match url.strip_prefix("http://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_string(),
    };
    Ok(Endpoint::from_shared(url)?.tls_config(tls.grpc_client())?.http2_max_header_list_size(header_list))
}

/// The router [`serve`] hands its caller: every route behind
/// [`ServerContextLayer`].
pub type ServiceRouter = Router<tower::layer::util::Stack<ServerContextLayer, tower::layer::util::Identity>>;

/// Serves the services `add` puts on the router, on `listener`, until
/// `shutdown` fires. `names` are the fully qualified service names
/// reported SERVING by the health service. The services `add` builds set
/// their message sizes from [`WireLimits::current`]. Every call runs
/// through [`ServerContextLayer`]: the service's span, the caller's child.
pub async fn serve(
    listener: impl Into<GrpcListener>,
    names: &[&str],
    add: impl FnOnce(ServiceRouter) -> ServiceRouter,
    shutdown: Shutdown,
) -> Result<(), tonic::transport::Error> {
    let GrpcListener { tcp: listener, tls } = listener.into();
    let (reporter, health) = tonic_health::server::health_reporter();
    for name in names {
        reporter.set_service_status(*name, tonic_health::ServingStatus::Serving).await;
    }
    // The empty name is "the server as a whole" for health probes.
    reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(keelson_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    // The services set their message sizes from the same limits.
    let limits = WireLimits::current();
    let mut builder =
        tonic::transport::Server::builder().tcp_nodelay(true).http2_max_header_list_size(limits.header_list);
    if let Some(tls) = &tls {
        builder = builder.tls_config(tls.grpc_server())?;
    }
    let mut builder = builder.layer(ServerContextLayer);
    let mut router = builder.add_service(health);
    // Both reflection versions: grpcurl releases before 1.9 speak v1alpha.
    if let Ok(v1) = reflection().build_v1() {
        router = router.add_service(v1);
    }
    if let Ok(v1alpha) = reflection().build_v1alpha() {
        router = router.add_service(v1alpha);
    }
    let router = add(router);
    // tonic ignores its own tcp_nodelay with a caller's incoming stream:
    // set it per connection, or Nagle holds a response's last frames back
    // until the client's delayed ACK (40 ms per call).
    let incoming = tokio_stream::StreamExt::map(tokio_stream::wrappers::TcpListenerStream::new(listener), |conn| {
        conn.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    });
    router.serve_with_incoming_shutdown(incoming, shutdown.wait()).await
}
