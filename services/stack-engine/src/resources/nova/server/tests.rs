//! OS::Nova::Server against the loopback Nova (and Neutron, Glance) stand-in.

use serde_json::{json, Value};

use super::super::super::context::test_context;
use super::super::testing;
use super::*;

const SERVERS: &str = "/compute/v2.1/servers";

fn server() -> Server {
    Server::new(Arc::new(HostSlot::default()))
}

/// A server whose host knows the stack's session and signal URLs (kept
/// alive by the caller).
fn bound_server(session: &Arc<keelson_openstack::Session>) -> (Server, Arc<dyn super::super::super::PluginHost>) {
    let (slot, host) = testing::bound(Some(session.clone()));
    (Server::new(slot), host)
}

fn props(v: Value) -> Properties {
    Plugin::validate_properties(&server(), "vm", &v).unwrap()
}

fn refusal(v: Value) -> String {
    Plugin::validate_properties(&server(), "vm", &v).unwrap_err().to_string()
}

fn shown(status: &str) -> (u16, Value) {
    (200, json!({"server": {"id": "sid", "name": "vm", "status": status}}))
}

/// Glance knows `cirros`, Nova the flavor `m1.tiny` by name, Neutron the
/// network `private` and the port `p-1`.
fn known_names(nova: &testing::Nova) {
    nova.answer("GET /image/v2/images?name=cirros", 200, json!({"images": [{"id": "img-1"}]}));
    nova.answer("GET /compute/v2.1/flavors", 200, json!({"flavors": [{"id": "f-1", "name": "m1.tiny"}]}));
    nova.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "net-1"}]}));
    nova.answer("GET /network/v2.0/ports?name=p-1&fields=id", 200, json!({"ports": [{"id": "port-1"}]}));
}

#[tokio::test]
async fn boots_with_networks_and_names_then_waits_for_active() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![shown("BUILD"), shown("ACTIVE")]);
    nova.answer(&format!("PUT {SERVERS}/sid/tags"), 200, json!({"tags": ["a"]}));
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "key_name": "k", "availability_zone": "nova",
        "networks": [{"network": "private", "fixed_ip": "10.0.0.5", "tag": "t"}, {"port": "p-1"}],
        "metadata": {"role": "web", "n": 1}, "scheduler_hints": {"group": "g"}, "config_drive": true,
        "admin_pass": "pw", "user_data_format": "RAW", "user_data": "#!/bin/sh\necho hi\n", "tags": ["a"]})));
    let compute = super::super::compute(&session).await.unwrap();
    bound_server(&session).0.create_with(&session, &compute, &mut ctx).await.unwrap();
    let calls = nova.calls();
    let (_, _, body) = calls.iter().find(|(m, p, _)| m == "POST" && p == SERVERS).unwrap();
    let vm = &body["server"];
    assert!(vm["name"].as_str().unwrap().starts_with("st-r-"), "{vm}");
    assert_eq!(
        (&vm["imageRef"], &vm["flavorRef"], &vm["key_name"], &vm["availability_zone"], &vm["adminPass"]),
        (&json!("img-1"), &json!("f-1"), &json!("k"), &json!("nova"), &json!("pw"))
    );
    assert_eq!(vm["networks"], json!([{"uuid": "net-1", "fixed_ip": "10.0.0.5", "tag": "t"}, {"port": "port-1"}]));
    assert_eq!(vm["metadata"], json!({"role": "web", "n": "1"}));
    assert_eq!(vm["user_data"], json!("IyEvYmluL3NoCmVjaG8gaGkK"));
    assert_eq!(vm["config_drive"], json!(true));
    assert_eq!(vm.get("security_groups"), None);
    assert_eq!(body["os:scheduler_hints"], json!({"group": "g"}));
    assert_eq!(ctx.state.physical_id.as_deref(), Some("sid"));
    assert_eq!(calls.iter().filter(|(m, p, _)| m == "GET" && p == &format!("{SERVERS}/sid")).count(), 2);
    assert_eq!(calls.last().unwrap().2, json!({"tags": ["a"]}));
}

#[tokio::test]
async fn allocate_network_and_the_microversion() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    let compute = super::super::compute(&session).await.unwrap();
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "networks": [{"allocate_network": "none"}]})));
    bound_server(&session).0.create_with(&session, &compute, &mut ctx).await.unwrap();
    assert_eq!(nova.calls().iter().find(|(m, _, _)| m == "POST").unwrap().2["server"]["networks"], json!("none"));
    // Heat's novaclient refuses to boot without nics from 2.37.
    let (mut ctx, _tx) = test_context(props(json!({"image": "cirros", "flavor": "m1.tiny"})));
    assert_eq!(
        bound_server(&session).0.create_with(&session, &compute, &mut ctx).await,
        Err(ResourceFailure::error("ValueError", "nics are required after microversion 2.36"))
    );
    let (nova, session) = testing::nova_and_neutron("2.36").await;
    known_names(&nova);
    let compute = super::super::compute(&session).await.unwrap();
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "networks": [{"allocate_network": "auto"}], "tags": ["t"]})));
    assert_eq!(
        bound_server(&session).0.create_with(&session, &compute, &mut ctx).await,
        Err(ResourceFailure::error(
            "StackValidationFailed",
            "Cannot use \"allocate_network\" property - compute service does not support the required api microversion."
        ))
    );
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    let compute = super::super::compute(&session).await.unwrap();
    let (mut ctx, _tx) = test_context(props(json!({"image": "cirros", "flavor": "m1.tiny", "name": "n"})));
    bound_server(&session).0.create_with(&session, &compute, &mut ctx).await.unwrap();
    let body = nova.calls().into_iter().find(|(m, _, _)| m == "POST").unwrap().2;
    assert_eq!((body["server"].get("networks"), &body["server"]["name"]), (None, &json!("n")));
    // A floating IP is associated with the nic's port first.
    nova.answer("PUT /network/v2.0/floatingips/fip", 200, json!({"floatingip": {"id": "fip"}}));
    nova.seen.lock().unwrap().clear();
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "networks": [{"port": "p-1", "floating_ip": "fip"}]})));
    bound_server(&session).0.create_with(&session, &compute, &mut ctx).await.unwrap();
    let calls = nova.calls();
    let put = calls.iter().position(|(m, _, _)| m == "PUT").unwrap();
    assert_eq!(calls[put].2, json!({"floatingip": {"port_id": "port-1"}}));
    assert!(put < calls.iter().position(|(m, _, _)| m == "POST").unwrap());
}

#[tokio::test]
async fn error_state_fails_with_novas_fault() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer(
        &format!("GET {SERVERS}/sid"),
        200,
        json!({"server": {"id": "sid", "status": "ERROR",
            "fault": {"code": 500, "message": "No valid host was found. There are not enough hosts available."}}}),
    );
    let compute = super::super::compute(&session).await.unwrap();
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "networks": [{"network": "private"}]})));
    assert_eq!(
        bound_server(&session).0.create_with(&session, &compute, &mut ctx).await,
        Err(ResourceFailure::error(
            "ResourceInError",
            "Went to status ERROR due to \"Message: No valid host was found. There are not enough hosts available., Code: 500\""
        ))
    );
    // The server is kept as the resource's, to delete.
    assert_eq!(ctx.state.physical_id.as_deref(), Some("sid"));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "MIGRATING"}}));
    assert_eq!(
        Server::wait_active(&compute, &ctx, "sid", "Server").await,
        Err(ResourceFailure::error(
            "ResourceUnknownStatus",
            "Server is not active - Unknown status MIGRATING due to \"Unknown\""
        ))
    );
    // A bad flavor fails with novaclient's text.
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m9", "networks": [{"network": "private"}]})));
    assert_eq!(
        bound_server(&session).0.create_with(&session, &compute, &mut ctx).await,
        Err(ResourceFailure::error("NotFound", "No Flavor matching {'name': 'm9'}. (HTTP 404)"))
    );
}

#[tokio::test]
async fn a_flavor_update_resizes_and_confirms() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer("GET /compute/v2.1/flavors", 200, json!({"flavors": [{"id": "f-2", "name": "m1.small"}]}));
    nova.answer_in_turn(
        &format!("GET {SERVERS}/sid"),
        vec![shown("ACTIVE"), shown("VERIFY_RESIZE"), shown("VERIFY_RESIZE"), shown("ACTIVE")],
    );
    nova.answer(&format!("POST {SERVERS}/sid/action"), 202, Value::Null);
    let s = server();
    let base = json!({"image": "img-1", "flavor": "f-1", "networks": [{"network": "net-1"}]});
    let old = props(base.clone());
    let mut bigger = base.clone();
    bigger["flavor"] = json!("m1.small");
    let new = props(bigger.clone());
    assert_eq!(Plugin::update_decision(&s, &old, &new), UpdateDecision::InPlace);
    let (mut ctx, _tx) = test_context(new);
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    s.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let actions: Vec<Value> =
        nova.calls().into_iter().filter(|(m, p, _)| m == "POST" && p.ends_with("/action")).map(|c| c.2).collect();
    assert_eq!(actions, [json!({"resize": {"flavorRef": "f-2"}}), json!({"confirmResize": null})]);
    // REPLACE as the policy replaces instead.
    bigger["flavor_update_policy"] = json!("REPLACE");
    assert_eq!(Plugin::update_decision(&s, &old, &props(bigger)), UpdateDecision::Replace);
    // A resize Nova fails.
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![shown("ACTIVE"), shown("ERROR")]);
    assert_eq!(
        Server::resize(&compute, &ctx, "sid", "f-2", "f-2").await,
        Err(ResourceFailure::error("Error", "Resizing to 'f-2' failed, status 'ERROR'"))
    );
}

#[tokio::test]
async fn an_image_update_rebuilds() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    nova.answer("GET /image/v2/images?name=fedora", 200, json!({"images": [{"id": "img-2"}]}));
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![shown("ACTIVE"), shown("REBUILD"), shown("ACTIVE")]);
    nova.answer(&format!("POST {SERVERS}/sid/action"), 202, Value::Null);
    let s = server();
    let old = props(json!({"image": "img-1", "flavor": "f-1", "metadata": {"a": 1}}));
    let new = props(json!({"image": "fedora", "flavor": "f-1", "metadata": {"a": 1},
        "image_update_policy": "REBUILD_PRESERVE_EPHEMERAL"}));
    assert_eq!(Plugin::update_decision(&s, &old, &new), UpdateDecision::InPlace);
    let (mut ctx, _tx) = test_context(new);
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    s.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let actions: Vec<Value> =
        nova.calls().into_iter().filter(|(m, p, _)| m == "POST" && p.ends_with("/action")).map(|c| c.2).collect();
    assert_eq!(
        actions,
        [json!({"rebuild": {"imageRef": "img-2", "preserve_ephemeral": true, "metadata": {"a": "1"}}})]
    );
    let replace = props(json!({"image": "fedora", "flavor": "f-1", "image_update_policy": "REPLACE"}));
    assert_eq!(Plugin::update_decision(&s, &old, &replace), UpdateDecision::Replace);
    // user_data replaces by default; IGNORE keeps the server.
    let ud = props(json!({"image": "img-1", "flavor": "f-1", "metadata": {"a": 1}, "user_data": "x"}));
    assert_eq!(Plugin::update_decision(&s, &old, &ud), UpdateDecision::Replace);
    let ignored = props(json!({"image": "img-1", "flavor": "f-1", "metadata": {"a": 1}, "user_data": "x",
        "user_data_update_policy": "IGNORE"}));
    assert_eq!(Plugin::update_decision(&s, &old, &ignored), UpdateDecision::InPlace);
    // A key name is not update_allowed: replaced.
    let keyed = props(json!({"image": "img-1", "flavor": "f-1", "metadata": {"a": 1}, "key_name": "k"}));
    assert_eq!(Plugin::update_decision(&s, &old, &keyed), UpdateDecision::Replace);
}

#[tokio::test]
async fn name_and_metadata_update_in_place() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    nova.answer(
        &format!("GET {SERVERS}/sid"),
        200,
        json!({"server": {"id": "sid", "status": "ACTIVE", "metadata": {"old": "x", "kept": "1"}}}),
    );
    nova.answer(&format!("DELETE {SERVERS}/sid/metadata/old"), 204, Value::Null);
    nova.answer(&format!("POST {SERVERS}/sid/metadata"), 200, json!({"metadata": {}}));
    nova.answer(&format!("PUT {SERVERS}/sid"), 200, json!({"server": {"id": "sid"}}));
    let s = server();
    let old = props(json!({"image": "i", "flavor": "f", "name": "a", "metadata": {"old": "x", "kept": "1"}}));
    let new = props(json!({"image": "i", "flavor": "f", "name": "b", "metadata": {"kept": 1, "new": [1]}}));
    let (mut ctx, _tx) = test_context(new);
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    s.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let writes: Vec<(String, String, Value)> = nova.calls().into_iter().filter(|(m, _, _)| m != "GET").collect();
    assert_eq!(
        writes,
        [
            ("DELETE".into(), format!("{SERVERS}/sid/metadata/old"), Value::Null),
            ("POST".into(), format!("{SERVERS}/sid/metadata"), json!({"metadata": {"kept": "1", "new": "[1]"}})),
            ("PUT".into(), format!("{SERVERS}/sid"), json!({"server": {"name": "b"}})),
        ]
    );
}

#[tokio::test]
async fn delete_waits_for_the_404() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    let compute = super::super::compute(&session).await.unwrap();
    let (ctx, _tx) = test_context(Properties::new());
    // Already gone: done.
    assert_eq!(Server::delete_server(&compute, &ctx, "gone").await, Ok(()));
    nova.answer(&format!("DELETE {SERVERS}/sid"), 204, Value::Null);
    let deleting = json!({"server": {"id": "sid", "status": "ACTIVE", "OS-EXT-STS:task_state": "deleting"}});
    let gone = json!({"itemNotFound": {"code": 404, "message": "Instance sid could not be found."}});
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![(200, deleting), (404, gone)]);
    assert_eq!(Server::delete_server(&compute, &ctx, "sid").await, Ok(()));
    // A delete Nova fails.
    nova.answer(
        &format!("GET {SERVERS}/sid"),
        200,
        json!({"server": {"id": "sid", "name": "vm", "status": "ERROR", "fault": {"code": 500, "message": "boom"}}}),
    );
    nova.sequences.lock().unwrap().clear();
    assert_eq!(
        Server::delete_server(&compute, &ctx, "sid").await,
        Err(ResourceFailure::error(
            "ResourceInError",
            "Went to status ERROR due to \"Server vm delete failed: (500) boom\""
        ))
    );
    nova.answer(&format!("DELETE {SERVERS}/f"), 403, json!({"forbidden": {"code": 403, "message": "Policy says no."}}));
    assert_eq!(
        Server::delete_server(&compute, &ctx, "f").await,
        Err(ResourceFailure::error("Forbidden", "Policy says no. (HTTP 403)"))
    );
}

#[tokio::test]
async fn attributes_read_nova_and_neutron() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    nova.answer(
        &format!("GET {SERVERS}/sid"),
        200,
        json!({"server": {"id": "sid", "status": "ACTIVE", "accessIPv4": "", "accessIPv6": "",
            "OS-EXT-SRV-ATTR:instance_name": "instance-00000001", "tags": ["a"],
            "addresses": {"private": [{"addr": "10.0.0.5", "version": 4, "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"}]}}}),
    );
    nova.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "net-1"}]}));
    nova.answer(
        "GET /network/v2.0/ports?device_id=sid",
        200,
        json!({"ports": [{"id": "port-1", "network_id": "net-1", "mac_address": "fa:16:3e:00:00:01",
            "fixed_ips": [{"ip_address": "10.0.0.5", "subnet_id": "sub-1"}]}]}),
    );
    nova.answer("GET /network/v2.0/networks?id=net-1", 200, json!({"networks": [{"id": "net-1", "name": "private"}]}));
    nova.answer(
        "GET /network/v2.0/subnets?id=sub-1",
        200,
        json!({"subnets": [{"id": "sub-1", "cidr": "10.0.0.0/24"}]}),
    );
    nova.answer("GET /network/v2.0/floatingips?fixed_ip_address=10.0.0.5", 200, json!({"floatingips": []}));
    let (slot, _host) = testing::bound(Some(session));
    let s = Server::new(slot);
    let mut state = ResourceState { physical_id: Some("sid".into()), ..Default::default() };
    state.data.insert(STACK_DATA.into(), "sid".into());
    state.data.insert(super::super::super::PHYSICAL_NAME_DATA.into(), "st-vm-abcdefabcdef".into());
    state.metadata = json!({"os-collect-config": {"collectors": ["ec2"]}});
    assert_eq!(s.attribute(&state, "name").await.unwrap(), json!("st-vm-abcdefabcdef"));
    assert_eq!(s.attribute(&state, "instance_name").await.unwrap(), json!("instance-00000001"));
    assert_eq!(s.attribute(&state, "accessIPv4").await.unwrap(), json!(""));
    assert_eq!(s.attribute(&state, "first_address").await.unwrap(), json!("10.0.0.5"));
    assert_eq!(s.attribute(&state, "tags").await.unwrap(), json!(["a"]));
    assert_eq!(s.attribute(&state, "networks").await.unwrap(), json!({"private": ["10.0.0.5"], "net-1": ["10.0.0.5"]}));
    let addresses = s.attribute(&state, "addresses").await.unwrap();
    let first = &addresses["net-1"][0];
    assert_eq!(
        (&first["addr"], &first["port"], &first["version"], &first["OS-EXT-IPS:type"]),
        (&json!("10.0.0.5"), &json!("port-1"), &json!(4), &json!("fixed"))
    );
    assert_eq!(first["subnets"], json!([{"id": "sub-1", "cidr": "10.0.0.0/24"}]));
    assert_eq!(addresses["private"], addresses["net-1"]);
    assert_eq!(s.attribute(&state, "show").await.unwrap()["status"], json!("ACTIVE"));
    assert_eq!(s.attribute(&state, "os_collect_config").await.unwrap(), json!({"collectors": ["ec2"]}));
    assert_eq!(s.attribute(&state, "console_urls").await.unwrap(), Value::Null);
    // A server Nova no longer has: ''.
    state.physical_id = Some("gone".into());
    assert_eq!(s.attribute(&state, "instance_name").await.unwrap(), json!(""));
}

#[test]
fn validation_follows_heats() {
    assert!(refusal(json!({"flavor": "f"})).contains("Neither image nor bootable volume is specified for instance vm"));
    assert!(refusal(json!({"image": "i", "flavor": "f", "networks": [{"fixed_ip": "10.0.0.1"}]}))
        .contains("should be set for the specified network of server \"vm\"."),);
    assert!(refusal(json!({"image": "i", "flavor": "f", "networks": [{"allocate_network": "auto", "network": "n"}]}))
        .contains("Can not specify \"allocate_network\" with other keys of networks at the same time."));
    assert!(refusal(json!({"image": "i", "flavor": "f", "networks": [{"port": "p", "fixed_ip": "10.0.0.1"}]}))
        .contains("Cannot define the following properties at the same time: networks/fixed_ip, networks/port"));
    assert!(refusal(json!({"image": "i", "flavor": "f", "security_groups": ["default"], "networks": [{"port": "p"}]}))
        .contains("security_groups, networks/port"));
    // Booting from a volume needs no image; two boot sources are refused.
    props(json!({"flavor": "f", "block_device_mapping_v2": [{"volume_id": "v", "boot_index": 0}]}));
    assert!(refusal(json!({"image": "i", "flavor": "f", "block_device_mapping_v2": [{"volume_id": "v"}]}))
        .contains("Multiple bootable sources for instance vm."));
    assert!(refusal(json!({"flavor": "f", "block_device_mapping_v2": [{"volume_id": "v", "swap_size": 1}]}))
        .contains("volume_id, snapshot_id, image, swap_size, ephemeral_size, ephemeral_format"));
    assert!(refusal(json!({"flavor": "f", "block_device_mapping": [{"device_name": "vda"}]}))
        .contains("Either volume_id or snapshot_id must be specified for device mapping vda"));
    assert!(refusal(json!({"image": "i", "flavor": "f",
        "networks": [{"allocate_network": "auto"}, {"network": "n"}]}))
    .contains("can not be specified if multiple network interfaces set for server."));
}

#[test]
fn block_device_mapping_v2_as_heat_builds_it() {
    let mappings = vec![
        json!({"volume_id": "v", "device_name": "vda", "boot_index": 0}),
        json!({"image": "cirros", "volume_size": 2, "delete_on_termination": true}),
        json!({"swap_size": 512}),
        json!({"ephemeral_size": 1, "ephemeral_format": "ext4"}),
    ];
    let images = vec![None, Some("img-1".to_string()), None, None];
    assert_eq!(
        block_devices_v2(&mappings, &images).unwrap(),
        [
            json!({"uuid": "v", "source_type": "volume", "destination_type": "volume", "boot_index": 0,
                "delete_on_termination": false, "device_name": "vda"}),
            json!({"uuid": "img-1", "source_type": "image", "destination_type": "volume", "boot_index": 0,
                "delete_on_termination": true, "volume_size": 2}),
            json!({"source_type": "blank", "destination_type": "local", "boot_index": -1,
                "delete_on_termination": true, "guest_format": "swap", "volume_size": 512}),
            json!({"source_type": "blank", "destination_type": "local", "boot_index": -1,
                "delete_on_termination": true, "volume_size": 1, "guest_format": "ext4"}),
        ]
    );
    assert_eq!(block_devices_v2(&[], &[]), None);
    // The legacy mapping, as novaclient parses Heat's strings.
    let legacy = vec![
        json!({"device_name": "vda", "volume_id": "v", "volume_size": 10, "delete_on_termination": true}),
        json!({"device_name": "vdb", "snapshot_id": "s"}),
    ];
    assert_eq!(
        block_devices_v1(&legacy).unwrap(),
        [
            json!({"device_name": "vda", "volume_id": "v", "volume_size": "10", "delete_on_termination": "True"}),
            json!({"device_name": "vdb", "snapshot_id": "s"}),
        ]
    );
}

#[test]
fn user_data_formats() {
    let raw = props(json!({"image": "i", "flavor": "f", "user_data_format": "RAW", "user_data": "x"}));
    assert_eq!(Server::user_data(&raw, "x", &Value::Null, None).as_deref(), Some("x"));
    let empty = props(json!({"image": "i", "flavor": "f", "user_data_format": "RAW"}));
    assert_eq!(Server::user_data(&empty, "", &Value::Null, None), None);
    let cfn = props(json!({"image": "i", "flavor": "f", "user_data": "echo hi"}));
    let message =
        Server::user_data(&cfn, "echo hi", &json!({"AWS::CloudFormation::Init": {}}), Some("http://Cfn:8000/v1"))
            .unwrap();
    assert!(message.contains("http://Cfn:8000/v1/") && message.contains("cfn_region_endpoint = cfn"), "{message}");
    assert!(message.starts_with("Content-Type: multipart/mixed"), "{message}");
    assert!(message.contains("filename=\"cfn-userdata\""), "{message}");
    assert!(message.contains("filename=\"cfn-init-data\""), "{message}");
}

#[test]
fn long_names_are_reduced_to_53() {
    let name = reduce_physical_name(&"x".repeat(80), NAME_LIMIT);
    assert_eq!(name.len(), 53);
    assert!(name.starts_with("xx-"));
}

/// SOFTWARE_CONFIG: the transport's stack user and collector settings
/// (DeployedServer's code) go in the metadata, which goes in the user
/// data; delete removes the stack user.
#[tokio::test]
async fn software_config_publishes_the_collector_settings() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    let (slot, _host) = testing::bound(Some(session));
    let s = Server::new(slot);
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "networks": [{"network": "private"}],
        "user_data_format": "SOFTWARE_CONFIG", "user_data": "#!/bin/sh"})));
    Plugin::create(&s, &mut ctx).await.unwrap();
    let occ = &ctx.state.metadata["os-collect-config"];
    assert_eq!(occ["collectors"], json!(["ec2", "cfn", "local"]));
    assert_eq!(
        occ["cfn"],
        json!({"metadata_url": "http://cfn:8000/v1/", "access_key_id": "AK", "secret_access_key": "SK",
            "stack_name": "st", "path": "r.Metadata"})
    );
    assert_eq!(ctx.state.metadata["deployments"], json!([]));
    assert_eq!(ctx.state.data.get("credential_id").map(String::as_str), Some("c1"));
    let body = nova.calls().into_iter().find(|(m, _, _)| m == "POST").unwrap().2;
    use base64::Engine as _;
    let sent = base64::engine::general_purpose::STANDARD.decode(body["server"]["user_data"].as_str().unwrap()).unwrap();
    let sent = String::from_utf8(sent).unwrap();
    assert!(
        sent.contains("#!/bin/sh") && sent.contains("cfn-init-data") && sent.contains("secret_access_key"),
        "{sent}"
    );
    // POLL_SERVER_HEAT on update: the heat collector, same stack user.
    let old = ctx.properties.clone();
    let mut new = old.clone();
    new.insert("software_config_transport".into(), json!("POLL_SERVER_HEAT"));
    assert_eq!(Plugin::update_decision(&s, &old, &new), UpdateDecision::InPlace);
    ctx.properties = new;
    Plugin::update(&s, &mut ctx, &old).await.unwrap();
    let occ = &ctx.state.metadata["os-collect-config"];
    assert_eq!(occ["collectors"], json!(["ec2", "heat", "local"]));
    assert_eq!((&occ["heat"]["user_id"], &occ["heat"]["auth_url"]), (&json!("su-1"), &json!("http://ks/v3")));
    ctx.state.properties = ctx.properties.clone();
    nova.answer(&format!("DELETE {SERVERS}/sid"), 204, Value::Null);
    nova.answer(&format!("GET {SERVERS}/sid"), 404, json!({"itemNotFound": {"code": 404, "message": "gone"}}));
    Plugin::delete(&s, &mut ctx).await.unwrap();
}

/// A `subnet` entry: the server makes its port (on the subnet's network,
/// with the server's security groups by id), boots on it, and deletes it
/// once Nova no longer has the server.
#[tokio::test]
async fn a_subnet_entry_makes_an_internal_port() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    nova.answer("GET /network/v2.0/subnets?name=sub&fields=id", 200, json!({"subnets": [{"id": "sub-1"}]}));
    nova.answer("GET /network/v2.0/subnets/sub-1", 200, json!({"subnet": {"id": "sub-1", "network_id": "net-1"}}));
    nova.answer(
        "GET /network/v2.0/security-groups?project_id=p1",
        200,
        json!({"security_groups": [{"id": "sg-1", "name": "web"}, {"id": "sg-2", "name": "db"}]}),
    );
    nova.answer("POST /network/v2.0/ports", 201, json!({"port": {"id": "iport-1"}}));
    nova.answer(&format!("POST {SERVERS}"), 202, json!({"server": {"id": "sid"}}));
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    let (slot, _host) = testing::bound(Some(session));
    let s = Server::new(slot);
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "security_groups": ["web"],
        "networks": [{"subnet": "sub", "fixed_ip": "10.0.0.9",
            "port_extra_properties": {"value_specs": {"description": "d"}, "port_security_enabled": true}}]})));
    Plugin::create(&s, &mut ctx).await.unwrap();
    let calls = nova.calls();
    let port = &calls.iter().find(|(m, p, _)| m == "POST" && p == "/network/v2.0/ports").unwrap().2;
    assert_eq!(
        port,
        &json!({"port": {"network_id": "net-1", "fixed_ips": [{"ip_address": "10.0.0.9", "subnet_id": "sub-1"}],
            "security_groups": ["sg-1"], "description": "d", "port_security_enabled": true, "name": "r-port-0",
            // The nested defaults, passed on as Heat passes them.
            "admin_state_up": true, "binding:vnic_type": "normal", "no_fixed_ips": false}})
    );
    let boot = &calls.iter().find(|(m, p, _)| m == "POST" && p == SERVERS).unwrap().2;
    assert_eq!(boot["server"]["networks"], json!([{"uuid": "net-1", "port": "iport-1"}]));
    assert_eq!(boot["server"]["security_groups"], json!([{"name": "web"}]));
    assert_eq!(ports::internal_ports(&ctx.state), ["iport-1"]);
    nova.answer(&format!("DELETE {SERVERS}/sid"), 204, Value::Null);
    nova.answer(&format!("GET {SERVERS}/sid"), 404, json!({"itemNotFound": {"code": 404, "message": "gone"}}));
    nova.answer("DELETE /network/v2.0/ports/iport-1", 204, Value::Null);
    Plugin::delete(&s, &mut ctx).await.unwrap();
    assert_eq!(nova.calls().last().unwrap().1, "/network/v2.0/ports/iport-1");
    assert!(ports::internal_ports(&ctx.state).is_empty());
    // A subnet of another network is refused as Heat words it.
    let (mut ctx, _tx) = test_context(props(json!({
        "image": "cirros", "flavor": "m1.tiny", "networks": [{"subnet": "sub", "network": "private"}]})));
    nova.answer("GET /network/v2.0/subnets/sub-1", 200, json!({"subnet": {"id": "sub-1", "network_id": "other"}}));
    assert_eq!(
        Plugin::create(&s, &mut ctx).await,
        Err(ResourceFailure::error(
            "StackValidationFailed",
            "Specified subnet sub-1 does not belongs to network net-1."
        ))
    );
}

fn iface(port: &str, ip: &str) -> Value {
    json!({"port_id": port, "net_id": "net-1", "mac_addr": "fa:16:3e:00:00:01",
        "fixed_ips": [{"ip_address": ip, "subnet_id": "sub-1"}]})
}

/// A networks update keeps the entries that did not change, detaches the
/// ports of the ones removed and attaches the ones added, each waited for.
#[tokio::test]
async fn a_networks_update_attaches_and_detaches() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    known_names(&nova);
    let ifaces = format!("GET {SERVERS}/sid/os-interface");
    let one = json!({"interfaceAttachments": [iface("port-a", "10.0.0.5")]});
    let two = json!({"interfaceAttachments": [iface("port-a", "10.0.0.5"), iface("port-1", "10.0.0.6")]});
    nova.answer_in_turn(&ifaces, vec![(200, one.clone()), (200, two.clone())]);
    nova.answer(
        &format!("POST {SERVERS}/sid/os-interface"),
        200,
        json!({"interfaceAttachment": {"port_id": "port-1"}}),
    );
    let s = server();
    let old = props(json!({"image": "i", "flavor": "f", "networks": [{"network": "private"}]}));
    let new = props(json!({"image": "i", "flavor": "f", "networks": [{"network": "private"}, {"port": "p-1"}]}));
    assert_eq!(Plugin::update_decision(&s, &old, &new), UpdateDecision::InPlace);
    let (mut ctx, _tx) = test_context(new.clone());
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    s.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let writes: Vec<(String, String, Value)> =
        nova.calls().into_iter().filter(|(m, p, _)| m != "GET" && p.starts_with(SERVERS)).collect();
    assert_eq!(
        writes,
        [("POST".into(), format!("{SERVERS}/sid/os-interface"), json!({"interfaceAttachment": {"port_id": "port-1"}}))]
    );
    // And back: port-1 is detached, waited for until Nova no longer shows it.
    nova.seen.lock().unwrap().clear();
    nova.answer_in_turn(&ifaces, vec![(200, two), (200, one)]);
    nova.answer(&format!("DELETE {SERVERS}/sid/os-interface/port-1"), 202, Value::Null);
    ctx.properties = old.clone();
    s.update_with(&session, &compute, &mut ctx, &new).await.unwrap();
    let writes: Vec<(String, String, Value)> =
        nova.calls().into_iter().filter(|(m, p, _)| m != "GET" && p.starts_with(SERVERS)).collect();
    assert_eq!(writes, [("DELETE".into(), format!("{SERVERS}/sid/os-interface/port-1"), Value::Null)]);
}

/// `allocate_network: auto` on update attaches the one network the
/// project may use.
#[tokio::test]
async fn allocate_network_auto_on_update() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    let ifaces = format!("GET {SERVERS}/sid/os-interface");
    let attached = json!({"interfaceAttachments": [iface("port-x", "172.24.4.9")]});
    nova.answer_in_turn(&ifaces, vec![(200, json!({"interfaceAttachments": []})), (200, attached)]);
    nova.answer(
        "GET /network/v2.0/networks?tenant_id=p1&shared=False&admin_state_up=True",
        200,
        json!({"networks": []}),
    );
    nova.answer("GET /network/v2.0/networks?shared=True", 200, json!({"networks": [{"id": "public"}]}));
    nova.answer(
        &format!("POST {SERVERS}/sid/os-interface"),
        200,
        json!({"interfaceAttachment": {"port_id": "port-x"}}),
    );
    let s = server();
    let old = props(json!({"image": "i", "flavor": "f", "networks": [{"allocate_network": "none"}]}));
    let new = props(json!({"image": "i", "flavor": "f", "networks": [{"allocate_network": "auto"}]}));
    let (mut ctx, _tx) = test_context(new);
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    s.update_with(&session, &compute, &mut ctx, &old).await.unwrap();
    let attach = nova.calls().into_iter().find(|(m, _, _)| m == "POST").unwrap();
    assert_eq!(attach.2, json!({"interfaceAttachment": {"net_id": "public"}}));
}

#[tokio::test]
async fn check_suspend_and_resume() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    let (s, _host) = bound_server(&session);
    let (mut ctx, _tx) = test_context(props(json!({"image": "i", "flavor": "f"})));
    ctx.state.physical_id = Some("sid".into());
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![shown("ACTIVE"), shown("ACTIVE"), shown("SUSPENDED")]);
    nova.answer(&format!("POST {SERVERS}/sid/action"), 202, Value::Null);
    Plugin::check(&s, &mut ctx).unwrap().await.unwrap();
    Plugin::suspend(&s, &mut ctx).await.unwrap();
    assert_eq!(
        Plugin::check(&s, &mut ctx).unwrap().await,
        Err(ResourceFailure::error("Error", "'status': expected 'ACTIVE', got 'SUSPENDED'"))
    );
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![shown("SUSPENDED"), shown("ACTIVE")]);
    Plugin::resume(&s, &mut ctx).await.unwrap();
    let actions: Vec<Value> =
        nova.calls().into_iter().filter(|(m, p, _)| m == "POST" && p.ends_with("/action")).map(|c| c.2).collect();
    assert_eq!(actions, [json!({"suspend": null}), json!({"resume": null})]);
    nova.answer_in_turn(
        &format!("GET {SERVERS}/sid"),
        vec![(404, json!({"itemNotFound": {"code": 404, "message": "x"}}))],
    );
    assert_eq!(
        Plugin::suspend(&s, &mut ctx).await,
        Err(ResourceFailure::error("NotFound", "Failed to find server sid"))
    );
}

/// Heat's `handle_snapshot`: `createImage`, the image's id kept, waited
/// for until Glance has it active and Nova has finished uploading;
/// `handle_restore` gives the definition that image, and
/// `handle_delete_snapshot` deletes it.
#[tokio::test]
async fn a_snapshot_images_the_server_and_a_restore_rebuilds_from_it() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    let (s, _host) = bound_server(&session);
    let (mut ctx, _tx) = test_context(props(json!({"image": "i", "flavor": "f"})));
    ctx.state.physical_id = Some("sid".into());
    nova.answer(&format!("POST {SERVERS}/sid/action"), 202, json!({"image_id": "snap-img"}));
    nova.answer_in_turn(
        "GET /image/v2/images/snap-img",
        vec![
            (200, json!({"id": "snap-img", "status": "queued"})),
            (200, json!({"id": "snap-img", "status": "active"})),
        ],
    );
    let uploading = json!({"server": {"id": "sid", "status": "ACTIVE", "OS-EXT-STS:task_state": "image_uploading"}});
    nova.answer_in_turn(&format!("GET {SERVERS}/sid"), vec![(200, uploading), shown("ACTIVE")]);
    Plugin::snapshot(&s, &mut ctx).await.unwrap();
    let action = nova.calls().into_iter().find(|(m, p, _)| m == "POST" && p.ends_with("/action")).unwrap();
    let name = action.2["createImage"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("st-r-"), "{name}");
    assert_eq!(ctx.state.data["snapshot_image_id"], "snap-img");
    let polls = nova.calls().into_iter().filter(|(m, p, _)| m == "GET" && p == &format!("{SERVERS}/sid")).count();
    assert_eq!(polls, 2);

    let data = Map::from_iter([("snapshot_image_id".to_string(), json!("snap-img"))]);
    assert_eq!(Plugin::restore_properties(&s, &data), Map::from_iter([("image".to_string(), json!("snap-img"))]));
    assert!(Plugin::restore_properties(&s, &Map::new()).is_empty());

    nova.answer_in_turn("GET /image/v2/images/snap-img", vec![(200, json!({"id": "snap-img", "status": "error"}))]);
    assert_eq!(Plugin::snapshot(&s, &mut ctx).await, Err(ResourceFailure::error("Error", "error")));

    // handle_delete_snapshot: the image goes; one already gone is fine.
    nova.answer("DELETE /image/v2/images/snap-img", 204, Value::Null);
    Plugin::delete_snapshot(&s, &mut ctx).await.unwrap();
    assert!(nova.calls().iter().any(|(m, p, _)| m == "DELETE" && p == "/image/v2/images/snap-img"));
    nova.answer("DELETE /image/v2/images/snap-img", 404, json!({"message": "gone"}));
    Plugin::delete_snapshot(&s, &mut ctx).await.unwrap();
}

/// Heat's `prepare_for_replace`: the old server gives up every port (its
/// replacement may be given the same one), each detach waited for and the
/// ports kept; a rollback attaches them to it again.
#[tokio::test]
async fn a_replaced_server_gives_up_its_ports_and_a_rollback_gives_them_back() {
    let (nova, session) = testing::nova_and_neutron("2.96").await;
    nova.answer(&format!("GET {SERVERS}/sid"), 200, json!({"server": {"id": "sid", "status": "ACTIVE"}}));
    let ifaces = format!("GET {SERVERS}/sid/os-interface");
    let both = json!({"interfaceAttachments": [iface("port-a", "10.0.0.5"), iface("port-1", "10.0.0.6")]});
    let one = json!({"interfaceAttachments": [iface("port-1", "10.0.0.6")]});
    let none = json!({"interfaceAttachments": []});
    nova.answer_in_turn(&ifaces, vec![(200, both.clone()), (200, one), (200, none.clone())]);
    for port in ["port-a", "port-1"] {
        nova.answer(&format!("DELETE {SERVERS}/sid/os-interface/{port}"), 202, Value::Null);
    }
    let (mut ctx, _tx) = test_context(props(json!({"image": "i", "flavor": "f", "networks": [{"port": "port-a"}]})));
    ctx.state.physical_id = Some("sid".into());
    let compute = super::super::compute(&session).await.unwrap();
    let neutron = keelson_openstack::network::Network::connect(&session).await.unwrap();
    ports::detach_for_replace(&compute, &neutron, &mut ctx).await.unwrap();
    let writes: Vec<String> =
        nova.calls().into_iter().filter(|(m, _, _)| m != "GET").map(|(m, p, _)| format!("{m} {p}")).collect();
    assert_eq!(
        writes,
        [format!("DELETE {SERVERS}/sid/os-interface/port-a"), format!("DELETE {SERVERS}/sid/os-interface/port-1")]
    );
    assert_eq!(ctx.state.data[ports::DETACHED_PORTS], json!([{"id": "port-a"}, {"id": "port-1"}]).to_string());

    // The rollback (the replacement already gone): attached again, waited for.
    nova.seen.lock().unwrap().clear();
    let first = json!({"interfaceAttachments": [iface("port-a", "10.0.0.5")]});
    nova.answer_in_turn(&ifaces, vec![(200, first), (200, both)]);
    nova.answer(&format!("POST {SERVERS}/sid/os-interface"), 200, json!({"interfaceAttachment": {}}));
    ports::reattach_after_rollback(&compute, &mut ctx, None).await.unwrap();
    let attached: Vec<Value> =
        nova.calls().into_iter().filter(|(m, _, _)| m == "POST").map(|(_, _, body)| body).collect();
    assert_eq!(
        attached,
        [json!({"interfaceAttachment": {"port_id": "port-a"}}), json!({"interfaceAttachment": {"port_id": "port-1"}})]
    );
    assert!(!ctx.state.data.contains_key(ports::DETACHED_PORTS));

    // A replacement still building is waited for; one being deleted holds
    // the port a moment (409), and the attach is asked again.
    nova.seen.lock().unwrap().clear();
    ctx.state.data.insert(ports::DETACHED_PORTS.into(), json!([{"id": "port-a"}]).to_string());
    let building = json!({"server": {"id": "new", "status": "BUILD"}});
    nova.answer_in_turn(&format!("GET {SERVERS}/new"), vec![(200, building), (404, json!({}))]);
    nova.answer_in_turn(
        &format!("POST {SERVERS}/sid/os-interface"),
        vec![(409, json!({"conflictingRequest": {"message": "Port port-a is still in use."}})), (200, json!({}))],
    );
    nova.answer_in_turn(&ifaces, vec![(200, json!({"interfaceAttachments": [iface("port-a", "10.0.0.5")]}))]);
    ports::reattach_after_rollback(&compute, &mut ctx, Some("new")).await.unwrap();
    let calls: Vec<String> = nova
        .calls()
        .into_iter()
        .filter(|(_, p, _)| p.starts_with(SERVERS))
        .map(|(m, p, _)| format!("{m} {p}"))
        .collect();
    let attaches = calls.iter().filter(|c| c.starts_with("POST")).count();
    assert_eq!(attaches, 2, "{calls:?}");
    assert!(!calls.iter().any(|c| c.starts_with("DELETE")), "{calls:?}");
}
