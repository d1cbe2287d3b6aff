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
