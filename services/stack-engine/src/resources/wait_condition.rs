//! OS::Heat::WaitConditionHandle, OS::Heat::UpdateWaitConditionHandle and
//! OS::Heat::WaitCondition (upstream `wait_condition_handle.py`,
//! `wait_condition.py`).
//!
//! A handle keeps the signals it received in its metadata, keyed by the
//! signal's id (`{"1": {"data", "reason", "status"}}`); each signal is
//! merged under the row's compare-and-swap, so concurrent signals never
//! lose one another. A wait condition polls its handle's metadata until
//! `count` SUCCESS signals are in, any FAILURE arrives, or `timeout`
//! passes; it gives its check slot back while it waits.
//!
//! Transports: TOKEN_SIGNAL (`token` + `endpoint`, `curl_cli`),
//! HEAT_SIGNAL (the resource's signal endpoint, `signal` attribute) and
//! CFN_SIGNAL (a pre-signed URL that needs no token, `signal.alarm_url`;
//! the URL is what UpdateWaitConditionHandle's `get_resource` gives).
//! keelson has no Keystone users of its own: the TOKEN_SIGNAL token is a
//! random string, which a noauth gateway accepts; with Keystone, use
//! CFN_SIGNAL (see README).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::host::{HostSlot, PeerResource};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{
    ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState, SignalTarget, UpdateDecision,
};
use crate::error::EngineError;

pub const TRANSPORTS: [&str; 6] =
    ["CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "NO_SIGNAL", "ZAQAR_SIGNAL", "TOKEN_SIGNAL"];

/// The metadata keys of a handle's signals: OS::Heat's lower-case ones,
/// or the CloudFormation ones of the AWS-derived handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Heat,
    Cfn,
}

impl Flavor {
    /// (data, reason, status, id)
    fn keys(self) -> [&'static str; 4] {
        match self {
            Flavor::Heat => ["data", "reason", "status", "id"],
            Flavor::Cfn => ["Data", "Reason", "Status", "UniqueId"],
        }
    }

    /// The flavor of a handle type; None for anything that is not a handle.
    pub fn of_type(type_name: &str) -> Option<Flavor> {
        match type_name {
            WaitConditionHandle::HEAT_TYPE => Some(Flavor::Heat),
            WaitConditionHandle::UPDATE_TYPE | WaitConditionHandle::AWS_TYPE => Some(Flavor::Cfn),
            _ => None,
        }
    }
}

fn value_error(message: impl Into<String>) -> ResourceFailure {
    ResourceFailure::error("ValueError", message)
}

/// Python's `str()` of a signal id.
fn id_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".to_string(),
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        other => other.to_string(),
    }
}

/// Upstream `handle_signal`'s merge: the signal `details` (defaults
/// filled in for the Heat flavor), checked, added to `current` under its
/// id. Answers the new metadata and the event text.
pub fn merge_signal(flavor: Flavor, current: &Value, details: &Value) -> Result<(Value, String), ResourceFailure> {
    let [data_k, reason_k, status_k, id_k] = flavor.keys();
    let latest: Map<String, Value> = match current {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut signal: Map<String, Value> = match details {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err(value_error("Metadata format invalid")),
    };
    if flavor == Flavor::Heat {
        // Tolerate missing values, default to success.
        let n = latest.len() + 1;
        signal.entry(reason_k).or_insert_with(|| json!(format!("Signal {n} received")));
        signal.entry(data_k).or_insert(Value::Null);
        signal.entry(id_k).or_insert_with(|| json!(n));
        signal.entry(status_k).or_insert_with(|| json!("SUCCESS"));
    }
    let keys_ok = signal.len() == 4 && flavor.keys().iter().all(|k| signal.contains_key(*k));
    let status = signal.get(status_k).and_then(Value::as_str).unwrap_or_default().to_string();
    if !keys_ok || !(status == "SUCCESS" || status == "FAILURE") {
        return Err(value_error("Metadata format invalid"));
    }
    let id = signal.get(id_k).map(id_text).unwrap_or_default();
    let reason = signal.get(reason_k).cloned().unwrap_or(Value::Null);
    let mut entry = Map::new();
    entry.insert(data_k.to_string(), signal.get(data_k).cloned().unwrap_or(Value::Null));
    entry.insert(reason_k.to_string(), reason.clone());
    entry.insert(status_k.to_string(), json!(status));
    let mut merged = latest;
    merged.insert(id, Value::Object(entry));
    let reason_text = match &reason {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok((Value::Object(merged), format!("status:{status} reason:{reason_text}")))
}

/// (status, reason) of each signal in a handle's metadata.
pub fn signal_statuses(flavor: Flavor, metadata: &Value) -> Vec<(String, String)> {
    let [_, reason_k, status_k, _] = flavor.keys();
    let Value::Object(m) = metadata else { return Vec::new() };
    m.values()
        .map(|v| {
            let status = v.get(status_k).and_then(Value::as_str).unwrap_or_default().to_string();
            let reason = match v.get(reason_k) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => "None".to_string(),
                Some(other) => other.to_string(),
            };
            (status, reason)
        })
        .collect()
}

/// What a wait condition concludes from its handle's signals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Waiting,
    Done,
    /// WaitConditionFailure with the joined FAILURE reasons.
    Failed(String),
}

pub fn verdict(statuses: &[(String, String)], count: i64) -> Verdict {
    if statuses.iter().any(|(s, _)| s != "SUCCESS") {
        let reasons: Vec<&str> = statuses.iter().filter(|(s, _)| s == "FAILURE").map(|(_, r)| r.as_str()).collect();
        return Verdict::Failed(reasons.join(";"));
    }
    if statuses.len() as i64 >= count {
        Verdict::Done
    } else {
        Verdict::Waiting
    }
}

/// WaitConditionTimeout's text: "N of M received[ - reasons]".
pub fn timeout_message(statuses: &[(String, String)], count: i64) -> String {
    let reasons: Vec<&str> = statuses.iter().filter(|(s, _)| s == "SUCCESS").map(|(_, r)| r.as_str()).collect();
    if reasons.is_empty() {
        format!("{} of {count} received", reasons.len())
    } else {
        format!("{} of {count} received - {}", reasons.len(), reasons.join(";"))
    }
}

/// OS::Heat::WaitConditionHandle and OS::Heat::UpdateWaitConditionHandle.
pub struct WaitConditionHandle {
    /// Heat's handle (lower-case signal keys) or the AWS-derived ones.
    flavor: Flavor,
    type_name: &'static str,
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

impl WaitConditionHandle {
    pub const HEAT_TYPE: &'static str = "OS::Heat::WaitConditionHandle";
    pub const UPDATE_TYPE: &'static str = "OS::Heat::UpdateWaitConditionHandle";
    pub const AWS_TYPE: &'static str = "AWS::CloudFormation::WaitConditionHandle";

    /// AWS::CloudFormation::WaitConditionHandle: referenced by its
    /// pre-signed URL, which `cfn-signal` PUTs CloudFormation-style signals
    /// to.
    pub fn aws(host: Arc<HostSlot>) -> Self {
        let mut handle = Self::update_handle(host);
        handle.type_name = Self::AWS_TYPE;
        handle.schema.description = "AWS WaitConditionHandle resource.\n\nthe main point of this class is to :\nhave no dependencies (so the instance can reference it)\ngenerate a unique url (to be returned in the reference)\nthen the cfn-signal will use this url to post to and\nWaitCondition will poll it to see if has been written to.";
        handle
    }

    /// OS::Heat::WaitConditionHandle.
    pub fn heat(host: Arc<HostSlot>) -> Self {
        WaitConditionHandle {
            flavor: Flavor::Heat,
            type_name: Self::HEAT_TYPE,
            schema: ResourceSchema {
                properties: vec![PropertySchema::new(
                    "signal_transport",
                    T::String,
                    "How the client will signal the wait condition. CFN_SIGNAL will allow an HTTP POST to a CFN keypair signed URL. TEMP_URL_SIGNAL will create a Swift TempURL to be signalled via HTTP PUT. HEAT_SIGNAL will allow calls to the Heat API resource-signal using the provided keystone credentials. ZAQAR_SIGNAL will create a dedicated zaqar queue to be signalled using the provided keystone credentials. TOKEN_SIGNAL will allow and HTTP POST to a Heat API endpoint with the provided keystone token. NO_SIGNAL will result in the resource going to a signalled state without waiting for any signal.",
                )
                .default_value("TOKEN_SIGNAL")
                .constraint(Constraint::allowed_values(TRANSPORTS))],
                attributes: vec![
                    AttributeSchema::new("token", "Token for stack-user which can be used for signalling handle when signal_transport is set to TOKEN_SIGNAL. None for all other signal transports.", Some("String")),
                    AttributeSchema::new("endpoint", "Endpoint/url which can be used for signalling handle when signal_transport is set to TOKEN_SIGNAL. None for all other signal transports.", Some("String")),
                    AttributeSchema::new("curl_cli", "Convenience attribute, provides curl CLI command prefix, which can be used for signalling handle completion or failure when signal_transport is set to TOKEN_SIGNAL. You can signal success by adding --data-binary '{\"status\": \"SUCCESS\"}' , or signal failure by adding --data-binary '{\"status\": \"FAILURE\"}'. This attribute is set to None for all other signal transports.", Some("String")),
                    AttributeSchema::new("signal", "JSON serialized map that includes the endpoint, token and/or other attributes the client must use for signalling this handle. The contents of this map depend on the type of signal selected in the signal_transport property.", Some("String")),
                ],
                support_status: SupportStatus::supported("2014.2"),
                description: "Resource for managing instance signals.\n\nThe main points of this resource are:\n  - have no dependencies (so the instance can reference it).\n  - create credentials to allow for signalling from the instance.\n  - handle signals from the instance, validate and store result.",
            },
            host,
        }
    }

    /// OS::Heat::UpdateWaitConditionHandle: signalled through its
    /// pre-signed URL (its `get_resource`), replaced by every update.
    pub fn update_handle(host: Arc<HostSlot>) -> Self {
        WaitConditionHandle {
            flavor: Flavor::Cfn,
            type_name: Self::UPDATE_TYPE,
            schema: ResourceSchema {
                properties: vec![],
                attributes: vec![],
                support_status: SupportStatus::supported("2014.1"),
                description: "WaitConditionHandle that clears signals and changes handle on update.\n\nThis works identically to a regular WaitConditionHandle, except that\non update it clears all signals received and changes the handle. Using\nthis handle means that you must setup the signal senders to send their\nsignals again any time the update handle changes. This allows us to roll\nout new configurations and be confident that they are rolled out once\nUPDATE COMPLETE is reached.",
            },
            host,
        }
    }

    fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The AWS-derived handles: signalled through their pre-signed URL,
    /// which is their reference.
    fn is_cfn_handle(&self) -> bool {
        self.flavor == Flavor::Cfn
    }

    fn transport(&self, props: &Properties) -> String {
        if self.is_cfn_handle() {
            return "CFN_SIGNAL".to_string();
        }
        props.get("signal_transport").and_then(Value::as_str).unwrap_or("TOKEN_SIGNAL").to_string()
    }

    async fn create_handle(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let transport = self.transport(&ctx.properties);
        if transport == "TEMP_URL_SIGNAL" || transport == "ZAQAR_SIGNAL" {
            let service = if transport == "TEMP_URL_SIGNAL" { "object-store" } else { "messaging" };
            return Err(ResourceFailure::error(
                "EndpointNotFound",
                format!("{transport} needs the {service} service, which is not in this cloud's catalog."),
            ));
        }
        let host = self.host.get();
        let urls = host.signal_urls(&ctx.stack_id, &ctx.resource_name).await?;
        if let Some(identity) = &urls.identity {
            return self.create_stack_user_handle(ctx, &transport, identity, &urls).await;
        }
        // No Keystone (noauth): upstream's physical id is the stack user it
        // creates; a fresh id stands in for it, and the engine signs URLs.
        ctx.state.physical_id = Some(uuid::Uuid::new_v4().simple().to_string());
        let data = &mut ctx.state.data;
        data.insert("transport".into(), transport.clone());
        match transport.as_str() {
            "TOKEN_SIGNAL" => {
                data.insert("token".into(), format!("kst-{}", uuid::Uuid::new_v4().simple()));
                data.insert("endpoint".into(), format!("{}/signal", urls.resource_url));
            }
            "HEAT_SIGNAL" => {
                data.insert("endpoint".into(), format!("{}/signal", urls.resource_url));
                data.insert("password".into(), uuid::Uuid::new_v4().simple().to_string());
                data.insert("project_id".into(), urls.tenant.clone());
                data.insert("region_name".into(), urls.region_name.clone());
            }
            "CFN_SIGNAL" => {
                data.insert("alarm_url".into(), urls.waitcondition_url.clone());
            }
            _ => {}
        }
        data.insert("stack_id".into(), ctx.stack_id.clone());
        Ok(())
    }

    /// Heat's `HeatWaitConditionHandle.handle_create` with Keystone: the
    /// handle's stack user (its id is the physical id) for every
    /// transport, then what the transport needs: a token of that user
    /// (TOKEN_SIGNAL), its password (HEAT_SIGNAL) or an EC2 keypair and a
    /// URL signed with it (CFN_SIGNAL, heat-api-cfn's `/waitcondition`).
    async fn create_stack_user_handle(
        &self,
        ctx: &mut ActionContext,
        transport: &str,
        identity: &super::host::IdentityUrls,
        urls: &super::host::SignalUrls,
    ) -> Result<(), ResourceFailure> {
        let host = self.host.get();
        let password = crate::identity::random_password();
        let username = ctx.physical_name();
        let user = host.create_stack_user(&ctx.stack_id, &username, &password).await?;
        ctx.state.physical_id = Some(user.user_id.clone());
        let data = &mut ctx.state.data;
        data.insert("transport".into(), transport.to_string());
        data.insert("stack_id".into(), ctx.stack_id.clone());
        data.insert("user_id".into(), user.user_id.clone());
        data.insert("username".into(), username);
        data.insert("password".into(), host.seal(&password)?);
        data.insert("project_id".into(), user.project_id.clone());
        data.insert("auth_url".into(), identity.auth_url.clone());
        data.insert("domain_id".into(), identity.stack_domain_id.clone());
        data.insert("region_name".into(), urls.region_name.clone());
        let endpoint = format!("{}/signal", identity.resource_url);
        match transport {
            "TOKEN_SIGNAL" => {
                let token = host.stack_user_token(&user, &password).await?;
                data.insert("token".into(), host.seal(&token)?);
                data.insert("endpoint".into(), endpoint);
            }
            "HEAT_SIGNAL" => {
                data.insert("endpoint".into(), endpoint);
            }
            "CFN_SIGNAL" => {
                let keypair = host.create_keypair(&user).await?;
                let timestamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
                let url = keelson_openstack::ec2::presigned_url(
                    &identity.ec2_base(false),
                    "PUT",
                    &identity.arn,
                    &keypair.access,
                    &keypair.secret,
                    Some(&timestamp),
                );
                data.insert("credential_id".into(), keypair.id);
                data.insert("access_key".into(), host.seal(&keypair.access)?);
                data.insert("secret_key".into(), host.seal(&keypair.secret)?);
                data.insert("alarm_url".into(), url);
            }
            _ => {}
        }
        Ok(())
    }

    /// Heat's `StackUser._delete_user` (the keypair first).
    async fn delete_stack_user(&self, state: &ResourceState) -> Result<(), ResourceFailure> {
        let (Some(user_id), Some(project_id)) = (state.data.get("user_id"), state.data.get("project_id")) else {
            return Ok(());
        };
        let host = self.host.get();
        if let Some(credential) = state.data.get("credential_id") {
            host.delete_keypair(credential).await?;
        }
        let user = super::host::StackUser { user_id: user_id.clone(), project_id: project_id.clone() };
        host.delete_stack_user(&user).await
    }

    /// A secret of the stored transport data, decrypted.
    fn secret(&self, state: &ResourceState, key: &str) -> Value {
        match state.data.get(key) {
            Some(sealed) => self.host.get().open(sealed).map(Value::String).unwrap_or(Value::Null),
            None => Value::Null,
        }
    }

    /// The `signal` attribute's map for the stored transport data.
    fn signal_doc(&self, state: &ResourceState) -> Value {
        let d = &state.data;
        let get = |k: &str| d.get(k).cloned().map(Value::String).unwrap_or(Value::Null);
        if d.contains_key("user_id") {
            // Heat's `_get_signal` with a stack user.
            return match d.get("transport").map(String::as_str) {
                Some("CFN_SIGNAL") => json!({"alarm_url": get("alarm_url")}),
                Some("HEAT_SIGNAL") => json!({
                    "auth_url": get("auth_url"),
                    "username": get("username"),
                    "user_id": get("user_id"),
                    "password": self.secret(state, "password"),
                    "project_id": get("project_id"),
                    "domain_id": get("domain_id"),
                    "region_name": get("region_name"),
                    "alarm_url": get("endpoint"),
                }),
                Some("NO_SIGNAL") => json!({}),
                _ => Value::Null,
            };
        }
        match d.get("transport").map(String::as_str) {
            Some("CFN_SIGNAL") => json!({"alarm_url": get("alarm_url")}),
            Some("HEAT_SIGNAL") => json!({
                "auth_url": Value::Null,
                "user_id": state.physical_id,
                "password": get("password"),
                "project_id": get("project_id"),
                "stack_id": get("stack_id"),
                "resource_name": Value::Null,
                "endpoint": get("endpoint"),
                "region_name": get("region_name"),
            }),
            Some("TOKEN_SIGNAL") => json!({"token": get("token"), "endpoint": get("endpoint")}),
            _ => json!({}),
        }
    }
}

impl Plugin for WaitConditionHandle {
    const TYPE: &'static str = Self::HEAT_TYPE;

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        if self.type_name == Self::UPDATE_TYPE {
            // Every update gives a fresh handle (and URL), clearing signals.
            return UpdateDecision::Replace;
        }
        super::default_update_decision(&self.schema, old, new)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.create_handle(ctx).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        self.delete_stack_user(&ctx.state).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if state.physical_id.is_none() {
            return Ok(Value::Null);
        }
        let get = |k: &str| state.data.get(k).cloned().map(Value::String).unwrap_or(Value::Null);
        let token_transport = state.data.get("transport").map(String::as_str) == Some("TOKEN_SIGNAL");
        let token = match self.secret(state, "token") {
            Value::String(t) => Some(t),
            _ => None,
        };
        Ok(match name {
                "token" if token_transport => token.map(Value::String).unwrap_or(Value::Null),
                "endpoint" if token_transport => get("endpoint"),
                "curl_cli" if token_transport => match (token, state.data.get("endpoint")) {
                    (Some(token), Some(endpoint)) => json!(format!(
                        "curl -i -X POST -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' -H 'Accept: application/json' {endpoint}"
                    )),
                    _ => Value::Null,
                },
                "signal" => json!(self.signal_doc(state).to_string()),
                "token" | "endpoint" | "curl_cli" => Value::Null,
                _ => return Err(super::invalid_attribute("", name)),
            })
    }

    /// UpdateWaitConditionHandle (an AWS-style handle) is referenced by
    /// its pre-signed URL.
    fn reference_id(&self, state: &ResourceState) -> Value {
        if self.is_cfn_handle() {
            if let Some(url) = state.data.get("alarm_url") {
                return json!(url);
            }
        }
        state.physical_id.clone().map(Value::String).unwrap_or(Value::Null)
    }

    fn handles_signal(&self) -> bool {
        true
    }

    async fn handle_signal(&self, target: &SignalTarget, details: &Value) -> Result<Option<String>, ResourceFailure> {
        let flavor = self.flavor();
        let mut reason = String::new();
        let merge = Box::new(|current: &Value| {
            let (merged, text) = merge_signal(flavor, current, details)?;
            reason = text;
            Ok(merged)
        });
        self.host.get().merge_metadata(target.resource_id, merge).await?;
        Ok(Some(reason))
    }
}

/// OS::Heat::WaitCondition and AWS::CloudFormation::WaitCondition.
pub struct WaitCondition {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
    /// The AWS type: CloudFormation's property and attribute names.
    aws: bool,
}

/// Polling bounds while waiting for signals on another engine's API call.
const POLL_FIRST: Duration = Duration::from_millis(100);
const POLL_MAX: Duration = Duration::from_secs(1);

impl WaitCondition {
    pub fn new(host: Arc<HostSlot>) -> Self {
        WaitCondition {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("handle", T::String, "A reference to the wait condition handle used to signal this wait condition.").required(),
                    PropertySchema::new("timeout", T::Number, "The number of seconds to wait for the correct number of signals to arrive.")
                        .required()
                        .constraint(Constraint::range(Some(1), Some(43200))),
                    PropertySchema::new("count", T::Integer, "The number of success signals that must be received before the stack creation process continues.")
                        .default_value(1)
                        .update_allowed()
                        .constraint(Constraint::range(Some(1), None)),
                ],
                attributes: vec![AttributeSchema::new(
                    "data",
                    "JSON string containing data associated with wait condition signals sent to the handle.",
                    Some("String"),
                )],
                support_status: SupportStatus::supported("2014.2"),
                description: "Resource for handling signals received by WaitConditionHandle.\n\nResource takes WaitConditionHandle and starts to create. Resource is in\nCREATE_IN_PROGRESS status until WaitConditionHandle doesn't receive\nsufficient number of successful signals (this number can be specified with\ncount property) and successfully creates after that, or fails due to\ntimeout.",
            },
            host,
            aws: false,
        }
    }

    /// AWS::CloudFormation::WaitCondition: `Handle` (the handle's URL),
    /// `Timeout`, `Count`; attribute `Data`.
    pub fn aws(host: Arc<HostSlot>) -> Self {
        let mut wc = Self::new(host);
        wc.aws = true;
        wc.schema.support_status = SupportStatus::supported("2014.1");
        let names = ["Handle", "Timeout", "Count"];
        for (p, name) in wc.schema.properties.iter_mut().zip(names) {
            p.name = name;
        }
        // CloudFormation's Timeout is an integer.
        if let Some(p) = wc.schema.properties.get_mut(1) {
            p.kind = T::Integer;
        }
        if let Some(a) = wc.schema.attributes.get_mut(0) {
            a.name = "Data";
        }
        wc
    }

    /// The names of the `handle`, `timeout` and `count` properties.
    fn keys(&self) -> [&'static str; 3] {
        if self.aws {
            ["Handle", "Timeout", "Count"]
        } else {
            ["handle", "timeout", "count"]
        }
    }

    async fn handle_of(&self, stack_id: &str, props: &Properties) -> Result<(PeerResource, Flavor), ResourceFailure> {
        let refid = props.get(self.keys()[0]).and_then(Value::as_str).unwrap_or_default();
        let peer = self.host.get().resource_by_refid(stack_id, refid).await?;
        match peer {
            Some(p) => match Flavor::of_type(&p.resource_type) {
                Some(flavor) => Ok((p, flavor)),
                None => Err(value_error(format!("{} is not a valid wait condition handle.", p.name))),
            },
            None => Err(value_error(format!("{refid} is not a valid wait condition handle."))),
        }
    }

    /// Upstream `_wait`: until enough SUCCESS signals, a FAILURE, or the
    /// timeout.
    async fn wait(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let (handle, flavor) = self.handle_of(&ctx.stack_id, &ctx.properties).await?;
        ctx.state.data.insert("handle_id".into(), handle.id.to_string());
        ctx.state.data.insert("handle_flavor".into(), if flavor == Flavor::Cfn { "cfn" } else { "heat" }.into());
        let [_, timeout_key, count_key] = self.keys();
        let timeout = ctx.properties.get(timeout_key).and_then(Value::as_f64).unwrap_or(1.0);
        let count = ctx.properties.get(count_key).and_then(Value::as_i64).unwrap_or(1);
        let started = Instant::now();
        // Validated to 1..43200; a conversion that cannot panic all the same.
        let limit = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        let host = self.host.get();
        // The signal comes from outside: do not hold a slot other
        // stacks' resources could use meanwhile.
        host.release_check_slot();
        let mut pause = POLL_FIRST;
        loop {
            let metadata = host.resource_metadata(handle.id).await?;
            let statuses = signal_statuses(flavor, &metadata);
            if started.elapsed() >= limit {
                return Err(ResourceFailure::error("WaitConditionTimeout", timeout_message(&statuses, count)));
            }
            match verdict(&statuses, count) {
                Verdict::Done => return Ok(()),
                Verdict::Failed(reasons) => return Err(ResourceFailure::error("WaitConditionFailure", reasons)),
                Verdict::Waiting => {}
            }
            let remaining = limit.saturating_sub(started.elapsed());
            ctx.sleep(pause.min(remaining).max(Duration::from_millis(10)).as_secs_f64()).await?;
            pause = (pause * 2).min(POLL_MAX);
        }
    }
}

impl Plugin for WaitCondition {
    const TYPE: &'static str = "OS::Heat::WaitCondition";

    fn type_name(&self) -> &'static str {
        if self.aws {
            "AWS::CloudFormation::WaitCondition"
        } else {
            Self::TYPE
        }
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.wait(ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, _old: &Properties) -> ActionResult {
        self.wait(ctx).await
    }

    /// Clears the handle's signals (upstream), when the handle is still
    /// there; a handle that is gone or busy does not block the delete.
    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.data.get("handle_id").and_then(|v| v.parse::<i64>().ok()) else {
            return Ok(());
        };
        let clear = Box::new(|_: &Value| Ok(json!({})));
        if let Err(e) = self.host.get().merge_metadata(id, clear).await {
            tracing::info!(error = %e, resource = ctx.resource_name, "wait condition handle not cleared");
        }
        Ok(())
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name != self.schema.attributes.first().map_or("data", |a| a.name) {
            return Err(super::invalid_attribute("", name));
        }
        let Some(id) = state.data.get("handle_id").and_then(|v| v.parse::<i64>().ok()) else {
            return Ok(Value::Null);
        };
        let flavor =
            if state.data.get("handle_flavor").map(String::as_str) == Some("cfn") { Flavor::Cfn } else { Flavor::Heat };
        let metadata = self.host.get().resource_metadata(id).await.map_err(|e| EngineError::internal(e.to_string()))?;
        let data_k = flavor.keys()[0];
        let mut out = Map::new();
        if let Value::Object(m) = metadata {
            for (k, v) in m {
                out.insert(k, v.get(data_k).cloned().unwrap_or(Value::Null));
            }
        }
        Ok(json!(Value::Object(out).to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_signals_get_defaults_and_ids() {
        let (m, reason) = merge_signal(Flavor::Heat, &Value::Null, &Value::Null).unwrap();
        assert_eq!(m, json!({"1": {"data": null, "reason": "Signal 1 received", "status": "SUCCESS"}}));
        assert_eq!(reason, "status:SUCCESS reason:Signal 1 received");
        let (m, reason) =
            merge_signal(Flavor::Heat, &m, &json!({"status": "FAILURE", "reason": "boom", "data": "x"})).unwrap();
        assert_eq!(m["2"], json!({"data": "x", "reason": "boom", "status": "FAILURE"}));
        assert_eq!(reason, "status:FAILURE reason:boom");
        let (m, _) = merge_signal(Flavor::Heat, &m, &json!({"id": "abc"})).unwrap();
        assert_eq!(m["abc"]["reason"], json!("Signal 3 received"));
    }

    #[test]
    fn bad_signals_are_refused() {
        for bad in [json!({"status": "MAYBE"}), json!({"extra": 1}), json!("text"), json!([1])] {
            let e = merge_signal(Flavor::Heat, &json!({}), &bad).unwrap_err();
            assert_eq!(e, ResourceFailure::error("ValueError", "Metadata format invalid"), "{bad}");
        }
        // CloudFormation handles need every key.
        assert!(merge_signal(Flavor::Cfn, &json!({}), &json!({"Status": "SUCCESS"})).is_err());
        let (m, _) = merge_signal(
            Flavor::Cfn,
            &json!({}),
            &json!({"Status": "SUCCESS", "Reason": "r", "Data": "d", "UniqueId": 7}),
        )
        .unwrap();
        assert_eq!(m, json!({"7": {"Data": "d", "Reason": "r", "Status": "SUCCESS"}}));
    }

    #[test]
    fn verdicts_and_timeout_texts() {
        let s = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(verdict(&s(&[]), 1), Verdict::Waiting);
        assert_eq!(verdict(&s(&[("SUCCESS", "a")]), 2), Verdict::Waiting);
        assert_eq!(verdict(&s(&[("SUCCESS", "a"), ("SUCCESS", "b")]), 2), Verdict::Done);
        assert_eq!(
            verdict(&s(&[("SUCCESS", "a"), ("FAILURE", "x"), ("FAILURE", "y")]), 1),
            Verdict::Failed("x;y".into())
        );
        assert_eq!(timeout_message(&s(&[]), 1), "0 of 1 received");
        assert_eq!(timeout_message(&s(&[("SUCCESS", "a"), ("SUCCESS", "b")]), 3), "2 of 3 received - a;b");
    }
}
