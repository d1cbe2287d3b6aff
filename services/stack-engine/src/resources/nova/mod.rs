//! Heat's Nova types: OS::Nova::KeyPair, Flavor, ServerGroup, Quota and
//! Server, and AWS::EC2::Instance, calling Nova's compute API through
//! keelson-openstack's [`Compute`] client as the stack's user (the
//! stack's trust session, opened for each action by [`create_in_stack`]
//! and its siblings around a type's [`NovaActions`]).
//!
//! The types are offered only by an engine that knows Keystone (without
//! it there is no session to act through). Nova's 404 on delete is a
//! deletion done; any other Nova error fails the action with Nova's text,
//! named as novaclient's exception class (`NotFound`, `Forbidden`, ...).
//! Custom constraints that name Keystone entities (`keystone.project`,
//! `keystone.user`) resolve a name or id to the id at action time, as
//! Heat's translation rules do.

mod flavor;
mod instance;
mod keypair;
mod quota;
mod server;
mod server_group;

use std::future::Future;
use std::sync::Arc;

use keelson_openstack::compute::Compute;
use keelson_openstack::{OsError, Session};
use serde_json::Value;

pub use flavor::Flavor;
pub use instance::Instance;
pub use keypair::KeyPair;
pub use quota::Quota;
pub use server::Server;
pub use server_group::ServerGroup;

pub(crate) use super::keystone::keystone_id;
pub(crate) use keelson_openstack::identity_admin::Entity;

use super::client_errors::NOVACLIENT;
use super::{ActionContext, ActionResult, HostSlot, Properties, Registry, ResourceFailure, ResourceState};
use crate::error::EngineError;

/// Adds the six types to `registry`; their actions act through the
/// stack sessions of the registry's host.
pub fn register(registry: &mut Registry) {
    let host = registry.host().clone();
    registry.register(Arc::new(KeyPair::new(host.clone())));
    registry.register(Arc::new(Flavor::new(host.clone())));
    registry.register(Arc::new(ServerGroup::new(host.clone())));
    registry.register(Arc::new(Server::new(host.clone())));
    registry.register(Arc::new(Instance::new(host.clone())));
    registry.register(Arc::new(Quota::new(host)));
}

/// The failure a Nova (or Keystone) error becomes: novaclient's exception
/// class and the service's text with its status, as Heat shows it.
pub(crate) fn failure(e: OsError) -> ResourceFailure {
    NOVACLIENT.failure(e)
}

/// Ok for a 404 (a delete of something already gone).
pub(crate) fn ok_if_gone(result: Result<(), OsError>) -> Result<(), ResourceFailure> {
    NOVACLIENT.done_if_gone(result)
}

/// The stack's trust session, which every Nova call acts through.
pub(crate) async fn stack_session(host: &HostSlot, stack_id: &str) -> Result<Arc<Session>, ResourceFailure> {
    match host.get().stack_session(stack_id).await? {
        Some(session) => Ok(session),
        None => Err(ResourceFailure::error(
            "AuthorizationFailure",
            "Authorization failed. The stack has no stored credentials (trust) to act with.",
        )),
    }
}

/// Resource data: the stack whose trust session reads the resource's
/// attributes from Nova (attribute resolution knows no stack).
pub(crate) const STACK_DATA: &str = "stack_id";

/// The stack session attributes read Nova through; None when the resource
/// never recorded its stack or the stack has no trust (then the values
/// the last action saw answer).
pub(crate) async fn attribute_session(
    host: &HostSlot,
    state: &ResourceState,
) -> Result<Option<Arc<Session>>, EngineError> {
    match state.data.get(STACK_DATA) {
        Some(stack_id) => host.get().stack_session(stack_id).await,
        None => Ok(None),
    }
}

/// A Nova error met while resolving an attribute, as Heat raises it.
pub(crate) fn attribute_error(e: OsError) -> EngineError {
    NOVACLIENT.attribute_error(e)
}

/// The compute client at the negotiated microversion.
pub(crate) async fn compute(session: &Session) -> Result<Compute<'_>, ResourceFailure> {
    Compute::connect(session).await.map_err(failure)
}

/// What a Nova type does with the stack's session and compute client.
/// Its `Plugin` hooks are [`create_in_stack`], [`update_in_stack`] and
/// [`delete_in_stack`], which open the stack's trust session and the
/// client for every type, then call these.
pub(crate) trait NovaActions: Sync {
    fn host(&self) -> &HostSlot;

    fn create_with(
        &self,
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
    ) -> impl Future<Output = ActionResult> + Send;

    /// By default nothing changes in place.
    fn update_with(
        &self,
        _session: &Session,
        _compute: &Compute<'_>,
        _ctx: &mut ActionContext,
        _old: &Properties,
    ) -> impl Future<Output = ActionResult> + Send {
        async { Ok(()) }
    }

    /// Deletes what `id` (from [`NovaActions::deletable_id`]) names.
    fn delete_with(
        &self,
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
        id: &str,
    ) -> impl Future<Output = ActionResult> + Send;

    /// What a delete acts on; None: nothing to delete.
    fn deletable_id(&self, ctx: &ActionContext) -> Option<String> {
        ctx.state.physical_id.clone()
    }
}

/// `Plugin::create` of a Nova type.
pub(crate) async fn create_in_stack<T: NovaActions>(resource: &T, ctx: &mut ActionContext) -> ActionResult {
    let session = stack_session(resource.host(), &ctx.stack_id).await?;
    resource.create_with(&session, &compute(&session).await?, ctx).await
}

/// `Plugin::update` of a Nova type.
pub(crate) async fn update_in_stack<T: NovaActions>(
    resource: &T,
    ctx: &mut ActionContext,
    old: &Properties,
) -> ActionResult {
    let session = stack_session(resource.host(), &ctx.stack_id).await?;
    resource.update_with(&session, &compute(&session).await?, ctx, old).await
}

/// `Plugin::delete` of a Nova type: nothing to do without an id.
pub(crate) async fn delete_in_stack<T: NovaActions>(resource: &T, ctx: &mut ActionContext) -> ActionResult {
    let Some(id) = resource.deletable_id(ctx) else { return Ok(()) };
    let session = stack_session(resource.host(), &ctx.stack_id).await?;
    resource.delete_with(&session, &compute(&session).await?, ctx, &id).await
}

/// What a flavor name or id matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FlavorMatch {
    Found(String),
    None,
    Ambiguous,
}

/// Heat's `find_flavor_by_name_or_id`: the flavor with that id, else
/// novaclient's `flavors.find(name=...)`.
pub(crate) async fn flavor_lookup(compute: &Compute<'_>, value: &str) -> Result<FlavorMatch, OsError> {
    match compute.flavor(value).await {
        Ok(flavor) => return Ok(FlavorMatch::Found(flavor.id)),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    let flavors = compute.flavor_names().await?;
    let mut named = flavors.into_iter().filter(|(_, name)| name == value);
    Ok(match (named.next(), named.next()) {
        (Some((id, _)), None) => FlavorMatch::Found(id),
        (None, _) => FlavorMatch::None,
        _ => FlavorMatch::Ambiguous,
    })
}

/// The flavor's id, or novaclient's exception for what
/// [`flavor_lookup`] matched (also the `nova.flavor` constraint's texts).
pub(crate) fn flavor_result(value: &str, found: FlavorMatch) -> Result<String, ResourceFailure> {
    match found {
        FlavorMatch::Found(id) => Ok(id),
        FlavorMatch::None => {
            let name = crate::resources::properties::py_repr(&Value::String(value.to_string()));
            Err(ResourceFailure::error("NotFound", format!("No Flavor matching {{'name': {name}}}. (HTTP 404)")))
        }
        // novaclient's NoUniqueMatch carries no message.
        FlavorMatch::Ambiguous => Err(ResourceFailure::error("NoUniqueMatch", "")),
    }
}

/// A string property, None when absent or empty.
pub(crate) fn str_prop<'a>(props: &'a Properties, name: &str) -> Option<&'a str> {
    props.get(name).and_then(Value::as_str).filter(|s| !s.is_empty())
}

#[cfg(test)]
pub(crate) mod testing {
    //! A Keystone + Nova stand-in on loopback: Keystone validates the
    //! token (its catalog names the stand-in as `compute`, and as `image`
    //! and `volumev3` for the Glance and Cinder types), the service
    //! records every request and answers what the test registered.

    use std::collections::{BTreeMap, VecDeque};
    use std::sync::{Arc, Mutex};

    use axum::extract::{Request, State};
    use futures::future::BoxFuture;
    use serde_json::Map;

    use crate::error::EngineError;
    use crate::resources::host::{NestedMember, NestedOutcome, NestedParent, NestedStackRef, NestedStackSpec};
    use crate::resources::{HostSlot, PluginHost, ResourceFailure};
    use axum::response::IntoResponse;
    use keelson_openstack::{AuthMethod, HttpClient, Session};
    use serde_json::{json, Value};

    /// One request Nova received: method, path (with query), microversion
    /// header and JSON body.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Seen {
        pub method: String,
        pub path: String,
        pub version: Option<String>,
        pub body: Value,
    }

    #[derive(Default)]
    pub struct Nova {
        /// `"METHOD /path"` → (status, body); unregistered: 404.
        pub answers: Mutex<BTreeMap<String, (u16, Value)>>,
        /// `"METHOD /path"` → answers given in turn (the last repeats);
        /// before `answers`.
        pub sequences: Mutex<BTreeMap<String, VecDeque<(u16, Value)>>>,
        pub seen: Mutex<Vec<Seen>>,
        /// Whether the catalog also names the stand-in as `network`.
        pub network: bool,
    }

    impl Nova {
        pub fn answer(&self, key: &str, status: u16, body: Value) {
            self.answers.lock().unwrap().insert(key.to_string(), (status, body));
        }
        /// Answers `key` with each of `answers` in turn, the last for good.
        pub fn answer_in_turn(&self, key: &str, answers: Vec<(u16, Value)>) {
            self.sequences.lock().unwrap().insert(key.to_string(), answers.into());
        }
        pub fn seen(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }
        /// The requests other than the version discovery.
        pub fn calls(&self) -> Vec<(String, String, Value)> {
            self.seen().into_iter().filter(|s| s.path != "/compute/v2.1").map(|s| (s.method, s.path, s.body)).collect()
        }
    }

    async fn handle(State((nova, base)): State<(Arc<Nova>, String)>, req: Request) -> impl IntoResponse {
        let method = req.method().to_string();
        let path = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
        let version = req.headers().get("openstack-api-version").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let bytes = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if path == "/v3/auth/tokens" {
            let mut token = json!({"token": {
                "user": {"id": "u1"}, "project": {"id": "p1"}, "expires_at": "2999-01-01T00:00:00Z",
                "catalog": [{"type": "compute", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": format!("{base}/compute/v2.1")},
                    // Only for the endpoint-choice test: nothing answers there.
                    {"interface": "internal", "region_id": "RegionTwo", "url": format!("{base}/internal/v2.1")}]},
                    {"type": "image", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": format!("{base}/image")}]},
                    {"type": "volumev3", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": format!("{base}/volume/v3/p1")}]}]}});
            if nova.network {
                let network = json!({"type": "network", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": format!("{base}/network")}]});
                token["token"]["catalog"].as_array_mut().unwrap().push(network);
            }
            return (axum::http::StatusCode::OK, token.to_string());
        }
        nova.seen.lock().unwrap().push(Seen { method: method.clone(), path: path.clone(), version, body });
        let key = format!("{method} {path}");
        let in_turn = nova.sequences.lock().unwrap().get_mut(&key).and_then(|queue| {
            if queue.len() > 1 {
                queue.pop_front()
            } else {
                queue.front().cloned()
            }
        });
        let (status, body) = in_turn
            .or_else(|| nova.answers.lock().unwrap().get(&key).cloned())
            .unwrap_or((404, json!({"itemNotFound": {"code": 404, "message": format!("{path} not found")}})));
        (
            axum::http::StatusCode::from_u16(status).unwrap(),
            if body.is_null() { String::new() } else { body.to_string() },
        )
    }

    /// An engine whose stacks act through `session` (None: no trust).
    pub struct SessionHost(pub Option<Arc<Session>>);

    impl crate::resources::host::IdentityHost for SessionHost {
        fn stack_session<'a>(
            &'a self,
            _stack_id: &'a str,
        ) -> BoxFuture<'a, Result<Option<Arc<Session>>, crate::error::EngineError>> {
            Box::pin(async move { Ok(self.0.clone()) })
        }
        /// Stack users for the servers' software config transports.
        fn create_stack_user<'a>(
            &'a self,
            _stack_id: &'a str,
            _name: &'a str,
            _password: &'a str,
        ) -> BoxFuture<'a, Result<crate::resources::host::StackUser, ResourceFailure>> {
            Box::pin(async {
                Ok(crate::resources::host::StackUser { user_id: "su-1".into(), project_id: "sup".into() })
            })
        }
        fn delete_stack_user<'a>(
            &'a self,
            _user: &'a crate::resources::host::StackUser,
        ) -> BoxFuture<'a, Result<(), ResourceFailure>> {
            Box::pin(async { Ok(()) })
        }
        fn create_keypair<'a>(
            &'a self,
            _user: &'a crate::resources::host::StackUser,
        ) -> BoxFuture<'a, Result<crate::resources::host::Ec2Credential, ResourceFailure>> {
            Box::pin(async {
                Ok(crate::resources::host::Ec2Credential { id: "c1".into(), access: "AK".into(), secret: "SK".into() })
            })
        }
        fn delete_keypair<'a>(&'a self, _credential_id: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn unused() -> ResourceFailure {
        ResourceFailure::error("RuntimeError", "not in these tests")
    }

    impl PluginHost for SessionHost {
        /// A Keystone engine's URLs (heat-api-cfn at `http://cfn:8000/v1`).
        fn signal_urls<'a>(
            &'a self,
            _stack_id: &'a str,
            resource_name: &'a str,
        ) -> BoxFuture<'a, Result<crate::resources::host::SignalUrls, ResourceFailure>> {
            Box::pin(async move {
                Ok(crate::resources::host::SignalUrls {
                    identity: Some(crate::resources::host::IdentityUrls {
                        auth_url: "http://ks/v3".into(),
                        stack_user_project_id: "sup".into(),
                        cfn_url: "http://cfn:8000/v1".into(),
                        ..Default::default()
                    }),
                    resource_url: format!("http://heat/v1/p1/stacks/st/sid/resources/{resource_name}"),
                    stack_path: "st/sid".into(),
                    region_name: "RegionOne".into(),
                    default_config_transport: "POLL_SERVER_CFN".into(),
                    ..Default::default()
                })
            })
        }
        fn create_nested<'a>(
            &'a self,
            _: &'a NestedParent,
            _: NestedStackSpec,
        ) -> BoxFuture<'a, Result<NestedStackRef, ResourceFailure>> {
            Box::pin(async { Err(unused()) })
        }
        fn update_nested<'a>(&'a self, _: &'a str, _: NestedStackSpec) -> BoxFuture<'a, Result<(), ResourceFailure>> {
            Box::pin(async { Err(unused()) })
        }
        fn delete_nested<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), ResourceFailure>> {
            Box::pin(async { Err(unused()) })
        }
        fn wait_nested<'a>(
            &'a self,
            _: &'a str,
            _: tokio::sync::watch::Receiver<bool>,
        ) -> BoxFuture<'a, Result<NestedOutcome, ResourceFailure>> {
            Box::pin(async { Err(unused()) })
        }
        fn nested_outputs<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Map<String, Value>, EngineError>> {
            Box::pin(async { Ok(Map::new()) })
        }
        fn parent_documents<'a>(
            &'a self,
            _: &'a str,
        ) -> BoxFuture<'a, Result<(Map<String, Value>, Value), EngineError>> {
            Box::pin(async { Ok((Map::new(), Value::Null)) })
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

    /// A host slot bound to a [`SessionHost`] (kept alive by the caller).
    pub fn bound(session: Option<Arc<Session>>) -> (Arc<HostSlot>, Arc<dyn PluginHost>) {
        let host: Arc<dyn PluginHost> = Arc::new(SessionHost(session));
        let slot = Arc::new(HostSlot::default());
        slot.bind(Arc::downgrade(&host));
        (slot, host)
    }

    /// A stand-in whose compute endpoint speaks up to `max_version`, and a
    /// session whose catalog points at it.
    pub async fn nova(max_version: &str) -> (Arc<Nova>, Arc<Session>) {
        serve(Nova::default(), max_version).await
    }

    /// [`nova`] whose catalog also names it as `network` (Neutron paths
    /// under `/network/v2.0`).
    pub async fn nova_and_neutron(max_version: &str) -> (Arc<Nova>, Arc<Session>) {
        serve(Nova { network: true, ..Nova::default() }, max_version).await
    }

    async fn serve(nova: Nova, max_version: &str) -> (Arc<Nova>, Arc<Session>) {
        let nova = Arc::new(nova);
        nova.answer("GET /compute/v2.1", 200, json!({"version": {"id": "v2.1", "version": max_version}}));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(handle).with_state((nova.clone(), base.clone()));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let session = Session::new(HttpClient::default(), &base, AuthMethod::Existing { token: "tok".into() });
        (nova, Arc::new(session))
    }
}

#[cfg(test)]
mod tests {
    use keelson_openstack::compute::Microversion;
    use keelson_openstack::{AuthMethod, HttpClient};
    use serde_json::{json, Value};

    use super::super::Registry;
    use super::*;

    use crate::caller::test_admin as admin;

    const TYPES: &[&str] =
        &["OS::Nova::KeyPair", "OS::Nova::Flavor", "OS::Nova::ServerGroup", "OS::Nova::Quota", "OS::Nova::Server"];

    /// A session asks Nova's version document once, not for every action
    /// (each action connects its own client).
    #[tokio::test]
    async fn a_session_asks_novas_version_once() {
        let (nova, session) = testing::nova_and_neutron("2.96").await;
        for _ in 0..3 {
            assert_eq!(compute(&session).await.unwrap().version(), Microversion::new(2, 96));
        }
        let asked = nova.seen().iter().filter(|s| s.method == "GET" && s.path == "/compute/v2.1").count();
        assert_eq!(asked, 1);
    }

    /// Heat's `[clients] endpoint_type`, `[clients_nova] endpoint_type` and
    /// `region_name_for_services` pick the endpoint the clients use.
    #[tokio::test]
    async fn the_configured_endpoint_type_and_region_pick_the_endpoint() {
        use keelson_openstack::{EndpointChoice, OsError};
        let (_nova, session) = testing::nova("2.79").await;
        let base = session.identity_v3().trim_end_matches("/v3").to_string();
        let endpoint = |choice: EndpointChoice| {
            let session = Session::new(HttpClient::default(), &base, AuthMethod::Existing { token: "tok".into() })
                .with_endpoint_choice(choice);
            async move { session.client_endpoint("nova", "compute").await }
        };
        assert_eq!(endpoint(EndpointChoice::default()).await.unwrap(), format!("{base}/compute/v2.1"));
        let internal = EndpointChoice::new("internalURL", None);
        assert_eq!(endpoint(internal.clone()).await.unwrap(), format!("{base}/internal/v2.1"));
        // A client of its own endpoint type; the others keep the default.
        let public_nova = internal.clone().with_client("nova", "publicURL");
        assert_eq!(endpoint(public_nova).await.unwrap(), format!("{base}/compute/v2.1"));
        let elsewhere = EndpointChoice::new("internal", Some("RegionOne".into()));
        assert!(matches!(endpoint(elsewhere).await, Err(OsError::EndpointNotFound(_))));
        let there = EndpointChoice::new("internal", Some("RegionTwo".into()));
        assert_eq!(endpoint(there).await.unwrap(), format!("{base}/internal/v2.1"));
    }

    /// The schema views equal what Heat 27.0.1's code answers
    /// (tests/reference/heat/record_schemas.py nova).
    #[test]
    fn schema_views_equal_heats() {
        let recorded: Value = serde_json::from_str(include_str!("testdata/nova_schemas.json")).unwrap();
        let mut registry = Registry::builtin();
        register(&mut registry);
        for name in TYPES {
            let mut without = recorded[name].clone();
            without.as_object_mut().unwrap().remove("description");
            assert_eq!(registry.schema_view(&admin(), name, false).unwrap(), without, "{name}");
            assert_eq!(registry.schema_view(&admin(), name, true).unwrap(), recorded[name], "{name}");
        }
    }

    /// Heat's default rules: Flavor and Quota are admin-only, KeyPair and
    /// ServerGroup are anyone's.
    #[test]
    fn flavor_and_quota_are_admin_only() {
        let mut registry = Registry::builtin();
        register(&mut registry);
        let member = crate::caller::Caller {
            project_id: "p".into(),
            roles: vec!["member".into(), "reader".into()],
            ..Default::default()
        };
        for t in ["OS::Nova::Flavor", "OS::Nova::Quota"] {
            assert_eq!(registry.authorize_type(&member, t).unwrap_err().http_status(), 403, "{t}");
            assert!(registry.authorize_type(&admin(), t).is_ok());
        }
        for t in ["OS::Nova::KeyPair", "OS::Nova::ServerGroup"] {
            assert!(registry.authorize_type(&member, t).is_ok(), "{t}");
        }
    }

    #[test]
    fn the_types_need_keystone() {
        let registry = Registry::builtin();
        assert!(registry.get("OS::Nova::KeyPair").is_none());
    }

    #[test]
    fn errors_name_novaclients_class() {
        let f = failure(OsError::NotFound("Keypair k not found.".into()));
        assert_eq!(f, ResourceFailure::error("NotFound", "Keypair k not found. (HTTP 404)"));
        let f = failure(OsError::Unavailable("GET http://nova/v2.1: connection refused".into()));
        assert_eq!(f, ResourceFailure::error("ServiceUnavailable", "GET http://nova/v2.1: connection refused"));
        assert_eq!(ok_if_gone(Err(OsError::NotFound("gone".into()))), Ok(()));
        assert!(ok_if_gone(Err(OsError::Forbidden("no".into()))).is_err());
    }

    #[tokio::test]
    async fn negotiates_the_microversion_and_sends_it() {
        let (nova, session) = testing::nova("2.100").await;
        let c = compute(&session).await.unwrap();
        assert_eq!(c.version(), Microversion::new(2, 96));
        c.delete_server_group("g").await.unwrap_err();
        let seen = nova.seen();
        assert_eq!(seen.last().unwrap().version.as_deref(), Some("compute 2.96"));
    }

    #[tokio::test]
    async fn names_resolve_through_keystone() {
        let (nova, session) = testing::nova("2.96").await;
        nova.answer("GET /v3/projects/p-id", 200, json!({"project": {"id": "p-id", "name": "demo"}}));
        nova.answer("GET /v3/projects?name=demo", 200, json!({"projects": [{"id": "p-id", "name": "demo"}]}));
        nova.answer("GET /v3/domains/d1", 200, json!({"domain": {"id": "d1"}}));
        nova.answer("GET /v3/users?name=bob&domain_id=d1", 200, json!({"users": [{"id": "u-bob", "name": "bob"}]}));
        assert_eq!(keystone_id(&session, Entity::Project, "p-id").await.unwrap(), "p-id");
        assert_eq!(keystone_id(&session, Entity::Project, "demo").await.unwrap(), "p-id");
        assert_eq!(keystone_id(&session, Entity::User, "bob{d1}").await.unwrap(), "u-bob");
        let e = keystone_id(&session, Entity::Project, "nope").await.unwrap_err();
        assert_eq!(e, ResourceFailure::error("NotFound", "/v3/projects?name=nope not found (HTTP 404)"));
        nova.answer("GET /v3/projects?name=nope", 200, json!({"projects": []}));
        let e = keystone_id(&session, Entity::Project, "nope").await.unwrap_err();
        assert_eq!(e, ResourceFailure::error("EntityNotFound", "The KeystoneProject (nope) could not be found."));
    }

    /// Nova down: the action fails with the service's error.
    #[tokio::test]
    async fn a_nova_that_is_down_fails_with_its_error() {
        let (nova, session) = testing::nova("2.96").await;
        nova.answer("GET /compute/v2.1", 503, json!({"computeFault": {"message": "nova-api is restarting"}}));
        let e = compute(&session).await.err().unwrap();
        assert_eq!(e, ResourceFailure::error("ServiceUnavailable", "503 Service Unavailable: nova-api is restarting"));
    }
}
