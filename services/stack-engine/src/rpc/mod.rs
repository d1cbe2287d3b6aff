//! The thin gRPC layer: `api` serves `Orchestration` (to the gateway), `worker` serves `EngineWorker` (engine to engine).
pub mod api;
pub mod worker;
