//! AWS::EC2::Instance against the loopback Nova (and Neutron, Glance,
//! Cinder) stand-in.

use base64::Engine as _;
use serde_json::{json, Value};

use super::super::super::context::test_context;
use super::super::super::{Registry, UpdateDecision};
use super::super::testing;
use super::super::STACK_DATA;
use super::*;
use crate::caller::test_admin as admin;

const SERVERS: &str = "/compute/v2.1/servers";

fn instance() -> Instance {
    Instance::new(Arc::new(HostSlot::default()))
}

fn props(v: Value) -> Properties {
    Plugin::validate_properties(&instance(), "i", &v).unwrap()
}

fn refusal(v: Value) -> String {
    Plugin::validate_properties(&instance(), "i", &v).unwrap_err().to_string()
}

fn shown(status: &str) -> (u16, Value) {
    (200, json!({"server": {"id": "sid", "name": "i", "status": status}}))
}

/// Glance knows `cirros`, Nova the flavors `m1.tiny` and `m1.small`.
fn known_names(nova: &testing::Nova) {
    nova.answer("GET /image/v2/images?name=cirros", 200, json!({"images": [{"id": "img-1"}]}));
    nova.answer(
        "GET /compute/v2.1/flavors",
        200,
        json!({"flavors": [{"id": "f-1", "name": "m1.tiny"}, {"id": "f-2", "name": "m1.small"}]}),
    );
}

/// Heat 27.0.1's schema facts: the unimplemented properties are not
/// shown, InstanceType, NetworkInterfaces, SubnetId and Tags update in
/// place, Volumes defaults to [], Ebs.DeleteOnTermination to true.
#[test]
fn the_schema_is_heats() {
    let mut registry = Registry::builtin();
    super::super::register(&mut registry);
    let view = registry.schema_view(&admin(), "AWS::EC2::Instance", true).unwrap();
    let shown: Vec<&String> = view["properties"].as_object().unwrap().keys().collect();
    let mut expected = vec![
        "AvailabilityZone",
        "BlockDeviceMappings",
        "ImageId",
        "InstanceType",
        "KeyName",
        "NetworkInterfaces",
        "NovaSchedulerHints",
        "SecurityGroupIds",
        "SecurityGroups",
        "SubnetId",
        "Tags",
        "UserData",
        "Volumes",
    ];
    expected.sort_unstable();
    let mut shown_sorted: Vec<&str> = shown.iter().map(|s| s.as_str()).collect();
    shown_sorted.sort_unstable();
    assert_eq!(shown_sorted, expected);
    let p = &view["properties"];
    for name in ["InstanceType", "NetworkInterfaces", "SubnetId", "Tags"] {
        assert_eq!(p[name]["update_allowed"], json!(true), "{name}");
    }
    for name in ["ImageId", "KeyName", "AvailabilityZone", "SecurityGroups", "UserData", "Volumes"] {
        assert_eq!(p[name]["update_allowed"], json!(false), "{name}");
    }
    assert_eq!(p["ImageId"]["required"], json!(true));
    assert_eq!(p["InstanceType"]["constraints"], json!([{"custom_constraint": "nova.flavor"}]));
    assert_eq!(p["Volumes"]["default"], json!([]));
    let ebs = &p["BlockDeviceMappings"]["schema"]["*"]["schema"]["Ebs"]["schema"];
    assert_eq!(ebs["DeleteOnTermination"]["default"], json!(true));
    assert_eq!(ebs["VolumeSize"]["type"], json!("string"));
    let attributes: Vec<&String> = view["attributes"].as_object().unwrap().keys().collect();
    for name in ["AvailabilityZone", "PrivateDnsName", "PublicDnsName", "PrivateIp", "PublicIp", "show"] {
        assert!(attributes.iter().any(|a| *a == name), "{name}");
    }
    assert_eq!(view["description"], json!("No description available"));
    assert_eq!(registry.get("AWS::EC2::Instance").unwrap().required_service(), Some(RequiredService::NOVA));
}

/// Heat's `validate` and its refusal of unimplemented properties.
#[test]
fn validation_refuses_as_heat() {
    let base = json!({"ImageId": "cirros", "InstanceType": "m1.tiny"});
    let with = |k: &str, v: Value| {
        let mut t = base.clone();
        t[k] = v;
        t
    };
    assert_eq!(
        refusal(with("KernelId", json!("k"))),
        "StackValidationFailed: Property error: resources.i.properties: Property KernelId not implemented yet"
    );
    assert_eq!(
        refusal(with("Tenancy", json!("default"))),
        "StackValidationFailed: Property error: resources.i.properties: Property Tenancy not implemented yet"
    );
    let iops = json!([{"DeviceName": "vdb", "Ebs": {"SnapshotId": "s", "Iops": 100}}]);
    assert_eq!(
        refusal(with("BlockDeviceMappings", iops)),
        "StackValidationFailed: Property error: resources.i.properties.BlockDeviceMappings[0].Ebs: Property Iops not implemented yet"
    );
    let both = with("SecurityGroups", json!(["web"]));
    let mut both = both;
    both["NetworkInterfaces"] = json!(["p-1"]);
    assert_eq!(
        refusal(both),
        "ResourcePropertyConflict: Cannot define the following properties at the same time: SecurityGroups/SecurityGroupIds, NetworkInterfaces."
    );
    assert_eq!(
        refusal(with("BlockDeviceMappings", json!([{"DeviceName": "vdb"}]))),
        "StackValidationFailed: Ebs is missing, this is required when specifying BlockDeviceMappings."
    );
    assert_eq!(
        refusal(with("BlockDeviceMappings", json!([{"DeviceName": "vdb", "Ebs": {"VolumeSize": "1"}}]))),
        "StackValidationFailed: SnapshotId is missing, this is required when specifying BlockDeviceMappings."
    );
    assert!(Plugin::validate_properties(&instance(), "i", &base).is_ok());
}

/// A typical template: the port made on SubnetId (with the groups by id),
/// tags as metadata, repeated hints folded, user data in cfn-tools MIME
/// form, the legacy block device mapping; then ACTIVE, then the volume
/// attached until Cinder shows it in-use.
#[tokio::test]
async fn boots_on_a_port_of_the_subnet_then_attaches_volumes() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer("GET /network/v2.0/subnets/sub-1", 200, json!({"subnet": {"id": "sub-1", "network_id": "net-1"}}));
    nova.answer(
        "GET /network/v2.0/security-groups?project_id=p1",
        200,
        json!({"security_groups": [{"id": "sg-1", "name": "web"}]}),
    );
    nova.answer("POST /network/v2.0/ports", 201, json!({"port": {"id": "port-9"}}));
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![shown("BUILD"), shown("ACTIVE")]);
    nova.answer(&format!("POST {SERVERS}/sid/os-volume_attachments"), 200, json!({"volumeAttachment": {}}));
    nova.answer_in_turn(
        "GET /volume/v3/p1/volumes/vol-1",
        vec![
            (200, json!({"volume": {"id": "vol-1", "status": "attaching"}})),
            (200, json!({"volume": {"id": "vol-1", "status": "in-use"}})),
        ],
    );
    let (slot, _host) = testing::bound(Some(session.clone()));
    let i = Instance::new(slot);
    let (mut ctx, _tx) = test_context(props(json!({
        "ImageId": "cirros", "InstanceType": "m1.tiny", "KeyName": "k", "AvailabilityZone": "nova",
        "SubnetId": "sub-1", "SecurityGroups": ["web"], "SecurityGroupIds": ["0b0f4a3c-7a52-4c3e-9a3b-2f2f5d6f7e81"],
        "Tags": [{"Key": "role", "Value": "web"}],
        "NovaSchedulerHints": [{"Key": "group", "Value": "g1"}, {"Key": "near", "Value": "a"}, {"Key": "near", "Value": "b"}],
        "UserData": "#!/bin/sh\necho hi\n",
        "BlockDeviceMappings": [{"DeviceName": "vdb", "Ebs": {"SnapshotId": "snap-1", "VolumeSize": "2"}}],
        "Volumes": [{"VolumeId": "vol-1", "Device": "/dev/vdc"}]})));
    Plugin::create(&i, &mut ctx).await.unwrap();
    let calls = nova.calls();
    let port = &calls.iter().find(|(m, p, _)| m == "POST" && p == "/network/v2.0/ports").unwrap().2;
    assert_eq!(
        port,
        &json!({"port": {"admin_state_up": true, "network_id": "net-1", "fixed_ips": [{"subnet_id": "sub-1"}],
            "security_groups": ["sg-1", "0b0f4a3c-7a52-4c3e-9a3b-2f2f5d6f7e81"]}})
    );
    let boot = &calls.iter().find(|(m, p, _)| m == "POST" && p == SERVERS).unwrap().2;
    let vm = &boot["server"];
    assert!(vm["name"].as_str().unwrap().starts_with("st-r-"), "{vm}");
    assert_eq!(
        (&vm["imageRef"], &vm["flavorRef"], &vm["key_name"], &vm["availability_zone"]),
        (&json!("img-1"), &json!("f-1"), &json!("k"), &json!("nova"))
    );
    assert_eq!(vm["networks"], json!([{"port": "port-9"}]));
    assert_eq!(vm["security_groups"], json!([{"name": "web"}, {"name": "0b0f4a3c-7a52-4c3e-9a3b-2f2f5d6f7e81"}]));
    assert_eq!(vm["metadata"], json!({"role": "web"}));
    assert_eq!(boot["os:scheduler_hints"], json!({"group": "g1", "near": ["a", "b"]}));
    assert_eq!(
        vm["block_device_mapping"],
        json!([{"device_name": "vdb", "snapshot_id": "snap-1", "volume_size": "2", "delete_on_termination": "True"}])
    );
    let user_data = base64::engine::general_purpose::STANDARD.decode(vm["user_data"].as_str().unwrap()).unwrap();
    let user_data = String::from_utf8(user_data).unwrap();
    assert!(user_data.contains("Content-Type: multipart/mixed"), "{user_data}");
    assert!(user_data.contains("filename=\"cfn-userdata\""), "{user_data}");
    assert!(user_data.contains("echo hi"), "{user_data}");
    assert!(user_data.contains("http://cfn:8000/v1/"), "{user_data}");
    assert_eq!(ctx.state.physical_id.as_deref(), Some("sid"));
    assert_eq!(ctx.state.data.get(PORT_DATA).map(String::as_str), Some("port-9"));
    let attach = &calls.iter().find(|(_, p, _)| p.ends_with("/os-volume_attachments")).unwrap().2;
    assert_eq!(attach, &json!({"volumeAttachment": {"volumeId": "vol-1", "device": "/dev/vdc"}}));
    assert_eq!(calls.iter().filter(|(_, p, _)| p == "/volume/v3/p1/volumes/vol-1").count(), 2);

    // Delete: the server until Nova has it no more, then the port (Neutron
    // refuses a member the delete of a port bound to a server).
    nova.answer("DELETE /network/v2.0/ports/port-9", 204, Value::Null);
    nova.answer(&format!("DELETE {SERVERS}/sid"), 204, Value::Null);
    nova.sequences.lock().unwrap().clear();
    nova.answer(&format!("GET {SERVERS}/sid"), 404, json!({"itemNotFound": {"code": 404, "message": "gone"}}));
    let before = nova.calls().len();
    Plugin::delete(&i, &mut ctx).await.unwrap();
    let deletes: Vec<String> =
        nova.calls()[before..].iter().filter(|(m, _, _)| m == "DELETE").map(|c| c.1.clone()).collect();
    assert_eq!(deletes, [format!("{SERVERS}/sid"), "/network/v2.0/ports/port-9".to_string()]);
    assert!(!ctx.state.data.contains_key(PORT_DATA));
}

/// NetworkInterfaces are the nics in DeviceIndex order; without any nics
/// at 2.37 or later novaclient refuses, as under Heat.
#[tokio::test]
async fn network_interfaces_are_ports_in_device_order() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    let (slot, _host) = testing::bound(Some(session.clone()));
    let i = Instance::new(slot);
    let (mut ctx, _tx) = test_context(props(json!({
        "ImageId": "cirros", "InstanceType": "m1.tiny",
        "NetworkInterfaces": [{"NetworkInterfaceId": "p-b", "DeviceIndex": "1"}, {"NetworkInterfaceId": "p-a", "DeviceIndex": 0}]})));
    Plugin::create(&i, &mut ctx).await.unwrap();
    let calls = nova.calls();
    let boot = &calls.iter().find(|(m, p, _)| m == "POST" && p == SERVERS).unwrap().2;
    assert_eq!(boot["server"]["networks"], json!([{"port": "p-a"}, {"port": "p-b"}]));
    assert_eq!(boot["server"].get("metadata"), None);
    assert_eq!(boot.get("os:scheduler_hints"), None);
    let (mut ctx, _tx) = test_context(props(json!({"ImageId": "cirros", "InstanceType": "m1.tiny"})));
    assert_eq!(
        Plugin::create(&i, &mut ctx).await,
        Err(ResourceFailure::error("ValueError", "nics are required after microversion 2.36"))
    );
}

/// The attributes from the server document: the zone, and the first
/// address of the last network by name for the other four.
#[test]
fn attributes_from_the_server_document() {
    let server: Doc = serde_json::from_value(json!({
        "id": "sid", "OS-EXT-AZ:availability_zone": "az-1",
        "addresses": {
            "alpha": [{"addr": "10.0.0.5", "version": 4}],
            "zeta": [{"addr": "192.168.1.7", "version": 4}, {"addr": "172.24.4.3", "version": 4}],
            "zzz": []}}))
    .unwrap();
    assert_eq!(Instance::attribute_of(Some(&server), "AvailabilityZone"), json!("az-1"));
    for name in ["PrivateDnsName", "PublicDnsName", "PrivateIp", "PublicIp"] {
        assert_eq!(Instance::attribute_of(Some(&server), name), json!("192.168.1.7"), "{name}");
    }
    let bare: Doc = serde_json::from_value(json!({"id": "sid", "addresses": {}})).unwrap();
    assert_eq!(Instance::attribute_of(Some(&bare), "PublicIp"), json!("0.0.0.0"));
    assert_eq!(Instance::attribute_of(Some(&bare), "AvailabilityZone"), Value::Null);
    assert_eq!(Instance::attribute_of(None, "PrivateIp"), json!("0.0.0.0"));
}

#[tokio::test]
async fn attributes_are_read_from_nova() {
    let (nova, session) = testing::nova("2.96").await;
    nova.answer(
        &format!("GET {SERVERS}/sid"),
        200,
        json!({"server": {"id": "sid", "status": "ACTIVE", "addresses": {"private": [{"addr": "10.0.0.5"}]}}}),
    );
    let (slot, _host) = testing::bound(Some(session));
    let i = Instance::new(slot);
    let mut state = ResourceState::default();
    assert_eq!(i.attribute(&state, "PrivateIp").await.unwrap(), Value::Null);
    state.physical_id = Some("sid".into());
    state.data.insert(STACK_DATA.into(), "st".into());
    assert_eq!(i.attribute(&state, "PrivateIp").await.unwrap(), json!("10.0.0.5"));
    state.physical_id = Some("gone".into());
    assert_eq!(i.attribute(&state, "PublicIp").await.unwrap(), json!("0.0.0.0"));
}

/// InstanceType resizes then confirms, Tags replace the metadata, both in
/// place; ImageId, KeyName or UserData replace the instance.
#[tokio::test]
async fn updates_resize_or_replace_as_heat() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    let i = instance();
    let base = json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "Tags": [{"Key": "a", "Value": "1"}]});
    let old = props(base.clone());
    let changed = |k: &str, v: Value| {
        let mut t = base.clone();
        t[k] = v;
        props(t)
    };
    assert_eq!(Plugin::update_decision(&i, &old, &changed("InstanceType", json!("m1.small"))), UpdateDecision::InPlace);
    assert_eq!(Plugin::update_decision(&i, &old, &changed("Tags", json!([]))), UpdateDecision::InPlace);
    assert_eq!(Plugin::update_decision(&i, &old, &changed("SubnetId", json!("s"))), UpdateDecision::InPlace);
    for (k, v) in [("ImageId", json!("other")), ("KeyName", json!("k2")), ("UserData", json!("x"))] {
        assert_eq!(Plugin::update_decision(&i, &old, &changed(k, v)), UpdateDecision::Replace, "{k}");
    }

    nova.answer_in_turn(
        &format!("GET {SERVERS}/sid"),
        vec![
            (200, json!({"server": {"id": "sid", "status": "ACTIVE", "metadata": {"a": "1", "old": "x"}}})),
            shown("ACTIVE"),
            shown("VERIFY_RESIZE"),
            shown("VERIFY_RESIZE"),
            shown("ACTIVE"),
        ],
    );
    nova.answer(&format!("POST {SERVERS}/sid/action"), 202, Value::Null);
    nova.answer(&format!("DELETE {SERVERS}/sid/metadata/old"), 204, Value::Null);
    nova.answer(&format!("POST {SERVERS}/sid/metadata"), 200, json!({"metadata": {}}));
    let mut new = base.clone();
    new["InstanceType"] = json!("m1.small");
    new["Tags"] = json!([{"Key": "a", "Value": "2"}]);
    let (mut ctx, _tx) = test_context(props(new));
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    i.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let writes: Vec<(String, String, Value)> = nova.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
    assert_eq!(
        writes,
        [
            ("DELETE".to_string(), format!("{SERVERS}/sid/metadata/old"), Value::Null),
            ("POST".to_string(), format!("{SERVERS}/sid/metadata"), json!({"metadata": {"a": "2"}})),
            ("POST".to_string(), format!("{SERVERS}/sid/action"), json!({"resize": {"flavorRef": "f-2"}})),
            ("POST".to_string(), format!("{SERVERS}/sid/action"), json!({"confirmResize": null})),
        ]
    );
}

/// Changed NetworkInterfaces: the ports no longer named are detached,
/// the new ones attached; those in both stay.
#[tokio::test]
async fn network_interfaces_update_detaches_and_attaches() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    nova.answer(&format!("DELETE {SERVERS}/sid/os-interface/p-1"), 202, Value::Null);
    nova.answer(&format!("POST {SERVERS}/sid/os-interface"), 200, json!({"interfaceAttachment": {"port_id": "p-3"}}));
    let i = instance();
    let old = props(json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "NetworkInterfaces": ["p-1", "p-2"]}));
    let new = props(json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "NetworkInterfaces": ["p-2", "p-3"]}));
    let (mut ctx, _tx) = test_context(new);
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    i.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let calls: Vec<(String, String, Value)> = nova.calls();
    assert_eq!(
        calls,
        [
            ("DELETE".to_string(), format!("{SERVERS}/sid/os-interface/p-1"), Value::Null),
            (
                "POST".to_string(),
                format!("{SERVERS}/sid/os-interface"),
                json!({"interfaceAttachment": {"port_id": "p-3"}})
            ),
        ]
    );
}

/// Check, suspend and resume name the instance as Heat's texts do.
#[tokio::test]
async fn check_and_suspend_speak_of_the_instance() {
    let (nova, session) = testing::nova("2.96").await;
    let (slot, _host) = testing::bound(Some(session));
    let i = Instance::new(slot);
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "BUILD"}}));
    let (mut ctx, _tx) = test_context(Properties::new());
    ctx.state.physical_id = Some("sid".into());
    let checked = Plugin::check(&i, &mut ctx).unwrap().await;
    assert_eq!(checked, Err(ResourceFailure::error("Error", "Instance is not ACTIVE (was: BUILD)")));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    assert_eq!(Plugin::check(&i, &mut ctx).unwrap().await, Ok(()));
    ctx.state.physical_id = Some("gone".into());
    assert_eq!(
        Plugin::suspend(&i, &mut ctx).await,
        Err(ResourceFailure::error("NotFound", "Failed to find instance gone"))
    );
}

/// A new SubnetId (no NetworkInterfaces): every interface detached (one
/// already gone is done) and waited for until Nova no longer lists it,
/// then the old port deleted (unbound by then), a port made on the new
/// subnet and attached.
#[tokio::test]
async fn a_subnet_update_moves_the_instance_to_a_new_port() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    let bound =
        json!({"interfaceAttachments": [{"port_id": "port-9", "net_id": "net-1", "mac_addr": "m", "fixed_ips": []}]});
    // Listed to be detached, still listed at the first wait, then gone.
    nova.answer_in_turn(
        &format!("GET {SERVERS}/sid/os-interface"),
        vec![(200, bound.clone()), (200, bound), (200, json!({"interfaceAttachments": []}))],
    );
    nova.answer("DELETE /network/v2.0/ports/port-9", 204, Value::Null);
    nova.answer("GET /network/v2.0/subnets/sub-2", 200, json!({"subnet": {"id": "sub-2", "network_id": "net-2"}}));
    nova.answer("POST /network/v2.0/ports", 201, json!({"port": {"id": "port-10"}}));
    nova.answer(
        &format!("POST {SERVERS}/sid/os-interface"),
        200,
        json!({"interfaceAttachment": {"port_id": "port-10"}}),
    );
    let i = instance();
    let old = props(json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "SubnetId": "sub-1"}));
    let new = props(json!({"ImageId": "cirros", "InstanceType": "m1.tiny", "SubnetId": "sub-2"}));
    let (mut ctx, _tx) = test_context(new);
    ctx.state.physical_id = Some("sid".into());
    ctx.state.data.insert(PORT_DATA.into(), "port-9".into());
    let compute = super::super::compute(&session).await.unwrap();
    i.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let writes: Vec<(String, String)> =
        nova.calls().into_iter().filter(|(m, _, _)| m != "GET").map(|(m, p, _)| (m, p)).collect();
    assert_eq!(
        writes,
        [
            ("DELETE".to_string(), format!("{SERVERS}/sid/os-interface/port-9")),
            ("DELETE".to_string(), "/network/v2.0/ports/port-9".to_string()),
            ("POST".to_string(), "/network/v2.0/ports".to_string()),
            ("POST".to_string(), format!("{SERVERS}/sid/os-interface")),
        ]
    );
    assert_eq!(ctx.state.data.get(PORT_DATA).map(String::as_str), Some("port-10"));
    let lists = nova.calls().iter().filter(|(m, p, _)| m == "GET" && p.ends_with("/sid/os-interface")).count();
    assert_eq!(lists, 3, "the detach is waited for until Nova no longer lists the port");
}
