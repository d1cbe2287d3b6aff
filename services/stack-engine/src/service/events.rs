//! Event operations: list (per stack or per resource) and show
//! (`heat/api/openstack/v1/events.py`, `heat/db/api.py` event queries).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::identity::{link, StackIdentity};
use super::params::QueryParams;
use super::records::{self, EventQuery, StackRow};
use super::stacks::StackRef;
use super::views;
use super::{Caller, Orchestration, Reply};
use crate::error::EngineError;
use crate::store::SortDir;

const EVENT_FILTERS: &[&str] = &["resource_status", "resource_action", "resource_name", "resource_type"];

impl Orchestration {
    /// `GET .../events` and `GET .../resources/{name}/events`.
    pub async fn list_events(
        &self,
        caller: &Caller,
        stack: &StackRef,
        resource_name: Option<&str>,
        query: &QueryParams,
    ) -> Reply {
        let limit = query.int("limit")?;
        let nested_depth = query.int("nested_depth")?.unwrap_or(0);
        let sort_dir = query.single("sort_dir");
        if let Some(dir) = sort_dir.as_deref() {
            if dir != "asc" && dir != "desc" {
                return Err(super::params::bad_request(format!(
                    "Unknown sort direction, must be 'desc' or 'asc' ({dir})"
                )));
            }
        }
        let sort_keys = query.all("sort_keys");
        let mut filters: Vec<(&str, Vec<String>)> =
            EVENT_FILTERS.iter().map(|k| (*k, query.all(k))).filter(|(_, v)| !v.is_empty()).collect();
        if let Some(name) = resource_name {
            filters.retain(|(k, _)| *k != "resource_name");
            filters.push(("resource_name", vec![name.to_string()]));
        }

        let record = self.find_stack(caller, stack, true).await?;
        let stacks = self.stack_tree(&record, nested_depth.min(self.settings.max_nested_stack_depth.max(0))).await?;
        let sort_dir = match sort_dir.as_deref() {
            Some("asc") => Some(SortDir::Asc),
            Some(_) => Some(SortDir::Desc),
            None => None,
        };
        let filter = |key: &str| filters.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap_or_default();
        let event_query = EventQuery {
            stack_ids: stacks.iter().map(|s| s.id.clone()).collect(),
            resource_name: None,
            resource_status: filter("resource_status"),
            resource_action: filter("resource_action"),
            resource_names: filter("resource_name"),
            resource_type: filter("resource_type"),
            sort_dir,
            // Only these API keys sort events; others are ignored, as upstream.
            sort_keys: sort_keys
                .iter()
                .filter_map(|k| match k.as_str() {
                    "event_time" => Some("created_at".to_string()),
                    "resource_type" => Some("resource_type".to_string()),
                    _ => None,
                })
                .collect(),
            marker: query.single("marker"),
            limit,
        };
        let page = records::events(&self.db, &event_query).await?;
        if page.is_empty() {
            if let Some(name) = resource_name {
                return Err(EngineError::HttpNotFound(format!("No events found for resource {name}")));
            }
        }
        let identities: HashMap<&str, StackIdentity> =
            stacks.iter().map(|s| (s.id.as_str(), views::identity_of(s))).collect();
        let root = views::identity_of(&record);
        let events: Vec<Value> = page
            .iter()
            .map(|e| {
                let identity = identities.get(e.stack_id.as_str()).unwrap_or(&root);
                let mut doc = views::event(identity, e, false);
                if nested_depth > 0 {
                    if let Some(Value::Array(links)) = doc.get_mut("links") {
                        links.push(link(root.stack_href(), "root_stack"));
                    }
                }
                doc
            })
            .collect();
        Ok(json!({ "events": events }))
    }

    /// `GET .../resources/{name}/events/{id}`.
    pub async fn show_event(&self, caller: &Caller, stack: &StackRef, resource_name: &str, event_id: &str) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        let event = crate::store::events::get(&self.db, &record.id, event_id).await?;
        let Some(event) = event.filter(|e| e.resource_name == resource_name) else {
            return Err(EngineError::HttpNotFound(format!("No event {event_id} found")));
        };
        Ok(json!({ "event": views::event(&views::identity_of(&record), &event, true) }))
    }

    /// The stack and its nested stacks down to `depth` levels.
    pub(super) async fn stack_tree(&self, root: &StackRow, depth: i64) -> Result<Vec<StackRow>, EngineError> {
        let mut all = vec![root.clone()];
        let mut level = vec![root.clone()];
        for _ in 0..depth {
            let mut next = Vec::new();
            for s in &level {
                next.extend(records::child_stacks(&self.db, &s.id).await?);
            }
            if next.is_empty() {
                break;
            }
            all.extend(next.iter().cloned());
            level = next;
        }
        Ok(all)
    }
}
