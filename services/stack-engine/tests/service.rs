//! The API operations of `service::Orchestration`, driven directly on
//! SQLite with the real engine: round trips, every 4xx text, list
//! filters/sort/pagination, event order and markers. Response key sets are
//! the ones the real heat-api 27.0.1 returned when its v1 exchanges were
//! recorded; they are written out below, nothing is read at run time.

mod service_support;

use std::collections::BTreeSet;

use serde_json::{json, Value};

use keelson_stack_engine::service::{QueryParams, StackRef};
use service_support::*;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// `stack_show` in the capture.
const SHOW_KEYS: &[&str] = &[
    "stack_name",
    "id",
    "links",
    "creation_time",
    "updated_time",
    "deletion_time",
    "notification_topics",
    "parameters",
    "description",
    "template_description",
    "capabilities",
    "disable_rollback",
    "timeout_mins",
    "stack_owner",
    "parent",
    "stack_user_project_id",
    "tags",
    "stack_status",
    "stack_status_reason",
    "outputs",
];
/// `stack_list` in the capture (an admin caller: `project` included).
const SUMMARY_KEYS: &[&str] = &[
    "id",
    "links",
    "project",
    "stack_name",
    "description",
    "stack_status",
    "stack_status_reason",
    "creation_time",
    "updated_time",
    "deletion_time",
    "stack_owner",
    "parent",
    "stack_user_project_id",
    "tags",
];
/// `resource_list` in the capture.
const RESOURCE_KEYS: &[&str] = &[
    "updated_time",
    "creation_time",
    "logical_resource_id",
    "resource_name",
    "physical_resource_id",
    "resource_status",
    "resource_status_reason",
    "resource_type",
    "links",
    "required_by",
];
/// `event_list` in the capture.
const EVENT_KEYS: &[&str] = &[
    "id",
    "links",
    "event_time",
    "logical_resource_id",
    "resource_name",
    "physical_resource_id",
    "resource_status",
    "resource_status_reason",
];

fn capture_template() -> Value {
    json!({
        "heat_template_version": "2021-04-16",
        "description": "capture template",
        "parameters": {
            "v": {"type": "string", "default": "one"},
            "n": {"type": "number", "default": 2, "constraints": [{"range": {"min": 1, "max": 5}}]}
        },
        "resources": {
            "rs": {"type": "OS::Heat::RandomString", "properties": {"length": 10}},
            "tr": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_param": "v"}}},
            "val": {"type": "OS::Heat::Value", "properties": {"value": {"list_join": ["-", [{"get_attr": ["tr", "output"]}, {"get_param": "v"}]]}}},
            "none": {"type": "OS::Heat::None", "depends_on": ["val", "rs"]}
        },
        "outputs": {
            "tr_out": {"description": "output of tr", "value": {"get_attr": ["tr", "output"]}},
            "val_out": {"value": {"get_attr": ["val", "value"]}},
            "rs_len": {"value": {"str_replace": {"template": "len=$L", "params": {"$L": {"get_param": "n"}}}}}
        }
    })
}

fn q(pairs: &[(&str, &str)]) -> QueryParams {
    QueryParams::from_pairs(pairs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_show_update_delete_round_trip() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let identity = h
        .api
        .create_stack(&caller, &json!({"stack_name": "cap", "template": capture_template(), "parameters": {"v": "alpha"}, "timeout_mins": 10}))
        .await
        .expect("create");
    assert_eq!((identity.tenant.as_str(), identity.stack_name.as_str()), ("admin", "cap"));
    let stack = StackRef::new("cap", &identity.stack_id);
    let shown = h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;

    let doc = &shown["stack"];
    assert_eq!(keys(doc), set(SHOW_KEYS));
    assert_eq!(doc["links"][0]["href"], json!(format!("/v1/admin/stacks/cap/{}", identity.stack_id)));
    assert_eq!(doc["parameters"]["v"], json!("alpha"));
    assert_eq!(doc["parameters"]["n"], json!("2"));
    assert_eq!(doc["parameters"]["OS::stack_name"], json!("cap"));
    assert_eq!(doc["disable_rollback"], json!(true));
    assert_eq!(doc["timeout_mins"], json!(10));
    assert_eq!(doc["stack_status_reason"], json!("Stack CREATE completed successfully"));
    let outputs = doc["outputs"].as_array().expect("outputs");
    let tr_out = outputs.iter().find(|o| o["output_key"] == "tr_out").expect("tr_out");
    assert_eq!(tr_out, &json!({"output_key": "tr_out", "description": "output of tr", "output_value": "alpha"}));
    let val_out = outputs.iter().find(|o| o["output_key"] == "val_out").expect("val_out");
    assert_eq!(val_out["output_value"], json!("alpha-alpha"));
    assert_eq!(val_out["description"], json!("No description given"));

    // resolve_outputs=false drops the outputs.
    let no_outputs = h.api.show_stack(&caller, &stack, &q(&[("resolve_outputs", "false")])).await.unwrap();
    assert!(no_outputs["stack"].get("outputs").is_none());

    // Lookup by name and by id.
    let by_name = h.api.lookup_stack(&caller, "cap", false).await.unwrap();
    assert_eq!(by_name.stack_id, identity.stack_id);
    let by_id = h.api.lookup_stack(&caller, &identity.stack_id, false).await.unwrap();
    assert_eq!(by_id.stack_name, "cap");

    // List.
    let listed = h.api.list_stacks(&caller, &q(&[]), false).await.unwrap();
    let stacks = listed["stacks"].as_array().unwrap();
    assert_eq!(stacks.len(), 1);
    assert_eq!(keys(&stacks[0]), set(SUMMARY_KEYS));
    assert_eq!(stacks[0]["description"], json!(""));
    assert_eq!(stacks[0]["tags"], Value::Null);

    // Template, environment, files.
    assert_eq!(h.api.get_template(&caller, &stack).await.unwrap(), capture_template());
    let env = h.api.get_environment(&caller, &stack).await.unwrap();
    assert_eq!(env["parameters"], json!({"v": "alpha"}));
    assert_eq!(
        keys(&env),
        set(&["resource_registry", "parameters", "parameter_defaults", "event_sinks", "encrypted_param_names"])
    );
    assert_eq!(h.api.get_files(&caller, &stack).await.unwrap(), json!({}));

    // Resources.
    let resources = h.api.list_resources(&caller, &stack, &q(&[])).await.unwrap();
    let list = resources["resources"].as_array().unwrap();
    assert_eq!(list.len(), 4);
    for r in list {
        assert_eq!(keys(r), set(RESOURCE_KEYS), "{r}");
        assert_eq!(r["resource_status"], json!("CREATE_COMPLETE"));
    }
    let tr = list.iter().find(|r| r["resource_name"] == "tr").unwrap();
    assert_eq!(tr["required_by"], json!(["val"]));
    assert_eq!(
        tr["links"],
        json!([
            {"href": format!("/v1/admin/stacks/cap/{}/resources/tr", identity.stack_id), "rel": "self"},
            {"href": format!("/v1/admin/stacks/cap/{}", identity.stack_id), "rel": "stack"}
        ])
    );
    let detailed = h.api.list_resources(&caller, &stack, &q(&[("with_detail", "true")])).await.unwrap();
    for r in detailed["resources"].as_array().unwrap() {
        let mut expected = set(RESOURCE_KEYS);
        expected.insert("description".into());
        expected.insert("attributes".into());
        assert_eq!(keys(r), expected);
    }
    let shown_tr = h.api.show_resource(&caller, &stack, "tr", &q(&[])).await.unwrap();
    assert_eq!(shown_tr["resource"]["attributes"]["output"], json!("alpha"));
    assert_eq!(shown_tr["resource"]["description"], json!(""));
    let meta = h.api.resource_metadata(&caller, &stack, "tr").await.unwrap();
    assert_eq!(meta, json!({"metadata": {}}));

    // Outputs.
    let outputs = h.api.list_outputs(&caller, &stack).await.unwrap();
    assert_eq!(outputs["outputs"][0], json!({"output_key": "tr_out", "description": "output of tr"}));
    let one = h.api.show_output(&caller, &stack, "rs_len").await.unwrap();
    assert_eq!(
        one,
        json!({"output": {"output_key": "rs_len", "description": "No description given", "output_value": "len=2"}})
    );

    // Events: newest first by default, chronological with sort_dir=asc.
    let events = h.api.list_events(&caller, &stack, None, &q(&[])).await.unwrap();
    let list = events["events"].as_array().unwrap();
    assert!(list.len() >= 10, "{events}");
    assert_eq!(keys(&list[0]), set(EVENT_KEYS));
    assert_eq!(list[0]["resource_name"], json!("cap"));
    assert_eq!(list[0]["resource_status"], json!("CREATE_COMPLETE"));
    let asc = h.api.list_events(&caller, &stack, None, &q(&[("sort_dir", "asc")])).await.unwrap();
    let asc = asc["events"].as_array().unwrap().clone();
    assert_eq!(asc[0]["resource_status_reason"], json!("Stack CREATE started"));
    assert_eq!(asc.last().unwrap()["id"], list[0]["id"]);
    // marker: everything after the given event, in the same order.
    let marker = asc[2]["id"].as_str().unwrap().to_string();
    let after =
        h.api.list_events(&caller, &stack, None, &q(&[("sort_dir", "asc"), ("marker", &marker)])).await.unwrap();
    assert_eq!(after["events"].as_array().unwrap().as_slice(), &asc[3..]);
    let limited = h.api.list_events(&caller, &stack, None, &q(&[("sort_dir", "desc"), ("limit", "1")])).await.unwrap();
    assert_eq!(limited["events"].as_array().unwrap().len(), 1);
    // Per resource, and the detail of one event.
    let tr_events = h.api.list_events(&caller, &stack, Some("tr"), &q(&[])).await.unwrap();
    let tr_events = tr_events["events"].as_array().unwrap();
    assert!(tr_events.iter().all(|e| e["resource_name"] == "tr"));
    let event_id = tr_events[0]["id"].as_str().unwrap();
    let event = h.api.show_event(&caller, &stack, "tr", event_id).await.unwrap();
    let mut detail_keys = set(EVENT_KEYS);
    detail_keys.insert("resource_type".into());
    detail_keys.insert("resource_properties".into());
    assert_eq!(keys(&event["event"]), detail_keys);
    assert_eq!(event["event"]["resource_type"], json!("OS::Heat::TestResource"));

    // PATCH: parameters merge, the template is reused.
    h.api.update_stack(&caller, &stack, &json!({"parameters": {"v": "gamma"}}), true).await.expect("patch");
    let after_patch = h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(after_patch["stack"]["parameters"]["v"], json!("gamma"));
    assert_eq!(after_patch["stack"]["parameters"]["n"], json!("2"));
    // PATCH with an out-of-range value: the constraint text of Heat.
    let e = h.api.update_stack(&caller, &stack, &json!({"parameters": {"n": 9}}), true).await.unwrap_err();
    assert_eq!(e.heat_type(), "StackValidationFailed");
    assert_eq!(e.message(), "Parameter 'n' is invalid: 9 is out of range (min: 1, max: 5)");

    // PUT replaces template and parameters.
    let mut t2 = capture_template();
    t2["resources"]["added"] = json!({"type": "OS::Heat::None"});
    h.api
        .update_stack(&caller, &stack, &json!({"template": t2, "parameters": {"v": "beta"}}), false)
        .await
        .expect("put");
    let after_put = h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(after_put["stack"]["parameters"]["v"], json!("beta"));
    let resources = h.api.list_resources(&caller, &stack, &q(&[])).await.unwrap();
    assert_eq!(resources["resources"].as_array().unwrap().len(), 5);

    // Delete: the stack goes DELETE_COMPLETE, by name it is gone.
    h.api.delete_stack(&caller, &stack).await.expect("delete");
    h.wait_for_status(&caller, &stack, "DELETE_COMPLETE").await;
    let e = h.api.lookup_stack(&caller, "cap", false).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("EntityNotFound", 404));
    assert_eq!(e.message(), "The Stack (cap) could not be found.");
    let e = h.api.delete_stack(&caller, &stack).await.unwrap_err();
    assert_eq!((e.heat_type(), e.message().as_str()), ("EntityNotFound", "The Stack (cap) could not be found."));
    let listed = h.api.list_stacks(&caller, &q(&[]), false).await.unwrap();
    assert_eq!(listed["stacks"], json!([]));
    let deleted = h.api.list_stacks(&caller, &q(&[("show_deleted", "true")]), false).await.unwrap();
    assert_eq!(deleted["stacks"][0]["stack_status"], json!("DELETE_COMPLETE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_errors_carry_heat_types_and_texts() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let t = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::None"}}});

    let e = h.api.create_stack(&caller, &json!({"stack_name": "x"})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message().as_str()),
        ("HTTPBadRequest", 400, "No template specified")
    );
    let e = h.api.create_stack(&caller, &json!({"template": t})).await.unwrap_err();
    assert_eq!(e.message(), "No stack name specified");
    // Heat's enforce_stack before validation: a type the caller may not
    // use is 403 even where this engine has no plugin for it (Heat's
    // RoleBasedExposureTest); an admin is told it is unknown.
    let aggregate = json!({"heat_template_version": "2021-04-16",
                           "resources": {"a": {"type": "OS::Nova::HostAggregate"}}});
    let body = json!({"stack_name": "agg", "template": aggregate});
    let e = h.api.create_stack(&member("admin"), &body).await.unwrap_err();
    assert_eq!(
        (e.http_status(), e.message()),
        (403, "You are not authorized to use resource_types:OS::Nova::HostAggregate.".into())
    );
    let e = h.api.create_stack(&caller, &body).await.unwrap_err();
    assert_eq!(e.http_status(), 400);
    let e = h.api.create_stack(&caller, &json!({"stack_name": "9lives", "template": t})).await.unwrap_err();
    assert_eq!(e.heat_type(), "StackValidationFailed");
    assert_eq!(
        e.message(),
        "Invalid stack name 9lives must contain only alphanumeric or \"_-.\" characters, must start with alpha and must be 255 characters or less."
    );
    let e = h
        .api
        .create_stack(&caller, &json!({"stack_name": "x", "template_url": "http://127.0.0.1:1/t.yaml"}))
        .await
        .unwrap_err();
    assert_eq!(e.heat_type(), "HTTPBadRequest");
    assert!(e.message().starts_with("Could not retrieve template"));

    h.api.create_stack(&caller, &json!({"stack_name": "dup", "template": t})).await.expect("create");
    let e = h.api.create_stack(&caller, &json!({"stack_name": "dup", "template": t})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("StackExists", 409));
    assert_eq!(e.message(), "The Stack (dup) already exists.");

    let circular = json!({"heat_template_version": "2021-04-16", "resources": {
        "a": {"type": "OS::Heat::None", "depends_on": ["b"]},
        "b": {"type": "OS::Heat::None", "depends_on": ["a"]}}});
    let e = h.api.create_stack(&caller, &json!({"stack_name": "circ", "template": circular})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("CircularDependencyException", 400));

    let unknown = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::No::Such"}}});
    let e = h.api.create_stack(&caller, &json!({"stack_name": "u", "template": unknown})).await.unwrap_err();
    assert_eq!(e.http_status(), 400);
    assert_eq!(e.message(), "The Resource Type (OS::No::Such) could not be found.");
    // One of Heat's types keelson has no plugin for; without Keystone
    // there is no catalog to say its service is missing.
    let share = json!({"heat_template_version": "2015-10-15", "resources": {"a": {"type": "OS::Manila::Share",
        "properties": {"share_protocol": "NFS", "size": 1}}}});
    let e = h.api.create_stack(&caller, &json!({"stack_name": "m", "template": share})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("HTTPBadRequest", 400));
    assert_eq!(e.message(), "The Resource Type (OS::Manila::Share) is not implemented by keelson.");
    let e = h.api.resource_type_schema(&caller, "OS::Manila::Share", &q(&[])).await.unwrap_err();
    assert_eq!(e.http_status(), 404);

    // Registry mappings resolve as chains; a loop is refused, not followed.
    let mapped = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "My::A"}}});
    let chain = json!({"resource_registry": {"My::A": "My::B", "My::B": "OS::Heat::None"}});
    h.api
        .validate_template(&caller, &json!({"template": mapped, "environment": chain}), &q(&[]))
        .await
        .expect("a chain of mappings validates");
    let looped = json!({"resource_registry": {"My::A": "My::B", "My::B": "My::A"}});
    let body = json!({"stack_name": "loop", "template": mapped, "environment": looped});
    let e = h.api.create_stack(&caller, &body).await.unwrap_err();
    assert_eq!(e.http_status(), 400);
    assert_eq!(e.message(), "The resource_registry maps the Resource Type (My::A) in a loop: My::A -> My::B -> My::A");

    let bad_version = json!({"heat_template_version": "2099-01-01", "resources": {}});
    let e = h.api.validate_template(&caller, &json!({"template": bad_version}), &q(&[])).await.unwrap_err();
    assert_eq!(e.heat_type(), "InvalidTemplateVersion");

    let bad_ref = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::Value", "properties": {"value": {"get_attr": ["nope", "x"]}}}}});
    let e = h.api.validate_template(&caller, &json!({"template": bad_ref}), &q(&[])).await.unwrap_err();
    assert_eq!(e.heat_type(), "InvalidTemplateReference");
    assert_eq!(e.message(), "The specified reference \"nope\" (in a.Properties.value) is incorrect.");

    // Nothing of the failed requests was stored.
    let listed = h.api.list_stacks(&caller, &q(&[]), false).await.unwrap();
    assert_eq!(listed["stacks"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_answers_heat_shape() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let v = h.api.validate_template(&caller, &json!({"template": capture_template()}), &q(&[])).await.unwrap();
    assert_eq!(v["Description"], json!("capture template"));
    assert_eq!(
        v["Parameters"]["n"],
        json!({"Type": "Number", "Description": "", "NoEcho": "false", "Label": "n", "Default": 2, "MinValue": 1, "MaxValue": 5})
    );
    assert!(v.get("Environment").is_some());

    // ignore_errors names Heat's error codes; the one Heat has passes,
    // any other (an error's name too) is refused as Heat refuses it.
    let body = json!({"template": capture_template()});
    let ignoring = h.api.validate_template(&caller, &body, &q(&[("ignore_errors", "99001")])).await.unwrap();
    assert_eq!(ignoring, v);
    for given in ["12345", "HTTPBadRequest"] {
        let e = h.api.validate_template(&caller, &body, &q(&[("ignore_errors", given)])).await.unwrap_err();
        assert_eq!((e.heat_type(), e.http_status()), ("HTTPBadRequest", 400));
        assert_eq!(e.message(), format!("Invalid codes in ignore_errors : ['{given}']"));
    }
    // Not implemented by keelson is no ResourceTypeUnavailable: not ignored.
    let share = json!({"heat_template_version": "2015-10-15", "resources": {"a": {"type": "OS::Manila::Share"}}});
    let e = h
        .api
        .validate_template(&caller, &json!({"template": share}), &q(&[("ignore_errors", "99001")]))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "The Resource Type (OS::Manila::Share) is not implemented by keelson.");
}

/// Heat's retired types (Sahara, Senlin, Neutron LBaaS, ...) run as its
/// hidden placeholders: old stacks validate, create and delete, nothing
/// is asked of any service, and no listing shows the types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retired_types_run_as_hidden_placeholders() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let t = json!({"heat_template_version": "2015-10-15", "resources": {
        "cluster": {"type": "OS::Sahara::Cluster", "properties": {"plugin_name": "vanilla", "hadoop_version": "2.7.1"}},
        "pool": {"type": "OS::Neutron::LBaaS::Pool", "properties": {"lb_algorithm": "ROUND_ROBIN"}},
        "restarter": {"type": "OS::Heat::HARestarter", "properties": {"InstanceId": {"get_resource": "cluster"}}}},
        "outputs": {"status": {"value": {"get_attr": ["cluster", "status"]}}}});
    h.api.validate_template(&caller, &json!({"template": t}), &q(&[])).await.expect("validate");
    let identity = h.api.create_stack(&caller, &json!({"stack_name": "old", "template": t})).await.expect("create");
    let stack = StackRef::new("old", &identity.stack_id);
    let shown = h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    assert_eq!(shown["stack"]["outputs"][0]["output_value"], Value::Null);
    let resources = h.api.list_resources(&caller, &stack, &q(&[])).await.unwrap();
    let types: BTreeSet<String> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource_type"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(types, set(&["OS::Sahara::Cluster", "OS::Neutron::LBaaS::Pool", "OS::Heat::HARestarter"]));
    let listed = h.api.list_resource_types(&caller, &q(&[])).await.unwrap().to_string();
    assert!(!listed.contains("Sahara") && !listed.contains("LBaaS") && !listed.contains("HARestarter"), "{listed}");
    let e = h.api.resource_type_schema(&caller, "OS::Sahara::Cluster", &q(&[])).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("NotSupported", 400));
    h.api.delete_stack(&caller, &stack).await.expect("delete");
    h.wait_for_status(&caller, &stack, "DELETE_COMPLETE").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_filters_sort_and_pagination() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let t = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::None"}}});
    for (name, tags) in [("s-b", json!("x,y")), ("s-a", json!(["x"])), ("s-c", json!(null))] {
        let id = h.api.create_stack(&caller, &json!({"stack_name": name, "template": t, "tags": tags})).await.unwrap();
        h.wait_for_status(&caller, &StackRef::new(name, &id.stack_id), "CREATE_COMPLETE").await;
    }
    // Another tenant's stack is never seen.
    let other = admin("other");
    h.api.create_stack(&other, &json!({"stack_name": "s-z", "template": t})).await.unwrap();

    let names = |v: &Value| -> Vec<String> {
        v["stacks"].as_array().unwrap().iter().map(|s| s["stack_name"].as_str().unwrap().to_string()).collect()
    };
    let all = h.api.list_stacks(&caller, &q(&[("sort_keys", "stack_name")]), false).await.unwrap();
    assert_eq!(names(&all), vec!["s-a", "s-b", "s-c"]);
    let desc =
        h.api.list_stacks(&caller, &q(&[("sort_keys", "stack_name"), ("sort_dir", "desc")]), false).await.unwrap();
    assert_eq!(names(&desc), vec!["s-c", "s-b", "s-a"]);

    let page = h
        .api
        .list_stacks(&caller, &q(&[("sort_keys", "stack_name"), ("limit", "2"), ("with_count", "true")]), false)
        .await
        .unwrap();
    assert_eq!(names(&page), vec!["s-a", "s-b"]);
    assert_eq!(page["count"], json!(3));
    let next = page["links"][0]["href"].as_str().unwrap();
    assert_eq!(page["links"][0]["rel"], json!("next"));
    let marker = page["stacks"][1]["id"].as_str().unwrap();
    assert_eq!(next, format!("/v1/admin/stacks?sort_keys=stack_name&limit=2&with_count=true&marker={marker}"));
    let page2 = h
        .api
        .list_stacks(&caller, &q(&[("sort_keys", "stack_name"), ("limit", "2"), ("marker", marker)]), false)
        .await
        .unwrap();
    assert_eq!(names(&page2), vec!["s-c"]);
    assert!(page2.get("links").is_none());

    let by_status =
        h.api.list_stacks(&caller, &q(&[("status", "CREATE_COMPLETE"), ("name", "s-a")]), false).await.unwrap();
    assert_eq!(names(&by_status), vec!["s-a"]);
    let failed = h.api.list_stacks(&caller, &q(&[("status", "FAILED")]), false).await.unwrap();
    assert_eq!(names(&failed), Vec::<String>::new());

    let tags = h.api.list_stacks(&caller, &q(&[("tags", "x,y")]), false).await.unwrap();
    assert_eq!(names(&tags), vec!["s-b"]);
    let any = h.api.list_stacks(&caller, &q(&[("tags_any", "x"), ("sort_keys", "stack_name")]), false).await.unwrap();
    assert_eq!(names(&any), vec!["s-a", "s-b"]);
    let not_any = h.api.list_stacks(&caller, &q(&[("not_tags_any", "x")]), false).await.unwrap();
    assert_eq!(names(&not_any), vec!["s-c"]);
    let not_all =
        h.api.list_stacks(&caller, &q(&[("not_tags", "x,y"), ("sort_keys", "stack_name")]), false).await.unwrap();
    assert_eq!(names(&not_all), vec!["s-a", "s-c"]);

    let e = h.api.list_stacks(&caller, &q(&[("show_deleted", "maybe")]), false).await.unwrap_err();
    assert_eq!(e.message(), "Unrecognized value \"maybe\" for \"show_deleted\", acceptable values are: true, false.");
    let e = h.api.list_stacks(&caller, &q(&[("limit", "x")]), false).await.unwrap_err();
    assert_eq!(e.message(), "Only integer is acceptable by 'limit'.");

    // Admins list every tenant with global_tenant; others may not.
    let global = h.api.list_stacks(&caller, &q(&[("global_tenant", "true")]), false).await.unwrap();
    assert_eq!(global["stacks"].as_array().unwrap().len(), 4);
    let e = h.api.list_stacks(&member("admin"), &q(&[("global_tenant", "true")]), false).await.unwrap_err();
    assert_eq!(e.http_status(), 403);
    // A non-admin sees no `project` key.
    let plain = h.api.list_stacks(&member("admin"), &q(&[]), false).await.unwrap();
    assert!(plain["stacks"][0].get("project").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_errors_on_existing_stack() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let id = h.api.create_stack(&caller, &json!({"stack_name": "s", "template": capture_template()})).await.unwrap();
    let stack = StackRef::new("s", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;

    let e = h.api.list_resources(&caller, &stack, &q(&[("foo", "bar")])).await.unwrap_err();
    assert_eq!((e.heat_type(), e.message().as_str()), ("HTTPBadRequest", "Invalid filter parameters ['foo']"));
    let typed = h.api.list_resources(&caller, &stack, &q(&[("type", "Random")])).await.unwrap();
    assert_eq!(typed["resources"].as_array().unwrap().len(), 1);

    let e = h.api.show_resource(&caller, &stack, "nope", &q(&[])).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("ResourceNotFound", 404));
    assert_eq!(e.message(), "The Resource (nope) could not be found in Stack s.");

    let e = h.api.show_output(&caller, &stack, "nope").await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message().as_str()),
        ("NotFound", 404, "Specified output key nope not found.")
    );

    let e = h.api.signal_resource(&caller, &stack, "tr", &json!({"x": 1})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("ResourceActionNotSupported", "signal is not supported for resource.")
    );

    let e = h.api.mark_unhealthy(&caller, &stack, "tr", &json!({"foo": true})).await.unwrap_err();
    assert_eq!(e.message(), "Invalid keys in resource mark unhealthy {'foo'}");
    let e = h.api.mark_unhealthy(&caller, &stack, "tr", &json!({})).await.unwrap_err();
    assert_eq!(e.message(), "Missing mandatory (mark_unhealthy) key from mark unhealthy request");
    h.api
        .mark_unhealthy(&caller, &stack, "tr", &json!({"mark_unhealthy": true, "resource_status_reason": "broken"}))
        .await
        .expect("mark unhealthy");
    let tr = h.api.show_resource(&caller, &stack, "tr", &q(&[])).await.unwrap();
    assert_eq!(tr["resource"]["resource_status"], json!("CHECK_FAILED"));
    assert_eq!(tr["resource"]["resource_status_reason"], json!("broken"));

    let e = h.api.stack_action(&caller, &stack, &json!({"frobnicate": null})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.message().as_str()), ("HTTPBadRequest", "Invalid action frobnicate specified"));
    let e = h.api.stack_action(&caller, &stack, &json!({})).await.unwrap_err();
    assert_eq!(e.message(), "No action specified");
    let e = h.api.stack_action(&caller, &stack, &json!({"suspend": null, "resume": null})).await.unwrap_err();
    assert_eq!(e.message(), "Multiple actions specified");
    let e = h.api.stack_action(&caller, &stack, &json!({"cancel_update": null})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("NotSupported", "Cancelling update when stack is CREATE_COMPLETE is not supported.")
    );

    let e = h.api.abandon_stack(&caller, &stack).await.unwrap_err();
    assert_eq!((e.heat_type(), e.message().as_str()), ("NotSupported", "Stack Abandon is not supported."));
    let e = h.api.export_stack(&caller, &stack).await.unwrap_err();
    assert_eq!(e.message(), "Stack Abandon is not supported.");

    let e = h.api.list_events(&caller, &stack, Some("nope"), &q(&[])).await.unwrap_err();
    assert_eq!((e.http_status(), e.message().as_str()), (404, "No events found for resource nope"));

    // Another tenant's member does not see the stack at all (an admin
    // does, by id: service_views' lookups_and_lists_are_tenant_scoped).
    let e = h.api.show_stack(&member("other"), &stack, &q(&[])).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("EntityNotFound", 404));

    let e = h.api.list_services(&member("admin")).await.unwrap_err();
    assert_eq!(e.http_status(), 403);
    let services = h.api.list_services(&caller).await.unwrap();
    assert_eq!(services["services"][0]["status"], json!("up"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_and_preview() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let id = h.api.create_stack(&caller, &json!({"stack_name": "s", "template": capture_template()})).await.unwrap();
    let stack = StackRef::new("s", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;

    h.api.stack_action(&caller, &stack, &json!({"suspend": null})).await.expect("suspend");
    h.wait_for_status(&caller, &stack, "SUSPEND_COMPLETE").await;
    let e = h.api.update_stack(&caller, &stack, &json!({"parameters": {"v": "x"}}), true).await.unwrap_err();
    assert_eq!(e.message(), "Updating a stack when it is suspended is not supported.");
    h.api.stack_action(&caller, &stack, &json!({"resume": null})).await.expect("resume");
    h.wait_for_status(&caller, &stack, "RESUME_COMPLETE").await;
    h.api.stack_action(&caller, &stack, &json!({"check": null})).await.expect("check");
    h.wait_for_status(&caller, &stack, "CHECK_COMPLETE").await;

    let mut t2 = capture_template();
    t2["resources"]["added"] = json!({"type": "OS::Heat::None"});
    t2["resources"].as_object_mut().unwrap().remove("none");
    t2["resources"]["rs"]["properties"]["length"] = json!(12);
    let preview = h.api.preview_update(&caller, &stack, &json!({"template": t2}), false, &q(&[])).await.unwrap();
    let changes = &preview["resource_changes"];
    assert_eq!(keys(changes), set(&["added", "deleted", "replaced", "updated", "unchanged"]));
    let names = |k: &str| -> Vec<String> {
        changes[k].as_array().unwrap().iter().map(|r| r["resource_name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names("added"), vec!["added"]);
    assert_eq!(names("deleted"), vec!["none"]);
    assert_eq!(names("replaced"), vec!["rs"]);

    let created =
        h.api.preview_stack(&caller, &json!({"stack_name": "pv", "template": capture_template()})).await.unwrap();
    assert_eq!(created["stack"]["id"], json!("None"));
    assert_eq!(created["stack"]["resources"].as_array().unwrap().len(), 4);
    // A preview stores nothing.
    assert!(h.api.lookup_stack(&caller, "pv", false).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_keeps_merges_drops_and_clears_parameters() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let t = json!({
        "heat_template_version": "2021-04-16",
        "parameters": {
            "v": {"type": "string", "default": "one"},
            "im": {"type": "string", "default": "a", "immutable": true}
        },
        "resources": {"tr": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_param": "v"}}}},
        "outputs": {"o": {"value": {"get_attr": ["tr", "output"]}}}
    });
    let id = h
        .api
        .create_stack(&caller, &json!({"stack_name": "p", "template": t, "parameters": {"v": "given"}}))
        .await
        .unwrap();
    let stack = StackRef::new("p", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;

    let e = h.api.update_stack(&caller, &stack, &json!({"parameters": {"im": "b"}}), true).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message().as_str()),
        ("ImmutableParameterModified", 400, "The following parameters are immutable and may not be updated: im")
    );

    // An undeclared parameter is dropped by PATCH (upstream answers 202).
    h.api.update_stack(&caller, &stack, &json!({"parameters": {"zzz": 1}}), true).await.expect("patch unknown");
    let shown = h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(shown["stack"]["parameters"]["v"], json!("given"));
    assert!(shown["stack"]["parameters"].get("zzz").is_none());

    // clear_parameters falls back to the default.
    h.api.update_stack(&caller, &stack, &json!({"clear_parameters": ["v"]}), true).await.expect("clear");
    let mut shown = h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    for _ in 0..100 {
        if shown["stack"]["parameters"]["v"] == json!("one")
            && shown["stack"]["stack_status"] == json!("UPDATE_COMPLETE")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        shown = h.api.show_stack(&caller, &stack, &q(&[])).await.unwrap();
    }
    assert_eq!(shown["stack"]["parameters"]["v"], json!("one"));
    let out = h.api.show_output(&caller, &stack, "o").await.unwrap();
    assert_eq!(out["output"]["output_value"], json!("one"));

    // PUT with a parameter the template does not declare is refused.
    let e = h
        .api
        .update_stack(&caller, &stack, &json!({"template": t, "parameters": {"zzz": 1}}), false)
        .await
        .unwrap_err();
    assert_eq!(e.http_status(), 400, "{}", e.message());
}
