//! Heat's OS::Cinder::VolumeAttachment: a Cinder volume attached to a Nova
//! server through Nova's API, then waited for until Cinder shows it in-use
//! (Heat's `VolumeAttachTask`). Physical id = Nova's attachment id, which
//! Nova makes the volume's id. Every property updates in place: the old
//! attachment is detached (and waited for, Cinder then Nova, as Heat's
//! `VolumeDetachTask`), then the volume attached as the new properties
//! say. A delete detaches; what Nova or Cinder no longer has is detached.

use std::sync::Arc;

use keelson_openstack::compute::Compute;
use keelson_openstack::volume::Volume as Cinder;
use serde_json::Value;

use super::super::nova::{compute, stack_session, str_prop};
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    changed_properties, ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceState, SupportStatus,
};
use super::volume::{detach, request_attach, wait_attached};
use super::volume_client;
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct VolumeAttachment {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// Server, volume and device (None: Nova picks) the properties name.
fn target(props: &Properties) -> (&str, &str, Option<&str>) {
    (
        str_prop(props, "instance_uuid").unwrap_or_default(),
        str_prop(props, "volume_id").unwrap_or_default(),
        str_prop(props, "mountpoint"),
    )
}

impl VolumeAttachment {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("instance_uuid", T::String, "The ID of the server to which the volume attaches.")
                .required()
                .update_allowed(),
            PropertySchema::new("volume_id", T::String, "The ID of the volume to be attached.")
                .required()
                .update_allowed()
                .constraint(Constraint::custom("cinder.volume")),
            PropertySchema::new(
                "mountpoint",
                T::String,
                "The location where the volume is exposed on the instance. This assignment may not be honored and it is advised that the path /dev/disk/by-id/virtio-<VolumeId> be used instead.",
            )
            .update_allowed(),
        ];
        VolumeAttachment {
            host,
            schema: ResourceSchema {
                properties,
                attributes: vec![],
                support_status: SupportStatus::default(),
                description: "Resource for associating volume to instance.\n\nResource for associating existing volume to instance. Also, the location\nwhere the volume is exposed on the instance can be specified.",
            },
        }
    }

    /// Attaches as `ctx.properties` say; the physical id is kept once Nova
    /// accepted, before Cinder shows the volume in-use (a failed wait
    /// still leaves something to detach).
    async fn attach_with(volumes: &Cinder<'_>, nova: &Compute<'_>, ctx: &mut ActionContext) -> ActionResult {
        let (server, volume, device) = target(&ctx.properties);
        let (server, volume, device) = (server.to_owned(), volume.to_owned(), device.map(str::to_owned));
        request_attach(nova, &server, &volume, device.as_deref()).await?;
        ctx.state.physical_id = Some(volume.clone());
        wait_attached(volumes, ctx, &volume).await
    }

    /// Detaches the attachment `props` made (nothing when none was made).
    async fn detach_with(
        volumes: &Cinder<'_>,
        nova: &Compute<'_>,
        ctx: &ActionContext,
        props: &Properties,
    ) -> ActionResult {
        let Some(attachment) = ctx.state.physical_id.as_deref() else { return Ok(()) };
        let (server, volume, _) = target(props);
        detach(volumes, nova, ctx, volume, server, attachment).await
    }

    async fn update_with(
        volumes: &Cinder<'_>,
        nova: &Compute<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
    ) -> ActionResult {
        if changed_properties(old, &ctx.properties).is_empty() {
            return Ok(());
        }
        Self::detach_with(volumes, nova, ctx, old).await?;
        Self::attach_with(volumes, nova, ctx).await
    }
}

impl Plugin for VolumeAttachment {
    const TYPE: &'static str = "OS::Cinder::VolumeAttachment";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::CINDER)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let (volumes, nova) = (volume_client(&session).await?, compute(&session).await?);
        Self::attach_with(&volumes, &nova, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let (volumes, nova) = (volume_client(&session).await?, compute(&session).await?);
        Self::update_with(&volumes, &nova, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        if ctx.state.physical_id.is_none() {
            return Ok(());
        }
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let (volumes, nova) = (volume_client(&session).await?, compute(&session).await?);
        Self::detach_with(&volumes, &nova, ctx, &ctx.properties).await
    }

    /// Heat's `show` has no entity to read for an attachment: null.
    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::context::test_context;
    use super::super::super::nova::testing;
    use super::super::super::ResourceFailure;
    use super::*;

    const VOLUME: &str = "/volume/v3/p1/volumes/vid";

    fn attachment_of(
        session: Arc<keelson_openstack::Session>,
    ) -> (VolumeAttachment, Arc<dyn super::super::super::PluginHost>) {
        let (slot, host) = testing::bound(Some(session));
        (VolumeAttachment::new(slot), host)
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&VolumeAttachment::new(Arc::new(HostSlot::default())), "att", &v).unwrap()
    }

    fn attachments(server: &str) -> String {
        format!("/compute/v2.1/servers/{server}/os-volume_attachments")
    }

    fn in_use_on(server: &str) -> Value {
        json!({"volume": {"id": "vid", "status": "in-use", "attachments": [{"server_id": server}]}})
    }

    #[tokio::test]
    async fn attaches_through_nova_and_waits_until_in_use() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(&format!("POST {}", attachments("sid")), 200, json!({"volumeAttachment": {"id": "vid"}}));
        cinder.answer(&format!("GET {VOLUME}"), 200, in_use_on("sid"));
        let (att, _host) = attachment_of(session);
        let (mut ctx, _tx) =
            test_context(props(json!({"instance_uuid": "sid", "volume_id": "vid", "mountpoint": "/dev/vdb"})));
        Plugin::create(&att, &mut ctx).await.unwrap();
        assert_eq!(ctx.state.physical_id.as_deref(), Some("vid"));
        assert_eq!(
            cinder.calls(),
            vec![
                (
                    "POST".into(),
                    attachments("sid"),
                    json!({"volumeAttachment": {"volumeId": "vid", "device": "/dev/vdb"}})
                ),
                ("GET".into(), VOLUME.into(), Value::Null),
            ]
        );
        assert_eq!(att.attribute(&ctx.state, "show").await.unwrap(), Value::Null);
        // Cinder shows the volume in error: Heat's failure, and the
        // attachment kept to detach.
        cinder.answer(&format!("GET {VOLUME}"), 200, json!({"volume": {"id": "vid", "status": "error"}}));
        let (mut ctx, _tx) = test_context(props(json!({"instance_uuid": "sid", "volume_id": "vid"})));
        assert_eq!(
            Plugin::create(&att, &mut ctx).await,
            Err(ResourceFailure::error(
                "ResourceUnknownStatus",
                "Volume attachment failed - Unknown status error due to \"Unknown\""
            ))
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("vid"));
    }

    #[tokio::test]
    async fn an_attach_nova_refuses_fails_with_heats_text_and_leaves_nothing() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(
            &format!("POST {}", attachments("sid")),
            400,
            json!({"badRequest": {"code": 400, "message": "Invalid volume: not available"}}),
        );
        let (att, _host) = attachment_of(session);
        let (mut ctx, _tx) = test_context(props(json!({"instance_uuid": "sid", "volume_id": "vid"})));
        assert_eq!(
            Plugin::create(&att, &mut ctx).await,
            Err(ResourceFailure::error(
                "Error",
                "Failed to attach volume vid to server sid - Invalid volume: not available (HTTP 400)"
            ))
        );
        assert_eq!(ctx.state.physical_id, None);
        let before = cinder.calls().len();
        Plugin::delete(&att, &mut ctx).await.unwrap();
        assert_eq!(cinder.calls().len(), before);
    }

    #[tokio::test]
    async fn an_update_detaches_then_attaches_as_the_new_properties_say() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(&format!("DELETE {}/vid", attachments("old")), 202, Value::Null);
        cinder.answer(&format!("POST {}", attachments("new")), 200, json!({"volumeAttachment": {"id": "vid"}}));
        // Cinder no longer shows it on the old server; Nova answers 404
        // for the old attachment.
        cinder.answer(&format!("GET {VOLUME}"), 200, in_use_on("new"));
        let (att, _host) = attachment_of(session);
        let old = props(json!({"instance_uuid": "old", "volume_id": "vid"}));
        let (mut ctx, _tx) = test_context(props(json!({"instance_uuid": "new", "volume_id": "vid"})));
        ctx.state.physical_id = Some("vid".into());
        Plugin::update(&att, &mut ctx, &old).await.unwrap();
        let calls: Vec<(String, String)> = cinder.calls().into_iter().map(|(m, p, _)| (m, p)).collect();
        assert_eq!(
            calls,
            vec![
                ("DELETE".into(), format!("{}/vid", attachments("old"))),
                ("GET".into(), VOLUME.into()),
                ("GET".into(), format!("{}/vid", attachments("old"))),
                ("POST".into(), attachments("new")),
                ("GET".into(), VOLUME.into()),
            ]
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("vid"));
        // Nothing changed: nothing asked.
        let before = cinder.calls().len();
        let same = ctx.properties.clone();
        Plugin::update(&att, &mut ctx, &same).await.unwrap();
        assert_eq!(cinder.calls().len(), before);
    }

    #[tokio::test]
    async fn a_delete_detaches_and_what_is_gone_is_detached() {
        let (cinder, session) = testing::nova("2.96").await;
        let (att, _host) = attachment_of(session);
        let (mut ctx, _tx) = test_context(props(json!({"instance_uuid": "sid", "volume_id": "vid"})));
        ctx.state.physical_id = Some("vid".into());
        // Neither Nova nor Cinder has it any more.
        Plugin::delete(&att, &mut ctx).await.unwrap();
        let calls: Vec<(String, String)> = cinder.calls().into_iter().map(|(m, p, _)| (m, p)).collect();
        assert_eq!(
            calls,
            vec![
                ("DELETE".into(), format!("{}/vid", attachments("sid"))),
                ("GET".into(), VOLUME.into()),
                ("GET".into(), format!("{}/vid", attachments("sid"))),
            ]
        );
        // Nova refuses for another reason: Heat's text.
        cinder.answer(&format!("DELETE {}/vid", attachments("sid")), 403, json!({"forbidden": {"message": "no"}}));
        assert_eq!(
            Plugin::delete(&att, &mut ctx).await,
            Err(ResourceFailure::error("Error", "Could not detach attachment vid from server sid."))
        );
    }
}
