//! Where check_resource messages go. The production dispatcher
//! ([`super::ClusterDispatcher`]) spreads them over live engines;
//! [`QueueDispatcher`] holds them in a queue that tests step.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::Engine;

/// One check_resource cast.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResourceMsg {
    pub stack_id: String,
    pub resource_id: i64,
    pub traversal_id: String,
    pub is_update: bool,
    /// The merged inputs of the predecessors ("<rid>:<0|1>" → data).
    pub input: Map<String, Value>,
}

pub trait Dispatcher: Send + Sync + 'static {
    /// Queues check_resource somewhere (possibly on `from` itself).
    fn dispatch<'a>(&'a self, from: &'a Arc<Engine>, msg: CheckResourceMsg) -> BoxFuture<'a, ()>;

    /// Queues the one check a node's report completed: the continuation
    /// of `from`'s own work (a chain's next link). By default anywhere,
    /// as [`Dispatcher::dispatch`].
    fn dispatch_continuation<'a>(&'a self, from: &'a Arc<Engine>, msg: CheckResourceMsg) -> BoxFuture<'a, ()> {
        self.dispatch(from, msg)
    }

    /// Cancels the running actions of a stack on every engine.
    fn cancel_all<'a>(&'a self, from: &'a Arc<Engine>, stack_id: &'a str) -> BoxFuture<'a, ()>;

    /// Whether engine `engine_id` is alive (answers Listening in time).
    fn is_alive<'a>(&'a self, from: &'a Arc<Engine>, engine_id: &'a str) -> BoxFuture<'a, bool>;
}

/// A step-able in-memory queue shared by the engines of one test.
#[derive(Default)]
pub struct QueueDispatcher {
    queue: Mutex<VecDeque<CheckResourceMsg>>,
    engines: Mutex<Vec<Weak<Engine>>>,
    dead: Mutex<HashSet<String>>,
}

impl QueueDispatcher {
    pub fn new() -> Arc<QueueDispatcher> {
        Arc::new(QueueDispatcher::default())
    }

    /// Makes an engine reachable for cancel and liveness answers.
    pub fn attach(&self, engine: &Arc<Engine>) {
        if let Ok(mut e) = self.engines.lock() {
            e.push(Arc::downgrade(engine));
        }
    }

    /// From now on `engine_id` does not answer Listening.
    pub fn kill(&self, engine_id: &str) {
        if let Ok(mut d) = self.dead.lock() {
            d.insert(engine_id.to_string());
        }
    }

    pub fn pop(&self) -> Option<CheckResourceMsg> {
        self.queue.lock().ok()?.pop_front()
    }

    /// Takes the first queued message matching `pred`.
    pub fn take(&self, pred: impl Fn(&CheckResourceMsg) -> bool) -> Option<CheckResourceMsg> {
        let mut q = self.queue.lock().ok()?;
        let i = q.iter().position(pred)?;
        q.remove(i)
    }

    pub fn pending(&self) -> Vec<CheckResourceMsg> {
        self.queue.lock().map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.queue.lock().map(|q| q.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs queued messages on `engine` until the queue is empty (or
    /// `limit` steps ran); answers how many ran.
    pub async fn drain(&self, engine: &Arc<Engine>, limit: usize) -> usize {
        let mut n = 0;
        while n < limit {
            let Some(msg) = self.pop() else { break };
            engine.check_resource(msg).await;
            n += 1;
        }
        n
    }
}

impl Dispatcher for QueueDispatcher {
    fn dispatch<'a>(&'a self, _from: &'a Arc<Engine>, msg: CheckResourceMsg) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Ok(mut q) = self.queue.lock() {
                q.push_back(msg);
            }
        })
    }

    fn cancel_all<'a>(&'a self, from: &'a Arc<Engine>, stack_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            from.cancel_check_resource(stack_id);
            let engines: Vec<Arc<Engine>> =
                self.engines.lock().map(|e| e.iter().filter_map(Weak::upgrade).collect()).unwrap_or_default();
            for e in engines {
                e.cancel_check_resource(stack_id);
            }
        })
    }

    fn is_alive<'a>(&'a self, from: &'a Arc<Engine>, engine_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if engine_id == from.engine_id() {
                return true;
            }
            !self.dead.lock().map(|d| d.contains(engine_id)).unwrap_or(false)
        })
    }
}
