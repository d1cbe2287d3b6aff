//! The allocation-candidates service: upstream Placement's algorithm
//! (`GET /allocation_candidates`) over the shared Placement schema, served
//! over gRPC. The algorithm lands with its own issue; today this process
//! serves health checking and reflection so deployments can already run
//! and probe it.

use keelson_common::shutdown::Shutdown;
use tokio::net::TcpListener;

/// Serves the candidates gRPC endpoint on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, shutdown: Shutdown) -> Result<(), tonic::transport::Error> {
    keelson_common::grpc::serve(listener, &[], |router| router, shutdown).await
}
