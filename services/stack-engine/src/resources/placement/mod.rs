//! Placement from Heat: OS::Placement::ResourceProvider and
//! OS::Placement::Allocation, whose actions call the inventory service
//! over gRPC ([`PlacementClient`]) so that an operator can describe a
//! fleet in a HOT template and keep it converged with stack updates.
//!
//! The plugins hold an `Arc` of the client and nothing else; everything a
//! resource remembers is in its `ResourceState` (physical id = the
//! provider's or consumer's uuid; `generation` in its data). A Placement
//! failure becomes a `ResourceFailure` named by Placement's code, so the
//! resource's status reason reads e.g. `placement.resource_provider.inuse:
//! resources.rp: Unable to delete resource provider …: Resource provider
//! has allocations.`

mod allocation;
mod client;
mod provider;

use std::future::Future;
use std::time::Duration;

use serde_json::{json, Value};

pub use allocation::Allocation;
pub use client::{PlacementClient, PlacementError};
pub use provider::ResourceProvider;

use super::schema::ResourceSchema;
use super::{validate_properties, ActionContext, Properties, ResourceFailure};
use crate::error::EngineError;

/// How often a call is tried when the inventory service is unavailable,
/// and how often a generation race is re-read and retried: a fleet of
/// providers converging at once races on nothing but its own writes, so a
/// few attempts are plenty.
const ATTEMPTS: u32 = 5;

/// Placement's resource class and trait name pattern.
const NAME_PATTERN: &str = "^[A-Z0-9_]+$";

/// A UUID as Placement accepts it (with or without dashes).
const UUID_PATTERN: &str = "[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}";

/// The failure a Placement error becomes: `<code>: <Placement's text>`.
fn failure(e: PlacementError) -> ResourceFailure {
    ResourceFailure::error(e.type_name(), e.detail)
}

/// Runs `op`, retrying while the inventory service is unavailable (a
/// restart, a fail-over behind a load balancer); the wait between
/// attempts is cut short when the engine cancels the action.
async fn call<T, F, Fut>(ctx: &ActionContext, op: F) -> Result<T, ResourceFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = client::Result<T>>,
{
    retrying(ctx, op).await?.map_err(failure)
}

/// [`call`] with Placement's error left to the caller (the outer error is
/// the cancellation of a wait).
async fn retrying<T, F, Fut>(ctx: &ActionContext, mut op: F) -> Result<client::Result<T>, ResourceFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = client::Result<T>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match op().await {
            Err(e) if e.is_transient() && attempt < ATTEMPTS => {
                ctx.sleep(backoff(attempt).as_secs_f64()).await?;
            }
            done => return Ok(done),
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200 * u64::from(attempt))
}

/// Runs a generation-checked write of provider `uuid` starting from
/// `generation` (None: read it first); on `placement.concurrent_update`
/// (someone else wrote the provider in between) re-reads the generation
/// and writes again. Answers the generation after the write.
async fn with_generation<F, Fut>(
    ctx: &ActionContext,
    client: &PlacementClient,
    uuid: &str,
    generation: Option<u32>,
    write: F,
) -> Result<u32, ResourceFailure>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = client::Result<u32>>,
{
    let reread = || async { client.get_provider(uuid).await.map(|rp| rp.generation) };
    generation_loop(ctx, generation, reread, write).await
}

/// [`with_generation`]'s loop, with the read of the generation given.
async fn generation_loop<R, RFut, W, WFut>(
    ctx: &ActionContext,
    generation: Option<u32>,
    mut reread: R,
    mut write: W,
) -> Result<u32, ResourceFailure>
where
    R: FnMut() -> RFut,
    RFut: Future<Output = client::Result<u32>>,
    W: FnMut(u32) -> WFut,
    WFut: Future<Output = client::Result<u32>>,
{
    let mut generation = match generation {
        Some(g) => g,
        None => call(ctx, &mut reread).await?,
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        match retrying(ctx, || write(generation)).await? {
            Ok(g) => return Ok(g),
            Err(e) if e.is_concurrent_update() && attempt < ATTEMPTS => {
                generation = call(ctx, &mut reread).await?;
            }
            Err(e) => return Err(failure(e)),
        }
    }
}

/// A string property, None when absent or empty (an unresolved reference
/// validates as the empty string).
fn str_prop<'a>(props: &'a Properties, name: &str) -> Option<&'a str> {
    props.get(name).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A list-of-strings property, empty strings dropped.
fn str_list(props: &Properties, name: &str) -> Vec<String> {
    props
        .get(name)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

/// Validates `given` against the one-level `schema` as if it sat at
/// `properties<path>` of resource `resource_name`: the errors read as
/// Heat's for a nested property (`Property error:
/// resources.rp.properties.inventories.VCPU.total: …`). `prefix` is the
/// schema property whose path becomes `path` (None: the map itself).
fn validate_nested(
    schema: &ResourceSchema,
    resource_name: &str,
    given: &Value,
    prefix: Option<&str>,
    path: &str,
) -> Result<Properties, EngineError> {
    validate_properties(schema, resource_name, given).map_err(|e| {
        let base = format!("resources.{resource_name}.properties");
        let (from, to) = match prefix {
            Some(p) => (format!("{base}.{p}"), format!("{base}{path}")),
            None => (base.clone(), format!("{base}{path}")),
        };
        let message = e.message().replacen(&from, &to, 1);
        e.with_message(&message)
    })
}

/// The property error for `path` below `properties`, in Heat's words.
fn property_error(resource_name: &str, path: &str, message: &str) -> EngineError {
    EngineError::validation(format!("Property error: resources.{resource_name}.properties{path}: {message}"))
}

/// Heat's AllowedPattern failure text.
fn pattern_mismatch(value: &str, pattern: &str) -> String {
    format!("\"{value}\" does not match pattern \"{pattern}\"")
}

/// Whether `name` is a resource class or trait name Placement accepts.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The provider generation an action last saw (kept in the resource's
/// data, so resolving the attribute costs no call).
fn generation_value(data: &std::collections::BTreeMap<String, String>) -> Value {
    data.get("generation").and_then(|g| g.parse::<u64>().ok()).map(|g| json!(g)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::{json, Value};
    use tonic::transport::Endpoint;

    use super::super::context::test_context;
    use super::super::{Properties, Registry, ResourceFailure};
    use super::client::CONCURRENT_UPDATE;
    use super::{generation_loop, PlacementClient, PlacementError};

    fn err(http_status: u16, code: &str) -> PlacementError {
        PlacementError { http_status, code: code.into(), detail: format!("{http_status} {code}") }
    }

    #[tokio::test]
    async fn a_lost_generation_race_is_reread_and_written_again() {
        let (ctx, _tx) = test_context(Properties::new());
        // The provider is at 7 when the stale write (at 5) is refused.
        let seen = RefCell::new(Vec::new());
        let g = generation_loop(
            &ctx,
            Some(5),
            || async { Ok(7) },
            |g| {
                seen.borrow_mut().push(g);
                async move {
                    if g == 5 {
                        Err(err(409, CONCURRENT_UPDATE))
                    } else {
                        Ok(g + 1)
                    }
                }
            },
        )
        .await;
        assert_eq!(g, Ok(8));
        assert_eq!(*seen.borrow(), [5, 7]);
    }

    #[tokio::test]
    async fn other_conflicts_fail_at_once_with_placements_code() {
        let (ctx, _tx) = test_context(Properties::new());
        let writes = RefCell::new(0);
        let g = generation_loop(
            &ctx,
            None,
            || async { Ok(3) },
            |_| {
                *writes.borrow_mut() += 1;
                async { Err(err(409, "placement.inventory.inuse")) }
            },
        )
        .await;
        assert_eq!(g, Err(ResourceFailure::error("placement.inventory.inuse", "409 placement.inventory.inuse")));
        assert_eq!(*writes.borrow(), 1);
        // A race that never ends gives up after the attempts.
        let g =
            generation_loop(&ctx, Some(1), || async { Ok(1) }, |_| async { Err(err(409, CONCURRENT_UPDATE)) }).await;
        assert_eq!(g, Err(ResourceFailure::error(CONCURRENT_UPDATE, "409 placement.concurrent_update")));
    }

    #[tokio::test]
    async fn the_types_are_offered_only_with_an_inventory_service() {
        let admin = crate::caller::Caller {
            project_id: "p".into(),
            roles: vec!["admin".into()],
            is_admin: true,
            ..Default::default()
        };
        let listed = |r: &Registry| r.list_view(&admin, &[], &[]).unwrap()["resource_types"].clone();
        let builtin = listed(&Registry::builtin());
        assert!(!builtin
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().is_some_and(|t| t.starts_with("OS::Placement"))));
        let channel = Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        let registry = Registry::with_placement(PlacementClient::new(channel));
        // Not in upstream's list: after it, by name.
        let mut expected = builtin.as_array().unwrap().clone();
        expected.extend([json!("OS::Placement::Allocation"), json!("OS::Placement::ResourceProvider")]);
        assert_eq!(listed(&registry), Value::Array(expected));
        let view = registry.schema_view(&admin, "OS::Placement::ResourceProvider", false).unwrap();
        assert_eq!(view["properties"]["inventories"]["update_allowed"], json!(true));
        assert_eq!(view["properties"]["uuid"]["update_allowed"], json!(false));
        assert_eq!(view["attributes"]["generation"]["type"], json!("integer"));
        let hot = registry.template_view(&admin, "OS::Placement::Allocation", "hot").unwrap();
        assert_eq!(hot["parameters"]["allocations"]["type"], json!("comma_delimited_list"));
    }

    #[tokio::test]
    async fn the_types_are_admin_only() {
        let channel = Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        let registry = Registry::with_placement(PlacementClient::new(channel));
        let member = crate::caller::Caller {
            project_id: "p".into(),
            roles: vec!["member".into(), "reader".into()],
            ..Default::default()
        };
        let listed = registry.list_view(&member, &[], &[]).unwrap();
        assert!(!listed["resource_types"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().is_some_and(|t| t.starts_with("OS::Placement"))));
        for t in ["OS::Placement::ResourceProvider", "OS::Placement::Allocation"] {
            let e = registry.authorize_type(&member, t).unwrap_err();
            assert_eq!((e.http_status(), e.heat_type()), (403, "Forbidden"));
            assert_eq!(e.message(), format!("You are not authorized to use resource_types:{t}."));
            assert!(registry.schema_view(&member, t, false).is_err());
        }
        assert!(registry.authorize_type(&member, "OS::Heat::None").is_ok());
    }
}
