//! heat-api v1's route table, matched the way python-routes matches it:
//! routes are tried in declaration order and the first whose path pattern
//! and method both match wins. Like upstream's `connect` helper, every
//! declared URL of a group gets, after the group's own routes, a route that
//! answers its undeclared methods with 405 and one that answers `OPTIONS`
//! with 204, both carrying `Allow` (the declared methods, in declaration
//! order). The order is observable: `GET /stacks/preview` is a stack
//! lookup, because the lookup route precedes the 405 of `/stacks/preview`.

use std::collections::HashMap;

use http::Method;

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

/// One segment of a path pattern.
#[derive(Debug, Clone)]
enum Segment {
    Literal(&'static str),
    /// `{name}`: one non-empty segment.
    Var(&'static str),
    /// `{name:a|b|c}`: one segment among the alternatives.
    OneOf(&'static str, &'static [&'static str]),
    /// `{name:arn\x3A.*}`: the rest of the path, starting with `arn:`.
    Arn(&'static str),
}

#[derive(Debug, Clone)]
struct Route {
    pattern: &'static str,
    segments: Vec<Segment>,
    methods: Vec<Method>,
    action: Action,
    /// For `Reject`/`Options`: the `Allow` value.
    allow: Option<String>,
}

/// A successful match.
#[derive(Debug, Clone)]
pub struct Matched {
    pub action: Action,
    /// The route's pattern (a metrics label).
    pub pattern: &'static str,
    pub params: HashMap<&'static str, String>,
    /// Set for `Reject` and `Options`.
    pub allow: Option<String>,
}

impl Matched {
    /// A path parameter (empty when the route has none of that name).
    pub fn param(&self, name: &str) -> &str {
        self.params.get(name).map(String::as_str).unwrap_or("")
    }
}

/// The v1 route table.
pub struct RouteTable {
    routes: Vec<Route>,
}

const STACK_SUBPATHS_GET: &[&str] = &["resources", "events", "template", "actions", "environment", "files"];
const STACK_SUBPATHS_POST: &[&str] = &["resources", "events", "template", "actions"];
const ALL_METHODS: [Method; 6] = [Method::HEAD, Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE];

fn parse_pattern(pattern: &'static str) -> Vec<Segment> {
    pattern
        .trim_start_matches('/')
        .split('/')
        .map(|seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some("stack_name:arn") => Segment::Arn("stack_name"),
            Some("path:get_subpaths") => Segment::OneOf("path", STACK_SUBPATHS_GET),
            Some("path:post_subpaths") => Segment::OneOf("path", STACK_SUBPATHS_POST),
            Some(name) => Segment::Var(name),
            None => Segment::Literal(seg),
        })
        .collect()
}

/// Registers a group of routes as upstream's `connect()` does.
struct Group<'a> {
    table: &'a mut Vec<Route>,
    /// URLs in first-declaration order with their declared methods.
    urls: Vec<(&'static str, Vec<Method>)>,
}

impl<'a> Group<'a> {
    fn new(table: &'a mut Vec<Route>) -> Self {
        Group { table, urls: Vec::new() }
    }

    fn add(&mut self, pattern: &'static str, methods: &[Method], action: Action) -> &mut Self {
        self.table.push(Route {
            pattern,
            segments: parse_pattern(pattern),
            methods: methods.to_vec(),
            action,
            allow: None,
        });
        match self.urls.iter_mut().find(|(p, _)| *p == pattern) {
            Some((_, declared)) => declared.extend_from_slice(methods),
            None => self.urls.push((pattern, methods.to_vec())),
        }
        self
    }

    fn finish(self) {
        for (pattern, declared) in self.urls {
            let allow = declared.iter().map(Method::as_str).collect::<Vec<_>>().join(",");
            let missing: Vec<Method> = ALL_METHODS.iter().filter(|m| !declared.contains(m)).cloned().collect();
            let segments = parse_pattern(pattern);
            self.table.push(Route {
                pattern,
                segments: segments.clone(),
                methods: missing,
                action: Action::Reject,
                allow: Some(allow.clone()),
            });
            self.table.push(Route {
                pattern,
                segments,
                methods: vec![Method::OPTIONS],
                action: Action::Options,
                allow: Some(allow),
            });
        }
    }
}

impl RouteTable {
    /// heat-api v1's routes (`heat/api/openstack/v1/__init__.py`), without
    /// snapshots (not in the engine's contract yet).
    pub fn heat_v1() -> Self {
        use Action::*;
        let mut routes = Vec::new();

        let mut stacks = Group::new(&mut routes);
        stacks
            .add("/{tenant_id}/validate", &[Method::POST], ValidateTemplate)
            .add("/{tenant_id}/resource_types", &[Method::GET], ListResourceTypes)
            .add("/{tenant_id}/resource_types/{type_name}", &[Method::GET], ResourceSchema)
            .add("/{tenant_id}/resource_types/{type_name}/template", &[Method::GET], GenerateTemplate)
            .add("/{tenant_id}/template_versions", &[Method::GET], ListTemplateVersions)
            .add("/{tenant_id}/template_versions/{template_version}/functions", &[Method::GET], ListTemplateFunctions)
            .add("/{tenant_id}/stacks", &[Method::GET], ListStacks)
            .add("/{tenant_id}/stacks", &[Method::POST], CreateStack)
            .add("/{tenant_id}/stacks/preview", &[Method::POST], PreviewStack)
            .add("/{tenant_id}/stacks/detail", &[Method::GET], ListStacksDetail)
            .add(
                "/{tenant_id}/stacks/{stack_name}",
                &[Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE],
                Lookup,
            )
            .add(
                "/{tenant_id}/stacks/{stack_name:arn}",
                &[Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE],
                Lookup,
            )
            .add("/{tenant_id}/stacks/{stack_name}/{path:get_subpaths}", &[Method::GET], Lookup)
            .add("/{tenant_id}/stacks/{stack_name}/{path:post_subpaths}", &[Method::POST], Lookup)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}", &[Method::GET], ShowStack)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/template", &[Method::GET], GetTemplate)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/environment", &[Method::GET], GetEnvironment)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/files", &[Method::GET], GetFiles)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}", &[Method::PUT], UpdateStack)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}", &[Method::PATCH], UpdateStackPatch)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/preview", &[Method::PUT], PreviewUpdate)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/preview", &[Method::PATCH], PreviewUpdatePatch)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}", &[Method::DELETE], DeleteStack)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/abandon", &[Method::DELETE], AbandonStack)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/export", &[Method::GET], ExportStack)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/outputs", &[Method::GET], ListOutputs)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/outputs/{output_key}", &[Method::GET], ShowOutput);
        stacks.finish();

        let mut resources = Group::new(&mut routes);
        resources
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/resources", &[Method::GET], ListResources)
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}", &[Method::GET], ShowResource)
            .add(
                "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/metadata",
                &[Method::GET],
                ResourceMetadata,
            )
            .add(
                "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/signal",
                &[Method::POST],
                SignalResource,
            )
            .add(
                "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}",
                &[Method::PATCH],
                MarkUnhealthy,
            );
        resources.finish();

        let mut events = Group::new(&mut routes);
        events
            .add("/{tenant_id}/stacks/{stack_name}/{stack_id}/events", &[Method::GET], ListEvents)
            .add(
                "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events",
                &[Method::GET],
                ListEvents,
            )
            .add(
                "/{tenant_id}/stacks/{stack_name}/{stack_id}/resources/{resource_name}/events/{event_id}",
                &[Method::GET],
                ShowEvent,
            );
        events.finish();

        let mut actions = Group::new(&mut routes);
        actions.add("/{tenant_id}/stacks/{stack_name}/{stack_id}/actions", &[Method::POST], StackAction);
        actions.finish();

        let mut info = Group::new(&mut routes);
        info.add("/{tenant_id}/build_info", &[Method::GET], BuildInfo);
        info.finish();

        let mut configs = Group::new(&mut routes);
        configs
            .add("/{tenant_id}/software_configs", &[Method::GET], ListSoftwareConfigs)
            .add("/{tenant_id}/software_configs", &[Method::POST], CreateSoftwareConfig)
            .add("/{tenant_id}/software_configs/{config_id}", &[Method::GET], ShowSoftwareConfig)
            .add("/{tenant_id}/software_configs/{config_id}", &[Method::DELETE], DeleteSoftwareConfig);
        configs.finish();

        let mut deployments = Group::new(&mut routes);
        deployments
            .add("/{tenant_id}/software_deployments", &[Method::GET], ListSoftwareDeployments)
            .add("/{tenant_id}/software_deployments/metadata/{server_id}", &[Method::GET], SoftwareDeploymentMetadata)
            .add("/{tenant_id}/software_deployments", &[Method::POST], CreateSoftwareDeployment)
            .add("/{tenant_id}/software_deployments/{deployment_id}", &[Method::GET], ShowSoftwareDeployment)
            .add("/{tenant_id}/software_deployments/{deployment_id}", &[Method::PUT], UpdateSoftwareDeployment)
            .add("/{tenant_id}/software_deployments/{deployment_id}", &[Method::DELETE], DeleteSoftwareDeployment);
        deployments.finish();

        // Upstream declares services with a bare submapper: no 405/OPTIONS.
        routes.push(Route {
            pattern: "/{tenant_id}/services",
            segments: parse_pattern("/{tenant_id}/services"),
            methods: vec![Method::GET],
            action: ListServices,
            allow: None,
        });
        RouteTable { routes }
    }

    /// The first route matching `method` and `path` (the decoded path under
    /// `/v1`, e.g. `/admin/stacks`).
    pub fn find(&self, method: &Method, path: &str) -> Option<Matched> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        self.routes.iter().filter(|r| r.methods.contains(method)).find_map(|route| {
            let params = match_segments(&route.segments, &segments)?;
            Some(Matched { action: route.action, pattern: route.pattern, params, allow: route.allow.clone() })
        })
    }
}

fn match_segments(pattern: &[Segment], path: &[&str]) -> Option<HashMap<&'static str, String>> {
    let mut params = HashMap::new();
    for (i, seg) in pattern.iter().enumerate() {
        if let Segment::Arn(name) = seg {
            let rest = path.get(i..)?.join("/");
            if !rest.starts_with("arn:") {
                return None;
            }
            params.insert(*name, rest);
            return Some(params);
        }
        let value = *path.get(i)?;
        match seg {
            Segment::Literal(lit) if *lit == value => {}
            Segment::Var(name) if !value.is_empty() => {
                params.insert(*name, value.to_string());
            }
            Segment::OneOf(name, choices) if choices.contains(&value) => {
                params.insert(*name, value.to_string());
            }
            _ => return None,
        }
    }
    (pattern.len() == path.len()).then_some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(method: Method, path: &str) -> Option<Matched> {
        RouteTable::heat_v1().find(&method, path)
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
