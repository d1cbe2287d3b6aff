//! The console's view of the controller (`keelson_gateway::console::
//! ControllerView`): every configured node asked for its `ctrlstatus` on
//! its own, at once, since a failover client answers from one node only.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use keelson_controller::{ClientOptions, ControllerClient};
use keelson_gateway::console::{ControllerView, NodeStatus};
use keelson_runtime::tls::MeshTls;

/// One node's answer must come within this (the page and the sampler
/// wait for the slowest node).
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

pub struct ControllerNodes {
    nodes: Vec<(String, ControllerClient)>,
}

impl ControllerNodes {
    /// The view of the controllers at `addrs`; `None` when there are none.
    pub fn view(addrs: Vec<String>, tls: Option<Arc<MeshTls>>) -> Option<Arc<dyn ControllerView>> {
        if addrs.is_empty() {
            return None;
        }
        let options = ClientOptions { deadline: NODE_TIMEOUT, attempt_timeout: NODE_TIMEOUT };
        let nodes = addrs
            .into_iter()
            .map(|addr| (addr.clone(), ControllerClient::with_tls(vec![addr], options, tls.clone())))
            .collect();
        Some(Arc::new(ControllerNodes { nodes }))
    }
}

impl ControllerView for ControllerNodes {
    fn statuses(&self) -> BoxFuture<'_, Vec<NodeStatus>> {
        Box::pin(futures::future::join_all(self.nodes.iter().map(|(address, client)| async move {
            NodeStatus {
                address: address.clone(),
                status: client.ctrlstatus().await.map(|s| s.to_json()).map_err(|e| e.to_string()),
            }
        })))
    }
}
