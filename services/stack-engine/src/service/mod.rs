//! The engine operations behind Heat's Orchestration API v1: one method of
//! [`Orchestration`] per rpc of `keelson.orchestration.v1.Orchestration`.
//!
//! Every method takes the [`Caller`] and typed arguments and answers the
//! exact REST body of heat-api (spec §1) as a `serde_json::Value`, or an
//! [`EngineError`] carrying Heat's exception type name, HTTP status and
//! message. Nothing here knows about gRPC or HTTP.
//!
//! Links: the gRPC request carries no base URL, so every `links[*].href`
//! this module emits is path-relative to the API root
//! (`/v1/{tenant}/stacks/{name}/{id}...`); the gateway prefixes
//! `scheme://host` before answering.
//!
//! Modules: `params` (query strings and body fields as heat-api parses
//! them), `instantiation` (the create/update/validate body), `identity`
//! (stack identities and hrefs), `records` (the store's rows, tenant
//! scoped), `model` (what the API reads of a stack definition: outputs and
//! attributes resolved from stored resources, the output attribute check),
//! `engine_port` (the one place that calls the convergence engine),
//! `views` (rows → REST documents), `stacks`, `resources`, `events`,
//! `snapshots` (the operations), `catalog` (validate, resource types, template versions,
//! build info, services).

mod catalog;
mod engine_port;
mod events;
mod identity;
mod instantiation;
mod limits;
mod model;
mod params;
mod records;
mod resources;
mod snapshots;
mod software;
mod stacks;
mod views;

use std::sync::Arc;

use keelson_db::Db;

use crate::convergence::Engine;
use crate::error::EngineError;
use crate::options;
use crate::resources::Registry;

pub use crate::caller::Caller;
pub(crate) use identity::is_uuid_like;
pub use identity::StackIdentity;
pub use params::QueryParams;
pub use stacks::StackRef;

/// The `[DEFAULT]` options of heat.conf this layer enforces, with Heat's
/// names and defaults.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    pub enable_stack_abandon: bool,
    pub enable_stack_adopt: bool,
    /// Stacks carrying any of these tags are left out of lists unless
    /// `show_hidden=true`.
    pub hidden_stack_tags: Vec<String>,
    /// -1 = unlimited; admins are never limited (as upstream).
    pub max_stacks_per_tenant: i64,
    /// -1 = unlimited; admins are never limited (as upstream).
    pub max_snapshots_per_stack: i64,
    /// -1 = unlimited.
    pub max_resources_per_stack: i64,
    /// Bytes of the template's text form.
    pub max_template_size: usize,
    pub max_nested_stack_depth: i64,
    /// `OS::region`-style pseudo parameter value (Heat's `region_name_for_services`).
    pub region_name: String,
    /// `GET /build_info` revisions (`[revision] heat_revision`).
    pub revision: String,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        ServiceSettings {
            enable_stack_abandon: options::ENABLE_STACK_ABANDON.default_value(),
            enable_stack_adopt: options::ENABLE_STACK_ADOPT.default_value(),
            hidden_stack_tags: options::HIDDEN_STACK_TAGS.default_value(),
            max_stacks_per_tenant: options::MAX_STACKS_PER_TENANT.default_value(),
            max_snapshots_per_stack: options::MAX_SNAPSHOTS_PER_STACK.default_value(),
            max_resources_per_stack: options::MAX_RESOURCES_PER_STACK.default_value(),
            max_template_size: keelson_runtime::config::clamp_usize(options::MAX_TEMPLATE_SIZE.default_value()),
            max_nested_stack_depth: options::MAX_NESTED_STACK_DEPTH.default_value(),
            region_name: "RegionOne".to_string(),
            revision: "unknown".to_string(),
        }
    }
}

/// The Orchestration API operations of one engine process.
pub struct Orchestration {
    engine: Arc<Engine>,
    db: Db,
    registry: Arc<Registry>,
    settings: ServiceSettings,
}

impl Orchestration {
    pub fn new(engine: Arc<Engine>, db: Db, registry: Arc<Registry>, settings: ServiceSettings) -> Self {
        Orchestration { engine, db, registry, settings }
    }

    pub fn settings(&self) -> &ServiceSettings {
        &self.settings
    }
}

/// Every operation answers a REST document or a Heat error.
pub type Reply = Result<serde_json::Value, EngineError>;
