//! heat-api v1's route table, matched the way python-routes matches it:
//! routes are tried in declaration order and the first whose path pattern
//! and method both match wins. Like upstream's `connect` helper, every
//! declared URL of a group gets, after the group's own routes, a route that
//! answers its undeclared methods with 405 and one that answers `OPTIONS`
//! with 204, both carrying `Allow` (the declared methods, in declaration
//! order). The order is observable: `GET /stacks/preview` is a stack
//! lookup, because the lookup route precedes the 405 of `/stacks/preview`.
//!
//! The table is [`crate::routes`]'s, in its [`AllowStyle::GroupDeclared`]
//! (`Allow: GET,POST`). Each route names its action (what Heat's policy
//! checks) and its handler (the engine call), so a route is declared in
//! one place.

use http::Method;

use super::handlers::{self, Handler};
use crate::routes::{AllowStyle, Constraint, Match, Params, Route, RouteTable};

/// What a matched route does: one engine operation, or one of the two
/// method-only answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    ValidateTemplate,
    ListResourceTypes,
    ResourceSchema,
    GenerateTemplate,
    ListTemplateVersions,
    ListTemplateFunctions,
    ListStacks,
    CreateStack,
    PreviewStack,
    ListStacksDetail,
    /// `/stacks/{name_or_id}` and `/stacks/{name}/{subpath}`: the 302.
    Lookup,
    ShowStack,
    GetTemplate,
    GetEnvironment,
    GetFiles,
    UpdateStack,
    UpdateStackPatch,
    PreviewUpdate,
    PreviewUpdatePatch,
    DeleteStack,
    AbandonStack,
    ExportStack,
    StackSnapshot,
    ShowSnapshot,
    DeleteSnapshot,
    ListSnapshots,
    RestoreSnapshot,
    ListOutputs,
    ShowOutput,
    ListResources,
    ShowResource,
    ResourceMetadata,
    SignalResource,
    MarkUnhealthy,
    ListEvents,
    ShowEvent,
    StackAction,
    BuildInfo,
    ListServices,
    ListSoftwareConfigs,
    CreateSoftwareConfig,
    ShowSoftwareConfig,
    DeleteSoftwareConfig,
    ListSoftwareDeployments,
    SoftwareDeploymentMetadata,
    CreateSoftwareDeployment,
    ShowSoftwareDeployment,
    UpdateSoftwareDeployment,
    DeleteSoftwareDeployment,
    /// 405 with `Allow`.
    Reject,
    /// 204 with `Allow`.
    Options,
}

/// A route of the v1 table: its action and the handler that runs it.
pub struct Endpoint {
    pub action: Action,
    pub handler: Handler,
}

/// A routed request as heat-api's pipeline sees it.
#[derive(Debug, Clone)]
pub struct Matched {
    pub action: Action,
    /// The route's pattern (a metrics label).
    pub pattern: &'static str,
    pub params: Params,
    /// Set for `Reject` and `Options`.
    pub allow: Option<String>,
    /// The engine call; none for `Reject` and `Options`.
    pub handler: Option<Handler>,
}

impl Matched {
    /// The first route of `table` matching `method` and `path` (the
    /// decoded path under `/v1`, e.g. `/admin/stacks`); none is 404.
    pub fn find(table: &RouteTable<Endpoint>, method: &Method, path: &str) -> Option<Matched> {
        let answer = |action, allow: &str, pattern| Matched {
            action,
            pattern,
            params: Params::new(),
            allow: Some(allow.to_string()),
            handler: None,
        };
        match table.find(method, path) {
            Match::Found(found) => Some(Matched {
                action: found.handler.action,
                pattern: found.template,
                params: found.params,
                allow: None,
                handler: Some(found.handler.handler),
            }),
            Match::MethodNotAllowed { allow, template } => Some(answer(Action::Reject, &allow, template)),
            Match::Options { allow, template } => Some(answer(Action::Options, allow, template)),
            Match::NotFound => None,
        }
    }

    /// A path parameter (empty when the route has none of that name).
    pub fn param(&self, name: &str) -> &str {
        self.params.get(name).map(String::as_str).unwrap_or("")
    }
}

const STACK_SUBPATHS_GET: &[&str] = &["resources", "events", "template", "actions", "environment", "files"];
const STACK_SUBPATHS_POST: &[&str] = &["resources", "events", "template", "actions"];

/// The `{name:kind}` restrictions of heat-api's URLs.
const CONSTRAINTS: &[(&str, Constraint)] = &[
    // `{stack_name:arn\x3A.*}`: the rest of the path.
    ("arn", Constraint::RestStartingWith("arn:")),
    ("get_subpaths", Constraint::OneOf(STACK_SUBPATHS_GET)),
    ("post_subpaths", Constraint::OneOf(STACK_SUBPATHS_POST)),
];

/// A route to `handlers::$handler` for `$action`.
macro_rules! op {
    ($($method:ident)|+ $template:literal => $action:ident, $handler:ident) => {
        Route::new(
            &[$(Method::$method),+],
            $template,
            Endpoint { action: Action::$action, handler: |call| Box::pin(handlers::$handler(call)) },
        )
    };
}

/// heat-api v1's routes (`heat/api/openstack/v1/__init__.py`).
pub fn heat_v1() -> RouteTable<Endpoint> {
    let mut table = RouteTable::new(AllowStyle::GroupDeclared, CONSTRAINTS);
    // stacks
    table.add_group([
        op!(POST "/{tenant_id}/validate" => ValidateTemplate, validate_template),
        op!(GET "/{tenant_id}/resource_types" => ListResourceTypes, list_resource_types),
        op!(GET "/{tenant_id}/resource_types/{type_name}" => ResourceSchema, resource_schema),
        op!(GET "/{tenant_id}/resource_types/{type_name}/template" => GenerateTemplate, generate_template),
        op!(GET "/{tenant_id}/template_versions" => ListTemplateVersions, list_template_versions),
        op!(GET "/{tenant_id}/template_versions/{template_version}/functions"
            => ListTemplateFunctions, list_template_functions),
        op!(GET "/{tenant_id}/stacks" => ListStacks, list_stacks),
        op!(POST "/{tenant_id}/stacks" => CreateStack, create_stack),
        op!(POST "/{tenant_id}/stacks/preview" => PreviewStack, preview_stack),
        op!(GET "/{tenant_id}/stacks/detail" => ListStacksDetail, list_stacks_detail),
        op!(GET | POST | PUT | PATCH | DELETE "/{tenant_id}/stacks/{stack_name}" => Lookup, lookup),
        op!(GET | POST | PUT | PATCH | DELETE "/{tenant_id}/stacks/{stack_name:arn}" => Lookup, lookup),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{path:get_subpaths}" => Lookup, lookup),
        op!(POST "/{tenant_id}/stacks/{stack_name}/{path:post_subpaths}" => Lookup, lookup),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}" => ShowStack, show_stack),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/template" => GetTemplate, get_template),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/environment" => GetEnvironment, get_environment),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/files" => GetFiles, get_files),
        op!(PUT "/{tenant_id}/stacks/{stack_name}/{stack_id}" => UpdateStack, update_stack),
        op!(PATCH "/{tenant_id}/stacks/{stack_name}/{stack_id}" => UpdateStackPatch, update_stack_patch),
        op!(PUT "/{tenant_id}/stacks/{stack_name}/{stack_id}/preview" => PreviewUpdate, preview_update),
        op!(PATCH "/{tenant_id}/stacks/{stack_name}/{stack_id}/preview" => PreviewUpdatePatch, preview_update_patch),
        op!(DELETE "/{tenant_id}/stacks/{stack_name}/{stack_id}" => DeleteStack, delete_stack),
        op!(DELETE "/{tenant_id}/stacks/{stack_name}/{stack_id}/abandon" => AbandonStack, abandon_stack),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/export" => ExportStack, export_stack),
        op!(POST "/{tenant_id}/stacks/{stack_name}/{stack_id}/snapshots" => StackSnapshot, stack_snapshot),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/snapshots/{snapshot_id}" => ShowSnapshot, show_snapshot),
        op!(DELETE "/{tenant_id}/stacks/{stack_name}/{stack_id}/snapshots/{snapshot_id}"
            => DeleteSnapshot, delete_snapshot),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/snapshots" => ListSnapshots, list_snapshots),
        op!(POST "/{tenant_id}/stacks/{stack_name}/{stack_id}/snapshots/{snapshot_id}/restore"
            => RestoreSnapshot, restore_snapshot),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/outputs" => ListOutputs, list_outputs),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/outputs/{output_key}" => ShowOutput, show_output),
    ]);
    // resources
    table.add_group([
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources" => ListResources, list_resources),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}" => ShowResource, show_resource),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/metadata"
            => ResourceMetadata, resource_metadata),
        op!(POST "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/signal"
            => SignalResource, signal_resource),
        op!(PATCH "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}"
            => MarkUnhealthy, mark_unhealthy),
    ]);
    // events
    table.add_group([
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/events" => ListEvents, list_events),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events"
            => ListEvents, list_events),
        op!(GET "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events/{event_id}"
            => ShowEvent, show_event),
    ]);
    // actions
    table.add_group([op!(POST "/{tenant_id}/stacks/{stack_name}/{stack_id}/actions" => StackAction, stack_action)]);
    // build info
    table.add_group([op!(GET "/{tenant_id}/build_info" => BuildInfo, build_info)]);
    // software configs
    table.add_group([
        op!(GET "/{tenant_id}/software_configs" => ListSoftwareConfigs, list_software_configs),
        op!(POST "/{tenant_id}/software_configs" => CreateSoftwareConfig, create_software_config),
        op!(GET "/{tenant_id}/software_configs/{config_id}" => ShowSoftwareConfig, show_software_config),
        op!(DELETE "/{tenant_id}/software_configs/{config_id}" => DeleteSoftwareConfig, delete_software_config),
    ]);
    // software deployments
    table.add_group([
        op!(GET "/{tenant_id}/software_deployments" => ListSoftwareDeployments, list_software_deployments),
        op!(GET "/{tenant_id}/software_deployments/metadata/{server_id}"
            => SoftwareDeploymentMetadata, software_deployment_metadata),
        op!(POST "/{tenant_id}/software_deployments" => CreateSoftwareDeployment, create_software_deployment),
        op!(GET "/{tenant_id}/software_deployments/{deployment_id}"
            => ShowSoftwareDeployment, show_software_deployment),
        op!(PUT "/{tenant_id}/software_deployments/{deployment_id}"
            => UpdateSoftwareDeployment, update_software_deployment),
        op!(DELETE "/{tenant_id}/software_deployments/{deployment_id}"
            => DeleteSoftwareDeployment, delete_software_deployment),
    ]);
    // Upstream declares services with a bare submapper: no 405/OPTIONS.
    table.add([op!(GET "/{tenant_id}/services" => ListServices, list_services)]);
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(method: Method, path: &str) -> Option<Matched> {
        Matched::find(&heat_v1(), &method, path)
    }

    #[test]
    fn collection_and_canonical_routes() {
        assert_eq!(find(Method::GET, "/admin/stacks").unwrap().action, Action::ListStacks);
        assert_eq!(find(Method::POST, "/admin/stacks").unwrap().action, Action::CreateStack);
        let m = find(Method::GET, "/admin/stacks/s/123").unwrap();
        assert_eq!((m.action, m.param("stack_name"), m.param("stack_id")), (Action::ShowStack, "s", "123"));
        let m = find(Method::GET, "/admin/stacks/s/1/resources/r/events/e").unwrap();
        assert_eq!((m.action, m.param("resource_name"), m.param("event_id")), (Action::ShowEvent, "r", "e"));
        assert_eq!(find(Method::PATCH, "/admin/stacks/s/1/resources/r").unwrap().action, Action::MarkUnhealthy);
        assert!(find(Method::GET, "/admin/nothing").is_none());
        assert!(find(Method::GET, "/admin/stacks/").is_none());
    }

    #[test]
    fn lookups_precede_canonical_routes_in_order() {
        let m = find(Method::GET, "/admin/stacks/s/resources").unwrap();
        assert_eq!((m.action, m.param("path")), (Action::Lookup, "resources"));
        // Not a lookup sub-path for POST: the canonical route has no POST.
        let m = find(Method::POST, "/admin/stacks/s/environment").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Reject, Some("GET")));
        // PUT on a sub-path name is an update of a stack whose id is that name.
        assert_eq!(find(Method::PUT, "/admin/stacks/s/resources").unwrap().action, Action::UpdateStack);
        assert_eq!(find(Method::GET, "/admin/stacks/preview").unwrap().action, Action::Lookup);
        assert_eq!(find(Method::GET, "/admin/stacks/detail").unwrap().action, Action::ListStacksDetail);
        let m = find(Method::DELETE, "/admin/stacks/arn:openstack:heat::admin:stacks/s/1/resources").unwrap();
        assert_eq!(
            (m.action, m.param("stack_name")),
            (Action::Lookup, "arn:openstack:heat::admin:stacks/s/1/resources")
        );
    }

    #[test]
    fn snapshot_routes() {
        let m = find(Method::POST, "/admin/stacks/s/1/snapshots").unwrap();
        assert_eq!((m.action, m.param("stack_id")), (Action::StackSnapshot, "1"));
        assert_eq!(find(Method::GET, "/admin/stacks/s/1/snapshots").unwrap().action, Action::ListSnapshots);
        let m = find(Method::GET, "/admin/stacks/s/1/snapshots/x").unwrap();
        assert_eq!((m.action, m.param("snapshot_id")), (Action::ShowSnapshot, "x"));
        assert_eq!(find(Method::DELETE, "/admin/stacks/s/1/snapshots/x").unwrap().action, Action::DeleteSnapshot);
        let m = find(Method::POST, "/admin/stacks/s/1/snapshots/x/restore").unwrap();
        assert_eq!((m.action, m.param("snapshot_id")), (Action::RestoreSnapshot, "x"));
        let m = find(Method::PUT, "/admin/stacks/s/1/snapshots").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Reject, Some("POST,GET")));
        let m = find(Method::GET, "/admin/stacks/s/1/snapshots/x/restore").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Reject, Some("POST")));
    }

    #[test]
    fn software_routes() {
        let m = find(Method::GET, "/admin/software_deployments/metadata/srv").unwrap();
        assert_eq!((m.action, m.param("server_id")), (Action::SoftwareDeploymentMetadata, "srv"));
        let m = find(Method::PUT, "/admin/software_deployments/d1").unwrap();
        assert_eq!((m.action, m.param("deployment_id")), (Action::UpdateSoftwareDeployment, "d1"));
        assert_eq!(find(Method::DELETE, "/admin/software_configs/c1").unwrap().action, Action::DeleteSoftwareConfig);
        let m = find(Method::PUT, "/admin/software_configs/c1").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Reject, Some("GET,DELETE")));
    }

    #[test]
    fn undeclared_methods_and_options() {
        let m = find(Method::POST, "/admin/stacks/s/1/resources").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Reject, Some("GET")));
        let m = find(Method::OPTIONS, "/admin/stacks").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Options, Some("GET,POST")));
        let m = find(Method::OPTIONS, "/admin/stacks/s/1").unwrap();
        assert_eq!(m.allow.as_deref(), Some("GET,PUT,PATCH,DELETE"));
        let m = find(Method::HEAD, "/admin/stacks/s").unwrap();
        assert_eq!((m.action, m.allow.as_deref()), (Action::Reject, Some("GET,POST,PUT,PATCH,DELETE")));
        // Services has no 405 route: other methods are unknown.
        assert!(find(Method::POST, "/admin/services").is_none());
    }
}
