//! Resource operations: list, show, metadata, signal, mark unhealthy
//! (`heat/api/openstack/v1/resources.py`, `heat/engine/service.py`).

use serde_json::{json, Map, Value};

use super::params::{bad_request, extract_bool, python_list, python_set, QueryParams};
use super::records::{self, Action, ResourceRow, StackRow, Status};
use super::stacks::StackRef;
use super::views::{self, ResourceDetails};
use super::{Caller, Orchestration, Reply};
use crate::error::EngineError;

const RESOURCE_FILTERS: &[&str] = &["type", "status", "name", "action", "id", "physical_resource_id"];

/// The resources of one stack as the API shows them: the live row per
/// name, with the names that require it.
pub(super) struct StackResources {
    pub rows: Vec<ResourceRow>,
}

impl StackResources {
    pub async fn load(orchestration: &Orchestration, stack: &StackRow) -> Result<Self, EngineError> {
        Ok(StackResources { rows: records::resources(&orchestration.db, &stack.id).await? })
    }

    /// (row, required_by) per live resource, in row order.
    pub fn live(&self) -> Vec<(&ResourceRow, Vec<String>)> {
        let best = views::best_rows(&self.rows);
        let mut live: Vec<&ResourceRow> = best.values().copied().collect();
        live.sort_by_key(|r| r.id);
        live.into_iter().map(|r| (r, views::required_by(&r.name, &self.rows, &best))).collect()
    }

    pub fn find(&self, name: &str) -> Option<(&ResourceRow, Vec<String>)> {
        self.live().into_iter().find(|(r, _)| r.name == name)
    }
}

/// The child stack resource `row` runs (its physical id is the child's id).
fn nested_of(children: &[StackRow], row: &ResourceRow) -> Option<StackRow> {
    let id = row.physical_resource_id.as_deref()?;
    children.iter().find(|c| c.id == id).cloned()
}

impl Orchestration {
    /// `GET .../resources` (`nested_depth`, `with_detail`, filters).
    pub async fn list_resources(&self, caller: &Caller, stack: &StackRef, query: &QueryParams) -> Reply {
        let mut invalid: Vec<String> = query
            .keys()
            .filter(|k| !RESOURCE_FILTERS.contains(k) && *k != "nested_depth" && *k != "with_detail")
            .map(str::to_string)
            .collect();
        invalid.dedup();
        if !invalid.is_empty() {
            return Err(bad_request(format!("Invalid filter parameters {}", python_list(&invalid))));
        }
        let nested_depth = query.int("nested_depth")?.unwrap_or(0).min(self.settings.max_nested_stack_depth.max(0));
        let with_detail = query.bool_or("with_detail", false)?;
        let filters = ResourceFilters::from_query(query);

        let record = self.find_stack(caller, stack, true).await?;
        let mut out = Vec::new();
        let mut level: Vec<StackRow> = vec![record];
        for depth in 0..=nested_depth {
            let mut next = Vec::new();
            for s in &level {
                self.append_resources(s, &filters, with_detail, &mut out).await?;
                if depth < nested_depth {
                    next.extend(records::child_stacks(&self.db, &s.id).await?);
                }
            }
            level = next;
        }
        Ok(json!({ "resources": out }))
    }

    async fn append_resources(
        &self,
        stack: &StackRow,
        filters: &ResourceFilters,
        with_detail: bool,
        out: &mut Vec<Value>,
    ) -> Result<(), EngineError> {
        let resources = StackResources::load(self, stack).await?;
        let loaded = if with_detail { Some(self.load_definition(stack).await?) } else { None };
        let children = records::child_stacks(&self.db, &stack.id).await?;
        for (row, required_by) in resources.live() {
            if !filters.matches(row) {
                continue;
            }
            let detail = match &loaded {
                Some(loaded) => {
                    let attributes = self.resource_attributes(loaded, row, &[]).await?;
                    Some((loaded.resource_description(&row.name), attributes))
                }
                None => None,
            };
            let nested = nested_of(&children, row);
            out.push(views::resource(stack, row, ResourceDetails { required_by, detail, nested }));
        }
        Ok(())
    }

    /// `GET .../resources/{name}` (`with_attr` may repeat).
    pub async fn show_resource(
        &self,
        caller: &Caller,
        stack: &StackRef,
        resource_name: &str,
        query: &QueryParams,
    ) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        let resources = StackResources::load(self, &record).await?;
        let Some((row, required_by)) = resources.find(resource_name) else {
            return Err(EngineError::resource_not_found(resource_name, &record.name));
        };
        self.authorize_stack_user(caller, row).await?;
        let loaded = self.load_definition(&record).await?;
        let with_attr = query.all("with_attr");
        let attributes = self.resource_attributes(&loaded, row, &with_attr).await?;
        let children = records::child_stacks(&self.db, &record.id).await?;
        let doc = views::resource(
            &record,
            row,
            ResourceDetails {
                required_by,
                detail: Some((loaded.resource_description(resource_name), attributes)),
                nested: nested_of(&children, row),
            },
        );
        Ok(json!({ "resource": doc }))
    }

    /// `GET .../resources/{name}/metadata`.
    pub async fn resource_metadata(&self, caller: &Caller, stack: &StackRef, resource_name: &str) -> Reply {
        let record = self.find_stack(caller, stack, true).await?;
        let resources = StackResources::load(self, &record).await?;
        let Some((row, _)) = resources.find(resource_name) else {
            return Err(EngineError::resource_not_found(resource_name, &record.name));
        };
        self.authorize_stack_user(caller, row).await?;
        let metadata = views::metadata_of(row);
        Ok(json!({ "metadata": metadata }))
    }

    /// `POST .../resources/{name}/signal`: 400 for types without a signal
    /// handler, 404 ResourceNotAvailable before the resource exists; the
    /// handler itself runs asynchronously.
    pub async fn signal_resource(
        &self,
        caller: &Caller,
        stack: &StackRef,
        resource_name: &str,
        details: &Value,
    ) -> Reply {
        let record = self.find_stack(caller, stack, false).await?;
        let loaded = self.load_definition(&record).await?;
        if !loaded.has_resource(resource_name) {
            return Err(EngineError::resource_not_found(resource_name, &record.name));
        }
        let resources = StackResources::load(self, &record).await?;
        let Some((row, _)) = resources.find(resource_name) else {
            return Err(resource_not_available(resource_name));
        };
        if row.action == Action::Init {
            return Err(resource_not_available(resource_name));
        }
        let handles = loaded.plugin_of(&self.registry, row).is_some_and(|t| t.handles_signal());
        if !handles {
            return Err(EngineError::ResourceActionNotSupported("signal is not supported for resource.".into()));
        }
        self.engine_signal(caller, &record, row, details.clone()).await?;
        Ok(Value::Null)
    }

    /// `PATCH .../resources/{name}`: body `mark_unhealthy` (required,
    /// true/false) and optional `resource_status_reason`.
    pub async fn mark_unhealthy(&self, caller: &Caller, stack: &StackRef, resource_name: &str, body: &Value) -> Reply {
        let empty = Map::new();
        let body = body.as_object().unwrap_or(&empty);
        let mut invalid: Vec<String> = body
            .keys()
            .filter(|k| k.as_str() != "mark_unhealthy" && k.as_str() != "resource_status_reason")
            .cloned()
            .collect();
        invalid.sort();
        if !invalid.is_empty() {
            return Err(bad_request(format!("Invalid keys in resource mark unhealthy {}", python_set(&invalid))));
        }
        let Some(flag) = body.get("mark_unhealthy") else {
            return Err(bad_request("Missing mandatory (mark_unhealthy) key from mark unhealthy request"));
        };
        let mark = extract_bool("mark_unhealthy", flag)?;
        let reason = match body.get("resource_status_reason") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let record = self.find_stack(caller, stack, false).await?;
        let resources = StackResources::load(self, &record).await?;
        let Some((row, _)) = resources.find(resource_name) else {
            return Err(EngineError::resource_not_found(resource_name, &record.name));
        };
        self.engine_mark_unhealthy(caller, &record, row, mark, reason).await?;
        Ok(Value::Null)
    }
}

impl Orchestration {
    /// heat-api-cfn's signal controller: `resource_signal` for the
    /// resource the ARN names, as the (stack) user Keystone authenticated
    /// from the EC2 signature. Heat's `_get_stack`: the caller's project
    /// is the stack's or its stack-user project (else `InvalidTenant`).
    pub async fn cfn_signal(&self, caller: &Caller, arn: &str, wait_condition: bool, details: Value) -> Reply {
        let Some(arn) = crate::convergence::ResourceArn::parse(arn) else {
            return Err(EngineError::ValueError(format!("\"{arn}\" is not a valid ARN")));
        };
        let Some(stack) = crate::store::stacks::get(&self.db, &arn.stack_id).await? else {
            return Err(EngineError::stack_not_found(&arn.stack_name));
        };
        if stack.deleted_at.is_some() {
            return Err(EngineError::stack_not_found(&arn.stack_name));
        }
        if !caller.is_admin
            && caller.project_id != arn.tenant
            && stack.stack_user_project_id.as_deref() != Some(caller.project_id.as_str())
        {
            return Err(EngineError::InvalidTenant(format!(
                "Searching Tenant {} from Tenant {} forbidden.",
                arn.tenant, caller.project_id
            )));
        }
        if stack.name != arn.stack_name || stack.tenant != arn.tenant {
            return Err(EngineError::stack_not_found(&arn.stack_name));
        }
        let engine = self.engine.clone();
        engine.cfn_signal(&stack.id, &arn.resource_name, details, wait_condition).await
    }

    /// Heat's `_authorize_stack_user`: a caller holding the stack user
    /// role may describe only the resource whose stack user it is (by user
    /// id, or by the EC2 access key it signed with).
    pub(super) async fn authorize_stack_user(&self, caller: &Caller, row: &ResourceRow) -> Result<(), EngineError> {
        let role = self
            .engine
            .identity()
            .map(|i| i.settings().heat_stack_user_role.clone())
            .unwrap_or_else(|| crate::options::HEAT_STACK_USER_ROLE.default_value());
        if !caller.roles.contains(&role) {
            return Ok(());
        }
        let data = records::resource_data(&self.db, row.id).await?;
        if data.get("user_id").is_some_and(|u| *u == caller.user_id) {
            return Ok(());
        }
        tracing::warn!("Access denied to resource {}", row.name);
        Err(EngineError::forbidden("You are not authorized to use this action."))
    }
}

fn resource_not_available(name: &str) -> EngineError {
    EngineError::ResourceNotAvailable(format!("The Resource ({name}) is not available."))
}

/// Resource list filters: exact on name/action/status/id/physical id,
/// substring on type (upstream compares `type in res.type()`).
struct ResourceFilters {
    filters: Vec<(String, Vec<String>)>,
}

impl ResourceFilters {
    fn from_query(query: &QueryParams) -> Self {
        let mut filters = Vec::new();
        for key in RESOURCE_FILTERS {
            let values = query.all(key);
            if values.is_empty() {
                continue;
            }
            if *key == "status" {
                // "CREATE_COMPLETE" filters on both halves.
                let mut statuses = Vec::new();
                let mut actions = Vec::new();
                for v in &values {
                    let names = [Status::Complete, Status::Failed, Status::InProgress].map(Status::as_str);
                    match names.iter().find_map(|s| v.rfind(s).map(|i| (i, s))) {
                        Some((i, _)) => {
                            statuses.push(v[i..].to_string());
                            if let Some(action) = v.get(..i.saturating_sub(1)).filter(|a| i > 1 && !a.is_empty()) {
                                actions.push(action.to_string());
                            }
                        }
                        None => statuses.push(v.clone()),
                    }
                }
                filters.push(("status".to_string(), statuses));
                if !actions.is_empty() {
                    filters.push(("action".to_string(), actions));
                }
            } else {
                filters.push((key.to_string(), values));
            }
        }
        ResourceFilters { filters }
    }

    fn matches(&self, row: &ResourceRow) -> bool {
        self.filters.iter().all(|(key, values)| match key.as_str() {
            "type" => values.iter().any(|v| row.resource_type.contains(v.as_str())),
            "name" => values.contains(&row.name),
            "action" => values.iter().any(|v| v == row.action.as_str()),
            "status" => values.iter().any(|v| v == row.status.as_str()),
            "id" => values.iter().any(|v| *v == row.id.to_string() || *v == row.uuid),
            "physical_resource_id" => row.physical_resource_id.as_ref().is_some_and(|p| values.contains(p)),
            _ => true,
        })
    }
}
