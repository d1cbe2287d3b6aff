//! The one route table type both REST APIs route with.
//!
//! A table is an ordered list of routes, each a path template, the methods
//! it takes and the API's handler for them. Routes are tried in declaration
//! order and the first whose template and method both match takes the
//! request, as both upstream routers do (python-routes for heat-api,
//! Placement's own table). An unknown path is 404. What a known path asked
//! with another method gets is where the two APIs differ, down to the
//! bytes of `Allow`, so a table is given its [`AllowStyle`].
//!
//! Templates are `/`-separated segments: a literal, `{name}` (one
//! non-empty segment, kept as the parameter `name`), or `{name:kind}`, a
//! parameter restricted by the [`Constraint`] the table was given under
//! `kind`. The template's text is also the request's metrics label.

use std::borrow::Cow;
use std::collections::HashMap;

use http::Method;

/// Path parameters by the names of their template's segments.
pub type Params = HashMap<&'static str, String>;

/// How a table answers a known path asked with a method no route of that
/// path declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowStyle {
    /// Placement's: once every route has been tried, a path that some
    /// template matches is 405, and `Allow` lists the methods of all the
    /// routes matching it, once each, in declaration order: `GET, PUT`.
    EveryMatchingRoute,
    /// heat-api's (Heat's `connect` over python-routes): only the answers
    /// a [`RouteTable::add_group`] adds make a 405 or an OPTIONS 204, in their
    /// place in the order; `Allow` lists the methods the group declared
    /// for the template, in declaration order: `GET,PUT`. A request no
    /// route takes is 404, whatever paths the table knows.
    GroupDeclared,
}

impl AllowStyle {
    fn separator(self) -> &'static str {
        match self {
            AllowStyle::EveryMatchingRoute => ", ",
            AllowStyle::GroupDeclared => ",",
        }
    }
}

/// The methods a group answers with 405 when its template does not
/// declare them (heat-api's `connect`); OPTIONS has an answer of its own.
const GROUP_ANSWERED: [Method; 6] =
    [Method::HEAD, Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE];

/// What a `{name:kind}` segment accepts.
#[derive(Debug, Clone, Copy)]
pub enum Constraint {
    /// One segment among these.
    OneOf(&'static [&'static str]),
    /// The rest of the path, `/`s included, when it starts with this
    /// prefix; the segment ends the template.
    RestStartingWith(&'static str),
}

#[derive(Debug, Clone)]
enum Segment {
    Literal(&'static str),
    Param(&'static str),
    OneOf(&'static str, &'static [&'static str]),
    Rest(&'static str, &'static str),
    /// A `{name:kind}` whose kind the table was not given: a defect of the
    /// declaration, which refuses every path rather than accepting any.
    Unresolved,
}

#[derive(Debug, Clone)]
struct Template {
    text: &'static str,
    segments: Vec<Segment>,
}

impl Template {
    fn parse(text: &'static str, constraints: &[(&'static str, Constraint)]) -> Template {
        let segments = text
            .trim_start_matches('/')
            .split('/')
            .map(|seg| {
                let Some(inner) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
                    return Segment::Literal(seg);
                };
                let Some((name, kind)) = inner.split_once(':') else {
                    return Segment::Param(inner);
                };
                match constraints.iter().find(|(k, _)| *k == kind) {
                    Some((_, Constraint::OneOf(choices))) => Segment::OneOf(name, choices),
                    Some((_, Constraint::RestStartingWith(prefix))) => Segment::Rest(name, prefix),
                    None => {
                        tracing::error!(target: "keelson::routes", "route {text}: no constraint named {kind}");
                        Segment::Unresolved
                    }
                }
            })
            .collect();
        Template { text, segments }
    }

    /// The parameters, when `path` (split at `/`, without the leading one)
    /// matches.
    fn capture(&self, path: &[&str]) -> Option<Params> {
        let mut params = Params::new();
        for (i, seg) in self.segments.iter().enumerate() {
            if let Segment::Rest(name, prefix) = seg {
                let rest = path.get(i..)?.join("/");
                if !rest.starts_with(prefix) {
                    return None;
                }
                params.insert(name, rest);
                return Some(params);
            }
            let value = *path.get(i)?;
            match seg {
                Segment::Literal(lit) if *lit == value => {}
                Segment::Param(name) if !value.is_empty() => {
                    params.insert(name, value.to_string());
                }
                Segment::OneOf(name, choices) if choices.contains(&value) => {
                    params.insert(name, value.to_string());
                }
                _ => return None,
            }
        }
        (self.segments.len() == path.len()).then_some(params)
    }
}

/// The segments of `path` after its leading `/` (an empty path is the
/// root); `None` for a path that does not start at the root.
fn split_path(path: &str) -> Option<Vec<&str>> {
    let path = if path.is_empty() { "/" } else { path };
    Some(path.strip_prefix('/')?.split('/').collect())
}

/// What a route answers.
#[derive(Debug)]
enum Answer<H> {
    Handler(H),
    /// A group's 405 for the methods its template does not declare.
    MethodNotAllowed(String),
    /// A group's 204 to OPTIONS.
    Options(String),
}

/// One route as an API declares it: `handler` takes `methods` on the
/// paths `template` matches.
#[derive(Debug)]
pub struct Route<H> {
    methods: Vec<Method>,
    template: &'static str,
    handler: H,
}

impl<H> Route<H> {
    pub fn new(methods: &[Method], template: &'static str, handler: H) -> Self {
        Route { methods: methods.to_vec(), template, handler }
    }
}

/// A route in its table: the template parsed, or one of a group's answers.
#[derive(Debug)]
struct Entry<H> {
    template: Template,
    methods: Vec<Method>,
    answer: Answer<H>,
}

/// A request a route's handler takes.
#[derive(Debug)]
pub struct Found<'t, H> {
    pub handler: &'t H,
    /// The route's template.
    pub template: &'static str,
    pub params: Params,
}

/// What routing decided for a method and path.
#[derive(Debug)]
pub enum Match<'t, H> {
    Found(Found<'t, H>),
    /// 405. `template` is the first template that matched the path.
    MethodNotAllowed {
        allow: Cow<'t, str>,
        template: &'static str,
    },
    /// 204 to OPTIONS, from a group's answer.
    Options {
        allow: &'t str,
        template: &'static str,
    },
    NotFound,
}

/// An ordered route table whose routes name handlers of type `H`.
#[derive(Debug)]
pub struct RouteTable<H> {
    style: AllowStyle,
    constraints: &'static [(&'static str, Constraint)],
    entries: Vec<Entry<H>>,
}

impl<H> RouteTable<H> {
    /// An empty table; `constraints` are the kinds its templates may name.
    pub fn new(style: AllowStyle, constraints: &'static [(&'static str, Constraint)]) -> Self {
        RouteTable { style, constraints, entries: Vec::new() }
    }

    /// Appends `routes`, in their order.
    pub fn add(&mut self, routes: impl IntoIterator<Item = Route<H>>) -> &mut Self {
        for route in routes {
            self.entries.push(Entry {
                template: Template::parse(route.template, self.constraints),
                methods: route.methods,
                answer: Answer::Handler(route.handler),
            });
        }
        self
    }

    /// Appends `routes` as one group (heat-api's `connect`): after them,
    /// each template they declare, in first-declaration order, gets a 405
    /// for the methods of [`GROUP_ANSWERED`] it does not declare and a 204
    /// for OPTIONS, both with `Allow` listing the methods it declares.
    pub fn add_group(&mut self, routes: impl IntoIterator<Item = Route<H>>) -> &mut Self {
        let start = self.entries.len();
        self.add(routes);
        let mut declared: Vec<(&Template, Vec<Method>)> = Vec::new();
        for entry in &self.entries[start..] {
            match declared.iter_mut().find(|(t, _)| t.text == entry.template.text) {
                Some((_, methods)) => methods.extend_from_slice(&entry.methods),
                None => declared.push((&entry.template, entry.methods.clone())),
            }
        }
        let separator = self.style.separator();
        let answers: Vec<Entry<H>> = declared
            .into_iter()
            .flat_map(|(template, methods)| {
                let allow = methods.iter().map(Method::as_str).collect::<Vec<_>>().join(separator);
                let undeclared = GROUP_ANSWERED.iter().filter(|m| !methods.contains(m)).cloned().collect();
                [
                    Entry {
                        template: template.clone(),
                        methods: undeclared,
                        answer: Answer::MethodNotAllowed(allow.clone()),
                    },
                    Entry {
                        template: template.clone(),
                        methods: vec![Method::OPTIONS],
                        answer: Answer::Options(allow),
                    },
                ]
            })
            .collect();
        self.entries.extend(answers);
        self
    }

    /// Routes `method` on `path` (from its leading `/`; an empty path is
    /// the root).
    pub fn find(&self, method: &Method, path: &str) -> Match<'_, H> {
        let Some(segments) = split_path(path) else {
            return Match::NotFound;
        };
        let mut first_template = None;
        let mut allowed: Vec<&str> = Vec::new();
        for entry in &self.entries {
            let takes_method = entry.methods.contains(method);
            // Only Placement's style looks at the routes that do not take
            // the method.
            if !takes_method && self.style == AllowStyle::GroupDeclared {
                continue;
            }
            let Some(params) = entry.template.capture(&segments) else {
                continue;
            };
            let template = entry.template.text;
            if takes_method {
                return match &entry.answer {
                    Answer::Handler(handler) => Match::Found(Found { handler, template, params }),
                    Answer::MethodNotAllowed(allow) => {
                        Match::MethodNotAllowed { allow: Cow::Borrowed(allow), template }
                    }
                    Answer::Options(allow) => Match::Options { allow, template },
                };
            }
            // A group's answers declare no method of the path.
            if let Answer::Handler(_) = entry.answer {
                first_template.get_or_insert(template);
                for m in &entry.methods {
                    if !allowed.contains(&m.as_str()) {
                        allowed.push(m.as_str());
                    }
                }
            }
        }
        match first_template {
            Some(template) => {
                Match::MethodNotAllowed { allow: Cow::Owned(allowed.join(self.style.separator())), template }
            }
            None => Match::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBPATHS: &[(&str, Constraint)] =
        &[("sub", Constraint::OneOf(&["resources", "events"])), ("arn", Constraint::RestStartingWith("arn:"))];

    fn table(style: AllowStyle) -> RouteTable<&'static str> {
        let mut t = RouteTable::new(style, SUBPATHS);
        t.add([
            Route::new(&[Method::GET], "/things", "list"),
            Route::new(&[Method::POST], "/things", "create"),
            Route::new(&[Method::GET], "/things/{id}", "show"),
            Route::new(&[Method::PUT, Method::DELETE], "/things/{id}", "change"),
        ]);
        t
    }

    fn grouped() -> RouteTable<&'static str> {
        let mut t = RouteTable::new(AllowStyle::GroupDeclared, SUBPATHS);
        t.add_group([
            Route::new(&[Method::GET], "/things", "list"),
            Route::new(&[Method::GET, Method::DELETE], "/things/{id}", "change"),
            Route::new(&[Method::POST], "/things", "create"),
            Route::new(&[Method::GET], "/things/{id}/{path:sub}", "sub"),
            Route::new(&[Method::GET], "/things/{id:arn}", "arn"),
        ])
        .add([Route::new(&[Method::GET], "/bare", "bare")]);
        t
    }

    fn found(m: Match<'_, &'static str>) -> (&'static str, &'static str, Params) {
        match m {
            Match::Found(f) => (*f.handler, f.template, f.params),
            other => panic!("not found: {other:?}"),
        }
    }

    fn not_allowed(m: Match<'_, &'static str>) -> (String, &'static str) {
        match m {
            Match::MethodNotAllowed { allow, template } => (allow.into_owned(), template),
            other => panic!("not a 405: {other:?}"),
        }
    }

    /// Placement's test of its template matching, kept with the matcher.
    fn match_pattern(pattern: &'static str, path: &str) -> Option<Params> {
        Template::parse(pattern, &[]).capture(&split_path(path)?)
    }

    #[test]
    fn patterns() {
        let p = match_pattern(
            "/resource_providers/{uuid}/inventories/{resource_class}",
            "/resource_providers/abc/inventories/VCPU",
        )
        .unwrap();
        assert_eq!(p["uuid"], "abc");
        assert_eq!(p["resource_class"], "VCPU");
        assert!(match_pattern("/resource_providers/{uuid}", "/resource_providers/").is_none());
        assert!(match_pattern("/resource_providers", "/resource_providers/").is_none());
        assert!(match_pattern("/", "").is_some());
    }

    #[test]
    fn params_and_first_match() {
        for style in [AllowStyle::EveryMatchingRoute, AllowStyle::GroupDeclared] {
            let t = table(style);
            let (handler, template, params) = found(t.find(&Method::GET, "/things/a1"));
            assert_eq!((handler, template, params["id"].as_str()), ("show", "/things/{id}", "a1"));
            assert_eq!(found(t.find(&Method::DELETE, "/things/a1")).0, "change");
            assert_eq!(found(t.find(&Method::POST, "/things")).0, "create");
            assert!(found(t.find(&Method::GET, "/things")).2.is_empty());
        }
    }

    #[test]
    fn unknown_paths_are_404() {
        for style in [AllowStyle::EveryMatchingRoute, AllowStyle::GroupDeclared] {
            let t = table(style);
            for path in ["/nothing", "/things/", "/things/a/b", "things", "", "/"] {
                assert!(matches!(t.find(&Method::GET, path), Match::NotFound), "{path}");
            }
        }
    }

    #[test]
    fn every_matching_route_style_allows_all_their_methods() {
        let t = table(AllowStyle::EveryMatchingRoute);
        assert_eq!(not_allowed(t.find(&Method::PATCH, "/things/a1")), ("GET, PUT, DELETE".into(), "/things/{id}"));
        assert_eq!(not_allowed(t.find(&Method::DELETE, "/things")), ("GET, POST".into(), "/things"));
        // OPTIONS and HEAD are methods like any other.
        assert_eq!(not_allowed(t.find(&Method::OPTIONS, "/things")).0, "GET, POST");
        assert_eq!(not_allowed(t.find(&Method::HEAD, "/things")).0, "GET, POST");
        // Two templates matching one path: their methods once each.
        let mut root = RouteTable::new(AllowStyle::EveryMatchingRoute, &[]);
        root.add([Route::new(&[Method::GET], "/", "home"), Route::new(&[Method::GET], "", "home")]);
        assert_eq!(found(root.find(&Method::GET, "")).1, "/");
        assert_eq!(not_allowed(root.find(&Method::POST, "/")), ("GET".into(), "/"));
        // A group's answers come first and list only declared methods.
        let mut grouped = RouteTable::new(AllowStyle::EveryMatchingRoute, &[]);
        grouped.add_group([Route::new(&[Method::GET], "/g", "g")]);
        assert_eq!(not_allowed(grouped.find(&Method::PUT, "/g")).0, "GET");
        assert_eq!(not_allowed(grouped.find(&Method::TRACE, "/g")).0, "GET");
        assert!(matches!(grouped.find(&Method::OPTIONS, "/g"), Match::Options { allow: "GET", .. }));
    }

    #[test]
    fn group_declared_style_answers_in_place() {
        let t = grouped();
        assert_eq!(not_allowed(t.find(&Method::PUT, "/things")), ("GET,POST".into(), "/things"));
        assert_eq!(not_allowed(t.find(&Method::HEAD, "/things/a1")), ("GET,DELETE".into(), "/things/{id}"));
        match t.find(&Method::OPTIONS, "/things/a1") {
            Match::Options { allow, template } => assert_eq!((allow, template), ("GET,DELETE", "/things/{id}")),
            other => panic!("not OPTIONS: {other:?}"),
        }
        // Methods outside the group's six, and routes outside any group,
        // have no answer of their own.
        assert!(matches!(t.find(&Method::TRACE, "/things"), Match::NotFound));
        assert!(matches!(t.find(&Method::POST, "/bare"), Match::NotFound));
        assert!(matches!(t.find(&Method::OPTIONS, "/bare"), Match::NotFound));
    }

    #[test]
    fn constraints() {
        let t = grouped();
        let (handler, _, params) = found(t.find(&Method::GET, "/things/a1/events"));
        assert_eq!((handler, params["path"].as_str()), ("sub", "events"));
        // Not one of the sub-paths.
        assert!(matches!(t.find(&Method::GET, "/things/a1/other"), Match::NotFound));
        let (handler, _, params) = found(t.find(&Method::GET, "/things/arn:x/y/z"));
        assert_eq!((handler, params["id"].as_str()), ("arn", "arn:x/y/z"));
        // `/things/{id}` precedes the arn route for a single segment.
        assert_eq!(found(t.find(&Method::GET, "/things/arn:x")).0, "change");
        // An unknown constraint matches nothing.
        let mut broken = RouteTable::new(AllowStyle::GroupDeclared, &[]);
        broken.add([Route::new(&[Method::GET], "/things/{id:nope}", "broken")]);
        assert!(matches!(broken.find(&Method::GET, "/things/a1"), Match::NotFound));
    }
}
