//! OS::Heat::ScalingPolicy (upstream `scaling_policy.py`): a signal to the
//! policy (its resource's signal endpoint, `signal_url`, or the pre-signed
//! `alarm_url` an alarm posts to) resizes the OS::Heat::AutoScalingGroup
//! `auto_scaling_group_id` names by `scaling_adjustment`.

use std::sync::Arc;

use serde_json::Value;

use super::autoscaling_group::{Adjustment, AutoScalingGroup};
use super::host::HostSlot;
use super::scaling::AdjustmentType;
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState, SignalTarget};
use crate::error::EngineError;

/// resource_data keys.
const ALARM_URL_KEY: &str = "alarm_url";
const SIGNAL_URL_KEY: &str = "signal_url";

pub struct ScalingPolicy {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
    /// The group type whose resizes the policy drives.
    group: Arc<AutoScalingGroup>,
}

impl ScalingPolicy {
    pub fn new(host: Arc<HostSlot>, group: Arc<AutoScalingGroup>) -> Self {
        ScalingPolicy {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new(
                        "auto_scaling_group_id",
                        T::String,
                        "The reference of the group the policy resizes.",
                    )
                    .required(),
                    PropertySchema::new("scaling_adjustment", T::Number, "How much a signal resizes the group.")
                        .required()
                        .update_allowed(),
                    PropertySchema::new(
                        "adjustment_type",
                        T::String,
                        "How scaling_adjustment is read: a change, a size, or a percentage.",
                    )
                    .required()
                    .update_allowed()
                    .constraint(Constraint::allowed_values(AdjustmentType::HEAT_NAMES)),
                    PropertySchema::new(
                        "cooldown",
                        T::Number,
                        "Seconds after a scaling during which the group does not scale again.",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "min_adjustment_step",
                        T::Integer,
                        "The smallest number of members a percentage adjustment adds or removes.",
                    )
                    .update_allowed()
                    .constraint(Constraint::range(Some(0), None)),
                ],
                attributes: vec![
                    AttributeSchema::new("alarm_url", "A pre-signed URL that signals the policy.", Some("string")),
                    AttributeSchema::new(
                        "signal_url",
                        "The policy's signal endpoint in the Orchestration API.",
                        Some("string"),
                    ),
                    super::show_attribute(),
                ],
                support_status: SupportStatus::supported("2014.1"),
                description: "Resizes an OS::Heat::AutoScalingGroup each time it is signalled.",
            },
            host,
            group,
        }
    }

    /// What the policy's properties ask of the group.
    fn adjustment(props: &Properties) -> Result<Adjustment, ResourceFailure> {
        let kind_text = props.get("adjustment_type").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = AdjustmentType::parse(&kind_text)
            .ok_or_else(|| ResourceFailure::error("ValueError", format!("Unknown adjustment_type {kind_text}")))?;
        Ok(Adjustment {
            adjustment: props.get("scaling_adjustment").and_then(Value::as_f64).unwrap_or(0.0),
            kind,
            kind_text,
            min_step: props.get("min_adjustment_step").and_then(Value::as_i64),
            cooldown: props.get("cooldown").and_then(Value::as_f64),
        })
    }

    async fn scale(&self, target: &SignalTarget, details: &Value) -> Result<Option<String>, ResourceFailure> {
        // Any alarm action signals the policy; the state is only logged.
        let alarm_state = details
            .get("current")
            .or_else(|| details.get("state"))
            .and_then(Value::as_str)
            .unwrap_or("alarm")
            .to_lowercase();
        tracing::info!(policy = target.resource_name, state = alarm_state, "alarm signalled");
        let props = &target.state.properties;
        let refid = props.get("auto_scaling_group_id").and_then(Value::as_str).unwrap_or_default();
        let not_found = || {
            ResourceFailure::error(
                "NotFound",
                format!("Alarm {} could not find scaling group named \"{refid}\"", target.resource_name),
            )
        };
        let group = self.host.get().resource_by_refid(&target.stack_id, refid).await?.ok_or_else(not_found)?;
        if group.resource_type != AutoScalingGroup::TYPE {
            return Err(not_found());
        }
        self.group.adjust(&target.stack_id, &group, &Self::adjustment(props)?).await?;
        Ok(None)
    }
}

impl Plugin for ScalingPolicy {
    const TYPE: &'static str = "OS::Heat::ScalingPolicy";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let percent = props.get("adjustment_type").and_then(Value::as_str) == Some("percent_change_in_capacity");
        if !percent && props.get("min_adjustment_step").is_some_and(|v| !v.is_null()) {
            return Err(EngineError::validation(
                "min_adjustment_step property should only be specified for adjustment_type with value percent_change_in_capacity.",
            ));
        }
        Ok(())
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        // Upstream's physical id is the stack user it signals as; a
        // fresh id stands in for it.
        ctx.state.physical_id = Some(uuid::Uuid::new_v4().simple().to_string());
        let urls = self.host.get().signal_urls(&ctx.stack_id, &ctx.resource_name).await?;
        ctx.state.data.insert(ALARM_URL_KEY.into(), urls.alarm_url);
        ctx.state.data.insert(SIGNAL_URL_KEY.into(), format!("{}/signal", urls.resource_url));
        Ok(())
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if state.physical_id.is_none() {
            return Ok(Value::Null);
        }
        let key = match name {
            "alarm_url" => ALARM_URL_KEY,
            "signal_url" => SIGNAL_URL_KEY,
            _ => return Err(super::invalid_attribute("", name)),
        };
        Ok(state.data.get(key).cloned().map(Value::String).unwrap_or(Value::Null))
    }

    fn handles_signal(&self) -> bool {
        true
    }

    async fn handle_signal(&self, target: &SignalTarget, details: &Value) -> Result<Option<String>, ResourceFailure> {
        self.scale(target, details).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> ScalingPolicy {
        let host = Arc::new(HostSlot::default());
        ScalingPolicy::new(host.clone(), Arc::new(AutoScalingGroup::new(host)))
    }

    #[test]
    fn min_adjustment_step_needs_a_percentage() {
        let p = policy();
        let given = |kind: &str| json!({"auto_scaling_group_id": "g", "scaling_adjustment": 10, "adjustment_type": kind, "min_adjustment_step": 2});
        assert!(p.validate_properties("p", &given("percent_change_in_capacity")).is_ok());
        let e = p.validate_properties("p", &given("change_in_capacity")).unwrap_err();
        assert!(e.message().starts_with("min_adjustment_step property should only be specified"), "{}", e.message());
        let e = p
            .validate_properties(
                "p",
                &json!({"auto_scaling_group_id": "g", "scaling_adjustment": 1, "adjustment_type": "ChangeInCapacity"}),
            )
            .unwrap_err();
        assert!(e.message().contains("adjustment_type"), "{}", e.message());
    }

    #[test]
    fn the_adjustment_comes_from_the_properties() {
        let props = policy()
            .validate_properties("p", &json!({"auto_scaling_group_id": "g", "scaling_adjustment": -1, "adjustment_type": "change_in_capacity", "cooldown": 5}))
            .unwrap();
        let a = ScalingPolicy::adjustment(&props).unwrap();
        assert_eq!(a.kind, AdjustmentType::Change);
        assert_eq!((a.adjustment, a.min_step, a.cooldown), (-1.0, None, Some(5.0)));
        assert_eq!(a.kind_text, "change_in_capacity");
    }

    #[tokio::test]
    async fn urls_resolve_once_created() {
        let p = policy();
        let mut state = ResourceState::default();
        assert_eq!(p.attribute(&state, "alarm_url").await.unwrap(), Value::Null);
        state.physical_id = Some("u".into());
        state.data.insert(SIGNAL_URL_KEY.into(), "http://h/v1/t/stacks/s/i/resources/p/signal".into());
        assert_eq!(
            p.attribute(&state, "signal_url").await.unwrap(),
            json!("http://h/v1/t/stacks/s/i/resources/p/signal")
        );
        assert!(p.attribute(&state, "nope").await.is_err());
    }
}
