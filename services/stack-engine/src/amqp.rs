//! Enough AMQP 0-9-1 to publish messages to RabbitMQ reliably: what
//! Heat's notifications need (oslo.messaging's rabbit driver publishes them
//! to a topic exchange). One connection, one channel in confirm mode, PLAIN
//! authentication, heartbeats as negotiated with the broker.
//!
//! A message counts as delivered only once the broker confirms it
//! (`Basic.Ack`); until then it stays in a bounded outbox and is published
//! again on a new connection after any failure (a closed socket, a
//! `Basic.Nack`, missed heartbeats, a write that does not complete). So a
//! broken connection loses nothing; a message may arrive twice when a
//! confirmation was lost with the connection (each carries its own
//! `message_id`). When the outbox is full, new messages are refused and
//! counted, never dropped without a trace.
//!
//! Written here rather than taken from a crate: a full AMQP client would
//! add a large dependency tree for a few frames.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

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

/// A message to publish: where it goes and what it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundMessage {
    pub exchange: String,
    pub routing_key: String,
    pub body: Vec<u8>,
    pub content_type: String,
}

/// How the reliable publisher reaches and keeps its broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherSettings {
    pub broker: BrokerUrl,
    /// Topic exchanges declared on every new connection.
    pub exchanges: Vec<String>,
    /// The heartbeat timeout asked of the broker (oslo.messaging's
    /// `heartbeat_timeout_threshold`); zero: none.
    pub heartbeat: Duration,
    /// First wait before reconnecting; it doubles up to `retry_max`.
    pub retry_interval: Duration,
    pub retry_max: Duration,
    /// Messages held (waiting or unconfirmed) before new ones are refused.
    pub capacity: usize,
}

/// What the publisher did, for logs and tests.
#[derive(Debug, Default)]
pub struct PublisherStats {
    /// Confirmed by the broker.
    pub confirmed: AtomicU64,
    /// Refused because the outbox was full.
    pub dropped: AtomicU64,
    /// Published again on a new connection, or after a `Basic.Nack`.
    pub republished: AtomicU64,
    /// Connections opened.
    pub connections: AtomicU64,
}

/// The handle messages are given to; cheap to clone.
#[derive(Clone)]
pub struct PublisherHandle {
    tx: mpsc::Sender<OutboundMessage>,
    stats: Arc<PublisherStats>,
}

impl PublisherHandle {
    /// Starts the publishing task (within a Tokio runtime).
    pub fn spawn(settings: PublisherSettings) -> PublisherHandle {
        // The channel is the outbox's intake: a quarter of its size more.
        let (tx, rx) = mpsc::channel((settings.capacity / 4).max(1));
        let stats = Arc::new(PublisherStats::default());
        tokio::spawn(run(settings, rx, stats.clone()));
        PublisherHandle { tx, stats }
    }

    /// Queues `message`; false when the outbox is full (the message is
    /// counted in `dropped` and logged, at 1, 2, 4, 8... drops, so that an
    /// outage cannot flood the log).
    pub fn try_publish(&self, message: OutboundMessage) -> bool {
        if self.tx.try_send(message).is_ok() {
            return true;
        }
        let dropped = self.stats.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if dropped.is_power_of_two() {
            tracing::warn!(dropped, "AMQP outbox full: messages refused (the broker is away or too slow)");
        }
        false
    }

    pub fn stats(&self) -> &PublisherStats {
        &self.stats
    }
}

/// Messages not yet confirmed, in publication order: those waiting to go
/// out, and those sent on the current connection under their delivery tag.
#[derive(Debug, Default)]
struct Outbox {
    waiting: VecDeque<OutboundMessage>,
    unconfirmed: BTreeMap<u64, OutboundMessage>,
}

impl Outbox {
    fn len(&self) -> usize {
        self.waiting.len() + self.unconfirmed.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Basic.Ack`: the tag, or with `multiple` every tag up to it.
    fn confirm(&mut self, tag: u64, multiple: bool) -> u64 {
        self.take(tag, multiple).len() as u64
    }

    /// `Basic.Nack`: those messages go out again first.
    fn reject(&mut self, tag: u64, multiple: bool) -> u64 {
        let rejected = self.take(tag, multiple);
        let n = rejected.len() as u64;
        for m in rejected.into_iter().rev() {
            self.waiting.push_front(m);
        }
        n
    }

    /// The connection is gone: everything it did not confirm goes out
    /// again, in the order it was first published, before what waits.
    fn requeue_unconfirmed(&mut self) -> u64 {
        let sent = std::mem::take(&mut self.unconfirmed);
        let n = sent.len() as u64;
        for (_, m) in sent.into_iter().rev() {
            self.waiting.push_front(m);
        }
        n
    }

    fn take(&mut self, tag: u64, multiple: bool) -> Vec<OutboundMessage> {
        if multiple {
            let rest = self.unconfirmed.split_off(&tag.saturating_add(1));
            std::mem::replace(&mut self.unconfirmed, rest).into_values().collect()
        } else {
            self.unconfirmed.remove(&tag).into_iter().collect()
        }
    }
}

/// What the broker said on an open connection.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BrokerEvent {
    Ack {
        tag: u64,
        multiple: bool,
    },
    Nack {
        tag: u64,
        multiple: bool,
    },
    /// Any other frame (a heartbeat among them): the peer is alive.
    Alive,
    /// The connection or channel is closed (by the broker, or the socket).
    Closed(String),
}

/// Sent messages a connection may have unconfirmed at once.
const CONFIRM_WINDOW: usize = 256;

async fn run(settings: PublisherSettings, mut rx: mpsc::Receiver<OutboundMessage>, stats: Arc<PublisherStats>) {
    let mut outbox = Outbox::default();
    let mut intake_open = true;
    let mut backoff = settings.retry_interval;
    let mut broker_down = false;
    loop {
        if !intake_open && outbox.is_empty() {
            return;
        }
        let link = match Link::open(&settings).await {
            Ok(link) => link,
            Err(e) => {
                if !broker_down {
                    tracing::warn!(host = settings.broker.host, error = %e, held = outbox.len(), "AMQP: broker unreachable; holding messages until it is back");
                    broker_down = true;
                }
                intake_open = wait_accepting(&mut rx, &mut outbox, settings.capacity, backoff, intake_open).await;
                backoff = (backoff * 2).min(settings.retry_max);
                continue;
            }
        };
        if broker_down {
            tracing::info!(host = settings.broker.host, held = outbox.len(), "AMQP: broker reachable again");
            broker_down = false;
        }
        backoff = settings.retry_interval;
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let again = outbox.requeue_unconfirmed();
        stats.republished.fetch_add(again, Ordering::Relaxed);
        match session(link, &mut rx, &mut outbox, &settings, &stats, &mut intake_open).await {
            Ok(()) => return,
            Err(reason) => {
                tracing::warn!(host = settings.broker.host, %reason, unconfirmed = outbox.unconfirmed.len(), "AMQP: connection lost; unconfirmed messages will be published again");
            }
        }
    }
}

/// Sleeps `pause` while still taking messages into the outbox (up to its
/// capacity); answers whether the intake is still open.
async fn wait_accepting(
    rx: &mut mpsc::Receiver<OutboundMessage>,
    outbox: &mut Outbox,
    capacity: usize,
    pause: Duration,
    mut intake_open: bool,
) -> bool {
    let sleep = tokio::time::sleep(pause);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            _ = &mut sleep => return intake_open,
            m = rx.recv(), if intake_open && outbox.len() < capacity => match m {
                Some(m) => outbox.waiting.push_back(m),
                None => intake_open = false,
            },
        }
    }
}

/// One connection's life: publish what waits, take confirmations, keep
/// the heartbeat. Ok when the intake closed and everything was confirmed;
/// Err with the reason the connection is no longer usable.
async fn session(
    mut link: Link,
    rx: &mut mpsc::Receiver<OutboundMessage>,
    outbox: &mut Outbox,
    settings: &PublisherSettings,
    stats: &PublisherStats,
    intake_open: &mut bool,
) -> Result<(), String> {
    // Heartbeats go out at half the negotiated timeout; the peer is dead
    // after two timeouts of silence (as RabbitMQ and oslo.messaging judge).
    let heartbeat = link.heartbeat;
    let mut ticker = tokio::time::interval(if heartbeat.is_zero() { Duration::from_secs(3600) } else { heartbeat / 2 });
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    loop {
        while outbox.unconfirmed.len() < CONFIRM_WINDOW {
            let Some(message) = outbox.waiting.pop_front() else { break };
            if let Err(e) = link.publish(&message).await {
                outbox.waiting.push_front(message);
                return Err(e.to_string());
            }
            outbox.unconfirmed.insert(link.last_tag, message);
        }
        if !*intake_open && outbox.is_empty() {
            return Ok(());
        }
        tokio::select! {
            m = rx.recv(), if *intake_open && outbox.len() < settings.capacity => match m {
                Some(m) => outbox.waiting.push_back(m),
                None => *intake_open = false,
            },
            event = link.events.recv() => {
                last_heard = Instant::now();
                match event {
                    Some(BrokerEvent::Ack { tag, multiple }) => {
                        stats.confirmed.fetch_add(outbox.confirm(tag, multiple), Ordering::Relaxed);
                    }
                    Some(BrokerEvent::Nack { tag, multiple }) => {
                        stats.republished.fetch_add(outbox.reject(tag, multiple), Ordering::Relaxed);
                    }
                    Some(BrokerEvent::Alive) => {}
                    Some(BrokerEvent::Closed(reason)) => return Err(reason),
                    None => return Err("AMQP: the connection's reader stopped".into()),
                }
            },
            _ = ticker.tick(), if !heartbeat.is_zero() => {
                if last_heard.elapsed() > heartbeat * 2 {
                    return Err(format!("AMQP: no frame from the broker for {:?} (missed heartbeats)", last_heard.elapsed()));
                }
                link.send_heartbeat().await.map_err(|e| e.to_string())?;
            },
        }
    }
}

/// An open connection: channel 1 in confirm mode, the exchanges declared,
/// a reader task turning the broker's frames into [`BrokerEvent`]s.
struct Link {
    writer: OwnedWriteHalf,
    events: mpsc::Receiver<BrokerEvent>,
    reader: JoinHandle<()>,
    frame_max: u32,
    heartbeat: Duration,
    /// The delivery tag of the last publication (the broker numbers them
    /// from 1 on each channel in confirm mode).
    last_tag: u64,
    /// How long one write may take before the connection counts as dead
    /// (a peer that stopped reading would otherwise block us forever).
    write_timeout: Duration,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Link {
    async fn open(settings: &PublisherSettings) -> io::Result<Link> {
        let connect = TcpStream::connect((settings.broker.host.as_str(), settings.broker.port));
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "AMQP: connect timed out"))??;
        stream.set_nodelay(true)?;
        let mut handshake = Handshake { stream, frame_max: FRAME_MAX };
        let heartbeat = tokio::time::timeout(CONNECT_TIMEOUT, handshake.run(settings))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "AMQP: handshake timed out"))??;
        let Handshake { stream, frame_max } = handshake;
        let (read, writer) = stream.into_split();
        let (tx, events) = mpsc::channel(CONFIRM_WINDOW * 2);
        let reader = tokio::spawn(read_events(read, tx));
        let write_timeout = if heartbeat.is_zero() { CONNECT_TIMEOUT } else { heartbeat.max(Duration::from_secs(1)) };
        Ok(Link { writer, events, reader, frame_max, heartbeat, last_tag: 0, write_timeout })
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        tokio::time::timeout(self.write_timeout, self.writer.write_all(bytes))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "AMQP: write timed out"))?
    }

    async fn send_heartbeat(&mut self) -> io::Result<()> {
        self.write(&frame(FRAME_HEARTBEAT, 0, &[])?).await
    }

    async fn publish(&mut self, m: &OutboundMessage) -> io::Result<()> {
        let mut publish = method(60, 40);
        publish.extend_from_slice(&0u16.to_be_bytes());
        put_short_str(&mut publish, &m.exchange);
        put_short_str(&mut publish, &m.routing_key);
        publish.push(0); // mandatory, immediate: off
        let mut out = frame(FRAME_METHOD, CHANNEL, &publish)?;
        let mut header = Vec::new();
        header.extend_from_slice(&60u16.to_be_bytes());
        header.extend_from_slice(&0u16.to_be_bytes());
        header.extend_from_slice(&(m.body.len() as u64).to_be_bytes());
        header.extend_from_slice(&0xC000u16.to_be_bytes()); // content-type, content-encoding
        put_short_str(&mut header, &m.content_type);
        put_short_str(&mut header, "utf-8");
        out.extend(frame(FRAME_HEADER, CHANNEL, &header)?);
        let chunk = (self.frame_max as usize).saturating_sub(8).max(1);
        for part in m.body.chunks(chunk) {
            out.extend(frame(FRAME_BODY, CHANNEL, part)?);
        }
        self.write(&out).await?;
        self.last_tag += 1;
        Ok(())
    }
}

/// How long connecting and the handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection's opening exchange, on the whole stream.
struct Handshake {
    stream: TcpStream,
    frame_max: u32,
}

impl Handshake {
    /// Connection start/tune/open, channel open, confirm mode, the
    /// exchanges; answers the negotiated heartbeat timeout.
    async fn run(&mut self, settings: &PublisherSettings) -> io::Result<Duration> {
        let url = &settings.broker;
        self.stream.write_all(b"AMQP\x00\x00\x09\x01").await?;
        self.expect_method(0, (10, 10)).await?; // Connection.Start
        let mut start_ok = method(10, 11);
        put_table_empty(&mut start_ok);
        put_short_str(&mut start_ok, "PLAIN");
        put_long_str(&mut start_ok, format!("\0{}\0{}", url.user, url.password).as_bytes())?;
        put_short_str(&mut start_ok, "en_US");
        self.send_method(0, &start_ok).await?;
        let tune = self.expect_method(0, (10, 30)).await?; // Connection.Tune
        let channel_max = tune.get(4..6).map(|b| u16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
        let server_frame_max = tune.get(6..10).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
        let server_heartbeat = tune.get(10..12).map(|b| u16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
        if server_frame_max != 0 {
            self.frame_max = self.frame_max.min(server_frame_max);
        }
        let heartbeat = negotiate_heartbeat(server_heartbeat, settings.heartbeat);
        let mut tune_ok = method(10, 31);
        tune_ok.extend_from_slice(&channel_max.to_be_bytes());
        tune_ok.extend_from_slice(&self.frame_max.to_be_bytes());
        tune_ok.extend_from_slice(&heartbeat.to_be_bytes());
        self.send_method(0, &tune_ok).await?;
        let mut open = method(10, 40);
        put_short_str(&mut open, &url.vhost);
        put_short_str(&mut open, "");
        open.push(0);
        self.send_method(0, &open).await?;
        self.expect_method(0, (10, 41)).await?; // Connection.OpenOk
        let mut channel_open = method(20, 10);
        put_short_str(&mut channel_open, "");
        self.send_method(CHANNEL, &channel_open).await?;
        self.expect_method(CHANNEL, (20, 11)).await?; // Channel.OpenOk
        let mut select = method(85, 10); // Confirm.Select
        select.push(0); // no-wait: off
        self.send_method(CHANNEL, &select).await?;
        self.expect_method(CHANNEL, (85, 11)).await?; // Confirm.SelectOk
        for exchange in &settings.exchanges {
            self.declare_topic_exchange(exchange).await?;
        }
        Ok(Duration::from_secs(u64::from(heartbeat)))
    }

    /// Declares a non-durable topic exchange (as oslo.messaging's rabbit
    /// driver does with its defaults; a declaration differing from an
    /// existing exchange closes the channel).
    async fn declare_topic_exchange(&mut self, name: &str) -> io::Result<()> {
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

    async fn send_method(&mut self, channel: u16, payload: &[u8]) -> io::Result<()> {
        self.stream.write_all(&frame(FRAME_METHOD, channel, payload)?).await
    }

    /// Reads frames until a method on `channel`; an error unless it is
    /// `expected` (class, method): a Close from the broker carries its
    /// reason.
    async fn expect_method(&mut self, channel: u16, expected: (u16, u16)) -> io::Result<Vec<u8>> {
        loop {
            let (kind, ch, payload) = read_frame(&mut self.stream).await?;
            if kind == FRAME_HEARTBEAT || ch != channel && kind != FRAME_METHOD {
                continue;
            }
            if kind != FRAME_METHOD {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "AMQP: unexpected frame"));
            }
            let got = method_id(&payload)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "AMQP: short method frame"))?;
            if got == expected {
                return Ok(payload);
            }
            if let Some(reason) = close_reason(got, &payload) {
                return Err(io::Error::other(reason));
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("AMQP: expected method {expected:?}, got {got:?}"),
            ));
        }
    }
}

/// The heartbeat timeout both sides keep: the lower of the two when both
/// want one, none when the client asks for none (AMQP 0-9-1 lets the
/// client lower or refuse the broker's proposal).
fn negotiate_heartbeat(server: u16, wanted: Duration) -> u16 {
    let wanted = u16::try_from(wanted.as_secs()).unwrap_or(u16::MAX);
    match (server, wanted) {
        (_, 0) => 0,
        (0, w) => w,
        (s, w) => s.min(w),
    }
}

fn method_id(payload: &[u8]) -> Option<(u16, u16)> {
    let b = payload.get(0..4)?;
    Some((u16::from_be_bytes([b[0], b[1]]), u16::from_be_bytes([b[2], b[3]])))
}

/// The reason text of a `Connection.Close` or `Channel.Close`.
fn close_reason(id: (u16, u16), payload: &[u8]) -> Option<String> {
    if id != (10, 50) && id != (20, 40) {
        return None;
    }
    let code = payload.get(4..6).map(|b| u16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
    let text =
        payload.get(6).and_then(|n| payload.get(7..7 + *n as usize)).map(String::from_utf8_lossy).unwrap_or_default();
    Some(format!("AMQP: broker closed the {}: {code} {text}", if id.0 == 10 { "connection" } else { "channel" }))
}

/// What one frame from the broker means to the publisher.
fn broker_event(kind: u8, payload: &[u8]) -> BrokerEvent {
    if kind != FRAME_METHOD {
        return BrokerEvent::Alive;
    }
    let Some(id) = method_id(payload) else { return BrokerEvent::Alive };
    let tag = || payload.get(4..12).map(|b| u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]));
    let multiple = payload.get(12).is_some_and(|bits| bits & 1 == 1);
    match (id, tag()) {
        ((60, 80), Some(tag)) => BrokerEvent::Ack { tag, multiple },
        ((60, 120), Some(tag)) => BrokerEvent::Nack { tag, multiple },
        _ => match close_reason(id, payload) {
            Some(reason) => BrokerEvent::Closed(reason),
            None => BrokerEvent::Alive,
        },
    }
}

async fn read_events(mut read: OwnedReadHalf, tx: mpsc::Sender<BrokerEvent>) {
    loop {
        let event = match read_frame(&mut read).await {
            Ok((kind, _, payload)) => broker_event(kind, &payload),
            Err(e) => BrokerEvent::Closed(format!("AMQP: {e}")),
        };
        let closed = matches!(event, BrokerEvent::Closed(_));
        if tx.send(event).await.is_err() || closed {
            return;
        }
    }
}

async fn read_frame<R: AsyncRead + Unpin>(stream: &mut R) -> io::Result<(u8, u16, Vec<u8>)> {
    let mut head = [0u8; 7];
    stream.read_exact(&mut head).await?;
    let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
    if size > (FRAME_MAX as usize) * 8 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "AMQP: frame too large"));
    }
    let mut payload = vec![0u8; size + 1];
    stream.read_exact(&mut payload).await?;
    if payload.pop() != Some(FRAME_END) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "AMQP: bad frame end"));
    }
    Ok((head[0], u16::from_be_bytes([head[1], head[2]]), payload))
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

    fn message(n: u8) -> OutboundMessage {
        OutboundMessage {
            exchange: "heat".into(),
            routing_key: "notifications.info".into(),
            body: vec![n],
            content_type: "application/json".into(),
        }
    }

    fn bodies<'a>(it: impl Iterator<Item = &'a OutboundMessage>) -> Vec<u8> {
        it.map(|m| m.body[0]).collect()
    }

    #[test]
    fn confirmations_single_and_multiple_remove_exactly_their_tags() {
        let mut outbox = Outbox::default();
        for n in 1..=5u8 {
            outbox.unconfirmed.insert(u64::from(n), message(n));
        }
        assert_eq!(outbox.confirm(2, false), 1);
        assert_eq!(bodies(outbox.unconfirmed.values()), vec![1, 3, 4, 5]);
        assert_eq!(outbox.confirm(4, true), 3);
        assert_eq!(bodies(outbox.unconfirmed.values()), vec![5]);
        // A tag confirmed twice (or unknown) confirms nothing.
        assert_eq!(outbox.confirm(4, false), 0);
        assert_eq!(outbox.len(), 1);
    }

    #[test]
    fn rejected_and_unconfirmed_messages_go_out_again_first_in_their_order() {
        let mut outbox = Outbox::default();
        for n in 1..=4u8 {
            outbox.unconfirmed.insert(u64::from(n), message(n));
        }
        outbox.waiting.push_back(message(9));
        assert_eq!(outbox.reject(2, true), 2);
        assert_eq!(bodies(outbox.waiting.iter()), vec![1, 2, 9]);
        assert_eq!(outbox.requeue_unconfirmed(), 2);
        assert_eq!(bodies(outbox.waiting.iter()), vec![3, 4, 1, 2, 9]);
        assert!(outbox.unconfirmed.is_empty());
        assert_eq!(outbox.len(), 5);
    }

    #[test]
    fn broker_frames_become_events() {
        let mut ack = method(60, 80);
        ack.extend_from_slice(&7u64.to_be_bytes());
        ack.push(1);
        assert_eq!(broker_event(FRAME_METHOD, &ack), BrokerEvent::Ack { tag: 7, multiple: true });
        let mut nack = method(60, 120);
        nack.extend_from_slice(&3u64.to_be_bytes());
        nack.push(2); // requeue only
        assert_eq!(broker_event(FRAME_METHOD, &nack), BrokerEvent::Nack { tag: 3, multiple: false });
        let mut close = method(10, 50);
        close.extend_from_slice(&320u16.to_be_bytes());
        put_short_str(&mut close, "CONNECTION_FORCED");
        assert_eq!(
            broker_event(FRAME_METHOD, &close),
            BrokerEvent::Closed("AMQP: broker closed the connection: 320 CONNECTION_FORCED".into())
        );
        assert_eq!(broker_event(FRAME_HEARTBEAT, &[]), BrokerEvent::Alive);
        // A truncated Ack is not a confirmation.
        assert_eq!(broker_event(FRAME_METHOD, &method(60, 80)), BrokerEvent::Alive);
    }

    #[test]
    fn heartbeat_is_the_lower_proposal_and_the_client_may_refuse_it() {
        assert_eq!(negotiate_heartbeat(60, Duration::from_secs(10)), 10);
        assert_eq!(negotiate_heartbeat(5, Duration::from_secs(60)), 5);
        assert_eq!(negotiate_heartbeat(0, Duration::from_secs(60)), 60);
        assert_eq!(negotiate_heartbeat(60, Duration::ZERO), 0);
    }

    #[test]
    fn frames_are_type_channel_size_payload_end() {
        assert_eq!(frame(FRAME_METHOD, 1, &[1, 2]).unwrap(), vec![1, 0, 1, 0, 0, 0, 2, 1, 2, 0xCE]);
    }
}
