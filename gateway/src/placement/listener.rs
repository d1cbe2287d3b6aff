//! The Placement listener's guard for a malformed `Content-Length`.
//!
//! hyper refuses a request whose `Content-Length` is not an integer inside
//! its HTTP/1 parser, answering a bare 400 before any of keelson's code
//! runs. Upstream answers that request with Placement's JSON error ("content-length
//! header must be an integer"), and clients read that body. So each new
//! connection's first request head is peeked (not consumed) before the
//! connection is handed to hyper; a head with a non-integer
//! `Content-Length` gets Placement's answer here and the connection is
//! closed. Everything else reaches hyper untouched.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::error::detail_text;

/// How long the guard waits for a request head before letting hyper deal
/// with the connection (hyper has its own header timeout).
const PEEK_TIMEOUT: Duration = Duration::from_secs(10);
/// Request heads longer than this are hyper's to judge.
const PEEK_LIMIT: usize = 16 * 1024;

/// A listener that screens each connection's first request head.
pub struct GuardedListener {
    incoming: mpsc::Receiver<(TcpStream, SocketAddr)>,
    local_addr: SocketAddr,
}

impl GuardedListener {
    pub fn new(listener: TcpListener) -> io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let (tx, incoming) = mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                let (stream, addr) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Running out of file descriptors and friends: back
                        // off rather than spin, as axum's own listener does.
                        tracing::warn!(target: "keelson::placement", "accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Some(stream) = screen(stream).await {
                        let _ = tx.send((stream, addr)).await;
                    }
                });
            }
        });
        Ok(GuardedListener { incoming, local_addr })
    }
}

impl axum::serve::Listener for GuardedListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(conn) => conn,
            // The accept task only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

/// Answers a bad first head itself (`None`); otherwise hands the stream on.
async fn screen(mut stream: TcpStream) -> Option<TcpStream> {
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; PEEK_LIMIT];
    let head = tokio::time::timeout(PEEK_TIMEOUT, async {
        loop {
            let n = match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => n,
            };
            if let Some(end) = find_head_end(&buf[..n]) {
                return Some(end);
            }
            if n >= PEEK_LIMIT {
                return None;
            }
            // Wait for more bytes without consuming what is there.
            if stream.readable().await.is_err() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .ok()
    .flatten();
    let Some(end) = head else { return Some(stream) };
    if !has_bad_content_length(&buf[..end]) {
        return Some(stream);
    }
    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    let body = serde_json::json!({"errors": [{
        "status": 400,
        "title": "Bad Request",
        "detail": detail_text(400, "content-length header must be an integer"),
        "request_id": request_id,
    }]})
    .to_string();
    let resp = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nopenstack-api-version: placement 1.0\r\nx-openstack-request-id: {request_id}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tracing::info!(target: "keelson::access", request_id = %request_id, "request with a non-integer Content-Length refused");
    let _ = stream.write_all(resp.as_bytes()).await;
    let _ = stream.shutdown().await;
    // Lingering close: read what the client still sends (its body) for a
    // moment, so it does not meet a reset before reading our answer.
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        use tokio::io::AsyncReadExt as _;
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    None
}

fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Whether a request head carries a `Content-Length` that is not a
/// non-negative integer.
fn has_bad_content_length(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.split("\r\n").skip(1).any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("content-length") && !value.trim().chars().all(|c| c.is_ascii_digit())
                || name.trim().eq_ignore_ascii_case("content-length") && value.trim().is_empty()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_screening() {
        assert!(has_bad_content_length(b"POST / HTTP/1.1\r\nContent-Length: hi mom\r\n\r\n"));
        assert!(!has_bad_content_length(b"POST / HTTP/1.1\r\ncontent-length: 12\r\n\r\n"));
        assert!(!has_bad_content_length(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n"));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
    }
}
