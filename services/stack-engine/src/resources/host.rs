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
use crate::error::EngineError;
pub use crate::identity::StackUser;
use crate::store::{Action, Status};
pub use keelson_openstack::identity::Ec2Credential;
use keelson_openstack::Session;

/// The documents of a nested stack to create or update.
#[derive(Debug, Clone, Default)]
pub struct NestedStackSpec {
    pub template: Value,
    pub files: Map<String, Value>,
    /// The child's environment, its parameters (the parent resource's
    /// properties) in `parameters`.
    pub environment: Value,
    pub timeout_mins: Option<i64>,
    /// Adopt the child's resources from this data (its `resources` by
    /// name) instead of creating them: the child runs an ADOPT.
    pub adopt: Option<Value>,
}

/// The resources a template defines at its top level (HOT `resources`,
/// CFN `Resources`): what upstream counts against `max_resources_per_stack`.
pub fn template_resource_count(template: &Value) -> usize {
    template.get("resources").or_else(|| template.get("Resources")).and_then(Value::as_object).map_or(0, |r| r.len())
}

/// Upstream `RequestLimitExceeded(StackResourceLimitExceeded.msg_fmt)`:
/// a root stack's tree past `max_resources_per_stack`.
pub fn resource_limit_exceeded() -> EngineError {
    EngineError::RequestLimitExceeded("Request limit exceeded: Maximum resources per stack exceeded.".into())
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
    pub action: Action,
    pub status: Status,
    pub status_reason: String,
}

impl NestedOutcome {
    pub fn is_complete(&self) -> bool {
        self.status == Status::Complete
    }
}

/// A parent stack's files and environment (see [`PluginHost::parent_documents`]).
pub type ParentDocuments = (Map<String, Value>, Value);

pub trait PluginHost: IdentityHost + Send + Sync {
    /// Creates the nested stack of `parent` (owner = the parent stack,
    /// one level deeper) and starts its CREATE.
    fn create_nested<'a>(
        &'a self,
        parent: &'a NestedParent,
        spec: NestedStackSpec,
    ) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>>;

    /// Starts an UPDATE of nested stack `child_id` to `spec`.
    fn update_nested<'a>(
        &'a self,
        child_id: &'a str,
        spec: NestedStackSpec,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>>;

    /// Refuses a nested stack of `resources` resources under stack
    /// `stack_id` (replacing child `child_id`'s, when given) that would
    /// take the root's tree past `max_resources_per_stack`. Creating and
    /// updating a nested stack check it themselves; a plugin asks first
    /// when building the template would already cost (a group's members).
    fn check_nested_size<'a>(
        &'a self,
        _stack_id: &'a str,
        _child_id: Option<&'a str>,
        _resources: u64,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Ok(()) })
    }

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

    /// Runs a CHECK, SUSPEND or RESUME (`action`) of nested stack
    /// `child_id` and waits for it; Ok when it ended COMPLETE (upstream
    /// `StackResource.handle_check` / `handle_suspend` / `handle_resume`
    /// with their `check_*_complete`).
    fn nested_stack_action<'a>(
        &'a self,
        _child_id: &'a str,
        _action: Action,
        _cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// The files and the environment (without parameters) of stack
    /// `stack_id`: what a nested stack it owns inherits.
    fn parent_documents<'a>(&'a self, stack_id: &'a str) -> BoxFuture<'a, Result<ParentDocuments, EngineError>>;

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

    /// The template document nested stack `child_id` currently runs
    /// (scaling groups keep their members' definitions from it).
    fn nested_template<'a>(&'a self, child_id: &'a str) -> BoxFuture<'a, Result<Value, EngineError>>;

    // ---- signals (wait conditions) and software deployments. Defaulted so
    // that hosts without them (unit tests' NoHost) need not say so.

    /// The live resource of stack `stack_id` whose reference
    /// (`get_resource`) is `refid` (upstream `stack.resource_by_refid`).
    fn resource_by_refid<'a>(
        &'a self,
        _stack_id: &'a str,
        _refid: &'a str,
    ) -> BoxFuture<'a, Result<Option<PeerResource>, ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// The stored metadata of resource row `resource_id` (Null when none).
    fn resource_metadata(&self, _resource_id: i64) -> BoxFuture<'_, Result<Value, ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// Replaces the metadata of row `resource_id` with `merge(current)`,
    /// a compare-and-swap on the row's `atomic_key` (unlocked rows only),
    /// retried with a fresh read when it loses; answers what was written.
    fn merge_metadata<'a>(
        &'a self,
        _resource_id: i64,
        _merge: MetadataMerge<'a>,
    ) -> BoxFuture<'a, Result<Value, ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// Where resource `resource_name` of stack `stack_id` is signalled.
    fn signal_urls<'a>(
        &'a self,
        _stack_id: &'a str,
        _resource_name: &'a str,
    ) -> BoxFuture<'a, Result<SignalUrls, ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// Records the physical id of resource `resource_name` (locked by the
    /// running action) before the action ends (upstream `resource_id_set`).
    fn set_physical_id<'a>(
        &'a self,
        _stack_id: &'a str,
        _resource_name: &'a str,
        _physical_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Ok(()) })
    }

    /// Sends notification `event_type` (without the `orchestration.`
    /// prefix) about stack `stack_id`: its state with `extra` added
    /// (upstream's scaling group notifications). Nothing when notifications
    /// are off.
    fn notify<'a>(
        &'a self,
        _stack_id: &'a str,
        _event_type: &'a str,
        _error: bool,
        _extra: Map<String, Value>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Gives back the concurrency slot of the running check before a long
    /// wait on something outside the engine (a signal, an agent).
    fn release_check_slot(&self) {}

    /// Waits for one of the engine's server-build slots, to hold from
    /// Nova's POST /servers until the server is ACTIVE or failed (None: no
    /// bound). The caller gives back its check slot first: the wait is
    /// on Nova, not on the engine.
    fn server_build_slot(&self) -> BoxFuture<'_, Option<tokio::sync::OwnedSemaphorePermit>> {
        Box::pin(async { None })
    }

    /// Stores a software config for stack `stack_id`'s tenant; answers
    /// its id. `config` is `{config, inputs, outputs, options}`.
    fn create_software_config<'a>(
        &'a self,
        _stack_id: &'a str,
        _new: NewSoftwareConfig,
    ) -> BoxFuture<'a, Result<String, ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// A software config as the API shows it (`{id, name, group, config,
    /// inputs, outputs, options, creation_time}`); None when absent.
    fn software_config<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, Result<Option<Value>, EngineError>> {
        Box::pin(async { Ok(None) })
    }

    /// Deletes a software config; Ok when it is gone already.
    fn delete_software_config<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Ok(()) })
    }

    /// Creates (no `id` yet stored) or updates a software deployment and
    /// publishes the server's deployments in its metadata.
    fn write_deployment<'a>(
        &'a self,
        _stack_id: &'a str,
        _spec: DeploymentSpec,
    ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }

    /// A software deployment's status and outputs; None when absent.
    fn deployment<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, Result<Option<DeploymentState>, EngineError>> {
        Box::pin(async { Ok(None) })
    }

    /// Deletes a software deployment (and republishes its server's
    /// metadata); Ok when it is gone already.
    fn delete_deployment<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Ok(()) })
    }

    /// Upstream `signal_software_deployment`: records an agent's outputs
    /// on deployment `id` (IN_PROGRESS only); answers the event text.
    fn signal_deployment<'a>(
        &'a self,
        _id: &'a str,
        _details: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ResourceFailure>> {
        Box::pin(async { Err(unsupported()) })
    }
}

/// The Keystone side of a plugin's work (Heat's `StackUser`,
/// `SignalResponder`, and the stored context a server plugin acts
/// through). A host without Keystone answers [`ResourceFailure`]s; plugins
/// ask [`SignalUrls::identity`] first.
pub trait IdentityHost: Send + Sync {
    /// Creates the stack user of a resource: a user named `name` in the
    /// stack's stack-user project, with the stack user role there.
    fn create_stack_user<'a>(
        &'a self,
        _stack_id: &'a str,
        _name: &'a str,
        _password: &'a str,
    ) -> BoxFuture<'a, Result<StackUser, ResourceFailure>> {
        Box::pin(async { Err(no_identity()) })
    }

    /// Deletes a stack user (its EC2 credentials go with it); Ok when it
    /// is gone already.
    fn delete_stack_user<'a>(&'a self, _user: &'a StackUser) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(no_identity()) })
    }

    /// An EC2 credential of a stack user.
    fn create_keypair<'a>(&'a self, _user: &'a StackUser) -> BoxFuture<'a, Result<Ec2Credential, ResourceFailure>> {
        Box::pin(async { Err(no_identity()) })
    }

    fn delete_keypair<'a>(&'a self, _credential_id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(no_identity()) })
    }

    /// A token of a stack user (TOKEN_SIGNAL).
    fn stack_user_token<'a>(
        &'a self,
        _user: &'a StackUser,
        _password: &'a str,
    ) -> BoxFuture<'a, Result<String, ResourceFailure>> {
        Box::pin(async { Err(no_identity()) })
    }

    /// Heat's stored context of stack `stack_id`: a session acting as the
    /// stack's user through its trust (None without one), for plugins that
    /// call OpenStack services on the user's behalf.
    fn stack_session<'a>(&'a self, _stack_id: &'a str) -> BoxFuture<'a, Result<Option<Arc<Session>>, EngineError>> {
        Box::pin(async { Ok(None) })
    }

    /// `text` encrypted with the engine's `auth_encryption_key` (a
    /// secret kept in resource data).
    fn seal(&self, text: &str) -> Result<String, ResourceFailure> {
        Ok(text.to_string())
    }

    /// What [`IdentityHost::seal`] sealed.
    fn open(&self, sealed: &str) -> Result<String, ResourceFailure> {
        Ok(sealed.to_string())
    }
}

fn no_identity() -> ResourceFailure {
    ResourceFailure::error(
        "AuthorizationFailure",
        "Authorization failed. This engine has no Keystone ([clients_keystone] auth_uri).",
    )
}

fn unsupported() -> ResourceFailure {
    ResourceFailure::error("RuntimeError", "this engine does not provide signals or software deployments")
}

/// A metadata transformation for [`PluginHost::merge_metadata`]; called
/// again on a fresh read each time the write loses a race.
pub type MetadataMerge<'a> = Box<dyn FnMut(&Value) -> Result<Value, ResourceFailure> + Send + 'a>;

/// Another resource of the same stack.
#[derive(Debug, Clone, Default)]
pub struct PeerResource {
    pub id: i64,
    pub name: String,
    pub resource_type: String,
    pub physical_id: Option<String>,
    pub metadata: Value,
    /// The status of its last action.
    pub status: Status,
    /// The properties it was last created or updated with.
    pub properties: super::Properties,
}

/// Where an instance's stack user authenticates and signals (a Keystone
/// engine only).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdentityUrls {
    /// Keystone's v3 endpoint, as instances are told it.
    pub auth_url: String,
    /// The stack's stack-user project.
    pub stack_user_project_id: String,
    /// The stack-user domain's id.
    pub stack_domain_id: String,
    /// `<api>/v1/<stack-user project>/stacks/<name>/<id>/resources/<res>`:
    /// the resource as its stack users reach it.
    pub resource_url: String,
    /// heat-api-cfn's `/v1` root as instances reach it (pre-signed EC2
    /// URLs, the CFN metadata API).
    pub cfn_url: String,
    /// `heat_waitcondition_server_url`, when set: the base of pre-signed
    /// wait condition URLs (`/waitcondition` replaced by `/signal` for
    /// signal URLs).
    pub waitcondition_server_url: Option<String>,
    /// The resource's ARN (`arn:openstack:heat::<tenant>:stacks/...`).
    pub arn: String,
}

impl IdentityUrls {
    /// Heat's `_get_ec2_signed_url` base for `kind` (`/waitcondition` or
    /// `/signal`).
    pub fn ec2_base(&self, signal: bool) -> String {
        let segment = if signal { "/signal" } else { "/waitcondition" };
        match &self.waitcondition_server_url {
            Some(url) => url.replace("/waitcondition", segment),
            None => format!("{}{segment}", self.cfn_url.trim_end_matches('/')),
        }
    }
}

/// The URLs a resource is signalled (and its metadata read) at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignalUrls {
    /// With Keystone: stack users and EC2 signed URLs (None: noauth, the
    /// engine's own pre-signed URLs).
    pub identity: Option<IdentityUrls>,
    /// `<api>/v1/<tenant>/stacks/<name>/<id>/resources/<res>`: append
    /// `/signal` (HEAT_SIGNAL, TOKEN_SIGNAL) or `/metadata`.
    pub resource_url: String,
    /// Pre-signed `PUT <waitcondition server>/<arn>?...` (CFN_SIGNAL for
    /// wait condition handles); usable with no token.
    pub waitcondition_url: String,
    /// Pre-signed `POST <metadata server>/v1/signal/<arn>?...` (CFN_SIGNAL
    /// for deployments).
    pub signal_url: String,
    /// `signal_url` that never expires (upstream's `never_expire`): what
    /// a scaling policy gives alarms, which keep using it.
    pub alarm_url: String,
    /// The stack's tenant (project).
    pub tenant: String,
    /// `<stack name>/<stack id>` (upstream `stack_path()`).
    pub stack_path: String,
    pub region_name: String,
    /// `[orchestration] default_deployment_signal_transport`.
    pub default_deployment_transport: String,
    /// `[orchestration] default_software_config_transport`.
    pub default_config_transport: String,
}

/// A software config to store.
#[derive(Debug, Clone, Default)]
pub struct NewSoftwareConfig {
    pub name: Option<String>,
    pub group: Option<String>,
    /// `{config, inputs, outputs, options}`.
    pub config: Value,
}

/// A software deployment to create or update.
#[derive(Debug, Clone, Default)]
pub struct DeploymentSpec {
    pub id: String,
    pub config_id: String,
    pub server_id: String,
    pub input_values: Value,
    pub action: String,
    pub status: String,
    pub status_reason: String,
}

/// What a deployment resource polls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentState {
    pub config_id: String,
    pub server_id: String,
    pub status: String,
    pub status_reason: String,
    pub output_values: Map<String, Value>,
}

/// One live resource of a nested stack as group attributes see it.
#[derive(Debug, Clone, Default)]
pub struct NestedMember {
    pub name: String,
    /// `get_resource` of the member.
    pub reference: Value,
    /// The requested attributes, resolved (Null when unknown).
    pub attributes: Map<String, Value>,
    /// When the member's row was made: scaling groups order by it.
    pub created_at: Option<chrono::NaiveDateTime>,
    /// Whether its last action failed (scaling groups leave it out).
    pub failed: bool,
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

impl IdentityHost for NoHost {}

impl PluginHost for NoHost {
    fn create_nested<'a>(
        &'a self,
        _: &'a NestedParent,
        _: NestedStackSpec,
    ) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn update_nested<'a>(&'a self, _: &'a str, _: NestedStackSpec) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn delete_nested<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn wait_nested<'a>(
        &'a self,
        _: &'a str,
        _: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<NestedOutcome, ResourceFailure>> {
        Box::pin(async { Err(no_engine()) })
    }
    fn nested_outputs<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Map<String, Value>, EngineError>> {
        Box::pin(async { Ok(Map::new()) })
    }
    fn parent_documents<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(Map<String, Value>, Value), EngineError>> {
        Box::pin(async { Ok((Map::new(), Value::Object(Map::new()))) })
    }
    fn nested_resources<'a>(
        &'a self,
        _: &'a str,
        _: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<NestedMember>, EngineError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn nested_template<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Value, EngineError>> {
        Box::pin(async { Ok(Value::Null) })
    }
}
