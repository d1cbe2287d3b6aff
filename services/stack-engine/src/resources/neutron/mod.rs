//! Heat's core OS::Neutron::* types against Neutron's v2.0 API, through
//! keelson-openstack's [`Network`] client as the stack's user (the
//! stack's trust session).
//!
//! What they share, as Heat's `NeutronResource` has it: a create body is
//! the set properties (the `name` the physical name when unset) with
//! `value_specs` merged in; an update sends what changed, `value_specs`
//! keys whose value did not change left out; a Net, Subnet, Router or
//! Port create (and update) waits until Neutron shows it ACTIVE or DOWN;
//! a delete waits until Neutron answers 404 and is retried as Heat's
//! `Resource.delete` retries it (a 409, or the object still there). Names
//! or ids of other Neutron objects (`neutron.network`, `neutron.subnet`,
//! ...) resolve as neutronclient's `find_resourceid_by_name_or_id` when
//! the action runs. Attributes are read from Neutron (the object as
//! last seen when it cannot be asked). Errors are named by neutronclient's
//! exception class for the status.

mod dependencies;
mod floating_ip;
mod net;
mod port;
mod qos;
mod router;
mod security_group;
mod subnet;

use std::future::Future;
use std::sync::Arc;

use keelson_openstack::network::{Kind, Lookup, Network, SECURITY_GROUP, SEGMENT};
use keelson_openstack::{OsError, Session};
use serde_json::{Map, Value};

pub use floating_ip::{FloatingIp, FloatingIpAssociation};
pub use net::Net;
pub use port::Port;
pub use qos::{
    QosBandwidthLimitRule, QosDscpMarkingRule, QosMinimumBandwidthRule, QosMinimumPacketRateRule, QosPolicy,
};
pub use router::{Router, RouterInterface};
pub use security_group::{SecurityGroup, SecurityGroupRule};
pub use subnet::Subnet;

use keelson_pyfmt::truthy;

use super::client_errors::NEUTRONCLIENT;
use super::delete_retries::{with_delete_retries, Retryable};
use super::nova::{attribute_session, stack_session, STACK_DATA};
use super::{ActionContext, ActionResult, HostSlot, Properties, Registry, ResourceFailure, ResourceState};
use crate::error::EngineError;
use crate::service::is_uuid_like;
/// Resource data: Neutron's object as last seen.
const OBJECT_DATA: &str = "neutron_object";
/// Seconds between two looks at an object Neutron is still building.
const POLL_SECS: f64 = 1.0;

/// Adds the Neutron types to `registry`.
pub fn register(registry: &mut Registry) {
    let host = registry.host().clone();
    registry.register(Arc::new(FloatingIp::new(host.clone())));
    registry.register(Arc::new(FloatingIpAssociation::new(host.clone())));
    registry.register(Arc::new(Net::new(host.clone())));
    registry.register(Arc::new(Subnet::new(host.clone())));
    registry.register(Arc::new(Port::new(host.clone())));
    registry.register(Arc::new(Router::new(host.clone())));
    registry.register(Arc::new(RouterInterface::new(host.clone())));
    registry.register(Arc::new(SecurityGroup::new(host.clone())));
    registry.register(Arc::new(SecurityGroupRule::new(host.clone())));
    registry.register(Arc::new(QosPolicy::new(host.clone())));
    registry.register(Arc::new(QosBandwidthLimitRule::new(host.clone())));
    registry.register(Arc::new(QosDscpMarkingRule::new(host.clone())));
    registry.register(Arc::new(QosMinimumBandwidthRule::new(host.clone())));
    registry.register(Arc::new(QosMinimumPacketRateRule::new(host.clone())));
}

/// The failure a Neutron error becomes: neutronclient's exception class
/// for the status and Neutron's message.
pub(crate) fn failure(e: OsError) -> ResourceFailure {
    NEUTRONCLIENT.failure(e)
}

/// A Neutron error met while resolving an attribute.
pub(crate) fn attribute_error(e: OsError) -> EngineError {
    NEUTRONCLIENT.attribute_error(e)
}

/// A failure met while resolving an attribute.
fn failure_as_attribute_error(f: ResourceFailure) -> EngineError {
    let (heat_type, message) = match f {
        ResourceFailure::Error { type_name, message } => (type_name, message),
        other => ("NeutronClientException".to_string(), other.to_string()),
    };
    EngineError::Remote { heat_type, http_status: 500, message }
}

/// The network client of the stack's session.
async fn network(session: &Session) -> Result<Network<'_>, ResourceFailure> {
    Network::connect(session).await.map_err(failure)
}

/// neutronclient's `find_resourceid_by_name_or_id`, with its errors.
async fn find_id(network: &Network<'_>, kind: Kind, name_or_id: &str) -> Result<String, ResourceFailure> {
    lookup_result(kind, name_or_id, network.lookup(kind, name_or_id).await.map_err(failure)?)
}

/// [`find_id`], None when nothing has that name or id (for the callers
/// that ignore neutronclient's NotFound).
async fn find_id_if_any(
    network: &Network<'_>,
    kind: Kind,
    name_or_id: &str,
) -> Result<Option<String>, ResourceFailure> {
    match network.lookup(kind, name_or_id).await.map_err(failure)? {
        Lookup::NotFound => Ok(None),
        found => lookup_result(kind, name_or_id, found).map(Some),
    }
}

/// What neutronclient's lookup of `name_or_id` answers for what Neutron
/// found: the id, or the exception it raises (also the `neutron.*`
/// custom constraints' texts).
pub(crate) fn lookup_result(kind: Kind, name_or_id: &str, found: Lookup) -> Result<String, ResourceFailure> {
    match found {
        Lookup::Found(id) => Ok(id),
        Lookup::NotFound => Err(ResourceFailure::error(
            "NotFound",
            format!("Unable to find {} with name or id '{name_or_id}'", kind.key),
        )),
        Lookup::Ambiguous => Err(ResourceFailure::error(
            "NeutronClientNoUniqueMatch",
            format!("Multiple {} matches found for name '{name_or_id}', use an ID to be more specific.", kind.key),
        )),
    }
}

/// A string property, None when unset (Null); `""` is a value.
fn set_str<'a>(props: &'a Properties, name: &str) -> Option<&'a str> {
    props.get(name).and_then(Value::as_str)
}

/// Heat's REPLACE translation of deprecated (hidden) properties, applied
/// to the given properties before they are checked: each `(new, old)`
/// pair takes `old`'s value into `new`; both set is an error.
fn replace_deprecated(given: &Value, pairs: &[(&str, &str)]) -> Result<Value, EngineError> {
    replace_deprecated_under(given, "", pairs)
}

/// [`replace_deprecated`] in each map item of the list property `list`
/// (Heat's rule with a `value_name`, e.g. `fixed_ips.subnet_id`).
fn replace_deprecated_in_items(given: &Value, list: &str, pairs: &[(&str, &str)]) -> Result<Value, EngineError> {
    let Some(Value::Array(items)) = given.get(list) else { return Ok(given.clone()) };
    let prefix = format!("{list}.");
    let items = items.iter().map(|item| replace_deprecated_under(item, &prefix, pairs)).collect::<Result<_, _>>()?;
    let mut given = given.clone();
    if let Value::Object(map) = &mut given {
        map.insert(list.to_string(), Value::Array(items));
    }
    Ok(given)
}

/// The REPLACE translation in one map; `prefix` is the map's place in
/// the error text.
fn replace_deprecated_under(given: &Value, prefix: &str, pairs: &[(&str, &str)]) -> Result<Value, EngineError> {
    let Value::Object(map) = given else { return Ok(given.clone()) };
    let mut map = map.clone();
    for (new, old) in pairs {
        let Some(value) = map.remove(*old).filter(|v| !v.is_null()) else { continue };
        let current = map.get(*new).filter(|v| !v.is_null());
        if truthy(&value) && current.is_some_and(truthy) {
            return Err(EngineError::validation(format!(
                "Cannot define the following properties at the same time: {prefix}{new}, {prefix}{old}"
            )));
        }
        map.insert((*new).to_string(), value);
    }
    Ok(Value::Object(map))
}

/// Heat's `get_secgroup_uuids`: each UUID as it is, each name the one
/// group of that name in the session's project (none or several fail).
async fn security_group_ids(network: &Network<'_>, names_or_ids: &[Value]) -> Result<Vec<Value>, ResourceFailure> {
    let mut ids = Vec::with_capacity(names_or_ids.len());
    for given in names_or_ids {
        let name = keelson_pyfmt::str_of(given);
        if is_uuid_like(&name) {
            ids.push(Value::String(name));
            continue;
        }
        let access = network.session().access().await.map_err(failure)?;
        let found = match access.project_id.as_deref() {
            Some(project) => network.security_group_ids(project, &name).await,
            None => network.list(SECURITY_GROUP, &[("name", &name)]).await.map(|groups| {
                groups.iter().filter_map(|g| g.get("id").and_then(Value::as_str)).map(str::to_owned).collect()
            }),
        }
        .map_err(failure)?;
        match found.as_slice() {
            [one] => ids.push(Value::String(one.clone())),
            [] => {
                return Err(ResourceFailure::error(
                    "EntityNotFound",
                    format!("The Resource ({name}) could not be found."),
                ))
            }
            _ => {
                return Err(ResourceFailure::error(
                    "PhysicalResourceNameAmbiguity",
                    format!("Multiple physical resources were found with name ({name})."),
                ))
            }
        }
    }
    Ok(ids)
}

/// openstacksdk's `find_segment` (Heat's `neutron.segment` finder): the
/// id itself, else the one segment of that name.
async fn find_segment(network: &Network<'_>, name_or_id: &str) -> Result<String, ResourceFailure> {
    segment_result(name_or_id, segment_lookup(network, name_or_id).await?)
}

/// What openstacksdk's `find_segment` finds: the segment with that id,
/// else the ones with that name.
pub(crate) async fn segment_lookup(network: &Network<'_>, name_or_id: &str) -> Result<Lookup, ResourceFailure> {
    match network.show(SEGMENT, name_or_id).await {
        Ok(segment) => {
            return segment
                .get("id")
                .and_then(Value::as_str)
                .map(|id| Lookup::Found(id.to_owned()))
                .ok_or_else(|| failure(OsError::InvalidResponse("a segment without an id".into())))
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(failure(e)),
    }
    let found = network.list(SEGMENT, &[("name", name_or_id)]).await.map_err(failure)?;
    Ok(match found.as_slice() {
        [one] => Lookup::Found(one.get("id").and_then(Value::as_str).unwrap_or_default().to_string()),
        [] => Lookup::NotFound,
        _ => Lookup::Ambiguous,
    })
}

/// The segment's id, or openstacksdk's exception for what was found.
pub(crate) fn segment_result(name_or_id: &str, found: Lookup) -> Result<String, ResourceFailure> {
    match found {
        Lookup::Found(id) => Ok(id),
        Lookup::NotFound => {
            Err(ResourceFailure::error("ResourceNotFound", format!("No Segment found for {name_or_id}")))
        }
        Lookup::Ambiguous => Err(ResourceFailure::error(
            "DuplicateResource",
            format!("More than one Segment exists with the name '{name_or_id}'."),
        )),
    }
}

/// Heat's check that `value_specs` sets nothing a property (or `shared`,
/// `tenant_id`) does.
fn check_value_specs(props: &Properties) -> Result<(), EngineError> {
    let Some(specs) = props.get("value_specs").and_then(Value::as_object) else { return Ok(()) };
    let banned = ["shared", "tenant_id"].into_iter().chain(props.keys().map(String::as_str));
    let mut found: Vec<&str> = Vec::new();
    for key in banned {
        if specs.contains_key(key) && !found.contains(&key) {
            found.push(key);
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(EngineError::validation(format!("{} not allowed in value_specs", found.join(", "))))
    }
}

/// Heat's `prepare_properties`: the set properties, `name` defaulting to
/// `name`, `value_specs` merged over them.
fn create_fields(props: &Properties, name: String) -> Map<String, Value> {
    let mut fields: Map<String, Value> =
        props.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
    if props.contains_key("name") {
        fields.entry("name").or_insert(Value::String(name));
    }
    if let Some(Value::Object(specs)) = fields.remove("value_specs") {
        fields.extend(specs);
    }
    fields
}

/// Heat's `prop_diff`: the properties whose value changed, at their new
/// value (Null for one no longer set).
fn changed(old: &Properties, new: &Properties) -> Map<String, Value> {
    new.iter()
        .filter(|(k, v)| old.get(k.as_str()).unwrap_or(&Value::Null) != *v)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Heat's `prepare_update_properties`: `value_specs` merged without the
/// keys whose value is what it was; a `name` no longer set goes back to
/// the physical name.
fn update_fields(ctx: &mut ActionContext, old: &Properties, mut diff: Map<String, Value>) -> Map<String, Value> {
    if let Some(Value::Object(mut specs)) = diff.remove("value_specs") {
        if let Some(before) = old.get("value_specs").and_then(Value::as_object) {
            specs.retain(|k, v| before.get(k) != Some(v));
        }
        diff.extend(specs);
    }
    if diff.get("name").is_some_and(Value::is_null) {
        diff.insert("name".into(), Value::String(ctx.stable_physical_name()));
    }
    diff
}

/// Heat's `is_built`: BUILD is not yet, ACTIVE and DOWN are, ERROR and
/// DEGRADED fail, anything else is an unknown status.
fn built(object: &Map<String, Value>) -> Result<bool, ResourceFailure> {
    let status = object.get("status").and_then(Value::as_str).unwrap_or_default();
    match status {
        "BUILD" => Ok(false),
        "ACTIVE" | "DOWN" => Ok(true),
        "ERROR" | "DEGRADED" => {
            Err(ResourceFailure::error("ResourceInError", format!("Went to status {status} due to \"Unknown\"")))
        }
        other => Err(ResourceFailure::error(
            "ResourceUnknownStatus",
            format!("Resource is not built - Unknown status {other} due to \"Unknown\""),
        )),
    }
}

/// Waits until Neutron shows the object built (checks at once, then every
/// [`POLL_SECS`]); keeps what it showed.
async fn wait_built(
    ctx: &mut ActionContext,
    network: &Network<'_>,
    kind: Kind,
    id: &str,
) -> Result<(), ResourceFailure> {
    loop {
        let object = network.show(kind, id).await.map_err(failure)?;
        let done = built(&object)?;
        remember(ctx, object);
        if done {
            return Ok(());
        }
        ctx.sleep(POLL_SECS).await?;
    }
}

/// Keeps Neutron's object (attributes answer from it when Neutron cannot
/// be asked) and the stack whose session asks Neutron.
fn remember(ctx: &mut ActionContext, object: Map<String, Value>) {
    ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
    ctx.state.data.insert(OBJECT_DATA.into(), Value::Object(object).to_string());
}

/// One delete: the delete call, then (unless Neutron answered 404) a look
/// that must answer 404.
async fn delete_once(network: &Network<'_>, kind: Kind, id: &str) -> Result<Option<Retryable>, ResourceFailure> {
    match network.delete(kind, id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return NEUTRONCLIENT.retryable_conflict(e).map(Some),
    }
    match network.show(kind, id).await {
        Err(e) if e.is_not_found() => Ok(None),
        Ok(_) => Ok(Some(Retryable::StillThere)),
        Err(e) => NEUTRONCLIENT.retryable_conflict(e).map(Some),
    }
}

/// A delete call whose 404 is success and whose 409 Heat retries.
fn conflict_retryable(result: Result<(), OsError>) -> Result<Option<Retryable>, ResourceFailure> {
    NEUTRONCLIENT.conflict_retryable(result)
}

/// Deletes the object until Neutron no longer has it (Heat's
/// `check_delete_complete`), with Heat's retries.
async fn delete_until_gone(
    ctx: &mut ActionContext,
    network: &Network<'_>,
    kind: Kind,
    id: &str,
) -> Result<(), ResourceFailure> {
    with_delete_retries(ctx, || delete_once(network, kind, id)).await
}

/// What a Neutron type does with the stack's Neutron client. Its
/// `Plugin` hooks are [`create_in_stack`], [`update_in_stack`] and
/// [`delete_in_stack`], which open the stack's trust session and the
/// client for every type, then call these.
trait NeutronActions: Sync {
    fn host(&self) -> &HostSlot;

    fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> impl Future<Output = ActionResult> + Send;

    /// By default nothing changes in place.
    fn update_with(
        &self,
        _network: &Network<'_>,
        _ctx: &mut ActionContext,
        _old: &Properties,
    ) -> impl Future<Output = ActionResult> + Send {
        async { Ok(()) }
    }

    /// Deletes what physical id `id` names.
    fn delete_with(
        &self,
        network: &Network<'_>,
        ctx: &mut ActionContext,
        id: &str,
    ) -> impl Future<Output = ActionResult> + Send;

    /// The physical id a delete acts on; None: nothing to delete.
    fn deletable_id(&self, ctx: &ActionContext) -> Option<String> {
        ctx.state.physical_id.clone()
    }
}

/// `Plugin::create` of a Neutron type.
async fn create_in_stack<T: NeutronActions>(resource: &T, ctx: &mut ActionContext) -> ActionResult {
    let session = stack_session(resource.host(), &ctx.stack_id).await?;
    resource.create_with(&network(&session).await?, ctx).await
}

/// `Plugin::update` of a Neutron type.
async fn update_in_stack<T: NeutronActions>(resource: &T, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
    let session = stack_session(resource.host(), &ctx.stack_id).await?;
    resource.update_with(&network(&session).await?, ctx, old).await
}

/// `Plugin::delete` of a Neutron type: nothing to do without a
/// physical id.
async fn delete_in_stack<T: NeutronActions>(resource: &T, ctx: &mut ActionContext) -> ActionResult {
    let Some(id) = resource.deletable_id(ctx) else { return Ok(()) };
    let session = stack_session(resource.host(), &ctx.stack_id).await?;
    resource.delete_with(&network(&session).await?, ctx, &id).await
}

/// Heat's `NeutronResource.needs_replace_failed`: replaced when it has
/// no object, Neutron no longer has it, or shows it in ERROR.
async fn replace_failed(host: &HostSlot, ctx: &mut ActionContext, kind: Kind) -> Result<bool, ResourceFailure> {
    let Some(id) = ctx.state.physical_id.clone() else { return Ok(true) };
    let session = stack_session(host, &ctx.stack_id).await?;
    let network = network(&session).await?;
    match network.show(kind, &id).await {
        Ok(object) => Ok(object.get("status").is_some_and(|s| s == "ERROR")),
        Err(e) if e.is_not_found() => Ok(true),
        Err(e) => Err(failure(e)),
    }
}

/// Attribute `name` of the object: Neutron's current value (null once
/// Neutron no longer has it), or the last seen one when Neutron cannot be
/// asked (no stack trust recorded).
async fn object_attribute(
    host: &HostSlot,
    state: &ResourceState,
    kind: Kind,
    name: &str,
) -> Result<Value, EngineError> {
    let Some(id) = &state.physical_id else { return Ok(Value::Null) };
    if let Some(session) = attribute_session(host, state).await? {
        let network = Network::connect(&session).await.map_err(attribute_error)?;
        // Heat resolves attributes ignoring NotFound: a gone object has none.
        return match network.show(kind, id).await {
            Ok(object) => Ok(pick_attribute(Value::Object(object), name)),
            Err(e) if e.is_not_found() => Ok(Value::Null),
            Err(e) => Err(attribute_error(e)),
        };
    }
    let seen = state.data.get(OBJECT_DATA).and_then(|o| serde_json::from_str::<Value>(o).ok());
    Ok(seen.map(|o| pick_attribute(o, name)).unwrap_or(Value::Null))
}

/// Attribute `name` of an object Neutron showed; `show` is all of it.
fn pick_attribute(object: Value, name: &str) -> Value {
    if name == "show" {
        return object;
    }
    object.get(name).cloned().unwrap_or(Value::Null)
}

/// Replaces the object's tags (Heat's `set_tags`; no tags: none).
async fn set_tags(network: &Network<'_>, kind: Kind, id: &str, tags: &Value) -> Result<(), ResourceFailure> {
    let tags = tags.as_array().cloned().unwrap_or_default();
    network.replace_tags(kind, id, &tags).await.map_err(failure)
}

#[cfg(test)]
pub(crate) mod testing {
    //! A Keystone + Neutron stand-in on loopback: Keystone validates the
    //! token (its catalog names the stand-in as `network`), Neutron
    //! records every request and answers what the test registered.

    use std::collections::{BTreeMap, VecDeque};
    use std::sync::{Arc, Mutex};

    use axum::extract::{Request, State};
    use axum::response::IntoResponse;
    use keelson_openstack::{AuthMethod, HttpClient, Session};
    use serde_json::{json, Value};

    #[derive(Default)]
    pub struct Neutron {
        /// `"METHOD /path"` → the answers, in order (the last one
        /// repeats); unregistered: 404.
        pub answers: Mutex<BTreeMap<String, VecDeque<(u16, Value)>>>,
        /// (method, path with query, body)
        pub seen: Mutex<Vec<(String, String, Value)>>,
    }

    impl Neutron {
        pub fn answer(&self, key: &str, status: u16, body: Value) {
            self.answers.lock().unwrap().entry(key.to_string()).or_default().push_back((status, body));
        }
        pub fn calls(&self) -> Vec<(String, String, Value)> {
            self.seen.lock().unwrap().clone()
        }
    }

    async fn handle(State((neutron, base)): State<(Arc<Neutron>, String)>, req: Request) -> impl IntoResponse {
        let method = req.method().to_string();
        let path = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
        let bytes = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if path == "/v3/auth/tokens" {
            let token = json!({"token": {
                "user": {"id": "u1"}, "project": {"id": "p1"}, "expires_at": "2999-01-01T00:00:00Z",
                "catalog": [{"type": "network", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": format!("{base}/network")}]}]}});
            return (axum::http::StatusCode::OK, token.to_string());
        }
        neutron.seen.lock().unwrap().push((method.clone(), path.clone(), body));
        let key = format!("{method} {path}");
        let (status, body) = {
            let mut answers = neutron.answers.lock().unwrap();
            match answers.get_mut(&key) {
                Some(queue) if queue.len() > 1 => queue.pop_front().unwrap(),
                Some(queue) => queue.front().cloned().unwrap(),
                None => (
                    404,
                    json!({"NeutronError": {"type": "HTTPNotFound", "message": format!("{path} not found"), "detail": ""}}),
                ),
            }
        };
        (
            axum::http::StatusCode::from_u16(status).unwrap(),
            if body.is_null() { String::new() } else { body.to_string() },
        )
    }

    /// The stand-in and a session whose catalog points at it
    /// (`<base>/network`, so paths are `/network/v2.0/...`).
    pub async fn neutron() -> (Arc<Neutron>, Arc<Session>) {
        let neutron = Arc::new(Neutron::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(handle).with_state((neutron.clone(), base.clone()));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let session = Session::new(HttpClient::default(), &base, AuthMethod::Existing { token: "tok".into() });
        (neutron, Arc::new(session))
    }

    pub use super::super::nova::testing::bound;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Registry;
    use super::*;

    use crate::caller::test_admin as admin;

    const TYPES: &[&str] = &[
        "OS::Neutron::Net",
        "OS::Neutron::Subnet",
        "OS::Neutron::Port",
        "OS::Neutron::Router",
        "OS::Neutron::RouterInterface",
        "OS::Neutron::SecurityGroup",
        "OS::Neutron::SecurityGroupRule",
        "OS::Neutron::QoSPolicy",
        "OS::Neutron::QoSMinimumBandwidthRule",
        "OS::Neutron::QoSBandwidthLimitRule",
        "OS::Neutron::QoSDscpMarkingRule",
        "OS::Neutron::QoSMinimumPacketRateRule",
        "OS::Neutron::FloatingIP",
        "OS::Neutron::FloatingIPAssociation",
    ];

    /// The schema views equal what Heat 27.0.1's code answers
    /// (tests/reference/heat/record_schemas.py neutron).
    #[test]
    fn schema_views_equal_heats() {
        let recorded: Value = serde_json::from_str(include_str!("testdata/neutron_schemas.json")).unwrap();
        let mut registry = Registry::builtin();
        register(&mut registry);
        for name in TYPES {
            let mut without = recorded[name].clone();
            without.as_object_mut().unwrap().remove("description");
            assert_eq!(registry.schema_view(&admin(), name, false).unwrap(), without, "{name}");
            assert_eq!(registry.schema_view(&admin(), name, true).unwrap(), recorded[name], "{name}");
        }
    }

    #[test]
    fn the_types_need_keystone() {
        assert!(Registry::builtin().get("OS::Neutron::Net").is_none());
    }

    #[test]
    fn errors_name_neutronclients_class() {
        assert_eq!(
            failure(OsError::Conflict("Unable to complete operation on network n.".into())),
            ResourceFailure::error("Conflict", "Unable to complete operation on network n.")
        );
        assert_eq!(
            failure(OsError::Unexpected { status: 413, message: "too big".into() }),
            ResourceFailure::error("NeutronClientException", "too big")
        );
    }

    #[test]
    fn value_specs_merge_and_are_checked() {
        let props: Properties = json!({"name": null, "shared": false, "admin_state_up": true, "tags": null,
            "value_specs": {"provider:network_type": "vxlan"}})
        .as_object()
        .cloned()
        .unwrap();
        assert_eq!(
            Value::Object(create_fields(&props, "st-net-x".into())),
            json!({"name": "st-net-x", "shared": false, "admin_state_up": true, "provider:network_type": "vxlan"})
        );
        assert_eq!(check_value_specs(&props), Ok(()));
        let mut bad = props.clone();
        bad.insert("value_specs".into(), json!({"admin_state_up": false, "tenant_id": "t"}));
        assert_eq!(
            check_value_specs(&bad).unwrap_err().message(),
            "tenant_id, admin_state_up not allowed in value_specs"
        );
    }

    #[test]
    fn update_sends_what_changed() {
        let old: Properties =
            json!({"name": "a", "value_specs": {"k": 1, "j": 2}, "shared": false}).as_object().cloned().unwrap();
        let new: Properties =
            json!({"name": null, "value_specs": {"k": 1, "j": 3}, "shared": false}).as_object().cloned().unwrap();
        let (mut ctx, _tx) = super::super::context::test_context(new.clone());
        let fields = update_fields(&mut ctx, &old, changed(&old, &new));
        assert_eq!(fields["j"], json!(3));
        assert!(!fields.contains_key("k") && !fields.contains_key("shared"));
        assert!(fields["name"].as_str().unwrap().starts_with("st-r-"));
        assert_eq!(
            ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).map(String::as_str),
            fields["name"].as_str()
        );
    }

    #[test]
    fn built_statuses_as_heat() {
        let with = |s: &str| json!({"status": s}).as_object().cloned().unwrap();
        assert_eq!(built(&with("BUILD")), Ok(false));
        assert_eq!(built(&with("DOWN")), Ok(true));
        assert_eq!(
            built(&with("ERROR")),
            Err(ResourceFailure::error("ResourceInError", "Went to status ERROR due to \"Unknown\""))
        );
        assert_eq!(
            built(&with("WEIRD")),
            Err(ResourceFailure::error(
                "ResourceUnknownStatus",
                "Resource is not built - Unknown status WEIRD due to \"Unknown\""
            ))
        );
    }

    #[tokio::test]
    async fn names_resolve_as_neutronclient() {
        let (neutron, session) = testing::neutron().await;
        let uuid = "0d3b6c6e-6f55-4a0b-9b8e-1c2d3e4f5a6b";
        neutron.answer(
            &format!("GET /network/v2.0/networks?id={uuid}&fields=id"),
            200,
            json!({"networks": [{"id": uuid}]}),
        );
        neutron.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "n1"}]}));
        neutron.answer(
            "GET /network/v2.0/networks?name=twice&fields=id",
            200,
            json!({"networks": [{"id": "n1"}, {"id": "n2"}]}),
        );
        neutron.answer("GET /network/v2.0/networks?name=none&fields=id", 200, json!({"networks": []}));
        let net = network(&session).await.unwrap();
        let kind = keelson_openstack::network::NETWORK;
        assert_eq!(find_id(&net, kind, uuid).await.unwrap(), uuid);
        assert_eq!(find_id(&net, kind, "private").await.unwrap(), "n1");
        assert_eq!(
            find_id(&net, kind, "twice").await.unwrap_err(),
            ResourceFailure::error(
                "NeutronClientNoUniqueMatch",
                "Multiple network matches found for name 'twice', use an ID to be more specific."
            )
        );
        assert_eq!(
            find_id(&net, kind, "none").await.unwrap_err(),
            ResourceFailure::error("NotFound", "Unable to find network with name or id 'none'")
        );
    }

    #[tokio::test]
    async fn a_delete_waits_for_the_404() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("DELETE /network/v2.0/networks/n1", 204, Value::Null);
        let (mut ctx, _tx) = super::super::context::test_context(Properties::new());
        let net = network(&session).await.unwrap();
        delete_until_gone(&mut ctx, &net, keelson_openstack::network::NETWORK, "n1").await.unwrap();
        let calls: Vec<_> = neutron.calls().into_iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(calls, ["DELETE /network/v2.0/networks/n1", "GET /network/v2.0/networks/n1"]);
        // Gone already: done at once.
        delete_until_gone(&mut ctx, &net, keelson_openstack::network::NETWORK, "gone").await.unwrap();
        // Refused: the action fails with Neutron's text.
        neutron.answer(
            "DELETE /network/v2.0/networks/n2",
            403,
            json!({"NeutronError": {"type": "PolicyNotAuthorized", "message": "not allowed", "detail": ""}}),
        );
        let e = delete_until_gone(&mut ctx, &net, keelson_openstack::network::NETWORK, "n2").await.unwrap_err();
        assert_eq!(e, ResourceFailure::error("Forbidden", "not allowed"));
    }

    /// Neutron down: the action fails with the service's error.
    #[tokio::test]
    async fn a_neutron_that_is_down_fails_with_its_error() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            "GET /network/v2.0/networks/n1",
            503,
            json!({"NeutronError": {"type": "x", "message": "neutron-server is restarting", "detail": ""}}),
        );
        let net = network(&session).await.unwrap();
        let (mut ctx, _tx) = super::super::context::test_context(Properties::new());
        let e = wait_built(&mut ctx, &net, keelson_openstack::network::NETWORK, "n1").await.unwrap_err();
        assert_eq!(
            e,
            ResourceFailure::error("ServiceUnavailable", "503 Service Unavailable: neutron-server is restarting")
        );
    }
}
