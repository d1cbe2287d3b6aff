//! AWS::CloudFormation::Stack on the real engine (SQLite, noauth), its
//! child template served by a loopback HTTP listener: Heat's functional
//! test_aws_stack.py (create with an output read through
//! `Fn::GetAtt [the_nested, Outputs.Foo]`, update, suspend/resume, delete),
//! the fetch failures as Heat words them (404, an answer over
//! max_template_size, a scheme other than http/https), and the type's
//! `GET /resource_types/AWS::CloudFormation::Stack` view against Heat
//! 27.0.1's schema.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{json, Value};

use keelson_stack_engine::service::{Caller, QueryParams, StackRef};
use service_support::*;

const NESTED: &str = r#"
HeatTemplateFormatVersion: '2012-12-12'
Parameters:
  KeyName:
    Type: String
Resources:
  NestedResource:
    Type: OS::Heat::RandomString
Outputs:
  Foo:
    Value: {Ref: KeyName}
  Random:
    Value: {"Fn::GetAtt": [NestedResource, value]}
"#;

type Files = Arc<Mutex<HashMap<String, String>>>;

/// A loopback HTTP server answering GET /<name> with the file of that
/// name, 404 for any other; its base URL.
async fn serve(files: Files) -> String {
    async fn get(State(files): State<Files>, Path(name): Path<String>) -> Result<String, StatusCode> {
        files.lock().unwrap().get(&name).cloned().ok_or(StatusCode::NOT_FOUND)
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/{name}", axum::routing::get(get)).with_state(files);
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn template(url: &str, key_name: &str) -> Value {
    json!({
        "HeatTemplateFormatVersion": "2012-12-12",
        "Resources": {
            "the_nested": {
                "Type": "AWS::CloudFormation::Stack",
                "Properties": {"TemplateURL": url, "Parameters": {"KeyName": key_name}}
            }
        },
        "Outputs": {
            "output_foo": {"Value": {"Fn::GetAtt": ["the_nested", "Outputs.Foo"]}},
            "output_random": {"Value": {"Fn::GetAtt": ["the_nested", "Outputs.Random"]}},
            "reference": {"Value": {"Ref": "the_nested"}}
        }
    })
}

fn q(pairs: &[(&str, &str)]) -> QueryParams {
    QueryParams::from_pairs(pairs)
}

async fn output(h: &Harness, caller: &Caller, stack: &StackRef, key: &str) -> Value {
    h.api.show_output(caller, stack, key).await.unwrap()["output"]["output_value"].clone()
}

async fn nested_id(h: &Harness, caller: &Caller, stack: &StackRef) -> String {
    let shown = h.api.show_resource(caller, stack, "the_nested", &q(&[])).await.unwrap();
    shown["resource"]["physical_resource_id"].as_str().unwrap().to_string()
}

/// Waits until the stack's status ends (COMPLETE or FAILED); the shown stack.
async fn settled(h: &Harness, caller: &Caller, stack: &StackRef) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let shown = h.api.show_stack(caller, stack, &q(&[])).await.unwrap();
        let status = shown["stack"]["stack_status"].as_str().unwrap().to_string();
        if !status.ends_with("IN_PROGRESS") || std::time::Instant::now() > deadline {
            return shown["stack"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_stack_from_a_url_is_created_updated_suspended_and_deleted() {
    let files: Files = Arc::new(Mutex::new(HashMap::from([("the.yaml".to_string(), NESTED.to_string())])));
    let url = format!("{}/the.yaml", serve(files.clone()).await);
    let h = Harness::start().await;
    let caller = admin("admin");
    let body = |key: &str| json!({"stack_name": "aws", "template": template(&url, key), "disable_rollback": true});
    let id = h.api.create_stack(&caller, &body("foo")).await.unwrap();
    let stack = StackRef::new("aws", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    assert_eq!(output(&h, &caller, &stack, "output_foo").await, json!("foo"));
    let random = output(&h, &caller, &stack, "output_random").await;
    assert_eq!(random.as_str().map(str::len), Some(32), "{random}");
    // Ref: the child's ARN (upstream get_reference_id).
    let child = nested_id(&h, &caller, &stack).await;
    let reference = output(&h, &caller, &stack, "reference").await;
    let arn = reference.as_str().unwrap();
    assert!(arn.starts_with("arn:openstack:heat::admin:stacks/aws-the_nested-") && arn.ends_with(&child), "{arn}");

    // A changed parameter updates the same child in place.
    h.api.update_stack(&caller, &stack, &body("baz"), false).await.unwrap();
    h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(output(&h, &caller, &stack, "output_foo").await, json!("baz"));
    assert_eq!(output(&h, &caller, &stack, "output_random").await, random);
    assert_eq!(nested_id(&h, &caller, &stack).await, child);

    // A new TemplateURL: the new template is fetched and the child updated.
    files.lock().unwrap().insert("new.yaml".into(), NESTED.replace("{Ref: KeyName}", "new"));
    let new_url = url.replace("the.yaml", "new.yaml");
    let new_body = json!({"stack_name": "aws", "template": template(&new_url, "baz"), "disable_rollback": true});
    h.api.update_stack(&caller, &stack, &new_body, false).await.unwrap();
    h.wait_for_status(&caller, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(output(&h, &caller, &stack, "output_foo").await, json!("new"));
    assert_eq!(nested_id(&h, &caller, &stack).await, child);

    let nested = StackRef::new("", &child);
    for (action, state) in [("suspend", "SUSPEND_COMPLETE"), ("resume", "RESUME_COMPLETE"), ("check", "CHECK_COMPLETE")]
    {
        h.api.stack_action(&caller, &stack, &json!({ action: null })).await.unwrap();
        h.wait_for_status(&caller, &stack, state).await;
        h.wait_for_status(&caller, &nested, state).await;
    }

    // Shown by id, a deleted stack is DELETE_COMPLETE (Heat shows deleted
    // stacks by id).
    h.api.delete_stack(&caller, &stack).await.unwrap();
    h.wait_for_status(&caller, &stack, "DELETE_COMPLETE").await;
    h.wait_for_status(&caller, &nested, "DELETE_COMPLETE").await;
}

/// A URL that cannot be fetched fails the resource as upstream's
/// `child_template` does: a ValueError naming the URL and urlfetch's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_failures_fail_the_create_with_heats_reason() {
    let max = 524_288;
    let files: Files = Arc::new(Mutex::new(HashMap::from([("big.yaml".to_string(), "#".repeat(max + 1))])));
    let base = serve(files).await;
    let h = Harness::start().await;
    let caller = admin("admin");
    let missing = format!("{base}/missing.yaml");
    let big = format!("{base}/big.yaml");
    let cases = [
        (missing.clone(), format!("Failed to retrieve template from {missing}")),
        (big.clone(), format!("Template exceeds maximum allowed size ({max} bytes)")),
        ("ftp://127.0.0.1/the.yaml".to_string(), "Invalid URL scheme ftp".to_string()),
    ];
    for (i, (url, why)) in cases.iter().enumerate() {
        let name = format!("bad{i}");
        let body = json!({"stack_name": name, "template": template(url, "foo"), "disable_rollback": true});
        let id = h.api.create_stack(&caller, &body).await.unwrap();
        let shown = settled(&h, &caller, &StackRef::new(&name, &id.stack_id)).await;
        assert_eq!(shown["stack_status"], json!("CREATE_FAILED"), "{shown}");
        assert_eq!(
            shown["stack_status_reason"],
            json!(format!(
                "Resource CREATE failed: ValueError: resources.the_nested: Could not fetch remote template '{url}': {why}"
            ))
        );
    }
}

/// A request's `template_url` is fetched by the same fetcher (heat-api's
/// `InstantiationData.template`); a failure is a 400 with heat-api's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_request_may_name_its_template_by_url() {
    let files: Files = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(files.clone()).await;
    let parent = template(&format!("{base}/the.yaml"), "foo").to_string();
    files.lock().unwrap().extend([("parent.json".to_string(), parent), ("the.yaml".to_string(), NESTED.to_string())]);
    let h = Harness::start().await;
    let caller = admin("admin");
    let body = json!({"stack_name": "byurl", "template_url": format!("{base}/parent.json")});
    let id = h.api.create_stack(&caller, &body).await.unwrap();
    let stack = StackRef::new("byurl", &id.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    assert_eq!(output(&h, &caller, &stack, "output_foo").await, json!("foo"));

    let missing = format!("{base}/missing.yaml");
    let e = h.api.create_stack(&caller, &json!({"stack_name": "nourl", "template_url": missing})).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.http_status(), e.message()),
        ("HTTPBadRequest", 400, format!("Could not retrieve template: Failed to retrieve template from {missing}"))
    );
    let e = h
        .api
        .create_stack(&caller, &json!({"stack_name": "nourl", "template_url": "file:///etc/passwd"}))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "Could not retrieve template: Invalid URL scheme file");
    // A template, even a null one, wins over template_url.
    let e = h
        .api
        .create_stack(&caller, &json!({"stack_name": "nourl", "template": null, "template_url": missing}))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "No template specified");
}

/// Heat 27.0.1's `GET /resource_types/AWS::CloudFormation::Stack`, from
/// `aws/cfn/stack.py`'s schema: no attributes of its own (only the base
/// `show`), a default SupportStatus (no version).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resource_type_view_is_heats() {
    let h = Harness::start().await;
    let caller = admin("admin");
    let view = h
        .api
        .resource_type_schema(&caller, "AWS::CloudFormation::Stack", &q(&[("with_description", "true")]))
        .await
        .unwrap();
    let expected = json!({
        "resource_type": "AWS::CloudFormation::Stack",
        "properties": {
            "TemplateURL": {
                "type": "string",
                "description": "The URL of a template that specifies the stack to be created as a resource.",
                "required": true,
                "update_allowed": true,
                "immutable": false
            },
            "TimeoutInMinutes": {
                "type": "integer",
                "description": "The length of time, in minutes, to wait for the nested stack creation.",
                "required": false,
                "update_allowed": true,
                "immutable": false
            },
            "Parameters": {
                "type": "map",
                "description": "The set of parameters passed to this nested stack.",
                "required": false,
                "update_allowed": true,
                "immutable": false
            }
        },
        "attributes": {
            "show": {"description": "Detailed information about resource.", "type": "map"}
        },
        "support_status": {"status": "SUPPORTED", "message": null, "version": null, "previous_status": null},
        "description": "Represents a child stack to allow composition of templates."
    });
    assert_eq!(view, expected);
}
