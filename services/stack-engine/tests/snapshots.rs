//! Stack snapshots through `service::Orchestration` on SQLite with the
//! real engine: snapshot, list, show (upstream `format_snapshot`'s keys),
//! restore after an update, delete, and Heat's error types and texts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service_support;

use std::collections::BTreeSet;

use serde_json::{json, Value};

use keelson_stack_engine::service::{Caller, QueryParams, ServiceSettings, StackRef};
use service_support::*;

/// Upstream `format_snapshot`'s keys.
const SNAPSHOT_KEYS: &[&str] = &["id", "name", "action", "status", "status_reason", "data", "creation_time"];

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn template(value: &str) -> Value {
    json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "rs": {"type": "OS::Heat::RandomString", "properties": {"length": 10}},
            "tr": {"type": "OS::Heat::TestResource", "properties": {"value": value}},
        },
        "outputs": {"rand": {"value": {"get_attr": ["rs", "value"]}}},
    })
}

async fn random_value(h: &Harness, caller: &Caller, stack: &StackRef) -> Value {
    let shown = h.api.show_stack(caller, stack, &QueryParams::default()).await.expect("show");
    let outputs = shown["stack"]["outputs"].as_array().cloned().unwrap_or_default();
    outputs.iter().find(|o| o["output_key"] == "rand").map(|o| o["output_value"].clone()).unwrap_or(Value::Null)
}

/// Polls the snapshot until its status leaves IN_PROGRESS.
async fn settled_snapshot(h: &Harness, caller: &Caller, stack: &StackRef, id: &str) -> Value {
    for _ in 0..600 {
        let shown = h.api.show_snapshot(caller, stack, id).await.expect("show snapshot");
        if shown["snapshot"]["status"] != "IN_PROGRESS" {
            return shown["snapshot"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("snapshot {id} still IN_PROGRESS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_list_show_restore_delete() {
    let h = Harness::start().await;
    let caller = member("p1");
    let id = h.api.create_stack(&caller, &json!({"stack_name": "s", "template": template("one")})).await.unwrap();
    let stack = StackRef::new("s", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    let value_before = random_value(&h, &caller, &stack).await;
    assert!(value_before.as_str().is_some_and(|v| v.len() == 10), "{value_before}");

    let created = h.api.stack_snapshot(&caller, &stack, &json!({"name": "snap"})).await.expect("snapshot");
    assert_eq!(keys(&created), SNAPSHOT_KEYS.iter().map(|k| k.to_string()).collect());
    assert_eq!((created["action"].as_str(), created["status"].as_str()), (Some("CREATE"), Some("IN_PROGRESS")));
    assert_eq!(created["name"], json!("snap"));
    assert_eq!(created["data"]["resources"], json!({}));
    let snap_id = created["id"].as_str().unwrap().to_string();
    h.wait_for_status(&caller, &stack, "SNAPSHOT_COMPLETE").await;

    let shown = settled_snapshot(&h, &caller, &stack, &snap_id).await;
    assert_eq!(keys(&shown), SNAPSHOT_KEYS.iter().map(|k| k.to_string()).collect());
    assert_eq!(shown["status"], json!("COMPLETE"));
    assert_eq!(shown["status_reason"], json!("Stack SNAPSHOT completed successfully"));
    let data = &shown["data"];
    assert_eq!((data["action"].as_str(), data["status"].as_str()), (Some("SNAPSHOT"), Some("COMPLETE")));
    assert_eq!(data["template"], template("one"));
    assert_eq!(data["id"], json!(id.stack_id));
    let rs = &data["resources"]["rs"];
    assert_eq!(
        keys(rs),
        ["name", "resource_id", "type", "action", "status", "metadata", "resource_data"]
            .iter()
            .map(|k| k.to_string())
            .collect()
    );
    assert_eq!((rs["action"].as_str(), rs["status"].as_str()), (Some("SNAPSHOT"), Some("COMPLETE")));
    assert_eq!(rs["resource_data"]["value"], value_before);
    assert_eq!(data["resources"]["tr"]["type"], json!("OS::Heat::TestResource"));

    let listed = h.api.list_snapshots(&caller, &stack).await.unwrap();
    let all = listed["snapshots"].as_array().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0], shown);

    // An update changes the template (and the stack's resources) ...
    let mut changed = template("two");
    changed["resources"]["extra"] = json!({"type": "OS::Heat::None"});
    h.api.update_stack(&caller, &stack, &json!({"template": changed}), false).await.unwrap();
    h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    // ... the restore brings back the snapshot's.
    h.api.restore_snapshot(&caller, &stack, &snap_id).await.expect("restore");
    let restored = h.wait_for_status(&caller, &stack, "RESTORE_COMPLETE").await;
    assert_eq!(restored["stack"]["stack_status_reason"], json!("Stack RESTORE completed successfully"));
    assert_eq!(h.api.get_template(&caller, &stack).await.unwrap(), template("one"));
    assert_eq!(random_value(&h, &caller, &stack).await, value_before);
    let resources = h.api.list_resources(&caller, &stack, &QueryParams::default()).await.unwrap();
    let names: BTreeSet<&str> =
        resources["resources"].as_array().unwrap().iter().filter_map(|r| r["resource_name"].as_str()).collect();
    assert_eq!(names, ["rs", "tr"].into_iter().collect());

    h.api.delete_snapshot(&caller, &stack, &snap_id).await.expect("delete");
    assert_eq!(h.api.list_snapshots(&caller, &stack).await.unwrap(), json!({"snapshots": []}));
    let e = h.api.show_snapshot(&caller, &stack, &snap_id).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("NotFound", 404));
    assert_eq!(e.message(), format!("Snapshot with id {snap_id} not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_errors_carry_heat_types_and_texts() {
    let settings = ServiceSettings { max_snapshots_per_stack: 1, ..Default::default() };
    let h = Harness::start_with(settings).await;
    let caller = member("p1");
    let id = h.api.create_stack(&caller, &json!({"stack_name": "s", "template": template("one")})).await.unwrap();
    let stack = StackRef::new("s", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;

    // A missing snapshot: Heat's NotFound.
    let e = h.api.restore_snapshot(&caller, &stack, "nope").await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("NotFound", 404));
    assert_eq!(e.message(), "Snapshot with id nope not found");

    let first = h.api.stack_snapshot(&caller, &stack, &json!({})).await.unwrap();
    assert_eq!(first["name"], Value::Null);
    let first_id = first["id"].as_str().unwrap().to_string();
    // Still IN_PROGRESS or already done, a second one is refused either way.
    let e = h.api.stack_snapshot(&caller, &stack, &json!({})).await.unwrap_err();
    assert_eq!(e.http_status(), if e.heat_type() == "ActionInProgress" { 409 } else { 400 });
    h.wait_for_status(&caller, &stack, "SNAPSHOT_COMPLETE").await;
    settled_snapshot(&h, &caller, &stack, &first_id).await;
    let e = h.api.stack_snapshot(&caller, &stack, &json!({})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("RequestLimitExceeded", 400));
    assert_eq!(
        e.message(),
        "Request limit exceeded: You have reached the maximum snapshots per stack, 1. Please delete some snapshots."
    );
    // Admins are not limited.
    let admin_snap = h.api.stack_snapshot(&admin("p1"), &stack, &json!({"name": "a"})).await.expect("admin");
    h.wait_for_status(&caller, &stack, "SNAPSHOT_COMPLETE").await;
    settled_snapshot(&h, &caller, &stack, admin_snap["id"].as_str().unwrap()).await;

    // Another stack's snapshot.
    let other = h.api.create_stack(&caller, &json!({"stack_name": "o", "template": template("x")})).await.unwrap();
    let other = StackRef::new("o", &other.stack_id);
    h.wait_for_status(&caller, &other, "CREATE_COMPLETE").await;
    let e = h.api.show_snapshot(&caller, &other, &first_id).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("SnapshotNotFound", 404));
    assert_eq!(e.message(), format!("The Snapshot ({first_id}) for Stack (o) could not be found."));

    // Another project's snapshot is not found, even on its own stack id.
    let e = h.api.show_snapshot(&member("p2"), &stack, &first_id).await.unwrap_err();
    assert!(e.is_not_found());

    // A stack in progress cannot be snapshot.
    let slow = json!({
        "heat_template_version": "2018-08-31",
        "resources": {"tr": {"type": "OS::Heat::TestResource", "properties": {"wait_secs": 30}}},
    });
    let busy = h.api.create_stack(&caller, &json!({"stack_name": "busy", "template": slow})).await.unwrap();
    let busy = StackRef::new("busy", &busy.stack_id);
    let e = h.api.stack_snapshot(&caller, &busy, &json!({})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ActionInProgress", 409));
    assert_eq!(e.message(), "Stack busy already has an action (CREATE) in progress.");

    // Deleting the stack deletes its snapshots.
    h.api.delete_stack(&caller, &stack).await.unwrap();
    let listed = keelson_stack_engine::store::snapshots::list_by_stack(&h.db, &id.stack_id, "p1").await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}
