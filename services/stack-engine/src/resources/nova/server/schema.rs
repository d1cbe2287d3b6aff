//! OS::Nova::Server's schema: Heat 27.0.1's properties and attributes
//! (tests/reference/heat/record_schemas.py nova records them).

use serde_json::json;

use super::super::super::schema::{
    AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus,
};

/// The schema, properties in Heat's declaration order.
pub(super) fn server_schema() -> ResourceSchema {
    let properties = vec![
            PropertySchema::new("name", T::String, "Server name.")
                .update_allowed(),
            PropertySchema::new("image", T::String, "The ID or name of the image to boot with.")
                .constraint(Constraint::custom("glance.image"))
                .update_allowed(),
            PropertySchema::new("block_device_mapping", T::List, "Block device mappings for this server.")
                .list_of(
                    PropertySchema::new("*", T::Map, "")
                        .map_of(vec![
                            PropertySchema::new("device_name", T::String, "A device name where the volume will be attached in the system at /dev/device_name. This value is typically vda.")
                                .required(),
                            PropertySchema::new("volume_id", T::String, "The ID of the volume to boot from. Only one of volume_id or snapshot_id should be provided.")
                                .constraint(Constraint::custom("cinder.volume")),
                            PropertySchema::new("snapshot_id", T::String, "The ID of the snapshot to create a volume from.")
                                .constraint(Constraint::custom("cinder.snapshot")),
                            PropertySchema::new("volume_size", T::Integer, "The size of the volume, in GB. It is safe to leave this blank and have the Compute service infer the size."),
                            PropertySchema::new("delete_on_termination", T::Boolean, "Indicate whether the volume should be deleted when the server is terminated."),
                        ])
                ),
            PropertySchema::new("block_device_mapping_v2", T::List, "Block device mappings v2 for this server.")
                .list_of(
                    PropertySchema::new("*", T::Map, "")
                        .map_of(vec![
                            PropertySchema::new("device_name", T::String, "A device name where the volume will be attached in the system at /dev/device_name. This value is typically vda."),
                            PropertySchema::new("volume_id", T::String, "The volume_id can be boot or non-boot device to the server.")
                                .constraint(Constraint::custom("cinder.volume")),
                            PropertySchema::new("image_id", T::String, "The ID of the image to create a volume from.")
                                .constraint(Constraint::custom("glance.image")),
                            PropertySchema::new("image", T::String, "The ID or name of the image to create a volume from.")
                                .constraint(Constraint::custom("glance.image")),
                            PropertySchema::new("snapshot_id", T::String, "The ID of the snapshot to create a volume from.")
                                .constraint(Constraint::custom("cinder.snapshot")),
                            PropertySchema::new("swap_size", T::Integer, "The size of the swap, in MB."),
                            PropertySchema::new("device_type", T::String, "Device type: at the moment we can make distinction only between disk and cdrom.")
                                .constraint(Constraint::allowed_values(["cdrom", "disk"])),
                            PropertySchema::new("disk_bus", T::String, "Bus of the device: hypervisor driver chooses a suitable default if omitted.")
                                .constraint(Constraint::allowed_values(["ide", "lame_bus", "sata", "scsi", "usb", "virtio"])),
                            PropertySchema::new("boot_index", T::Integer, "Integer used for ordering the boot disks. If it is not specified, value \"0\" will be set for bootable sources (volume, snapshot, image); value \"-1\" will be set for non-bootable sources."),
                            PropertySchema::new("volume_size", T::Integer, "Size of the block device in GB. If it is omitted, hypervisor driver calculates size."),
                            PropertySchema::new("delete_on_termination", T::Boolean, "Indicate whether the volume should be deleted when the server is terminated. Defaults to \"False\" in case of a volume, snapshot or image and to \"True\" in case of swap or ephemeral."),
                            PropertySchema::new("ephemeral_size", T::Integer, "The size of the local ephemeral block device, in GB.")
                                .constraint(Constraint::range(Some(1), None)),
                            PropertySchema::new("ephemeral_format", T::String, "The format of the local ephemeral block device. If no format is specified, uses default value, defined in nova configuration file.")
                                .constraint(Constraint::allowed_values(["ext2", "ext3", "ext4", "xfs", "ntfs"])),
                            PropertySchema::new("volume_type", T::String, "The type of volume to use when creating a volume from image, snapshot, or blank source. Maps to a specific Cinder backend. Requires Nova API microversion 2.67 or later.")
                                .constraint(Constraint::custom("cinder.vtype")),
                        ])
                ),
            PropertySchema::new("flavor", T::String, "The ID or name of the flavor to boot onto.")
                .required()
                .constraint(Constraint::custom("nova.flavor"))
                .update_allowed(),
            PropertySchema::new("flavor_update_policy", T::String, "Policy on how to apply a flavor update; either by requesting a server resize or by replacing the entire server.")
                .default_value(json!("RESIZE"))
                .constraint(Constraint::allowed_values(["RESIZE", "REPLACE"]))
                .update_allowed(),
            PropertySchema::new("image_update_policy", T::String, "Policy on how to apply an image-id update; either by requesting a server rebuild or by replacing the entire server.")
                .default_value(json!("REBUILD"))
                .constraint(Constraint::allowed_values(["REBUILD", "REPLACE", "REBUILD_PRESERVE_EPHEMERAL"]))
                .update_allowed(),
            PropertySchema::new("key_name", T::String, "Name of keypair to inject into the server.")
                .constraint(Constraint::custom("nova.keypair")),
            PropertySchema::new("admin_user", T::String, "Name of the administrative user to use on the server.").hidden(),
            PropertySchema::new("availability_zone", T::String, "Name of the availability zone for server placement."),
            PropertySchema::new("security_groups", T::List, "List of security group names or IDs. Cannot be used if neutron ports are associated with this server; assign security groups to the ports instead.")
                .default_value(json!([])),
            PropertySchema::new("networks", T::List, "An ordered list of nics to be added to this server, with information about connected networks, fixed ips, port etc.")
                .update_allowed()
                .list_of(
                    PropertySchema::new("*", T::Map, "")
                        .map_of(vec![
                            PropertySchema::new("uuid", T::String, "ID of network to create a port on.")
                                .constraint(Constraint::custom("neutron.network")),
                            PropertySchema::new("network", T::String, "Name or ID of network to create a port on.")
                                .constraint(Constraint::custom("neutron.network")),
                            PropertySchema::new("fixed_ip", T::String, "Fixed IP address to specify for the port created on the requested network.")
                                .constraint(Constraint::custom("ip_addr")),
                            PropertySchema::new("port", T::String, "ID of an existing port to associate with this server.")
                                .constraint(Constraint::custom("neutron.port")),
                            PropertySchema::new("subnet", T::String, "Subnet in which to allocate the IP address for port. Used for creating port, based on derived properties. If subnet is specified, network property becomes optional."),
                            PropertySchema::new("port_extra_properties", T::Map, "Dict, which has expand properties for port. Used only if port property is not specified for creating port.")
                                .update_allowed()
                                .map_of(vec![
                                    PropertySchema::new("admin_state_up", T::Boolean, "The administrative state of this port.")
                                        .default_value(json!(true))
                                        .update_allowed(),
                                    PropertySchema::new("allowed_address_pairs", T::List, "Additional MAC/IP address pairs allowed to pass through the port.")
                                        .update_allowed()
                                        .list_of(
                                            PropertySchema::new("*", T::Map, "")
                                                .map_of(vec![
                                                    PropertySchema::new("ip_address", T::String, "IP address to allow through this port.")
                                                        .required()
                                                        .constraint(Constraint::custom("ip_or_cidr")),
                                                    PropertySchema::new("mac_address", T::String, "MAC address to allow through this port.")
                                                        .constraint(Constraint::custom("mac_addr")),
                                                ])
                                        ),
                                    PropertySchema::new("binding:vnic_type", T::String, "The vnic type to be bound on the neutron port. To support SR-IOV PCI passthrough networking, you can request that the neutron port to be realized as normal (virtual nic), direct (pci passthrough), or macvtap (virtual interface with a tap-like software interface). Note that this only works for Neutron deployments that support the bindings extension.")
                                        .default_value(json!("normal"))
                                        .constraint(Constraint::allowed_values(["normal", "direct", "macvtap", "direct-physical", "baremetal", "virtio-forwarder", "smart-nic"]))
                                        .update_allowed(),
                                    PropertySchema::new("mac_address", T::String, "MAC address to give to this port. The default update policy of this property in neutron is that allow admin role only.")
                                        .constraint(Constraint::custom("mac_addr")),
                                    PropertySchema::new("no_fixed_ips", T::Boolean, "Flag to disable all fixed ips on the port.")
                                        .default_value(json!(false))
                                        .update_allowed(),
                                    PropertySchema::new("port_security_enabled", T::Boolean, "Flag to enable/disable port security on the port. When disable this feature(set it to False), there will be no packages filtering, like security-group and address-pairs.")
                                        .update_allowed(),
                                    PropertySchema::new("propagate_uplink_status", T::Boolean, "Flag to enable/disable propagate uplink status on the port.")
                                        .update_allowed(),
                                    PropertySchema::new("qos_policy", T::String, "The name or ID of QoS policy to attach to this port.")
                                        .constraint(Constraint::custom("neutron.qos_policy"))
                                        .update_allowed(),
                                    PropertySchema::new("value_specs", T::Map, "Extra parameters to include in the request.")
                                        .default_value(json!({}))
                                        .update_allowed(),
                                ]),
                            PropertySchema::new("floating_ip", T::String, "ID of the floating IP to associate."),
                            PropertySchema::new("allocate_network", T::String, "The special string values of network, auto: means either a network that is already available to the project will be used, or if one does not exist, will be automatically created for the project; none: means no networking will be allocated for the created server. Supported by Nova API since version \"2.37\". This property can not be used with other network keys.")
                                .constraint(Constraint::allowed_values(["none", "auto"]))
                                .update_allowed(),
                            PropertySchema::new("tag", T::String, "Port tag. Heat ignores any update on this property as nova does not support it."),
                        ])
                ),
            PropertySchema::new("scheduler_hints", T::Map, "Arbitrary key-value pairs specified by the client to help boot a server."),
            PropertySchema::new("metadata", T::Map, "Arbitrary key/value metadata to store for this server. Both keys and values must be 255 characters or less. Non-string values will be serialized to JSON (and the serialized string must be 255 characters or less).")
                .default_value(json!({}))
                .update_allowed(),
            PropertySchema::new("user_data_format", T::String, "How the user_data should be formatted for the server. For HEAT_CFNTOOLS, the user_data is bundled as part of the heat-cfntools cloud-init boot configuration data. For RAW the user_data is passed to Nova unmodified. For SOFTWARE_CONFIG user_data is bundled as part of the software config data, and metadata is derived from any associated SoftwareDeployment resources. And if the user_data is in CoreOS ignition(json) format, the metadata will be injected into the user_data automatically by Heat.")
                .default_value(json!("HEAT_CFNTOOLS"))
                .constraint(Constraint::allowed_values(["HEAT_CFNTOOLS", "RAW", "SOFTWARE_CONFIG"])),
            PropertySchema::new("user_data", T::String, "User data script to be executed by cloud-init or CoreOS ignition. Changes cause replacement of the resource by default, but can be ignored altogether by setting the `user_data_update_policy` property.")
                .default_value(json!(""))
                .update_allowed(),
            PropertySchema::new("reservation_id", T::String, "A UUID for the set of servers being requested."),
            PropertySchema::new("config_drive", T::Boolean, "If True, enable config drive on the server."),
            PropertySchema::new("diskConfig", T::String, "Control how the disk is partitioned when the server is created.")
                .constraint(Constraint::allowed_values(["AUTO", "MANUAL"])),
            PropertySchema::new("personality", T::Map, "A map of files to create/overwrite on the server upon boot. Keys are file names and values are the file contents.")
                .default_value(json!({})),
            PropertySchema::new("admin_pass", T::String, "The administrator password for the server.")
                .update_allowed(),
            PropertySchema::new("software_config_transport", T::String, "How the server should receive the metadata required for software configuration. POLL_SERVER_CFN will allow calls to the cfn API action DescribeStackResource authenticated with the provided keypair. POLL_SERVER_HEAT will allow calls to the Heat API resource-show using the provided keystone credentials. POLL_TEMP_URL will create and populate a Swift TempURL with metadata for polling. ZAQAR_MESSAGE will create a dedicated zaqar queue and post the metadata for polling.")
                .default_value(json!("POLL_SERVER_CFN"))
                .constraint(Constraint::allowed_values(["POLL_SERVER_CFN", "POLL_SERVER_HEAT", "POLL_TEMP_URL", "ZAQAR_MESSAGE"]))
                .update_allowed(),
            PropertySchema::new("user_data_update_policy", T::String, "Policy on how to apply a user_data update; by ignoring it, by replacing the entire server, or rebuild the server.")
                .default_value(json!("REPLACE"))
                .constraint(Constraint::allowed_values(["REPLACE", "IGNORE", "REBUILD"]))
                .update_allowed(),
            PropertySchema::new("tags", T::List, "Server tags. Supported since client version 2.26.")
                .update_allowed()
                .list_of(
                    PropertySchema::new("*", T::String, "")
                ),
            PropertySchema::new("deployment_swift_data", T::Map, "Swift container and object to use for storing deployment data for the server resource. The parameter is a map value with the keys \"container\" and \"object\", and the values are the corresponding container and object names. The software_config_transport parameter must be set to POLL_TEMP_URL for swift to be used. If not specified, and software_config_transport is set to POLL_TEMP_URL, a container will be automatically created from the resource name, and the object name will be a generated uuid.")
                .default_value(json!({}))
                .update_allowed()
                .map_of(vec![
                    PropertySchema::new("container", T::String, "Name of the container.")
                        .constraint(Constraint::length(Some(1), None)),
                    PropertySchema::new("object", T::String, "Name of the object.")
                        .constraint(Constraint::length(Some(1), None)),
                ]),
    ];
    let attributes = vec![
            AttributeSchema::new("name", "Name of the server.", Some("string")),
            AttributeSchema::new("addresses", "A dict of all network addresses with corresponding port_id and subnets. Each network will have two keys in dict, they are network name and network id. The port ID may be obtained through the following expression: ``{get_attr: [<server>, addresses, <network name_or_id>, 0, port]}``. The subnets may be obtained trough the following expression: ``{get_attr: [<server>, addresses, <network name_or_id>, 0, subnets]}``. The network may be obtained through the following expression: ``{get_attr: [<server>, addresses, <network name_or_id>, 0, network]}``.", Some("map")),
            AttributeSchema::new("networks", "A dict of assigned network addresses of the form: {\"public\": [ip1, ip2...], \"private\": [ip3, ip4], \"public_uuid\": [ip1, ip2...], \"private_uuid\": [ip3, ip4]}. Each network will have two keys in dict, they are network name and network id.", Some("map")),
            AttributeSchema::new(
                "first_address",
                "Convenience attribute to fetch the first assigned network address, or an empty string if nothing has been assigned at this time. Result may not be predictable if the server has addresses from more than one network.",
                None,
            )
            .hidden(),
            AttributeSchema::new("instance_name", "AWS compatible instance name.", Some("string")),
            AttributeSchema::new("accessIPv4", "The manually assigned alternative public IPv4 address of the server.", Some("string")),
            AttributeSchema::new("accessIPv6", "The manually assigned alternative public IPv6 address of the server.", Some("string")),
            AttributeSchema::new("console_urls", "URLs of server's consoles. To get a specific console type, the requested type can be specified as parameter to the get_attr function, e.g. get_attr: [ <server>, console_urls, novnc ]. Currently supported types are novnc, xvpvnc, spice-html5, rdp-html5, serial and webmks.", Some("map")),
            AttributeSchema::new("tags", "Tags from the server. Supported since client version 2.26.", Some("list")),
            AttributeSchema::new("os_collect_config", "The os-collect-config configuration for the server's local agent to be configured to connect to Heat to retrieve deployment data.", Some("map")),
    ];
    ResourceSchema {
        properties,
        attributes,
        support_status: SupportStatus::default(),
        description: "A resource for managing Nova instances.\n\nA Server resource manages the running virtual machine instance within an\nOpenStack cloud.",
    }
}
