//! Placement's route table (upstream `ROUTE_DECLARATIONS`): an unknown path
//! is 404, a known path with another method is 405 with `Allow` listing
//! the declared methods in declaration order.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use http::Method;

use super::request::{HandlerResult, Req};

pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
pub type Handler = fn(Req) -> HandlerFuture;

/// One declared route.
pub struct Route {
    pub method: Method,
    /// Segments such as `/resource_providers/{uuid}/inventories`.
    pub pattern: &'static str,
    pub handler: Handler,
}

/// Declares a route to an `async fn(Req) -> HandlerResult`.
#[macro_export]
macro_rules! route {
    ($method:ident $pattern:literal => $handler:path) => {
        $crate::placement::router::Route {
            method: http::Method::$method,
            pattern: $pattern,
            handler: |req| Box::pin($handler(req)),
        }
    };
}

/// What routing decided for a path and method.
pub enum Match<'a> {
    Found(&'a Route, HashMap<&'static str, String>),
    MethodNotAllowed(String),
    NotFound,
}

pub struct Router {
    routes: Vec<Route>,
}

impl Router {
    pub fn new(routes: Vec<Route>) -> Self {
        Router { routes }
    }

    pub fn find(&self, method: &Method, path: &str) -> Match<'_> {
        let mut allowed: Vec<&str> = Vec::new();
        for route in &self.routes {
            if let Some(params) = match_pattern(route.pattern, path) {
                if route.method == *method {
                    return Match::Found(route, params);
                }
                let m = route.method.as_str();
                if !allowed.contains(&m) {
                    allowed.push(m);
                }
            }
        }
        if allowed.is_empty() {
            Match::NotFound
        } else {
            Match::MethodNotAllowed(allowed.join(", "))
        }
    }
}

fn match_pattern(pattern: &'static str, path: &str) -> Option<HashMap<&'static str, String>> {
    // Upstream declares both "/" and "" for the root.
    if pattern.is_empty() || pattern == "/" {
        return (path.is_empty() || path == "/").then(HashMap::new);
    }
    let mut params = HashMap::new();
    let mut pat = pattern.trim_start_matches('/').split('/');
    let mut segs = path.strip_prefix('/')?.split('/');
    loop {
        match (pat.next(), segs.next()) {
            (None, None) => return Some(params),
            (Some(p), Some(s)) => {
                if let Some(name) = p.strip_prefix('{').and_then(|n| n.strip_suffix('}')) {
                    if s.is_empty() {
                        return None;
                    }
                    params.insert(name, percent_decode_path(s));
                } else if p != s {
                    return None;
                }
            }
            _ => return None,
        }
    }
}

fn percent_decode_path(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let pairs = super::request::form_urlencoded_pairs(&format!("x={}", s.replace('+', "%2B")));
    pairs.into_iter().next().map(|(_, v)| v).unwrap_or_else(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
