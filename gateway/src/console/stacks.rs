//! Stacks as the console draws them: every project's stacks, one stack's
//! resource graph (nodes are resources with their status, an edge runs
//! from a resource to each resource that requires it) and its events after
//! a marker, from the stack engines through the Orchestration API's
//! failover client.
//!
//! The engine is asked as an admin of the stack's project: the console's
//! own rule (`keelson:console:stacks`) is what authorizes these reads.

use axum::response::Response;
use keelson_proto::orchestration::v1 as pb;
use keelson_runtime::ApiError;
use serde_json::{json, Value};

use super::{console_route, json, ConsoleReq};
use crate::routes::Route;

/// Stacks listed at most (the newest first).
const MAX_STACKS: usize = 1000;
/// Events answered at most per call; the page asks again from the last.
const MAX_EVENTS: usize = 500;

pub fn routes() -> Vec<Route<super::Handler>> {
    vec![
        console_route!(GET "/keelson/v1/console/stacks" => list),
        console_route!(GET "/keelson/v1/console/stacks/{project_id}/{stack_id}/graph" => graph),
        console_route!(GET "/keelson/v1/console/stacks/{project_id}/{stack_id}/events" => events),
    ]
}

/// The engine's caller for the console's reads in `project`.
fn caller(req: &ConsoleReq, project: &str) -> Option<pb::Caller> {
    Some(pb::Caller {
        project_id: project.to_string(),
        user_id: req.identity.user_id.clone().unwrap_or_default(),
        roles: req.identity.roles.clone(),
        is_admin: true,
        path_project_id: project.to_string(),
        ..Default::default()
    })
}

fn query(pairs: &[(&str, &str)]) -> Vec<pb::QueryParam> {
    pairs.iter().map(|(k, v)| pb::QueryParam { key: (*k).into(), values: vec![(*v).into()] }).collect()
}

fn engine_error(status: tonic::Status) -> ApiError {
    ApiError::from_status(&status, "")
}

fn parse(body: &str) -> Result<Value, ApiError> {
    serde_json::from_str(body).map_err(|e| ApiError::new(500, "", format!("the engine answered no JSON: {e}")))
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn path_stack(req: &ConsoleReq) -> (String, Option<pb::StackRef>) {
    let param = |name: &str| req.params.get(name).cloned().unwrap_or_default();
    (param("project_id"), Some(pb::StackRef { name: String::new(), id: param("stack_id") }))
}

async fn list(req: ConsoleReq) -> Result<Response, ApiError> {
    req.authorize(keelson_policy::KEELSON_CONSOLE_STACKS)?;
    req.query_params(&[])?;
    let limit = MAX_STACKS.to_string();
    let request = pb::ListStacksRequest {
        caller: caller(&req, ""),
        query: query(&[
            ("global_tenant", "true"),
            ("sort_keys", "creation_time"),
            ("sort_dir", "desc"),
            ("limit", limit.as_str()),
        ]),
        detail: false,
    };
    let answer = req
        .state
        .engines
        .call(request, |mut c, r| async move { c.list_stacks(r).await })
        .await
        .map_err(engine_error)?
        .into_inner();
    let doc = parse(&answer.body_json)?;
    let stacks: Vec<Value> = doc
        .get("stacks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            json!({
                "id": text(s, "id"), "name": text(s, "stack_name"), "project": text(s, "project"),
                "status": text(s, "stack_status"), "status_reason": text(s, "stack_status_reason"),
                "creation_time": s.get("creation_time"), "updated_time": s.get("updated_time"),
            })
        })
        .collect();
    Ok(json(&json!({"stacks": stacks})))
}

async fn graph(req: ConsoleReq) -> Result<Response, ApiError> {
    req.authorize(keelson_policy::KEELSON_CONSOLE_STACKS)?;
    req.query_params(&[])?;
    let (project, stack) = path_stack(&req);
    let show = pb::GetStackRequest { caller: caller(&req, &project), stack: stack.clone(), query: Vec::new() };
    let shown = req
        .state
        .engines
        .call(show, |mut c, r| async move { c.show_stack(r).await })
        .await
        .map_err(engine_error)?
        .into_inner();
    let shown = parse(&shown.body_json)?;
    let s = shown.get("stack").cloned().unwrap_or(Value::Null);
    let list = pb::ListResourcesRequest { caller: caller(&req, &project), stack, query: Vec::new() };
    let listed = req
        .state
        .engines
        .call(list, |mut c, r| async move { c.list_resources(r).await })
        .await
        .map_err(engine_error)?
        .into_inner();
    let resources = parse(&listed.body_json)?;
    let resources: &[Value] = resources.get("resources").and_then(Value::as_array).map_or(&[], Vec::as_slice);
    let names: std::collections::HashSet<&str> = resources.iter().map(|r| text(r, "resource_name")).collect();
    let mut edges = Vec::new();
    for r in resources {
        for dependent in r.get("required_by").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
        {
            // A dependent outside this stack (none in Heat's model) is not drawn.
            if names.contains(dependent) {
                edges.push(json!([text(r, "resource_name"), dependent]));
            }
        }
    }
    let nodes: Vec<Value> = resources
        .iter()
        .map(|r| {
            json!({
                "name": text(r, "resource_name"), "type": text(r, "resource_type"),
                "status": text(r, "resource_status"), "status_reason": text(r, "resource_status_reason"),
                "physical_id": text(r, "physical_resource_id"),
            })
        })
        .collect();
    Ok(json(&json!({
        "stack": {"id": text(&s, "id"), "name": text(&s, "stack_name"), "project": project,
                  "status": text(&s, "stack_status"), "status_reason": text(&s, "stack_status_reason")},
        "resources": nodes,
        "edges": edges,
    })))
}

async fn events(req: ConsoleReq) -> Result<Response, ApiError> {
    req.authorize(keelson_policy::KEELSON_CONSOLE_STACKS)?;
    let q = req.query_params(&["marker"])?;
    let (project, stack) = path_stack(&req);
    let limit = MAX_EVENTS.to_string();
    let mut pairs = vec![("sort_dir", "asc"), ("limit", limit.as_str())];
    let marker = q.get("marker").filter(|m| !m.is_empty());
    if let Some(m) = marker {
        pairs.push(("marker", m.as_str()));
    }
    let request = pb::ListEventsRequest {
        caller: caller(&req, &project),
        stack,
        resource_name: String::new(),
        query: query(&pairs),
    };
    let answer = req
        .state
        .engines
        .call(request, |mut c, r| async move { c.list_events(r).await })
        .await
        .map_err(engine_error)?
        .into_inner();
    let doc = parse(&answer.body_json)?;
    let events: Vec<Value> = doc
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            json!({
                "id": text(e, "id"), "time": text(e, "event_time"), "resource_name": text(e, "resource_name"),
                "status": text(e, "resource_status"), "status_reason": text(e, "resource_status_reason"),
            })
        })
        .collect();
    let next = events.last().map(|e| text(e, "id").to_string()).or_else(|| marker.cloned());
    Ok(json(&json!({"events": events, "marker": next})))
}
