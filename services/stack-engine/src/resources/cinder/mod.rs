//! Heat's OS::Cinder::VolumeType, Volume and VolumeAttachment, calling
//! Cinder's block-storage API v3 through keelson-openstack's [`Volume`]
//! client (and Nova's, to attach) as the stack's user (the stack's trust
//! session, as the OS::Nova::* types do).
//!
//! Cinder's errors fail the action named as cinderclient's exception
//! class with its `<message> (HTTP <status>)` text; a 404 on delete is a
//! deletion done, and a delete Cinder refuses with 409 is retried as
//! Heat's `Resource.delete` retries it. The custom constraints that name Cinder entities
//! (`cinder.vtype`, `cinder.snapshot`, `cinder.volume`, `cinder.backup`)
//! and `glance.image` are resolved through the services at action time.

mod attachment;
mod volume;
mod volume_type;

use std::sync::Arc;

use keelson_openstack::volume::Volume as Cinder;
use keelson_openstack::{OsError, Session};

pub use attachment::VolumeAttachment;
pub use volume::Volume;
pub(crate) use volume::{request_attach, wait_attached};
pub use volume_type::VolumeType;

use super::client_errors::CINDERCLIENT;
use super::delete_retries::{with_delete_retries, Retryable};
use super::{Registry, ResourceFailure};

/// Adds the Cinder types to `registry`.
pub fn register(registry: &mut Registry) {
    let host = registry.host().clone();
    registry.register(Arc::new(VolumeType::new(host.clone())));
    registry.register(Arc::new(Volume::new(host.clone())));
    registry.register(Arc::new(VolumeAttachment::new(host)));
}

/// The failure a Cinder error becomes: cinderclient's class (the ones it
/// shares with novaclient, and `ClientException` for any other status).
pub(crate) fn failure(e: OsError) -> ResourceFailure {
    CINDERCLIENT.failure(e)
}

/// A delete call whose 404 is success and whose 409 Heat retries.
fn conflict_retryable(result: Result<(), OsError>) -> Result<Option<Retryable>, ResourceFailure> {
    CINDERCLIENT.conflict_retryable(result)
}

/// The volume client of the session's catalog.
pub(crate) async fn volume_client(session: &Session) -> Result<Cinder<'_>, ResourceFailure> {
    Cinder::connect(session).await.map_err(failure)
}

/// A Cinder entity a custom constraint names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CinderEntity {
    /// `cinder.volume`.
    Volume,
    /// `cinder.snapshot`.
    Snapshot,
    /// `cinder.backup`.
    Backup,
    /// `cinder.vtype`: a type's name or id.
    VolumeType,
}

/// Heat's Cinder getters behind the `cinder.*` constraints: Ok(Ok) when
/// `value` names an entity, Ok(Err) with Heat's EntityNotFound when none
/// does, Err for any other Cinder error.
pub(crate) async fn entity_lookup(
    volumes: &Cinder<'_>,
    entity: CinderEntity,
    value: &str,
) -> Result<Result<(), ResourceFailure>, ResourceFailure> {
    let (collection, heat_name) = match entity {
        CinderEntity::Volume => ("volumes", "Volume"),
        CinderEntity::Snapshot => ("snapshots", "VolumeSnapshot"),
        CinderEntity::Backup => ("backups", "Volume backup"),
        CinderEntity::VolumeType => {
            let types = volumes.types().await.map_err(failure)?;
            let known = types.iter().any(|(id, type_name)| id == value || type_name == value);
            return Ok(if known { Ok(()) } else { Err(not_found("VolumeType", value)) });
        }
    };
    let exists = volumes.exists(collection, value).await.map_err(failure)?;
    Ok(if exists { Ok(()) } else { Err(not_found(heat_name, value)) })
}

/// Heat's EntityNotFound.
fn not_found(entity: &str, name: &str) -> ResourceFailure {
    ResourceFailure::error("EntityNotFound", format!("The {entity} ({name}) could not be found."))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::nova::testing;
    use super::super::Registry;
    use super::*;

    use crate::caller::test_admin as admin;

    const TYPES: &[&str] = &["OS::Cinder::VolumeType", "OS::Cinder::Volume", "OS::Cinder::VolumeAttachment"];

    /// The schema views equal what Heat 27.0.1's code answers
    /// (tests/reference/heat/record_schemas.py cinder).
    #[test]
    fn schema_views_equal_heats() {
        let recorded: Value = serde_json::from_str(include_str!("testdata/cinder_schemas.json")).unwrap();
        let mut registry = Registry::builtin();
        register(&mut registry);
        for name in TYPES {
            let mut without = recorded[name].clone();
            without.as_object_mut().unwrap().remove("description");
            assert_eq!(registry.schema_view(&admin(), name, false).unwrap(), without, "{name}");
            assert_eq!(registry.schema_view(&admin(), name, true).unwrap(), recorded[name], "{name}");
            assert!(Registry::builtin().get(name).is_none(), "{name} needs Keystone");
        }
    }

    /// Heat's default rule keeps OS::Cinder::VolumeType to admins.
    #[test]
    fn volume_types_are_admin_only() {
        let mut registry = Registry::builtin();
        register(&mut registry);
        let member =
            crate::caller::Caller { project_id: "p".into(), roles: vec!["member".into()], ..Default::default() };
        assert_eq!(registry.authorize_type(&member, "OS::Cinder::VolumeType").unwrap_err().http_status(), 403);
        assert!(registry.authorize_type(&admin(), "OS::Cinder::VolumeType").is_ok());
    }

    #[test]
    fn errors_name_cinderclients_class() {
        assert_eq!(
            failure(OsError::NotFound("Volume v could not be found.".into())),
            ResourceFailure::error("NotFound", "Volume v could not be found. (HTTP 404)")
        );
        assert_eq!(
            failure(OsError::Conflict("busy".into())),
            ResourceFailure::error("ClientException", "busy (HTTP 409)")
        );
        assert!(matches!(conflict_retryable(Err(OsError::NotFound("gone".into()))), Ok(None)));
        assert!(matches!(
            conflict_retryable(Err(OsError::Conflict("busy".into()))),
            Ok(Some(Retryable::Conflict(f))) if f == ResourceFailure::error("ClientException", "busy (HTTP 409)")
        ));
        assert_eq!(
            conflict_retryable(Err(OsError::BadRequest("no".into()))).err(),
            Some(ResourceFailure::error("BadRequest", "no (HTTP 400)"))
        );
    }

    /// `volumev3` first, `block-storage` when the catalog has no `volumev3`.
    #[tokio::test]
    async fn finds_the_endpoint_and_sends_the_microversion() {
        let (cinder, session) = testing::nova("2.96").await;
        let volumes = volume_client(&session).await.unwrap();
        cinder.answer(
            "GET /volume/v3/p1/types?is_public=None",
            200,
            json!({"volume_types": [{"id": "t1", "name": "ssd"}]}),
        );
        assert_eq!(volumes.types().await.unwrap(), [("t1".to_string(), "ssd".to_string())]);
        assert_eq!(cinder.seen().last().unwrap().version.as_deref(), Some("volume 3.0"));
        cinder.answer("GET /volume/v3/", 200, json!({"versions": [{"id": "v3.0", "version": "3.71"}]}));
        assert_eq!(volumes.max_version().await.unwrap(), keelson_openstack::compute::Microversion::new(3, 71));
    }
}
