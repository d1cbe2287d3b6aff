//! Glance's image API v2 calls Heat's OS::Glance::WebImage (and the
//! `glance.image` constraint) make, over a [`Session`] and the catalog's
//! `image` endpoint.
//!
//! Updates go as glanceclient sends them: the image is read, the wanted
//! values are compared with it and the differences go in one JSON patch
//! (`add` for a new key, `replace` for a changed one, `remove`).

use http::Method;
use serde_json::{json, Map, Value};

use crate::ec2::quote;
use crate::error::OsError;
use crate::session::Session;

/// Heat's name of this client: its endpoint type and TLS settings go by it.
pub const CLIENT: &str = "glance";

/// The media type Glance expects for `PATCH /v2/images/{id}`.
const PATCH_MEDIA_TYPE: &str = "application/openstack-images-v2.1-json-patch";

/// How a name or id matched images (`glance.image`, Heat's
/// `find_image_by_name_or_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageMatch {
    Found(String),
    None,
    Ambiguous,
}

/// Glance's image API as one session sees it.
pub struct Image<'a> {
    session: &'a Session,
    /// The API root, `.../v2`.
    root: String,
}

/// The catalog URL without a version suffix (`/v2`, `/v2.16`), as
/// glanceclient strips it before adding its own.
fn unversioned(endpoint: &str) -> &str {
    let trimmed = endpoint.trim_end_matches('/');
    match trimmed.rsplit_once('/') {
        Some((head, last))
            if last
                .strip_prefix('v')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.')) =>
        {
            head
        }
        _ => trimmed,
    }
}

/// Whether `text` reads as a UUID (32 hex digits, hyphens ignored), as
/// oslo's `is_uuid_like` asks before a lookup by id.
fn uuid_like(text: &str) -> bool {
    let digits: Vec<char> = text.chars().filter(|c| *c != '-').collect();
    digits.len() == 32 && digits.iter().all(char::is_ascii_hexdigit)
}

/// The JSON patch that turns `current` into `current` with `set` applied
/// (a null value removes the key) and the `remove` keys removed; keys
/// whose value does not change produce no operation.
pub fn image_patch(current: &Map<String, Value>, set: &Map<String, Value>, remove: &[String]) -> Vec<Value> {
    let mut ops = Vec::new();
    for (key, value) in set {
        let path = format!("/{}", key.replace('~', "~0").replace('/', "~1"));
        match (current.get(key), value) {
            (None, Value::Null) => {}
            (Some(_), Value::Null) => ops.push(json!({"op": "remove", "path": path})),
            (Some(old), new) if old == new => {}
            (Some(_), new) => ops.push(json!({"op": "replace", "path": path, "value": new})),
            (None, new) => ops.push(json!({"op": "add", "path": path, "value": new})),
        }
    }
    for key in remove.iter().filter(|k| current.contains_key(k.as_str()) && !set.contains_key(k.as_str())) {
        ops.push(json!({"op": "remove", "path": format!("/{}", key.replace('~', "~0").replace('/', "~1"))}));
    }
    ops
}

impl<'a> Image<'a> {
    /// The `image` endpoint of the session's catalog (as its endpoint
    /// choice picks it for `glance`).
    pub async fn connect(session: &'a Session) -> Result<Image<'a>, OsError> {
        let endpoint = session.client_endpoint(CLIENT, "image").await?;
        Ok(Image::at(session, &endpoint))
    }

    /// A client of the image service at `endpoint` (with or without `/v2`).
    pub fn at(session: &'a Session, endpoint: &str) -> Image<'a> {
        Image { session, root: format!("{}/v2", unversioned(endpoint)) }
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, OsError> {
        self.session.client_call(CLIENT, method, &format!("{}{}", self.root, path), &[], body).await?.json()
    }

    fn image_path(id: &str) -> String {
        format!("/images/{}", quote(id))
    }

    /// `POST /v2/images` with `fields`; answers the new image's id.
    pub async fn create(&self, fields: &Map<String, Value>) -> Result<String, OsError> {
        let doc = self.call(Method::POST, "/images", Some(&Value::Object(fields.clone()))).await?;
        doc.get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| OsError::InvalidResponse("no image id in Glance's answer".into()))
    }

    /// The import body of the web-download method.
    pub fn web_download_body(uri: &str) -> Value {
        json!({"method": {"name": "web-download", "uri": uri}})
    }

    /// `POST /v2/images/{id}/import`: Glance fetches `uri` itself.
    pub async fn import_web_download(&self, id: &str, uri: &str) -> Result<(), OsError> {
        let path = format!("{}/import", Self::image_path(id));
        self.call(Method::POST, &path, Some(&Self::web_download_body(uri))).await.map(drop)
    }

    /// `GET /v2/images/{id}`: the image as Glance shows it.
    pub async fn get(&self, id: &str) -> Result<Map<String, Value>, OsError> {
        match self.call(Method::GET, &Self::image_path(id), None).await? {
            Value::Object(image) => Ok(image),
            _ => Err(OsError::InvalidResponse("an image that is not an object".into())),
        }
    }

    /// `PATCH /v2/images/{id}` with [`image_patch`] of the image as it is now.
    pub async fn update(&self, id: &str, set: &Map<String, Value>, remove: &[String]) -> Result<(), OsError> {
        let current = self.get(id).await?;
        let ops = Value::Array(image_patch(&current, set, remove));
        let url = format!("{}{}", self.root, Self::image_path(id));
        self.session
            .client_call(CLIENT, Method::PATCH, &url, &[("content-type", PATCH_MEDIA_TYPE)], Some(&ops))
            .await
            .map(drop)
    }

    pub async fn delete(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &Self::image_path(id), None).await.map(drop)
    }

    /// `POST /v2/images/{id}/actions/deactivate`.
    pub async fn deactivate(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::POST, &format!("{}/actions/deactivate", Self::image_path(id)), None).await.map(drop)
    }

    /// `POST /v2/images/{id}/actions/reactivate`.
    pub async fn reactivate(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::POST, &format!("{}/actions/reactivate", Self::image_path(id)), None).await.map(drop)
    }

    /// `PUT /v2/images/{id}/tags/{tag}`.
    pub async fn add_tag(&self, id: &str, tag: &str) -> Result<(), OsError> {
        self.call(Method::PUT, &format!("{}/tags/{}", Self::image_path(id), quote(tag)), None).await.map(drop)
    }

    pub async fn remove_tag(&self, id: &str, tag: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("{}/tags/{}", Self::image_path(id), quote(tag)), None).await.map(drop)
    }

    /// `POST /v2/images/{id}/members`: shares the image with `member`.
    pub async fn add_member(&self, id: &str, member: &str) -> Result<(), OsError> {
        let body = json!({ "member": member });
        self.call(Method::POST, &format!("{}/members", Self::image_path(id)), Some(&body)).await.map(drop)
    }

    pub async fn remove_member(&self, id: &str, member: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("{}/members/{}", Self::image_path(id), quote(member)), None).await.map(drop)
    }

    /// The image `name_or_id` names: by id when it looks like a UUID and
    /// Glance has it, else the one image of that name.
    pub async fn find(&self, name_or_id: &str) -> Result<ImageMatch, OsError> {
        if uuid_like(name_or_id) {
            match self.get(name_or_id).await {
                Ok(image) => {
                    if let Some(id) = image.get("id").and_then(Value::as_str) {
                        return Ok(ImageMatch::Found(id.to_string()));
                    }
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let doc = self.call(Method::GET, &format!("/images?name={}", quote(name_or_id)), None).await?;
        let ids: Vec<&str> = doc
            .get("images")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no images in Glance's answer".into()))?
            .iter()
            .filter_map(|i| i.get("id").and_then(Value::as_str))
            .collect();
        Ok(match ids.as_slice() {
            [] => ImageMatch::None,
            [one] => ImageMatch::Found((*one).to_string()),
            _ => ImageMatch::Ambiguous,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn endpoints_lose_their_version() {
        assert_eq!(unversioned("http://g:9292"), "http://g:9292");
        assert_eq!(unversioned("http://g:9292/"), "http://g:9292");
        assert_eq!(unversioned("http://g/image/v2/"), "http://g/image");
        assert_eq!(unversioned("http://g/image/v2.16"), "http://g/image");
        assert_eq!(unversioned("http://g/image/vault"), "http://g/image/vault");
    }

    #[test]
    fn patches_carry_only_the_differences() {
        let current = map(json!({"id": "i", "name": "a", "os_distro": "x", "old": "1", "gone": "2"}));
        let set = map(json!({"name": "b", "os_distro": "x", "architecture": "x86_64", "min_ram": null, "old": null}));
        assert_eq!(
            image_patch(&current, &set, &["gone".into(), "name".into(), "absent".into()]),
            [
                json!({"op": "replace", "path": "/name", "value": "b"}),
                json!({"op": "add", "path": "/architecture", "value": "x86_64"}),
                json!({"op": "remove", "path": "/old"}),
                json!({"op": "remove", "path": "/gone"}),
            ]
        );
        assert!(uuid_like("7e4dbd8e-2d6c-4b5a-9e6e-3a5f3c2b1a00"));
        assert!(!uuid_like("cirros"));
        assert_eq!(
            Image::web_download_body("http://x/i.qcow2"),
            json!({"method": {"name": "web-download", "uri": "http://x/i.qcow2"}})
        );
    }
}
