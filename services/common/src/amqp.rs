//! Just enough AMQP 0-9-1 to publish messages to RabbitMQ: what Heat's
//! notifications need (oslo.messaging's rabbit driver publishes them to a
//! topic exchange). One connection, one channel, PLAIN authentication, no
//! heartbeats, no publisher confirms: a broken connection shows as a failed
//! write and the caller reconnects.
//!
//! Written here rather than taken from a crate: a full AMQP client would
//! add a large dependency tree for a few frames.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FRAME_METHOD: u8 = 1;
const FRAME_HEADER: u8 = 2;
const FRAME_BODY: u8 = 3;
const FRAME_HEARTBEAT: u8 = 8;
const FRAME_END: u8 = 0xCE;
/// The channel every publication goes on.
const CHANNEL: u16 = 1;
/// The frame size this client asks for (the server may lower it).
const FRAME_MAX: u32 = 131_072;

/// Where the broker is: oslo.messaging's `rabbit://user:pass@host:port/vhost`
/// (`amqp://` too; the first host of a list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerUrl {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub vhost: String,
}

impl BrokerUrl {
    pub fn parse(url: &str) -> Result<BrokerUrl, String> {
        let rest = url
            .strip_prefix("rabbit://")
            .or_else(|| url.strip_prefix("amqp://"))
            .ok_or_else(|| format!("transport_url {url:?}: only rabbit:// and amqp:// are supported"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        // Several hosts (a cluster): the first one.
        let authority = authority.split(',').next().unwrap_or_default();
        let (credentials, hostport) = match authority.rsplit_once('@') {
            Some((c, h)) => (Some(c), h),
            None => (None, authority),
        };
        let (user, password) = match credentials {
            Some(c) => match c.split_once(':') {
                Some((u, p)) => (percent_decode(u), percent_decode(p)),
                None => (percent_decode(c), String::new()),
            },
            None => ("guest".to_string(), "guest".to_string()),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse::<u16>().map_err(|_| format!("transport_url {url:?}: bad port"))?),
            None => (hostport.to_string(), 5672),
        };
        let host = if host.is_empty() { "localhost".to_string() } else { host };
        let vhost = match path.split('?').next().unwrap_or_default() {
            "" => "/".to_string(),
            v => percent_decode(v),
        };
        Ok(BrokerUrl { host, port, user, password, vhost })
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex_digit), bytes.get(i + 2).copied().and_then(hex_digit)) {
            (b'%', Some(h), Some(l)) => {
                out.push(h * 16 + l);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of one hexadecimal digit (either case).
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// An open connection with channel 1 ready to publish.
pub struct Publisher {
    stream: TcpStream,
    frame_max: u32,
}

impl Publisher {
    /// Connects, authenticates and opens the channel.
    pub async fn connect(url: &BrokerUrl) -> io::Result<Publisher> {
        let stream = TcpStream::connect((url.host.as_str(), url.port)).await?;
        stream.set_nodelay(true)?;
        let mut p = Publisher { stream, frame_max: FRAME_MAX };
        p.stream.write_all(b"AMQP\x00\x00\x09\x01").await?;
        p.expect_method(0, (10, 10)).await?; // Connection.Start
        let mut start_ok = method(10, 11);
        put_table_empty(&mut start_ok);
        put_short_str(&mut start_ok, "PLAIN");
        put_long_str(&mut start_ok, format!("\0{}\0{}", url.user, url.password).as_bytes())?;
        put_short_str(&mut start_ok, "en_US");
        p.send_method(0, &start_ok).await?;
        let tune = p.expect_method(0, (10, 30)).await?; // Connection.Tune
        let server_frame_max = tune.get(6..10).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
        if server_frame_max != 0 {
            p.frame_max = p.frame_max.min(server_frame_max);
        }
        let channel_max = tune.get(4..6).map(|b| u16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
        let mut tune_ok = method(10, 31);
        tune_ok.extend_from_slice(&channel_max.to_be_bytes());
        tune_ok.extend_from_slice(&p.frame_max.to_be_bytes());
        tune_ok.extend_from_slice(&0u16.to_be_bytes()); // no heartbeats
        p.send_method(0, &tune_ok).await?;
        let mut open = method(10, 40);
        put_short_str(&mut open, &url.vhost);
        put_short_str(&mut open, "");
        open.push(0);
        p.send_method(0, &open).await?;
        p.expect_method(0, (10, 41)).await?; // Connection.OpenOk
        let mut channel_open = method(20, 10);
        put_short_str(&mut channel_open, "");
        p.send_method(CHANNEL, &channel_open).await?;
        p.expect_method(CHANNEL, (20, 11)).await?; // Channel.OpenOk
        Ok(p)
    }

    /// Declares a non-durable topic exchange (as oslo.messaging's rabbit
    /// driver does with its defaults; a declaration differing from an
    /// existing exchange closes the channel).
    pub async fn declare_topic_exchange(&mut self, name: &str) -> io::Result<()> {
        let mut declare = method(40, 10);
        declare.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut declare, name);
        put_short_str(&mut declare, "topic");
        declare.push(0); // passive, durable, auto-delete, internal, no-wait: all off
        put_table_empty(&mut declare);
        self.send_method(CHANNEL, &declare).await?;
        self.expect_method(CHANNEL, (40, 11)).await?;
        Ok(())
    }

    /// Publishes `body` to `exchange` with `routing_key`.
    pub async fn publish(
        &mut self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        content_type: &str,
    ) -> io::Result<()> {
        let mut publish = method(60, 40);
        publish.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut publish, exchange);
        put_short_str(&mut publish, routing_key);
        publish.push(0); // mandatory, immediate: off
        let mut out = frame(FRAME_METHOD, CHANNEL, &publish)?;
        let mut header = Vec::new();
        header.extend_from_slice(&60u16.to_be_bytes());
        header.extend_from_slice(&0u16.to_be_bytes());
        header.extend_from_slice(&(body.len() as u64).to_be_bytes());
        header.extend_from_slice(&0xC000u16.to_be_bytes()); // content-type, content-encoding
        put_short_str(&mut header, content_type);
        put_short_str(&mut header, "utf-8");
        out.extend(frame(FRAME_HEADER, CHANNEL, &header)?);
        let chunk = (self.frame_max as usize).saturating_sub(8).max(1);
        for part in body.chunks(chunk) {
            out.extend(frame(FRAME_BODY, CHANNEL, part)?);
        }
        self.stream.write_all(&out).await?;
        Ok(())
    }

    async fn send_method(&mut self, channel: u16, payload: &[u8]) -> io::Result<()> {
        self.stream.write_all(&frame(FRAME_METHOD, channel, payload)?).await
    }

    /// Reads frames until a method on `channel`; an error unless it is
    /// `expected` (class, method): a Close from the broker carries its
    /// reason.
    async fn expect_method(&mut self, channel: u16, expected: (u16, u16)) -> io::Result<Vec<u8>> {
        loop {
            let (kind, ch, payload) = self.read_frame().await?;
            if kind == FRAME_HEARTBEAT || ch != channel && kind != FRAME_METHOD {
                continue;
            }
            if kind != FRAME_METHOD || payload.len() < 4 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "AMQP: unexpected frame"));
            }
            let got = (u16::from_be_bytes([payload[0], payload[1]]), u16::from_be_bytes([payload[2], payload[3]]));
            if got == expected {
                return Ok(payload);
            }
            if got == (10, 50) || got == (20, 40) {
                let code = payload.get(4..6).map(|b| u16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
                let text = payload
                    .get(6)
                    .and_then(|n| payload.get(7..7 + *n as usize))
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default();
                return Err(io::Error::other(format!(
                    "AMQP: broker closed the {}: {code} {text}",
                    if got.0 == 10 { "connection" } else { "channel" }
                )));
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("AMQP: expected method {expected:?}, got {got:?}"),
            ));
        }
    }

    async fn read_frame(&mut self) -> io::Result<(u8, u16, Vec<u8>)> {
        let mut head = [0u8; 7];
        self.stream.read_exact(&mut head).await?;
        let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
        if size > (FRAME_MAX as usize) * 8 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "AMQP: frame too large"));
        }
        let mut payload = vec![0u8; size + 1];
        self.stream.read_exact(&mut payload).await?;
        if payload.pop() != Some(FRAME_END) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "AMQP: bad frame end"));
        }
        Ok((head[0], u16::from_be_bytes([head[1], head[2]]), payload))
    }
}

fn method(class: u16, method: u16) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&class.to_be_bytes());
    m.extend_from_slice(&method.to_be_bytes());
    m
}

fn frame(kind: u8, channel: u16, payload: &[u8]) -> io::Result<Vec<u8>> {
    let mut f = Vec::with_capacity(payload.len() + 8);
    f.push(kind);
    f.extend_from_slice(&channel.to_be_bytes());
    f.extend_from_slice(&long_len(payload.len())?);
    f.extend_from_slice(payload);
    f.push(FRAME_END);
    Ok(f)
}

/// A frame's or long string's 32-bit size; anything longer cannot be sent.
fn long_len(len: usize) -> io::Result<[u8; 4]> {
    u32::try_from(len)
        .map(u32::to_be_bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{len} bytes exceed an AMQP 32-bit size")))
}

fn put_short_str(buf: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(255)];
    // At most 255 by the slice above.
    buf.push(u8::try_from(bytes.len()).unwrap_or(u8::MAX));
    buf.extend_from_slice(bytes);
}

fn put_long_str(buf: &mut Vec<u8>, bytes: &[u8]) -> io::Result<()> {
    buf.extend_from_slice(&long_len(bytes.len())?);
    buf.extend_from_slice(bytes);
    Ok(())
}

fn put_table_empty(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&0u32.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_urls_as_oslo_messaging_writes_them() {
        let u = BrokerUrl::parse("rabbit://stackrabbit:s%40cret@10.0.0.5:5673,10.0.0.6:5673/openstack").unwrap();
        assert_eq!(
            u,
            BrokerUrl {
                host: "10.0.0.5".into(),
                port: 5673,
                user: "stackrabbit".into(),
                password: "s@cret".into(),
                vhost: "openstack".into()
            }
        );
        let u = BrokerUrl::parse("rabbit://guest:guest@127.0.0.1:5672/").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.vhost.as_str()), ("127.0.0.1", 5672, "/"));
        assert!(BrokerUrl::parse("kafka://x").is_err());
    }

    #[test]
    fn percent_decoding_takes_either_case_and_keeps_stray_percents() {
        assert_eq!(percent_decode("a%2fb%2F%zz%4"), "a/b/%zz%4");
    }

    #[test]
    fn frames_are_type_channel_size_payload_end() {
        assert_eq!(frame(FRAME_METHOD, 1, &[1, 2]).unwrap(), vec![1, 0, 1, 0, 0, 0, 2, 1, 2, 0xCE]);
    }
}
