//! keelson's REST edge.
//!
//! Two APIs, each on its own listener: OpenStack Placement (port 8778,
//! [`placement`]) and OpenStack Orchestration v1 (port 8004,
//! [`orchestration`]). Each request passes the layer stack of [`layers`]
//! (one cross-cutting concern per layer, in upstream Placement's order),
//! then the API's route table (both on the one type of [`routes`]);
//! handlers translate to gRPC calls on the services. Prometheus metrics
//! are served at `/metrics` on each listener, and the operator console
//! ([`console`]) at `/keelson/console/` on the Placement listener.

pub mod cfn;
pub mod console;
pub mod identity;
pub mod keystone;
pub mod layers;
pub mod listener;
pub mod options;
pub mod orchestration;
pub mod placement;
pub mod redial;
pub mod routes;
pub mod server;
pub mod webob;
