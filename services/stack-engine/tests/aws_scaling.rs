//! The CloudFormation scaling types on the real engine (SQLite, noauth):
//! an OS::Heat::InstanceGroup of an AWS::AutoScaling::LaunchConfiguration
//! whose AWS::EC2::Instance members run a provider template (as Heat's
//! functional test_instance_group.py maps them), resized by an update and
//! rolled out when its launch configuration is replaced, suspended and
//! resumed; and an AWS::AutoScaling::AutoScalingGroup resized by an
//! AWS::AutoScaling::ScalingPolicy signal (the metadata reading the
//! group's InstanceList refreshed after it), suspended and resumed with
//! its members.

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
/// The group members, written as upstream writes them.
async fn members(h: &Harness, caller: &Caller, stack: &StackRef) -> Vec<(String, String)> {
    let listed = h.api.list_resources(caller, stack, &q(&[("nested_depth", "1")])).await.unwrap();
    listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resource_type"] == json!("OS::Heat::ScaledResource"))
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

/// test_autoscaling.py's test_group_suspend_resume on an
/// OS::Heat::InstanceGroup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_group_suspends_and_resumes_its_members() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let body = json!({
        "stack_name": "igs", "template": instance_group_template(),
        "files": {"provider.yaml": PROVIDER}, "environment": environment(),
        "parameters": {"size": "2"}, "disable_rollback": true
    });
    let id = h.api.create_stack(&caller, &body).await.unwrap();
    let stack = StackRef::new("igs", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    let group = nested_stack(&h, &caller, &stack, "JobServerGroup").await;
    for (action, state) in [("suspend", "SUSPEND_COMPLETE"), ("resume", "RESUME_COMPLETE")] {
        h.api.stack_action(&caller, &stack, &json!({ action: null })).await.unwrap();
        h.wait_for_status(&caller, &stack, state).await;
        h.wait_for_status(&caller, &group, state).await;
        let listed = h.api.list_resources(&caller, &group, &q(&[])).await.unwrap();
        let members = listed["resources"].as_array().unwrap();
        assert_eq!(members.len(), 2, "{listed}");
        assert!(members.iter().all(|m| m["resource_status"] == json!(state)), "{listed}");
    }
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

/// test_autoscaling.py's test_signal_with_policy_update: the next signal
/// uses the updated policy, and custom_lb's metadata follows the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_after_a_policy_update_uses_the_new_adjustment() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let request = |adjustment: &str| {
        let mut template = scaling_template();
        template["Resources"]["ScaleUp"]["Properties"]["ScalingAdjustment"] = json!(adjustment);
        json!({
            "stack_name": "pol", "template": template, "files": {"provider.yaml": PROVIDER, "lb.yaml": LB},
            "environment": {"resource_registry": {"AWS::EC2::Instance": "provider.yaml",
                                                  "resources": {"custom_lb": {"AWS::EC2::Instance": "lb.yaml"}}}},
            "disable_rollback": true
        })
    };
    let id = h.api.create_stack(&caller, &request("1")).await.unwrap();
    let stack = StackRef::new("pol", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 2).await;
    wait_for_lb_ips(&h, &caller, &stack, 2).await;

    h.api.update_stack(&caller, &stack, &request("-1"), false).await.unwrap();
    h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 1).await;
    wait_for_lb_ips(&h, &caller, &stack, 1).await;
}

/// Polls custom_lb's metadata until its `IPs` are the group's current
/// InstanceList of `n` addresses.
async fn wait_for_lb_ips(h: &Harness, caller: &Caller, stack: &StackRef, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let md = h.api.resource_metadata(caller, stack, "custom_lb").await.unwrap();
        let list = output(h, caller, stack, "InstanceList").await;
        if md["metadata"]["IPs"] == list && ip_count(&list) == n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "custom_lb never showed {n} addresses: {md} {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The nested stack resource `name` of `stack` runs.
async fn nested_stack(h: &Harness, caller: &Caller, stack: &StackRef, name: &str) -> StackRef {
    let shown = h.api.show_resource(caller, stack, name, &q(&[])).await.unwrap();
    StackRef::new("", shown["resource"]["physical_resource_id"].as_str().unwrap())
}

/// Every resource of `stack` and of the stacks below it: name -> status.
async fn all_statuses(h: &Harness, caller: &Caller, stack: &StackRef) -> Vec<(String, String)> {
    let listed = h.api.list_resources(caller, stack, &q(&[("nested_depth", "3")])).await.unwrap();
    listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["resource_name"].as_str().unwrap().to_string(), r["resource_status"].as_str().unwrap().to_string()))
        .collect()
}

/// The position of `name`'s first `status` event among the stack's own.
async fn event_position(h: &Harness, caller: &Caller, stack: &StackRef, name: &str, status: &str) -> usize {
    let listed = h.api.list_events(caller, stack, None, &q(&[("sort_dir", "asc")])).await.unwrap();
    let events = listed["events"].as_array().unwrap();
    events
        .iter()
        .position(|e| e["resource_name"] == json!(name) && e["resource_status"] == json!(status))
        .unwrap_or_else(|| panic!("no {status} event of {name}: {events:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume_reach_the_group_members_and_a_suspended_policy_refuses_signals() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let body = json!({
        "stack_name": "sus", "template": scaling_template(), "files": {"provider.yaml": PROVIDER, "lb.yaml": LB},
        "environment": {"resource_registry": {"AWS::EC2::Instance": "provider.yaml",
                                              "resources": {"custom_lb": {"AWS::EC2::Instance": "lb.yaml"}}}},
        "disable_rollback": true
    });
    let id = h.api.create_stack(&caller, &body).await.unwrap();
    let stack = StackRef::new("sus", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    let group = nested_stack(&h, &caller, &stack, "Group").await;

    h.api.stack_action(&caller, &stack, &json!({"suspend": null})).await.unwrap();
    h.wait_for_status(&caller, &stack, "SUSPEND_COMPLETE").await;
    h.wait_for_status(&caller, &group, "SUSPEND_COMPLETE").await;
    // The group's members, their own nested stacks' resources included.
    let suspended = all_statuses(&h, &caller, &stack).await;
    assert!(suspended.len() >= 6, "{suspended:?}");
    assert!(suspended.iter().all(|(_, s)| s == "SUSPEND_COMPLETE"), "{suspended:?}");
    // Reverse dependency order: the group after the policy naming it,
    // the launch configuration after the group.
    let group_done = event_position(&h, &caller, &stack, "Group", "SUSPEND_COMPLETE").await;
    assert!(event_position(&h, &caller, &stack, "ScaleUp", "SUSPEND_COMPLETE").await < group_done);
    assert!(group_done < event_position(&h, &caller, &stack, "Config", "SUSPEND_IN_PROGRESS").await);

    // test_autoscaling.py's test_signal_during_suspend: refused at once,
    // with an event, and the group keeps its size.
    let e = h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap_err();
    assert!(e.message().contains("Signal resource during SUSPEND is not supported"), "{}", e.message());
    let events = h.api.list_events(&caller, &stack, Some("ScaleUp"), &q(&[])).await.unwrap();
    let refused = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["resource_status_reason"] == json!("Cannot signal resource during SUSPEND"))
        .cloned()
        .unwrap_or_else(|| panic!("no refusal event: {events}"));
    assert_eq!(refused["resource_status"], json!("SUSPEND_COMPLETE"));
    h.wait_for_status(&caller, &group, "SUSPEND_COMPLETE").await;
    assert_eq!(ip_count(&output(&h, &caller, &stack, "InstanceList").await), 1);

    // A second suspend of a suspended stack changes nothing.
    h.api.stack_action(&caller, &stack, &json!({"suspend": null})).await.unwrap();
    h.wait_for_status(&caller, &stack, "SUSPEND_COMPLETE").await;

    h.api.stack_action(&caller, &stack, &json!({"resume": null})).await.unwrap();
    h.wait_for_status(&caller, &stack, "RESUME_COMPLETE").await;
    h.wait_for_status(&caller, &group, "RESUME_COMPLETE").await;
    let resumed = all_statuses(&h, &caller, &stack).await;
    assert_eq!(resumed.len(), suspended.len());
    assert!(resumed.iter().all(|(_, s)| s == "RESUME_COMPLETE"), "{resumed:?}");
    // Dependency order: the launch configuration before the group.
    let group_started = event_position(&h, &caller, &stack, "Group", "RESUME_IN_PROGRESS").await;
    assert!(event_position(&h, &caller, &stack, "Config", "RESUME_COMPLETE").await < group_started);

    // Resumed, the policy scales the group again.
    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 2).await;
    wait_for_lb_ips(&h, &caller, &stack, 2).await;
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
    // created, and gets them again after each signal (the stack's
    // metadata refresh, test_autoscaling.py's test_scaling_meta_update).
    wait_for_lb_ips(&h, &caller, &stack, 1).await;

    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 2).await;
    wait_for_lb_ips(&h, &caller, &stack, 2).await;

    h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await.unwrap();
    wait_for_size(&h, &caller, &stack, 3).await;
    wait_for_lb_ips(&h, &caller, &stack, 3).await;
    // At MaxSize a signal changes nothing.
    let _ = h.api.signal_resource(&caller, &stack, "ScaleUp", &json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_for_size(&h, &caller, &stack, 3).await;
    let group = h.api.show_resource(&caller, &stack, "Group", &q(&[])).await.unwrap();
    assert_eq!(group["resource"]["resource_status"], json!("CREATE_COMPLETE"), "{group}");
}
