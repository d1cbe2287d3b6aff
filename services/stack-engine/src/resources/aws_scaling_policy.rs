//! AWS::AutoScaling::ScalingPolicy (upstream
//! `aws/autoscaling/scaling_policy.py`): OS::Heat::ScalingPolicy under
//! CloudFormation names, resizing an AWS::AutoScaling::AutoScalingGroup.
//! Its reference, once created, is its pre-signed alarm URL (`AlarmUrl`),
//! which alarms POST to through heat-api-cfn.

use std::sync::Arc;

use super::autoscaling_group::AutoScalingGroup;
use super::host::HostSlot;
use super::scaling::AdjustmentType;
use super::scaling_policy::{PolicyKeys, ScalingPolicy};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};

pub const AWS_POLICY_TYPE: &str = "AWS::AutoScaling::ScalingPolicy";

const AWS_KEYS: PolicyKeys = PolicyKeys {
    group: "AutoScalingGroupName",
    adjustment: "ScalingAdjustment",
    adjustment_type: "AdjustmentType",
    cooldown: "Cooldown",
    min_step: "MinAdjustmentStep",
    percent: "PercentChangeInCapacity",
    alarm_url: "AlarmUrl",
    signal_url: None,
    url_is_reference: true,
};

impl ScalingPolicy {
    pub fn aws(host: Arc<HostSlot>, group: Arc<AutoScalingGroup>) -> Self {
        let cfn_names = [AdjustmentType::Change, AdjustmentType::Exact, AdjustmentType::PercentChange]
            .map(AdjustmentType::cfn_name);
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("AutoScalingGroupName", T::String, "AutoScaling group name to apply policy to.")
                    .required(),
                PropertySchema::new("ScalingAdjustment", T::Integer, "Size of adjustment.").required().update_allowed(),
                PropertySchema::new("AdjustmentType", T::String, "Type of adjustment (absolute or percentage).")
                    .required()
                    .constraint(Constraint::allowed_values(cfn_names))
                    .update_allowed(),
                PropertySchema::new("Cooldown", T::Integer, "Cooldown period, in seconds.").update_allowed(),
                PropertySchema::new(
                    "MinAdjustmentStep",
                    T::Integer,
                    "Minimum number of resources that are added or removed when the AutoScaling group scales up or down. This can be used only when specifying PercentChangeInCapacity for the AdjustmentType property.",
                )
                .constraint(Constraint::range(Some(0), None))
                .update_allowed(),
            ],
            attributes: vec![
                AttributeSchema::new("AlarmUrl", "A signed url to handle the alarm. (Heat extension).", Some("string")),
                super::show_attribute(),
            ],
            support_status: SupportStatus::default(),
            description: "No description available",
        };
        Self::flavored(host, group, AWS_POLICY_TYPE, AWS_KEYS, schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Plugin, ResourceState};
    use serde_json::{json, Value};

    fn policy() -> ScalingPolicy {
        let host = Arc::new(HostSlot::default());
        ScalingPolicy::aws(host.clone(), Arc::new(AutoScalingGroup::aws(host)))
    }

    #[test]
    fn min_adjustment_step_needs_a_percentage() {
        let p = policy();
        let given = |kind: &str| json!({"AutoScalingGroupName": "g", "ScalingAdjustment": 10, "AdjustmentType": kind, "MinAdjustmentStep": 2});
        assert!(p.validate_properties("p", &given("PercentChangeInCapacity")).is_ok());
        let e = p.validate_properties("p", &given("ChangeInCapacity")).unwrap_err();
        assert_eq!(
            e.message(),
            "MinAdjustmentStep property should only be specified for AdjustmentType with value PercentChangeInCapacity."
        );
        // The OS::Heat names are not CloudFormation's.
        let e = p
            .validate_properties(
                "p",
                &json!({"AutoScalingGroupName": "g", "ScalingAdjustment": 1, "AdjustmentType": "change_in_capacity"}),
            )
            .unwrap_err();
        assert!(e.message().contains("AdjustmentType"), "{}", e.message());
    }

    #[test]
    fn the_reference_is_the_alarm_url_once_created() {
        let p = policy();
        let mut state = ResourceState::default();
        assert_eq!(p.reference_id(&state), Value::Null);
        state.physical_id = Some("u".into());
        state.data.insert("alarm_url".into(), "http://cfn/v1/signal/arn?Signature=x".into());
        assert_eq!(p.reference_id(&state), json!("http://cfn/v1/signal/arn?Signature=x"));
        let schema = p.schema();
        assert!(schema.has_attribute("AlarmUrl") && !schema.has_attribute("signal_url"));
        assert_eq!(schema.property("ScalingAdjustment").unwrap().kind, T::Integer);
        assert!(!schema.property("AutoScalingGroupName").unwrap().update_allowed);
    }

    #[tokio::test]
    async fn alarm_url_resolves_once_created() {
        let p = policy();
        let mut state = ResourceState::default();
        assert_eq!(p.attribute(&state, "AlarmUrl").await.unwrap(), Value::Null);
        state.physical_id = Some("u".into());
        state.data.insert("alarm_url".into(), "http://cfn/x".into());
        assert_eq!(p.attribute(&state, "AlarmUrl").await.unwrap(), json!("http://cfn/x"));
        assert!(p.attribute(&state, "alarm_url").await.is_err());
    }
}
