//! The CloudFormation scaling types on the real engine (SQLite, noauth):
//! an OS::Heat::InstanceGroup of an AWS::AutoScaling::LaunchConfiguration
//! whose AWS::EC2::Instance members run a provider template (as Heat's
//! functional test_instance_group.py maps them), resized by an update and
//! rolled out when its launch configuration is replaced; and an
//! AWS::AutoScaling::AutoScalingGroup resized by an
//! AWS::AutoScaling::ScalingPolicy signal.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service_support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use keelson_stack_engine::service::{Caller, QueryParams, StackRef};
use service_support::*;

const PROVIDER: &str = r#"
heat_template_version: 2013-05-23
parameters:
  ImageId: {type: string}
  InstanceType: {type: string}
  SecurityGroups: {type: comma_delimited_list}
  UserData: {type: string}
  Tags: {type: comma_delimited_list}
resources:
  random1:
    type: OS::Heat::RandomString
outputs:
  PublicIp:
    value: {get_attr: [random1, value]}
"#;

fn launch_config() -> Value {
    json!({
        "Type": "AWS::AutoScaling::LaunchConfiguration",
        "Metadata": {"foo": "bar"},
        "Properties": {
            "ImageId": "cirros", "InstanceType": "m1.tiny", "SecurityGroups": ["sg-1"],
            "UserData": {"Ref": "user_data"}
        }
    })
}

fn instance_group_template() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {"size": {"Type": "String", "Default": "1"},
                       "user_data": {"Type": "String", "Default": "jsconfig data"}},
        "Resources": {
            "JobServerGroup": {
                "Type": "OS::Heat::InstanceGroup",
                "Properties": {
                    "LaunchConfigurationName": {"Ref": "JobServerConfig"},
                    "Size": {"Ref": "size"},
                    "AvailabilityZones": ["nova"]
                },
                "UpdatePolicy": {"RollingUpdate": {"MinInstancesInService": "1", "MaxBatchSize": "2", "PauseTime": "PT0S"}}
            },
            "JobServerConfig": launch_config()
        },
        "Outputs": {
            "InstanceList": {"Value": {"Fn::GetAtt": ["JobServerGroup", "InstanceList"]}},
            "JobServerConfigRef": {"Value": {"Ref": "JobServerConfig"}}
        }
    })
}

fn environment() -> Value {
    json!({"resource_registry": {"AWS::EC2::Instance": "provider.yaml"}})
}

/// What test_autoscaling.py's AutoScalingSignalTest runs its
/// load-balancer stand-in as.
const LB: &str = r#"
heat_template_version: 2013-05-23
parameters:
  ImageId: {type: string}
  InstanceType: {type: string}
  SecurityGroups: {type: comma_delimited_list}
  UserData: {type: string}
  Tags: {type: comma_delimited_list, default: "x,y"}
resources:
outputs:
  PublicIp: {value: "not-used"}
"#;

fn q(pairs: &[(&str, &str)]) -> QueryParams {
    QueryParams::from_pairs(pairs)
}

async fn output(h: &Harness, caller: &Caller, stack: &StackRef, key: &str) -> Value {
    h.api.show_output(caller, stack, key).await.unwrap()["output"]["output_value"].clone()
}

/// The group's members: name -> status, read from its nested stack.
async fn members(h: &Harness, caller: &Caller, stack: &StackRef) -> Vec<(String, String)> {
    let listed = h.api.list_resources(caller, stack, &q(&[("nested_depth", "1")])).await.unwrap();
    listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resource_type"] == json!("AWS::EC2::Instance"))
        .map(|r| (r["resource_name"].as_str().unwrap().to_string(), r["resource_status"].as_str().unwrap().to_string()))
        .collect()
}

fn names(members: &[(String, String)]) -> BTreeSet<String> {
    members.iter().map(|(n, _)| n.clone()).collect()
}

fn ip_count(list: &Value) -> usize {
    list.as_str().map_or(0, |s| s.split(',').count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_group_resizes_and_rolls_out_a_replaced_launch_configuration() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let request = |size: &str, user_data: &str| {
        json!({
            "stack_name": "ig", "template": instance_group_template(),
            "files": {"provider.yaml": PROVIDER}, "environment": environment(),
            "parameters": {"size": size, "user_data": user_data}, "disable_rollback": true
        })
    };
    let id = h.api.create_stack(&caller, &request("2", "jsconfig data")).await.unwrap();
    let stack = StackRef::new("ig", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    assert_eq!(ip_count(&output(&h, &caller, &stack, "InstanceList").await), 2);
    let first = members(&h, &caller, &stack).await;
    assert_eq!(first.len(), 2, "{first:?}");
    let conf = output(&h, &caller, &stack, "JobServerConfigRef").await;
    assert!(conf.as_str().unwrap().starts_with("ig-JobServerConfig-"), "{conf}");
    // Members carry the launch configuration's metadata.
    let group = h.api.show_resource(&caller, &stack, "JobServerGroup", &q(&[])).await.unwrap();
    let nested = group["resource"]["links"].as_array().unwrap().iter().find(|l| l["rel"] == json!("nested")).unwrap();
    let path: Vec<&str> = nested["href"].as_str().unwrap().rsplitn(3, '/').collect();
    let child = StackRef::new(path[1], path[0]);
    let md = h.api.resource_metadata(&caller, &child, &first[0].0).await.unwrap();
    assert_eq!(md, json!({"metadata": {"foo": "bar"}}));

    // A bigger Size adds a member and keeps the others.
    h.api.update_stack(&caller, &stack, &request("3", "jsconfig data"), false).await.unwrap();
    h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(ip_count(&output(&h, &caller, &stack, "InstanceList").await), 3);
    let grown = members(&h, &caller, &stack).await;
    assert_eq!(grown.len(), 3);
    assert!(names(&first).is_subset(&names(&grown)), "{first:?} {grown:?}");

    // New user data replaces the launch configuration (a new name): the
    // rolling update moves every member to it, in place.
    h.api.update_stack(&caller, &stack, &request("3", "new data"), false).await.unwrap();
    h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    let new_conf = output(&h, &caller, &stack, "JobServerConfigRef").await;
    assert_ne!(new_conf, conf);
    assert!(new_conf.as_str().unwrap().starts_with("ig-JobServerConfig-"), "{new_conf}");
    let rolled = members(&h, &caller, &stack).await;
    assert_eq!(names(&rolled), names(&grown));
    assert!(rolled.iter().all(|(_, status)| status == "UPDATE_COMPLETE"), "{rolled:?}");
    assert_eq!(ip_count(&output(&h, &caller, &stack, "InstanceList").await), 3);
}

fn scaling_template() -> Value {
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {"user_data": {"Type": "String", "Default": "x"}},
        "Resources": {
            "Config": launch_config(),
            "Group": {
                "Type": "AWS::AutoScaling::AutoScalingGroup",
                "Properties": {
                    "AvailabilityZones": ["nova"], "LaunchConfigurationName": {"Ref": "Config"},
                    "MinSize": "1", "MaxSize": "3", "Cooldown": "0"
                }
            },
            "custom_lb": {
                "Type": "AWS::EC2::Instance",
                "Properties": {"ImageId": "cirros", "InstanceType": "m1.tiny", "UserData": "foo",
                               "SecurityGroups": ["sg-1"], "Tags": []},
                "Metadata": {"IPs": {"Fn::GetAtt": ["Group", "InstanceList"]}}
            },
            "ScaleUp": {
                "Type": "AWS::AutoScaling::ScalingPolicy",
                "Properties": {"AutoScalingGroupName": {"Ref": "Group"}, "ScalingAdjustment": "1",
                               "AdjustmentType": "ChangeInCapacity", "Cooldown": "0"}
            }
        },
        "Outputs": {
            "InstanceList": {"Value": {"Fn::GetAtt": ["Group", "InstanceList"]}},
            "AlarmUrl": {"Value": {"Fn::GetAtt": ["ScaleUp", "AlarmUrl"]}},
            "PolicyRef": {"Value": {"Ref": "ScaleUp"}}
        }
    })
}

/// Polls the group's InstanceList until it has `n` addresses and the
/// group is not scaling.
async fn wait_for_size(h: &Harness, caller: &Caller, stack: &StackRef, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = output(h, caller, stack, "InstanceList").await;
        // A signal's scaling ends once the group's metadata says so.
        let md = h.api.resource_metadata(caller, stack, "Group").await.unwrap();
        if ip_count(&list) == n && md["metadata"]["scaling_in_progress"] != json!(true) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the group never reached {n} members: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aws_scaling_policy_signal_resizes_an_aws_group() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let body = json!({
        "stack_name": "asg", "template": scaling_template(), "files": {"provider.yaml": PROVIDER, "lb.yaml": LB},
        "environment": {"resource_registry": {"AWS::EC2::Instance": "provider.yaml",
                                              "resources": {"custom_lb": {"AWS::EC2::Instance": "lb.yaml"}}}},
        "disable_rollback": true
    });
    let id = h.api.create_stack(&caller, &body).await.unwrap();
    let stack = StackRef::new("asg", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    wait_for_size(&h, &caller, &stack, 1).await;
    // The policy is referenced by its pre-signed alarm URL.
    let url = output(&h, &caller, &stack, "AlarmUrl").await;
    assert!(url.as_str().is_some_and(|u| !u.is_empty()), "{url}");
    assert_eq!(output(&h, &caller, &stack, "PolicyRef").await, url);

    // The load balancer stand-in got the group's addresses when it was
    // created (refreshing them after a signal is the engine's
    // metadata_update, not done yet).
    let md = h.api.resource_metadata(&caller, &stack, "custom_lb").await.unwrap();
    assert_eq!(md["metadata"]["IPs"], output(&h, &caller, &stack, "InstanceList").await);

    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 2).await;

    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 3).await;
    // At MaxSize a signal changes nothing.
    let _ = h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_for_size(&h, &caller, &stack, 3).await;
    let group = h.api.show_resource(&caller, &stack, "Group", &q(&[])).await.unwrap();
    assert_eq!(group["resource"]["resource_status"], json!("CREATE_COMPLETE"), "{group}");
}
