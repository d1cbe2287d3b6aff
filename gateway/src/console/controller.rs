//! The controller as the console shows it: every node's `ctrlstatus`, and
//! the term and primary over time.
//!
//! The gateway does not link the controller's client (no service crate
//! depends on another): the process that composes the gateway gives it a
//! [`ControllerView`]. [`ControllerHistory`] asks it every
//! [`SAMPLE_INTERVAL`] in the background and keeps the last
//! [`HISTORY_SAMPLES`] answers, so the page can draw what happened before
//! it was opened.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::response::Response;
use futures::future::BoxFuture;
use keelson_runtime::ApiError;
use serde_json::{json, Value};

use super::{console_route, json, ConsoleReq};
use crate::routes::Route;

/// How often the nodes are asked.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(2);
/// Samples kept: half an hour at [`SAMPLE_INTERVAL`].
pub const HISTORY_SAMPLES: usize = 900;

/// One node's answer to `ctrlstatus`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStatus {
    /// The address the node was asked at.
    pub address: String,
    /// `keelson ctl ctrlstatus --json`'s document, or why the node did not
    /// answer.
    pub status: Result<Value, String>,
}

/// Asks every configured controller node for its `ctrlstatus`.
pub trait ControllerView: Send + Sync + 'static {
    fn statuses(&self) -> BoxFuture<'_, Vec<NodeStatus>>;
}

/// One sample: when, and what each node said of itself.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    /// Milliseconds since the Unix epoch.
    at: i64,
    nodes: Vec<NodeStatus>,
}

impl Sample {
    /// The compact form the timeline draws: each node's role, term and
    /// the primary it knows.
    fn compact(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| match &n.status {
                Ok(s) => json!({
                    "address": n.address, "name": s.get("responderName"), "role": s.get("responderRole"),
                    "term": s.get("term"), "primary": s.get("primaryName"),
                }),
                Err(_) => json!({"address": n.address, "role": "UNREACHABLE"}),
            })
            .collect();
        json!({"at": self.at, "nodes": nodes})
    }
}

#[derive(Default)]
struct Ring {
    samples: VecDeque<Sample>,
}

/// The sampled history of the controller's state.
#[derive(Clone)]
pub struct ControllerHistory {
    view: Arc<dyn ControllerView>,
    ring: Arc<Mutex<Ring>>,
}

impl ControllerHistory {
    /// Starts sampling `view` on the current Tokio runtime (none: the
    /// history only fills when asked). The task ends when the last clone
    /// of the history is dropped.
    pub fn start(view: Arc<dyn ControllerView>) -> ControllerHistory {
        ControllerHistory::start_every(view, SAMPLE_INTERVAL)
    }

    fn start_every(view: Arc<dyn ControllerView>, interval: Duration) -> ControllerHistory {
        let history = ControllerHistory { view, ring: Arc::new(Mutex::new(Ring::default())) };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sample_until_dropped(history.view.clone(), Arc::downgrade(&history.ring), interval));
        }
        history
    }

    fn samples(&self) -> Vec<Sample> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner()).samples.iter().cloned().collect()
    }
}

fn push(ring: &Mutex<Ring>, sample: Sample) {
    let mut ring = ring.lock().unwrap_or_else(|p| p.into_inner());
    if ring.samples.len() >= HISTORY_SAMPLES {
        ring.samples.pop_front();
    }
    ring.samples.push_back(sample);
}

async fn take_sample(view: &dyn ControllerView) -> Sample {
    let nodes = view.statuses().await;
    Sample { at: chrono::Utc::now().timestamp_millis(), nodes }
}

async fn sample_until_dropped(view: Arc<dyn ControllerView>, ring: Weak<Mutex<Ring>>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let sample = take_sample(view.as_ref()).await;
        let Some(ring) = ring.upgrade() else { return };
        push(&ring, sample);
    }
}

pub fn routes() -> Vec<Route<super::Handler>> {
    vec![console_route!(GET "/keelson/v1/console/controller" => controller)]
}

/// `{"configured", "nodes": [each node's latest status], "history": [...]}`.
async fn controller(req: ConsoleReq) -> Result<Response, ApiError> {
    req.authorize(keelson_policy::KEELSON_CONSOLE_CONTROLLER)?;
    req.query_params(&[])?;
    let Some(history) = &req.state.controller else {
        return Ok(json(&json!({"configured": false, "nodes": [], "history": []})));
    };
    // The page's table is current, not as old as the last sample.
    let now = take_sample(history.view.as_ref()).await;
    let nodes: Vec<Value> = now
        .nodes
        .iter()
        .map(|n| match &n.status {
            Ok(s) => json!({"address": n.address, "status": s}),
            Err(e) => json!({"address": n.address, "error": e}),
        })
        .collect();
    let samples: Vec<Value> = history.samples().iter().map(Sample::compact).collect();
    Ok(json(&json!({"configured": true, "at": now.at, "nodes": nodes, "history": samples})))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<NodeStatus>);

    impl ControllerView for Fixed {
        fn statuses(&self) -> BoxFuture<'_, Vec<NodeStatus>> {
            Box::pin(async move { self.0.clone() })
        }
    }

    fn node(name: &str, role: &str, term: u64) -> NodeStatus {
        NodeStatus {
            address: format!("{name}:7001"),
            status: Ok(json!({"responderName": name, "responderRole": role, "term": term, "primaryName": "c1"})),
        }
    }

    #[test]
    fn the_ring_keeps_the_newest() {
        let ring = Mutex::new(Ring::default());
        for at in 0..(HISTORY_SAMPLES as i64 + 10) {
            push(&ring, Sample { at, nodes: Vec::new() });
        }
        let ring = ring.lock().unwrap();
        assert_eq!(ring.samples.len(), HISTORY_SAMPLES);
        assert_eq!(ring.samples.front().unwrap().at, 10);
    }

    #[tokio::test]
    async fn samples_in_the_background_until_dropped() {
        let every = Duration::from_millis(20);
        let view = Arc::new(Fixed(vec![
            node("c1", "PRIMARY", 3),
            NodeStatus { address: "c2:7001".into(), status: Err("refused".into()) },
        ]));
        let history = ControllerHistory::start_every(view, every);
        let mut samples = history.samples();
        for _ in 0..500 {
            if samples.len() >= 3 {
                break;
            }
            tokio::time::sleep(every).await;
            samples = history.samples();
        }
        assert!(samples.len() >= 3, "{}", samples.len());
        assert_eq!(
            samples[0].compact()["nodes"],
            json!([
                {"address": "c1:7001", "name": "c1", "role": "PRIMARY", "term": 3, "primary": "c1"},
                {"address": "c2:7001", "role": "UNREACHABLE"},
            ])
        );
        let weak = Arc::downgrade(&history.ring);
        drop(history);
        tokio::time::sleep(every * 3).await;
        assert!(weak.upgrade().is_none());
    }
}
