//! Heat's functional ReplaceDeprecatedResourceTest without Nova: a stack
//! made with the hidden OS::Heat::SoftwareDeployments, updated to its
//! substitute OS::Heat::SoftwareDeploymentGroup, keeps the group and its
//! members (updated in place, as the update's preview says); a change to a type that is not the
//! substitute still replaces. The server is an OS::Heat::DeployedServer,
//! which the engine runs in-process.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service_support;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use keelson_stack_engine::service::{Caller, QueryParams, StackRef};
use service_support::*;

fn q(pairs: &[(&str, &str)]) -> QueryParams {
    QueryParams::from_pairs(pairs)
}

/// The functional test's template, its server a DeployedServer.
fn deployments_template() -> Value {
    json!({
        "heat_template_version": "2013-05-23",
        "resources": {
            "config": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "xxxx"}},
            "server": {"type": "OS::Heat::DeployedServer"},
            "dep": {
                "type": "OS::Heat::SoftwareDeployments",
                "properties": {
                    "config": {"get_resource": "config"},
                    "servers": {"0": {"get_resource": "server"}},
                    "signal_transport": "NO_SIGNAL",
                },
            },
        },
        "outputs": {"server": {"value": {"get_resource": "server"}}},
    })
}

/// The template with `dep` retyped to `type_name`, its properties kept.
fn retyped(type_name: &str) -> Value {
    let mut template = deployments_template();
    template["resources"]["dep"]["type"] = json!(type_name);
    template
}

/// Name to type of the stack's resources (the functional test's
/// `list_resources`).
async fn resource_types(h: &Harness, caller: &Caller, stack: &StackRef) -> BTreeMap<String, String> {
    let listed = h.api.list_resources(caller, stack, &q(&[])).await.expect("list resources");
    listed["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            let name = r["resource_name"].as_str().unwrap_or_default().to_string();
            (name, r["resource_type"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

const DEPLOYMENT: &str = "OS::Heat::SoftwareDeployment";

/// `dep`'s physical id and status, and the physical id of its member (of
/// `member_type`).
async fn dep_and_member(h: &Harness, caller: &Caller, stack: &StackRef, member_type: &str) -> (String, String, String) {
    let dep = h.api.show_resource(caller, stack, "dep", &q(&[])).await.expect("show dep");
    let nested = h.api.list_resources(caller, stack, &q(&[("nested_depth", "1")])).await.expect("nested list");
    let member = nested["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource_name"] == "0")
        .unwrap_or_else(|| panic!("no member in {nested}"));
    assert_eq!(member["resource_type"], json!(member_type));
    let id = |v: &Value| v["physical_resource_id"].as_str().unwrap_or_default().to_string();
    (id(&dep["resource"]), dep["resource"]["resource_status"].as_str().unwrap_or_default().to_string(), id(member))
}

async fn create(h: &Harness, caller: &Caller, name: &str) -> StackRef {
    let identity = h
        .api
        .create_stack(caller, &json!({"stack_name": name, "template": deployments_template()}))
        .await
        .expect("create");
    let stack = StackRef::new(name, &identity.stack_id);
    h.wait_for_status(caller, &stack, "CREATE_COMPLETE").await;
    stack
}

async fn update(h: &Harness, caller: &Caller, stack: &StackRef, template: Value) {
    h.api.update_stack(caller, stack, &json!({"template": template}), false).await.expect("update");
    h.wait_for_status(caller, stack, "UPDATE_COMPLETE").await;
}

fn types(dep: &str) -> BTreeMap<String, String> {
    [("config", "OS::Heat::SoftwareConfig"), ("dep", dep), ("server", "OS::Heat::DeployedServer")]
        .into_iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn software_deployments_become_a_deployment_group_in_place() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let stack = create(&h, &caller, "deprecated").await;
    assert_eq!(resource_types(&h, &caller, &stack).await, types("OS::Heat::SoftwareDeployments"));
    let (dep_id, dep_status, member_id) = dep_and_member(&h, &caller, &stack, DEPLOYMENT).await;
    assert_eq!(dep_status, "CREATE_COMPLETE");
    assert!(!dep_id.is_empty() && !member_id.is_empty());

    // The preview tells what the update does: the substitute updates dep.
    let preview = h
        .api
        .preview_update(
            &caller,
            &stack,
            &json!({"template": retyped("OS::Heat::SoftwareDeploymentGroup")}),
            false,
            &q(&[]),
        )
        .await
        .expect("preview");
    let changed = |kind: &str| -> Vec<String> {
        preview["resource_changes"][kind]
            .as_array()
            .expect("changes")
            .iter()
            .map(|r| r["resource_name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(changed("updated"), ["dep"], "{preview}");
    assert!(changed("replaced").is_empty(), "{preview}");

    update(&h, &caller, &stack, retyped("OS::Heat::SoftwareDeploymentGroup")).await;
    assert_eq!(resource_types(&h, &caller, &stack).await, types("OS::Heat::SoftwareDeploymentGroup"));
    // The same group (its nested stack) and the same member, updated.
    assert_eq!(
        dep_and_member(&h, &caller, &stack, DEPLOYMENT).await,
        (dep_id, "UPDATE_COMPLETE".to_string(), member_id)
    );
    let events = h.api.list_events(&caller, &stack, Some("dep"), &q(&[("sort_dir", "asc")])).await.expect("events");
    let states: Vec<String> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["resource_status"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(states, ["CREATE_IN_PROGRESS", "CREATE_COMPLETE", "UPDATE_IN_PROGRESS", "UPDATE_COMPLETE"]);
}

/// A type change to anything but the old type's substitute replaces: to
/// StructuredDeploymentGroup (same properties, another plugin), and from
/// SoftwareDeploymentGroup back to the hidden type (a substitution goes
/// one way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_another_type_replaces_the_group() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let stack = create(&h, &caller, "replaced").await;
    let (dep_id, _, member_id) = dep_and_member(&h, &caller, &stack, DEPLOYMENT).await;

    update(&h, &caller, &stack, retyped("OS::Heat::StructuredDeploymentGroup")).await;
    assert_eq!(resource_types(&h, &caller, &stack).await, types("OS::Heat::StructuredDeploymentGroup"));
    let (structured_id, status, structured_member) =
        dep_and_member(&h, &caller, &stack, "OS::Heat::StructuredDeployment").await;
    assert_eq!(status, "CREATE_COMPLETE");
    assert_ne!(structured_id, dep_id);
    assert_ne!(structured_member, member_id);

    update(&h, &caller, &stack, retyped("OS::Heat::SoftwareDeploymentGroup")).await;
    let (group_id, _, _) = dep_and_member(&h, &caller, &stack, DEPLOYMENT).await;
    assert_ne!(group_id, structured_id);
    update(&h, &caller, &stack, deployments_template()).await;
    assert_eq!(resource_types(&h, &caller, &stack).await, types("OS::Heat::SoftwareDeployments"));
    let (back_id, status, _) = dep_and_member(&h, &caller, &stack, DEPLOYMENT).await;
    assert_eq!(status, "CREATE_COMPLETE");
    assert_ne!(back_id, group_id);
}
