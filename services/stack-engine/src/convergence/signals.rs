//! Signals (upstream `Resource.signal`, `service.resource_signal`) and the
//! engine services wait conditions and software deployments use:
//!
//! - `POST …/resources/{name}/signal` is checked here and handled in the
//!   background (the API answers at once); the handler's outcome is a
//!   `SIGNAL <status>` event with a "Signal: …" reason;
//! - a pre-signed URL (`PUT <base>/v1/waitcondition/<arn>?Expires&Signature`
//!   or `POST <base>/v1/signal/<arn>?…`) is signalled with no token: its
//!   HMAC-SHA256 signature, over the method, path and query, is checked
//!   with a key only engines know (`[orchestration] signal_signing_key`,
//!   else one generated once and kept in the database), and the signal is
//!   handled synchronously, as heat-api-cfn does;
//! - metadata writes are a compare-and-swap on the row's `atomic_key`
//!   (unlocked rows only), retried on a fresh read.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::sync::OnceCell;

use super::Engine;
use crate::definition::LiveContext;
use crate::error::EngineError;
use crate::options;
use crate::resources::host::{IdentityUrls, MetadataMerge, PeerResource, SignalUrls};
use crate::resources::{resolve_attribute, MetadataRefresh, ResourceFailure, ResourceType, SignalTarget};
use crate::store::{self, Action, ResourceChange, ResourceRow, StackRow};

/// Where signals and agents reach this cloud, and how pre-signed URLs
/// are made (Heat's option names where Heat has them).
#[derive(Debug, Clone, Default)]
pub struct SignalSettings {
    /// The Orchestration API as instances reach it (`scheme://host:port`,
    /// no path): the gateway's own endpoint by default.
    pub orchestration_url: String,
    /// `[clients_heat] url` (`http://host:8004/v1/%(tenant_id)s`): overrides
    /// the API base of signal endpoints.
    pub heat_url: Option<String>,
    /// `[orchestration] heat_waitcondition_server_url`: the base of
    /// pre-signed wait condition URLs (default `<orchestration>/v1/waitcondition`).
    pub waitcondition_server_url: Option<String>,
    /// `[orchestration] heat_metadata_server_url`: the base of pre-signed
    /// signal URLs (default the Orchestration API; `/v1/signal/…` follows).
    pub metadata_server_url: Option<String>,
    /// `[orchestration] signal_url_lifetime`: how long a pre-signed URL
    /// works (None: until its resource is gone).
    pub url_lifetime: Option<Duration>,
    /// `[orchestration] signal_signing_key`; None: generated once, stored.
    pub signing_key: Option<String>,
    /// `[orchestration] default_deployment_signal_transport`.
    pub default_deployment_signal_transport: String,
    /// `[orchestration] default_software_config_transport`.
    pub default_software_config_transport: String,
    /// heat-api-cfn's `/v1` as instances reach it (`[heat_api_cfn]
    /// public_endpoint`, else its listener's address).
    pub cfn_url: String,
}

impl SignalSettings {
    pub fn with_defaults(orchestration_url: impl Into<String>) -> Self {
        SignalSettings {
            orchestration_url: orchestration_url.into(),
            default_deployment_signal_transport: options::DEFAULT_DEPLOYMENT_SIGNAL_TRANSPORT.default_value(),
            default_software_config_transport: options::DEFAULT_SOFTWARE_CONFIG_TRANSPORT.default_value(),
            cfn_url: "http://127.0.0.1:8000/v1".to_string(),
            ..Default::default()
        }
    }

    /// `<api>/v1/<tenant>`.
    fn api_base(&self, tenant: &str) -> String {
        match &self.heat_url {
            Some(u) if !u.is_empty() => u.replace("%(tenant_id)s", tenant).trim_end_matches('/').to_string(),
            _ => format!("{}/v1/{tenant}", self.orchestration_url.trim_end_matches('/')),
        }
    }
}

/// How long a metadata write keeps retrying a row that is locked (an
/// action runs on it) or keeps changing.
const METADATA_RETRY_FOR: Duration = Duration::from_secs(30);

/// The kinds of pre-signed URL: the path segment after `/v1` and the
/// method it is signed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresignedKind {
    /// `PUT …/waitcondition/<arn>`: answers the handle's metadata.
    WaitCondition,
    /// `POST …/signal/<arn>`: answers nothing.
    Signal,
}

impl PresignedKind {
    fn segment(self) -> &'static str {
        match self {
            PresignedKind::WaitCondition => "waitcondition",
            PresignedKind::Signal => "signal",
        }
    }

    fn method(self) -> &'static str {
        match self {
            PresignedKind::WaitCondition => "PUT",
            PresignedKind::Signal => "POST",
        }
    }
}

/// A resource's ARN and its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceArn {
    pub tenant: String,
    pub stack_name: String,
    pub stack_id: String,
    pub resource_name: String,
}

impl ResourceArn {
    pub fn text(&self) -> String {
        format!(
            "arn:openstack:heat::{}:stacks/{}/{}/resources/{}",
            self.tenant, self.stack_name, self.stack_id, self.resource_name
        )
    }

    /// Parses `arn:openstack:heat::<tenant>:stacks/<name>/<id>/resources/<res>`.
    pub fn parse(text: &str) -> Option<ResourceArn> {
        let rest = text.strip_prefix("arn:openstack:heat::")?;
        let (tenant, path) = rest.split_once(':')?;
        let path = path.strip_prefix("stacks/")?;
        let mut parts = path.splitn(4, '/');
        let stack_name = parts.next()?;
        let stack_id = parts.next()?;
        if parts.next()? != "resources" {
            return None;
        }
        let resource_name = parts.next()?;
        if [tenant, stack_name, stack_id, resource_name].iter().any(|p| p.is_empty()) {
            return None;
        }
        Some(ResourceArn {
            tenant: tenant.into(),
            stack_name: stack_name.into(),
            stack_id: stack_id.into(),
            resource_name: resource_name.into(),
        })
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters
/// (Python's `quote(s, safe='')`).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What is signed: the method, the decoded path under `/v1` and the query
/// (sorted, re-encoded, without `Signature`).
fn canonical(method: &str, path: &str, query: &[(String, String)]) -> String {
    let mut pairs: Vec<(&str, &str)> =
        query.iter().filter(|(k, _)| k != "Signature").map(|(k, v)| (k.as_str(), v.as_str())).collect();
    pairs.sort();
    let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{}={}", quote(k), quote(v))).collect();
    format!("{method}\n{path}\n{}", q.join("&"))
}

fn sign(key: &str, text: &str) -> String {
    // HMAC takes keys of any length: this cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(text.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Compares in time independent of where the texts differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn signature_mismatch() -> EngineError {
    EngineError::SignatureDoesNotMatch(
        "The request signature we calculated does not match the signature you provided.".into(),
    )
}

fn failure(e: EngineError) -> ResourceFailure {
    ResourceFailure::from(e)
}

/// Upstream `get_string_details`: the event text of a signal whose
/// handler gave none.
fn signal_details_text(details: &Value) -> String {
    match details {
        Value::Null => "No signal details provided".into(),
        Value::String(s) => s.clone(),
        Value::Object(m) if ["previous", "current", "reason"].iter().all(|k| m.contains_key(*k)) => {
            let t = |k: &str| match &m[k] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("alarm state changed from {} to {} ({})", t("previous"), t("current"), t("reason"))
        }
        _ => "Unknown".into(),
    }
}

fn resource_not_available(name: &str) -> EngineError {
    EngineError::ResourceNotAvailable(format!("The Resource ({name}) is not available."))
}

/// Stored metadata as the API shows it: none is `{}`.
fn metadata_or_empty(stored: &Value) -> Value {
    if stored.is_null() {
        json!({})
    } else {
        stored.clone()
    }
}

/// What upstream `metadata_update()` leaves as a resource's metadata,
/// `template` being its template's `metadata` resolved again (Null when
/// it has none).
fn refreshed_metadata(how: MetadataRefresh, stored: &Value, template: &Value) -> Value {
    match how {
        MetadataRefresh::Keep => metadata_or_empty(stored),
        MetadataRefresh::Replace => metadata_or_empty(template),
        MetadataRefresh::MergeTemplate => {
            let mut merged = match stored {
                Value::Object(m) => m.clone(),
                _ => serde_json::Map::new(),
            };
            if let Value::Object(t) = template {
                merged.extend(t.clone());
            }
            Value::Object(merged)
        }
    }
}

/// The signing key, read or created once per engine.
#[derive(Default)]
pub struct KeyCell(OnceCell<String>);

impl Engine {
    async fn signing_key(&self) -> Result<String, EngineError> {
        if let Some(k) = &self.settings.signals.signing_key {
            if !k.is_empty() {
                return Ok(k.clone());
            }
        }
        let key = self
            .signals_key
            .0
            .get_or_try_init(|| async {
                store::software::signing_key(&self.db, "presigned-signal", || {
                    use rand::RngCore as _;
                    let mut bytes = [0u8; 32];
                    rand::thread_rng().fill_bytes(&mut bytes);
                    hex::encode(bytes)
                })
                .await
            })
            .await?;
        Ok(key.clone())
    }

    /// The live row of `name` in stack `stack_id`.
    async fn live_row(&self, stack_id: &str, name: &str) -> Result<Option<ResourceRow>, EngineError> {
        let rows = store::resources::list(&self.db, stack_id).await?;
        Ok(rows.into_iter().filter(|r| r.name == name).max_by_key(|r| (r.replaced_by.is_none(), r.id)))
    }

    /// A pre-signed URL for the resource: `kind`'s path, signed; valid for
    /// `[orchestration] signal_url_lifetime` unless `never_expires`.
    async fn presigned_url(
        &self,
        base: &str,
        kind: PresignedKind,
        arn: &ResourceArn,
        never_expires: bool,
    ) -> Result<String, EngineError> {
        let mut query: Vec<(String, String)> = Vec::new();
        if let Some(life) = self.settings.signals.url_lifetime.filter(|_| !never_expires) {
            let life = i64::try_from(life.as_secs()).unwrap_or(i64::MAX);
            let expires = chrono::Utc::now().timestamp().saturating_add(life);
            query.push(("Expires".into(), expires.to_string()));
        }
        let path = format!("/{}/{}", kind.segment(), arn.text());
        let signature = sign(&self.signing_key().await?, &canonical(kind.method(), &path, &query));
        query.push(("Signature".into(), signature));
        let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
        Ok(format!("{base}/{}?{}", quote(&arn.text()), q.join("&")))
    }

    pub(super) async fn signal_urls_of(&self, stack_id: &str, resource_name: &str) -> Result<SignalUrls, EngineError> {
        let stack = self.live_stack_row(stack_id).await?;
        let s = &self.settings.signals;
        let arn = ResourceArn {
            tenant: stack.tenant.clone(),
            stack_name: stack.name.clone(),
            stack_id: stack.id.clone(),
            resource_name: resource_name.to_string(),
        };
        let root = s.orchestration_url.trim_end_matches('/');
        let wc_base = match &s.waitcondition_server_url {
            Some(u) if !u.is_empty() => u.trim_end_matches('/').to_string(),
            _ => format!("{root}/v1/waitcondition"),
        };
        let md_base = match &s.metadata_server_url {
            Some(u) if !u.is_empty() => u.trim_end_matches('/').to_string(),
            _ => root.to_string(),
        };
        let identity = match (self.identity(), &stack.stack_user_project_id) {
            (Some(identity), Some(project)) if identity.has_stack_domain() => Some(IdentityUrls {
                auth_url: identity.v3_endpoint(),
                stack_user_project_id: project.clone(),
                stack_domain_id: identity.stack_domain_id().await?,
                resource_url: format!(
                    "{}/stacks/{}/{}/resources/{}",
                    s.api_base(project),
                    stack.name,
                    stack.id,
                    quote(resource_name)
                ),
                cfn_url: s.cfn_url.clone(),
                waitcondition_server_url: s.waitcondition_server_url.clone().filter(|u| !u.is_empty()),
                arn: arn.text(),
            }),
            _ => None,
        };
        Ok(SignalUrls {
            identity,
            resource_url: format!(
                "{}/stacks/{}/{}/resources/{}",
                s.api_base(&stack.tenant),
                stack.name,
                stack.id,
                quote(resource_name)
            ),
            waitcondition_url: self.presigned_url(&wc_base, PresignedKind::WaitCondition, &arn, false).await?,
            signal_url: self.presigned_url(&format!("{md_base}/v1/signal"), PresignedKind::Signal, &arn, false).await?,
            alarm_url: self.presigned_url(&format!("{md_base}/v1/signal"), PresignedKind::Signal, &arn, true).await?,
            tenant: stack.tenant.clone(),
            stack_path: format!("{}/{}", stack.name, stack.id),
            region_name: self.settings.region_name.clone(),
            default_deployment_transport: s.default_deployment_signal_transport.clone(),
            default_config_transport: s.default_software_config_transport.clone(),
        })
    }

    async fn live_stack_row(&self, stack_id: &str) -> Result<StackRow, EngineError> {
        match store::stacks::get(&self.db, stack_id).await? {
            Some(s) if s.deleted_at.is_none() => Ok(s),
            _ => Err(EngineError::stack_not_found(stack_id)),
        }
    }

    pub(super) async fn peer_by_refid(&self, stack_id: &str, refid: &str) -> Result<Option<PeerResource>, EngineError> {
        let stack = self.live_stack_row(stack_id).await?;
        let def = self.definition(&stack, stack.raw_template_id).await?;
        let rows = store::resources::list(&self.db, stack_id).await?;
        let mut live: Vec<ResourceRow> = Vec::new();
        for row in rows {
            match live.iter_mut().find(|r| r.name == row.name) {
                Some(have) if (row.replaced_by.is_none(), row.id) > (have.replaced_by.is_none(), have.id) => {
                    *have = row
                }
                Some(_) => {}
                None => live.push(row),
            }
        }
        for row in live {
            if row.action == Action::Init {
                continue;
            }
            let Ok(plugin) = def.plugin_for(&self.registry, &row.name, &row.resource_type) else { continue };
            let state = crate::definition::resource_state(&self.db, &row).await?;
            let reference = plugin.reference_id(&state);
            // As text: `Value == str` would match strings only, and a
            // number's reference id is compared as printed.
            #[allow(clippy::cmp_owned)]
            let matches = match &reference {
                Value::String(s) => s == refid,
                Value::Null => row.name == refid,
                other => other.to_string() == refid,
            };
            if matches {
                return Ok(Some(PeerResource {
                    id: row.id,
                    name: row.name.clone(),
                    resource_type: row.resource_type.clone(),
                    physical_id: row.physical_resource_id.clone(),
                    metadata: row.rsrc_metadata.clone().unwrap_or(Value::Null),
                    status: row.status,
                    properties: state.properties,
                }));
            }
        }
        Ok(None)
    }

    pub(super) async fn metadata_of(&self, resource_id: i64) -> Result<Value, EngineError> {
        match store::resources::get(&self.db, resource_id).await? {
            Some(row) => Ok(row.rsrc_metadata.unwrap_or(Value::Null)),
            None => Err(EngineError::entity_not_found("Resource", &resource_id.to_string())),
        }
    }

    /// Upstream `metadata_set(merge_metadata=…)` with `retry_on_conflict`.
    pub(super) async fn merge_metadata_of(
        &self,
        resource_id: i64,
        mut merge: MetadataMerge<'_>,
    ) -> Result<Value, ResourceFailure> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(10);
        loop {
            let Some(row) = store::resources::get(&self.db, resource_id).await.map_err(|e| failure(e.into()))? else {
                return Err(failure(EngineError::entity_not_found("Resource", &resource_id.to_string())));
            };
            if row.engine_id.is_none() {
                let current = row.rsrc_metadata.clone().unwrap_or(Value::Null);
                let merged = merge(&current)?;
                let change = ResourceChange { rsrc_metadata: Some(Some(merged.clone())), ..Default::default() };
                if store::resources::update_cas(&self.db, row.id, None, row.atomic_key, change)
                    .await
                    .map_err(|e| failure(e.into()))?
                {
                    return Ok(merged);
                }
            }
            if started.elapsed() > METADATA_RETRY_FOR {
                return Err(ResourceFailure::error(
                    "ConcurrentTransaction",
                    format!("Concurrent transaction for {} {}", row.name, row.action),
                ));
            }
            // Locked by a running action, or another writer won: read again.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Checks a signal for `resource_name` (404 before the row exists, 400
    /// for types without a handler) and answers what handling it needs.
    async fn signal_target(
        &self,
        stack_id: &str,
        resource_name: &str,
    ) -> Result<(StackRow, ResourceRow, Arc<dyn ResourceType>), EngineError> {
        let stack = self.live_stack_row(stack_id).await?;
        let def = self.definition(&stack, stack.raw_template_id).await?;
        let Some(row) = self.live_row(stack_id, resource_name).await? else {
            return Err(if def.resource(resource_name).is_some() {
                resource_not_available(resource_name)
            } else {
                EngineError::resource_not_found(resource_name, &stack.name)
            });
        };
        if row.action == Action::Init {
            return Err(resource_not_available(resource_name));
        }
        // Upstream `_signal_check_action`, before the signal is queued:
        // the sender learns at once that it was refused.
        if row.action == Action::Delete || row.action == Action::Suspend {
            self.resource_event(
                &row,
                row.action,
                row.status,
                &format!("Cannot signal resource during {}", row.action),
                None,
            )
            .await;
            return Err(EngineError::not_supported(format!("Signal resource during {} is not supported.", row.action)));
        }
        let plugin = def.plugin_for(&self.registry, &row.name, &row.resource_type)?;
        if !plugin.handles_signal() {
            return Err(EngineError::ResourceActionNotSupported("signal is not supported for resource.".into()));
        }
        Ok((stack, row, plugin))
    }

    /// Upstream `Resource.signal` (its action checked by
    /// [`Engine::signal_target`]): the handler, the SIGNAL event, then the
    /// stack's metadata refresh.
    async fn run_signal(
        &self,
        row: &ResourceRow,
        plugin: &dyn ResourceType,
        details: &Value,
    ) -> Result<(), EngineError> {
        let target = SignalTarget {
            stack_id: row.stack_id.clone(),
            resource_id: row.id,
            resource_name: row.name.clone(),
            state: crate::definition::resource_state(&self.db, row).await?,
        };
        match plugin.handle_signal(&target, details).await {
            Ok(text) => {
                let reason = match text {
                    Some(t) => format!("Signal: {t}"),
                    None => signal_details_text(details),
                };
                self.resource_event(row, super::events::SIGNAL_EVENT, row.status, &reason, None).await;
            }
            // Upstream leaves no event for a signal with nothing to do
            // (a scaling group in cooldown or already at its bound).
            Err(ResourceFailure::NoActionRequired(message)) => {
                tracing::info!(resource = row.name, "signal {}: {message}", row.name);
            }
            Err(ResourceFailure::Error { type_name, message }) => {
                tracing::info!(resource = row.name, "signal {}: {type_name}: {message}", row.name);
                return Err(EngineError::from_plugin_failure(&type_name, &message));
            }
            Err(ResourceFailure::Cancelled) => return Err(EngineError::internal("signal cancelled")),
        }
        if plugin.signal_needs_metadata_updates() {
            // The signal is handled whatever the refresh gives.
            if let Err(e) = self.refresh_stack_metadata(&row.stack_id, &row.name).await {
                tracing::warn!(stack_id = row.stack_id, resource = row.name, "metadata refresh failed: {e}");
            }
        }
        Ok(())
    }

    /// Upstream `_resource_signal`'s refresh after a signal to
    /// `signalled`: each other resource of the stack that exists gets its
    /// `metadata_update()`, its template `metadata` resolved again against
    /// the live resources (a group's InstanceList has changed) and stored
    /// as its type says, under the row's compare-and-swap. A row an action
    /// holds is left to that action.
    async fn refresh_stack_metadata(&self, stack_id: &str, signalled: &str) -> Result<(), EngineError> {
        let stack = self.live_stack_row(stack_id).await?;
        let def = self.definition(&stack, stack.raw_template_id).await?;
        let rows = self.live_rows(stack_id).await?;
        let mut targets = Vec::new();
        let mut referenced = BTreeSet::new();
        for row in &rows {
            if row.action == Action::Init || row.name == signalled || row.engine_id.is_some() {
                continue;
            }
            let Ok(plugin) = def.plugin_for(&self.registry, &row.name, &row.resource_type) else { continue };
            let how = plugin.metadata_refresh();
            let Some(defn) = def.resource(&row.name).filter(|_| how != MetadataRefresh::Keep) else { continue };
            referenced.extend(def.requires(&self.registry, &row.name));
            targets.push((row, defn, how));
        }
        if targets.is_empty() {
            return Ok(());
        }
        let mut ctx = LiveContext::load(&self.db, &self.registry, &def, rows.iter(), Some(&referenced)).await?;
        if def.nested && def.uses_resource_facade {
            ctx = ctx.with_facade(self.resource_facade(&stack).await?);
        }
        for (row, defn, how) in targets {
            let template = match defn.metadata.as_ref().map(|m| m.resolve(&ctx)).transpose() {
                Ok(m) => m.unwrap_or(Value::Null),
                Err(e) => {
                    tracing::warn!(stack_id, resource = row.name, "metadata not resolved: {}", e.message);
                    continue;
                }
            };
            let stored = row.rsrc_metadata.clone().unwrap_or(Value::Null);
            if refreshed_metadata(how, &stored, &template) == metadata_or_empty(&stored) {
                continue;
            }
            let merge = Box::new(move |current: &Value| Ok(refreshed_metadata(how, current, &template)));
            if let Err(e) = self.merge_metadata_of(row.id, merge).await {
                tracing::warn!(stack_id, resource = row.name, "metadata not refreshed: {e}");
            }
        }
        Ok(())
    }

    /// `POST …/signal`: checked now, handled in the background.
    pub(super) async fn signal_async(
        self: &Arc<Self>,
        stack_id: &str,
        resource_name: &str,
        details: Value,
    ) -> Result<(), EngineError> {
        let (_, row, plugin) = self.signal_target(stack_id, resource_name).await?;
        let engine = self.clone();
        tokio::spawn(async move {
            if let Err(e) = engine.run_signal(&row, plugin.as_ref(), &details).await {
                tracing::info!(stack_id = row.stack_id, resource = row.name, "signal not handled: {e}");
            }
        });
        Ok(())
    }

    /// A pre-signed signal: the signature and expiry checked, then
    /// handled at once. Answers the handle's metadata for wait condition
    /// URLs (heat-api-cfn's `{"resource", "metadata"}`), `null` otherwise.
    pub async fn presigned_signal(
        self: &Arc<Self>,
        method: &str,
        path: &str,
        query: &[(String, String)],
        details: Value,
    ) -> Result<Value, EngineError> {
        let (kind, arn_text) = if let Some(rest) = path.strip_prefix("/waitcondition/") {
            (PresignedKind::WaitCondition, rest)
        } else if let Some(rest) = path.strip_prefix("/signal/") {
            (PresignedKind::Signal, rest)
        } else {
            return Err(signature_mismatch());
        };
        let given = query.iter().rev().find(|(k, _)| k == "Signature").map(|(_, v)| v.as_str()).unwrap_or_default();
        if given.is_empty() || query.iter().filter(|(k, _)| k == "Signature").count() > 1 {
            return Err(EngineError::MissingAuthenticationToken("Request is missing a signature.".into()));
        }
        let expected = sign(&self.signing_key().await?, &canonical(&method.to_ascii_uppercase(), path, query));
        if !same(&expected, given) {
            return Err(signature_mismatch());
        }
        if let Some((_, expires)) = query.iter().find(|(k, _)| k == "Expires") {
            let at: i64 = expires.parse().map_err(|_| signature_mismatch())?;
            if chrono::Utc::now().timestamp() > at {
                return Err(EngineError::RequestExpired("Request has expired.".into()));
            }
        }
        let arn = ResourceArn::parse(arn_text).ok_or_else(signature_mismatch)?;
        let (stack, row, plugin) = self.signal_target(&arn.stack_id, &arn.resource_name).await?;
        if stack.tenant != arn.tenant || stack.name != arn.stack_name {
            return Err(EngineError::stack_not_found(&arn.stack_name));
        }
        self.run_signal(&row, plugin.as_ref(), &details).await?;
        match kind {
            PresignedKind::WaitCondition => {
                let metadata = self.metadata_of(row.id).await?;
                Ok(json!({"resource": row.name, "metadata": metadata}))
            }
            PresignedKind::Signal => Ok(Value::Null),
        }
    }

    /// heat-api-cfn's signal (Heat's `resource_signal`, `sync_call` for
    /// wait condition URLs): at once, answering `{"resource", "metadata"}`
    /// (`wait_condition`), else in the background.
    pub async fn cfn_signal(
        self: &Arc<Self>,
        stack_id: &str,
        resource_name: &str,
        details: Value,
        wait_condition: bool,
    ) -> Result<Value, EngineError> {
        if !wait_condition {
            self.signal_async(stack_id, resource_name, details).await?;
            return Ok(Value::Null);
        }
        let (_, row, plugin) = self.signal_target(stack_id, resource_name).await?;
        self.run_signal(&row, plugin.as_ref(), &details).await?;
        let metadata = self.metadata_of(row.id).await?;
        Ok(json!({"resource": row.name, "metadata": metadata}))
    }

    /// An attribute of a live resource, for the services that show one.
    pub async fn live_attribute(
        &self,
        stack_id: &str,
        resource_name: &str,
        attribute: &str,
    ) -> Result<Value, EngineError> {
        let stack = self.live_stack_row(stack_id).await?;
        let def = self.definition(&stack, stack.raw_template_id).await?;
        let row = self
            .live_row(stack_id, resource_name)
            .await?
            .ok_or_else(|| EngineError::resource_not_found(resource_name, &stack.name))?;
        let plugin = def.plugin_for(&self.registry, &row.name, &row.resource_type)?;
        let state = crate::definition::resource_state(&self.db, &row).await?;
        resolve_attribute(plugin.as_ref(), &row.name, &state, attribute).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_round_trip() {
        let arn = ResourceArn {
            tenant: "t".into(),
            stack_name: "s".into(),
            stack_id: "id".into(),
            resource_name: "wait handle".into(),
        };
        assert_eq!(ResourceArn::parse(&arn.text()), Some(arn));
        assert_eq!(ResourceArn::parse("arn:openstack:heat::t:stacks/s/id"), None);
        assert_eq!(ResourceArn::parse("arn:openstack:heat::t:stacks/s/id/events/x"), None);
    }

    #[test]
    fn signatures_cover_method_path_and_query() {
        let q = vec![("Expires".to_string(), "100".to_string())];
        let base = sign("k", &canonical("PUT", "/waitcondition/arn:x", &q));
        assert_eq!(base.len(), 64);
        assert_ne!(base, sign("k", &canonical("POST", "/waitcondition/arn:x", &q)));
        assert_ne!(base, sign("k", &canonical("PUT", "/waitcondition/arn:y", &q)));
        assert_ne!(base, sign("k", &canonical("PUT", "/waitcondition/arn:x", &[("Expires".into(), "101".into())])));
        assert_ne!(base, sign("other", &canonical("PUT", "/waitcondition/arn:x", &q)));
        // The signature itself is not signed.
        let mut with_sig = q.clone();
        with_sig.push(("Signature".into(), base.clone()));
        assert_eq!(base, sign("k", &canonical("PUT", "/waitcondition/arn:x", &with_sig)));
        assert!(same(&base, &base) && !same(&base, "x"));
    }

    #[test]
    fn refreshed_metadata_follows_the_type() {
        let stored = json!({"deployments": [1], "IPs": "a"});
        let template = json!({"IPs": "a,b"});
        assert_eq!(refreshed_metadata(MetadataRefresh::Keep, &stored, &template), stored);
        assert_eq!(refreshed_metadata(MetadataRefresh::Replace, &stored, &template), template);
        // No template metadata: upstream's `t.metadata()` is `{}`.
        assert_eq!(refreshed_metadata(MetadataRefresh::Replace, &stored, &Value::Null), json!({}));
        assert_eq!(
            refreshed_metadata(MetadataRefresh::MergeTemplate, &stored, &template),
            json!({"deployments": [1], "IPs": "a,b"})
        );
        assert_eq!(refreshed_metadata(MetadataRefresh::Keep, &Value::Null, &template), json!({}));
    }

    #[test]
    fn quoting_and_details_texts() {
        assert_eq!(quote("arn:openstack:heat::t:stacks/s"), "arn%3Aopenstack%3Aheat%3A%3At%3Astacks%2Fs");
        assert_eq!(signal_details_text(&Value::Null), "No signal details provided");
        assert_eq!(signal_details_text(&json!({"a": 1})), "Unknown");
        assert_eq!(
            signal_details_text(&json!({"previous": "ok", "current": "alarm", "reason": "r"})),
            "alarm state changed from ok to alarm (r)"
        );
    }
}
