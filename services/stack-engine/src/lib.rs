//! The Heat convergence engine (OpenStack Orchestration).
//!
//! Not written yet: this crate only holds its place in the mesh's layout
//! (see ARCHITECTURE.md). It will hold the HOT template model and
//! functions, the convergence data model, traversals, sync points and
//! check_resource, served over gRPC to the gateway's Orchestration API.
