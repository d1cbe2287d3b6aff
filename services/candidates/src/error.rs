//! The candidates service's errors, carrying Placement's texts.

use keelson_db::DbError;
use keelson_runtime::ApiError;

/// A query parameter's value is unusable.
pub const QUERY_BAD_VALUE: &str = "placement.query.bad_value";
/// A required query parameter is missing.
pub const QUERY_MISSING_VALUE: &str = "placement.query.missing_value";

/// A failed candidates request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400 with upstream's text (validation, unknown class or trait).
    #[error("{0}")]
    BadRequest(String),
    /// 400 with a specific Placement code.
    #[error("{1}")]
    BadRequestCode(&'static str, String),
    /// A database failure: 500, details logged, not shown.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Any other failure: 500, details logged, not shown.
    #[error("{0}")]
    Internal(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Upstream's answer to a class no one created.
    pub fn unknown_class(name: &str) -> Self {
        Error::BadRequest(format!("Invalid resource class in resources parameter: No such resource class {name}."))
    }

    /// Upstream's answer to a trait no one created.
    pub fn unknown_trait(name: &str) -> Self {
        Error::BadRequest(format!("No such trait(s): {name}."))
    }

    /// The error as the API reports it.
    pub fn to_api(&self) -> ApiError {
        match self {
            Error::BadRequest(d) => ApiError::new(400, "", d.clone()),
            Error::BadRequestCode(c, d) => ApiError::new(400, *c, d.clone()),
            Error::Db(e) => {
                tracing::error!(target: "keelson::candidates", "database error: {e}");
                ApiError::new(500, "", "An unexpected database error occurred.")
            }
            Error::Internal(e) => {
                tracing::error!(target: "keelson::candidates", "{e}");
                ApiError::new(500, "", "An unexpected error occurred in the server.")
            }
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        e.to_api().to_status()
    }
}
