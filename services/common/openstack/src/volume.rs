//! Cinder's block-storage API v3 calls Heat's OS::Cinder::* resources
//! make, over a [`Session`].
//!
//! The endpoint is the catalog's `volumev3`, else its `block-storage`
//! (the same service under its official name, which Heat's session finds
//! as an alias). Every call speaks microversion 3.0, as Heat's cinder
//! client does; [`Volume::max_version`] reads what the service could
//! speak, for the few decisions Heat bases on it.

use http::Method;
use serde_json::{json, Map, Value};

use crate::compute::Microversion;
use crate::ec2::quote;
use crate::error::OsError;
use crate::session::Session;

/// The microversion of every call (Heat's cinder client is version "3").
const API_VERSION: &str = "volume 3.0";

/// Cinder's block-storage API through one session.
pub struct Volume<'a> {
    session: &'a Session,
    /// `.../v3/{project_id}`.
    endpoint: String,
}

impl<'a> Volume<'a> {
    /// The `volumev3` endpoint of the session's catalog, else its
    /// `block-storage` one.
    pub async fn connect(session: &'a Session, interface: &str, region: Option<&str>) -> Result<Volume<'a>, OsError> {
        let endpoint = match session.endpoint("volumev3", interface, region).await {
            Err(OsError::EndpointNotFound(_)) => session.endpoint("block-storage", interface, region).await?,
            other => other?,
        };
        Ok(Volume::at(session, &endpoint))
    }

    pub fn at(session: &'a Session, endpoint: &str) -> Volume<'a> {
        Volume { session, endpoint: endpoint.trim_end_matches('/').to_string() }
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, OsError> {
        let url = format!("{}{}", self.endpoint, path);
        self.session.call_with(method, &url, &[("openstack-api-version", API_VERSION)], body).await?.json()
    }

    /// The newest microversion the service speaks, from the version
    /// document of its v3 root (the endpoint without the project).
    pub async fn max_version(&self) -> Result<Microversion, OsError> {
        let root = match self.endpoint.rsplit_once("/v3") {
            Some((head, _)) => format!("{head}/v3/"),
            None => format!("{}/", self.endpoint),
        };
        let doc = self.session.call(Method::GET, &root, None).await?.json()?;
        let version = doc
            .pointer("/versions/0/version")
            .or_else(|| doc.pointer("/version/version"))
            .and_then(Value::as_str)
            .unwrap_or("3.0");
        Ok(Microversion::parse(version).unwrap_or(Microversion::new(3, 0)))
    }

    // Volume types.

    /// `POST /types`; answers the new type's id.
    pub async fn create_type(&self, name: &str, description: Option<&str>, is_public: bool) -> Result<String, OsError> {
        let body = json!({"volume_type": {
            "name": name, "description": description, "os-volume-type-access:is_public": is_public}});
        let doc = self.call(Method::POST, "/types", Some(&body)).await?;
        id_of(&doc, "/volume_type/id")
    }

    /// `PUT /types/{id}`: name and description (null: unchanged), and
    /// `is_public` when given.
    pub async fn update_type(
        &self,
        id: &str,
        name: Option<&str>,
        description: Option<&str>,
        is_public: Option<bool>,
    ) -> Result<(), OsError> {
        let mut fields = Map::new();
        fields.insert("name".into(), json!(name));
        fields.insert("description".into(), json!(description));
        if let Some(public) = is_public {
            fields.insert("is_public".into(), json!(public));
        }
        let body = json!({ "volume_type": fields });
        self.call(Method::PUT, &format!("/types/{}", quote(id)), Some(&body)).await.map(drop)
    }

    pub async fn delete_type(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/types/{}", quote(id)), None).await.map(drop)
    }

    /// Every volume type (public and private): `(id, name)`.
    pub async fn types(&self) -> Result<Vec<(String, String)>, OsError> {
        let doc = self.call(Method::GET, "/types?is_public=None", None).await?;
        let text = |t: &Value, k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Ok(doc
            .get("volume_types")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no volume_types in Cinder's answer".into()))?
            .iter()
            .map(|t| (text(t, "id"), text(t, "name")))
            .collect())
    }

    pub async fn type_extra_specs(&self, id: &str) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::GET, &format!("/types/{}/extra_specs", quote(id)), None).await?;
        Ok(doc.get("extra_specs").and_then(Value::as_object).cloned().unwrap_or_default())
    }

    pub async fn set_type_extra_specs(&self, id: &str, specs: &Map<String, Value>) -> Result<(), OsError> {
        let body = json!({ "extra_specs": specs });
        self.call(Method::POST, &format!("/types/{}/extra_specs", quote(id)), Some(&body)).await.map(drop)
    }

    pub async fn unset_type_extra_spec(&self, id: &str, key: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/types/{}/extra_specs/{}", quote(id), quote(key)), None).await.map(drop)
    }

    /// The projects a private type is shared with.
    pub async fn type_access(&self, id: &str) -> Result<Vec<String>, OsError> {
        let doc = self.call(Method::GET, &format!("/types/{}/os-volume-type-access", quote(id)), None).await?;
        Ok(doc
            .get("volume_type_access")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|e| e.get("project_id").and_then(Value::as_str).map(str::to_owned)).collect())
            .unwrap_or_default())
    }

    /// `addProjectAccess` (`add`) or `removeProjectAccess`.
    pub async fn set_type_access(&self, id: &str, project_id: &str, add: bool) -> Result<(), OsError> {
        let action = if add { "addProjectAccess" } else { "removeProjectAccess" };
        let body = json!({ action: {"project": project_id} });
        self.call(Method::POST, &format!("/types/{}/action", quote(id)), Some(&body)).await.map(drop)
    }
}

/// The id at `pointer` of a creation's answer.
fn id_of(doc: &Value, pointer: &str) -> Result<String, OsError> {
    doc.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| OsError::InvalidResponse(format!("no {pointer} in Cinder's answer")))
}
