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

/// Heat's name of this client: its endpoint type and TLS settings go by it.
pub const CLIENT: &str = "cinder";

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
    /// `block-storage` one (as its endpoint choice picks them for `cinder`).
    pub async fn connect(session: &'a Session) -> Result<Volume<'a>, OsError> {
        let endpoint = match session.client_endpoint(CLIENT, "volumev3").await {
            Err(OsError::EndpointNotFound(_)) => session.client_endpoint(CLIENT, "block-storage").await?,
            other => other?,
        };
        Ok(Volume::at(session, &endpoint))
    }

    pub fn at(session: &'a Session, endpoint: &str) -> Volume<'a> {
        Volume { session, endpoint: endpoint.trim_end_matches('/').to_string() }
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, OsError> {
        let url = format!("{}{}", self.endpoint, path);
        self.session.client_call(CLIENT, method, &url, &[("openstack-api-version", API_VERSION)], body).await?.json()
    }

    /// The newest microversion the service speaks, from the version
    /// document of its v3 root (the endpoint without the project).
    pub async fn max_version(&self) -> Result<Microversion, OsError> {
        let root = match self.endpoint.rsplit_once("/v3") {
            Some((head, _)) => format!("{head}/v3/"),
            None => format!("{}/", self.endpoint),
        };
        let doc = self.session.client_call(CLIENT, Method::GET, &root, &[], None).await?.json()?;
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

    /// `GET /types/{id}`: the type as Cinder shows it.
    pub async fn volume_type(&self, id: &str) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::GET, &format!("/types/{}", quote(id)), None).await?;
        doc.get("volume_type")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| OsError::InvalidResponse("no volume_type in Cinder's answer".into()))
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

/// Microversion from which Cinder extends an attached (`in-use`) volume.
pub const EXTEND_IN_USE: Microversion = Microversion::new(3, 42);

/// What a new volume is (cinderclient's `volumes.create` fields).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeSpec {
    pub size: Option<i64>,
    pub snapshot_id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub volume_type: Option<String>,
    pub availability_zone: Option<String>,
    pub metadata: Map<String, Value>,
    pub image_ref: Option<String>,
    pub source_volid: Option<String>,
    pub scheduler_hints: Option<Map<String, Value>>,
}

impl VolumeSpec {
    /// The `POST /volumes` body: every field (null when unset), the
    /// scheduler hints beside the volume when there are any.
    pub fn body(&self) -> Value {
        let mut body = json!({"volume": {
            "size": self.size,
            "consistencygroup_id": null,
            "snapshot_id": self.snapshot_id,
            "name": self.name,
            "description": self.description,
            "volume_type": self.volume_type,
            "availability_zone": self.availability_zone,
            "metadata": self.metadata,
            "imageRef": self.image_ref,
            "source_volid": self.source_volid,
            "backup_id": null,
        }});
        if let (Some(hints), Some(doc)) =
            (self.scheduler_hints.as_ref().filter(|h| !h.is_empty()), body.as_object_mut())
        {
            doc.insert("OS-SCH-HNT:scheduler_hints".into(), Value::Object(hints.clone()));
        }
        body
    }
}

impl<'a> Volume<'a> {
    fn volume_path(id: &str) -> String {
        format!("/volumes/{}", quote(id))
    }

    /// `POST /volumes`; answers the new volume's id.
    pub async fn create_volume(&self, spec: &VolumeSpec) -> Result<String, OsError> {
        let doc = self.call(Method::POST, "/volumes", Some(&spec.body())).await?;
        id_of(&doc, "/volume/id")
    }

    /// `GET /volumes/{id}`: the volume as Cinder shows it.
    pub async fn volume(&self, id: &str) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::GET, &Self::volume_path(id), None).await?;
        doc.get("volume")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| OsError::InvalidResponse("no volume in Cinder's answer".into()))
    }

    /// `PUT /volumes/{id}` with name and description.
    pub async fn rename_volume(&self, id: &str, name: Option<&str>, description: Option<&str>) -> Result<(), OsError> {
        let body = json!({"volume": {"name": name, "description": description}});
        self.call(Method::PUT, &Self::volume_path(id), Some(&body)).await.map(drop)
    }

    /// `PUT /volumes/{id}/metadata`: replaces all of it.
    pub async fn replace_volume_metadata(&self, id: &str, metadata: &Value) -> Result<(), OsError> {
        let body = json!({ "metadata": metadata });
        self.call(Method::PUT, &format!("{}/metadata", Self::volume_path(id)), Some(&body)).await.map(drop)
    }

    pub async fn delete_volume(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &Self::volume_path(id), None).await.map(drop)
    }

    /// `POST /volumes/{id}/action` with `{action: info}`.
    async fn volume_action(&self, id: &str, action: &str, info: Value) -> Result<(), OsError> {
        let body = json!({ action: info });
        self.call(Method::POST, &format!("{}/action", Self::volume_path(id)), Some(&body)).await.map(drop)
    }

    pub async fn extend_volume(&self, id: &str, new_size: i64) -> Result<(), OsError> {
        self.volume_action(id, "os-extend", json!({ "new_size": new_size })).await
    }

    /// `os-retype` to `volume_type` with the migration policy `policy`.
    pub async fn retype_volume(&self, id: &str, volume_type: &Value, policy: &str) -> Result<(), OsError> {
        self.volume_action(id, "os-retype", json!({"new_type": volume_type, "migration_policy": policy})).await
    }

    pub async fn set_volume_read_only(&self, id: &str, read_only: bool) -> Result<(), OsError> {
        self.volume_action(id, "os-update_readonly_flag", json!({ "readonly": read_only })).await
    }

    /// `POST /backups/{id}/restore`: into `volume_id`, or a new volume
    /// (None); answers the restored volume's id.
    pub async fn restore_backup(&self, backup_id: &str, volume_id: Option<&str>) -> Result<String, OsError> {
        let body = json!({"restore": {"volume_id": volume_id, "name": null}});
        let doc = self.call(Method::POST, &format!("/backups/{}/restore", quote(backup_id)), Some(&body)).await?;
        id_of(&doc, "/restore/volume_id")
    }

    /// Whether Cinder has `GET {collection}/{id}` (`volumes`, `snapshots`,
    /// `backups`).
    pub async fn exists(&self, collection: &str, id: &str) -> Result<bool, OsError> {
        match self.call(Method::GET, &format!("/{collection}/{}", quote(id)), None).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The id at `pointer` of a creation's answer.
fn id_of(doc: &Value, pointer: &str) -> Result<String, OsError> {
    doc.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| OsError::InvalidResponse(format!("no {pointer} in Cinder's answer")))
}
