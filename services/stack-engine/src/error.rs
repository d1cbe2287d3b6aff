//! Errors as Heat reports them. Each variant is one fact the engine
//! reports; it knows Heat's exception type name (part of the REST
//! contract: heatclient and the integration tests match on it), the HTTP
//! status heat-api's fault middleware gives that type, and the message.
//! Control flow matches on variants; the names are only for the wire.
//!
//! On the gRPC hop (`rpc::status`) an [`EngineError`] travels as a
//! `keelson.common.v1.ErrorDetail` whose `code` is the type name, so the
//! gateway can rebuild Heat's error body exactly.

use keelson_hot::{TemplateError, TemplateErrorKind};

use crate::state::Action;

/// Heat's numbered errors (`exception.ERROR_CODE_MAP`, an exception's
/// `error_code`): what `POST /validate?ignore_errors=` names, and the
/// `HEAT-E<code>` that starts the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeatErrorCode {
    /// 99001, `ResourceTypeUnavailable`.
    ServiceUnavailable,
}

impl HeatErrorCode {
    /// Every code Heat 27.0.1 knows.
    pub const ALL: [HeatErrorCode; 1] = [HeatErrorCode::ServiceUnavailable];

    pub fn as_str(self) -> &'static str {
        match self {
            HeatErrorCode::ServiceUnavailable => "99001",
        }
    }

    /// The code `code` names, if Heat knows it.
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == code)
    }

    /// `message` as Heat words a numbered error: `HEAT-E<code> <message>`.
    pub fn prefixed(self, message: &str) -> String {
        format!("HEAT-E{} {message}", self.as_str())
    }
}

/// `result` with an error whose code is one of `ignorable` passed over
/// (Heat's `ignorable_errors` in a stack's validation).
pub fn ignoring(result: Result<(), EngineError>, ignorable: &[HeatErrorCode]) -> Result<(), EngineError> {
    match result {
        Err(e) if e.error_code().is_some_and(|code| ignorable.contains(&code)) => Ok(()),
        other => other,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {}", self.heat_type(), self.message())]
pub enum EngineError {
    // 400
    /// `StackValidationFailed`.
    StackValidationFailed(String),
    /// `NotSupported`.
    NotSupported(String),
    /// heat-api's `HTTPBadRequest`: the request itself is malformed.
    BadRequest(String),
    /// `InvalidTemplateAttribute`: a resource has no such attribute.
    InvalidTemplateAttribute(String),
    /// `RequestLimitExceeded`.
    RequestLimitExceeded(String),
    /// `CircularDependencyException`.
    CircularDependency(String),
    /// `ImmutableParameterModified`.
    ImmutableParameterModified(String),
    /// `RecursionDepthExceeded`: nested stacks too deep.
    RecursionDepthExceeded(String),
    /// `ResourceActionNotSupported`.
    ResourceActionNotSupported(String),
    /// `Invalid`: oslo's "Data supplied was not valid".
    Invalid(String),
    /// Python's `ValueError`, as upstream lets it through to a 400.
    ValueError(String),
    /// Python's `OverflowError` (a number too large for its type).
    OverflowError(String),
    /// `ResourceTypeUnavailable` (HEAT-E99001): the service a type acts
    /// through is not in the caller's catalog, or lacks an extension.
    ResourceTypeUnavailable(String),
    /// `MissingCredentialError`: "Missing required credential: …" (a
    /// trust that cannot delegate the roles asked for).
    MissingCredentialError(String),
    /// A template or environment error of a kind the engine does not
    /// decide on itself (see `From<TemplateError>`).
    Template(TemplateError),

    // 403
    /// `Forbidden`.
    Forbidden(String),
    /// `SignatureDoesNotMatch`: a pre-signed URL's signature is wrong.
    SignatureDoesNotMatch(String),
    /// `MissingAuthenticationToken`: a pre-signed URL without signature.
    MissingAuthenticationToken(String),
    /// `RequestExpired`: a pre-signed URL past its expiry.
    RequestExpired(String),
    /// `InvalidTenant`: a stack of another project (and not of the
    /// caller's stack-user project).
    InvalidTenant(String),

    // 404
    /// `EntityNotFound`: "The {entity} ({name}) could not be found."
    EntityNotFound { entity: String, name: String },
    /// `ResourceNotFound`: "The Resource ({resource}) could not be found in Stack {stack}."
    ResourceNotFound { resource: String, stack: String },
    /// `SnapshotNotFound`: "The Snapshot ({snapshot}) for Stack ({stack}) could not be found."
    SnapshotNotFound { snapshot: String, stack: String },
    /// `ResourceNotAvailable`: the resource exists but has no physical resource.
    ResourceNotAvailable(String),
    /// Heat's generic `NotFound`.
    NotFound(String),
    /// heat-api's `HTTPNotFound`.
    HttpNotFound(String),

    // 409
    /// `StackExists`: "The Stack ({name}) already exists."
    StackExists { name: String },
    /// `ActionInProgress`: "Stack {stack} already has an action ({action}) in progress."
    ActionInProgress { stack: String, action: Action },
    /// `ConcurrentTransaction`: a conditional write lost a race.
    ConcurrentTransaction(String),

    // 500
    /// Python's `KeyError` (upstream's unhandled lookups, a 500).
    KeyError(String),
    /// `AuthorizationFailure`: "Authorization failed." (Keystone refused
    /// the engine, a trust or the stack domain admin).
    AuthorizationFailure(String),
    /// `InvalidEncryptionKey`: stored credentials the configured
    /// `auth_encryption_key` cannot decrypt.
    InvalidEncryptionKey(String),
    /// What the client cannot fix (database down, a bug); the message is
    /// logged, not shown.
    Internal(String),
    /// The database rolled the engine's transaction back for a
    /// conflicting write (a deadlock; on Galera a certification failure or
    /// brute-force abort) more times than the step retried it: an
    /// `InternalError` to a caller, which the convergence step runs again
    /// rather than leaving the traversal to the watchdog.
    WriteConflict(String),

    /// An error of a type the engine does not produce itself, carried as
    /// it came (a resource plugin's Python exception name, a peer's error
    /// over gRPC whose type no variant names).
    Remote { heat_type: String, http_status: u16, message: String },
}

impl EngineError {
    /// Heat's `error_code` of this error (most have none).
    pub fn error_code(&self) -> Option<HeatErrorCode> {
        match self {
            EngineError::ResourceTypeUnavailable(_) => Some(HeatErrorCode::ServiceUnavailable),
            _ => None,
        }
    }

    /// Heat's exception class name, e.g. `StackValidationFailed`.
    pub fn heat_type(&self) -> &str {
        match self {
            EngineError::StackValidationFailed(_) => "StackValidationFailed",
            EngineError::NotSupported(_) => "NotSupported",
            EngineError::BadRequest(_) => "HTTPBadRequest",
            EngineError::InvalidTemplateAttribute(_) => "InvalidTemplateAttribute",
            EngineError::RequestLimitExceeded(_) => "RequestLimitExceeded",
            EngineError::CircularDependency(_) => "CircularDependencyException",
            EngineError::ImmutableParameterModified(_) => "ImmutableParameterModified",
            EngineError::RecursionDepthExceeded(_) => "RecursionDepthExceeded",
            EngineError::ResourceActionNotSupported(_) => "ResourceActionNotSupported",
            EngineError::Invalid(_) => "Invalid",
            EngineError::ValueError(_) => "ValueError",
            EngineError::OverflowError(_) => "OverflowError",
            EngineError::ResourceTypeUnavailable(_) => "ResourceTypeUnavailable",
            EngineError::MissingCredentialError(_) => "MissingCredentialError",
            EngineError::Template(e) => e.type_name(),
            EngineError::Forbidden(_) => "Forbidden",
            EngineError::SignatureDoesNotMatch(_) => "SignatureDoesNotMatch",
            EngineError::MissingAuthenticationToken(_) => "MissingAuthenticationToken",
            EngineError::RequestExpired(_) => "RequestExpired",
            EngineError::InvalidTenant(_) => "InvalidTenant",
            EngineError::EntityNotFound { .. } => "EntityNotFound",
            EngineError::ResourceNotFound { .. } => "ResourceNotFound",
            EngineError::SnapshotNotFound { .. } => "SnapshotNotFound",
            EngineError::ResourceNotAvailable(_) => "ResourceNotAvailable",
            EngineError::NotFound(_) => "NotFound",
            EngineError::HttpNotFound(_) => "HTTPNotFound",
            EngineError::StackExists { .. } => "StackExists",
            EngineError::ActionInProgress { .. } => "ActionInProgress",
            EngineError::ConcurrentTransaction(_) => "ConcurrentTransaction",
            EngineError::KeyError(_) => "KeyError",
            EngineError::AuthorizationFailure(_) => "AuthorizationFailure",
            EngineError::InvalidEncryptionKey(_) => "InvalidEncryptionKey",
            EngineError::Internal(_) | EngineError::WriteConflict(_) => "InternalError",
            EngineError::Remote { heat_type, .. } => heat_type,
        }
    }

    /// The HTTP status heat-api gives this error.
    pub fn http_status(&self) -> u16 {
        match self {
            EngineError::StackValidationFailed(_)
            | EngineError::NotSupported(_)
            | EngineError::BadRequest(_)
            | EngineError::InvalidTemplateAttribute(_)
            | EngineError::RequestLimitExceeded(_)
            | EngineError::CircularDependency(_)
            | EngineError::ImmutableParameterModified(_)
            | EngineError::RecursionDepthExceeded(_)
            | EngineError::ResourceActionNotSupported(_)
            | EngineError::Invalid(_)
            | EngineError::ValueError(_)
            | EngineError::OverflowError(_)
            | EngineError::MissingCredentialError(_)
            | EngineError::ResourceTypeUnavailable(_)
            | EngineError::Template(_) => 400,
            EngineError::Forbidden(_)
            | EngineError::SignatureDoesNotMatch(_)
            | EngineError::MissingAuthenticationToken(_)
            | EngineError::RequestExpired(_)
            | EngineError::InvalidTenant(_) => 403,
            EngineError::EntityNotFound { .. }
            | EngineError::ResourceNotFound { .. }
            | EngineError::SnapshotNotFound { .. }
            | EngineError::ResourceNotAvailable(_)
            | EngineError::NotFound(_)
            | EngineError::HttpNotFound(_) => 404,
            EngineError::StackExists { .. }
            | EngineError::ActionInProgress { .. }
            | EngineError::ConcurrentTransaction(_) => 409,
            EngineError::KeyError(_)
            | EngineError::AuthorizationFailure(_)
            | EngineError::InvalidEncryptionKey(_)
            | EngineError::Internal(_)
            | EngineError::WriteConflict(_) => 500,
            EngineError::Remote { http_status, .. } => *http_status,
        }
    }

    /// The message as upstream gives it.
    pub fn message(&self) -> String {
        match self {
            EngineError::StackValidationFailed(m)
            | EngineError::NotSupported(m)
            | EngineError::BadRequest(m)
            | EngineError::InvalidTemplateAttribute(m)
            | EngineError::RequestLimitExceeded(m)
            | EngineError::CircularDependency(m)
            | EngineError::ImmutableParameterModified(m)
            | EngineError::RecursionDepthExceeded(m)
            | EngineError::ResourceActionNotSupported(m)
            | EngineError::Invalid(m)
            | EngineError::ValueError(m)
            | EngineError::OverflowError(m)
            | EngineError::MissingCredentialError(m)
            | EngineError::ResourceTypeUnavailable(m)
            | EngineError::InvalidTenant(m)
            | EngineError::AuthorizationFailure(m)
            | EngineError::InvalidEncryptionKey(m)
            | EngineError::Forbidden(m)
            | EngineError::SignatureDoesNotMatch(m)
            | EngineError::MissingAuthenticationToken(m)
            | EngineError::RequestExpired(m)
            | EngineError::ResourceNotAvailable(m)
            | EngineError::NotFound(m)
            | EngineError::HttpNotFound(m)
            | EngineError::ConcurrentTransaction(m)
            | EngineError::KeyError(m)
            | EngineError::Internal(m)
            | EngineError::WriteConflict(m)
            | EngineError::Remote { message: m, .. } => m.clone(),
            EngineError::Template(e) => e.message.clone(),
            EngineError::EntityNotFound { entity, name } => format!("The {entity} ({name}) could not be found."),
            EngineError::ResourceNotFound { resource, stack } => {
                format!("The Resource ({resource}) could not be found in Stack {stack}.")
            }
            EngineError::SnapshotNotFound { snapshot, stack } => {
                format!("The Snapshot ({snapshot}) for Stack ({stack}) could not be found.")
            }
            EngineError::StackExists { name } => format!("The Stack ({name}) already exists."),
            EngineError::ActionInProgress { stack, action } => {
                format!("Stack {stack} already has an action ({action}) in progress.")
            }
        }
    }

    /// The same error with another message (a location prepended, a
    /// nested stack's path joined). A variant whose message has a fixed
    /// form keeps its type and status as [`EngineError::Remote`].
    pub fn with_message(self, message: &str) -> Self {
        Self::from_heat(self.heat_type(), self.http_status(), message)
    }

    /// Any 404: the thing asked for is not there.
    pub fn is_not_found(&self) -> bool {
        self.http_status() == 404
    }

    /// 400 `StackValidationFailed`.
    pub fn validation(message: impl Into<String>) -> Self {
        EngineError::StackValidationFailed(message.into())
    }

    /// 400 `NotSupported`.
    pub fn not_supported(message: impl Into<String>) -> Self {
        EngineError::NotSupported(message.into())
    }

    /// 404 `EntityNotFound`: "The Stack (x) could not be found."
    pub fn entity_not_found(entity: &str, name: &str) -> Self {
        EngineError::EntityNotFound { entity: entity.to_string(), name: name.to_string() }
    }

    pub fn stack_not_found(name: &str) -> Self {
        Self::entity_not_found("Stack", name)
    }

    /// 404 `ResourceNotFound`: "The Resource (r) could not be found in Stack s."
    pub fn resource_not_found(resource: &str, stack: &str) -> Self {
        EngineError::ResourceNotFound { resource: resource.to_string(), stack: stack.to_string() }
    }

    /// 409 `StackExists`.
    pub fn stack_exists(name: &str) -> Self {
        EngineError::StackExists { name: name.to_string() }
    }

    /// 409 `ActionInProgress`.
    pub fn action_in_progress(stack: &str, action: Action) -> Self {
        EngineError::ActionInProgress { stack: stack.to_string(), action }
    }

    /// 403 `Forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        EngineError::Forbidden(message.into())
    }

    /// 500 for what the client cannot fix (database down, a bug); the
    /// message is logged, not shown.
    pub fn internal(message: impl Into<String>) -> Self {
        EngineError::Internal(message.into())
    }

    /// The error a Heat type name, HTTP status and message describe: the
    /// typed variant when one says exactly that (same type, status and
    /// message), else [`EngineError::Remote`]. The one place a type name
    /// is read back (errors from the wire, a plugin's Python exception).
    pub fn from_heat(heat_type: &str, http_status: u16, message: &str) -> Self {
        let exact = |e: &EngineError| e.http_status() == http_status && e.message() == message;
        Self::typed(heat_type, message)
            .filter(exact)
            .or_else(|| Self::template(heat_type, message).filter(exact))
            .unwrap_or_else(|| EngineError::Remote {
                heat_type: heat_type.to_string(),
                http_status,
                message: message.to_string(),
            })
    }

    /// The template error Heat type `heat_type` names.
    fn template(heat_type: &str, message: &str) -> Option<Self> {
        let kind = TemplateErrorKind::ALL.into_iter().find(|k| k.heat_type() == heat_type)?;
        Some(EngineError::from(TemplateError::new(kind, message)))
    }

    /// The variant Heat type `heat_type` names, rebuilt from its message.
    fn typed(heat_type: &str, message: &str) -> Option<Self> {
        let m = message.to_string();
        Some(match heat_type {
            "StackValidationFailed" => EngineError::StackValidationFailed(m),
            "NotSupported" => EngineError::NotSupported(m),
            "HTTPBadRequest" => EngineError::BadRequest(m),
            "InvalidTemplateAttribute" => EngineError::InvalidTemplateAttribute(m),
            "RequestLimitExceeded" => EngineError::RequestLimitExceeded(m),
            "CircularDependencyException" => EngineError::CircularDependency(m),
            "ImmutableParameterModified" => EngineError::ImmutableParameterModified(m),
            "RecursionDepthExceeded" => EngineError::RecursionDepthExceeded(m),
            "ResourceActionNotSupported" => EngineError::ResourceActionNotSupported(m),
            "Invalid" => EngineError::Invalid(m),
            "ValueError" => EngineError::ValueError(m),
            "OverflowError" => EngineError::OverflowError(m),
            "MissingCredentialError" => EngineError::MissingCredentialError(m),
            "ResourceTypeUnavailable" => EngineError::ResourceTypeUnavailable(m),
            "InvalidTenant" => EngineError::InvalidTenant(m),
            "AuthorizationFailure" => EngineError::AuthorizationFailure(m),
            "InvalidEncryptionKey" => EngineError::InvalidEncryptionKey(m),
            "Forbidden" => EngineError::Forbidden(m),
            "SignatureDoesNotMatch" => EngineError::SignatureDoesNotMatch(m),
            "MissingAuthenticationToken" => EngineError::MissingAuthenticationToken(m),
            "RequestExpired" => EngineError::RequestExpired(m),
            "ResourceNotAvailable" => EngineError::ResourceNotAvailable(m),
            "NotFound" => EngineError::NotFound(m),
            "HTTPNotFound" => EngineError::HttpNotFound(m),
            "ConcurrentTransaction" => EngineError::ConcurrentTransaction(m),
            "KeyError" => EngineError::KeyError(m),
            "InternalError" => EngineError::Internal(m),
            "EntityNotFound" => {
                let (entity, name) =
                    message.strip_prefix("The ")?.strip_suffix(") could not be found.")?.split_once(" (")?;
                Self::entity_not_found(entity, name)
            }
            "ResourceNotFound" => {
                let rest = message.strip_prefix("The Resource (")?.strip_suffix('.')?;
                let (resource, stack) = rest.rsplit_once(") could not be found in Stack ")?;
                Self::resource_not_found(resource, stack)
            }
            "SnapshotNotFound" => {
                let rest = message.strip_prefix("The Snapshot (")?.strip_suffix(") could not be found.")?;
                let (snapshot, stack) = rest.rsplit_once(") for Stack (")?;
                EngineError::SnapshotNotFound { snapshot: snapshot.to_string(), stack: stack.to_string() }
            }
            "StackExists" => {
                Self::stack_exists(message.strip_prefix("The Stack (")?.strip_suffix(") already exists.")?)
            }
            "ActionInProgress" => {
                let rest = message.strip_prefix("Stack ")?.strip_suffix(") in progress.")?;
                let (stack, action) = rest.rsplit_once(" already has an action (")?;
                Self::action_in_progress(stack, action.parse().ok()?)
            }
            _ => return None,
        })
    }

    /// A resource plugin's failure (a Python exception name and message)
    /// answered on the API, as heat-api's fault middleware does: a
    /// `ValueError` is the caller's 400, anything else a 500.
    pub fn from_plugin_failure(python_type: &str, message: &str) -> Self {
        match Self::from_heat(python_type, 400, message) {
            e @ EngineError::ValueError(_) => e,
            _ => Self::from_heat(python_type, 500, message),
        }
    }
}

impl From<keelson_db::DbError> for EngineError {
    fn from(e: keelson_db::DbError) -> Self {
        if e.is_write_conflict() {
            EngineError::WriteConflict(format!("database: {e}"))
        } else {
            EngineError::internal(format!("database: {e}"))
        }
    }
}

/// The kinds the engine decides on become their own variants; the rest
/// stay template errors (all 400, as before).
impl From<TemplateError> for EngineError {
    fn from(e: TemplateError) -> Self {
        match e.kind {
            TemplateErrorKind::StackValidationFailed => EngineError::StackValidationFailed(e.message),
            TemplateErrorKind::NotSupported => EngineError::NotSupported(e.message),
            TemplateErrorKind::BadRequest => EngineError::BadRequest(e.message),
            TemplateErrorKind::RequestLimitExceeded => EngineError::RequestLimitExceeded(e.message),
            TemplateErrorKind::CircularDependency => EngineError::CircularDependency(e.message),
            _ => EngineError::Template(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_write_is_a_write_conflict_that_callers_see_as_an_internal_error() {
        let lost = EngineError::from(keelson_db::DbError::TransactionLost);
        assert!(matches!(lost, EngineError::WriteConflict(_)), "{lost:?}");
        assert_eq!((lost.heat_type(), lost.http_status()), ("InternalError", 500));
        let other = EngineError::from(keelson_db::DbError::Schema("no table".into()));
        assert!(matches!(other, EngineError::Internal(_)), "{other:?}");
    }

    #[test]
    fn only_resource_type_unavailable_has_a_heat_error_code() {
        let unavailable = EngineError::ResourceTypeUnavailable(HeatErrorCode::ServiceUnavailable.prefixed("x"));
        assert_eq!(unavailable.message(), "HEAT-E99001 x");
        assert_eq!(unavailable.error_code(), Some(HeatErrorCode::ServiceUnavailable));
        assert_eq!(EngineError::BadRequest("x".into()).error_code(), None);
        assert_eq!(HeatErrorCode::parse("99001"), Some(HeatErrorCode::ServiceUnavailable));
        assert_eq!(HeatErrorCode::parse("ResourceTypeUnavailable"), None);
        let codes = [HeatErrorCode::ServiceUnavailable];
        assert_eq!(ignoring(Err(unavailable.clone()), &codes), Ok(()));
        assert_eq!(ignoring(Err(unavailable.clone()), &[]), Err(unavailable));
        assert!(ignoring(Err(EngineError::BadRequest("x".into())), &codes).is_err());
    }

    #[test]
    fn every_variant_reads_back_from_its_name_status_and_message() {
        let all = [
            EngineError::validation("v"),
            EngineError::not_supported("n"),
            EngineError::BadRequest("b".into()),
            EngineError::InvalidTemplateAttribute("a".into()),
            EngineError::RequestLimitExceeded("r".into()),
            EngineError::CircularDependency("c".into()),
            EngineError::ImmutableParameterModified("i".into()),
            EngineError::RecursionDepthExceeded("d".into()),
            EngineError::ResourceActionNotSupported("s".into()),
            EngineError::Invalid("x".into()),
            EngineError::ValueError("x".into()),
            EngineError::OverflowError("o".into()),
            EngineError::from(TemplateError::new(TemplateErrorKind::InvalidTemplateVersion, "t")),
            EngineError::from(TemplateError::new(TemplateErrorKind::NotFound, "t")),
            EngineError::forbidden("f"),
            EngineError::SignatureDoesNotMatch("s".into()),
            EngineError::MissingAuthenticationToken("m".into()),
            EngineError::RequestExpired("e".into()),
            EngineError::entity_not_found("Resource Type", "a (b)"),
            EngineError::resource_not_found("r", "s"),
            EngineError::SnapshotNotFound { snapshot: "x".into(), stack: "s".into() },
            EngineError::ResourceNotAvailable("r".into()),
            EngineError::NotFound("n".into()),
            EngineError::HttpNotFound("h".into()),
            EngineError::stack_exists("s"),
            EngineError::action_in_progress("s", Action::Create),
            EngineError::ConcurrentTransaction("c".into()),
            EngineError::KeyError("'k'".into()),
            EngineError::internal("i"),
            EngineError::MissingCredentialError("m".into()),
            EngineError::ResourceTypeUnavailable("u".into()),
            EngineError::InvalidTenant("t".into()),
            EngineError::AuthorizationFailure("a".into()),
            EngineError::InvalidEncryptionKey("k".into()),
        ];
        for e in all {
            assert_eq!(EngineError::from_heat(e.heat_type(), e.http_status(), &e.message()), e);
        }
    }

    #[test]
    fn a_name_with_another_status_or_an_unknown_name_stays_as_it_came() {
        let e = EngineError::from_heat("NotFound", 500, "gone");
        assert_eq!(e, EngineError::Remote { heat_type: "NotFound".into(), http_status: 500, message: "gone".into() });
        let e = EngineError::from_heat("EntityNotFound", 404, "no pattern");
        assert!(matches!(e, EngineError::Remote { .. }) && e.is_not_found());
        assert_eq!(EngineError::from_plugin_failure("ValueError", "v"), EngineError::ValueError("v".into()));
        let e = EngineError::from_plugin_failure("RuntimeError", "r");
        assert_eq!((e.heat_type(), e.http_status(), e.to_string().as_str()), ("RuntimeError", 500, "RuntimeError: r"));
    }
}
