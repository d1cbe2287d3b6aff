//! The one HTTP transport of keelson's OpenStack clients: HTTP/1.1, plain
//! or over TLS ([`crate::tls`]), on hyper's pooled client (one pool per TLS
//! configuration: the client's own, and a client name's where its settings
//! differ, [`HttpClient::for_client`]), every request under a timeout, the answer
//! read within the same timeout and refused past a size bound, a refused
//! connection retried with keystoneauth's back-off (a failed TLS
//! handshake is not: it is keystoneauth's `SSLError`), an idempotent
//! request whose connection closed before any answer sent once more
//! ([`closed_before_answer`]), idle connections dropped before common
//! servers drop them ([`POOL_IDLE_TIMEOUT`]), and the current
//! request's id and `traceparent` sent along
//! ([`keelson_runtime::context::RequestContext::inject_http`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use keelson_runtime::context::RequestContext;

use crate::error::OsError;
use crate::tls::{Connector, TlsSettings, TlsSetupError};

/// How long a request may take, answer included, unless set otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read (a token with a large catalog is some 100 KiB).
pub const DEFAULT_MAX_BODY: usize = 8 << 20;

/// An answer: its status, headers and body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON (`null` when empty).
    pub fn json(&self) -> Result<serde_json::Value, OsError> {
        if self.body.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&self.body).map_err(|e| OsError::InvalidResponse(format!("not JSON: {e}")))
    }

    /// `Ok(self)` for a 2xx answer, else its error.
    pub fn success(self) -> Result<Answer, OsError> {
        if self.status.is_success() {
            Ok(self)
        } else {
            Err(OsError::from_status(self.status, &self.body))
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What a request carries.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    Empty,
    /// A JSON document (`content-type: application/json` unless the
    /// caller names another).
    Json(&'a serde_json::Value),
    /// Bytes as they are (an object's content), with the caller's headers.
    Bytes(&'a [u8]),
}

type Pool = Client<Connector, Full<Bytes>>;

/// How long an idle pooled connection is kept: less than the keep-alive
/// timeout of the servers OpenStack's APIs run behind (Apache's default
/// is 5 s, cheroot's 10 s), so that a request is not written on a
/// connection the server is closing at that instant.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// The transport, cheap to clone (the clones share the pools).
#[derive(Clone)]
pub struct HttpClient {
    client: Pool,
    /// The pools of clients whose TLS settings are their own, by client
    /// name (`nova`, `neutron`, ...).
    by_client: Arc<BTreeMap<String, Pool>>,
    timeout: Duration,
    max_body: usize,
    connect_retries: u32,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").field("timeout", &self.timeout).finish()
    }
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient::new(DEFAULT_TIMEOUT, 0)
    }
}

/// One pool whose connections take at most `timeout` to open.
fn pool(timeout: Duration, tls: Result<Arc<tokio_rustls::rustls::ClientConfig>, TlsSetupError>) -> Pool {
    let mut tcp = HttpConnector::new();
    tcp.set_connect_timeout(Some(timeout));
    tcp.set_nodelay(true);
    Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(Connector::new(tcp, tls))
}

impl HttpClient {
    /// A client whose requests take at most `timeout` each and whose
    /// refused connections are tried again `connect_retries` times; https
    /// servers are verified against the system's CAs.
    pub fn new(timeout: Duration, connect_retries: u32) -> Self {
        HttpClient {
            client: pool(timeout, crate::tls::default_config()),
            by_client: Arc::new(BTreeMap::new()),
            timeout,
            max_body: DEFAULT_MAX_BODY,
            connect_retries,
        }
    }

    /// The same client speaking https as `tls` says (a client name's own
    /// settings, [`HttpClient::with_client_tls`], stay).
    pub fn with_tls(mut self, tls: &TlsSettings) -> Result<Self, TlsSetupError> {
        self.client = pool(self.timeout, Ok(tls.client_config()?));
        Ok(self)
    }

    /// The same client, with the client named `client` speaking https as
    /// `tls` says ([`HttpClient::for_client`]).
    pub fn with_client_tls(mut self, client: &str, tls: &TlsSettings) -> Result<Self, TlsSetupError> {
        let client_pool = pool(self.timeout, Ok(tls.client_config()?));
        Arc::make_mut(&mut self.by_client).insert(client.to_string(), client_pool);
        Ok(self)
    }

    /// This client as the client named `client` (`nova`, `neutron`, ...)
    /// uses it: with that client's TLS settings when it has its own.
    pub fn for_client(&self, client: &str) -> HttpClient {
        match self.by_client.get(client) {
            Some(own) => HttpClient { client: own.clone(), ..self.clone() },
            None => self.clone(),
        }
    }

    /// The same client with answers bounded at `max_body` bytes: a longer
    /// one is [`OsError::AnswerTooLarge`].
    pub fn with_max_body(mut self, max_body: usize) -> Self {
        self.max_body = max_body;
        self
    }

    /// Sends one request: `body` as JSON when given, `headers` added.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, OsError> {
        let payload = match body {
            Some(doc) => Payload::Json(doc),
            None => Payload::Empty,
        };
        self.send_payload(method, url, headers, payload).await
    }

    /// [`HttpClient::send`] with any [`Payload`].
    pub async fn send_payload(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Payload<'_>,
    ) -> Result<Answer, OsError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(OsError::Unavailable(format!("{url}: only http:// and https:// endpoints are supported")));
        }
        let mut builder = Request::builder().method(method.clone()).uri(url).header("accept", "application/json");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let payload = match body {
            Payload::Json(doc) => {
                // A caller's own media type (Glance's JSON patch) wins.
                if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
                    builder = builder.header("content-type", "application/json");
                }
                Bytes::from(doc.to_string())
            }
            Payload::Bytes(bytes) => Bytes::copy_from_slice(bytes),
            Payload::Empty => Bytes::new(),
        };
        let mut request = builder.body(Full::new(payload)).map_err(|e| OsError::Unavailable(format!("{url}: {e}")))?;
        RequestContext::inject_http(request.headers_mut());
        // Nothing secret in the log: tokens travel in headers.
        tracing::debug!(target: "keelson::openstack", %method, url, "request");
        let (parts, body) = request.into_parts();
        let mut delay = Duration::from_millis(500);
        let mut attempt = 0;
        let mut resent = false;
        let response = loop {
            let req = Request::from_parts(parts.clone(), body.clone());
            let error = match tokio::time::timeout(self.timeout, self.client.request(req)).await {
                Err(_) => return Err(OsError::Unavailable(format!("{method} {url} timed out"))),
                Ok(Ok(resp)) => break resp,
                Ok(Err(e)) => e,
            };
            // keystoneauth's SSLError, not retried: the same handshake
            // fails again.
            if let Some(tls) = crate::tls::handshake_failure(&error) {
                return Err(OsError::Unavailable(format!("SSL exception connecting to {url}: {tls}")));
            }
            // A connection the server closed as the request went out (a
            // pooled one it had just timed out): no answer came, so an
            // idempotent request is safe to send once more (RFC 9110
            // 9.2.2), as urllib3 does not reuse such a connection at all.
            if !resent && method.is_idempotent() && closed_before_answer(&error) {
                tracing::debug!(target: "keelson::openstack", %method, url, "connection closed before an answer; sending again");
                resent = true;
                continue;
            }
            if !(error.is_connect() && attempt < self.connect_retries) {
                return Err(OsError::Unavailable(format!("{method} {url}: {}", with_causes(&error))));
            }
            attempt += 1;
            tokio::time::sleep(delay).await;
            delay *= 2;
        };
        let status = response.status();
        let headers = response.headers().clone();
        let limited = Limited::new(response.into_body(), self.max_body);
        let body = match tokio::time::timeout(self.timeout, limited.collect()).await {
            Err(_) => return Err(OsError::Unavailable(format!("{method} {url}: the answer timed out"))),
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Err(OsError::AnswerTooLarge(format!("{method} {url}: over {} bytes", self.max_body)))
            }
            Ok(Err(e)) => return Err(OsError::InvalidResponse(format!("{method} {url}: {e}"))),
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        Ok(Answer { status, headers, body })
    }
}

/// Whether a request failed because its connection closed before any
/// answer began: hyper's "connection closed before message completed", or
/// a request the pool cancelled on a connection that was closing.
fn closed_before_answer(error: &hyper_util::client::legacy::Error) -> bool {
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            return hyper.is_incomplete_message() || hyper.is_canceled();
        }
        cause = e.source();
    }
    false
}

/// An error with its causes, as "outer: inner: innermost" (hyper's own
/// text names only the outermost, "client error (SendRequest)").
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller's own media type replaces the JSON one (one header only).
    #[tokio::test]
    async fn a_callers_content_type_wins() {
        async fn echo(headers: http::HeaderMap) -> String {
            let types: Vec<&str> = headers.get_all("content-type").iter().filter_map(|v| v.to_str().ok()).collect();
            serde_json::json!({ "types": types }).to_string()
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(echo);
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = HttpClient::default();
        let body = serde_json::json!([]);
        let patch = [("content-type", "application/openstack-images-v2.1-json-patch")];
        let answer = client.send(Method::PATCH, &url, &patch, Some(&body)).await.unwrap();
        assert_eq!(
            answer.json().unwrap(),
            serde_json::json!({"types": ["application/openstack-images-v2.1-json-patch"]})
        );
        let answer = client.send(Method::POST, &url, &[], Some(&body)).await.unwrap();
        assert_eq!(answer.json().unwrap(), serde_json::json!({"types": ["application/json"]}));
    }

    /// An answer past the bound is its own error, whatever it claims to be.
    #[tokio::test]
    async fn a_long_answer_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(|| async { "x".repeat(11) });
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = HttpClient::default().with_max_body(10);
        let e = client.send(Method::GET, &url, &[], None).await.unwrap_err();
        assert!(matches!(e, OsError::AnswerTooLarge(_)), "{e:?}");
        let answer = HttpClient::default().with_max_body(11).send(Method::GET, &url, &[], None).await.unwrap();
        assert_eq!(answer.body.len(), 11);
    }

    /// A server that reads one request per connection and closes the first
    /// connection without answering; later ones get `200 {}`.
    async fn closes_first_connection() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = socket.read(&mut buf).await;
                if counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    drop(socket);
                    continue;
                }
                let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (url, seen)
    }

    /// An idempotent request whose connection closed before any answer is
    /// sent once more; a POST is not (it may have been acted on).
    #[tokio::test]
    async fn an_idempotent_request_is_resent_once_after_a_closed_connection() {
        let (url, seen) = closes_first_connection().await;
        let answer = HttpClient::default().send(Method::DELETE, &url, &[], None).await.unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);

        let (url, seen) = closes_first_connection().await;
        let e = HttpClient::default().send(Method::POST, &url, &[], Some(&serde_json::json!({}))).await.unwrap_err();
        assert!(matches!(e, OsError::Unavailable(ref text) if text.contains("connection closed")), "{e:?}");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
