//! Request identity across the mesh: the OpenStack request id
//! (`X-Openstack-Request-Id`, `req-<uuid>`) and the W3C trace context
//! (`traceparent`).
//!
//! The gateway runs each request's handler inside [`RequestContext::scope`];
//! every gRPC client call made from it copies the context into metadata
//! ([`RequestContext::inject`]); every gRPC server reads it back
//! ([`RequestContext::from_metadata`]) and logs under the same ids.

use std::future::Future;

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

    /// Copies the current context into outgoing gRPC metadata.
    pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
        if let Some(ctx) = Self::current() {
            if let Ok(v) = ctx.request_id.parse() {
                metadata.insert(REQUEST_ID_HEADER, v);
            }
            if let Ok(v) = ctx.traceparent.parse() {
                metadata.insert(TRACEPARENT_HEADER, v);
            }
        }
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
}
