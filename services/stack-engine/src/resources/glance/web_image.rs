//! OS::Glance::WebImage: a Glance image whose data Glance downloads
//! itself (the `web-download` import method).
//!
//! Create: `POST /v2/images` with every set property but `location`,
//! `members`, `active` and `extra_properties`; then the import of
//! `location`, the members, and `extra_properties` as image properties.
//! The action then waits, as Heat's `check_create_complete`, for the
//! image to be `active` (with `active: false`, deactivated once active);
//! `killed` fails it. Physical id (and `get_resource`) = the image id.
//!
//! Update in place (everything else replaces): `active: false`
//! deactivates, `tags` are added and removed by difference,
//! `extra_properties` replace the old ones (keys no longer given are
//! removed), the other changed properties are patched, `members` are
//! added and removed by difference, and `active: true` reactivates.
//! Delete: a 404 is done.

use std::collections::BTreeSet;
use std::sync::Arc;

use keelson_openstack::image::Image;
use serde_json::{json, Map, Value};

use super::super::nova::{attribute_session, stack_session, STACK_DATA};
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    changed_properties, ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState,
    SupportStatus,
};
use super::{attribute_error, done_if_gone, failure, image_client};
use crate::error::EngineError;
use crate::resources::RequiredService;

/// Glance's image id format (`kernel_id`, `ramdisk_id`).
const GLANCE_ID_PATTERN: &str =
    "^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$";

/// The properties that are not image fields of `POST /v2/images`.
const NOT_IMAGE_FIELDS: [&str; 4] = ["location", "members", "active", "extra_properties"];

/// Seconds between two looks at an image Glance is importing.
const POLL_SECS: f64 = 1.0;

pub struct WebImage {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

fn strings(props: &Properties, name: &str) -> Vec<String> {
    props
        .get(name)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn extra_properties(props: &Properties) -> Map<String, Value> {
    props.get("extra_properties").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn is_active(props: &Properties) -> bool {
    props.get("active").and_then(Value::as_bool).unwrap_or(true)
}

impl WebImage {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new(
                "name",
                T::String,
                "Name for the image. The name of an image is not unique to a Image Service node.",
            ),
            PropertySchema::new("id", T::String, "The image ID. Glance will generate a UUID if not specified."),
            PropertySchema::new(
                "min_disk",
                T::Integer,
                "Amount of disk space (in GB) required to boot image. Default value is 0 if not specified and means no limit on the disk size.",
            )
            .constraint(Constraint::range(Some(0), None))
            .default_value(0),
            PropertySchema::new(
                "min_ram",
                T::Integer,
                "Amount of ram (in MB) required to boot image. Default value is 0 if not specified and means no limit on the ram size.",
            )
            .constraint(Constraint::range(Some(0), None))
            .default_value(0),
            PropertySchema::new(
                "protected",
                T::Boolean,
                "Whether the image can be deleted. If the value is True, the image is protected and cannot be deleted.",
            )
            .update_allowed()
            .default_value(false),
            PropertySchema::new("disk_format", T::String, "Disk format of image.").required().constraint(
                Constraint::allowed_values([
                    "ami", "ari", "aki", "vhd", "vhdx", "vmdk", "raw", "qcow2", "vdi", "iso", "ploop",
                ]),
            ),
            PropertySchema::new("container_format", T::String, "Container format of image.")
                .required()
                .constraint(Constraint::allowed_values(["ami", "ari", "aki", "bare", "ovf", "ova", "docker"])),
            PropertySchema::new(
                "location",
                T::String,
                "URL where the data for this image already resides. For example, if the image data is stored in swift, you could specify \"swift://example.com/container/obj\".",
            )
            .required(),
            PropertySchema::new("tags", T::List, "List of image tags.").update_allowed(),
            PropertySchema::new("architecture", T::String, "Operating system architecture.").update_allowed(),
            PropertySchema::new(
                "kernel_id",
                T::String,
                "ID of image stored in Glance that should be used as the kernel when booting an AMI-style image.",
            )
            .update_allowed()
            .constraint(Constraint::allowed_pattern(GLANCE_ID_PATTERN)),
            PropertySchema::new(
                "os_distro",
                T::String,
                "The common name of the operating system distribution in lowercase.",
            )
            .update_allowed(),
            PropertySchema::new("os_version", T::String, "Operating system version as specified by the distributor.")
                .update_allowed(),
            PropertySchema::new("owner", T::String, "Owner of the image.").update_allowed(),
            PropertySchema::new("extra_properties", T::Map, "Arbitrary properties to associate with the image.")
                .update_allowed()
                .default_value(json!({})),
            PropertySchema::new("visibility", T::String, "Scope of image accessibility.")
                .update_allowed()
                .default_value("private")
                .constraint(Constraint::allowed_values(["public", "private", "community", "shared"])),
            PropertySchema::new(
                "ramdisk_id",
                T::String,
                "ID of image stored in Glance that should be used as the ramdisk when booting an AMI-style image.",
            )
            .update_allowed()
            .constraint(Constraint::allowed_pattern(GLANCE_ID_PATTERN)),
            PropertySchema::new("active", T::Boolean, "Activate or deactivate the image. Requires Admin Access.")
                .default_value(true)
                .update_allowed(),
            PropertySchema::new(
                "members",
                T::List,
                "List of additional members that are permitted to read the image. This may be a Keystone Project IDs or User IDs, depending on the Glance configuration in use.",
            )
            .list_of(PropertySchema::new(
                "*",
                T::String,
                "A member ID. This may be a Keystone Project ID or User ID, depending on the Glance configuration in use.",
            ))
            .update_allowed(),
        ];
        WebImage {
            host,
            schema: ResourceSchema {
                properties,
                attributes: vec![],
                support_status: SupportStatus::supported("12.0.0"),
                description: "A resource managing images in Glance using web-download import.\n\nThis provides image support for recent Glance installation.",
            },
        }
    }

    /// The `POST /v2/images` fields: every set property that is an image
    /// field, defaults included.
    fn create_fields(&self, props: &Properties) -> Map<String, Value> {
        self.schema
            .properties
            .iter()
            .filter(|p| !NOT_IMAGE_FIELDS.contains(&p.name))
            .filter_map(|p| props.get(p.name).filter(|v| !v.is_null()).map(|v| (p.name.to_string(), v.clone())))
            .collect()
    }

    async fn create_with(&self, images: &Image<'_>, ctx: &mut ActionContext) -> ActionResult {
        let props = &ctx.properties;
        let id = images.create(&self.create_fields(props)).await.map_err(failure)?;
        ctx.state.physical_id = Some(id.clone());
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        if let Some(location) = props.get("location").and_then(Value::as_str) {
            images.import_web_download(&id, location).await.map_err(failure)?;
        }
        for member in strings(props, "members") {
            images.add_member(&id, &member).await.map_err(failure)?;
        }
        images.update(&id, &extra_properties(props), &[]).await.map_err(failure)?;
        let active = is_active(props);
        loop {
            if Self::create_complete(images, &id, active).await? {
                return Ok(());
            }
            ctx.sleep(POLL_SECS).await?;
        }
    }

    /// Heat's `check_create_complete`: active (or deactivated, when the
    /// image is to be inactive) is done; killed is a failure.
    async fn create_complete(images: &Image<'_>, id: &str, active: bool) -> Result<bool, ResourceFailure> {
        let image = images.get(id).await.map_err(failure)?;
        let status = image.get("status").and_then(Value::as_str).unwrap_or_default();
        match status {
            "killed" => {
                Err(ResourceFailure::error("ResourceInError", format!("Went to status {status} due to \"Unknown\"")))
            }
            "active" if !active => {
                images.deactivate(id).await.map_err(failure)?;
                Ok(true)
            }
            "deactivated" if !active => Ok(true),
            _ => Ok(status == "active"),
        }
    }

    async fn update_with(&self, images: &Image<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let props = &ctx.properties;
        let changed = changed_properties(old, props);
        let mut diff: Map<String, Value> =
            changed.iter().map(|name| (name.clone(), props.get(name).cloned().unwrap_or(Value::Null))).collect();
        let active = diff.remove("active").map(|_| is_active(props));
        if active == Some(false) {
            images.deactivate(&id).await.map_err(failure)?;
        }
        if diff.remove("tags").is_some() {
            let before: BTreeSet<String> = strings(old, "tags").into_iter().collect();
            let after: BTreeSet<String> = strings(props, "tags").into_iter().collect();
            for tag in after.difference(&before) {
                images.add_tag(&id, tag).await.map_err(failure)?;
            }
            for tag in before.difference(&after) {
                done_if_gone(images.remove_tag(&id, tag).await)?;
            }
        }
        // Members are not image properties: they are shared by difference
        // (Heat also passes them to the image patch, which Glance's schema
        // refuses).
        let members_changed = diff.remove("members").is_some();
        let mut removed = Vec::new();
        if diff.remove("extra_properties").is_some() {
            let new = extra_properties(props);
            removed = extra_properties(old).keys().filter(|k| !new.contains_key(k.as_str())).cloned().collect();
            diff.extend(new);
        }
        images.update(&id, &diff, &removed).await.map_err(failure)?;
        if members_changed {
            let before: BTreeSet<String> = strings(old, "members").into_iter().collect();
            let after: BTreeSet<String> = strings(props, "members").into_iter().collect();
            for member in after.difference(&before) {
                images.add_member(&id, member).await.map_err(failure)?;
            }
            for member in before.difference(&after) {
                images.remove_member(&id, member).await.map_err(failure)?;
            }
        }
        if active == Some(true) {
            images.reactivate(&id).await.map_err(failure)?;
        }
        Ok(())
    }
}

impl Plugin for WebImage {
    const TYPE: &'static str = "OS::Glance::WebImage";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::GLANCE)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let container = props.get("container_format").and_then(Value::as_str).unwrap_or_default();
        let disk = props.get("disk_format").and_then(Value::as_str).unwrap_or_default();
        if ["ami", "ari", "aki"].contains(&container) && disk != container {
            return Err(EngineError::validation(
                "Invalid mix of disk and container formats. When setting a disk or container format to one of 'aki', 'ari', or 'ami', the container and disk formats must match.",
            ));
        }
        let has_members = props.get("members").and_then(Value::as_array).is_some_and(|m| !m.is_empty());
        if has_members && props.get("visibility").and_then(Value::as_str) != Some("shared") {
            return Err(EngineError::from_heat(
                "ResourcePropertyValueDependency",
                400,
                "members property should only be specified for visibility with value shared.",
            ));
        }
        Ok(())
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let images = image_client(&session).await?;
        self.create_with(&images, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let images = image_client(&session).await?;
        self.update_with(&images, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let images = image_client(&session).await?;
        done_if_gone(images.delete(&id).await)
    }

    /// `show`: the image as Glance shows it now (Heat's `_show_resource`).
    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let (Some(id), "show") = (&state.physical_id, name) else { return Ok(Value::Null) };
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let images = Image::connect(&session).await.map_err(attribute_error)?;
        images.get(id).await.map(Value::Object).map_err(attribute_error)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::nova::testing;
    use super::super::super::UpdateDecision;
    use super::*;

    fn image() -> WebImage {
        WebImage::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&image(), "img", &v).unwrap()
    }

    const IMAGES: &str = "/image/v2/images";
    const ID: &str = "7e4dbd8e-2d6c-4b5a-9e6e-3a5f3c2b1a00";

    fn base() -> Value {
        json!({"disk_format": "qcow2", "container_format": "bare", "location": "http://x/cirros.img"})
    }

    fn with(extra: Value) -> Value {
        let mut v = base();
        v.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap());
        v
    }

    #[test]
    fn validation_follows_heats() {
        let e = Plugin::validate_properties(&image(), "img", &with(json!({"container_format": "ami"}))).unwrap_err();
        assert!(e.message().starts_with("Invalid mix of disk and container formats."), "{e}");
        let e = Plugin::validate_properties(&image(), "img", &with(json!({"members": ["p2"]}))).unwrap_err();
        assert_eq!(e.heat_type(), "ResourcePropertyValueDependency");
        assert_eq!(e.message(), "members property should only be specified for visibility with value shared.");
        assert!(Plugin::validate_properties(
            &image(),
            "img",
            &with(json!({"members": ["p2"], "visibility": "shared"}))
        )
        .is_ok());
        let e = Plugin::validate_properties(&image(), "img", &with(json!({"kernel_id": "nope"}))).unwrap_err();
        assert_eq!(e.heat_type(), "StackValidationFailed");
    }

    #[tokio::test]
    async fn creates_imports_shares_and_waits_for_active() {
        let (glance, session) = testing::nova("2.96").await;
        glance.answer(&format!("POST {IMAGES}"), 201, json!({"id": ID, "status": "queued"}));
        glance.answer(&format!("POST {IMAGES}/{ID}/import"), 202, Value::Null);
        glance.answer(&format!("POST {IMAGES}/{ID}/members"), 200, json!({"member_id": "p2"}));
        glance.answer(&format!("GET {IMAGES}/{ID}"), 200, json!({"id": ID, "status": "active", "hw": "old"}));
        glance.answer(&format!("PATCH {IMAGES}/{ID}"), 200, json!({"id": ID}));
        let images = super::super::image_client(&session).await.unwrap();
        let p = props(with(json!({"name": "cirros", "tags": ["t"], "visibility": "shared", "members": ["p2"],
            "extra_properties": {"hw_disk_bus": "scsi"}})));
        let (mut ctx, _tx) = test_context(p);
        image().create_with(&images, &mut ctx).await.unwrap();
        let calls = glance.calls();
        assert_eq!(
            calls[0],
            (
                "POST".to_string(),
                IMAGES.to_string(),
                json!({"name": "cirros", "min_disk": 0, "min_ram": 0, "protected": false, "disk_format": "qcow2",
                    "container_format": "bare", "tags": ["t"], "visibility": "shared"})
            )
        );
        assert_eq!(calls[1].2, json!({"method": {"name": "web-download", "uri": "http://x/cirros.img"}}));
        assert_eq!(calls[2].2, json!({"member": "p2"}));
        assert_eq!(
            (calls[4].0.as_str(), calls[4].2.clone()),
            ("PATCH", json!([{"op": "add", "path": "/hw_disk_bus", "value": "scsi"}]))
        );
        assert_eq!(calls[5].0, "GET");
        assert_eq!(calls.len(), 6);
        assert_eq!(ctx.state.physical_id.as_deref(), Some(ID));
    }

    #[tokio::test]
    async fn inactive_images_are_deactivated_and_killed_ones_fail() {
        let (glance, session) = testing::nova("2.96").await;
        let images = super::super::image_client(&session).await.unwrap();
        glance.answer(&format!("GET {IMAGES}/{ID}"), 200, json!({"id": ID, "status": "active"}));
        glance.answer(&format!("POST {IMAGES}/{ID}/actions/deactivate"), 204, Value::Null);
        assert_eq!(WebImage::create_complete(&images, ID, false).await, Ok(true));
        assert_eq!(glance.calls().last().unwrap().1, format!("{IMAGES}/{ID}/actions/deactivate"));
        glance.answer(&format!("GET {IMAGES}/{ID}"), 200, json!({"id": ID, "status": "importing"}));
        assert_eq!(WebImage::create_complete(&images, ID, true).await, Ok(false));
        glance.answer(&format!("GET {IMAGES}/{ID}"), 200, json!({"id": ID, "status": "killed"}));
        assert_eq!(
            WebImage::create_complete(&images, ID, true).await,
            Err(ResourceFailure::error("ResourceInError", "Went to status killed due to \"Unknown\""))
        );
    }

    #[tokio::test]
    async fn updates_tags_properties_and_members_in_place() {
        let (glance, session) = testing::nova("2.96").await;
        let images = super::super::image_client(&session).await.unwrap();
        glance.answer(&format!("PUT {IMAGES}/{ID}/tags/new"), 204, Value::Null);
        glance.answer(&format!("GET {IMAGES}/{ID}"), 200, json!({"id": ID, "os_distro": "a", "k1": "1", "k2": "2"}));
        glance.answer(&format!("PATCH {IMAGES}/{ID}"), 200, json!({"id": ID}));
        glance.answer(&format!("POST {IMAGES}/{ID}/actions/deactivate"), 204, Value::Null);
        let i = image();
        let old =
            props(with(json!({"tags": ["old", "kept"], "os_distro": "a", "extra_properties": {"k1": "1", "k2": "2"}})));
        let new = props(with(
            json!({"tags": ["kept", "new"], "os_distro": "b", "active": false, "extra_properties": {"k1": "x"}}),
        ));
        assert_eq!(Plugin::update_decision(&i, &old, &new), UpdateDecision::InPlace);
        let (mut ctx, _tx) = test_context(new);
        ctx.state.physical_id = Some(ID.into());
        i.update_with(&images, &mut ctx, &old).await.unwrap();
        let writes: Vec<(String, String, Value)> = glance.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
        assert_eq!(
            writes,
            [
                ("POST".into(), format!("{IMAGES}/{ID}/actions/deactivate"), Value::Null),
                ("PUT".into(), format!("{IMAGES}/{ID}/tags/new"), Value::Null),
                // Already gone: a 404 is fine.
                ("DELETE".into(), format!("{IMAGES}/{ID}/tags/old"), Value::Null),
                (
                    "PATCH".into(),
                    format!("{IMAGES}/{ID}"),
                    json!([{"op": "replace", "path": "/os_distro", "value": "b"},
                        {"op": "replace", "path": "/k1", "value": "x"}, {"op": "remove", "path": "/k2"}])
                ),
            ]
        );
        // Members by difference, and reactivation.
        glance.answer(&format!("POST {IMAGES}/{ID}/members"), 200, json!({}));
        glance.answer(&format!("DELETE {IMAGES}/{ID}/members/p-old"), 204, Value::Null);
        glance.answer(&format!("POST {IMAGES}/{ID}/actions/reactivate"), 204, Value::Null);
        let old = props(with(json!({"visibility": "shared", "members": ["p-old"], "active": false})));
        let new = props(with(json!({"visibility": "shared", "members": ["p-new"]})));
        let (mut ctx, _tx) = test_context(new);
        ctx.state.physical_id = Some(ID.into());
        let before = glance.calls().len();
        i.update_with(&images, &mut ctx, &old).await.unwrap();
        let writes: Vec<(String, String, Value)> =
            glance.calls().into_iter().skip(before).filter(|(m, _, _)| m != "GET").collect();
        assert_eq!(
            writes,
            [
                ("PATCH".into(), format!("{IMAGES}/{ID}"), json!([])),
                ("POST".into(), format!("{IMAGES}/{ID}/members"), json!({"member": "p-new"})),
                ("DELETE".into(), format!("{IMAGES}/{ID}/members/p-old"), Value::Null),
                ("POST".into(), format!("{IMAGES}/{ID}/actions/reactivate"), Value::Null),
            ]
        );
        // Anything else replaces.
        assert_eq!(
            Plugin::update_decision(&i, &props(base()), &props(with(json!({"min_ram": 512})))),
            UpdateDecision::Replace
        );
    }

    /// Through the plugin's entry points: the stack's session; delete
    /// treats 404 as done and fails with Glance's other errors.
    #[tokio::test]
    async fn acts_through_the_stack_session_and_deletes() {
        let (glance, session) = testing::nova("2.96").await;
        glance.answer(&format!("POST {IMAGES}"), 201, json!({"id": ID, "status": "queued"}));
        glance.answer(&format!("POST {IMAGES}/{ID}/import"), 202, Value::Null);
        glance.answer(&format!("GET {IMAGES}/{ID}"), 200, json!({"id": ID, "status": "active"}));
        glance.answer(&format!("PATCH {IMAGES}/{ID}"), 200, json!({"id": ID}));
        let (slot, _host) = testing::bound(Some(session));
        let i = WebImage::new(slot);
        let (mut ctx, _tx) = test_context(props(base()));
        Plugin::create(&i, &mut ctx).await.unwrap();
        assert_eq!(Plugin::reference_id(&i, &ctx.state), json!(ID));
        assert_eq!(i.attribute(&ctx.state, "show").await.unwrap(), json!({"id": ID, "status": "active"}));
        // What outputs and other resources see of it, `show` included.
        let facts = crate::definition::resource_facts(&i, "image", &ctx.state).await;
        assert_eq!(facts.attributes["show"], json!({"id": ID, "status": "active"}));
        // Not registered: Glance answers 404, the image is gone.
        Plugin::delete(&i, &mut ctx).await.unwrap();
        glance.answer(&format!("DELETE {IMAGES}/{ID}"), 403, json!({"error": {"message": "Image is protected"}}));
        assert_eq!(
            Plugin::delete(&i, &mut ctx).await,
            Err(ResourceFailure::error("HTTPForbidden", "HTTP Image is protected"))
        );
        let (slot, _host) = testing::bound(None);
        let (mut ctx, _tx) = test_context(props(base()));
        let e = Plugin::create(&WebImage::new(slot), &mut ctx).await.unwrap_err();
        assert!(
            matches!(e, ResourceFailure::Error { ref type_name, .. } if type_name == "AuthorizationFailure"),
            "{e}"
        );
    }
}
