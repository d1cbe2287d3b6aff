//! The few Neutron calls keelson makes, over a [`Session`] and the
//! catalog's `network` endpoint: the security groups a project deletion
//! leaves behind (Neutron's per-project `default` group).

use http::Method;
use serde_json::Value;

use crate::ec2::quote;
use crate::error::OsError;
use crate::session::Session;

/// Neutron as one session sees it, at `endpoint` (the catalog's URL).
pub struct Network<'a> {
    session: &'a Session,
    endpoint: String,
}

impl<'a> Network<'a> {
    pub fn new(session: &'a Session, endpoint: &str) -> Self {
        Network { session, endpoint: endpoint.trim_end_matches('/').to_string() }
    }

    /// The ids of project `project_id`'s security groups named `name`.
    pub async fn security_group_ids(&self, project_id: &str, name: &str) -> Result<Vec<String>, OsError> {
        let url =
            format!("{}/v2.0/security-groups?project_id={}&name={}", self.endpoint, quote(project_id), quote(name));
        let doc = self.session.call(Method::GET, &url, None).await?.json()?;
        let groups = doc
            .get("security_groups")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no security_groups in Neutron's answer".into()))?;
        Ok(groups.iter().filter_map(|g| g.get("id").and_then(Value::as_str)).map(str::to_owned).collect())
    }

    /// Deletes a security group; Ok when it is gone already.
    pub async fn delete_security_group(&self, id: &str) -> Result<(), OsError> {
        let url = format!("{}/v2.0/security-groups/{}", self.endpoint, quote(id));
        match self.session.call(Method::DELETE, &url, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}
