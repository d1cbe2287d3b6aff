//! Cross-cutting concerns of the REST edge, one tower layer each, applied
//! in upstream Placement's order (outermost first):
//!
//! 1. [`forwarded`]: `X-Forwarded-*` from a TLS-terminating proxy;
//! 2. [`request_log`]: request id, trace context, one access-log line,
//!    metrics;
//! 3. [`cors`]: only when `[cors] allowed_origin` is configured;
//! 4. [`auth`]: noauth2 or Keystone token validation;
//! 5. [`auth::require_user`]: 401 without a user outside `/` and the
//!    API's [`auth::Anonymous`] requests;
//! 6. [`fault`]: any panic below becomes a JSON 500;
//! 7. the API's own microversion layer (e.g. `placement::microversion`);
//! 8. routing and the handler.
//!
//! The order is observable: a request without a token and with a bad
//! microversion gets 401, because authentication runs first.

pub mod auth;
pub mod cors;
pub mod fault;
pub mod forwarded;
pub mod metrics;
pub mod request_log;
