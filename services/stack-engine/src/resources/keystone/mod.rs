//! Heat's OS::Keystone::* types: Keystone's projects, roles, domains (and
//! the rest of its admin entities) as stack resources, created through the
//! stack's trust (`EngineHost::stack_session`) with keelson-openstack's
//! [`IdentityAdmin`].
//!
//! Names or ids in properties (`domain`, `parent`, ...) resolve as Heat's
//! Keystone client plugin does (an id first, then an exact name, `name{domain}`
//! naming the domain) when an action runs. Physical id = Keystone's id; the
//! entity as Keystone last answered it is kept in the resource data, where
//! the attributes read it. A Keystone error fails the action named by the
//! keystoneauth exception Heat would show.

mod domain;
mod endpoint;
mod group;
mod project;
mod role;
mod role_assignments;
mod service;
mod user;

use std::future::Future;
use std::sync::Arc;

use keelson_openstack::identity_admin::{Entity, IdentityAdmin};
use keelson_openstack::{OsError, Session};
use serde_json::{Map, Value};

pub use domain::Domain;
pub use endpoint::Endpoint;
pub use group::Group;
pub use project::Project;
pub use role::Role;
pub use role_assignments::RoleAssignment;
pub use service::Service;
pub use user::User;

use super::client_errors::KEYSTONEAUTH;
use super::host::HostSlot;
use super::{
    changed_properties, ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceSchema, ResourceState,
};
use crate::error::EngineError;

/// Resource data key of the entity as Keystone last showed it.
const ENTITY_DATA: &str = "entity";

/// The failure a Keystone error becomes, named by the keystoneauth
/// exception class Heat shows in the status reason.
pub(crate) fn failure(e: OsError) -> ResourceFailure {
    KEYSTONEAUTH.failure(e)
}

/// Heat's `EntityNotFound` for a name or id no Keystone entity has.
fn not_found(kind: &str, name: &str) -> ResourceFailure {
    ResourceFailure::error("EntityNotFound", format!("The {kind} ({name}) could not be found."))
}

/// The stack's trust-scoped session.
async fn session(host: &HostSlot, ctx: &ActionContext) -> Result<Arc<Session>, ResourceFailure> {
    host.get()
        .stack_session(&ctx.stack_id)
        .await
        .map_err(|e| ResourceFailure::error(e.heat_type(), e.message()))?
        .ok_or_else(|| {
            ResourceFailure::error(
                "AuthorizationFailure",
                "Authorization failed. The stack has no trust to act on Keystone with.",
            )
        })
}

/// A string property, None when absent or empty.
fn str_prop<'a>(props: &'a Properties, name: &str) -> Option<&'a str> {
    props.get(name).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The name an entity gets: the `name` property, else the resource's
/// physical name (generated once, then kept).
fn entity_name(ctx: &mut ActionContext) -> String {
    if let Some(name) = str_prop(&ctx.properties, "name") {
        return name.to_string();
    }
    ctx.stable_physical_name()
}

/// Keeps Keystone's view of the entity (and its id as the physical id).
fn remember(state: &mut ResourceState, entity: &Value) {
    if let Some(id) = entity.get("id").and_then(Value::as_str) {
        state.physical_id = Some(id.to_string());
    }
    state.data.insert(ENTITY_DATA.into(), entity.to_string());
}

/// A field of the entity Keystone last showed (Null before create).
fn entity_field(state: &ResourceState, field: &str) -> Value {
    state
        .data
        .get(ENTITY_DATA)
        .and_then(|e| serde_json::from_str::<Value>(e).ok())
        .and_then(|e| e.get(field).cloned())
        .unwrap_or(Value::Null)
}

/// `name{domain}` split as Heat's `parse_entity_with_domain` does: the
/// braces at the end name the domain.
fn split_domain(value: &str) -> (&str, Option<&str>) {
    if let Some(stripped) = value.strip_suffix('}') {
        if let Some(open) = stripped.find('{') {
            return (&stripped[..open], Some(&stripped[open + 1..]));
        }
    }
    (value, None)
}

/// What Heat calls each entity in `EntityNotFound`.
fn kind_name(entity: Entity) -> &'static str {
    match entity {
        Entity::Project => "KeystoneProject",
        Entity::Domain => "KeystoneDomain",
        Entity::Role => "KeystoneRole",
        Entity::User => "KeystoneUser",
        Entity::Group => "KeystoneGroup",
        Entity::Service => "KeystoneService",
        Entity::Endpoint => "KeystoneEndpoint",
        Entity::Region => "KeystoneRegion",
    }
}

/// The id of the domain named (or identified) by `value`.
async fn domain_id(api: &IdentityAdmin<'_>, value: &str) -> Result<String, ResourceFailure> {
    api.find_id(Entity::Domain, value, None)
        .await
        .map_err(failure)?
        .ok_or_else(|| not_found(kind_name(Entity::Domain), value))
}

/// The id of the project, role, group or user named (or identified) by
/// `value`; `name{domain}` looks the name up in that domain.
async fn scoped_id(api: &IdentityAdmin<'_>, entity: Entity, value: &str) -> Result<String, ResourceFailure> {
    scoped_lookup(api, entity, value).await?
}

/// [`scoped_id`] with Heat's EntityNotFound apart (inside) from the other
/// Keystone errors (outside).
async fn scoped_lookup(
    api: &IdentityAdmin<'_>,
    entity: Entity,
    value: &str,
) -> Result<Result<String, ResourceFailure>, ResourceFailure> {
    let kind = kind_name(entity);
    let (name, domain) = split_domain(value);
    let domain = match domain {
        Some(d) => match domain_id(api, d).await {
            Ok(id) => Some(id),
            Err(_) => return Ok(Err(not_found(kind, value))),
        },
        None => None,
    };
    Ok(api.find_id(entity, name, domain.as_deref()).await.map_err(failure)?.ok_or_else(|| not_found(kind, name)))
}

/// Heat's `get_project_id` / `get_user_id`, for the plugins of other
/// services that name a Keystone entity: the id of the entity `value`
/// names or identifies.
pub(crate) async fn keystone_id(session: &Session, entity: Entity, value: &str) -> Result<String, ResourceFailure> {
    scoped_id(&IdentityAdmin::new(session), entity, value).await
}

/// What the `keystone.*` custom constraints ask: Ok(Err) with Heat's
/// EntityNotFound when no entity matches, Err for a Keystone error.
pub(crate) async fn keystone_lookup(
    session: &Session,
    entity: Entity,
    value: &str,
) -> Result<Result<String, ResourceFailure>, ResourceFailure> {
    scoped_lookup(&IdentityAdmin::new(session), entity, value).await
}

/// A Keystone type: what it states of itself. Its [`Plugin`] is the one
/// below, which opens the stack's trust session and identity client for
/// every action and then calls the type's `*_with`; its attributes are
/// the entity's fields as Keystone last answered.
trait KeystoneType: Send + Sync + 'static {
    const TYPE: &'static str;

    /// The name the registry files it under (see [`Plugin::type_name`]).
    fn type_name(&self) -> &'static str {
        Self::TYPE
    }

    fn host(&self) -> &HostSlot;

    fn schema(&self) -> &ResourceSchema;

    fn validate(&self, _props: &Properties) -> Result<(), EngineError> {
        Ok(())
    }

    fn create_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
    ) -> impl Future<Output = ActionResult> + Send;

    /// Updates the entity `id` in place.
    fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
        id: &str,
    ) -> impl Future<Output = ActionResult> + Send;

    /// Deletes what the resource made, named by `id`.
    fn delete_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        id: &str,
    ) -> impl Future<Output = ActionResult> + Send;

    /// The id an update acts on; None: nothing to update (by default, no
    /// entity or no property changed).
    fn update_target(&self, ctx: &ActionContext, old: &Properties) -> Option<String> {
        ctx.state.physical_id.clone().filter(|_| !changed_properties(old, &ctx.properties).is_empty())
    }

    /// The id a delete acts on; None: nothing to delete.
    fn delete_target(&self, ctx: &ActionContext) -> Option<String> {
        ctx.state.physical_id.clone()
    }
}

impl<T: KeystoneType> Plugin for T {
    const TYPE: &'static str = T::TYPE;

    fn type_name(&self) -> &'static str {
        KeystoneType::type_name(self)
    }

    fn schema(&self) -> &ResourceSchema {
        KeystoneType::schema(self)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        KeystoneType::validate(self, props)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = session(self.host(), ctx).await?;
        self.create_with(&IdentityAdmin::new(&session), ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = self.update_target(ctx, old) else { return Ok(()) };
        let session = session(self.host(), ctx).await?;
        self.update_with(&IdentityAdmin::new(&session), ctx, old, &id).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = self.delete_target(ctx) else { return Ok(()) };
        let session = session(self.host(), ctx).await?;
        self.delete_with(&IdentityAdmin::new(&session), ctx, &id).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        Ok(entity_field(state, name))
    }
}

/// An object of `fields`.
fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::Registry;
    use super::*;
    use crate::caller::Caller;

    /// What the real Heat 27.0.1 answers to `GET /resource_types/<type>`
    /// (tests/reference/heat/record_schemas.py keystone).
    const RECORDED: &str = include_str!("testdata/schemas.json");

    pub(super) use crate::caller::test_admin as admin;

    pub(super) fn assert_schema_as_heat(type_name: &str) {
        let recorded: Value = serde_json::from_str(RECORDED).unwrap();
        let mut registry = Registry::builtin();
        registry.add_openstack_types();
        let view = registry.schema_view(&admin(), type_name, true).unwrap();
        assert_eq!(view, recorded[type_name], "{type_name}");
    }

    #[test]
    fn keystone_errors_name_the_keystoneauth_exception() {
        assert_eq!(
            failure(OsError::Conflict("Conflict occurred attempting to store project".into())),
            ResourceFailure::error("Conflict", "Conflict occurred attempting to store project (HTTP 409)")
        );
        assert_eq!(
            failure(OsError::Unavailable("503 Service Unavailable: down".into())),
            ResourceFailure::error("ServiceUnavailable", "503 Service Unavailable: down")
        );
    }

    #[test]
    fn names_with_a_domain_split_as_heat() {
        assert_eq!(split_domain("admin{Default}"), ("admin", Some("Default")));
        assert_eq!(split_domain("admin"), ("admin", None));
        assert_eq!(split_domain("a{b}c"), ("a{b}c", None));
        assert_eq!(split_domain("a{}"), ("a", Some("")));
    }

    #[test]
    fn the_types_are_offered_only_with_keystone_and_admin_only() {
        let names = |r: &Registry| r.list_view(&admin(), &[], &[]).unwrap()["resource_types"].clone();
        let builtin = names(&Registry::builtin());
        assert!(!builtin.to_string().contains("OS::Keystone"));
        let mut registry = Registry::builtin();
        registry.add_openstack_types();
        // In Heat's listing order, after the built-in types.
        let mut expected = builtin.as_array().unwrap().clone();
        // The Glance and Cinder types load before OS::Heat's.
        let heat = expected.iter().position(|t| t.as_str().is_some_and(|t| t.starts_with("OS::Heat::"))).unwrap();
        expected.insert(heat, json!("OS::Glance::WebImage"));
        expected.insert(heat, json!("OS::Cinder::VolumeType"));
        expected.insert(heat, json!("OS::Cinder::VolumeAttachment"));
        expected.insert(heat, json!("OS::Cinder::Volume"));
        for t in ["Domain", "Endpoint", "Group", "Project", "Role", "UserRoleAssignment", "GroupRoleAssignment"]
            .iter()
            .chain(&["Service", "User"])
        {
            expected.push(json!(format!("OS::Keystone::{t}")));
        }
        for t in ["FloatingIP", "FloatingIPAssociation", "Net", "Port", "QoSPolicy", "QoSBandwidthLimitRule"]
            .iter()
            .chain(&["QoSDscpMarkingRule", "QoSMinimumBandwidthRule", "QoSMinimumPacketRateRule"])
            .chain(&["Router", "RouterInterface", "SecurityGroup"])
            .chain(&["SecurityGroupRule", "Subnet"])
        {
            expected.push(json!(format!("OS::Neutron::{t}")));
        }
        // The instance type loads with the other AWS::EC2 ones.
        let handle = expected.iter().position(|t| t == "AWS::CloudFormation::WaitConditionHandle").unwrap();
        expected.insert(handle + 1, json!("AWS::EC2::Instance"));
        for t in ["Flavor", "KeyPair", "Quota", "Server", "ServerGroup"] {
            expected.push(json!(format!("OS::Nova::{t}")));
        }
        // The Swift signal types load with OS::Heat's, the container after Nova's.
        let test_resource = expected.iter().position(|t| t == "OS::Heat::TestResource").unwrap();
        expected.insert(test_resource, json!("OS::Heat::SwiftSignalHandle"));
        expected.insert(test_resource, json!("OS::Heat::SwiftSignal"));
        expected.push(json!("OS::Swift::Container"));
        assert_eq!(names(&registry), Value::Array(expected));
        let member = Caller { project_id: "p".into(), roles: vec!["member".into()], ..Caller::default() };
        let e = registry.authorize_type(&member, "OS::Keystone::Project").unwrap_err();
        assert_eq!((e.http_status(), e.heat_type()), (403, "Forbidden"));
        assert!(registry.authorize_type(&admin(), "OS::Keystone::Project").is_ok());
    }

    #[tokio::test]
    async fn without_a_trust_the_action_fails_and_nothing_is_made() {
        let rt: Arc<dyn crate::resources::ResourceType> = Arc::new(Project::new(Arc::new(HostSlot::default())));
        let (mut ctx, _tx) = crate::resources::context::test_context(Properties::new());
        let failed = rt.create(&mut ctx).await.unwrap_err();
        assert_eq!(failed.exception().map(|(t, _)| t), Some("AuthorizationFailure"));
        assert_eq!(ctx.state.physical_id, None);
    }

    #[test]
    fn attributes_read_keystones_last_answer() {
        let mut state = ResourceState::default();
        assert_eq!(entity_field(&state, "name"), Value::Null);
        remember(&mut state, &json!({"id": "p1", "name": "n", "enabled": true}));
        assert_eq!(state.physical_id.as_deref(), Some("p1"));
        assert_eq!(entity_field(&state, "enabled"), json!(true));
        assert_eq!(entity_field(&state, "parent_id"), Value::Null);
    }
}
