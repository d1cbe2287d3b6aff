//! Response bodies that are not the engine's: heat-api's fault wrapper
//! (`heat/api/middleware/fault.py`) for errors, and webob's JSON rendering
//! of its own HTTP exceptions (302, 202, the 404 of an unknown route).

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode};

/// An error as heat-api reports it: the exception's type name and, for
/// everything but 5xx, its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    /// Heat's exception class name (`StackValidationFailed`,
    /// `HTTPBadRequest`, ...), matched by clients.
    pub error_type: String,
    pub message: String,
}

/// webob's text for an HTTP status (`explanation`), as the fault wrapper
/// copies it from the webob exception class.
fn explanation(status: u16) -> &'static str {
    match status {
        401 => "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.",
        403 => "Access was denied to this resource.",
        404 => "The resource could not be found.",
        409 => "There was a conflict when trying to complete your request.",
        413 => "The body of your request was too large for this server.",
        503 => "The server is currently unavailable. Please try again at a later time.",
        500..=599 => "The server has either erred or is incapable of performing the requested operation.",
        // Every other client error (405 included) uses HTTPClientError's.
        _ => "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    }
}

fn title(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Internal Server Error")
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

impl Fault {
    pub fn new(status: u16, error_type: impl Into<String>, message: impl Into<String>) -> Self {
        Fault { status, error_type: error_type.into(), message: message.into() }
    }

    /// `webob.exc.HTTPBadRequest(message)` raised by a controller.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Fault::new(400, "HTTPBadRequest", message)
    }

    /// What heat-api answers when a handler is called without the body it
    /// requires (the `TypeError` branch of `wsgi.Resource`).
    pub fn missing_body() -> Self {
        Fault::bad_request(explanation(400))
    }

    /// `webob.exc.HTTPForbidden()`: a path naming another project.
    pub fn forbidden() -> Self {
        Fault::new(403, "HTTPForbidden", explanation(403))
    }

    /// `webob.exc.HTTPMethodNotAllowed()`.
    pub fn method_not_allowed() -> Self {
        Fault::new(405, "HTTPMethodNotAllowed", explanation(405))
    }

    /// The fault wrapper's body:
    /// `{"code", "title", "explanation", "error": {"type", "traceback", "message"?}}`.
    /// 5xx hide the message, as upstream hides non-Heat exceptions'.
    pub fn body(&self) -> serde_json::Value {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error = serde_json::json!({"type": self.error_type, "traceback": null});
        if status.as_u16() < 500 {
            error["message"] = self.message.clone().into();
        }
        serde_json::json!({
            "code": status.as_u16(),
            "title": title(status),
            "explanation": explanation(status.as_u16()),
            "error": error,
        })
    }

    pub fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(status, self.body().to_string())
    }
}

/// A webob HTTP exception rendered for a JSON client:
/// `{"message": <page text>, "code": "302 Found", "title": "Found"}`.
fn webob_json(status: StatusCode, message: String) -> Response {
    let t = title(status);
    let body = serde_json::json!({"message": message, "code": format!("{} {t}", status.as_u16()), "title": t});
    json_response(status, body.to_string())
}

/// `webob.exc.HTTPFound(location=...)`: the stack lookup's answer.
pub fn found(location: &str) -> Response {
    let message = format!(
        "The resource was found at <a href=\"{location}\">{location}</a>;\nyou should be redirected automatically.\n\n"
    );
    let mut resp = webob_json(StatusCode::FOUND, message);
    match HeaderValue::from_str(location) {
        Ok(v) => {
            resp.headers_mut().insert(http::header::LOCATION, v);
            resp
        }
        // A location that is no header value cannot be redirected to.
        Err(_) => Fault::new(500, "HTTPInternalServerError", "").into_response(),
    }
}

/// `webob.exc.HTTPAccepted()`: what a stack update answers.
pub fn accepted() -> Response {
    webob_json(StatusCode::ACCEPTED, "The request is accepted for processing.<br /><br />\n\n\n".to_string())
}

/// `webob.exc.HTTPNotFound()` returned (not raised) by the router for a
/// path no route matches: not fault-wrapped upstream.
pub fn route_not_found() -> Response {
    webob_json(StatusCode::NOT_FOUND, format!("{}<br /><br />\n\n\n", explanation(404)))
}

/// keystonemiddleware's `HTTPServiceUnavailable` when Keystone cannot be
/// asked: rendered by webob inside auth_token, never fault-wrapped.
pub fn keystone_unavailable() -> Response {
    webob_json(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("{}<br /><br />\nThe Keystone service is temporarily unavailable.\n\n", explanation(503)),
    )
}

/// `DefaultMethodController.options`: 204 with `Allow`.
pub fn options(allow: &str) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    if let Ok(v) = HeaderValue::from_str(allow) {
        resp.headers_mut().insert(http::header::ALLOW, v);
    }
    resp
}

/// `DefaultMethodController.reject`: the fault-wrapped 405, keeping the
/// `Allow` header that upstream's wrapper drops (clients may use it).
pub fn reject(allow: &str) -> Response {
    let mut resp = Fault::method_not_allowed().into_response();
    if let Ok(v) = HeaderValue::from_str(allow) {
        resp.headers_mut().insert(http::header::ALLOW, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_bodies_match_heat_api() {
        let f = Fault::new(409, "StackExists", "The Stack (x) already exists.");
        assert_eq!(
            f.body(),
            serde_json::json!({"code": 409, "title": "Conflict", "explanation": "There was a conflict when trying to complete your request.",
                "error": {"type": "StackExists", "traceback": null, "message": "The Stack (x) already exists."}})
        );
        let f = Fault::new(500, "KeyError", "'hot'");
        assert_eq!(
            f.body(),
            serde_json::json!({"code": 500, "title": "Internal Server Error", "explanation": "The server has either erred or is incapable of performing the requested operation.",
                "error": {"type": "KeyError", "traceback": null}})
        );
        let f = Fault::method_not_allowed();
        assert_eq!(f.body()["error"]["message"], f.body()["explanation"]);
        assert_eq!(Fault::forbidden().body()["title"], "Forbidden");
    }
}
