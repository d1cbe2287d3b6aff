//! The inventory service's errors, each carrying Placement's error code
//! and the detail text upstream writes (Nova parses some of them).

use keelson_db::DbError;
use keelson_runtime::ApiError;

pub const CONCURRENT_UPDATE: &str = "placement.concurrent_update";
pub const DUPLICATE_NAME: &str = "placement.duplicate_name";
pub const INVENTORY_INUSE: &str = "placement.inventory.inuse";
pub const PROVIDER_IN_USE: &str = "placement.resource_provider.inuse";
pub const PROVIDER_CANNOT_DELETE_PARENT: &str = "placement.resource_provider.cannot_delete_parent";
pub const PROVIDER_NOT_FOUND: &str = "placement.resource_provider.not_found";

/// A failed inventory operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400 with upstream's text.
    #[error("{0}")]
    BadRequest(String),
    /// 400 with a specific Placement code.
    #[error("{1}")]
    BadRequestCode(&'static str, String),
    /// 404 with upstream's text.
    #[error("{0}")]
    NotFound(String),
    /// 409 with a Placement code (`placement.concurrent_update`, …) or the
    /// undefined code (empty).
    #[error("{1}")]
    Conflict(&'static str, String),
    /// A database failure: 500, details logged, not shown.
    #[error(transparent)]
    Db(#[from] DbError),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn concurrent_update(detail: impl Into<String>) -> Self {
        Error::Conflict(CONCURRENT_UPDATE, detail.into())
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Error::Conflict("", detail.into())
    }

    /// The error as the API reports it.
    pub fn to_api(&self) -> ApiError {
        match self {
            Error::BadRequest(d) => ApiError::new(400, "", d.clone()),
            Error::BadRequestCode(c, d) => ApiError::new(400, *c, d.clone()),
            Error::NotFound(d) => ApiError::new(404, "", d.clone()),
            Error::Conflict(c, d) => ApiError::new(409, *c, d.clone()),
            Error::Db(e) => {
                tracing::error!(target: "keelson::inventory", "database error: {e}");
                ApiError::new(500, "", "An unexpected database error occurred.")
            }
        }
    }
}

impl keelson_db::TransactionError for Error {
    fn database_error(&self) -> Option<&DbError> {
        match self {
            Error::Db(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        e.to_api().to_status()
    }
}
