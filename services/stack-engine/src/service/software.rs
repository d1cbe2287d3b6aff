//! Signals through pre-signed URLs (heat-api-cfn's `waitcondition` and
//! `signal` routes), and the software_configs / software_deployments API
//! (`heat/api/openstack/v1/software_configs.py`,
//! `software_deployments.py`, `heat/engine/service_software_config.py`).

use serde_json::Value;

use super::{Orchestration, Reply};

impl Orchestration {
    /// A pre-signed signal: no caller; the engine checks the signature.
    pub async fn presigned_signal(&self, method: &str, path: &str, query: &[(String, String)], details: Value) -> Reply {
        self.engine.presigned_signal(method, path, query, details).await
    }
}
