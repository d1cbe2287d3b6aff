//! Heat's `validate` of a server's properties (server.py and
//! server_network_mixin.py): block device mappings, the boot source and
//! the networks entries, with Heat's texts.

use serde_json::Value;

use super::super::super::Properties;
use super::{key_str, list_prop, Server};
use crate::error::EngineError;

impl Server {
    /// Heat's `validate` (block device mappings, image, networks).
    pub(super) fn check_properties(name: &str, props: &Properties) -> Result<(), EngineError> {
        let conflict = |a: &str, b: &str| {
            EngineError::validation(format!("Cannot define the following properties at the same time: {a}, {b}"))
        };
        let bdm = list_prop(props, "block_device_mapping");
        let bdm_v2 = list_prop(props, "block_device_mapping_v2");
        if !bdm.is_empty() && !bdm_v2.is_empty() {
            return Err(conflict("block_device_mapping", "block_device_mapping_v2"));
        }
        let given = |v: &Value, k: &str| v.get(k).is_some_and(|v| !v.is_null());
        let image = props.get("image").is_some_and(|v| !v.is_null());
        let mut bootable = image;
        for mapping in bdm {
            let device = mapping.get("device_name").map(keelson_pyfmt::str_of).unwrap_or_default();
            bootable |= device == "vda";
            match (given(mapping, "volume_id"), given(mapping, "snapshot_id")) {
                (true, true) => return Err(conflict("volume_id", "snapshot_id")),
                (false, false) => {
                    return Err(EngineError::validation(format!(
                        "Either volume_id or snapshot_id must be specified for device mapping {device}"
                    )))
                }
                _ => {}
            }
        }
        // Heat's translation has moved `image_id` to `image` by now.
        let mut bootable_sources = usize::from(image);
        for mapping in bdm_v2 {
            let ephemeral = [mapping.get("ephemeral_size"), mapping.get("ephemeral_format")]
                .into_iter()
                .flatten()
                .any(keelson_pyfmt::truthy);
            let image_source = given(mapping, "image") || given(mapping, "image_id");
            let sources = [given(mapping, "volume_id"), given(mapping, "snapshot_id"), image_source];
            let set = sources.iter().filter(|s| **s).count()
                + usize::from(given(mapping, "swap_size"))
                + usize::from(ephemeral);
            if set > 1 {
                return Err(EngineError::validation(
                    "Cannot define the following properties at the same time: volume_id, snapshot_id, image, swap_size, ephemeral_size, ephemeral_format",
                ));
            }
            if set == 0 {
                return Err(EngineError::validation(
                    "Either volume_id, snapshot_id, image_id, swap_size, ephemeral_size or ephemeral_format must be specified.",
                ));
            }
            let boot_index = mapping.get("boot_index").filter(|v| !v.is_null());
            if sources.contains(&true) && boot_index.is_none_or(|i| i.as_i64() == Some(0)) {
                bootable = true;
                bootable_sources += 1;
            }
        }
        if !bootable {
            return Err(EngineError::validation(format!(
                "Neither image nor bootable volume is specified for instance {name}"
            )));
        }
        if !bdm_v2.is_empty() && bootable_sources != 1 {
            return Err(EngineError::validation(format!("Multiple bootable sources for instance {name}.")));
        }
        let networks = list_prop(props, "networks");
        if networks.iter().any(|n| key_str(n, "allocate_network").is_some()) && networks.len() != 1 {
            return Err(EngineError::validation(
                "Property \"allocate_network\" can not be specified if multiple network interfaces set for server.",
            ));
        }
        let mut with_port = false;
        for net in list_prop(props, "networks") {
            let set = |k: &str| net.get(k).is_some_and(|v| !v.is_null());
            with_port |= key_str(net, "port").is_some();
            if !set("network")
                && !set("uuid")
                && !set("port")
                && !set("subnet")
                && key_str(net, "allocate_network").is_none()
            {
                return Err(EngineError::validation(format!(
                    "One of the properties \"network\", \"port\", \"allocate_network\" or \"subnet\" should be set for the specified network of server \"{name}\"."
                )));
            }
            let given = net.as_object().map_or(0, |m| m.values().filter(|v| !v.is_null()).count());
            if key_str(net, "allocate_network").is_some() && given != 1 {
                return Err(EngineError::validation(
                    "Can not specify \"allocate_network\" with other keys of networks at the same time.",
                ));
            }
            if key_str(net, "fixed_ip").is_some() && set("port") {
                return Err(conflict("networks/fixed_ip", "networks/port"));
            }
            if set("floating_ip") && set("network") && !set("port") && !set("subnet") && !set("port_extra_properties") {
                return Err(EngineError::validation(
                    "Property \"floating_ip\" is not supported if only \"network\" is specified, because the corresponding port can not be retrieved.",
                ));
            }
        }
        if with_port && !list_prop(props, "security_groups").is_empty() {
            return Err(conflict("security_groups", "networks/port"));
        }
        Ok(())
    }
}
