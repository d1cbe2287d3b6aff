//! What an OpenStack service's error becomes in a resource's status
//! reason. Heat calls each service through its Python client library, and
//! the status reason shows that library's exception class and its way of
//! printing the service's message; each family of resource types names its
//! library's table here, so the mapping is written once.

use keelson_openstack::OsError;

use super::ResourceFailure;
use crate::error::EngineError;

/// How a client library prints a status error's message.
#[derive(Clone, Copy)]
pub(crate) enum MessageStyle {
    /// `<message> (HTTP <status>)`: keystoneauth, novaclient, cinderclient.
    StatusSuffix,
    /// The message alone: neutronclient.
    Plain,
    /// `HTTP <message>`, blank lines folded: glanceclient.
    HttpPrefix,
}

/// A client library's exception classes.
pub(crate) struct ClientErrors {
    pub bad_request: &'static str,
    pub unauthorized: &'static str,
    pub forbidden: &'static str,
    pub not_found: &'static str,
    pub conflict: &'static str,
    /// Other statuses with a class of their own.
    pub special: &'static [(u16, &'static str)],
    /// Any other status.
    pub other_status: &'static str,
    /// Refused, timed out or a 5xx (the message says which).
    pub unavailable: &'static str,
    /// An answer the API does not document.
    pub invalid_response: &'static str,
    pub message: MessageStyle,
}

pub(crate) const KEYSTONEAUTH: ClientErrors = ClientErrors {
    bad_request: "BadRequest",
    unauthorized: "Unauthorized",
    forbidden: "Forbidden",
    not_found: "NotFound",
    conflict: "Conflict",
    special: &[],
    other_status: "HttpError",
    unavailable: "ServiceUnavailable",
    invalid_response: "InvalidResponse",
    message: MessageStyle::StatusSuffix,
};

pub(crate) const NOVACLIENT: ClientErrors = ClientErrors {
    special: &[(413, "OverLimit"), (429, "RateLimit")],
    other_status: "ClientException",
    invalid_response: "ClientException",
    ..KEYSTONEAUTH
};

/// cinderclient shares novaclient's classes but has no Conflict or
/// RateLimit of its own.
pub(crate) const CINDERCLIENT: ClientErrors =
    ClientErrors { conflict: "ClientException", special: &[(413, "OverLimit")], ..NOVACLIENT };

pub(crate) const NEUTRONCLIENT: ClientErrors = ClientErrors {
    other_status: "NeutronClientException",
    invalid_response: "NeutronClientException",
    message: MessageStyle::Plain,
    ..KEYSTONEAUTH
};

pub(crate) const GLANCECLIENT: ClientErrors = ClientErrors {
    bad_request: "HTTPBadRequest",
    unauthorized: "HTTPUnauthorized",
    forbidden: "HTTPForbidden",
    not_found: "HTTPNotFound",
    conflict: "HTTPConflict",
    special: &[(413, "HTTPOverLimit"), (415, "HTTPUnsupported")],
    other_status: "HTTPException",
    unavailable: "HTTPServiceUnavailable",
    invalid_response: "HTTPException",
    message: MessageStyle::HttpPrefix,
};

/// python-swiftclient raises one class for every status; the object-store
/// client words its text as swiftclient prints it.
pub(crate) const SWIFTCLIENT: ClientErrors = ClientErrors {
    bad_request: "ClientException",
    unauthorized: "ClientException",
    forbidden: "ClientException",
    not_found: "ClientException",
    conflict: "ClientException",
    special: &[],
    other_status: "ClientException",
    unavailable: "ClientException",
    invalid_response: "ClientException",
    message: MessageStyle::Plain,
};

impl ClientErrors {
    /// The exception class and message the library raises for `e`.
    fn exception(&self, e: OsError) -> (&'static str, String) {
        let (class, status) = match &e {
            OsError::BadRequest(_) => (self.bad_request, Some(400)),
            OsError::Unauthorized(_) => (self.unauthorized, Some(401)),
            OsError::Forbidden(_) => (self.forbidden, Some(403)),
            OsError::NotFound(_) => (self.not_found, Some(404)),
            OsError::Conflict(_) => (self.conflict, Some(409)),
            OsError::Unexpected { status, .. } => {
                let class = self.special.iter().find(|(s, _)| s == status).map_or(self.other_status, |(_, c)| c);
                (class, Some(*status))
            }
            OsError::Unavailable(_) => (self.unavailable, None),
            OsError::InvalidResponse(_) | OsError::AnswerTooLarge(_) => (self.invalid_response, None),
            OsError::EndpointNotFound(_) => ("EndpointNotFound", None),
        };
        let message = match (status, self.message) {
            (None, _) | (Some(_), MessageStyle::Plain) => e.message().to_string(),
            (Some(code), MessageStyle::StatusSuffix) => format!("{} (HTTP {code})", e.message()),
            (Some(_), MessageStyle::HttpPrefix) => format!("HTTP {}", e.message().replace("\n\n", "\n")),
        };
        (class, message)
    }

    /// The failure `e` becomes.
    pub fn failure(&self, e: OsError) -> ResourceFailure {
        let (class, message) = self.exception(e);
        ResourceFailure::error(class, message)
    }

    /// `e` met while resolving an attribute: Heat lets the library's
    /// exception out of the attribute lookup, which its API answers 500.
    pub fn attribute_error(&self, e: OsError) -> EngineError {
        let (class, message) = self.exception(e);
        EngineError::Remote { heat_type: class.to_string(), http_status: 500, message }
    }

    /// Ok for a 404: a delete of something already gone is done.
    pub fn done_if_gone(&self, result: Result<(), OsError>) -> Result<(), ResourceFailure> {
        match result {
            Err(e) if !e.is_not_found() => Err(self.failure(e)),
            _ => Ok(()),
        }
    }
}

/// Heat's ResourceInError: the service put the resource in `status`.
pub(crate) fn resource_in_error(status: &str, reason: &str) -> ResourceFailure {
    ResourceFailure::error("ResourceInError", format!("Went to status {status} due to \"{reason}\""))
}

/// Heat's ResourceUnknownStatus: `result`, and a status Heat does not
/// expect.
pub(crate) fn resource_unknown_status(result: &str, status: &str) -> ResourceFailure {
    ResourceFailure::error("ResourceUnknownStatus", format!("{result} - Unknown status {status} due to \"Unknown\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(errors: &ClientErrors, e: OsError) -> String {
        errors.failure(e).to_string()
    }

    #[test]
    fn each_library_names_and_prints_as_its_own() {
        let conflict = || OsError::Conflict("in use".into());
        let limited = || OsError::Unexpected { status: 429, message: "slow down".into() };
        assert_eq!(shown(&NOVACLIENT, conflict()), ResourceFailure::error("Conflict", "in use (HTTP 409)").to_string());
        assert_eq!(
            shown(&CINDERCLIENT, conflict()),
            ResourceFailure::error("ClientException", "in use (HTTP 409)").to_string()
        );
        assert_eq!(
            shown(&NOVACLIENT, limited()),
            ResourceFailure::error("RateLimit", "slow down (HTTP 429)").to_string()
        );
        assert_eq!(
            shown(&CINDERCLIENT, limited()),
            ResourceFailure::error("ClientException", "slow down (HTTP 429)").to_string()
        );
        assert_eq!(shown(&NEUTRONCLIENT, conflict()), ResourceFailure::error("Conflict", "in use").to_string());
        assert_eq!(
            shown(&GLANCECLIENT, OsError::NotFound("a\n\nb".into())),
            ResourceFailure::error("HTTPNotFound", "HTTP a\nb").to_string()
        );
        assert_eq!(
            shown(&KEYSTONEAUTH, OsError::Unavailable("refused".into())),
            ResourceFailure::error("ServiceUnavailable", "refused").to_string()
        );
        let raised = NEUTRONCLIENT.attribute_error(conflict());
        assert!(
            matches!(&raised, EngineError::Remote { heat_type, http_status: 500, message }
                if heat_type == "Conflict" && message == "in use"),
            "{raised:?}"
        );
        assert!(NOVACLIENT.done_if_gone(Err(OsError::NotFound("gone".into()))).is_ok());
        assert!(NOVACLIENT.done_if_gone(Err(conflict())).is_err());
    }
}
