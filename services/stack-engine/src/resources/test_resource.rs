//! OS::Heat::TestResource (upstream `test_resource.py`): stores `value`,
//! waits, and fails on demand, for tests of the engine itself.
//!
//! `client_name` / `entity_name` make upstream poll an OpenStack client
//! while waiting; there are no clients here, so they are accepted, stored
//! and ignored (the wait is the same).

use std::future::Future;

use serde_json::Value;

use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{
    changed_properties, default_update_decision, ActionContext, ActionResult, Plugin, Properties, ResourceFailure,
    ResourceState, UpdateDecision,
};
use crate::error::EngineError;

pub struct TestResource {
    schema: ResourceSchema,
}

/// Which action a wait belongs to (`action_wait_secs` keys).
#[derive(Clone, Copy)]
enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    fn key(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }
}

impl Default for TestResource {
    fn default() -> Self {
        Self::new()
    }
}

impl TestResource {
    pub fn new() -> Self {
        let properties = vec![
            PropertySchema::new("constraint_prop_secs", T::Number, "Number value for delay during resolve constraint.")
                .default_value(0)
                .update_allowed()
                .constraint(Constraint::custom("test_constr")),
            PropertySchema::new("attr_wait_secs", T::Number, "Number value for timeout during resolving output value.")
                .default_value(0)
                .update_allowed(),
            PropertySchema::new("value", T::String, "The input string to be stored.")
                .default_value("test_string")
                .update_allowed(),
            PropertySchema::new(
                "update_replace_value",
                T::String,
                "Some value that can be stored but can not be updated.",
            ),
            PropertySchema::new(
                "fail",
                T::Boolean,
                "Value which can be set to fail the resource operation to test failure scenarios.",
            )
            .update_allowed()
            .default_value(false),
            PropertySchema::new(
                "update_replace",
                T::Boolean,
                "Value which can be set to trigger update replace for the particular resource.",
            )
            .update_allowed()
            .default_value(false),
            PropertySchema::new("wait_secs", T::Number, "Seconds to wait after an action (-1 is infinite).")
                .update_allowed()
                .default_value(0),
            PropertySchema::new("action_wait_secs", T::Map, "Options for simulating waiting.").update_allowed().map_of(
                vec![
                    PropertySchema::new(
                        "create",
                        T::Number,
                        "Seconds to wait after a create. Defaults to the global wait_secs.",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "update",
                        T::Number,
                        "Seconds to wait after an update. Defaults to the global wait_secs.",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "delete",
                        T::Number,
                        "Seconds to wait after a delete. Defaults to the global wait_secs.",
                    )
                    .update_allowed(),
                ],
            ),
            PropertySchema::new("client_name", T::String, "Client to poll.").default_value("").update_allowed(),
            PropertySchema::new("entity_name", T::String, "Client entity to poll.").default_value("").update_allowed(),
        ];
        TestResource {
            schema: ResourceSchema {
                properties,
                attributes: vec![AttributeSchema::new(
                    "output",
                    "The string that was stored. This value is also available by referencing the resource.",
                    None,
                )],
                support_status: SupportStatus::supported("5.0.0"),
                description: "A resource which stores the string value that was provided.\n\nThis resource is to be used only for testing.\nIt has control knobs such as 'update_replace', 'fail', 'wait_secs'.",
            },
        }
    }
}

fn number(props: &Properties, key: &str) -> Option<f64> {
    props.get(key).and_then(Value::as_f64)
}

fn flag(props: &Properties, key: &str) -> bool {
    props.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `_wait_secs`: the per-action override, else `wait_secs`.
fn wait_secs(props: &Properties, action: Action) -> f64 {
    props
        .get("action_wait_secs")
        .and_then(|m| m.get(action.key()))
        .and_then(Value::as_f64)
        .or_else(|| number(props, "wait_secs"))
        .unwrap_or(0.0)
}

/// Upstream measures a wait as `datetime.timedelta(seconds=secs)`, which
/// refuses more than 999999999 days; a negative (or NaN) wait is never
/// measured and is infinite. The refusal is upstream's OverflowError.
fn check_wait_range(secs: f64) -> Result<(), ResourceFailure> {
    match wait_overflow(secs) {
        Some(message) => Err(ResourceFailure::error("OverflowError", message)),
        None => Ok(()),
    }
}

/// The OverflowError text of a wait past a timedelta, if it is one.
fn wait_overflow(secs: f64) -> Option<String> {
    const TIMEDELTA_MAX_DAYS: f64 = 999_999_999.0;
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    if secs.is_infinite() {
        return Some("cannot convert float infinity to integer".into());
    }
    let days = (secs / 86_400.0).floor();
    if days <= TIMEDELTA_MAX_DAYS {
        return None;
    }
    // Past a C int, CPython fails converting the day count itself.
    Some(if days > f64::from(i32::MAX) {
        "Python int too large to convert to C int".to_string()
    } else {
        format!("days={days:.0}; must have magnitude <= 999999999")
    })
}

/// Waits, then fails when `fail` is set (never on delete).
async fn wait_then_maybe_fail(ctx: &ActionContext, secs: f64, action: Action) -> Result<(), ResourceFailure> {
    check_wait_range(secs)?;
    ctx.sleep(secs).await?;
    if flag(&ctx.properties, "fail") && !matches!(action, Action::Delete) {
        return Err(ResourceFailure::error("ValueError", format!("Test Resource failed {}", ctx.resource_name)));
    }
    Ok(())
}

fn value_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

impl Plugin for TestResource {
    const TYPE: &'static str = "OS::Heat::TestResource";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        let decision = default_update_decision(&self.schema, old, new);
        if decision == UpdateDecision::InPlace
            && changed_properties(old, new).iter().any(|k| k == "value")
            && flag(new, "update_replace")
        {
            return UpdateDecision::Replace;
        }
        decision
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        if !flag(&ctx.properties, "fail") {
            if let Some(v) = value_string(ctx.properties.get("value")) {
                ctx.state.data.insert("value".into(), v);
            }
            ctx.state.physical_id = Some(ctx.physical_name());
        }
        let secs = wait_secs(&ctx.properties, Action::Create);
        wait_then_maybe_fail(ctx, secs, Action::Create).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        // Upstream acts only on a changed, non-empty `value`; otherwise
        // it completes at once (and still fails when `fail` is set).
        let changed = ctx.properties.get("value") != old.get("value");
        let new_value = value_string(ctx.properties.get("value")).filter(|v| !v.is_empty());
        let secs = match new_value {
            Some(v) if changed => {
                if !flag(&ctx.properties, "fail") {
                    ctx.state.data.insert("value".into(), v);
                }
                wait_secs(&ctx.properties, Action::Update)
            }
            _ => 0.0,
        };
        wait_then_maybe_fail(ctx, secs, Action::Update).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let secs = wait_secs(&ctx.properties, Action::Delete);
        wait_then_maybe_fail(ctx, secs, Action::Delete).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name != "output" {
            return Err(super::invalid_attribute("", name));
        }
        // Upstream sleeps `attr_wait_secs` (a negative one not at
        // all); one past the clock's reach is refused like an
        // action's wait rather than held forever.
        let secs = number(&state.properties, "attr_wait_secs").unwrap_or(0.0);
        if secs > 0.0 {
            if let Some(message) = wait_overflow(secs) {
                return Err(EngineError::OverflowError(message));
            }
            if let Some(deadline) = super::context::deadline_after(secs) {
                tokio::time::sleep_until(deadline).await;
            }
        }
        Ok(state.data.get("value").cloned().map(Value::String).unwrap_or(Value::Null))
    }

    fn check(&self, ctx: &mut ActionContext) -> Option<impl Future<Output = ActionResult> + Send> {
        Some(async move {
            if ctx.state.physical_id.is_none() {
                return Err(ResourceFailure::error("Exception", "Resource not created"));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::context::test_context;
    use serde_json::json;

    fn props(v: Value) -> Properties {
        TestResource::new().validate_properties("r", &v).unwrap()
    }

    #[test]
    fn defaults_are_applied() {
        let p = props(json!({}));
        assert_eq!(p["value"], json!("test_string"));
        assert_eq!(p["fail"], json!(false));
        assert_eq!(p["wait_secs"], json!(0));
        assert_eq!(p["action_wait_secs"], Value::Null);
        assert_eq!(p["update_replace_value"], Value::Null);
    }

    #[test]
    fn validation_messages() {
        let e = TestResource::new().validate_properties("r", &json!({"wait_secs": "soon"})).unwrap_err();
        assert_eq!(
            e.message(),
            "Property error: resources.r.properties.wait_secs: could not convert string to float: 'soon'"
        );
        let e = TestResource::new().validate_properties("r", &json!({"action_wait_secs": {"later": 1}})).unwrap_err();
        assert_eq!(e.message(), "Property error: resources.r.properties.action_wait_secs: Unknown Property later");
        let e = TestResource::new().validate_properties("r", &json!({"fail": "maybe"})).unwrap_err();
        assert_eq!(e.message(), "Property error: resources.r.properties.fail: \"maybe\" is not a valid boolean");
    }

    #[test]
    fn update_decisions() {
        let rt = TestResource::new();
        let a = props(json!({"value": "a"}));
        assert_eq!(rt.update_decision(&a, &a.clone()), UpdateDecision::Unchanged);
        assert_eq!(rt.update_decision(&a, &props(json!({"value": "b"}))), UpdateDecision::InPlace);
        assert_eq!(
            rt.update_decision(&a, &props(json!({"value": "b", "update_replace": true}))),
            UpdateDecision::Replace
        );
        // update_replace alone does not replace: only with a changed value
        assert_eq!(
            rt.update_decision(&a, &props(json!({"value": "a", "update_replace": true}))),
            UpdateDecision::InPlace
        );
        assert_eq!(
            rt.update_decision(&a, &props(json!({"value": "a", "update_replace_value": "x"}))),
            UpdateDecision::Replace
        );
        assert_eq!(rt.update_decision(&a, &props(json!({"value": "a", "wait_secs": 3}))), UpdateDecision::InPlace);
    }

    #[tokio::test]
    async fn create_stores_value_and_physical_id() {
        let rt = TestResource::new();
        let (mut ctx, _tx) = test_context(props(json!({"value": "hello"})));
        rt.create(&mut ctx).await.unwrap();
        let pid = ctx.state.physical_id.clone().unwrap();
        assert!(pid.starts_with("st-r-") && pid.len() == 17);
        assert_eq!(ctx.state.data["value"], "hello");
        ctx.state.properties = ctx.properties.clone();
        assert_eq!(rt.attribute(&ctx.state, "output").await.unwrap(), json!("hello"));
        assert_eq!(rt.reference_id(&ctx.state), json!(pid));
        let e = crate::resources::resolve_attribute(&rt, "r", &ctx.state, "nope").await.unwrap_err();
        assert_eq!(e.heat_type(), "InvalidTemplateAttribute");
        assert_eq!(e.message(), "The Referenced Attribute (r nope) is incorrect.");
        assert!(rt.check(&mut ctx).unwrap().await.is_ok());
    }

    #[tokio::test]
    async fn failing_create_fails_after_wait_without_id() {
        let rt = TestResource::new();
        let (mut ctx, _tx) = test_context(props(json!({"fail": true, "wait_secs": 0.02})));
        let started = std::time::Instant::now();
        let e = rt.create(&mut ctx).await.unwrap_err();
        assert!(started.elapsed().as_millis() >= 20);
        assert_eq!(e, ResourceFailure::error("ValueError", "Test Resource failed r"));
        assert_eq!(ctx.state.physical_id, None);
        assert!(ctx.state.data.is_empty());
        assert_eq!(rt.check(&mut ctx).unwrap().await, Err(ResourceFailure::error("Exception", "Resource not created")));
        // delete never fails
        assert_eq!(rt.delete(&mut ctx).await, Ok(()));
    }

    #[tokio::test]
    async fn update_stores_new_value_and_fails_on_demand() {
        let rt = TestResource::new();
        let old = props(json!({"value": "a"}));
        let (mut ctx, _tx) = test_context(props(json!({"value": "b"})));
        ctx.state.data.insert("value".into(), "a".into());
        rt.update(&mut ctx, &old).await.unwrap();
        assert_eq!(ctx.state.data["value"], "b");

        let (mut ctx, _tx) = test_context(props(json!({"value": "c", "fail": true})));
        ctx.state.data.insert("value".into(), "a".into());
        let e = rt.update(&mut ctx, &old).await.unwrap_err();
        assert_eq!(e, ResourceFailure::error("ValueError", "Test Resource failed r"));
        assert_eq!(ctx.state.data["value"], "a");
    }

    #[tokio::test]
    async fn waits_are_per_action_and_cancellable() {
        let rt = std::sync::Arc::new(TestResource::new());
        let p = props(json!({"wait_secs": -1, "action_wait_secs": {"delete": 0}}));
        assert_eq!(wait_secs(&p, Action::Create), -1.0);
        assert_eq!(wait_secs(&p, Action::Delete), 0.0);
        let (mut ctx, tx) = test_context(p);
        let rt2 = rt.clone();
        let task = tokio::spawn(async move { rt2.create(&mut ctx).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!task.is_finished());
        tx.send(true).unwrap();
        assert_eq!(task.await.unwrap(), Err(ResourceFailure::Cancelled));
    }

    #[test]
    fn waits_past_a_timedelta_are_upstreams_overflow_error() {
        assert_eq!(check_wait_range(86_399_999_999_999.0), Ok(()));
        assert_eq!(check_wait_range(-1e300), Ok(()));
        assert_eq!(check_wait_range(f64::NAN), Ok(()));
        assert_eq!(
            check_wait_range(86_400_000_000_000.0),
            Err(ResourceFailure::error("OverflowError", "days=1000000000; must have magnitude <= 999999999"))
        );
        assert_eq!(
            check_wait_range(1e20),
            Err(ResourceFailure::error("OverflowError", "Python int too large to convert to C int"))
        );
        assert_eq!(
            check_wait_range(f64::INFINITY),
            Err(ResourceFailure::error("OverflowError", "cannot convert float infinity to integer"))
        );
    }

    #[tokio::test]
    async fn a_huge_wait_fails_the_action_instead_of_panicking() {
        let rt = TestResource::new();
        for p in [json!({"wait_secs": 1e20}), json!({"action_wait_secs": {"create": 1e20}})] {
            let (mut ctx, _tx) = test_context(props(p));
            let e = rt.create(&mut ctx).await.unwrap_err();
            assert_eq!(e, ResourceFailure::error("OverflowError", "Python int too large to convert to C int"));
        }
        let state = ResourceState { properties: props(json!({"attr_wait_secs": 1e20})), ..Default::default() };
        let e = rt.attribute(&state, "output").await.unwrap_err();
        assert_eq!(e.heat_type(), "OverflowError");
    }

    #[tokio::test]
    async fn output_waits_attr_wait_secs() {
        let rt = TestResource::new();
        let mut state = ResourceState { properties: props(json!({"attr_wait_secs": 0.03})), ..Default::default() };
        state.data.insert("value".into(), "v".into());
        let started = std::time::Instant::now();
        assert_eq!(rt.attribute(&state, "output").await.unwrap(), json!("v"));
        assert!(started.elapsed().as_millis() >= 30);
    }
}
