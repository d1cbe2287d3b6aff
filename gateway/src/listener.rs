//! The REST listeners' connection handling, shared by Placement and
//! Orchestration: how many connections a listener holds, how long a
//! client may take to send a request head or leave a connection idle, and
//! the refusals the listener answers itself.
//!
//! - At most `[api] max_connections` connections per listener are served;
//!   the accept loop takes a slot before it accepts, so an excess
//!   connection waits in the kernel's accept backlog until one closes.
//! - Each connection's first request head is read into a buffer (no
//!   peeking, no polling) within `[api] header_read_timeout`; a connection
//!   that sends nothing in that time is closed, one that sent part of a
//!   head is answered 408. The head is then screened the way hyper would
//!   parse it, so what hyper would refuse with an empty body (414, 431, a
//!   malformed head or framing, a bad `Content-Length`) is answered by the
//!   listener with the API's own error body ([`Refusals`]). Everything else
//!   goes to hyper on a stream that replays the buffered bytes first.
//! - Later requests on a kept-alive connection are hyper's to parse: their
//!   heads must be complete within `idle_timeout + header_read_timeout` of
//!   the previous answer (hyper's timer runs from when it starts waiting),
//!   and hyper's own refusals of them have empty bodies.
//! - A connection with no request in progress and no bytes moving for
//!   `[api] idle_timeout` is closed (gracefully: an answer being written
//!   is finished first, but one the client does not read for another
//!   `idle_timeout` is dropped).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::response::Response;
use keelson_runtime::config::Opt;
use keelson_runtime::Config;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::options::{HEADER_READ_TIMEOUT, IDLE_TIMEOUT, MAX_CONNECTIONS};

/// The longest request line the listeners accept: hyper's own bound on a
/// URI (65,534 bytes) and the method and version around it. Longer: 414.
pub const MAX_REQUEST_LINE: usize = 65_534 + 32;
/// The most bytes of header fields a request head may carry. More: 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The most header fields a request head may carry (hyper's default).
/// More: 431.
pub const MAX_HEADER_FIELDS: usize = 100;

/// The connection limits of one listener (`[api]` options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `[api] header_read_timeout`: how long a client may take to send a
    /// whole request head.
    pub header_read_timeout: Duration,
    /// `[api] idle_timeout`: how long a connection may stay open with no
    /// request in progress and nothing moving.
    pub idle_timeout: Duration,
    /// `[api] max_connections`: connections served at once per listener.
    pub max_connections: usize,
}

/// The options' defaults.
impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits::from_config(&Config::default())
    }
}

impl ConnectionLimits {
    /// The `[api]` options; a value below 1 takes the default.
    pub fn from_config(config: &Config) -> Self {
        let positive = |opt: &Opt<i64>| {
            let n = config.get(opt);
            if n > 0 { n } else { opt.default_value() }.unsigned_abs()
        };
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(positive(&HEADER_READ_TIMEOUT)),
            idle_timeout: Duration::from_secs(positive(&IDLE_TIMEOUT)),
            max_connections: usize::try_from(positive(&MAX_CONNECTIONS))
                .unwrap_or(usize::MAX)
                .min(Semaphore::MAX_PERMITS)
                .min(u32::MAX as usize),
        }
    }
}

/// A request the listener refuses before hyper sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 408: part of a head, then nothing for `header_read_timeout`.
    HeadTimeout,
    /// 414: the request line is longer than [`MAX_REQUEST_LINE`].
    UriTooLong,
    /// 431: more than [`MAX_HEADER_BYTES`] or [`MAX_HEADER_FIELDS`].
    HeadersTooLarge,
    /// 400: a `Content-Length` that is not one non-negative integer.
    BadContentLength,
    /// 400: a head hyper cannot parse, or whose body framing it refuses;
    /// the text says which.
    Malformed(&'static str),
}

impl Refusal {
    /// What was wrong with the request, for the error body. A bad
    /// `Content-Length` has upstream Placement's text.
    pub fn message(&self) -> String {
        match self {
            Refusal::HeadTimeout => "The request head was not received in time.".to_string(),
            Refusal::UriTooLong => format!("The request line is longer than {MAX_REQUEST_LINE} bytes."),
            Refusal::HeadersTooLarge => {
                format!("The request has more than {MAX_HEADER_FIELDS} header fields or more than {MAX_HEADER_BYTES} bytes of them.")
            }
            Refusal::BadContentLength => "content-length header must be an integer".to_string(),
            Refusal::Malformed(what) => format!("The request could not be parsed: {what}."),
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Refusal::HeadTimeout => 408,
            Refusal::UriTooLong => 414,
            Refusal::HeadersTooLarge => 431,
            Refusal::BadContentLength | Refusal::Malformed(_) => 400,
        }
    }
}

/// How an API words the listener's refusals: its error body for each.
pub trait Refusals: Send + Sync + 'static {
    fn render(&self, refusal: &Refusal, request_id: &str) -> Response;
}

/// Serves `app` on `listener` under `limits` until `shutdown` resolves,
/// then lets the open connections finish.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
    refusals: Arc<dyn Refusals>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    // Held in u32: closing waits for all the slots in one acquire_many.
    let max = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let slots = Arc::new(Semaphore::new(max as usize));
    let (closing_tx, closing) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A slot first: without one the connection stays in the backlog.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and friends: back off rather
                    // than spin, as axum's own listener does.
                    tracing::warn!(target: "keelson::listener", "accept failed: {e}");
                    drop(slot);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let conn = Connection { app: app.clone(), limits, refusals: refusals.clone(), closing: closing.clone() };
        tokio::spawn(async move {
            conn.run(stream, peer).await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    // Every connection holds a slot until it ends.
    let _ = slots.acquire_many(max).await;
    Ok(())
}

struct Connection {
    app: axum::Router,
    limits: ConnectionLimits,
    refusals: Arc<dyn Refusals>,
    closing: watch::Receiver<bool>,
}

impl Connection {
    async fn run(self, mut stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let head = match read_head(&mut stream, self.limits.header_read_timeout).await {
            FirstHead::Complete(bytes) => bytes,
            FirstHead::Closed | FirstHead::Silent => return,
            FirstHead::Refused(refusal) => return self.refuse(stream, peer, &refusal).await,
        };
        if let Err(refusal) = screen(&head) {
            return self.refuse(stream, peer, &refusal).await;
        }
        self.serve_http(Replay::new(head, stream), peer).await;
    }

    async fn refuse(&self, mut stream: TcpStream, peer: SocketAddr, refusal: &Refusal) {
        let request_id = format!("req-{}", uuid::Uuid::new_v4());
        tracing::info!(target: "keelson::access", request_id = %request_id, %peer, status = refusal.status(), "request refused by the listener: {refusal:?}");
        let response = self.refusals.render(refusal, &request_id);
        let bytes = serialize(response, &request_id).await;
        let _ = tokio::time::timeout(self.limits.idle_timeout, async {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        })
        .await;
        // Lingering close: read what the client still sends (its body) for
        // a moment, so it does not meet a reset before reading the answer.
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while let Ok(n) = stream.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    }

    async fn serve_http(self, io: Replay, peer: SocketAddr) {
        let activity = io.activity.clone();
        let service = InFlight { inner: self.app, activity: activity.clone() };
        let service = hyper_util::service::TowerToHyperService::new(service);
        let mut builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
        builder
            .http1()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout.saturating_add(self.limits.idle_timeout));
        builder.http2().timer(hyper_util::rt::TokioTimer::new());
        let conn = builder.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(io), service);
        let mut conn = std::pin::pin!(conn);
        let mut closing = self.closing;
        let idle = self.limits.idle_timeout;
        // When the connection was asked to close (shutdown, or idle): from
        // then on, no progress for another `idle` drops it.
        let mut asked_to_close: Option<Instant> = None;
        loop {
            let deadline = match asked_to_close {
                Some(asked) => activity.idle_deadline(idle).max(asked + idle),
                None => activity.idle_deadline(idle),
            };
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(target: "keelson::listener", %peer, "connection ended: {e}");
                    }
                    return;
                }
                changed = closing.changed(), if asked_to_close.is_none() => {
                    if changed.is_err() || *closing.borrow() {
                        conn.as_mut().graceful_shutdown();
                        asked_to_close = Some(Instant::now());
                    }
                }
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
                    // Progress since the sleep began moves the deadline on.
                    let now = Instant::now();
                    let still = match asked_to_close {
                        Some(asked) => activity.idle_deadline(idle).max(asked + idle),
                        None => activity.idle_deadline(idle),
                    };
                    if now < still {
                        continue;
                    }
                    if asked_to_close.is_some() {
                        tracing::debug!(target: "keelson::listener", %peer, "connection dropped: no progress while closing");
                        return;
                    }
                    tracing::debug!(target: "keelson::listener", %peer, "idle connection closed");
                    conn.as_mut().graceful_shutdown();
                    asked_to_close = Some(now);
                }
            }
        }
    }
}

/// How a connection's first request head arrived.
enum FirstHead {
    /// The bytes up to and including the blank line (and whatever came
    /// with them).
    Complete(Vec<u8>),
    /// Closed by the client (or a read error) before a whole head.
    Closed,
    /// Nothing at all within the header timeout.
    Silent,
    Refused(Refusal),
}

/// HTTP/2 with prior knowledge: hyper's to handle.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// Reads until the end of the first request head, for at most `timeout`.
async fn read_head(stream: &mut TcpStream, timeout: Duration) -> FirstHead {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let read = tokio::time::timeout(timeout, async {
        let mut chunk = [0u8; 8192];
        loop {
            let n = match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return FirstHead::Closed,
                Ok(n) => n,
            };
            let searched_from = buf.len().saturating_sub(3);
            buf.extend_from_slice(&chunk[..n]);
            if buf.starts_with(H2_PREFACE) || (buf.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(&buf)) {
                if buf.len() >= H2_PREFACE.len() {
                    return FirstHead::Complete(std::mem::take(&mut buf));
                }
                continue;
            }
            if head_end(&buf, searched_from).is_some() {
                return FirstHead::Complete(std::mem::take(&mut buf));
            }
            if let Some(refusal) = oversized(&buf) {
                return FirstHead::Refused(refusal);
            }
        }
    })
    .await;
    match read {
        Ok(head) => head,
        Err(_) if buf.is_empty() => FirstHead::Silent,
        Err(_) => FirstHead::Refused(Refusal::HeadTimeout),
    }
}

/// Where the head ends (after the blank line), searching from `from`:
/// CRLF or, as hyper's parser accepts, bare LF line endings.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some(i + 2);
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some(i + 3);
            }
        }
        i += 1;
    }
    None
}

/// Whether an incomplete head is already longer than the listener allows.
fn oversized(buf: &[u8]) -> Option<Refusal> {
    match buf.iter().position(|b| *b == b'\n') {
        None if buf.len() > MAX_REQUEST_LINE => Some(Refusal::UriTooLong),
        None => None,
        Some(line_end) if line_end > MAX_REQUEST_LINE => Some(Refusal::UriTooLong),
        Some(line_end) if buf.len() - line_end > MAX_HEADER_BYTES => Some(Refusal::HeadersTooLarge),
        Some(_) => None,
    }
}

/// What hyper would refuse in a complete first head, with the status it
/// would give (or a bad `Content-Length`, which Placement words itself).
fn screen(buf: &[u8]) -> Result<(), Refusal> {
    if buf.starts_with(H2_PREFACE) {
        return Ok(());
    }
    // What came after the head (a body) is not the head's to judge.
    let buf = &buf[..head_end(buf, 0).unwrap_or(buf.len())];
    if let Some(refusal) = oversized(buf) {
        return Err(refusal);
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADER_FIELDS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        // The read stopped at a blank line, so httparse saw it too; a
        // partial parse means a line it could not take as a header.
        Ok(httparse::Status::Partial) => return Err(Refusal::Malformed("the request head is incomplete")),
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::HeadersTooLarge),
        Err(httparse::Error::Token) if req.method.is_none() => {
            return Err(Refusal::Malformed("invalid request method"))
        }
        Err(httparse::Error::Token) => return Err(Refusal::Malformed("invalid request target")),
        Err(httparse::Error::Version) => return Err(Refusal::Malformed("unsupported HTTP version")),
        Err(httparse::Error::HeaderName) => return Err(Refusal::Malformed("invalid header name")),
        Err(httparse::Error::HeaderValue) => return Err(Refusal::Malformed("invalid header value")),
        Err(_) => return Err(Refusal::Malformed("invalid line ending")),
    };
    let line_len = buf.iter().position(|b| *b == b'\n').unwrap_or(len);
    if line_len > MAX_REQUEST_LINE || req.path.is_some_and(|p| p.len() > 65_534) {
        return Err(Refusal::UriTooLong);
    }
    if len - line_len > MAX_HEADER_BYTES {
        return Err(Refusal::HeadersTooLarge);
    }
    if req.method.is_some_and(|m| http::Method::from_bytes(m.as_bytes()).is_err()) {
        return Err(Refusal::Malformed("invalid request method"));
    }
    if req.path.is_some_and(|p| http::Uri::try_from(p).is_err()) {
        return Err(Refusal::Malformed("invalid request target"));
    }
    framing(req.version.unwrap_or(1), req.headers)
}

/// The body framing rules hyper applies (RFC 9112 §6): one
/// `Content-Length` value, `Transfer-Encoding` only in HTTP/1.1 and ending
/// in `chunked`.
fn framing(version: u8, headers: &[httparse::Header<'_>]) -> Result<(), Refusal> {
    let mut length: Option<u64> = None;
    let mut transfer_encoding: Option<bool> = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            for part in h.value.split(|b| *b == b',') {
                let text = std::str::from_utf8(part).map(str::trim).unwrap_or("");
                if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Refusal::BadContentLength);
                }
                let n: u64 = text.parse().map_err(|_| Refusal::BadContentLength)?;
                if length.is_some_and(|prev| prev != n) {
                    return Err(Refusal::BadContentLength);
                }
                length = Some(n);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if version == 0 {
                return Err(Refusal::Malformed("Transfer-Encoding is not allowed in HTTP/1.0"));
            }
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or(b"");
            transfer_encoding =
                Some(std::str::from_utf8(last).map(|t| t.trim().eq_ignore_ascii_case("chunked")).unwrap_or(false));
        }
    }
    if transfer_encoding == Some(false) {
        return Err(Refusal::Malformed("Transfer-Encoding must end in chunked"));
    }
    Ok(())
}

/// A response as bytes on an HTTP/1.1 connection that closes after it.
async fn serialize(response: Response, request_id: &str) -> Vec<u8> {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, 1024 * 1024).await.unwrap_or_default();
    let mut out =
        format!("HTTP/1.1 {} {}\r\n", parts.status.as_u16(), parts.status.canonical_reason().unwrap_or("Error"))
            .into_bytes();
    for (name, value) in &parts.headers {
        if name == http::header::CONTENT_LENGTH || name == http::header::CONNECTION {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !parts.headers.contains_key("x-openstack-request-id") {
        out.extend_from_slice(format!("x-openstack-request-id: {request_id}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
    out
}

/// When a connection last moved bytes, and how many requests it has in
/// progress.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last_progress: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity { start: Instant::now(), last_progress: AtomicU64::new(0), in_flight: AtomicUsize::new(0) })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_progress.store(ms, Ordering::Relaxed);
    }

    fn last_progress(&self) -> Instant {
        self.start + Duration::from_millis(self.last_progress.load(Ordering::Relaxed))
    }

    /// When the connection counts as idle: `idle` after the last progress;
    /// while a request is in progress, not before another `idle` passes
    /// (checked again then).
    fn idle_deadline(&self, idle: Duration) -> Instant {
        let deadline = self.last_progress() + idle;
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            deadline.max(Instant::now() + idle)
        } else {
            deadline
        }
    }
}

/// The connection's stream: the buffered first head, then the socket;
/// every read and write with bytes records progress.
struct Replay {
    head: Vec<u8>,
    pos: usize,
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl Replay {
    fn new(head: Vec<u8>, stream: TcpStream) -> Replay {
        let activity = Activity::new();
        activity.touch();
        Replay { head, pos: 0, stream, activity }
    }
}

impl AsyncRead for Replay {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pos < this.head.len() {
            let n = (this.head.len() - this.pos).min(buf.remaining());
            buf.put_slice(&this.head[this.pos..this.pos + n]);
            this.pos += n;
            if this.pos == this.head.len() {
                this.head = Vec::new();
                this.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Replay {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The application, counting the connection's requests in progress (a
/// request whose handler is still working is not idleness).
#[derive(Clone)]
struct InFlight {
    inner: axum::Router,
    activity: Arc<Activity>,
}

/// Ends a request's "in progress" when dropped (its future completed or
/// was cancelled).
struct InFlightGuard(Arc<Activity>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

impl tower::Service<http::Request<hyper::body::Incoming>> for InFlight {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, std::convert::Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // axum's Router is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        self.activity.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlightGuard(self.activity.clone());
        let mut router = self.inner.clone();
        Box::pin(async move {
            let _guard = guard;
            let req = req.map(axum::body::Body::new);
            tower::Service::call(&mut router, req).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_ends_with_crlf_or_bare_lf() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: x\n\n", 0), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }

    #[test]
    fn screening_follows_hypers_refusals() {
        assert_eq!(screen(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Ok(()));
        assert_eq!(screen(b"GET / HTTP/1.1\nHost: x\n\n"), Ok(()));
        assert_eq!(screen(b"POST / HTTP/1.1\r\nContent-Length: hi mom\r\n\r\n"), Err(Refusal::BadContentLength));
        assert_eq!(
            screen(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(Refusal::BadContentLength)
        );
        assert_eq!(screen(b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n"), Ok(()));
        assert_eq!(
            screen(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Err(Refusal::Malformed("Transfer-Encoding must end in chunked"))
        );
        assert!(matches!(screen(b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"), Err(Refusal::Malformed(_))));
        assert!(matches!(screen(b"GET / HTTP/9.9\r\n\r\n"), Err(Refusal::Malformed(_))));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_REQUEST_LINE));
        assert_eq!(screen(long.as_bytes()), Err(Refusal::UriTooLong));
        let many: String = (0..=MAX_HEADER_FIELDS).map(|i| format!("x-h{i}: v\r\n")).collect();
        assert_eq!(screen(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()), Err(Refusal::HeadersTooLarge));
        let big = format!("GET / HTTP/1.1\r\nx-big: {}\r\n\r\n", "v".repeat(MAX_HEADER_BYTES));
        assert_eq!(screen(big.as_bytes()), Err(Refusal::HeadersTooLarge));
        assert_eq!(screen(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Ok(()));
        // A body that came with the head is not part of it.
        let post = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{}",
            MAX_HEADER_BYTES + 1,
            "b".repeat(MAX_HEADER_BYTES + 1)
        );
        assert_eq!(screen(post.as_bytes()), Ok(()));
    }

    #[test]
    fn oversized_partial_heads() {
        assert_eq!(oversized(&vec![b'a'; MAX_REQUEST_LINE + 1]), Some(Refusal::UriTooLong));
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        head.extend(std::iter::repeat_n(b'x', MAX_HEADER_BYTES + 2));
        assert_eq!(oversized(&head), Some(Refusal::HeadersTooLarge));
        assert_eq!(oversized(b"GET / HTTP/1.1\r\nHost"), None);
    }
}
