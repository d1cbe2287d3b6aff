//! OS::Heat::SwiftSignalHandle and OS::Heat::SwiftSignal (upstream
//! `swiftsignal.py`).
//!
//! A handle is an object in the stack's container (named by the stack's
//! id, with `X-Versions-Location` on itself so that every PUT keeps the
//! one before it) and a temp URL that lets an instance PUT to it; its
//! endpoint is made once and kept, so an update leaves it as it was. A
//! signal reads every object of that container whose name holds the
//! handle's object name (the current one and its older versions) until
//! `count` SUCCESS signals are in, a FAILURE arrives, or `timeout`
//! passes; it gives its check slot back while it waits.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use keelson_openstack::object_store::{origin, temp_url_path, ObjectStore};
use keelson_pyfmt::{json_dumps, str_of, type_name};
use serde_json::{json, Map, Value};

use super::super::nova::{attribute_session, stack_session, STACK_DATA};
use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, RequiredService, ResourceFailure, ResourceState, SupportStatus,
};
use super::{failure, object_store};
use crate::error::EngineError;

/// The content of a handle's object until an instance signals
/// (`swift.IN_PROGRESS`).
const IN_PROGRESS: &str = "in progress";

/// Heat's `MAX_EPOCH - 60`, as `int(time.time() + int(MAX_EPOCH - 60 -
/// time.time()))` comes out within one second: the expiry of a handle's
/// temp URL.
const TEMP_URL_EXPIRES: i64 = 2_147_483_647 - 61;

/// Resource data: the handle's endpoint (its temp URL).
const ENDPOINT: &str = "endpoint";

/// Seconds between two looks at the handle's container (Heat checks
/// `check_create_complete` once a second).
const POLL_SECS: f64 = 1.0;

/// The most signal objects a handle's container may hold: whoever has the
/// temp URL writes them, and every poll reads them all. Twice Heat's
/// largest `count` (1,000), room for a signal sent again.
const MAX_SIGNAL_OBJECTS: usize = 2_000;

/// The most bytes those objects may hold together: what heat-api takes as
/// one signal's body (`max_json_body_size`'s default).
const MAX_SIGNAL_BYTES: usize = 1 << 20;

/// The failure of a handle whose writer went past one of those bounds
/// (Heat reads whatever is there).
fn too_many_signals(what: String) -> ResourceFailure {
    ResourceFailure::error("RequestLimitExceeded", format!("Request limit exceeded: {what}"))
}

fn value_error(message: String) -> ResourceFailure {
    ResourceFailure::error("ValueError", message)
}

/// OS::Heat::SwiftSignalHandle.
pub struct SwiftSignalHandle {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl SwiftSignalHandle {
    pub fn new(host: Arc<HostSlot>) -> Self {
        SwiftSignalHandle {
            host,
            schema: ResourceSchema {
                properties: vec![],
                attributes: vec![
                    AttributeSchema::new("token", "Tokens are not needed for Swift TempURLs. This attribute is being kept for compatibility with the OS::Heat::WaitConditionHandle resource.", Some("string")),
                    AttributeSchema::new("endpoint", "Endpoint/url which can be used for signalling handle.", Some("string")),
                    AttributeSchema::new("curl_cli", "Convenience attribute, provides curl CLI command prefix, which can be used for signalling handle completion or failure. You can signal success by adding --data-binary '{\"status\": \"SUCCESS\"}' , or signal failure by adding --data-binary '{\"status\": \"FAILURE\"}'.", Some("string")),
                ],
                support_status: SupportStatus::supported("2014.2"),
                description: "Resource for managing signals from Swift resources.\n\nThis resource is same as WaitConditionHandle, but designed for using by\nSwift resources.",
            },
        }
    }

    /// Heat's `get_signal_url`: the versioned container and the object,
    /// then a PUT temp URL for it (the account's key set when it has none).
    async fn create_with(&self, store: &ObjectStore<'_>, project_id: &str, ctx: &mut ActionContext) -> ActionResult {
        let container = ctx.stack_id.clone();
        let object = ctx.stable_physical_name();
        store.put_container(&container, &[("x-versions-location", container.as_str())]).await.map_err(failure)?;
        store.put_object(&container, &object, IN_PROGRESS.as_bytes()).await.map_err(failure)?;
        let key = store.temp_url_key(|| uuid::Uuid::new_v4().simple().to_string()).await.map_err(failure)?;
        let path = format!("/v1/AUTH_{project_id}/{container}/{object}");
        let url = format!("{}{}", origin(store.url()), temp_url_path(&path, TEMP_URL_EXPIRES, &key, "PUT"));
        ctx.state.data.insert(ENDPOINT.into(), url);
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        ctx.state.physical_id = Some(object);
        Ok(())
    }

    /// Heat's `handle_delete`: the object and each older version (a
    /// DELETE brings the previous one back) until Swift has none, then
    /// the container, unless another handle's objects are still in it.
    async fn delete_with(store: &ObjectStore<'_>, ctx: &ActionContext, object: &str) -> ActionResult {
        loop {
            match store.delete_object(&ctx.stack_id, object).await {
                Ok(()) if !ctx.is_cancelled() => {}
                Ok(()) => return Err(ResourceFailure::Cancelled),
                Err(e) if e.is_not_found() => break,
                Err(e) => return Err(failure(e)),
            }
        }
        match store.delete_container(&ctx.stack_id).await {
            Err(e) if !(e.is_not_found() || matches!(e, keelson_openstack::OsError::Conflict(_))) => Err(failure(e)),
            _ => Ok(()),
        }
    }
}

impl Plugin for SwiftSignalHandle {
    const TYPE: &'static str = "OS::Heat::SwiftSignalHandle";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::SWIFT)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let project_id = session.access().await.map_err(failure)?.project_id.clone().unwrap_or_default();
        let store = object_store(&session).await?;
        self.create_with(&store, &project_id, ctx).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        // Nothing was made before the object's name was.
        let Some(object) = ctx.state.data.get(super::super::PHYSICAL_NAME_DATA).cloned() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let store = object_store(&session).await?;
        Self::delete_with(&store, ctx, &object).await?;
        ctx.state.data.remove(ENDPOINT);
        Ok(())
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if state.physical_id.is_none() {
            return Ok(Value::Null);
        }
        let endpoint = state.data.get(ENDPOINT);
        Ok(match name {
            "token" => json!(""),
            "endpoint" => endpoint.map_or(Value::Null, |e| json!(e)),
            "curl_cli" => json!(format!("curl -i -X PUT '{}'", endpoint.map_or("None", String::as_str))),
            _ => return Err(super::super::invalid_attribute("", name)),
        })
    }

    /// `get_resource` gives the endpoint.
    fn reference_id(&self, state: &ResourceState) -> Value {
        state.data.get(ENDPOINT).map_or(Value::Null, |e| json!(e))
    }
}

/// OS::Heat::SwiftSignal.
pub struct SwiftSignal {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// The path of a URL (`urlparse(url).path`).
fn url_path(url: &str) -> &str {
    let rest = match url.find("://") {
        Some(i) => {
            let after = &url[i + 3..];
            match after.find('/') {
                Some(j) => &after[j..],
                None => "",
            }
        }
        None => url,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// Heat's `_validate_handle_url`: a temp URL path of `project_id`'s
/// account (Heat's `is_valid_temp_url_path`) in the stack's container;
/// answers the handle's object name.
pub fn handle_object<'u>(handle: &'u str, project_id: &str, stack_id: &str) -> Result<&'u str, ResourceFailure> {
    let path = url_path(handle);
    let invalid =
        |part: &str| value_error(format!("\"{path}\" is not a valid SwiftSignalHandle.  The {part} is invalid"));
    let parts: Vec<&str> = path.splitn(5, '/').collect();
    let valid = parts.len() == 5
        && parts[0].is_empty()
        && parts[1] == "v1"
        && parts[2].ends_with(project_id)
        && !parts[3].is_empty()
        && !parts[4].trim_matches('/').is_empty();
    if !valid {
        return Err(invalid("Swift TempURL path"));
    }
    let all: Vec<&str> = path.split('/').collect();
    if all[3] != stack_id {
        return Err(invalid("container name"));
    }
    Ok(all[4])
}

/// Heat's `get_signals` over the bodies of the handle's objects, in
/// listing order: the initial object skipped, an empty body an empty
/// signal, defaults filled in, and an earlier signal with the id a later
/// one names dropped (as Heat's loop drops it, skipping the one after
/// each it removes).
pub fn signals_of(bodies: &[String]) -> Result<Vec<Map<String, Value>>, ResourceFailure> {
    let mut signals: Vec<Map<String, Value>> = Vec::new();
    let mut number = 1;
    for body in bodies {
        if body == IN_PROGRESS {
            continue;
        }
        let parsed = if body.is_empty() {
            json!({})
        } else {
            serde_json::from_str::<Value>(body)
                .map_err(|_| ResourceFailure::error("Error", format!("Failed to parse JSON data: {body}")))?
        };
        let Value::Object(mut signal) = parsed else {
            return Err(ResourceFailure::error(
                "AttributeError",
                format!("'{}' object has no attribute 'setdefault'", type_name(&parsed)),
            ));
        };
        if let Some(id) = signal.get("id").cloned() {
            let mut i = 0;
            while i < signals.len() {
                if signals[i].get("id") == Some(&id) {
                    let removed = signals[i].clone();
                    if let Some(first) = signals.iter().position(|s| *s == removed) {
                        signals.remove(first);
                    }
                }
                i += 1;
            }
        }
        signal.entry("data").or_insert(Value::Null);
        let id = signal.entry("id").or_insert(json!(number)).clone();
        signal.entry("reason").or_insert_with(|| json!(format!("Signal {} received", str_of(&id))));
        signal.entry("status").or_insert(json!("SUCCESS"));
        signals.push(signal);
        number += 1;
    }
    Ok(signals)
}

fn status_of(signal: &Map<String, Value>) -> String {
    signal.get("status").map(str_of).unwrap_or_default()
}

/// The reasons of the signals with `status`, joined as Heat joins them.
fn reasons(signals: &[Map<String, Value>], status: &str) -> Vec<String> {
    signals
        .iter()
        .filter(|s| s.get("status").and_then(Value::as_str) == Some(status))
        .map(|s| s.get("reason").map(str_of).unwrap_or_default())
        .collect()
}

/// What a signal resource concludes from its handle's signals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Waiting,
    Done,
}

/// Heat's `check_create_complete` after its timeout check.
pub fn verdict(signals: &[Map<String, Value>], count: i64) -> Result<Verdict, ResourceFailure> {
    if signals.is_empty() {
        return Ok(Verdict::Waiting);
    }
    for signal in signals {
        match status_of(signal).as_str() {
            "FAILURE" => {
                return Err(ResourceFailure::error("SwiftSignalFailure", reasons(signals, "FAILURE").join(";")));
            }
            "SUCCESS" => {}
            other => return Err(ResourceFailure::error("Error", format!("Unknown status: {other}"))),
        }
    }
    Ok(if signals.len() as i64 >= count { Verdict::Done } else { Verdict::Waiting })
}

/// SwiftSignalTimeout's text: "N of M received[ - reasons]".
pub fn timeout_message(signals: &[Map<String, Value>], count: i64) -> String {
    let success = reasons(signals, "SUCCESS");
    if success.is_empty() {
        format!("0 of {count} received")
    } else {
        format!("{} of {count} received - {}", success.len(), success.join(";"))
    }
}

/// Heat's `get_data`: each signal's data by its id; None without signals.
pub fn data_of(signals: &[Map<String, Value>]) -> Value {
    if signals.is_empty() {
        return Value::Null;
    }
    let mut data = Map::new();
    for s in signals {
        let id = s.get("id").map(str_of).unwrap_or_default();
        data.insert(id, s.get("data").cloned().unwrap_or(Value::Null));
    }
    Value::Object(data)
}

/// A failure met while resolving `data`, as Heat raises it.
fn attribute_failure(f: ResourceFailure) -> EngineError {
    match f {
        ResourceFailure::Error { type_name, message } => {
            EngineError::Remote { heat_type: type_name, http_status: 500, message }
        }
        other => EngineError::internal(other.to_string()),
    }
}

impl SwiftSignal {
    pub fn new(host: Arc<HostSlot>) -> Self {
        SwiftSignal {
            host,
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("handle", T::String, "URL of TempURL where resource will signal completion and optionally upload data.").required(),
                    PropertySchema::new("timeout", T::Number, "The maximum number of seconds to wait for the resource to signal completion. Once the timeout is reached, creation of the signal resource will fail.")
                        .required()
                        .constraint(Constraint::range(Some(1), Some(43200))),
                    PropertySchema::new("count", T::Integer, "The number of success signals that must be received before the stack creation process continues.")
                        .default_value(1)
                        .constraint(Constraint::range(Some(1), Some(1000))),
                ],
                attributes: vec![AttributeSchema::new(
                    "data",
                    "JSON data that was uploaded via the SwiftSignalHandle.",
                    Some("string"),
                )],
                support_status: SupportStatus::supported("2014.2"),
                description: "Resource for handling signals received by SwiftSignalHandle.\n\nThis resource handles signals received by SwiftSignalHandle and\nis same as WaitCondition resource.",
            },
        }
    }

    /// Heat's `get_signals`: the bodies of the stack container's objects
    /// whose names hold `object` (none when the container is gone).
    async fn signals(
        store: &ObjectStore<'_>,
        container: &str,
        object: &str,
    ) -> Result<Vec<Map<String, Value>>, ResourceFailure> {
        let names = match store.list_objects(container).await {
            Ok(names) => names,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(failure(e)),
        };
        let names: Vec<&String> = names.iter().filter(|n| n.contains(object)).collect();
        if names.len() > MAX_SIGNAL_OBJECTS {
            return Err(too_many_signals(format!("{} signal objects, more than {MAX_SIGNAL_OBJECTS}.", names.len())));
        }
        let mut bodies = Vec::new();
        let mut total = 0;
        for name in names {
            match store.get_object(container, name).await {
                Ok(body) => {
                    total += body.len();
                    if total > MAX_SIGNAL_BYTES {
                        return Err(too_many_signals(format!("signals of more than {MAX_SIGNAL_BYTES} bytes.")));
                    }
                    bodies.push(String::from_utf8_lossy(&body).into_owned())
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(failure(e)),
            }
        }
        signals_of(&bodies)
    }

    async fn wait(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let project_id = session.access().await.map_err(failure)?.project_id.clone().unwrap_or_default();
        let handle = ctx.properties.get("handle").and_then(Value::as_str).unwrap_or_default().to_string();
        let object = handle_object(&handle, &project_id, &ctx.stack_id)?.to_string();
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        let started = Instant::now();
        let timeout = ctx.properties.get("timeout").and_then(Value::as_f64).unwrap_or(1.0);
        let count = ctx.properties.get("count").and_then(Value::as_i64).unwrap_or(1);
        // Validated to 1..43200; a conversion that cannot panic all the same.
        let limit = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        let store = object_store(&session).await?;
        // The signal comes from outside: do not hold a slot other stacks'
        // resources could use meanwhile.
        self.host.get().release_check_slot();
        loop {
            if started.elapsed() > limit {
                let signals = Self::signals(&store, &ctx.stack_id, &object).await?;
                return Err(ResourceFailure::error("SwiftSignalTimeout", timeout_message(&signals, count)));
            }
            let signals = Self::signals(&store, &ctx.stack_id, &object).await?;
            if verdict(&signals, count)? == Verdict::Done {
                return Ok(());
            }
            ctx.sleep(POLL_SECS).await?;
        }
    }
}

impl Plugin for SwiftSignal {
    const TYPE: &'static str = "OS::Heat::SwiftSignal";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::SWIFT)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.wait(ctx).await
    }

    /// `data`: `json.dumps` of the signals' data by id (`null` without).
    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name != "data" {
            return Err(super::super::invalid_attribute("", name));
        }
        let Some(container) = state.data.get(STACK_DATA) else { return Ok(Value::Null) };
        let handle = state.properties.get("handle").and_then(Value::as_str).unwrap_or_default();
        let Some(object) = url_path(handle).split('/').nth(4) else { return Ok(Value::Null) };
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let store = ObjectStore::connect(&session).await.map_err(super::attribute_error)?;
        let signals = Self::signals(&store, container, object).await.map_err(attribute_failure)?;
        Ok(json!(json_dumps(&data_of(&signals), false)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::nova::testing::bound;
    use super::super::super::{Properties, UpdateDecision};
    use super::super::testing::{put_to, swift, ACCOUNT};
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn signals_get_heats_defaults_and_ids() {
        let got =
            signals_of(&s(&[IN_PROGRESS, "", r#"{"status": "FAILURE", "reason": "boom", "data": "x"}"#])).unwrap();
        assert_eq!(
            got,
            [
                json!({"data": null, "id": 1, "reason": "Signal 1 received", "status": "SUCCESS"}),
                json!({"status": "FAILURE", "reason": "boom", "data": "x", "id": 2}),
            ]
            .iter()
            .map(|v| v.as_object().cloned().unwrap())
            .collect::<Vec<_>>()
        );
        // A later signal with an id drops the earlier one with that id.
        let got = signals_of(&s(&[r#"{"id": "a", "data": 1}"#, r#"{"id": "a", "data": 2}"#])).unwrap();
        assert_eq!(data_of(&got), json!({"a": 2}));
        assert_eq!(json_dumps(&data_of(&got), false), r#"{"a": 2}"#);
        assert_eq!(data_of(&[]), Value::Null);
        assert_eq!(
            signals_of(&s(&["{nope"])).unwrap_err(),
            ResourceFailure::error("Error", "Failed to parse JSON data: {nope")
        );
    }

    #[test]
    fn verdicts_and_texts_are_heats() {
        let sig = |v: &[&str]| signals_of(&s(v)).unwrap();
        assert_eq!(verdict(&sig(&[]), 1), Ok(Verdict::Waiting));
        assert_eq!(verdict(&sig(&[""]), 2), Ok(Verdict::Waiting));
        assert_eq!(verdict(&sig(&["", ""]), 2), Ok(Verdict::Done));
        assert_eq!(
            verdict(
                &sig(&["", r#"{"status": "FAILURE", "reason": "x"}"#, r#"{"status": "FAILURE", "reason": "y"}"#]),
                1
            ),
            Err(ResourceFailure::error("SwiftSignalFailure", "x;y"))
        );
        assert_eq!(
            verdict(&sig(&[r#"{"status": "MAYBE"}"#]), 1),
            Err(ResourceFailure::error("Error", "Unknown status: MAYBE"))
        );
        assert_eq!(timeout_message(&sig(&[]), 1), "0 of 1 received");
        assert_eq!(timeout_message(&sig(&["", ""]), 3), "2 of 3 received - Signal 1 received;Signal 2 received");
    }

    #[test]
    fn handle_urls_are_checked_as_heat_checks_them() {
        let url = "http://s:8080/v1/AUTH_p1/sid/st-h-abc?temp_url_sig=x&temp_url_expires=1";
        assert_eq!(handle_object(url, "p1", "sid"), Ok("st-h-abc"));
        assert_eq!(
            handle_object(url, "p1", "other"),
            Err(value_error(
                "\"/v1/AUTH_p1/sid/st-h-abc\" is not a valid SwiftSignalHandle.  The container name is invalid".into()
            ))
        );
        assert_eq!(
            handle_object("http://s/v2/AUTH_p1/sid/o", "p1", "sid"),
            Err(value_error(
                "\"/v2/AUTH_p1/sid/o\" is not a valid SwiftSignalHandle.  The Swift TempURL path is invalid".into()
            ))
        );
        assert!(handle_object("http://s/v1/AUTH_p2/sid/o", "p1", "sid").is_err());
        assert!(handle_object("http://s/v1/AUTH_p1/sid//", "p1", "sid").is_err());
    }

    /// The whole exchange against FakeSwift: the handle's temp URL takes
    /// an instance's PUTs, the signal reads them (older versions too),
    /// and the handle's delete leaves nothing behind.
    #[tokio::test]
    async fn a_handle_is_signalled_through_its_temp_url() {
        let (fake, session) = swift().await;
        let (slot, _host) = bound(Some(session));
        let handle = SwiftSignalHandle::new(slot.clone());
        let (mut hctx, _tx) = test_context(Properties::new());
        Plugin::create(&handle, &mut hctx).await.unwrap();
        let object = hctx.state.physical_id.clone().unwrap();
        assert!(object.starts_with("st-r-"), "{object}");
        let endpoint = Plugin::reference_id(&handle, &hctx.state);
        let endpoint = endpoint.as_str().unwrap().to_string();
        assert!(endpoint.contains(&format!("{ACCOUNT}/sid/{object}?temp_url_sig=")), "{endpoint}");
        assert!(endpoint.ends_with("&temp_url_expires=2147483586"), "{endpoint}");
        assert_eq!(fake.container("sid").unwrap().headers["x-versions-location"], "sid");
        assert_eq!(handle.attribute(&hctx.state, "token").await.unwrap(), json!(""));
        assert_eq!(
            handle.attribute(&hctx.state, "curl_cli").await.unwrap(),
            json!(format!("curl -i -X PUT '{endpoint}'"))
        );
        // The same template again: nothing to do, the endpoint stays.
        assert_eq!(Plugin::update_decision(&handle, &Properties::new(), &Properties::new()), UpdateDecision::Unchanged);
        // A wrong signature is refused; the right one is taken.
        assert_eq!(put_to(&endpoint.replace("temp_url_sig=", "temp_url_sig=0"), "{}").await, 401);
        assert_eq!(put_to(&endpoint, r#"{"data": "one"}"#).await, 201);
        assert_eq!(put_to(&endpoint, r#"{"data": "two", "reason": "fine"}"#).await, 201);

        let signal = SwiftSignal::new(slot.clone());
        let props =
            Plugin::validate_properties(&signal, "sig", &json!({"handle": endpoint, "timeout": 10, "count": 2}))
                .unwrap();
        let (mut sctx, _tx) = test_context(props.clone());
        Plugin::create(&signal, &mut sctx).await.unwrap();
        let mut state = sctx.state.clone();
        state.properties = props;
        assert_eq!(signal.attribute(&state, "data").await.unwrap(), json!(r#"{"1": "one", "2": "two"}"#));

        // A FAILURE fails the next signal resource with its reason.
        assert_eq!(put_to(&endpoint, r#"{"status": "FAILURE", "reason": "broken"}"#).await, 201);
        let (mut sctx, _tx) = test_context(state.properties.clone());
        assert_eq!(
            Plugin::create(&signal, &mut sctx).await,
            Err(ResourceFailure::error("SwiftSignalFailure", "broken"))
        );

        Plugin::delete(&handle, &mut hctx).await.unwrap();
        assert!(fake.container("sid").is_none(), "{:?}", fake.container("sid").map(|c| c.objects));
        assert_eq!(handle.attribute(&hctx.state, "endpoint").await.unwrap(), Value::Null);
    }

    /// Whoever holds the temp URL cannot make the engine read without
    /// bound: signals past MAX_SIGNAL_BYTES together fail the resource.
    #[tokio::test]
    async fn signals_past_the_bound_fail_the_resource() {
        let (_fake, session) = swift().await;
        let (slot, _host) = bound(Some(session));
        let handle = SwiftSignalHandle::new(slot.clone());
        let (mut hctx, _tx) = test_context(Properties::new());
        Plugin::create(&handle, &mut hctx).await.unwrap();
        let endpoint = Plugin::reference_id(&handle, &hctx.state);
        let big = format!(r#"{{"data": "{}"}}"#, "x".repeat(MAX_SIGNAL_BYTES / 2));
        assert_eq!(put_to(endpoint.as_str().unwrap(), &big).await, 201);
        assert_eq!(put_to(endpoint.as_str().unwrap(), &big).await, 201);
        let signal = SwiftSignal::new(slot);
        let props =
            Plugin::validate_properties(&signal, "sig", &json!({"handle": endpoint, "timeout": 10, "count": 3}))
                .unwrap();
        let (mut sctx, _tx) = test_context(props);
        assert_eq!(
            Plugin::create(&signal, &mut sctx).await,
            Err(ResourceFailure::error(
                "RequestLimitExceeded",
                format!("Request limit exceeded: signals of more than {MAX_SIGNAL_BYTES} bytes.")
            ))
        );
    }

    /// No signal within `timeout`: Heat's SwiftSignalTimeout text.
    #[tokio::test]
    async fn a_signal_times_out_as_heats() {
        let (_fake, session) = swift().await;
        let (slot, _host) = bound(Some(session));
        let handle = SwiftSignalHandle::new(slot.clone());
        let (mut hctx, _tx) = test_context(Properties::new());
        Plugin::create(&handle, &mut hctx).await.unwrap();
        let endpoint = Plugin::reference_id(&handle, &hctx.state);
        let signal = SwiftSignal::new(slot);
        let props = Plugin::validate_properties(&signal, "sig", &json!({"handle": endpoint, "timeout": 1})).unwrap();
        let (mut sctx, _tx) = test_context(props);
        assert_eq!(
            Plugin::create(&signal, &mut sctx).await,
            Err(ResourceFailure::error("SwiftSignalTimeout", "0 of 1 received"))
        );
    }
}
