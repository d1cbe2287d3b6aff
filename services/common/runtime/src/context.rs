//! Request identity across the mesh: the OpenStack request id
//! (`X-Openstack-Request-Id`, `req-<uuid>`) and the W3C trace context
//! (`traceparent`).
//!
//! The gateway runs each request's handler inside [`RequestContext::scope`];
//! every gRPC client call copies the context into metadata
//! ([`RequestContext::inject`], through [`propagate`] or [`traced`]); every
//! gRPC server reads it back in one tower layer ([`ServerContextLayer`],
//! composed by [`crate::grpc::serve`]) that opens the service's span as a
//! child of the caller's and runs the handler under the same ids.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Instrument as _;

pub const REQUEST_ID_HEADER: &str = "x-openstack-request-id";
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Who a request is, for logs and propagation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    pub request_id: String,
    /// `00-<trace id>-<span id>-<flags>`.
    pub traceparent: String,
}

tokio::task_local! {
    static CURRENT: RequestContext;
}

impl RequestContext {
    /// A context for a new request, honouring ids the caller sent.
    pub fn new(request_id: Option<&str>, traceparent: Option<&str>) -> Self {
        let request_id = request_id
            .filter(|r| is_valid_request_id(r))
            .map(str::to_owned)
            .unwrap_or_else(|| format!("req-{}", uuid::Uuid::new_v4()));
        let traceparent = match traceparent.and_then(parse_traceparent) {
            // Same trace, new span: this hop is a child of the caller's.
            Some((trace_id, _parent, flags)) => format!("00-{trace_id}-{}-{flags}", new_span_id()),
            None => format!("00-{}-{}-01", uuid::Uuid::new_v4().simple(), new_span_id()),
        };
        RequestContext { request_id, traceparent }
    }

    /// The trace id part of the traceparent.
    pub fn trace_id(&self) -> &str {
        self.traceparent.split('-').nth(1).unwrap_or("")
    }

    /// Runs `fut` with this context as the current one.
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        CURRENT.scope(self, fut).await
    }

    /// The context of the request being handled, if any.
    pub fn current() -> Option<RequestContext> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Copies the current context into outgoing gRPC metadata: the
    /// request id, and as traceparent the current span when spans are
    /// exported (so the callee's span is its child), else the context's.
    pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
        let (request_id, traceparent) = Self::outgoing();
        if let Some(Ok(v)) = request_id.map(|r| r.parse()) {
            metadata.insert(REQUEST_ID_HEADER, v);
        }
        if let Some(Ok(v)) = traceparent.map(|t| t.parse()) {
            metadata.insert(TRACEPARENT_HEADER, v);
        }
    }

    /// The same for an outgoing HTTP request (the OpenStack REST clients
    /// of keelson-openstack): `X-Openstack-Request-Id` and `traceparent`.
    pub fn inject_http(headers: &mut http::HeaderMap) {
        let (request_id, traceparent) = Self::outgoing();
        if let Some(Ok(v)) = request_id.map(|r| http::HeaderValue::from_str(&r)) {
            headers.insert(REQUEST_ID_HEADER, v);
        }
        if let Some(Ok(v)) = traceparent.map(|t| http::HeaderValue::from_str(&t)) {
            headers.insert(TRACEPARENT_HEADER, v);
        }
    }

    /// What an outgoing call carries: the request id, and as traceparent
    /// the current span when spans are exported, else the context's.
    fn outgoing() -> (Option<String>, Option<String>) {
        let ctx = Self::current();
        let request_id = ctx.as_ref().map(|c| c.request_id.clone());
        let traceparent = crate::telemetry::current_traceparent().or_else(|| ctx.map(|c| c.traceparent));
        (request_id, traceparent)
    }

    /// The context a gRPC caller sent (or a fresh one).
    pub fn from_metadata(metadata: &tonic::metadata::MetadataMap) -> Self {
        let rid = metadata.get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok());
        let tp = metadata.get(TRACEPARENT_HEADER).and_then(|v| v.to_str().ok());
        // Keep the caller's span as ours' parent but do not re-generate the
        // request id: it names the whole request across the mesh.
        RequestContext::new(rid, tp)
    }
}

/// A tonic interceptor that propagates the current request context.
pub fn propagate(mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    RequestContext::inject(req.metadata_mut());
    Ok(req)
}

/// `message` as a request carrying the current context, for a client
/// without the [`propagate`] interceptor.
pub fn traced<T>(message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    RequestContext::inject(req.metadata_mut());
    req
}

/// `fut` under the current request context (if any), for a task spawned
/// on the request's behalf: task-locals do not cross `tokio::spawn`.
pub fn inherit<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    let ctx = RequestContext::current();
    async move {
        match ctx {
            Some(ctx) => ctx.scope(fut).await,
            None => fut.await,
        }
    }
}

/// The tower layer every gRPC server runs its calls through: reads the
/// caller's request id and traceparent from the metadata, opens the
/// service's `rpc` span as the caller's child, and runs the call inside
/// it with the context current (so the service's own outgoing calls
/// carry it on). Health checks and reflection pass through untraced.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerContextLayer;

impl<S> tower::Layer<S> for ServerContextLayer {
    type Service = ServerContext<S>;

    fn layer(&self, inner: S) -> ServerContext<S> {
        ServerContext { inner }
    }
}

/// The service [`ServerContextLayer`] wraps around a server's routes.
#[derive(Debug, Clone)]
pub struct ServerContext<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for ServerContext<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // `/<package>.<Service>/<Method>`.
        let path = req.uri().path().trim_start_matches('/');
        let (service, method) = path.split_once('/').unwrap_or((path, ""));
        if service.starts_with("grpc.health.") || service.starts_with("grpc.reflection.") {
            return Box::pin(self.inner.call(req));
        }
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        let incoming = header(TRACEPARENT_HEADER);
        let mut ctx = RequestContext::new(header(REQUEST_ID_HEADER), incoming);
        let span =
            tracing::info_span!("rpc", service, method, request_id = %ctx.request_id, trace_id = %ctx.trace_id());
        ctx.traceparent = crate::telemetry::link(&span, incoming, &ctx.traceparent);
        tracing::debug!(target: "keelson::rpc", parent: &span, request_id = %ctx.request_id, traceparent = %ctx.traceparent, "rpc call");
        let call = span.in_scope(|| self.inner.call(req));
        Box::pin(ctx.scope(call).instrument(span))
    }
}

fn is_valid_request_id(r: &str) -> bool {
    r.len() <= 64 && r.starts_with("req-") && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

fn new_span_id() -> String {
    let u = uuid::Uuid::new_v4();
    hex16(&u.as_bytes()[..8])
}

fn hex16(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_traceparent(tp: &str) -> Option<(String, String, String)> {
    let parts: Vec<&str> = tp.trim().split('-').collect();
    if parts.len() != 4 || parts[0].len() != 2 || parts[1].len() != 32 || parts[2].len() != 16 || parts[3].len() != 2 {
        return None;
    }
    let hex = |s: &str| s.chars().all(|c| c.is_ascii_hexdigit());
    if !parts.iter().all(|p| hex(p)) || parts[1].chars().all(|c| c == '0') {
        return None;
    }
    Some((parts[1].to_ascii_lowercase(), parts[2].to_ascii_lowercase(), parts[3].to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_and_honours_ids() {
        let c = RequestContext::new(None, None);
        assert!(c.request_id.starts_with("req-"));
        assert_eq!(c.trace_id().len(), 32);
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c2 = RequestContext::new(Some("req-abc"), Some(tp));
        assert_eq!(c2.request_id, "req-abc");
        assert_eq!(c2.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(c2.traceparent, tp, "a new span id for this hop");
        let bad = RequestContext::new(Some("not a request id; drop table"), Some("garbage"));
        assert!(bad.request_id.starts_with("req-") && bad.request_id.len() == 40);
    }

    #[tokio::test]
    async fn scope_and_inject() {
        let ctx = RequestContext::new(Some("req-1234"), None);
        let md = ctx
            .clone()
            .scope(async {
                let mut md = tonic::metadata::MetadataMap::new();
                RequestContext::inject(&mut md);
                md
            })
            .await;
        assert_eq!(md.get(REQUEST_ID_HEADER).unwrap(), "req-1234");
        let back = RequestContext::from_metadata(&md);
        assert_eq!(back.request_id, "req-1234");
        assert_eq!(back.trace_id(), ctx.trace_id());
    }

    /// The server layer runs the call under the caller's request id and
    /// trace (a new span id for this hop); health checks pass untouched.
    #[tokio::test]
    async fn server_layer_runs_the_call_under_the_callers_context() {
        use tower::{Layer as _, Service as _};
        let inner = tower::service_fn(|_req: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(RequestContext::current())
        });
        let mut svc = ServerContextLayer.layer(inner);
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let req = http::Request::builder()
            .uri("/keelson.placement.v1.Traits/ListTraits")
            .header(REQUEST_ID_HEADER, "req-1234")
            .header(TRACEPARENT_HEADER, tp)
            .body(())
            .unwrap();
        let ctx = svc.call(req).await.unwrap().expect("a current context");
        assert_eq!(ctx.request_id, "req-1234");
        assert_eq!(ctx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(ctx.traceparent, tp);
        let health = http::Request::builder().uri("/grpc.health.v1.Health/Check").body(()).unwrap();
        assert!(svc.call(health).await.unwrap().is_none());
    }

    /// A task spawned with `inherit` keeps the request's context.
    #[tokio::test]
    async fn inherit_carries_the_context_into_a_spawned_task() {
        let ctx = RequestContext::new(Some("req-5678"), None);
        let seen = ctx.scope(async { tokio::spawn(inherit(async { RequestContext::current() })).await.unwrap() }).await;
        assert_eq!(seen.map(|c| c.request_id).as_deref(), Some("req-5678"));
    }
}
