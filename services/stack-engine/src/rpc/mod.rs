//! The thin gRPC layer: `api` serves `Orchestration` (to the gateway), `worker` serves `EngineWorker` (engine to engine),
//! `status` carries [`crate::error::EngineError`] across the hop.
pub mod api;
pub mod status;
pub mod worker;
