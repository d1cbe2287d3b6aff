//! Serving a service's gRPC API and dialing another's. Every server also
//! answers gRPC health checking and server reflection (so `grpcurl list`
//! works) and stops gracefully on shutdown; with the mesh's TLS identity
//! ([`MeshTls`]) servers require client certificates and clients present
//! theirs.

use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::transport::server::Router;
use tonic::transport::Endpoint;

use crate::shutdown::Shutdown;
use crate::tls::MeshTls;

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
pub fn endpoint(url: &str, tls: Option<&MeshTls>) -> Result<Endpoint, tonic::transport::Error> {
    let Some(tls) = tls else {
        return Endpoint::from_shared(url.to_string());
    };
    let url = match url.strip_prefix("http://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_string(),
    };
    Endpoint::from_shared(url)?.tls_config(tls.grpc_client())
}

/// Serves the services `add` puts on the router, on `listener`, until
/// `shutdown` fires. `names` are the fully qualified service names
/// reported SERVING by the health service.
pub async fn serve(
    listener: impl Into<GrpcListener>,
    names: &[&str],
    add: impl FnOnce(Router) -> Router,
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
    let mut builder = tonic::transport::Server::builder().tcp_nodelay(true);
    if let Some(tls) = &tls {
        builder = builder.tls_config(tls.grpc_server())?;
    }
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
