//! Heat's Swift-backed types: OS::Swift::Container and the
//! OS::Heat::SwiftSignalHandle / OS::Heat::SwiftSignal pair, calling
//! Swift's object storage API through keelson-openstack's
//! [`ObjectStore`] as the stack's user (the stack's trust session, as the
//! OS::Nova::* types do).
//!
//! Swift's errors fail the action as python-swiftclient's
//! `ClientException` with its text (the object-store client words it);
//! a 404 on delete is a deletion done.

mod container;
mod signal;

use std::sync::Arc;

use keelson_openstack::object_store::ObjectStore;
use keelson_openstack::{OsError, Session};

pub use container::Container;
pub use signal::{SwiftSignal, SwiftSignalHandle};

use super::client_errors::SWIFTCLIENT;
use super::{Registry, ResourceFailure};
use crate::error::EngineError;

/// Adds the three types to `registry`.
pub fn register(registry: &mut Registry) {
    let host = registry.host().clone();
    registry.register(Arc::new(Container::new(host.clone())));
    registry.register(Arc::new(SwiftSignalHandle::new(host.clone())));
    registry.register(Arc::new(SwiftSignal::new(host)));
}

/// The failure a Swift error becomes: swiftclient's class and text.
pub(crate) fn failure(e: OsError) -> ResourceFailure {
    SWIFTCLIENT.failure(e)
}

/// Ok for a 404 (a delete of something already gone).
pub(crate) fn done_if_gone(result: Result<(), OsError>) -> Result<(), ResourceFailure> {
    SWIFTCLIENT.done_if_gone(result)
}

/// A Swift error met while resolving an attribute, as Heat raises it.
pub(crate) fn attribute_error(e: OsError) -> EngineError {
    SWIFTCLIENT.attribute_error(e)
}

/// The object-store client of the session's catalog.
pub(crate) async fn object_store(session: &Session) -> Result<ObjectStore<'_>, ResourceFailure> {
    ObjectStore::connect(session).await.map_err(failure)
}

#[cfg(test)]
pub(crate) mod testing {
    //! FakeSwift: a stand-in for Keystone and Swift on loopback. Keystone
    //! answers a token whose catalog names the stand-in as `object-store`
    //! (account `AUTH_p1`); Swift keeps an account, its containers and
    //! their objects in memory, with what the types rely on: account and
    //! container metadata, `X-Versions-Location` (stack mode: a PUT keeps
    //! the older object as `<len:03x><name>/<ts>`, a DELETE brings the
    //! newest back), 409 for a non-empty container's DELETE, and temp URLs
    //! checked against the account's key (HMAC-SHA256).

    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use axum::extract::{Request, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use keelson_openstack::object_store::temp_url_signature;
    use keelson_openstack::{AuthMethod, HttpClient, Session};
    use serde_json::json;

    pub const ACCOUNT: &str = "/v1/AUTH_p1";
    /// Swift's body of a 409 (`HTTPConflict`).
    pub const CONFLICT_BODY: &str =
        "<html><h1>Conflict</h1><p>There was a conflict when trying to complete your request.</p></html>";

    #[derive(Default, Clone)]
    pub struct FakeContainer {
        pub headers: BTreeMap<String, String>,
        pub objects: BTreeMap<String, Vec<u8>>,
    }

    #[derive(Default)]
    pub struct FakeSwift {
        pub account: Mutex<BTreeMap<String, String>>,
        pub containers: Mutex<BTreeMap<String, FakeContainer>>,
        /// `"METHOD path"` of every request to Swift.
        pub seen: Mutex<Vec<String>>,
        /// Version timestamps handed out so far.
        clock: Mutex<u64>,
    }

    impl FakeSwift {
        pub fn seen(&self) -> Vec<String> {
            self.seen.lock().unwrap().clone()
        }
        pub fn container(&self, name: &str) -> Option<FakeContainer> {
            self.containers.lock().unwrap().get(name).cloned()
        }
        pub fn put(&self, container: &str, object: &str, body: &str) {
            let mut containers = self.containers.lock().unwrap();
            containers.entry(container.into()).or_default().objects.insert(object.into(), body.as_bytes().to_vec());
        }
    }

    fn meta(headers: &HeaderMap, prefixes: &[&str]) -> BTreeMap<String, String> {
        headers
            .iter()
            .filter(|(k, _)| prefixes.iter().any(|p| k.as_str().starts_with(p)))
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap().to_string()))
            .collect()
    }

    fn answer(status: u16, headers: &BTreeMap<String, String>, body: Vec<u8>) -> Response {
        let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
        for (k, v) in headers {
            response.headers_mut().insert(axum::http::HeaderName::try_from(k.as_str()).unwrap(), v.parse().unwrap());
        }
        response.headers_mut().insert("x-trans-id", "tx-fake".parse().unwrap());
        response
    }

    fn status(code: u16, body: &str) -> Response {
        answer(code, &BTreeMap::new(), body.as_bytes().to_vec())
    }

    async fn handle(State((swift, base)): State<(Arc<FakeSwift>, String)>, req: Request) -> Response {
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let headers = req.headers().clone();
        let body = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap_or_default().to_vec();
        if path == "/v3/auth/tokens" {
            let token = json!({"token": {
                "user": {"id": "u1"}, "project": {"id": "p1"}, "expires_at": "2999-01-01T00:00:00Z",
                "catalog": [{"type": "object-store", "endpoints": [
                    {"interface": "public", "region_id": "RegionOne", "url": format!("{base}{ACCOUNT}")}]}]}});
            return (StatusCode::OK, token.to_string()).into_response();
        }
        swift.seen.lock().unwrap().push(format!("{method} {path}"));
        let Some(rest) = path.strip_prefix(ACCOUNT) else { return status(404, "") };
        let parts: Vec<String> = rest.trim_start_matches('/').splitn(2, '/').map(str::to_string).collect();
        let signed = query.contains("temp_url_sig=");
        if signed {
            let key = swift.account.lock().unwrap().get("x-account-meta-temp-url-key").cloned().unwrap_or_default();
            let param = |name: &str| {
                query.split('&').find_map(|p| p.strip_prefix(&format!("{name}="))).unwrap_or_default().to_string()
            };
            let expires: i64 = param("temp_url_expires").parse().unwrap_or(0);
            if param("temp_url_sig") != temp_url_signature(&path, expires, &key, &method) {
                return status(401, "<html><h1>Unauthorized</h1><p>This server could not verify that you are authorized to access the document you requested.</p></html>");
            }
        } else if headers.get("x-auth-token").is_none() {
            return status(401, "");
        }
        match (method.as_str(), parts.as_slice()) {
            ("HEAD", [a]) if a.is_empty() => answer(204, &swift.account.lock().unwrap(), Vec::new()),
            ("POST", [a]) if a.is_empty() => {
                swift.account.lock().unwrap().extend(meta(&headers, &["x-account-meta-"]));
                status(204, "")
            }
            ("PUT", [c]) => {
                let mut containers = swift.containers.lock().unwrap();
                let created = !containers.contains_key(c);
                let entry = containers.entry(c.clone()).or_default();
                entry.headers.extend(meta(&headers, &["x-container-", "x-versions-location"]));
                status(if created { 201 } else { 202 }, "")
            }
            (m, [c]) => {
                let mut containers = swift.containers.lock().unwrap();
                let Some(container) = containers.get(c) else {
                    return status(404, "<html><h1>Not Found</h1><p>The resource could not be found.</p></html>");
                };
                match m {
                    "HEAD" => {
                        let mut h = container.headers.clone();
                        h.insert("x-container-object-count".into(), container.objects.len().to_string());
                        let used: usize = container.objects.values().map(Vec::len).sum();
                        h.insert("x-container-bytes-used".into(), used.to_string());
                        answer(204, &h, Vec::new())
                    }
                    "GET" => {
                        let listing: Vec<_> =
                            container.objects.iter().map(|(k, v)| json!({"name": k, "bytes": v.len()})).collect();
                        let h = BTreeMap::from([("content-type".to_string(), "application/json".to_string())]);
                        answer(200, &h, serde_json::to_vec(&listing).unwrap())
                    }
                    "DELETE" if !container.objects.is_empty() => status(409, CONFLICT_BODY),
                    "DELETE" => {
                        containers.remove(c);
                        status(204, "")
                    }
                    _ => status(405, ""),
                }
            }
            (m, [c, o]) => {
                let mut containers = swift.containers.lock().unwrap();
                let Some(container) = containers.get_mut(c) else { return status(404, "") };
                let versions = container.headers.get("x-versions-location").is_some_and(|v| v == c);
                let prefix = format!("{:03x}{o}/", o.len());
                match m {
                    "PUT" => {
                        if versions {
                            if let Some(old) = container.objects.get(o).cloned() {
                                let mut clock = swift.clock.lock().unwrap();
                                *clock += 1;
                                container.objects.insert(format!("{prefix}{:016}.00000", *clock), old);
                            }
                        }
                        container.objects.insert(o.clone(), body);
                        status(201, "")
                    }
                    "GET" => match container.objects.get(o) {
                        Some(b) => answer(200, &BTreeMap::new(), b.clone()),
                        None => status(404, ""),
                    },
                    "DELETE" => {
                        if container.objects.remove(o).is_none() {
                            return status(404, "");
                        }
                        let newest = container.objects.keys().rev().find(|k| k.starts_with(&prefix)).cloned();
                        if let (true, Some(newest)) = (versions, newest) {
                            if let Some(b) = container.objects.remove(&newest) {
                                container.objects.insert(o.clone(), b);
                            }
                        }
                        status(204, "")
                    }
                    _ => status(405, ""),
                }
            }
            _ => status(404, ""),
        }
    }

    /// A FakeSwift and a session whose catalog points at it.
    pub async fn swift() -> (Arc<FakeSwift>, Arc<Session>) {
        let swift = Arc::new(FakeSwift::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(handle).with_state((swift.clone(), base.clone()));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let session = Session::new(HttpClient::default(), &base, AuthMethod::Existing { token: "tok".into() });
        (swift, Arc::new(session))
    }

    /// PUTs `body` to a temp URL, as an instance signals (no token).
    pub async fn put_to(url: &str, body: &str) -> u16 {
        let http = HttpClient::default();
        let answer = http
            .send_payload(axum::http::Method::PUT, url, &[], keelson_openstack::http::Payload::Bytes(body.as_bytes()))
            .await
            .unwrap();
        answer.status.as_u16()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::Registry;
    use super::*;

    use crate::caller::test_admin as admin;

    /// The schema views equal what Heat 27.0.1's code answers
    /// (tests/reference/heat/record_schemas.py swift).
    #[test]
    fn schema_views_equal_heats() {
        let recorded: Value = serde_json::from_str(include_str!("testdata/swift_schemas.json")).unwrap();
        let mut registry = Registry::builtin();
        register(&mut registry);
        for name in ["OS::Swift::Container", "OS::Heat::SwiftSignalHandle", "OS::Heat::SwiftSignal"] {
            let mut without = recorded[name].clone();
            without.as_object_mut().unwrap().remove("description");
            assert_eq!(registry.schema_view(&admin(), name, false).unwrap(), without, "{name}");
            assert_eq!(registry.schema_view(&admin(), name, true).unwrap(), recorded[name], "{name}");
            assert!(Registry::builtin().get(name).is_none(), "needs Keystone");
        }
    }
}
