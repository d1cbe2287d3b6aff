//! keelson's gRPC wire contracts, generated from the `.proto` files beside
//! this crate. Every service re-exports what it serves from here so that
//! clients and servers can never drift apart.

pub mod codec;

pub mod common {
    pub mod v1 {
        tonic::include_proto!("keelson.common.v1");
    }
}

pub mod placement {
    pub mod v1 {
        tonic::include_proto!("keelson.placement.v1");
    }
}

pub mod candidates {
    pub mod v2 {
        tonic::include_proto!("keelson.candidates.v2");
    }
}

pub mod orchestration {
    pub mod v1 {
        tonic::include_proto!("keelson.orchestration.v1");
    }
}

/// Encoded `FileDescriptorSet` of every keelson service, for gRPC server
/// reflection (so `grpcurl list` works against any service).
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("keelson_descriptor");
