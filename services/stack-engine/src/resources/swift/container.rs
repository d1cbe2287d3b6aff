//! OS::Swift::Container: a Swift container (physical id = its name).
//!
//! Create: `PUT` the container with `X-Container-Meta-<key>` for each of
//! `X-Container-Meta`, `X-Container-Read` / `X-Container-Write` when set,
//! then `POST` the account with `X-Account-Meta-<key>` when
//! `X-Account-Meta` has any. Every property replaces on change.
//! Delete: a non-empty container fails (Heat's ResourceActionNotSupported)
//! unless `PurgeOnDelete`, which deletes its objects first; a container
//! already gone is done; a 409 is retried as Heat retries deletes.

use std::sync::Arc;

use keelson_openstack::object_store::{origin, ObjectStore};
use serde_json::{json, Map, Value};

use super::super::client_errors::SWIFTCLIENT;
use super::super::delete_retries::{with_delete_retries, Retryable};
use super::super::nova::{attribute_session, stack_session, STACK_DATA};
use super::super::schema::{AttributeSchema, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, RequiredService, ResourceFailure, ResourceState,
    SupportStatus,
};
use super::{done_if_gone, failure, object_store};
use crate::error::EngineError;

const PURGE_ON_DELETE: &str = "PurgeOnDelete";

pub struct Container {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// Heat's `_build_meta_headers`: `X-<Kind>-Meta-<key>` for each entry
/// (values as Python's `str` prints them).
fn meta_headers(kind: &str, props: &Properties, property: &str) -> Vec<(String, String)> {
    props
        .get(property)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (format!("X-{kind}-Meta-{k}"), keelson_pyfmt::str_of(v)))
        .collect()
}

fn header_refs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

impl Container {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new(
                "name",
                T::String,
                "Name for the container. If not specified, a unique name will be generated.",
            ),
            PropertySchema::new(
                "X-Container-Read",
                T::String,
                "Specify the ACL permissions on who can read objects in the container.",
            ),
            PropertySchema::new(
                "X-Container-Write",
                T::String,
                "Specify the ACL permissions on who can write objects to the container.",
            ),
            PropertySchema::new(
                "X-Container-Meta",
                T::Map,
                "A map of user-defined meta data to associate with the container. Each key in the map will set the header X-Container-Meta-{key} with the corresponding value.",
            )
            .default_value(json!({})),
            PropertySchema::new(
                "X-Account-Meta",
                T::Map,
                "A map of user-defined meta data to associate with the account. Each key in the map will set the header X-Account-Meta-{key} with the corresponding value.",
            )
            .default_value(json!({})),
            PropertySchema::new(
                PURGE_ON_DELETE,
                T::Boolean,
                "If True, delete any objects in the container when the container is deleted. Otherwise, deleting a non-empty container will result in an error.",
            )
            .default_value(false),
        ];
        let attributes = vec![
            AttributeSchema::new("DomainName", "The host from the container URL.", Some("string")),
            AttributeSchema::new("WebsiteURL", "The URL of the container.", Some("string")),
            AttributeSchema::new("RootURL", "The parent URL of the container.", Some("string")),
            AttributeSchema::new("ObjectCount", "The number of objects stored in the container.", Some("integer")),
            AttributeSchema::new("BytesUsed", "The number of bytes stored in the container.", Some("integer")),
            AttributeSchema::new("HeadContainer", "A map containing all headers for the container.", Some("map")),
        ];
        Container {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource for managing Swift containers.\n\nA container defines a namespace for objects. An object with the same\nname in two different containers represents two different objects.",
            },
        }
    }

    async fn create_with(&self, store: &ObjectStore<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = match super::super::nova::str_prop(&ctx.properties, "name") {
            Some(name) => name.to_string(),
            None => ctx.stable_physical_name(),
        };
        let props = &ctx.properties;
        let mut container_headers = meta_headers("Container", props, "X-Container-Meta");
        for key in ["X-Container-Read", "X-Container-Write"] {
            if let Some(v) = props.get(key).and_then(Value::as_str) {
                container_headers.push((key.to_string(), v.to_string()));
            }
        }
        let account_headers = meta_headers("Account", props, "X-Account-Meta");
        store.put_container(&name, &header_refs(&container_headers)).await.map_err(failure)?;
        if !account_headers.is_empty() {
            store.post_account(&header_refs(&account_headers)).await.map_err(failure)?;
        }
        ctx.state.physical_id = Some(name);
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        Ok(())
    }

    /// One attempt at Heat's delete: the objects (when purging), then the
    /// container.
    async fn delete_attempt(
        store: &ObjectStore<'_>,
        id: &str,
        purge: bool,
    ) -> Result<Option<Retryable>, ResourceFailure> {
        let mut objects = match store.list_objects(id).await {
            Ok(objects) => objects,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(failure(e)),
        };
        if !objects.is_empty() && !purge {
            return Err(ResourceFailure::error(
                "ResourceActionNotSupported",
                format!(
                    "Deleting non-empty container ({id}) when {PURGE_ON_DELETE} is False is not supported for resource."
                ),
            ));
        }
        while !objects.is_empty() {
            for object in &objects {
                done_if_gone(store.delete_object(id, object).await)?;
            }
            objects = match store.list_objects(id).await {
                Ok(objects) => objects,
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) => return Err(failure(e)),
            };
        }
        SWIFTCLIENT.conflict_retryable(store.delete_container(id).await)
    }

    /// The attribute `name` of container `id` read through `store`.
    async fn attribute_with(store: &ObjectStore<'_>, id: Option<&str>, name: &str) -> Value {
        let url = store.url();
        let origin = origin(url);
        let path = &url[origin.len()..];
        let netloc = origin.split_once("://").map_or("", |(_, n)| n);
        match name {
            "DomainName" => json!(netloc.split(':').next().unwrap_or_default()),
            "WebsiteURL" => json!(format!("{origin}{path}/{}", id.unwrap_or("None"))),
            "RootURL" => json!(format!("{origin}{path}")),
            _ => {
                let Some(id) = id else { return Value::Null };
                // Heat logs a Swift error here and answers None.
                let Ok(headers) = store.head_container(id).await else { return Value::Null };
                match name {
                    "ObjectCount" => headers.get("x-container-object-count").map_or(Value::Null, |v| json!(v)),
                    "BytesUsed" => headers.get("x-container-bytes-used").map_or(Value::Null, |v| json!(v)),
                    _ => Value::Object(headers.into_iter().map(|(k, v)| (k, json!(v))).collect::<Map<_, _>>()),
                }
            }
        }
    }
}

impl Plugin for Container {
    const TYPE: &'static str = "OS::Swift::Container";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::SWIFT)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let store = object_store(&session).await?;
        self.create_with(&store, ctx).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let purge = ctx.properties.get(PURGE_ON_DELETE).and_then(Value::as_bool).unwrap_or(false);
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let store = object_store(&session).await?;
        let (store, id) = (&store, id.as_str());
        with_delete_retries(ctx, || Self::delete_attempt(store, id, purge)).await
    }

    /// Heat's `handle_check`: the container can be listed.
    fn check(&self, ctx: &mut ActionContext) -> Option<impl std::future::Future<Output = ActionResult> + Send> {
        Some(async move {
            let session = stack_session(&self.host, &ctx.stack_id).await?;
            let store = object_store(&session).await?;
            let id = ctx.state.physical_id.clone().unwrap_or_else(|| "None".into());
            store.list_objects(&id).await.map(drop).map_err(failure)
        })
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let store = ObjectStore::connect(&session).await.map_err(super::attribute_error)?;
        Ok(Self::attribute_with(&store, state.physical_id.as_deref(), name).await)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::nova::testing::bound;
    use super::super::super::UpdateDecision;
    use super::super::testing::{swift, CONFLICT_BODY};
    use super::*;
    use keelson_openstack::OsError;

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&Container::new(Arc::new(HostSlot::default())), "c", &v).unwrap()
    }

    #[tokio::test]
    async fn creates_with_metadata_and_reads_attributes() {
        let (fake, session) = swift().await;
        let (slot, _host) = bound(Some(session));
        let c = Container::new(slot);
        let p = props(json!({"name": "web", "X-Container-Read": ".r:*", "X-Container-Meta": {"Color": "blue"},
            "X-Account-Meta": {"Owner": "me"}}));
        let (mut ctx, _tx) = test_context(p);
        Plugin::create(&c, &mut ctx).await.unwrap();
        assert_eq!(ctx.state.physical_id.as_deref(), Some("web"));
        let made = fake.container("web").unwrap();
        assert_eq!(made.headers.get("x-container-meta-color").map(String::as_str), Some("blue"));
        assert_eq!(made.headers.get("x-container-read").map(String::as_str), Some(".r:*"));
        assert_eq!(fake.account.lock().unwrap().get("x-account-meta-owner").map(String::as_str), Some("me"));
        assert_eq!(fake.seen(), ["PUT /v1/AUTH_p1/web", "POST /v1/AUTH_p1"]);
        fake.put("web", "a", "hello");
        let attr = |n: &'static str| {
            let c = &c;
            let state = ctx.state.clone();
            async move { c.attribute(&state, n).await.unwrap() }
        };
        assert_eq!(attr("DomainName").await, json!("127.0.0.1"));
        let root = attr("RootURL").await;
        assert!(root.as_str().unwrap().starts_with("http://127.0.0.1:"), "{root}");
        assert!(root.as_str().unwrap().ends_with("/v1/AUTH_p1"), "{root}");
        assert_eq!(attr("WebsiteURL").await, json!(format!("{}/web", root.as_str().unwrap())));
        // Swift's header values, as Heat passes them on (strings).
        assert_eq!(attr("ObjectCount").await, json!("1"));
        assert_eq!(attr("BytesUsed").await, json!("5"));
        assert_eq!(attr("HeadContainer").await["x-container-meta-color"], json!("blue"));
        // A generated name without `name`; any change replaces.
        let (mut ctx2, _tx) = test_context(props(json!({})));
        Plugin::create(&c, &mut ctx2).await.unwrap();
        assert!(ctx2.state.physical_id.as_deref().unwrap().starts_with("st-r-"));
        let (a, b) = (props(json!({})), props(json!({"X-Container-Meta": {"k": "v"}})));
        assert_eq!(Plugin::update_decision(&c, &a, &b), UpdateDecision::Replace);
    }

    #[tokio::test]
    async fn a_non_empty_container_is_kept_unless_purged() {
        let (fake, session) = swift().await;
        let (slot, _host) = bound(Some(session));
        let c = Container::new(slot);
        let (mut ctx, _tx) = test_context(props(json!({"name": "full"})));
        Plugin::create(&c, &mut ctx).await.unwrap();
        fake.put("full", "o1", "x");
        assert_eq!(
            Plugin::delete(&c, &mut ctx).await,
            Err(ResourceFailure::error(
                "ResourceActionNotSupported",
                "Deleting non-empty container (full) when PurgeOnDelete is False is not supported for resource."
            ))
        );
        assert!(fake.container("full").is_some());
        ctx.properties = props(json!({"name": "full", "PurgeOnDelete": true}));
        fake.put("full", "o2", "y");
        Plugin::delete(&c, &mut ctx).await.unwrap();
        assert!(fake.container("full").is_none());
        // Gone already: done.
        Plugin::delete(&c, &mut ctx).await.unwrap();
    }

    /// Swift's own 409 (an object came in between listing and delete),
    /// retried as Heat retries, then the failure in swiftclient's words.
    #[tokio::test]
    async fn swifts_conflict_reads_as_swiftclients() {
        let (fake, session) = swift().await;
        fake.put("busy", "o", "x");
        let store = ObjectStore::connect(&session).await.unwrap();
        let e = store.delete_container("busy").await.unwrap_err();
        assert!(matches!(e, OsError::Conflict(_)));
        let failure = SWIFTCLIENT.failure(e);
        let ResourceFailure::Error { type_name, message } = failure else { panic!() };
        assert_eq!(type_name, "ClientException");
        let url = format!("{}/busy", store.url());
        assert_eq!(
            message,
            format!(
                "Container DELETE failed: {url} 409 Conflict  [first 60 chars of response] b'{}' (txn: tx-fake)",
                &CONFLICT_BODY[..60]
            )
        );
    }
}
