//! Heat's custom constraints (`custom_constraint:` in a property schema,
//! `heat/engine/constraints.py` CustomConstraint): the service-free ones
//! are checked with the other constraints while properties are validated;
//! the ones that ask a service are gathered from a validated stack and
//! asked, in order, through the validating caller's session before
//! anything is created.
//!
//! As Heat, a property whose value comes from another resource
//! (get_resource, get_attr: unknown before the resource exists) is not
//! checked, nor is a value no service constraint knows (`test_constr`).

mod local;
mod service;

use std::collections::BTreeMap;

use chrono::Utc;
use keelson_openstack::Session;
use serde_json::Value;

use super::properties::{property_error, py_str, Properties};
use super::schema::{ConstraintKind, NestedSchema, PropertySchema};
use super::RequiredService;
use crate::error::EngineError;

pub use service::{unavailable, Availability, ServiceConstraint, ServiceRefusal};

/// Heat's `BaseCustomConstraint.error`: the text of a refused value.
fn refusal_text(value: &Value, reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("Error validating value '{}': {reason}", py_str(value)),
        None => format!("Error validating value '{}'", py_str(value)),
    }
}

/// The message of the service-free constraint `name` refusing `value`;
/// None when it accepts it or when `name` is not a service-free one.
pub(crate) fn local_refusal(name: &str, value: &Value) -> Option<String> {
    let outcome = match name {
        "ip_addr" => local::ip_addr(value),
        "mac_addr" => local::mac_addr(value),
        "net_cidr" => local::net_cidr(value),
        "ip_or_cidr" => local::ip_or_cidr(value),
        "dns_name" => local::dns_name(value),
        "rel_dns_name" => local::rel_dns_name(value),
        "dns_domain" => local::dns_domain(value),
        "iso_8601" => local::iso_8601(value),
        "expiration" => local::expiration(value, Utc::now()),
        _ => return None,
    };
    outcome.err().map(|reason| refusal_text(value, reason.as_deref()))
}

/// Where a checked value is, as Heat's error names it.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedAt {
    /// Below resource `resource`'s `properties`, at `path`.
    Property { resource: String, path: Vec<String> },
    /// The value of parameter `name`.
    Parameter(String),
}

/// A value a service constraint is to check: where it is and what checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCheck {
    pub at: CheckedAt,
    pub constraint: ServiceConstraint,
    pub value: Value,
}

/// Heat's `Parameter '<name>' is invalid: <message>`.
fn parameter_error(name: &str, message: &str) -> EngineError {
    EngineError::validation(format!("Parameter '{name}' is invalid: {message}"))
}

/// The custom constraints of a stack's parameters (Heat checks them,
/// parameter by parameter, before the resources): a service-free one
/// refusing a value is an error now; the service ones are gathered.
/// Values that are lists or maps are not checked.
pub(crate) fn parameter_checks(
    schemas: &[keelson_hot::ParamSchema],
    values: &keelson_hot::ParamValues,
) -> Result<Vec<PendingCheck>, EngineError> {
    let mut out = Vec::new();
    for schema in schemas {
        let Some(value) = values.get(&schema.name).filter(|v| !v.is_null() && !v.is_array() && !v.is_object()) else {
            continue;
        };
        for c in &schema.constraints {
            let keelson_hot::ConstraintKind::Custom(name) = &c.kind else { continue };
            if let Some(message) = local_refusal(name, value) {
                return Err(parameter_error(&schema.name, c.description.as_deref().unwrap_or(&message)));
            }
            if let Some(constraint) = ServiceConstraint::named(name) {
                out.push(PendingCheck {
                    at: CheckedAt::Parameter(schema.name.clone()),
                    constraint,
                    value: value.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The values of resource `resource`'s validated `props` that service
/// constraints check, in schema order; `from_resources(key)` tells the
/// top-level properties whose value depends on another resource (skipped).
pub(crate) fn pending_checks(
    resource: &str,
    schemas: &[PropertySchema],
    props: &Properties,
    from_resources: &dyn Fn(&str) -> bool,
) -> Vec<PendingCheck> {
    let mut out = Vec::new();
    for schema in schemas {
        if from_resources(schema.name) {
            continue;
        }
        if let Some(value) = props.get(schema.name) {
            collect(resource, schema, value, vec![schema.name.to_string()], &mut out);
        }
    }
    out
}

fn collect(resource: &str, schema: &PropertySchema, value: &Value, path: Vec<String>, out: &mut Vec<PendingCheck>) {
    // Not given and no default: Heat checks nothing.
    if value.is_null() {
        return;
    }
    for c in &schema.constraints {
        if let ConstraintKind::Custom(name) = c.kind {
            if let Some(constraint) = ServiceConstraint::named(name) {
                out.push(PendingCheck {
                    at: CheckedAt::Property { resource: resource.to_string(), path: path.clone() },
                    constraint,
                    value: value.clone(),
                });
            }
        }
    }
    match (&schema.schema, value) {
        (Some(NestedSchema::ListItems(item)), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                let mut below = path.clone();
                below.push(i.to_string());
                collect(resource, item, v, below, out);
            }
        }
        (Some(NestedSchema::MapKeys(keys)), Value::Object(map)) => {
            for key in keys {
                if let Some(v) = map.get(key.name) {
                    let mut below = path.clone();
                    below.push(key.name.to_string());
                    collect(resource, key, v, below, out);
                }
            }
        }
        _ => {}
    }
}

/// Heat's strict validation through `session`: each type's service is
/// available ([`service::check_available`]), then the values of `checks`
/// pass their constraints ([`run_checks`]).
pub async fn check_stack(
    session: &Session,
    required: &[(String, RequiredService)],
    checks: &[PendingCheck],
) -> Result<(), EngineError> {
    let mut extensions = None;
    for (type_name, service) in required {
        service::check_available(session, type_name, *service, &mut extensions).await?;
    }
    run_checks(session, checks).await
}

/// Heat's reason for each of `types` (Heat's types keelson does not
/// implement) whose service `session` lacks, so that validation refuses
/// them as Heat does, before their properties (see
/// `StackDefinition::set_unavailable_types`).
pub async fn unavailable_reasons(session: &Session, types: &[(String, RequiredService)]) -> BTreeMap<String, String> {
    let mut extensions = None;
    let mut reasons = BTreeMap::new();
    for (type_name, required) in types {
        if let Some(reason) = service::unavailable_reason(session, *required, &mut extensions).await {
            reasons.insert(type_name.clone(), reason);
        }
    }
    reasons
}

/// The types of `types` whose service is not available to `session`, as
/// Heat's `GET /resource_types` leaves them out (a check that fails
/// leaves its type out too).
pub async fn unavailable_types<'t>(
    session: &Session,
    types: impl IntoIterator<Item = (&'t str, RequiredService)>,
) -> Vec<&'t str> {
    let mut extensions = None;
    let mut unavailable = Vec::new();
    for (type_name, required) in types {
        if !matches!(service::availability(session, required, &mut extensions).await, Ok(Availability::Available)) {
            unavailable.push(type_name);
        }
    }
    unavailable
}

/// Heat's `resource_schema` check before it shows a type: a type whose
/// service is missing is 400 `ResourceTypeUnavailable` with the fixed
/// reason upstream gives there; a failed check gives the failure's text.
pub async fn check_type_shown(
    session: &Session,
    type_name: &str,
    required: RequiredService,
) -> Result<(), EngineError> {
    match service::availability(session, required, &mut None).await {
        Ok(Availability::Available) => Ok(()),
        Ok(Availability::Unavailable(_)) => {
            Err(service::unavailable(type_name, required, "Service endpoint not in service catalog."))
        }
        Err(text) => Err(service::unavailable(type_name, required, &text)),
    }
}

/// Asks the services of `checks`, in order, through `session`; the first
/// refusal is a StackValidationFailed with Heat's text, e.g.
/// `Property error: resources.net.properties.network: Error validating
/// value 'nope': Unable to find network with name or id 'nope'`. A value
/// is asked once per constraint (Heat memoizes a success).
pub async fn run_checks(session: &Session, checks: &[PendingCheck]) -> Result<(), EngineError> {
    let mut accepted: Vec<(ServiceConstraint, String)> = Vec::new();
    for check in checks {
        let key = (check.constraint, py_str(&check.value));
        if accepted.contains(&key) {
            continue;
        }
        match service::check(session, check.constraint, &check.value).await {
            Ok(()) => accepted.push(key),
            Err(refusal) => {
                let message = match refusal {
                    ServiceRefusal::Invalid(reason) => refusal_text(&check.value, Some(&reason)),
                    ServiceRefusal::Failed(text) => text,
                };
                return Err(match &check.at {
                    CheckedAt::Property { resource, path } => property_error(resource, path, &message),
                    CheckedAt::Parameter(name) => parameter_error(name, &message),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
