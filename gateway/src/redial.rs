//! Redialing a mesh service whose port refuses the connection.
//!
//! When the inventory or candidates process restarts (a crash, a rolling
//! upgrade, a rescheduled pod), its port refuses connections for a moment.
//! Python Placement has no such gap and Nova does not retry a failed
//! Placement call: a build whose claim meets a 503 ends in ERROR. So the
//! gateway holds such a call and dials again, with backoff, for up to
//! `[keelson] redial_timeout` seconds.
//!
//! Invariant: only a refused connection is retried. A refused connection
//! means the request never reached a server, so sending it again cannot
//! apply a write twice. A call that fails after the connection was made (a
//! reset while the server handled it, a timeout) is answered as it failed,
//! because the server may have committed it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tonic::body::Body;
use tonic::transport::Channel;
use tower::{Service, ServiceExt};

/// The first pause between dials; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(25);
const MAX_PAUSE: Duration = Duration::from_millis(500);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A service (a [`Channel`] in the gateway) whose calls are redialed
/// while the server's port refuses them (see the module's documentation).
#[derive(Clone, Debug)]
pub struct RedialRefused<S = Channel> {
    inner: S,
    window: Duration,
}

impl<S> RedialRefused<S> {
    /// Redials for at most `window` (zero: never).
    pub fn new(inner: S, window: Duration) -> Self {
        RedialRefused { inner, window }
    }
}

/// Whether `error` (or any error beneath it) is a refused TCP connection.
pub fn is_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        next = e.source();
    }
    false
}

impl<S> Service<http::Request<Body>> for RedialRefused<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each call drives its own clone of the inner service to readiness.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let window = self.window;
        Box::pin(async move {
            let (head, body) = request.into_parts();
            // The mesh's calls are unary: the body is one encoded message,
            // already bounded by the gRPC encoding limit.
            let body: Bytes = body.collect().await?.to_bytes();
            let deadline = tokio::time::Instant::now() + window;
            let mut pause = FIRST_PAUSE;
            loop {
                let attempt = http::Request::from_parts(head.clone(), Body::new(Full::new(body.clone())));
                // The error itself, not wrapped: tonic reads its source
                // chain to choose the status (Unavailable).
                let error: BoxError = match inner.clone().oneshot(attempt).await {
                    Ok(response) => return Ok(response),
                    Err(e) => e.into(),
                };
                if !is_refused(&*error) || tokio::time::Instant::now() + pause > deadline {
                    return Err(error);
                }
                tracing::debug!(target: "keelson", "{} refused the connection; dialing again in {pause:?}", head.uri);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    fn request() -> http::Request<Body> {
        let body = Body::new(Full::new(Bytes::from_static(b"\0\0\0\0\x02\x08\x01")));
        http::Request::builder().method("POST").uri("http://mesh/keelson.Test/Call").body(body).expect("request")
    }

    /// A server that refuses the first `refusals` dials, then fails every
    /// call with `then` (or answers it when `then` is None); it counts the
    /// dials and checks each carries the whole body.
    fn server(
        refusals: usize,
        then: Option<std::io::ErrorKind>,
    ) -> (
        Arc<AtomicUsize>,
        impl Service<http::Request<Body>, Response = http::Response<Body>, Error = BoxError, Future: Send>
            + Clone
            + Send
            + 'static,
    ) {
        let dials = Arc::new(AtomicUsize::new(0));
        let counted = dials.clone();
        let svc = tower::service_fn(move |req: http::Request<Body>| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                let body = req.into_body().collect().await?.to_bytes();
                assert_eq!(&body[..], b"\0\0\0\0\x02\x08\x01");
                if n < refusals {
                    return Err(BoxError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
                }
                match then {
                    Some(kind) => Err(BoxError::from(std::io::Error::from(kind))),
                    None => Ok(http::Response::new(Body::empty())),
                }
            }
        });
        (dials, svc)
    }

    #[tokio::test]
    async fn a_refused_call_is_sent_again_once_the_server_is_back() {
        let (dials, svc) = server(3, None);
        let answer = RedialRefused::new(svc, Duration::from_secs(30)).oneshot(request()).await;
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(dials.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_call_that_reached_the_server_is_never_sent_again() {
        let (dials, svc) = server(1, Some(std::io::ErrorKind::ConnectionReset));
        let error = RedialRefused::new(svc, Duration::from_secs(30)).oneshot(request()).await.expect_err("reset");
        assert!(!is_refused(&*error));
        assert_eq!(dials.load(Ordering::SeqCst), 2, "the refused dial was redialed, the reset one was not");
    }

    #[tokio::test]
    async fn a_zero_window_never_redials() {
        let (dials, svc) = server(usize::MAX, None);
        let error = RedialRefused::new(svc, Duration::ZERO).oneshot(request()).await.expect_err("refused");
        assert!(is_refused(&*error));
        assert_eq!(dials.load(Ordering::SeqCst), 1);
    }

    /// tonic's own error for a port nobody listens on is recognised as
    /// refused beneath its wrappers.
    #[tokio::test]
    async fn tonic_reports_a_closed_port_as_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
        let url = format!("http://127.0.0.1:{}", port.expect("a free port"));
        let channel = tonic::transport::Endpoint::from_shared(url).expect("endpoint").connect_lazy();
        let error = RedialRefused::new(channel, Duration::ZERO).oneshot(request()).await.expect_err("nobody listens");
        assert!(is_refused(&*error), "{error:?}");
        let status = tonic::Status::from_error(error);
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
}
