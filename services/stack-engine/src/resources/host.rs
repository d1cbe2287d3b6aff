//! What a plugin may ask of the engine running it: nested stacks (template
//! resources, OS::Heat::Stack, ResourceGroup), other resources' metadata
//! (wait conditions, software deployments). The convergence engine
//! implements [`PluginHost`]; plugins see it as a trait object so they stay
//! free of storage and transport.

use std::sync::{Arc, OnceLock, Weak};

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::ResourceFailure;
use crate::EngineError;

/// The documents of a nested stack to create or update.
#[derive(Debug, Clone, Default)]
pub struct NestedStackSpec {
    pub template: Value,
    pub files: Map<String, Value>,
    /// The child's environment, its parameters (the parent resource's
    /// properties) in `parameters`.
    pub environment: Value,
    pub timeout_mins: Option<i64>,
}

/// Which resource of which stack owns a nested stack.
#[derive(Debug, Clone)]
pub struct NestedParent {
    pub stack_id: String,
    pub resource_name: String,
}

/// A created nested stack: its id and its ARN
/// (`arn:openstack:heat::<tenant>:stacks/<name>/<id>`).
#[derive(Debug, Clone)]
pub struct NestedStackRef {
    pub id: String,
    pub arn: String,
}

/// How a nested stack's action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedOutcome {
    pub action: String,
    pub status: String,
    pub status_reason: String,
}

impl NestedOutcome {
    pub fn is_complete(&self) -> bool {
        self.status == "COMPLETE"
    }
}

pub trait PluginHost: Send + Sync {
    /// Creates the nested stack of `parent` (owner = the parent stack,
    /// one level deeper) and starts its CREATE.
    fn create_nested<'a>(
        &'a self,
        parent: &'a NestedParent,
        spec: NestedStackSpec,
    ) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>>;

    /// Starts an UPDATE of nested stack `child_id` to `spec`.
    fn update_nested<'a>(&'a self, child_id: &'a str, spec: NestedStackSpec) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Starts the DELETE of nested stack `child_id`; Ok when it is gone
    /// already.
    fn delete_nested<'a>(&'a self, child_id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Waits until nested stack `child_id` is no longer IN_PROGRESS (a
    /// deleted stack ends as DELETE COMPLETE); Cancelled as soon as
    /// `cancel` turns true.
    fn wait_nested<'a>(
        &'a self,
        child_id: &'a str,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<NestedOutcome, ResourceFailure>>;

    /// The files and the environment (without parameters) of stack
    /// `stack_id`: what a nested stack it owns inherits.
    fn parent_documents<'a>(&'a self, stack_id: &'a str) -> BoxFuture<'a, Result<(Map<String, Value>, Value), EngineError>>;

    /// The nested stack's outputs, resolved (an output that fails to
    /// resolve is left out).
    fn nested_outputs<'a>(&'a self, child_id: &'a str) -> BoxFuture<'a, Result<Map<String, Value>, EngineError>>;

    /// The reference (`get_resource`) and the attributes of the live
    /// resources of nested stack `child_id`; `attributes` names the
    /// attributes to resolve, every attribute of each member's type when
    /// empty.
    fn nested_resources<'a>(
        &'a self,
        child_id: &'a str,
        attributes: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<NestedMember>, EngineError>>;
}

/// One live resource of a nested stack as group attributes see it.
#[derive(Debug, Clone, Default)]
pub struct NestedMember {
    pub name: String,
    /// `get_resource` of the member.
    pub reference: Value,
    /// The requested attributes, resolved (Null when unknown).
    pub attributes: Map<String, Value>,
}

/// The engine a registry's plugins talk to, bound once the engine exists
/// (the engine holds the registry, so the registry only keeps a weak
/// reference back).
#[derive(Default)]
pub struct HostSlot {
    host: OnceLock<Weak<dyn PluginHost>>,
}

impl HostSlot {
    pub fn bind(&self, host: Weak<dyn PluginHost>) {
        let _ = self.host.set(host);
    }

    /// The bound engine; [`NoHost`] before binding (unit tests) or after
    /// the engine is gone.
    pub fn get(&self) -> Arc<dyn PluginHost> {
        self.host.get().and_then(Weak::upgrade).unwrap_or_else(|| Arc::new(NoHost))
    }
}

impl std::fmt::Debug for HostSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostSlot")
    }
}

/// A host with no engine behind it: every request fails.
pub struct NoHost;

fn no_engine() -> ResourceFailure {
    ResourceFailure::error("RuntimeError", "no engine is bound to this resource registry")
}

impl PluginHost for NoHost {
    fn create_nested<'a>(&'a self, _: &'a NestedParent, _: NestedStackSpec) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn update_nested<'a>(&'a self, _: &'a str, _: NestedStackSpec) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn delete_nested<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn wait_nested<'a>(&'a self, _: &'a str, _: watch::Receiver<bool>) -> BoxFuture<'a, Result<NestedOutcome, ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn nested_outputs<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Map<String, Value>, EngineError>> {
        Box::pin(async { Ok(Map::new()) })
    }
    fn parent_documents<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(Map<String, Value>, Value), EngineError>> {
        Box::pin(async { Ok((Map::new(), Value::Object(Map::new()))) })
    }
    fn nested_resources<'a>(&'a self, _: &'a str, _: &'a [String]) -> BoxFuture<'a, Result<Vec<NestedMember>, EngineError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}
