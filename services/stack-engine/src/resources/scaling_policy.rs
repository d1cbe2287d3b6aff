//! OS::Heat::ScalingPolicy (upstream `scaling_policy.py`), and the
//! behaviour AWS::AutoScaling::ScalingPolicy (`aws_scaling_policy.rs`)
//! shares with it: a signal to the policy (its resource's signal
//! endpoint, `signal_url`, or the pre-signed alarm URL an alarm posts to)
//! resizes the scaling group the policy names by its adjustment.

use std::sync::Arc;

use serde_json::Value;

use super::autoscaling_group::{Adjustment, AutoScalingGroup, GroupFlavor};
use super::host::HostSlot;
use super::scaling::AdjustmentType;
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState, SignalTarget};
use crate::error::EngineError;

/// resource_data keys.
const ALARM_URL_KEY: &str = "alarm_url";
const SIGNAL_URL_KEY: &str = "signal_url";

/// The property and attribute names of a policy flavor.
pub(crate) struct PolicyKeys {
    pub group: &'static str,
    pub adjustment: &'static str,
    pub adjustment_type: &'static str,
    pub cooldown: &'static str,
    pub min_step: &'static str,
    /// The adjustment type `min_step` needs.
    pub percent: &'static str,
    pub alarm_url: &'static str,
    /// None: the flavor has no `signal_url` attribute.
    pub signal_url: Option<&'static str>,
    /// Whether the policy's reference is its alarm URL (the AWS policy).
    pub url_is_reference: bool,
}

const HEAT_KEYS: PolicyKeys = PolicyKeys {
    group: "auto_scaling_group_id",
    adjustment: "scaling_adjustment",
    adjustment_type: "adjustment_type",
    cooldown: "cooldown",
    min_step: "min_adjustment_step",
    percent: "percent_change_in_capacity",
    alarm_url: "alarm_url",
    signal_url: Some("signal_url"),
    url_is_reference: false,
};

pub struct ScalingPolicy {
    type_name: &'static str,
    keys: PolicyKeys,
    schema: ResourceSchema,
    host: Arc<HostSlot>,
    /// The group type whose resizes the policy drives.
    group: Arc<AutoScalingGroup>,
}

impl ScalingPolicy {
    pub const HEAT_TYPE: &'static str = "OS::Heat::ScalingPolicy";

    pub fn new(host: Arc<HostSlot>, group: Arc<AutoScalingGroup>) -> Self {
        let schema = ResourceSchema {
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
        };
        Self::flavored(host, group, Self::HEAT_TYPE, HEAT_KEYS, schema)
    }

    /// A policy registered as `type_name` with these names and schema.
    pub(crate) fn flavored(
        host: Arc<HostSlot>,
        group: Arc<AutoScalingGroup>,
        type_name: &'static str,
        keys: PolicyKeys,
        schema: ResourceSchema,
    ) -> Self {
        ScalingPolicy { type_name, keys, schema, host, group }
    }

    /// What the policy's properties ask of the group.
    fn adjustment(&self, props: &Properties) -> Result<Adjustment, ResourceFailure> {
        let k = &self.keys;
        let kind_text = props.get(k.adjustment_type).and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = AdjustmentType::parse(&kind_text).ok_or_else(|| {
            ResourceFailure::error("ValueError", format!("Unknown {} {kind_text}", k.adjustment_type))
        })?;
        Ok(Adjustment {
            adjustment: props.get(k.adjustment).and_then(Value::as_f64).unwrap_or(0.0),
            kind,
            kind_text,
            min_step: props.get(k.min_step).and_then(Value::as_i64),
            cooldown: props.get(k.cooldown).and_then(Value::as_f64),
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
        let refid = props.get(self.keys.group).and_then(Value::as_str).unwrap_or_default();
        let not_found = || {
            ResourceFailure::error(
                "NotFound",
                format!("Alarm {} could not find scaling group named \"{refid}\"", target.resource_name),
            )
        };
        let group = self.host.get().resource_by_refid(&target.stack_id, refid).await?.ok_or_else(not_found)?;
        if GroupFlavor::of_type(&group.resource_type).is_none() {
            return Err(not_found());
        }
        self.group.adjust(&target.stack_id, &group, &self.adjustment(props)?).await?;
        Ok(None)
    }
}

impl Plugin for ScalingPolicy {
    const TYPE: &'static str = Self::HEAT_TYPE;

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// Upstream `ResourcePropertyValueDependency`.
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let k = &self.keys;
        let percent = props.get(k.adjustment_type).and_then(Value::as_str) == Some(k.percent);
        if !percent && props.get(k.min_step).is_some_and(|v| !v.is_null()) {
            return Err(EngineError::validation(format!(
                "{} property should only be specified for {} with value {}.",
                k.min_step, k.adjustment_type, k.percent
            )));
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
        let key = if name == self.keys.alarm_url {
            ALARM_URL_KEY
        } else if Some(name) == self.keys.signal_url {
            SIGNAL_URL_KEY
        } else {
            return Err(super::invalid_attribute("", name));
        };
        Ok(state.data.get(key).cloned().map(Value::String).unwrap_or(Value::Null))
    }

    /// The AWS policy is referenced by its pre-signed URL once created
    /// (upstream `get_reference_id`), else by its name (Null).
    fn reference_id(&self, state: &ResourceState) -> Value {
        if !self.keys.url_is_reference {
            return state.physical_id.clone().map(Value::String).unwrap_or(Value::Null);
        }
        match &state.physical_id {
            Some(_) => state.data.get(ALARM_URL_KEY).cloned().map(Value::String).unwrap_or(Value::Null),
            None => Value::Null,
        }
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
        let a = policy().adjustment(&props).unwrap();
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
