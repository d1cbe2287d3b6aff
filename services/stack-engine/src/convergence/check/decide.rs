//! The decision of an update node, without a database: from the row as
//! read, the plugin it will run as, the environment's restrictions and the
//! old and new properties, what the node does.

use std::collections::BTreeSet;

use crate::resources::{Properties, ResourceType, TypeChange, UpdateDecision};
use crate::store::{Action, ResourceRow, Status};

/// What an update node decided to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// A new resource: its plugin creates it.
    Create,
    /// Stack ADOPT of a plain resource: the adopt data is taken as it is.
    Adopt,
    /// Stack ADOPT of a resource running a nested stack: its plugin
    /// creates the child, which adopts the nested resources.
    AdoptNested,
    /// Nothing changed: the row moves to the new template without an event.
    Unchanged,
    /// The plugin updates the resource where it is.
    InPlace,
    /// A replacement row is made; `announce`: the old row first shows
    /// UPDATE "requires replacement" (a broken row is replaced silently).
    Replace { announce: bool },
    /// The environment restricts this action (`update` or `replace`).
    Restricted(&'static str),
}

/// What the decision is made from.
pub(super) struct UpdateInputs<'a> {
    pub row: &'a ResourceRow,
    pub stack_action: Action,
    pub plugin: &'a dyn ResourceType,
    /// Whether the row's stored type runs as another plugin now.
    pub type_change: TypeChange,
    /// A FAILED row is replaced (upstream `needs_replace_failed`, always
    /// for CHECK_FAILED); false: it is updated like an intact one.
    pub replace_failed: bool,
    /// The environment's restricted_actions for the resource.
    pub restricted: &'a BTreeSet<String>,
    pub old_props: &'a Properties,
    pub new_props: &'a Properties,
}

/// Upstream resource.create_convergence / update_convergence: which
/// action an update node runs.
pub(super) fn decide_update(inputs: &UpdateInputs<'_>) -> Step {
    let row = inputs.row;
    if row.action == Action::Init {
        return match inputs.stack_action {
            Action::Adopt if inputs.plugin.runs_nested_stack() => Step::AdoptNested,
            Action::Adopt => Step::Adopt,
            _ => Step::Create,
        };
    }
    let restricted = |what: &str| inputs.restricted.contains(what);
    let retyped = inputs.type_change == TypeChange::Retyped;
    // A resource whose plugin changes is replaced.
    if retyped && restricted("replace") {
        return Step::Restricted("replace");
    }
    // A failed, half-created, deleted or retyped resource is replaced
    // without UPDATE events (upstream needs_replace_failed).
    let broken = (row.status == Status::Failed && inputs.replace_failed)
        || row.status == Status::InProgress
        || row.action == Action::Delete
        || retyped;
    let decision = if broken {
        UpdateDecision::Replace
    } else {
        match inputs.plugin.update_decision(inputs.old_props, inputs.new_props) {
            // The definition's type changed, so it is not the one stored
            // (upstream `_needs_update`): the substitute updates it.
            UpdateDecision::Unchanged if inputs.type_change == TypeChange::Substituted => UpdateDecision::InPlace,
            decision => decision,
        }
    };
    match decision {
        UpdateDecision::InPlace if restricted("update") => Step::Restricted("update"),
        UpdateDecision::Replace if restricted("replace") => Step::Restricted("replace"),
        UpdateDecision::Unchanged => Step::Unchanged,
        UpdateDecision::InPlace => Step::InPlace,
        UpdateDecision::Replace => Step::Replace { announce: !broken },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::{json, Map, Value};
    use std::sync::Arc;

    fn plugin(type_name: &str) -> Arc<dyn ResourceType> {
        match Registry::builtin().get(type_name) {
            Some(p) => p,
            None => panic!("no builtin {type_name}"),
        }
    }

    fn props(v: Value) -> Properties {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn row(action: Action, status: Status) -> ResourceRow {
        ResourceRow { name: "r".into(), action, status, ..ResourceRow::default() }
    }

    struct Case {
        row: ResourceRow,
        stack_action: Action,
        type_name: &'static str,
        type_change: TypeChange,
        replace_failed: bool,
        restricted: &'static [&'static str],
        old: Value,
        new: Value,
    }

    impl Case {
        fn new(action: Action, status: Status) -> Case {
            Case {
                row: row(action, status),
                stack_action: Action::Update,
                type_name: "OS::Heat::TestResource",
                type_change: TypeChange::Same,
                replace_failed: true,
                restricted: &[],
                old: json!({"value": "a"}),
                new: json!({"value": "a"}),
            }
        }

        fn decide(&self) -> Step {
            let plugin = plugin(self.type_name);
            let restricted: BTreeSet<String> = self.restricted.iter().map(|s| s.to_string()).collect();
            let (old, new) = (props(self.old.clone()), props(self.new.clone()));
            decide_update(&UpdateInputs {
                row: &self.row,
                stack_action: self.stack_action,
                plugin: plugin.as_ref(),
                type_change: self.type_change,
                replace_failed: self.replace_failed,
                restricted: &restricted,
                old_props: &old,
                new_props: &new,
            })
        }
    }

    #[test]
    fn a_new_row_is_created_or_adopted() {
        let mut case = Case::new(Action::Init, Status::Complete);
        assert_eq!(case.decide(), Step::Create);
        case.stack_action = Action::Adopt;
        assert_eq!(case.decide(), Step::Adopt);
        case.type_name = "OS::Heat::ResourceGroup";
        assert_eq!(case.decide(), Step::AdoptNested);
        // Restrictions and old properties do not apply to a creation.
        case.stack_action = Action::Create;
        case.restricted = &["update", "replace"];
        assert_eq!(case.decide(), Step::Create);
    }

    #[test]
    fn same_properties_are_unchanged_and_changed_ones_updated_in_place() {
        let mut case = Case::new(Action::Create, Status::Complete);
        assert_eq!(case.decide(), Step::Unchanged);
        case.new = json!({"value": "b"});
        assert_eq!(case.decide(), Step::InPlace);
        case.restricted = &["update"];
        assert_eq!(case.decide(), Step::Restricted("update"));
    }

    #[test]
    fn a_property_without_update_allowed_replaces_with_an_announcement() {
        let mut case = Case::new(Action::Update, Status::Complete);
        case.new = json!({"value": "a", "update_replace_value": "x"});
        assert_eq!(case.decide(), Step::Replace { announce: true });
        case.restricted = &["replace"];
        assert_eq!(case.decide(), Step::Restricted("replace"));
    }

    #[test]
    fn a_broken_or_retyped_row_is_replaced_silently() {
        for (action, status) in
            [(Action::Create, Status::Failed), (Action::Update, Status::InProgress), (Action::Delete, Status::Complete)]
        {
            let case = Case::new(action, status);
            assert_eq!(case.decide(), Step::Replace { announce: false }, "{action:?} {status:?}");
        }
        let mut case = Case::new(Action::Create, Status::Complete);
        case.type_change = TypeChange::Retyped;
        assert_eq!(case.decide(), Step::Replace { announce: false });
        // A retyped row is refused by a replace restriction, not by an
        // update one.
        case.restricted = &["replace"];
        assert_eq!(case.decide(), Step::Restricted("replace"));
        case.restricted = &["update"];
        assert_eq!(case.decide(), Step::Replace { announce: false });
    }

    /// A FAILED row whose plugin says it need not be replaced (a server
    /// group still in Nova) is decided as an intact one.
    #[test]
    fn a_failed_row_the_plugin_keeps_is_updated() {
        let mut case = Case::new(Action::Create, Status::Failed);
        case.replace_failed = false;
        assert_eq!(case.decide(), Step::Unchanged);
        case.new = json!({"value": "b"});
        assert_eq!(case.decide(), Step::InPlace);
        case.new = json!({"value": "a", "update_replace_value": "x"});
        assert_eq!(case.decide(), Step::Replace { announce: true });
    }

    /// The hidden OS::Heat::SoftwareDeployments names
    /// OS::Heat::SoftwareDeploymentGroup as its substitute; nothing else
    /// substitutes it, and the substitution does not go backwards.
    #[test]
    fn a_type_change_is_a_substitution_only_to_the_named_substitute() {
        let old = plugin("OS::Heat::SoftwareDeployments");
        let group = plugin("OS::Heat::SoftwareDeploymentGroup");
        fn from<'a>(identity: &'a str, p: &'a Arc<dyn ResourceType>) -> Option<(&'a str, &'a dyn ResourceType)> {
            Some((identity, p.as_ref()))
        }
        let deployments = "OS::Heat::SoftwareDeployments";
        assert_eq!(TypeChange::between(from(deployments, &old), deployments), TypeChange::Same);
        assert_eq!(
            TypeChange::between(from(deployments, &old), "OS::Heat::SoftwareDeploymentGroup"),
            TypeChange::Substituted
        );
        assert_eq!(TypeChange::between(from(deployments, &old), "OS::Heat::ResourceGroup"), TypeChange::Retyped);
        // A template resource is another plugin whatever its type name.
        assert_eq!(
            TypeChange::between(from(deployments, &old), "template:OS::Heat::SoftwareDeploymentGroup"),
            TypeChange::Retyped
        );
        assert_eq!(
            TypeChange::between(from("OS::Heat::SoftwareDeploymentGroup", &group), deployments),
            TypeChange::Retyped
        );
        assert_eq!(TypeChange::between(None, deployments), TypeChange::Retyped);
    }

    /// A substituted row is updated in place by its new plugin even when
    /// its properties did not change, and the environment's `update`
    /// restriction (not `replace`) applies to it.
    #[test]
    fn a_substituted_row_is_updated_in_place() {
        let mut case = Case::new(Action::Create, Status::Complete);
        case.type_change = TypeChange::Substituted;
        assert_eq!(case.decide(), Step::InPlace);
        case.restricted = &["replace"];
        assert_eq!(case.decide(), Step::InPlace);
        case.restricted = &["update"];
        assert_eq!(case.decide(), Step::Restricted("update"));
        // The new plugin still replaces on a property it cannot update.
        case.restricted = &[];
        case.new = json!({"value": "a", "update_replace_value": "x"});
        assert_eq!(case.decide(), Step::Replace { announce: true });
        // A broken row is replaced as ever.
        let mut failed = Case::new(Action::Create, Status::Failed);
        failed.type_change = TypeChange::Substituted;
        assert_eq!(failed.decide(), Step::Replace { announce: false });
    }
}
