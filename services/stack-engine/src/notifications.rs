//! Heat's notifications (upstream `heat/engine/notification`): each change
//! of a stack's state as `orchestration.stack.<action>.<start|end|error>`
//! and each resize of a scaling group as
//! `orchestration.autoscaling.<start|end|error>`, published as
//! oslo.messaging's notifier does (topic exchange `control_exchange`,
//! routing key `<topic>.<priority>`, the `messagingv2` envelope), so that
//! Ceilometer and other listeners of a Heat deployment read them unchanged.
//!
//! Publishing never holds up the engine: messages go through a bounded
//! queue to one background task; when the broker is away they are dropped
//! (logged once per outage), as a notification is a record, not a control
//! path.

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use keelson_common::amqp::{BrokerUrl, Publisher};
use keelson_common::Config;

use crate::store::{Action, StackRow, Status};

/// How many notifications may wait for the broker.
const QUEUE: usize = 1024;

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
}

impl NotificationSettings {
    /// None when notifications are off (`driver` unset, `noop`, or a
    /// driver this engine does not publish with, which is logged).
    pub fn from_config(config: &Config, host: &str) -> Option<NotificationSettings> {
        let text = |group: &str, name: &str| config.get_str(group, name).filter(|v| !v.trim().is_empty());
        let drivers = config.get_list("oslo_messaging_notifications", "driver");
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
        let url = text("oslo_messaging_notifications", "transport_url").or_else(|| text("DEFAULT", "transport_url"))?;
        let broker = match BrokerUrl::parse(&url) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = e, "notifications are off");
                return None;
            }
        };
        let topics = match config.get_list("oslo_messaging_notifications", "topics") {
            t if t.is_empty() => vec!["notifications".to_string()],
            t => t,
        };
        Some(NotificationSettings {
            broker,
            topics,
            exchange: text("DEFAULT", "control_exchange").unwrap_or_else(|| "heat".into()),
            envelope,
            publisher_id: format!("orchestration.{host}"),
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

struct Outgoing {
    event_type: String,
    priority: Priority,
    payload: Value,
}

/// Sends notifications, or does nothing when they are off.
#[derive(Clone, Default)]
pub struct Notifier {
    tx: Option<mpsc::Sender<Outgoing>>,
}

impl Notifier {
    /// Starts the publishing task (within a Tokio runtime).
    pub fn start(settings: NotificationSettings) -> Notifier {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(publish_loop(settings, rx));
        Notifier { tx: Some(tx) }
    }

    pub fn is_enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// `orchestration.<event_type>` with `payload`.
    pub fn notify(&self, event_type: &str, priority: Priority, payload: Value) {
        let Some(tx) = &self.tx else { return };
        let outgoing = Outgoing { event_type: format!("orchestration.{event_type}"), priority, payload };
        if tx.try_send(outgoing).is_err() {
            tracing::debug!(event_type, "notification dropped: the queue to the broker is full");
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

async fn publish_loop(settings: NotificationSettings, mut rx: mpsc::Receiver<Outgoing>) {
    let mut connection: Option<Publisher> = None;
    let mut broker_down = false;
    while let Some(n) = rx.recv().await {
        let body = message(&settings, &n).to_string();
        let routing_keys: Vec<String> =
            settings.topics.iter().map(|t| format!("{t}.{}", n.priority.as_str().to_lowercase())).collect();
        // One reconnection per message: a connection the broker dropped
        // since the last one fails its first write.
        for _attempt in 0..2 {
            let publisher = match connection.as_mut() {
                Some(p) => p,
                None => match connect(&settings).await {
                    Ok(p) => {
                        if broker_down {
                            tracing::info!(host = settings.broker.host, "notifications: broker reachable again");
                            broker_down = false;
                        }
                        connection.insert(p)
                    }
                    Err(e) => {
                        if !broker_down {
                            tracing::warn!(host = settings.broker.host, error = %e, "notifications: broker unreachable, dropping until it is back");
                            broker_down = true;
                        }
                        break;
                    }
                },
            };
            let mut sent = true;
            for key in &routing_keys {
                if publisher.publish(&settings.exchange, key, body.as_bytes(), "application/json").await.is_err() {
                    sent = false;
                    break;
                }
            }
            if sent {
                break;
            }
            connection = None;
        }
    }
}

async fn connect(settings: &NotificationSettings) -> std::io::Result<Publisher> {
    let mut p = Publisher::connect(&settings.broker).await?;
    p.declare_topic_exchange(&settings.exchange).await?;
    Ok(p)
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
