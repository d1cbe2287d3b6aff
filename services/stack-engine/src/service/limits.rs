//! `max_resources_per_stack` over a stack's whole tree, checked before
//! anything is stored.
//!
//! Upstream counts the resources of a root stack's tree (its own, its
//! nested stacks', every group member) when each nested stack is created,
//! so a group of 10^4 starts and fails half way. Here the tree a request
//! defines is counted first, with the numbers the templates give (a
//! group's `count` before its members are built), and a tree past the
//! limit is refused with upstream's error before any work starts. What
//! only the running stack can tell (a count read from another resource)
//! is checked again when the nested stack is made
//! (`convergence::host`, upstream's own check).

use keelson_hot::PseudoParams;
use serde_json::Value;

use crate::definition::{LiveContext, StackDefinition};
use crate::error::EngineError;
pub use crate::resources::host::resource_limit_exceeded;
use crate::resources::Registry;

/// Refuses `def` when its tree holds more than `limit` resources (a
/// negative limit is no limit). Stops counting at the limit, so the cost
/// is bounded by it whatever the templates ask for. Resources whose type
/// or properties do not validate are counted as one: validation reports
/// them.
pub fn check_tree_size(
    def: &StackDefinition,
    registry: &Registry,
    limit: i64,
    max_depth: i64,
) -> Result<(), EngineError> {
    let Ok(limit) = u64::try_from(limit) else {
        return Ok(());
    };
    let mut remaining = limit;
    count_into(def, registry, 0, max_depth, &mut remaining)
}

fn take(remaining: &mut u64, n: u64) -> Result<(), EngineError> {
    *remaining = remaining.checked_sub(n).ok_or_else(resource_limit_exceeded)?;
    Ok(())
}

fn count_into(
    def: &StackDefinition,
    registry: &Registry,
    depth: i64,
    max_depth: i64,
    remaining: &mut u64,
) -> Result<(), EngineError> {
    take(remaining, u64::try_from(def.resources.len()).unwrap_or(u64::MAX))?;
    let unknown = LiveContext::placeholders(def);
    let mut environment = def.environment.to_value();
    if let Value::Object(env) = &mut environment {
        env.remove("parameters");
    }
    for defn in &def.resources {
        let Ok(plugin) = def.plugin_for(registry, &defn.name, &defn.type_name) else {
            continue;
        };
        if !plugin.runs_nested_stack() {
            continue;
        }
        let Ok(given) = defn.properties.resolve(&unknown) else {
            continue;
        };
        let Ok(properties) = plugin.validate_properties(&defn.name, &given) else {
            continue;
        };
        // The cheap bound first: a group of 10^5 is refused before its
        // 10^5 member definitions are built.
        if let Some(members) = plugin.nested_resource_count(&properties) {
            if members > *remaining {
                return Err(resource_limit_exceeded());
            }
        }
        // Deeper than this the creation itself refuses.
        if depth >= max_depth {
            continue;
        }
        let Some(spec) = plugin.nested_stack_spec(&properties, &def.files, &environment) else {
            if let Some(members) = plugin.nested_resource_count(&properties) {
                take(remaining, members)?;
            }
            continue;
        };
        let param = |n: &str| def.params.get(n).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let pseudo = PseudoParams {
            stack_id: String::new(),
            stack_name: format!("{}-{}", param("OS::stack_name"), defn.name),
            project_id: param("OS::project_id"),
            region: param("OS::region"),
        };
        let Ok(nested) = StackDefinition::parse_allow_missing(&spec.template, &spec.files, &spec.environment, &pseudo)
        else {
            continue;
        };
        count_into(&nested, registry, depth + 1, max_depth, remaining)?;
    }
    Ok(())
}
