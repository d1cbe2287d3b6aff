//! The read side of `service::Orchestration` over rows written the way the
//! engine leaves them (a stored stack, replaced and live resource rows,
//! events with known order): resource lists and filters, event order,
//! markers and limits, outputs resolved from live resources, lookups and
//! tenant scoping. Deterministic: no traversal runs.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service_support;

use serde_json::{json, Value};

use keelson_stack_engine::service::{QueryParams, StackRef};
use keelson_stack_engine::store::{self, NewEvent, NewResource, StackRow};
use service_support::*;

fn q(pairs: &[(&str, &str)]) -> QueryParams {
    QueryParams::from_pairs(pairs)
}

fn template() -> Value {
    json!({
        "heat_template_version": "2021-04-16",
        "description": "seeded",
        "parameters": {"v": {"type": "string", "default": "one"}},
        "resources": {
            "tr": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_param": "v"}}},
            "val": {"type": "OS::Heat::Value", "description": "joined",
                    "properties": {"value": {"list_join": ["-", [{"get_attr": ["tr", "output"]}, "x"]]}}}
        },
        "outputs": {
            "tr_out": {"description": "output of tr", "value": {"get_attr": ["tr", "output"]}},
            "ref": {"value": {"get_resource": "tr"}},
            "bad": {"value": {"get_attr": ["val", "value", "nope"]}}
        }
    })
}

/// Stores a COMPLETE stack "s" with tr (replaced once: an old
/// DELETE_COMPLETE row and the live row) and val, plus six events.
async fn seed(h: &Harness, tenant: &str) -> (StackRow, Vec<String>) {
    let mut tx = h.db.begin().await.unwrap();
    let env = json!({"parameters": {"v": "alpha"}, "parameter_defaults": {}, "resource_registry": {"resources": {}},
                     "encrypted_param_names": [], "event_sinks": []});
    let tid = store::templates::insert(&mut tx, &template(), &Default::default(), &env).await.unwrap();
    let stack = StackRow {
        id: uuid::Uuid::new_v4().to_string(),
        name: "s".into(),
        raw_template_id: tid,
        tenant: tenant.into(),
        username: "admin".into(),
        user_id: "admin".into(),
        disable_rollback: true,
        action: "CREATE".parse().unwrap(),
        status: "COMPLETE".parse().unwrap(),
        status_reason: "Stack CREATE completed successfully".into(),
        created_at: Some(keelson_db::now()),
        ..Default::default()
    };
    store::stacks::insert(&mut tx, &stack).await.unwrap();
    tx.commit().await.unwrap();

    let resource = |name: &str, ty: &str, action: &str, status: &str, requires: Vec<i64>, props: Value| NewResource {
        stack_id: stack.id.clone(),
        root_stack_id: stack.id.clone(),
        name: name.into(),
        resource_type: ty.into(),
        physical_resource_id: Some(format!("s-{name}-{action}")),
        properties_data: Some(props),
        requires,
        action: action.parse().unwrap(),
        status: status.parse().unwrap(),
        status_reason: "state changed".into(),
        current_template_id: Some(tid),
        ..Default::default()
    };
    let old_tr = store::resources::insert(
        &h.db,
        &resource("tr", "OS::Heat::TestResource", "DELETE", "COMPLETE", vec![], json!({"value": "old"})),
    )
    .await
    .unwrap();
    let tr = store::resources::insert(
        &h.db,
        &resource("tr", "OS::Heat::TestResource", "CREATE", "COMPLETE", vec![], json!({"value": "alpha"})),
    )
    .await
    .unwrap();
    store::resources::data_set(&h.db, tr.id, "value", "alpha", false).await.unwrap();
    store::resources::data_set(&h.db, old_tr.id, "value", "old", false).await.unwrap();
    store::resources::insert(
        &h.db,
        &resource(
            "val",
            "OS::Heat::Value",
            "CREATE",
            "COMPLETE",
            vec![tr.id],
            json!({"value": "alpha-x", "type": null}),
        ),
    )
    .await
    .unwrap();

    let mut uuids = Vec::new();
    for (name, ty, action, status, reason) in [
        ("s", "OS::Heat::Stack", "CREATE", "IN_PROGRESS", "Stack CREATE started"),
        ("tr", "OS::Heat::TestResource", "CREATE", "IN_PROGRESS", "state changed"),
        ("tr", "OS::Heat::TestResource", "CREATE", "COMPLETE", "state changed"),
        ("val", "OS::Heat::Value", "CREATE", "IN_PROGRESS", "state changed"),
        ("val", "OS::Heat::Value", "CREATE", "COMPLETE", "state changed"),
        ("s", "OS::Heat::Stack", "CREATE", "COMPLETE", "Stack CREATE completed successfully"),
    ] {
        let uuid = store::events::insert(
            &h.db,
            &NewEvent {
                stack_id: stack.id.clone(),
                resource_name: name.into(),
                physical_resource_id: Some(if name == "s" { stack.id.clone() } else { format!("s-{name}") }),
                resource_action: action.into(),
                resource_status: status.into(),
                resource_status_reason: reason.into(),
                resource_type: ty.into(),
                resource_properties: (name == "tr").then(|| json!({"value": "alpha"})),
            },
        )
        .await
        .unwrap();
        uuids.push(uuid);
    }
    (stack, uuids)
}

fn ids(v: &Value, key: &str) -> Vec<String> {
    v[key].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_resolves_parameters_and_outputs_from_live_rows() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let (stack, _) = seed(&h, "admin").await;
    let sref = StackRef::new("s", &stack.id);

    let shown = h.api.show_stack(&caller, &sref, &q(&[])).await.unwrap();
    let doc = &shown["stack"];
    assert_eq!(doc["stack_status"], json!("CREATE_COMPLETE"));
    assert_eq!(doc["description"], json!("seeded"));
    assert_eq!(doc["parameters"]["v"], json!("alpha"));
    assert_eq!(doc["parameters"]["OS::stack_id"], json!(stack.id));
    assert_eq!(doc["parameters"]["OS::project_id"], json!("admin"));
    assert_eq!(doc["tags"], json!([]));
    let outputs = doc["outputs"].as_array().unwrap();
    assert_eq!(outputs[0], json!({"output_key": "tr_out", "description": "output of tr", "output_value": "alpha"}));
    assert_eq!(outputs[1]["output_value"], json!("s-tr-CREATE"));

    let one = h.api.show_output(&caller, &sref, "tr_out").await.unwrap();
    assert_eq!(one["output"]["output_value"], json!("alpha"));
    let list = h.api.list_outputs(&caller, &sref).await.unwrap();
    assert_eq!(
        list,
        json!({"outputs": [
            {"output_key": "tr_out", "description": "output of tr"},
            {"output_key": "ref", "description": "No description given"},
            {"output_key": "bad", "description": "No description given"}
        ]})
    );
    // A name that does not match the id is not this stack.
    let e = h.api.show_stack(&caller, &StackRef::new("other", &stack.id), &q(&[])).await.unwrap_err();
    assert_eq!(e.message(), "The Stack (other) could not be found.");
    let e = h.api.show_stack(&member("elsewhere"), &sref, &q(&[])).await.unwrap_err();
    assert_eq!(e.http_status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_show_the_live_row_per_name() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let (stack, _) = seed(&h, "admin").await;
    let sref = StackRef::new("s", &stack.id);

    let listed = h.api.list_resources(&caller, &sref, &q(&[])).await.unwrap();
    let list = listed["resources"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{listed}");
    let tr = list.iter().find(|r| r["resource_name"] == "tr").unwrap();
    assert_eq!(tr["physical_resource_id"], json!("s-tr-CREATE"));
    assert_eq!(tr["logical_resource_id"], json!("tr"));
    assert_eq!(tr["required_by"], json!(["val"]));
    assert_eq!(tr["links"][1], json!({"href": format!("/v1/admin/stacks/s/{}", stack.id), "rel": "stack"}));

    let filtered = h.api.list_resources(&caller, &sref, &q(&[("name", "val")])).await.unwrap();
    assert_eq!(filtered["resources"].as_array().unwrap().len(), 1);
    let by_status =
        h.api.list_resources(&caller, &sref, &q(&[("status", "CREATE_COMPLETE"), ("type", "Value")])).await.unwrap();
    assert_eq!(by_status["resources"][0]["resource_name"], json!("val"));
    let none = h.api.list_resources(&caller, &sref, &q(&[("status", "FAILED")])).await.unwrap();
    assert_eq!(none["resources"], json!([]));
    let e = h.api.list_resources(&caller, &sref, &q(&[("with_detail", "yes")])).await.unwrap_err();
    assert_eq!(e.message(), "Unrecognized value \"yes\" for \"with_detail\", acceptable values are: true, false.");

    let detail = h.api.list_resources(&caller, &sref, &q(&[("with_detail", "true"), ("name", "val")])).await.unwrap();
    assert_eq!(detail["resources"][0]["description"], json!("joined"));
    assert_eq!(detail["resources"][0]["attributes"], json!({"value": "alpha-x"}));

    let shown = h.api.show_resource(&caller, &sref, "tr", &q(&[("with_attr", "output")])).await.unwrap();
    assert_eq!(shown["resource"]["attributes"], json!({"output": "alpha"}));
    assert_eq!(shown["resource"]["resource_status"], json!("CREATE_COMPLETE"));
    let meta = h.api.resource_metadata(&caller, &sref, "val").await.unwrap();
    assert_eq!(meta, json!({"metadata": {}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_order_marker_limit_and_filters() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let (stack, uuids) = seed(&h, "admin").await;
    let sref = StackRef::new("s", &stack.id);

    let newest_first = h.api.list_events(&caller, &sref, None, &q(&[])).await.unwrap();
    let mut reversed = uuids.clone();
    reversed.reverse();
    assert_eq!(ids(&newest_first, "events"), reversed);
    let first = &newest_first["events"][0];
    assert_eq!(first["resource_status"], json!("CREATE_COMPLETE"));
    assert_eq!(first["physical_resource_id"], json!(stack.id));
    assert_eq!(
        first["links"][0]["href"],
        json!(format!("/v1/admin/stacks/s/{}/resources/s/events/{}", stack.id, uuids[5]))
    );

    let asc = h.api.list_events(&caller, &sref, None, &q(&[("sort_dir", "asc")])).await.unwrap();
    assert_eq!(ids(&asc, "events"), uuids);
    let after = h
        .api
        .list_events(&caller, &sref, None, &q(&[("sort_dir", "asc"), ("marker", &uuids[1]), ("limit", "2")]))
        .await
        .unwrap();
    assert_eq!(ids(&after, "events"), uuids[2..4].to_vec());
    let before = h.api.list_events(&caller, &sref, None, &q(&[("marker", &uuids[3])])).await.unwrap();
    assert_eq!(ids(&before, "events"), vec![uuids[2].clone(), uuids[1].clone(), uuids[0].clone()]);
    let last = h.api.list_events(&caller, &sref, None, &q(&[("limit", "1"), ("sort_dir", "desc")])).await.unwrap();
    assert_eq!(ids(&last, "events"), vec![uuids[5].clone()]);
    let keyed = h.api.list_events(&caller, &sref, None, &q(&[("sort_keys", "event_time")])).await.unwrap();
    assert_eq!(ids(&keyed, "events"), uuids, "a sort key without direction sorts ascending");

    let completes = h
        .api
        .list_events(&caller, &sref, None, &q(&[("resource_status", "COMPLETE"), ("sort_dir", "asc")]))
        .await
        .unwrap();
    assert_eq!(ids(&completes, "events"), vec![uuids[2].clone(), uuids[4].clone(), uuids[5].clone()]);
    let typed = h.api.list_events(&caller, &sref, None, &q(&[("resource_type", "OS::Heat::Value")])).await.unwrap();
    assert_eq!(typed["events"].as_array().unwrap().len(), 2);

    let tr = h.api.list_events(&caller, &sref, Some("tr"), &q(&[("sort_dir", "asc")])).await.unwrap();
    assert_eq!(ids(&tr, "events"), uuids[1..3].to_vec());
    let e = h.api.list_events(&caller, &sref, Some("nope"), &q(&[])).await.unwrap_err();
    assert_eq!((e.http_status(), e.message().as_str()), (404, "No events found for resource nope"));

    let shown = h.api.show_event(&caller, &sref, "tr", &uuids[2]).await.unwrap();
    assert_eq!(shown["event"]["resource_type"], json!("OS::Heat::TestResource"));
    assert_eq!(shown["event"]["resource_properties"], json!({"value": "alpha"}));
    let e = h.api.show_event(&caller, &sref, "val", &uuids[2]).await.unwrap_err();
    assert_eq!(e.http_status(), 404);

    let e = h.api.list_events(&caller, &sref, None, &q(&[("limit", "-1")])).await.unwrap_err();
    assert_eq!(e.message(), "Value '-1' is invalid for 'limit' which only accepts non-negative integer.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_and_lists_are_tenant_scoped() {
    let h = Harness::start().await;
    let (stack, _) = seed(&h, "admin").await;
    seed(&h, "other").await;
    let caller = admin("admin");

    assert_eq!(h.api.lookup_stack(&caller, "s", false).await.unwrap().stack_id, stack.id);
    assert_eq!(h.api.lookup_stack(&caller, &stack.id, false).await.unwrap().stack_name, "s");
    let arn = format!("arn:openstack:heat::admin:stacks/s/{}", stack.id);
    assert_eq!(h.api.lookup_stack(&caller, &arn, false).await.unwrap().stack_id, stack.id);
    let e = h.api.lookup_stack(&member("third"), "s", false).await.unwrap_err();
    assert_eq!((e.heat_type(), e.message().as_str()), ("EntityNotFound", "The Stack (s) could not be found."));
    let e = h.api.lookup_stack(&member("third"), &stack.id, false).await.unwrap_err();
    assert_eq!(e.heat_type(), "EntityNotFound");
    let e = h.api.show_stack(&member("third"), &StackRef::new("s", &stack.id), &q(&[])).await.unwrap_err();
    assert_eq!(e.heat_type(), "EntityNotFound");
    // An admin reaches another project's stack by id (Heat's stack_get
    // for `context_is_admin`), not by name; the identity names its owner.
    let other_admin = admin("third");
    let found = h.api.lookup_stack(&other_admin, &stack.id, false).await.unwrap();
    assert_eq!((found.stack_name.as_str(), found.tenant.as_str()), ("s", "admin"));
    assert!(h.api.lookup_stack(&other_admin, "s", false).await.is_err());
    let shown = h.api.show_stack(&other_admin, &StackRef::new("s", &stack.id), &q(&[])).await.unwrap();
    assert_eq!(shown["stack"]["id"], json!(stack.id));

    let listed = h.api.list_stacks(&caller, &q(&[]), false).await.unwrap();
    assert_eq!(ids(&listed, "stacks"), vec![stack.id.clone()]);
    let detail = h.api.list_stacks(&caller, &q(&[]), true).await.unwrap();
    assert_eq!(ids(&detail, "stacks"), vec![stack.id.clone()]);
    assert!(detail["stacks"][0].get("project").is_none());

    assert_eq!(h.api.get_template(&caller, &StackRef::new("s", &stack.id)).await.unwrap(), template());
    let env = h.api.get_environment(&caller, &StackRef::new("s", &stack.id)).await.unwrap();
    assert_eq!(env["parameters"], json!({"v": "alpha"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_is_validated_before_anything_is_stored() {
    let h = Harness::start().await;
    let caller = admin("admin");
    seed(&h, "admin").await;
    let t = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::None"}}});

    let e = h.api.create_stack(&caller, &json!({"stack_name": "s", "template": t})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message().as_str()),
        ("StackExists", 409, "The Stack (s) already exists.")
    );
    let e = h.api.create_stack(&caller, &json!({"stack_name": "x"})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message().as_str()),
        ("HTTPBadRequest", 400, "No template specified")
    );
    let e = h.api.create_stack(&caller, &json!({"template": t})).await.unwrap_err();
    assert_eq!(e.message(), "No stack name specified");
    let e = h
        .api
        .create_stack(&caller, &json!({"stack_name": "x", "template_url": "http://127.0.0.1:1/t.yaml"}))
        .await
        .unwrap_err();
    assert!(e.message().starts_with("Could not retrieve template"), "{}", e.message());
    let e = h.api.create_stack(&caller, &json!({"stack_name": "9lives", "template": t})).await.unwrap_err();
    assert_eq!(e.heat_type(), "StackValidationFailed");
    assert_eq!(
        e.message(),
        "Invalid stack name 9lives must contain only alphanumeric or \"_-.\" characters, must start with alpha and must be 255 characters or less."
    );
    let e = h.api.create_stack(&caller, &json!({"stack_name": "x", "template": "heat_template_version: 2021-04-16\nresources: {a: {type: OS::No::Such}}"})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("HTTPBadRequest", "The Resource Type (OS::No::Such) could not be found.")
    );

    let circular = json!({"heat_template_version": "2021-04-16", "resources": {
        "a": {"type": "OS::Heat::None", "depends_on": ["b"]},
        "b": {"type": "OS::Heat::None", "depends_on": ["a"]}}});
    let e = h.api.create_stack(&caller, &json!({"stack_name": "circ", "template": circular})).await.unwrap_err();
    assert_eq!((e.heat_type(), e.http_status()), ("CircularDependencyException", 400));
    assert!(e.message().starts_with("Circular Dependency Found: "), "{}", e.message());

    let ranged = json!({"heat_template_version": "2021-04-16",
        "parameters": {"n": {"type": "number", "default": 2, "constraints": [{"range": {"min": 1, "max": 5}}]}},
        "resources": {}});
    let e = h
        .api
        .create_stack(&caller, &json!({"stack_name": "p", "template": ranged, "parameters": {"n": 9}}))
        .await
        .unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("StackValidationFailed", "Parameter 'n' is invalid: 9 is out of range (min: 1, max: 5)")
    );

    let bad_prop = json!({"heat_template_version": "2021-04-16", "resources": {"r": {"type": "OS::Heat::RandomString", "properties": {"length": "x"}}}});
    let e = h.api.create_stack(&caller, &json!({"stack_name": "p", "template": bad_prop})).await.unwrap_err();
    assert_eq!(e.heat_type(), "StackValidationFailed", "{}", e.message());

    let limited = keelson_stack_engine::service::ServiceSettings { max_resources_per_stack: 0, ..Default::default() };
    let h2 = Harness::start_with(limited).await;
    let e = h2.api.create_stack(&member("admin"), &json!({"stack_name": "x", "template": t})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("RequestLimitExceeded", "Request limit exceeded: Maximum resources per stack exceeded.")
    );

    // Nothing of the refused requests was stored.
    let listed = h.api.list_stacks(&caller, &q(&[]), false).await.unwrap();
    assert_eq!(listed["stacks"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_and_preview_answer_heat_shapes() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let t = json!({
        "heat_template_version": "2021-04-16",
        "description": "capture template",
        "parameters": {
            "v": {"type": "string", "default": "one"},
            "n": {"type": "number", "default": 2, "constraints": [{"range": {"min": 1, "max": 5}}]}
        },
        "resources": {
            "tr": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_param": "v"}}},
            "val": {"type": "OS::Heat::Value", "properties": {"value": {"list_join": ["-", [{"get_attr": ["tr", "output"]}, {"get_param": "v"}]]}}},
            "none": {"type": "OS::Heat::None", "depends_on": ["val"]}
        },
        "outputs": {"rs_len": {"value": {"str_replace": {"template": "len=$L", "params": {"$L": {"get_param": "n"}}}}}}
    });
    let v = h.api.validate_template(&caller, &json!({"template": t}), &q(&[])).await.unwrap();
    assert_eq!(v["Description"], json!("capture template"));
    assert_eq!(
        v["Parameters"]["n"],
        json!({"Type": "Number", "Description": "", "NoEcho": "false", "Label": "n", "Default": 2, "MinValue": 1, "MaxValue": 5})
    );
    let bad_version = json!({"heat_template_version": "2099-01-01", "resources": {}});
    let e = h.api.validate_template(&caller, &json!({"template": bad_version}), &q(&[])).await.unwrap_err();
    assert_eq!(e.heat_type(), "InvalidTemplateVersion");
    let bad_ref = json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::Value", "properties": {"value": {"get_attr": ["nope", "x"]}}}}});
    let e = h.api.validate_template(&caller, &json!({"template": bad_ref}), &q(&[])).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("InvalidTemplateReference", "The specified reference \"nope\" (in a.Properties.value) is incorrect.")
    );

    let preview = h.api.preview_stack(&caller, &json!({"stack_name": "pv", "template": t})).await.unwrap();
    let doc = &preview["stack"];
    assert_eq!(doc["id"], json!("None"));
    assert_eq!(doc["parameters"]["OS::stack_id"], json!("None"));
    assert_eq!(
        doc["outputs"],
        json!([{"output_key": "rs_len", "description": "No description given", "output_value": "len=2"}])
    );
    assert!(doc.get("stack_status").is_none());
    let resources = doc["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 3);
    let val = resources.iter().find(|r| r["resource_name"] == "val").unwrap();
    assert_eq!(val["resource_action"], json!("INIT"));
    assert_eq!(val["properties"], json!({"value": "-one", "type": null}));
    assert_eq!(val["attributes"], json!({"value": null}));
    assert_eq!(val["required_by"], json!(["none"]));
    assert_eq!(val["resource_identity"]["path"], json!("/resources/val"));
    assert!(h.api.lookup_stack(&caller, "pv", false).await.is_err(), "a preview stores nothing");

    let versions = h.api.list_template_versions(&caller).await.unwrap();
    assert!(versions["template_versions"].as_array().unwrap().len() >= 11);
    let types = h.api.list_resource_types(&caller, &q(&[])).await.unwrap();
    assert!(types["resource_types"].as_array().unwrap().contains(&json!("OS::Heat::TestResource")));
    let info = h.api.build_info(&caller).await.unwrap();
    assert_eq!(info, json!({"api": {"revision": "unknown"}, "engine": {"revision": "unknown"}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_referring_to_unknown_attributes_are_refused() {
    let h = Harness::start().await;
    let t = json!({"heat_template_version": "2021-04-16", "resources": {"tr": {"type": "OS::Heat::TestResource"}},
                   "outputs": {"bad": {"value": {"get_attr": ["tr", "no_such_attr"]}}}});
    let e = h.api.create_stack(&admin("admin"), &json!({"stack_name": "x-bad-out", "template": t})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        (
            "StackValidationFailed",
            "outputs.bad.value.get_attr: : The Referenced Attribute (tr no_such_attr) is incorrect."
        )
    );
}

/// `show` is every type's attribute (Heat's base attribute), also of a
/// type whose schema does not list it (OS::Heat::RandomString, OS::Glance::WebImage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_may_refer_to_the_show_attribute_of_any_type() {
    let h = Harness::start().await;
    let t = json!({"heat_template_version": "2021-04-16", "resources": {"n": {"type": "OS::Heat::RandomString"}},
                   "outputs": {"show": {"value": {"get_attr": ["n", "show"]}}}});
    h.api.create_stack(&admin("admin"), &json!({"stack_name": "x-show-out", "template": t})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_and_abandon_when_enabled() {
    let settings = keelson_stack_engine::service::ServiceSettings { enable_stack_abandon: true, ..Default::default() };
    let h = Harness::start_with(settings).await;
    let caller = admin("admin");
    let (stack, _) = seed(&h, "admin").await;
    let sref = StackRef::new("s", &stack.id);

    let exported = h.api.export_stack(&caller, &sref).await.unwrap();
    let mut keys: Vec<&str> = exported.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "action",
            "environment",
            "files",
            "id",
            "name",
            "project_id",
            "resources",
            "stack_user_project_id",
            "status",
            "tags",
            "template"
        ]
    );
    assert_eq!(exported["resources"]["tr"]["resource_id"], json!("s-tr-CREATE"));
    assert_eq!(exported["resources"]["tr"]["resource_data"], json!({"value": "alpha"}));
    assert_eq!(exported["template"], template());

    let abandoned = h.api.abandon_stack(&caller, &sref).await.unwrap();
    assert_eq!(abandoned["id"], json!(stack.id));
    let e = h.api.lookup_stack(&caller, "s", false).await.unwrap_err();
    assert_eq!(e.http_status(), 404);
    assert!(store::resources::list(&h.db, &stack.id).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environments_and_hidden_stacks() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let t = json!({"heat_template_version": "2021-04-16", "parameters": {"v": {"type": "string"}}, "resources": {}});
    let e = h
        .api
        .create_stack(&caller, &json!({"stack_name": "e", "template": t, "environment": {"foo": {}}}))
        .await
        .unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("HTTPBadRequest", "Environment not in valid format: environment has wrong section \"foo\"")
    );
    let e = h.api.create_stack(&caller, &json!({"stack_name": "e", "template": t})).await.unwrap_err();
    assert_eq!(e.heat_type(), "UserParameterMissing", "{}", e.message());

    // Environment files apply in order; the body's parameters win.
    let files = json!({"e1.yaml": "parameters: {v: from-e1}", "e2.yaml": "parameters: {v: from-e2}"});
    let id = h
        .api
        .create_stack(&caller, &json!({"stack_name": "e", "template": t, "files": files, "environment_files": ["e1.yaml", "e2.yaml"], "tags": "data-processing-cluster"}))
        .await
        .unwrap();
    let sref = StackRef::new("e", &id.stack_id);
    let env = h.api.get_environment(&caller, &sref).await.unwrap();
    assert_eq!(env["parameters"], json!({"v": "from-e2"}));
    assert_eq!(h.api.get_files(&caller, &sref).await.unwrap(), files);

    // Stacks tagged with a hidden tag are listed only with show_hidden.
    let listed = h.api.list_stacks(&caller, &q(&[]), false).await.unwrap();
    assert_eq!(listed["stacks"], json!([]));
    let hidden = h.api.list_stacks(&caller, &q(&[("show_hidden", "true")]), false).await.unwrap();
    assert_eq!(ids(&hidden, "stacks"), vec![id.stack_id.clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stacks_per_tenant_are_limited_for_non_admins() {
    let settings = keelson_stack_engine::service::ServiceSettings { max_stacks_per_tenant: 1, ..Default::default() };
    let h = Harness::start_with(settings).await;
    seed(&h, "demo").await;
    let t = json!({"heat_template_version": "2021-04-16", "resources": {}});
    let e = h.api.create_stack(&member("demo"), &json!({"stack_name": "two", "template": t})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message().as_str()),
        (
            "RequestLimitExceeded",
            400,
            "Request limit exceeded: You have reached the maximum stacks per tenant, 1. Please delete some stacks."
        )
    );
    // Admins are not limited.
    h.api.create_stack(&admin("demo"), &json!({"stack_name": "two", "template": t})).await.expect("admin create");
}
