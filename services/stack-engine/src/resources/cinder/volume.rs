//! OS::Cinder::Volume: a Cinder volume, made empty, from an image, a
//! snapshot, another volume, or restored from a backup.
//!
//! Create waits, as Heat's `check_create_complete`, until the volume is
//! `available` (`creating`, `restoring-backup` and `downloading` keep
//! waiting; `error` and any other status fail it), then sets `read_only`.
//! A volume without `name` is named after the resource (Heat's physical
//! name, kept for later updates). Physical id = the volume id.
//!
//! Update in place: name/description, metadata (replaced), volume_type
//! (retype, migration policy `never`), read_only, backup_id (restore into
//! the volume) and size (only growth: extend, once the volume is ready).
//! As Heat does, an attached volume is detached through Nova first, and
//! attached again after, for read_only, backup_id, and size when Cinder
//! cannot extend attached volumes (before 3.42). Delete: refused while
//! `in-use`, then waits until Cinder no longer has the volume (404).
//! Attributes are read from Cinder each time, as Heat does.

use std::sync::Arc;

use keelson_openstack::compute::Compute;
use keelson_openstack::volume::{Volume as Cinder, VolumeSpec, EXTEND_IN_USE};
use keelson_openstack::{OsError, Session};
use serde_json::{json, Map, Value};

use super::super::client_errors::{resource_in_error as in_error, resource_unknown_status as unknown_status};
use super::super::glance::image_id;
use super::super::nova::{attribute_error, attribute_session, compute, stack_session, str_prop, STACK_DATA};
use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    changed_properties, ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState,
    SupportStatus,
};
use super::{conflict_retryable, entity_lookup, failure, volume_client, with_delete_retries, CinderEntity, Retryable};
use crate::error::EngineError;
use crate::resources::RequiredService;

/// Resource data: the volume type Cinder chose.
const VOLUME_TYPE_DATA: &str = "volume_type";

/// Seconds between two looks at a volume Cinder is working on.
const POLL_SECS: f64 = 1.0;

/// Statuses a volume being created passes through.
const CREATING: [&str; 3] = ["creating", "restoring-backup", "downloading"];

pub struct Volume {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

fn status(vol: &Map<String, Value>) -> &str {
    vol.get("status").and_then(Value::as_str).unwrap_or_default()
}

/// The image the properties name: `image`, else the hidden `imageRef`
/// (Heat's translation moves it to `image`).
fn image(props: &Properties) -> Option<&str> {
    str_prop(props, "image").or_else(|| str_prop(props, "imageRef"))
}

/// The first attachment of a volume: (server, volume, device).
fn first_attachment(vol: &Map<String, Value>) -> Option<(String, String, Option<String>)> {
    let a = vol.get("attachments").and_then(Value::as_array)?.first()?;
    let text = |k: &str| a.get(k).and_then(Value::as_str).map(str::to_owned);
    Some((text("server_id")?, text("id").or_else(|| text("volume_id"))?, text("device")))
}

/// What an update does after its immediate calls, in Heat's order.
#[derive(Debug, Default)]
struct Steps {
    reattach: Option<(String, String, Option<String>)>,
    restore: Option<String>,
    resize: Option<i64>,
    read_only: Option<Value>,
}

impl Volume {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new(
                "availability_zone",
                T::String,
                "The availability zone in which the volume will be created.",
            ),
            PropertySchema::new(
                "size",
                T::Integer,
                "The size of the volume in GB. On update only increase in size is supported. This property is required unless property backup_id or source_volid or snapshot_id is specified.",
            )
            .update_allowed()
            .constraint(Constraint::range(Some(1), None)),
            PropertySchema::new("snapshot_id", T::String, "If specified, the snapshot to create the volume from.")
                .constraint(Constraint::custom("cinder.snapshot")),
            PropertySchema::new("backup_id", T::String, "If specified, the backup to create the volume from.")
                .update_allowed()
                .constraint(Constraint::custom("cinder.backup")),
            PropertySchema::new("name", T::String, "A name used to distinguish the volume.").update_allowed(),
            PropertySchema::new("description", T::String, "A description of the volume.").update_allowed(),
            PropertySchema::new(
                "volume_type",
                T::String,
                "If specified, the type of volume to use, mapping to a specific backend.",
            )
            .constraint(Constraint::custom("cinder.vtype"))
            .update_allowed(),
            PropertySchema::new("metadata", T::Map, "Key/value pairs to associate with the volume.")
                .update_allowed()
                .default_value(json!({})),
            PropertySchema::new("imageRef", T::String, "The ID of the image to create the volume from.").hidden(),
            PropertySchema::new(
                "image",
                T::String,
                "If specified, the name or ID of the image to create the volume from.",
            )
            .constraint(Constraint::custom("glance.image")),
            PropertySchema::new("source_volid", T::String, "If specified, the volume to use as source.")
                .constraint(Constraint::custom("cinder.volume")),
            PropertySchema::new(
                "scheduler_hints",
                T::Map,
                "Arbitrary key-value pairs specified by the client to help the Cinder scheduler creating a volume.",
            ),
            PropertySchema::new("read_only", T::Boolean, "Enables or disables read-only access mode of volume.")
                .update_allowed(),
            PropertySchema::new("multiattach", T::Boolean, "Whether allow the volume to be attached more than once.")
                .default_value(false)
                .hidden(),
        ];
        let s = |name, description| AttributeSchema::new(name, description, Some("string"));
        let attributes = vec![
            s("availability_zone", "The availability zone in which the volume is located."),
            s("size", "The size of the volume in GB."),
            s("snapshot_id", "The snapshot the volume was created from, if any."),
            s("display_name", "Name of the volume."),
            s("display_description", "Description of the volume."),
            s("volume_type", "The type of the volume mapping to a backend, if any."),
            s("metadata", "Key/value pairs associated with the volume."),
            s("source_volid", "The volume used as source, if any."),
            s("status", "The current status of the volume."),
            s("created_at", "The timestamp indicating volume creation."),
            s("bootable", "Boolean indicating if the volume can be booted or not."),
            AttributeSchema::new(
                "metadata_values",
                "Key/value pairs associated with the volume in raw dict form.",
                Some("map"),
            ),
            s("encrypted", "Boolean indicating if the volume is encrypted or not."),
            s("attachments", "A string representation of the list of attachments of the volume."),
            AttributeSchema::new("attachments_list", "The list of attachments of the volume.", Some("list")),
            AttributeSchema::new(
                "multiattach",
                "Boolean indicating whether allow the volume to be attached more than once.",
                Some("boolean"),
            ),
        ];
        Volume {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource that implements Cinder volumes.\n\nCinder volume is a storage in the form of block devices. It can be used,\nfor example, for providing storage to instance. Volume supports creation\nfrom snapshot, backup or image. Also volume can be created only by size.",
            },
        }
    }

    /// The custom constraints of the Cinder entities the properties name
    /// (`cinder.snapshot`, `cinder.volume`, `cinder.backup`,
    /// `cinder.vtype`), asked of Cinder as Heat's constraint getters do.
    async fn check_entities(volumes: &Cinder<'_>, props: &Properties, names: &[&str]) -> ActionResult {
        for name in names {
            let Some(value) = str_prop(props, name) else { continue };
            let entity = match *name {
                "snapshot_id" => CinderEntity::Snapshot,
                "source_volid" => CinderEntity::Volume,
                "backup_id" => CinderEntity::Backup,
                _ => CinderEntity::VolumeType,
            };
            entity_lookup(volumes, entity, value).await??;
        }
        Ok(())
    }

    async fn create_with(&self, session: &Session, volumes: &Cinder<'_>, ctx: &mut ActionContext) -> ActionResult {
        let props = ctx.properties.clone();
        Self::check_entities(volumes, &props, &["snapshot_id", "backup_id", "volume_type", "source_volid"]).await?;
        let name = match str_prop(&props, "name") {
            Some(name) => name.to_string(),
            None => ctx.stable_physical_name(),
        };
        let description = str_prop(&props, "description");
        let id = match str_prop(&props, "backup_id") {
            Some(backup) => {
                let id = volumes.restore_backup(backup, None).await.map_err(failure)?;
                volumes.volume(&id).await.map_err(failure)?;
                volumes.rename_volume(&id, Some(&name), description).await.map_err(failure)?;
                id
            }
            None => {
                let image_ref = match image(&props) {
                    Some(image) => Some(image_id(session, image).await?),
                    None => None,
                };
                let spec = VolumeSpec {
                    size: props.get("size").and_then(Value::as_i64),
                    snapshot_id: str_prop(&props, "snapshot_id").map(str::to_owned),
                    name: Some(name),
                    description: description.map(str::to_owned),
                    volume_type: str_prop(&props, "volume_type").map(str::to_owned),
                    availability_zone: str_prop(&props, "availability_zone").map(str::to_owned),
                    metadata: props.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default(),
                    image_ref,
                    source_volid: str_prop(&props, "source_volid").map(str::to_owned),
                    scheduler_hints: props.get("scheduler_hints").and_then(Value::as_object).cloned(),
                };
                volumes.create_volume(&spec).await.map_err(failure)?
            }
        };
        ctx.state.physical_id = Some(id.clone());
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        let vol = loop {
            let vol = volumes.volume(&id).await.map_err(failure)?;
            match status(&vol) {
                "available" => break vol,
                s if CREATING.contains(&s) => ctx.sleep(POLL_SECS).await?,
                "error" => return Err(in_error("error", "Unknown")),
                s => return Err(unknown_status("Volume create failed", s)),
            }
        };
        match vol.get("volume_type").and_then(Value::as_str) {
            Some(t) => ctx.state.data.insert(VOLUME_TYPE_DATA.into(), t.to_string()),
            None => ctx.state.data.remove(VOLUME_TYPE_DATA),
        };
        if let Some(flag) = props.get("read_only").and_then(Value::as_bool) {
            volumes.set_volume_read_only(&id, flag).await.map_err(failure)?;
        }
        Ok(())
    }

    async fn update_with(
        &self,
        session: &Session,
        volumes: &Cinder<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
    ) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let props = ctx.properties.clone();
        let changed = changed_properties(old, &props);
        let has = |name: &str| changed.iter().any(|c| c == name);
        let mut vol: Option<Map<String, Value>> = None;
        let mut steps = Steps::default();
        if has("name") || has("description") {
            vol = Some(volumes.volume(&id).await.map_err(failure)?);
            let name = match str_prop(&props, "name").or_else(|| str_prop(old, "name")) {
                Some(name) => name.to_string(),
                None => ctx.stable_physical_name(),
            };
            let description = str_prop(&props, "description").or_else(|| str_prop(old, "description"));
            volumes.rename_volume(&id, Some(&name), description).await.map_err(failure)?;
        }
        if has("metadata") {
            if vol.is_none() {
                vol = Some(volumes.volume(&id).await.map_err(failure)?);
            }
            let metadata = props.get("metadata").cloned().unwrap_or(Value::Null);
            volumes.replace_volume_metadata(&id, &metadata).await.map_err(failure)?;
        }
        if has("volume_type") {
            Self::check_entities(volumes, &props, &["volume_type"]).await?;
            let new_type = props.get("volume_type").cloned().unwrap_or(Value::Null);
            volumes.retype_volume(&id, &new_type, "never").await.map_err(failure)?;
        }
        if has("read_only") {
            let v = match vol.take() {
                Some(v) => v,
                None => volumes.volume(&id).await.map_err(failure)?,
            };
            steps.read_only = Some(props.get("read_only").cloned().unwrap_or(Value::Null));
            steps.reattach = first_attachment(&v);
            vol = Some(v);
        }
        if has("backup_id") {
            Self::check_entities(volumes, &props, &["backup_id"]).await?;
            let v = match vol.take() {
                Some(v) => v,
                None => volumes.volume(&id).await.map_err(failure)?,
            };
            steps.restore = str_prop(&props, "backup_id").map(str::to_owned);
            steps.reattach = first_attachment(&v);
            vol = Some(v);
        }
        if has("size") {
            let v = match vol.take() {
                Some(v) => v,
                None => volumes.volume(&id).await.map_err(failure)?,
            };
            let size = v.get("size").and_then(Value::as_i64).unwrap_or_default();
            let new_size = props.get("size").and_then(Value::as_i64).unwrap_or_default();
            if new_size < size {
                return Err(ResourceFailure::error("NotSupported", "Shrinking volume is not supported."));
            }
            if new_size > size {
                steps.resize = Some(new_size);
                if !Self::extends_in_use(volumes).await? {
                    steps.reattach = first_attachment(&v);
                }
            }
        }
        self.run_steps(session, volumes, ctx, &id, steps).await
    }

    /// Whether Cinder extends attached volumes (3.42), as Heat asks it.
    async fn extends_in_use(volumes: &Cinder<'_>) -> Result<bool, ResourceFailure> {
        Ok(volumes.max_version().await.map_err(failure)? >= EXTEND_IN_USE)
    }

    /// Heat's `check_update_complete`: detach, restore, resize, access
    /// mode, attach.
    async fn run_steps(
        &self,
        session: &Session,
        volumes: &Cinder<'_>,
        ctx: &ActionContext,
        id: &str,
        steps: Steps,
    ) -> ActionResult {
        let nova = match &steps.reattach {
            Some(_) => Some(compute(session).await?),
            None => None,
        };
        if let (Some((server, attachment, _)), Some(nova)) = (&steps.reattach, &nova) {
            detach(volumes, nova, ctx, id, server, attachment).await?;
        }
        if let Some(backup) = &steps.restore {
            if let Err(e) = volumes.restore_backup(backup, Some(id)).await {
                let err = failure(e);
                return Err(ResourceFailure::error(
                    "Error",
                    format!("Failed to restore volume {id} from backup {backup} - {}", text_of(&err)),
                ));
            }
            loop {
                let vol = volumes.volume(id).await.map_err(failure)?;
                match status(&vol) {
                    "restoring-backup" => ctx.sleep(POLL_SECS).await?,
                    "available" => break,
                    s => return Err(unknown_status("Volume backup restore failed", s)),
                }
            }
        }
        if let Some(size) = steps.resize {
            let expected: &[&str] =
                if Self::extends_in_use(volumes).await? { &["available", "in-use"] } else { &["available"] };
            while !expected.contains(&status(&volumes.volume(id).await.map_err(failure)?)) {
                ctx.sleep(POLL_SECS).await?;
            }
            if let Err(e) = volumes.extend_volume(id, size).await {
                let err = failure(e);
                return Err(ResourceFailure::error(
                    "Error",
                    format!("Failed to extend volume {id} - {}", text_of(&err)),
                ));
            }
            loop {
                let vol = volumes.volume(id).await.map_err(failure)?;
                match status(&vol) {
                    "extending" => ctx.sleep(POLL_SECS).await?,
                    s if expected.contains(&s) => break,
                    s => return Err(unknown_status("Volume resize failed", s)),
                }
            }
        }
        if let Some(flag) = steps.read_only.as_ref().and_then(Value::as_bool) {
            volumes.set_volume_read_only(id, flag).await.map_err(failure)?;
        }
        if let (Some((server, _, device)), Some(nova)) = (&steps.reattach, &nova) {
            attach(volumes, nova, ctx, server, id, device.as_deref()).await?;
        }
        Ok(())
    }
}

/// Nova attaches volume `id` to `server` (as `device`, else where Nova
/// picks); Cinder then shows it in-use (Heat's `VolumeAttachTask`).
async fn attach(
    volumes: &Cinder<'_>,
    nova: &Compute<'_>,
    ctx: &ActionContext,
    server: &str,
    id: &str,
    device: Option<&str>,
) -> ActionResult {
    request_attach(nova, server, id, device).await?;
    wait_attached(volumes, ctx, id).await
}

/// Asks Nova to attach volume `id` to `server`; its refusal is Heat's
/// `Failed to attach ...` error.
pub(crate) async fn request_attach(nova: &Compute<'_>, server: &str, id: &str, device: Option<&str>) -> ActionResult {
    nova.attach_volume(server, id, device).await.map_err(|e| {
        let err = super::super::nova::failure(e);
        ResourceFailure::error("Error", format!("Failed to attach volume {id} to server {server} - {}", text_of(&err)))
    })
}

/// Waits until Cinder shows volume `id` in-use.
pub(crate) async fn wait_attached(volumes: &Cinder<'_>, ctx: &ActionContext, id: &str) -> ActionResult {
    loop {
        let vol = volumes.volume(id).await.map_err(failure)?;
        match status(&vol) {
            "available" | "attaching" | "reserved" => ctx.sleep(POLL_SECS).await?,
            "in-use" => return Ok(()),
            s => return Err(unknown_status("Volume attachment failed", s)),
        }
    }
}

/// Nova detaches `attachment` of volume `id` from `server` (asked again
/// while Nova answers 409, as Heat does); Cinder, then Nova, stop showing
/// the attachment (Heat's `VolumeDetachTask`). Gone is detached.
pub(super) async fn detach(
    volumes: &Cinder<'_>,
    nova: &Compute<'_>,
    ctx: &ActionContext,
    id: &str,
    server: &str,
    attachment: &str,
) -> ActionResult {
    loop {
        match nova.detach_volume(server, attachment).await {
            Ok(()) | Err(OsError::NotFound(_)) | Err(OsError::BadRequest(_)) => break,
            Err(OsError::Conflict(_)) => ctx.sleep(POLL_SECS).await?,
            Err(_) => {
                return Err(ResourceFailure::error(
                    "Error",
                    format!("Could not detach attachment {attachment} from server {server}."),
                ))
            }
        }
    }
    loop {
        let vol = match volumes.volume(id).await {
            Ok(vol) => vol,
            Err(e) if e.is_not_found() => break,
            Err(e) => return Err(failure(e)),
        };
        let still_on_server = vol
            .get("attachments")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|a| a.get("server_id").and_then(Value::as_str) == Some(server)));
        match status(&vol) {
            _ if !still_on_server => break,
            "in-use" | "detaching" | "reserved" => ctx.sleep(POLL_SECS).await?,
            "available" | "deleting" => break,
            s => return Err(unknown_status("Volume detachment failed", s)),
        }
    }
    while nova.volume_attached(server, attachment).await.map_err(super::super::nova::failure)? {
        ctx.sleep(POLL_SECS).await?;
    }
    Ok(())
}

impl Volume {
    /// Asks Cinder to delete the volume unless it is gone or going (Heat's
    /// `handle_delete`); a 409 is met again later, as Heat retries.
    async fn request_delete(volumes: &Cinder<'_>, id: &str) -> Result<Option<Retryable>, ResourceFailure> {
        let vol = match volumes.volume(id).await {
            Ok(vol) => vol,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(failure(e)),
        };
        match status(&vol) {
            "in-use" => Err(ResourceFailure::error("Error", "Volume in use")),
            "deleting" => Ok(None),
            _ => conflict_retryable(volumes.delete_volume(id).await),
        }
    }

    async fn delete_with(volumes: &Cinder<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        with_delete_retries(ctx, || Self::request_delete(volumes, id)).await?;
        loop {
            match volumes.volume(id).await {
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(failure(e)),
                Ok(vol) if status(&vol).eq_ignore_ascii_case("error_deleting") => {
                    return Err(in_error(status(&vol), "delete"))
                }
                Ok(_) => ctx.sleep(POLL_SECS).await?,
            }
        }
    }

    /// An attribute from the volume as Cinder shows it now (`show`: all
    /// of it).
    fn attribute_of(vol: Map<String, Value>, name: &str) -> Value {
        let field = |k: &str| vol.get(k).cloned().unwrap_or(Value::Null);
        match name {
            "show" => Value::Object(vol),
            "metadata" => json!(keelson_pyfmt::json_dumps(&field("metadata"), false)),
            "metadata_values" => field("metadata"),
            "display_name" => field("name"),
            "display_description" => field("description"),
            "attachments_list" => field("attachments"),
            other => json!(keelson_pyfmt::str_of(&field(other))),
        }
    }
}

/// The text of a service failure, as Heat formats the client exception.
fn text_of(failure: &ResourceFailure) -> String {
    failure.exception().map(|(_, message)| message.to_string()).unwrap_or_default()
}

impl Plugin for Volume {
    const TYPE: &'static str = "OS::Cinder::Volume";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::CINDER)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let given = |name: &str| str_prop(props, name).is_some();
        if given("image") && given("imageRef") {
            return Err(EngineError::validation(
                "Cannot define the following properties at the same time: image, imageRef",
            ));
        }
        if given("backup_id") {
            return Ok(());
        }
        let mut exclusive = Vec::new();
        let mut without_size = Vec::new();
        for name in ["snapshot_id", "source_volid"] {
            if given(name) {
                exclusive.push(name);
                without_size.push(name);
            }
        }
        // Heat's translation has moved imageRef to image by now.
        if image(props).is_some() {
            exclusive.push("image");
        }
        let size = props.get("size").filter(|s| !s.is_null());
        if size.is_none() && (without_size.len() != 1 || exclusive.len() != 1) {
            return Err(EngineError::validation(format!(
                "If neither \"backup_id\" nor \"size\" is provided, one and only one of \"source_volid\", \"snapshot_id\" must be specified, but currently specified options: {}.",
                keelson_pyfmt::repr_str_list(&exclusive)
            )));
        }
        if size.is_some() && exclusive.len() > 1 {
            return Err(EngineError::validation(format!(
                "If \"size\" is provided, only one of \"image\", \"imageRef\", \"source_volid\", \"snapshot_id\" can be specified, but currently specified options: {}.",
                keelson_pyfmt::repr_str_list(&exclusive)
            )));
        }
        Ok(())
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        self.create_with(&session, &volumes, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        self.update_with(&session, &volumes, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        Self::delete_with(&volumes, ctx, &id).await
    }

    /// Heat's: a FAILED volume is replaced only when Cinder no longer has
    /// it or it is in `error` or `deleting`.
    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(true) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        match volumes.volume(&id).await {
            Ok(vol) => Ok(matches!(status(&vol), "error" | "deleting")),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(failure(e)),
        }
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let Some(id) = &state.physical_id else { return Ok(Value::Null) };
        if name != "show" && self.schema.attribute(name).is_none() {
            return Ok(Value::Null);
        }
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let volumes = Cinder::connect(&session).await.map_err(attribute_error)?;
        let vol = volumes.volume(id).await.map_err(attribute_error)?;
        Ok(Self::attribute_of(vol, name))
    }

    /// Heat's `handle_check`: the volume is `available` or `in-use`.
    fn check(&self, ctx: &mut ActionContext) -> Option<impl std::future::Future<Output = ActionResult> + Send> {
        Some(async move {
            let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
            let session = stack_session(&self.host, &ctx.stack_id).await?;
            let volumes = volume_client(&session).await?;
            let vol = volumes.volume(&id).await.map_err(failure)?;
            match status(&vol) {
                "available" | "in-use" => Ok(()),
                s => Err(ResourceFailure::error(
                    "Error",
                    format!("'status': expected '['available', 'in-use']', got '{s}'"),
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::nova::testing;
    use super::super::super::UpdateDecision;
    use super::*;

    fn volume() -> Volume {
        Volume::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&volume(), "vol", &v).unwrap()
    }

    const VOLUMES: &str = "/volume/v3/p1/volumes";
    const IMAGE: &str = "7e4dbd8e-2d6c-4b5a-9e6e-3a5f3c2b1a00";

    #[test]
    fn validation_follows_heats() {
        let err = |v: Value| Plugin::validate_properties(&volume(), "vol", &v).unwrap_err().message();
        assert_eq!(
            err(json!({})),
            "If neither \"backup_id\" nor \"size\" is provided, one and only one of \"source_volid\", \"snapshot_id\" must be specified, but currently specified options: []."
        );
        assert_eq!(
            err(json!({"size": 1, "image": "a", "snapshot_id": "s"})),
            "If \"size\" is provided, only one of \"image\", \"imageRef\", \"source_volid\", \"snapshot_id\" can be specified, but currently specified options: ['snapshot_id', 'image']."
        );
        assert_eq!(
            err(json!({"size": 1, "image": "a", "imageRef": "b"})),
            "Cannot define the following properties at the same time: image, imageRef"
        );
        assert!(Plugin::validate_properties(&volume(), "vol", &json!({"snapshot_id": "s"})).is_ok());
        assert!(Plugin::validate_properties(&volume(), "vol", &json!({"backup_id": "b"})).is_ok());
        assert!(Plugin::validate_properties(&volume(), "vol", &json!({"size": 0})).is_err());
    }

    #[tokio::test]
    async fn creates_from_an_image_name_and_waits_for_available() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer("GET /image/v2/images?name=cirros", 200, json!({"images": [{"id": IMAGE}]}));
        cinder.answer(
            "GET /volume/v3/p1/types?is_public=None",
            200,
            json!({"volume_types": [{"id": "t1", "name": "ssd"}]}),
        );
        cinder.answer(&format!("POST {VOLUMES}"), 202, json!({"volume": {"id": "vid", "status": "creating"}}));
        cinder.answer(
            &format!("GET {VOLUMES}/vid"),
            200,
            json!({"volume": {"id": "vid", "status": "available", "volume_type": "ssd", "size": 1,
                "metadata": {"a": "1"}, "bootable": "true", "attachments": [], "name": "st-r-x", "encrypted": false}}),
        );
        cinder.answer(&format!("POST {VOLUMES}/vid/action"), 202, Value::Null);
        let volumes = volume_client(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"size": 1, "image": "cirros", "volume_type": "ssd",
            "read_only": true, "metadata": {"a": "1"}, "scheduler_hints": {"same_host": "v0"}})));
        volume().create_with(&session, &volumes, &mut ctx).await.unwrap();
        let writes: Vec<(String, String, Value)> = cinder.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
        let body = &writes[0].2;
        assert!(body["volume"]["name"].as_str().unwrap().starts_with("st-r-"));
        let mut shown = body.clone();
        shown["volume"]["name"] = json!("n");
        assert_eq!(
            shown,
            json!({"volume": {"size": 1, "consistencygroup_id": null, "snapshot_id": null, "name": "n",
                "description": null, "volume_type": "ssd", "availability_zone": null, "metadata": {"a": "1"},
                "imageRef": IMAGE, "source_volid": null, "backup_id": null},
                "OS-SCH-HNT:scheduler_hints": {"same_host": "v0"}})
        );
        assert_eq!(writes[1].2, json!({"os-update_readonly_flag": {"readonly": true}}));
        assert_eq!(ctx.state.physical_id.as_deref(), Some("vid"));
        assert_eq!(ctx.state.data.get(VOLUME_TYPE_DATA).map(String::as_str), Some("ssd"));
        let vol = volumes.volume("vid").await.unwrap();
        assert_eq!(Volume::attribute_of(vol.clone(), "metadata"), json!("{\"a\": \"1\"}"));
        assert_eq!(Volume::attribute_of(vol.clone(), "metadata_values"), json!({"a": "1"}));
        assert_eq!(Volume::attribute_of(vol.clone(), "size"), json!("1"));
        assert_eq!(Volume::attribute_of(vol.clone(), "encrypted"), json!("False"));
        assert_eq!(Volume::attribute_of(vol.clone(), "snapshot_id"), json!("None"));
        assert_eq!(Volume::attribute_of(vol.clone(), "attachments"), json!("[]"));
    }

    #[tokio::test]
    async fn restores_a_backup_and_fails_on_error_status() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer("GET /volume/v3/p1/backups/b1", 200, json!({"backup": {"id": "b1"}}));
        cinder.answer(
            "POST /volume/v3/p1/backups/b1/restore",
            202,
            json!({"restore": {"backup_id": "b1", "volume_id": "vid"}}),
        );
        cinder.answer(&format!("GET {VOLUMES}/vid"), 200, json!({"volume": {"id": "vid", "status": "error"}}));
        cinder.answer(&format!("PUT {VOLUMES}/vid"), 200, json!({"volume": {"id": "vid"}}));
        let volumes = volume_client(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"backup_id": "b1", "name": "v"})));
        let e = volume().create_with(&session, &volumes, &mut ctx).await.unwrap_err();
        assert_eq!(e, ResourceFailure::error("ResourceInError", "Went to status error due to \"Unknown\""));
        let writes: Vec<(String, String, Value)> = cinder.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
        assert_eq!(writes[0].2, json!({"restore": {"volume_id": null, "name": null}}));
        assert_eq!(writes[1].2, json!({"volume": {"name": "v", "description": null}}));
        // A snapshot Cinder does not have.
        let (mut ctx, _tx) = test_context(props(json!({"snapshot_id": "nope"})));
        let e = volume().create_with(&session, &volumes, &mut ctx).await.unwrap_err();
        assert_eq!(e, ResourceFailure::error("EntityNotFound", "The VolumeSnapshot (nope) could not be found."));
    }

    #[tokio::test]
    async fn updates_in_place_and_refuses_to_shrink() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer("GET /volume/v3/", 200, json!({"versions": [{"id": "v3.0", "version": "3.27"}]}));
        cinder.answer(
            &format!("GET {VOLUMES}/vid"),
            200,
            json!({"volume": {"id": "vid", "status": "available", "size": 1, "attachments": []}}),
        );
        cinder.answer(&format!("PUT {VOLUMES}/vid"), 200, json!({"volume": {}}));
        cinder.answer(&format!("PUT {VOLUMES}/vid/metadata"), 200, json!({"metadata": {}}));
        cinder.answer(&format!("POST {VOLUMES}/vid/action"), 202, Value::Null);
        let v = volume();
        let old = props(json!({"size": 1, "name": "a", "metadata": {"k": "1"}}));
        let new = props(json!({"size": 2, "name": "b", "metadata": {"k": "2"}}));
        assert_eq!(Plugin::update_decision(&v, &old, &new), UpdateDecision::InPlace);
        let (mut ctx, _tx) = test_context(new);
        ctx.state.physical_id = Some("vid".into());
        let volumes = volume_client(&session).await.unwrap();
        v.update_with(&session, &volumes, &mut ctx, &old).await.unwrap();
        let writes: Vec<(String, String, Value)> = cinder.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
        assert_eq!(
            writes,
            [
                ("PUT".into(), format!("{VOLUMES}/vid"), json!({"volume": {"name": "b", "description": null}})),
                ("PUT".into(), format!("{VOLUMES}/vid/metadata"), json!({"metadata": {"k": "2"}})),
                ("POST".into(), format!("{VOLUMES}/vid/action"), json!({"os-extend": {"new_size": 2}})),
            ]
        );
        // Shrinking is refused.
        let (mut ctx, _tx) = test_context(props(json!({"size": 1})));
        ctx.state.physical_id = Some("vid".into());
        cinder.answer(
            &format!("GET {VOLUMES}/vid"),
            200,
            json!({"volume": {"id": "vid", "status": "available", "size": 3}}),
        );
        assert_eq!(
            v.update_with(&session, &volumes, &mut ctx, &props(json!({"size": 3}))).await,
            Err(ResourceFailure::error("NotSupported", "Shrinking volume is not supported."))
        );
        // Anything else replaces.
        assert_eq!(
            Plugin::update_decision(
                &v,
                &props(json!({"size": 1})),
                &props(json!({"size": 1, "availability_zone": "z"}))
            ),
            UpdateDecision::Replace
        );
    }

    #[tokio::test]
    async fn an_attached_volume_is_detached_and_attached_again() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(&format!("POST {VOLUMES}/vid/action"), 202, Value::Null);
        cinder.answer("DELETE /compute/v2.1/servers/srv/os-volume_attachments/vid", 202, Value::Null);
        cinder.answer("POST /compute/v2.1/servers/srv/os-volume_attachments", 200, json!({"volumeAttachment": {}}));
        // Cinder shows the volume available (the detach is done) and then
        // in-use (the attach is done): the stand-in answers in-use with no
        // attachment on `srv` for the detach, which ends it too.
        cinder.answer(
            &format!("GET {VOLUMES}/vid"),
            200,
            json!({"volume": {"id": "vid", "status": "in-use", "attachments": []}}),
        );
        let volumes = volume_client(&session).await.unwrap();
        let (ctx, _tx) = test_context(props(json!({"size": 1})));
        let steps = Steps {
            reattach: Some(("srv".into(), "vid".into(), Some("/dev/vdb".into()))),
            read_only: Some(json!(true)),
            ..Steps::default()
        };
        volume().run_steps(&session, &volumes, &ctx, "vid", steps).await.unwrap();
        let writes: Vec<(String, String, Value)> = cinder.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
        assert_eq!(
            writes,
            [
                ("DELETE".into(), "/compute/v2.1/servers/srv/os-volume_attachments/vid".into(), Value::Null),
                (
                    "POST".into(),
                    format!("{VOLUMES}/vid/action"),
                    json!({"os-update_readonly_flag": {"readonly": true}})
                ),
                (
                    "POST".into(),
                    "/compute/v2.1/servers/srv/os-volume_attachments".into(),
                    json!({"volumeAttachment": {"volumeId": "vid", "device": "/dev/vdb"}})
                ),
            ]
        );
    }

    #[tokio::test]
    async fn delete_waits_until_gone_and_refuses_in_use() {
        let (cinder, session) = testing::nova("2.96").await;
        let volumes = volume_client(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"size": 1})));
        let ctx = &mut ctx;
        // Cinder does not have it: done.
        assert_eq!(Volume::delete_with(&volumes, ctx, "vid").await, Ok(()));
        cinder.answer(&format!("GET {VOLUMES}/vid"), 200, json!({"volume": {"id": "vid", "status": "in-use"}}));
        assert_eq!(
            Volume::delete_with(&volumes, ctx, "vid").await,
            Err(ResourceFailure::error("Error", "Volume in use"))
        );
        cinder.answer(&format!("GET {VOLUMES}/vid"), 200, json!({"volume": {"id": "vid", "status": "error_deleting"}}));
        cinder.answer(&format!("DELETE {VOLUMES}/vid"), 202, Value::Null);
        assert_eq!(
            Volume::delete_with(&volumes, ctx, "vid").await,
            Err(ResourceFailure::error("ResourceInError", "Went to status error_deleting due to \"delete\""))
        );
        assert_eq!(cinder.calls().iter().filter(|(m, _, _)| m == "DELETE").count(), 1);
    }

    /// A delete Cinder refuses with 409 is asked again (Heat's retry, 2 s
    /// later), then waited for until the volume is gone.
    #[tokio::test]
    async fn a_delete_cinder_refuses_is_retried() {
        let (cinder, session) = testing::nova("2.96").await;
        let volumes = volume_client(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"size": 1})));
        cinder.answer(&format!("GET {VOLUMES}/vid"), 200, json!({"volume": {"id": "vid", "status": "available"}}));
        cinder.answer(&format!("DELETE {VOLUMES}/vid"), 409, json!({"conflictingRequest": {"message": "busy"}}));
        let deletes = || cinder.calls().iter().filter(|(m, _, _)| m == "DELETE").count();
        let cinder_relents = async {
            while deletes() < 1 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            cinder.answer(&format!("DELETE {VOLUMES}/vid"), 202, Value::Null);
            while deletes() < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            cinder.answer(&format!("GET {VOLUMES}/vid"), 404, json!({"itemNotFound": {"message": "gone"}}));
        };
        let (deleted, ()) = tokio::join!(Volume::delete_with(&volumes, &mut ctx, "vid"), cinder_relents);
        assert_eq!(deleted, Ok(()));
        assert_eq!(deletes(), 2);
    }

    /// Through the plugin's entry points: the stack session, attributes
    /// read from Cinder, needs_replace_failed as Heat's.
    #[tokio::test]
    async fn acts_through_the_stack_session() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(&format!("POST {VOLUMES}"), 202, json!({"volume": {"id": "vid"}}));
        cinder.answer(
            &format!("GET {VOLUMES}/vid"),
            200,
            json!({"volume": {"id": "vid", "status": "available", "name": "n", "attachments": []}}),
        );
        let (slot, _host) = testing::bound(Some(session));
        let v = Volume::new(slot);
        let (mut ctx, _tx) = test_context(props(json!({"size": 1, "name": "n"})));
        Plugin::create(&v, &mut ctx).await.unwrap();
        assert_eq!(v.attribute(&ctx.state, "display_name").await.unwrap(), json!("n"));
        assert_eq!(v.attribute(&ctx.state, "status").await.unwrap(), json!("available"));
        assert_eq!(v.attribute(&ctx.state, "attachments_list").await.unwrap(), json!([]));
        assert_eq!(Plugin::needs_replace_failed(&v, &mut ctx).await, Ok(false));
        assert_eq!(v.attribute(&ctx.state, "show").await.unwrap()["name"], json!("n"));
        assert_eq!(Plugin::check(&v, &mut ctx).unwrap().await, Ok(()));
        cinder.answer(&format!("GET {VOLUMES}/vid"), 200, json!({"volume": {"id": "vid", "status": "error"}}));
        assert_eq!(Plugin::needs_replace_failed(&v, &mut ctx).await, Ok(true));
        assert_eq!(
            Plugin::check(&v, &mut ctx).unwrap().await,
            Err(ResourceFailure::error("Error", "'status': expected '['available', 'in-use']', got 'error'"))
        );
    }
}
