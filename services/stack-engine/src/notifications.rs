//! Heat's notifications (upstream `heat/engine/notification`): each change
//! of a stack's state as `orchestration.stack.<action>.<start|end|error>`
//! and each resize of a scaling group as
//! `orchestration.autoscaling.<start|end|error>`, published as
//! oslo.messaging's notifier does (topic exchange `control_exchange`,
//! routing key `<topic>.<priority>`, the `messagingv2` envelope), so that
//! Ceilometer and other listeners of a Heat deployment read them unchanged.
//!
//! Publishing never holds up the engine: messages go to the AMQP
//! publisher's bounded outbox (`crate::amqp`), which keeps each
//! one until the broker confirms it and publishes it again after a lost
//! connection. Only when the outbox is full (the broker away for long)
//! are new notifications refused, counted and logged: a notification is a
//! record, not a control path, and must not hold the engine up.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::amqp::{BrokerUrl, OutboundMessage, PublisherHandle, PublisherSettings};
use keelson_runtime::config::Opt;
use keelson_runtime::Config;

use crate::options::{
    CONTROL_EXCHANGE, HEARTBEAT_TIMEOUT_THRESHOLD, NOTIFICATION_DRIVER, NOTIFICATION_TOPICS,
    NOTIFICATION_TRANSPORT_URL, RABBIT_INTERVAL_MAX, RABBIT_RETRY_INTERVAL, TRANSPORT_URL,
};
use crate::store::{Action, StackRow, Status};

/// How many notifications may wait for the broker's confirmation.
const OUTBOX: usize = 4096;

/// `[oslo_messaging_notifications]` and the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationSettings {
    pub broker: BrokerUrl,
    /// Routing key prefixes (`topics`, default `notifications`).
    pub topics: Vec<String>,
    /// Heat's `control_exchange`.
    pub exchange: String,
    /// `messagingv2`: the oslo envelope; `messaging`: the bare message.
    pub envelope: bool,
    pub publisher_id: String,
    /// `[oslo_messaging_rabbit] heartbeat_timeout_threshold` (0: none).
    pub heartbeat: Duration,
    /// `[oslo_messaging_rabbit] rabbit_retry_interval`, doubling up to
    /// `rabbit_interval_max` between reconnection attempts.
    pub retry_interval: Duration,
    pub retry_max: Duration,
}

impl NotificationSettings {
    /// None when notifications are off (`driver` unset, `noop`, or a
    /// driver this engine does not publish with, which is logged).
    pub fn from_config(config: &Config, host: &str) -> Option<NotificationSettings> {
        let text = |opt: &Opt<Option<String>>| config.get(opt).filter(|v| !v.trim().is_empty());
        let drivers = config.get(&NOTIFICATION_DRIVER);
        let envelope = if drivers.iter().any(|d| d == "messagingv2") {
            true
        } else if drivers.iter().any(|d| d == "messaging") {
            false
        } else {
            if let Some(other) = drivers.iter().find(|d| *d != "noop") {
                tracing::warn!(driver = other, "notification driver not supported; notifications are off");
            }
            return None;
        };
        let url = text(&NOTIFICATION_TRANSPORT_URL).or_else(|| text(&TRANSPORT_URL))?;
        let broker = match BrokerUrl::parse(&url) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = e, "notifications are off");
                return None;
            }
        };
        let topics = match config.get(&NOTIFICATION_TOPICS) {
            t if t.is_empty() => NOTIFICATION_TOPICS.default_value(),
            t => t,
        };
        Some(NotificationSettings {
            broker,
            topics,
            exchange: config.get(&CONTROL_EXCHANGE),
            envelope,
            publisher_id: format!("orchestration.{host}"),
            heartbeat: seconds(config, &HEARTBEAT_TIMEOUT_THRESHOLD),
            retry_interval: seconds(config, &RABBIT_RETRY_INTERVAL).max(Duration::from_millis(100)),
            retry_max: seconds(config, &RABBIT_INTERVAL_MAX).max(Duration::from_secs(1)),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Info,
    Error,
}

impl Priority {
    fn as_str(self) -> &'static str {
        match self {
            Priority::Info => "INFO",
            Priority::Error => "ERROR",
        }
    }
}

/// An `[oslo_messaging_rabbit]` option in seconds (a negative value
/// counts as zero).
fn seconds(config: &Config, opt: &Opt<i64>) -> Duration {
    Duration::from_secs(u64::try_from(config.get(opt)).unwrap_or(0))
}

struct Outgoing {
    event_type: String,
    priority: Priority,
    payload: Value,
}

/// Sends notifications, or does nothing when they are off.
#[derive(Clone, Default)]
pub struct Notifier {
    publisher: Option<(PublisherHandle, Arc<NotificationSettings>)>,
}

impl Notifier {
    /// Starts the publishing task (within a Tokio runtime).
    pub fn start(settings: NotificationSettings) -> Notifier {
        let publisher = PublisherHandle::spawn(PublisherSettings {
            broker: settings.broker.clone(),
            exchanges: vec![settings.exchange.clone()],
            heartbeat: settings.heartbeat,
            retry_interval: settings.retry_interval,
            retry_max: settings.retry_max,
            capacity: OUTBOX,
        });
        Notifier { publisher: Some((publisher, Arc::new(settings))) }
    }

    pub fn is_enabled(&self) -> bool {
        self.publisher.is_some()
    }

    /// `orchestration.<event_type>` with `payload`, stamped now: one
    /// message per topic.
    pub fn notify(&self, event_type: &str, priority: Priority, payload: Value) {
        let Some((publisher, settings)) = &self.publisher else { return };
        let outgoing = Outgoing { event_type: format!("orchestration.{event_type}"), priority, payload };
        let body = message(settings, &outgoing).to_string().into_bytes();
        for topic in &settings.topics {
            publisher.try_publish(OutboundMessage {
                exchange: settings.exchange.clone(),
                routing_key: format!("{topic}.{}", priority.as_str().to_lowercase()),
                body: body.clone(),
                content_type: "application/json".into(),
            });
        }
    }

    /// Upstream `notification.stack.send`: the stack's new state.
    pub fn stack_state(&self, stack: &StackRow, action: Action, status: Status, reason: &str) {
        if !self.is_enabled() {
            return;
        }
        let (suffix, priority) = suffix_of(status);
        let body = stack_body(stack, action, status, reason);
        self.notify(&format!("stack.{}.{suffix}", action.as_str().to_lowercase()), priority, body);
    }
}

/// `start` while in progress, `error` once failed, else `end`.
pub fn suffix_of(status: Status) -> (&'static str, Priority) {
    match status {
        Status::InProgress => ("start", Priority::Info),
        Status::Failed => ("error", Priority::Error),
        Status::Complete => ("end", Priority::Info),
    }
}

/// Upstream `format_notification_body`: who, which stack, what state.
pub fn stack_body(stack: &StackRow, action: Action, status: Status, reason: &str) -> Value {
    let iso = |t: Option<chrono::NaiveDateTime>| t.map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string());
    json!({
        "tenant_id": stack.tenant,
        "user_id": stack.username,
        "user_identity": stack.user_id,
        "stack_identity": stack.id,
        "stack_name": stack.name,
        "state": format!("{action}_{status}"),
        "state_reason": reason,
        "create_at": iso(stack.created_at),
        "tags": stack.tags,
        "updated_at": iso(stack.updated_at),
    })
}

/// The message as oslo.messaging's notifier builds it.
fn message(settings: &NotificationSettings, n: &Outgoing) -> Value {
    let now = chrono::Utc::now().naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string();
    let mut m = Map::new();
    m.insert("message_id".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("publisher_id".into(), json!(settings.publisher_id));
    m.insert("event_type".into(), json!(n.event_type));
    m.insert("priority".into(), json!(n.priority.as_str()));
    m.insert("payload".into(), n.payload.clone());
    m.insert("timestamp".into(), json!(now));
    if settings.envelope {
        json!({"oslo.version": "2.0", "oslo.message": Value::Object(m).to_string()})
    } else {
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(envelope: bool) -> NotificationSettings {
        NotificationSettings {
            broker: BrokerUrl::parse("rabbit://guest:guest@127.0.0.1:5672/").unwrap_or_else(|e| panic!("{e}")),
            topics: vec!["notifications".into()],
            exchange: "heat".into(),
            envelope,
            publisher_id: "orchestration.h".into(),
            heartbeat: Duration::from_secs(60),
            retry_interval: Duration::from_secs(1),
            retry_max: Duration::from_secs(30),
        }
    }

    #[test]
    fn messages_are_wrapped_as_oslo_messaging_v2_does() {
        let n = Outgoing {
            event_type: "orchestration.stack.create.end".into(),
            priority: Priority::Info,
            payload: json!({"stack_name": "s"}),
        };
        let wrapped = message(&settings(true), &n);
        assert_eq!(wrapped["oslo.version"], "2.0");
        let inner: Value =
            serde_json::from_str(wrapped["oslo.message"].as_str().unwrap_or_default()).unwrap_or_default();
        assert_eq!(inner["event_type"], "orchestration.stack.create.end");
        assert_eq!(inner["priority"], "INFO");
        assert_eq!(inner["payload"]["stack_name"], "s");
        assert_eq!(message(&settings(false), &n)["publisher_id"], "orchestration.h");
    }

    #[test]
    fn states_map_to_start_end_error() {
        assert_eq!(suffix_of(Status::InProgress), ("start", Priority::Info));
        assert_eq!(suffix_of(Status::Complete), ("end", Priority::Info));
        assert_eq!(suffix_of(Status::Failed), ("error", Priority::Error));
    }
}
