//! Heat's OS::Glance::WebImage, calling Glance's image API v2 through
//! keelson-openstack's [`Image`] client as the stack's user (the stack's
//! trust session, as the OS::Nova::* types do), and the `glance.image`
//! custom constraint other types resolve an image name or id with.
//!
//! Glance's errors fail the action named as glanceclient's exception
//! class (`HTTPNotFound`, `HTTPForbidden`, ...) with its `HTTP <details>`
//! text; a 404 on delete is a deletion done.

mod web_image;

use std::sync::Arc;

use keelson_openstack::image::{Image, ImageMatch};
use keelson_openstack::{OsError, Session};

pub use web_image::WebImage;

use super::client_errors::GLANCECLIENT;
use super::{Registry, ResourceFailure};
use crate::error::EngineError;

/// Adds OS::Glance::WebImage to `registry`.
pub fn register(registry: &mut Registry) {
    let host = registry.host().clone();
    registry.register(Arc::new(WebImage::new(host)));
}

/// The failure a Glance error becomes: glanceclient's class and text.
pub(crate) fn failure(e: OsError) -> ResourceFailure {
    GLANCECLIENT.failure(e)
}

/// Ok for a 404 (a delete of something already gone).
pub(crate) fn done_if_gone(result: Result<(), OsError>) -> Result<(), ResourceFailure> {
    GLANCECLIENT.done_if_gone(result)
}

/// A Glance error met while resolving an attribute, as Heat raises it.
pub(crate) fn attribute_error(e: OsError) -> EngineError {
    GLANCECLIENT.attribute_error(e)
}

/// The image client of the session's catalog.
pub(crate) async fn image_client(session: &Session) -> Result<Image<'_>, ResourceFailure> {
    Image::connect(session).await.map_err(failure)
}

/// `glance.image`: the id of the image `name_or_id` names (by id, else
/// by its unique name), as Heat's `find_image_by_name_or_id` resolves it.
pub(crate) async fn image_id(session: &Session, name_or_id: &str) -> Result<String, ResourceFailure> {
    let images = image_client(session).await?;
    match_result(name_or_id, images.find(name_or_id).await.map_err(failure)?)
}

/// The id Heat's `find_image_by_name_or_id` answers for what Glance
/// matched, or glanceclient's exception (also the `glance.image`
/// constraint's texts).
pub(crate) fn match_result(name_or_id: &str, found: ImageMatch) -> Result<String, ResourceFailure> {
    let args = format!("{{'name': '{name_or_id}'}}");
    match found {
        ImageMatch::Found(id) => Ok(id),
        ImageMatch::None => Err(ResourceFailure::error("EntityMatchNotFound", format!("No images matching {args}."))),
        ImageMatch::Ambiguous => Err(ResourceFailure::error(
            "EntityUniqueMatchNotFound",
            format!("No images unique match found for {args}."),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::nova::testing;
    use super::super::Registry;
    use super::*;

    use crate::caller::test_admin as admin;

    /// The schema view equals what Heat 27.0.1's code answers
    /// (tests/reference/heat/record_schemas.py glance).
    #[test]
    fn schema_view_equals_heats() {
        let recorded: Value = serde_json::from_str(include_str!("testdata/glance_schemas.json")).unwrap();
        let mut registry = Registry::builtin();
        register(&mut registry);
        let name = "OS::Glance::WebImage";
        let mut without = recorded[name].clone();
        without.as_object_mut().unwrap().remove("description");
        assert_eq!(registry.schema_view(&admin(), name, false).unwrap(), without);
        assert_eq!(registry.schema_view(&admin(), name, true).unwrap(), recorded[name]);
        assert!(Registry::builtin().get(name).is_none(), "needs Keystone");
    }

    #[test]
    fn errors_name_glanceclients_class() {
        let f = failure(OsError::NotFound("404 Not Found\n\nNo image found with ID x".into()));
        assert_eq!(f, ResourceFailure::error("HTTPNotFound", "HTTP 404 Not Found\nNo image found with ID x"));
        let f = failure(OsError::Unavailable("GET http://glance/v2: connection refused".into()));
        assert_eq!(f, ResourceFailure::error("HTTPServiceUnavailable", "GET http://glance/v2: connection refused"));
    }

    #[tokio::test]
    async fn image_names_resolve_through_glance() {
        let (glance, session) = testing::nova("2.96").await;
        let id = "7e4dbd8e-2d6c-4b5a-9e6e-3a5f3c2b1a00";
        glance.answer(&format!("GET /image/v2/images/{id}"), 200, json!({"id": id, "name": "cirros"}));
        glance.answer("GET /image/v2/images?name=cirros", 200, json!({"images": [{"id": id}]}));
        glance.answer("GET /image/v2/images?name=twice", 200, json!({"images": [{"id": "a"}, {"id": "b"}]}));
        glance.answer("GET /image/v2/images?name=none", 200, json!({"images": []}));
        assert_eq!(image_id(&session, id).await.unwrap(), id);
        assert_eq!(image_id(&session, "cirros").await.unwrap(), id);
        assert_eq!(
            image_id(&session, "none").await.unwrap_err(),
            ResourceFailure::error("EntityMatchNotFound", "No images matching {'name': 'none'}.")
        );
        assert_eq!(
            image_id(&session, "twice").await.unwrap_err(),
            ResourceFailure::error("EntityUniqueMatchNotFound", "No images unique match found for {'name': 'twice'}.")
        );
    }
}
