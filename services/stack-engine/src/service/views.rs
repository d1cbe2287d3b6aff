//! Records → the REST documents of heat-api v1, key for key
//! (`heat/engine/api.py` formats, then `heat/api/openstack/v1/views` and the
//! controllers join ACTION_STATUS and add links).

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde_json::{json, Map, Value};

use super::identity::{link, StackIdentity};
use super::records::{Action, EventRow, ResourceRow, StackRow, Status};

/// Heat's `isotime`: `YYYY-MM-DDTHH:MM:SSZ`, or null.
pub fn isotime(t: Option<NaiveDateTime>) -> Value {
    match t {
        Some(t) => Value::String(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        None => Value::Null,
    }
}

pub fn identity_of(stack: &StackRow) -> StackIdentity {
    StackIdentity::new(&stack.tenant, &stack.name, &stack.id)
}

/// A stack in `GET /stacks` (`stacks_view.basic_keys`); admins also see
/// its `project`.
pub fn stack_summary(stack: &StackRow, include_project: bool) -> Value {
    let identity = identity_of(stack);
    let mut doc = Map::new();
    doc.insert("id".into(), json!(stack.id));
    doc.insert("links".into(), json!([link(identity.stack_href(), "self")]));
    if include_project {
        doc.insert("project".into(), json!(stack.tenant));
    }
    doc.insert("stack_name".into(), json!(stack.name));
    doc.insert("description".into(), json!(""));
    doc.insert("stack_status".into(), json!(stack.state()));
    doc.insert("stack_status_reason".into(), json!(stack.status_reason));
    doc.insert("creation_time".into(), isotime(stack.created_at));
    doc.insert("updated_time".into(), isotime(stack.updated_at));
    doc.insert("deletion_time".into(), isotime(stack.deleted_at));
    doc.insert("stack_owner".into(), json!(stack.username));
    doc.insert("parent".into(), json!(stack.owner_id));
    doc.insert("stack_user_project_id".into(), json!(stack.stack_user_project_id));
    doc.insert(
        "tags".into(),
        match &stack.tags {
            Some(tags) if !tags.is_empty() => json!(tags),
            _ => Value::Null,
        },
    );
    Value::Object(doc)
}

/// What a full stack document needs beyond the row.
pub struct StackDetails {
    pub description: String,
    /// `parameters.map(str)`, pseudo parameters included.
    pub parameters: Map<String, Value>,
    /// Resolved outputs, or None when not shown (`resolve_outputs=false`,
    /// DELETE_COMPLETE).
    pub outputs: Option<Vec<Value>>,
}

/// A stack in `GET /stacks/{name}/{id}` and `/stacks/detail`
/// (`engine/api.py:format_stack`).
pub fn stack_full(stack: &StackRow, details: StackDetails) -> Value {
    let identity = identity_of(stack);
    let mut doc = Map::new();
    doc.insert("stack_name".into(), json!(stack.name));
    doc.insert("id".into(), json!(stack.id));
    doc.insert("links".into(), json!([link(identity.stack_href(), "self")]));
    doc.insert("creation_time".into(), isotime(stack.created_at));
    doc.insert("updated_time".into(), isotime(stack.updated_at));
    doc.insert("deletion_time".into(), isotime(stack.deleted_at));
    doc.insert("notification_topics".into(), json!([]));
    doc.insert("parameters".into(), Value::Object(details.parameters));
    doc.insert("description".into(), json!(details.description));
    doc.insert("template_description".into(), json!(details.description));
    doc.insert("capabilities".into(), json!([]));
    doc.insert("disable_rollback".into(), json!(stack.disable_rollback));
    doc.insert("timeout_mins".into(), json!(stack.timeout_mins));
    doc.insert("stack_owner".into(), json!(stack.username));
    doc.insert("parent".into(), json!(stack.owner_id));
    doc.insert("stack_user_project_id".into(), json!(stack.stack_user_project_id));
    doc.insert("tags".into(), json!(stack.tags.clone().unwrap_or_default()));
    doc.insert("stack_status".into(), json!(stack.state()));
    doc.insert("stack_status_reason".into(), json!(stack.status_reason));
    if let Some(outputs) = details.outputs {
        doc.insert("outputs".into(), Value::Array(outputs));
    }
    Value::Object(doc)
}

/// One output as `format_stack_output` gives it.
pub fn output(key: &str, description: Option<&str>, value: Option<Result<Value, String>>) -> Value {
    let mut doc = Map::new();
    doc.insert("output_key".into(), json!(key));
    doc.insert("description".into(), json!(description.unwrap_or("No description given")));
    match value {
        Some(Ok(v)) => {
            doc.insert("output_value".into(), v);
        }
        Some(Err(e)) => {
            doc.insert("output_error".into(), json!(e));
            doc.insert("output_value".into(), Value::Null);
        }
        None => {}
    }
    Value::Object(doc)
}

/// What a resource document needs beyond its row.
pub struct ResourceDetails {
    pub required_by: Vec<String>,
    /// `with_detail` / show: description and attributes.
    pub detail: Option<(String, Map<String, Value>)>,
    /// The nested stack the resource runs, if any (its `nested` link).
    pub nested: Option<StackRow>,
}

/// A resource in `GET .../resources[/{name}]`.
pub fn resource(stack: &StackRow, row: &ResourceRow, details: ResourceDetails) -> Value {
    let identity = identity_of(stack);
    let mut doc = Map::new();
    doc.insert("updated_time".into(), isotime(row.updated_at.or(row.created_at)));
    doc.insert("creation_time".into(), isotime(row.created_at));
    doc.insert("logical_resource_id".into(), json!(row.name));
    doc.insert("resource_name".into(), json!(row.name));
    doc.insert("physical_resource_id".into(), json!(row.physical_resource_id.clone().unwrap_or_default()));
    doc.insert("resource_status".into(), json!(format!("{}_{}", row.action, row.status)));
    doc.insert("resource_status_reason".into(), json!(row.status_reason));
    doc.insert("resource_type".into(), json!(row.resource_type));
    let mut links = vec![link(identity.resource_href(&row.name), "self"), link(identity.stack_href(), "stack")];
    if let Some(child) = &details.nested {
        links.push(link(identity_of(child).stack_href(), "nested"));
    }
    doc.insert("links".into(), Value::Array(links));
    doc.insert("required_by".into(), json!(details.required_by));
    if let Some(parent) = &stack.parent_resource_name {
        doc.insert("parent_resource".into(), json!(parent));
    }
    if let Some((description, attributes)) = details.detail {
        doc.insert("description".into(), json!(description));
        doc.insert("attributes".into(), Value::Object(attributes));
    }
    Value::Object(doc)
}

/// A resource as the engine formats it for previews (no ACTION_STATUS
/// join, identities instead of links, properties included).
pub struct ResourcePreview<'a> {
    pub stack: &'a StackIdentity,
    pub name: &'a str,
    pub type_name: &'a str,
    pub physical_resource_id: Option<&'a str>,
    pub action: &'a str,
    pub status: &'a str,
    pub status_reason: &'a str,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub required_by: Vec<String>,
    pub description: String,
    pub metadata: Value,
    pub attributes: Map<String, Value>,
    pub properties: Option<Map<String, Value>>,
}

pub fn resource_preview(r: ResourcePreview<'_>) -> Value {
    let mut doc = Map::new();
    doc.insert("updated_time".into(), isotime(r.updated_at.or(r.created_at)));
    doc.insert("creation_time".into(), isotime(r.created_at));
    doc.insert("resource_name".into(), json!(r.name));
    doc.insert("physical_resource_id".into(), json!(r.physical_resource_id.unwrap_or("")));
    doc.insert("resource_action".into(), json!(r.action));
    doc.insert("resource_status".into(), json!(r.status));
    doc.insert("resource_status_reason".into(), json!(r.status_reason));
    doc.insert("resource_type".into(), json!(r.type_name));
    doc.insert("resource_identity".into(), r.stack.to_value(&format!("/resources/{}", r.name)));
    doc.insert("stack_identity".into(), r.stack.to_value(""));
    doc.insert("stack_name".into(), json!(r.stack.stack_name));
    doc.insert("required_by".into(), json!(r.required_by));
    doc.insert("description".into(), json!(r.description));
    doc.insert("metadata".into(), if r.metadata.is_null() { json!({}) } else { r.metadata });
    doc.insert("attributes".into(), Value::Object(r.attributes));
    if let Some(props) = r.properties {
        doc.insert("properties".into(), Value::Object(props));
    }
    Value::Object(doc)
}

/// An event in `GET .../events` (summary) or `.../events/{id}` (detail).
/// `stacks` maps a stack id to its identity (nested stacks' events carry
/// their own stack's links).
pub fn event(identity: &StackIdentity, row: &EventRow, detail: bool) -> Value {
    let mut doc = Map::new();
    doc.insert("id".into(), json!(row.uuid));
    doc.insert(
        "links".into(),
        json!([
            link(identity.event_href(&row.resource_name, &row.uuid), "self"),
            link(identity.resource_href(&row.resource_name), "resource"),
            link(identity.stack_href(), "stack"),
        ]),
    );
    doc.insert("event_time".into(), isotime(row.created_at));
    doc.insert("logical_resource_id".into(), json!(row.resource_name));
    doc.insert("resource_name".into(), json!(row.resource_name));
    doc.insert("physical_resource_id".into(), json!(row.physical_resource_id));
    doc.insert("resource_status".into(), json!(format!("{}_{}", row.resource_action, row.resource_status)));
    doc.insert("resource_status_reason".into(), json!(row.resource_status_reason));
    if detail {
        doc.insert("resource_type".into(), json!(row.resource_type));
        doc.insert(
            "resource_properties".into(),
            row.resource_properties.clone().filter(|p| !p.is_null()).unwrap_or_else(|| json!({})),
        );
    }
    Value::Object(doc)
}

/// A resource's metadata as the API shows it (`{}` when unset).
pub fn metadata_of(row: &ResourceRow) -> Value {
    row.rsrc_metadata.clone().filter(|m| !m.is_null()).unwrap_or_else(|| json!({}))
}

/// The live row per resource name, as the API shows a stack's resources:
/// DELETE_COMPLETE rows are gone; of the rest, a row not replaced wins over
/// its replaced predecessor, then the newest.
pub fn best_rows(rows: &[ResourceRow]) -> BTreeMap<String, &ResourceRow> {
    let mut best: BTreeMap<String, &ResourceRow> = BTreeMap::new();
    for row in rows.iter().filter(|r| !(r.action == Action::Delete && r.status == Status::Complete)) {
        let better = match best.get(&row.name) {
            None => true,
            Some(current) => {
                let rank = |r: &ResourceRow| (r.replaced_by.is_none(), r.id);
                rank(row) > rank(current)
            }
        };
        if better {
            best.insert(row.name.clone(), row);
        }
    }
    best
}

/// The names of the resources that require `name` (through any of the
/// rows carrying that name: a replacement keeps its dependants).
pub fn required_by(name: &str, rows: &[ResourceRow], live: &BTreeMap<String, &ResourceRow>) -> Vec<String> {
    let ids: Vec<i64> = rows.iter().filter(|r| r.name == name).map(|r| r.id).collect();
    let mut names: Vec<String> = live
        .values()
        .filter(|r| r.name != name && r.requires.iter().any(|id| ids.contains(id)))
        .map(|r| r.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}
