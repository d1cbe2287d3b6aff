//! Serving a service's gRPC API: every server also answers gRPC health
//! checking and server reflection (so `grpcurl list` works), and stops
//! gracefully on shutdown.

use tokio::net::TcpListener;
use tonic::transport::server::Router;

use crate::shutdown::Shutdown;

/// Serves the services `add` puts on the router, on `listener`, until
/// `shutdown` fires. `names` are the fully qualified service names
/// reported SERVING by the health service.
pub async fn serve(
    listener: TcpListener,
    names: &[&str],
    add: impl FnOnce(Router) -> Router,
    shutdown: Shutdown,
) -> Result<(), tonic::transport::Error> {
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
