//! The OpenStack Orchestration API v1 (heat-api) on port 8004: a thin
//! translation of Heat's REST surface onto the stack engine's gRPC
//! contract (`keelson.orchestration.v1.Orchestration`, one rpc per route).
//!
//! Modules: `app` (the layer stack and heat-api's request pipeline),
//! `routes` (the route table on [`crate::routes`], matched as python-routes
//! does, with the 405 and OPTIONS answers; each route names its action and
//! its handler), `auth` (noauth / Keystone callers and the project check),
//! `policy` (Heat's rules per route), `body` (JSON request bodies),
//! `handlers` (one per route: rpc request → REST answer), `engines` (the
//! engine clients, with failover), `fault` (error and webob bodies), `urls`
//! (base URL, quoting, canonical stack URLs, absolute links).

pub mod app;
pub mod auth;
pub mod body;
pub mod engines;
pub mod fault;
pub mod handlers;
pub mod policy;
pub mod presigned;
pub mod routes;
pub mod urls;

pub use app::{app, Settings};
pub use auth::OrchestrationAuth;
pub use policy::OrchestrationPolicy;
