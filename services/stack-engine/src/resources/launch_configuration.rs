//! AWS::AutoScaling::LaunchConfiguration (upstream
//! `aws/autoscaling/launch_config.py`): the properties the members of an
//! OS::Heat::InstanceGroup or AWS::AutoScaling::AutoScalingGroup are
//! made with. It makes nothing itself: it is referenced by its physical
//! name, and any change replaces it (a new name), which is what rolls the
//! groups using it out.

use serde_json::Value;

use super::properties::property_error;
use super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{validate_properties, ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState};
use crate::error::EngineError;

/// Upstream's `implemented=False` properties of a launch configuration:
/// not shown, refused when given.
const NOT_IMPLEMENTED: &[&str] = &["KernelId", "RamDiskId"];

/// Upstream `Properties.validate`'s refusal of a given property the type
/// does not implement (such properties are hidden from the schema views).
pub(crate) fn refuse_unimplemented(
    resource_name: &str,
    props: &Properties,
    not_implemented: &[&str],
) -> Result<(), EngineError> {
    match not_implemented.iter().find(|k| props.get(**k).is_some_and(|v| !v.is_null())) {
        Some(key) => Err(property_error(resource_name, &[], &format!("Property {key} not implemented yet"))),
        None => Ok(()),
    }
}

pub struct LaunchConfiguration {
    schema: ResourceSchema,
}

impl Default for LaunchConfiguration {
    fn default() -> Self {
        Self::new()
    }
}

impl LaunchConfiguration {
    pub fn new() -> Self {
        let ebs = PropertySchema::new("Ebs", T::Map, "The ebs volume to attach to the instance.").map_of(vec![
            PropertySchema::new(
                "DeleteOnTermination",
                T::Boolean,
                "Indicate whether the volume should be deleted when the instance is terminated.",
            )
            .default_value(true),
            PropertySchema::new("Iops", T::Number, "The number of I/O operations per second that the volume supports."),
            PropertySchema::new("SnapshotId", T::String, "The ID of the snapshot to create a volume from.")
                .constraint(Constraint::custom("cinder.snapshot")),
            PropertySchema::new(
                "VolumeSize",
                T::String,
                "The size of the volume, in GB. Must be equal or greater than the size of the snapshot. It is safe to leave this blank and have the Compute service infer the size.",
            ),
            PropertySchema::new("VolumeType", T::String, "The volume type."),
        ]);
        let mapping = PropertySchema::new("*", T::Map, "").map_of(vec![
            PropertySchema::new(
                "DeviceName",
                T::String,
                "A device name where the volume will be attached in the system at /dev/device_name.e.g. vdb",
            )
            .required(),
            ebs,
            PropertySchema::new("NoDevice", T::Map, "The can be used to unmap a defined device."),
            PropertySchema::new(
                "VirtualName",
                T::String,
                "The name of the virtual device. The name must be in the form ephemeralX where X is a number starting from zero (0); for example, ephemeral0.",
            ),
        ]);
        let hint = PropertySchema::new("*", T::Map, "").map_of(vec![
            PropertySchema::new("Key", T::String, "").required(),
            PropertySchema::new("Value", T::String, "").required(),
        ]);
        LaunchConfiguration {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("ImageId", T::String, "Glance image ID or name.")
                        .constraint(Constraint::custom("glance.image")),
                    PropertySchema::new("InstanceType", T::String, "Nova instance type (flavor).")
                        .constraint(Constraint::custom("nova.flavor")),
                    PropertySchema::new("KeyName", T::String, "Optional Nova keypair name.")
                        .constraint(Constraint::custom("nova.keypair")),
                    PropertySchema::new("UserData", T::String, "User data to pass to instance."),
                    PropertySchema::new("SecurityGroups", T::List, "Security group names to assign."),
                    PropertySchema::new("KernelId", T::String, "Not Implemented.").hidden(),
                    PropertySchema::new("RamDiskId", T::String, "Not Implemented.").hidden(),
                    PropertySchema::new("BlockDeviceMappings", T::List, "Block device mappings to attach to instance.")
                        .list_of(mapping),
                    PropertySchema::new(
                        "NovaSchedulerHints",
                        T::List,
                        "Scheduler hints to pass to Nova (Heat extension).",
                    )
                    .list_of(hint),
                    PropertySchema::new(
                        "InstanceId",
                        T::String,
                        "The ID of an existing instance you want to use to create the launch configuration. All properties are derived from the instance with the exception of BlockDeviceMapping.",
                    )
                    .constraint(Constraint::custom("nova.server")),
                ],
                attributes: vec![super::show_attribute()],
                support_status: SupportStatus::default(),
                description: "No description available",
            },
        }
    }
}

fn given(props: &Properties, key: &str) -> bool {
    props.get(key).and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

impl Plugin for LaunchConfiguration {
    const TYPE: &'static str = "AWS::AutoScaling::LaunchConfiguration";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let props = validate_properties(&self.schema, resource_name, given)?;
        refuse_unimplemented(resource_name, &props, NOT_IMPLEMENTED)?;
        self.validate(&props)?;
        Ok(props)
    }

    /// Upstream `validate`: every block device mapping needs an Ebs with
    /// a SnapshotId; without InstanceId, ImageId and InstanceType are
    /// required.
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        if let Some(Value::Array(mappings)) = props.get("BlockDeviceMappings") {
            for mapping in mappings {
                match mapping.get("Ebs").filter(|e| e.as_object().is_some_and(|m| !m.is_empty())) {
                    Some(ebs) if ebs.get("SnapshotId").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) => {}
                    Some(_) => {
                        return Err(EngineError::validation(
                            "SnapshotId is missing, this is required when specifying BlockDeviceMappings.",
                        ))
                    }
                    None => {
                        return Err(EngineError::validation(
                            "Ebs is missing, this is required when specifying BlockDeviceMappings.",
                        ))
                    }
                }
            }
        }
        let complete = given(props, "ImageId") && given(props, "InstanceType");
        if !given(props, "InstanceId") && !complete {
            return Err(EngineError::validation("If without InstanceId, ImageId and InstanceType are required."));
        }
        Ok(())
    }

    /// Referenced by its physical name (upstream
    /// `physical_resource_name_or_FnGetRefId`).
    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        // Upstream derives the missing properties from the server, which
        // takes Nova.
        if given(&ctx.properties, "InstanceId") {
            return Err(ResourceFailure::error("NotSupported", "InstanceId is not supported."));
        }
        ctx.state.physical_id = Some(ctx.physical_name());
        Ok(())
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(props: Value) -> Result<Properties, EngineError> {
        LaunchConfiguration::new().validate_properties("lc", &props)
    }

    #[test]
    fn image_and_flavor_are_required_without_an_instance() {
        assert!(validate(json!({"ImageId": "cirros", "InstanceType": "m1.tiny"})).is_ok());
        assert!(validate(json!({"InstanceId": "abc"})).is_ok());
        let e = validate(json!({"ImageId": "cirros"})).unwrap_err();
        assert_eq!(e.message(), "If without InstanceId, ImageId and InstanceType are required.");
        let e = validate(json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "KernelId": "k"})).unwrap_err();
        assert_eq!(e.message(), "Property error: resources.lc.properties: Property KernelId not implemented yet");
    }

    #[test]
    fn block_device_mappings_need_an_ebs_snapshot() {
        let with = |mapping: Value| json!({"ImageId": "i", "InstanceType": "f", "BlockDeviceMappings": [mapping]});
        assert!(validate(with(json!({"DeviceName": "vdb", "Ebs": {"SnapshotId": "s"}}))).is_ok());
        let e = validate(with(json!({"DeviceName": "vdb"}))).unwrap_err();
        assert_eq!(e.message(), "Ebs is missing, this is required when specifying BlockDeviceMappings.");
        let e = validate(with(json!({"DeviceName": "vdb", "Ebs": {"VolumeSize": "1"}}))).unwrap_err();
        assert_eq!(e.message(), "SnapshotId is missing, this is required when specifying BlockDeviceMappings.");
    }

    #[test]
    fn schema_follows_upstream() {
        let lc = LaunchConfiguration::new();
        let s = lc.schema();
        // No property of a launch configuration is updatable: any change
        // replaces it.
        assert!(s.properties.iter().all(|p| !p.update_allowed && !p.required));
        let shown: Vec<&str> = s.properties.iter().filter(|p| !p.hidden).map(|p| p.name).collect();
        assert!(!shown.contains(&"KernelId") && !shown.contains(&"RamDiskId") && shown.len() == 8);
        let image = s.property("ImageId").unwrap().to_json();
        assert_eq!(image["constraints"], json!([{"custom_constraint": "glance.image"}]));
        let bdm = s.property("BlockDeviceMappings").unwrap().to_json();
        assert_eq!(bdm["schema"]["*"]["schema"]["Ebs"]["schema"]["DeleteOnTermination"]["default"], json!(true));
        assert_eq!(bdm["schema"]["*"]["schema"]["DeviceName"]["required"], json!(true));
    }
}
