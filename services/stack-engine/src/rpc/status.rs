//! [`EngineError`] on the wire: a gRPC status carrying a
//! `keelson.common.v1.ErrorDetail` whose `code` is Heat's type name and
//! whose `http_status` is heat-api's, so the gateway rebuilds Heat's error
//! body exactly. Decoding maps known type names back to their variants,
//! so control flow after a hop still matches on variants.

use keelson_runtime::ApiError;

use crate::error::EngineError;

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        ApiError::new(e.http_status(), e.heat_type(), e.message())
    }
}

impl From<EngineError> for tonic::Status {
    fn from(e: EngineError) -> Self {
        ApiError::from(e).to_status()
    }
}

impl EngineError {
    /// Decodes an error that crossed a gRPC hop (see [`ApiError::from_status`]).
    pub fn from_status(status: &tonic::Status) -> Self {
        let e = ApiError::from_status(status, "InternalError");
        EngineError::from_heat(&e.code, e.http_status, &e.detail)
    }
}
